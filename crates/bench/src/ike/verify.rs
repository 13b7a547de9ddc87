//! A packet through each tunnel (`--verify`): an ICMP echo from the
//! tunnel's inner address (its virtual IP) to the responder's inner
//! address, encrypted with the child SA's outbound keys (tern-ipsec, the
//! data plane's own ESP), and its answer decrypted with the inbound keys.
//! The generator's [`Verifier`] counts a tunnel when the answer decrypts
//! and is the echo reply it waits for; the bare responder's [`Answerer`]
//! answers such echoes on the SAs it negotiated.

use super::net::Net;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};
use tern_ike::{ChildSa, EspKeys};
use tern_ipsec::{Lifetime, NH_IPV4, Sa, SaConfig};

/// ICMP echo's identifier in every probe (the token in the payload says
/// which tunnel).
const ECHO_ID: u16 = 0x7e1b;

/// A child SA's two directions in tern-ipsec, and where its ESP goes.
pub struct Pair {
    pub inbound: Sa,
    pub outbound: Sa,
    pub remote: IpAddr,
    pub encap: Option<(u16, u16)>,
}

impl Pair {
    pub fn new(c: &ChildSa) -> Result<Pair, String> {
        let life = Lifetime { packets: None, bytes: None, secs: None };
        let one = |k: &EspKeys| -> Result<Sa, String> {
            let cfg = SaConfig {
                id: 0,
                spi: k.spi,
                cipher: k.cipher,
                integ: k.integ,
                key: k.key.clone(),
                integ_key: k.integ_key.clone(),
                esn: c.esn,
                replay_window: tern_ipsec::config::DEFAULT_REPLAY_WINDOW,
                udp_encap: None,
                soft: life,
                hard: life,
            };
            Sa::new(cfg, 1, Instant::now()).map_err(|e| format!("child SA {:#x}: {e}", k.spi))
        };
        Ok(Pair { inbound: one(&c.inbound)?, outbound: one(&c.outbound)?, remote: c.remote, encap: c.udp_encap })
    }

    /// `inner` (an IPv4 packet) as ESP on the outbound SA.
    pub fn seal(&self, inner: &[u8]) -> Result<Vec<u8>, String> {
        let sa = &self.outbound;
        let h = sa.header_len();
        let mut buf = vec![0u8; h + inner.len() + sa.trailer_len(inner.len())];
        buf[h..h + inner.len()].copy_from_slice(inner);
        let seq = sa.reserve_seq(1);
        if seq.count == 0 {
            return Err("out of sequence numbers".into());
        }
        let n = sa.encrypt(&mut buf, inner.len(), NH_IPV4, seq.first).map_err(|e| format!("esp encrypt: {e:?}"))?;
        buf.truncate(n);
        Ok(buf)
    }

    /// The inner IPv4 packet of `esp` (from the SPI on), decrypted on the
    /// inbound SA, replay-checked.
    pub fn open<'a>(&self, esp: &'a mut [u8]) -> Result<&'a [u8], String> {
        let sa = &self.inbound;
        let (_, lo) = tern_ipsec::parse_header(esp).map_err(|e| format!("esp header: {e:?}"))?;
        let seq = sa.replay_check(lo).map_err(|e| format!("replay: {e:?}"))?;
        let d = sa.decrypt(esp, seq).map_err(|e| format!("esp decrypt: {e:?}"))?;
        sa.replay_update(seq).map_err(|e| format!("replay: {e:?}"))?;
        if d.next_header != NH_IPV4 {
            return Err(format!("inner next header {}", d.next_header));
        }
        esp.get(d.inner).ok_or_else(|| "inner range".to_string())
    }
}

/// The SPI of an ESP packet, if it has one.
pub fn spi_of(esp: &[u8]) -> Option<u32> {
    tern_ipsec::parse_header(esp).ok().map(|(spi, _)| spi)
}

