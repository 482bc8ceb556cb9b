//! `PList`: a persistent sequence (deque) for Redis lists.
//!
//! A counted B+tree of chunks ([`tree`]): up to 64 elements inline per leaf chunk, branches
//! keeping their children's sizes. Contract:
//! - `clone()` is O(1) and is a snapshot; later writes never show through.
//! - Writes to an unshared list mutate in place; a write after a snapshot copies only the
//!   root-to-chunk path it touches.
//! - `push_*`/`pop_*` are amortised O(1) (they touch the end chunk; pushing past a full end chunk
//!   starts a new one, so pushed lists are made of full chunks); `get`, `set`, `insert`, `remove`
//!   are O(log n); `retain_range` (LTRIM) is O(log n) plus freeing what it cuts; `range` costs
//!   O(log n) to start, O(1) per element.

pub(crate) mod tree;

use alloc::vec::Vec;
use tree::Tree;

/// A persistent sequence.
#[derive(Clone, PartialEq, Eq)]
pub struct PList<T> {
    tree: Tree<T, ()>,
}

impl<T: Clone> Default for PList<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: core::fmt::Debug> core::fmt::Debug for PList<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.tree.iter()).finish()
    }
}

impl<T: Clone> PList<T> {
    /// Empty.
    pub fn new() -> Self {
        PList { tree: Tree::new() }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.tree.len
    }

    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.tree.len == 0
    }

    /// Element `i` (0 = head).
    pub fn get(&self, i: usize) -> Option<&T> {
        self.tree.get(i)
    }

    /// Element `i`, mutably (copies the shared nodes of its path first).
    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        self.tree.get_mut(i)
    }

    /// The first element.
    pub fn front(&self) -> Option<&T> {
        self.get(0)
    }

    /// The last element.
    pub fn back(&self) -> Option<&T> {
        self.get(self.len().checked_sub(1)?)
    }

    /// Adds at the head.
    pub fn push_front(&mut self, v: T) {
        if let Err(v) = self.tree.push_end(v, true) {
            self.insert(0, v)
        }
    }

    /// Adds at the tail.
    pub fn push_back(&mut self, v: T) {
        if let Err(v) = self.tree.push_end(v, false) {
            self.insert(self.len(), v)
        }
    }

    /// Removes the head.
    pub fn pop_front(&mut self) -> Option<T> {
        self.remove(0)
    }

    /// Removes the tail.
    pub fn pop_back(&mut self) -> Option<T> {
        self.remove(self.len().checked_sub(1)?)
    }

    /// Replaces element `i`; returns false when out of range.
    pub fn set(&mut self, i: usize, v: T) -> bool {
        match self.get_mut(i) {
            Some(slot) => {
                *slot = v;
                true
            }
            None => false,
        }
    }

    /// Inserts before position `i` (`i == len` appends). Panics if `i > len`.
    pub fn insert(&mut self, i: usize, v: T) {
        assert!(
            i <= self.len(),
            "PList::insert index {i} > len {}",
            self.len()
        );
        let path = self.tree.locate_index(i, true);
        self.tree.insert_at(&path, v);
    }

    /// Removes element `i`.
    pub fn remove(&mut self, i: usize) -> Option<T> {
        if i >= self.len() {
            return None;
        }
        let path = self.tree.locate_index(i, false);
        Some(self.tree.remove_at(&path))
    }

    /// Keeps only the elements in `start..end` (clamped). O(log n) plus freeing what is cut.
    pub fn retain_range(&mut self, start: usize, end: usize) {
        let end = end.min(self.len());
        let start = start.min(end);
        self.tree.truncate(end);
        self.tree.drop_front(start);
    }

    /// Keeps the first `n` elements.
    pub fn truncate(&mut self, n: usize) {
        self.tree.truncate(n);
    }

    /// Removes the first `n` elements (all when `n >= len`).
    pub fn drop_front(&mut self, n: usize) {
        self.tree.drop_front(n);
    }

    /// Splits off and returns the elements from index `at` on (clamped); `self` keeps `..at`.
    /// O(log n): both halves share the untouched chunks.
    pub fn split_off(&mut self, at: usize) -> Self {
        let mut tail = self.clone();
        tail.drop_front(at);
        self.truncate(at);
        tail
    }

    /// Appends every element of `iter` at the tail.
    pub fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        if self.is_empty() {
            *self = iter.into_iter().collect();
            return;
        }
        for v in iter {
            self.push_back(v);
        }
    }

    /// Removes the elements for which `drop` says true, at most `limit` of them, scanning from
    /// the head (or from the tail when `from_back`); returns how many were removed (LREM).
    /// Reads everything once; removes few matches one by one (O(log n) each) and many by
    /// rebuilding in one O(n) pass; leaves the list untouched (still shared) when none match.
    pub fn remove_matching(
        &mut self,
        mut drop: impl FnMut(&T) -> bool,
        limit: usize,
        from_back: bool,
    ) -> usize {
        let mut idx: Vec<usize> = if from_back {
            let n = self.len();
            self.iter()
                .rev()
                .enumerate()
                .filter(|(_, v)| drop(v))
                .map(|(i, _)| n - 1 - i)
                .take(limit)
                .collect()
        } else {
            self.iter()
                .enumerate()
                .filter(|(_, v)| drop(v))
                .map(|(i, _)| i)
                .take(limit)
                .collect()
        };
        let removed = idx.len();
        if from_back {
            idx.reverse();
        }
        if removed * 8 <= self.len() {
            for &i in idx.iter().rev() {
                self.remove(i);
            }
        } else {
            let mut next = idx.iter().peekable();
            let kept: PList<T> = self
                .iter()
                .enumerate()
                .filter(|(i, _)| next.next_if_eq(&i).is_none())
                .map(|(_, v)| v.clone())
                .collect();
            *self = kept;
        }
        removed
    }

    /// Elements from head to tail.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + ExactSizeIterator {
        self.tree.iter()
    }

    /// Elements with indexes in `start..end` (clamped), head to tail.
    pub fn range(
        &self,
        start: usize,
        end: usize,
    ) -> impl DoubleEndedIterator<Item = &T> + ExactSizeIterator {
        self.tree.range_clamped(start, end)
    }

    /// Elements from index `start` (clamped) to the tail.
    pub fn iter_from(
        &self,
        start: usize,
    ) -> impl DoubleEndedIterator<Item = &T> + ExactSizeIterator {
        self.tree.range_clamped(start, self.len())
    }

    /// Bytes the structure occupies on the heap, not counting what elements own themselves
    /// (nodes shared with snapshots are counted as if owned). O(n / 64).
    pub fn heap_size(&self) -> usize {
        self.tree.heap_size()
    }

    /// Whether two lists are the same version.
    pub fn ptr_eq(&self, other: &Self) -> bool {
        triomphe::Arc::ptr_eq(&self.tree.root, &other.tree.root)
    }

    /// Panics when an invariant is broken: cached sizes, chunk fill and capacity, root shape,
    /// equal leaf depth.
    pub fn check_invariants(&self) {
        self.tree.check();
    }
}

