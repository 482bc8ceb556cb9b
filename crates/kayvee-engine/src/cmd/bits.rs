//! Bitmap commands on strings (Redis "bitmap" group): SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP.
//!
//! Bit 0 is the most significant bit of byte 0. Semantics, argument checking order and error
//! texts follow Redis 7.0.15 (checked on the real server; see `tests/transcripts/bits*.txt`).
//! Notably BITCOUNT looks the key up before parsing its range (a missing key answers 0 to any
//! arguments), while BITPOS checks its bit argument first.

use super::string::{as_str, store_raw, take_str};
use crate::argv::Argv;
use crate::cmd::notify::{class as nc, emit};
use crate::cmd::spec::CommandSpec;
use crate::command::{acl, flags};
use crate::error::{CmdResult, Error};
use crate::keyspec::{kf, KeySpec};
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::value::Value;
use crate::Cx;
use alloc::vec;
use alloc::vec::Vec;
use kayvee_pds::SmallBytes;

/// A bitmap-group command spec with the fields every entry here shares.
const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    acl: u32,
    summary: &'static str,
    since: &'static str,
    handler: crate::cmd::spec::Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl,
        summary,
        since,
        group: "bitmap",
        handler,
        ..CommandSpec::DEFAULT
    }
}

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        key_specs: &[KeySpec::range(kf::RW_ACCESS_UPDATE, 1, 0, 1)],
        ..spec(
            "setbit",
            4,
            flags::WRITE | flags::DENYOOM,
            acl::WRITE | acl::BITMAP | acl::SLOW,
            "Sets or clears the bit at offset in the string value stored at key",
            "2.2.0",
            setbit,
        )
    },
    spec(
        "getbit",
        3,
        flags::READONLY | flags::FAST,
        acl::READ | acl::BITMAP | acl::FAST,
        "Returns the bit value at offset in the string value stored at key",
        "2.2.0",
        getbit,
    ),
    CommandSpec {
        complexity: "O(N)",
        ..spec(
            "bitcount",
            -2,
            flags::READONLY,
            acl::READ | acl::BITMAP | acl::SLOW,
            "Count set bits in a string",
            "2.6.0",
            bitcount,
        )
    },
    CommandSpec {
        complexity: "O(N)",
        ..spec(
            "bitpos",
            -3,
            flags::READONLY,
            acl::READ | acl::BITMAP | acl::SLOW,
            "Find first bit set or clear in a string",
            "2.8.7",
            bitpos,
        )
    },
    CommandSpec {
        first_key: 2,
        last_key: -1,
        complexity: "O(N)",
        key_specs: &[
            KeySpec::range(kf::OW_UPDATE, 2, 0, 1),
            KeySpec::range(kf::RO_ACCESS, 3, -1, 1),
        ],
        ..spec(
            "bitop",
            -4,
            flags::WRITE | flags::DENYOOM,
            acl::WRITE | acl::BITMAP | acl::SLOW,
            "Perform bitwise operations between strings",
            "2.6.0",
            bitop,
        )
    },
];

/// The error for a bad SETBIT/GETBIT offset.
fn bad_offset() -> Error {
    Error::msg("ERR bit offset is not an integer or out of range")
}

/// Parses a bit offset: a non-negative integer whose byte index stays below
/// `proto-max-bulk-len`.
fn bit_offset(cx: &Cx<'_>, arg: &[u8]) -> Result<u64, Error> {
    let off = parse_i64(arg).ok_or_else(bad_offset)?;
    if off < 0 || (off as u64 >> 3) >= cx.core.config.proto_max_bulk_len {
        return Err(bad_offset());
    }
    Ok(off as u64)
}

/// The bit at `off` (0 past the end).
fn bit_at(s: &[u8], off: u64) -> u8 {
    let byte = (off >> 3) as usize;
    s.get(byte).map_or(0, |b| (b >> (7 - (off & 7))) & 1)
}

