// SPDX-License-Identifier: Apache-2.0 OR MIT
//
// tern's XDP lane: the common case of tern's forwarding graph, run in the
// driver's receive hook.
//
// A frame first meets the steering program's rules (bpf/steer.c, same
// order and same verdicts): ARP/ND go to tern or Linux, traffic for the
// router's addresses (Linux mode) and multicast go to Linux, anything that
// is not IP goes to Linux. What steer.c would hand to tern's userspace
// engine is then processed here exactly as the userspace nodes do
// (crates/nodes: ethernet-input, ip4-input/ip6-input, ip4-acl-in,
// ip4-lookup, ip4-rewrite, gre-input, gre-encap, ip4-acl-out, ...), on the
// same tables: the FIB arrays are tern-fib's own arrays mirrored into
// array maps, the interface table and the ACL classifier are compiled by
// crates/xdp/src/lane. Each packet ends in one of:
//
//   forwarded   rewritten here and sent with bpf_redirect_map (devmap)
//   dropped     counted under the userspace node's own counter name
//   punted      to the AF_XDP socket of its receive queue, unmodified: tern's
//               userspace engine handles it (ICMP errors, unresolved next
//               hops, TTL expiry, packets for the router, IPv4 options, ...)
//   passed      to Linux (XDP_PASS), as the steering program does
//
// The lane never guesses: whatever it cannot decide exactly as userspace
// would (a rule set it could not compile, an entry beyond a map's
// capacity, an egress port not on the lane) is punted. Decisions are made
// before the packet is touched, and counters (ACL hits included) are
// committed only when the lane itself forwards or drops, so a punted
// packet is counted once, by userspace.
//
// Double-buffered tables (interfaces, VLANs, tunnels, ACLs) are read from
// the half named by lane_cfg.gen, loaded once per packet: a packet sees
// one generation of them. The FIB arrays are updated entry by entry with
// single stores, as userspace's are (crates/fib: a lookup sees the old or
// the new entry, never a mix).
//
// The sections live in bpf/lib/, one header per concern (maps, packet
// state, counters, ACL, FIB, egress and GRE encapsulation, forwarding
// memo, GRE decapsulation, traces, transmit). Their functions are `static
// __always_inline` but for the __noinline ones, kept as they were: the
// global functions (verified apart, which keeps the call chain under the
// 512-byte stack) and trace_one. This file holds ip4, ip6 and the entry
// point tern_lane; it is the one translation unit.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "lane.h"
#include "lib/maps.h"
#include "lib/state.h"
#include "lib/counters.h"
#include "lib/bytes.h"
#include "lib/csum.h"
#include "lib/hash.h"
#include "lib/acl.h"
#include "lib/fib.h"
#include "lib/egress.h"
#include "lib/memo.h"
#include "lib/gre.h"
#include "lib/trace.h"
#include "lib/xmit.h"
#include "lib/ip6ext.h"

#define IPPROTO_ESP_ 50
#define IKE_PORT 500
#define NAT_T_PORT 4500

// UDP to a port an SA uses locally for ESP in UDP other than 4500
// (`lane_encap_ports`, never IKE's 500): no IKE runs there, all of it
// is the engine's esp-decrypt's. `dp`: the destination port in the
// packet, the key as it is (network byte order; no stack: ip4's frame
// is at the verifier's 512-byte limit with its callers').
static __always_inline int is_encap_port(const __u8 *dp)
{
	return bpf_map_lookup_elem(&lane_encap_ports, (void *)dp) != 0;
}

