//! Sorted-set commands on single members: ZADD, ZINCRBY, ZREM, ZSCORE, ZMSCORE, ZCARD, ZRANK,
//! ZREVRANK (Redis 7.0.15 semantics).

use super::{as_zset, drop_if_empty, fits_listpack, note_growth, read_zset, signal_zset_ready};
use crate::argv::Argv;
use crate::cmd::double::parse_score;
use crate::cmd::notify::{class as nc, emit, emptied_if_gone};
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::value::{Meta, Value, ValueMut, ZSet};
use crate::Cx;
use alloc::vec::Vec;

/// ZADD's flags.
#[derive(Default)]
struct ZaddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

/// Parses ZADD's leading flags; returns them and the index of the first score.
fn parse_zadd_flags(args: &Argv<'_>) -> (ZaddFlags, usize) {
    let mut f = ZaddFlags::default();
    let mut i = 2;
    while i < args.len() {
        let a = args.get(i);
        let flag = match a.to_ascii_uppercase().as_slice() {
            b"NX" => &mut f.nx,
            b"XX" => &mut f.xx,
            b"GT" => &mut f.gt,
            b"LT" => &mut f.lt,
            b"CH" => &mut f.ch,
            b"INCR" => &mut f.incr,
            _ => break,
        };
        *flag = true;
        i += 1;
    }
    (f, i)
}

/// ZADD's (score, member) pairs.
type Pairs<'a> = Vec<(f64, &'a [u8])>;

