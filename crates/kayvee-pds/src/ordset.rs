//! `POrdSet`: a persistent ordered set with rank queries (order statistics), for sorted sets and
//! other ordered indexes.
//!
//! The counted B+tree of [`crate::list::tree`] (elements inline in chunks of up to 64, branches
//! keeping their children's sizes), searched by key: each branch also caches every child's
//! largest element. Contract:
//! - `clone()` is O(1) and is a snapshot; later writes never show through.
//! - Writes to an unshared set mutate in place; a write after a snapshot copies only the
//!   root-to-chunk path it touches.
//! - `insert`, `remove`, `contains`, `rank`, `count_less*`, `nth` are O(log n); range iteration
//!   from a rank is O(log n) to start and O(1) per element.

use crate::list::tree::{Node, Summary, Tree};
use core::cmp::Ordering;

/// The largest element of a child's subtree, cached in its parent to steer searches.
pub(crate) struct Max<T>(T);

impl<T: Clone> Clone for Max<T> {
    fn clone(&self) -> Self {
        Max(self.0.clone())
    }
}

impl<T: Ord + Clone> Max<T> {
    /// The largest element of a non-empty `node` (O(1): a leaf's last, or the last child's
    /// cached maximum).
    fn last_of(node: &Node<T, Self>) -> &T {
        match node {
            Node::Leaf(v) => v.last().expect("non-empty leaf"),
            Node::Branch(k) => &k.last().expect("non-empty branch").sum.0,
        }
    }
}

impl<T: Ord + Clone> Summary<T> for Max<T> {
    fn of(node: &Node<T, Self>) -> Self {
        Max(Self::last_of(node).clone())
    }

    fn refresh(&mut self, node: &Node<T, Self>) {
        let last = Self::last_of(node);
        if self.0.cmp(last) != Ordering::Equal {
            self.0 = last.clone();
        }
    }

    fn check(&self, node: &Node<T, Self>) {
        let mut node = node;
        let last = loop {
            match node {
                Node::Leaf(v) => break v.last().expect("non-empty leaf"),
                Node::Branch(k) => node = &k.last().expect("non-empty branch").node,
            }
        };
        assert!(self.0 == *last, "cached maximum is stale");
    }
}

/// A persistent ordered set.
#[derive(Clone, PartialEq, Eq)]
pub struct POrdSet<T> {
    tree: Tree<T, Max<T>>,
}

impl<T: Ord + Clone> Default for POrdSet<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: core::fmt::Debug> core::fmt::Debug for POrdSet<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_set().entries(self.tree.iter()).finish()
    }
}

