//! What the control thread publishes to the forwarding nodes, and what the
//! nodes report back.

use crossbeam_queue::ArrayQueue;
use serde::Serialize;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;
use tern_fib::FibReader;
use tern_ipsec::SaReader;
use tern_rcu::Published;

/// No interface / no sub-interface.
pub const NO_IF: u16 = u16::MAX;

/// An IPv4 address with its prefix length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct V4Net {
    pub addr: Ipv4Addr,
    pub len: u8,
}

impl V4Net {
    pub fn mask(&self) -> u32 {
        if self.len == 0 { 0 } else { u32::MAX << (32 - u32::from(self.len.min(32))) }
    }
    pub fn contains(&self, a: Ipv4Addr) -> bool {
        (u32::from(a) ^ u32::from(self.addr)) & self.mask() == 0
    }
    /// The directed broadcast address (none for /31 and /32).
    pub fn broadcast(&self) -> Option<Ipv4Addr> {
        (self.len < 31).then(|| Ipv4Addr::from(u32::from(self.addr) | !self.mask()))
    }
}

/// An IPv6 address with its prefix length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct V6Net {
    pub addr: Ipv6Addr,
    pub len: u8,
}

impl V6Net {
    pub fn mask(&self) -> u128 {
        if self.len == 0 { 0 } else { u128::MAX << (128 - u32::from(self.len.min(128))) }
    }
    pub fn contains(&self, a: Ipv6Addr) -> bool {
        (u128::from(a) ^ u128::from(self.addr)) & self.mask() == 0
    }
}

/// What kind of interface.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IfKind {
    /// A device tern drives through a port.
    Port,
    /// An 802.1Q sub-interface of `parent`.
    Vlan { parent: u16, vid: u16 },
    /// A GRE tunnel (RFC 2784, key per RFC 2890): packets routed to it are
    /// encapsulated and routed again towards `remote`.
    Gre(GreTunnel),
    /// A route-based IPsec tunnel (ESP tunnel mode, RFC 4303): packets
    /// routed to it are encrypted with SA `sa_out` and routed again
    /// towards `remote`; ESP from `remote` to `local` on an SA in `sa_in`
    /// is decrypted and enters as received here.
    Ipsec(IpsecTunnel),
    /// The index of a sub-interface or tunnel a reload removed: kept so
    /// that the other interfaces keep their indexes (the FIB, next hops
    /// and ports refer to them) until tern restarts. Down, no port, no
    /// name; a later reload may give the index to a new interface.
    Removed,
}

/// The endpoints and options of a GRE tunnel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct GreTunnel {
    pub local: IpAddr,
    pub remote: IpAddr,
    pub key: Option<u32>,
    /// TTL / hop limit of the outer header.
    pub ttl: u8,
}

impl GreTunnel {
    /// Bytes the encapsulation adds (outer IP header + GRE header).
    pub fn overhead(&self) -> usize {
        let outer = if self.remote.is_ipv4() { 20 } else { 40 };
        outer + 4 + if self.key.is_some() { 4 } else { 0 }
    }
}

/// The endpoints and SAs of an IPsec tunnel (the SAs are the
/// [`tern_ipsec::SaDb`]'s ids). A `remote` of 0.0.0.0 or :: makes it
/// multipoint (remote access, [`IpsecTunnel::is_multipoint`]): its
/// clients and their SAs are in [`Shared::ipsec_clients`], `sa_out` and
/// `sa_in` unused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct IpsecTunnel {
    pub local: IpAddr,
    pub remote: IpAddr,
    /// The SA packets leave on.
    pub sa_out: u32,
    /// The SAs accepted inbound (several while rekeying).
    pub sa_in: Vec<u32>,
    /// TTL / hop limit of the outer header.
    pub ttl: u8,
}

impl IpsecTunnel {
    /// Many clients behind one tunnel (`remote = "any"`): `esp-encrypt`
    /// picks the client by the inner destination, `esp-decrypt` takes the
    /// clients' SAs from any outer source.
    pub fn is_multipoint(&self) -> bool {
        self.remote.is_unspecified()
    }

    /// The most the encapsulation adds: outer IP header, UDP (RFC 3948),
    /// ESP header, a 16-byte IV, up to 15 bytes of padding, pad length and
    /// next header, a 32-byte ICV (the worst case of every algorithm; the
    /// control side may use the SA's own [`tern_ipsec::Sa::max_overhead`]).
    pub fn overhead(&self) -> usize {
        let outer = if self.remote.is_ipv4() { 20 } else { 40 };
        outer + 8 + 8 + 16 + 15 + 2 + 32
    }
}

/// One interface as the nodes see it.
#[derive(Clone, Debug, Serialize)]
pub struct Iface {
    pub index: u16,
    pub name: String,
    pub kind: IfKind,
    /// Port number (index into the worker's transmit queues) that carries
    /// this interface's frames; for a VLAN, the parent's port.
    pub port: u16,
    pub mac: [u8; 6],
    /// IP MTU.
    pub mtu: u16,
    pub up: bool,
    pub v4: Vec<V4Net>,
    pub v6: Vec<V6Net>,
    /// The link-local address (fe80::/64 + EUI-64 of the MAC).
    pub v6_ll: Ipv6Addr,
    /// Rule sets applied to packets received here / sent here (indexes
    /// into [`AclTable::sets`]).
    pub acl_in: Option<u16>,
    pub acl_out: Option<u16>,
    /// Extra unicast MACs this interface accepts as its own (VRRP's
    /// virtual MACs), each with who set it ([`Iface::set_vmacs`]).
    /// `ethernet-input` and the XDP lane take frames to them as frames to
    /// [`Iface::mac`]; empty, they cost nothing on the usual frame.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub vmacs: Vec<Vmac>,
}

/// Who set a virtual MAC of an interface: each owner sets and clears its
/// own without touching the other's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum VmacOwner {
    /// The kernel mirror, following the macvlans of keepalived or FRR's
    /// vrrpd in Linux mode.
    Kernel,
    /// tern's own VRRP (standalone mode).
    Vrrp,
}

/// A virtual MAC an interface accepts, and its owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Vmac {
    pub mac: [u8; 6],
    pub owner: VmacOwner,
}

/// The VRRP virtual router MAC of `vrid` (RFC 5798 7.3):
/// 00:00:5e:00:01:VRID for IPv4, 00:00:5e:00:02:VRID for IPv6.
pub fn vrrp_mac(vrid: u8, v6: bool) -> [u8; 6] {
    [0x00, 0x00, 0x5e, 0x00, if v6 { 0x02 } else { 0x01 }, vrid]
}

