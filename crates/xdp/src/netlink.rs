//! Which XDP program a device has, and detaching it, over rtnetlink
//! (RTM_GETLINK / RTM_SETLINK with the IFLA_XDP attribute). Used to find and
//! remove a program left attached by a process that died (netlink-attached
//! programs outlive their loader; bpf_link ones do not).

use crate::sys;
use std::io;
use std::os::fd::AsRawFd;

const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
const RTM_SETLINK: u16 = 19;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLA_F_NESTED: u16 = 1 << 15;
const IFLA_XDP: u16 = 43;
const IFLA_XDP_FD: u16 = 1;
const IFLA_XDP_ATTACHED: u16 = 2;
const IFLA_XDP_FLAGS: u16 = 3;
const IFLA_XDP_PROG_ID: u16 = 4;
const IFLA_XDP_DRV_PROG_ID: u16 = 5;
const IFLA_XDP_SKB_PROG_ID: u16 = 6;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// How a program is attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttachMode {
    /// Generic (skb) mode.
    Skb,
    /// Native (driver) mode.
    Driver,
}

/// The XDP programs attached to a device: (mode, program id).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct XdpAttachment {
    pub programs: Vec<(AttachMode, u32)>,
}

fn header(buf: &mut Vec<u8>, ty: u16, flags: u16, seq: u32) {
    buf.extend_from_slice(&0u32.to_ne_bytes()); // length, patched at the end
    buf.extend_from_slice(&ty.to_ne_bytes());
    buf.extend_from_slice(&flags.to_ne_bytes());
    buf.extend_from_slice(&seq.to_ne_bytes());
    buf.extend_from_slice(&0u32.to_ne_bytes()); // port id: kernel fills in
}

fn ifinfomsg(buf: &mut Vec<u8>, ifindex: u32) {
    buf.extend_from_slice(&[0u8; 4]); // family, pad, type
    buf.extend_from_slice(&(ifindex as i32).to_ne_bytes());
    buf.extend_from_slice(&0u32.to_ne_bytes()); // flags
    buf.extend_from_slice(&0u32.to_ne_bytes()); // change
}

fn attr(buf: &mut Vec<u8>, ty: u16, payload: &[u8]) {
    buf.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
    buf.extend_from_slice(&ty.to_ne_bytes());
    buf.extend_from_slice(payload);
    while !buf.len().is_multiple_of(4) {
        buf.push(0);
    }
}

fn finish(buf: &mut [u8]) {
    let len = (buf.len() as u32).to_ne_bytes();
    buf[..4].copy_from_slice(&len);
}

/// Iterates over the netlink attributes in `b` as (type without flags,
/// payload). Stops at the first malformed one.
fn attrs(mut b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let len = u16::from_ne_bytes([*b.first()?, *b.get(1)?]) as usize;
        let ty = u16::from_ne_bytes([*b.get(2)?, *b.get(3)?]) & !NLA_F_NESTED & 0x7fff;
        if len < 4 || len > b.len() {
            return None;
        }
        let payload = &b[4..len];
        b = b.get(len.next_multiple_of(4)..).unwrap_or(&[]);
        Some((ty, payload))
    })
}

fn u32_of(p: &[u8]) -> Option<u32> {
    Some(u32::from_ne_bytes(p.get(..4)?.try_into().ok()?))
}

/// Parses the IFLA_XDP nest of an RTM_NEWLINK message.
fn parse_link(msg: &[u8]) -> Option<XdpAttachment> {
    // nlmsghdr (16) + ifinfomsg (16), then attributes.
    let ty = u16::from_ne_bytes([*msg.get(4)?, *msg.get(5)?]);
    if ty != RTM_NEWLINK {
        return None;
    }
    let mut att = XdpAttachment::default();
    for (t, p) in attrs(msg.get(32..)?) {
        if t != IFLA_XDP {
            continue;
        }
        let mut mode = 0u8;
        let (mut any, mut drv, mut skb) = (0, 0, 0);
        for (t, p) in attrs(p) {
            match t {
                IFLA_XDP_ATTACHED => mode = *p.first()?,
                IFLA_XDP_PROG_ID => any = u32_of(p)?,
                IFLA_XDP_DRV_PROG_ID => drv = u32_of(p)?,
                IFLA_XDP_SKB_PROG_ID => skb = u32_of(p)?,
                _ => {}
            }
        }
        // XDP_ATTACHED_DRV 1, SKB 2, MULTI 4 (per-mode ids then given).
        match mode {
            1 => att.programs.push((AttachMode::Driver, any)),
            2 => att.programs.push((AttachMode::Skb, any)),
            4 => {
                if drv != 0 {
                    att.programs.push((AttachMode::Driver, drv));
                }
                if skb != 0 {
                    att.programs.push((AttachMode::Skb, skb));
                }
            }
            _ => {}
        }
    }
    Some(att)
}

