//! `List`: a list's elements, packed while Redis would keep them in one listpack node, a
//! persistent list after.
//!
//! The packed form is one exact-size buffer: the element count (u16, little-endian), then
//! each element as `varint(len) bytes`, head first, as a listpack without its back-lengths.
//! It holds as long as the list fits one node under `list-max-listpack-size` (see
//! [`fits`]): by default 8 KiB, so a write that a snapshot shares copies at most that much.
//! Past it the list becomes a persistent list of packed chunks (`PByteList`: a counted
//! B+tree of shared 2 KiB runs of elements, O(1) clones) for good; only new values (loaded, restored) start packed again. `OBJECT ENCODING` answers
//! `quicklist` for both, as Redis 7.0 does for every list.

use super::flat::{get_bytes, put_bytes, varint_len};
use super::zset::Either;
use alloc::boxed::Box;
use alloc::vec::Vec;
use kayvee_pds::{PByteList, SmallBytes};

/// The persistent form of a big list.
pub type ListTree = PByteList;

/// Bytes of the packed form's count header.
const HEAD: usize = 2;
/// Most elements the packed form counts.
const PACKED_LEN_MAX: usize = u16::MAX as usize;
/// A node's byte limit for a positive `list-max-listpack-size` (a count): Redis's safety limit.
const SAFETY_BYTES: usize = 8192;
/// The default `list-max-listpack-size` (-2: 8 KiB per node), for values loaded or restored.
pub const DEFAULT_FILL: i64 = -2;

/// Whether a packed list of `len` elements taking `bytes` fits one node under `fill`
/// (`list-max-listpack-size`): negative, a size of 4 KiB << (-fill - 1) (at most 64 KiB);
/// positive, that many elements and at most 8 KiB.
pub fn fits(fill: i64, len: usize, bytes: usize) -> bool {
    let (bytes_max, len_max) = if fill < 0 {
        let shift = (fill.unsigned_abs() - 1).min(4);
        (4096usize << shift, PACKED_LEN_MAX)
    } else {
        (SAFETY_BYTES, (fill.max(1) as usize).min(PACKED_LEN_MAX))
    };
    len <= len_max && bytes <= bytes_max
}

/// A list of byte strings.
#[derive(Clone)]
pub struct List(Repr);

/// The two representations.
#[derive(Clone)]
enum Repr {
    /// Count and elements in one buffer (empty when there is none).
    Packed(Box<[u8]>),
    /// A persistent list.
    Tree(Box<ListTree>),
}

/// The element count of a packed buffer.
#[inline]
fn count(buf: &[u8]) -> usize {
    match buf {
        [a, b, ..] => usize::from(u16::from_le_bytes([*a, *b])),
        _ => 0,
    }
}

/// Byte offset of element `i` of a packed buffer (`buf.len()` for `i == count`).
fn offset(buf: &[u8], i: usize) -> usize {
    let mut at = HEAD;
    for _ in 0..i {
        get_bytes(buf, &mut at);
    }
    at
}

/// A packed buffer of `n` elements whose bytes after the header are `body`.
fn with_count(n: usize, body: Vec<u8>) -> Box<[u8]> {
    let mut out = body;
    if n == 0 {
        return Box::default();
    }
    out[..HEAD].copy_from_slice(&(n as u16).to_le_bytes());
    out.into_boxed_slice()
}

/// `n` as a varint in a stack buffer, and its length.
fn varint_bytes(mut n: usize) -> ([u8; 10], usize) {
    let (mut out, mut k) = ([0u8; 10], 0);
    while n >= 0x80 {
        out[k] = (n as u8) | 0x80;
        n >>= 7;
        k += 1;
    }
    out[k] = n as u8;
    (out, k + 1)
}

/// Walks a packed buffer from both ends. Walking back needs the element offsets, found in one
/// forward pass the first time (only reverse walks pay it).
#[derive(Clone)]
pub struct PackedIter<'a> {
    buf: &'a [u8],
    /// Byte offset of the next element from the front.
    at: usize,
    /// Index of the next element from the front, and one past the last from the back.
    front: usize,
    back: usize,
    /// Start offsets of every element, once a reverse walk needed them.
    starts: Option<Vec<u32>>,
}

impl<'a> PackedIter<'a> {
    /// The elements with indexes in `start..end` (clamped).
    fn new(buf: &'a [u8], start: usize, end: usize) -> Self {
        let n = count(buf);
        let (start, end) = (start.min(n), end.min(n));
        PackedIter {
            buf,
            at: if start < end {
                offset(buf, start)
            } else {
                HEAD
            },
            front: start,
            back: end.max(start),
            starts: None,
        }
    }
}

