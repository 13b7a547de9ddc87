// SPDX-License-Identifier: Apache-2.0 OR MIT
//
// GRE decapsulation: gre-input for GRE packets to one of the router's
// addresses (gre_in), with its per-CPU memory of the tunnels it looked up
// (tun_slot; struct tun_memo in state.h). Maps: lane_tunnels, lane_ifs.

#ifndef TERN_LANE_LIB_GRE_H
#define TERN_LANE_LIB_GRE_H

#include "bytes.h"
#include "counters.h"

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

#endif
