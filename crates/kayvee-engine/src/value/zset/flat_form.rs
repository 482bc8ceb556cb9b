//! The flat form of a sorted set: one exact-size buffer, the members' longest common prefix
//! once (`varint(len)` and its bytes), then the entries sorted by (score, member), each
//! `varint(suffix_len << 3 | code)`, the score in 1 to 8 bytes (see `value/flat.rs`'s score
//! codes), then the member's bytes after the prefix. An empty set is an empty buffer.
//!
//! Members sharing the prefix order as their suffixes do, so walks, lookups and inserts
//! compare suffixes only (a member that does not start with the prefix is not in the set),
//! and each member is lent as two slices ([`Split`]). The prefix is always the longest one:
//! an insert that breaks it and a removal that lengthens it re-encode the buffer (bounded by
//! the listpack limits, as every insert's splice is), so equal sets have equal buffers.

use super::{cmp_scored, ZRef};
use crate::value::flat::{
    get_bytes, get_scored, put_bytes, put_scored, put_scored_parts, put_varint, scored_len,
    skip_scored, splice,
};
use crate::value::split::Split;
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::cmp::Ordering;

/// Walks a flat buffer's entries forwards, with each entry's byte offsets.
pub(super) struct FlatWalk<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Iterator for FlatWalk<'a> {
    /// (start, end, score, member suffix).
    type Item = (usize, usize, f64, &'a [u8]);
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.at >= self.buf.len() {
            return None;
        }
        let start = self.at;
        let (s, m) = get_scored(self.buf, &mut self.at);
        Some((start, self.at, s, m))
    }
}

/// Walks a flat buffer's entries forwards without decoding their scores.
pub(super) struct Skim<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Iterator for Skim<'a> {
    /// (start, end, member suffix).
    type Item = (usize, usize, &'a [u8]);
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.at >= self.buf.len() {
            return None;
        }
        let start = self.at;
        let m = skip_scored(self.buf, &mut self.at);
        Some((start, self.at, m))
    }
}

/// A flat buffer's entries, scores left undecoded.
#[inline]
pub(super) fn skim(buf: &[u8]) -> Skim<'_> {
    Skim {
        buf,
        at: prefix(buf).1,
    }
}

/// A flat buffer's common prefix and the offset of its first entry (an empty buffer has
/// neither).
#[inline]
fn prefix(buf: &[u8]) -> (&[u8], usize) {
    if buf.is_empty() {
        return (&[], 0);
    }
    let mut at = 0;
    let p = get_bytes(buf, &mut at);
    (p, at)
}

/// A flat buffer's entries (members as suffixes of the prefix).
#[inline]
pub(super) fn walk(buf: &[u8]) -> FlatWalk<'_> {
    FlatWalk {
        buf,
        at: prefix(buf).1,
    }
}

/// A flat buffer's entries as (score, whole member).
#[inline]
pub(super) fn refs(buf: &[u8]) -> impl Iterator<Item = ZRef<'_>> {
    let (p, at) = prefix(buf);
    FlatWalk { buf, at }.map(move |e| ZRef(e.2, Split::new(p, e.3)))
}

/// The entry of `member` in a flat buffer: (start, end, score).
#[inline]
pub(super) fn find(buf: &[u8], member: &[u8]) -> Option<(usize, usize, f64)> {
    let (p, at) = prefix(buf);
    let rest = member.strip_prefix(p)?;
    find_suffix(buf, at, rest)
}

/// The entry whose member suffix is `rest`, walking from `at`: (start, end, score).
#[inline]
fn find_suffix(buf: &[u8], at: usize, rest: &[u8]) -> Option<(usize, usize, f64)> {
    let (start, end, _) = Skim { buf, at }.find(|e| e.2 == rest)?;
    Some((start, end, get_scored(buf, &mut { start }).0))
}

