//! Moving an element between lists: LMOVE, RPOPLPUSH and their blocking forms BLMOVE and
//! BRPOPLPUSH (served through [`crate::blocking`] as the blocking pops are).

use super::{
    as_list, as_list_mut, delete_if_empty, end_event, holds_list, pop_end, push_end, push_items,
};
use crate::argv::Argv;
use crate::cmd::block::{parse_timeout, wait_on_keys};
use crate::cmd::notify::{class as nc, emit, emptied};
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::Cx;
use kayvee_pds::SmallBytes;

/// LEFT (true) or RIGHT (false), else a syntax error.
fn parse_side(arg: &[u8]) -> Result<bool, Error> {
    if arg.eq_ignore_ascii_case(b"LEFT") {
        Ok(true)
    } else if arg.eq_ignore_ascii_case(b"RIGHT") {
        Ok(false)
    } else {
        Err(Error::Syntax)
    }
}

/// Moves one element from `src` (its head when `from_front`) to `dst` (its head when
/// `to_front`), creating `dst` and deleting an emptied `src`. `Ok(None)` when `src` is absent
/// (`dst` is not looked at then); WRONGTYPE for either, before anything moves. Signals `dst`.
fn move_one(
    cx: &mut Cx<'_>,
    src: &[u8],
    dst: &[u8],
    from_front: bool,
    to_front: bool,
) -> Result<Option<SmallBytes>, Error> {
    let (now, fill) = (cx.now_ms(), cx.core.config.list_max_listpack_size);
    let db = cx.db();
    match db.lookup_write(src, now) {
        None => return Ok(None),
        Some(e) => as_list(e)?,
    };
    if let Some(e) = db.lookup_write(dst, now) {
        as_list(e)?;
    }
    let l = as_list_mut(db.lookup_write(src, now).expect("checked"))?;
    let v = pop_end(l, from_front).expect("stored lists are never empty");
    // Events as Redis sends them: the push, then the pop, then `del` of an emptied source.
    let mut deleted = false;
    if src == dst {
        // A rotation: the key, its TTL and metadata stay.
        push_end(l, &v, to_front, fill);
        emit(cx, nc::LIST, end_event(true, to_front), dst);
    } else {
        deleted = delete_if_empty(db, src, now);
        push_items(cx, dst, core::iter::once(&v[..]), to_front, false)?;
    }
    emit(cx, nc::LIST, end_event(false, from_front), src);
    if deleted {
        emptied(cx, src);
    }
    let dbi = cx.db_index;
    crate::cmd::block::signal_key_ready(cx, dbi, dst);
    Ok(Some(v))
}

/// LMOVE source destination LEFT|RIGHT LEFT|RIGHT
pub(super) fn lmove(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (from, to) = (parse_side(args.get(3))?, parse_side(args.get(4))?);
    match move_one(cx, args.get(1), args.get(2), from, to)? {
        Some(v) => {
            cx.propagate_verbatim();
            out.bulk(&v);
        }
        None => out.null(),
    }
    Ok(())
}

/// RPOPLPUSH source destination: LMOVE source destination RIGHT LEFT.
pub(super) fn rpoplpush(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    match move_one(cx, args.get(1), args.get(2), false, true)? {
        Some(v) => {
            cx.propagate_verbatim();
            out.bulk(&v);
        }
        None => out.null(),
    }
    Ok(())
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
pub(super) fn bmove(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (from, to) = move_sides(args)?;
    let deadline = parse_timeout(args.get(args.len() - 1), cx.now_ms())?;
    match move_one(cx, args.get(1), args.get(2), from, to)? {
        Some(v) => {
            propagate_bmove(cx, args);
            out.bulk(&v);
        }
        // Inside MULTI, Redis answers a null bulk here (not the null array of a timeout).
        None if !crate::cmd::block::may_block(cx) => out.null(),
        None => wait_on_keys(cx, args, [args.get(1)], deadline, out),
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
pub(super) fn serve_bmove(
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
