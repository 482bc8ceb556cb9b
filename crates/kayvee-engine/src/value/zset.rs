//! `ZSet`: a sorted set, flat while Redis would keep a listpack, a map plus an ordered tree
//! after.
//!
//! The flat form (`flat_form`) is one exact-size buffer: the members' longest common prefix
//! once, then the entries sorted by (score, member), each the score in 1 to 8 bytes (the
//! narrowest of integers, tenths, `f32` and `f64` that gives it back bit for bit, see
//! [`super::flat`]) and the member's bytes after the prefix; members are lent as two slices
//! ([`Split`]). Lookups are linear (at most `zset-max-listpack-entries` entries). The tree
//! form keeps member -> score in a persistent map and the (score, member) order with ranks in
//! a persistent ordered set (its members lent with an empty head). Conversions are one way,
//! as Redis's, see [`super::Value::normalize`].

mod flat_form;

use super::split::Split;
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::cmp::Ordering;
use kayvee_pds::{PMap, POrdSet, SmallBytes};

/// A sorted set.
#[derive(Clone)]
pub struct ZSet(Repr);

/// The two representations.
#[derive(Clone)]
enum Repr {
    /// Sorted entries in one buffer (`listpack`).
    Flat(Box<[u8]>),
    /// Map and ordered tree (`skiplist`).
    Tree(Box<ZTree>),
}

/// The tree form: member to score, and the (score, member) order with ranks.
#[derive(Clone, Debug, PartialEq)]
pub struct ZTree {
    /// Member to score.
    pub scores: PMap<SmallBytes, f64>,
    /// Members ordered by (score, member), with rank queries.
    pub order: POrdSet<ScoreMember>,
}

/// A member and its score, borrowed from the set (the member in two parts, see [`Split`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ZRef<'a>(pub f64, pub Split<'a>);

/// Redis's order: by score (`-0.0` equal to `0.0`), then member bytes.
#[inline]
pub fn cmp_scored(a: (f64, &[u8]), b: (f64, &[u8])) -> Ordering {
    a.0.partial_cmp(&b.0)
        .unwrap_or(Ordering::Equal)
        .then_with(|| a.1.cmp(b.1))
}

/// A sorted-set element in Redis's order: by score, then by member bytes. Scores are never NaN,
/// and `-0.0` equals `0.0` here as in Redis's comparisons (the stored score keeps its sign).
#[derive(Clone, Debug)]
pub struct ScoreMember(pub f64, pub SmallBytes);

impl PartialEq for ScoreMember {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for ScoreMember {}
impl PartialOrd for ScoreMember {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ScoreMember {
    fn cmp(&self, other: &Self) -> Ordering {
        cmp_scored((self.0, &self.1), (other.0, &other.1))
    }
}

/// One of two iterators (flat or tree), itself an iterator with both ends and a length.
pub enum Either<L, R> {
    /// The flat form's.
    L(L),
    /// The tree form's.
    R(R),
}

impl<T, L: Iterator<Item = T>, R: Iterator<Item = T>> Iterator for Either<L, R> {
    type Item = T;
    #[inline]
    fn next(&mut self) -> Option<T> {
        match self {
            Either::L(l) => l.next(),
            Either::R(r) => r.next(),
        }
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Either::L(l) => l.size_hint(),
            Either::R(r) => r.size_hint(),
        }
    }
    /// One match for the whole walk (`for_each` and the adapters built on it), not one per item.
    #[inline]
    fn fold<B, F: FnMut(B, T) -> B>(self, init: B, f: F) -> B {
        match self {
            Either::L(l) => l.fold(init, f),
            Either::R(r) => r.fold(init, f),
        }
    }
}

impl<T, L: DoubleEndedIterator<Item = T>, R: DoubleEndedIterator<Item = T>> DoubleEndedIterator
    for Either<L, R>
{
    #[inline]
    fn next_back(&mut self) -> Option<T> {
        match self {
            Either::L(l) => l.next_back(),
            Either::R(r) => r.next_back(),
        }
    }
}

impl<T, L: ExactSizeIterator<Item = T>, R: ExactSizeIterator<Item = T>> ExactSizeIterator
    for Either<L, R>
{
}

impl ZSet {
    /// An empty tree-form sorted set whose member map hashes with `seed` (for computed
    /// results and loads; the engine flattens those that fit a listpack).
    pub fn new(seed: u64) -> Self {
        ZSet(Repr::Tree(Box::new(ZTree {
            scores: PMap::with_seed(seed),
            order: POrdSet::new(),
        })))
    }

    /// An empty flat sorted set (no allocation until the first member).
    pub fn new_flat() -> Self {
        ZSet(Repr::Flat(Box::default()))
    }

    /// Whether this is the tree form.
    pub fn is_big(&self) -> bool {
        matches!(self.0, Repr::Tree(_))
    }

