//! Sorted-set algebra: ZUNION, ZINTER, ZDIFF, their STORE forms, and ZINTERCARD. Inputs may
//! be sorted sets or plain sets (whose members count with score 1); WEIGHTS multiply scores
//! and AGGREGATE SUM|MIN|MAX combines them. As in Redis, a NaN from `inf * 0` or
//! `inf + -inf` becomes 0, and union and intersection visit the inputs from the smallest to
//! the largest (which fixes the order of the floating-point sums).

use super::{reply_scored, store_zset};
use crate::argv::Argv;
use crate::cmd::double::parse_score;
use crate::cmd::notify::{class as nc, emit};
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::value::{Set, ValueRef, ZSet};
use crate::Cx;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use kayvee_pds::SmallBytes;

/// One input.
enum Src {
    Z(ZSet),
    S(Set),
    Missing,
}

impl Src {
    fn len(&self) -> usize {
        match self {
            Src::Z(z) => z.len(),
            Src::S(s) => s.len(),
            Src::Missing => 0,
        }
    }

    fn score(&self, m: &[u8]) -> Option<f64> {
        match self {
            Src::Z(z) => z.score(m),
            Src::S(s) => s.contains(m).then_some(1.0),
            Src::Missing => None,
        }
    }

    fn members(&self) -> Vec<(SmallBytes, f64)> {
        match self {
            Src::Z(z) => z.iter().map(|e| (e.1.to_small_bytes(), e.0)).collect(),
            Src::S(s) => s
                .iter()
                .map(|m| (SmallBytes::from_slice(&m), 1.0))
                .collect(),
            Src::Missing => Vec::new(),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy)]
enum Agg {
    Sum,
    Min,
    Max,
}

/// `a` combined with `b`; a NaN sum counts as 0.
fn aggregate(agg: Agg, a: f64, b: f64) -> f64 {
    match agg {
        Agg::Sum => {
            let s = a + b;
            if s.is_nan() {
                0.0
            } else {
                s
            }
        }
        Agg::Min => a.min(b),
        Agg::Max => a.max(b),
    }
}

/// `w * s`, with NaN as 0.
fn weighted(w: f64, s: f64) -> f64 {
    let v = w * s;
    if v.is_nan() {
        0.0
    } else {
        v
    }
}

/// Parses `numkeys` at `at` and checks it against the arguments left.
fn parse_numkeys(args: &Argv<'_>, at: usize, name: &str) -> Result<usize, Error> {
    let n = parse_i64(args.get(at)).ok_or(Error::NotInteger)?;
    if n < 1 {
        return Err(Error::msg(alloc::format!(
            "ERR at least 1 input key is needed for '{name}' command"
        )));
    }
    if n as u64 > (args.len() - at - 1) as u64 {
        return Err(Error::Syntax);
    }
    Ok(n as usize)
}

/// Looks up the input keys (a write lookup when storing, as Redis), checking their types.
fn load_sources(
    cx: &mut Cx<'_>,
    keys: impl Iterator<Item = SmallBytes>,
    write: bool,
) -> Result<Vec<Src>, Error> {
    let now = cx.now_ms();
    let mut srcs = Vec::new();
    for k in keys {
        let db = cx.db();
        let e = if write {
            db.lookup_write(&k, now).map(|e| &*e)
        } else {
            db.lookup_read(&k, now)
        };
        srcs.push(match e.map(|e| e.value()) {
            None => Src::Missing,
            Some(ValueRef::ZSet(z)) => Src::Z(z.clone()),
            Some(ValueRef::Set(s)) => Src::S(s.clone()),
            Some(_) => return Err(Error::WrongType),
        });
    }
    Ok(srcs)
}

/// The options after the keys.
struct Opts {
    weights: Vec<f64>,
    agg: Agg,
    scores: bool,
}

/// Parses WEIGHTS / AGGREGATE (not for ZDIFF) and WITHSCORES (not when storing).
fn parse_opts(args: &Argv<'_>, from: usize, n: usize, op: Op, store: bool) -> Result<Opts, Error> {
    let mut o = Opts {
        weights: alloc::vec![1.0; n],
        agg: Agg::Sum,
        scores: false,
    };
    let mut j = from;
    while j < args.len() {
        let left = args.len() - j - 1;
        let a = args.get(j).to_ascii_uppercase();
        match a.as_slice() {
            b"WEIGHTS" if op != Op::Diff && left >= n => {
                for i in 0..n {
                    o.weights[i] = parse_score(args.get(j + 1 + i))
                        .ok_or(Error::msg("ERR weight value is not a float"))?;
                }
                j += n;
            }
            b"AGGREGATE" if op != Op::Diff && left >= 1 => {
                o.agg = match args.get(j + 1).to_ascii_uppercase().as_slice() {
                    b"SUM" => Agg::Sum,
                    b"MIN" => Agg::Min,
                    b"MAX" => Agg::Max,
                    _ => return Err(Error::Syntax),
                };
                j += 1;
            }
            b"WITHSCORES" if !store => o.scores = true,
            _ => return Err(Error::Syntax),
        }
        j += 1;
    }
    Ok(o)
}

/// Computes the result of `op` over weighted inputs.
fn compute(op: Op, mut srcs: Vec<(Src, f64)>, agg: Agg, seed: u64) -> ZSet {
    let mut acc: BTreeMap<SmallBytes, f64> = BTreeMap::new();
    if op != Op::Diff {
        srcs.sort_by_key(|(s, _)| s.len());
    }
    match op {
        Op::Union => {
            for (src, w) in &srcs {
                for (m, s) in src.members() {
                    let v = weighted(*w, s);
                    acc.entry(m)
                        .and_modify(|t| *t = aggregate(agg, *t, v))
                        .or_insert(v);
                }
            }
        }
        Op::Inter => {
            let (first, w0) = &srcs[0];
            'members: for (m, s) in first.members() {
                let mut t = weighted(*w0, s);
                for (src, w) in &srcs[1..] {
                    match src.score(&m) {
                        Some(x) => t = aggregate(agg, t, weighted(*w, x)),
                        None => continue 'members,
                    }
                }
                acc.insert(m, t);
            }
        }
        Op::Diff => {
            let (first, _) = &srcs[0];
            for (m, s) in first.members() {
                if srcs[1..].iter().all(|(src, _)| src.score(&m).is_none()) {
                    acc.insert(m, s);
                }
            }
        }
    }
    let mut zs = ZSet::new(seed);
    for (m, s) in acc {
        zs.insert(&m, s);
    }
    zs
}

