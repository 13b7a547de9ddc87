// SPDX-License-Identifier: Apache-2.0 OR MIT
//
// The XDP lane's maps (30 of its 31: lane_scratch, the per-packet state,
// is in state.h beside its struct) and the globals the loader sets before
// loading (lane_acl_cache_mask, lane_fwd_flows_mask; the caches' on/off
// switches are lane_cfg.flags, switched at run time). Value
// layouts are lane.h's; Rust fills and reads them (src/lane/program.rs,
// layout.rs). Definitions only: no code.

#ifndef TERN_LANE_LIB_MAPS_H
#define TERN_LANE_LIB_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "../lane.h"

struct lane_block {
	__u32 e[LANE_BLOCK];
};

// The FIB's entries are 16 bits (tern-fib's V4Entry and V6Entry).
struct lane_block16 {
	__u16 e[LANE_BLOCK];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lane_cfg);
} lane_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct lane_rx);
} lane_rx SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * LANE_MAX_IFS);
	__type(key, __u32);
	__type(value, struct lane_if);
} lane_ifs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * LANE_MAX_PORTS * 4096);
	__type(key, __u32);
	__type(value, __u16);
} lane_vlans SEC(".maps");

// The local UDP ports of ESP in UDP other than 4500, network byte order
// (the key is the packet's own two bytes), the SAs' `udp_encap` source
// ports (LaneProgram::set_encap_ports).
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u16);
	__type(value, __u8);
} lane_encap_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 2 * LANE_MAX_TUNNELS);
	__type(key, struct lane_tun_key);
	__type(value, __u16);
} lane_tunnels SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32); // IPv4 address, network byte order
	__type(value, __u8);
} lane_local4 SEC(".maps");

// The interfaces' virtual MACs (struct lane_vmac_key; lane.c's
// ethernet-input looks here only for a unicast frame to another MAC than
// the port's).
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LANE_MAX_VMACS);
	__type(key, struct lane_vmac_key);
	__type(value, __u8);
} lane_vmacs SEC(".maps");

struct in6_key {
	__u8 b[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct in6_key);
	__type(value, __u8);
} lane_local6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * LANE_MAX_SETS * 2);
	__type(key, __u32);
	__type(value, struct lane_acl_set);
} lane_acl_sets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * LANE_MAX_SETS * 2 * LANE_NF);
	__type(key, __u32);
	__type(value, struct lane_acl_field);
} lane_acl_fields SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2 * LANE_MAX_SETS * 2 * (LANE_ACL_RULES + 1));
	__type(key, __u32);
	__type(value, struct lane_hits);
} lane_acl_hits SEC(".maps");

// The ACL verdict cache (lane.h): the loader sizes it to the buckets per
// CPU times the possible CPUs and sets the mask (buckets per CPU - 1;
// LCFG_NO_ACL_CACHE turns the cache off).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE); // page-aligned values: line-aligned buckets
	__uint(max_entries, LANE_ACL_CACHE_BUCKETS);
	__type(key, __u32);
	__type(value, struct lane_acl_cbucket);
} lane_acl_cache SEC(".maps");

// The verdict cache's memo: per CPU and direction (input, output rule
// sets), the last classification (acl_eval), an entry whose key is the
// packet's, unmasked. The loader zeroes it with the cache when the
// publication sequence wraps.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct lane_acl_centry);
} lane_acl_memo SEC(".maps");

const volatile __u32 lane_acl_cache_mask = LANE_ACL_CACHE_BUCKETS - 1;

// The forwarding memo (lane.h): per CPU, a flow table. The loader sizes
// it to the buckets per CPU times the possible CPUs, sets the mask
// (buckets per CPU - 1) and zeroes it when either sequence of its tag
// wraps; LCFG_NO_FWD_MEMO turns it off.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE); // page-aligned values: line-aligned entries
	__uint(max_entries, LANE_FWD_BUCKETS);
	__type(key, __u32);
	__type(value, struct lane_fwd_fbucket);
} lane_fwd_flows SEC(".maps");

const volatile __u32 lane_fwd_flows_mask = LANE_FWD_BUCKETS - 1;

// The FIB: tern-fib's arrays, LANE_BLOCK entries per element, so that the
// mmap'ed map is the same flat array (u16 entries; see lane/fib.rs). Sizes of the node, next-hop and member maps are set by
// the loader.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1 << 16); // 2^24 entries: DIR-24-8's direct index
	__type(key, __u32);
	__type(value, struct lane_block16);
} lane_v4_top SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1 << 12);
	__type(key, __u32);
	__type(value, struct lane_block16);
} lane_v4_nodes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1 << 16); // 2^24 entries
	__type(key, __u32);
	__type(value, struct lane_block16);
} lane_v6_top SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1 << 14);
	__type(key, __u32);
	__type(value, struct lane_block16);
} lane_v6_nodes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1 << 16);
	__type(key, __u32);
	__type(value, struct lane_nh);
} lane_nh SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1 << 8);
	__type(key, __u32);
	__type(value, struct lane_block);
} lane_ecmp SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, LANE_MAX_PORTS);
	__type(key, __u32);
	__type(value, struct bpf_devmap_val);
} lane_tx SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, LANE_MAX_PORTS * LANE_MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} lane_xsks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, C_MAX);
	__type(key, __u32);
	__type(value, __u64);
} lane_ctr SEC(".maps");

// The punt policers (lib/punt.h): per class c, [2 c] the cost of one
// packet in nanoseconds (10^9 / rate; 0: not policed) and [2 c + 1] the
// burst tolerance in nanoseconds (burst x cost); the loader writes them.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * PC_MAX);
	__type(key, __u32);
	__type(value, __u64);
} lane_punt_rate SEC(".maps");

// Per CPU and class: the policer's virtual time (GCRA's theoretical
// arrival time less the burst tolerance), in bpf_ktime_get_ns time.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PC_MAX);
	__type(key, __u32);
	__type(value, __u64);
} lane_punt_tat SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LANE_MAX_PORTS);
	__type(key, __u32);
	__type(value, struct lane_port_stats);
} lane_port_stats SEC(".maps");

// The outer IPv4 identification of GRE packets (gre-encap's `ident`).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} lane_ident SEC(".maps");

// Packet traces (`tern trace start N`). The budget is a soft limit: two
// CPUs may both take its last unit (a fetching atomic needs BPF v3), so
// userspace keeps the first N records it reads.
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20); // 20,000 records; a trace takes 10,000 at most
} lane_trace SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __s64);
} lane_trace_budget SEC(".maps");

#endif
