/* XDP_PASS on the DUT's ingress veth when the DUT attaches no XDP program
 * of its own and has turned GRO off (tern's AF_PACKET driver does): a veth
 * accepts frames redirected by XDP (the generator's) only while it has a
 * NAPI context, which GRO or an XDP program gives it. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int tern_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
