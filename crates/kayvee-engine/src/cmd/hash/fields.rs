//! Hash commands on fields: HSET, HSETNX, HMSET, HGET, HMGET, HDEL, HLEN, HEXISTS, HGETALL,
//! HKEYS, HVALS, HSTRLEN. Replies follow Redis 7.0.15.

use super::{bulk, hash_put, read_hash, write_hash, HashLimits};
use crate::argv::Argv;
use crate::cmd::notify::{class as nc, emit};
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::Cx;

/// Sets the field/value pairs from argument 2 on; returns how many fields are new. An odd
/// number of them is the arity error of `name`.
fn set_pairs(cx: &mut Cx<'_>, args: &Argv<'_>, name: &str) -> Result<i64, Error> {
    if !args.len().is_multiple_of(2) {
        return Err(Error::WrongArity(name.into()));
    }
    let lim = HashLimits::of(cx);
    let added = write_hash(cx, args.get(1), true, |h, meta| {
        let mut added = 0;
        for i in (2..args.len()).step_by(2) {
            added += i64::from(hash_put(h, meta, lim, args.get(i), args.get(i + 1)));
        }
        Ok(added)
    })?;
    // A modification for WATCH even when every value was already there, as in Redis.
    let db = cx.db();
    db.modified(args.get(1));
    cx.propagate_verbatim();
    emit(cx, nc::HASH, "hset", args.get(1));
    Ok(added.unwrap_or(0))
}

/// HSET key field value [field value ...]: the number of new fields.
pub(super) fn hset(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let added = set_pairs(cx, args, "hset")?;
    out.int(added);
    Ok(())
}

/// HMSET key field value [field value ...]: HSET answering `+OK`.
pub(super) fn hmset(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    set_pairs(cx, args, "hmset")?;
    out.ok();
    Ok(())
}

/// HSETNX key field value: sets the field only when absent; 1 if set, 0 if not.
pub(super) fn hsetnx(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (field, value) = (args.get(2), args.get(3));
    let lim = HashLimits::of(cx);
    let set = write_hash(cx, args.get(1), true, |h, meta| {
        Ok(!h.contains_key(field) && hash_put(h, meta, lim, field, value))
    })?;
    if set == Some(true) {
        cx.propagate_verbatim();
        emit(cx, nc::HASH, "hset", args.get(1));
    }
    out.int(i64::from(set == Some(true)));
    Ok(())
}

/// HGET key field: the value, or null.
pub(super) fn hget(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    match read_hash(cx, args.get(1))?.and_then(|(h, _)| h.get(args.get(2))) {
        Some(v) => bulk(out, v),
        None => out.null(),
    }
    Ok(())
}

/// HMGET key field [field ...]: the values, null for missing fields (all null for a missing key).
pub(super) fn hmget(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let h = read_hash(cx, args.get(1))?.map(|(h, _)| h);
    out.array(args.len() - 2);
    for field in args.iter().skip(2) {
        match h.and_then(|h| h.get(field)) {
            Some(v) => bulk(out, v),
            None => out.null(),
        }
    }
    Ok(())
}

/// HDEL key field [field ...]: the number of fields removed; an emptied hash is deleted.
pub(super) fn hdel(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let removed = write_hash(cx, args.get(1), false, |h, _| {
        Ok(args.iter().skip(2).filter(|f| h.remove(f)).count())
    })?;
    if removed.unwrap_or(0) > 0 {
        cx.propagate_verbatim();
        emit(cx, nc::HASH, "hdel", args.get(1));
        crate::cmd::notify::emptied_if_gone(cx, args.get(1));
    }
    out.int(removed.unwrap_or(0) as i64);
    Ok(())
}

/// HLEN key: the number of fields (0 for a missing key).
pub(super) fn hlen(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let n = read_hash(cx, args.get(1))?.map_or(0, |(h, _)| h.len());
    out.int(n as i64);
    Ok(())
}

/// HEXISTS key field: 1 or 0.
pub(super) fn hexists(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let found = read_hash(cx, args.get(1))?.is_some_and(|(h, _)| h.contains_key(args.get(2)));
    out.int(i64::from(found));
    Ok(())
}

/// HSTRLEN key field: the value's length (0 when missing).
pub(super) fn hstrlen(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let len = read_hash(cx, args.get(1))?
        .and_then(|(h, _)| h.get(args.get(2)))
        .map_or(0, |v| v.len());
    out.int(len as i64);
    Ok(())
}

/// HGETALL key: a map of fields to values (a flat array in RESP2).
pub(super) fn hgetall(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let Some((h, _)) = read_hash(cx, args.get(1))? else {
        out.map(0);
        return Ok(());
    };
    out.map(h.len());
    h.for_each(|k, v| {
        bulk(out, k);
        bulk(out, v);
    });
    Ok(())
}

/// HKEYS key: the fields.
pub(super) fn hkeys(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    write_one_side(cx, args, true, out)
}

/// HVALS key: the values, in the same order as HKEYS's fields.
pub(super) fn hvals(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    write_one_side(cx, args, false, out)
}

/// HKEYS / HVALS: the fields (`fields`) or the values of the hash at argument 1, in the
/// hash's order (an empty array for a missing key).
fn write_one_side(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    fields: bool,
    out: &mut dyn ReplySink,
) -> CmdResult {
    let h = read_hash(cx, args.get(1))?.map(|(h, _)| h);
    out.array(h.map_or(0, |h| h.len()));
    if let Some(h) = h {
        h.for_each(|k, v| bulk(out, if fields { k } else { v }));
    }
    Ok(())
}
