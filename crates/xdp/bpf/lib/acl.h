// SPDX-License-Identifier: Apache-2.0 OR MIT
//
// The ACL: the bitmap classifier over per-field interval tables (acl_eval,
// acl_field, acl_field32), its rule hits, the verdict cache with its memo
// and the pseudo-random bypass, and the L4 part of the classifier key
// (acl_l4). Maps: lane_acl_sets, lane_acl_fields, lane_acl_cache,
// lane_acl_memo (global lane_acl_cache_mask; switched by LCFG_NO_ACL_CACHE).
//
// The verdict cache's invariant (the userspace rule's, tern-acl): an
// entry is valid only while the publication sequence it was filled under
// is current; any rule or interface change bumps it.
// - Key: the classifier key (crates/acl key.rs: source and destination
//   addresses, protocol, ports, ICMP type/code, TCP flags, input and
//   output interface, VLAN, DSCP) with the fields the rule set constrains
//   none of zeroed, and the rule set's table (set, family, half):
//   everything the classifier reads from the packet.
// - Tag: lane_cfg.gen, the publication sequence. Rule sets, interfaces
//   (their indexes in rules, bindings), VLANs and tunnels reach the lane
//   only through LaneProgram::publish, which writes the idle half and
//   bumps gen with one store; a packet reads gen once and classifies on
//   the half gen names, so an entry filled under another gen never
//   answers it. Routes, next hops and neighbours do not tag it: they do
//   not change a verdict (the output interface is in the key).
// - Invalid: an entry whose gen is not the packet's (stale: any
//   publication since), a half-written one (its gen is written last), a
//   zeroed one (rule set table 0 + 1 never matches). The loader zeroes
//   every entry when gen wraps.
// - Replay: a hit gives the deciding rule and the count-only rules above
//   it, so the rule hits are those the classifier would have recorded.
// - The memo (lane_acl_memo, the CPU's last classification per
//   direction) keeps the same tag and the unmasked key.
// - Switch: LCFG_NO_ACL_CACHE (acl_shortcut off) skips both, at once;
//   the trace marks a verdict taken from either (LTR_ACL_IN_CACHED,
//   LTR_ACL_OUT_CACHED) and xdp-lane/acl-cached counts them.

#ifndef TERN_LANE_LIB_ACL_H
#define TERN_LANE_LIB_ACL_H

#include "bytes.h"
#include "counters.h"
#include "hash.h"

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
// eight (whose search cost 58 ns hot: `tern-bench lane`, 50 IPv6 source rules,
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
// a quarter of its cost (`tern-bench lane`, 50 source rules, every packet
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
	// acl_shortcut off (LCFG_NO_ACL_CACHE): neither the memo nor the cache.
	__u32 cache_on = !(s->flags & LCFG_NO_ACL_CACHE);
	if (cache_on && (mmiss <= ACL_MEMO_BYPASS_AT || !(acl_rng(s) >> 28)))
		memo = bpf_map_lookup_elem(&lane_acl_memo, &dir);
	__u32 decide, verdict;
	__u64 counted;
	if (memo) {
		if (acl_centry_is(memo, k->w, tag, v6)) {
			s->m_miss = mmiss - (mmiss >> 4);
			decide = memo->decide;
			verdict = memo->verdict;
			counted = memo->counted;
			s->path |= out ? P_ACL_OUT_CACHED : P_ACL_IN_CACHED;
			goto record;
		}
		s->m_miss = mmiss + ((65536 - mmiss) >> 4);
	}
	const struct lane_acl_set *h = bpf_map_lookup_elem(&lane_acl_sets, &base);
	if (!h || !(h->flags & LACL_OK))
		return -1;
	// A bypassed cache costs no call, and nothing is filled
	// (`tern-bench lane`, 65536 distinct keys, 50 rules: +71 -> +40 ns).
	s->c_fill = 0;
	if (cache_on && (s->c_miss <= ACL_CACHE_BYPASS_AT || !(acl_rng(s) >> 28)) &&
	    acl_cache_find(s, h, base, k)) {
		decide = s->c_decide;
		verdict = s->c_verdict;
		counted = s->c_counted;
		s->path |= out ? P_ACL_OUT_CACHED : P_ACL_IN_CACHED;
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

#endif
