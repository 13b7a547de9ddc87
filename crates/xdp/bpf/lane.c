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

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "lane.h"

// ------------------------------------------------------------------ maps

struct lane_block {
	__u32 e[LANE_BLOCK];
};

// The FIB's entries are 16 bits (tern-fib's V4Entry and V6Entry).
struct lane_block16 {
	__u16 e[LANE_BLOCK];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lane_cfg);
} lane_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct lane_rx);
} lane_rx SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * LANE_MAX_IFS);
	__type(key, __u32);
	__type(value, struct lane_if);
} lane_ifs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * LANE_MAX_PORTS * 4096);
	__type(key, __u32);
	__type(value, __u16);
} lane_vlans SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 2 * LANE_MAX_TUNNELS);
	__type(key, struct lane_tun_key);
	__type(value, __u16);
} lane_tunnels SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32); // IPv4 address, network byte order
	__type(value, __u8);
} lane_local4 SEC(".maps");

struct in6_key {
	__u8 b[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct in6_key);
	__type(value, __u8);
} lane_local6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * LANE_MAX_SETS * 2);
	__type(key, __u32);
	__type(value, struct lane_acl_set);
} lane_acl_sets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * LANE_MAX_SETS * 2 * LANE_NF);
	__type(key, __u32);
	__type(value, struct lane_acl_field);
} lane_acl_fields SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2 * LANE_MAX_SETS * 2 * (LANE_ACL_RULES + 1));
	__type(key, __u32);
	__type(value, struct lane_hits);
} lane_acl_hits SEC(".maps");

// The ACL verdict cache (lane.h): the loader sizes it to the buckets per
// CPU times the possible CPUs and sets the mask (buckets per CPU - 1;
// lane_acl_cache_on = 0 turns the cache off).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE); // page-aligned values: line-aligned buckets
	__uint(max_entries, LANE_ACL_CACHE_BUCKETS);
	__type(key, __u32);
	__type(value, struct lane_acl_cbucket);
} lane_acl_cache SEC(".maps");

// The verdict cache's memo: per CPU and direction (input, output rule
// sets), the last classification (acl_eval), an entry whose key is the
// packet's, unmasked. The loader zeroes it with the cache when the
// publication sequence wraps.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct lane_acl_centry);
} lane_acl_memo SEC(".maps");

const volatile __u32 lane_acl_cache_mask = LANE_ACL_CACHE_BUCKETS - 1;
const volatile __u32 lane_acl_cache_on = 1;

// The forwarding memo (lane.h): per CPU, a flow table. The loader sizes
// it to the buckets per CPU times the possible CPUs, sets the mask
// (buckets per CPU - 1) and zeroes it when either sequence of its tag
// wraps; lane_fwd_memo_on = 0 turns it off.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE); // page-aligned values: line-aligned entries
	__uint(max_entries, LANE_FWD_BUCKETS);
	__type(key, __u32);
	__type(value, struct lane_fwd_fbucket);
} lane_fwd_flows SEC(".maps");

const volatile __u32 lane_fwd_flows_mask = LANE_FWD_BUCKETS - 1;
const volatile __u32 lane_fwd_memo_on = 1;

// The FIB: tern-fib's arrays, LANE_BLOCK entries per element, so that the
// mmap'ed map is the same flat array (u16 entries; see lane/fib.rs). Sizes of the node, next-hop and member maps are set by
// the loader.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1 << 16); // 2^24 entries: DIR-24-8's direct index
	__type(key, __u32);
	__type(value, struct lane_block16);
} lane_v4_top SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1 << 12);
	__type(key, __u32);
	__type(value, struct lane_block16);
} lane_v4_nodes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1 << 16); // 2^24 entries
	__type(key, __u32);
	__type(value, struct lane_block16);
} lane_v6_top SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1 << 14);
	__type(key, __u32);
	__type(value, struct lane_block16);
} lane_v6_nodes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1 << 16);
	__type(key, __u32);
	__type(value, struct lane_nh);
} lane_nh SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1 << 8);
	__type(key, __u32);
	__type(value, struct lane_block);
} lane_ecmp SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, LANE_MAX_PORTS);
	__type(key, __u32);
	__type(value, struct bpf_devmap_val);
} lane_tx SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, LANE_MAX_PORTS * LANE_MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} lane_xsks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, C_MAX);
	__type(key, __u32);
	__type(value, __u64);
} lane_ctr SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LANE_MAX_PORTS);
	__type(key, __u32);
	__type(value, struct lane_port_stats);
} lane_port_stats SEC(".maps");

// The outer IPv4 identification of GRE packets (gre-encap's `ident`).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} lane_ident SEC(".maps");

// Packet traces (`tern trace start N`). The budget is a soft limit: two
// CPUs may both take its last unit (a fetching atomic needs BPF v3), so
// userspace keeps the first N records it reads.
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20); // 20,000 records; a trace takes 10,000 at most
} lane_trace SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __s64);
} lane_trace_budget SEC(".maps");

// ------------------------------------------------------------ helpers

#define ETH_P_8021Q_ 0x8100
#define ETH_P_8021AD_ 0x88a8
#define IPPROTO_GRE_ 47
#define IPPROTO_ICMPV6_ 58

#define GRE_C 0x8000
#define GRE_K 0x2000
#define GRE_S 0x1000

// Where a packet goes.
enum { V_NONE = 0, V_FWD, V_DROP, V_PUNT, V_PASS };

#define MAX_HITS 8
_Static_assert(LANE_FM_HITS == MAX_HITS, "the forwarding memo holds every hit a packet records");

