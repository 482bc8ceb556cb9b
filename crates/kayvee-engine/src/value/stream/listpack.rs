//! The listpack format (Redis's `listpack.md`): the byte layout of a stream node, kept as is in
//! memory so a node costs what Redis's does and is written to RDB files and DUMP payloads
//! unchanged.
//!
//! Layout: a 6-byte header (total bytes as u32 LE, element count as u16 LE, 65535 when not
//! known), the elements, and the end byte 0xFF. An element is its encoding byte(s) and data,
//! then a "backlen" (the size of encoding + data in 1 to 5 bytes, readable from the right).
//! Strings that read as 64-bit integers are stored as integers of the smallest width.

use alloc::vec::Vec;

/// The end-of-listpack byte.
const END: u8 = 0xFF;
/// Header size: total bytes (u32) and element count (u16).
pub const HEADER: usize = 6;

/// One element's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Val<'a> {
    /// An integer element.
    Int(i64),
    /// A string element.
    Str(&'a [u8]),
}

impl Val<'_> {
    /// The element as an integer (strings that read as one included).
    pub fn int(&self) -> i64 {
        match *self {
            Val::Int(v) => v,
            Val::Str(s) => crate::util::parse_i64(s).unwrap_or(0),
        }
    }

    /// Calls `f` with the element's bytes (an integer as its decimal text).
    pub fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        match *self {
            Val::Str(s) => f(s),
            Val::Int(v) => {
                let mut buf = itoa_buf();
                let s = fmt_i64(v, &mut buf);
                f(s)
            }
        }
    }

    /// The element's bytes, owned.
    pub fn to_vec(&self) -> Vec<u8> {
        self.with_bytes(|b| b.to_vec())
    }

    /// Whether the element equals the bytes `b` (an integer compared by its decimal text).
    pub fn eq_bytes(&self, b: &[u8]) -> bool {
        self.with_bytes(|s| s == b)
    }
}

fn itoa_buf() -> [u8; 20] {
    [0; 20]
}