/// How many leading bytes `a` and `b` share.
#[inline]
fn common_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The bytes of `m` after its first `n`.
#[inline]
fn skip(m: Split<'_>, n: usize) -> Split<'_> {
    let h = n.min(m.head.len());
    Split::new(&m.head[h..], &m.tail[n - h..])
}

/// Re-encodes a flat buffer around a common prefix of `plen` bytes (which every member,
/// `new`'s included, must share), inserting `new` at its place when given. Used when the
/// longest common prefix changes: an insert that breaks it, a removal that lengthens it.
fn rebuild(buf: &mut Box<[u8]>, plen: usize, new: Option<(f64, &[u8])>) {
    let (p, at) = prefix(buf);
    let mut v = Vec::with_capacity(buf.len() + new.map_or(0, |n| n.1.len() + 10));
    let mut entries = FlatWalk { buf, at }.peekable();
    // The prefix's bytes: those of any member.
    let first = match (new, entries.peek()) {
        (Some((_, m)), _) => Split::whole(m),
        (None, Some(e)) => Split::new(p, e.3),
        (None, None) => {
            *buf = Box::default();
            return;
        }
    };
    put_varint(&mut v, plen);
    let head = first.head.len().min(plen);
    v.extend_from_slice(&first.head[..head]);
    v.extend_from_slice(&first.tail[..plen - head]);
    let mut new = new.map(|(s, m)| (s, &m[plen..]));
    for (_, _, s, suffix) in entries {
        let rest = skip(Split::new(p, suffix), plen);
        if let Some((ns, nm)) = new {
            let order = s.partial_cmp(&ns).unwrap_or(Ordering::Equal);
            if order.then_with(|| rest.cmp_bytes(nm)) == Ordering::Greater {
                put_scored(&mut v, ns, nm);
                new = None;
            }
        }
        put_scored_parts(&mut v, s, rest.head, rest.tail);
    }
    if let Some((ns, nm)) = new {
        put_scored(&mut v, ns, nm);
    }
    *buf = v.into_boxed_slice();
}

/// After a removal: the longest common prefix may have grown (or the set be empty), so the
/// buffer goes back to its one form. Cheap when the first two suffixes differ at once.
fn settle(buf: &mut Box<[u8]>) {
    let (p, at) = prefix(buf);
    let mut entries = Skim { buf, at };
    let Some(first) = entries.next() else {
        *buf = Box::default();
        return;
    };
    let mut more = first.2.len();
    while more > 0 {
        let Some(e) = entries.next() else { break };
        more = common_len(&first.2[..more], e.2);
    }
    if more > 0 {
        let plen = p.len() + more;
        rebuild(buf, plen, None);
    }
}

/// Inserts a member absent from a flat buffer or updates its score (`Some(old score)`).
pub(super) fn insert(buf: &mut Box<[u8]>, member: &[u8], score: f64) -> Option<f64> {
    let (p, at) = prefix(buf);
    if buf.is_empty() || !member.starts_with(p) {
        // A new member breaking the prefix: it becomes what the two have in common.
        let plen = if buf.is_empty() {
            member.len()
        } else {
            common_len(p, member)
        };
        rebuild(buf, plen, Some((score, member)));
        return None;
    }
    let rest = &member[p.len()..];
    let old = find_suffix(buf, at, rest);
    if let Some((_, _, o)) = old.filter(|o| o.2.to_bits() == score.to_bits()) {
        return Some(o); // same score: nothing moves (ZADD of an unchanged member)
    }
    if let Some((from, to, _)) = old {
        splice(buf, from, to, &[]);
    }
    let pos = FlatWalk { buf, at }
        .find(|e| cmp_scored((e.2, e.3), (score, rest)) == Ordering::Greater)
        .map_or(buf.len(), |e| e.0);
    let mut entry = Vec::with_capacity(scored_len(score, rest));
    put_scored(&mut entry, score, rest);
    splice(buf, pos, pos, &entry);
    old.map(|o| o.2)
}

/// A flat buffer holding the members `items()` gives, in (score, member) order (walked twice:
/// for the common prefix, then for the entries).
pub(super) fn encode<'a, I: Iterator<Item = (f64, &'a [u8])>>(items: impl Fn() -> I) -> Box<[u8]> {
    let mut all = items();
    let Some((_, m0)) = all.next() else {
        return Box::default();
    };
    let mut plen = m0.len();
    for (_, m) in all {
        if plen == 0 {
            break;
        }
        plen = common_len(&m0[..plen], m);
    }
    let mut v = Vec::new();
    put_bytes(&mut v, &m0[..plen]);
    for (s, m) in items() {
        put_scored(&mut v, s, &m[plen..]);
    }
    v.into_boxed_slice()
}

/// Removes a member from a flat buffer; returns its score.
pub(super) fn remove(buf: &mut Box<[u8]>, member: &[u8]) -> Option<f64> {
    let (from, to, s) = find(buf, member)?;
    splice(buf, from, to, &[]);
    settle(buf);
    Some(s)
}

/// Removes the entries with ranks `lo..hi` (clamped) from a flat buffer; returns how many.
pub(super) fn remove_ranks(buf: &mut Box<[u8]>, lo: usize, hi: usize) -> usize {
    let spans: Vec<(usize, usize)> = skim(buf)
        .skip(lo)
        .take(hi.saturating_sub(lo))
        .map(|e| (e.0, e.1))
        .collect();
    if let (Some(first), Some(last)) = (spans.first(), spans.last()) {
        splice(buf, first.0, last.1, &[]);
        settle(buf);
    }
    spans.len()
}