/// Whether `mac` is a VRRP virtual router MAC (IPv4's or IPv6's).
pub fn is_vrrp_mac(mac: &[u8; 6]) -> bool {
    mac[..4] == [0x00, 0x00, 0x5e, 0x00] && (mac[4] == 0x01 || mac[4] == 0x02)
}

impl Iface {
    /// An interface that is up, with a 1500-byte MTU, its link-local
    /// address from its MAC, no other addresses and no rule sets.
    pub fn new(index: u16, name: &str, kind: IfKind, port: u16, mac: [u8; 6]) -> Iface {
        Iface {
            index,
            name: name.into(),
            kind,
            port,
            mac,
            mtu: 1500,
            up: true,
            v4: Vec::new(),
            v6: Vec::new(),
            v6_ll: link_local_from_mac(mac),
            acl_in: None,
            acl_out: None,
            vmacs: Vec::new(),
        }
    }

    /// Whether `mac` is one of this interface's virtual MACs.
    #[inline]
    pub fn is_vmac(&self, mac: &[u8; 6]) -> bool {
        self.vmacs.iter().any(|v| v.mac == *mac)
    }

    /// Makes `macs` the virtual MACs `owner` has on this interface (the
    /// other owner's stay; a MAC both set is accepted while either has
    /// it). Group addresses are ignored (they are no unicast MAC to
    /// accept). Returns whether anything changed.
    pub fn set_vmacs(&mut self, owner: VmacOwner, macs: &[[u8; 6]]) -> bool {
        let mut want: Vec<[u8; 6]> = macs.iter().copied().filter(|m| m[0] & 1 == 0).collect();
        want.sort_unstable();
        want.dedup();
        let mut have: Vec<[u8; 6]> = self.vmacs.iter().filter(|v| v.owner == owner).map(|v| v.mac).collect();
        have.sort_unstable();
        if have == want {
            return false;
        }
        self.vmacs.retain(|v| v.owner != owner);
        self.vmacs.extend(want.into_iter().map(|mac| Vmac { mac, owner }));
        true
    }

    pub fn has_v4(&self, a: Ipv4Addr) -> bool {
        self.v4.iter().any(|n| n.addr == a)
    }
    pub fn has_v6(&self, a: Ipv6Addr) -> bool {
        a == self.v6_ll || self.v6.iter().any(|n| n.addr == a)
    }
    /// The source address to use towards `dst` on this interface: one in
    /// the same subnet, else the first.
    pub fn v4_source_for(&self, dst: Ipv4Addr) -> Option<Ipv4Addr> {
        self.v4.iter().find(|n| n.contains(dst)).or(self.v4.first()).map(|n| n.addr)
    }
    pub fn v6_source_for(&self, dst: Ipv6Addr) -> Ipv6Addr {
        if is_link_local(dst) {
            return self.v6_ll;
        }
        self.v6.iter().find(|n| n.contains(dst)).or(self.v6.first()).map_or(self.v6_ll, |n| n.addr)
    }
    /// Whether `a` lies in one of this interface's IPv4 subnets.
    pub fn v4_on_link(&self, a: Ipv4Addr) -> bool {
        self.v4.iter().any(|n| n.contains(a))
    }
    pub fn v6_on_link(&self, a: Ipv6Addr) -> bool {
        is_link_local(a) || self.v6.iter().any(|n| n.contains(a))
    }
    /// Bytes of link-layer header this interface puts in front of L3.
    pub fn l2_len(&self) -> usize {
        match self.kind {
            IfKind::Port => 14,
            IfKind::Vlan { .. } => 18,
            IfKind::Gre(_) | IfKind::Ipsec(_) | IfKind::Removed => 0,
        }
    }
    pub fn vlan(&self) -> Option<u16> {
        match self.kind {
            IfKind::Vlan { vid, .. } => Some(vid),
            _ => None,
        }
    }
    /// The placeholder of a removed interface (see [`IfKind::Removed`]).
    pub fn removed(index: u16) -> Iface {
        Iface {
            index,
            name: String::new(),
            kind: IfKind::Removed,
            port: NO_IF,
            mac: [0; 6],
            mtu: 0,
            up: false,
            v4: Vec::new(),
            v6: Vec::new(),
            v6_ll: Ipv6Addr::UNSPECIFIED,
            acl_in: None,
            acl_out: None,
            vmacs: Vec::new(),
        }
    }
    pub fn is_removed(&self) -> bool {
        self.kind == IfKind::Removed
    }
    pub fn gre(&self) -> Option<&GreTunnel> {
        match &self.kind {
            IfKind::Gre(t) => Some(t),
            _ => None,
        }
    }
    pub fn ipsec(&self) -> Option<&IpsecTunnel> {
        match &self.kind {
            IfKind::Ipsec(t) => Some(t),
            _ => None,
        }
    }
    /// A tunnel (GRE or IPsec): no link layer; routed packets are
    /// encapsulated.
    pub fn is_tunnel(&self) -> bool {
        matches!(self.kind, IfKind::Gre(_) | IfKind::Ipsec(_))
    }
}

pub fn is_link_local(a: Ipv6Addr) -> bool {
    a.segments()[0] & 0xffc0 == 0xfe80
}

/// The EUI-64 link-local address of a MAC (RFC 4291 appendix A).
pub fn link_local_from_mac(mac: [u8; 6]) -> Ipv6Addr {
    let mut b = [0u8; 16];
    b[0] = 0xfe;
    b[1] = 0x80;
    b[8] = mac[0] ^ 0x02;
    b[9] = mac[1];
    b[10] = mac[2];
    b[11] = 0xff;
    b[12] = 0xfe;
    b[13] = mac[3];
    b[14] = mac[4];
    b[15] = mac[5];
    Ipv6Addr::from(b)
}

/// All interfaces, indexed by interface index, plus the VLAN demux table.
#[derive(Clone, Debug, Default, Serialize)]
pub struct IfTable {
    pub ifs: Vec<Iface>,
    /// `vlans[port]` maps a VLAN id to the sub-interface index (NO_IF: none).
    #[serde(skip)]
    pub vlans: Vec<Vec<u16>>,
    /// Indexes of tunnel interfaces (GRE and IPsec).
    #[serde(skip)]
    pub tunnels: Vec<u16>,
    /// Whether any interface has virtual MACs (set by [`IfTable::new`]
    /// and [`IfTable::set_vmacs`]: change them through those). Without
    /// any, `ethernet-input`'s direct path never asks.
    #[serde(skip)]
    pub any_vmacs: bool,
}

