// SPDX-License-Identifier: Apache-2.0 OR MIT
//
// The XDP lane's shared definitions: map value layouts and counters.
//
// crates/xdp/src/lane/layout.rs mirrors every struct here field for field
// and its build checks each field's offset and size against the compiled
// object's BTF (build.rs), so a field added, removed or moved here alone
// fails the crate's build; crates/xdp/src/lane/counters.rs reads the
// LANE_COUNTER lines of this file to name the counters, so a counter added
// here is named in Rust without a second list.

#ifndef TERN_LANE_H
#define TERN_LANE_H

#include <linux/types.h>

// Capacities. Rust: lane/layout.rs (same names).
#define LANE_MAX_PORTS 32     // tern ports (physical interfaces)
#define LANE_MAX_QUEUES 64    // receive queues per port (XSK map)
#define LANE_MAX_IFS 4096     // tern interfaces (ports, VLANs, tunnels)
#define LANE_MAX_SETS 64      // ACL rule sets
#define LANE_ACL_RULES 64     // lowered rules per set and family (bits)
#define LANE_ACL_INTERVALS 128 // intervals per field
#define LANE_NF 11            // ACL fields (crates/acl/src/lower.rs order)
#define LANE_BLOCK 256        // entries per FIB map element (u16 IPv4, u32 otherwise)
#define LANE_MAX_TUNNELS 1024

// lane_cfg.flags
#define LCFG_NEIGH_TO_TERN (1u << 0) // ARP/ND to tern's XSK, else to Linux
#define LCFG_PASS_ALL (1u << 1)      // lane paused: everything to Linux
#define LCFG_LINUX_MODE (1u << 2)    // Linux owns the router's addresses
// lane_local4 / lane_local6 may hold an address (the loader sets the flag
// before the first insert and clears it once the map is empty): without
// it a packet skips the hash lookup, which tern's own control plane, which
// adds none, never needs.
#define LCFG_LOCAL4 (1u << 3)
#define LCFG_LOCAL6 (1u << 4)
// A trace is armed (`tern trace start N`): packets the lane decides are
// recorded in lane_trace while lane_trace_budget is above zero.
#define LCFG_TRACE (1u << 5)
// The fast paths, switched at run time (`[dataplane.fast_paths]`, `tern
// dataplane fastpaths`), read once per packet with the rest of the flags:
// set, the ACL verdict cache and its memo are not used and the forwarding
// memo holds no flow that a rule set decides (`acl_shortcut` off; every
// verdict comes from the classifier) ...
#define LCFG_NO_ACL_CACHE (1u << 6)
// ... the forwarding memo is not used (`direct` off: every packet takes
// the whole path).
#define LCFG_NO_FWD_MEMO (1u << 7)
// tern terminates IPsec (an ipsec tunnel is configured): in Linux mode ESP
// and ESP in UDP 4500 for the router's addresses go to tern's engine
// instead of Linux, IKE (UDP 500, 4500 with the non-ESP marker) staying
// the kernel's (standalone mode hands every local packet to the engine
// anyway, ESP and UDP 500/4500 counted as punt-ipsec).
#define LCFG_IPSEC (1u << 8)
// Some SA uses a local ESP-in-UDP port other than 4500: lane_encap_ports
// holds them (without it no packet looks one up).
#define LCFG_ENCAP_PORTS (1u << 9)

struct lane_cfg {
	// Publication sequence: bit 0 says which half of the double-buffered
	// tables is live; the whole word tags ACL verdict cache entries, so one
	// store swaps the tables and retires every cached verdict.
	__u32 gen;
	__u32 flags;
	// FIB sequence: the loader bumps it after every FIB mirror sync that
	// wrote an entry (routes, next hops, neighbour MACs: all arrive that
	// way), after the entries; it tags the forwarding memo
	// (lane_fwd_memo) with `gen`. (Builds of the program before the memo
	// have an 8-byte lane_cfg: the loader writes what the map holds.)
	__u32 fib_gen;
	__u32 pad;
};
_Static_assert(sizeof(struct lane_cfg) == 16, "lane_cfg layout");

