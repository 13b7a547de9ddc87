// SPDX-License-Identifier: Apache-2.0 OR MIT
//
// Internet checksums (RFC 1071, RFC 1624 incremental update) as tern_wire
// computes them. No maps.

#ifndef TERN_LANE_LIB_CSUM_H
#define TERN_LANE_LIB_CSUM_H

#include <linux/types.h>
#include <bpf/bpf_endian.h>

// One's complement 16-bit addition with end-around carry
// (tern_wire::checksum::add).
static __always_inline __u32 csum_add16(__u32 a, __u32 b)
{
	__u32 x = a + b;
	return ((x & 0xffff) + (x >> 16)) & 0xffff;
}

// RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m') (tern_wire::checksum::update).
static __always_inline __u16 csum_update(__u16 c, __u16 old, __u16 new)
{
	return ~csum_add16(csum_add16(~c & 0xffff, ~old & 0xffff), new) & 0xffff;
}

// Sum of the ten 16-bit words of an IPv4 header without options, folded
// to 16 bits, in the header's byte order (rd16 of it for the value): five
// 32-bit loads summed in 64 bits, then folded; a one's complement sum
// does not depend on the byte order it is taken in, only its result is
// byte-swapped, so the "== 0xffff" check needs no swap.
static __always_inline __u32 csum20_ne(const __u8 *p)
{
	const __u32 *w = (const __u32 *)p;
	__u64 s = (__u64)w[0] + w[1] + w[2] + w[3] + w[4];
	s = (s & 0xffffffff) + (s >> 32);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return s;
}

// The same sum with the header's words read as big-endian numbers.
static __always_inline __u32 csum20(const __u8 *p)
{
	return bpf_ntohs((__u16)csum20_ne(p));
}

#endif
