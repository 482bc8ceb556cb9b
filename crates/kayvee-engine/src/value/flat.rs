//! Byte-level helpers of the compact (listpack-like) encodings: LEB128 lengths and the
//! variable-width score codes of flat sorted sets.
//!
//! A flat collection is one exact-size `Box<[u8]>`: entries one after another, each made of
//! length-prefixed byte strings (and, for sorted sets, a score stored in 1 to 8 bytes). No
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

/// Writes `n` as a varint into `buf` at `*at`, advancing past it; `false` (and `*at` past the
/// end of what fitted) when `buf` is too short.
#[inline]
pub(crate) fn put_varint_in(buf: &mut [u8], at: &mut usize, mut n: u64) -> bool {
    loop {
        let Some(b) = buf.get_mut(*at) else {
            return false;
        };
        *at += 1;
        if n < 0x80 {
            *b = n as u8;
            return true;
        }
        *b = (n as u8) | 0x80;
        n >>= 7;
    }
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

/// Score codes, three bits of an entry's head: the narrowest that gives the score back bit for
/// bit, tried in this order (so `-0.0` keeps its sign and a decimal such as `9.5` costs one
/// byte, where a listpack spends the string "9.5" and two bytes of framing).
/// An integer in `i8` (1 byte).
const SCORE_I8: usize = 0;
/// Tenths in an `i8`: `m / 10` (1 byte; `-12.8..=12.7` in steps of 0.1).
const SCORE_TENTHS_I8: usize = 1;
/// An integer in `i16` (2 bytes).
const SCORE_I16: usize = 2;
/// Tenths in an `i16` (2 bytes; `-3276.8..=3276.7`).
const SCORE_TENTHS_I16: usize = 3;
/// An integer in `i32` (4 bytes; unix times in seconds).
const SCORE_I32: usize = 4;
/// Exactly representable as an `f32` (4 bytes).
const SCORE_F32: usize = 5;
/// An integer in 48 bits (6 bytes; unix times in milliseconds).
const SCORE_I48: usize = 6;
/// A full `f64` (8 bytes).
const SCORE_F64: usize = 7;
/// Bits of the head taken by the code.
const CODE_BITS: usize = 3;

/// Bytes the score part of each code takes.
const SCORE_WIDTH: [usize; 8] = [1, 1, 2, 2, 4, 4, 6, 8];

/// `s` as an integer of `bits` bits when that gives it back bit for bit.
#[inline]
fn as_int(s: f64, bits: u32) -> Option<i64> {
    let i = s as i64;
    let lim = 1i64 << (bits - 1);
    ((-lim..lim).contains(&i) && (i as f64).to_bits() == s.to_bits()).then_some(i)
}

/// `s` as tenths (`m / 10`) in `bits` bits when that gives it back bit for bit.
#[inline]
fn as_tenths(s: f64, bits: u32) -> Option<i64> {
    // Rounded half away from zero (`f64::round` is not in `core`); the check below decides.
    let x = s * 10.0;
    let m = if x < 0.0 { x - 0.5 } else { x + 0.5 } as i64;
    let lim = 1i64 << (bits - 1);
    ((-lim..lim).contains(&m) && (m as f64 / 10.0).to_bits() == s.to_bits()).then_some(m)
}

/// The narrowest code for `s` and the integer it stores (the mantissa for the tenths codes).
fn score_code(s: f64) -> (usize, i64) {
    if let Some(i) = as_int(s, 8) {
        (SCORE_I8, i)
    } else if let Some(m) = as_tenths(s, 8) {
        (SCORE_TENTHS_I8, m)
    } else if let Some(i) = as_int(s, 16) {
        (SCORE_I16, i)
    } else if let Some(m) = as_tenths(s, 16) {
        (SCORE_TENTHS_I16, m)
    } else if let Some(i) = as_int(s, 32) {
        (SCORE_I32, i)
    } else if ((s as f32) as f64).to_bits() == s.to_bits() {
        (SCORE_F32, 0)
    } else if let Some(i) = as_int(s, 48) {
        (SCORE_I48, i)
    } else {
        (SCORE_F64, 0)
    }
}

/// Appends one flat sorted-set entry: `varint(member_len << 3 | code)`, the score, the member.
pub(crate) fn put_scored(out: &mut Vec<u8>, score: f64, member: &[u8]) {
    put_scored_parts(out, score, &[], member);
}

/// `put_scored` for a member given in two parts, `head` then `tail` (written joined).
pub(crate) fn put_scored_parts(out: &mut Vec<u8>, score: f64, head: &[u8], tail: &[u8]) {
    let (code, i) = score_code(score);
    put_varint(out, ((head.len() + tail.len()) << CODE_BITS) | code);
    match code {
        SCORE_F32 => out.extend_from_slice(&(score as f32).to_le_bytes()),
        SCORE_F64 => out.extend_from_slice(&score.to_le_bytes()),
        _ => out.extend_from_slice(&i.to_le_bytes()[..SCORE_WIDTH[code]]),
    }
    out.extend_from_slice(head);
    out.extend_from_slice(tail);
}

/// How many bytes `put_scored` writes for this entry.
pub(crate) fn scored_len(score: f64, member: &[u8]) -> usize {
    let (code, _) = score_code(score);
    varint_len((member.len() << CODE_BITS) | code) + SCORE_WIDTH[code] + member.len()
}

/// The 48-bit little-endian signed integer in `b`, sign-extended.
#[inline]
fn get_i48(b: &[u8]) -> i64 {
    let le = [b[0], b[1], b[2], b[3], b[4], b[5], 0, 0];
    (i64::from_le_bytes(le) << 16) >> 16
}

/// Reads one flat sorted-set entry at `*at`, advancing past it. Each code reads its fixed
/// width directly: this runs once per entry of every walk (lookups, ranks, inserts).
#[inline]
pub(crate) fn get_scored<'b>(buf: &'b [u8], at: &mut usize) -> (f64, &'b [u8]) {
    let head = get_varint(buf, at);
    let (code, len) = (head & ((1 << CODE_BITS) - 1), head >> CODE_BITS);
    let b = &buf[*at..];
    let (score, w) = match code {
        SCORE_I8 => (f64::from(b[0] as i8), 1),
        SCORE_TENTHS_I8 => (f64::from(b[0] as i8) / 10.0, 1),
        SCORE_I16 => (f64::from(i16::from_le_bytes([b[0], b[1]])), 2),
        SCORE_TENTHS_I16 => (f64::from(i16::from_le_bytes([b[0], b[1]])) / 10.0, 2),
        SCORE_I32 => (f64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])), 4),
        SCORE_F32 => (f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])), 4),
        SCORE_I48 => (get_i48(b) as f64, 6),
        _ => (
            f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
            8,
        ),
    };
    let member = &b[w..w + len];
    *at += w + len;
    (score, member)
}

