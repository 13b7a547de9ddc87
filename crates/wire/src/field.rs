//! Big-endian field accessors shared by the header views.
//!
//! Each helper indexes the buffer once (one bounds check on a slice of the
//! exact width), so that a getter on a view whose length was checked compiles
//! to a plain load plus a byte swap.

pub(crate) type Field = core::ops::Range<usize>;

#[inline(always)]
pub(crate) fn read_u16(buf: &[u8], at: usize) -> u16 {
    let b = &buf[at..at + 2];
    u16::from_be_bytes([b[0], b[1]])
}

#[inline(always)]
pub(crate) fn read_u32(buf: &[u8], at: usize) -> u32 {
    let b = &buf[at..at + 4];
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

#[inline(always)]
pub(crate) fn write_u16(buf: &mut [u8], at: usize, value: u16) {
    buf[at..at + 2].copy_from_slice(&value.to_be_bytes());
}

#[inline(always)]
pub(crate) fn write_u32(buf: &mut [u8], at: usize, value: u32) {
    buf[at..at + 4].copy_from_slice(&value.to_be_bytes());
}

#[inline(always)]
pub(crate) fn read_array<const N: usize>(buf: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&buf[at..at + N]);
    out
}

/// `buf[at..at + N]` as an array, or `None` when the buffer is too short.
#[inline]
pub(crate) fn get_array<const N: usize>(buf: &[u8], at: usize) -> Option<[u8; N]> {
    let end = at.checked_add(N)?;
    let mut out = [0u8; N];
    out.copy_from_slice(buf.get(at..end)?);
    Some(out)
}
