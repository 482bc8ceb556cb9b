//! Sorted-set ranges: score ranges (`(1.5`, `-inf`, `+inf`), lexicographic ranges (`[a`,
//! `(a`, `-`, `+`) and ranks; ZRANGE with all its forms (BYSCORE, BYLEX, REV, LIMIT,
//! WITHSCORES), ZRANGESTORE, the legacy ZREVRANGE / Z[REV]RANGEBY{SCORE,LEX}, ZCOUNT,
//! ZLEXCOUNT and ZREMRANGEBY{RANK,SCORE,LEX}.
//!
//! Lexicographic ranges assume equal scores, as Redis documents. On a set with mixed scores
//! Redis's answer depends on its encoding: a listpack is scanned in order (the first member
//! at or above `min`, then on while at or below `max`), which is what is done here for
//! listpack-sized sets; for skiplist-sized ones a binary search stands in for the skiplist
//! descent (identical whenever the scores are equal).

use super::{drop_if_empty, read_zset, reply_scored, store_zset};
use crate::argv::Argv;
use crate::cmd::double::parse_range_score;
use crate::cmd::notify::{class as nc, emit, emptied_if_gone};
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::value::{Split, ValueMut, ZRef, ZSet};
use crate::Cx;
use alloc::vec::Vec;
use core::cmp::Ordering;
use kayvee_pds::SmallBytes;

/// A score interval.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ScoreRange {
    min: f64,
    max: f64,
    min_ex: bool,
    max_ex: bool,
}

impl ScoreRange {
    /// Parses `min` and `max` (each `[(]number`), or "min or max is not a float".
    pub(crate) fn parse(min: &[u8], max: &[u8]) -> Result<Self, Error> {
        let bad = || Error::msg("ERR min or max is not a float");
        let (min, min_ex) = Self::bound(min).ok_or_else(bad)?;
        let (max, max_ex) = Self::bound(max).ok_or_else(bad)?;
        Ok(ScoreRange {
            min,
            max,
            min_ex,
            max_ex,
        })
    }

    fn bound(s: &[u8]) -> Option<(f64, bool)> {
        match s.first() {
            Some(b'(') => Some((parse_range_score(&s[1..])?, true)),
            _ => Some((parse_range_score(s)?, false)),
        }
    }

    fn gte_min(&self, s: f64) -> bool {
        if self.min_ex {
            s > self.min
        } else {
            s >= self.min
        }
    }

    fn lte_max(&self, s: f64) -> bool {
        if self.max_ex {
            s < self.max
        } else {
            s <= self.max
        }
    }

    /// The ranks `lo..hi` of the members inside the range (`lo >= hi` when none).
    fn span(&self, zs: &ZSet) -> (usize, usize) {
        let lo = zs.partition_point(|e| !self.gte_min(e.0));
        let hi = zs.partition_point(|e| self.lte_max(e.0));
        (lo, hi.max(lo))
    }
}

/// One end of a lexicographic range.
#[derive(Clone, Debug)]
enum LexBound {
    /// `-`: below everything.
    Min,
    /// `+`: above everything.
    Max,
    /// `[x` (inclusive) or `(x` (exclusive).
    Member(SmallBytes, bool),
}

/// A lexicographic interval.
#[derive(Clone, Debug)]
pub(crate) struct LexRange {
    min: LexBound,
    max: LexBound,
}

impl LexRange {
    /// Parses `min` and `max`, or "min or max not valid string range item".
    pub(crate) fn parse(min: &[u8], max: &[u8]) -> Result<Self, Error> {
        let bad = || Error::msg("ERR min or max not valid string range item");
        Ok(LexRange {
            min: Self::bound(min).ok_or_else(bad)?,
            max: Self::bound(max).ok_or_else(bad)?,
        })
    }

    fn bound(s: &[u8]) -> Option<LexBound> {
        match s {
            [b'-'] => Some(LexBound::Min),
            [b'+'] => Some(LexBound::Max),
            [b'[', rest @ ..] => Some(LexBound::Member(SmallBytes::from_slice(rest), false)),
            [b'(', rest @ ..] => Some(LexBound::Member(SmallBytes::from_slice(rest), true)),
            _ => None,
        }
    }

