//! Sorted-set pops: ZPOPMIN, ZPOPMAX, ZMPOP and their blocking forms BZPOPMIN, BZPOPMAX and
//! BZMPOP (Redis 7.0.15 semantics).
//!
//! A blocking pop first tries its non-blocking form; when every key is missing it blocks
//! through [`crate::blocking`] and is later served by its `serve_*` function from the key that
//! became ready (only a sorted set serves: a key of another type leaves it waiting), or times
//! out with the null array (`*-1` in RESP2, `_` in RESP3, as for the list pops).
//!
//! Argument order as Redis checks it: BZPOPMIN/BZPOPMAX parse their timeout before looking at
//! any key; BZMPOP parses `numkeys`, `MIN|MAX` and `COUNT` (as ZMPOP) before its timeout.

use super::{drop_if_empty, reply_scored};
use crate::argv::Argv;
use crate::cmd::block::{parse_timeout, wait_on_keys};
use crate::cmd::coll;
use crate::cmd::list::propagate_pop;
use crate::cmd::notify::{class as nc, emit, emptied_if_gone};
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::value::{ValueMut, ValueRef};
use crate::Cx;
use alloc::vec::Vec;
use kayvee_pds::SmallBytes;

/// Pops up to `count` members from the low (or high) end of the set at `key`; `None` when
/// the key is missing, WRONGTYPE for another type. Deletes the key when emptied.
fn pop(
    cx: &mut Cx<'_>,
    key: &[u8],
    count: usize,
    max: bool,
) -> Result<Option<Vec<(SmallBytes, f64)>>, Error> {
    let now = cx.now_ms();
    let Some(entry) = cx.db().lookup_write(key, now) else {
        return Ok(None);
    };
    let ValueMut::ZSet(zs) = entry.value_mut() else {
        return Err(Error::WrongType);
    };
    let mut items = Vec::new();
    while items.len() < count {
        let e = if max { zs.last() } else { zs.first() };
        let Some(e) = e.map(|e| (e.1.to_small_bytes(), e.0)) else {
            break;
        };
        zs.remove(&e.0);
        items.push(e);
    }
    drop_if_empty(cx, key);
    if !items.is_empty() {
        emit(cx, nc::ZSET, if max { "zpopmax" } else { "zpopmin" }, key);
        emptied_if_gone(cx, key);
    }
    Ok(Some(items))
}

/// `ZPOPMAX` or `ZPOPMIN`: the plain form of a pop from the high (`max`) or low end.
fn end_pop(max: bool) -> &'static [u8] {
    if max {
        b"ZPOPMAX"
    } else {
        b"ZPOPMIN"
    }
}

/// ZPOPMIN / ZPOPMAX key [count].
fn zpop(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink, max: bool) -> CmdResult {
    if args.len() > 3 {
        return Err(Error::Syntax);
    }
    let count = match args.try_get(2) {
        Some(c) => Some(
            parse_i64(c)
                .filter(|v| *v >= 0)
                .ok_or(Error::msg("ERR value is out of range, must be positive"))?,
        ),
        None => None,
    };
    let n = count.map_or(1, |c| usize::try_from(c).unwrap_or(usize::MAX));
    let items = pop(cx, args.get(1), n, max)?.unwrap_or_default();
    if !items.is_empty() {
        cx.propagate_verbatim();
    }
    if count.is_some() {
        reply_scored(out, &items, true);
    } else {
        out.array(items.len() * 2);
        for (m, s) in &items {
            out.bulk(m);
            out.double(*s);
        }
    }
    Ok(())
}

pub(super) fn zpopmin(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    zpop(cx, args, out, false)
}

pub(super) fn zpopmax(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    zpop(cx, args, out, true)
}

/// ZMPOP's parsed arguments: keys, which end, how many.
struct Mpop<'a> {
    pub keys: Vec<&'a [u8]>,
    pub max: bool,
    pub count: usize,
}

/// Parses `numkeys key [key ...] MIN|MAX [COUNT count]` starting at `at` (shared with the
/// blocking form, which has a timeout before it).
fn parse_mpop<'a>(args: &Argv<'a>, at: usize) -> Result<Mpop<'a>, Error> {
    let m = coll::parse_mpop(args, at, ["MIN", "MAX"])?;
    Ok(Mpop {
        keys: (m.first..m.first + m.numkeys)
            .map(|i| args.get(i))
            .collect(),
        max: !m.first_end,
        count: m.count,
    })
}

/// Pops from the first non-empty sorted set among `m.keys` and writes ZMPOP's reply (`[key,
/// [[member, score], ...]]`); returns false (nothing written) when all are empty.
fn mpop_first(cx: &mut Cx<'_>, m: &Mpop<'_>, out: &mut dyn ReplySink) -> Result<bool, Error> {
    for key in &m.keys {
        if let Some(items) = pop(cx, key, m.count, m.max)? {
            propagate_pop(cx, end_pop(m.max), key, Some(items.len()));
            out.array(2);
            out.bulk(key);
            out.array(items.len());
            for (member, s) in &items {
                out.array(2);
                out.bulk(member);
                out.double(*s);
            }
            return Ok(true);
        }
    }
    Ok(false)
}

