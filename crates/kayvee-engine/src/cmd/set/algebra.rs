//! Set algebra: SINTER, SUNION, SDIFF, their STORE forms, and SINTERCARD.
//!
//! Every source key is looked up and type-checked first (one WRONGTYPE fails the command even
//! when an earlier key is missing, as in Redis). Sources are snapshots of the stored sets (O(1)
//! for a map, a copy of a small buffer), so a destination that is also a source is safe. A
//! result that is all integers and small enough is an intset, answered (and stored) in
//! ascending numeric order, as in Redis.

use super::{add_limits, set_add, set_entry};
use crate::argv::Argv;
use crate::cmd::notify::{class as nc, emit};
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::value::{Meta, Set, ValueRef};
use crate::Cx;
use alloc::vec::Vec;

/// Which operation.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Inter,
    Union,
    Diff,
}

/// Snapshots of the sets at `keys` (`None` for missing ones), or WRONGTYPE. Store forms too
/// look their sources up for reading (a miss counts, and sends `keymiss`), as Redis 7.0.15.
fn sources<'a>(
    cx: &mut Cx<'_>,
    keys: impl Iterator<Item = &'a [u8]>,
    write: bool,
) -> Result<Vec<Option<Set>>, Error> {
    let now = cx.now_ms();
    let db = cx.db();
    keys.map(|k| {
        let e = if write {
            db.lookup_write(k, now).map(|e| &*e)
        } else {
            db.lookup_read(k, now)
        };
        match e.map(|e| e.value()) {
            None => Ok(None),
            Some(ValueRef::Set(s)) => Ok(Some(s.clone())),
            Some(_) => Err(Error::WrongType),
        }
    })
    .collect()
}

/// Calls `f` on each member of the intersection, iterating the smallest set (nothing when
/// any set is missing), stopping after `limit` members when given (SINTERCARD); returns how
/// many it found.
fn intersect(sets: &[Option<Set>], limit: Option<usize>, mut f: impl FnMut(&[u8])) -> usize {
    let Some(mut sets) = sets
        .iter()
        .map(Option::as_ref)
        .collect::<Option<Vec<&Set>>>()
    else {
        return 0;
    };
    sets.sort_by_key(|s| s.len());
    let mut found = 0;
    for m in sets[0].iter() {
        if limit.is_some_and(|l| found >= l) {
            break;
        }
        if sets[1..].iter().all(|s| s.contains(&m)) {
            f(&m);
            found += 1;
        }
    }
    found
}

/// The result of `op` over `sets` (missing sets are empty), built as Redis 7.0 builds it: an
/// intset that converts on the first member that is not an integer or past
/// `set-max-intset-entries` (`limits` as [`set_add`] takes them).
fn compute(op: Op, sets: &[Option<Set>], limits: (u64, u64)) -> Set {
    let (mut acc, mut meta) = (Set::new(), Meta::default());
    let mut add = |m: &[u8]| {
        set_add(&mut acc, &mut meta, limits, m);
    };
    match op {
        Op::Inter => {
            intersect(sets, None, add);
        }
        Op::Union => sets
            .iter()
            .flatten()
            .flat_map(Set::iter)
            .for_each(|m| add(&m)),
        Op::Diff => {
            if let Some(Some(first)) = sets.first() {
                first
                    .iter()
                    .filter(|m| !sets[1..].iter().flatten().any(|s| s.contains(m)))
                    .for_each(|m| add(&m));
            }
        }
    }
    acc
}

/// SINTER / SUNION / SDIFF key [key ...]: the resulting members, in the result's order
/// (ascending when it is an intset, as Redis answers).
fn reply_op(cx: &mut Cx<'_>, args: &Argv<'_>, op: Op, out: &mut dyn ReplySink) -> CmdResult {
    let sets = sources(cx, args.iter().skip(1), false)?;
    let result = compute(op, &sets, add_limits(cx));
    out.set(result.len());
    result.iter().for_each(|m| out.bulk(&m));
    if op == Op::Inter {
        // Redis writes SINTER's length after its members (SUNION and SDIFF count first): all
        // of it counts against the client's output limit.
        cx.outcome = crate::Outcome::DeferredReply;
    }
    Ok(())
}

/// SINTERSTORE / SUNIONSTORE / SDIFFSTORE destination key [key ...]: stores the result
/// (replacing any value and its TTL) and answers its size; an empty result deletes the
/// destination.
fn store_op(cx: &mut Cx<'_>, args: &Argv<'_>, op: Op, out: &mut dyn ReplySink) -> CmdResult {
    let sets = sources(cx, args.iter().skip(2), false)?;
    let now = cx.now_ms();
    let result = compute(op, &sets, add_limits(cx));
    let dst = args.get(1);
    let event = match op {
        Op::Inter => "sinterstore",
        Op::Union => "sunionstore",
        Op::Diff => "sdiffstore",
    };
    if result.is_empty() {
        if cx.db().delete(dst) {
            cx.propagate_verbatim();
            emit(cx, nc::GENERIC, "del", dst);
        }
        out.int(0);
        return Ok(());
    }
    let n = result.len();
    let entry = set_entry(cx.db(), result, now);
    cx.db().store_result(dst, entry, now);
    cx.propagate_verbatim();
    emit(cx, nc::SET, event, dst);
    out.int(n as i64);
    Ok(())
}

