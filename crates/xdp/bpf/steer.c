// SPDX-License-Identifier: Apache-2.0 OR MIT
//
// tern's XDP steering program.
//
// Runs on every receive queue of a port. Transit packets go to the AF_XDP
// socket (XSK) of the queue they arrived on; packets for the router itself
// and the control protocols Linux must see go up the kernel stack
// (XDP_PASS), so Linux keeps working on the same interface. Userspace
// (crates/xdp/src/steer.rs) fills the maps; the indices of `verdicts` must
// match `Verdict` there.
//
// Nothing is ever dropped here but what a policer sheds: a malformed frame
// goes to tern, which counts its drop; what neither handles goes to the
// kernel. Control traffic first (lib/class.h, as in the XDP lane): what
// goes to Linux or to tern for the router itself (pass-local,
// pass-neighbor, pass-multicast, ARP/ND, VRRP and IKE sent to tern, and in
// standalone mode what is for tern's addresses, `tern_local4/6`) is
// classed and policed per class and CPU (tern_punt_rate, tern_punt_tat);
// a frame over its class's rate is dropped and counted under
// V_SHED_NEIGH + class. No rates set: nothing policed.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "lib/class.h"
#include "lib/ip6ext.h"

#define MAX_QUEUES 256
#define MAX_LOCAL_ADDRS 1024

// Config flags (index 0 of `config`).
// ARP and IPv6 neighbour discovery go to tern (standalone mode) instead of
// Linux (Linux control-plane mode); so do EtherTypes tern does not handle
// (to be counted as its drops).
#define CFG_NEIGH_TO_TERN (1u << 0)
// Pass everything to Linux (steering paused, e.g. while tern restarts).
#define CFG_PASS_ALL (1u << 1)
// tern terminates IPsec: ESP and ESP in UDP 4500 (NAT-T, or an SA's own
// port: tern_encap_ports) for the router's addresses go to tern, not Linux; IKE (UDP 500, and 4500 with the
// non-ESP marker) stays Linux's.
#define CFG_IPSEC_TO_TERN (1u << 2)

enum verdict {
	V_REDIRECT = 0,       // transit packet sent to the queue's XSK
	V_REDIRECT_NEIGH = 1, // ARP/ND sent to tern (standalone mode)
	V_PASS_LOCAL = 2,     // addressed to one of the router's addresses
	V_PASS_NEIGH = 3,     // ARP/ND passed to Linux (control-plane mode)
	V_PASS_MCAST = 4,     // link-layer or IP multicast/broadcast control traffic
	V_PASS_NO_XSK = 5,    // no socket on this queue: passed to Linux
	V_PASS_OTHER = 6,     // not IP/ARP in Linux mode, or steering paused
	V_REDIRECT_IPSEC = 7, // ESP or ESP in UDP (4500, an SA's port) for the router sent to tern
	V_REDIRECT_VRRP = 8,  // VRRP advertisements sent to tern (standalone mode)
	V_REDIRECT_LOCAL = 9, // for the router's addresses, sent to tern (standalone mode)
	// Shed by the class's policer, one per class in PC_* order (lane.h):
	// neighbor, bgp, ospf, vrrp, ike, bfd, local.
	V_SHED_NEIGH = 10,
	V_MAX = V_SHED_NEIGH + PC_MAX,
};

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} tern_xsks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_LOCAL_ADDRS);
	__type(key, __u32); // IPv4 address, network byte order
	__type(value, __u8);
} tern_local4 SEC(".maps");

struct in6_key {
	__u8 b[16];
};

// The local UDP ports of ESP in UDP other than 4500 (network byte order:
// the key is the packet's own two bytes):
// every SA's `udp_encap` source port, kept by tern's control thread
// (SteeringProgram::set_encap_ports). No IKE runs on them.
#define MAX_ENCAP_PORTS 256
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_ENCAP_PORTS);
	__type(key, __u16);
	__type(value, __u8);
} tern_encap_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_LOCAL_ADDRS);
	__type(key, struct in6_key);
	__type(value, __u8);
} tern_local6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} tern_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, V_MAX);
	__type(key, __u32);
	__type(value, __u64);
} tern_verdicts SEC(".maps");