    /// Converts to the tree form (no-op when already there).
    pub fn make_big(&mut self, seed: u64) {
        if let Repr::Flat(buf) = &self.0 {
            let mut t = ZTree {
                scores: PMap::with_seed(seed),
                order: POrdSet::new(),
            };
            for e in flat_form::refs(buf) {
                let m = e.1.to_small_bytes();
                t.scores.insert(m.clone(), e.0);
                t.order.insert(ScoreMember(e.0, m));
            }
            self.0 = Repr::Tree(Box::new(t));
        }
    }

    /// Converts to the flat form (for new values that fit a listpack; no-op when flat).
    pub fn make_flat(&mut self) {
        if let Repr::Tree(t) = &self.0 {
            let buf = flat_form::encode(|| t.order.iter().map(|e| (e.0, &e.1[..])));
            self.0 = Repr::Flat(buf);
        }
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Flat(buf) => flat_form::skim(buf).count(),
            Repr::Tree(t) => t.scores.len(),
        }
    }

    /// Whether there is no member.
    pub fn is_empty(&self) -> bool {
        match &self.0 {
            Repr::Flat(buf) => buf.is_empty(),
            Repr::Tree(t) => t.scores.is_empty(),
        }
    }

    /// A member's score.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match &self.0 {
            Repr::Flat(buf) => flat_form::find(buf, member).map(|e| e.2),
            Repr::Tree(t) => t.scores.get(member).copied(),
        }
    }

    /// Sets a member's score (adding it when new); returns the previous score.
    pub fn insert(&mut self, member: &[u8], score: f64) -> Option<f64> {
        match &mut self.0 {
            Repr::Flat(buf) => flat_form::insert(buf, member, score),
            Repr::Tree(t) => {
                let key = SmallBytes::from_slice(member);
                let old = t.scores.insert(key.clone(), score);
                if let Some(o) = old {
                    t.order.remove(&ScoreMember(o, key.clone()));
                }
                t.order.insert(ScoreMember(score, key));
                old
            }
        }
    }

    /// Removes a member; returns its score.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        match &mut self.0 {
            Repr::Flat(buf) => flat_form::remove(buf, member),
            Repr::Tree(t) => {
                let (key, score) = t.scores.remove(member)?;
                t.order.remove(&ScoreMember(score, key));
                Some(score)
            }
        }
    }

    /// Removes the members with ranks `lo..hi` (clamped); returns how many.
    pub fn remove_rank_range(&mut self, lo: usize, hi: usize) -> usize {
        match &mut self.0 {
            Repr::Flat(buf) => flat_form::remove_ranks(buf, lo, hi),
            Repr::Tree(t) => {
                let gone: Vec<SmallBytes> =
                    t.order.range_by_rank(lo, hi).map(|e| e.1.clone()).collect();
                for m in &gone {
                    t.scores.remove(&m[..]);
                }
                t.order.remove_range_by_rank(lo, hi)
            }
        }
    }

    /// Members with ranks `lo..hi` (clamped), in (score, member) order.
    pub fn range_by_rank(
        &self,
        lo: usize,
        hi: usize,
    ) -> impl DoubleEndedIterator<Item = ZRef<'_>> + ExactSizeIterator + '_ {
        match &self.0 {
            Repr::Flat(buf) => {
                let v: Vec<ZRef<'_>> = flat_form::refs(buf)
                    .skip(lo)
                    .take(hi.saturating_sub(lo))
                    .collect();
                Either::L(v.into_iter())
            }
            Repr::Tree(t) => Either::R(
                t.order
                    .range_by_rank(lo, hi)
                    .map(|e| ZRef(e.0, Split::whole(&e.1))),
            ),
        }
    }

    /// All members in (score, member) order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = ZRef<'_>> + ExactSizeIterator + '_ {
        self.range_by_rank(0, usize::MAX)
    }

    /// The member with rank `i`.
    pub fn nth(&self, i: usize) -> Option<ZRef<'_>> {
        match &self.0 {
            Repr::Flat(buf) => flat_form::refs(buf).nth(i),
            Repr::Tree(t) => t.order.nth(i).map(|e| ZRef(e.0, Split::whole(&e.1))),
        }
    }

    /// The lowest member.
    pub fn first(&self) -> Option<ZRef<'_>> {
        self.nth(0)
    }

    /// The highest member.
    pub fn last(&self) -> Option<ZRef<'_>> {
        match &self.0 {
            Repr::Flat(buf) => flat_form::refs(buf).last(),
            Repr::Tree(t) => t.order.last().map(|e| ZRef(e.0, Split::whole(&e.1))),
        }
    }

    /// The rank of the first member for which `pred` is false (`pred` must be true on a
    /// prefix of the order, false after).
    pub fn partition_point(&self, mut pred: impl FnMut(ZRef<'_>) -> bool) -> usize {
        match &self.0 {
            Repr::Flat(buf) => flat_form::refs(buf).take_while(|&e| pred(e)).count(),
            Repr::Tree(t) => t
                .order
                .partition_point(|e| pred(ZRef(e.0, Split::whole(&e.1)))),
        }
    }

    /// A member's rank (0 = lowest score).
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        match &self.0 {
            Repr::Flat(buf) => flat_form::rank(buf, member),
            Repr::Tree(t) => {
                let s = *t.scores.get(member)?;
                t.order
                    .rank(&ScoreMember(s, SmallBytes::from_slice(member)))
            }
        }
    }

    /// One ZSCAN step: a flat set gives every member and cursor 0 (as Redis answers
    /// listpacks); a tree gives a batch of at least `count` in hash order from `cursor`.
    pub fn scan(&self, cursor: u64, count: usize) -> (u64, Vec<ZRef<'_>>) {
        match &self.0 {
            Repr::Flat(_) => (0, self.iter().collect()),
            Repr::Tree(t) => {
                let mut found = Vec::new();
                let mut keys = Vec::new();
                let next = t.scores.scan(cursor, count, |m, _| keys.push(m.clone()));
                for k in &keys {
                    if let Some((m, s)) = t.scores.get_key_value(&k[..]) {
                        found.push(ZRef(*s, Split::whole(m)));
                    }
                }
                (next, found)
            }
        }
    }

    /// Heap bytes owned (the flat buffer, or the tree form's nodes).
    pub fn heap_size(&self) -> usize {
        match &self.0 {
            Repr::Flat(buf) => buf.len(),
            Repr::Tree(t) => {
                core::mem::size_of::<ZTree>() + t.scores.heap_size() + t.order.heap_size()
            }
        }
    }

    /// Panics when the structure is inconsistent: flat entries out of order or repeated, a
    /// flat prefix that is not the members' longest common one (or a buffer left for an
    /// empty set), or the tree's map and order disagreeing; any NaN score.
    pub fn check_invariants(&self) {
        match &self.0 {
            Repr::Flat(buf) => flat_form::check(buf),
            Repr::Tree(t) => t.check_invariants(),
        }
    }
}