// Receive side: kernel ifindex -> tern port (array indexed by the low 16
// bits of the kernel ifindex; `kifindex` must match).
struct lane_rx {
	__u32 kifindex;
	__u16 ifindex; // tern interface index of the port
	__u16 port;    // tern port number (XSK and devmap keys)
};

// lane_if.flags
#define LIF_EXISTS (1u << 0)
#define LIF_UP (1u << 1)
#define LIF_TX (1u << 2) // its carrier port is in the lane's devmap
#define LIF_CAPTURE (1u << 3) // a port being captured: its frames go to the engine

// lane_if.kind
#define LIF_PORT 0
#define LIF_VLAN 1
#define LIF_GRE 2

#define LANE_NO_SET 0xffff
#define LANE_NO_IF 0xffff

// VLAN demux (lane_vlans): (gen * LANE_MAX_PORTS + port) * 4096 + VID ->
// sub-interface index + 1, 0 for none (what a fresh array map holds).

// A virtual MAC an interface accepts as its own (VRRP's, tern's
// Iface::vmacs): the key of lane_vmacs (value: 1). Not double-buffered: the
// loader adds an interface's new ones before a publication and removes the
// old ones after it. ifindex: the tern interface (a port's, or a VLAN
// sub-interface's for frames with its tag).
#define LANE_MAX_VMACS 1024
struct lane_vmac_key {
	__u16 ifindex;
	__u8 mac[6];
};
_Static_assert(sizeof(struct lane_vmac_key) == 8, "lane_vmac_key layout");

// One tern interface, keyed by gen * LANE_MAX_IFS + tern ifindex.
struct lane_if {
	__u8 flags;
	__u8 kind;
	__u16 port; // carrier port (devmap key); LANE_NO_IF for tunnels
	__u16 vid;
	__u16 mtu; // IP MTU
	__u8 mac[6];
	__u16 acl_in; // rule set index or LANE_NO_SET
	__u16 acl_out;
	__u16 pad;
	__u8 v6_ll[16]; // link-local address (ip6-input's link-local check)
	__u8 gre_v6;    // outer family of a tunnel
	__u8 gre_has_key;
	__u8 gre_ttl;
	__u8 pad2;
	__u32 gre_key; // host order
	__u8 gre_local[16]; // IPv4: first 4 bytes
	__u8 gre_remote[16];
};
_Static_assert(sizeof(struct lane_if) == 76, "lane_if layout");

// GRE decapsulation: (gen, family, key, endpoints) -> tunnel ifindex.
struct lane_tun_key {
	__u8 gen;
	__u8 v6;
	__u8 has_key;
	__u8 pad;
	__u32 key;
	__u8 local[16];
	__u8 remote[16];
};
_Static_assert(sizeof(struct lane_tun_key) == 40, "lane_tun_key layout");

// ACL: one header per (gen, set, family) ...
#define LACL_OK (1u << 0) // compiled exactly; otherwise packets go to userspace

struct lane_acl_set {
	__u32 flags;
	__u32 fields; // bit f: some rule constrains field f
	__u64 all;    // one bit per lowered rule, in rule order
	__u64 terminal;
	__u64 drop;
	__u64 count;
	__u32 default_drop;
	__u32 nrules;
	// The verdict cache's key masks: the bits of the constrained fields
	// in the two packed key words (LANE_CK_*).
	__u64 cmask[2];
};
_Static_assert(sizeof(struct lane_acl_set) == 64, "lane_acl_set layout");

// ... and one interval table per (gen, set, family, field): the field's
// domain cut into `n` intervals starting at (hi, lo), each with the rules
// that match there. Starts beyond `n` hold LANE_ACL_PAD in `lo`, and
// `top[j]` repeats lo[8 j] (top[0] is 0): the two levels of acl_field64's
// search (the 16 blocks of 8 starts, then the 8 starts of one block), in
// one cache line pair for the first level.
#define LANE_ACL_TOP (LANE_ACL_INTERVALS / 8)
#define LANE_ACL_PAD (1ull << 62) // above every value of a 64-bit-searched field

struct lane_acl_field {
	__u32 n;
	__u32 pad;
	__u64 top[LANE_ACL_TOP];
	__u64 lo[LANE_ACL_INTERVALS];
	__u64 hi[LANE_ACL_INTERVALS];
	__u64 bits[LANE_ACL_INTERVALS];
};
_Static_assert(sizeof(struct lane_acl_field) == 8 + 8 * LANE_ACL_TOP + 3 * 8 * LANE_ACL_INTERVALS,
	       "lane_acl_field layout");

