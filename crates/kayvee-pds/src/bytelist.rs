//! `PByteList`: a persistent list of byte strings, packed in chunks (Redis lists past one
//! listpack node).
//!
//! The counted B+tree of [`crate::list`] holds shared [`Chunk`]s, each a packed run of up to
//! 2 KiB of elements; each branch caches the element count of every child beside its chunk
//! count. Contract:
//! - `clone()` is O(1) and is a snapshot; later writes never show through.
//! - A write after a snapshot copies the root-to-leaf path of tree nodes it touches (pointers
//!   to chunks, not the chunks' bytes) and the one chunk it changes.
//! - Pushes and pops at either end are amortised O(1) plus moving the bytes of one chunk; `get`,
//!   `set`, `insert`, `remove` are O(log n) plus one chunk's bytes; `retain_range` (LTRIM) is
//!   O(log n) plus freeing what it cuts; `range` costs O(log n + one chunk) to start, O(1) per
//!   element.

mod chunk;

use crate::list::tree::{Child, Node, Path, Summary, Tree};
use crate::SmallBytes;
use alloc::vec::Vec;
use chunk::{Chunk, ChunkIter};
use core::cell::Cell;

/// A branch caches the element count of each child's subtree.
impl Summary<Chunk> for usize {
    fn of(node: &Node<Chunk, usize>) -> usize {
        match node {
            Node::Leaf(v) => v.iter().map(Chunk::len).sum(),
            Node::Branch(k) => k.iter().map(|c| c.sum).sum(),
        }
    }
    fn refresh(&mut self, node: &Node<Chunk, usize>) {
        *self = Self::of(node);
    }
    fn check(&self, node: &Node<Chunk, usize>) {
        assert_eq!(*self, Self::of(node), "cached element count");
    }
}

/// A persistent list of byte strings.
#[derive(Clone)]
pub struct PByteList {
    tree: Tree<Chunk, usize>,
    len: usize,
}

impl Default for PByteList {
    fn default() -> Self {
        Self::new()
    }
}

/// Moves a cached count by a signed amount.
fn shift(sum: &mut usize, delta: &isize) {
    *sum = sum.wrapping_add_signed(*delta);
}

impl PByteList {
    /// Empty.
    pub fn new() -> Self {
        PByteList {
            tree: Tree::new(),
            len: 0,
        }
    }

    /// Number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The chunk holding element `i` (`< len`): its path and the element's index in it.
    fn locate(&self, i: usize) -> (Path, usize) {
        debug_assert!(i < self.len);
        let rem = Cell::new(i);
        let path = self.tree.locate_by(
            |kids: &[Child<Chunk, usize>]| {
                let (mut c, mut r) = (0, rem.get());
                while c + 1 < kids.len() && r >= kids[c].sum {
                    r -= kids[c].sum;
                    c += 1;
                }
                rem.set(r);
                c
            },
            |chunks: &[Chunk]| {
                let (mut c, mut r) = (0, rem.get());
                while c + 1 < chunks.len() && r >= chunks[c].len() {
                    r -= chunks[c].len();
                    c += 1;
                }
                rem.set(r);
                Ok(c)
            },
        );
        (path, rem.get())
    }

    /// Path to chunk number `c` (`< chunk count`).
    fn chunk_path(&self, c: usize) -> Path {
        self.tree.locate_index(c, false)
    }

