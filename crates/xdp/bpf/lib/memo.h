// SPDX-License-Identifier: Apache-2.0 OR MIT
//
// The forwarding memo: a per-CPU flow table of decisions the whole path
// made (fwd_memo_find, fwd_memo_take, fwd_memo_fill), tagged with the
// publication and FIB sequences. Map: lane_fwd_flows (global
// lane_fwd_flows_mask; switched by LCFG_NO_FWD_MEMO).
//
// The invariant (as the verdict cache's, with routes): an entry is valid
// only while the publication sequence and the FIB sequence it was filled
// under are both current; any rule or interface change bumps the first,
// any route, next hop or neighbour change the second.
// - Key: the received header's classifier key without an output
//   interface (addresses, protocol, ports, ICMP type/code, TCP flags,
//   receiving interface after VLAN demux or decapsulation, VLAN, DSCP),
//   the family and, for an IPv6 flow through an ECMP group, the flow
//   label: everything the whole path reads from the packet to decide,
//   but TTL / hop limit and length, which a hit checks again.
// - What it holds: the input and output rule sets' hits, the route's
//   next hop (ECMP member), egress port, VLAN, MACs, MTU, a GRE tunnel's
//   outer headers (memo_encap reads them under the same gen), or an
//   input rule set drop, or "GRE to the router" (decapsulation follows).
// - Tag: lane_cfg.gen (rule sets, interfaces, VLANs, tunnels: publish)
//   and lane_cfg.fib_gen (routes, next hops, neighbour MACs: every FIB
//   mirror sync that wrote an entry bumps it after the entries; the FIB
//   lookups depend on the read, fib_dep). Both read once per packet.
// - Invalid: either tag not the packet's, a half-written entry (its tag
//   is written last), a zeroed one (its source address is a martian).
//   The loader zeroes the memo when either sequence wraps.
// - Switches: LCFG_NO_FWD_MEMO (direct off) skips it, at once; with
//   LCFG_NO_ACL_CACHE (acl_shortcut off) no flow a rule set decides is
//   filled, and the switch bumps fib_gen, retiring the ones held. The
//   trace marks a packet it decided (LTR_FWD_MEMO) and xdp-lane/fwd-memo
//   counts them.

#ifndef TERN_LANE_LIB_MEMO_H
#define TERN_LANE_LIB_MEMO_H

#include "egress.h"

// Above this miss rate (of 65536) the forwarding memo is looked at on one
// packet in 16 only: with many flows interleaved on a CPU its compare and
// rewrite would be spent for nothing (as ACL_MEMO_BYPASS_AT).
#define FWD_MEMO_BYPASS_AT 49152 // 3/4

// The forwarding memo's bucket of key `w` (family `v6`): the verdict cache's
// mix of the six words, the family in place of the rule set.
static __always_inline __u32 fwd_key_hash(const __u64 *w, __u32 v6)
{
	return (__u32)key_mix(w, v6);
}

// 1 when entry `m` holds key `w` of family `v6` under tag `tag`, and for
// an entry of an IPv6 ECMP flow, flow label `label` (one branch for the
// family, as acl_centry_is: an IPv4 key's high address words are zero).
// IPv4 reads the entry's first line only.
static __always_inline int fwd_flow_is(const struct lane_fwd_flow *m, const __u64 *w, __u32 v6, __u64 tag,
				       __u32 label)
{
	__u64 d = *(const __u64 *)&m->epoch ^ tag;
	d |= (m->lo[0] ^ w[K_SRC_LO]) | (m->lo[1] ^ w[K_DST_LO]);
	d |= (m->lo[2] ^ w[K_P0]) | (m->lo[3] ^ w[K_P1]) | (m->v6 ^ v6);
	if (v6) {
		d |= (m->hi[0] ^ w[K_SRC_HI]) | (m->hi[1] ^ w[K_DST_HI]);
		// Apart, on a match only: folded into the above, its registers
		// pushed ip6's stack over the limit.
		if (d == 0)
			d = (m->label ^ label) & m->label_mask;
	}
	return d == 0;
}

