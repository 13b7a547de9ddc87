// SPDX-License-Identifier: Apache-2.0 OR MIT
//
// Packet and map value access: big-endian reads and writes with one load or
// store, MAC copy and compare. No maps.

#ifndef TERN_LANE_LIB_BYTES_H
#define TERN_LANE_LIB_BYTES_H

#include <linux/types.h>
#include <bpf/bpf_endian.h>

// Big-endian reads with one load (and a byte swap) instead of one load
// per byte: packet and map value pointers may be unaligned here, which the
// verifier accepts where unaligned access is efficient (x86, arm64; the
// lane's targets) and the JIT emits as plain loads.
static __always_inline __u16 rd16(const __u8 *p)
{
	return bpf_ntohs(*(const __u16 *)p);
}

static __always_inline __u32 rd32(const __u8 *p)
{
	return bpf_ntohl(*(const __u32 *)p);
}

static __always_inline __u64 rd64(const __u8 *p)
{
	return __builtin_bswap64(*(const __u64 *)p);
}

// Copies a MAC address with two loads and two stores (unaligned, as
// rd16/rd32), instead of six of each.
static __always_inline void cp6(__u8 *d, const __u8 *p)
{
	*(__u32 *)d = *(const __u32 *)p;
	*(__u16 *)(d + 4) = *(const __u16 *)(p + 4);
}

// Non-zero when the MAC addresses at `a` and `b` differ.
static __always_inline __u32 mac_ne(const __u8 *a, const __u8 *b)
{
	return (*(const __u32 *)a ^ *(const __u32 *)b) | (*(const __u16 *)(a + 4) ^ *(const __u16 *)(b + 4));
}

static __always_inline void wr16(__u8 *p, __u16 v)
{
	p[0] = v >> 8;
	p[1] = v;
}

#endif