// x, computed here: the compiler may not move the work after it above.
#define SEQ(x) asm volatile("" : "+r"(x))
// x &= m, hidden from the optimizer (which knows the mask changes nothing
// after a bounds check) so that the verifier sees the bound.
#define MASK(x, m)                          \
	do {                                \
		SEQ(x);                     \
		(x) &= (m);                 \
	} while (0)
#define L3_MAX 80 // the deepest L3 header the lane reads (VLAN + IPv6 + GRE)

// The classifier key (crates/acl/src/key.rs; field values as
// crates/acl/src/lower.rs Field::value), in the verdict cache's layout,
// built where the packet is parsed: the addresses in four words (K_*;
// IPv4: the low words, the high ones zero), the other nine fields packed
// into two (LANE_CK_*; acl_key_field reads one back for the classifier).
#define K_SRC_HI 0
#define K_SRC_LO 1
#define K_DST_HI 2
#define K_DST_LO 3
#define K_P0 4 // ports, ICMP type/code, TCP flags
#define K_P1 5 // protocol, interfaces, VLAN, DSCP
struct acl_key {
	__u64 w[LANE_ACL_CKEY];
	__u32 bytes;
};

// The verdict cache key: `k` with the fields the rule set does not
// constrain zeroed (they cannot change its verdict).
struct acl_ckey {
	__u64 w[LANE_ACL_CKEY];
};

// The next hop of `id` after the ECMP choice: kind, ifindex, MAC word.
struct nh_out {
	__u32 id;
	__u32 kind;
	__u32 ifindex;
	__u64 mac;
};

// gre_in's memory of tunnels it looked up: the key, the interface it
// named, and the publication it was read under (ok: filled).
#define TUN_BITS 4
#define TUN_SLOTS (1u << TUN_BITS)
struct tun_memo {
	__u64 key[5];
	__u32 epoch;
	__u16 tif;
	__u8 ok;
	__u8 pad;
};

// Everything the decision phase learns; the packet is only written once
// the verdict is known.
struct st {
	__u32 gen;   // half of the double-buffered tables (lane_cfg.gen & 1)
	__u32 epoch; // lane_cfg.gen: tags ACL verdict cache entries
	__u32 fib_gen; // lane_cfg.fib_gen: with epoch, tags the forwarding memo
	__u32 flags;
	__u32 verdict;
	__u32 reason; // counter id of a drop, punt or pass
	// ethernet-input's drops decided before its destination MAC check
	// (l2_bad) or its VLAN and interface checks (et_bad): counter ids.
	__u16 l2_bad;
	__u16 et_bad;
	__u16 rx_if;  // tern interface (after VLAN demux or decapsulation)
	__u16 acl_in; // its input rule set (lane_if.acl_in), read with it
	__u16 port;   // receiving port
	__u16 vlan;   // 802.1Q id of the received frame (0: none)
	__u8 decap;   // decapsulated a GRE packet
	__u8 encap;   // encapsulated into GRE
	__u8 multi;   // frame came to a multicast/broadcast MAC
	__u8 inner_v6; // decapsulated: family of the inner header
	__u32 inner;   // decapsulated: offset of the inner header
	__u32 limit;   // end of the outer packet (its total length)
	// The L3 header that is kept and forwarded.
	__u32 l3off; // from the start of the received frame
	__u32 tot;   // its total length
	__u8 v6;
	__u8 dec_ttl;
	// Egress.
	__u8 l2len; // 14 or 18
	__u8 prio; // bytes of a priority tag (VID 0), which the engine strips
	__u16 tx_port;
	__u16 tx_vid;
	__u16 tx_mtu; // the egress interface's (for the forwarding memo)
	__u16 f_fill; // the forwarding memo missed: fill it if forwarded
	__u32 f_idx;  // and the bucket the packet's key hashed to
	__u32 f_label; // IPv6: the flow label, for the memo's entry ...
	__u32 f_lmask; // ... and whether its decision depends on it (ECMP)
	__u32 frame_len; // bytes sent
	__u8 dmac[6];
	__u8 smac[6];
	// Encapsulation (encap != 0).
	__u8 o_v6;
	__u8 o_gre_len; // 4 or 8
	__u8 o_ttl;
	__u8 o_has_key;
	__u32 o_key;
	__u8 o_src[16];
	__u8 o_dst[16];
	__u32 hits;
	__u32 hit_slot[MAX_HITS];
	__u32 hit_bytes[MAX_HITS];
	struct nh_out nh;  // the kept header's next hop
	struct acl_key k;  // the kept header's ACL key
	struct acl_ckey ck; // acl_eval's verdict cache key (off the stack)
	__u32 ck_idx;       // and its bucket
	__u32 c_fill;       // a probe missed: fill s->ck_idx after classifying
	__u32 c_decide;     // a cache hit's classification (acl_cache_find)
	__u32 c_verdict;
	__u64 c_counted;
	// Kept from packet to packet (this CPU's scratch is never cleared):
	// the cache's recent miss rate and the bypass sampler (acl_cache_find).
	__u32 c_miss; // moving average, 1/16 per probe, 65536 = every probe missed
	__u32 c_rng;
	__u32 m_miss; // the same for the memo (acl_eval)
	__u32 f_miss; // and for the forwarding memo (fwd_memo_find)
	// Hits recorded before the memo's probe (a decapsulated packet's: its
	// outer header's); the memo holds and replays only those after them.
	__u32 f_base;
	// The tunnels gre_in looked up last (kept from packet to packet),
	// direct-mapped by a hash of the key (tun_slot).
	struct tun_memo tm[TUN_SLOTS];
};