impl IfTable {
    /// Builds the table and its VLAN index from a list of interfaces whose
    /// `index` equals their position.
    pub fn new(ifs: Vec<Iface>) -> IfTable {
        let ports = ifs.iter().filter(|i| i.port != NO_IF).map(|i| i.port as usize + 1).max().unwrap_or(0);
        let tunnels = ifs.iter().filter(|i| i.is_tunnel()).map(|i| i.index).collect();
        let mut vlans: Vec<Vec<u16>> = vec![Vec::new(); ports];
        for i in &ifs {
            if let IfKind::Vlan { vid, .. } = i.kind
                && let Some(v) = vlans.get_mut(i.port as usize)
            {
                if v.is_empty() {
                    *v = vec![NO_IF; 4096];
                }
                if let Some(slot) = v.get_mut(vid as usize) {
                    *slot = i.index;
                }
            }
        }
        let any_vmacs = ifs.iter().any(|i| !i.vmacs.is_empty());
        IfTable { ifs, vlans, tunnels, any_vmacs }
    }

    /// The GRE tunnel a packet from `remote` to `local` with `key` belongs
    /// to (RFC 2890: the key must match, absent on both sides or equal).
    pub fn gre_tunnel(&self, local: IpAddr, remote: IpAddr, key: Option<u32>) -> Option<&Iface> {
        self.tunnels
            .iter()
            .filter_map(|&i| self.get(i))
            .find(|i| i.gre().is_some_and(|t| t.local == local && t.remote == remote && t.key == key))
    }

    #[inline]
    /// Whether any interface has an input rule set (the input nodes skip
    /// the per-packet question without one).
    pub fn any_acl_in(&self) -> bool {
        self.ifs.iter().any(|f| f.acl_in.is_some())
    }

    /// Whether any interface has an output rule set (the rewrite nodes
    /// skip the per-packet question without one).
    pub fn any_acl_out(&self) -> bool {
        self.ifs.iter().any(|f| f.acl_out.is_some())
    }

    pub fn get(&self, index: u16) -> Option<&Iface> {
        self.ifs.get(index as usize)
    }

    /// The sub-interface of `port` for VLAN `vid`.
    #[inline]
    pub fn vlan_if(&self, port: u16, vid: u16) -> Option<u16> {
        let v = *self.vlans.get(port as usize)?.get(vid as usize)?;
        (v != NO_IF).then_some(v)
    }

    pub fn by_name(&self, name: &str) -> Option<&Iface> {
        self.ifs.iter().find(|i| i.name == name && !i.is_removed())
    }

    /// [`Iface::set_vmacs`] on interface `index` (false: no such
    /// interface, a removed one, or nothing changed).
    pub fn set_vmacs(&mut self, index: u16, owner: VmacOwner, macs: &[[u8; 6]]) -> bool {
        let changed = match self.ifs.get_mut(usize::from(index)) {
            Some(f) if !f.is_removed() => f.set_vmacs(owner, macs),
            _ => false,
        };
        self.any_vmacs = self.ifs.iter().any(|i| !i.vmacs.is_empty());
        changed
    }
}

/// One compiled firewall rule set with its per-worker hit counters.
pub struct AclSet {
    pub name: String,
    pub classifier: tern_acl::Classifier,
    /// One per worker; worker w is the only writer of `counters[w]`.
    pub counters: Vec<tern_acl::RuleCounters>,
}

/// Every compiled rule set, published as a whole (a change recompiles and
/// swaps atomically; counters restart with the new table).
#[derive(Default)]
pub struct AclTable {
    pub sets: Vec<AclSet>,
}

impl AclTable {
    pub fn get(&self, i: u16) -> Option<&AclSet> {
        self.sets.get(usize::from(i))
    }
}

/// Default of [`Params::punt_rate`] (packets per second).
pub const DEFAULT_PUNT_RATE: u32 = 10_000;
/// Default of [`Params::punt_burst`] (packets).
pub const DEFAULT_PUNT_BURST: u32 = 1_000;

/// Default of [`Params::punt_classes`]: (packets per second, burst) per
/// [`crate::linux::class::PuntClass`], in its order, per worker (and per
/// CPU in the XDP lane): enough for a full BGP table, OSPF and VRRP at
/// their fastest timers and a busy LAN's ARP/ND; the bulk (`local`: ping,
/// SSH, UDP to a closed port) low. docs/XDP.md "Control traffic first".
pub const DEFAULT_PUNT_CLASSES: [(u32, u32); 7] = [
    (2_000, 500),   // neighbor
    (20_000, 4000), // bgp
    (2_000, 500),   // ospf
    (2_000, 500),   // vrrp
    (2_000, 500),   // ike
    (10_000, 1000), // bfd
    (1_000, 200),   // local
];

/// Knobs of the forwarding nodes.
#[derive(Clone, Debug, Serialize)]
pub struct Params {
    /// ICMP errors each worker may send per second (token bucket rate).
    pub icmp_rate: u32,
    /// Burst of the ICMP token bucket.
    pub icmp_burst: u32,
    /// Packets held per unresolved neighbour.
    pub neigh_queue_per_dest: usize,
    /// Packets held for all unresolved neighbours of a worker.
    pub neigh_queue_total: usize,
    /// Interval between ARP/ND requests for one neighbour.
    pub neigh_retry_ns: u64,
    /// Requests before giving up on a neighbour and dropping what waits.
    pub neigh_max_tries: u32,
    /// Linux mode: the kernel owns the router's addresses and, seeing every
    /// frame, answers ARP/ND, ping and everything else addressed to them;
    /// tern stays silent for that traffic (no duplicate replies) and only
    /// learns neighbours from it.
    pub linux_owns_local: bool,
    /// Linux mode with the TAP exception path (`[linux] exception =
    /// "tap"`): the kernel does not see the devices' frames; what it owns
    /// goes to `linux-punt` instead of being left to it. Indexed by
    /// interface index (ports and VLAN sub-interfaces each have their
    /// own TAP): the worker's port number of the TAP carrying that
    /// interface's exceptions ([`NO_IF`] or beyond the end: none). Empty:
    /// the kernel sees the frames itself.
    pub tap_ports: Vec<u16>,
    /// What `linux-punt` hands to each TAP per second, per worker (token
    /// bucket rate; 0: unlimited). The excess is dropped as
    /// `linux-punt/policed`.
    pub punt_rate: u32,
    /// Burst of that token bucket.
    pub punt_burst: u32,
    /// `linux-punt`'s policer per class of traffic for the router
    /// (`[dataplane.punt]`): (packets per second, burst) per worker, in
    /// [`crate::linux::class::PuntClass`] order; rate 0: not policed. The
    /// excess is dropped as `linux-punt/shed-<class>`. Control classes
    /// skip the per-interface bucket above; `local` (and unclassed
    /// frames) take it too.
    pub punt_classes: [(u32, u32); 7],
    /// Which fast paths the nodes take (`[dataplane.fast_paths]`).
    pub fast_paths: FastPaths,
    /// The VRRP virtual addresses this router answers ARP and neighbour
    /// solicitations for, with their virtual MAC (tern's own VRRP while
    /// master, `[[vrrp]]`; RFC 5798 6.4.3). Empty without VRRP.
    pub virtual_addrs: Vec<VirtualAddr>,
    /// Standalone mode with tern's own IKE (`[[ike]]`): UDP to port 500
    /// and UDP 4500 with the non-ESP marker addressed to the router go to
    /// [`Shared::ike_rx`] instead of ICMP port unreachable / a drop. Off,
    /// and always in Linux mode (the kernel's sockets take IKE there).
    pub ike_local: bool,
    /// The bounds of each worker's reassembly tables (`[reassembly]`,
    /// [`crate::reass`]).
    #[serde(skip)]
    pub reass: crate::reass::table::Limits,
}