impl<T: Ord + Clone> POrdSet<T> {
    /// Empty.
    pub fn new() -> Self {
        POrdSet { tree: Tree::new() }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.tree.len
    }

    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.tree.len == 0
    }

    /// Finds `v`: `found`, and `rank` = how many elements are less than `v`.
    fn locate(&self, v: &T) -> crate::list::tree::Path {
        self.tree.locate_by(
            |kids| kids[..kids.len() - 1].partition_point(|c| c.sum.0 < *v),
            |items| items.binary_search(v),
        )
    }

    /// Inserts; returns false when already present (the set is then left untouched).
    pub fn insert(&mut self, v: T) -> bool {
        let path = self.locate(&v);
        if path.found {
            return false;
        }
        self.tree.insert_at(&path, v);
        true
    }

    /// Removes; returns false when absent (the set is then left untouched).
    pub fn remove(&mut self, v: &T) -> bool {
        self.take(v).is_some()
    }

    /// Removes and returns the element equal to `v`.
    pub fn take(&mut self, v: &T) -> Option<T> {
        let path = self.locate(v);
        path.found.then(|| self.tree.remove_at(&path))
    }

    /// Whether present.
    pub fn contains(&self, v: &T) -> bool {
        self.locate(v).found
    }

    /// The stored element equal to `v`.
    pub fn get(&self, v: &T) -> Option<&T> {
        let path = self.locate(v);
        path.found.then(|| self.tree.at(&path))
    }

    /// The 0-based rank of `v` if present.
    pub fn rank(&self, v: &T) -> Option<usize> {
        let path = self.locate(v);
        path.found.then_some(path.rank)
    }

    /// How many elements are less than `v` (the rank `v` would have).
    pub fn count_less(&self, v: &T) -> usize {
        self.locate(v).rank
    }

    /// How many elements are less than or equal to `v`.
    pub fn count_less_eq(&self, v: &T) -> usize {
        let path = self.locate(v);
        path.rank + usize::from(path.found)
    }

    /// How many leading elements satisfy `pred`, which must hold for a prefix of the set and
    /// fail for the rest (a monotone predicate, as `slice::partition_point`): a rank query by
    /// a key other than `T`, such as "score below x" for sorted sets. O(log n).
    pub fn partition_point(&self, pred: impl FnMut(&T) -> bool) -> usize {
        // Both search steps call the one predicate, one after the other.
        let pred = core::cell::RefCell::new(pred);
        self.tree
            .locate_by(
                |kids| kids[..kids.len() - 1].partition_point(|c| (pred.borrow_mut())(&c.sum.0)),
                |items| Err(items.partition_point(|x| (pred.borrow_mut())(x))),
            )
            .rank
    }

    /// The element of rank `i`.
    pub fn nth(&self, i: usize) -> Option<&T> {
        self.tree.get(i)
    }

    /// The smallest element.
    pub fn first(&self) -> Option<&T> {
        self.tree.get(0)
    }

    /// The largest element.
    pub fn last(&self) -> Option<&T> {
        self.tree.get(self.len().checked_sub(1)?)
    }

    /// Removes and returns the smallest element.
    pub fn pop_first(&mut self) -> Option<T> {
        self.remove_nth(0)
    }

    /// Removes and returns the largest element.
    pub fn pop_last(&mut self) -> Option<T> {
        self.remove_nth(self.len().checked_sub(1)?)
    }

    /// Removes and returns the element of rank `i`.
    pub fn remove_nth(&mut self, i: usize) -> Option<T> {
        if i >= self.len() {
            return None;
        }
        let path = self.tree.locate_index(i, false);
        Some(self.tree.remove_at(&path))
    }

    /// Elements with ranks in `start..end` (clamped), ascending; `.rev()` for descending.
    pub fn range_by_rank(
        &self,
        start: usize,
        end: usize,
    ) -> impl DoubleEndedIterator<Item = &T> + ExactSizeIterator {
        self.tree.range_clamped(start, end)
    }

    /// Elements from rank `start` (clamped) to the largest.
    pub fn iter_from(
        &self,
        start: usize,
    ) -> impl DoubleEndedIterator<Item = &T> + ExactSizeIterator {
        self.tree.range_clamped(start, self.len())
    }

    /// Removes the elements with ranks in `start..end` (clamped); returns how many. Cutting an
    /// end is O(log n) plus freeing; a few in the middle go one by one, many by one rebuild.
    pub fn remove_range_by_rank(&mut self, start: usize, end: usize) -> usize {
        let len = self.len();
        let end = end.min(len);
        let start = start.min(end);
        let n = end - start;
        if n == 0 {
            return 0;
        }
        if start == 0 {
            self.tree.drop_front(end);
        } else if end == len {
            self.tree.truncate(start);
        } else if n * 8 <= len {
            for _ in 0..n {
                // Each removal shifts the next victim to rank `start`; rebalancing may move it
                // to another chunk, so locate it again.
                let p = self.tree.locate_index(start, false);
                self.tree.remove_at(&p);
            }
        } else {
            let kept = self
                .tree
                .range(0, start)
                .chain(self.tree.range(end, len))
                .cloned();
            self.tree = Tree::from_iter(kept.collect::<alloc::vec::Vec<_>>());
        }
        n
    }

    /// All elements ascending.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + ExactSizeIterator {
        self.tree.iter()
    }

    /// Bytes the structure occupies on the heap, not counting what elements own themselves
    /// (nodes shared with snapshots are counted as if owned). O(n / 64).
    pub fn heap_size(&self) -> usize {
        self.tree.heap_size()
    }

    /// Whether two sets are the same version.
    pub fn ptr_eq(&self, other: &Self) -> bool {
        triomphe::Arc::ptr_eq(&self.tree.root, &other.tree.root)
    }

    /// Panics when an invariant is broken: strict ascending order, cached sizes and maxima,
    /// chunk fill, root shape, equal leaf depth.
    pub fn check_invariants(&self) {
        self.tree.check();
        let mut prev: Option<&T> = None;
        for x in self.iter() {
            assert!(prev.is_none_or(|p| p < x), "not strictly ascending");
            prev = Some(x);
        }
    }
}

