//! Blocking list commands: BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP. Each first tries its
//! non-blocking form; when every key is empty it blocks through [`crate::blocking`] and is later
//! served by its `serve_*` function (from the key that became ready) or times out with the null
//! array (`*-1` in RESP2, `_` in RESP3: the same for all five, checked on Redis 7.0.15).

use super::list::{
    end_pop, move_one, mpop_reply, mpop_try, parse_mpop, parse_side, pop_items, propagate_pop,
};
use crate::argv::Argv;
use crate::blocking::{parse_timeout, wait_on_keys};
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::value::Value;
use crate::Cx;

/// Whether `key` holds a list now (a waiter is only served from a list; a key of another type
/// leaves it waiting, as in Redis).
fn holds_list(cx: &mut Cx<'_>, key: &[u8]) -> bool {
    let now = cx.now_ms();
    matches!(cx.db().peek(key, now), Some(e) if matches!(e.value, Value::List(_)))
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
    let serve = if front { serve_blpop } else { serve_brpop };
    wait_on_keys(
        cx,
        args,
        (1..last).map(|i| args.get(i)),
        deadline,
        serve,
        out,
    );
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

fn serve_blpop(
    cx: &mut Cx<'_>,
    key: &[u8],
    _: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> Result<bool, Error> {
    serve_bpop(cx, key, out, true)
}

fn serve_brpop(
    cx: &mut Cx<'_>,
    key: &[u8],
    _: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> Result<bool, Error> {
    serve_bpop(cx, key, out, false)
}

/// BLPOP key [key ...] timeout
pub(crate) fn blpop(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    bpop(cx, args, out, true)
}

/// BRPOP key [key ...] timeout
pub(crate) fn brpop(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    bpop(cx, args, out, false)
}

/// The sides of a BLMOVE (`LEFT|RIGHT LEFT|RIGHT` at 3 and 4) or BRPOPLPUSH (RIGHT, LEFT).
fn move_sides(args: &Argv<'_>) -> Result<(bool, bool), Error> {
    if args.len() == 6 {
        Ok((parse_side(args.get(3))?, parse_side(args.get(4))?))
    } else {
        Ok((false, true))
    }
}

/// BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout, and BRPOPLPUSH source
/// destination timeout: sides, then timeout, then the move; blocks on the source.
pub(crate) fn bmove(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (from, to) = move_sides(args)?;
    let deadline = parse_timeout(args.get(args.len() - 1), cx.now_ms())?;
    match move_one(cx, args.get(1), args.get(2), from, to)? {
        Some(v) => {
            propagate_bmove(cx, args);
            out.bulk(&v);
        }
        // Inside MULTI, Redis answers a null bulk here (not the null array of a timeout).
        None if !crate::blocking::may_block(cx) => out.null(),
        None => wait_on_keys(cx, args, [args.get(1)], deadline, serve_bmove, out),
    }
    Ok(())
}

/// Propagates BLMOVE as `LMOVE source destination from to`, BRPOPLPUSH as
/// `RPOPLPUSH source destination`.
fn propagate_bmove(cx: &mut Cx<'_>, args: &Argv<'_>) {
    let (src, dst) = (args.get(1), args.get(2));
    if args.len() == 6 {
        cx.propagate(&[b"LMOVE", src, dst, args.get(3), args.get(4)]);
    } else {
        cx.propagate(&[b"RPOPLPUSH", src, dst]);
    }
}

/// Serves a BLMOVE/BRPOPLPUSH waiter: moves to its destination (a destination of another type
/// answers WRONGTYPE and leaves the element for the next waiter, as Redis 7.0 does).
fn serve_bmove(
    cx: &mut Cx<'_>,
    key: &[u8],
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> Result<bool, Error> {
    if !holds_list(cx, key) {
        return Ok(false);
    }
    let (from, to) = move_sides(args)?;
    match move_one(cx, key, args.get(2), from, to)? {
        Some(v) => {
            propagate_bmove(cx, args);
            out.bulk(&v);
            Ok(true)
        }
        None => Ok(false),
    }
}

/// BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]: unlike BLPOP, the other
/// arguments are checked before the timeout.
pub(crate) fn blmpop(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let m = parse_mpop(args, 2)?;
    let deadline = parse_timeout(args.get(1), cx.now_ms())?;
    match mpop_try(cx, args, &m)? {
        Some((i, items)) => {
            propagate_pop(cx, end_pop(m.front), args.get(i), Some(items.len()));
            mpop_reply(out, args.get(i), &items);
        }
        None => {
            let keys = (m.first..m.first + m.numkeys).map(|i| args.get(i));
            wait_on_keys(cx, args, keys, deadline, serve_blmpop, out);
        }
    }
    Ok(())
}

/// Serves a BLMPOP waiter from `key` with its side and count.
fn serve_blmpop(
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