    /// Element `i` (0 = head).
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        if i >= self.len {
            return None;
        }
        let (path, k) = self.locate(i);
        Some(self.tree.at(&path).get(k))
    }

    /// The first element.
    pub fn front(&self) -> Option<&[u8]> {
        self.get(0)
    }

    /// The last element.
    pub fn back(&self) -> Option<&[u8]> {
        self.get(self.len.checked_sub(1)?)
    }

    /// Adds at the tail.
    pub fn push_back(&mut self, v: &[u8]) {
        self.push_end(v, false);
    }

    /// Adds at the head.
    pub fn push_front(&mut self, v: &[u8]) {
        self.push_end(v, true);
    }

    /// Pushes into the end chunk when it has room; else seals it (trims its capacity) and
    /// starts a new end chunk.
    fn push_end(&mut self, v: &[u8], front: bool) {
        let chunks = self.tree.len;
        if chunks > 0 {
            let room = self.tree.modify_end(
                front,
                |c| {
                    let room = c.has_room(v.len());
                    let b = c.make_mut();
                    match (room, front) {
                        (false, _) => b.shrink(),
                        (true, true) => b.push_front(v),
                        (true, false) => b.push_back(v),
                    }
                    room
                },
                |s, room| *s += usize::from(*room),
            );
            if room {
                self.len += 1;
                return;
            }
        }
        let at = if front { 0 } else { chunks };
        let path = self.tree.locate_index(at, true);
        self.tree.insert_at(&path, Chunk::single(v));
        self.len += 1;
    }

    /// Removes the first or last element (of a non-empty list).
    fn pop_end(&mut self, front: bool) -> SmallBytes {
        self.len -= 1;
        if self.tree.end(front).len() == 1 {
            let path = self.chunk_path(if front { 0 } else { self.tree.len - 1 });
            let c = self.tree.remove_at(&path);
            return SmallBytes::from_slice(c.get(0));
        }
        self.tree.modify_end(
            front,
            |c| {
                let b = c.make_mut();
                match front {
                    true => b.remove(0, SmallBytes::from_slice),
                    false => b.remove(b.len() - 1, SmallBytes::from_slice),
                }
            },
            |s, _| *s -= 1,
        )
    }

    /// Removes the head.
    pub fn pop_front(&mut self) -> Option<SmallBytes> {
        (self.len > 0).then(|| self.pop_end(true))
    }

    /// Removes the tail.
    pub fn pop_back(&mut self) -> Option<SmallBytes> {
        (self.len > 0).then(|| self.pop_end(false))
    }

    /// Removes element `i`.
    pub fn remove(&mut self, i: usize) -> Option<SmallBytes> {
        if i >= self.len {
            return None;
        }
        if i == 0 || i + 1 == self.len {
            return Some(self.pop_end(i == 0));
        }
        let (path, k) = self.locate(i);
        self.len -= 1;
        if self.tree.at(&path).len() == 1 {
            let c = self.tree.remove_at(&path);
            return Some(SmallBytes::from_slice(c.get(0)));
        }
        let v = self.tree.modify_at(
            &path,
            |c| c.make_mut().remove(k, SmallBytes::from_slice),
            |s, _| *s -= 1,
        );
        Some(v)
    }

    /// Inserts before position `i` (`i == len` appends). Panics if `i > len`.
    pub fn insert(&mut self, i: usize, v: &[u8]) {
        assert!(
            i <= self.len,
            "PByteList::insert index {i} > len {}",
            self.len
        );
        if i == self.len {
            return self.push_back(v);
        }
        if i == 0 {
            return self.push_front(v);
        }
        let (path, k) = self.locate(i);
        if self.tree.at(&path).has_room(v.len()) {
            self.tree
                .modify_at(&path, |c| c.make_mut().insert(k, v), |s, _| *s += 1);
            self.len += 1;
            return;
        }
        let old = self.tree.at(&path).clone();
        let items = old.walk_from(0).take(k).chain([v]).chain(old.walk_from(k));
        self.replace_chunk(&path, Chunk::pack(items));
        self.len += 1;
    }

    /// Replaces element `i`; returns false when out of range.
    pub fn set(&mut self, i: usize, v: &[u8]) -> bool {
        if i >= self.len {
            return false;
        }
        let (path, k) = self.locate(i);
        let fast = {
            let c = self.tree.at(&path);
            let after = c.bytes() - c.get(k).len() + v.len();
            c.len() > 1 && v.len() < chunk::LONG && after <= chunk::CHUNK_BYTES_MAX
        };
        if fast {
            self.tree.modify_at(
                &path,
                |c| {
                    let b = c.make_mut();
                    b.remove(k, |_| ());
                    b.insert(k, v);
                },
                |_, _| {},
            );
            return true;
        }
        let old = self.tree.at(&path).clone();
        let items = old.walk_from(0).take(k).chain([v]);
        let items = items.chain(old.walk_from(k + 1));
        self.replace_chunk(&path, Chunk::pack(items));
        true
    }

    /// Puts `pieces` (at least one) where the chunk at `path` is.
    fn replace_chunk(&mut self, path: &Path, pieces: Vec<Chunk>) {
        let at = path.rank;
        let mut pieces = pieces.into_iter();
        let first = pieces.next().expect("at least one piece");
        self.tree.modify_at(
            path,
            |c| {
                let delta = first.len() as isize - c.len() as isize;
                *c = first;
                delta
            },
            shift,
        );
        for (n, piece) in pieces.enumerate() {
            let p = self.tree.locate_index(at + 1 + n, true);
            self.tree.insert_at(&p, piece);
        }
    }

    /// Keeps the first `n` elements.
    pub fn truncate(&mut self, n: usize) {
        if n >= self.len {
            return;
        }
        if n == 0 {
            *self = Self::new();
            return;
        }
        let (path, k) = self.locate(n);
        let c = path.rank;
        if k == 0 {
            self.tree.truncate(c);
        } else {
            self.tree.truncate(c + 1);
            let path = self.chunk_path(c);
            let cut = self.tree.at(&path).len() - k;
            self.tree
                .modify_at(&path, |ch| ch.make_mut().truncate(k), |s, _| *s -= cut);
        }
        self.len = n;
    }

    /// Removes the first `n` elements (all when `n >= len`).
    pub fn drop_front(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        if n >= self.len {
            *self = Self::new();
            return;
        }
        let (path, k) = self.locate(n);
        self.tree.drop_front(path.rank);
        if k > 0 {
            let path = self.chunk_path(0);
            self.tree
                .modify_at(&path, |ch| ch.make_mut().drop_front(k), |s, _| *s -= k);
        }
        self.len -= n;
    }

    /// Keeps only the elements in `start..end` (clamped). O(log n) plus freeing what is cut.
    pub fn retain_range(&mut self, start: usize, end: usize) {
        let end = end.min(self.len);
        let start = start.min(end);
        self.truncate(end);
        self.drop_front(start);
    }

    /// Removes the elements for which `drop` says true, at most `limit` of them, scanning from
    /// the head (or from the tail when `from_back`); returns how many were removed (LREM).
    /// Removes few matches one by one and many by repacking in one pass; leaves the list
    /// untouched (still shared) when none match.
    pub fn remove_matching(
        &mut self,
        mut drop: impl FnMut(&[u8]) -> bool,
        limit: usize,
        from_back: bool,
    ) -> usize {
        let n = self.len;
        let mut idx: Vec<usize> = if from_back {
            let it = self.iter().rev().enumerate();
            it.filter(|(_, v)| drop(v))
                .map(|(i, _)| n - 1 - i)
                .take(limit)
                .collect()
        } else {
            let it = self.iter().enumerate();
            it.filter(|(_, v)| drop(v))
                .map(|(i, _)| i)
                .take(limit)
                .collect()
        };
        let removed = idx.len();
        if from_back {
            idx.reverse();
        }
        if removed * 8 <= n {
            for &i in idx.iter().rev() {
                self.remove(i);
            }
        } else {
            let mut next = idx.iter().peekable();
            let kept = self
                .iter()
                .enumerate()
                .filter(|(i, _)| next.next_if_eq(&i).is_none())
                .map(|(_, v)| v);
            *self = Self::from_chunks(Chunk::pack(kept));
        }
        removed
    }

    /// A list of packed chunks, in order.
    fn from_chunks(chunks: Vec<Chunk>) -> Self {
        let len = chunks.iter().map(Chunk::len).sum();
        PByteList {
            tree: Tree::from_iter(chunks),
            len,
        }
    }

    /// Elements from head to tail.
    pub fn iter(&self) -> Iter<'_> {
        self.range(0, self.len)
    }

    /// Elements with indexes in `start..end` (clamped), head to tail.
    pub fn range(&self, start: usize, end: usize) -> Iter<'_> {
        let end = end.min(self.len);
        let mut it = Iter {
            chunks: self.tree.range(0, 0),
            front: ChunkIter::empty(),
            back: ChunkIter::empty(),
            remaining: end.saturating_sub(start),
        };
        if start >= end {
            return it;
        }
        let (ps, ks) = self.locate(start);
        let (pe, ke) = self.locate(end - 1);
        let (first, last) = (self.tree.at(&ps), self.tree.at(&pe));
        let trim = last.len() - 1 - ke;
        if ps.rank == pe.rank {
            it.front = first.walk_from(ks).trim_back(trim);
        } else {
            it.front = first.walk_from(ks);
            it.back = last.walk_from(0).trim_back(trim);
            it.chunks = self.tree.range(ps.rank + 1, pe.rank);
        }
        it
    }

    /// Bytes on the heap: tree nodes and chunks (shared ones counted as if owned).
    pub fn heap_size(&self) -> usize {
        let chunks = self.tree.range(0, self.tree.len);
        self.tree.heap_size() + chunks.map(Chunk::heap_size).sum::<usize>()
    }

    /// Whether two lists are the same version.
    pub fn ptr_eq(&self, other: &Self) -> bool {
        triomphe::Arc::ptr_eq(&self.tree.root, &other.tree.root)
    }

    /// Panics when an invariant is broken: the tree's (sizes, fill, depth, cached counts),
    /// every chunk's (parses, non-empty, bounded) and the element count.
    pub fn check_invariants(&self) {
        self.tree.check();
        let mut total = 0;
        for c in self.tree.iter() {
            c.check();
            total += c.len();
        }
        assert_eq!(total, self.len, "element count");
        assert_eq!(self.iter().count(), self.len, "walk length");
    }
}