/// The shared body of ZUNION/ZINTER/ZDIFF[STORE].
fn setop(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
    op: Op,
    name: &str,
    store: bool,
) -> CmdResult {
    let at = if store { 2 } else { 1 };
    let n = parse_numkeys(args, at, name)?;
    let keys = (0..n).map(|i| SmallBytes::from_slice(args.get(at + 1 + i)));
    // Redis 7.0.15 reads the sources even when storing (a miss counts and sends `keymiss`).
    let srcs = load_sources(cx, keys, false)?;
    let o = parse_opts(args, at + 1 + n, n, op, store)?;
    let zs = compute(
        op,
        srcs.into_iter().zip(o.weights).collect(),
        o.agg,
        cx.core.seed,
    );
    if store {
        let len = store_zset(cx, args.get(1), zs);
        if len > 0 {
            cx.propagate_verbatim();
            emit(cx, nc::ZSET, name, args.get(1));
        }
        out.int(len as i64);
    } else {
        let items: Vec<(SmallBytes, f64)> =
            zs.iter().map(|e| (e.1.to_small_bytes(), e.0)).collect();
        reply_scored(out, &items, o.scores);
    }
    Ok(())
}

/// ZUNION numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES].
pub(super) fn zunion(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    setop(cx, args, out, Op::Union, "zunion", false)
}

