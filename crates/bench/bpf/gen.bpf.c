/* The traffic generator: an XDP program run by BPF_PROG_TEST_RUN with
 * BPF_F_TEST_XDP_LIVE_FRAMES. The kernel hands it a page holding the
 * largest frame of the cycle; the program rebuilds the headers of the
 * next slot of the cycle, varies the flow fields, stamps the signature
 * (stream, sequence number, time), computes the checksums, trims the
 * frame to the slot's length and returns XDP_TX, which the test-run
 * code turns into a redirect out of the interface named in the context.
 *
 * Paced (struct gen_pace), it sends a frame only when one is due and
 * drops the page otherwise: see common.h.
 *
 * One userspace thread calls it at a time, so the state map is updated
 * without atomics (the generator owns it). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_SLOTS);
	__type(key, __u32);
	__type(value, struct slot);
} gen_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gen_cfg);
} gen_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gen_state);
} gen_state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gen_pace);
} gen_pace SEC(".maps");

/* Whether a frame is due now (and the bucket's bookkeeping). */
static __always_inline int due(struct gen_pace *pc, const struct gen_state *st)
{
	if (!pc->rate)
		return 1;
	__u64 now = bpf_ktime_get_ns();
	if (!pc->start_ns)
		pc->start_ns = now;
	__u64 el = now - pc->start_ns;
	/* Split so that the product cannot overflow: rate < 2^32 frames/s. */
	__u64 rate = pc->rate & 0xffffffffULL;
	__u64 n = (el / 1000000000ULL) * rate + (el % 1000000000ULL) * rate / 1000000000ULL + 1;
	if (n > pc->total)
		n = pc->total;
	__u64 consumed = st->sent + pc->skipped;
	if (n <= consumed)
		return 0;
	__u64 depth = pc->depth ? pc->depth : 1;
	if (n - consumed > depth)
		pc->skipped += n - consumed - depth;
	pc->last_ns = now;
	return 1;
}

static __always_inline __u16 csum_fold(__u64 s)
{
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (__u16)~s;
}

/* Adds `add` to the big-endian 32-bit word at p. */
static __always_inline void be32_add(__u8 *p, __u32 add)
{
	__u32 v;
	__builtin_memcpy(&v, p, 4);
	v = bpf_htonl(bpf_ntohl(v) + add);
	__builtin_memcpy(p, &v, 4);
}

static __always_inline void be16_put(__u8 *p, __u16 v)
{
	__u16 n = bpf_htons(v);
	__builtin_memcpy(p, &n, 2);
}

static __always_inline void be32_put(__u8 *p, __u32 v)
{
	__u32 n = bpf_htonl(v);
	__builtin_memcpy(p, &n, 4);
}

static __always_inline __u64 sum16(const __u8 *p, const int words)
{
	__u64 s = 0;
#pragma unroll
	for (int i = 0; i < words; i++) {
		__u16 w;
		__builtin_memcpy(&w, p + 2 * i, 2);
		s += w;
	}
	return s;
}

static __always_inline int build(struct xdp_md *ctx, const struct slot *sl,
				 const struct stream_cfg *sc, struct gen_state *st,
				 __u32 stream, const int l3, const int v6)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u8 *pkt = data;

	if (data + HDR_MAX > end)
		return XDP_ABORTED;
	/* 8-byte copies: x86 does not care about the packet's alignment. */
