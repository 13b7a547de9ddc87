//! What a device's driver can do with XDP, from the kernel's `netdev`
//! generic netlink family (Linux 6.3+, `NETDEV_A_DEV_XDP_FEATURES`): the
//! lane needs a native XDP hook (`basic`, `redirect`) on devices it
//! receives from and `ndo-xmit` on devices it sends out of. A veth
//! advertises `ndo-xmit` only while its peer can take XDP frames (an XDP
//! program or GRO on the peer): without it, frames redirected to it would
//! be dropped.

use super::shm::genl_socket;
use std::io;
use std::os::fd::AsRawFd;

pub const XDP_ACT_BASIC: u64 = 1 << 0;
pub const XDP_ACT_REDIRECT: u64 = 1 << 1;
pub const XDP_ACT_NDO_XMIT: u64 = 1 << 2;
pub const XDP_ACT_XSK_ZEROCOPY: u64 = 1 << 3;

const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const NETDEV_CMD_DEV_GET: u8 = 1;
const NETDEV_A_DEV_IFINDEX: u16 = 1;
const NETDEV_A_DEV_XDP_FEATURES: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLMSG_ERROR: u16 = 2;

fn request(ty: u16, cmd: u8, attrs: &[(u16, &[u8])]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&0u32.to_ne_bytes());
    b.extend_from_slice(&ty.to_ne_bytes());
    b.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    b.extend_from_slice(&1u32.to_ne_bytes());
    b.extend_from_slice(&0u32.to_ne_bytes());
    b.extend_from_slice(&[cmd, 1, 0, 0]);
    for (t, v) in attrs {
        b.extend_from_slice(&((4 + v.len()) as u16).to_ne_bytes());
        b.extend_from_slice(&t.to_ne_bytes());
        b.extend_from_slice(v);
        while b.len() % 4 != 0 {
            b.push(0);
        }
    }
    let len = (b.len() as u32).to_ne_bytes();
    b[..4].copy_from_slice(&len);
    b
}

/// The attributes of the first reply (after the 16-byte netlink and 4-byte
/// generic headers); an error reply becomes its errno.
fn transact(req: &[u8]) -> io::Result<Vec<(u16, Vec<u8>)>> {
    let fd = genl_socket()?;
    crate::sys::send_bytes(fd.as_raw_fd(), req)?;
    let mut buf = vec![0u8; 8192];
    let n = crate::sys::recv_bytes(fd.as_raw_fd(), &mut buf)?;
    let buf = buf.get(..n).unwrap_or_default();
    let u16_at = |b: &[u8], i: usize| b.get(i..i + 2).map(|x| u16::from_ne_bytes([x[0], x[1]]));
    let ty = u16_at(buf, 4).ok_or_else(|| io::Error::other("short netlink reply"))?;
    if ty == NLMSG_ERROR {
        let e = buf.get(16..20).map(|x| i32::from_ne_bytes([x[0], x[1], x[2], x[3]])).unwrap_or(-libc::EIO);
        return Err(io::Error::from_raw_os_error(-e));
    }
    let mut out = Vec::new();
    let mut i = 20;
    while let (Some(len), Some(t)) = (u16_at(buf, i), u16_at(buf, i + 2)) {
        let len = usize::from(len);
        if len < 4 {
            break;
        }
        out.push((t & 0x3fff, buf.get(i + 4..i + len).unwrap_or_default().to_vec()));
        i += len.div_ceil(4) * 4;
    }
    Ok(out)
}

/// The XDP features (`XDP_ACT_*` bits) of kernel device `ifindex`, in the
/// calling thread's namespace. `Err` on kernels without the query.
pub fn xdp_features(ifindex: u32) -> io::Result<u64> {
    let fam = transact(&request(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, &[(CTRL_ATTR_FAMILY_NAME, b"netdev\0")]))?;
    let id = fam
        .iter()
        .find(|(t, _)| *t == CTRL_ATTR_FAMILY_ID)
        .and_then(|(_, v)| v.get(..2).map(|x| u16::from_ne_bytes([x[0], x[1]])))
        .ok_or_else(|| io::Error::other("no netdev family id"))?;
    let dev = transact(&request(id, NETDEV_CMD_DEV_GET, &[(NETDEV_A_DEV_IFINDEX, &ifindex.to_ne_bytes())]))?;
    dev.iter()
        .find(|(t, _)| *t == NETDEV_A_DEV_XDP_FEATURES)
        .and_then(|(_, v)| v.get(..8).map(|x| u64::from_ne_bytes(x.try_into().unwrap_or([0; 8]))))
        .ok_or_else(|| io::Error::other("no XDP features in the reply"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_well_formed() {
        let r = request(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, &[(CTRL_ATTR_FAMILY_NAME, b"netdev\0")]);
        assert_eq!(r.len(), 16 + 4 + 4 + 8, "header, genl header, attribute padded to 4");
        assert_eq!(u32::from_ne_bytes([r[0], r[1], r[2], r[3]]) as usize, r.len());
    }

    #[test]
    fn loopback_reports_features_or_the_query_is_missing() {
        // Loopback has no XDP driver support; whatever the kernel answers,
        // it must not claim a native hook there.
        if let Ok(f) = xdp_features(1) {
            assert_eq!(f & XDP_ACT_NDO_XMIT, 0, "lo cannot take redirected frames: {f:#x}");
        }
    }
}
