//! Hash walks: HRANDFIELD (drawn from the engine's seeded random source) and HSCAN.

use super::{bulk, read_hash};
use crate::argv::Argv;
use crate::cmd::coll::{self, parse_rand_count};
use crate::error::{CmdResult, Error};
use crate::reply::{Protocol, ReplySink};
use crate::value::{Hash, Split, ValueRef};
use crate::{Core, Cx, Rng};
use alloc::vec::Vec;

/// HRANDFIELD key [count [WITHVALUES]]: one random field (null when missing), or `count`
/// fields: distinct when positive (at most all), with repeats when negative. The count is
/// checked before the syntax, and with WITHVALUES must stay within +-i64::MAX/2.
pub(super) fn hrandfield(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if args.len() == 2 {
        return hrandfield_one(cx, args.get(1), out);
    }
    let withvalues = args.len() == 4 && args.get(3).eq_ignore_ascii_case(b"WITHVALUES");
    let count = parse_rand_count(args.get(2), withvalues)?;
    if args.len() > 3 && !withvalues {
        return Err(Error::Syntax);
    }
    let draws = match count < 0 {
        true => coll::repeat_draws(cx, count, withvalues, out)?,
        false => 0,
    };
    let (h, rng) = hash_and_rng(cx, args.get(1))?;
    let Some(h) = h.filter(|_| count != 0) else {
        out.array(0);
        return Ok(());
    };
    if count > 0 {
        let all: Vec<_> = h.iter().collect();
        let picked = coll::shuffle_prefix(all, usize::try_from(count).unwrap_or(usize::MAX), rng);
        write_fields(out, &picked, withvalues);
        return Ok(());
    }
    // Repeats: each draw is written as it is made (the count may be huge).
    let nested = withvalues && out.protocol() == Protocol::Resp3;
    out.array(draws * if withvalues && !nested { 2 } else { 1 });
    if h.is_big() {
        for _ in 0..draws {
            match h.random(rng.next_u64()) {
                Some(pair) => write_field(out, pair, withvalues, nested),
                None => out.null(),
            }
        }
    } else {
        // Flat: index the pairs once rather than walking the buffer per draw.
        let all: Vec<_> = h.iter().collect();
        for _ in 0..draws {
            let pair = all[(rng.next_u64() % all.len() as u64) as usize];
            write_field(out, pair, withvalues, nested);
        }
    }
    Ok(())
}

/// HRANDFIELD key: one random field, or null.
fn hrandfield_one(cx: &mut Cx<'_>, key: &[u8], out: &mut dyn ReplySink) -> CmdResult {
    match hash_and_rng(cx, key)? {
        (Some(h), rng) => match h.random(rng.next_u64()) {
            Some((k, _)) => bulk(out, k),
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
    match dbs[db_index].lookup_read(key, now).map(|e| e.value()) {
        None => Ok((None, rng)),
        Some(ValueRef::Hash(h)) if h.corrupt_listpack().is_some() => {
            Err(Error::msg(crate::value::CORRUPT_VALUE))
        }
        Some(ValueRef::Hash(h)) => Ok((Some(h), rng)),
        Some(_) => Err(Error::WrongType),
    }
}

/// Fields (and values): WITHVALUES pairs are 2-element arrays in RESP3, flat in RESP2.
fn write_fields(out: &mut dyn ReplySink, picked: &[(Split<'_>, Split<'_>)], values: bool) {
    let nested = values && out.protocol() == Protocol::Resp3;
    let flat_values = values && !nested;
    out.array(picked.len() * if flat_values { 2 } else { 1 });
    for pair in picked {
        write_field(out, *pair, values, nested);
    }
}

/// One field (and its value: a 2-element array when `nested`).
fn write_field(
    out: &mut dyn ReplySink,
    (k, v): (Split<'_>, Split<'_>),
    values: bool,
    nested: bool,
) {
    if nested {
        out.array(2);
    }
    bulk(out, k);
    if values {
        bulk(out, v);
    }
}

/// HSCAN key cursor [MATCH pattern] [COUNT count]: the next cursor and field/value pairs (a
/// flat array in both protocols). Options are checked after the key, as Redis does.
pub(super) fn hscan(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
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
    let found: Vec<_> = found
        .into_iter()
        .filter(|(k, _)| k.with_contiguous(|k| scan.matches(k)))
        .collect();
    coll::write_scan_head(out, next, found.len() * 2);
    for (k, v) in found {
        bulk(out, k);
        bulk(out, v);
    }
    Ok(())
}