/// A VRRP virtual address on an interface and the virtual MAC it is
/// answered with (see [`Params::virtual_addrs`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct VirtualAddr {
    pub ifindex: u16,
    pub addr: IpAddr,
    pub mac: [u8; 6],
}

impl Params {
    /// The virtual MAC that answers for `addr` on interface `ifindex`, if
    /// it is a virtual address there.
    #[inline]
    pub fn virtual_mac(&self, ifindex: u16, addr: IpAddr) -> Option<[u8; 6]> {
        if self.virtual_addrs.is_empty() {
            return None;
        }
        self.virtual_addrs.iter().find(|v| v.ifindex == ifindex && v.addr == addr).map(|v| v.mac)
    }
}

/// The fast paths beside the nodes' reference loops, each switchable at
/// run time (`[dataplane.fast_paths]`, `tern dataplane fast-paths`) so
/// that an operator can bisect a suspected fast-path bug. Off, packets
/// take the reference path, which gives the same frames, verdicts and
/// counters (`direct_tests`) but for the fast path's own info counters.
/// The nodes read this once per batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct FastPaths {
    /// The usual packet in one go in `ethernet-input`, `ip4-input`,
    /// `ip6-input`, the lookups and the rewrites.
    pub direct: bool,
    /// The input and output rule sets' verdict cache: the flow a rule set
    /// last accepted skips the ACL node (`acl-shortcut` counters). Taken
    /// only with `direct`.
    pub acl_shortcut: bool,
    /// `gre-encap` writes the outer link-layer header itself when the
    /// tunnel's remote is resolved, instead of a second pass through
    /// `ip4-lookup` and `ip4-rewrite`.
    pub gre_direct: bool,
}

impl FastPaths {
    /// Every fast path on (the default).
    pub const ALL: FastPaths = FastPaths { direct: true, acl_shortcut: true, gre_direct: true };
    /// Every fast path off: the reference loops only.
    pub const NONE: FastPaths = FastPaths { direct: false, acl_shortcut: false, gre_direct: false };
    /// The names the configuration and the CLI use, in order.
    pub const NAMES: [&'static str; 3] = ["direct", "acl_shortcut", "gre_direct"];

    /// The switch named `name` ([`Self::NAMES`]).
    pub fn get_mut(&mut self, name: &str) -> Option<&mut bool> {
        match name {
            "direct" => Some(&mut self.direct),
            "acl_shortcut" => Some(&mut self.acl_shortcut),
            "gre_direct" => Some(&mut self.gre_direct),
            _ => None,
        }
    }
}

impl Default for FastPaths {
    fn default() -> Self {
        FastPaths::ALL
    }
}

impl Params {
    /// Whether what Linux owns is punted into TAPs (else the kernel got
    /// its own copy, and tern drops its one as `left-to-linux`).
    #[inline]
    pub fn punt_to_tap(&self) -> bool {
        self.linux_owns_local && !self.tap_ports.is_empty()
    }
}

impl Default for Params {
    fn default() -> Self {
        Params {
            icmp_rate: 1000,
            icmp_burst: 100,
            neigh_queue_per_dest: 16,
            neigh_queue_total: 1024,
            neigh_retry_ns: 1_000_000_000,
            neigh_max_tries: 3,
            linux_owns_local: false,
            tap_ports: Vec::new(),
            punt_rate: DEFAULT_PUNT_RATE,
            punt_burst: DEFAULT_PUNT_BURST,
            punt_classes: DEFAULT_PUNT_CLASSES,
            fast_paths: FastPaths::ALL,
            virtual_addrs: Vec::new(),
            ike_local: false,
            reass: crate::reass::table::Limits::default(),
        }
    }
}

/// What workers tell the control thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A neighbour was heard from (ARP request or reply, NS, NA); the
    /// control thread's neighbour table applies RFC 4861 7.2.3 / 7.2.5.
    /// `mac` is `None` for an NA without a target link-layer address
    /// option (RFC 4861 7.2.4 allows it in answers to unicast probes).
    Neighbor { ifindex: u16, ip: IpAddr, mac: Option<[u8; 6]>, how: Heard },
    /// Authenticated ESP in UDP (its ICV verified, the anti-replay window
    /// took it) on inbound SA `sa` came from `remote`:`port`, not from
    /// where the SA's tunnel or client has the peer (`esp-decrypt`,
    /// `peer-moved`): the peer's NAT mapping changed. The IKE side
    /// follows a peer behind a NAT (RFC 7296 2.23).
    EspMoved { sa: u32, remote: IpAddr, port: u16 },
}

/// How a neighbour was heard from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Heard {
    /// It sent us a request (NS with a source link-layer address, ARP
    /// request) or announced itself (gratuitous ARP): its address is
    /// known but its reachability is not (RFC 4861 7.2.3: STALE).
    /// `create`: make an entry if none exists (the request was for one of
    /// our addresses); otherwise only update an existing one.
    Sender { create: bool },
    /// It answered: a neighbour advertisement with its flags (RFC 4861
    /// 4.4), or an ARP reply (solicited and override, as RFC 826 merges).
    Advert { solicited: bool, override_: bool, router: bool },
}