// ACL verdict cache (lane_acl_cache): per CPU, buckets of
// LANE_ACL_CACHE_WAYS entries of one cache line each, indexed by a hash of
// the classifier key. The map is a plain array, page-aligned
// (BPF_F_MMAPABLE), holding one slice of buckets per possible CPU (the
// program indexes it with its CPU number), so entries are line-aligned and
// a lookup is inlined by the verifier, no helper call. An entry holds the
// key with the fields its rule set does not constrain zeroed, the
// addresses as they are and the other fields packed into two words
// (acl_ckey_pack), plus the rule set's table index + 1 (so a zeroed entry
// matches nothing), the lane_cfg.gen it was computed under, and what the
// classifier decided; a hit replays exactly the rule hits the classifier
// would have recorded. The loader sets the buckets per CPU (tests force
// collisions with one bucket); the program reads the index mask from
// lane_acl_cache_mask.
// Where acl_ckey_pack puts each non-address field in the two packed key
// words: bit position (word * 64 + shift) and width. Every field value
// fits its width by construction (ports, ICMP type/code: 16 bits or
// ABSENT16; TCP flags: 8 bits or ABSENT8; the VLAN id 12 bits; DSCP 6).
// Rust: lane/layout.rs CKEY_FIELDS (checked against these lines).
#define LANE_CK_SPORT_AT 0
#define LANE_CK_SPORT_BITS 17
#define LANE_CK_DPORT_AT 17
#define LANE_CK_DPORT_BITS 17
#define LANE_CK_ICMP_AT 34
#define LANE_CK_ICMP_BITS 17
#define LANE_CK_TCP_AT 51
#define LANE_CK_TCP_BITS 9
#define LANE_CK_PROTO_AT 64
#define LANE_CK_PROTO_BITS 8
#define LANE_CK_IIF_AT 72
#define LANE_CK_IIF_BITS 16
#define LANE_CK_OIF_AT 88
#define LANE_CK_OIF_BITS 16
#define LANE_CK_VLAN_AT 104
#define LANE_CK_VLAN_BITS 12
#define LANE_CK_DSCP_AT 116
#define LANE_CK_DSCP_BITS 6
#define LANE_ACL_CACHE_BUCKETS 1024
#define LANE_ACL_CACHE_WAYS 2
#define LANE_ACL_CKEY 6 // u64 key words: 4 address words, 2 of packed fields

struct lane_acl_centry {
	__u64 key[LANE_ACL_CKEY];
	__u64 counted; // count-only rules matched below the deciding one
	__u32 epoch;   // lane_cfg.gen it was computed under
	__u16 base1;   // the rule set's table index + 1
	__u8 decide;   // bit of the deciding rule; LANE_ACL_RULES: the default
	__u8 verdict;  // 0 accept, 1 drop
};
_Static_assert(sizeof(struct lane_acl_centry) == 64, "lane_acl_centry layout");

// Way 0 holds the entry filled last: a fill moves way 0 to way 1 (first in,
// first out; a hit writes nothing, its line may be cold).
struct lane_acl_cbucket {
	struct lane_acl_centry way[LANE_ACL_CACHE_WAYS];
};
_Static_assert(sizeof(struct lane_acl_cbucket) == 128, "lane_acl_cbucket layout");