/// SETBIT key offset 0|1: replies the old bit; grows the string with zero bytes as needed.
fn setbit(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let off = bit_offset(cx, args.get(2))?;
    let on = match parse_i64(args.get(3)) {
        Some(v @ (0 | 1)) => v as u8,
        _ => return Err(Error::msg("ERR bit is not an integer or out of range")),
    };
    let (key, now) = (args.get(1), cx.now_ms());
    let db = cx.db();
    let byte = (off >> 3) as usize;
    let mask = 0x80u8 >> (off & 7);
    let Some(entry) = db.lookup_write(key, now) else {
        let mut bytes = vec![0u8; byte + 1];
        bytes[byte] = if on == 1 { mask } else { 0 };
        let mut entry = db.new_entry(Value::Str(SmallBytes::new()), now);
        store_raw(&mut entry, bytes);
        db.insert_entry(key, entry, None);
        cx.propagate_verbatim();
        emit(cx, nc::STRING, "setbit", key);
        out.int(0);
        return Ok(());
    };
    let mut bytes = take_str(entry)?;
    let grew = bytes.len() <= byte;
    if grew {
        bytes.resize(byte + 1, 0);
    }
    let old = bit_at(&bytes, off);
    bytes[byte] = if on == 1 {
        bytes[byte] | mask
    } else {
        bytes[byte] & !mask
    };
    store_raw(entry, bytes);
    if grew || old != on {
        cx.propagate_verbatim();
        emit(cx, nc::STRING, "setbit", key);
    }
    out.int(i64::from(old));
    Ok(())
}

/// GETBIT key offset: 0 for a missing key or past the end.
fn getbit(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let off = bit_offset(cx, args.get(2))?;
    let now = cx.now_ms();
    let bit = match cx.db().lookup_read(args.get(1), now) {
        Some(e) => bit_at(as_str(e)?, off),
        None => 0,
    };
    out.int(i64::from(bit));
    Ok(())
}

/// Parses a `BYTE|BIT` unit argument: true for BIT.
fn parse_unit(arg: &[u8]) -> Result<bool, Error> {
    if arg.eq_ignore_ascii_case(b"bit") {
        Ok(true)
    } else if arg.eq_ignore_ascii_case(b"byte") {
        Ok(false)
    } else {
        Err(Error::Syntax)
    }
}

/// A range of bits `[first, last]` inside a string, both inclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct BitRange {
    first: u64,
    last: u64,
}

/// Resolves BITCOUNT/BITPOS `start end` (negative from the end, clamped) over a string of
/// `len` bytes, in bytes or bits, to a bit range; `None` when empty.
fn bit_range(start: i64, end: i64, len: usize, in_bits: bool) -> Option<BitRange> {
    let total = if in_bits { len as i64 * 8 } else { len as i64 };
    let norm = |i: i64| if i < 0 { (total + i).max(0) } else { i };
    let (start, end) = (norm(start), norm(end).min(total - 1));
    if start > end {
        return None;
    }
    let (start, end) = (start as u64, end as u64);
    Some(if in_bits {
        BitRange {
            first: start,
            last: end,
        }
    } else {
        BitRange {
            first: start * 8,
            last: end * 8 + 7,
        }
    })
}

/// Counts the set bits of `s` in a bit range.
fn count_bits(s: &[u8], r: BitRange) -> u64 {
    let (b0, b1) = ((r.first >> 3) as usize, (r.last >> 3) as usize);
    let mut n: u64 = s[b0..=b1].iter().map(|b| u64::from(b.count_ones())).sum();
    let head = s[b0] & !(0xffu8 >> (r.first & 7)); // bits before `first` in its byte
    let tail = s[b1] & (0x7fu8 >> (r.last & 7)); // bits after `last` in its byte
    n -= u64::from(head.count_ones() + tail.count_ones());
    n
}

/// BITCOUNT key [start end [BYTE|BIT]]
fn bitcount(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let now = cx.now_ms();
    let Some(e) = cx.db().lookup_read(args.get(1), now) else {
        out.int(0);
        return Ok(());
    };
    let s = as_str(e)?;
    let range = match args.len() {
        2 => bit_range(0, -1, s.len(), false),
        4 | 5 => {
            let start = parse_i64(args.get(2)).ok_or(Error::NotInteger)?;
            let end = parse_i64(args.get(3)).ok_or(Error::NotInteger)?;
            // Redis answers 0 for two negative indexes out of order before it looks at the
            // unit argument (checked against 7.0.15: `BITCOUNT k -2 -100 FOO` is `:0`).
            if start < 0 && end < 0 && start > end {
                out.int(0);
                return Ok(());
            }
            let in_bits = match args.try_get(4) {
                Some(u) => parse_unit(u)?,
                None => false,
            };
            bit_range(start, end, s.len(), in_bits)
        }
        _ => return Err(Error::Syntax),
    };
    out.int(range.map_or(0, |r| count_bits(s, r)) as i64);
    Ok(())
}