/// A packet a worker hands to the control thread: a VRRP advertisement
/// (IP protocol 112 to 224.0.0.18 or ff02::12) received on `ifindex`,
/// from its IP header on.
#[derive(Clone, Debug)]
pub struct Punted {
    pub ifindex: u16,
    pub packet: Vec<u8>,
}

/// A frame the control thread asks a worker to send (ARP/ND probes).
/// `frame` leaves `ifindex` as built, link-layer header included: a
/// VRRP master's advertisements and gratuitous ARPs put the virtual MAC
/// (an [`Iface::vmacs`] entry) in its source field themselves.
#[derive(Clone, Debug)]
pub struct Inject {
    pub ifindex: u16,
    pub frame: Vec<u8>,
}

/// An IKE message addressed to the router (standalone mode,
/// [`Params::ike_local`]): UDP to port 500, or UDP 4500 with the non-ESP
/// marker (RFC 3948 2.2), which `message` no longer carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IkeDatagram {
    /// The router's address and port it was sent to.
    pub local: SocketAddr,
    /// The peer's address and port.
    pub remote: SocketAddr,
    /// The interface it arrived on.
    pub ifindex: u16,
    /// The IKE message (RFC 7296 header first).
    pub message: Vec<u8>,
}

/// Default bound of [`Shared::ike_rx`] and [`Shared::ip_inject`].
pub const IKE_QUEUE: usize = 8192;

/// A wake-up the IKE threads park on and the nodes ring, at most once per
/// batch: ringing costs one atomic load while no thread waits, a lock and
/// a condvar notification when one does.
#[derive(Debug, Default)]
pub struct Doorbell {
    parked: AtomicUsize,
    lock: Mutex<u64>,
    cv: Condvar,
}

impl Doorbell {
    /// Wakes the threads parked in [`Doorbell::wait`] (call after pushing
    /// what they wait for).
    pub fn ring(&self) {
        // Pairs with the fence in `wait`: either this load sees the
        // waiter, or the waiter's check sees what was pushed before.
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.parked.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut g = self.lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *g = g.wrapping_add(1);
        self.cv.notify_all();
    }

    /// Parks until [`Doorbell::ring`] or `timeout`, unless `ready` (the
    /// queue's "not empty") already holds. May return early.
    pub fn wait(&self, timeout: Duration, ready: impl Fn() -> bool) {
        self.parked.fetch_add(1, Ordering::SeqCst);
        std::sync::atomic::fence(Ordering::SeqCst);
        let g = self.lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !ready() {
            let seen = *g;
            let _ = self.cv.wait_timeout_while(g, timeout, |n| *n == seen);
        }
        self.parked.fetch_sub(1, Ordering::SeqCst);
    }
}

/// IP packets the control side originates, for `ip-inject`, with a flag
/// that spares the sender a wake-up per packet: [`InjectQueue::push`]
/// says when the workers must be woken (the first packet since a worker
/// last looked), and `ip-inject` clears the flag before it drains.
#[derive(Debug)]
pub struct InjectQueue {
    queue: ArrayQueue<Vec<u8>>,
    kick: std::sync::atomic::AtomicBool,
}

impl InjectQueue {
    pub fn new(capacity: usize) -> InjectQueue {
        InjectQueue { queue: ArrayQueue::new(capacity), kick: std::sync::atomic::AtomicBool::new(false) }
    }

    /// Queues `packet` (an IPv4 or IPv6 packet, header first). `Err` when
    /// full; `Ok(true)` when the caller must wake a worker.
    pub fn push(&self, packet: Vec<u8>) -> Result<bool, Vec<u8>> {
        self.queue.push(packet)?;
        Ok(!self.kick.swap(true, Ordering::SeqCst))
    }

    /// The next packet. Call [`InjectQueue::start`] before a run of pops.
    pub fn pop(&self) -> Option<Vec<u8>> {
        self.queue.pop()
    }

    /// Before draining: whether a packet was pushed since the last drain
    /// (and then clears the flag, so that a push after this wakes again).
    pub fn start(&self) -> bool {
        self.kick.load(Ordering::Relaxed) && self.kick.swap(false, Ordering::SeqCst)
    }

    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

/// One remote-access client of a multipoint IPsec tunnel: the SA its
/// packets leave on and its outer address (the UDP ports, with NAT
/// traversal, are the SA's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct IpsecClient {
    pub sa_out: u32,
    pub remote: IpAddr,
}

/// The clients of every multipoint IPsec tunnel, as the control side
/// publishes them (one publication per batch of IKE installs). Each map
/// is a shared base and a small delta of the changes since
/// ([`layered`]): a change costs a few entry copies and a publication
/// copies fewer than [`layered::FOLD_AT`] entries, whatever the number of
/// clients (the maps this replaces, 4,096 shards under `Arc`s, copied
/// about 250 entries and 64 shard pointers for each change at a million
/// clients). The owner calls [`IpsecClients::settle`] on its tick: the
/// second copy of the maps kept while they change goes after a second
/// without changes.
///
/// The maps are split by address family, so that an IPv4 client's entries
/// are narrow (what a million remote-access clients mostly are): 32 bytes
/// by virtual IP (a u64 key of tunnel and address) and 16 by inbound SA
/// (a slot of `tern_ipsec::table::Table`, which `esp-encrypt` and
/// `esp-decrypt` prefetch), where one map for both families took 44 and
/// 24 (`IpAddr` is 17 bytes).
#[derive(Clone, Debug)]
pub struct IpsecClients {
    /// (tunnel << 32 | IPv4 virtual IP) -> the client.
    by_ip4: layered::Layered<u64, IpsecClient>,
    /// (tunnel, IPv6 virtual IP) -> the client.
    by_ip6: layered::Layered<(u16, Ipv6Addr), IpsecClient>,
    /// Inbound SA id -> (tunnel, the client's virtual IP): what the SA
    /// may carry as inner source; IPv4, then IPv6 clients.
    by_sa4: layered::Layered<u32, (u16, u32)>,
    by_sa6: layered::Layered<u32, (u16, Ipv6Addr)>,
}

mod layered;

impl layered::ShardKey for u64 {
    #[inline]
    fn shard(&self) -> usize {
        ip4_shard(*self as u32)
    }
}

impl layered::ShardKey for (u16, Ipv6Addr) {
    #[inline]
    fn shard(&self) -> usize {
        ip4_shard(u128::from(self.1) as u32)
    }
}