/// Steps over one flat sorted-set entry at `*at` without decoding its score; returns the
/// member. For walks that need members only (counting, lookups by member: `get_scored` from
/// the entry's start then reads the one score wanted).
#[inline]
pub(crate) fn skip_scored<'b>(buf: &'b [u8], at: &mut usize) -> &'b [u8] {
    let head = get_varint(buf, at);
    let (code, len) = (head & ((1 << CODE_BITS) - 1), head >> CODE_BITS);
    let m = *at + SCORE_WIDTH[code];
    *at = m + len;
    &buf[m..m + len]
}

/// Replaces `buf[from..to]` with `with`, reallocating to the exact new size (a small buffer,
/// so the copy is bounded by the encoding thresholds). The buffer is resized with `realloc`,
/// which grows or shrinks it in place when the allocator can: a buffer built up one element at
/// a time (SADD, HSET, ZADD of several) then leaves no trail of freed smaller copies.
pub(crate) fn splice(buf: &mut alloc::boxed::Box<[u8]>, from: usize, to: usize, with: &[u8]) {
    let removed = to - from;
    if removed == with.len() {
        buf[from..to].copy_from_slice(with);
        return;
    }
    let mut v = core::mem::take(buf).into_vec();
    let old_len = v.len();
    if with.len() > removed {
        let grow = with.len() - removed;
        v.reserve_exact(grow);
        v.resize(old_len + grow, 0);
        v.copy_within(to..old_len, to + grow);
    } else {
        v.copy_within(to..old_len, from + with.len());
        v.truncate(old_len - (removed - with.len()));
    }
    v[from..from + with.len()].copy_from_slice(with);
    *buf = v.into_boxed_slice();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splice_grows_shrinks_and_replaces_exactly() {
        let mut buf: alloc::boxed::Box<[u8]> = (*b"abcdef").into();
        splice(&mut buf, 2, 2, b"XY");
        assert_eq!(&buf[..], b"abXYcdef");
        splice(&mut buf, 1, 5, b"z");
        assert_eq!(&buf[..], b"azdef");
        splice(&mut buf, 5, 5, b"gh");
        assert_eq!(&buf[..], b"azdefgh");
        splice(&mut buf, 0, 2, b"AB");
        assert_eq!(&buf[..], b"ABdefgh");
        splice(&mut buf, 0, 7, b"");
        assert!(buf.is_empty());
    }

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
        assert_eq!(scored_len(0.5, b"ab"), 1 + 1 + 2);
        assert_eq!(scored_len(-12.8, b"ab"), 1 + 1 + 2);
        assert_eq!(scored_len(300.0, b"ab"), 1 + 2 + 2);
        assert_eq!(scored_len(-3276.8, b"ab"), 1 + 2 + 2);
        assert_eq!(scored_len(1_700_000_000.0, b"ab"), 1 + 4 + 2);
        assert_eq!(scored_len(-0.0, b"ab"), 1 + 4 + 2);
        assert_eq!(scored_len(0.25, b"ab"), 1 + 4 + 2);
        assert_eq!(scored_len(1_732_665_600_123.0, b"ab"), 1 + 6 + 2);
        assert_eq!(scored_len(0.1, b"ab"), 1 + 1 + 2);
        assert_eq!(scored_len(0.01, b"ab"), 1 + 8 + 2);
        assert_eq!(scored_len(1.0, &[b'm'; 15]), 1 + 1 + 15);
        assert_eq!(scored_len(1.0, &[b'm'; 16]), 2 + 1 + 16);
    }

    /// Every code against the model "a double is stored as itself": random decimals of 0 to 3
    /// places (what clients send), integers of every width and random bit patterns, each
    /// given back bit for bit, in exactly `scored_len` bytes, the member after it intact.
    #[test]
    fn random_scores_round_trip() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut widths = [0usize; 8];
        for i in 0..200_000 {
            let r = next();
            let s = match i % 4 {
                0 => {
                    let places = (r % 4) as usize;
                    let digits = (next() % 10_000_000) as i64 - 5_000_000;
                    let text = alloc::format!("{digits}e-{places}");
                    text.parse::<f64>().unwrap()
                }
                1 => ((r as i64) >> (r % 64)) as f64,
                2 => f64::from_bits(r),
                _ => ((r % 100_000) as f64 - 50_000.0) / 10.0,
            };
            if s.is_nan() {
                continue;
            }
            let member = &b"member:0123456789abcdefghij"[..(r % 28) as usize];
            let mut v = Vec::new();
            put_scored(&mut v, s, member);
            v.push(0xee);
            assert_eq!(v.len() - 1, scored_len(s, member), "{s}");
            let mut at = 0;
            let (got, m) = get_scored(&v, &mut at);
            assert_eq!(got.to_bits(), s.to_bits(), "{s}");
            assert_eq!((m, at), (member, v.len() - 1), "{s}");
            let mut skip_at = 0;
            assert_eq!(skip_scored(&v, &mut skip_at), member, "{s}");
            assert_eq!(skip_at, at, "{s}");
            widths[score_code(s).0] += 1;
        }
        assert!(
            widths.iter().all(|&n| n > 0),
            "every code was used: {widths:?}"
        );
    }
}
