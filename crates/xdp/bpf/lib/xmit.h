// SPDX-License-Identifier: Apache-2.0 OR MIT
//
// Applying a verdict: transmit writes the frame as decided (L2, GRE outer
// headers, TTL / hop limit), to_xsk punts to tern's userspace engine,
// pass / pass_s hand to Linux. Maps: lane_ident (the outer IPv4
// identification), lane_xsks, lane_ctr.

#ifndef TERN_LANE_LIB_XMIT_H
#define TERN_LANE_LIB_XMIT_H

#include "bytes.h"
#include "csum.h"
#include "counters.h"
#include "trace.h"
#include "punt.h"

// Rewrites the frame as decided: [L2][outer IP + GRE][kept L3 with its
// TTL/hop limit decremented, trimmed to its total length]. Returns 0 when
// done, -1 when nothing was changed (the head could not move), -2 when the
// frame is half written. Inlined in its one caller (a call less per
// forwarded packet).
static __always_inline int transmit(struct xdp_md *ctx, struct st *s)
{
	if (!ctx || !s)
		return -1;
	__u32 outer = s->encap ? (s->o_v6 ? 40 : 20) + s->o_gre_len : 0;
	__u32 front = s->l2len + outer;
	if (front > 18 + 48)
		return -1;
	int delta = (int)s->l3off - (int)front;
	// The common case (same L2 length in and out, no tunnel) keeps the
	// head where it is: no helper call.
	if (delta && bpf_xdp_adjust_head(ctx, delta))
		return -1;
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 want = front + s->tot;
	__u32 have = end - data;
	if (have > want) {
		if (bpf_xdp_adjust_tail(ctx, -(int)(have - want)))
			return -2;
		data = (void *)(long)ctx->data;
		end = (void *)(long)ctx->data_end;
	}
	__u8 *p = data;
	if (s->dec_ttl) {
		__u8 *ip = p + front;
		if (s->v6) {
			if ((void *)(ip + 40) > end)
				return -2;
			ip[7] -= 1;
		} else {
			if ((void *)(ip + 20) > end)
				return -2;
			__u8 ttl = ip[8];
			__u16 old = ((__u16)ttl << 8) | ip[9];
			__u16 new = ((__u16)(__u8)(ttl - 1) << 8) | ip[9];
			ip[8] = ttl - 1;
			wr16(ip + 10, csum_update(rd16(ip + 10), old, new));
		}
	}
	// Ethernet (+ 802.1Q).
	if ((void *)(p + 18) > end)
		return -2;
	cp6(p, s->dmac);
	cp6(p + 6, s->smac);
	__u16 et = (s->encap ? s->o_v6 : s->v6) ? ETH_P_IPV6 : ETH_P_IP;
	__u8 *o = p + 14;
	if (s->tx_vid) {
		wr16(p + 12, ETH_P_8021Q_);
		wr16(p + 14, s->tx_vid);
		wr16(p + 16, et);
		o = p + 18;
	} else {
		wr16(p + 12, et);
	}
	if (!s->encap)
		return 0;
	__u32 inner_len = s->tot;
	__u8 *g;
	if (s->o_v6) {
		if ((void *)(o + 40) > end)
			return -2;
		o[0] = 0x60;
		o[1] = 0;
		o[2] = 0;
		o[3] = 0;
		wr16(o + 4, s->o_gre_len + inner_len);
		o[6] = IPPROTO_GRE_;
		o[7] = s->o_ttl;
		__builtin_memcpy(o + 8, s->o_src, 16);
		__builtin_memcpy(o + 24, s->o_dst, 16);
		g = o + 40;
	} else {
		if ((void *)(o + 20) > end)
			return -2;
		__u32 z = 0;
		__u32 *id = bpf_map_lookup_elem(&lane_ident, &z);
		__u16 ident = 0;
		if (id) {
			*id += 1;
			ident = *id;
		}
		o[0] = 0x45;
		o[1] = 0;
		wr16(o + 2, 20 + s->o_gre_len + inner_len);
		wr16(o + 4, ident);
		wr16(o + 6, 0);
		o[8] = s->o_ttl;
		o[9] = IPPROTO_GRE_;
		wr16(o + 10, 0);
		__builtin_memcpy(o + 12, s->o_src, 4);
		__builtin_memcpy(o + 16, s->o_dst, 4);
		wr16(o + 10, ~csum20(o) & 0xffff);
		g = o + 20;
	}
	if ((void *)(g + 4) > end)
		return -2;
	wr16(g, s->o_has_key ? GRE_K : 0);
	wr16(g + 2, s->v6 ? ETH_P_IPV6 : ETH_P_IP);
	if (s->o_has_key) {
		if ((void *)(g + 8) > end)
			return -2;
		g[4] = s->o_key >> 24;
		g[5] = s->o_key >> 16;
		g[6] = s->o_key >> 8;
		g[7] = s->o_key;
	}
	return 0;
}

static __always_inline int to_xsk(struct xdp_md *ctx, struct st *s, __u32 reason)
{
	if (punt_to_router(reason) && !punt_police(ctx))
		return XDP_DROP;
	ctr_add(reason, 1);
	__u32 q = ctx->rx_queue_index;
	int act = XDP_PASS;
	if (q < LANE_MAX_QUEUES)
		act = bpf_redirect_map(&lane_xsks, s->port * LANE_MAX_QUEUES + q, XDP_PASS);
	if (act != XDP_REDIRECT)
		ctr_add(C_PASS_NO_XSK, 1);
	trace_if_armed(ctx, s, V_PUNT, reason, act);
	return act;
}

// Before the lane's scratch is read: not traced.
static __always_inline int pass(__u32 reason)
{
	ctr_add(reason, 1);
	return XDP_PASS;
}

// To Linux, traced while a trace is armed.
static __always_inline int pass_s(struct xdp_md *ctx, struct st *s, __u32 reason)
{
	if (punt_to_router(reason) && !punt_police(ctx))
		return XDP_DROP;
	ctr_add(reason, 1);
	trace_if_armed(ctx, s, V_PASS, reason, XDP_PASS);
	return XDP_PASS;
}

#endif