/// The first bit equal to `bit` in a range, if any.
fn find_bit(s: &[u8], r: BitRange, bit: u8) -> Option<u64> {
    let skip = if bit == 1 { 0x00 } else { 0xff };
    let mut pos = r.first;
    while pos <= r.last {
        let byte = s[(pos >> 3) as usize];
        if pos & 7 == 0 && pos + 7 <= r.last && byte == skip {
            pos += 8;
            continue;
        }
        if (byte >> (7 - (pos & 7))) & 1 == bit {
            return Some(pos);
        }
        pos += 1;
    }
    None
}

/// BITPOS key bit [start [end [BYTE|BIT]]]: the first bit set (or clear). A missing key is
/// all zeros; when looking for a 0 without an explicit end, the string counts as followed by
/// zeros, so the answer may be the bit just past the range.
fn bitpos(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let bit = parse_i64(args.get(2)).ok_or(Error::NotInteger)?;
    if bit != 0 && bit != 1 {
        return Err(Error::msg("ERR The bit argument must be 1 or 0."));
    }
    let bit = bit as u8;
    let now = cx.now_ms();
    let Some(e) = cx.db().lookup_read(args.get(1), now) else {
        out.int(if bit == 1 { -1 } else { 0 });
        return Ok(());
    };
    let s = as_str(e)?;
    let (range, end_given) = match args.len() {
        3 => (bit_range(0, -1, s.len(), false), false),
        4..=6 => {
            let start = parse_i64(args.get(3)).ok_or(Error::NotInteger)?;
            let in_bits = match args.try_get(5) {
                Some(u) => parse_unit(u)?,
                None => false,
            };
            let end = match args.try_get(4) {
                Some(a) => parse_i64(a).ok_or(Error::NotInteger)?,
                None => -1,
            };
            (bit_range(start, end, s.len(), in_bits), args.len() >= 5)
        }
        _ => return Err(Error::Syntax),
    };
    let pos = match range {
        None => -1,
        Some(r) => match find_bit(s, r, bit) {
            Some(p) => p as i64,
            None if bit == 0 && !end_given => r.last as i64 + 1,
            None => -1,
        },
    };
    out.int(pos);
    Ok(())
}

/// A BITOP operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

/// Parses the BITOP operation name (any case).
fn parse_op(arg: &[u8]) -> Result<BitOp, Error> {
    let is = |n: &[u8]| arg.eq_ignore_ascii_case(n);
    Ok(if is(b"and") {
        BitOp::And
    } else if is(b"or") {
        BitOp::Or
    } else if is(b"xor") {
        BitOp::Xor
    } else if is(b"not") {
        BitOp::Not
    } else {
        return Err(Error::Syntax);
    })
}

/// Combines the sources byte by byte; shorter sources (and missing keys) read as zero bytes.
fn combine(op: BitOp, srcs: &[Option<&[u8]>]) -> Vec<u8> {
    let len = srcs
        .iter()
        .map(|s| s.map_or(0, <[u8]>::len))
        .max()
        .unwrap_or(0);
    let byte = |s: &Option<&[u8]>, i: usize| s.and_then(|s| s.get(i)).copied().unwrap_or(0);
    (0..len)
        .map(|i| {
            let mut acc = byte(&srcs[0], i);
            for s in &srcs[1..] {
                let b = byte(s, i);
                match op {
                    BitOp::And => acc &= b,
                    BitOp::Or => acc |= b,
                    BitOp::Xor => acc ^= b,
                    BitOp::Not => {}
                }
            }
            if op == BitOp::Not {
                !acc
            } else {
                acc
            }
        })
        .collect()
}