/// ZINTER numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES].
pub(super) fn zinter(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    setop(cx, args, out, Op::Inter, "zinter", false)
}

/// ZDIFF numkeys key [key ...] [WITHSCORES].
pub(super) fn zdiff(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    setop(cx, args, out, Op::Diff, "zdiff", false)
}

/// ZUNIONSTORE dst numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX].
pub(super) fn zunionstore(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    setop(cx, args, out, Op::Union, "zunionstore", true)
}

/// ZINTERSTORE dst numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX].
pub(super) fn zinterstore(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    setop(cx, args, out, Op::Inter, "zinterstore", true)
}

/// ZDIFFSTORE dst numkeys key [key ...].
pub(super) fn zdiffstore(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    setop(cx, args, out, Op::Diff, "zdiffstore", true)
}

/// ZINTERCARD numkeys key [key ...] [LIMIT limit]: the intersection's size, counting stops
/// at `limit` (0 = no limit).
pub(super) fn zintercard(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let n = parse_numkeys(args, 1, "zintercard")?;
    let keys = (0..n).map(|i| SmallBytes::from_slice(args.get(2 + i)));
    let mut srcs = load_sources(cx, keys, false)?;
    let mut limit = 0usize;
    let mut j = 2 + n;
    while j < args.len() {
        if args.get(j).eq_ignore_ascii_case(b"LIMIT") && j + 1 < args.len() {
            let v = parse_i64(args.get(j + 1))
                .filter(|v| *v >= 0)
                .ok_or(Error::msg("ERR LIMIT can't be negative"))?;
            limit = v as usize;
            j += 2;
        } else {
            return Err(Error::Syntax);
        }
    }
    srcs.sort_by_key(Src::len);
    let mut count = 0usize;
    for (m, _) in srcs[0].members() {
        if srcs[1..].iter().all(|s| s.score(&m).is_some()) {
            count += 1;
            if limit != 0 && count >= limit {
                break;
            }
        }
    }
    out.int(count as i64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn z(items: &[(f64, &str)]) -> Src {
        let mut zs = ZSet::new(3);
        for (s, m) in items {
            zs.insert(m.as_bytes(), *s);
        }
        Src::Z(zs)
    }

    fn scores(zs: &ZSet) -> Vec<(Vec<u8>, f64)> {
        zs.iter().map(|e| (e.1.to_vec(), e.0)).collect()
    }

    #[test]
    fn union_sums_from_the_smallest_input_and_nan_is_zero() {
        let big = z(&[(1.0, "a"), (2.0, "b"), (3.0, "c")]);
        let pos = z(&[(f64::INFINITY, "a")]);
        let neg = z(&[(f64::NEG_INFINITY, "a")]);
        let r = compute(
            Op::Union,
            alloc::vec![(big, 1.0), (pos, 1.0), (neg, 1.0)],
            Agg::Sum,
            1,
        );
        assert_eq!(scores(&r)[0], (b"a".to_vec(), 1.0));
    }

    #[test]
    fn inter_and_diff() {
        let a = z(&[(1.0, "a"), (2.0, "b")]);
        let b = z(&[(5.0, "b"), (6.0, "c")]);
        let r = compute(Op::Inter, alloc::vec![(a, 2.0), (b, 1.0)], Agg::Max, 1);
        assert_eq!(scores(&r), alloc::vec![(b"b".to_vec(), 5.0)]);
        let a = z(&[(1.0, "a"), (2.0, "b")]);
        let b = z(&[(5.0, "b")]);
        let r = compute(Op::Diff, alloc::vec![(a, 1.0), (b, 1.0)], Agg::Sum, 1);
        assert_eq!(scores(&r), alloc::vec![(b"a".to_vec(), 1.0)]);
    }

    #[test]
    fn weight_times_inf_zero_is_zero() {
        assert_eq!(weighted(0.0, f64::INFINITY), 0.0);
        assert_eq!(aggregate(Agg::Sum, f64::INFINITY, f64::NEG_INFINITY), 0.0);
    }
}
