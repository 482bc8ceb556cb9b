//! Sorted-set pops, random members and scanning: ZPOPMIN, ZPOPMAX, ZMPOP, ZRANDMEMBER and
//! ZSCAN (Redis 7.0.15 semantics; the blocking forms, in `zset_block`, reuse the pops).
//!
//! ZSCAN follows Redis's two regimes: a listpack-sized set is returned whole in one call
//! (cursor 0), a skiplist-sized one is walked by the member map's hash cursor.

use super::coll;
use super::list::propagate_pop;
use super::zset::{as_zset, drop_if_empty, read_zset, reply_scored};
use super::zset_num::format_g17;
use crate::argv::Argv;
use crate::error::{CmdResult, Error};
use crate::notify::{class as nc, emit, emptied_if_gone};
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::value::{Meta, Value};
use crate::{Core, Cx};
use alloc::vec::Vec;
use kayvee_pds::SmallBytes;

/// Pops up to `count` members from the low (or high) end of the set at `key`; `None` when
/// the key is missing, WRONGTYPE for another type. Deletes the key when emptied.
pub(crate) fn pop(
    cx: &mut Cx<'_>,
    key: &[u8],
    count: usize,
    max: bool,
) -> Result<Option<Vec<(SmallBytes, f64)>>, Error> {
    let now = cx.now_ms();
    let Some(entry) = cx.db().lookup_write(key, now) else {
        return Ok(None);
    };
    let Value::ZSet(zs) = &mut entry.value else {
        return Err(Error::WrongType);
    };
    let mut items = Vec::new();
    while items.len() < count {
        let e = if max { zs.last() } else { zs.first() };
        let Some(e) = e.map(|e| (SmallBytes::from_slice(e.1), e.0)) else {
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
pub(crate) fn end_pop(max: bool) -> &'static [u8] {
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

pub(crate) fn zpopmin(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    zpop(cx, args, out, false)
}

pub(crate) fn zpopmax(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    zpop(cx, args, out, true)
}

/// ZMPOP's parsed arguments: keys, which end, how many.
pub(crate) struct Mpop<'a> {
    pub keys: Vec<&'a [u8]>,
    pub max: bool,
    pub count: usize,
}

/// Parses `numkeys key [key ...] MIN|MAX [COUNT count]` starting at `at` (shared with the
/// blocking form, which has a timeout before it).
pub(crate) fn parse_mpop<'a>(args: &Argv<'a>, at: usize) -> Result<Mpop<'a>, Error> {
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
pub(crate) fn mpop_first(
    cx: &mut Cx<'_>,
    m: &Mpop<'_>,
    out: &mut dyn ReplySink,
) -> Result<bool, Error> {
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
pub(crate) fn zmpop(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let m = parse_mpop(args, 1)?;
    if !mpop_first(cx, &m, out)? {
        out.null_array();
    }
    Ok(())
}

/// ZRANDMEMBER key [count [WITHSCORES]].
pub(crate) fn zrandmember(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let scores = args.len() == 4 && args.get(3).eq_ignore_ascii_case(b"WITHSCORES");
    let count = match args.try_get(2) {
        None => None,
        Some(c) => Some(coll::parse_rand_count(c, scores)?),
    };
    if args.len() > 4 || (args.len() == 4 && !scores) {
        return Err(Error::Syntax);
    }
    let draws = match count {
        Some(c) if c < 0 => coll::repeat_draws(cx, c)?,
        _ => 0,
    };
    let Some((zs, big)) = read_zset(cx, args.get(1))? else {
        match count {
            Some(_) => out.array(0),
            None => out.null(),
        }
        return Ok(());
    };
    let rng = &mut cx.core.rng;
    let Some(count) = count else {
        let i = (rng.next_u64() % zs.len() as u64) as usize;
        out.bulk(zs.nth(i).expect("in range").1);
        return Ok(());
    };
    let n = zs.len();
    let picks: Vec<usize> = if count < 0 {
        (0..draws)
            .map(|_| (rng.next_u64() % n as u64) as usize)
            .collect()
    } else if count as u64 >= n as u64 {
        // The whole set: Redis walks a listpack from its tail here.
        if big {
            (0..n).collect()
        } else {
            (0..n).rev().collect()
        }
    } else {
        coll::shuffle_prefix((0..n).collect(), count as usize, rng)
    };
    let items: Vec<(SmallBytes, f64)> = picks
        .iter()
        .map(|&i| {
            let e = zs.nth(i).expect("in range");
            (SmallBytes::from_slice(e.1), e.0)
        })
        .collect();
    reply_scored(out, &items, scores);
    Ok(())
}

/// ZSCAN key cursor [MATCH pattern] [COUNT count].
pub(crate) fn zscan(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    coll::parse_scan_cursor(args)?;
    let now = cx.now_ms();
    let Core { dbs, .. } = &mut *cx.core;
    let Some(entry) = dbs[cx.db_index].lookup_read(args.get(1), now) else {
        coll::write_scan_head(out, 0, 0);
        return Ok(());
    };
    let zs = as_zset(entry)?.clone();
    let big = entry.meta.has(Meta::BIG);
    let scan = coll::parse_scan(args)?;
    let (next, mut found) = if big {
        zs.scan(scan.cursor, scan.count)
    } else {
        (0, zs.iter().collect())
    };
    found.retain(|e| scan.matches(e.1));
    coll::write_scan_head(out, next, found.len() * 2);
    let mut buf = Vec::new();
    for e in &found {
        out.bulk(e.1);
        buf.clear();
        format_g17(e.0, &mut buf);
        out.bulk(&buf);
    }
    Ok(())
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
