//! Small helpers shared by the nodes.

use crate::state::Iface;
use tern_packet::{PacketPool, PktIdx};

// The readers are total: a field past the end of the slice reads as 0 and
// a write past it is skipped, never a panic. Callers check the length that
// matters once (and count a drop); these then cost one bounds check and
// one load, as `d[at..at + N]` did (byte-by-byte reads compiled to a
// check, a load and a shift per byte).

#[inline(always)]
pub fn be16(d: &[u8], at: usize) -> u16 {
    match d.get(at..).and_then(<[u8]>::first_chunk::<2>) {
        Some(b) => u16::from_be_bytes(*b),
        None => 0,
    }
}

#[inline(always)]
pub fn be32(d: &[u8], at: usize) -> u32 {
    match d.get(at..).and_then(<[u8]>::first_chunk::<4>) {
        Some(b) => u32::from_be_bytes(*b),
        None => 0,
    }
}

#[inline(always)]
pub fn be128(d: &[u8], at: usize) -> u128 {
    match d.get(at..).and_then(<[u8]>::first_chunk::<16>) {
        Some(b) => u128::from_be_bytes(*b),
        None => 0,
    }
}

#[inline(always)]
pub fn put16(d: &mut [u8], at: usize, v: u16) {
    if let Some(b) = d.get_mut(at..).and_then(<[u8]>::first_chunk_mut::<2>) {
        *b = v.to_be_bytes();
    }
}

pub const ETH_P_IPV4: u16 = 0x0800;
pub const ETH_P_ARP: u16 = 0x0806;
pub const ETH_P_IPV6: u16 = 0x86dd;
pub const ETH_P_8021Q: u16 = 0x8100;
pub const ETH_P_8021AD: u16 = 0x88a8;
pub const BROADCAST_MAC: [u8; 6] = [0xff; 6];

/// Moves the start of the packet's data so that exactly `l2_len` bytes
/// precede its L3 header (prepending into the headroom or trimming), and
/// sets `l3_off` accordingly. False if the headroom cannot hold it.
#[inline]
pub fn set_l2_len(pool: &mut PacketPool, p: PktIdx, l2_len: usize) -> bool {
    let l3 = pool.meta(p).l3_off as usize;
    let ok = if l3 > l2_len {
        pool.advance(p, l3 - l2_len)
    } else if l3 < l2_len {
        pool.prepend(p, l2_len - l3).is_some()
    } else {
        true
    };
    if ok {
        pool.meta_mut(p).l3_off = l2_len as u16;
    }
    ok
}

/// Writes the Ethernet (and 802.1Q) header of `out` in front of L3: the
/// data must already start `out.l2_len()` bytes before L3.
#[inline(always)]
pub fn write_l2(d: &mut [u8], dst: [u8; 6], out: &Iface, ethertype: u16) {
    // A buffer shorter than the header (which `set_l2_len` rules out) is
    // left alone.
    let Some((dmac, rest)) = d.split_first_chunk_mut::<6>() else { return };
    let Some((smac, rest)) = rest.split_first_chunk_mut::<6>() else { return };
    *dmac = dst;
    *smac = out.mac;
    match out.vlan() {
        None => put16(rest, 0, ethertype),
        Some(vid) => {
            if let Some(tag) = rest.first_chunk_mut::<6>() {
                let [a, b] = ETH_P_8021Q.to_be_bytes();
                let [c, d] = (vid & 0x0fff).to_be_bytes();
                let [e, f] = ethertype.to_be_bytes();
                *tag = [a, b, c, d, e, f];
            }
        }
    }
}