    fn gte_min(&self, m: Split<'_>) -> bool {
        match &self.min {
            LexBound::Min => true,
            LexBound::Max => false,
            LexBound::Member(x, ex) => match m.cmp_bytes(x) {
                Ordering::Greater => true,
                Ordering::Equal => !ex,
                Ordering::Less => false,
            },
        }
    }

    fn lte_max(&self, m: Split<'_>) -> bool {
        match &self.max {
            LexBound::Max => true,
            LexBound::Min => false,
            LexBound::Member(x, ex) => match m.cmp_bytes(x) {
                Ordering::Less => true,
                Ordering::Equal => !ex,
                Ordering::Greater => false,
            },
        }
    }

    /// Whether the interval itself is empty (min above max, or equal with an open end).
    fn is_void(&self) -> bool {
        use core::cmp::Ordering::*;
        let (cmp, open) = match (&self.min, &self.max) {
            (LexBound::Min, LexBound::Min) | (LexBound::Max, LexBound::Max) => (Equal, true),
            (LexBound::Min, _) | (_, LexBound::Max) => (Less, false),
            (LexBound::Max, _) | (_, LexBound::Min) => (Greater, false),
            (LexBound::Member(a, ae), LexBound::Member(b, be)) => (a.cmp(b), *ae || *be),
        };
        cmp == Greater || (cmp == Equal && open)
    }

    /// Whether the set can hold members in range at all (Redis's quick rejection: the last
    /// member must be at or above `min` and the first at or below `max`).
    fn may_overlap(&self, zs: &ZSet) -> bool {
        match (zs.first(), zs.last()) {
            (Some(first), Some(last)) => {
                !self.is_void() && self.gte_min(last.1) && self.lte_max(first.1)
            }
            _ => false,
        }
    }

    /// The rank to start a forward walk from, if any member is in range.
    fn first_rank(&self, zs: &ZSet, big: bool) -> Option<usize> {
        if !self.may_overlap(zs) {
            return None;
        }
        let i = if big {
            zs.partition_point(|e| !self.gte_min(e.1))
        } else {
            zs.iter().position(|e| self.gte_min(e.1))?
        };
        let e = zs.nth(i)?;
        self.lte_max(e.1).then_some(i)
    }

    /// The rank to start a backward walk from, if any member is in range.
    fn last_rank(&self, zs: &ZSet, big: bool) -> Option<usize> {
        if !self.may_overlap(zs) {
            return None;
        }
        let i = if big {
            zs.partition_point(|e| self.lte_max(e.1)).checked_sub(1)?
        } else {
            zs.len() - 1 - zs.iter().rev().position(|e| self.lte_max(e.1))?
        };
        let e = zs.nth(i)?;
        self.gte_min(e.1).then_some(i)
    }

    /// The ranks `lo..hi` a forward walk covers.
    fn span(&self, zs: &ZSet, big: bool) -> (usize, usize) {
        match self.first_rank(zs, big) {
            None => (0, 0),
            Some(lo) => {
                let n = zs
                    .range_by_rank(lo, zs.len())
                    .take_while(|e| self.lte_max(e.1))
                    .count();
                (lo, lo + n)
            }
        }
    }
}

/// How a range is given.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Rank,
    Score,
    Lex,
}

/// A parsed range request.
enum Range {
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexRange),
}

/// ZRANGE's options after the range.
struct Opts {
    kind: Option<Kind>,
    rev: Option<bool>,
    scores: bool,
    limit: Option<(i64, i64)>,
}