impl<T: Clone> FromIterator<T> for PList<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        PList {
            tree: Tree::from_iter(iter),
        }
    }
}

impl<T: Clone> Extend<T> for PList<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        PList::extend(self, iter)
    }
}

impl<'a, T> IntoIterator for &'a PList<T> {
    type Item = &'a T;
    type IntoIter = tree::Iter<'a, T, ()>;

    fn into_iter(self) -> Self::IntoIter {
        self.tree.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A four-level list of `n` elements built by pushes.
    fn pushed(n: u32) -> PList<u32> {
        let mut l = PList::new();
        for i in 0..n {
            l.push_back(i);
        }
        l
    }

    #[test]
    fn ranges_clamp_to_the_list() {
        let l = pushed(100);
        assert!(l.range(98, 1000).eq([98, 99].iter()));
        assert_eq!(l.range(500, 1000).len(), 0);
        assert_eq!(l.range(60, 40).len(), 0, "start past end is empty");
        assert!(l.iter_from(97).eq([97, 98, 99].iter()));
        assert_eq!(l.iter_from(100).len(), 0);
    }

    #[test]
    fn equality_compares_elements_not_nodes() {
        let a = pushed(1000);
        let mut snap = a.clone();
        assert_eq!(a, snap, "a snapshot is equal");
        snap.set(500, 7);
        assert_ne!(a, snap, "one changed element differs");
        snap.set(500, 500);
        assert_eq!(
            a, snap,
            "equal again once restored, though the nodes differ"
        );
        let mut built = PList::new();
        (0..1000).rev().for_each(|i| built.push_front(i));
        assert_eq!(a, built, "same elements, built another way");
        built.pop_back();
        assert_ne!(a, built, "a shorter list differs");
        assert_eq!(alloc::format!("{:?}", pushed(3)), "[0, 1, 2]");
    }

    #[test]
    fn unshared_writes_copy_nothing() {
        let mut l = pushed(100_000);
        assert_eq!(l.tree.height(), 4);
        l.pop_back(); // the last chunk now has room
        let before = l.tree.node_addrs();
        assert!(l.set(50_000, 7));
        *l.get_mut(123).unwrap() += 1;
        l.push_back(1);
        l.pop_front();
        l.remove(70_000);
        l.insert(70_000, 9); // into the chunk the remove left room in
        l.push_front(3);
        let after = l.tree.node_addrs();
        assert!(
            after == before,
            "moved {} nodes",
            after.difference(&before).count()
        );
        l.check_invariants();
    }

    #[test]
    fn write_after_snapshot_copies_only_the_path() {
        let mut l = pushed(100_000);
        let snap = l.clone();
        let shared = snap.tree.node_addrs();
        assert!(l.set(50_000, 7));
        let copied: Vec<_> = l.tree.node_addrs().difference(&shared).copied().collect();
        assert_eq!(copied.len(), l.tree.height(), "copied {copied:?}");
        assert_eq!(snap.get(50_000), Some(&50_000));
        assert_eq!(l.get(50_000), Some(&7));
        // A second write on the same path copies nothing more.
        let now = l.tree.node_addrs();
        assert!(l.set(50_001, 8));
        assert!(l.tree.node_addrs() == now, "second write copied");
        assert!(snap.tree.node_addrs() == shared, "the snapshot changed");
    }

    #[test]
    fn pushes_leave_full_chunks() {
        let mut l = pushed(64 * 100);
        for i in 0..64 * 100 {
            l.push_front(i);
        }
        assert_eq!(l.tree.leaf_lens(), [tree::LEAF_MAX; 200]);
        l.check_invariants();
    }

    #[test]
    fn retain_range_cuts_along_one_path() {
        let mut l = pushed(100_000);
        let snap = l.clone();
        l.retain_range(10_000, 10_003);
        assert!(l.iter().copied().eq(10_000..10_003));
        assert_eq!(l.tree.height(), 1, "collapsed to one chunk");
        l.check_invariants();
        l.retain_range(5, 1);
        assert!(l.is_empty());
        assert_eq!(snap.len(), 100_000);
    }

    #[test]
    #[should_panic(expected = "index 1 > len 0")]
    fn insert_past_len_panics() {
        let mut l: PList<u32> = PList::new();
        l.insert(1, 0);
    }
}
