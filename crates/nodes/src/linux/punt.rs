//! `linux-punt`: hands a packet for the router to Linux through the TAP
//! of the port it was received on, within the exception path's rates.
//! Control traffic first: each frame is classed ([`super::class`]: ARP/ND,
//! BGP, OSPF, VRRP, IKE, BFD, the rest `local`) and passes its class's
//! token bucket (per worker, `Params::punt_classes`; the excess is
//! dropped as `shed-<class>`), so a flood of pings at the router cannot
//! take the place of BGP keepalives or VRRP advertisements. The bulk
//! (`local`, and what is not classed: ESP, LLDP) then passes a token
//! bucket per interface (per worker) of `Params::punt_rate` packets per
//! second and `Params::punt_burst` packets (the excess is dropped as
//! `policed`); control classes skip it, so the bulk cannot use it up for
//! them. Transit never passes here.
//!
//! Next nodes: `drop` (the others are queued on a TAP). Counters:
//! [`LinuxPuntError::DESCS`].
//!
//! Config: `Params::tap_ports`, `Params::punt_rate`, `Params::punt_burst`,
//! `Params::punt_classes`.
//!
//! Example: an ARP request for tern's address on `lan` goes, as it
//! arrived, to `lan`'s TAP, counted as `punted`; on `wan.7` it goes to
//! `wan.7`'s TAP without its 802.1Q tag.
//!
//! Reference: one loop per packet; there is no fast path.

#![deny(clippy::indexing_slicing)]

use super::class::{PuntClass, classify};
use super::*;
use crate::util::{ETH_P_8021AD, ETH_P_8021Q};

/// The `linux-punt` node (see the module).
pub struct LinuxPunt {
    ifs: Snapshot<IfTable>,
    params: Snapshot<Params>,
    /// By interface index; made on first use.
    buckets: Vec<TokenBucket>,
    /// The (rate, burst) the buckets were made with.
    policy: (u32, u32),
    /// One per class (`PuntClass` order), and the rates they were made with.
    class_buckets: Vec<TokenBucket>,
    class_policy: [(u32, u32); 7],
}

impl LinuxPunt {
    pub fn new(shared: &Shared) -> Self {
        LinuxPunt {
            ifs: shared.ifaces.snapshot(),
            params: shared.params.snapshot(),
            buckets: Vec::new(),
            policy: (0, 0),
            class_buckets: Vec::new(),
            class_policy: [(0, 0); 7],
        }
    }
}

/// Takes a token of interface `ifindex`'s bucket at `now_ns` (policy
/// `(rate, burst)`, rate 0: unlimited).
fn admit(buckets: &mut Vec<TokenBucket>, (rate, burst): (u32, u32), ifindex: u16, now_ns: u64) -> bool {
    if rate == 0 {
        return true;
    }
    let i = usize::from(ifindex);
    if buckets.len() <= i {
        buckets.resize_with(i + 1, || TokenBucket::new(rate, burst));
    }
    buckets.get_mut(i).is_some_and(|b| b.take(now_ns))
}

/// Takes a token of class `class`'s bucket (rate 0: unlimited).
fn admit_class(buckets: &mut [TokenBucket], policy: &[(u32, u32); 7], class: PuntClass, now_ns: u64) -> bool {
    let i = class.index();
    if policy.get(i).is_none_or(|&(rate, _)| rate == 0) {
        return true;
    }
    buckets.get_mut(i).is_none_or(|b| b.take(now_ns))
}

/// The counter of frames of `class` shed by its policer.
fn shed(class: PuntClass) -> LinuxPuntError {
    match class {
        PuntClass::Neighbor => LinuxPuntError::ShedNeighbor,
        PuntClass::Bgp => LinuxPuntError::ShedBgp,
        PuntClass::Ospf => LinuxPuntError::ShedOspf,
        PuntClass::Vrrp => LinuxPuntError::ShedVrrp,
        PuntClass::Ike => LinuxPuntError::ShedIke,
        PuntClass::Bfd => LinuxPuntError::ShedBfd,
        PuntClass::Local => LinuxPuntError::ShedLocal,
    }
}