/// A member's rank in a flat buffer.
pub(super) fn rank(buf: &[u8], member: &[u8]) -> Option<usize> {
    let (p, at) = prefix(buf);
    let rest = member.strip_prefix(p)?;
    Skim { buf, at }.position(|e| e.2 == rest)
}

/// `ZSet::check_invariants` for the flat form.
pub(super) fn check(buf: &[u8]) {
    let all: Vec<_> = walk(buf).collect();
    assert_eq!(buf.is_empty(), all.is_empty(), "a prefix without entries");
    for w in all.windows(2) {
        assert!(
            cmp_scored((w[0].2, w[0].3), (w[1].2, w[1].3)) == Ordering::Less,
            "flat entries out of order"
        );
    }
    for (i, e) in all.iter().enumerate() {
        assert!(!e.2.is_nan(), "NaN score");
        assert!(all[..i].iter().all(|f| f.3 != e.3), "repeated member");
    }
    if let Some(first) = all.first() {
        let more = all
            .iter()
            .fold(first.3.len(), |n, e| common_len(&first.3[..n], e.3));
        assert_eq!(more, 0, "the prefix is not the longest common one");
    }
}

#[cfg(test)]
mod tests {
    use super::super::ZSet;
    use super::*;
    use crate::value::flat::varint_len;
    use alloc::{format, vec};
    use proptest::prelude::*;

    /// The model: (score, member) in Redis's order.
    type Model = Vec<(f64, Vec<u8>)>;

    /// One step.
    #[derive(Clone, Debug)]
    enum Op {
        Insert(Vec<u8>, f64),
        Remove(Vec<u8>),
        RemoveRanks(usize, usize),
        /// Back and forth through the tree form: the same buffer must come back.
        RoundTrip,
    }

    /// Members of three kinds: one shared prefix (`member:N`, the benchmark's), short strings
    /// over a small alphabet (partial prefixes, members that are prefixes of others, the empty
    /// member, bytes 0 and 255), and long ones that share all but their last byte.
    fn member() -> BoxedStrategy<Vec<u8>> {
        prop_oneof![
            (0u8..30).prop_map(|n| format!("member:{n}").into_bytes()),
            proptest::collection::vec(prop::sample::select(vec![b'a', b'b', 0, 255]), 0..5),
            (0u8..4).prop_map(|n| {
                let mut m = [b'k'; 40].to_vec();
                m.push(n);
                m
            }),
        ]
        .boxed()
    }

    /// Scores of every width, with many ties (ordered by member then).
    fn score() -> impl Strategy<Value = f64> {
        prop_oneof![
            (-3i32..4).prop_map(f64::from),
            (-3i32..4).prop_map(|i| f64::from(i) + 0.5),
            (-3i32..4).prop_map(|i| f64::from(i) / 3.0),
            (-3i32..4).prop_map(|i| f64::from(i) * 1e12),
            Just(-0.0),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
        ]
    }

