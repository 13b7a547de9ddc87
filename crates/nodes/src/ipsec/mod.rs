//! `esp-encrypt` and `esp-decrypt`: route-based IPsec tunnels, ESP in
//! tunnel mode (RFC 4303), IPv4 or IPv6 inside and outside, optionally in
//! UDP (RFC 3948). The SAs and the crypto are `tern-ipsec`'s; these nodes
//! move packets.
//!
//! Encryption: a packet routed to an IPsec tunnel interface reaches
//! `gre-encap` as every tunnel's does (the rewrite nodes already
//! decremented its TTL and checked it against the tunnel's MTU, answering
//! "fragmentation needed" / "packet too big"), which hands IPsec tunnels'
//! packets here. This node encrypts it with the tunnel's `sa_out`, writes
//! the outer IPv4/IPv6 (+ UDP) header in front of it and sends the outer
//! packet through `ip4-lookup`/`ip6-lookup` like a packet tern originated.
//!
//! Decryption: `ip4-local`/`ip6-local` send ESP (protocol 50) and UDP to
//! port 4500 or to another SA's local ESP-in-UDP port
//! ([`is_udp_encap_esp`]) addressed to tern here; a packet on an SA that a tunnel lists
//! in `sa_in`, between that tunnel's endpoints, passes the anti-replay
//! check, its ICV, the window update, loses its outer headers and ESP
//! framing and enters `ip4-input`/`ip6-input` as received on the tunnel.
//!
//! One node a file: [`encrypt`], [`decrypt`] and [`from_kernel`] (Linux
//! mode: ESP in UDP the kernel reassembled).

use crate::state::IfTable;
use std::collections::HashMap;
use std::net::IpAddr;
use tern_engine::{Cx, ErrorDesc, Node};
use tern_ipsec::{Sa, SaCounters, SaReader, SaTable};
use tern_packet::{PktIdx, flags};
use tern_rcu::Snapshot;
use tern_wire::checksum;

pub mod decrypt;
pub mod encrypt;
pub mod from_kernel;

pub use decrypt::{EspDecrypt, EspDecryptError, EspDecryptNext};
pub use encrypt::{EspEncrypt, EspEncryptError, EspEncryptNext};
pub use from_kernel::{EspFromKernel, EspFromKernelError, EspFromKernelNext};

/// IP protocol number of ESP.
pub const IPPROTO_ESP: u8 = 50;
/// The UDP port of ESP in UDP and IKE with NAT traversal (RFC 3948).
pub const UDP_ENCAP_PORT: u16 = 4500;

/// UDP for `esp-decrypt` (`l4`: the UDP header and payload). To port
/// 4500: ESP in UDP (RFC 3948), and in standalone mode also IKE (which
/// `esp-decrypt` counts); in Linux mode IKE (the non-ESP marker) and NAT
/// keep-alives are the kernel's. To another port that an SA of `sas`
/// uses as its local ESP-in-UDP port ([`SaTable::is_encap_port`]; never
/// IKE's 500): all of it, in both modes, as no IKE runs there
/// (`esp-decrypt` counts the non-ESP marker as `non-esp-marker`). UDP to
/// any other port is ordinary local UDP.
#[inline]
pub fn is_udp_encap_esp(proto: tern_wire::IpProtocol, l4: &[u8], linux: bool, sas: &SaTable) -> bool {
    if proto != tern_wire::IpProtocol::UDP {
        return false;
    }
    let Some(&[hi, lo]) = l4.get(2..4) else { return false };
    match u16::from_be_bytes([hi, lo]) {
        UDP_ENCAP_PORT => !(linux && l4.get(8..).is_some_and(|u| tern_ipsec::is_non_esp_marker(u) || u == [0xff])),
        crate::ike::IKE_PORT => false,
        port => sas.is_encap_port(port),
    }
}

/// Whether the IPv6 fragment header at `frag` (from the walk's
/// `fragment_offset`, within `ext`, the bytes after the fixed header) makes
/// an atomic fragment: offset 0 and no more fragments, which RFC 6946
/// section 4 says to process as the whole packet it is.
pub fn is_atomic_fragment(ext: &[u8], frag: usize) -> bool {
    ext.get(frag..)
        .and_then(|h| tern_wire::ipv6ext::Ipv6FragmentHeader::new_checked(h).ok())
        .is_some_and(|h| h.frag_offset() == 0 && !h.more_frags())
}

/// Packets whose SAs `esp-decrypt` and a multipoint tunnel's
/// `esp-encrypt` look up (and prefetch) before processing any of them:
/// enough lookups in flight to overlap their cache misses, few enough
/// that what they prefetch (an SA, its ~9 lines of keys, its counters)
/// is still in the L1/L2 cache when its packet comes.
const LOOKAHEAD: usize = 32;

/// The SA-to-tunnel index the decryption uses, rebuilt when the interface
/// table changes: for each inbound SA id, the tunnels that list it.
#[derive(Default)]
struct InIndex {
    gen_ifs: Option<u64>,
    by_sa: HashMap<u32, Vec<u16>, std::hash::BuildHasherDefault<tern_ipsec::db::U32Hasher>>,
}

impl InIndex {
    fn refresh(&mut self, ifs: &Snapshot<IfTable>) {
        if self.gen_ifs == Some(ifs.generation()) {
            return;
        }
        self.gen_ifs = Some(ifs.generation());
        self.by_sa.clear();
        let t = ifs.current();
        for i in t.tunnels.iter().filter_map(|&i| t.get(i)) {
            if let Some(x) = i.ipsec() {
                for &sa in &x.sa_in {
                    self.by_sa.entry(sa).or_default().push(i.index);
                }
            }
        }
    }
}

/// Counters of one SA over a run of packets, added to the SA once.
struct Run<'a> {
    sa: &'a Sa,
    delta: SaCounters,
}

impl<'a> Run<'a> {
    /// `sa`'s run in `slot`: the one there if it is `sa`'s, else a new
    /// one, after the previous SA's counters are added to it.
    fn of<'s>(slot: &'s mut Option<Run<'a>>, sa: &'a Sa, worker: u16) -> &'s mut Run<'a> {
        if slot.as_ref().is_some_and(|r| std::ptr::eq(r.sa, sa)) {
            // Checked just above; `get_or_insert_with` never inserts here.
            return slot.get_or_insert_with(|| Run { sa, delta: SaCounters::default() });
        }
        if let Some(old) = slot.take() {
            old.flush(worker);
        }
        slot.insert(Run { sa, delta: SaCounters::default() })
    }

    fn flush(self, worker: u16) {
        if !self.delta.is_zero() {
            self.sa.count(worker, &self.delta);
        }
    }
}

/// A traced packet's ESP note.
#[cold]
#[inline(never)]
fn trace_esp(cx: &mut Cx<'_>, p: PktIdx, spi: u32, seq: u64, verdict: &str) {
    cx.trace_note(p, || format!("spi {spi:#x} seq {seq}: {verdict}"));
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests;