/// Parses the options from `args[from..]`; `kind` / `rev` preset by the legacy commands
/// make the corresponding keywords syntax errors, as in Redis, and so does WITHSCORES when
/// storing.
fn parse_opts(
    args: &Argv<'_>,
    from: usize,
    (kind, rev): (Option<Kind>, Option<bool>),
    store: bool,
) -> Result<Opts, Error> {
    let mut o = Opts {
        kind,
        rev,
        scores: false,
        limit: None,
    };
    let mut i = from;
    while i < args.len() {
        let a = args.get(i).to_ascii_uppercase();
        let left = args.len() - i - 1;
        match a.as_slice() {
            b"WITHSCORES" if !store => o.scores = true,
            b"LIMIT" if left >= 2 => {
                let off = parse_i64(args.get(i + 1)).ok_or(Error::NotInteger)?;
                let cnt = parse_i64(args.get(i + 2)).ok_or(Error::NotInteger)?;
                o.limit = Some((off, cnt));
                i += 2;
            }
            b"REV" if o.rev.is_none() => o.rev = Some(true),
            b"BYLEX" if o.kind.is_none() => o.kind = Some(Kind::Lex),
            b"BYSCORE" if o.kind.is_none() => o.kind = Some(Kind::Score),
            _ => return Err(Error::Syntax),
        }
        i += 1;
    }
    Ok(o)
}

