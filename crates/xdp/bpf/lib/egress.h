// SPDX-License-Identifier: Apache-2.0 OR MIT
//
// The egress side: ip4-acl-out / ip6-acl-out (acl_out), the egress L2
// (set_l2), GRE encapsulation (outer_hdr, memo_encap, encap: the outer
// packet routed like one tern originated) and ip4-rewrite / ip6-rewrite
// (rewrite). Maps: lane_ifs (get_if), and the ACL's and FIB's through
// acl.h and fib.h.

#ifndef TERN_LANE_LIB_EGRESS_H
#define TERN_LANE_LIB_EGRESS_H

#include "acl.h"
#include "fib.h"

// ip4-acl-out / ip6-acl-out on interface `out`, for the kept header (or
// the outer header when encapsulating): returns 0 to continue, 1 done.
static __always_inline int acl_out(struct st *s, const struct lane_if *out, __u32 tx_if, struct acl_key *k,
				   __u32 v6)
{
	if (out->acl_out == LANE_NO_SET)
		return 0;
	k->w[K_P1] = (k->w[K_P1] & ~(CKM(IIF) | CKM(OIF))) | CK(IIF, s->rx_if) | CK(OIF, tx_if);
	k->bytes = s->frame_len;
	int r = acl_eval(s, out->acl_out, v6, k, 1);
	if (r < 0)
		return PUNT(PUNT_ACL);
	if (r == 1)
		return v6 ? DROP(ACL6_OUT_DENIED) : DROP(ACL4_OUT_DENIED);
	return 0;
}

// The L2 of an egress interface: data for the final header.
static __always_inline int set_l2(struct st *s, const struct lane_if *out, __u64 mac)
{
	if (!(out->flags & LIF_TX))
		return PUNT(PUNT_EGRESS);
	s->tx_port = out->port;
	s->tx_mtu = out->mtu;
	s->tx_vid = out->kind == LIF_VLAN ? (out->vid & 0x0fff) : 0;
	s->l2len = out->kind == LIF_VLAN ? 18 : 14;
	cp6(s->dmac, (const __u8 *)&mac);
	cp6(s->smac, out->mac);
	return 0;
}

// The outer headers of GRE tunnel `t` for transmit.
static __always_inline void outer_hdr(struct st *s, const struct lane_if *t)
{
	s->encap = 1;
	s->o_v6 = t->gre_v6;
	s->o_has_key = t->gre_has_key;
	s->o_key = t->gre_key;
	s->o_ttl = t->gre_ttl;
	s->o_gre_len = t->gre_has_key ? 8 : 4;
	__builtin_memcpy(s->o_src, t->gre_local, 16);
	__builtin_memcpy(s->o_dst, t->gre_remote, 16);
}

// A memoised flow into tunnel `tif`: its outer headers (the memo holds
// the underlay's link layer and the outer header's rule hits).
__noinline int memo_encap(struct st *s, __u32 tif)
{
	if (!s)
		return 1;
	const struct lane_if *t = get_if(s, tif);
	if (!t || t->kind != LIF_GRE)
		return DROP(GRE_NOT_TUNNEL); // not under the entry's publication
	outer_hdr(s, t);
	return 0;
}