/// RFC 1071's checksum.
fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An IPv4 ICMP echo (`kind` 8 request, 0 reply) carrying `token`.
pub fn echo(kind: u8, src: Ipv4Addr, dst: Ipv4Addr, seq: u16, token: u64) -> Vec<u8> {
    let mut p = vec![0u8; 20 + 8 + 8];
    let len = p.len() as u16;
    p[0] = 0x45;
    p[2..4].copy_from_slice(&len.to_be_bytes());
    p[8] = 64;
    p[9] = 1;
    p[12..16].copy_from_slice(&src.octets());
    p[16..20].copy_from_slice(&dst.octets());
    let c = checksum(&p[..20]);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p[20] = kind;
    p[24..26].copy_from_slice(&ECHO_ID.to_be_bytes());
    p[26..28].copy_from_slice(&seq.to_be_bytes());
    p[28..36].copy_from_slice(&token.to_be_bytes());
    let c = checksum(&p[20..]);
    p[22..24].copy_from_slice(&c.to_be_bytes());
    p
}

/// An ICMP echo read from an IPv4 packet: (type, source, destination,
/// sequence, token), or why not.
pub fn parse_echo(p: &[u8]) -> Result<(u8, Ipv4Addr, Ipv4Addr, u16, u64), String> {
    let ihl = usize::from(p.first().ok_or("empty inner packet")? & 0x0f) * 4;
    if p[0] >> 4 != 4 || ihl < 20 || p.len() < ihl + 16 {
        return Err(format!("not an IPv4 ICMP echo ({} bytes)", p.len()));
    }
    if p[9] != 1 {
        return Err(format!("inner protocol {}", p[9]));
    }
    let total = usize::from(u16::from_be_bytes([p[2], p[3]]));
    let icmp = p.get(ihl..total.min(p.len())).ok_or("inner length")?;
    if icmp.len() < 16 || checksum(icmp) != 0 {
        return Err("icmp checksum".into());
    }
    let src = Ipv4Addr::new(p[12], p[13], p[14], p[15]);
    let dst = Ipv4Addr::new(p[16], p[17], p[18], p[19]);
    if !matches!(icmp[0], 0 | 8) || u16::from_be_bytes([icmp[4], icmp[5]]) != ECHO_ID {
        return Err(format!("icmp type {} (not our echo)", icmp[0]));
    }
    let seq = u16::from_be_bytes([icmp[6], icmp[7]]);
    let token = u64::from_be_bytes(icmp[8..16].try_into().map_err(|_| "icmp payload")?);
    Ok((icmp[0], src, dst, seq, token))
}

/// One tunnel waiting for its answer.
struct Pending {
    pair: Pair,
    src: Ipv4Addr,
    token: u64,
    first_sent: Instant,
    last_sent: Instant,
    tries: u32,
}

/// The generator's side: probes in flight by inbound SPI.
pub struct Verifier {
    dst: Ipv4Addr,
    /// A probe unanswered this long is sent again, `tries` times in all.
    pub timeout: Duration,
    pub tries: u32,
    pending: HashMap<u32, Pending>,
    next_token: u64,
    pub verified: u64,
    pub failed: u64,
    pub failures: HashMap<String, u64>,
    /// Microseconds from the first probe to its answer.
    pub latencies_us: Vec<u32>,
    /// ESP that matched no probe (late duplicates, unknown SPIs).
    pub stray: u64,
}