// The entry of this CPU's forwarding memo holding key `w` of family `v6`
// (IPv6: and flow label s->f_label, where the entry depends on it) under
// this packet's tags, or 0: on a miss (not when the memo is off or
// bypassed) s->f_fill is set, with the key's bucket in s->f_idx, and the
// packet fills the memo if the whole path forwards it. Updates the miss
// rate.
static __always_inline const struct lane_fwd_flow *fwd_memo_find(struct st *s, const __u64 *w, __u32 v6)
{
	s->f_fill = 0;
	s->f_lmask = 0;
	s->f_base = s->hits;
	if ((s->flags & LCFG_NO_FWD_MEMO) || s->hits > MAX_HITS)
		return 0;
	__u32 miss = s->f_miss;
	if (miss > FWD_MEMO_BYPASS_AT && (acl_rng(s) >> 28))
		return 0;
	__u32 idx = (fwd_key_hash(w, v6) & lane_fwd_flows_mask) +
		    bpf_get_smp_processor_id() * (lane_fwd_flows_mask + 1);
	const struct lane_fwd_fbucket *b = bpf_map_lookup_elem(&lane_fwd_flows, &idx);
	if (!b)
		return 0;
	__u64 tag = s->epoch | (__u64)s->fib_gen << 32;
	const struct lane_fwd_flow *m = &b->way[0];
	if (!fwd_flow_is(m, w, v6, tag, s->f_label)) {
		m = &b->way[1];
		if (!fwd_flow_is(m, w, v6, tag, s->f_label))
			m = 0;
	}
	if (m) {
		s->f_miss = miss - (miss >> 4);
		// Its hits after the outer header's must fit the packet's list
		// (else the whole path runs and finds they do not).
		return s->f_base + m->hits <= MAX_HITS ? m : 0;
	}
	s->f_miss = miss + ((65536 - miss) >> 4);
	s->f_fill = 1;
	s->f_idx = idx;
	return 0;
}

// Zero, computed from the FIB sequence this packet read: XORed into the
// destination of the FIB lookup, it makes the lookup's loads depend on
// that read, so a weakly ordered CPU (arm64) cannot load a FIB entry older
// than the sequence, which would tag a stale route with a current
// sequence in the memo. (x86 does not reorder loads; there it costs two
// instructions.)
static __always_inline __u64 fib_dep(struct st *s)
{
	__u64 z = s->fib_gen;
	asm volatile("%[z] ^= %[z]" : [z] "+r"(z));
	return z;
}

// A packet of the memo's flow: rewrite's checks that depend on the packet
// (TTL / hop limit, then the MTU), then the memo's decision, with its rule
// hits counted for this packet's bytes (`in_bytes` for the input rule
// set's, the frame sent for the output's), as the whole path would have.
// Returns 1 when decided, 0 for a flow of GRE to the router (its input
// rule set's hits recorded): the caller's local delivery follows; -1,
// having changed nothing, for a packet into a tunnel that is too big for
// it (the whole path finds which error applies).
static __always_inline int fwd_memo_take(struct st *s, const struct lane_fwd_flow *m, const __u8 *ip, __u32 v6,
					 __u32 in_bytes)
{
	__u32 n = m->hits;
	__u32 nin = m->hits_in;
	__u32 l2len = m->l2len;
	__u32 over = m->o_over;
	if (over && s->tot > m->mtu)
		return -1;
	s->path |= P_FWD_MEMO; // decided here from now on
	// The frame sent: the outer headers' rule hits count it.
	__u32 out_bytes = l2len + over + s->tot;
	const struct lane_fwd_l2 *l2 = v6 ? &m->l2_v6 : &m->l2;
	// After the hits already recorded (s->f_base: a decapsulated packet's
	// outer header's; fwd_memo_find made sure they all fit).
	__u32 base = s->f_base;
	if (base < MAX_HITS) {
		__u32 j = base;
		MASK(j, MAX_HITS - 1);
		s->hit_slot[j] = l2->slot0;
		s->hit_bytes[j] = nin ? in_bytes : out_bytes;
	}
	// The second line (IPv4): only for a flow of several hits.
#pragma unroll
	for (int i = 1; i < LANE_FM_HITS; i++) {
		if (i < n && base + i < MAX_HITS) {
			__u32 j = base + i;
			MASK(j, MAX_HITS - 1);
			s->hit_slot[j] = m->slot[i];
			s->hit_bytes[j] = i < nin ? in_bytes : out_bytes;
		}
	}
	// A drop below counts the input rule set's hits (it is after them).
	s->hits = base + nin;
	if (!l2len)
		// The input rule set dropped the flow.
		return v6 ? DROP(ACL6_IN_DENIED) : DROP(ACL4_IN_DENIED);
	if (l2len == LANE_FM_LOCAL)
		return 0; // GRE to the router: the caller goes on to gre-input
	if (v6) {
		if (ip[7] <= 1)
			return PUNT(PUNT_TTL);
		if (s->tot > m->mtu)
			return PUNT(PUNT_TOO_BIG);
	} else {
		if (ip[8] <= 1)
			return PUNT(PUNT_TTL);
		if (s->tot > m->mtu) {
			if (ip[6] & 0x40)
				return PUNT(PUNT_TOO_BIG);
			return DROP(RW4_FRAG);
		}
	}
	s->hits = base + n;
	s->dec_ttl = 1;
	if (over && memo_encap(s, m->tun_if))
		return 1;
	s->tx_port = m->tx_port;
	s->tx_vid = l2->tx_vid;
	s->l2len = l2len;
	cp6(s->dmac, l2->dmac);
	cp6(s->smac, l2->smac);
	s->frame_len = out_bytes;
	return done(s, V_FWD, C_FORWARDED);
}