impl<T: Ord + Clone> FromIterator<T> for POrdSet<T> {
    /// Collects, sorting and dropping duplicates; already sorted input builds in O(n).
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut v: alloc::vec::Vec<T> = iter.into_iter().collect();
        if !v.windows(2).all(|w| w[0] < w[1]) {
            v.sort();
            v.dedup();
        }
        POrdSet {
            tree: Tree::from_iter(v),
        }
    }
}

impl<T: Ord + Clone> Extend<T> for POrdSet<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        for v in iter {
            self.insert(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    /// Even numbers `0, 2, ..` (`n` of them) inserted in ascending order, plus one odd value so
    /// the chunk holding 2 * (n / 2) + 1 has been split and has room.
    fn evens(n: u32) -> POrdSet<u32> {
        let mut s = POrdSet::new();
        for i in 0..n {
            s.insert(2 * i);
        }
        assert!(s.insert(n + 1));
        s
    }

    #[test]
    fn unshared_writes_copy_nothing() {
        let n = 100_000;
        let mut s = evens(n);
        assert_eq!(s.tree.height(), 4);
        let before = s.tree.node_addrs();
        assert!(s.insert(n + 3));
        assert!(!s.insert(n + 3));
        assert!(s.remove(&(n + 4)));
        assert!(!s.remove(&(n + 4)));
        let after = s.tree.node_addrs();
        assert!(
            after == before,
            "moved {} nodes",
            after.difference(&before).count()
        );
        s.check_invariants();
    }

    #[test]
    fn write_after_snapshot_copies_only_the_path() {
        let n = 100_000;
        let mut s = evens(n);
        let snap = s.clone();
        let shared = snap.tree.node_addrs();
        assert!(!s.insert(n + 2), "a failed insert copies nothing");
        assert!(!s.remove(&(n + 3)), "a failed remove copies nothing");
        assert!(s.tree.node_addrs() == shared, "a failed write copied");
        assert!(s.insert(n + 3));
        let copied: Vec<_> = s.tree.node_addrs().difference(&shared).copied().collect();
        assert_eq!(copied.len(), s.tree.height(), "copied {copied:?}");
        assert!(!snap.contains(&(n + 3)));
        assert!(snap.tree.node_addrs() == shared, "the snapshot changed");
        s.check_invariants();
    }

    #[test]
    fn ranks_on_a_deep_tree() {
        let s = evens(100_000);
        assert_eq!(s.rank(&0), Some(0));
        assert_eq!(s.rank(&2000), Some(1000));
        assert_eq!(s.rank(&2001), None);
        assert_eq!(s.count_less(&2001), 1001);
        assert_eq!(s.count_less_eq(&2000), 1001);
        assert_eq!(s.nth(1000), Some(&2000));
        assert_eq!(s.count_less(&u32::MAX), s.len());
        let top: Vec<u32> = s
            .range_by_rank(0, usize::MAX)
            .rev()
            .take(2)
            .copied()
            .collect();
        assert_eq!(top, [199_998, 199_996]);
    }

    #[test]
    fn ascending_inserts_leave_full_chunks() {
        let mut s = POrdSet::new();
        for i in 0..64 * 100u32 {
            s.insert(i);
        }
        assert_eq!(s.tree.leaf_lens(), [crate::list::tree::LEAF_MAX; 100]);
    }
}
