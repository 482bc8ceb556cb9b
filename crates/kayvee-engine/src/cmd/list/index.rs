//! List access by position and by value: LLEN, LRANGE, LINDEX, LSET, LREM, LTRIM, LINSERT,
//! LPOS (Redis 7.0.15 semantics).

use super::{as_list, as_list_mut, delete_if_empty, parse_at_least, parse_int};
use crate::argv::Argv;
use crate::cmd::notify::{class as nc, emit, emptied};
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::value::List;
use crate::Cx;
use alloc::vec::Vec;

/// LLEN key: 0 for a missing key.
pub(super) fn llen(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let now = cx.now_ms();
    let n = match cx.db().lookup_read(args.get(1), now) {
        Some(e) => as_list(e)?.len(),
        None => 0,
    };
    out.int(n as i64);
    Ok(())
}

/// The `start..end` slice of a list of `len` for Redis's inclusive, possibly negative
/// `start`/`stop` (LRANGE, LTRIM); `None` when it is empty.
fn index_range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i128;
    let norm = |i: i64| if i < 0 { i as i128 + len } else { i as i128 };
    let (s, e) = (norm(start).max(0), norm(stop).min(len - 1));
    (s <= e && s < len).then(|| (s as usize, e as usize + 1))
}

/// A possibly negative index into a list of `len`, if in range (LINDEX, LSET).
fn index(i: i64, len: usize) -> Option<usize> {
    let j = if i < 0 {
        i as i128 + len as i128
    } else {
        i as i128
    };
    (0..len as i128).contains(&j).then_some(j as usize)
}

/// LRANGE key start stop: the indexes are checked before the key.
pub(super) fn lrange(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (start, stop) = (parse_int(args.get(2))?, parse_int(args.get(3))?);
    let now = cx.now_ms();
    let Some(e) = cx.db().lookup_read(args.get(1), now) else {
        out.array(0);
        return Ok(());
    };
    let l = as_list(e)?;
    match index_range(start, stop, l.len()) {
        Some((s, e)) => {
            out.array(e - s);
            l.range(s, e).for_each(|v| out.bulk(v));
        }
        None => out.array(0),
    }
    Ok(())
}

/// LINDEX key index: the key is checked before the index; out of range is the null.
pub(super) fn lindex(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let now = cx.now_ms();
    let Some(e) = cx.db().lookup_read(args.get(1), now) else {
        out.null();
        return Ok(());
    };
    let l = as_list(e)?;
    let i = parse_int(args.get(2))?;
    match index(i, l.len()).and_then(|i| l.get(i)) {
        Some(v) => out.bulk(v),
        None => out.null(),
    }
    Ok(())
}

/// LSET key index element: `ERR no such key` for a missing key, then the type, the index, and
/// `ERR index out of range`.
pub(super) fn lset(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let now = cx.now_ms();
    let fill = cx.core.config.list_max_listpack_size;
    let e = cx
        .db()
        .lookup_write(args.get(1), now)
        .ok_or(Error::NoSuchKey)?;
    let l = as_list_mut(e)?;
    let i = parse_int(args.get(2))?;
    let i = index(i, l.len()).ok_or(Error::IndexOutOfRange)?;
    l.set(i, args.get(3), fill);
    // A modification for WATCH even when the element is the same, as in Redis.
    cx.db().modified(args.get(1));
    cx.propagate_verbatim();
    emit(cx, nc::LIST, "lset", args.get(1));
    out.ok();
    Ok(())
}