/// BITOP AND|OR|XOR|NOT destkey key [key ...]: stores the result (a `raw` string, no TTL) or
/// deletes `destkey` when every source is empty; replies the result's length.
fn bitop(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let op = parse_op(args.get(1))?;
    if op == BitOp::Not && args.len() != 4 {
        return Err(Error::msg(
            "ERR BITOP NOT must be called with a single source key.",
        ));
    }
    let now = cx.now_ms();
    let db = cx.db();
    let mut srcs: Vec<Option<SmallBytes>> = Vec::with_capacity(args.len() - 3);
    for key in args.iter().skip(3) {
        match db.lookup_read(key, now) {
            Some(e) => srcs.push(Some(SmallBytes::from_slice(as_str(e)?))),
            None => srcs.push(None),
        }
    }
    let views: Vec<Option<&[u8]>> = srcs.iter().map(|s| s.as_deref()).collect();
    let result = combine(op, &views);
    let len = result.len();
    let dest = args.get(2);
    if len == 0 {
        if db.delete(dest) {
            cx.propagate_verbatim();
            emit(cx, nc::GENERIC, "del", dest);
        }
    } else {
        let mut entry = db.new_entry(Value::Str(SmallBytes::new()), now);
        store_raw(&mut entry, result);
        db.store_result(dest, entry, now);
        cx.propagate_verbatim();
        emit(cx, nc::STRING, "set", dest);
    }
    out.int(len as i64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_ranges_in_bytes_and_bits() {
        let r = |a, b, f, l| Some(BitRange { first: a, last: b }).filter(|_| f <= l);
        assert_eq!(bit_range(0, -1, 3, false), r(0, 23, 0, 0));
        assert_eq!(bit_range(1, 1, 3, false), r(8, 15, 0, 0));
        assert_eq!(bit_range(-2, 100, 3, false), r(8, 23, 0, 0));
        assert_eq!(bit_range(5, 17, 3, true), r(5, 17, 0, 0));
        assert_eq!(bit_range(-3, -1, 3, true), r(21, 23, 0, 0));
        assert_eq!(bit_range(2, 1, 3, false), None);
        assert_eq!(bit_range(0, -1, 0, false), None);
        assert_eq!(bit_range(i64::MIN, i64::MAX, 1, true), r(0, 7, 0, 0));
    }

    #[test]
    fn counts_bits_with_partial_bytes() {
        let s = [0xffu8, 0x0f, 0xf0];
        let all = BitRange { first: 0, last: 23 };
        assert_eq!(count_bits(&s, all), 16);
        assert_eq!(count_bits(&s, BitRange { first: 4, last: 11 }), 4);
        assert_eq!(
            count_bits(
                &s,
                BitRange {
                    first: 12,
                    last: 16
                }
            ),
            5
        );
        assert_eq!(count_bits(&s, BitRange { first: 3, last: 3 }), 1);
    }

    #[test]
    fn finds_bits() {
        let s = [0xffu8, 0xff, 0x7f, 0x00, 0x01];
        let all = BitRange { first: 0, last: 39 };
        assert_eq!(find_bit(&s, all, 0), Some(16));
        assert_eq!(find_bit(&s, all, 1), Some(0));
        assert_eq!(
            find_bit(
                &s,
                BitRange {
                    first: 24,
                    last: 38
                },
                1
            ),
            None
        );
        assert_eq!(
            find_bit(
                &s,
                BitRange {
                    first: 24,
                    last: 39
                },
                1
            ),
            Some(39)
        );
        assert_eq!(find_bit(&s, BitRange { first: 3, last: 15 }, 0), None);
    }

    #[test]
    fn combines_sources() {
        let (a, b) = (&b"\xff\x0f"[..], &b"\x0f"[..]);
        assert_eq!(combine(BitOp::And, &[Some(a), Some(b)]), b"\x0f\x00");
        assert_eq!(combine(BitOp::Or, &[Some(b), Some(a)]), b"\xff\x0f");
        assert_eq!(combine(BitOp::Xor, &[Some(a), Some(b), None]), b"\xf0\x0f");
        assert_eq!(combine(BitOp::Not, &[Some(b)]), b"\xf0");
        assert_eq!(combine(BitOp::And, &[None, None]), b"");
    }
}
