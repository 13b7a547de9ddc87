// SPDX-License-Identifier: Apache-2.0 OR MIT
//
// The FIB: lookups in tern-fib's mirrored arrays (fib_v4: DIR-24-8,
// fib_v6: its 16-bit stride trie), the next hop (nh_get) and the ECMP
// member (nh_ecmp). Maps: lane_v4_top, lane_v4_nodes, lane_v6_top,
// lane_v6_nodes, lane_nh, lane_ecmp.

#ifndef TERN_LANE_LIB_FIB_H
#define TERN_LANE_LIB_FIB_H

#include "state.h"
#include "hash.h"

#define FIB_MISS 0xffffffffu // an entry beyond the lane's maps: punt

static __always_inline __u32 fib_v4(__u32 dst)
{
	__u32 k = dst >> 16;
	const struct lane_block16 *b = bpf_map_lookup_elem(&lane_v4_top, &k);
	if (!b)
		return FIB_MISS;
	__u32 e = b->e[(dst >> 8) & 0xff];
	if (e < FIB4_CHILD)
		return e;
	k = e - FIB4_CHILD;
	b = bpf_map_lookup_elem(&lane_v4_nodes, &k);
	if (!b)
		return FIB_MISS; // a block beyond the lane's capacity
	e = b->e[dst & 0xff];
	return e >= FIB4_CHILD ? 0 : e;
}

// 24 bits of direct index, then one byte per level (at most 13).
__noinline __u32 fib_v6(__u64 hi, __u64 lo)
{
	__u32 k = hi >> 48;
	const struct lane_block16 *b = bpf_map_lookup_elem(&lane_v6_top, &k);
	if (!b)
		return FIB_MISS;
	__u32 e = b->e[(hi >> 40) & 0xff];
	for (int i = 3; i < 16; i++) {
		if (e < FIB6_CHILD)
			return e;
		k = e - FIB6_CHILD;
		b = bpf_map_lookup_elem(&lane_v6_nodes, &k);
		if (!b)
			return FIB_MISS;
		__u64 w = i < 8 ? hi : lo;
		__u32 sh = (7 - (i & 7)) * 8;
		e = b->e[(w >> sh) & 0xff];
	}
	return e >= FIB6_CHILD ? 0 : e;
}

// The next hop `id` (o->kind etc.): 0 done, 1 when it is an ECMP group
// (nh_ecmp then picks the member with the flow's hash, which only ECMP
// needs computed), -1 beyond the maps.
static __always_inline int nh_get(__u32 id, struct nh_out *o)
{
	const struct lane_nh *n = bpf_map_lookup_elem(&lane_nh, &id);
	if (!n)
		return -1;
	__u64 meta = n->meta;
	o->id = id;
	o->kind = meta & 0xff;
	o->ifindex = (meta >> 8) & 0xffff;
	o->mac = n->mac;
	return o->kind == NH_KIND_ECMP;
}

// The member of ECMP group o->id for a flow of hash `hash`: 0, or -1.
static __always_inline int nh_ecmp(struct nh_out *o, __u32 hash)
{
	const struct lane_nh *n = bpf_map_lookup_elem(&lane_nh, &o->id);
	if (!n)
		return -1;
	__u64 count = n->meta >> 32;
	__u64 i = n->mac + (((__u64)hash * count) >> 32);
	__u32 blk = i >> 8;
	const struct lane_block *m = bpf_map_lookup_elem(&lane_ecmp, &blk);
	if (!m)
		return -1;
	__u32 id = m->e[i & 0xff];
	n = bpf_map_lookup_elem(&lane_nh, &id);
	if (!n)
		return -1;
	__u64 meta = n->meta;
	o->id = id;
	o->kind = meta & 0xff;
	o->ifindex = (meta >> 8) & 0xffff;
	o->mac = n->mac;
	return 0;
}

#endif
