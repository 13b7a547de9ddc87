/* The receiver: an XDP program on the sink's interface. It finds the
 * signature the generator wrote after the UDP header (also inside one
 * GRE layer, for the tunnel scenario), counts the frame for its stream,
 * tracks sequence numbers in a 1024-bit window (RFC 6479 layout) to tell
 * reordered frames (RFC 4737: arrived after a higher sequence number)
 * from duplicates, records the one-way latency in a log-linear histogram
 * and drops the frame. Anything else (ARP, ND) goes to the kernel so the
 * sink answers neighbour resolution.
 *
 * A veth has one receive queue and so one NAPI context: the per-stream
 * state is updated by one CPU at a time, without atomics. The userspace
 * mirror of this logic is crates/bench/src/account.rs. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_STREAMS);
	__type(key, __u32);
	__type(value, struct rx_stream);
} rx_streams SEC(".maps");

struct rx_misc {
	__u64 passed;     /* not ours: handed to the kernel */
	__u64 bad_stream; /* our magic, stream id out of range */
	__u64 in_gre;     /* counted frames that arrived inside GRE */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rx_misc);
} rx_misc SEC(".maps");

/* Gaps in the sequence: each time a stream's frame arrives more than one
 * past the highest sequence number so far, when it arrived and how many
 * numbers it skipped (frames lost, unless they arrive later, reordered).
 * The tester matches these against the holes of the DUT's CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rx_gaps);
} rx_gaps SEC(".maps");

static __always_inline void log_gap(__u32 stream, __u32 missing)
{
	__u32 k0 = 0;
	struct rx_gaps *g = bpf_map_lookup_elem(&rx_gaps, &k0);
	if (!g)
		return;
	__u32 i = g->count & (GAP_LOG - 1);
	g->at[i] = bpf_ktime_get_ns();
	g->what[i] = ((__u64)stream << 32) | missing;
	g->count++;
}

static __always_inline __u32 lat_bucket(__u32 v)
{
	if (v < 16)
		return v;
	__u32 e = 0, x = v;
	if (x >= (1u << 16)) { x >>= 16; e += 16; }
	if (x >= (1u << 8)) { x >>= 8; e += 8; }
	if (x >= (1u << 4)) { x >>= 4; e += 4; }
	if (x >= (1u << 2)) { x >>= 2; e += 2; }
	if (x >= (1u << 1)) { e += 1; }
	/* e in 4..31 */
	return 16 + (e - 4) * 8 + ((v >> (e - 3)) & 7);
}

static __always_inline void win_set(struct rx_stream *s, __u32 seq)
{
	s->window[(seq >> 6) & (WIN_WORDS - 1)] |= 1ull << (seq & 63);
}

static __always_inline int win_test(struct rx_stream *s, __u32 seq)
{
	return (s->window[(seq >> 6) & (WIN_WORDS - 1)] >> (seq & 63)) & 1;
}

static __always_inline void track(struct rx_stream *s, __u32 stream, __u32 seq)
{
	if (!s->started) {
		s->started = 1;
		s->max_seq = seq;
		win_set(s, seq);
		return;
	}
	__s32 diff = (__s32)(seq - s->max_seq);
	if (diff > 0) {
		if (diff > 1)
			log_gap(stream, (__u32)diff - 1);
		/* Entering new words: clear them before use. */
		__u32 k = ((seq >> 6) - (s->max_seq >> 6)) & ((1u << 26) - 1);
		__u32 w = s->max_seq >> 6;
		if (k >= WIN_WORDS) {
#pragma unroll
			for (int i = 0; i < WIN_WORDS; i++)
				s->window[i] = 0;
		} else {
			for (__u32 i = 1; i <= WIN_WORDS; i++) {
				if (i > k)
					break;
				s->window[(w + i) & (WIN_WORDS - 1)] = 0;
			}
		}
		win_set(s, seq);
		s->max_seq = seq;
	} else if (diff == 0) {
		s->dup++;
	} else {
		__u32 age = (__u32)(-diff);
		if (age >= WIN_BITS - 64)
			s->late++;
		else if (win_test(s, seq))
			s->dup++;
		else {
			win_set(s, seq);
			s->reordered++;
		}
	}
}

SEC("xdp")
int tern_sink(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 k0 = 0;
	struct rx_misc *misc = bpf_map_lookup_elem(&rx_misc, &k0);
	if (!misc)
		return XDP_PASS;

	__u8 *p = data;
	if (p + 14 > (__u8 *)end)
		goto pass;
	__u16 proto;
	__builtin_memcpy(&proto, p + 12, 2);
	p += 14;
	if (proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD)) {
		if (p + 4 > (__u8 *)end)
			goto pass;
		__builtin_memcpy(&proto, p + 2, 2);
		p += 4;
	}

	__u8 l4 = 0;
	int gre = 0;
	for (int depth = 0; depth < 2; depth++) {
		if (proto == bpf_htons(ETH_P_IP)) {
			if (p + 20 > (__u8 *)end)
				goto pass;
			__u32 ihl = (p[0] & 0x0f) * 4;
			if (ihl < 20)
				goto pass;
			/* fragments other than a first one carry no UDP header */
			if ((p[6] & 0x1f) || p[7])
				goto pass;
			l4 = p[9];
			p += ihl;
		} else if (proto == bpf_htons(ETH_P_IPV6)) {
			if (p + 40 > (__u8 *)end)
				goto pass;
			l4 = p[6];
			p += 40;
		} else {
			goto pass;
		}
		if (l4 == 17)
			break;
		if (l4 != 47 || depth == 1)
			goto pass;
		/* RFC 2784/2890: flags C, K, S each add 4 bytes. */
		if (p + 4 > (__u8 *)end)
			goto pass;
		__u8 f = p[0];
		gre = 1;
		__builtin_memcpy(&proto, p + 2, 2);
		p += 4 + ((f & 0x80) ? 4 : 0) + ((f & 0x20) ? 4 : 0) + ((f & 0x10) ? 4 : 0);
	}
	if (l4 != 17)
		goto pass;
	if (p + 8 + SIG_LEN > (__u8 *)end)
		goto pass;
	__u8 *sig = p + 8;
	__u16 magic;
	__builtin_memcpy(&magic, sig, 2);
	if (magic != bpf_htons(SIG_MAGIC) || sig[3] != SIG_VERSION)
		goto pass;
	__u32 stream = sig[2];
	if (stream >= MAX_STREAMS) {
		misc->bad_stream++;
		return XDP_DROP;
	}
	struct rx_stream *s = bpf_map_lookup_elem(&rx_streams, &stream);
	if (!s)
		return XDP_DROP;
	__u32 seq, ts;
	__builtin_memcpy(&seq, sig + 4, 4);
	__builtin_memcpy(&ts, sig + 8, 4);
	seq = bpf_ntohl(seq);
	ts = bpf_ntohl(ts);
	__u32 lat = (__u32)bpf_ktime_get_ns() - ts;

	if (s->received == 0 || lat < s->lat_min)
		s->lat_min = lat;
	if (lat > s->lat_max)
		s->lat_max = lat;
	s->lat_sum += lat;
	s->received++;
	s->bytes += (__u64)((__u8 *)end - (__u8 *)data);
	__u32 b = lat_bucket(lat);
	s->hist[b & (LAT_BUCKETS - 1)]++;
	track(s, stream, seq);
	if (gre)
		misc->in_gre++;
	return XDP_DROP;
pass:
	misc->passed++;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
