// SPDX-License-Identifier: Apache-2.0 OR MIT
//
// Traffic generator for measurements: run with BPF_PROG_TEST_RUN in
// live-frames mode (Linux 5.18+), where XDP_TX sends the test frame out of
// the device named in the context, `repeat` times per call, without an skb
// per packet. (xdp-trafficgen does the same but needs kernel BTF, which
// this machine kind lacks.)
//
// Live-frames pages are recycled through a page pool WITHOUT restoring
// their data: a router that rewrites the Ethernet header in place (Linux
// forwarding does) hands the page back with the sink's MAC in it, and the
// next frames would be dropped as "otherhost". So the program writes the
// whole frame from `tern_gen_frame` every time.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define GEN_FRAME_LEN 60

struct frame {
	__u8 b[GEN_FRAME_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct frame);
} tern_gen_frame SEC(".maps");

SEC("xdp")
int tern_gen(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 zero = 0;
	struct frame *f = bpf_map_lookup_elem(&tern_gen_frame, &zero);
	if (!f || data + GEN_FRAME_LEN > end)
		return XDP_ABORTED;
	__builtin_memcpy(data, f->b, GEN_FRAME_LEN);
	return XDP_TX;
}

char _license[] SEC("license") = "Dual MIT/GPL";