tern_engine::errors! {
    /// `linux-punt`'s counters.
    pub enum LinuxPuntError {
        Punted = info("punted", "frames for the router handed to Linux through the interface's TAP"),
        NoIf = drop("no-interface", "received on an unknown interface"),
        NoTap = drop("no-tap", "for the router, but the receiving interface has no TAP (a tunnel)"),
        NotTagged = drop("not-tagged", "received on a VLAN sub-interface without an 802.1Q header to strip"),
        Policed = drop("policed", "over the exception path's rate ([linux] punt_rate, punt_burst)"),
        ShedNeighbor = drop("shed-neighbor", "ARP/ND over its class's rate ([dataplane.punt] neighbor)"),
        ShedBgp = drop("shed-bgp", "BGP over its class's rate ([dataplane.punt] bgp)"),
        ShedOspf = drop("shed-ospf", "OSPF over its class's rate ([dataplane.punt] ospf)"),
        ShedVrrp = drop("shed-vrrp", "VRRP over its class's rate ([dataplane.punt] vrrp)"),
        ShedIke = drop("shed-ike", "IKE over its class's rate ([dataplane.punt] ike)"),
        ShedBfd = drop("shed-bfd", "BFD over its class's rate ([dataplane.punt] bfd)"),
        ShedLocal = drop("shed-local", "other traffic for the router over its class's rate ([dataplane.punt] local)"),
    }
}

/// Removes the 802.1Q header of a frame received on a VLAN
/// sub-interface: the MAC addresses move up over the tag. False (nothing
/// changed) when the frame carries no tag.
fn strip_tag(pool: &mut tern_packet::PacketPool, p: PktIdx) -> bool {
    let d = pool.data_mut(p);
    if d.len() < 18 {
        return false;
    }
    // 18 bytes: the view's reads are in bounds.
    let tpid = u16::from(tern_wire::EthernetFrame::new_unchecked(&*d).ethertype());
    if tpid != ETH_P_8021Q && tpid != ETH_P_8021AD {
        return false;
    }
    d.copy_within(0..12, 4);
    pool.advance(p, 4);
    let m = pool.meta_mut(p);
    m.l3_off = m.l3_off.saturating_sub(4);
    true
}

tern_engine::edges! {
    /// `linux-punt`'s next nodes: a TAP, or `drop`.
    pub enum LinuxPuntNext {
        Drop = "drop",
    }
}

impl Node for LinuxPunt {
    fn name(&self) -> &'static str {
        "linux-punt"
    }
    fn nexts(&self) -> &'static [&'static str] {
        LinuxPuntNext::NAMES
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        LinuxPuntError::DESCS
    }
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        let LinuxPunt { ifs, params, buckets, policy, class_buckets, class_policy } = self;
        ifs.refresh();
        params.refresh();
        let params = params.current();
        if (params.punt_rate, params.punt_burst) != *policy {
            *policy = (params.punt_rate, params.punt_burst);
            for b in buckets.iter_mut() {
                b.configure(policy.0, policy.1);
            }
        }
        if params.punt_classes != *class_policy || class_buckets.is_empty() {
            *class_policy = params.punt_classes;
            if class_buckets.is_empty() {
                class_buckets.extend(class_policy.iter().map(|&(r, b)| TokenBucket::new(r, b)));
            } else {
                for (b, &(r, n)) in class_buckets.iter_mut().zip(class_policy.iter()) {
                    b.configure(r, n);
                }
            }
        }
        let taps = &params.tap_ports;
        let ifs = ifs.current();
        let mut punted = 0;
        for (o, &p) in next.iter_mut().zip(pkts) {
            let Some(iface) = ifs.get(cx.pool.meta(p).rx_if) else {
                *o = cx.drop(p, LinuxPuntError::NoIf);
                continue;
            };
            // Tunnels carry no link layer: their packets cannot enter a TAP.
            let tap = match iface.kind {
                IfKind::Gre(_) | IfKind::Ipsec(_) => NO_IF,
                _ => taps.get(usize::from(iface.index)).copied().unwrap_or(NO_IF),
            };
            if tap == NO_IF || usize::from(tap) >= cx.tx.len() {
                *o = cx.drop(p, LinuxPuntError::NoTap);
                continue;
            }
            let class = classify(cx.pool.data(p));
            if let Some(c) = class
                && !admit_class(class_buckets, class_policy, c, cx.now_ns)
            {
                *o = cx.drop(p, shed(c));
                continue;
            }
            let control = class.is_some_and(|c| c != PuntClass::Local);
            if !control && !admit(buckets, *policy, iface.index, cx.now_ns) {
                *o = cx.drop(p, LinuxPuntError::Policed);
                continue;
            }
            if matches!(iface.kind, IfKind::Vlan { .. }) && !strip_tag(cx.pool, p) {
                *o = cx.drop(p, LinuxPuntError::NotTagged);
                continue;
            }
            if let Some(q) = cx.tx.get_mut(usize::from(tap)) {
                q.push(p);
                punted += 1;
                *o = NEXT_TAKEN;
            }
        }
        if punted > 0 {
            cx.count(LinuxPuntError::Punted, punted);
        }
    }
}
