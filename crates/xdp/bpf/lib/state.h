// SPDX-License-Identifier: Apache-2.0 OR MIT
//
// What the decision phase works on: the lane's constants (EtherTypes, GRE
// flags, verdicts V_*), the verifier helpers SEQ and MASK, the classifier
// key (struct acl_key, K_*), the next hop after ECMP (struct nh_out), the
// per-packet state (struct st) and its per-CPU home, the map lane_scratch;
// and get_if, the interface table lookup under the packet's publication
// (map lane_ifs).

#ifndef TERN_LANE_LIB_STATE_H
#define TERN_LANE_LIB_STATE_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include "../lane.h"
#include "maps.h"

#define ETH_P_8021Q_ 0x8100
#define ETH_P_8021AD_ 0x88a8
#define IPPROTO_GRE_ 47
#define IPPROTO_VRRP_ 112
#define IPPROTO_ICMPV6_ 58

#define GRE_C 0x8000
#define GRE_K 0x2000
#define GRE_S 0x1000

// Where a packet goes.
enum { V_NONE = 0, V_FWD, V_DROP, V_PUNT, V_PASS };

// st.path: the fast paths that decided the packet (the trace's LTR_FWD_MEMO,
// LTR_ACL_IN_CACHED, LTR_ACL_OUT_CACHED bits; counted when the lane
// forwards or drops it: xdp-lane/fwd-memo, xdp-lane/acl-cached).
#define P_FWD_MEMO LTR_FWD_MEMO
#define P_ACL_IN_CACHED LTR_ACL_IN_CACHED
#define P_ACL_OUT_CACHED LTR_ACL_OUT_CACHED

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
	__u8 path;    // P_*: the fast paths that decided it (reset with multi: one store)
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

// Whether `mac` is a virtual MAC of tern interface `idx` (map lane_vmacs).
static __always_inline int is_vmac(__u16 idx, const __u8 *mac)
{
	struct lane_vmac_key k = { .ifindex = idx };
	__builtin_memcpy(k.mac, mac, 6);
	return bpf_map_lookup_elem(&lane_vmacs, &k) != 0;
}

// Whether `mac` is a virtual MAC of the sub-interface of `port` for VLAN
// `vid` (ethernet-input's sub_vmac).
static __noinline int is_sub_vmac(struct st *s, __u16 port, __u16 vid, const __u8 *mac)
{
	if (port >= LANE_MAX_PORTS || vid == 0)
		return 0;
	__u32 vk = (s->gen * LANE_MAX_PORTS + port) * 4096 + (vid & 0x0fff);
	__u16 *sub = bpf_map_lookup_elem(&lane_vlans, &vk);
	if (!sub || *sub == 0)
		return 0;
	return is_vmac(*sub - 1, mac);
}

#endif
