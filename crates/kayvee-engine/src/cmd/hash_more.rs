//! Hash counters and walks: HINCRBY, HINCRBYFLOAT, HRANDFIELD, HSCAN.
//!
//! HINCRBYFLOAT computes in x87 extended precision and prints like Redis 7.0's `long double`
//! path, through the same software arithmetic as INCRBYFLOAT (`cmd::long_double`), so replies are
//! byte-identical. HRANDFIELD draws from the engine's seeded random source.

use super::coll::{self, parse_rand_count};
use super::hash::{hash_put, read_hash, write_hash, HashLimits};
use super::long_double::{self, Ld};
use super::string::format_i64;
use crate::argv::Argv;
use crate::error::{CmdResult, Error};
use crate::notify::{class as nc, emit};
use crate::reply::{Protocol, ReplySink};
use crate::util::parse_i64;
use crate::value::{Hash, Value};
use crate::{Core, Cx, Rng};
use alloc::vec::Vec;
use kayvee_pds::SmallBytes;

/// HINCRBY key field increment: adds to the field's integer (0 when missing); the new value.
pub(crate) fn hincrby(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let incr = parse_i64(args.get(3)).ok_or(Error::NotInteger)?;
    let (new, _) = update_field(cx, args, "hincrby", |old| {
        let old = match old {
            Some(v) => parse_i64(v).ok_or(Error::msg("ERR hash value is not an integer"))?,
            None => 0,
        };
        let new = old.checked_add(incr).ok_or(Error::Overflow)?;
        let mut buf = [0u8; 20];
        Ok((new, SmallBytes::from_slice(format_i64(new, &mut buf))))
    })?;
    cx.propagate_verbatim();
    out.int(new);
    Ok(())
}

/// HINCRBYFLOAT key field increment: adds in extended precision; the new value as text.
pub(crate) fn hincrbyfloat(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let incr = long_double::parse(args.get(3)).ok_or(Error::NotFloat)?;
    if incr.is_inf() {
        return Err(Error::msg("ERR value is NaN or Infinity"));
    }
    let ((), text) = update_field(cx, args, "hincrbyfloat", |old| {
        let old = match old {
            Some(v) => long_double::parse(v).ok_or(Error::msg("ERR hash value is not a float"))?,
            None => Ld::zero(false),
        };
        match old.add(incr) {
            Some(sum) if !sum.is_inf() => Ok(((), sum.to_human())),
            _ => Err(Error::msg("ERR increment would produce NaN or Infinity")),
        }
    })?;
    cx.propagate(&[b"HSET", args.get(1), args.get(2), text.as_bytes()]);
    out.bulk(text.as_bytes());
    Ok(())
}

/// The shared body of HINCRBY and HINCRBYFLOAT: sets the field at argument 2 of the hash at
/// argument 1 (created when missing) to the text `next` makes from its old value, notes the
/// write for WATCH (even for an increment of 0, as in Redis) and sends `event`. `next`
/// answers a reply value and the new text, or the error that leaves everything untouched.
fn update_field<R, T: AsRef<[u8]>>(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    event: &str,
    next: impl FnOnce(Option<&[u8]>) -> Result<(R, T), Error>,
) -> Result<(R, T), Error> {
    let (key, field) = (args.get(1), args.get(2));
    let lim = HashLimits::of(cx);
    let new = write_hash(cx, key, true, |h, meta| {
        let new = next(h.get(field))?;
        hash_put(h, meta, lim, field, new.1.as_ref());
        Ok(new)
    })?;
    cx.db().modified(key);
    emit(cx, nc::HASH, event, key);
    Ok(new.expect("write_hash creates the hash"))
}