impl<'a> Iterator for PackedIter<'a> {
    type Item = &'a [u8];
    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.front >= self.back {
            return None;
        }
        self.front += 1;
        Some(get_bytes(self.buf, &mut self.at))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.back - self.front;
        (n, Some(n))
    }
}

impl DoubleEndedIterator for PackedIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.front >= self.back {
            return None;
        }
        let buf = self.buf;
        let starts = self.starts.get_or_insert_with(|| {
            let mut at = HEAD;
            (0..count(buf))
                .map(|_| {
                    let s = at as u32;
                    get_bytes(buf, &mut at);
                    s
                })
                .collect()
        });
        self.back -= 1;
        let mut at = starts[self.back] as usize;
        Some(get_bytes(buf, &mut at))
    }
}

impl ExactSizeIterator for PackedIter<'_> {}

impl Default for List {
    fn default() -> Self {
        Self::new()
    }
}

impl List {
    /// An empty packed list (no allocation until the first element).
    pub fn new() -> Self {
        List(Repr::Packed(Box::default()))
    }

    /// A list of `items`, packed when they fit the default node size.
    pub fn from_items<'i>(items: impl IntoIterator<Item = &'i [u8]>) -> Self {
        let mut l = List::new();
        items.into_iter().for_each(|v| l.push_back(v, DEFAULT_FILL));
        l
    }

    /// Whether this is the packed form.
    pub fn is_packed(&self) -> bool {
        matches!(self.0, Repr::Packed(_))
    }

    /// Number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Packed(buf) => count(buf),
            Repr::Tree(t) => t.len(),
        }
    }

    /// Whether there is no element.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Converts to the tree form (no-op when already there).
    pub fn make_tree(&mut self) {
        if let Repr::Packed(buf) = &self.0 {
            let t: ListTree = PackedIter::new(buf, 0, usize::MAX).collect();
            self.0 = Repr::Tree(Box::new(t));
        }
    }

    /// Puts a new value (loaded, restored) in the packed form when it fits one node under
    /// `fill`. Existing values never go back from the tree form.
    pub fn normalize(&mut self, fill: i64) {
        if let Repr::Tree(t) = &self.0 {
            let bytes = HEAD
                + t.iter()
                    .map(|v| varint_len(v.len()) + v.len())
                    .sum::<usize>();
            if fits(fill, t.len(), bytes) {
                let mut body = alloc::vec![0; HEAD];
                body.reserve_exact(bytes - HEAD);
                t.iter().for_each(|v| put_bytes(&mut body, v));
                self.0 = Repr::Packed(with_count(t.len(), body));
            }
        }
    }

    /// The packed buffer with `v` spliced in at byte `at` as element number `i`, if the result
    /// fits under `fill`; else the list becomes a tree. Returns whether it stayed packed.
    fn packed_insert(&mut self, at: usize, v: &[u8], fill: i64) -> bool {
        let Repr::Packed(buf) = &mut self.0 else {
            return false;
        };
        let (n, grow) = (count(buf), varint_len(v.len()) + v.len());
        let len = buf.len().max(HEAD);
        if !fits(fill, n + 1, len + grow) {
            self.make_tree();
            return false;
        }
        let mut out = core::mem::take(buf).into_vec();
        if out.is_empty() {
            out.resize(HEAD, 0);
        }
        out.reserve_exact(grow);
        let (entry, head) = varint_bytes(v.len());
        if at >= out.len() {
            out.extend_from_slice(&entry[..head]);
            out.extend_from_slice(v);
        } else {
            out.splice(at..at, entry[..head].iter().chain(v).copied());
        }
        *buf = with_count(n + 1, out);
        true
    }

    /// Pushes at the tail, converting to the tree form when the packed one would outgrow its
    /// node under `fill` (`list-max-listpack-size`).
    pub fn push_back(&mut self, v: &[u8], fill: i64) {
        if let Repr::Packed(buf) = &self.0 {
            let end = buf.len().max(HEAD);
            if self.packed_insert(end, v, fill) {
                return;
            }
        }
        if let Repr::Tree(t) = &mut self.0 {
            t.push_back(v);
        }
    }

    /// Pushes at the head (see [`List::push_back`]).
    pub fn push_front(&mut self, v: &[u8], fill: i64) {
        if self.is_packed() && self.packed_insert(HEAD, v, fill) {
            return;
        }
        if let Repr::Tree(t) = &mut self.0 {
            t.push_front(v);
        }
    }

    /// Inserts `v` before index `i` (`i == len` appends).
    pub fn insert(&mut self, i: usize, v: &[u8], fill: i64) {
        if let Repr::Packed(buf) = &self.0 {
            let at = offset(buf, i.min(count(buf)));
            if self.packed_insert(at, v, fill) {
                return;
            }
        }
        if let Repr::Tree(t) = &mut self.0 {
            t.insert(i, v);
        }
    }

    /// Removes element `i` of a packed buffer (which must hold it), returning it.
    fn packed_remove(buf: &mut Box<[u8]>, i: usize) -> SmallBytes {
        let n = count(buf);
        let from = offset(buf, i);
        let mut to = from;
        let v = SmallBytes::from_slice(get_bytes(buf, &mut to));
        if n == 1 {
            *buf = Box::default();
        } else {
            let mut out = Vec::with_capacity(buf.len() - (to - from));
            out.extend_from_slice(&buf[..from]);
            out.extend_from_slice(&buf[to..]);
            *buf = with_count(n - 1, out);
        }
        v
    }

    /// Removes and returns the head.
    pub fn pop_front(&mut self) -> Option<SmallBytes> {
        match &mut self.0 {
            Repr::Packed(buf) if count(buf) == 0 => None,
            Repr::Packed(buf) => Some(Self::packed_remove(buf, 0)),
            Repr::Tree(t) => t.pop_front(),
        }
    }

    /// Removes and returns the tail.
    pub fn pop_back(&mut self) -> Option<SmallBytes> {
        match &mut self.0 {
            Repr::Packed(buf) => match count(buf) {
                0 => None,
                n => Some(Self::packed_remove(buf, n - 1)),
            },
            Repr::Tree(t) => t.pop_back(),
        }
    }

    /// Element `i`.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        match &self.0 {
            Repr::Packed(buf) => PackedIter::new(buf, i, i.saturating_add(1)).next(),
            Repr::Tree(t) => t.get(i),
        }
    }

    /// Replaces element `i` (which must exist), converting as a push would.
    pub fn set(&mut self, i: usize, v: &[u8], fill: i64) {
        match &mut self.0 {
            Repr::Packed(buf) => {
                Self::packed_remove(buf, i);
                self.insert(i, v, fill);
            }
            Repr::Tree(t) => {
                t.set(i, v);
            }
        }
    }

    /// Removes the elements `drop` says true for, at most `limit`, scanning from the head (or
    /// the tail when `from_back`); returns how many went (LREM).
    pub fn remove_matching(
        &mut self,
        mut drop: impl FnMut(&[u8]) -> bool,
        limit: usize,
        from_back: bool,
    ) -> usize {
        match &mut self.0 {
            Repr::Packed(buf) => {
                let n = count(buf);
                let mut hits: Vec<usize> = if from_back {
                    let it = PackedIter::new(buf, 0, n).enumerate().rev();
                    it.filter(|(_, v)| drop(v))
                        .map(|(i, _)| i)
                        .take(limit)
                        .collect()
                } else {
                    let it = PackedIter::new(buf, 0, n).enumerate();
                    it.filter(|(_, v)| drop(v))
                        .map(|(i, _)| i)
                        .take(limit)
                        .collect()
                };
                if hits.is_empty() {
                    return 0;
                }
                hits.sort_unstable();
                let mut body = alloc::vec![0; HEAD];
                let mut next = hits.iter().peekable();
                for (i, v) in PackedIter::new(buf, 0, n).enumerate() {
                    if next.next_if_eq(&&i).is_none() {
                        put_bytes(&mut body, v);
                    }
                }
                *buf = with_count(n - hits.len(), body);
                hits.len()
            }
            Repr::Tree(t) => t.remove_matching(drop, limit, from_back),
        }
    }

    /// Keeps only the elements with indexes in `start..end` (LTRIM).
    pub fn retain_range(&mut self, start: usize, end: usize) {
        match &mut self.0 {
            Repr::Packed(buf) => {
                let n = count(buf);
                let (s, e) = (start.min(n), end.min(n));
                if s == 0 && e == n {
                    return;
                }
                let (from, to) = (offset(buf, s), offset(buf, e.max(s)));
                let mut body = Vec::with_capacity(HEAD + to - from);
                body.extend_from_slice(&[0; HEAD]);
                body.extend_from_slice(&buf[from..to]);
                *buf = with_count(e.saturating_sub(s), body);
            }
            Repr::Tree(t) => t.retain_range(start, end),
        }
    }

    /// Elements from head to tail.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &[u8]> + ExactSizeIterator + '_ {
        self.range(0, usize::MAX)
    }

    /// Elements with indexes in `start..end` (clamped), head to tail.
    pub fn range(
        &self,
        start: usize,
        end: usize,
    ) -> impl DoubleEndedIterator<Item = &[u8]> + ExactSizeIterator + '_ {
        match &self.0 {
            Repr::Packed(buf) => Either::L(PackedIter::new(buf, start, end)),
            Repr::Tree(t) => Either::R(t.range(start, end)),
        }
    }

    /// Heap bytes owned (the buffer, or the tree's nodes and out-of-line elements).
    pub fn heap_size(&self) -> usize {
        match &self.0 {
            Repr::Packed(buf) => buf.len(),
            Repr::Tree(t) => core::mem::size_of::<ListTree>() + t.heap_size(),
        }
    }

    /// Panics when the structure is inconsistent: a packed buffer whose count does not match
    /// its elements or that does not parse to its end, or an empty one that allocated.
    pub fn check_invariants(&self) {
        match &self.0 {
            Repr::Packed(buf) => {
                if buf.is_empty() {
                    return;
                }
                let n = count(buf);
                assert!(n > 0, "an empty packed list holds no buffer");
                assert_eq!(offset(buf, n), buf.len(), "packed list length");
            }
            Repr::Tree(t) => t.check_invariants(),
        }
    }
}

