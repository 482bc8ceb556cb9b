//! List pops: LPOP, RPOP, LMPOP and their blocking forms BLPOP, BRPOP, BLMPOP. A blocking pop
//! first tries its non-blocking form; when every key is empty it blocks through
//! [`crate::blocking`] and is later served by its `serve_*` function (from the key that became
//! ready) or times out with the null array (`*-1` in RESP2, `_` in RESP3: the same for all the
//! blocking list commands, checked on Redis 7.0.15).

use super::{
    as_list_mut, delete_if_empty, end_event, end_pop, holds_list, parse_at_least, pop_end,
    propagate_pop,
};
use crate::argv::Argv;
use crate::cmd::block::{parse_timeout, wait_on_keys};
use crate::cmd::notify::{class as nc, emit, emptied};
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::Cx;
use alloc::vec::Vec;
use kayvee_pds::SmallBytes;

/// Pops up to `count` elements from `key` (which must exist as a list), deleting it when
/// emptied. `Ok(None)` when the key is absent.
fn pop_items(
    cx: &mut Cx<'_>,
    key: &[u8],
    count: usize,
    front: bool,
) -> Result<Option<Vec<SmallBytes>>, Error> {
    let mut items = Vec::new();
    let popped = pop_each(cx, key, count, front, |v| items.push(v))?;
    Ok(popped.map(|_| items))
}

/// [`pop_items`] handing each element to `each` (LPOP/RPOP of one element need no vector):
/// the number popped, or `Ok(None)` when the key is absent.
fn pop_each(
    cx: &mut Cx<'_>,
    key: &[u8],
    count: usize,
    front: bool,
    mut each: impl FnMut(SmallBytes),
) -> Result<Option<usize>, Error> {
    let now = cx.now_ms();
    let db = cx.db();
    let Some(e) = db.lookup_write(key, now) else {
        return Ok(None);
    };
    let l = as_list_mut(e)?;
    let n = count.min(l.len());
    let mut popped = 0;
    for v in (0..n).filter_map(|_| pop_end(l, front)) {
        each(v);
        popped += 1;
    }
    let deleted = delete_if_empty(db, key, now);
    if popped > 0 {
        emit(cx, nc::LIST, end_event(false, front), key);
    }
    if deleted {
        emptied(cx, key);
    }
    Ok(Some(popped))
}

/// LPOP/RPOP key [count]: one element as a bulk string, or with a count an array (empty for
/// count 0); a missing key is the null (the null array with a count).
fn pop_cmd(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink, front: bool) -> CmdResult {
    if args.len() > 3 {
        let name = cx.commands.get(cx.cmd).full_name.clone();
        return Err(Error::WrongArity(name));
    }
    let count = match args.try_get(2) {
        Some(a) => Some(parse_at_least(
            a,
            0,
            "ERR value is out of range, must be positive",
        )?),
        None => None,
    };
    let Some(count) = count else {
        let mut one = None;
        pop_each(cx, args.get(1), 1, front, |v| one = Some(v))?;
        match one {
            Some(v) => {
                cx.propagate_verbatim();
                out.bulk(&v);
            }
            // Absent (an existing list is never empty).
            None => out.null(),
        }
        return Ok(());
    };
    let popped = pop_items(cx, args.get(1), count as usize, front)?;
    if popped.as_ref().is_some_and(|items| !items.is_empty()) {
        cx.propagate_verbatim();
    }
    match popped {
        None => out.null_array(),
        Some(items) => bulk_array(out, &items),
    }
    Ok(())
}

/// An array of bulk strings.
fn bulk_array(out: &mut dyn ReplySink, items: &[SmallBytes]) {
    out.array(items.len());
    items.iter().for_each(|v| out.bulk(v));
}

/// LPOP key [count]
pub(super) fn lpop(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    pop_cmd(cx, args, out, true)
}

/// RPOP key [count]
pub(super) fn rpop(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    pop_cmd(cx, args, out, false)
}

/// LMPOP/BLMPOP arguments after the numkeys position.
struct Mpop {
    /// Index of the first key.
    pub first: usize,
    /// Number of keys.
    pub numkeys: usize,
    /// LEFT (true) or RIGHT.
    pub front: bool,
    /// COUNT (1 by default).
    pub count: usize,
}

/// Parses `numkeys key... LEFT|RIGHT [COUNT count]` starting at `at`, checked in Redis's order.
fn parse_mpop(args: &Argv<'_>, at: usize) -> Result<Mpop, Error> {
    let m = crate::cmd::coll::parse_mpop(args, at, ["LEFT", "RIGHT"])?;
    Ok(Mpop {
        first: m.first,
        numkeys: m.numkeys,
        front: m.first_end,
        count: m.count,
    })
}