impl layered::ShardKey for u32 {
    #[inline]
    fn shard(&self) -> usize {
        sa_shard(*self)
    }
}

fn key4(tunnel: u16, a: Ipv4Addr) -> u64 {
    u64::from(tunnel) << 32 | u64::from(u32::from(a))
}

/// A cheap hasher for the client maps (a multiply-rotate per word, as
/// FxHash): their keys are addresses from tern's own pools and SA ids it
/// allocates, not chosen by whoever sends packets, and the lookup is per
/// packet.
#[derive(Clone, Copy, Default)]
pub struct ClientHasher(u64);

impl std::hash::Hasher for ClientHasher {
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w.get_mut(..c.len()).unwrap_or_default().copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
    }
    fn write_u8(&mut self, n: u8) {
        self.write_u64(u64::from(n));
    }
    fn write_u16(&mut self, n: u16) {
        self.write_u64(u64::from(n));
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
    fn finish(&self) -> u64 {
        // The product's high bits are the mixed ones: fold them into the
        // low bits, which pick the bucket (addresses differ in their
        // last bytes, which a multiply leaves in the high half).
        self.0 ^ (self.0 >> 32)
    }
}

impl Default for IpsecClients {
    fn default() -> Self {
        IpsecClients {
            by_ip4: layered::Layered::new(),
            by_ip6: layered::Layered::new(),
            by_sa4: layered::Layered::new(),
            by_sa6: layered::Layered::new(),
        }
    }
}

/// Addresses from a pool differ in their low bits: those, folded.
fn ip4_shard(low: u32) -> usize {
    (low ^ (low >> 8) ^ (low >> 16)) as usize % layered::SHARDS
}

/// SA ids come in pairs (IKE's inbound ids are all even): the shard is
/// taken from a product's high bits, not the id's low ones.
fn sa_shard(sa: u32) -> usize {
    (sa.wrapping_mul(0x9e37_79b1) >> 24) as usize % layered::SHARDS
}

impl IpsecClients {
    /// The client of tunnel `tunnel` with virtual IP `ip`.
    #[inline]
    pub fn client(&self, tunnel: u16, ip: IpAddr) -> Option<&IpsecClient> {
        match ip {
            IpAddr::V4(a) => self.by_ip4.get(&key4(tunnel, a)),
            IpAddr::V6(a) => self.by_ip6.get(&(tunnel, a)),
        }
    }

    /// Hints the CPU to fetch where [`IpsecClients::client`]`(tunnel,
    /// ip)` looks (a batch's lookups prefetched first overlap their cache
    /// misses: `esp-encrypt`).
    #[inline]
    pub fn prefetch_client(&self, tunnel: u16, ip: IpAddr) {
        match ip {
            IpAddr::V4(a) => self.by_ip4.prefetch(&key4(tunnel, a)),
            IpAddr::V6(a) => self.by_ip6.prefetch(&(tunnel, a)),
        }
    }

    /// The same for [`IpsecClients::of_sa`]`(sa)` (`esp-decrypt`).
    #[inline]
    pub fn prefetch_sa(&self, sa: u32) {
        self.by_sa4.prefetch(&sa);
        if self.by_sa6.len() != 0 {
            self.by_sa6.prefetch(&sa);
        }
    }

    /// The (tunnel, virtual IP) whose inbound SA `sa` is.
    #[inline]
    pub fn of_sa(&self, sa: u32) -> Option<(u16, IpAddr)> {
        if let Some(&(t, a)) = self.by_sa4.get(&sa) {
            return Some((t, IpAddr::V4(Ipv4Addr::from(a))));
        }
        if self.by_sa6.len() == 0 {
            return None;
        }
        self.by_sa6.get(&sa).map(|&(t, a)| (t, IpAddr::V6(a)))
    }

    /// Adds or moves a client; the one it replaces.
    pub fn insert_client(&mut self, tunnel: u16, ip: IpAddr, c: IpsecClient) -> Option<IpsecClient> {
        match ip {
            IpAddr::V4(a) => self.by_ip4.insert(key4(tunnel, a), c),
            IpAddr::V6(a) => self.by_ip6.insert((tunnel, a), c),
        }
    }

    pub fn remove_client(&mut self, tunnel: u16, ip: IpAddr) -> Option<IpsecClient> {
        match ip {
            IpAddr::V4(a) => self.by_ip4.remove(key4(tunnel, a)),
            IpAddr::V6(a) => self.by_ip6.remove((tunnel, a)),
        }
    }

    /// Inbound SA `sa` carries the client (tunnel, ip).
    pub fn insert_sa(&mut self, sa: u32, tunnel: u16, ip: IpAddr) {
        match ip {
            IpAddr::V4(a) => {
                self.by_sa6.remove(sa);
                self.by_sa4.insert(sa, (tunnel, u32::from(a)));
            }
            IpAddr::V6(a) => {
                self.by_sa4.remove(sa);
                self.by_sa6.insert(sa, (tunnel, a));
            }
        }
    }

    pub fn remove_sa(&mut self, sa: u32) {
        if self.by_sa4.remove(sa).is_none() {
            self.by_sa6.remove(sa);
        }
    }

    /// How many clients.
    pub fn len(&self) -> usize {
        self.by_ip4.len() + self.by_ip6.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0 && self.by_sa4.len() == 0 && self.by_sa6.len() == 0
    }

    /// The owner's tick (about once a second or more often): drops the
    /// spare copy of the maps once they went a second without changes.
    /// Whether it dropped something.
    pub fn settle(&mut self, now: std::time::Instant) -> bool {
        let mut dropped = false;
        dropped |= self.by_ip4.settle(now);
        dropped |= self.by_ip6.settle(now);
        dropped |= self.by_sa4.settle(now);
        dropped |= self.by_sa6.settle(now);
        dropped
    }

    /// Whether a spare copy of the maps is held (tests, memory figures).
    pub fn has_spare(&self) -> bool {
        self.by_ip4.has_spare() || self.by_ip6.has_spare() || self.by_sa4.has_spare() || self.by_sa6.has_spare()
    }

    /// How many entries a publication copies now (the deltas).
    pub fn delta_len(&self) -> usize {
        self.by_ip4.delta_len() + self.by_ip6.delta_len() + self.by_sa4.delta_len() + self.by_sa6.delta_len()
    }
}

