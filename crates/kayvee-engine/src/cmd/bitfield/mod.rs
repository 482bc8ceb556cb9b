//! BITFIELD and BITFIELD_RO (Redis "bitmap" group): integer fields of 1 to 64 bits (unsigned
//! up to 63) inside a string, read with GET, written with SET and INCRBY under the OVERFLOW
//! rule in force (WRAP by default, SAT, FAIL). The field arithmetic is in `field`.
//!
//! Semantics follow Redis 7.0.15 (checked against the real server; the transcripts in
//! `tests/transcripts/bitfield*.txt` were recorded from it): every operation is parsed before
//! the key is looked up; a write grows the string with zero bytes to its farthest field (even
//! when every write then fails its overflow check, in which case the change is not announced);
//! a change propagates as sent and notifies `setbit`.

mod field;

use super::string::{as_str, store_raw, take_str};
use crate::argv::Argv;
use crate::cmd::notify::{class as nc, emit};
use crate::cmd::spec::CommandSpec;
use crate::command::{acl, flags};
use crate::error::{CmdResult, Error};
use crate::keyspec::{kf, FoundKey, InvalidKeyArgs, KeySpec};
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::value::Value;
use crate::Cx;
use alloc::vec::Vec;
use field::Overflow;
use kayvee_pds::SmallBytes;

/// BITFIELD's key with the flags its operations need, as Redis's `bitfieldGetKeys`: read-only
/// access when it only GETs (OVERFLOW aside), else read-write (a malformed list counts as a
/// write, the safer guess).
fn bitfield_keys(args: &Argv<'_>) -> Result<Vec<FoundKey>, InvalidKeyArgs> {
    let mut readonly = true;
    let mut i = 2;
    while i < args.len() {
        let remaining = args.len() - i - 1;
        let a = args.get(i);
        if a.eq_ignore_ascii_case(b"get") && remaining >= 2 {
            i += 2;
        } else if a.eq_ignore_ascii_case(b"overflow") && remaining >= 1 {
            i += 1;
        } else {
            readonly = false;
            break;
        }
        i += 1;
    }
    let flags = if readonly {
        kf::RO_ACCESS
    } else {
        kf::RW_ACCESS_UPDATE
    };
    Ok(alloc::vec![FoundKey { index: 1, flags }])
}

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "bitfield",
        arity: -2,
        flags: flags::WRITE | flags::DENYOOM,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::WRITE | acl::BITMAP | acl::SLOW,
        summary: "Perform arbitrary bitfield integer operations on strings",
        since: "3.2.0",
        group: "bitmap",
        complexity: "O(1) for each subcommand specified",
        handler: bitfield,
        key_specs: &[KeySpec::range(kf::RW_ACCESS_UPDATE_VARIABLE_FLAGS, 1, 0, 1)
            .with_notes("This command allows both access and modification of the key")],
        get_keys: Some(bitfield_keys),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "bitfield_ro",
        arity: -2,
        flags: flags::READONLY | flags::FAST,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::READ | acl::BITMAP | acl::FAST,
        summary: "Perform arbitrary bitfield integer operations on strings. Read-only variant \
                  of BITFIELD",
        since: "6.0.0",
        group: "bitmap",
        complexity: "O(1) for each subcommand specified",
        handler: bitfield_ro,
        ..CommandSpec::DEFAULT
    },
];

/// What one operation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Get,
    Set,
    IncrBy,
}

/// One parsed operation.
#[derive(Clone, Copy, Debug)]
struct Op {
    kind: Kind,
    signed: bool,
    bits: u32,
    offset: u64,
    /// SET's value or INCRBY's increment.
    value: i64,
    overflow: Overflow,
}

const TYPE_ERR: &str =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";

/// Parses a field type: `i1`..`i64` or `u1`..`u63` (lower case only, as 7.0 accepts; the text
/// stops at a NUL, as C reads it).
fn parse_type(arg: &[u8]) -> Result<(bool, u32), Error> {
    let arg = crate::util::c_str_prefix(arg, usize::MAX);
    let signed = match arg.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(Error::msg(TYPE_ERR)),
    };
    match parse_i64(&arg[1..]) {
        Some(n @ 1..=64) if signed || n <= 63 => Ok((signed, n as u32)),
        _ => Err(Error::msg(TYPE_ERR)),
    }
}

/// Parses a bit offset: `N`, or `#N` meaning `N * bits`; non-negative and its byte below
/// `proto-max-bulk-len`.
fn parse_offset(cx: &Cx<'_>, arg: &[u8], bits: u32) -> Result<u64, Error> {
    let bad = || Error::msg("ERR bit offset is not an integer or out of range");
    let (digits, hash) = match arg.strip_prefix(b"#") {
        Some(rest) => (rest, true),
        None => (arg, false),
    };
    let mut off = parse_i64(digits).ok_or_else(bad)?;
    if hash {
        off = off.wrapping_mul(i64::from(bits));
    }
    if off < 0 || (off as u64 >> 3) >= cx.core.config.proto_max_bulk_len {
        return Err(bad());
    }
    Ok(off as u64)
}