impl FromIterator<SmallBytes> for List {
    fn from_iter<I: IntoIterator<Item = SmallBytes>>(iter: I) -> Self {
        let mut l = List::new();
        iter.into_iter().for_each(|v| l.push_back(&v, DEFAULT_FILL));
        l
    }
}

impl PartialEq for List {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl core::fmt::Debug for List {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(if self.is_packed() {
            "List::Packed"
        } else {
            "List::Tree"
        })?;
        f.debug_list()
            .entries(self.iter().map(SmallBytes::from_slice))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(l: &List) -> Vec<Vec<u8>> {
        l.iter().map(<[u8]>::to_vec).collect()
    }

    #[test]
    fn packed_pushes_pops_and_walks_both_ways() {
        let mut l = List::new();
        l.push_back(b"b", -2);
        l.push_front(b"a", -2);
        l.push_back(b"c", -2);
        l.insert(1, b"ab", -2);
        assert!(l.is_packed());
        assert_eq!(items(&l), [&b"a"[..], b"ab", b"b", b"c"]);
        let rev: Vec<&[u8]> = l.iter().rev().collect();
        assert_eq!(rev, [&b"c"[..], b"b", b"ab", b"a"]);
        {
            let mut it = l.iter();
            let ends = (it.next(), it.next_back(), it.len());
            assert_eq!(ends, (Some(&b"a"[..]), Some(&b"c"[..]), 2));
        }
        assert_eq!(l.get(3), Some(&b"c"[..]));
        assert_eq!(l.get(4), None);
        assert_eq!(l.heap_size(), HEAD + 2 + 3 + 2 + 2);
        assert_eq!(l.pop_back().as_deref(), Some(&b"c"[..]));
        assert_eq!(l.pop_front().as_deref(), Some(&b"a"[..]));
        l.set(0, b"zz", -2);
        assert_eq!(items(&l), [&b"zz"[..], b"b"]);
        l.check_invariants();
        l.pop_back();
        l.pop_back();
        assert!(l.is_empty() && l.heap_size() == 0);
    }