/// ZMPOP numkeys key [key ...] MIN|MAX [COUNT count].
pub(super) fn zmpop(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let m = parse_mpop(args, 1)?;
    if !mpop_first(cx, &m, out)? {
        out.null_array();
    }
    Ok(())
}

/// Whether `key` holds a sorted set now (only a sorted set serves a waiter).
fn holds_zset(cx: &mut Cx<'_>, key: &[u8]) -> bool {
    let now = cx.now_ms();
    matches!(cx.db().peek(key, now), Some(e) if matches!(e.value(), ValueRef::ZSet(_)))
}

/// Pops one member from the first sorted set among `keys` that exists and writes `[key,
/// member, score]`; false (nothing written) when all are missing. WRONGTYPE for a key of
/// another type met first.
fn bpop_first(
    cx: &mut Cx<'_>,
    keys: &[&[u8]],
    max: bool,
    out: &mut dyn ReplySink,
) -> Result<bool, Error> {
    for key in keys {
        if let Some(items) = pop(cx, key, 1, max)? {
            propagate_pop(cx, end_pop(max), key, None);
            let (member, score) = &items[0];
            out.array(3);
            out.bulk(key);
            out.bulk(member);
            out.double(*score);
            return Ok(true);
        }
    }
    Ok(false)
}

/// BZPOPMIN/BZPOPMAX key [key ...] timeout.
fn bzpop(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink, max: bool) -> CmdResult {
    let last = args.len() - 1;
    let deadline = parse_timeout(args.get(last), cx.now_ms())?;
    let keys: Vec<&[u8]> = (1..last).map(|i| args.get(i)).collect();
    if !bpop_first(cx, &keys, max, out)? {
        wait_on_keys(cx, args, keys, deadline, out);
    }
    Ok(())
}

/// Serves a BZPOPMIN/BZPOPMAX waiter from `key`.
fn serve_bzpop(
    cx: &mut Cx<'_>,
    key: &[u8],
    out: &mut dyn ReplySink,
    max: bool,
) -> Result<bool, Error> {
    if !holds_zset(cx, key) {
        return Ok(false);
    }
    bpop_first(cx, &[key], max, out)
}

pub(super) fn serve_bzpopmin(
    cx: &mut Cx<'_>,
    key: &[u8],
    _: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> Result<bool, Error> {
    serve_bzpop(cx, key, out, false)
}

pub(super) fn serve_bzpopmax(
    cx: &mut Cx<'_>,
    key: &[u8],
    _: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> Result<bool, Error> {
    serve_bzpop(cx, key, out, true)
}

/// BZPOPMIN key [key ...] timeout
pub(super) fn bzpopmin(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    bzpop(cx, args, out, false)
}

/// BZPOPMAX key [key ...] timeout
pub(super) fn bzpopmax(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    bzpop(cx, args, out, true)
}

/// BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count].
pub(super) fn bzmpop(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let m = parse_mpop(args, 2)?;
    let deadline = parse_timeout(args.get(1), cx.now_ms())?;
    if !mpop_first(cx, &m, out)? {
        wait_on_keys(cx, args, m.keys, deadline, out);
    }
    Ok(())
}

/// Serves a BZMPOP waiter from `key` with its end and count.
pub(super) fn serve_bzmpop(
    cx: &mut Cx<'_>,
    key: &[u8],
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> Result<bool, Error> {
    if !holds_zset(cx, key) {
        return Ok(false);
    }
    let m = parse_mpop(args, 2)?;
    let one = Mpop {
        keys: alloc::vec![key],
        ..m
    };
    mpop_first(cx, &one, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ArgvBuf;

    /// (keys, max, count) or the error, for a ZMPOP line.
    fn mpop_of(line: &str) -> Result<(usize, bool, usize), Error> {
        let a = ArgvBuf::from_line(line);
        parse_mpop(&a.argv(), 1).map(|m| (m.keys.len(), m.max, m.count))
    }

    #[test]
    fn mpop_arguments_parse_like_redis() {
        assert_eq!(mpop_of("ZMPOP 2 a b max"), Ok((2, true, 1)));
        assert_eq!(mpop_of("ZMPOP 1 a MIN count 5"), Ok((1, false, 5)));
        let numkeys = Err(Error::msg("ERR numkeys should be greater than 0"));
        assert_eq!(mpop_of("ZMPOP 0 a MIN"), numkeys);
        let count = Err(Error::msg("ERR count should be greater than 0"));
        assert_eq!(mpop_of("ZMPOP 1 a MIN COUNT 0"), count);
        assert_eq!(mpop_of("ZMPOP 2 a MIN"), Err(Error::Syntax));
        assert_eq!(mpop_of("ZMPOP 1 a MID"), Err(Error::Syntax));
        assert_eq!(mpop_of("ZMPOP 1 a MIN COUNT 2 COUNT 3"), Err(Error::Syntax));
    }
}