/// Writes `v` in decimal into `buf`, returning the written part.
pub fn fmt_i64(v: i64, buf: &mut [u8; 20]) -> &[u8] {
    let mut n = v.unsigned_abs();
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

/// Parses `s` as a listpack integer: the strict decimal form Redis converts (no sign `+`, no
/// leading zero, no spaces, at most 20 characters, within i64).
pub fn string_to_int(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let digits = if s[0] == b'-' { &s[1..] } else { s };
    if digits.is_empty() || (digits[0] == b'0' && (digits.len() > 1 || s[0] == b'-')) {
        return None;
    }
    crate::util::parse_i64(s)
}

/// An empty listpack.
pub fn new() -> Vec<u8> {
    let mut lp = Vec::with_capacity(64);
    lp.extend_from_slice(&[HEADER as u8 + 1, 0, 0, 0, 0, 0, END]);
    lp
}

/// The encoded size (encoding + data) of integer `v`.
fn int_body(v: i64, out: &mut Vec<u8>) {
    if (0..=127).contains(&v) {
        out.push(v as u8);
    } else if (-4096..=4095).contains(&v) {
        let u = (v as u64) & 0x1FFF;
        out.push(0xC0 | (u >> 8) as u8);
        out.push(u as u8);
    } else if (-32768..=32767).contains(&v) {
        out.push(0xF1);
        out.extend_from_slice(&(v as i16).to_le_bytes());
    } else if (-(1 << 23)..(1 << 23)).contains(&v) {
        out.push(0xF2);
        out.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
    } else if (i64::from(i32::MIN)..=i64::from(i32::MAX)).contains(&v) {
        out.push(0xF3);
        out.extend_from_slice(&(v as i32).to_le_bytes());
    } else {
        out.push(0xF4);
        out.extend_from_slice(&v.to_le_bytes());
    }
}

fn str_body(s: &[u8], out: &mut Vec<u8>) {
    let n = s.len();
    if n < 64 {
        out.push(0x80 | n as u8);
    } else if n < 4096 {
        out.push(0xE0 | (n >> 8) as u8);
        out.push(n as u8);
    } else {
        out.push(0xF0);
        out.extend_from_slice(&(n as u32).to_le_bytes());
    }
    out.extend_from_slice(s);
}

/// Appends the backlen of an element whose encoding + data is `l` bytes.
fn backlen(l: usize, out: &mut Vec<u8>) {
    let l = l as u64;
    if l <= 127 {
        out.push(l as u8);
    } else if l < 16383 {
        out.extend_from_slice(&[(l >> 7) as u8, (l & 127) as u8 | 128]);
    } else if l < 2_097_151 {
        out.extend_from_slice(&[
            (l >> 14) as u8,
            ((l >> 7) & 127) as u8 | 128,
            (l & 127) as u8 | 128,
        ]);
    } else if l < 268_435_455 {
        out.extend_from_slice(&[
            (l >> 21) as u8,
            ((l >> 14) & 127) as u8 | 128,
            ((l >> 7) & 127) as u8 | 128,
            (l & 127) as u8 | 128,
        ]);
    } else {
        out.extend_from_slice(&[
            (l >> 28) as u8,
            ((l >> 21) & 127) as u8 | 128,
            ((l >> 14) & 127) as u8 | 128,
            ((l >> 7) & 127) as u8 | 128,
            (l & 127) as u8 | 128,
        ]);
    }
}

/// The bytes of one element holding `v`.
pub fn encode(v: Val<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(v, &mut out);
    out
}

/// Appends the encoding of `v` (body and backlen) to `out`.
fn encode_into(v: Val<'_>, out: &mut Vec<u8>) {
    let start = out.len();
    match v {
        Val::Int(i) => int_body(i, out),
        Val::Str(s) => match string_to_int(s) {
            Some(i) => int_body(i, out),
            None => str_body(s, out),
        },
    }
    let l = out.len() - start;
    backlen(l, out);
}

/// Appends the elements `vals` to the listpack `lp`.
pub fn append(lp: &mut Vec<u8>, vals: &[Val<'_>]) {
    lp.pop(); // the end byte
    for v in vals {
        encode_into(*v, lp);
    }
    lp.push(END);
    fix_header(lp, vals.len() as isize);
}

/// Rewrites the header after a change of `added` elements.
fn fix_header(lp: &mut [u8], added: isize) {
    let total = lp.len() as u32;
    lp[..4].copy_from_slice(&total.to_le_bytes());
    let count = u16::from_le_bytes([lp[4], lp[5]]);
    if count != u16::MAX {
        let n = count as isize + added;
        let n = if (0..65535).contains(&n) {
            n as u16
        } else {
            u16::MAX
        };
        lp[4..6].copy_from_slice(&n.to_le_bytes());
    }
}

/// Replaces the element at byte offset `at` with `v`.
pub fn replace(lp: &mut Vec<u8>, at: usize, v: Val<'_>) {
    let mut end = at;
    next(lp, &mut end);
    let bytes = encode(v);
    lp.splice(at..end, bytes);
    fix_header(lp, 0);
}

/// The size in bytes of the element's encoding and data starting at `at`, and its value.
fn parse(lp: &[u8], at: usize) -> (usize, Val<'_>) {
    let b = lp[at];
    let le = |from: usize, n: usize| {
        let mut v = 0u64;
        for i in (0..n).rev() {
            v = v << 8 | u64::from(lp[at + from + i]);
        }
        v
    };
    if b & 0x80 == 0 {
        (1, Val::Int(i64::from(b)))
    } else if b & 0xC0 == 0x80 {
        let n = usize::from(b & 0x3F);
        (1 + n, Val::Str(&lp[at + 1..at + 1 + n]))
    } else if b & 0xE0 == 0xC0 {
        let u = (u64::from(b & 0x1F) << 8) | u64::from(lp[at + 1]);
        let v = if u >= 1 << 12 {
            u as i64 - (1 << 13)
        } else {
            u as i64
        };
        (2, Val::Int(v))
    } else if b & 0xF0 == 0xE0 {
        let n = (usize::from(b & 0x0F) << 8) | usize::from(lp[at + 1]);
        (2 + n, Val::Str(&lp[at + 2..at + 2 + n]))
    } else {
        match b {
            0xF0 => {
                let n = le(1, 4) as usize;
                (5 + n, Val::Str(&lp[at + 5..at + 5 + n]))
            }
            0xF1 => (3, Val::Int(le(1, 2) as u16 as i16 as i64)),
            0xF2 => (4, Val::Int(((le(1, 3) as u32) << 8) as i32 as i64 >> 8)),
            0xF3 => (5, Val::Int(le(1, 4) as u32 as i32 as i64)),
            _ => (9, Val::Int(le(1, 8) as i64)),
        }
    }
}

/// How many bytes the backlen of an `l`-byte element takes.
pub fn backlen_size(l: usize) -> usize {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

/// Reads the element at `*at` and moves `*at` past it.
pub fn next<'a>(lp: &'a [u8], at: &mut usize) -> Val<'a> {
    let (l, v) = parse(lp, *at);
    *at += l + backlen_size(l);
    v
}

/// Whether `*at` is at the end byte.
pub fn at_end(lp: &[u8], at: usize) -> bool {
    lp[at] == END
}

/// Checks that `lp` is a well-formed listpack (for bytes from an RDB file or a DUMP payload);
/// returns its number of elements.
pub fn validate(lp: &[u8]) -> Option<usize> {
    if lp.len() < HEADER + 1
        || u32::from_le_bytes([lp[0], lp[1], lp[2], lp[3]]) as usize != lp.len()
    {
        return None;
    }
    let mut at = HEADER;
    let mut n = 0;
    while at < lp.len() && lp[at] != END {
        let b = lp[at];
        let need = match b {
            _ if b & 0x80 == 0 => 1,
            _ if b & 0xC0 == 0x80 => 1 + usize::from(b & 0x3F),
            _ if b & 0xE0 == 0xC0 => 2,
            _ if b & 0xF0 == 0xE0 => {
                2 + ((usize::from(b & 0x0F) << 8) | usize::from(*lp.get(at + 1)?))
            }
            0xF0 => {
                let s = lp.get(at + 1..at + 5)?;
                5 + u32::from_le_bytes([s[0], s[1], s[2], s[3]]) as usize
            }
            0xF1 => 3,
            0xF2 => 4,
            0xF3 => 5,
            0xF4 => 9,
            _ => return None,
        };
        if at + need + backlen_size(need) >= lp.len() {
            return None;
        }
        next(lp, &mut at);
        n += 1;
    }
    (at == lp.len() - 1).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_at_every_width() {
        let mut lp = new();
        let ints = [
            0,
            127,
            128,
            -1,
            4095,
            -4096,
            32767,
            -32768,
            1 << 20,
            -(1 << 23),
            i64::from(i32::MAX),
            i64::MIN,
            i64::MAX,
        ];
        let vals: Vec<Val<'_>> = ints.iter().map(|&i| Val::Int(i)).collect();
        append(&mut lp, &vals);
        let long = alloc::vec![b'x'; 5000];
        append(
            &mut lp,
            &[
                Val::Str(b"abc"),
                Val::Str(&long[..100]),
                Val::Str(&long),
                Val::Str(b"012"),
                Val::Str(b"-5"),
            ],
        );
        assert_eq!(validate(&lp), Some(ints.len() + 5));
        let mut at = HEADER;
        for &i in &ints {
            assert_eq!(next(&lp, &mut at), Val::Int(i));
        }
        assert_eq!(next(&lp, &mut at), Val::Str(b"abc"));
        assert_eq!(next(&lp, &mut at), Val::Str(&long[..100]));
        assert_eq!(next(&lp, &mut at), Val::Str(&long[..]));
        assert_eq!(next(&lp, &mut at), Val::Str(b"012"));
        assert_eq!(next(&lp, &mut at), Val::Int(-5));
        assert!(at_end(&lp, at));
    }

    #[test]
    fn replace_resizes() {
        let mut lp = new();
        append(&mut lp, &[Val::Int(1), Val::Int(2)]);
        replace(&mut lp, HEADER, Val::Int(100_000));
        let mut at = HEADER;
        assert_eq!(next(&lp, &mut at), Val::Int(100_000));
        assert_eq!(next(&lp, &mut at), Val::Int(2));
        assert_eq!(validate(&lp), Some(2));
    }
}
