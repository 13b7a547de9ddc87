// SPDX-License-Identifier: Apache-2.0 OR MIT
//
// Packet traces (`tern trace start N`): trace_one records a decided packet
// while the budget lasts, trace_if_armed for verdicts decided outside the
// decision phase. Maps: lane_trace (ring buffer), lane_trace_budget,
// lane_ctr (trace-lost).

#ifndef TERN_LANE_LIB_TRACE_H
#define TERN_LANE_LIB_TRACE_H

#include "bytes.h"
#include "counters.h"

// Records the packet in lane_trace while the budget lasts: its first bytes
// (as received: called before the lane writes the frame), the verdict in
// s, the fast paths that decided it (s->path: forwarding memo, cached rule
// set verdicts) and, when forwarded, the rewrite decided. A traced packet
// takes the path every other packet takes. Called only while a trace is
// armed (LCFG_TRACE): a packet pays one flag test otherwise.
static __noinline int trace_one(struct xdp_md *ctx, struct st *s, __u32 action)
{
	__u32 z = 0;
	__s64 *budget = bpf_map_lookup_elem(&lane_trace_budget, &z);
	if (!budget || !s || *(volatile __s64 *)budget <= 0)
		return 0;
	__sync_fetch_and_add(budget, -1);
	struct lane_trace *t = bpf_ringbuf_reserve(&lane_trace, sizeof(*t), 0);
	if (!t) {
		ctr_add(C_TRACE_LOST, 1);
		return 0;
	}
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 len = end - data;
	t->t_ns = bpf_ktime_get_ns();
	t->kifindex = ctx->ingress_ifindex;
	t->len = len;
	t->reason = s->reason;
	t->port = s->port;
	t->rx_if = s->rx_if;
	t->verdict = s->verdict;
	t->action = action;
	t->cpu = bpf_get_smp_processor_id();
	// The fast paths that decided it (P_* are LTR_* bits).
	__u8 f = s->path & (LTR_FWD_MEMO | LTR_ACL_IN_CACHED | LTR_ACL_OUT_CACHED);
	if (s->decap)
		f |= LTR_DECAP;
	__builtin_memset(t->o_src, 0, 16);
	__builtin_memset(t->o_dst, 0, 16);
	if (s->verdict == V_FWD) {
		t->tx_port = s->tx_port;
		t->tx_vid = s->tx_vid;
		cp6(t->dmac, s->dmac);
		cp6(t->smac, s->smac);
		if (s->v6)
			f |= LTR_V6;
		if (s->dec_ttl)
			f |= LTR_DEC_TTL;
		if (s->encap) {
			f |= LTR_ENCAP;
			if (s->o_v6)
				f |= LTR_OUTER_V6;
			__builtin_memcpy(t->o_src, s->o_src, 16);
			__builtin_memcpy(t->o_dst, s->o_dst, 16);
		}
	} else {
		t->tx_port = 0;
		t->tx_vid = 0;
		__builtin_memset(t->dmac, 0, 6);
		__builtin_memset(t->smac, 0, 6);
	}
	t->flags = f;
	__u32 cap = len;
	if (cap > LANE_TRACE_HEAD)
		cap = LANE_TRACE_HEAD;
	// Once more after a mask the optimizer cannot see through: clang would
	// otherwise test `len` again, and the verifier needs the bound on the
	// register it passes.
	MASK(cap, 0xff);
	if (cap > LANE_TRACE_HEAD)
		cap = LANE_TRACE_HEAD;
	if (cap == 0 || bpf_xdp_load_bytes(ctx, 0, t->head, cap))
		cap = 0;
	t->cap = cap;
	bpf_ringbuf_submit(t, 0);
	return 0;
}

// A verdict decided outside the decision phase (punt, pass), traced
// while a trace is armed.
static __always_inline void trace_if_armed(struct xdp_md *ctx, struct st *s, __u32 verdict, __u32 reason,
					   __u32 action)
{
	if (s->flags & LCFG_TRACE) {
		s->verdict = verdict;
		s->reason = reason;
		trace_one(ctx, s, action);
	}
}

#endif
