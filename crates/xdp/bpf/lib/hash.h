// SPDX-License-Identifier: Apache-2.0 OR MIT
//
// The flow hash ECMP and the memos share with userspace
// (crates/nodes/src/util.rs flow_hash) and bit_index. No maps.

#ifndef TERN_LANE_LIB_HASH_H
#define TERN_LANE_LIB_HASH_H

#include <linux/types.h>

// crates/nodes/src/util.rs flow_hash, on 128-bit addresses as (hi, lo).
static __always_inline __u64 rotl64(__u64 x, int r)
{
	return (x << r) | (x >> (64 - r));
}

static __always_inline __u32 flow_hash(__u64 src_hi, __u64 src_lo, __u64 dst_hi, __u64 dst_lo, __u8 proto,
				       __u32 ports)
{
	__u64 h = src_lo ^ rotl64(src_hi, 17);
	h ^= (dst_lo ^ rotl64(dst_hi, 31)) * 0x9e3779b97f4a7c15ull;
	h ^= (((__u64)proto << 32) | ports) * 0xc2b2ae3d27d4eb4full;
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 32;
	return (__u32)h;
}

// Index of the only set bit of x (population count of the bits below it).
static __always_inline __u32 bit_index(__u64 x)
{
	__u64 v = x - 1;
	v = v - ((v >> 1) & 0x5555555555555555ull);
	v = (v & 0x3333333333333333ull) + ((v >> 2) & 0x3333333333333333ull);
	v = (v + (v >> 4)) & 0x0f0f0f0f0f0f0f0full;
	return (v * 0x0101010101010101ull) >> 56;
}

#endif