// The forwarding memo (lane_fwd_flows): per CPU, a flow table of
// buckets of LANE_FWD_WAYS entries, indexed by a hash of the key, each
// entry a flow the lane forwarded through its whole path (ip4/ip6 on the
// received header, no tunnel, no ECMP group whose member the key does
// not pick), or that the input rule set dropped, with what that path
// decided:
// the egress port, VLAN and MACs, the egress MTU (l2len 0: dropped), and
// the rule hits of the input and output rule sets. A packet whose
// classifier key (addresses, protocol, ports, ICMP type, TCP flags,
// receiving interface, VLAN, DSCP) and family are an entry's (for an
// IPv6 ECMP flow, whose member the hash of the flow label picks, with the
// entry's flow label), under the
// same lane_cfg.gen (interfaces, VLANs, rule sets) and lane_cfg.fib_gen
// (routes, next hops, neighbours), takes that decision after the checks
// that depend on the packet itself (TTL, MTU): no rule set, FIB, next hop
// or egress interface lookup. Like the verdict cache, the map is a plain
// page-aligned array (BPF_F_MMAPABLE) holding one slice of buckets per
// possible CPU (the loader sets the buckets per CPU, a power of two; the
// program reads the index mask from lane_fwd_flows_mask). An entry is two
// aligned cache lines, and an IPv4 flow with at most one rule hit (plain
// forwarding, single-flow-50fw) reads only the first: the key's words
// but the high address words (zero for IPv4), the tags, the family, the
// egress port and MTU, and, where an IPv6 flow keeps its high address
// words, the L2 (MACs, VLAN) and the first hit's slot. An IPv6 flow keeps
// those in the second line, with the other hits and the flow label.
#define LANE_FM_HITS 8 // as many as a packet records (lib/state.h MAX_HITS)
#define LANE_FWD_BUCKETS 2048 // default buckets per CPU (4096 flows)
#define LANE_FWD_WAYS 2

struct lane_fwd_l2 {
	__u8 dmac[6];
	__u8 smac[6];
	__u16 tx_vid;
	__u16 slot0; // slot[0] (lane_acl_hits keys are below 2^15)
};
_Static_assert(sizeof(struct lane_fwd_l2) == 16, "lane_fwd_l2 layout");

struct lane_fwd_flow {
	// The key (no output interface): K_SRC_LO, K_DST_LO, K_P0, K_P1 ...
	__u64 lo[4];
	union {
		__u64 hi[2];           // ... and IPv6's K_SRC_HI, K_DST_HI
		struct lane_fwd_l2 l2; // IPv4's L2 (its high words are zero)
	};
	__u32 epoch;   // lane_cfg.gen  } one word: the tag
	__u32 fib_gen; // lane_cfg.fib_gen }
	__u16 mtu;     // the egress interface's IP MTU; into a tunnel: the largest inner packet
	__u16 tx_port;
	__u8 v6;
	__u8 l2len;   // 14 or 18; 0: the input rule set drops the flow; LANE_FM_LOCAL
	__u8 hits;    // rule hits: slot[0 .. hits)
	__u8 hits_in; // the first hits_in of them are the input rule set's
	// Second line.
	struct lane_fwd_l2 l2_v6; // IPv6's L2
	__u32 slot[LANE_FM_HITS]; // lane_acl_hits keys
	__u32 label;      // IPv6: the flow label ...
	__u32 label_mask; // ... that a packet must have (ECMP: 0xfffff, else 0)
	__u16 tun_if;     // into a GRE tunnel: its interface ...
	__u8 o_over;      // ... and the outer headers' length (0: no tunnel)
	__u8 pad[5];
};
_Static_assert(sizeof(struct lane_fwd_flow) == 128, "lane_fwd_flow layout");
// lane_fwd_flow.l2len of GRE to one of the router's addresses: the packet
// goes on to gre-input (its tx_port: LANE_FM_LOCAL_PORT).
#define LANE_FM_LOCAL 1
#define LANE_FM_LOCAL_PORT 0xffff

// A fill takes a way whose tags are not the packet's, else one at random
// (no entry is moved; a hit writes nothing).
struct lane_fwd_fbucket {
	struct lane_fwd_flow way[LANE_FWD_WAYS];
};
_Static_assert(sizeof(struct lane_fwd_fbucket) == 256, "lane_fwd_fbucket layout");

struct lane_hits {
	__u64 packets;
	__u64 bytes;
};

// FIB next hop: words 0 and 1 of tern-fib's next-hop entry, verbatim
// (crates/fib/src/nexthop.rs).
struct lane_nh {
	__u64 meta; // kind | ifindex << 8 | v6 << 24 | ECMP count << 32
	__u64 mac;  // MAC (6 bytes, memory order) | valid << 48; ECMP: first member
};