#pragma unroll
	for (int i = 0; i < HDR_MAX / 8; i++) {
		__u64 w;
		__builtin_memcpy(&w, &sl->hdr[8 * i], 8);
		__builtin_memcpy(pkt + 8 * i, &w, 8);
	}

	__u32 src_count = sc->src_count ? sc->src_count : 1;
	__u32 dst_count = sc->dst_count ? sc->dst_count : 1;
	__u32 sport_count = sc->sport_count ? sc->sport_count : 1;
	__u32 dport_count = sc->dport_count ? sc->dport_count : 1;
	__u32 si, di, spi, dpi;
	if (sc->random) {
		si = bpf_get_prandom_u32() % src_count;
		di = bpf_get_prandom_u32() % dst_count;
		spi = bpf_get_prandom_u32() % sport_count;
		dpi = bpf_get_prandom_u32() % dport_count;
	} else {
		/* Mixed radix: destination port fastest, source address slowest. */
		__u64 c = st->flow_ctr[stream & (MAX_STREAMS - 1)]++;
		dpi = c % dport_count;
		c /= dport_count;
		spi = c % sport_count;
		c /= sport_count;
		di = c % dst_count;
		c /= dst_count;
		si = c % src_count;
	}

	__u8 *ip = pkt + l3;
	const int l4 = l3 + (v6 ? 40 : 20);
	__u8 *udp = pkt + l4;
	__u8 *sig = udp + 8;

	if (v6) {
		be32_add(ip + 8 + 12, si * sc->src_stride);
		be32_add(ip + 24 + 12, di * sc->dst_stride);
	} else {
		be32_add(ip + 12, si * sc->src_stride);
		be32_add(ip + 16, di * sc->dst_stride);
	}
	be16_put(udp, (__u16)(sc->sport_base + spi));
	be16_put(udp + 2, (__u16)(sc->dport_base + dpi));

	__u32 seq = st->seq[stream & (MAX_STREAMS - 1)]++;
	be32_put(sig + 4, seq);
	be32_put(sig + 8, (__u32)bpf_ktime_get_ns());

	/* RFC 791 3.1: header checksum over the header with the field zero. */
	if (!v6) {
		ip[10] = 0;
		ip[11] = 0;
		__u16 c = csum_fold(sum16(ip, 10));
		__builtin_memcpy(ip + 10, &c, 2);
	}
	/* RFC 768 / RFC 8200 8.1: pseudo-header + UDP header + data. The data
	 * past the signature is zero in the template, so it adds nothing. */
	udp[6] = 0;
	udp[7] = 0;
	__u64 s = sum16(udp, (8 + SIG_LEN) / 2);
	__u16 len_word;
	__builtin_memcpy(&len_word, udp + 4, 2);
	s += len_word + bpf_htons(17);
	if (v6)
		s += sum16(ip + 8, 16);
	else
		s += sum16(ip + 12, 4);
	__u16 c = csum_fold(s);
	if (c == 0)
		c = 0xffff; /* RFC 768: a computed zero is sent as all ones */
	__builtin_memcpy(udp + 6, &c, 2);

	int delta = (int)sl->frame_len - (int)(end - data);
	if (delta != 0 && bpf_xdp_adjust_tail(ctx, delta))
		return XDP_ABORTED;
	st->sent++;
	return XDP_TX;
}

SEC("xdp")
int tern_gen(struct xdp_md *ctx)
{
	__u32 k0 = 0;
	struct gen_cfg *cfg = bpf_map_lookup_elem(&gen_config, &k0);
	struct gen_state *st = bpf_map_lookup_elem(&gen_state, &k0);
	struct gen_pace *pc = bpf_map_lookup_elem(&gen_pace, &k0);
	if (!cfg || !st || !pc)
		return XDP_ABORTED;
	if (!due(pc, st))
		return XDP_DROP;
	__u32 n = cfg->n_slots;
	if (n == 0 || n > MAX_SLOTS)
		return XDP_ABORTED;
	__u32 idx = st->sent % n;
	struct slot *sl = bpf_map_lookup_elem(&gen_slots, &idx);
	if (!sl)
		return XDP_ABORTED;
	__u32 stream = sl->stream & (MAX_STREAMS - 1);
	struct stream_cfg *sc = &cfg->streams[stream];
	if (sl->ipv6) {
		if (sl->l3_off == 18)
			return build(ctx, sl, sc, st, stream, 18, 1);
		return build(ctx, sl, sc, st, stream, 14, 1);
	}
	if (sl->l3_off == 18)
		return build(ctx, sl, sc, st, stream, 18, 0);
	return build(ctx, sl, sc, st, stream, 14, 0);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
