//! Random and incremental set access: SPOP, SRANDMEMBER, SSCAN.
//!
//! Randomness comes from the engine's seeded source (`Core::rng`), so a run is replayable.
//! Argument checks come in Redis's order: the count before the key, the key's type before a
//! zero count is served.

use super::read_set;
use crate::argv::Argv;
use crate::cmd::coll::{self, parse_rand_count};
use crate::cmd::notify::{class as nc, emit, emptied_if_gone};
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::value::{Member, Set, ValueMut, ValueRef};
use crate::{Core, Cx};
use alloc::vec::Vec;
use kayvee_pds::SmallBytes;

/// The set at `key` for reading through split borrows (so the caller can use the random
/// source too): `Ok(None)` when missing, WRONGTYPE for another type.
fn set_and_rng<'c>(
    cx: &'c mut Cx<'_>,
    key: &[u8],
    write: bool,
) -> Result<Option<(&'c mut Set, &'c mut crate::Rng)>, Error> {
    let (db_index, now) = (cx.db_index, cx.now_ms());
    let Core { dbs, rng, .. } = &mut *cx.core;
    let db = &mut dbs[db_index];
    let e = if write {
        db.lookup_write(key, now)
    } else {
        // A read counts a hit or a miss; the entry is then taken for the borrow below.
        if db.lookup_read(key, now).is_none() {
            return Ok(None);
        }
        db.keys.get_mut(key)
    };
    match e.map(|e| e.value_mut()) {
        None => Ok(None),
        Some(ValueMut::Set(s)) => Ok(Some((s, rng))),
        Some(_) => Err(Error::WrongType),
    }
}

/// Deletes `key` when its set is empty (after SPOP took the last members).
fn drop_if_empty(cx: &mut Cx<'_>, key: &[u8]) {
    let now = cx.now_ms();
    let db = cx.db();
    let empty =
        matches!(db.keys.get(key).map(|e| e.value()), Some(ValueRef::Set(s)) if s.is_empty());
    if empty {
        db.remove(key, now);
    }
}

/// SPOP key [count]: removes and returns one random member (null when missing), or up to
/// `count` distinct ones as a set reply.
pub(super) fn spop(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let key = args.get(1);
    match args.len() {
        2 => spop_one(cx, key, out),
        3 => {
            let count = parse_i64(args.get(2))
                .and_then(|n| usize::try_from(n).ok())
                .ok_or(Error::msg("ERR value is out of range, must be positive"))?;
            spop_count(cx, key, count, out)
        }
        _ => Err(Error::Syntax),
    }
}

/// SPOP key: one random member, or null.
fn spop_one(cx: &mut Cx<'_>, key: &[u8], out: &mut dyn ReplySink) -> CmdResult {
    let Some((s, rng)) = set_and_rng(cx, key, true)? else {
        out.null();
        return Ok(());
    };
    let m = s.pop_random(rng.next_u64());
    // A set left with members keeps its key: no need to look it up again below.
    let emptied = s.is_empty();
    match &m {
        Some(m) => out.bulk(m),
        None => out.null(),
    }
    if emptied {
        drop_if_empty(cx, key);
    }
    if let Some(m) = &m {
        // The random choice made deterministic: the member it removed.
        cx.propagate(&[b"SREM", key, m]);
        emit(cx, nc::SET, "spop", key);
        if emptied {
            emptied_if_gone(cx, key);
        }
    }
    Ok(())
}

/// SPOP key count: up to `count` distinct random members, removed.
fn spop_count(cx: &mut Cx<'_>, key: &[u8], count: usize, out: &mut dyn ReplySink) -> CmdResult {
    let Some((s, rng)) = set_and_rng(cx, key, true)? else {
        out.set(0);
        return Ok(());
    };
    if count >= s.len() {
        // The whole set, in its iteration order (numeric for an intset), as Redis answers.
        out.set(s.len());
        s.iter().for_each(|m| out.bulk(&m));
        let now = cx.now_ms();
        cx.db().remove(key, now);
        cx.propagate(&[b"DEL", key]);
        emit(cx, nc::SET, "spop", key);
        emptied_if_gone(cx, key);
        return Ok(());
    }
    let picked: Vec<SmallBytes> = coll::shuffle_prefix(s.iter().collect(), count, rng)
        .into_iter()
        .map(|m: Member<'_>| SmallBytes::from_slice(&m))
        .collect();
    for m in &picked {
        s.remove(m);
    }
    out.set(picked.len());
    picked.iter().for_each(|m| out.bulk(m));
    drop_if_empty(cx, key);
    let now = cx.now_ms();
    if !picked.is_empty() && !cx.db().contains(key, now) {
        cx.propagate(&[b"DEL", key]);
    } else {
        // One SREM per member: the call's commands go out in MULTI/EXEC.
        picked.iter().for_each(|m| cx.propagate(&[b"SREM", key, m]));
    }
    if !picked.is_empty() {
        emit(cx, nc::SET, "spop", key);
        emptied_if_gone(cx, key);
    }
    Ok(())
}

/// SRANDMEMBER key [count]: one random member (null when missing), or `count` members:
/// distinct when positive (at most all), with repeats when negative.
pub(super) fn srandmember(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let key = args.get(1);
    if args.len() > 3 {
        return Err(Error::Syntax);
    }
    if args.len() == 2 {
        match set_and_rng(cx, key, false)? {
            Some((s, rng)) => match s.random(rng.next_u64()) {
                Some(m) => out.bulk(&m),
                None => out.null(),
            },
            None => out.null(),
        }
        return Ok(());
    }
    let count = parse_rand_count(args.get(2), false)?;
    let draws = match count < 0 {
        true => coll::repeat_draws(cx, count, false, out)?,
        false => 0,
    };
    let Some((s, rng)) = set_and_rng(cx, key, false)?.filter(|_| count != 0) else {
        out.array(0);
        return Ok(());
    };
    let picked: Vec<Member<'_>> = if count > 0 && count as u64 >= s.len() as u64 {
        // The whole set, in its iteration order (numeric for an intset), as Redis answers.
        s.iter().collect()
    } else if count > 0 {
        let n = usize::try_from(count).unwrap_or(usize::MAX);
        coll::shuffle_prefix(s.iter().collect(), n, rng)
    } else {
        // Repeats: each draw is written as it is made (the count may be huge).
        out.array(draws);
        for _ in 0..draws {
            match s.random(rng.next_u64()) {
                Some(m) => out.bulk(&m),
                None => out.null(),
            }
        }
        return Ok(());
    };
    out.array(picked.len());
    picked.iter().for_each(|m| out.bulk(m));
    Ok(())
}

/// SSCAN key cursor [MATCH pattern] [COUNT count]: the next cursor and a batch of members (an
/// intset answers everything at once, in numeric order, with cursor 0).
pub(super) fn sscan(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    coll::parse_scan_cursor(args)?;
    let Some((s, _)) = read_set(cx, args.get(1))? else {
        coll::write_scan_head(out, 0, 0);
        return Ok(());
    };
    let scan = coll::parse_scan(args)?;
    let (next, found) = s.scan(scan.cursor, scan.count);
    let found: Vec<Member<'_>> = found.into_iter().filter(|m| scan.matches(m)).collect();
    coll::write_scan_head(out, next, found.len());
    found.iter().for_each(|m| out.bulk(m));
    Ok(())
}
