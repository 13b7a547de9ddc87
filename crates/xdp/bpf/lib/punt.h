// SPDX-License-Identifier: Apache-2.0 OR MIT
//
// Control traffic first: the class of a frame handed to Linux or to the
// engine for the router itself (punt_class in class.h, mirrored by
// crates/nodes' linux::class::classify, which the engine applies and the
// crate's tests check), and a policer per class and CPU (punt_police),
// so a flood of one class (pings or UDP to a closed port at the router's address, ARP)
// cannot take the place of another (BGP keepalives, OSPF hellos, VRRP
// advertisements) in the kernel's backlog or the engine's socket. Maps:
// lane_punt_rate, lane_punt_tat; counters SHED_* (one per class). Transit
// punts (unresolved next hops, TTL expiry, rule sets the lane could not
// compile) are not classed: they are the engine's forwarding work.

#ifndef TERN_LANE_LIB_PUNT_H
#define TERN_LANE_LIB_PUNT_H

#include "bytes.h"
#include "class.h"
#include "counters.h"

// 1: the frame may go on; 0: its class is over its rate (counted under
// the class's SHED_* counter; the caller drops it). Verified apart.
__noinline int punt_police(struct xdp_md *ctx)
{
	if (!ctx)
		return 1;
	const __u8 *data = (const __u8 *)(long)ctx->data;
	const __u8 *end = (const __u8 *)(long)ctx->data_end;
	__u32 c = punt_class(data, end);
	if (c >= PC_MAX)
		return 1;
	__u32 k = 2 * c;
	__u64 *cost = bpf_map_lookup_elem(&lane_punt_rate, &k);
	k += 1;
	__u64 *tol = bpf_map_lookup_elem(&lane_punt_rate, &k);
	__u64 *t = bpf_map_lookup_elem(&lane_punt_tat, &c);
	if (!cost || !tol || !t || *cost == 0)
		return 1;
	if (!gcra_admit(*cost, *tol, t)) {
		ctr_add(C_SHED_NEIGH + c, 1);
		return 0;
	}
	return 1;
}

// Whether a punt with this reason is for the router itself (classed).
static __always_inline int punt_to_router(__u32 reason)
{
	// (punt-ipsec: ESP, which is not classed, and IKE to tern's IPsec.)
	return reason == C_PASS_LOCAL || reason == C_PASS_NEIGH || reason == C_PUNT_NEIGH || reason == C_PASS_MCAST ||
	       reason == C_PUNT_LOCAL || reason == C_PUNT_IPSEC;
}

#endif