/// Pops from the first non-empty list among the keys: (key index, elements). WRONGTYPE for a
/// key of another type met before any list.
fn mpop_try(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    m: &Mpop,
) -> Result<Option<(usize, Vec<SmallBytes>)>, Error> {
    for i in m.first..m.first + m.numkeys {
        if let Some(items) = pop_items(cx, args.get(i), m.count, m.front)? {
            return Ok(Some((i, items)));
        }
    }
    Ok(None)
}

/// The `[key, [element...]]` reply of LMPOP and BLMPOP.
fn mpop_reply(out: &mut dyn ReplySink, key: &[u8], items: &[SmallBytes]) {
    out.array(2);
    out.bulk(key);
    bulk_array(out, items);
}

/// LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]: the null array when all are empty.
pub(super) fn lmpop(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let m = parse_mpop(args, 1)?;
    match mpop_try(cx, args, &m)? {
        Some((i, items)) => {
            propagate_pop(cx, end_pop(m.front), args.get(i), Some(items.len()));
            mpop_reply(out, args.get(i), &items);
        }
        None => out.null_array(),
    }
    Ok(())
}

/// The `[key, element]` reply of BLPOP and BRPOP.
fn key_element(out: &mut dyn ReplySink, key: &[u8], v: &[u8]) {
    out.array(2);
    out.bulk(key);
    out.bulk(v);
}

/// BLPOP/BRPOP key [key ...] timeout: the timeout is checked first, then the keys in order.
fn bpop(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink, front: bool) -> CmdResult {
    let last = args.len() - 1;
    let deadline = parse_timeout(args.get(last), cx.now_ms())?;
    for i in 1..last {
        if let Some(items) = pop_items(cx, args.get(i), 1, front)? {
            propagate_pop(cx, end_pop(front), args.get(i), None);
            key_element(out, args.get(i), &items[0]);
            return Ok(());
        }
    }
    wait_on_keys(cx, args, (1..last).map(|i| args.get(i)), deadline, out);
    Ok(())
}

/// Serves a BLPOP/BRPOP waiter from `key`.
fn serve_bpop(
    cx: &mut Cx<'_>,
    key: &[u8],
    out: &mut dyn ReplySink,
    front: bool,
) -> Result<bool, Error> {
    if !holds_list(cx, key) {
        return Ok(false);
    }
    match pop_items(cx, key, 1, front)? {
        Some(items) if !items.is_empty() => {
            propagate_pop(cx, end_pop(front), key, None);
            key_element(out, key, &items[0]);
            Ok(true)
        }
        _ => Ok(false),
    }
}

pub(super) fn serve_blpop(
    cx: &mut Cx<'_>,
    key: &[u8],
    _: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> Result<bool, Error> {
    serve_bpop(cx, key, out, true)
}

pub(super) fn serve_brpop(
    cx: &mut Cx<'_>,
    key: &[u8],
    _: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> Result<bool, Error> {
    serve_bpop(cx, key, out, false)
}

/// BLPOP key [key ...] timeout
pub(super) fn blpop(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    bpop(cx, args, out, true)
}

/// BRPOP key [key ...] timeout
pub(super) fn brpop(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    bpop(cx, args, out, false)
}

/// BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]: unlike BLPOP, the other
/// arguments are checked before the timeout.
pub(super) fn blmpop(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let m = parse_mpop(args, 2)?;
    let deadline = parse_timeout(args.get(1), cx.now_ms())?;
    match mpop_try(cx, args, &m)? {
        Some((i, items)) => {
            propagate_pop(cx, end_pop(m.front), args.get(i), Some(items.len()));
            mpop_reply(out, args.get(i), &items);
        }
        None => {
            let keys = (m.first..m.first + m.numkeys).map(|i| args.get(i));
            wait_on_keys(cx, args, keys, deadline, out);
        }
    }
    Ok(())
}

/// Serves a BLMPOP waiter from `key` with its side and count.
pub(super) fn serve_blmpop(
    cx: &mut Cx<'_>,
    key: &[u8],
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> Result<bool, Error> {
    if !holds_list(cx, key) {
        return Ok(false);
    }
    let m = parse_mpop(args, 2)?;
    match pop_items(cx, key, m.count, m.front)? {
        Some(items) if !items.is_empty() => {
            propagate_pop(cx, end_pop(m.front), key, Some(items.len()));
            mpop_reply(out, key, &items);
            Ok(true)
        }
        _ => Ok(false),
    }
}
