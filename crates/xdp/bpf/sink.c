// SPDX-License-Identifier: Apache-2.0 OR MIT
//
// Counting sink for measurements: counts every frame that reaches the sink
// interface and drops it. Counting here, not with the veth rx counters,
// sees only packets the sink really processed (veth counts before the
// backlog drops that hide in softnet_stat).

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2); // 0: packets, 1: bytes
	__type(key, __u32);
	__type(value, __u64);
} tern_sink_count SEC(".maps");

SEC("xdp")
int tern_sink(struct xdp_md *ctx)
{
	__u32 k = 0;
	__u64 *c = bpf_map_lookup_elem(&tern_sink_count, &k);
	if (c)
		*c += 1;
	k = 1;
	c = bpf_map_lookup_elem(&tern_sink_count, &k);
	if (c)
		*c += ctx->data_end - ctx->data;
	return XDP_DROP;
}

char _license[] SEC("license") = "Dual MIT/GPL";
