// SPDX-License-Identifier: Apache-2.0 OR MIT
//
// Counting and deciding: ctr_add (map lane_ctr), the per-port packet
// counters (lane_port_stats), done and the DROP/PUNT/PASS shorthands that
// record a verdict in the packet state, and commit_counters, which adds a
// forwarded or dropped packet's rule hits (lane_acl_hits), GRE counters
// and fast-path counters once the lane itself decided it.

#ifndef TERN_LANE_LIB_COUNTERS_H
#define TERN_LANE_LIB_COUNTERS_H

#include "state.h"

static __always_inline void ctr_add(__u32 id, __u64 n)
{
	__u64 *c = bpf_map_lookup_elem(&lane_ctr, &id);
	if (c)
		*c += n; // per-CPU slot: no atomic needed
}

static __always_inline void port_rx(__u32 port, __u64 bytes)
{
	struct lane_port_stats *c = bpf_map_lookup_elem(&lane_port_stats, &port);
	if (c) {
		c->rx_packets += 1;
		c->rx_bytes += bytes;
	}
}

static __always_inline void port_tx(__u32 port, __u64 bytes)
{
	struct lane_port_stats *c = bpf_map_lookup_elem(&lane_port_stats, &port);
	if (c) {
		c->tx_packets += 1;
		c->tx_bytes += bytes;
	}
}

static __always_inline int done(struct st *s, __u32 verdict, __u32 reason)
{
	s->verdict = verdict;
	s->reason = reason;
	return 1;
}

#define DROP(c) done(s, V_DROP, C_##c)
#define PUNT(c) done(s, V_PUNT, C_##c)
#define PASS(c) done(s, V_PASS, C_##c)

static __always_inline void commit_counters(struct st *s)
{
	__u32 n = s->hits;
	for (__u32 i = 0; i < MAX_HITS && i < n; i++) {
		__u32 slot = s->hit_slot[i & (MAX_HITS - 1)];
		struct lane_hits *h = bpf_map_lookup_elem(&lane_acl_hits, &slot);
		if (h) {
			h->packets += 1;
			h->bytes += s->hit_bytes[i & (MAX_HITS - 1)];
		}
	}
	if (s->decap)
		ctr_add(C_GRE_DECAPSULATED, 1);
	if (s->encap)
		ctr_add(C_GRE_ENCAPSULATED, 1);
	// The fast paths that decided it: the forwarding memo, and the rule
	// set verdicts taken from the verdict cache (an input and an output
	// set one each).
	__u32 p = s->path;
	if (p) {
		if (p & P_FWD_MEMO)
			ctr_add(C_FWD_MEMO, 1);
		if (p & (P_ACL_IN_CACHED | P_ACL_OUT_CACHED))
			ctr_add(C_ACL_CACHED, !!(p & P_ACL_IN_CACHED) + !!(p & P_ACL_OUT_CACHED));
	}
}

#endif