// The per-packet decision state: too big for the 512-byte BPF stack.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct st);
} lane_scratch SEC(".maps");

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

// Big-endian reads with one load (and a byte swap) instead of one load
// per byte: packet and map value pointers may be unaligned here, which the
// verifier accepts where unaligned access is efficient (x86, arm64; the
// lane's targets) and the JIT emits as plain loads.
static __always_inline __u16 rd16(const __u8 *p)
{
	return bpf_ntohs(*(const __u16 *)p);
}

static __always_inline __u32 rd32(const __u8 *p)
{
	return bpf_ntohl(*(const __u32 *)p);
}

static __always_inline __u64 rd64(const __u8 *p)
{
	return __builtin_bswap64(*(const __u64 *)p);
}

// Copies a MAC address with two loads and two stores (unaligned, as
// rd16/rd32), instead of six of each.
static __always_inline void cp6(__u8 *d, const __u8 *p)
{
	*(__u32 *)d = *(const __u32 *)p;
	*(__u16 *)(d + 4) = *(const __u16 *)(p + 4);
}

// Non-zero when the MAC addresses at `a` and `b` differ.
static __always_inline __u32 mac_ne(const __u8 *a, const __u8 *b)
{
	return (*(const __u32 *)a ^ *(const __u32 *)b) | (*(const __u16 *)(a + 4) ^ *(const __u16 *)(b + 4));
}

static __always_inline void wr16(__u8 *p, __u16 v)
{
	p[0] = v >> 8;
	p[1] = v;
}

static __always_inline const struct lane_if *get_if(struct st *s, __u32 idx)
{
	if (idx >= LANE_MAX_IFS)
		return 0;
	__u32 k = s->gen * LANE_MAX_IFS + idx;
	const struct lane_if *f = bpf_map_lookup_elem(&lane_ifs, &k);
	if (!f || !(f->flags & LIF_EXISTS))
		return 0;
	return f;
}

// One's complement 16-bit addition with end-around carry
// (tern_wire::checksum::add).
static __always_inline __u32 csum_add16(__u32 a, __u32 b)
{
	__u32 x = a + b;
	return ((x & 0xffff) + (x >> 16)) & 0xffff;
}

// RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m') (tern_wire::checksum::update).
static __always_inline __u16 csum_update(__u16 c, __u16 old, __u16 new)
{
	return ~csum_add16(csum_add16(~c & 0xffff, ~old & 0xffff), new) & 0xffff;
}

// Sum of the ten 16-bit words of an IPv4 header without options, folded
// to 16 bits, in the header's byte order (rd16 of it for the value): five
// 32-bit loads summed in 64 bits, then folded; a one's complement sum
// does not depend on the byte order it is taken in, only its result is
// byte-swapped, so the "== 0xffff" check needs no swap.
static __always_inline __u32 csum20_ne(const __u8 *p)
{
	const __u32 *w = (const __u32 *)p;
	__u64 s = (__u64)w[0] + w[1] + w[2] + w[3] + w[4];
	s = (s & 0xffffffff) + (s >> 32);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return s;
}

// The same sum with the header's words read as big-endian numbers.
static __always_inline __u32 csum20(const __u8 *p)
{
	return bpf_ntohs((__u16)csum20_ne(p));
}

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

// ------------------------------------------------------------------ ACL

#define F_SRC 0
#define F_DST 1
#define F_PROTO 2
#define F_SPORT 3
#define F_DPORT 4
#define F_ICMP 5
#define F_TCP 6
#define F_IIF 7
#define F_OIF 8
#define F_VLAN 9
#define F_DSCP 10
#define ABSENT16 (1u << 16)
#define ABSENT8 (1u << 8)

// 1 when start `p` of field table `t` is at or below the address at `a`
// (a[0] its high word, a[1] its low one), branch-free and in few
// registers. The starts beyond a table's intervals are (2^64 - 1, 2^62)
// with the last interval's rules (layout.rs encode_acl_field): above
// every value but the few that the last interval holds anyway. x < y for
// 64-bit words is the sign of (x >> 1) - (y >> 1) + (((x & 1) - (y & 1))
// >> 1) (arithmetic shift), which cannot overflow; for 128-bit values the
// low words' borrow joins the high words' low bits.
static __always_inline __u32 acl_le128(const struct lane_acl_field *t, __u32 p, const __u64 *a)
{
	p &= LANE_ACL_INTERVALS - 1;
	// The address is read again for every compare: values derived from
	// it, kept across compares, spilled to a stack the deepest call
	// chain cannot spare.
	asm volatile("" ::: "memory");
	__u64 hi = a[0], lo = a[1];
	__u64 shi = t->hi[p], slo = t->lo[p];
	__s64 b = (__s64)((lo >> 1) - (slo >> 1)) + ((__s64)((lo & 1) - (slo & 1)) >> 1);
	__u64 borrow = (__u64)b >> 63; // lo < slo
	__s64 d = (__s64)((hi >> 1) - (shi >> 1)) + ((__s64)((hi & 1) - (shi & 1) - borrow) >> 1);
	return 1 - (__u32)((__u64)d >> 63); // !(value < start)
}