/// SINTER key [key ...]
pub(super) fn sinter(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    reply_op(cx, args, Op::Inter, out)
}

/// SUNION key [key ...]
pub(super) fn sunion(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    reply_op(cx, args, Op::Union, out)
}

/// SDIFF key [key ...]
pub(super) fn sdiff(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    reply_op(cx, args, Op::Diff, out)
}

/// SINTERSTORE destination key [key ...]
pub(super) fn sinterstore(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    store_op(cx, args, Op::Inter, out)
}

/// SUNIONSTORE destination key [key ...]
pub(super) fn sunionstore(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    store_op(cx, args, Op::Union, out)
}

/// SDIFFSTORE destination key [key ...]
pub(super) fn sdiffstore(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    store_op(cx, args, Op::Diff, out)
}

/// SINTERCARD's arguments: (number of keys, limit or None), with Redis's texts.
fn parse_sintercard(args: &Argv<'_>) -> Result<(usize, Option<usize>), Error> {
    let numkeys = parse_i64(args.get(1))
        .filter(|&n| n >= 1)
        .ok_or(Error::msg("ERR numkeys should be greater than 0"))?;
    if numkeys > (args.len() - 2) as i64 {
        return Err(Error::msg(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    let numkeys = numkeys as usize;
    let mut limit = None;
    let mut i = 2 + numkeys;
    while i < args.len() {
        let value = args
            .try_get(i + 1)
            .filter(|_| args.get(i).eq_ignore_ascii_case(b"LIMIT"));
        let value = value.ok_or(Error::Syntax)?;
        let l = parse_i64(value)
            .filter(|&l| l >= 0)
            .ok_or(Error::msg("ERR LIMIT can't be negative"))?;
        limit = (l > 0).then(|| usize::try_from(l).unwrap_or(usize::MAX));
        i += 2;
    }
    Ok((numkeys, limit))
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit]: the intersection's size, stopping at
/// `limit` when nonzero.
pub(super) fn sintercard(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (numkeys, limit) = parse_sintercard(args)?;
    let sets = sources(cx, args.iter().skip(2).take(numkeys), false)?;
    out.int(intersect(&sets, limit, |_| {}) as i64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ArgvBuf;

    fn set_of(items: &[&str]) -> Option<Set> {
        let mut s = Set::new();
        items.iter().for_each(|m| {
            s.insert(m.as_bytes(), 512, 3);
        });
        Some(s)
    }

    fn sorted(s: Set) -> Vec<Vec<u8>> {
        let mut v: Vec<Vec<u8>> = s.iter().map(|m| m.to_vec()).collect();
        v.sort();
        v
    }

    #[test]
    fn algebra_matches_set_semantics() {
        let sets = [set_of(&["a", "b", "c"]), set_of(&["b", "c", "d"]), None];
        let b = |s: &[&str]| s.iter().map(|m| m.as_bytes().to_vec()).collect::<Vec<_>>();
        let l = (512, 1);
        assert_eq!(sorted(compute(Op::Inter, &sets[..2], l)), b(&["b", "c"]));
        assert!(
            compute(Op::Inter, &sets, l).is_empty(),
            "a missing key empties it"
        );
        assert_eq!(
            sorted(compute(Op::Union, &sets, l)),
            b(&["a", "b", "c", "d"])
        );
        assert_eq!(sorted(compute(Op::Diff, &sets, l)), b(&["a"]));
        assert!(compute(Op::Diff, &[None, set_of(&["a"])], l).is_empty());
        assert_eq!(intersect(&sets[..2], Some(1), |_| {}), 1);
        let ints = [set_of(&["3", "1", "x"]), set_of(&["2", "1", "3"])];
        let inter = compute(Op::Inter, &ints, l);
        assert!(inter.is_intset());
        assert_eq!(sorted(inter), b(&["1", "3"]));
        assert!(!compute(Op::Union, &ints, l).is_intset());
        assert!(
            !compute(Op::Inter, &ints, (1, 1)).is_intset(),
            "past the limit"
        );
    }

    #[test]
    fn sintercard_arguments() {
        let p = |l: &str| parse_sintercard(&ArgvBuf::from_line(l).argv());
        assert_eq!(p("SINTERCARD 2 a b"), Ok((2, None)));
        assert_eq!(p("SINTERCARD 1 a LIMIT 3 limit 0"), Ok((1, None)));
        assert_eq!(p("SINTERCARD 1 a LIMIT 3"), Ok((1, Some(3))));
        let numkeys = Err(Error::msg("ERR numkeys should be greater than 0"));
        assert_eq!(p("SINTERCARD 0 a"), numkeys);
        assert_eq!(p("SINTERCARD x a"), numkeys);
        assert!(p("SINTERCARD 3 a b").is_err());
        assert_eq!(p("SINTERCARD 1 a LIMIT"), Err(Error::Syntax));
        assert_eq!(p("SINTERCARD 1 a FOO 1"), Err(Error::Syntax));
        assert_eq!(
            p("SINTERCARD 1 a LIMIT -1"),
            Err(Error::msg("ERR LIMIT can't be negative"))
        );
    }
}