/// Checks option conflicts and parses the range (`min`, `max` as given, swapped for REV
/// score/lex ranges, which are written max first).
fn parse_range(o: &Opts, a: &[u8], b: &[u8]) -> Result<Range, Error> {
    let kind = o.kind.unwrap_or(Kind::Rank);
    let rev = o.rev.unwrap_or(false);
    // Redis notes a LIMIT by its count: `LIMIT x -1` reads as no limit at all.
    if o.limit.is_some_and(|(_, count)| count != -1) && kind == Kind::Rank {
        return Err(Error::msg(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if o.scores && kind == Kind::Lex {
        return Err(Error::msg(
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    let (min, max) = if rev && kind != Kind::Rank {
        (b, a)
    } else {
        (a, b)
    };
    Ok(match kind {
        Kind::Rank => Range::Rank(
            parse_i64(min).ok_or(Error::NotInteger)?,
            parse_i64(max).ok_or(Error::NotInteger)?,
        ),
        Kind::Score => Range::Score(ScoreRange::parse(min, max)?),
        Kind::Lex => Range::Lex(LexRange::parse(min, max)?),
    })
}

/// Normalises a rank range as Redis does (negative from the end, clamped); `None` = empty.
pub(crate) fn rank_span(len: usize, start: i64, end: i64) -> Option<(usize, usize)> {
    let len = len as i64;
    let start = if start < 0 {
        (start + len).max(0)
    } else {
        start
    };
    let end = if end < 0 { end + len } else { end };
    if start > end || start >= len {
        return None;
    }
    Some((start as usize, end.min(len - 1) as usize))
}

/// The members a range selects, in reply order.
fn select<'z>(
    zs: &'z ZSet,
    big: bool,
    range: &Range,
    rev: bool,
    limit: Option<(i64, i64)>,
) -> Vec<(Split<'z>, f64)> {
    let pair = |e: ZRef<'z>| (e.1, e.0);
    // A rank range only gets here with `LIMIT offset -1`, whose offset Redis ignores.
    let limit = limit.filter(|_| !matches!(range, Range::Rank(..)));
    let (off, cnt) = limit.unwrap_or((0, -1));
    if off < 0 {
        return Vec::new();
    }
    let take = if cnt < 0 { usize::MAX } else { cnt as usize };
    let off = usize::try_from(off).unwrap_or(usize::MAX);
    match range {
        Range::Rank(start, end) => {
            let Some((s, e)) = rank_span(zs.len(), *start, *end) else {
                return Vec::new();
            };
            if rev {
                let n = zs.len();
                zs.range_by_rank(n - 1 - e, n - s).rev().map(pair).collect()
            } else {
                zs.range_by_rank(s, e + 1).map(pair).collect()
            }
        }
        Range::Score(r) => {
            let (lo, hi) = r.span(zs);
            let it = zs.range_by_rank(lo, hi);
            if rev {
                it.rev().skip(off).take(take).map(pair).collect()
            } else {
                it.skip(off).take(take).map(pair).collect()
            }
        }
        Range::Lex(r) => {
            if rev {
                let Some(hi) = r.last_rank(zs, big) else {
                    return Vec::new();
                };
                let it = zs.range_by_rank(0, hi + 1).rev();
                it.skip(off)
                    .take_while(|e| r.gte_min(e.1))
                    .take(take)
                    .map(pair)
                    .collect()
            } else {
                let Some(lo) = r.first_rank(zs, big) else {
                    return Vec::new();
                };
                let it = zs.range_by_rank(lo, zs.len());
                it.skip(off)
                    .take_while(|e| r.lte_max(e.1))
                    .take(take)
                    .map(pair)
                    .collect()
            }
        }
    }
}

/// The shared body of every range-reading command: `src` is the source key's index, the
/// range follows it, options follow the range; `store` is the destination for ZRANGESTORE.
fn zrange_generic(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
    src: usize,
    preset: (Option<Kind>, Option<bool>),
    store: Option<&[u8]>,
) -> CmdResult {
    let o = parse_opts(args, src + 3, preset, store.is_some())?;
    let range = parse_range(&o, args.get(src + 1), args.get(src + 2))?;
    let found = read_zset(cx, args.get(src))?;
    let items = match &found {
        Some((zs, big)) => select(zs, *big, &range, o.rev.unwrap_or(false), o.limit),
        None => Vec::new(),
    };
    match store {
        Some(dst) => {
            let mut zs = ZSet::new(cx.core.seed);
            items.iter().for_each(|(m, s)| {
                zs.insert(&m.to_small_bytes(), *s);
            });
            let n = store_zset(cx, dst, zs);
            if n > 0 {
                cx.propagate_verbatim();
                emit(cx, nc::ZSET, "zrangestore", dst);
            }
            out.int(n as i64);
        }
        None => {
            reply_scored(out, &items, o.scores);
            if !matches!(range, Range::Rank(..)) {
                // Redis writes a score or lex range's length after its members: all of it
                // counts against the client's output limit.
                cx.outcome = crate::Outcome::DeferredReply;
            }
        }
    }
    Ok(())
}

/// ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES].
pub(super) fn zrange(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    zrange_generic(cx, args, out, 1, (None, None), None)
}

/// ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count].
pub(super) fn zrangestore(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let dst = args.get(1);
    zrange_generic(cx, args, out, 2, (None, None), Some(dst))
}

/// ZREVRANGE key start stop [WITHSCORES].
pub(super) fn zrevrange(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    zrange_generic(cx, args, out, 1, (Some(Kind::Rank), Some(true)), None)
}

/// ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count].
pub(crate) fn zrangebyscore(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> CmdResult {
    zrange_generic(cx, args, out, 1, (Some(Kind::Score), Some(false)), None)
}

/// ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count].
pub(crate) fn zrevrangebyscore(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> CmdResult {
    zrange_generic(cx, args, out, 1, (Some(Kind::Score), Some(true)), None)
}

/// ZRANGEBYLEX key min max [LIMIT offset count].
pub(super) fn zrangebylex(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    zrange_generic(cx, args, out, 1, (Some(Kind::Lex), Some(false)), None)
}

/// ZREVRANGEBYLEX key max min [LIMIT offset count].
pub(crate) fn zrevrangebylex(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> CmdResult {
    zrange_generic(cx, args, out, 1, (Some(Kind::Lex), Some(true)), None)
}

/// ZCOUNT key min max.
pub(super) fn zcount(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let r = ScoreRange::parse(args.get(2), args.get(3))?;
    let n = read_zset(cx, args.get(1))?.map_or(0, |(zs, _)| {
        let (lo, hi) = r.span(&zs);
        hi - lo
    });
    out.int(n as i64);
    Ok(())
}

/// ZLEXCOUNT key min max.
pub(super) fn zlexcount(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let r = LexRange::parse(args.get(2), args.get(3))?;
    let n = read_zset(cx, args.get(1))?.map_or(0, |(zs, big)| {
        let (lo, hi) = r.span(&zs, big);
        hi - lo
    });
    out.int(n as i64);
    Ok(())
}

/// Removes the members with ranks chosen by `span` from the set at `key`; replies the count.
fn remove_span(
    cx: &mut Cx<'_>,
    key: &[u8],
    out: &mut dyn ReplySink,
    event: &str,
    span: impl FnOnce(&ZSet, bool) -> (usize, usize),
) -> CmdResult {
    let now = cx.now_ms();
    let Some(entry) = cx.db().lookup_write(key, now) else {
        out.int(0);
        return Ok(());
    };
    let big = entry.meta().has(crate::value::Meta::BIG);
    let ValueMut::ZSet(zs) = entry.value_mut() else {
        return Err(Error::WrongType);
    };
    let (lo, hi) = span(zs, big);
    let n = zs.remove_rank_range(lo, hi);
    drop_if_empty(cx, key);
    if n > 0 {
        cx.propagate_verbatim();
        emit(cx, nc::ZSET, event, key);
        emptied_if_gone(cx, key);
    }
    out.int(n as i64);
    Ok(())
}

/// ZREMRANGEBYRANK key start stop.
pub(crate) fn zremrangebyrank(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> CmdResult {
    let start = parse_i64(args.get(2)).ok_or(Error::NotInteger)?;
    let end = parse_i64(args.get(3)).ok_or(Error::NotInteger)?;
    remove_span(cx, args.get(1), out, "zremrangebyrank", |zs, _| {
        rank_span(zs.len(), start, end).map_or((0, 0), |(s, e)| (s, e + 1))
    })
}

/// ZREMRANGEBYSCORE key min max.
pub(crate) fn zremrangebyscore(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> CmdResult {
    let r = ScoreRange::parse(args.get(2), args.get(3))?;
    remove_span(cx, args.get(1), out, "zremrangebyscore", |zs, _| r.span(zs))
}

/// ZREMRANGEBYLEX key min max.
pub(crate) fn zremrangebylex(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> CmdResult {
    let r = LexRange::parse(args.get(2), args.get(3))?;
    remove_span(cx, args.get(1), out, "zremrangebylex", |zs, big| {
        r.span(zs, big)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(items: &[(f64, &str)]) -> ZSet {
        let mut z = ZSet::new(7);
        for (s, m) in items {
            z.insert(m.as_bytes(), *s);
        }
        z
    }

    #[test]
    fn rank_spans_clamp_like_redis() {
        assert_eq!(rank_span(5, 0, -1), Some((0, 4)));
        assert_eq!(rank_span(5, -100, 100), Some((0, 4)));
        assert_eq!(rank_span(5, 3, 1), None);
        assert_eq!(rank_span(5, 5, 6), None);
        assert_eq!(rank_span(0, 0, -1), None);
    }

    #[test]
    fn score_spans_honour_open_ends() {
        let z = set(&[(1.0, "a"), (2.0, "b"), (3.0, "c")]);
        assert_eq!(ScoreRange::parse(b"(1", b"3").unwrap().span(&z), (1, 3));
        assert_eq!(ScoreRange::parse(b"-inf", b"(2").unwrap().span(&z), (0, 1));
        let (lo, hi) = ScoreRange::parse(b"(2", b"(2").unwrap().span(&z);
        assert_eq!(hi - lo, 0);
        assert!(ScoreRange::parse(b"x", b"1").is_err());
    }

    #[test]
    fn lex_ranges_scan_listpacks_in_order() {
        let z = set(&[(0.0, "a"), (0.0, "b"), (0.0, "c"), (0.0, "d")]);
        let r = LexRange::parse(b"[b", b"(d").unwrap();
        assert_eq!(r.span(&z, false), (1, 3));
        assert_eq!(r.span(&z, true), (1, 3));
        assert!(LexRange::parse(b"+", b"+").unwrap().is_void());
        assert!(LexRange::parse(b"b", b"+").is_err());
        let sel = select(&z, false, &Range::Lex(r), false, Some((1, 5)));
        assert_eq!(sel.len(), 1);
        assert_eq!(sel[0].0, b"c");
    }
}