/// Everything the nodes share with the control thread.
#[derive(Clone)]
pub struct Shared {
    pub ifaces: Published<IfTable>,
    pub acls: Published<AclTable>,
    pub params: Published<Params>,
    pub fib: FibReader,
    pub events: Arc<ArrayQueue<Event>>,
    /// VRRP advertisements for the control thread (`crate::state::Punted`).
    pub control_rx: Arc<ArrayQueue<Punted>>,
    /// Bumped by the control thread whenever a neighbour resolves, so
    /// packets waiting for resolution are retried at once.
    pub neigh_gen: Arc<AtomicU64>,
    /// The IPsec SAs (`esp-encrypt`, `esp-decrypt`): empty unless the
    /// control side sets it to its `SaDb::reader()` before building the
    /// graphs.
    pub sas: SaReader,
    /// IKE messages for the router (standalone mode with
    /// [`Params::ike_local`]), from `ip4-local`, `ip6-local` and
    /// `esp-decrypt`; bounded ([`IKE_QUEUE`]), the excess counted as
    /// `ike-queue-full`.
    pub ike_rx: Arc<ArrayQueue<IkeDatagram>>,
    /// Rung once per batch that pushed to `ike_rx`.
    pub ike_bell: Arc<Doorbell>,
    /// IPv4/IPv6 packets tern originates (IKE's datagrams, built whole,
    /// checksums included): `ip-inject` sends them through `ip4-lookup` /
    /// `ip6-lookup`. Every worker polls it.
    pub ip_inject: Arc<InjectQueue>,
    /// ESP in UDP the kernel reassembled and received on a UDP 4500
    /// socket in Linux mode, rebuilt whole by the control side:
    /// `esp-from-kernel` sends it to `esp-decrypt`. Every worker polls it.
    pub esp_from_kernel: Arc<InjectQueue>,
    /// The clients of multipoint IPsec tunnels (remote access).
    pub ipsec_clients: Published<IpsecClients>,
    /// Fragments a worker hands to the worker that owns their datagram
    /// (`ip4-reassembly`, `ip6-reassembly`): one worker unless the
    /// control side sets it for its workers before building the graphs.
    pub reass_handoff: Arc<crate::reass::Handoff>,
}

impl Shared {
    pub fn new(ifaces: IfTable, fib: FibReader) -> Shared {
        Shared {
            ifaces: Published::new(ifaces),
            acls: Published::new(AclTable::default()),
            params: Published::new(Params::default()),
            fib,
            events: Arc::new(ArrayQueue::new(4096)),
            control_rx: Arc::new(ArrayQueue::new(256)),
            neigh_gen: Arc::new(AtomicU64::new(0)),
            sas: SaReader::empty(),
            ike_rx: Arc::new(ArrayQueue::new(IKE_QUEUE)),
            ike_bell: Arc::new(Doorbell::default()),
            ip_inject: Arc::new(InjectQueue::new(IKE_QUEUE)),
            esp_from_kernel: Arc::new(InjectQueue::new(IKE_QUEUE)),
            ipsec_clients: Published::new(IpsecClients::default()),
            reass_handoff: Arc::new(crate::reass::Handoff::new(1)),
        }
    }