/// A 32-bit flow hash of the addresses, protocol and ports (for ECMP).
#[inline]
pub fn flow_hash(src: u128, dst: u128, proto: u8, ports: u32) -> u32 {
    let mut h = (src as u64) ^ ((src >> 64) as u64).rotate_left(17);
    h ^= ((dst as u64) ^ ((dst >> 64) as u64).rotate_left(31)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^= (u64::from(proto) << 32 | u64::from(ports)).wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
    h ^= h >> 29;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 32;
    h as u32
}

/// The transport ports of an IPv4 packet at `l3` (0 when absent).
#[inline]
pub fn v4_ports(l3: &[u8]) -> u32 {
    let Some(h) = l3.first_chunk::<20>() else { return 0 };
    let ihl = usize::from(h[0] & 0x0f) * 4;
    let frag = u16::from_be_bytes([h[6], h[7]]) & 0x1fff != 0;
    match h[9] {
        6 | 17 | 132 if !frag && l3.len() >= ihl + 4 => be32(l3, ihl),
        _ => 0,
    }
}

/// A token bucket (ICMP error rate limit), per worker.
pub struct TokenBucket {
    rate_per_s: u64,
    burst: u64,
    /// Tokens scaled by 1e9 (token-nanoseconds).
    level: u64,
    last_ns: u64,
}

impl TokenBucket {
    pub fn new(rate_per_s: u32, burst: u32) -> TokenBucket {
        let burst = u64::from(burst.max(1));
        TokenBucket { rate_per_s: u64::from(rate_per_s), burst, level: burst * 1_000_000_000, last_ns: 0 }
    }

    pub fn configure(&mut self, rate_per_s: u32, burst: u32) {
        self.rate_per_s = u64::from(rate_per_s);
        self.burst = u64::from(burst.max(1));
        self.level = self.level.min(self.burst * 1_000_000_000);
    }

    /// Takes one token if there is one.
    pub fn take(&mut self, now_ns: u64) -> bool {
        let dt = now_ns.saturating_sub(self.last_ns);
        self.last_ns = now_ns;
        self.level = (self.level + dt.saturating_mul(self.rate_per_s)).min(self.burst * 1_000_000_000);
        if self.level >= 1_000_000_000 {
            self.level -= 1_000_000_000;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;
    use tern_packet::PoolConfig;

    #[test]
    fn bucket_limits_rate_and_burst() {
        let mut b = TokenBucket::new(10, 5);
        let taken = (0..20).filter(|_| b.take(1)).count();
        assert_eq!(taken, 5, "burst");
        // 100 ms later: one more token.
        assert!(b.take(100_000_001));
        assert!(!b.take(100_000_002));
    }

    #[test]
    fn l2_len_moves_data_start() {
        let mut pool = PacketPool::new(PoolConfig { frames: 2, ..PoolConfig::default() }).expect("pool");
        let p = pool.alloc_from(&[0u8; 60]).expect("buf");
        pool.meta_mut(p).l3_off = 14;
        assert!(set_l2_len(&mut pool, p, 18));
        assert_eq!(pool.data(p).len(), 64);
        assert_eq!(pool.meta(p).l3_off, 18);
        assert!(set_l2_len(&mut pool, p, 14));
        assert_eq!(pool.data(p).len(), 60);
        assert!(set_l2_len(&mut pool, p, 0));
        assert_eq!(pool.data(p).len(), 46);
    }

    #[test]
    fn hash_spreads() {
        let a = flow_hash(1, 2, 17, 0x1234_5678);
        let b = flow_hash(1, 2, 17, 0x1234_5679);
        assert_ne!(a, b);
        assert_eq!(a, flow_hash(1, 2, 17, 0x1234_5678));
    }
}

/// What rewriting towards one next hop takes, worked out once per batch
/// per next hop (VPP's adjacency "rewrite string"): the egress interface's
/// state and MTU, and the whole link-layer header, prebuilt.
#[derive(Clone, Copy, Debug)]
pub struct Adj {
    pub state: AdjState,
    pub ifindex: u16,
    pub mtu: u16,
    /// Link-layer header length (0 for tunnels, 14, or 18 with 802.1Q).
    pub l2_len: usize,
    pub hdr: [u8; 18],
    /// The egress interface has an output rule set.
    pub acl_out: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdjState {
    /// Ready: write `hdr` and send.
    Ready,
    /// The neighbour's MAC is not known yet.
    Unresolved,
    /// A tunnel (GRE, IPsec): no link-layer header, encapsulate.
    Tunnel,
    NoInterface,
    InterfaceDown,
    /// The next hop is not something to forward to.
    NotForwardable,
}

impl Adj {
    pub fn new(ifs: &crate::state::IfTable, nh: &tern_fib::NextHop, ethertype: u16) -> Adj {
        let mut a =
            Adj { state: AdjState::NoInterface, ifindex: nh.ifindex, mtu: 0, l2_len: 14, hdr: [0; 18], acl_out: false };
        let Some(out) = ifs.get(nh.ifindex) else { return a };
        a.mtu = out.mtu;
        a.acl_out = out.acl_out.is_some();
        a.l2_len = out.l2_len();
        a.state = if !out.up {
            AdjState::InterfaceDown
        } else if !matches!(nh.kind, tern_fib::NhKind::Unicast | tern_fib::NhKind::Glean) {
            AdjState::NotForwardable
        } else if out.is_tunnel() {
            AdjState::Tunnel
        } else {
            match nh.mac.filter(|_| nh.kind == tern_fib::NhKind::Unicast) {
                Some(mac) => {
                    write_l2(&mut a.hdr, mac, out, ethertype);
                    AdjState::Ready
                }
                None => AdjState::Unresolved,
            }
        };
        a
    }
}