/// Validates ZADD's arguments in Redis's order; returns the (score, member) pairs.
fn parse_zadd<'a>(args: &Argv<'a>) -> Result<(ZaddFlags, Pairs<'a>), Error> {
    let (f, first) = parse_zadd_flags(args);
    let rest = args.len() - first;
    if !rest.is_multiple_of(2) || rest == 0 {
        return Err(Error::Syntax);
    }
    if f.nx && f.xx {
        return Err(Error::msg(
            "ERR XX and NX options at the same time are not compatible",
        ));
    }
    if (f.nx && (f.gt || f.lt)) || (f.gt && f.lt) {
        return Err(Error::msg(
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if f.incr && rest > 2 {
        return Err(Error::msg(
            "ERR INCR option supports a single increment-element pair",
        ));
    }
    let mut pairs = Vec::with_capacity(rest / 2);
    for i in (first..args.len()).step_by(2) {
        let score = parse_score(args.get(i)).ok_or(Error::NotFloat)?;
        pairs.push((score, args.get(i + 1)));
    }
    Ok((f, pairs))
}

/// What one ZADD element did.
enum Added {
    New,
    Updated,
    Same,
    Skipped,
}

/// Applies one (score, member) to `zs` under ZADD's flags (`big`: the set is or becomes a
/// skiplist); returns what happened and the score computed (the reply's, which may differ
/// from the stored one in the sign of a zero). `Err` = the increment made NaN.
fn zadd_one(
    zs: &mut ZSet,
    f: &ZaddFlags,
    score: f64,
    member: &[u8],
    big: bool,
) -> Result<(Added, f64), ()> {
    match zs.score(member) {
        Some(old) => {
            if f.nx {
                return Ok((Added::Skipped, old));
            }
            let new = if f.incr { old + score } else { score };
            if new.is_nan() {
                return Err(());
            }
            if (f.lt && new >= old) || (f.gt && new <= old) {
                return Ok((Added::Skipped, old));
            }
            if new == old {
                return Ok((Added::Same, new));
            }
            zs.insert(member, stored_score(new, big));
            Ok((Added::Updated, new))
        }
        None if f.xx => Ok((Added::Skipped, 0.0)),
        None => {
            zs.insert(member, stored_score(score, big));
            Ok((Added::New, score))
        }
    }
}

/// The listpack encoding keeps no sign on a zero score (`-0` reads back as `0`); the
/// skiplist keeps the double as is.
fn stored_score(score: f64, big: bool) -> f64 {
    if score == 0.0 && !big {
        0.0
    } else {
        score
    }
}

/// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...].
pub(crate) fn zadd(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (f, pairs) = parse_zadd(args)?;
    let key = args.get(1);
    let now = cx.now_ms();
    let seed = cx.core.seed;
    let (db, config) = (&mut cx.core.dbs[cx.db_index], &cx.core.config);
    let exists = match db.lookup_write(key, now) {
        Some(e) => {
            as_zset(e)?;
            true
        }
        None => false,
    };
    if !exists {
        if f.xx {
            reply_zadd_nothing(&f, out);
            return Ok(());
        }
        let entry = db.new_entry(Value::ZSet(ZSet::new_flat()), now);
        db.insert_entry(key, entry, None);
    }
    let entry = db.lookup_write(key, now).expect("just checked");
    let (mut added, mut changed, mut last) = (0, 0, None);
    for (score, member) in pairs {
        let (ValueMut::ZSet(zs), meta) = entry.parts_mut() else {
            unreachable!("type checked");
        };
        let big = meta.has(Meta::BIG) || !fits_listpack(config, zs.len() + 1, member.len());
        let before = zs.len();
        match zadd_one(zs, &f, score, member, big) {
            Err(()) => {
                drop_if_empty(cx, key);
                return Err(Error::msg("ERR resulting score is not a number (NaN)"));
            }
            Ok((what, s)) => {
                if zs.len() > before {
                    note_growth(config, entry, member.len(), seed);
                }
                match what {
                    Added::New => added += 1,
                    Added::Updated => changed += 1,
                    _ => {}
                }
                last = (!matches!(what, Added::Skipped)).then_some(s);
            }
        }
    }
    if f.incr {
        match last {
            Some(s) => out.double(s),
            None => out.null(),
        }
    } else {
        out.int(if f.ch { added + changed } else { added });
    }
    drop_if_empty(cx, key);
    if added + changed > 0 {
        cx.propagate_verbatim();
        emit(cx, nc::ZSET, if f.incr { "zincr" } else { "zadd" }, key);
    }
    signal_zset_ready(cx, key);
    Ok(())
}

/// ZADD's reply when nothing was done (XX on a missing key).
fn reply_zadd_nothing(f: &ZaddFlags, out: &mut dyn ReplySink) {
    if f.incr {
        out.null();
    } else {
        out.int(0);
    }
}

/// ZINCRBY key increment member: ZADD INCR without flags.
pub(super) fn zincrby(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let incr = parse_score(args.get(2)).ok_or(Error::NotFloat)?;
    let (key, member) = (args.get(1), args.get(3));
    let now = cx.now_ms();
    let seed = cx.core.seed;
    let (db, config) = (&mut cx.core.dbs[cx.db_index], &cx.core.config);
    match db.lookup_write(key, now) {
        Some(e) => {
            as_zset(e)?;
        }
        None => {
            let entry = db.new_entry(Value::ZSet(ZSet::new_flat()), now);
            db.insert_entry(key, entry, None);
        }
    }
    let entry = db.lookup_write(key, now).expect("just checked");
    let (ValueMut::ZSet(zs), meta) = entry.parts_mut() else {
        unreachable!("type checked");
    };
    let was_big = meta.has(Meta::BIG);
    let old = zs.score(member);
    let new = old.map_or(incr, |old| old + incr);
    if new.is_nan() {
        drop_if_empty(cx, key);
        return Err(Error::msg("ERR resulting score is not a number (NaN)"));
    }
    let big = was_big || !fits_listpack(config, zs.len() + 1, member.len());
    if zs.insert(member, stored_score(new, big)).is_none() {
        note_growth(config, entry, member.len(), seed);
    }
    out.double(new);
    // An increment that leaves the score as it was changes nothing: no event, nothing
    // propagated, as in Redis.
    if old != Some(new) {
        cx.propagate_verbatim();
        emit(cx, nc::ZSET, "zincr", key);
    }
    signal_zset_ready(cx, key);
    Ok(())
}

/// ZREM key member [member ...]: how many were removed; the key goes when emptied.
pub(super) fn zrem(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let key = args.get(1);
    let now = cx.now_ms();
    let Some(entry) = cx.db().lookup_write(key, now) else {
        out.int(0);
        return Ok(());
    };
    let ValueMut::ZSet(zs) = entry.value_mut() else {
        return Err(Error::WrongType);
    };
    let removed = args
        .iter()
        .skip(2)
        .filter(|m| zs.remove(m).is_some())
        .count();
    drop_if_empty(cx, key);
    if removed > 0 {
        cx.propagate_verbatim();
        emit(cx, nc::ZSET, "zrem", key);
        emptied_if_gone(cx, key);
    }
    out.int(removed as i64);
    Ok(())
}

/// ZSCORE key member.
pub(super) fn zscore(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    match read_zset(cx, args.get(1))?.and_then(|(z, _)| z.score(args.get(2))) {
        Some(s) => out.double(s),
        None => out.null(),
    }
    Ok(())
}

/// ZMSCORE key member [member ...]: a score or nil per member.
pub(super) fn zmscore(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let zs = read_zset(cx, args.get(1))?;
    out.array(args.len() - 2);
    for m in args.iter().skip(2) {
        match zs.as_ref().and_then(|(z, _)| z.score(m)) {
            Some(s) => out.double(s),
            None => out.null(),
        }
    }
    Ok(())
}

/// ZCARD key.
pub(super) fn zcard(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let n = read_zset(cx, args.get(1))?.map_or(0, |(z, _)| z.len());
    out.int(n as i64);
    Ok(())
}

/// ZRANK key member / ZREVRANK: the 0-based rank, or nil.
fn rank(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink, rev: bool) -> CmdResult {
    let member = args.get(2);
    let found = read_zset(cx, args.get(1))?.and_then(|(z, _)| {
        let r = z.rank(member)?;
        Some(if rev { z.len() - 1 - r } else { r })
    });
    match found {
        Some(r) => out.int(r as i64),
        None => out.null(),
    }
    Ok(())
}

pub(super) fn zrank(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    rank(cx, args, out, false)
}

pub(super) fn zrevrank(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    rank(cx, args, out, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zadd_one_honours_gt_lt_nx_xx() {
        let mut z = ZSet::new(1);
        let plain = ZaddFlags::default();
        assert!(matches!(
            zadd_one(&mut z, &plain, 5.0, b"a", false),
            Ok((Added::New, _))
        ));
        let gt = ZaddFlags {
            gt: true,
            ..Default::default()
        };
        assert!(matches!(
            zadd_one(&mut z, &gt, 4.0, b"a", false),
            Ok((Added::Skipped, _))
        ));
        assert!(matches!(
            zadd_one(&mut z, &gt, 6.0, b"a", false),
            Ok((Added::Updated, _))
        ));
        let xx = ZaddFlags {
            xx: true,
            ..Default::default()
        };
        assert!(matches!(
            zadd_one(&mut z, &xx, 1.0, b"b", false),
            Ok((Added::Skipped, _))
        ));
        let incr = ZaddFlags {
            incr: true,
            ..Default::default()
        };
        z.insert(b"i", f64::INFINITY);
        assert!(zadd_one(&mut z, &incr, f64::NEG_INFINITY, b"i", false).is_err());
        assert_eq!(z.score(b"a"), Some(6.0));
        z.check_invariants();
    }

    #[test]
    fn listpack_drops_the_sign_of_zero() {
        assert!(stored_score(-0.0, false).is_sign_positive());
        assert!(stored_score(-0.0, true).is_sign_negative());
    }
}