impl Verifier {
    pub fn new(dst: Ipv4Addr) -> Verifier {
        Verifier {
            dst,
            timeout: Duration::from_secs(1),
            tries: 3,
            pending: HashMap::new(),
            next_token: 1,
            verified: 0,
            failed: 0,
            failures: HashMap::new(),
            latencies_us: Vec::new(),
            stray: 0,
        }
    }

    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }

    fn fail(&mut self, why: String) {
        self.failed += 1;
        *self.failures.entry(why).or_default() += 1;
    }

    /// Probes `child` from `src` (its virtual IP): false if it could not
    /// (counted as a failure).
    pub fn start(&mut self, net: &mut Net, child: &ChildSa, src: Option<IpAddr>) -> bool {
        let src = match src.or(child.virtual_ip) {
            Some(IpAddr::V4(a)) => a,
            Some(IpAddr::V6(_)) => {
                self.fail("verify: an IPv6 inner address (IPv4 only)".into());
                return false;
            }
            None => {
                self.fail("verify: no inner source (no virtual IP, no --inner-src)".into());
                return false;
            }
        };
        let pair = match Pair::new(child) {
            Ok(p) => p,
            Err(e) => {
                self.fail(format!("verify: {e}"));
                return false;
            }
        };
        let token = self.next_token;
        self.next_token += 1;
        let now = Instant::now();
        let p = Pending { pair, src, token, first_sent: now, last_sent: now, tries: 1 };
        if let Err(e) = self.send(net, &p) {
            self.fail(format!("verify: {e}"));
            return false;
        }
        self.pending.insert(child.inbound.spi, p);
        true
    }

    fn send(&self, net: &mut Net, p: &Pending) -> Result<(), String> {
        let inner = echo(8, p.src, self.dst, p.tries as u16, p.token);
        let esp = p.pair.seal(&inner)?;
        net.send_esp(p.pair.remote, p.pair.encap, &esp);
        Ok(())
    }

    /// An ESP packet came: true if it verified a tunnel.
    pub fn answer(&mut self, esp: &mut [u8]) -> bool {
        let Some(spi) = spi_of(esp) else {
            self.stray += 1;
            return false;
        };
        let Some(p) = self.pending.get(&spi) else {
            self.stray += 1;
            return false;
        };
        let ok = p.pair.open(esp).and_then(|inner| {
            let (kind, src, dst, _, token) = parse_echo(inner)?;
            if kind != 0 || src != self.dst || dst != p.src || token != p.token {
                return Err(format!("an answer that is not ours: type {kind} {src} -> {dst}"));
            }
            Ok(())
        });
        match ok {
            Ok(()) => {
                if let Some(p) = self.pending.remove(&spi) {
                    self.verified += 1;
                    let us = p.first_sent.elapsed().as_micros();
                    self.latencies_us.push(u32::try_from(us).unwrap_or(u32::MAX));
                }
                true
            }
            Err(e) => {
                // Left pending: a retry may still be answered.
                *self.failures.entry(format!("verify (not counted): {e}")).or_default() += 1;
                false
            }
        }
    }

    /// Sends again what timed out; fails what has no tries left. Returns
    /// how many failed now.
    pub fn poll(&mut self, net: &mut Net, now: Instant) -> u64 {
        let mut gone = Vec::new();
        let mut again = Vec::new();
        for (spi, p) in &self.pending {
            if now.saturating_duration_since(p.last_sent) < self.timeout {
                continue;
            }
            if p.tries >= self.tries { gone.push(*spi) } else { again.push(*spi) }
        }
        let mut n = gone.len() as u64;
        for spi in again {
            let Some(mut p) = self.pending.remove(&spi) else { continue };
            p.tries += 1;
            p.last_sent = now;
            match self.send(net, &p) {
                Ok(()) => {
                    self.pending.insert(spi, p);
                }
                Err(e) => {
                    self.fail(format!("verify: {e}"));
                    n += 1;
                }
            }
        }
        for spi in gone {
            self.pending.remove(&spi);
            self.fail(format!("verify: no answer after {} probes", self.tries));
        }
        n
    }

    /// Time is up: what is still in flight, and `not_started` probes
    /// never sent, count as failed.
    pub fn give_up(&mut self, not_started: usize) {
        for _ in 0..std::mem::take(&mut self.pending).len() {
            self.fail("verify: no answer before the end".into());
        }
        for _ in 0..not_started {
            self.fail("verify: not probed before the end".into());
        }
    }

    /// (median, 99th percentile, maximum) verify latency in microseconds.
    pub fn latency(&mut self) -> (u32, u32, u32) {
        let v = &mut self.latencies_us;
        if v.is_empty() {
            return (0, 0, 0);
        }
        v.sort_unstable();
        let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
        (at(0.5), at(0.99), v[v.len() - 1])
    }
}

/// The bare responder's side: echoes through the SAs it negotiated are
/// answered from their destination.
#[derive(Default)]
pub struct Answerer {
    by_spi: HashMap<u32, Pair>,
    pub answered: u64,
    pub dropped: u64,
}

impl Answerer {
    pub fn install(&mut self, c: &ChildSa) -> Result<(), String> {
        self.by_spi.insert(c.inbound.spi, Pair::new(c)?);
        Ok(())
    }

    pub fn remove(&mut self, inbound_spi: u32) {
        self.by_spi.remove(&inbound_spi);
    }