// The outer packet of GRE tunnel `tif`, routed like a packet tern
// originated (gre-encap -> ip4-lookup/ip6-lookup -> rewrite with
// LOCAL_ORIGIN: no TTL work; ENCAP set: a tunnel again is recursion).
__noinline int encap(struct st *s, __u32 tif)
{
	if (!s)
		return 1;
	if (s->encap)
		return DROP(GRE_RECURSION);
	const struct lane_if *t = get_if(s, tif);
	if (!t || t->kind != LIF_GRE)
		return DROP(GRE_NOT_TUNNEL);
	outer_hdr(s, t);
	__u32 outer_tot = (s->o_v6 ? 40 : 20) + s->o_gre_len + s->tot;

	struct acl_key k = {};
	__u32 id;
	if (s->o_v6) {
		k.w[K_SRC_HI] = rd64(s->o_src);
		k.w[K_SRC_LO] = rd64(s->o_src + 8);
		k.w[K_DST_HI] = rd64(s->o_dst);
		k.w[K_DST_LO] = rd64(s->o_dst + 8);
		id = fib_v6(k.w[K_DST_HI], k.w[K_DST_LO]);
	} else {
		k.w[K_SRC_LO] = rd32(s->o_src);
		k.w[K_DST_LO] = rd32(s->o_dst);
		id = fib_v4(k.w[K_DST_LO]);
	}
	struct nh_out nh;
	if (id == FIB_MISS)
		return PUNT(PUNT_FIB);
	int e = nh_get(id, &nh);
	if (e > 0)
		e = nh_ecmp(&nh, flow_hash(k.w[K_SRC_HI], k.w[K_SRC_LO], k.w[K_DST_HI], k.w[K_DST_LO], IPPROTO_GRE_, 0));
	if (e)
		return PUNT(PUNT_FIB);
	switch (nh.kind) {
	case NH_KIND_UNICAST:
	case NH_KIND_GLEAN:
		break;
	case NH_KIND_LOCAL:
		return PUNT(PUNT_LOCAL);
	case NH_KIND_BLACKHOLE:
		return s->o_v6 ? DROP(IP6_BLACKHOLE) : DROP(IP4_BLACKHOLE);
	default:
		return PUNT(PUNT_NO_ROUTE);
	}
	const struct lane_if *out = get_if(s, nh.ifindex);
	if (!out)
		return s->o_v6 ? DROP(RW6_NO_IF) : DROP(RW4_NO_IF);
	if (!(out->flags & LIF_UP))
		return s->o_v6 ? DROP(RW6_IF_DOWN) : DROP(RW4_IF_DOWN);
	if (outer_tot > out->mtu)
		// The outer IPv4 header has DF clear: userspace would fragment,
		// which it does not implement; IPv6 needs ICMPv6 too big.
		return s->o_v6 ? PUNT(PUNT_TOO_BIG) : DROP(RW4_FRAG);
	if (out->kind == LIF_GRE)
		return DROP(GRE_RECURSION);
	if (nh.kind != NH_KIND_UNICAST || !(nh.mac & NH_MAC_VALID))
		return PUNT(PUNT_UNRESOLVED);
	if (set_l2(s, out, nh.mac))
		return 1;
	s->frame_len = s->l2len + outer_tot;
	// No VLAN, DSCP 0; acl_out sets the interfaces.
	k.w[K_P0] = CK_NO_L4;
	k.w[K_P1] = CK(PROTO, IPPROTO_GRE_);
	if (acl_out(s, out, nh.ifindex, &k, s->o_v6))
		return 1;
	return done(s, V_FWD, C_FORWARDED);
}

// ip4-rewrite / ip6-rewrite for the kept header (s->l3off, s->nh, s->k;
// never locally originated).
__noinline int rewrite(struct xdp_md *ctx, struct st *s)
{
	if (!ctx || !s)
		return 1;
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 off = s->l3off;
	if (off > L3_MAX)
		return PUNT(PUNT_OTHER);
	MASK(off, 0x7f); // for the verifier: the bound above, as a mask
	const __u8 *ip = data + off;
	if ((void *)(ip + 40) > end && (void *)(ip + 20) > end)
		return PUNT(PUNT_OTHER);
	__u32 v6 = s->v6;
	const struct lane_if *out = get_if(s, s->nh.ifindex);
	if (!out)
		return v6 ? DROP(RW6_NO_IF) : DROP(RW4_NO_IF);
	if (!(out->flags & LIF_UP))
		return v6 ? DROP(RW6_IF_DOWN) : DROP(RW4_IF_DOWN);
	if (s->nh.kind != NH_KIND_UNICAST && s->nh.kind != NH_KIND_GLEAN)
		return v6 ? DROP(RW6_BAD_NH) : DROP(RW4_BAD_NH);
	int tunnel = out->kind == LIF_GRE;
	if (v6) {
		if ((void *)(ip + 40) > end)
			return PUNT(PUNT_OTHER);
		if (ip[7] <= 1)
			return PUNT(PUNT_TTL);
		// RFC 4291 2.5.6: a link-local source cannot leave its link.
		if (ip[8] == 0xfe && (ip[9] & 0xc0) == 0x80)
			return PUNT(PUNT_SCOPE);
		if (s->tot > out->mtu)
			return PUNT(PUNT_TOO_BIG);
	} else {
		if ((void *)(ip + 20) > end)
			return PUNT(PUNT_OTHER);
		if (ip[8] <= 1)
			return PUNT(PUNT_TTL);
		if (s->tot > out->mtu) {
			if (ip[6] & 0x40)
				return PUNT(PUNT_TOO_BIG);
			return DROP(RW4_FRAG);
		}
	}
	int resolved = s->nh.kind == NH_KIND_UNICAST && (s->nh.mac & NH_MAC_VALID);
	if (!resolved && !tunnel)
		return PUNT(PUNT_UNRESOLVED);
	s->dec_ttl = 1;
	if (tunnel)
		return encap(s, s->nh.ifindex);
	if (set_l2(s, out, s->nh.mac))
		return 1;
	s->frame_len = s->l2len + s->tot;
	if (acl_out(s, out, s->nh.ifindex, &s->k, v6))
		return 1;
	return done(s, V_FWD, C_FORWARDED);
}

#endif