#define NH_KIND_NONE 0
#define NH_KIND_UNICAST 1
#define NH_KIND_GLEAN 2
#define NH_KIND_LOCAL 3
#define NH_KIND_BLACKHOLE 4
#define NH_KIND_UNREACHABLE 5
#define NH_KIND_PROHIBIT 6
#define NH_KIND_ECMP 7
#define NH_MAC_VALID (1ull << 48)
// FIB entries are 16 bits; an entry e >= FIB*_CHILD points to block
// e - FIB*_CHILD, a smaller one is a next-hop id (tern-fib's V4Entry and
// V6Entry).
#define FIB4_CHILD 0x8000u
#define FIB6_CHILD 0x2000u

// Per-port packet counters (per CPU), keyed by port: one value (one map
// lookup, one cache line) per port and packet side.
struct lane_port_stats {
	__u64 rx_packets;
	__u64 rx_bytes;
	__u64 tx_packets;
	__u64 tx_bytes;
};

// One traced packet (lane_trace ring buffer; Rust: lane/trace.rs). The
// frame's first bytes as received, what the lane decided and, for a
// forwarded packet, the rewrite it made.
#define LANE_TRACE_HEAD 128
struct lane_trace {
	__u64 t_ns;     // bpf_ktime_get_ns (CLOCK_MONOTONIC)
	__u32 kifindex; // receiving device
	__u32 len;      // frame length as received
	__u32 reason;   // counter id of a drop, punt or pass (C_*)
	__u16 port;     // receiving port
	__u16 rx_if;    // tern interface (after VLAN demux and decapsulation)
	__u16 tx_port;  // forwarded: the port it leaves by
	__u16 tx_vid;   // and the 802.1Q id it is sent with (0: none)
	__u8 verdict;   // V_FWD, V_DROP, V_PUNT, V_PASS (lib/state.h)
	__u8 action;    // the XDP action returned
	__u8 cpu;
	__u8 flags;     // LTR_*
	__u8 dmac[6];   // forwarded: the MACs written
	__u8 smac[6];
	__u8 o_src[16]; // encapsulated: the outer addresses (IPv4: first 4)
	__u8 o_dst[16];
	__u32 cap;      // bytes of head[] filled
	__u8 head[LANE_TRACE_HEAD];
};
_Static_assert(sizeof(struct lane_trace) == 208, "lane_trace layout");
#define LTR_DECAP (1u << 0) // a GRE packet was decapsulated
#define LTR_ENCAP (1u << 1) // forwarded into a GRE tunnel
#define LTR_OUTER_V6 (1u << 2)
#define LTR_V6 (1u << 3)     // the forwarded header is IPv6
#define LTR_DEC_TTL (1u << 4) // TTL / hop limit decremented
// The fast paths that decided the packet (lib/state.h P_*, the same bits):
#define LTR_FWD_MEMO (1u << 5)   // the forwarding memo (an earlier packet's decision)
#define LTR_ACL_IN_CACHED (1u << 6)  // the input rule set's verdict from the verdict cache
#define LTR_ACL_OUT_CACHED (1u << 7) // the output rule set's

// Control traffic first (lib/punt.h): what the lane hands to Linux or
// to the engine for the router itself is classed, and each class has its
// own policer per CPU (lane_punt_rate, lane_punt_tat), so a flood of one
// class cannot take the others' place in the kernel's or the engine's
// queue. The order is the SHED_* counters' and crates/nodes' PuntClass's.
#define PC_NEIGH 0 // ARP, ND (ICMPv6 133-137)
#define PC_BGP 1   // TCP port 179, either side
#define PC_OSPF 2  // IP protocol 89
#define PC_VRRP 3  // IP protocol 112
#define PC_IKE 4   // UDP 500, UDP 4500 with the non-ESP marker, NAT keepalives
#define PC_BFD 5   // UDP 3784, 3785, 4784 (to the port)
#define PC_LOCAL 6 // anything else for the router: the bulk, policed low
#define PC_MAX 7   // not policed: ESP (data), non-IP (LLDP, LACP)