    /// An ESP packet came: answered, or counted as dropped.
    pub fn answer(&mut self, net: &mut Net, esp: &mut [u8]) {
        let Some(pair) = spi_of(esp).and_then(|spi| self.by_spi.get(&spi)) else {
            self.dropped += 1;
            return;
        };
        let reply = pair.open(esp).and_then(|inner| {
            let (kind, src, dst, seq, token) = parse_echo(inner)?;
            if kind != 8 {
                return Err("not an echo request".into());
            }
            pair.seal(&echo(0, dst, src, seq, token))
        });
        match reply {
            Ok(esp) => {
                net.send_esp(pair.remote, pair.encap, &esp);
                self.answered += 1;
            }
            Err(_) => self.dropped += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tern_ike::TrafficSelector;
    use tern_ipsec::{Cipher, Integ, Key};

    fn child(cipher: Cipher, integ: Integ, swap: bool) -> ChildSa {
        let keys = |spi: u32, seed: u8| EspKeys {
            spi,
            cipher,
            integ,
            key: Key::new(vec![seed; cipher.key_len()]),
            integ_key: Key::new(vec![seed ^ 0x5a; integ.key_len()]),
        };
        let (a, b) = (keys(0x1000, 1), keys(0x2000, 2));
        let (inbound, outbound) = if swap { (b, a) } else { (a, b) };
        ChildSa {
            peer: "bench".into(),
            tunnel: None,
            ike_sa: 1,
            id: 1,
            inbound,
            outbound,
            esn: false,
            local: "10.0.2.1".parse().expect("addr"),
            remote: "10.0.2.2".parse().expect("addr"),
            udp_encap: None,
            local_ts: vec![TrafficSelector::any(false)],
            remote_ts: vec![TrafficSelector::any(false)],
            virtual_ip: Some("10.77.0.10".parse().expect("addr")),
            soft_secs: None,
            hard_secs: None,
            replaces: None,
        }
    }

    #[test]
    fn an_echo_sealed_by_one_side_opens_on_the_other_and_its_answer_comes_back() {
        for (cipher, integ) in [(Cipher::Aes128Gcm, Integ::None), (Cipher::Aes256Cbc, Integ::HmacSha256_128)] {
            let initiator = Pair::new(&child(cipher, integ, false)).expect("pair");
            let resp = Pair::new(&child(cipher, integ, true)).expect("pair");
            let (vip, inner_dst) = (Ipv4Addr::new(10, 77, 0, 10), Ipv4Addr::new(10, 77, 0, 1));
            let mut esp = initiator.seal(&echo(8, vip, inner_dst, 1, 42)).expect("seal");
            assert_eq!(spi_of(&esp), Some(0x2000), "the generator sends on the responder's SPI");
            let inner = resp.open(&mut esp).expect("open").to_vec();
            assert_eq!(parse_echo(&inner).expect("echo"), (8, vip, inner_dst, 1, 42));
            let mut back = resp.seal(&echo(0, inner_dst, vip, 1, 42)).expect("seal");
            let mut replayed = back.clone();
            assert_eq!(parse_echo(initiator.open(&mut back).expect("open")).expect("echo"), (0, inner_dst, vip, 1, 42));
            assert!(initiator.open(&mut replayed).expect_err("replay").starts_with("replay"), "{cipher}");
        }
    }

    #[test]
    fn damaged_answers_are_errors_not_panics() {
        let initiator = Pair::new(&child(Cipher::Aes128Gcm, Integ::None, false)).expect("pair");
        let resp = Pair::new(&child(Cipher::Aes128Gcm, Integ::None, true)).expect("pair");
        let good = resp.seal(&echo(0, Ipv4Addr::new(1, 1, 1, 1), Ipv4Addr::new(2, 2, 2, 2), 1, 7)).expect("seal");
        for cut in 0..good.len() {
            let mut d = good[..cut].to_vec();
            assert!(initiator.open(&mut d).is_err(), "truncated to {cut}");
        }
        let mut flipped = good.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert!(initiator.open(&mut flipped).expect_err("icv").contains("decrypt"));
        let e = echo(8, Ipv4Addr::new(1, 1, 1, 1), Ipv4Addr::new(2, 2, 2, 2), 1, 7);
        for cut in 0..e.len() {
            assert!(parse_echo(&e[..cut]).is_err(), "echo truncated to {cut}");
        }
        let mut bad = e.clone();
        bad[30] ^= 0xff;
        assert_eq!(parse_echo(&bad).expect_err("csum"), "icmp checksum");
    }
}