// Per class (PC_*): [2c] the cost of one packet in ns (0: not policed),
// [2c + 1] the burst tolerance in ns (crates/xdp/src/steer.rs fills it as
// the lane's lane_punt_rate).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * PC_MAX);
	__type(key, __u32);
	__type(value, __u64);
} tern_punt_rate SEC(".maps");

// Per CPU and class: the policer's virtual time (gcra_admit).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PC_MAX);
	__type(key, __u32);
	__type(value, __u64);
} tern_punt_tat SEC(".maps");

static __always_inline int count(__u32 v, int action)
{
	__u64 *c = bpf_map_lookup_elem(&tern_verdicts, &v);
	if (c)
		*c += 1; // per-CPU slot: no atomic needed
	return action;
}

// 1: the frame (for the router itself) may go on; 0: its class is over
// its rate, counted as shed (the caller drops it). Verified apart.
__noinline int steer_police(struct xdp_md *ctx)
{
	if (!ctx)
		return 1;
	const __u8 *data = (const __u8 *)(long)ctx->data;
	const __u8 *end = (const __u8 *)(long)ctx->data_end;
	__u32 c = punt_class(data, end);
	if (c >= PC_MAX)
		return 1;
	__u32 k = 2 * c;
	__u64 *cost = bpf_map_lookup_elem(&tern_punt_rate, &k);
	k += 1;
	__u64 *tol = bpf_map_lookup_elem(&tern_punt_rate, &k);
	__u64 *t = bpf_map_lookup_elem(&tern_punt_tat, &c);
	if (!cost || !tol || !t || *cost == 0)
		return 1;
	if (gcra_admit(*cost, *tol, t))
		return 1;
	count(V_SHED_NEIGH + c, 0);
	return 0;
}

// To Linux, for the router itself: policed.
static __always_inline int pass_policed(struct xdp_md *ctx, __u32 v)
{
	if (!steer_police(ctx))
		return XDP_DROP;
	return count(v, XDP_PASS);
}

static __always_inline int to_xsk(struct xdp_md *ctx, __u32 v)
{
	// For the router itself (ARP/ND, VRRP, IPsec's IKE, in standalone
	// mode anything for its addresses): policed; ESP is not classed (data).
	if (v != V_REDIRECT && !steer_police(ctx))
		return XDP_DROP;
	// The flags argument is the action when the queue has no socket.
	int act = bpf_redirect_map(&tern_xsks, ctx->rx_queue_index, XDP_PASS);
	if (act == XDP_REDIRECT)
		return count(v, act);
	return count(V_PASS_NO_XSK, XDP_PASS);
}

struct vlan_hdr {
	__be16 tci;
	__be16 proto;
};

struct ipv4_min {
	__u8 ver_ihl;
	__u8 tos;
	__be16 tot_len;
	__be16 id;
	__be16 frag;
	__u8 ttl;
	__u8 proto;
	__be16 csum;
	__be32 saddr;
	__be32 daddr;
};

struct ipv6_min {
	__be32 vtc_flow;
	__be16 payload_len;
	__u8 nexthdr;
	__u8 hop_limit;
	__u8 saddr[16];
	__u8 daddr[16];
};

// RFC 4861 section 4: Router Solicitation 133 .. Redirect 137.
#define ICMPV6_ND_FIRST 133
#define ICMPV6_ND_LAST 137
#define IPPROTO_ICMPV6_ 58
#define IPPROTO_VRRP_ 112

// ff02::12, VRRP's IPv6 group (RFC 5798 5.1.2.2).
static __always_inline int is_ff02_12(const __u8 *a)
{
	if (a[0] != 0xff || a[1] != 0x02 || a[15] != 0x12)
		return 0;
	for (int i = 2; i < 15; i++)
		if (a[i])
			return 0;
	return 1;
}
#define IPPROTO_ESP_ 50

