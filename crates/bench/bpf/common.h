/* Layouts shared by the generator and the sink programs and by
 * crates/bench/src/bpf.rs, which reads and writes them as bytes.
 * Every change here must be mirrored there (the differential test in
 * tests/bpf_programs.rs fails when they drift). */
#ifndef TERN_BENCH_COMMON_H
#define TERN_BENCH_COMMON_H

#include <linux/types.h>

#define MAX_SLOTS 256
#define MAX_STREAMS 16
/* Bytes of header template copied into every frame: Ethernet + 802.1Q +
 * IPv6 + UDP + signature = 82, rounded up. The template is zero past the
 * signature, so the copy also clears whatever an earlier, longer header
 * left in a recycled page. */
#define HDR_MAX 96
#define SIG_LEN 12
#define SIG_MAGIC 0x7472 /* "tr" */
#define SIG_VERSION 1

/* Sequence window of the sink: 16 words of 64 bits (RFC 6479 layout). */
#define WIN_WORDS 16
#define WIN_BITS (WIN_WORDS * 64)
/* Latency histogram: 16 exact buckets for 0..15 ns, then 8 sub-buckets
 * per power of two up to 2^32 ns. */
#define LAT_BUCKETS 256 /* 240 used; a power of two so the index is masked */

/* One frame position of the generator's cycle. */
struct slot {
	__u8 hdr[HDR_MAX];
	__u16 frame_len; /* bytes on the wire without FCS */
	__u16 l3_off;    /* 14, or 18 with an 802.1Q tag */
	__u8 ipv6;
	__u8 stream;
	__u8 pad[2];
};

/* How the flows of one stream vary. An address is the template's plus
 * idx * stride on its low 32 bits, idx < count. */
struct stream_cfg {
	__u32 src_count;
	__u32 src_stride;
	__u32 dst_count;
	__u32 dst_stride;
	__u16 sport_base;
	__u16 sport_count;
	__u16 dport_base;
	__u16 dport_count;
	__u32 random;
	__u32 pad;
};

struct gen_cfg {
	__u32 n_slots;
	__u32 pad;
	struct stream_cfg streams[MAX_STREAMS];
};

struct gen_state {
	__u64 sent;
	__u64 flow_ctr[MAX_STREAMS];
	__u32 seq[MAX_STREAMS];
};

/* The generator's pacing. With rate 0 every run of the program sends a
 * frame (the caller paces, or does not). Otherwise the program sends
 * the frames due at `rate` since its first run of the trial and drops
 * the page otherwise (XDP_DROP: back to the page pool), so one long
 * BPF_PROG_TEST_RUN call spaces its frames evenly instead of sending
 * them in bursts. A token bucket of `depth` frames: frames due more than
 * `depth` ago, when the generator was held up, are skipped, not sent in
 * a catch-up burst. */
struct gen_pace {
	__u64 rate;     /* frames per second, 0: unpaced */
	__u64 total;    /* frames to offer in all (sent + skipped) */
	__u64 depth;    /* token bucket depth, frames (>= 1) */
	__u64 start_ns; /* bpf_ktime_get_ns() of the first run, 0: not yet */
	__u64 last_ns;  /* bpf_ktime_get_ns() of the last frame sent */
	__u64 skipped;  /* frames skipped while the generator was late */
};

/* The sink's log of sequence gaps (sink.bpf.c): gap i is at i % GAP_LOG. */
#define GAP_LOG 1024
struct rx_gaps {
	__u64 count;
	__u64 at[GAP_LOG];   /* bpf_ktime_get_ns() when the frame after the gap came */
	__u64 what[GAP_LOG]; /* stream << 32 | sequence numbers skipped */
};

struct rx_stream {
	__u64 received;
	__u64 bytes;
	__u64 dup;
	__u64 reordered;
	__u64 late;
	__u64 lat_sum;
	__u64 lat_min;
	__u64 lat_max;
	__u32 max_seq;
	__u32 started;
	__u64 window[WIN_WORDS];
	__u64 hist[LAT_BUCKETS];
};

#endif