/// LREM key count element: removes up to |count| matches from the head (count > 0), the tail
/// (count < 0), or all (0); replies how many.
pub(super) fn lrem(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let count = parse_int(args.get(2))?;
    let (key, ele, now) = (args.get(1), args.get(3), cx.now_ms());
    let db = cx.db();
    let Some(e) = db.lookup_write(key, now) else {
        out.int(0);
        return Ok(());
    };
    let l = as_list_mut(e)?;
    let limit = match count {
        0 => usize::MAX,
        c => usize::try_from(c.unsigned_abs()).unwrap_or(usize::MAX),
    };
    let removed = l.remove_matching(|v| v == ele, limit, count < 0);
    let deleted = delete_if_empty(db, key, now);
    if removed > 0 {
        cx.propagate_verbatim();
        emit(cx, nc::LIST, "lrem", key);
    }
    if deleted {
        emptied(cx, key);
    }
    out.int(removed as i64);
    Ok(())
}

/// LTRIM key start stop: keeps the range; an empty range deletes the key.
pub(super) fn ltrim(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (start, stop) = (parse_int(args.get(2))?, parse_int(args.get(3))?);
    let (key, now) = (args.get(1), cx.now_ms());
    let db = cx.db();
    if let Some(e) = db.lookup_write(key, now) {
        let l = as_list_mut(e)?;
        let len_before = l.len();
        match index_range(start, stop, l.len()) {
            Some((s, e)) => l.retain_range(s, e),
            None => l.retain_range(0, 0),
        }
        let trimmed = l.len() != len_before;
        let deleted = delete_if_empty(db, key, now);
        // A modification for WATCH (and an event) even when nothing was trimmed, as in Redis;
        // but then nothing changed, so nothing is propagated.
        db.modified(key);
        if trimmed || deleted {
            cx.propagate_verbatim();
        }
        emit(cx, nc::LIST, "ltrim", key);
        if deleted {
            emptied(cx, key);
        }
    }
    out.ok();
    Ok(())
}

/// LINSERT key BEFORE|AFTER pivot element: the new length, -1 when the pivot is absent, 0 when
/// the key is. The position word is checked first.
pub(super) fn linsert(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let w = args.get(2);
    let after = if w.eq_ignore_ascii_case(b"AFTER") {
        true
    } else if w.eq_ignore_ascii_case(b"BEFORE") {
        false
    } else {
        return Err(Error::Syntax);
    };
    let (now, fill) = (cx.now_ms(), cx.core.config.list_max_listpack_size);
    let Some(e) = cx.db().lookup_write(args.get(1), now) else {
        out.int(0);
        return Ok(());
    };
    let l = as_list_mut(e)?;
    let pivot = args.get(3);
    let Some(pos) = l.iter().position(|v| v == pivot) else {
        out.int(-1);
        return Ok(());
    };
    l.insert(pos + usize::from(after), args.get(4), fill);
    let len = l.len();
    cx.propagate_verbatim();
    emit(cx, nc::LIST, "linsert", args.get(1));
    out.int(len as i64);
    Ok(())
}

/// LPOS's options.
struct LposOpts {
    rank: i64,
    count: Option<usize>,
    maxlen: usize,
}

/// Parses `[RANK r] [COUNT c] [MAXLEN m]` in order (repeats allowed, the last wins), each
/// checked as it is read, as Redis does.
fn lpos_opts(args: &Argv<'_>) -> Result<LposOpts, Error> {
    let mut o = LposOpts {
        rank: 1,
        count: None,
        maxlen: 0,
    };
    let mut i = 3;
    while i < args.len() {
        let (opt, val) = (args.get(i), args.try_get(i + 1).ok_or(Error::Syntax)?);
        if opt.eq_ignore_ascii_case(b"RANK") {
            o.rank = parse_int(val)?;
            if o.rank == 0 {
                return Err(Error::msg(
                    "ERR RANK can't be zero: use 1 to start from the first match, 2 from the \
                     second ... or use negative to start from the end of the list",
                ));
            }
        } else if opt.eq_ignore_ascii_case(b"COUNT") {
            let c = parse_at_least(val, 0, "ERR COUNT can't be negative")?;
            o.count = Some(c as usize);
        } else if opt.eq_ignore_ascii_case(b"MAXLEN") {
            o.maxlen = parse_at_least(val, 0, "ERR MAXLEN can't be negative")? as usize;
        } else {
            return Err(Error::Syntax);
        }
        i += 2;
    }
    Ok(o)
}

