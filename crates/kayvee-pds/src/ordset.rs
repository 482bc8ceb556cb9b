//! `POrdSet`: a persistent ordered set with rank queries (order statistics), for sorted sets.
//!
//! Placeholder implementation (one shared sorted `Vec`, O(n) insert, copied whole on the first
//! write after a snapshot); a persistent counted B-tree replaces it with the same API and
//! contract:
//! - `clone()` is O(1) and is a snapshot; later writes never show through.
//! - Writes to an unshared set mutate in place.
//! - `rank`, `nth` and range iteration from a rank are O(log n) to start.

use alloc::vec::Vec;
use triomphe::Arc;

/// A persistent ordered set.
pub struct POrdSet<T> {
    items: Arc<Vec<T>>,
}

impl<T> Clone for POrdSet<T> {
    fn clone(&self) -> Self {
        POrdSet {
            items: self.items.clone(),
        }
    }
}

impl<T: Ord + Clone> Default for POrdSet<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: PartialEq> PartialEq for POrdSet<T> {
    fn eq(&self, other: &Self) -> bool {
        self.items == other.items
    }
}

impl<T: core::fmt::Debug> core::fmt::Debug for POrdSet<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_set().entries(self.items.iter()).finish()
    }
}

impl<T: Ord + Clone> POrdSet<T> {
    /// Empty.
    pub fn new() -> Self {
        POrdSet {
            items: Arc::new(Vec::new()),
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Inserts; returns false when already present.
    pub fn insert(&mut self, v: T) -> bool {
        match self.items.binary_search(&v) {
            Ok(_) => false,
            Err(i) => {
                Arc::make_mut(&mut self.items).insert(i, v);
                true
            }
        }
    }

    /// Removes; returns false when absent.
    pub fn remove(&mut self, v: &T) -> bool {
        match self.items.binary_search(v) {
            Ok(i) => {
                Arc::make_mut(&mut self.items).remove(i);
                true
            }
            Err(_) => false,
        }
    }

    /// Whether present.
    pub fn contains(&self, v: &T) -> bool {
        self.items.binary_search(v).is_ok()
    }

    /// The 0-based rank of `v` if present.
    pub fn rank(&self, v: &T) -> Option<usize> {
        self.items.binary_search(v).ok()
    }

    /// How many elements are less than `v` (the rank `v` would have).
    pub fn count_less(&self, v: &T) -> usize {
        self.items.partition_point(|x| x < v)
    }

    /// How many elements are less than or equal to `v`.
    pub fn count_less_eq(&self, v: &T) -> usize {
        self.items.partition_point(|x| x <= v)
    }

    /// How many leading elements satisfy `pred`, which must hold for a prefix of the set and
    /// fail for the rest (a monotone predicate, as `slice::partition_point`): a rank query by
    /// a key other than `T`, such as "score below x" for sorted sets.
    pub fn partition_point(&self, pred: impl FnMut(&T) -> bool) -> usize {
        self.items.partition_point(pred)
    }

    /// The element of rank `i`.
    pub fn nth(&self, i: usize) -> Option<&T> {
        self.items.get(i)
    }

    /// The smallest element.
    pub fn first(&self) -> Option<&T> {
        self.items.first()
    }

    /// The largest element.
    pub fn last(&self) -> Option<&T> {
        self.items.last()
    }

    /// Removes and returns the smallest element.
    pub fn pop_first(&mut self) -> Option<T> {
        if self.items.is_empty() {
            return None;
        }
        Some(Arc::make_mut(&mut self.items).remove(0))
    }

    /// Removes and returns the largest element.
    pub fn pop_last(&mut self) -> Option<T> {
        if self.items.is_empty() {
            return None;
        }
        Arc::make_mut(&mut self.items).pop()
    }

    /// Elements with ranks in `start..end` (clamped), ascending; `.rev()` for descending.
    pub fn range_by_rank(&self, start: usize, end: usize) -> impl DoubleEndedIterator<Item = &T> {
        let end = end.min(self.items.len());
        let start = start.min(end);
        self.items[start..end].iter()
    }

    /// Removes the elements with ranks in `start..end` (clamped); returns how many.
    pub fn remove_range_by_rank(&mut self, start: usize, end: usize) -> usize {
        let end = end.min(self.items.len());
        let start = start.min(end);
        if start == end {
            return 0;
        }
        Arc::make_mut(&mut self.items).drain(start..end);
        end - start
    }

    /// All elements ascending.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + ExactSizeIterator {
        self.items.iter()
    }

    /// Whether two sets are the same version.
    pub fn ptr_eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.items, &other.items)
    }

    /// Panics when the elements are not strictly ascending.
    pub fn check_invariants(&self) {
        assert!(self.items.windows(2).all(|w| w[0] < w[1]), "not sorted");
    }
}