impl<'a> FromIterator<&'a [u8]> for PByteList {
    fn from_iter<I: IntoIterator<Item = &'a [u8]>>(iter: I) -> Self {
        Self::from_chunks(Chunk::pack(iter))
    }
}

impl PartialEq for PByteList {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && (self.ptr_eq(other) || self.iter().eq(other.iter()))
    }
}

impl Eq for PByteList {}

impl core::fmt::Debug for PByteList {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// A double-ended walk over a range of a list's elements.
pub struct Iter<'a> {
    /// Whole chunks between the two ends.
    chunks: crate::list::tree::Iter<'a, Chunk, usize>,
    front: ChunkIter<'a>,
    back: ChunkIter<'a>,
    remaining: usize,
}

impl<'a> Iter<'a> {
    /// The next element once the front chunk is walked: from the next whole chunk, else from
    /// the back chunk.
    #[cold]
    fn next_chunk(&mut self) -> Option<&'a [u8]> {
        loop {
            match self.chunks.next() {
                Some(c) => self.front = c.walk_from(0),
                None => return self.back.next(),
            }
            if let Some(v) = self.front.next() {
                return Some(v);
            }
        }
    }
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        match self.front.next() {
            Some(v) => Some(v),
            None => self.next_chunk(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }

    /// A whole walk (LRANGE's): each chunk in a tight loop of its own, counting down once.
    fn fold<B, F: FnMut(B, &'a [u8]) -> B>(mut self, init: B, mut f: F) -> B {
        let mut acc = init;
        let mut left = self.remaining;
        let mut take = |from: &mut ChunkIter<'a>, acc: B, left: &mut usize| {
            let mut acc = acc;
            while *left > 0 {
                let Some(v) = from.next() else { break };
                *left -= 1;
                acc = f(acc, v);
            }
            acc
        };
        acc = take(&mut self.front, acc, &mut left);
        while left > 0 {
            let Some(c) = self.chunks.next() else { break };
            acc = take(&mut c.walk_from(0), acc, &mut left);
        }
        take(&mut self.back, acc, &mut left)
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        loop {
            if let Some(v) = self.back.next_back() {
                return Some(v);
            }
            match self.chunks.next_back() {
                Some(c) => self.back = c.walk_from(0),
                None => return self.front.next_back(),
            }
        }
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl core::iter::FusedIterator for Iter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;
    use alloc::vec;
    use alloc::vec::Vec;

    fn el(i: usize) -> Vec<u8> {
        format!("element:{i}").into_bytes()
    }

    fn items(l: &PByteList) -> Vec<Vec<u8>> {
        l.iter().map(<[u8]>::to_vec).collect()
    }

    #[test]
    fn pushes_pops_and_ranges_match_a_vec() {
        let mut l = PByteList::new();
        let mut m: Vec<Vec<u8>> = Vec::new();
        for i in 0..5000 {
            if i % 3 == 0 {
                l.push_front(&el(i));
                m.insert(0, el(i));
            } else {
                l.push_back(&el(i));
                m.push(el(i));
            }
        }
        l.check_invariants();
        assert_eq!(items(&l), m);
        let rev: Vec<Vec<u8>> = l.iter().rev().map(<[u8]>::to_vec).collect();
        assert!(rev.iter().eq(m.iter().rev()));
        for (s, e) in [(0, 100), (150, 1900), (4990, 6000), (2000, 2001), (7, 3)] {
            let got: Vec<&[u8]> = l.range(s, e).collect();
            let want: Vec<&[u8]> = m
                .get(s.min(m.len())..e.min(m.len()).max(s.min(m.len())))
                .unwrap_or(&[])
                .iter()
                .map(|v| &v[..])
                .collect();
            assert_eq!(got, want, "range {s}..{e}");
            let back: Vec<&[u8]> = l.range(s, e).rev().collect();
            assert!(back.iter().eq(want.iter().rev()));
        }
        for i in [0, 1, 2047, 4999] {
            assert_eq!(l.get(i), Some(&m[i][..]));
        }
        for _ in 0..1000 {
            assert_eq!(l.pop_back().as_deref(), m.pop().as_deref());
            assert_eq!(l.pop_front().as_deref(), Some(&m.remove(0)[..]));
        }
        l.check_invariants();
        assert_eq!(items(&l), m);
    }

    #[test]
    fn middle_writes_long_elements_and_snapshots() {
        let mut l: PByteList = (0..3000)
            .map(el)
            .collect::<Vec<_>>()
            .iter()
            .map(|v| &v[..])
            .collect();
        let mut m: Vec<Vec<u8>> = (0..3000).map(el).collect();
        let snap = l.clone();
        let long = vec![b'x'; 1000];
        let mut seed = 12345u64;
        for step in 0..3000 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let i = (seed >> 33) as usize % (m.len() + 1);
            let v = if step % 50 == 0 {
                long.clone()
            } else {
                el(step)
            };
            match step % 4 {
                0 | 1 => {
                    l.insert(i, &v);
                    m.insert(i, v);
                }
                2 if i < m.len() => {
                    assert!(l.set(i, &v));
                    m[i] = v;
                }
                _ if i < m.len() => {
                    assert_eq!(l.remove(i).as_deref(), Some(&m.remove(i)[..]));
                }
                _ => {}
            }
        }
        l.check_invariants();
        assert_eq!(items(&l), m);
        assert_eq!(snap.len(), 3000);
        assert!(snap
            .iter()
            .eq((0..3000).map(el).collect::<Vec<_>>().iter().map(|v| &v[..])));
        snap.check_invariants();
    }

    #[test]
    fn three_levels_of_branches() {
        let big = |i: usize| {
            let mut v = el(i);
            v.resize(200, b'.');
            v
        };
        let mut l = PByteList::new();
        let mut m: Vec<Vec<u8>> = Vec::new();
        for i in 0..25_000 {
            l.push_back(&big(i));
            m.push(big(i));
        }
        assert!(l.tree.height() >= 3, "height {}", l.tree.height());
        let snap = l.clone();
        for (n, i) in [0, 9_999, 12_345, 24_990, 5].into_iter().enumerate() {
            assert_eq!(l.get(i), Some(&m[i][..]));
            l.insert(i, &el(n));
            m.insert(i, el(n));
            assert!(l.set(i + 1, b"set"));
            m[i + 1] = b"set".to_vec();
            assert_eq!(l.remove(i + 2).as_deref(), Some(&m.remove(i + 2)[..]));
        }
        l.retain_range(3_000, 21_000);
        m = m[3_000..21_000].to_vec();
        l.check_invariants();
        assert_eq!(items(&l), m);
        let tail: Vec<&[u8]> = l.range(17_000, 17_500).rev().collect();
        assert!(tail.iter().eq(m[17_000..17_500].iter().rev()));
        snap.check_invariants();
        assert!(snap
            .iter()
            .eq((0..25_000).map(big).collect::<Vec<_>>().iter()));
    }

    #[test]
    fn trims_and_removal() {
        let build = || -> PByteList {
            let mut l = PByteList::new();
            (0..4000).for_each(|i| l.push_back(&el(i % 10)));
            l
        };
        let mut l = build();
        l.retain_range(1234, 3210);
        l.check_invariants();
        assert_eq!(l.len(), 3210 - 1234);
        assert_eq!(l.front(), Some(&el(4)[..]));
        assert_eq!(l.back(), Some(&el(9)[..]));
        let mut few = build();
        assert_eq!(few.remove_matching(|v| v == &el(3)[..], 5, true), 5);
        few.check_invariants();
        assert_eq!(few.len(), 3995);
        assert_eq!(few.iter().filter(|v| *v == &el(3)[..]).count(), 395);
        let mut many = build();
        assert_eq!(
            many.remove_matching(|v| v != &el(3)[..], usize::MAX, false),
            3600
        );
        many.check_invariants();
        assert!(many.iter().all(|v| v == &el(3)[..]) && many.len() == 400);
        many.retain_range(5, 1);
        assert!(many.is_empty());
    }

    #[test]
    fn compact_per_element() {
        let mut l = PByteList::new();
        (0..1000).for_each(|i| l.push_back(&el(i)));
        let data: usize = (0..1000).map(|i| el(i).len() + 1).sum();
        assert!(l.heap_size() < data + 600, "{} for {data}", l.heap_size());
    }
}
