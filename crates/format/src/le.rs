//! Little-endian field access over byte slices that never panics: a short slice is a
//! [`FormatError::Truncated`], not an index out of bounds.

use crate::error::{FormatError, Structure};

pub(crate) fn u16_at(buf: &[u8], at: usize, s: Structure) -> Result<u16, FormatError> {
    Ok(u16::from_le_bytes(array_at::<2>(buf, at, s)?))
}

pub(crate) fn u32_at(buf: &[u8], at: usize, s: Structure) -> Result<u32, FormatError> {
    Ok(u32::from_le_bytes(array_at::<4>(buf, at, s)?))
}

pub(crate) fn u64_at(buf: &[u8], at: usize, s: Structure) -> Result<u64, FormatError> {
    Ok(u64::from_le_bytes(array_at::<8>(buf, at, s)?))
}

pub(crate) fn array_at<const N: usize>(
    buf: &[u8],
    at: usize,
    s: Structure,
) -> Result<[u8; N], FormatError> {
    let end = at.checked_add(N).ok_or(FormatError::Truncated {
        structure: s,
        needed: usize::MAX,
        available: buf.len(),
    })?;
    match buf.get(at..end) {
        Some(bytes) => {
            let mut out = [0u8; N];
            out.copy_from_slice(bytes);
            Ok(out)
        }
        None => Err(FormatError::Truncated {
            structure: s,
            needed: end,
            available: buf.len(),
        }),
    }
}

pub(crate) fn slice_at(
    buf: &[u8],
    at: usize,
    len: usize,
    s: Structure,
) -> Result<&[u8], FormatError> {
    let end = at.checked_add(len).ok_or(FormatError::Truncated {
        structure: s,
        needed: usize::MAX,
        available: buf.len(),
    })?;
    buf.get(at..end).ok_or(FormatError::Truncated {
        structure: s,
        needed: end,
        available: buf.len(),
    })
}

pub(crate) fn put_u16(buf: &mut [u8], at: usize, v: u16) {
    buf[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_u32(buf: &mut [u8], at: usize, v: u32) {
    buf[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_u64(buf: &mut [u8], at: usize, v: u64) {
    buf[at..at + 8].copy_from_slice(&v.to_le_bytes());
}
