/* The `xdp-fwd` DUT: an XDP router as a network engineer would write it
 * by hand, the in-kernel peer of tern's XDP lane. Attached (native mode)
 * to the DUT's veths, it uses the DUT namespace's own addresses, routes
 * and neighbours through bpf_fib_lookup:
 *
 *   1. an ingress firewall: a linear list of (IPv4 source prefix, action)
 *      rules in an array map, filled by crates/bench/src/bpf.rs, checked
 *      in order (first match wins), then a default action. IPv6 frames
 *      take the default action, except ICMPv6 and link traffic;
 *   2. bpf_fib_lookup of the destination; anything it does not resolve at
 *      once (ARP/ND, local addresses, misses, unresolved neighbours, TTL
 *      about to expire, MTU) goes to the kernel with XDP_PASS;
 *   3. TTL / hop limit decrement (incremental IPv4 checksum update, RFC
 *      1624), MAC addresses from the lookup, redirect through a DEVMAP.
 *
 * Per-CPU counters: forwarded, dropped by a rule, dropped by the default
 * action, passed to the kernel, redirect errors. Layouts are mirrored in
 * src/bpf.rs (XdpFwd). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define FW_MAX_RULES 64
#define FW_DROP 1
#define FW_ACCEPT 2

/* Indices of fwd_stats. */
#define CTR_FORWARDED 0
#define CTR_DROP_RULE 1
#define CTR_DROP_DEFAULT 2
#define CTR_PASSED 3
#define CTR_REDIRECT_ERR 4
#define CTR_N 5

#define ETH_HLEN 14
#define ETHERTYPE_IPV4 0x0800
#define ETHERTYPE_IPV6 0x86dd
#define PROTO_ICMPV6 58
#define FAMILY_INET 2
#define FAMILY_INET6 10

/* One firewall rule: source matches when (saddr & mask) == addr (both in
 * network byte order). */
struct fw_rule {
	__u32 addr;
	__u32 mask;
	__u32 action;
	__u32 pad;
};

struct fw_cfg {
	__u32 n_rules;
	__u32 default_action;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FW_MAX_RULES);
	__type(key, __u32);
	__type(value, struct fw_rule);
} fw_rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fw_cfg);
} fw_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CTR_N);
	__type(key, __u32);
	__type(value, __u64);
} fwd_stats SEC(".maps");

/* Egress devices, keyed by ifindex (the lookup's answer). */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, struct bpf_devmap_val);
} fwd_ports SEC(".maps");

struct eth {
	__u8 dst[6];
	__u8 src[6];
	__be16 type;
};

struct ip4 {
	__u8 ver_ihl;
	__u8 tos;
	__be16 tot_len;
	__be16 id;
	__be16 frag_off;
	__u8 ttl;
	__u8 proto;
	__u16 check;
	__be32 saddr;
	__be32 daddr;
};

struct ip6 {
	__be32 ver_tc_flow;
	__be16 payload_len;
	__u8 nexthdr;
	__u8 hop_limit;
	__u8 saddr[16];
	__u8 daddr[16];
};

static __always_inline int count(__u32 idx, int verdict)
{
	__u64 *c = bpf_map_lookup_elem(&fwd_stats, &idx);
	if (c)
		*c += 1;
	return verdict;
}

/* The firewall's verdict for an IPv4 source: the first rule that matches,
 * else the default. *by_rule says which. */
static __always_inline __u32 fw_check4(__be32 saddr, const struct fw_cfg *cfg, int *by_rule)
{
	__u32 n = cfg->n_rules;
#pragma clang loop unroll(disable)
	for (__u32 i = 0; i < FW_MAX_RULES; i++) {
		if (i >= n)
			break;
		/* The key on the stack, the counter in a register: a spilled
		 * counter loses its bounds and the verifier sees no end. */
		__u32 key = i;
		struct fw_rule *r = bpf_map_lookup_elem(&fw_rules, &key);
		if (!r)
			break;
		if ((saddr & r->mask) == r->addr) {
			*by_rule = 1;
			return r->action;
		}
	}
	*by_rule = 0;
	return cfg->default_action;
}

/* RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m') for one 16-bit word m -> m'. */
static __always_inline __u16 csum_replace16(__u16 check, __u16 old, __u16 new)
{
	__u32 sum = (__u16)~check + (__u16)~old + (__u32) new;
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

SEC("xdp")
int tern_xdpfwd(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct eth *eth = data;
	struct bpf_fib_lookup fib = {};
	__u32 zero = 0;
	int by_rule = 0;

	if ((void *)(eth + 1) > end)
		return count(CTR_PASSED, XDP_PASS);
	struct fw_cfg *cfg = bpf_map_lookup_elem(&fw_config, &zero);
	if (!cfg)
		return count(CTR_PASSED, XDP_PASS);

	if (eth->type == bpf_htons(ETHERTYPE_IPV4)) {
		struct ip4 *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > end || (ip->ver_ihl >> 4) != 4)
			return count(CTR_PASSED, XDP_PASS);
		if (fw_check4(ip->saddr, cfg, &by_rule) != FW_ACCEPT)
			return count(by_rule ? CTR_DROP_RULE : CTR_DROP_DEFAULT, XDP_DROP);
		/* The kernel sends the ICMP time exceeded. */
		if (ip->ttl <= 1)
			return count(CTR_PASSED, XDP_PASS);
		fib.family = FAMILY_INET;
		fib.tos = ip->tos;
		fib.l4_protocol = ip->proto;
		fib.tot_len = bpf_ntohs(ip->tot_len);
		fib.ipv4_src = ip->saddr;
		fib.ipv4_dst = ip->daddr;
		fib.ifindex = ctx->ingress_ifindex;
		if (bpf_fib_lookup(ctx, &fib, sizeof(fib), 0) != BPF_FIB_LKUP_RET_SUCCESS)
			return count(CTR_PASSED, XDP_PASS);
		/* TTL is the high byte of the 16-bit word it shares with the protocol. */
		__u16 old = bpf_htons(((__u16)ip->ttl << 8) | ip->proto);
		ip->ttl--;
		__u16 new = bpf_htons(((__u16)ip->ttl << 8) | ip->proto);
		ip->check = csum_replace16(ip->check, old, new);
	} else if (eth->type == bpf_htons(ETHERTYPE_IPV6)) {
		struct ip6 *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > end)
			return count(CTR_PASSED, XDP_PASS);
		/* The rules are IPv4 prefixes: IPv6 takes the default action,
		 * except what a router never forwards and the kernel needs
		 * (ICMPv6: neighbour discovery; multicast to or link-local from
		 * the link: MLD, behind a hop-by-hop header). */
		int for_the_link = ip6->nexthdr == PROTO_ICMPV6 || ip6->daddr[0] == 0xff ||
				   (ip6->saddr[0] == 0xfe && (ip6->saddr[1] & 0xc0) == 0x80);
		if (!for_the_link && cfg->default_action != FW_ACCEPT)
			return count(CTR_DROP_DEFAULT, XDP_DROP);
		if (ip6->hop_limit <= 1)
			return count(CTR_PASSED, XDP_PASS);
		fib.family = FAMILY_INET6;
		fib.flowinfo = ip6->ver_tc_flow & bpf_htonl(0x0fffffff);
		fib.l4_protocol = ip6->nexthdr;
		fib.tot_len = bpf_ntohs(ip6->payload_len);
		__builtin_memcpy(fib.ipv6_src, ip6->saddr, 16);
		__builtin_memcpy(fib.ipv6_dst, ip6->daddr, 16);
		fib.ifindex = ctx->ingress_ifindex;
		if (bpf_fib_lookup(ctx, &fib, sizeof(fib), 0) != BPF_FIB_LKUP_RET_SUCCESS)
			return count(CTR_PASSED, XDP_PASS);
		ip6->hop_limit--;
	} else {
		/* ARP and everything else. */
		return count(CTR_PASSED, XDP_PASS);
	}

	__builtin_memcpy(eth->dst, fib.dmac, 6);
	__builtin_memcpy(eth->src, fib.smac, 6);
	/* An egress device missing from the map: the frame (already
	 * rewritten) is dropped and counted, not handed to the kernel. */
	long r = bpf_redirect_map(&fwd_ports, fib.ifindex, 0);
	if (r != XDP_REDIRECT)
		return count(CTR_REDIRECT_ERR, XDP_DROP);
	return count(CTR_FORWARDED, XDP_REDIRECT);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
