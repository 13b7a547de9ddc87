//! Hand-built test packets, written independently of tern's own header
//! code so that tests check tern against a second implementation.
#![allow(dead_code)]

use std::net::{Ipv4Addr, Ipv6Addr};

pub fn csum(data: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for c in data.chunks(2) {
        let w = if c.len() == 2 { u16::from_be_bytes([c[0], c[1]]) } else { u16::from_be_bytes([c[0], 0]) };
        s += u32::from(w);
    }
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

pub fn eth(dst: [u8; 6], src: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    while f.len() < 60 {
        f.push(0);
    }
    f
}

pub fn eth_vlan(dst: [u8; 6], src: [u8; 6], vid: u16, ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut inner = Vec::new();
    inner.extend_from_slice(&vid.to_be_bytes());
    inner.extend_from_slice(&ethertype.to_be_bytes());
    inner.extend_from_slice(payload);
    eth(dst, src, 0x8100, &inner)
}

pub fn arp(op: u16, sha: [u8; 6], spa: Ipv4Addr, tha: [u8; 6], tpa: Ipv4Addr) -> Vec<u8> {
    let mut a = vec![0, 1, 8, 0, 6, 4];
    a.extend_from_slice(&op.to_be_bytes());
    a.extend_from_slice(&sha);
    a.extend_from_slice(&spa.octets());
    a.extend_from_slice(&tha);
    a.extend_from_slice(&tpa.octets());
    a
}

pub fn ipv4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, ttl: u8, payload: &[u8]) -> Vec<u8> {
    let mut h = vec![0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, ttl, proto, 0, 0];
    let len = (20 + payload.len()) as u16;
    h[2..4].copy_from_slice(&len.to_be_bytes());
    h.extend_from_slice(&src.octets());
    h.extend_from_slice(&dst.octets());
    let c = csum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h.extend_from_slice(payload);
    h
}

pub fn udp4(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16, data: &[u8]) -> Vec<u8> {
    let len = (8 + data.len()) as u16;
    let mut u = Vec::new();
    u.extend_from_slice(&sport.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&len.to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(data);
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&src.octets());
    pseudo.extend_from_slice(&dst.octets());
    pseudo.extend_from_slice(&[0, 17]);
    pseudo.extend_from_slice(&len.to_be_bytes());
    pseudo.extend_from_slice(&u);
    let c = csum(&pseudo);
    u[6..8].copy_from_slice(&c.to_be_bytes());
    u
}

pub fn icmp_echo(ty: u8, id: u16, seq: u16, data: &[u8]) -> Vec<u8> {
    let mut m = vec![ty, 0, 0, 0];
    m.extend_from_slice(&id.to_be_bytes());
    m.extend_from_slice(&seq.to_be_bytes());
    m.extend_from_slice(data);
    let c = csum(&m);
    m[2..4].copy_from_slice(&c.to_be_bytes());
    m
}

pub fn ipv6(src: Ipv6Addr, dst: Ipv6Addr, next: u8, hop: u8, payload: &[u8]) -> Vec<u8> {
    let mut h = vec![0x60, 0, 0, 0];
    h.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    h.push(next);
    h.push(hop);
    h.extend_from_slice(&src.octets());
    h.extend_from_slice(&dst.octets());
    h.extend_from_slice(payload);
    h
}

pub fn l4_csum6(src: Ipv6Addr, dst: Ipv6Addr, next: u8, l4: &[u8]) -> u16 {
    let mut p = Vec::new();
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.octets());
    p.extend_from_slice(&(l4.len() as u32).to_be_bytes());
    p.extend_from_slice(&[0, 0, 0, next]);
    p.extend_from_slice(l4);
    csum(&p)
}

pub fn icmp6(src: Ipv6Addr, dst: Ipv6Addr, ty: u8, code: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![ty, code, 0, 0];
    m.extend_from_slice(body);
    let c = l4_csum6(src, dst, 58, &m);
    m[2..4].copy_from_slice(&c.to_be_bytes());
    m
}

pub fn udp6(src: Ipv6Addr, dst: Ipv6Addr, sport: u16, dport: u16, data: &[u8]) -> Vec<u8> {
    let len = (8 + data.len()) as u16;
    let mut u = Vec::new();
    u.extend_from_slice(&sport.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&len.to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(data);
    let c = l4_csum6(src, dst, 17, &u);
    u[6..8].copy_from_slice(&c.to_be_bytes());
    u
}

/// A neighbour solicitation body (after type/code/checksum).
pub fn ns_body(target: Ipv6Addr, sll: Option<[u8; 6]>) -> Vec<u8> {
    let mut b = vec![0, 0, 0, 0];
    b.extend_from_slice(&target.octets());
    if let Some(m) = sll {
        b.extend_from_slice(&[1, 1]);
        b.extend_from_slice(&m);
    }
    b
}

pub fn na_body(target: Ipv6Addr, flags: u8, tll: [u8; 6]) -> Vec<u8> {
    let mut b = vec![flags, 0, 0, 0];
    b.extend_from_slice(&target.octets());
    b.extend_from_slice(&[2, 1]);
    b.extend_from_slice(&tll);
    b
}

pub fn solicited_node(a: Ipv6Addr) -> (Ipv6Addr, [u8; 6]) {
    let o = a.octets();
    (
        Ipv6Addr::from([0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, o[13], o[14], o[15]]),
        [0x33, 0x33, 0xff, o[13], o[14], o[15]],
    )
}

/// Parsed view of an Ethernet + IPv4 frame for assertions.
pub struct V4 {
    pub dst_mac: [u8; 6],
    pub src_mac: [u8; 6],
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub ttl: u8,
    pub proto: u8,
    pub l4: Vec<u8>,
    pub header_ok: bool,
}

pub fn parse_v4(f: &[u8]) -> Option<V4> {
    if f.len() < 34 || f[12..14] != [8, 0] {
        return None;
    }
    let ip = &f[14..];
    let ihl = usize::from(ip[0] & 15) * 4;
    let tot = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    Some(V4 {
        dst_mac: f[0..6].try_into().ok()?,
        src_mac: f[6..12].try_into().ok()?,
        src: Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]),
        dst: Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]),
        ttl: ip[8],
        proto: ip[9],
        l4: ip.get(ihl..tot)?.to_vec(),
        header_ok: csum(&ip[..ihl]) == 0,
    })
}

pub struct V6 {
    pub dst_mac: [u8; 6],
    pub src_mac: [u8; 6],
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    pub hop: u8,
    pub next: u8,
    pub l4: Vec<u8>,
}

pub fn parse_v6(f: &[u8]) -> Option<V6> {
    if f.len() < 54 || f[12..14] != [0x86, 0xdd] {
        return None;
    }
    let ip = &f[14..];
    let plen = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
    Some(V6 {
        dst_mac: f[0..6].try_into().ok()?,
        src_mac: f[6..12].try_into().ok()?,
        src: Ipv6Addr::from(<[u8; 16]>::try_from(&ip[8..24]).ok()?),
        dst: Ipv6Addr::from(<[u8; 16]>::try_from(&ip[24..40]).ok()?),
        hop: ip[7],
        next: ip[6],
        l4: ip.get(40..40 + plen)?.to_vec(),
    })
}
