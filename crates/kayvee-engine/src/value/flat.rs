//! Byte-level helpers of the compact (listpack-like) encodings: LEB128 lengths and the
//! variable-width score codes of flat sorted sets.
//!
//! A flat collection is one exact-size `Box<[u8]>`: entries one after another, each made of
//! length-prefixed byte strings (and, for sorted sets, a score stored in 1, 4 or 8 bytes). No
//! pointer, no per-entry allocation: small collections cost about what Redis's listpacks do.

use alloc::vec::Vec;

/// Appends `n` as an unsigned LEB128 varint (1 byte below 128).
#[inline]
pub(crate) fn put_varint(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Reads a varint at `*at`, advancing past it.
#[inline]
pub(crate) fn get_varint(buf: &[u8], at: &mut usize) -> usize {
    let (mut n, mut shift) = (0usize, 0);
    loop {
        let b = buf[*at];
        *at += 1;
        n |= usize::from(b & 0x7f) << shift;
        if b < 0x80 {
            return n;
        }
        shift += 7;
    }
}

/// How many bytes `put_varint(n)` writes.
#[inline]
pub(crate) fn varint_len(mut n: usize) -> usize {
    let mut len = 1;
    while n >= 0x80 {
        n >>= 7;
        len += 1;
    }
    len
}

/// Reads a length-prefixed byte string at `*at`, advancing past it.
#[inline]
pub(crate) fn get_bytes<'b>(buf: &'b [u8], at: &mut usize) -> &'b [u8] {
    let len = get_varint(buf, at);
    let s = &buf[*at..*at + len];
    *at += len;
    s
}

/// Appends a length-prefixed byte string.
#[inline]
pub(crate) fn put_bytes(out: &mut Vec<u8>, s: &[u8]) {
    put_varint(out, s.len());
    out.extend_from_slice(s);
}

/// Score code: an integer in `i8` (1 byte).
const SCORE_I8: usize = 0;
/// Score code: an integer in `i32` (4 bytes).
const SCORE_I32: usize = 1;
/// Score code: exactly representable as an `f32` (4 bytes).
const SCORE_F32: usize = 2;
/// Score code: a full `f64` (8 bytes).
const SCORE_F64: usize = 3;

/// The narrowest code that gives `s` back bit for bit (so `-0.0` keeps its sign).
fn score_code(s: f64) -> usize {
    let bits = s.to_bits();
    if (s as i8) as f64 == s && ((s as i8) as f64).to_bits() == bits {
        SCORE_I8
    } else if (s as i32) as f64 == s && ((s as i32) as f64).to_bits() == bits {
        SCORE_I32
    } else if ((s as f32) as f64).to_bits() == bits {
        SCORE_F32
    } else {
        SCORE_F64
    }
}

/// Bytes the score part of a code takes.
#[inline]
fn score_width(code: usize) -> usize {
    [1, 4, 4, 8][code]
}

/// Appends one flat sorted-set entry: `varint(member_len << 2 | code)`, the score, the member.
pub(crate) fn put_scored(out: &mut Vec<u8>, score: f64, member: &[u8]) {
    let code = score_code(score);
    put_varint(out, (member.len() << 2) | code);
    match code {
        SCORE_I8 => out.push(score as i8 as u8),
        SCORE_I32 => out.extend_from_slice(&(score as i32).to_le_bytes()),
        SCORE_F32 => out.extend_from_slice(&(score as f32).to_le_bytes()),
        _ => out.extend_from_slice(&score.to_le_bytes()),
    }
    out.extend_from_slice(member);
}

/// How many bytes `put_scored` writes for this entry.
pub(crate) fn scored_len(score: f64, member: &[u8]) -> usize {
    let code = score_code(score);
    varint_len((member.len() << 2) | code) + score_width(code) + member.len()
}

/// Reads one flat sorted-set entry at `*at`, advancing past it.
#[inline]
pub(crate) fn get_scored<'b>(buf: &'b [u8], at: &mut usize) -> (f64, &'b [u8]) {
    let head = get_varint(buf, at);
    let (code, len) = (head & 3, head >> 2);
    let w = score_width(code);
    let b = &buf[*at..*at + w];
    let score = match code {
        SCORE_I8 => f64::from(b[0] as i8),
        SCORE_I32 => f64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        SCORE_F32 => f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        _ => f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
    };
    *at += w;
    let member = &buf[*at..*at + len];
    *at += len;
    (score, member)
}

/// Replaces `buf[from..to]` with `with`, reallocating to the exact new size (a small buffer,
/// so the copy is bounded by the encoding thresholds).
pub(crate) fn splice(buf: &mut alloc::boxed::Box<[u8]>, from: usize, to: usize, with: &[u8]) {
    if to - from == with.len() {
        buf[from..to].copy_from_slice(with);
        return;
    }
    let mut v = Vec::with_capacity(buf.len() - (to - from) + with.len());
    v.extend_from_slice(&buf[..from]);
    v.extend_from_slice(with);
    v.extend_from_slice(&buf[to..]);
    *buf = v.into_boxed_slice();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        for n in [0, 1, 127, 128, 300, 16383, 16384, usize::MAX >> 1] {
            let mut v = Vec::new();
            put_varint(&mut v, n);
            assert_eq!(v.len(), varint_len(n));
            let mut at = 0;
            assert_eq!(get_varint(&v, &mut at), n);
            assert_eq!(at, v.len());
        }
    }

    #[test]
    fn scores_round_trip_bit_for_bit() {
        let cases = [
            0.0,
            -0.0,
            1.0,
            -128.0,
            127.0,
            128.0,
            0.5,
            9.5,
            1e9,
            -2147483648.0,
            2147483648.0,
            0.1,
            1.0 / 3.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE,
            1e300,
            5e-324,
        ];
        for s in cases {
            let mut v = Vec::new();
            put_scored(&mut v, s, b"m");
            assert_eq!(v.len(), scored_len(s, b"m"));
            let mut at = 0;
            let (got, m) = get_scored(&v, &mut at);
            assert_eq!(got.to_bits(), s.to_bits(), "{s}");
            assert_eq!(m, b"m");
        }
        assert_eq!(scored_len(3.0, b"ab"), 1 + 1 + 2);
        assert_eq!(scored_len(0.5, b"ab"), 1 + 4 + 2);
        assert_eq!(scored_len(-0.0, b"ab"), 1 + 4 + 2);
        assert_eq!(scored_len(0.1, b"ab"), 1 + 8 + 2);
    }
}
