// SPDX-License-Identifier: Apache-2.0 OR MIT
//
// The peer of the XDP lane in scripts/lane_rig.sh: in-kernel XDP
// forwarding with bpf_fib_lookup (the kernel's FIB and neighbour table),
// as the kernel's samples/bpf/xdp_fwd does: IPv4 and IPv6, TTL/hop limit
// and checksum update, MAC rewrite, bpf_redirect. No firewall, no GRE.
// Anything the kernel FIB cannot resolve at once goes up the stack.
//
// Built by the script: clang -O2 -target bpf -c lane_kfwd.bpf.c

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define AF_INET 2
#define AF_INET6 10

struct iph {
	__u8 ver_ihl, tos;
	__be16 tot_len, id, frag;
	__u8 ttl, proto;
	__u16 csum;
	__be32 saddr, daddr;
};

struct ip6h {
	__be32 vtc_flow;
	__be16 plen;
	__u8 nexthdr, hop;
	__u8 saddr[16], daddr[16];
};

static __always_inline void ttl_dec(struct iph *ip)
{
	__u32 c = ip->csum;
	c += bpf_htons(0x0100);
	ip->csum = (__u16)(c + (c >= 0xffff));
	ip->ttl--;
}

SEC("xdp")
int kfwd(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return XDP_PASS;
	struct bpf_fib_lookup p = {};
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iph *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > end || ip->ttl <= 1)
			return XDP_PASS;
		p.family = AF_INET;
		p.tos = ip->tos;
		p.l4_protocol = ip->proto;
		p.tot_len = bpf_ntohs(ip->tot_len);
		p.ipv4_src = ip->saddr;
		p.ipv4_dst = ip->daddr;
		p.ifindex = ctx->ingress_ifindex;
		if (bpf_fib_lookup(ctx, &p, sizeof(p), 0) != BPF_FIB_LKUP_RET_SUCCESS)
			return XDP_PASS;
		ttl_dec(ip);
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ip6h *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > end || ip6->hop <= 1)
			return XDP_PASS;
		p.family = AF_INET6;
		p.flowinfo = ip6->vtc_flow & bpf_htonl(0x0fffffff);
		p.l4_protocol = ip6->nexthdr;
		p.tot_len = bpf_ntohs(ip6->plen);
		__builtin_memcpy(p.ipv6_src, ip6->saddr, 16);
		__builtin_memcpy(p.ipv6_dst, ip6->daddr, 16);
		p.ifindex = ctx->ingress_ifindex;
		if (bpf_fib_lookup(ctx, &p, sizeof(p), 0) != BPF_FIB_LKUP_RET_SUCCESS)
			return XDP_PASS;
		ip6->hop--;
	} else {
		return XDP_PASS;
	}
	__builtin_memcpy(eth->h_dest, p.dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, p.smac, ETH_ALEN);
	return bpf_redirect(p.ifindex, 0);
}

char _license[] SEC("license") = "GPL";