    #[test]
    fn range_trim_and_remove() {
        let mut l = List::from_items(["a", "b", "a", "c", "a"].map(str::as_bytes));
        let mid: Vec<&[u8]> = l.range(1, 4).collect();
        assert_eq!(mid, [&b"b"[..], b"a", b"c"]);
        assert_eq!(l.remove_matching(|v| v == b"a", 2, true), 2);
        assert_eq!(items(&l), [&b"a"[..], b"b", b"c"]);
        l.retain_range(1, 3);
        assert_eq!(items(&l), [&b"b"[..], b"c"]);
        l.retain_range(0, 0);
        assert!(l.is_empty());
        l.check_invariants();
    }

    #[test]
    fn a_list_outgrowing_its_node_becomes_a_tree_and_clones_are_snapshots() {
        let mut l = List::new();
        l.push_back(b"first", 3);
        let snap = l.clone();
        l.push_back(b"2", 3);
        l.push_back(b"3", 3);
        assert!(l.is_packed());
        l.push_front(b"0", 3);
        assert!(!l.is_packed());
        assert_eq!(items(&l), [&b"0"[..], b"first", b"2", b"3"]);
        assert_eq!(items(&snap), [&b"first"[..]]);
        let mut big = List::new();
        (0..2000).for_each(|_| big.push_back(b"xyz", -1));
        assert!(!big.is_packed(), "4 KiB exceeded");
        big.retain_range(0, 10);
        big.normalize(-1);
        assert!(big.is_packed() && big.len() == 10);
        assert!(fits(-2, 1, 8192) && !fits(-2, 1, 8193) && fits(-5, 1, 65536));
        assert!(fits(128, 128, 100) && !fits(128, 129, 100) && !fits(128, 1, 8193));
    }
}