    fn op(members: BoxedStrategy<Vec<u8>>) -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (members.clone(), score()).prop_map(|(m, s)| Op::Insert(m, s)),
            3 => members.prop_map(Op::Remove),
            1 => (0usize..12, 0usize..12).prop_map(|(a, b)| Op::RemoveRanks(a.min(b), a.max(b))),
            1 => Just(Op::RoundTrip),
        ]
    }

    /// The buffer's exact size: the longest common prefix once, then each entry as the old
    /// layout wrote it but for the prefix's bytes (so no shared prefix costs one byte more).
    fn expected_size(model: &Model) -> usize {
        let Some((_, m0)) = model.first() else {
            return 0;
        };
        let plen = model
            .iter()
            .fold(m0.len(), |n, (_, m)| common_len(&m0[..n], m));
        let entries: usize = model.iter().map(|(s, m)| scored_len(*s, &m[plen..])).sum();
        varint_len(plen) + plen + entries
    }

    fn flat_buf(z: &ZSet) -> &[u8] {
        match &z.0 {
            super::super::Repr::Flat(buf) => buf,
            super::super::Repr::Tree(_) => panic!("tree form"),
        }
    }

    /// Every read of the set against the model.
    fn check_against(z: &ZSet, model: &Model, probes: &[Vec<u8>]) {
        z.check_invariants();
        assert_eq!(z.len(), model.len());
        assert_eq!(z.is_empty(), model.is_empty());
        assert_eq!(z.heap_size(), expected_size(model));
        let got: Vec<ZRef<'_>> = z.iter().collect();
        for (i, (e, (s, m))) in got.iter().zip(model).enumerate() {
            assert_eq!(e.0.to_bits(), s.to_bits());
            assert!(e.1 == m[..] && e.1.to_vec() == *m);
            assert_eq!(z.rank(m), Some(i));
            assert_eq!(z.score(m).map(f64::to_bits), Some(s.to_bits()));
            assert_eq!(z.nth(i), Some(*e));
        }
        for w in got.windows(2) {
            let order = w[0].0.partial_cmp(&w[1].0).unwrap();
            assert_eq!(order.then(w[0].1.cmp(&w[1].1)), Ordering::Less);
        }
        assert_eq!(z.last(), got.last().copied());
        for p in probes {
            let at = model.iter().position(|(_, m)| m == p);
            assert_eq!(z.rank(p), at);
            assert_eq!(z.score(p).is_some(), at.is_some());
        }
    }

    fn model_insert(model: &mut Model, m: &[u8], s: f64) -> Option<f64> {
        let old = model
            .iter()
            .position(|e| e.1 == m)
            .map(|i| model.remove(i).0);
        let at = model.partition_point(|e| cmp_scored((e.0, &e.1), (s, m)) == Ordering::Less);
        model.insert(at, (s, m.to_vec()));
        old
    }

    fn run(ops: Vec<Op>) {
        let (mut z, mut model) = (ZSet::new_flat(), Model::new());
        let mut probes: Vec<Vec<u8>> = Vec::new();
        for op in ops {
            match op {
                Op::Insert(m, s) => {
                    let old = model_insert(&mut model, &m, s).map(f64::to_bits);
                    assert_eq!(z.insert(&m, s).map(f64::to_bits), old);
                    probes.push(m);
                }
                Op::Remove(m) => {
                    let at = model.iter().position(|e| e.1 == m);
                    let old = at.map(|i| model.remove(i).0.to_bits());
                    assert_eq!(z.remove(&m).map(f64::to_bits), old);
                    probes.push(m);
                }
                Op::RemoveRanks(lo, hi) => {
                    let n = model.len().min(hi).saturating_sub(lo);
                    model.drain(lo.min(model.len())..hi.min(model.len()));
                    assert_eq!(z.remove_rank_range(lo, hi), n);
                }
                Op::RoundTrip => {
                    let before = flat_buf(&z).to_vec();
                    let mut t = z.clone();
                    t.make_big(7);
                    t.make_flat();
                    assert_eq!(flat_buf(&t), &before[..]);
                }
            }
            check_against(&z, &model, &probes);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        #[test]
        fn flat_form_matches_a_sorted_vec(ops in proptest::collection::vec(op(member()), 1..60)) {
            run(ops);
        }

        /// Only `member:N`: the prefix stays shared, grows back after removals.
        #[test]
        fn shared_prefix_sets_match_a_sorted_vec(
            ops in proptest::collection::vec(op((0u8..12).prop_map(|n| format!("member:{n}").into_bytes()).boxed()), 1..60)
        ) {
            run(ops);
        }
    }

    /// The benchmark's set: 10 members `member:0..9` with scores `0.5..9.5` take 38 bytes
    /// (prefix 1 + 7, entries 3 each) where the layout without a prefix took 100.
    #[test]
    fn shared_prefix_shrinks_the_benchmark_set() {
        let mut z = ZSet::new_flat();
        for j in 0..10 {
            z.insert(format!("member:{j}").as_bytes(), f64::from(j) + 0.5);
        }
        assert_eq!(z.heap_size(), 38);
        assert_eq!(&flat_buf(&z)[..8], b"\x07member:");
        // A member without the prefix shortens it to what they share, and its removal
        // brings it back.
        z.insert(b"mem", 1.0);
        assert_eq!(&flat_buf(&z)[..4], b"\x03mem");
        z.remove(b"mem");
        assert_eq!(z.heap_size(), 38);
        z.check_invariants();
    }

    /// Without a shared prefix the buffer costs one byte more than before the prefix, and a
    /// set of one member is all prefix.
    #[test]
    fn no_shared_prefix_costs_one_byte() {
        let mut z = ZSet::new_flat();
        z.insert(b"alpha", 1.0);
        assert_eq!(flat_buf(&z), b"\x05alpha\x00\x01");
        z.insert(b"beta", 2.0);
        let old_layout = scored_len(1.0, b"alpha") + scored_len(2.0, b"beta");
        assert_eq!(z.heap_size(), old_layout + 1);
        z.remove(b"alpha");
        z.remove(b"beta");
        assert!(flat_buf(&z).is_empty());
    }
}