impl ZTree {
    /// Panics when the member map and the order disagree.
    fn check_invariants(&self) {
        self.order.check_invariants();
        assert_eq!(
            self.order.len(),
            self.scores.len(),
            "map and order sizes differ"
        );
        for e in self.order.iter() {
            let s = self
                .scores
                .get(&e.1[..])
                .expect("ordered member missing from map");
            assert!(
                s.to_bits() == e.0.to_bits(),
                "score differs between map and order"
            );
            assert!(!s.is_nan(), "NaN score");
        }
    }
}

impl PartialEq for ZSet {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self
                .iter()
                .zip(other.iter())
                .all(|(a, b)| a.0.to_bits() == b.0.to_bits() && a.1 == b.1)
    }
}

impl core::fmt::Debug for ZSet {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(if self.is_big() {
            "ZSet::Tree"
        } else {
            "ZSet::Flat"
        })?;
        f.debug_list()
            .entries(self.iter().map(|e| (e.0, e.1.to_small_bytes())))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(z: &ZSet) -> Vec<(f64, Vec<u8>)> {
        z.iter().map(|e| (e.0, e.1.to_vec())).collect()
    }

    #[test]
    fn flat_keeps_redis_order_and_ranks() {
        let mut z = ZSet::new_flat();
        assert_eq!(z.insert(b"b", 2.0), None);
        assert_eq!(z.insert(b"a", 2.0), None);
        assert_eq!(z.insert(b"c", 0.5), None);
        assert_eq!(z.insert(b"b", -1.0), Some(2.0));
        assert_eq!(
            members(&z),
            [
                (-1.0, b"b".to_vec()),
                (0.5, b"c".to_vec()),
                (2.0, b"a".to_vec())
            ]
        );
        assert_eq!(z.rank(b"a"), Some(2));
        assert_eq!(z.last(), Some(ZRef(2.0, Split::whole(b"a"))));
        assert_eq!(z.partition_point(|e| e.0 < 1.0), 2);
        assert_eq!(z.remove_rank_range(0, 2), 2);
        assert_eq!(z.len(), 1);
        z.check_invariants();
    }

    #[test]
    fn conversions_and_snapshots() {
        let mut z = ZSet::new_flat();
        for i in 0..40 {
            z.insert(&[b'm', i as u8], f64::from(i % 7) * 0.25);
        }
        let snap = z.clone();
        z.make_big(3);
        assert!(z.is_big());
        assert_eq!(z, snap);
        z.insert(b"new", -0.0);
        assert_eq!(snap.len(), 40);
        assert_eq!(snap.score(b"new"), None);
        z.make_flat();
        assert_eq!(z.score(b"new").map(f64::to_bits), Some((-0.0f64).to_bits()));
        z.check_invariants();
        assert_eq!(z.range_by_rank(5, 8).rev().count(), 3);
    }
}
