//! Reading listpacks (Redis 7.0's compact encoding of hash, sorted set and list nodes, and of
//! stream nodes): every entry's encoding, length and back-length, the count and the end.

use crate::read::{decimal, Reader};
use crate::{Error, Result};
use alloc::borrow::Cow;
use alloc::vec::Vec;

/// A listpack's elements, integers as decimal text. Layout: total bytes (u32), count (u16,
/// 65535 = unknown), entries (encoding, data, back-length), `0xFF`.
pub fn listpack(blob: &[u8]) -> Result<Vec<Vec<u8>>> {
    let mut r = Reader::new(blob);
    let total = r.u32_le()? as usize;
    let count = usize::from(u16::from_le_bytes([r.u8()?, r.u8()?]));
    if total != blob.len() || blob.last() != Some(&0xFF) {
        return Err(Error::Corrupt("listpack header"));
    }
    let mut out = Vec::new();
    loop {
        let start = r.pos();
        let b = r.u8()?;
        if b == 0xFF {
            break;
        }
        out.push(listpack_entry(&mut r, b)?.into_owned());
        let entry_len = r.pos() - start;
        let back = r.take(backlen_size(entry_len))?;
        if backlen_value(back) != Some(entry_len) {
            return Err(Error::Corrupt("listpack entry back-length"));
        }
    }
    if !r.is_empty() || (count != 65535 && count != out.len()) {
        return Err(Error::Corrupt("listpack count"));
    }
    Ok(out)
}

/// Redis's checks of a listpack without deep sanitization, Kayvee's for keeping one it cannot
/// read: the header's total matches the blob, which ends with the terminator, and the header's
/// count is neither 0 (an empty key, which Redis refuses) nor 65535 ("unknown": Redis counts
/// by walking the entries, which it cannot do safely on such a listpack).
pub fn header_sound(blob: &[u8]) -> bool {
    let [a, b, c, d, n0, n1, ..] = *blob else {
        return false;
    };
    let count = u16::from_le_bytes([n0, n1]);
    u32::from_le_bytes([a, b, c, d]) as usize == blob.len()
        && blob.len() >= 7
        && blob.last() == Some(&0xFF)
        && count != 0
        && count != u16::MAX
}

/// Whether the listpack's first entry (after the 6-byte header) is whole: a known encoding
/// whose data and back-length end before the terminator, the back-length matching. `false`
/// for an empty listpack.
pub fn first_entry_whole(blob: &[u8]) -> bool {
    let mut r = Reader::new(blob.get(..blob.len().saturating_sub(1)).unwrap_or_default());
    if r.take(6).is_err() {
        return false;
    }
    let Ok(b) = r.u8() else { return false };
    if b == 0xFF || listpack_entry(&mut r, b).is_err() {
        return false;
    }
    let entry_len = r.pos() - 6;
    r.take(backlen_size(entry_len))
        .is_ok_and(|back| backlen_value(back) == Some(entry_len))
}

/// A back-length's value (7 bits a byte, the most significant group first, all but the first
/// byte flagged), `None` when the flags are wrong.
fn backlen_value(back: &[u8]) -> Option<usize> {
    let flags_ok = back
        .iter()
        .enumerate()
        .all(|(i, &x)| (x & 0x80 != 0) == (i != 0));
    flags_ok.then(|| {
        back.iter()
            .fold(0usize, |acc, &x| acc << 7 | usize::from(x & 0x7F))
    })
}

/// Bytes of a listpack back-length for an entry of `len` bytes.
fn backlen_size(len: usize) -> usize {
    match len {
        0..=127 => 1,
        128..=16383 => 2,
        16384..=2097151 => 3,
        2097152..=268435455 => 4,
        _ => 5,
    }
}

/// One listpack entry after its first byte `b`.
fn listpack_entry<'a>(r: &mut Reader<'a>, b: u8) -> Result<Cow<'a, [u8]>> {
    let sign = |v: u64, bits: u32| ((v << (64 - bits)) as i64) >> (64 - bits);
    let int = |v: i64| Ok(Cow::Owned(decimal(v)));
    match b {
        0x00..=0x7F => int(i64::from(b)),
        0x80..=0xBF => Ok(Cow::Borrowed(r.take(usize::from(b & 0x3F))?)),
        0xC0..=0xDF => int(sign(u64::from(b & 0x1F) << 8 | u64::from(r.u8()?), 13)),
        0xE0..=0xEF => {
            let n = usize::from(b & 0x0F) << 8 | usize::from(r.u8()?);
            Ok(Cow::Borrowed(r.take(n)?))
        }
        0xF0 => {
            let n = r.u32_le()? as usize;
            Ok(Cow::Borrowed(r.take(n)?))
        }
        0xF1 => int(sign(le(r.take(2)?), 16)),
        0xF2 => int(sign(le(r.take(3)?), 24)),
        0xF3 => int(sign(le(r.take(4)?), 32)),
        0xF4 => int(le(r.take(8)?) as i64),
        _ => Err(Error::Corrupt("listpack entry encoding")),
    }
}

/// A little-endian unsigned integer of up to 8 bytes.
pub(crate) fn le(b: &[u8]) -> u64 {
    b.iter().rev().fold(0, |acc, &x| acc << 8 | u64::from(x))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_sound_checks_total_terminator_and_count() {
        // Two entries claimed, the second running past the end: the header alone is sound.
        let lp = [12, 0, 0, 0, 2, 0, 0x82, b'a', b'b', 3, 0xF0, 0xFF];
        assert!(header_sound(&lp));
        assert!(listpack(&lp).is_err());
        let with = |at: usize, byte: u8| {
            let mut b = lp;
            b[at] = byte;
            b
        };
        // A wrong total, no terminator, a count of 0 or "unknown", too short to hold a header.
        assert!(!header_sound(&with(0, 13)));
        assert!(!header_sound(&with(11, 0xFE)));
        assert!(!header_sound(&with(4, 0)));
        assert!(!header_sound(&[
            12, 0, 0, 0, 0xFF, 0xFF, 0x82, b'a', b'b', 3, 0xF0, 0xFF
        ]));
        assert!(!header_sound(&[6, 0, 0, 0, 1, 0]));
    }

    #[test]
    fn first_entry_whole_checks_encoding_length_and_back_length() {
        // Header (total, count), "ab" (0x82), back-length 3, terminator.
        let lp = [9, 0, 0, 0, 1, 0, 0x82, b'a', b'b', 3, 0xFF];
        assert!(first_entry_whole(&lp));
        // A wrong back-length, a string running into the terminator, an unknown encoding,
        // no entry at all.
        assert!(!first_entry_whole(&[
            9, 0, 0, 0, 1, 0, 0x82, b'a', b'b', 4, 0xFF
        ]));
        assert!(!first_entry_whole(&[
            9, 0, 0, 0, 1, 0, 0x83, b'a', b'b', 3, 0xFF
        ]));
        assert!(!first_entry_whole(&[9, 0, 0, 0, 1, 0, 0xFD, 1, 0xFF]));
        assert!(!first_entry_whole(&[7, 0, 0, 0, 0, 0, 0xFF]));
        assert!(!first_entry_whole(&[1, 0]));
    }
}
