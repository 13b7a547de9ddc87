// SPDX-License-Identifier: Apache-2.0 OR MIT
//
// Control traffic first, the part without maps: the class (PC_*, lane.h)
// of a frame for the router itself (punt_class, mirrored by crates/nodes'
// linux::class::classify) and the GCRA step of a class's policer
// (gcra_admit). Shared by the lane (lib/punt.h, on its maps) and the
// AF_XDP steering program (steer.c, on its own).

#ifndef TERN_LANE_LIB_CLASS_H
#define TERN_LANE_LIB_CLASS_H

#include <linux/types.h>
#include <bpf/bpf_helpers.h>

#include "../lane.h"
#include "bytes.h"

#define BFD_CTL 3784
#define BFD_ECHO 3785
#define BFD_MHOP 4784

// The class (PC_*) of the frame [p, end).
static __always_inline __u32 punt_class(const __u8 *p, const __u8 *end)
{
	if (p + 14 > end)
		return PC_LOCAL;
	__u16 et = rd16(p + 12);
	const __u8 *ip = p + 14;
	if (et == 0x8100 || et == 0x88a8) {
		if (p + 18 > end)
			return PC_LOCAL;
		et = rd16(p + 16);
		ip = p + 18;
	}
	if (et == 0x0806)
		return PC_NEIGH;
	const __u8 *l4;
	__u8 proto;
	if (et == 0x0800) {
		if (ip + 20 > end)
			return PC_LOCAL;
		proto = ip[9];
		__u32 ihl = (ip[0] & 0x0f) * 4;
		// A later fragment has no ports: the bulk's.
		if (rd16(ip + 6) & 0x1fff)
			return proto == 89 ? PC_OSPF : proto == 112 ? PC_VRRP : proto == 50 ? PC_MAX : PC_LOCAL;
		if (ihl < 20)
			return PC_LOCAL;
		l4 = ip + (ihl & 0x3c);
	} else if (et == 0x86dd) {
		if (ip + 40 > end)
			return PC_LOCAL;
		proto = ip[6];
		l4 = ip + 40;
	} else {
		return PC_MAX;
	}
	if (proto == 89)
		return PC_OSPF;
	if (proto == 112)
		return PC_VRRP;
	if (proto == 50)
		return PC_MAX;
	if (proto == 58) {
		if (l4 + 1 > end)
			return PC_LOCAL;
		return (l4[0] >= 133 && l4[0] <= 137) ? PC_NEIGH : PC_LOCAL;
	}
	if (proto != 6 && proto != 17)
		return PC_LOCAL;
	if (l4 + 4 > end)
		return PC_LOCAL;
	__u16 sport = rd16(l4);
	__u16 dport = rd16(l4 + 2);
	if (proto == 6)
		return (sport == 179 || dport == 179) ? PC_BGP : PC_LOCAL;
	if (dport == BFD_CTL || dport == BFD_ECHO || dport == BFD_MHOP)
		return PC_BFD;
	if (dport == 500 || sport == 500)
		return PC_IKE;
	if (dport == 4500 || sport == 4500) {
		// RFC 3948: a one-byte 0xff is a NAT keepalive, four zero bytes
		// the non-ESP marker (IKE); anything else is ESP: data.
		if (l4 + 9 <= end && rd16(l4 + 4) == 9 && l4[8] == 0xff)
			return PC_IKE;
		if (l4 + 12 > end)
			return PC_LOCAL;
		return (l4[8] | l4[9] | l4[10] | l4[11]) == 0 ? PC_IKE : PC_MAX;
	}
	return PC_LOCAL;
}

// One GCRA step (a token bucket in virtual time): `t` runs behind the
// clock by at most the burst tolerance `tol` and moves one packet's
// `cost` (ns) per packet let through. 1: admitted; 0: over the rate.
static __always_inline int gcra_admit(__u64 cost, __u64 tol, __u64 *t)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 v = *t;
	if (now > tol && v < now - tol)
		v = now - tol;
	if (v + cost > now)
		return 0;
	*t = v + cost;
	return 1;
}

#endif