// The rules of field `f` matching the source (`dst` 0) or destination
// address of IPv6 key `key`: the interval holding it, by a 4-ary search
// over the interval starts: strides 32, 8 and 2, each three independent
// compares, then 1. Four rounds of loads where a binary search waited on
// eight (whose search cost 58 ns hot: lane_bench, 50 IPv6 source rules,
// every packet classified). The starts are sorted, so the pivots at or
// below the value are the first ones of a round: their number picks the
// next round's block.
__noinline __u64 acl_field(__u32 k, const struct acl_key *key, __u32 dst)
{
	const struct lane_acl_field *t = bpf_map_lookup_elem(&lane_acl_fields, &k);
	if (!t || !key)
		return 0;
	const __u64 *a = &key->w[(dst & 1) * 2]; // K_SRC_HI or K_DST_HI
	// One compare after the other for the compiler (SEQ), which would
	// otherwise interleave a round's three and spill. The CPU still
	// overlaps them: their loads do not depend on each other.
	__u32 at = 0, c;
#pragma unroll
	for (int stride = 32; stride >= 2; stride /= 4) {
		c = acl_le128(t, at + stride, a);
		SEQ(c);
		c += acl_le128(t, at + 2 * stride, a);
		SEQ(c);
		c += acl_le128(t, at + 3 * stride, a);
		at += stride * c;
	}
	at += acl_le128(t, at + 1, a);
	return t->bits[at & (LANE_ACL_INTERVALS - 1)];
}

// acl_field for a field whose values and interval starts all fit in 32
// bits (IPv4 addresses, every field but the addresses): the number of
// starts at or below `v`, counted in two levels of independent compares
// instead of a chain of dependent binary-search steps (whose latency was
// the classifier's main cost): the block of 8 among the 16 (top[1..15]),
// then the start within it. With v and a start s below 2^62, s <= v is
// the clear sign bit of v - s: two instructions per compare, no branch.
// Inlined: it needs no stack, and the call (saved registers, a frame) was
// a quarter of its cost (lane_bench, 50 source rules, every packet
// classified: 24 -> 17 ns hot).
static __always_inline __u64 acl_field32(__u32 k, __u32 value)
{
	const struct lane_acl_field *t = bpf_map_lookup_elem(&lane_acl_fields, &k);
	if (!t)
		return 0;
	__u64 v = value;
	__u64 above = 0; // top starts above v (the padding is above every value)
#pragma unroll
	for (int j = 1; j < LANE_ACL_TOP; j++)
		above += (v - t->top[j]) >> 63;
	__u32 blk = (LANE_ACL_TOP - 1) - (__u32)above;
	MASK(blk, LANE_ACL_TOP - 1);
	__u32 at = blk * 8;
	above = 0;
#pragma unroll
	for (int i = 1; i < 8; i++)
		above += (v - t->lo[at + i]) >> 63;
	at += 7 - (__u32)above;
	MASK(at, LANE_ACL_INTERVALS - 1);
	return t->bits[at];
}

static __always_inline int add_hit(struct st *s, __u32 slot, __u32 bytes)
{
	__u32 i = s->hits;
	if (i >= MAX_HITS)
		return -1;
	s->hit_slot[i & (MAX_HITS - 1)] = slot;
	s->hit_bytes[i & (MAX_HITS - 1)] = bytes;
	s->hits = i + 1;
	return 0;
}

// Records the hits of a classification: the deciding rule's slot
// (`decide`, LANE_ACL_RULES for the default policy) and the count-only
// rules in `counted`. -1 when they do not fit in the packet's hit list.
static __always_inline int acl_record(struct st *s, __u32 slot0, __u32 decide, __u64 counted, __u32 bytes)
{
	if (add_hit(s, slot0 + (decide > LANE_ACL_RULES ? LANE_ACL_RULES : decide), bytes))
		return -1;
#pragma unroll
	for (int i = 0; i < MAX_HITS; i++) {
		if (!counted)
			break;
		__u64 b = counted & -counted;
		if (add_hit(s, slot0 + bit_index(b), bytes))
			return -1;
		counted &= counted - 1;
	}
	if (counted)
		return -1;
	return 0;
}