/// The indexes of `ele` in `l` per LPOS's options: scanning from the head (positive rank) or
/// the tail, skipping `|rank| - 1` matches, looking at no more than `maxlen` elements (0: all),
/// collecting up to `count` (0: all; absent: 1).
fn lpos_search(l: &List, ele: &[u8], o: &LposOpts) -> Vec<usize> {
    let len = l.len();
    let limit = if o.maxlen == 0 {
        len
    } else {
        o.maxlen.min(len)
    };
    // RANK LONG_MIN is taken as -1 by Redis 7.0 (its negation overflows).
    let skip = usize::try_from(o.rank.unsigned_abs().saturating_sub(1)).unwrap_or(usize::MAX);
    let skip = if o.rank == i64::MIN { 0 } else { skip };
    let want = match o.count {
        None => 1,
        Some(0) => usize::MAX,
        Some(c) => c,
    };
    let hits = |(_, v): &(usize, &[u8])| *v == ele;
    let found: Vec<usize> = if o.rank > 0 {
        let it = l.iter().enumerate().take(limit).filter(hits);
        it.skip(skip).take(want).map(|(i, _)| i).collect()
    } else {
        let it = l.iter().enumerate().rev().take(limit).filter(hits);
        it.skip(skip).take(want).map(|(i, _)| i).collect()
    };
    found
}

/// LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]: options are checked before
/// the key. Without COUNT an index or the null; with COUNT an array.
pub(super) fn lpos(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let o = lpos_opts(args)?;
    let now = cx.now_ms();
    let found = match cx.db().lookup_read(args.get(1), now) {
        Some(e) => lpos_search(as_list(e)?, args.get(2), &o),
        None => Vec::new(),
    };
    match (o.count, found.first()) {
        (None, Some(&i)) => out.int(i as i64),
        (None, None) => out.null(),
        (Some(_), _) => {
            out.array(found.len());
            found.iter().for_each(|&i| out.int(i as i64));
            // Redis writes LPOS COUNT's length after its positions: all of it counts against
            // the client's output limit.
            cx.outcome = crate::Outcome::DeferredReply;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_clamp_as_redis() {
        assert_eq!(index_range(0, -1, 3), Some((0, 3)));
        assert_eq!(index_range(-100, 100, 3), Some((0, 3)));
        assert_eq!(index_range(2, 1, 3), None);
        assert_eq!(index_range(-1, -2, 3), None);
        assert_eq!(index_range(5, 10, 3), None);
        assert_eq!(index_range(0, 0, 0), None);
        assert_eq!(index_range(i64::MIN, i64::MAX, 2), Some((0, 2)));
        assert_eq!(index(-1, 3), Some(2));
        assert_eq!(index(3, 3), None);
        assert_eq!(index(i64::MIN, 3), None);
    }

    #[test]
    fn lpos_search_ranks_counts_and_maxlen() {
        let l = List::from_items(["a", "b", "a", "c", "a"].map(str::as_bytes));
        let o = |rank, count, maxlen| LposOpts {
            rank,
            count,
            maxlen,
        };
        assert_eq!(lpos_search(&l, b"a", &o(1, Some(0), 0)), [0, 2, 4]);
        assert_eq!(lpos_search(&l, b"a", &o(-1, Some(2), 0)), [4, 2]);
        assert_eq!(lpos_search(&l, b"a", &o(2, None, 3)), [2]);
        assert_eq!(lpos_search(&l, b"a", &o(i64::MIN, None, 0)), [4]);
        assert!(lpos_search(&l, b"a", &o(i64::MAX, None, 0)).is_empty());
        assert!(lpos_search(&l, b"c", &o(-1, None, 1)).is_empty());
    }
}