/// HRANDFIELD key [count [WITHVALUES]]: one random field (null when missing), or `count`
/// fields: distinct when positive (at most all), with repeats when negative. The count is
/// checked before the syntax, and with WITHVALUES must stay within +-i64::MAX/2.
pub(crate) fn hrandfield(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if args.len() == 2 {
        return hrandfield_one(cx, args.get(1), out);
    }
    let withvalues = args.len() == 4 && args.get(3).eq_ignore_ascii_case(b"WITHVALUES");
    let count = parse_rand_count(args.get(2), withvalues)?;
    if args.len() > 3 && !withvalues {
        return Err(Error::Syntax);
    }
    let (h, rng) = hash_and_rng(cx, args.get(1))?;
    let Some(h) = h.filter(|_| count != 0) else {
        out.array(0);
        return Ok(());
    };
    let picked: Vec<(&[u8], &[u8])> = if count > 0 {
        let all: Vec<_> = h.iter().collect();
        coll::shuffle_prefix(all, usize::try_from(count).unwrap_or(usize::MAX), rng)
    } else if h.is_big() {
        (0..count.unsigned_abs())
            .filter_map(|_| h.random(rng.next_u64()))
            .collect()
    } else {
        // Flat: index the pairs once rather than walking the buffer per draw.
        let all: Vec<_> = h.iter().collect();
        (0..count.unsigned_abs())
            .map(|_| all[(rng.next_u64() % all.len() as u64) as usize])
            .collect()
    };
    write_fields(out, &picked, withvalues);
    Ok(())
}

/// HRANDFIELD key: one random field, or null.
fn hrandfield_one(cx: &mut Cx<'_>, key: &[u8], out: &mut dyn ReplySink) -> CmdResult {
    match hash_and_rng(cx, key)? {
        (Some(h), rng) => match h.random(rng.next_u64()) {
            Some((k, _)) => out.bulk(k),
            None => out.null(),
        },
        (None, _) => out.null(),
    }
    Ok(())
}

/// The hash at `key` for reading (a hit or a miss counts; `None` when missing, WRONGTYPE for
/// another type) beside the engine's random source, borrowed apart for HRANDFIELD.
fn hash_and_rng<'c>(
    cx: &'c mut Cx<'_>,
    key: &[u8],
) -> Result<(Option<&'c Hash>, &'c mut Rng), Error> {
    let (db_index, now) = (cx.db_index, cx.now_ms());
    let Core { dbs, rng, .. } = &mut *cx.core;
    match dbs[db_index].lookup_read(key, now).map(|e| &e.value) {
        None => Ok((None, rng)),
        Some(Value::Hash(h)) => Ok((Some(h), rng)),
        Some(_) => Err(Error::WrongType),
    }
}

/// Fields (and values): WITHVALUES pairs are 2-element arrays in RESP3, flat in RESP2.
fn write_fields(out: &mut dyn ReplySink, picked: &[(&[u8], &[u8])], values: bool) {
    let nested = values && out.protocol() == Protocol::Resp3;
    let flat_values = values && !nested;
    out.array(picked.len() * if flat_values { 2 } else { 1 });
    for (k, v) in picked {
        if nested {
            out.array(2);
        }
        out.bulk(k);
        if values {
            out.bulk(v);
        }
    }
}

/// HSCAN key cursor [MATCH pattern] [COUNT count]: the next cursor and field/value pairs (a
/// flat array in both protocols). Options are checked after the key, as Redis does.
pub(crate) fn hscan(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    coll::parse_scan_cursor(args)?;
    let Some((h, meta)) = read_hash(cx, args.get(1))? else {
        coll::write_scan_head(out, 0, 0);
        return Ok(());
    };
    let scan = coll::parse_scan(args)?;
    let small = !meta.has(crate::value::Meta::BIG);
    let (next, found) = if small {
        (0, h.iter().collect())
    } else {
        h.scan(scan.cursor, scan.count)
    };
    let found: Vec<_> = found.into_iter().filter(|(k, _)| scan.matches(k)).collect();
    coll::write_scan_head(out, next, found.len() * 2);
    for (k, v) in found {
        out.bulk(k);
        out.bulk(v);
    }
    Ok(())
}
