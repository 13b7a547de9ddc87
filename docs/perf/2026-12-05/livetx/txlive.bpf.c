// Prototype: transmit frames a user-space worker put in an mmap-able ring,
// by BPF_PROG_TEST_RUN in live-frames mode (XDP_TX out of ctx's device).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#define SLOTS 256
#define SLOT_DATA 2040
struct slot { __u32 len; __u32 pad; __u8 data[SLOT_DATA]; };
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(map_flags, BPF_F_MMAPABLE); __uint(max_entries, SLOTS); __type(key, __u32); __type(value, struct slot); } ring SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(map_flags, BPF_F_MMAPABLE); __uint(max_entries, 2); __type(key, __u32); __type(value, __u64); } pos SEC(".maps");

SEC("xdp")
int txlive(struct xdp_md *ctx)
{
	__u32 z = 0;
	__u64 *p = bpf_map_lookup_elem(&pos, &z);
	if (!p)
		return XDP_ABORTED;
	__u32 i = (__u32)(*p) & (SLOTS - 1);
	*p += 1;
	struct slot *s = bpf_map_lookup_elem(&ring, &i);
	if (!s)
		return XDP_ABORTED;
	__u32 len = s->len;
	if (len < 60 || len > 1514)
		return XDP_DROP;
	void *d = (void *)(long)ctx->data, *e = (void *)(long)ctx->data_end;
	int cur = (int)(e - d);
	if (bpf_xdp_adjust_tail(ctx, (int)len - cur))
		return XDP_DROP;
	if (bpf_xdp_store_bytes(ctx, 0, s->data, len))
		return XDP_DROP;
	return XDP_TX;
}

SEC("xdp")
int sink(struct xdp_md *ctx)
{
	__u32 one = 1;
	__u64 *c = bpf_map_lookup_elem(&pos, &one);
	if (c)
		__sync_fetch_and_add(c, 1);
	return XDP_DROP;
}
char _license[] SEC("license") = "Dual MIT/GPL";