/// Parses the operations in Redis's order (each one's type, offset, then value); returns them
/// and the farthest bit a write reaches (`None` when all are GETs).
fn parse_ops(cx: &Cx<'_>, args: &Argv<'_>) -> Result<(Vec<Op>, Option<u64>), Error> {
    let mut ops = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut highest: Option<u64> = None;
    let mut j = 2;
    while j < args.len() {
        let left = args.len() - j - 1;
        let word = args.get(j);
        let is = |name: &[u8]| word.eq_ignore_ascii_case(name);
        let kind = if is(b"get") && left >= 2 {
            Kind::Get
        } else if is(b"set") && left >= 3 {
            Kind::Set
        } else if is(b"incrby") && left >= 3 {
            Kind::IncrBy
        } else if is(b"overflow") && left >= 1 {
            overflow = parse_overflow(args.get(j + 1))?;
            j += 2;
            continue;
        } else {
            return Err(Error::Syntax);
        };
        let (signed, bits) = parse_type(args.get(j + 1))?;
        let offset = parse_offset(cx, args.get(j + 2), bits)?;
        let mut value = 0;
        if kind != Kind::Get {
            let end = offset + u64::from(bits) - 1;
            highest = Some(highest.map_or(end, |h| h.max(end)));
            value = parse_i64(args.get(j + 3)).ok_or(Error::NotInteger)?;
        }
        ops.push(Op {
            kind,
            signed,
            bits,
            offset,
            value,
            overflow,
        });
        j += if kind == Kind::Get { 3 } else { 4 };
    }
    Ok((ops, highest))
}

/// Parses an OVERFLOW rule.
fn parse_overflow(arg: &[u8]) -> Result<Overflow, Error> {
    let is = |name: &[u8]| arg.eq_ignore_ascii_case(name);
    if is(b"wrap") {
        Ok(Overflow::Wrap)
    } else if is(b"sat") {
        Ok(Overflow::Sat)
    } else if is(b"fail") {
        Ok(Overflow::Fail)
    } else {
        Err(Error::msg("ERR Invalid OVERFLOW type specified"))
    }
}

/// BITFIELD key [GET type offset] [SET type offset value] [INCRBY type offset increment]
/// [OVERFLOW WRAP|SAT|FAIL] ...
fn bitfield(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (ops, highest) = parse_ops(cx, args)?;
    match highest {
        None => read_only(cx, args.get(1), &ops, out),
        Some(bit) => write(cx, args.get(1), &ops, bit, out),
    }
}

/// BITFIELD_RO key [GET type offset ...]: BITFIELD without its writes.
fn bitfield_ro(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (ops, highest) = parse_ops(cx, args)?;
    if highest.is_some() {
        return Err(Error::msg(
            "ERR BITFIELD_RO only supports the GET subcommand",
        ));
    }
    read_only(cx, args.get(1), &ops, out)
}

/// Only GETs: a read lookup (a missing key reads as zeros).
fn read_only(cx: &mut Cx<'_>, key: &[u8], ops: &[Op], out: &mut dyn ReplySink) -> CmdResult {
    let now = cx.now_ms();
    let s = match cx.db().lookup_read(key, now) {
        Some(e) => as_str(e)?,
        None => &[][..],
    };
    out.array(ops.len());
    ops.iter().for_each(|op| out.int(get(s, op)));
    Ok(())
}

/// A GET's reply.
fn get(s: &[u8], op: &Op) -> i64 {
    if op.signed {
        field::get_signed(s, op.offset, op.bits)
    } else {
        field::get_unsigned(s, op.offset, op.bits) as i64
    }
}

/// At least one write: the string grows to hold bit `highest`, then the operations run in
/// order.
fn write(
    cx: &mut Cx<'_>,
    key: &[u8],
    ops: &[Op],
    highest: u64,
    out: &mut dyn ReplySink,
) -> CmdResult {
    let now = cx.now_ms();
    let len = (highest >> 3) as usize + 1;
    let db = cx.db();
    let (mut s, grew) = match db.lookup_write(key, now) {
        Some(e) => {
            let mut s = take_str(e)?;
            let grew = s.len() < len;
            if grew {
                s.resize(len, 0);
            }
            (s, grew)
        }
        None => {
            let entry = db.new_entry(Value::Str(SmallBytes::new()), now);
            db.insert_entry(key, entry, None);
            (alloc::vec![0u8; len], true)
        }
    };
    out.array(ops.len());
    let mut changes = 0;
    for op in ops {
        match apply(&mut s, op) {
            Some((reply, changed)) => {
                out.int(reply);
                if grew || changed {
                    changes += 1;
                }
            }
            None => out.null(),
        }
    }
    let entry = cx.db().lookup_write(key, now).expect("stored above");
    store_raw(entry, s);
    if changes > 0 {
        cx.propagate_verbatim();
        emit(cx, nc::STRING, "setbit", key);
    }
    Ok(())
}

/// Runs one operation on `s`: its reply and whether it changed the field, or `None` for a
/// write refused by OVERFLOW FAIL.
fn apply(s: &mut [u8], op: &Op) -> Option<(i64, bool)> {
    if op.kind == Kind::Get {
        return Some((get(s, op), false));
    }
    let incr = op.kind == Kind::IncrBy;
    let (old, new, reply) = if op.signed {
        let old = field::get_signed(s, op.offset, op.bits);
        let (base, delta) = if incr { (old, op.value) } else { (op.value, 0) };
        let new = match field::signed_overflow(base, delta, op.bits, op.overflow) {
            None => base.wrapping_add(delta),
            Some(limit) => limit?,
        };
        (old as u64, new as u64, if incr { new } else { old })
    } else {
        let old = field::get_unsigned(s, op.offset, op.bits);
        let (base, delta) = if incr {
            (old, op.value)
        } else {
            (op.value as u64, 0)
        };
        let new = match field::unsigned_overflow(base, delta, op.bits, op.overflow) {
            None => base.wrapping_add(delta as u64),
            Some(limit) => limit?,
        };
        let reply = if incr { new } else { old };
        (old, new, reply as i64)
    };
    field::set(s, op.offset, op.bits, new);
    Some((reply, old != new))
}