// IPsec for the router: ESP, or UDP to IKE's port 500, NAT-T's 4500 or
// an SA's own ESP-in-UDP port (RFC 7296, RFC 3948), `l4` the transport
// header (ports read only when they are in the frame). In Linux mode
// (`flags` with LCFG_LINUX_MODE) only ESP and ESP in UDP: IKE stays the
// kernel's, whose sockets the IKE service binds (UDP 500; on 4500 the
// non-ESP marker, four zero bytes where ESP's SPI would be, and NAT
// keep-alives, one 0xff byte). The SAs' other ports are looked up only
// with LCFG_ENCAP_PORTS.
static __always_inline int is_ipsec(__u8 proto, const __u8 *l4, void *end, __u32 flags)
{
	int linux = flags & LCFG_LINUX_MODE;
	if (proto == IPPROTO_ESP_)
		return 1;
	if (proto != 17 || (void *)(l4 + 4) > end)
		return 0;
	__u16 dport = ((__u16)l4[2] << 8) | l4[3];
	if (dport == NAT_T_PORT)
		return !linux || ((void *)(l4 + 12) <= end && (l4[8] | l4[9] | l4[10] | l4[11]) != 0);
	if (dport == IKE_PORT)
		return !linux;
	return (flags & LCFG_ENCAP_PORTS) && is_encap_port(l4 + 2);
}

// IPv6 extension headers (tern_wire IpProtocol::is_ipv6_ext_header).
static __always_inline int is_ext(__u8 nh)
{
	return ip6_is_ext(nh);
}

// IPsec for the router over IPv6 (`is_ipsec`), also behind extension
// headers (`ip6_skip_ext`: hop-by-hop, routing, destination options, a
// first fragment, AH); `l4` just after the fixed header.
// A fragment is IPsec when it is ESP's (`ip6_frag_nh`), in every
// fragment alike; UDP's ports are in the first only, so UDP fragments are
// not (Linux's in Linux mode, which reassembles them: IKE; ip4-local's
// reassembly in standalone mode).
static __always_inline int is_ipsec6(__u8 nh, const __u8 *l4, void *end, __u32 flags)
{
	int f = ip6_frag_nh(l4, nh, end);
	if (f >= 0)
		return f == IPPROTO_ESP_;
	l4 = ip6_skip_ext(l4, &nh, end);
	return l4 && is_ipsec(nh, l4, end, flags);
}

