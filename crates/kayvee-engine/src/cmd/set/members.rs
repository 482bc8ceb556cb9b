//! Set commands on members: SADD, SREM, SMEMBERS, SISMEMBER, SMISMEMBER, SCARD, SMOVE.
//! Replies follow Redis 7.0.15.

use super::{add_limits, read_set, set_add, write_set};
use crate::argv::Argv;
use crate::cmd::notify::{class as nc, emit, emptied_if_gone};
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::value::ValueRef;
use crate::Cx;

/// SADD key member [member ...]: the number of members added.
pub(super) fn sadd(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let limits = add_limits(cx);
    let added = write_set(cx, args.get(1), true, |s, meta| {
        Ok(args
            .iter()
            .skip(2)
            .filter(|m| set_add(s, meta, limits, m))
            .count())
    })?;
    if added.unwrap_or(0) > 0 {
        cx.propagate_verbatim();
        emit(cx, nc::SET, "sadd", args.get(1));
    }
    out.int(added.unwrap_or(0) as i64);
    Ok(())
}

/// SREM key member [member ...]: the number removed; an emptied set is deleted.
pub(super) fn srem(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let removed = write_set(cx, args.get(1), false, |s, _| {
        Ok(args.iter().skip(2).filter(|m| s.remove(m)).count())
    })?;
    if removed.unwrap_or(0) > 0 {
        cx.propagate_verbatim();
        emit(cx, nc::SET, "srem", args.get(1));
        emptied_if_gone(cx, args.get(1));
    }
    out.int(removed.unwrap_or(0) as i64);
    Ok(())
}

/// SMEMBERS key: every member (a set reply; empty for a missing key).
pub(super) fn smembers(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let Some((s, _)) = read_set(cx, args.get(1))? else {
        out.set(0);
        return Ok(());
    };
    out.set(s.len());
    s.iter().for_each(|m| out.bulk(&m));
    // Redis writes this reply's length after its elements: all of it counts against the
    // client's output limit.
    cx.outcome = crate::Outcome::DeferredReply;
    Ok(())
}

/// SISMEMBER key member: 1 or 0.
pub(super) fn sismember(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let found = read_set(cx, args.get(1))?.is_some_and(|(s, _)| s.contains(args.get(2)));
    out.int(i64::from(found));
    Ok(())
}

/// SMISMEMBER key member [member ...]: 1 or 0 per member.
pub(super) fn smismember(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let s = read_set(cx, args.get(1))?.map(|(s, _)| s);
    out.array(args.len() - 2);
    for m in args.iter().skip(2) {
        out.int(i64::from(s.is_some_and(|s| s.contains(m))));
    }
    Ok(())
}

/// SCARD key: the number of members.
pub(super) fn scard(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let n = read_set(cx, args.get(1))?.map_or(0, |(s, _)| s.len());
    out.int(n as i64);
    Ok(())
}

/// The type of the value at `key` for writing: `Some(is_set)`, or `None` when missing.
fn probe_set(cx: &mut Cx<'_>, key: &[u8]) -> Option<bool> {
    let now = cx.now_ms();
    let e = cx.db().lookup_write(key, now)?;
    Some(matches!(e.value(), ValueRef::Set(_)))
}

/// SMOVE source destination member: moves the member; 1 if it was in source, else 0. As in
/// Redis, a missing source answers 0 before the destination's type is checked, and a move onto
/// the same set only tests membership.
pub(super) fn smove(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (src, dst, member) = (args.get(1), args.get(2), args.get(3));
    let Some(src_is_set) = probe_set(cx, src) else {
        out.int(0);
        return Ok(());
    };
    if !src_is_set || probe_set(cx, dst) == Some(false) {
        return Err(Error::WrongType);
    }
    if src == dst {
        let found = read_set(cx, src)?.is_some_and(|(s, _)| s.contains(member));
        out.int(i64::from(found));
        return Ok(());
    }
    let moved = write_set(cx, src, false, |s, _| Ok(s.remove(member)))?;
    if moved != Some(true) {
        out.int(0);
        return Ok(());
    }
    cx.propagate_verbatim();
    emit(cx, nc::SET, "srem", src);
    emptied_if_gone(cx, src);
    let limits = add_limits(cx);
    let added = write_set(cx, dst, true, |s, meta| {
        Ok(set_add(s, meta, limits, member))
    })?;
    if added == Some(true) {
        cx.propagate_verbatim();
        emit(cx, nc::SET, "sadd", dst);
    }
    out.int(1);
    Ok(())
}