fn request(msg: &[u8], seq: u32) -> io::Result<Vec<u8>> {
    let fd = sys::netlink_route_socket()?;
    sys::send_bytes(fd.as_raw_fd(), msg)?;
    let mut buf = vec![0u8; 65536];
    loop {
        let n = sys::recv_bytes(fd.as_raw_fd(), &mut buf)?;
        let reply = buf.get(..n).unwrap_or(&[]);
        let rseq = reply.get(8..12).and_then(u32_of);
        if rseq == Some(seq) {
            return Ok(reply.to_vec());
        }
    }
}

fn check_ack(reply: &[u8]) -> io::Result<()> {
    let ty = reply.get(4..6).map(|b| u16::from_ne_bytes([b[0], b[1]]));
    if ty != Some(NLMSG_ERROR) {
        return Err(io::Error::other("unexpected netlink reply"));
    }
    let err =
        reply.get(16..20).and_then(u32_of).map(|e| e as i32).ok_or_else(|| io::Error::other("short netlink ack"))?;
    if err == 0 { Ok(()) } else { Err(io::Error::from_raw_os_error(-err)) }
}

/// The XDP programs attached to interface `ifindex`.
pub fn query(ifindex: u32) -> io::Result<XdpAttachment> {
    let mut m = Vec::with_capacity(64);
    header(&mut m, RTM_GETLINK, NLM_F_REQUEST, 1);
    ifinfomsg(&mut m, ifindex);
    finish(&mut m);
    let reply = request(&m, 1)?;
    if let Some(att) = parse_link(&reply) {
        return Ok(att);
    }
    check_ack(&reply).and(Err(io::Error::other("no link in the netlink reply")))
}

/// Detaches the program attached in `mode` (netlink attachments only: a
/// live bpf_link refuses with EBUSY).
pub fn detach(ifindex: u32, mode: AttachMode) -> io::Result<()> {
    let mut nest = Vec::new();
    attr(&mut nest, IFLA_XDP_FD, &(-1i32).to_ne_bytes());
    let flags = match mode {
        AttachMode::Skb => XDP_FLAGS_SKB_MODE,
        AttachMode::Driver => XDP_FLAGS_DRV_MODE,
    };
    attr(&mut nest, IFLA_XDP_FLAGS, &flags.to_ne_bytes());
    let mut m = Vec::with_capacity(64);
    header(&mut m, RTM_SETLINK, NLM_F_REQUEST | NLM_F_ACK, 2);
    ifinfomsg(&mut m, ifindex);
    attr(&mut m, IFLA_XDP | NLA_F_NESTED, &nest);
    finish(&mut m);
    check_ack(&request(&m, 2)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_parse_and_stop_on_garbage() {
        let mut b = Vec::new();
        attr(&mut b, 7, &[1, 2, 3]);
        attr(&mut b, 9, &5u32.to_ne_bytes());
        let v: Vec<_> = attrs(&b).collect();
        assert_eq!(v, vec![(7, &[1u8, 2, 3][..]), (9, &5u32.to_ne_bytes()[..])]);
        // A length running past the buffer ends the walk without panicking.
        let bad = [200u8, 0, 1, 0, 0, 0];
        assert_eq!(attrs(&bad).count(), 0);
        assert_eq!(attrs(&[1u8]).count(), 0);
    }

    #[test]
    fn link_message_with_multi_attachment() {
        let mut nest = Vec::new();
        attr(&mut nest, IFLA_XDP_ATTACHED, &[4]);
        attr(&mut nest, IFLA_XDP_DRV_PROG_ID, &11u32.to_ne_bytes());
        attr(&mut nest, IFLA_XDP_SKB_PROG_ID, &12u32.to_ne_bytes());
        let mut m = Vec::new();
        header(&mut m, RTM_NEWLINK, 0, 1);
        ifinfomsg(&mut m, 3);
        attr(&mut m, 3, b"eth0\0"); // IFLA_IFNAME, skipped
        attr(&mut m, IFLA_XDP | NLA_F_NESTED, &nest);
        finish(&mut m);
        let att = parse_link(&m).expect("parses");
        assert_eq!(att.programs, vec![(AttachMode::Driver, 11), (AttachMode::Skb, 12)]);
        assert!(parse_link(&m[..20]).is_none());
    }
}