    pub fn bump_neigh_gen(&self) {
        self.neigh_gen.fetch_add(1, Ordering::Release);
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn eui64_link_local() {
        let ll = link_local_from_mac([0x02, 0x00, 0x00, 0xaa, 0xbb, 0xcc]);
        assert_eq!(ll, "fe80::ff:feaa:bbcc".parse::<Ipv6Addr>().expect("addr"));
        assert!(is_link_local(ll));
    }

    #[test]
    fn nets() {
        let n = V4Net { addr: Ipv4Addr::new(10, 0, 1, 1), len: 24 };
        assert!(n.contains(Ipv4Addr::new(10, 0, 1, 200)));
        assert!(!n.contains(Ipv4Addr::new(10, 0, 2, 1)));
        assert_eq!(n.broadcast(), Some(Ipv4Addr::new(10, 0, 1, 255)));
        assert_eq!(V4Net { addr: Ipv4Addr::new(10, 0, 1, 1), len: 31 }.broadcast(), None);
        assert_eq!(V4Net { addr: Ipv4Addr::UNSPECIFIED, len: 0 }.mask(), 0);
        let n6 = V6Net { addr: "2001:db8::1".parse().expect("a"), len: 64 };
        assert!(n6.contains("2001:db8::ffff".parse().expect("a")));
    }

    /// Changes go to a small delta over a shared base: a publication
    /// (clone) copies the delta only, never more than `FOLD_AT` keys;
    /// the published copy keeps what it had; the spare base (the previous
    /// one) is reused once no copy holds it, and dropped a second after
    /// the last change.
    /// A million IPv4 clients (addresses from one pool, inbound SA ids
    /// even): the two maps' bases in bytes a client. Their 256 shards
    /// doubled to 8,192 slots each at 3,906 entries (48 % full), 101
    /// bytes a client with the 32- and 16-byte slots; the tables grow by
    /// a quarter now (`tern_ipsec::table`): 5,481 slots, 67 bytes.
    #[test]
    fn client_maps_at_a_million() {
        let mut c = IpsecClients::default();
        let n = 1_000_000u32;
        for i in 0..n {
            let ip = IpAddr::V4(Ipv4Addr::from(0x6440_0000 + i));
            c.insert_client(3, ip, IpsecClient { sa_out: (1 << 31) + 2 * i + 1, remote: ip });
            c.insert_sa((1 << 31) + 2 * i, 3, ip);
        }
        let bytes = c.by_ip4.base_bytes() + c.by_sa4.base_bytes();
        let per = bytes as f64 / f64::from(n);
        println!("client maps at 1M: {per:.1} B a client");
        assert!(per <= 72.0, "{per}");
        assert_eq!(std::mem::size_of::<Option<(u64, IpsecClient)>>(), 32);
        assert_eq!(std::mem::size_of::<Option<(u32, (u16, u32))>>(), 16);
    }

    #[test]
    fn ipsec_clients_publish_a_small_delta() {
        let ip = |i: u32| IpAddr::V4(Ipv4Addr::from(0x0a4d_0000 + i));
        let t0 = std::time::Instant::now();
        let mut c = IpsecClients::default();
        let mut held = Vec::new();
        let (mut copied, mut publications) = (0, 0);
        for i in 0..40_000u32 {
            assert!(c.insert_client(3, ip(i), IpsecClient { sa_out: i, remote: ip(1) }).is_none());
            // Inbound SA ids as IKE hands them out: even.
            c.insert_sa(1_000_000 + 2 * i, 3, ip(i));
            // A publication every 4 installs; from 20,000 on, one copy in
            // 1,000 kept a while (a worker that did not refresh), which
            // forces rebuilds.
            if i % 4 == 3 {
                let published = c.clone();
                assert!(published.delta_len() <= 2 * layered::rebuild_at(40_000));
                assert!(!published.has_spare(), "a copy carries no spare");
                if i < 20_000 {
                    copied += published.delta_len();
                    publications += 1;
                } else if i % 1000 == 3 {
                    held.push(published);
                }
            }
            if held.len() > 2 {
                held.remove(0);
            }
        }
        assert_eq!(c.len(), 40_000);
        // About FOLD_AT / 2 a publication for each map while the workers
        // move on.
        let mean = copied / publications;
        assert!(mean <= layered::FOLD_AT + 4, "{mean} entries copied a publication");
        assert!(c.has_spare());
        let published = c.clone();
        assert!(published.by_ip4.same_base(&c.by_ip4));
        let moved = c.insert_client(3, ip(77), IpsecClient { sa_out: 9, remote: ip(2) });
        assert_eq!(moved.map(|m| m.sa_out), Some(77));
        assert_eq!(c.len(), 40_000, "moved, not added");
        c.remove_sa(1_000_154);
        c.insert_sa(2_000_077, 3, ip(77));
        assert_eq!(published.client(3, ip(77)).map(|k| k.sa_out), Some(77), "the published copy unchanged");
        assert_eq!(c.client(3, ip(77)).map(|k| k.sa_out), Some(9));
        assert_eq!(c.of_sa(1_000_154), None);
        assert_eq!(published.of_sa(1_000_154), Some((3, ip(77))));
        assert_eq!(c.of_sa(2_000_077), Some((3, ip(77))));
        assert_eq!(c.client(4, ip(77)), None, "per tunnel");
        assert_eq!(c.remove_client(3, ip(77)).map(|k| k.sa_out), Some(9));
        assert_eq!(c.remove_client(3, ip(77)), None);
        assert_eq!(c.len(), 39_999);
        // Every entry right after folds and rebuilds.
        drop((published, held));
        for i in (0..40_000u32).filter(|&i| i != 77) {
            assert_eq!(c.client(3, ip(i)).map(|k| k.sa_out), Some(i), "client {i}");
            assert_eq!(c.of_sa(1_000_000 + 2 * i), Some((3, ip(i))), "SA of {i}");
        }
        // IPv6 clients in their own maps; an SA moved between families.
        let v6: IpAddr = "2001:db8:77::10".parse().expect("v6");
        assert!(c.insert_client(3, v6, IpsecClient { sa_out: 5, remote: ip(3) }).is_none());
        c.insert_sa(7, 3, v6);
        assert_eq!((c.client(3, v6).map(|k| k.sa_out), c.of_sa(7), c.len()), (Some(5), Some((3, v6)), 40_000));
        c.insert_sa(7, 3, ip(1));
        assert_eq!(c.of_sa(7), Some((3, ip(1))));
        c.insert_sa(7, 3, v6);
        assert_eq!(c.of_sa(7), Some((3, v6)));
        c.remove_sa(7);
        assert_eq!(c.of_sa(7), None);
        assert_eq!(c.remove_client(3, v6).map(|k| k.sa_out), Some(5));
        // The spare goes a second after the last change, not before.
        let s = std::time::Duration::from_millis(600);
        assert!(!c.settle(t0));
        assert!(!c.settle(t0 + s) && c.has_spare());
        assert!(c.settle(t0 + 2 * s) && !c.has_spare());
        assert!(!c.is_empty() && IpsecClients::default().is_empty());
    }

    #[test]
    fn vlan_index() {
        let base = Iface {
            index: 0,
            name: "p0".into(),
            kind: IfKind::Port,
            port: 0,
            mac: [2, 0, 0, 0, 0, 1],
            mtu: 1500,
            up: true,
            v4: vec![],
            v6: vec![],
            v6_ll: link_local_from_mac([2, 0, 0, 0, 0, 1]),
            acl_in: None,
            acl_out: None,
            vmacs: vec![],
        };
        let sub = Iface { index: 1, name: "p0.100".into(), kind: IfKind::Vlan { parent: 0, vid: 100 }, ..base.clone() };
        let t = IfTable::new(vec![base, sub]);
        assert_eq!(t.vlan_if(0, 100), Some(1));
        assert_eq!(t.vlan_if(0, 101), None);
        assert_eq!(t.vlan_if(5, 100), None);
    }

    #[test]
    fn vmacs_per_owner() {
        let mut f = Iface::new(0, "p0", IfKind::Port, 0, [2, 0, 0, 0, 0, 1]);
        let a = vrrp_mac(10, false);
        let b = vrrp_mac(10, true);
        assert!(is_vrrp_mac(&a) && is_vrrp_mac(&b) && !is_vrrp_mac(&[2, 0, 0, 0, 0, 1]));
        assert!(!f.is_vmac(&a));
        assert!(f.set_vmacs(VmacOwner::Kernel, &[a, a]));
        assert!(!f.set_vmacs(VmacOwner::Kernel, &[a]), "the same set again changes nothing");
        assert!(f.set_vmacs(VmacOwner::Vrrp, &[a, b, [1, 0, 0x5e, 0, 0, 1]]));
        assert_eq!(f.vmacs.len(), 3, "a group address is no vmac; {:?}", f.vmacs);
        assert!(f.is_vmac(&a) && f.is_vmac(&b));
        // The kernel's go; the one VRRP also holds stays.
        assert!(f.set_vmacs(VmacOwner::Kernel, &[]));
        assert!(f.is_vmac(&a) && f.is_vmac(&b));
        assert!(f.set_vmacs(VmacOwner::Vrrp, &[]));
        assert!(!f.is_vmac(&a) && f.vmacs.is_empty());
        let mut t = IfTable::new(vec![f, Iface::removed(1)]);
        assert!(t.set_vmacs(0, VmacOwner::Kernel, &[a]));
        assert!(!t.set_vmacs(1, VmacOwner::Kernel, &[a]), "a removed interface takes none");
        assert!(!t.set_vmacs(7, VmacOwner::Kernel, &[a]));
        assert!(t.get(0).is_some_and(|f| f.is_vmac(&a)));
        assert!(t.any_vmacs);
        assert!(t.set_vmacs(0, VmacOwner::Kernel, &[]));
        assert!(!t.any_vmacs, "the last one went");
        assert!(IfTable::new(t.ifs.clone()).ifs.iter().all(|f| f.vmacs.is_empty()));
    }
}