// ip4-input, ip4-acl-in, ip4-lookup and what follows, for the header at
// `off`. `wire`: the outer header of the received frame (steer.c's checks
// ran); otherwise a decapsulated inner header. Returns 1 when decided, 0
// when the packet was decapsulated and continues at s->inner.
__noinline int ip4(struct xdp_md *ctx, struct st *s, __u32 off, __u32 wire)
{
	if (!ctx || !s)
		return 1;
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	if (off > L3_MAX)
		return PUNT(PUNT_OTHER);
	MASK(off, 0x7f); // for the verifier: the bound above, as a mask
	const __u8 *ip = data + off;
	// A decapsulated packet ends where its outer packet did (the outer
	// ip4-input/ip6-input trimmed the frame there).
	__u32 l3len = end - (void *)ip;
	if (!wire && s->limit - off < l3len)
		l3len = s->limit - off;
	if (l3len < 20 || (void *)(ip + 20) > end)
		return DROP(IP4_TOO_SHORT);
	if ((ip[0] >> 4) != 4)
		return DROP(IP4_BAD_VERSION);
	__u32 ihl = (ip[0] & 0x0f) * 4;
	if (ihl < 20 || ihl > l3len)
		return DROP(IP4_BAD_HDR_LEN);
	__u32 tot = rd16(ip + 2);
	if (tot < ihl)
		return DROP(IP4_BAD_LEN);
	if (tot > l3len)
		return DROP(IP4_TRUNCATED);
	if (ihl != 20)
		return PUNT(PUNT_OPTIONS);
	if (csum20_ne(ip) != 0xffff)
		return DROP(IP4_BAD_CSUM);
	__u32 src = rd32(ip + 12);
	__u32 dst = rd32(ip + 16);
	__u8 src_top = src >> 24;
	if (src_top >= 224 || src_top == 127 || src_top == 0)
		return DROP(IP4_MARTIAN);
	if (dst == 0xffffffff)
		return DROP(IP4_BROADCAST);
	// VRRP advertisements (protocol 112 to 224.0.0.18) are tern's own
	// VRRP's (ip4-input hands them to ip4-local); other groups are dropped.
	if (dst == 0xe0000012 && ip[9] == IPPROTO_VRRP_)
		return PUNT(PUNT_LOCAL);
	if ((dst >> 28) == 0xe)
		return DROP(IP4_MULTICAST);
	// RFC 1812 5.3.7: never a destination: 0/8, 127/8, 240/4 (but the
	// limited broadcast, above).
	__u8 dst_top = dst >> 24;
	if (dst_top == 0 || dst_top == 127 || dst_top >= 240)
		return DROP(IP4_MARTIAN_DST);
	// RFC 1812 5.3.4: unicast IP in a link-layer broadcast or multicast.
	if (s->multi)
		return DROP(IP4_L2_MULTI);
	s->l3off = off;
	s->tot = tot;
	s->limit = off + tot;
	s->v6 = 0;

	// The ACL key (crates/nodes/src/acl.rs key_v4).
	struct acl_key *k = &s->k;
	__u8 proto = ip[9];
	__u16 frag = rd16(ip + 6);
	k->w[K_SRC_HI] = 0;
	k->w[K_DST_HI] = 0;
	k->w[K_SRC_LO] = src;
	k->w[K_DST_LO] = dst;
	k->w[K_P0] = (frag & 0x1fff) == 0 ? acl_l4(proto, ip + 20, tot - 20, end) : CK_NO_L4;
	// No output interface yet (acl_out sets it).
	k->w[K_P1] = CK(PROTO, proto) | CK(IIF, s->rx_if) | CK(VLAN, s->vlan) | CK(DSCP, ip[1] >> 2);
	// The frame after ip4-input trimmed it: L2 (if any) + tot.
	k->bytes = (s->decap ? 0 : off - s->prio) + tot;
	// A received packet, or one decapsulated: its key holds the tunnel as
	// the input interface, and the outer headers are stripped per packet.
	if (wire || s->decap) {
		const struct lane_fwd_flow *fm = fwd_memo_find(s, k->w, 0);
		if (fm) {
			int r = fwd_memo_take(s, fm, ip, 0, k->bytes);
			if (r > 0)
				return r;
			if (r == 0)
				goto local;
			// Too big for its tunnel: the whole path.
		}
	}
	if (s->acl_in != LANE_NO_SET) {
		int r = acl_eval(s, s->acl_in, 0, k, 0);
		if (r < 0)
			return PUNT(PUNT_ACL);
		if (r == 1) {
			DROP(ACL4_IN_DENIED);
			if (s->f_fill)
				fwd_memo_fill(s, s->hits, 0);
			return 1;
		}
	}
	__u32 hits_in = s->hits;

	__u32 id = fib_v4(dst ^ (__u32)fib_dep(s));
	if (id == FIB_MISS)
		return PUNT(PUNT_FIB);
	int e = nh_get(id, &s->nh);
	// An ECMP group's member is memoised where the key determines the
	// hash: addresses, protocol and ports are in the key, except a TCP
	// header too short for its flags (the key holds no ports, the hash
	// reads them): such a packet fills nothing (as in ip6).
	if (e > 0) {
		if (proto == 6 && k->w[K_P0] == CK_NO_L4)
			s->f_fill = 0;
		__u32 ports = 0;
		if ((proto == 6 || proto == 17 || proto == 132) && (frag & 0x1fff) == 0 && tot >= 24 &&
		    (void *)(ip + 24) <= end)
			ports = rd32(ip + 20);
		e = nh_ecmp(&s->nh, flow_hash(0, src, 0, dst, proto, ports));
	}
	if (e)
		return PUNT(PUNT_FIB);
	switch (s->nh.kind) {
	case NH_KIND_UNICAST:
	case NH_KIND_GLEAN:
		e = rewrite(ctx, s);
		if (s->f_fill)
			fwd_memo_fill(s, hits_in, 0);
		return e;
	case NH_KIND_LOCAL:
		break;
	case NH_KIND_BLACKHOLE:
		return DROP(IP4_BLACKHOLE);
	default:
		return PUNT(PUNT_NO_ROUTE);
	}
	// ip4-local: only GRE of tern's tunnels is handled here; IPsec goes
	// to the engine (ESP decapsulation; IKE in standalone mode, which
	// ip4-local hands to the IKE service).
local:
	if (proto != IPPROTO_GRE_) {
		// ESP's fragments too (each carries the protocol), for the
		// engine's ip4-reassembly; UDP's as a UDP fragment's later ones,
		// whose ports are not there (as in is_ipsec6).
		if ((!(s->flags & LCFG_LINUX_MODE) || (s->flags & LCFG_IPSEC)) &&
		    (proto == IPPROTO_ESP_ || (frag & 0x3fff) == 0) &&
		    is_ipsec(proto, ip + 20, end, s->flags))
			return PUNT(PUNT_IPSEC);
		return (s->flags & LCFG_LINUX_MODE) ? PASS(PASS_LOCAL) : PUNT(PUNT_LOCAL);
	}
	if (!wire)
		return PUNT(PUNT_GRE); // GRE in GRE: userspace
	if (frag & 0x3fff)
		return PUNT(PUNT_FRAGMENT);
	// The outer header's decision so far is its key's: into the memo (no
	// hits after the input rule set's), before gre-input probes it again.
	if (s->f_fill)
		fwd_memo_fill(s, s->hits, 1);
	return gre_in(ctx, s, 0, off);
}