// Bits of the packed key words (LANE_CK_*): a field's value placed
// (CK), its mask (CKM), read back (CKG).
#define CK(f, x) ((__u64)(x) << (LANE_CK_##f##_AT & 63))
#define CKM(f) CK(f, (1ull << LANE_CK_##f##_BITS) - 1)
#define CKG(k, f)                                                                 \
	((__u32)((k)->w[K_P0 + LANE_CK_##f##_AT / 64] >> (LANE_CK_##f##_AT & 63)) & \
	 ((1u << LANE_CK_##f##_BITS) - 1))
// The transport fields when there are none (or they are not read).
#define CK_NO_L4 (CK(SPORT, ABSENT16) | CK(DPORT, ABSENT16) | CK(ICMP, ABSENT16) | CK(TCP, ABSENT8))

// The value of non-address field `f` of `k` (constant after unrolling).
static __always_inline __u32 acl_key_field(const struct acl_key *k, int f)
{
	switch (f) {
	case F_PROTO:
		return CKG(k, PROTO);
	case F_SPORT:
		return CKG(k, SPORT);
	case F_DPORT:
		return CKG(k, DPORT);
	case F_ICMP:
		return CKG(k, ICMP);
	case F_TCP:
		return CKG(k, TCP);
	case F_IIF:
		return CKG(k, IIF);
	case F_OIF:
		return CKG(k, OIF);
	case F_VLAN:
		return CKG(k, VLAN);
	default:
		return CKG(k, DSCP);
	}
}

// The cache key: the key masked to the fields the rule set constrains.
static __always_inline void acl_ckey_pack(struct acl_ckey *c, const struct acl_key *k,
					  const struct lane_acl_set *h)
{
	__u64 ms = -(__u64)((h->fields >> F_SRC) & 1);
	__u64 md = -(__u64)((h->fields >> F_DST) & 1);
	c->w[K_SRC_HI] = k->w[K_SRC_HI] & ms;
	c->w[K_SRC_LO] = k->w[K_SRC_LO] & ms;
	c->w[K_DST_HI] = k->w[K_DST_HI] & md;
	c->w[K_DST_LO] = k->w[K_DST_LO] & md;
	c->w[K_P0] = k->w[K_P0] & h->cmask[0];
	c->w[K_P1] = k->w[K_P1] & h->cmask[1];
}

// Collisions only cost a classification, since a hit compares the whole
// key: the six words and the table are folded with rotations into two
// (an IPv4 address pair into one word's halves), two independent
// multiplies (they pipeline) and one final mix, three multiplies in all
// (eight before, one per word).
// The six key words `w` and a small `salt` (the table, or the family).
static __always_inline __u64 key_mix(const __u64 *w, __u32 salt)
{
	__u64 a = w[1] ^ rotl64(w[3], 32) ^ w[4];
	__u64 b = w[0] ^ rotl64(w[2], 32) ^ w[5] ^ ((__u64)salt << 55);
	__u64 x = a * 0x9e3779b97f4a7c15ull + b * 0xc2b2ae3d27d4eb4full;
	x ^= x >> 32;
	x *= 0xbf58476d1ce4e5b9ull;
	return x ^ (x >> 29);
}

static __always_inline __u64 acl_ckey_hash(const struct acl_ckey *c, __u32 base1)
{
	return key_mix(c->w, base1);
}

// The entry's tag word: epoch | base1 << 32 (decide and verdict above).
#define CENTRY_TAG(e) (*(const __u64 *)&(e)->epoch)
#define CENTRY_TAG_MASK 0xffffffffffffull

// 1 when entry `e` holds key words `w` of rule set table `base1` - 1,
// computed under the epoch in `tag` (branch-free but for the family). An
// IPv4 table's entries (`v6` 0; the tag says the family) and keys have
// zero high address words: only four key words are compared.
static __always_inline int acl_centry_is(const struct lane_acl_centry *e, const __u64 *w, __u64 tag, __u32 v6)
{
	__u64 d = (CENTRY_TAG(e) ^ tag) & CENTRY_TAG_MASK;
	d |= (e->key[K_SRC_LO] ^ w[K_SRC_LO]) | (e->key[K_DST_LO] ^ w[K_DST_LO]);
	d |= (e->key[K_P0] ^ w[K_P0]) | (e->key[K_P1] ^ w[K_P1]);
	if (v6)
		d |= (e->key[K_SRC_HI] ^ w[K_SRC_HI]) | (e->key[K_DST_HI] ^ w[K_DST_HI]);
	return d == 0;
}

// A cache whose probes mostly miss only adds its work to every
// classification: above this miss rate (of 65536) it is probed on one
// packet in 16 (chosen at random, so that a periodic pattern of flows
// cannot fool it), which keeps the estimate and the entries alive until
// the traffic comes back to flows it holds.
#define ACL_CACHE_BYPASS_AT 40960 // 5/8
// The same for the memo: a miss costs its compare and its rewrite (about
// half what a hit saves), so with many flows interleaved on a CPU it is
// looked at on one packet in 16 only.
#define ACL_MEMO_BYPASS_AT 49152 // 3/4

// This CPU's pseudo-random sampler for the bypasses.
static __always_inline __u32 acl_rng(struct st *s)
{
	__u32 r = s->c_rng * 1664525 + 1013904223; // Numerical Recipes' LCG
	s->c_rng = r;
	return r;
}

// Looks key `k` up in the verdict cache under rule set table `base`
// (header `h`): 1 on a hit, with the entry's classification in
// s->c_decide, c_counted, c_verdict; 0 on a miss. After a probe that
// missed, s->c_fill is set, with the cache key in s->ck and its bucket in
// s->ck_idx, for acl_cache_fill. The caller decides the bypass (and
// clears c_fill), so that a bypassed packet makes no call. A global
// function of its own, like acl_field, with a small frame: the deepest
// call chain is close to the 512-byte stack limit.
__noinline int acl_cache_find(struct st *s, const struct lane_acl_set *h, __u32 base, struct acl_key *k)
{
	if (!s || !h || !k)
		return 0;
	__u32 miss = s->c_miss;
	struct acl_ckey *c = &s->ck;
	acl_ckey_pack(c, k, h);
	__u32 base1 = base + 1;
	__u32 idx = ((__u32)acl_ckey_hash(c, base1) & lane_acl_cache_mask) +
		    bpf_get_smp_processor_id() * (lane_acl_cache_mask + 1);
	struct lane_acl_cbucket *b = bpf_map_lookup_elem(&lane_acl_cache, &idx);
	if (!b)
		return 0;
	__u64 tag = s->epoch | (__u64)base1 << 32;
	__u32 v6 = base & 1;
#pragma unroll
	for (int w = 0; w < LANE_ACL_CACHE_WAYS; w++) {
		const struct lane_acl_centry *e = &b->way[w];
		// Reload the key per way rather than keep it in (spilled)
		// registers: the frame must stay small.
		asm volatile("" ::: "memory");
		if (acl_centry_is(e, s->ck.w, tag, v6)) {
			s->c_decide = e->decide;
			s->c_verdict = e->verdict;
			s->c_counted = e->counted;
			s->c_miss = miss - (miss >> 4);
			return 1;
		}
	}
	s->c_miss = miss + ((65536 - miss) >> 4);
	s->c_fill = 1;
	s->ck_idx = idx;
	return 0;
}

// Stores a classification of s->ck in way 0 of its bucket (s->ck_idx),
// after moving a current way 0 to way 1 (first in, first out: a hit does
// not write the bucket, whose lines may be cold). An entry's epoch is
// cleared first and set last, so a half-written entry never looks valid.
__noinline int acl_cache_fill(struct st *s, __u32 base, __u32 decide, __u32 verdict, __u64 counted)
{
	if (!s || !s->c_fill)
		return 0;
	__u32 idx = s->ck_idx;
	struct lane_acl_cbucket *b = bpf_map_lookup_elem(&lane_acl_cache, &idx);
	if (!b)
		return 0;
	__u32 epoch = s->epoch;
	struct lane_acl_centry *e0 = &b->way[0];
	struct lane_acl_centry *e1 = &b->way[1];
	if (e0->epoch == epoch) {
		e1->epoch = ~epoch;
		asm volatile("" ::: "memory");
#pragma unroll
		for (int i = 0; i < LANE_ACL_CKEY; i++)
			e1->key[i] = e0->key[i];
		e1->counted = e0->counted;
		e1->base1 = e0->base1;
		e1->decide = e0->decide;
		e1->verdict = e0->verdict;
		asm volatile("" ::: "memory");
		e1->epoch = epoch;
	}
	e0->epoch = ~epoch;
	asm volatile("" ::: "memory");
#pragma unroll
	for (int i = 0; i < LANE_ACL_CKEY; i++)
		e0->key[i] = s->ck.w[i];
	e0->counted = counted;
	e0->base1 = base + 1;
	e0->decide = decide;
	e0->verdict = verdict;
	asm volatile("" ::: "memory");
	e0->epoch = epoch;
	return 0;
}

// Classifies with rule set `set`: 0 accept, 1 drop, -1 punt (set not
// compiled for the lane, or too many hits to record).
//
// A key seen before under the same lane_cfg.gen is answered from the
// per-CPU verdict cache: same verdict, same hits (the cached deciding rule
// and count-only rules are counted again). Every publication changes
// lane_cfg.gen, and a packet reads it once with the half of the tables it
// then uses, so an entry only ever answers for the tables it was computed
// on. Before the cache, the memo (lane_acl_memo): this CPU's last
// classification in direction `out` (0 input, 1 output rule sets) with
// the key as the packet had it (unmasked), tagged the same way; a packet
// of the same flow under the same publication takes its verdict with one
// compare: no rule set header, hash or bucket. When most packets miss
// it (many flows interleaved on this CPU), it is looked at, and so
// rewritten, on one packet in 16 only (ACL_MEMO_BYPASS_AT).
__noinline int acl_eval(struct st *s, __u32 set, __u32 v6, struct acl_key *k, __u32 out)
{
	if (!s || !k || set >= LANE_MAX_SETS)
		return -1;
	__u32 base = (s->gen * LANE_MAX_SETS + set) * 2 + (v6 ? 1 : 0);
	__u32 slot0 = base * (LANE_ACL_RULES + 1);
	__u64 tag = s->epoch | (__u64)(base + 1) << 32;
	__u32 dir = out ? 1 : 0;
	struct lane_acl_centry *memo = 0;
	__u32 mmiss = s->m_miss;
	if (lane_acl_cache_on && (mmiss <= ACL_MEMO_BYPASS_AT || !(acl_rng(s) >> 28)))
		memo = bpf_map_lookup_elem(&lane_acl_memo, &dir);
	__u32 decide, verdict;
	__u64 counted;
	if (memo) {
		if (acl_centry_is(memo, k->w, tag, v6)) {
			s->m_miss = mmiss - (mmiss >> 4);
			decide = memo->decide;
			verdict = memo->verdict;
			counted = memo->counted;
			goto record;
		}
		s->m_miss = mmiss + ((65536 - mmiss) >> 4);
	}
	const struct lane_acl_set *h = bpf_map_lookup_elem(&lane_acl_sets, &base);
	if (!h || !(h->flags & LACL_OK))
		return -1;
	// A bypassed cache costs no call, and nothing is filled
	// (lane_bench, 65536 distinct keys, 50 rules: +71 -> +40 ns).
	s->c_fill = 0;
	if (lane_acl_cache_on && (s->c_miss <= ACL_CACHE_BYPASS_AT || !(acl_rng(s) >> 28)) &&
	    acl_cache_find(s, h, base, k)) {
		decide = s->c_decide;
		verdict = s->c_verdict;
		counted = s->c_counted;
	} else {
		__u32 fields = h->fields;
		__u64 m = h->all;
		// IPv4 tables (even `base`) hold 32-bit address starts.
		if (fields & (1u << F_SRC))
			m &= (base & 1) ? acl_field(base * LANE_NF + F_SRC, k, 0)
					: acl_field32(base * LANE_NF + F_SRC, k->w[K_SRC_LO]);
		if (fields & (1u << F_DST))
			m &= (base & 1) ? acl_field(base * LANE_NF + F_DST, k, 1)
					: acl_field32(base * LANE_NF + F_DST, k->w[K_DST_LO]);
#pragma unroll
		for (int f = F_PROTO; f < LANE_NF; f++) {
			if (fields & (1u << f))
				m &= acl_field32(base * LANE_NF + f, acl_key_field(k, f));
		}
		__u64 first = m & h->terminal;
		first &= -first;
		__u64 below;
		if (first) {
			decide = bit_index(first);
			// Terminal and count: a rule the lane holds only as a
			// wider match (src/lane/acl.rs): the engine decides (2).
			verdict = (h->drop & first) ? 1 : (h->count & first) ? 2 : 0;
			below = first - 1;
		} else {
			decide = LANE_ACL_RULES;
			verdict = h->default_drop ? 1 : 0;
			below = ~0ull;
		}
		// Count-only rules matched before the deciding one.
		counted = m & h->count & below;
		if (s->c_fill)
			acl_cache_fill(s, base, decide, verdict, counted);
	}
	if (memo) {
		// One CPU's: no other writer but the loader's clear at a wrap
		// of the sequence (program.rs), which cannot make a stale tag
		// current (as for the cache).
#pragma unroll
		for (int i = 0; i < LANE_ACL_CKEY; i++)
			memo->key[i] = k->w[i];
		memo->counted = counted;
		memo->epoch = s->epoch;
		memo->base1 = base + 1;
		memo->decide = decide;
		memo->verdict = verdict;
	}
record:
	if (verdict > 1)
		return -1; // counted by the engine, which decides
	if (acl_record(s, slot0, decide, counted, k->bytes))
		return -1;
	return verdict;
}

static __always_inline int is_port_proto(__u8 p)
{
	return p == 6 || p == 17 || p == 33 || p == 132 || p == 136;
}

// Transport fields of the key (crates/nodes/src/acl.rs l4_fields), packed
// (word K_P0): `l4` has `len` readable bytes.
static __always_inline __u64 acl_l4(__u8 proto, const __u8 *l4, __u32 len, void *end)
{
	if (is_port_proto(proto) && len >= 4 && (void *)(l4 + 4) <= end) {
		__u64 tcp = ABSENT8;
		if (proto == 6) {
			if (len >= 14 && (void *)(l4 + 14) <= end)
				tcp = l4[13];
			else
				return CK_NO_L4;
		}
		return CK(SPORT, rd16(l4)) | CK(DPORT, rd16(l4 + 2)) | CK(ICMP, ABSENT16) | CK(TCP, tcp);
	}
	if ((proto == 1 || proto == 58) && len >= 2 && (void *)(l4 + 2) <= end)
		return CK(SPORT, ABSENT16) | CK(DPORT, ABSENT16) | CK(ICMP, rd16(l4)) | CK(TCP, ABSENT8);
	return CK_NO_L4;
}

// ------------------------------------------------------------------ FIB

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

// ---------------------------------------------------------- egress side

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

// ------------------------------------------------------ forwarding memo

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
	if (!lane_fwd_memo_on || s->hits > MAX_HITS)
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

// ------------------------------------------------------------ ingress

// The slot of gre_in's tunnel memory for a key: the five words folded and
// multiplied (Fibonacci hashing), so keys that differ only in the remote
// address, or only in the GRE key, spread over the slots.
static __always_inline __u32 tun_slot(const __u64 *kw)
{
	__u64 h = kw[0] ^ kw[1] ^ kw[2] ^ kw[3] ^ kw[4];
	h ^= h >> 32;
	return (__u32)((h * 0x9E3779B97F4A7C15ull) >> (64 - TUN_BITS));
}

// gre-input for a GRE packet to one of the router's addresses: the outer
// header (family `v6`, total length s->tot) is at `off`. On success the
// packet continues as received on the tunnel, with its inner header at
// s->inner (family s->inner_v6); returns 0 then, 1 when decided.
__noinline int gre_in(struct xdp_md *ctx, struct st *s, __u32 v6, __u32 off)
{
	if (!ctx || !s)
		return 1;
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	if (off > L3_MAX)
		return PUNT(PUNT_OTHER);
	MASK(off, 0x7f); // for the verifier: the bound above, as a mask
	const __u8 *ip = data + off;
	int linux = s->flags & LCFG_LINUX_MODE;
	__u32 hdr = v6 ? 40 : 20;
	struct lane_tun_key tk = {};
	tk.gen = s->gen;
	tk.v6 = v6 ? 1 : 0;
	// Local = outer destination, remote = outer source.
	if ((void *)(ip + 20) > end)
		return PUNT(PUNT_OTHER);
	if (v6) {
		if ((void *)(ip + 40) > end)
			return PUNT(PUNT_OTHER);
		__builtin_memcpy(tk.local, ip + 24, 16);
		__builtin_memcpy(tk.remote, ip + 8, 16);
	} else {
		__builtin_memcpy(tk.local, ip + 16, 4);
		__builtin_memcpy(tk.remote, ip + 12, 4);
	}
	const __u8 *g = ip + hdr;
	__u32 glen = s->tot - hdr;
	if (glen < 4 || (void *)(g + 4) > end)
		return linux ? PASS(PASS_LOCAL) : DROP(GRE_BAD_HEADER);
	__u16 fl = rd16(g);
	// RFC 2784 2.5: discard with bits 1-5 set or a version other than 0.
	if (fl & (0x4000 | 0x0800 | 0x0400 | 0x0007))
		return linux ? PASS(PASS_LOCAL) : DROP(GRE_BAD_HEADER);
	if (fl & GRE_C)
		return PUNT(PUNT_GRE); // checksum: userspace verifies it
	__u32 hlen = 4;
	if (fl & GRE_K) {
		if (glen < 8 || (void *)(g + 8) > end)
			return linux ? PASS(PASS_LOCAL) : DROP(GRE_BAD_HEADER);
		tk.has_key = 1;
		tk.key = rd32(g + 4);
		hlen = 8;
	}
	if (fl & GRE_S)
		hlen += 4;
	if (glen < hlen)
		return linux ? PASS(PASS_LOCAL) : DROP(GRE_BAD_HEADER);
	__u16 proto = rd16(g + 2);
	if (proto == ETH_P_IP)
		s->inner_v6 = 0;
	else if (proto == ETH_P_IPV6)
		s->inner_v6 = 1;
	else
		return linux ? PASS(PASS_LOCAL) : DROP(GRE_BAD_PAYLOAD);
	// A tunnel looked up before skips the hash map (a 40-byte key): the
	// same key under the same publication names the same tunnel. Slots
	// are per CPU and direct-mapped, so tunnels whose packets interleave
	// keep theirs unless they hash to the same slot.
	_Static_assert(sizeof(tk) == sizeof(s->tm[0].key), "tunnel key words");
	const __u64 *kw = (const __u64 *)&tk;
	__u32 slot = tun_slot(kw);
	MASK(slot, TUN_SLOTS - 1);
	struct tun_memo *tm = &s->tm[slot];
	__u64 d = (kw[0] ^ tm->key[0]) | (kw[1] ^ tm->key[1]) | (kw[2] ^ tm->key[2]) | (kw[3] ^ tm->key[3]) |
		  (kw[4] ^ tm->key[4]);
	__u16 tif;
	if (tm->ok && tm->epoch == s->epoch && d == 0) {
		tif = tm->tif;
	} else {
		__u16 *t = bpf_map_lookup_elem(&lane_tunnels, &tk);
		if (!t)
			return linux ? PASS(PASS_LOCAL) : DROP(GRE_NO_TUNNEL);
		tif = *t;
		__builtin_memcpy(tm->key, &tk, sizeof(tk));
		tm->tif = tif;
		tm->epoch = s->epoch;
		tm->ok = 1;
	}
	const struct lane_if *tf = get_if(s, tif);
	if (!tf)
		return linux ? PASS(PASS_LOCAL) : DROP(GRE_NO_TUNNEL);
	if (!(tf->flags & LIF_UP))
		return DROP(GRE_TUNNEL_DOWN);
	s->decap = 1;
	s->rx_if = tif;
	s->acl_in = tf->acl_in;
	s->vlan = 0;
	s->multi = 0;
	s->inner = off + hdr + hlen;
	return 0;
}

// IPv6 extension headers (tern_wire IpProtocol::is_ipv6_ext_header).
static __always_inline int is_ext(__u8 nh)
{
	return nh == 0 || nh == 43 || nh == 44 || nh == 51 || nh == 60;
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
	// ip4-local: only GRE of tern's tunnels is handled here.
local:
	if (proto != IPPROTO_GRE_)
		return (s->flags & LCFG_LINUX_MODE) ? PASS(PASS_LOCAL) : PUNT(PUNT_LOCAL);
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
	// detection): never forwarded.
	if ((src_hi >> 56) == 0xff || (src_hi == 0 && src_lo <= 1 && (src_lo || (dst_hi >> 56) != 0xff)))
		return DROP(IP6_MARTIAN);
	if (dst_hi == 0 && (dst_lo == 0 || dst_lo == 1))
		return DROP(IP6_BAD_DST);
	if ((dst_hi >> 56) == 0xff) {
		// Link-scope all-nodes, all-routers and solicited-node groups are
		// tern's (ip6-local); other groups are dropped.
		int all = dst_hi == 0xff02000000000000ull && (dst_lo == 1 || dst_lo == 2);
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
	if (proto != IPPROTO_GRE_)
		return (s->flags & LCFG_LINUX_MODE) ? PASS(PASS_LOCAL) : PUNT(PUNT_LOCAL);
	if (!wire)
		return PUNT(PUNT_GRE);
	if (s->f_fill)
		fwd_memo_fill(s, s->hits, 1); // as in ip4
	return gre_in(ctx, s, 1, off);
}

// ------------------------------------------------------- applying it

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
}

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

// Records the packet in lane_trace while the budget lasts: its first bytes
// (as received: called before the lane writes the frame), the verdict in
// s and, when forwarded, the rewrite decided. Called only while a trace is
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
	__u8 f = 0;
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

static __always_inline int to_xsk(struct xdp_md *ctx, struct st *s, __u32 reason)
{
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
	ctr_add(reason, 1);
	trace_if_armed(ctx, s, V_PASS, reason, XDP_PASS);
	return XDP_PASS;
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
		// GRE, which may belong to one of tern's tunnels.
		if (ip[9] != IPPROTO_GRE_ && (s->flags & LCFG_LOCAL4) && bpf_map_lookup_elem(&lane_local4, &dst))
			return pass_s(ctx, s, C_PASS_LOCAL);
		if ((dst & bpf_htonl(0xf0000000)) == bpf_htonl(0xe0000000) || dst == 0xffffffff)
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
		if (ip[6] != IPPROTO_GRE_ && (s->flags & LCFG_LOCAL6)) {
			struct in6_key key;
			__builtin_memcpy(key.b, ip + 24, 16);
			if (bpf_map_lookup_elem(&lane_local6, &key))
				return pass_s(ctx, s, C_PASS_LOCAL);
		}
		if (ip[24] == 0xff)
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
			DROP(ETH_NOT_FOR_US);
			goto decided;
		}
		s->multi = 1;
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