// After the whole path forwarded a packet of the received header (into a
// GRE tunnel too, but not by an ECMP group where the key, and for IPv6 the
// flow label, does not determine the member), or the input rule set dropped it: that
// decision into this CPU's memo (a drop as l2len 0), in the bucket the
// probe missed (s->f_idx), tagged with the sequences the packet read
// first (the FIB lookups depend on fib_gen: fib_dep). The way: one whose
// tags are not the packet's (stale or empty), else one at random, so that
// flows colliding in a bucket settle in its two ways instead of evicting
// each other in turn. `hits_in`: the rule hits the input rule set
// recorded. `local`: GRE to one of the router's addresses, which goes on to
// gre-input (the entry's l2len LANE_FM_LOCAL); filled before gre-input,
// which probes the memo again for the inner header.
__noinline int fwd_memo_fill(struct st *s, __u32 hits_in, __u32 local)
{
	if (!s)
		return 0;
	// Only the hits after the probe (see st.f_base).
	__u32 base = s->f_base;
	if (s->hits > MAX_HITS || base > hits_in || hits_in > s->hits || s->hits - base > LANE_FM_HITS)
		return 0;
	// Rule set verdicts are reused only while the verdict cache is on
	// (acl_shortcut): off, a flow through a rule set is classified per
	// packet. (Switching it off retires the memo: program.rs.)
	if ((s->flags & LCFG_NO_ACL_CACHE) && s->hits != base)
		return 0;
	int drop = s->verdict == V_DROP && (s->reason == C_ACL4_IN_DENIED || s->reason == C_ACL6_IN_DENIED);
	if (!drop && !local && s->verdict != V_FWD)
		return 0;
	// Into a tunnel: the largest inner packet that fits it and, with the
	// outer headers, the underlay's egress.
	__u32 over = 0;
	__u32 mtu = s->tx_mtu;
	__u16 tun_if = 0;
	if (s->encap && !drop && !local) {
		const struct lane_if *t = get_if(s, s->nh.ifindex);
		if (!t || t->kind != LIF_GRE)
			return 0;
		over = (s->o_v6 ? 40 : 20) + s->o_gre_len;
		if (mtu < over)
			return 0;
		mtu -= over;
		if (t->mtu < mtu)
			mtu = t->mtu;
		tun_if = s->nh.ifindex;
	}
	__u32 idx = s->f_idx;
	struct lane_fwd_fbucket *b = bpf_map_lookup_elem(&lane_fwd_flows, &idx);
	if (!b)
		return 0;
	__u64 tag = s->epoch | (__u64)s->fib_gen << 32;
	struct lane_fwd_flow *m = &b->way[0];
	if (*(const __u64 *)&m->epoch == tag) {
		m = &b->way[1];
		if (*(const __u64 *)&m->epoch == tag && !(acl_rng(s) >> 31))
			m = &b->way[0];
	}
	// One CPU's: no other writer but the loader's clear at a wrap, which
	// cannot make a stale tag current (as for the verdict cache).
	m->epoch = ~s->epoch;
	asm volatile("" ::: "memory");
	m->lo[0] = s->k.w[K_SRC_LO];
	m->lo[1] = s->k.w[K_DST_LO];
	m->lo[2] = s->k.w[K_P0];
	m->lo[3] = s->k.w[K_P1] & ~CKM(OIF); // acl_out set it; a received packet's key has none
	struct lane_fwd_l2 *l2 = &m->l2;
	m->label = 0;
	m->label_mask = 0;
	if (s->v6) {
		m->hi[0] = s->k.w[K_SRC_HI];
		m->hi[1] = s->k.w[K_DST_HI];
		m->label = s->f_label;
		m->label_mask = s->f_lmask;
		l2 = &m->l2_v6;
	}
	m->v6 = s->v6;
	m->mtu = mtu;
	m->o_over = over;
	m->tun_if = tun_if;
	m->tx_port = local ? LANE_FM_LOCAL_PORT : s->tx_port;
	m->l2len = drop ? 0 : local ? LANE_FM_LOCAL : s->l2len;
	m->hits = s->hits - base;
	m->hits_in = hits_in - base;
	cp6(l2->dmac, s->dmac);
	cp6(l2->smac, s->smac);
	l2->tx_vid = s->tx_vid;
	__u32 j0 = base;
	MASK(j0, MAX_HITS - 1);
	l2->slot0 = s->hit_slot[j0];
#pragma unroll
	for (int i = 0; i < LANE_FM_HITS; i++) {
		__u32 j = base + i;
		MASK(j, MAX_HITS - 1);
		m->slot[i] = s->hit_slot[j];
	}
	asm volatile("" ::: "memory");
	m->fib_gen = s->fib_gen;
	m->epoch = s->epoch;
	return 0;
}

#endif