// ESP, or ESP in UDP on NAT-T's port 4500 (RFC 3948) or on another port
// an SA uses locally (`tern_encap_ports`), with the transport header at
// `l4`: what tern's esp-decrypt takes in Linux mode (the only mode with
// local addresses here). IKE stays the kernel's, whose sockets the IKE
// service binds: UDP 500, and on 4500 the non-ESP marker (four zero
// bytes where ESP's SPI would be) and NAT keep-alives (one 0xff byte),
// both too short or zero in those four bytes. On the SAs' other ports
// everything is tern's (esp-decrypt counts what is not ESP).
static __always_inline int is_ipsec(__u8 proto, __u8 *l4, void *end)
{
	if (proto == IPPROTO_ESP_)
		return 1;
	if (proto != IPPROTO_UDP || (void *)(l4 + 4) > end)
		return 0;
	__u16 dport = ((__u16)l4[2] << 8) | l4[3];
	if (dport == 4500)
		return (void *)(l4 + 12) <= end && (l4[8] | l4[9] | l4[10] | l4[11]) != 0;
	return dport != 500 && bpf_map_lookup_elem(&tern_encap_ports, l4 + 2) != 0;
}

SEC("xdp")
int tern_steer(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 zero = 0;
	__u32 cfg = 0;
	__u32 *cfgp = bpf_map_lookup_elem(&tern_config, &zero);
	if (cfgp)
		cfg = *cfgp;
	if (cfg & CFG_PASS_ALL)
		return count(V_PASS_OTHER, XDP_PASS);

	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return count(V_PASS_OTHER, XDP_PASS);
	// What tern's ethernet-input or ip4/ip6-input drops goes to tern, so
	// that it is counted there (a group source address, a truncated or
	// nested 802.1Q tag, a truncated IP header; in standalone mode any
	// EtherType but IP and ARP): only Linux mode leaves the EtherTypes
	// tern does not handle (LLDP, LACP, ...) to Linux.
	if (eth->h_source[0] & 1)
		return to_xsk(ctx, V_REDIRECT);
	__u16 proto = eth->h_proto;
	void *l3 = eth + 1;
	// One 802.1Q or 802.1ad tag: tern's VLAN sub-interfaces live behind it.
	if (proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD)) {
		struct vlan_hdr *vh = l3;
		if ((void *)(vh + 1) > end)
			return to_xsk(ctx, V_REDIRECT);
		proto = vh->proto;
		l3 = vh + 1;
		if (proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD))
			return to_xsk(ctx, V_REDIRECT);
	}

	if (proto == bpf_htons(ETH_P_ARP)) {
		if (cfg & CFG_NEIGH_TO_TERN)
			return to_xsk(ctx, V_REDIRECT_NEIGH);
		return pass_policed(ctx, V_PASS_NEIGH);
	}

	if (proto == bpf_htons(ETH_P_IP)) {
		struct ipv4_min *ip = l3;
		if ((void *)(ip + 1) > end)
			return to_xsk(ctx, V_REDIRECT);
		__u32 dst = ip->daddr;
		if (bpf_map_lookup_elem(&tern_local4, &dst)) {
			// ESP, every fragment of it too (the kernel does not
			// reassemble before XDP: tern's ip4-reassembly does); UDP
			// 4500 unfragmented only: a UDP fragment's ports are in the
			// first alone, so all of them go to Linux, which
			// reassembles them (IKE with certificates; ESP in UDP,
			// which tern's UDP 4500 sockets then hand to the engine's
			// esp-from-kernel: crates/control/src/esp_kernel.rs).
			if ((cfg & CFG_IPSEC_TO_TERN) &&
			    (ip->proto == IPPROTO_ESP_ || (ip->frag & bpf_htons(0x3fff)) == 0) &&
			    is_ipsec(ip->proto, (__u8 *)ip + (ip->ver_ihl & 0x0f) * 4, end))
				return to_xsk(ctx, V_REDIRECT_IPSEC);
			// Standalone mode: tern's own (ip4-local), policed.
			if (cfg & CFG_NEIGH_TO_TERN)
				return to_xsk(ctx, V_REDIRECT_LOCAL);
			return pass_policed(ctx, V_PASS_LOCAL);
		}
		// In standalone mode tern runs VRRP itself: its advertisements
		// (protocol 112 to 224.0.0.18, RFC 5798 5.1.1.2) go to tern.
		if ((cfg & CFG_NEIGH_TO_TERN) && ip->proto == IPPROTO_VRRP_ && dst == bpf_htonl(0xe0000012))
			return to_xsk(ctx, V_REDIRECT_VRRP);
		// 224.0.0.0/4 multicast (OSPF, VRRP, IGMP...) and limited broadcast:
		// control traffic, never forwarded by tern.
		if ((dst & bpf_htonl(0xf0000000)) == bpf_htonl(0xe0000000) || dst == 0xffffffff)
			return pass_policed(ctx, V_PASS_MCAST);
		return to_xsk(ctx, V_REDIRECT);
	}

	if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6_min *ip6 = l3;
		if ((void *)(ip6 + 1) > end)
			return to_xsk(ctx, V_REDIRECT);
		// Neighbour discovery first: RFC 4861 messages carry no extension
		// headers in practice and go to multicast or to our own addresses.
		if (ip6->nexthdr == IPPROTO_ICMPV6_) {
			__u8 *type = (__u8 *)(ip6 + 1);
			if ((void *)(type + 1) <= end && *type >= ICMPV6_ND_FIRST && *type <= ICMPV6_ND_LAST) {
				if (cfg & CFG_NEIGH_TO_TERN)
					return to_xsk(ctx, V_REDIRECT_NEIGH);
				return pass_policed(ctx, V_PASS_NEIGH);
			}
		}
		struct in6_key key;
		__builtin_memcpy(key.b, ip6->daddr, 16);
		if (bpf_map_lookup_elem(&tern_local6, &key)) {
			// ESP or UDP 4500 also behind extension headers (hop-by-hop,
			// routing, destination options, a first fragment, AH).
			if (cfg & CFG_IPSEC_TO_TERN) {
				// A fragment: ESP's to tern, UDP's to Linux (as in IPv4:
				// ESP in UDP comes back to tern through its socket).
				int f = ip6_frag_nh((__u8 *)(ip6 + 1), ip6->nexthdr, end);
				if (f == IPPROTO_ESP_)
					return to_xsk(ctx, V_REDIRECT_IPSEC);
				__u8 nh = ip6->nexthdr;
				const __u8 *l4 = ip6_skip_ext((__u8 *)(ip6 + 1), &nh, end);
				if (f < 0 && l4 && is_ipsec(nh, (__u8 *)l4, end))
					return to_xsk(ctx, V_REDIRECT_IPSEC);
			}
			if (cfg & CFG_NEIGH_TO_TERN)
				return to_xsk(ctx, V_REDIRECT_LOCAL);
			return pass_policed(ctx, V_PASS_LOCAL);
		}
		// VRRP for IPv6 (next header 112 to ff02::12) in standalone mode.
		if ((cfg & CFG_NEIGH_TO_TERN) && ip6->nexthdr == IPPROTO_VRRP_ && is_ff02_12(ip6->daddr))
			return to_xsk(ctx, V_REDIRECT_VRRP);
		// ff00::/8 multicast (OSPFv3, MLD, DHCPv6...).
		if (ip6->daddr[0] == 0xff)
			return pass_policed(ctx, V_PASS_MCAST);
		return to_xsk(ctx, V_REDIRECT);
	}

	if (cfg & CFG_NEIGH_TO_TERN)
		return to_xsk(ctx, V_REDIRECT);
	return count(V_PASS_OTHER, XDP_PASS);
}

char _license[] SEC("license") = "Dual MIT/GPL";