// Counters: LANE_COUNTER(id, node, error, kind). The node/error names are
// the userspace nodes' (so both lanes add up under one name); the
// "xdp-lane" ones say where a packet went. kind: drop (a dropped packet),
// info (counted, packet continues), punt (to tern's userspace engine),
// pass (to Linux), fwd (sent by the lane). The fast paths' counters follow
// `forwarded`, which a packet they decide also counts: their slots in the
// map's per-CPU pointer array share its cache line, and the elements,
// allocated in index order, most likely its line too (not measured apart:
// `tern-bench lane` cannot resolve it).
#define LANE_COUNTERS(X)                                                                       \
	X(FORWARDED, "xdp-lane", "forwarded", fwd)                                             \
	X(FWD_MEMO, "xdp-lane", "fwd-memo", info)                                              \
	X(ACL_CACHED, "xdp-lane", "acl-cached", info)                                          \
	X(PUNT_NEIGH, "xdp-lane", "punt-neighbor", punt)                                       \
	X(PUNT_LOCAL, "xdp-lane", "punt-local", punt)                                          \
	X(PUNT_IPSEC, "xdp-lane", "punt-ipsec", punt)                                          \
	X(PUNT_NO_ROUTE, "xdp-lane", "punt-icmp-route", punt)                                  \
	X(PUNT_TTL, "xdp-lane", "punt-ttl", punt)                                              \
	X(PUNT_TOO_BIG, "xdp-lane", "punt-too-big", punt)                                      \
	X(PUNT_SCOPE, "xdp-lane", "punt-scope", punt)                                          \
	X(PUNT_UNRESOLVED, "xdp-lane", "punt-unresolved", punt)                                \
	X(PUNT_OPTIONS, "xdp-lane", "punt-options", punt)                                      \
	X(PUNT_FRAGMENT, "xdp-lane", "punt-fragment", punt)                                    \
	X(PUNT_GRE, "xdp-lane", "punt-gre", punt)                                              \
	X(PUNT_ACL, "xdp-lane", "punt-acl", punt)                                              \
	X(PUNT_FIB, "xdp-lane", "punt-fib", punt)                                              \
	X(PUNT_EGRESS, "xdp-lane", "punt-egress", punt)                                        \
	X(PUNT_OTHER, "xdp-lane", "punt-other", punt)                                          \
	X(PUNT_CAPTURE, "xdp-lane", "punt-capture", punt)                                      \
	X(PASS_LOCAL, "xdp-lane", "pass-local", pass)                                          \
	X(PASS_NEIGH, "xdp-lane", "pass-neighbor", pass)                                       \
	X(PASS_MCAST, "xdp-lane", "pass-multicast", pass)                                      \
	X(PASS_OTHER, "xdp-lane", "pass-non-ip", pass)                                         \
	X(PASS_NOT_LANE, "xdp-lane", "pass-not-lane", pass)                                    \
	X(PASS_NO_XSK, "xdp-lane", "pass-no-xsk", pass)                                        \
	X(ETH_TOO_SHORT, "ethernet-input", "too-short", drop)                                  \
	X(ETH_SRC_MULTICAST, "ethernet-input", "multicast-source", drop)                       \
	X(ETH_NO_IF, "ethernet-input", "no-interface", drop)                                   \
	X(ETH_IF_DOWN, "ethernet-input", "interface-down", drop)                               \
	X(ETH_NOT_FOR_US, "ethernet-input", "not-for-us", drop)                                \
	X(ETH_UNKNOWN_VLAN, "ethernet-input", "unknown-vlan", drop)                            \
	X(ETH_NESTED_VLAN, "ethernet-input", "nested-vlan", drop)                              \
	X(ETH_UNKNOWN_ETHERTYPE, "ethernet-input", "unknown-ethertype", drop)                  \
	X(IP4_TOO_SHORT, "ip4-input", "too-short", drop)                                       \
	X(IP4_BAD_VERSION, "ip4-input", "bad-version", drop)                                   \
	X(IP4_BAD_HDR_LEN, "ip4-input", "bad-header-length", drop)                             \
	X(IP4_BAD_LEN, "ip4-input", "bad-length", drop)                                        \
	X(IP4_TRUNCATED, "ip4-input", "truncated", drop)                                       \
	X(IP4_BAD_CSUM, "ip4-input", "bad-checksum", drop)                                     \
	X(IP4_MARTIAN, "ip4-input", "martian-source", drop)                                    \
	X(IP4_MULTICAST, "ip4-input", "multicast", drop)                                       \
	X(IP4_BROADCAST, "ip4-input", "broadcast", drop)                                       \
	X(IP4_MARTIAN_DST, "ip4-input", "martian-destination", drop)                           \
	X(IP4_L2_MULTI, "ip4-input", "l2-multicast", drop)                                     \
	X(IP6_TOO_SHORT, "ip6-input", "too-short", drop)                                       \
	X(IP6_BAD_VERSION, "ip6-input", "bad-version", drop)                                   \
	X(IP6_TRUNCATED, "ip6-input", "truncated", drop)                                       \
	X(IP6_MARTIAN, "ip6-input", "martian-source", drop)                                    \
	X(IP6_BAD_DST, "ip6-input", "bad-destination", drop)                                   \
	X(IP6_MULTICAST, "ip6-input", "multicast", drop)                                       \
	X(IP6_LINK_LOCAL, "ip6-input", "link-local-not-ours", drop)                            \
	X(IP6_L2_MULTI, "ip6-input", "l2-multicast", drop)                                     \
	X(ACL4_IN_DENIED, "ip4-acl-in", "denied", drop)                                        \
	X(ACL6_IN_DENIED, "ip6-acl-in", "denied", drop)                                        \
	X(ACL4_OUT_DENIED, "ip4-acl-out", "denied", drop)                                      \
	X(ACL6_OUT_DENIED, "ip6-acl-out", "denied", drop)                                      \
	X(IP4_BLACKHOLE, "ip4-lookup", "blackhole", drop)                                      \
	X(IP6_BLACKHOLE, "ip6-lookup", "blackhole", drop)                                      \
	X(RW4_NO_IF, "ip4-rewrite", "no-interface", drop)                                      \
	X(RW4_IF_DOWN, "ip4-rewrite", "interface-down", drop)                                  \
	X(RW4_FRAG, "ip4-rewrite", "fragmentation-unsupported", drop)                          \
	X(RW4_HEADROOM, "ip4-rewrite", "no-headroom", drop)                                    \
	X(RW4_BAD_NH, "ip4-rewrite", "bad-nexthop", drop)                                      \
	X(RW6_NO_IF, "ip6-rewrite", "no-interface", drop)                                      \
	X(RW6_IF_DOWN, "ip6-rewrite", "interface-down", drop)                                  \
	X(RW6_HEADROOM, "ip6-rewrite", "no-headroom", drop)                                    \
	X(RW6_BAD_NH, "ip6-rewrite", "bad-nexthop", drop)                                      \
	X(GRE_ENCAPSULATED, "gre-encap", "encapsulated", info)                                 \
	X(GRE_RECURSION, "gre-encap", "recursive-encapsulation", drop)                         \
	X(GRE_NOT_TUNNEL, "gre-encap", "not-a-tunnel", drop)                                   \
	X(GRE_DECAPSULATED, "gre-input", "decapsulated", info)                                 \
	X(GRE_BAD_HEADER, "gre-input", "bad-header", drop)                                     \
	X(GRE_BAD_PAYLOAD, "gre-input", "unsupported-payload", drop)                           \
	X(GRE_NO_TUNNEL, "gre-input", "no-tunnel", drop)                                       \
	X(GRE_TUNNEL_DOWN, "gre-input", "tunnel-down", drop)                                  \
	X(TRACE_LOST, "xdp-lane", "trace-lost", info)                                          \
	X(SHED_NEIGH, "xdp-lane", "punt-shed-neighbor", drop)                                  \
	X(SHED_BGP, "xdp-lane", "punt-shed-bgp", drop)                                         \
	X(SHED_OSPF, "xdp-lane", "punt-shed-ospf", drop)                                       \
	X(SHED_VRRP, "xdp-lane", "punt-shed-vrrp", drop)                                       \
	X(SHED_IKE, "xdp-lane", "punt-shed-ike", drop)                                         \
	X(SHED_BFD, "xdp-lane", "punt-shed-bfd", drop)                                         \
	X(SHED_LOCAL, "xdp-lane", "punt-shed-local", drop)

#define LANE_COUNTER_ID(id, node, err, kind) C_##id,
enum lane_counter { LANE_COUNTERS(LANE_COUNTER_ID) C_MAX };
#undef LANE_COUNTER_ID

#endif