// ip6-input, ip6-acl-in, ip6-lookup and what follows (see ip4).
__noinline int ip6(struct xdp_md *ctx, struct st *s, __u32 off, __u32 wire)
{
	if (!ctx || !s)
		return 1;
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	if (off > L3_MAX)
		return PUNT(PUNT_OTHER);
	MASK(off, 0x7f); // for the verifier: the bound above, as a mask
	const __u8 *ip = data + off;
	__u32 l3len = end - (void *)ip;
	if (!wire && s->limit - off < l3len)
		l3len = s->limit - off;
	if (l3len < 40 || (void *)(ip + 40) > end)
		return DROP(IP6_TOO_SHORT);
	if ((ip[0] >> 4) != 6)
		return DROP(IP6_BAD_VERSION);
	__u32 tot = 40 + rd16(ip + 4);
	if (tot > l3len)
		return DROP(IP6_TRUNCATED);
	__u64 src_hi = rd64(ip + 8), src_lo = rd64(ip + 16);
	__u64 dst_hi = rd64(ip + 24), dst_lo = rd64(ip + 32);
	// Multicast and loopback sources, and (RFC 4291 2.5.2) the
	// unspecified one but to a multicast group (ND's duplicate address
	// detection): never forwarded. Nor IPv4-mapped addresses
	// (::ffff:0:0/96, RFC 6890), as source or destination.
	if ((src_hi >> 56) == 0xff || (src_hi == 0 && src_lo <= 1 && (src_lo || (dst_hi >> 56) != 0xff)) ||
	    (src_hi == 0 && (src_lo >> 32) == 0xffff))
		return DROP(IP6_MARTIAN);
	if (dst_hi == 0 && (dst_lo == 0 || dst_lo == 1 || (dst_lo >> 32) == 0xffff))
		return DROP(IP6_BAD_DST);
	if ((dst_hi >> 56) == 0xff) {
		// Link-scope all-nodes, all-routers, VRRP (ff02::12) and
		// solicited-node groups are tern's (ip6-local); other groups are
		// dropped.
		int all = dst_hi == 0xff02000000000000ull && (dst_lo == 1 || dst_lo == 2 || dst_lo == 0x12);
		int sol = dst_hi == 0xff02000000000000ull && (dst_lo >> 24) == 0x00000001ff;
		if (!(all || sol))
			return DROP(IP6_MULTICAST);
		return PUNT(PUNT_LOCAL);
	}
	if ((dst_hi >> 54) == (0xfe80ull >> 6)) {
		const struct lane_if *rxf = get_if(s, s->rx_if);
		if (rxf && rd64(rxf->v6_ll) == dst_hi && rd64(rxf->v6_ll + 8) == dst_lo)
			return PUNT(PUNT_LOCAL);
		return DROP(IP6_LINK_LOCAL);
	}
	// RFC 1812 5.3.4 (RFC 8504): unicast IP in a link-layer broadcast or
	// multicast is not routed.
	if (s->multi)
		return DROP(IP6_L2_MULTI);
	s->l3off = off;
	s->tot = tot;
	s->limit = off + tot;
	s->v6 = 1;

	// The ACL key (crates/nodes/src/acl.rs key_v6), when no extension
	// header has to be walked to find the upper layer.
	struct acl_key *k = &s->k;
	__u8 proto = ip[6];
	int key_ok = !is_ext(proto);
	k->w[K_SRC_HI] = src_hi;
	k->w[K_SRC_LO] = src_lo;
	k->w[K_DST_HI] = dst_hi;
	k->w[K_DST_LO] = dst_lo;
	k->w[K_P0] = key_ok && proto != 50 && proto != 59 ? acl_l4(proto, ip + 40, tot - 40, end) : CK_NO_L4;
	k->w[K_P1] = CK(PROTO, proto) | CK(IIF, s->rx_if) | CK(VLAN, s->vlan) |
		     CK(DSCP, ((rd16(ip) >> 4) & 0xff) >> 2);
	k->bytes = (s->decap ? 0 : off - s->prio) + tot;
	if (wire || s->decap) { // as in ip4
		s->f_label = rd32(ip) & 0x000fffff;
		const struct lane_fwd_flow *fm = fwd_memo_find(s, k->w, 1);
		if (fm) {
			int r = fwd_memo_take(s, fm, ip, 1, k->bytes);
			if (r > 0)
				return r;
			if (r == 0)
				goto local;
			// Too big for its tunnel: the whole path.
		}
	}
	if (s->acl_in != LANE_NO_SET) {
		if (!key_ok)
			return PUNT(PUNT_OPTIONS);
		int r = acl_eval(s, s->acl_in, 1, k, 0);
		if (r < 0)
			return PUNT(PUNT_ACL);
		if (r == 1) {
			DROP(ACL6_IN_DENIED);
			if (s->f_fill)
				fwd_memo_fill(s, s->hits, 0);
			return 1;
		}
	}
	__u32 hits_in = s->hits;

	__u32 id = fib_v6(dst_hi ^ fib_dep(s), dst_lo);
	if (id == FIB_MISS)
		return PUNT(PUNT_FIB);
	int e = nh_get(id, &s->nh);
	// An ECMP group's member is memoised with the flow label, which its
	// hash reads and the key does not hold; as for IPv4, not for a TCP
	// header too short for its flags (the key holds no ports, the hash
	// reads them). (No local for that: ip6's stack is at the limit.)
	if (e > 0) {
		s->f_lmask = 0x000fffff;
		if (proto == 6 && k->w[K_P0] == CK_NO_L4)
			s->f_fill = 0;
		__u32 ports = 0;
		if ((proto == 6 || proto == 17) && tot >= 44 && (void *)(ip + 44) <= end)
			ports = rd32(ip + 40);
		__u32 flow = rd32(ip) & 0x000fffff;
		e = nh_ecmp(&s->nh, flow_hash(src_hi, src_lo, dst_hi, dst_lo, proto, ports ^ flow));
	}
	if (e)
		return PUNT(PUNT_FIB);
	switch (s->nh.kind) {
	case NH_KIND_UNICAST:
	case NH_KIND_GLEAN:
		if (!key_ok) {
			// An output rule set would need the extension headers walked.
			const struct lane_if *o = get_if(s, s->nh.ifindex);
			if (o && o->acl_out != LANE_NO_SET && o->kind != LIF_GRE)
				return PUNT(PUNT_OPTIONS);
		}
		e = rewrite(ctx, s);
		if (s->f_fill)
			fwd_memo_fill(s, hits_in, 0);
		return e;
	case NH_KIND_LOCAL:
		break;
	case NH_KIND_BLACKHOLE:
		return DROP(IP6_BLACKHOLE);
	default:
		return PUNT(PUNT_NO_ROUTE);
	}
local:
	if (proto != IPPROTO_GRE_) {
		// As in ip4, also behind extension headers.
		if ((!(s->flags & LCFG_LINUX_MODE) || (s->flags & LCFG_IPSEC)) &&
		    is_ipsec6(proto, ip + 40, end, s->flags))
			return PUNT(PUNT_IPSEC);
		return (s->flags & LCFG_LINUX_MODE) ? PASS(PASS_LOCAL) : PUNT(PUNT_LOCAL);
	}
	if (!wire)
		return PUNT(PUNT_GRE);
	if (s->f_fill)
		fwd_memo_fill(s, s->hits, 1); // as in ip4
	return gre_in(ctx, s, 1, off);
}


