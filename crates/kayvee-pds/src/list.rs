//! `PList`: a persistent sequence (deque) for Redis lists.
//!
//! Placeholder implementation (one shared `VecDeque`, copied whole on the first write after a
//! snapshot); a chunked persistent tree replaces it with the same API and contract:
//! - `clone()` is O(1) and is a snapshot; later writes never show through.
//! - Writes to an unshared list mutate in place.

use alloc::collections::VecDeque;
use triomphe::Arc;

/// A persistent sequence.
pub struct PList<T> {
    items: Arc<VecDeque<T>>,
}

impl<T> Clone for PList<T> {
    fn clone(&self) -> Self {
        PList {
            items: self.items.clone(),
        }
    }
}

impl<T: Clone> Default for PList<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: PartialEq> PartialEq for PList<T> {
    fn eq(&self, other: &Self) -> bool {
        self.items == other.items
    }
}

impl<T: core::fmt::Debug> core::fmt::Debug for PList<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.items.iter()).finish()
    }
}

impl<T: Clone> PList<T> {
    /// Empty.
    pub fn new() -> Self {
        PList {
            items: Arc::new(VecDeque::new()),
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

    /// Element `i` (0 = head).
    pub fn get(&self, i: usize) -> Option<&T> {
        self.items.get(i)
    }

    /// The first element.
    pub fn front(&self) -> Option<&T> {
        self.items.front()
    }

    /// The last element.
    pub fn back(&self) -> Option<&T> {
        self.items.back()
    }

    /// Adds at the head.
    pub fn push_front(&mut self, v: T) {
        Arc::make_mut(&mut self.items).push_front(v)
    }

    /// Adds at the tail.
    pub fn push_back(&mut self, v: T) {
        Arc::make_mut(&mut self.items).push_back(v)
    }

    /// Removes the head.
    pub fn pop_front(&mut self) -> Option<T> {
        if self.items.is_empty() {
            return None;
        }
        Arc::make_mut(&mut self.items).pop_front()
    }

    /// Removes the tail.
    pub fn pop_back(&mut self) -> Option<T> {
        if self.items.is_empty() {
            return None;
        }
        Arc::make_mut(&mut self.items).pop_back()
    }

    /// Replaces element `i`; returns false when out of range.
    pub fn set(&mut self, i: usize, v: T) -> bool {
        if i >= self.items.len() {
            return false;
        }
        Arc::make_mut(&mut self.items)[i] = v;
        true
    }

    /// Inserts before position `i` (`i == len` appends). Panics if `i > len`.
    pub fn insert(&mut self, i: usize, v: T) {
        Arc::make_mut(&mut self.items).insert(i, v)
    }

    /// Removes element `i`.
    pub fn remove(&mut self, i: usize) -> Option<T> {
        if i >= self.items.len() {
            return None;
        }
        Arc::make_mut(&mut self.items).remove(i)
    }

    /// Keeps only the elements in `start..end` (clamped).
    pub fn retain_range(&mut self, start: usize, end: usize) {
        let len = self.items.len();
        let end = end.min(len);
        let start = start.min(end);
        if start == 0 && end == len {
            return;
        }
        let d = Arc::make_mut(&mut self.items);
        d.truncate(end);
        d.drain(..start);
    }

    /// Removes the elements for which `drop` says true, at most `limit` of them, scanning from
    /// the head (or from the tail when `from_back`); returns how many were removed (LREM).
    pub fn remove_matching(
        &mut self,
        mut drop: impl FnMut(&T) -> bool,
        limit: usize,
        from_back: bool,
    ) -> usize {
        let idx: alloc::vec::Vec<usize> = if from_back {
            (0..self.items.len())
                .rev()
                .filter(|&i| drop(&self.items[i]))
                .take(limit)
                .collect()
        } else {
            (0..self.items.len())
                .filter(|&i| drop(&self.items[i]))
                .take(limit)
                .collect()
        };
        if idx.is_empty() {
            return 0;
        }
        let d = Arc::make_mut(&mut self.items);
        let mut sorted = idx.clone();
        sorted.sort_unstable();
        for &i in sorted.iter().rev() {
            d.remove(i);
        }
        idx.len()
    }

    /// Elements from head to tail.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + ExactSizeIterator {
        self.items.iter()
    }

    /// Elements with indexes in `start..end` (clamped), head to tail.
    pub fn range(&self, start: usize, end: usize) -> impl DoubleEndedIterator<Item = &T> {
        let end = end.min(self.items.len());
        let start = start.min(end);
        self.items.range(start..end)
    }

    /// Whether two lists are the same version.
    pub fn ptr_eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.items, &other.items)
    }

    /// Panics when an invariant is broken (none beyond VecDeque's own here).
    pub fn check_invariants(&self) {}
}

impl<T: Clone> FromIterator<T> for PList<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        PList {
            items: Arc::new(iter.into_iter().collect()),
        }
    }
}