// RFC 4861 section 4: Router Solicitation 133 .. Redirect 137.
#define ND_FIRST 133
#define ND_LAST 137

SEC("xdp")
int tern_lane(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 zero = 0;
	const struct lane_cfg *cfg = bpf_map_lookup_elem(&lane_cfg, &zero);
	if (!cfg || (cfg->flags & LCFG_PASS_ALL))
		return pass(C_PASS_NOT_LANE);
	__u32 kif = ctx->ingress_ifindex;
	__u32 rk = kif & 0xffff;
	const struct lane_rx *rx = bpf_map_lookup_elem(&lane_rx, &rk);
	if (!rx || rx->kifindex != kif || rx->port >= LANE_MAX_PORTS)
		return pass(C_PASS_NOT_LANE);

	struct st *s = bpf_map_lookup_elem(&lane_scratch, &zero);
	if (!s)
		return pass(C_PASS_NOT_LANE);
	// Only what the decision reads before writing it.
	s->verdict = V_NONE;
	s->reason = 0;
	s->vlan = 0;
	s->decap = 0;
	s->encap = 0;
	s->multi = 0;
	s->path = 0;
	s->prio = 0;
	s->dec_ttl = 0;
	s->hits = 0;
	// One load: the half and the cache epoch must come from the same
	// publication.
	__u32 cfg_gen = *(volatile const __u32 *)&cfg->gen;
	s->gen = cfg_gen & 1;
	s->epoch = cfg_gen;
	s->fib_gen = *(volatile const __u32 *)&cfg->fib_gen;
	s->flags = cfg->flags;
	s->port = rx->port;
	s->rx_if = rx->ifindex;
	// Received bytes are counted once the lane keeps the packet
	// (forwarded or dropped): punted ones are counted by userspace.
	__u32 rx_bytes = end - data;

	// ---- steer.c's rules, in its order, after the checks of
	// ethernet-input that no rule may skip: every frame ends under one of
	// the lane's counters (a malformed one under ethernet-input's or
	// ip4/ip6-input's drop, as in userspace).
	struct ethhdr *eth = data;
	int r = 1;
	int v6 = 0;
	if ((void *)(eth + 1) > end) {
		DROP(ETH_TOO_SHORT);
		goto decided;
	}
	// An Ethernet source is never a group address (IEEE 802.3 3.2.3).
	if (eth->h_source[0] & 1) {
		DROP(ETH_SRC_MULTICAST);
		goto decided;
	}
	__u16 proto = eth->h_proto;
	__u32 l3 = 14;
	int tagged = 0;
	__u16 vid = 0;
	// A frame ethernet-input drops after its destination check (l2_bad),
	// or after the VLAN and the interface's state (non-IP in standalone
	// mode): the counter id, 0 for none.
	// (Kept in the scratch: the stack is at the verifier's limit.)
	s->l2_bad = 0;
	s->et_bad = 0;
	if (proto == bpf_htons(ETH_P_8021Q_) || proto == bpf_htons(ETH_P_8021AD_)) {
		__u8 *vh = data + 14;
		if ((void *)(vh + 4) > end) {
			s->l2_bad = C_ETH_TOO_SHORT;
			goto ethernet_input;
		}
		vid = rd16(vh) & 0x0fff;
		proto = *(__u16 *)(vh + 2);
		l3 = 18;
		// VID 0 is a priority tag: the frame is the port's, untagged.
		tagged = vid != 0;
		if (!tagged)
			s->prio = 4; // the engine strips it: rule hits count bytes without
		if (proto == bpf_htons(ETH_P_8021Q_) || proto == bpf_htons(ETH_P_8021AD_)) {
			s->l2_bad = C_ETH_NESTED_VLAN;
			goto ethernet_input;
		}
	}
	if (proto == bpf_htons(ETH_P_ARP)) {
		if (s->flags & LCFG_NEIGH_TO_TERN)
			return to_xsk(ctx, s, C_PUNT_NEIGH);
		return pass_s(ctx, s, C_PASS_NEIGH);
	}
	// A truncated IP header skips steer.c's rules: ip4/ip6 drop it.
	if (proto == bpf_htons(ETH_P_IP)) {
		__u8 *ip = data + l3;
		v6 = 0;
		if ((void *)(ip + 20) > end)
			goto ethernet_input;
		__u32 dst;
		__builtin_memcpy(&dst, ip + 16, 4);
		// Packets for the router's addresses in Linux mode: Linux's, except
		// GRE, which may belong to one of tern's tunnels, and IPsec when
		// tern terminates it (ip4 punts it to the engine).
		// (LCFG_ENCAP_PORTS as a constant here: reading the flag costs
		// tern_lane 8 bytes of stack, over the verifier's 512 with ip4's
		// call chain; UDP transit looks the ports up while IPsec is on.)
		if (ip[9] != IPPROTO_GRE_ && (s->flags & LCFG_LOCAL4) &&
		    !((s->flags & LCFG_IPSEC) && (ip[0] & 0x0f) == 5 && (ip[9] == IPPROTO_ESP_ || !(rd16(ip + 6) & 0x3fff)) &&
		      is_ipsec(ip[9], ip + 20, end, LCFG_LINUX_MODE | LCFG_ENCAP_PORTS)) &&
		    bpf_map_lookup_elem(&lane_local4, &dst))
			return pass_s(ctx, s, C_PASS_LOCAL);
		// Multicast is Linux's, but for VRRP advertisements in standalone
		// mode, which tern's own VRRP takes (ip4 punts them).
		if (((dst & bpf_htonl(0xf0000000)) == bpf_htonl(0xe0000000) || dst == 0xffffffff) &&
		    !((s->flags & LCFG_NEIGH_TO_TERN) && ip[9] == IPPROTO_VRRP_ && dst == bpf_htonl(0xe0000012)))
			return pass_s(ctx, s, C_PASS_MCAST);
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		__u8 *ip = data + l3;
		v6 = 1;
		if ((void *)(ip + 40) > end)
			goto ethernet_input;
		if (ip[6] == IPPROTO_ICMPV6_ && (void *)(ip + 41) <= end) {
			__u8 type = ip[40];
			if (type >= ND_FIRST && type <= ND_LAST) {
				if (s->flags & LCFG_NEIGH_TO_TERN)
					return to_xsk(ctx, s, C_PUNT_NEIGH);
				return pass_s(ctx, s, C_PASS_NEIGH);
			}
		}
		if (ip[6] != IPPROTO_GRE_ && (s->flags & LCFG_LOCAL6) &&
		    !((s->flags & LCFG_IPSEC) && is_ipsec6(ip[6], ip + 40, end, LCFG_LINUX_MODE | LCFG_ENCAP_PORTS))) {
			struct in6_key key;
			__builtin_memcpy(key.b, ip + 24, 16);
			if (bpf_map_lookup_elem(&lane_local6, &key))
				return pass_s(ctx, s, C_PASS_LOCAL);
		}
		if (ip[24] == 0xff &&
		    !((s->flags & LCFG_NEIGH_TO_TERN) && ip[6] == IPPROTO_VRRP_ && rd64(ip + 24) == 0xff02000000000000ull &&
		      rd64(ip + 32) == 0x12))
			return pass_s(ctx, s, C_PASS_MCAST);
	} else {
		// LLDP, LACP, MPLS, ...: Linux's in Linux mode; standalone tern
		// handles none of them (ethernet-input's unknown-ethertype).
		if (s->flags & LCFG_LINUX_MODE)
			return pass_s(ctx, s, C_PASS_OTHER);
		s->et_bad = C_ETH_UNKNOWN_ETHERTYPE;
	}

	// ---- ethernet-input.
ethernet_input:;
	const struct lane_if *port_if = get_if(s, s->rx_if);
	if (!port_if) {
		DROP(ETH_NO_IF);
		goto decided;
	}
	// `tern capture` on this port: the engine sees (and captures) every
	// frame the lane would otherwise forward or drop unseen.
	if (port_if->flags & LIF_CAPTURE)
		return to_xsk(ctx, s, C_PUNT_CAPTURE);
	const __u8 *mac = port_if->mac;
	if (mac_ne(eth->h_dest, mac)) {
		if (!(eth->h_dest[0] & 1)) {
			// A virtual MAC of the port, or of the sub-interface of
			// the frame's tag (ethernet-input's sub_vmac).
			if (!is_vmac(s->rx_if, eth->h_dest) &&
			    !(tagged && is_sub_vmac(s, port_if->port, vid, eth->h_dest))) {
				DROP(ETH_NOT_FOR_US);
				goto decided;
			}
		} else {
			s->multi = 1;
		}
	}
	if (s->l2_bad) {
		done(s, V_DROP, s->l2_bad);
		goto decided;
	}
	int up = port_if->flags & LIF_UP;
	s->acl_in = port_if->acl_in;
	if (tagged) {
		__u32 vk = (s->gen * LANE_MAX_PORTS + port_if->port) * 4096 + vid;
		// Entries hold the sub-interface index + 1 (0: none).
		__u16 *sub = port_if->port < LANE_MAX_PORTS ? bpf_map_lookup_elem(&lane_vlans, &vk) : 0;
		if (!sub || *sub == 0) {
			DROP(ETH_UNKNOWN_VLAN);
			goto decided;
		}
		__u16 sub_if = *sub - 1;
		const struct lane_if *sf = get_if(s, sub_if);
		up = up && sf && (sf->flags & LIF_UP);
		if (sf)
			s->acl_in = sf->acl_in;
		s->rx_if = sub_if;
		s->vlan = vid;
	}
	if (!up) {
		DROP(ETH_IF_DOWN);
		goto decided;
	}
	if (s->et_bad) {
		done(s, V_DROP, s->et_bad);
		goto decided;
	}

	// ---- IP, and once more for a decapsulated packet.
	r = v6 ? ip6(ctx, s, l3, 1) : ip4(ctx, s, l3, 1);
	if (r == 0) {
		__u32 a = s->inner;
		r = s->inner_v6 ? ip6(ctx, s, a, 0) : ip4(ctx, s, a, 0);
		if (r == 0)
			PUNT(PUNT_GRE);
	}

decided:
	switch (s->verdict) {
	case V_FWD:
		if (s->flags & LCFG_TRACE)
			trace_one(ctx, s, XDP_REDIRECT);
		r = transmit(ctx, s);
		if (r == -1)
			return to_xsk(ctx, s, C_PUNT_OTHER);
		if (r)
			// The frame is half rewritten: never hand it on.
			return XDP_ABORTED;
		commit_counters(s);
		ctr_add(C_FORWARDED, 1);
		port_rx(s->port, rx_bytes);
		port_tx(s->tx_port, s->frame_len);
		return bpf_redirect_map(&lane_tx, s->tx_port, 0);
	case V_DROP:
		if (s->flags & LCFG_TRACE)
			trace_one(ctx, s, XDP_DROP);
		commit_counters(s);
		ctr_add(s->reason, 1);
		port_rx(s->port, rx_bytes);
		return XDP_DROP;
	case V_PASS:
		return pass_s(ctx, s, s->reason);
	case V_PUNT:
		return to_xsk(ctx, s, s->reason);
	default:
		return to_xsk(ctx, s, C_PUNT_OTHER);
	}
}

char _license[] SEC("license") = "Dual MIT/GPL";
