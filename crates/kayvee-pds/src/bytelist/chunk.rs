//! `Chunk`: a run of a byte list's elements packed in one buffer, shared by reference count.
//!
//! Layout of a *narrow* chunk (every element shorter than [`LONG`] bytes): each element is one
//! header byte then its bytes, and the header is the XOR of the element's length with the
//! previous element's (0 before the first). The chunk keeps the last element's length beside
//! the buffer, so a walk from either end recovers every length: forwards from 0, backwards from
//! the last one. That costs one byte per element (a listpack spends two: encoding and
//! back-length) and keeps pushes and pops at both ends O(1) apart from moving bytes.
//!
//! A *wide* chunk holds one element of [`LONG`] bytes or more: the header byte 255 (a length
//! no narrow element has), then the element's bytes.
//!
//! A chunk's buffer stays within [`CHUNK_BYTES_MAX`] unless it holds one element, so a write that
//! a snapshot shares copies at most that much. Mutators need a chunk no one else holds
//! ([`Chunk::make_mut`] copies a shared one first).

use alloc::vec::Vec;
use triomphe::Arc;

/// Elements this long or longer live alone in a wide chunk.
pub(crate) const LONG: usize = 255;
/// Most bytes in a chunk of more than one element.
pub(crate) const CHUNK_BYTES_MAX: usize = 2048;
/// The header of a wide chunk's element (the length it decodes to, from a first element).
const WIDE: u8 = 255;
/// Smallest buffer capacity allocated for a chunk that grows.
const CAPACITY_MIN: usize = 32;

/// A shared, immutable-while-shared run of elements.
#[derive(Clone)]
pub(crate) struct Chunk(Arc<Buf>);

/// The buffer behind a chunk.
#[derive(Clone)]
pub(crate) struct Buf {
    /// The packed elements.
    bytes: Vec<u8>,
    /// Elements held.
    n: u32,
    /// Length of the last element (0 when empty).
    last: u32,
}

/// A position between elements: the byte offset of element `k`'s header (or the buffer's end)
/// and the length of element `k - 1` (0 when `k == 0`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cursor {
    at: usize,
    prev: usize,
}

impl Chunk {
    /// A chunk holding just `v`.
    pub fn single(v: &[u8]) -> Chunk {
        let mut b = Buf {
            bytes: Vec::new(),
            n: 0,
            last: 0,
        };
        if v.len() >= LONG {
            b.bytes.reserve_exact(1 + v.len());
            b.bytes.push(WIDE);
            b.bytes.extend_from_slice(v);
            (b.n, b.last) = (1, v.len() as u32);
        } else {
            b.bytes.reserve_exact((1 + v.len()).max(CAPACITY_MIN));
            b.push_back(v);
        }
        Chunk(Arc::new(b))
    }

    /// Packs `items` into chunks filled up to [`CHUNK_BYTES_MAX`], each buffer exact-size.
    pub fn pack<'a>(items: impl IntoIterator<Item = &'a [u8]>) -> Vec<Chunk> {
        let mut out = Vec::new();
        let mut cur: Option<Buf> = None;
        for v in items {
            if cur.as_ref().is_some_and(|b| !b.has_room(v.len())) {
                out.push(Chunk::sealed(cur.take()));
            }
            match &mut cur {
                Some(b) => b.push_back(v),
                None if v.len() >= LONG => out.push(Chunk::single(v)),
                None => cur = Some(Chunk::single(v).into_buf()),
            }
        }
        if cur.is_some() {
            out.push(Chunk::sealed(cur));
        }
        out
    }

    /// A chunk of a finished buffer, its capacity trimmed.
    fn sealed(b: Option<Buf>) -> Chunk {
        let mut b = b.expect("a buffer to seal");
        b.bytes.shrink_to_fit();
        Chunk(Arc::new(b))
    }

    /// The buffer, taken out of its reference count (copied when shared).
    fn into_buf(self) -> Buf {
        Arc::try_unwrap(self.0).unwrap_or_else(|a| (*a).clone())
    }

    /// The buffer, to mutate (copied first when shared).
    pub fn make_mut(&mut self) -> &mut Buf {
        Arc::make_mut(&mut self.0)
    }

    /// Elements held.
    #[inline]
    pub fn len(&self) -> usize {
        self.0.n as usize
    }

    /// Whether `v` can join this chunk in place.
    #[inline]
    pub fn has_room(&self, v: usize) -> bool {
        self.0.has_room(v)
    }

    /// Element `k` (which must exist).
    pub fn get(&self, k: usize) -> &[u8] {
        let b = &*self.0;
        if b.is_wide() {
            return &b.bytes[1..];
        }
        let c = b.cursor(k);
        let len = usize::from(b.bytes[c.at]) ^ c.prev;
        &b.bytes[c.at + 1..c.at + 1 + len]
    }

    /// The elements from index `from` (within the chunk) to the chunk's end, both ways.
    pub fn walk_from(&self, from: usize) -> ChunkIter<'_> {
        let b = &*self.0;
        let c = b.cursor(from);
        ChunkIter {
            rest: &b.bytes[c.at..],
            front_prev: c.prev,
            back_prev: b.last as usize,
            trim: 0,
        }
    }

    /// Heap bytes: the shared header with its count, and the buffer's capacity.
    pub fn heap_size(&self) -> usize {
        2 * core::mem::size_of::<usize>() + core::mem::size_of::<Buf>() + self.0.bytes.capacity()
    }

    /// Buffer bytes used.
    pub fn bytes(&self) -> usize {
        self.0.bytes.len()
    }

    /// Panics when the buffer does not parse to its end into `len()` elements ending with one
    /// of `last` bytes, holds none, or breaks the size or wide rules.
    pub fn check(&self) {
        let b = &*self.0;
        assert!(b.n >= 1, "empty chunk");
        if b.is_wide() {
            assert_eq!(b.bytes.len(), 1 + b.last as usize, "wide chunk length");
            assert_eq!(b.bytes[0], WIDE, "wide chunk header");
            return;
        }
        assert!(
            b.bytes.len() <= CHUNK_BYTES_MAX || b.n == 1,
            "chunk of {} bytes",
            b.bytes.len()
        );
        let end = b.cursor_from_front(b.n as usize);
        assert_eq!(end.at, b.bytes.len(), "chunk parses to its end");
        assert_eq!(end.prev, b.last as usize, "last element's length");
        let back = b.cursor_from_back(0);
        assert_eq!(back, Cursor { at: 0, prev: 0 }, "backward walk");
    }
}

impl Buf {
    /// Elements held.
    #[inline]
    pub fn len(&self) -> usize {
        self.n as usize
    }

    /// Whether this holds one long element, raw.
    #[inline]
    fn is_wide(&self) -> bool {
        self.n == 1 && self.last as usize >= LONG
    }

    /// Whether a `v`-byte element can join in place.
    #[inline]
    fn has_room(&self, v: usize) -> bool {
        v < LONG && !self.is_wide() && self.bytes.len() + 1 + v <= CHUNK_BYTES_MAX
    }

    /// Reserves room for `extra` more bytes, growing by half (capped at the chunk size) so the
    /// last chunk of a list wastes little.
    fn reserve(&mut self, extra: usize) {
        let need = self.bytes.len() + extra;
        let cap = self.bytes.capacity();
        if need > cap {
            let target = (cap + cap / 2)
                .clamp(CAPACITY_MIN, CHUNK_BYTES_MAX)
                .max(need);
            self.bytes.reserve_exact(target - self.bytes.len());
        }
    }

    /// The position before element `k` (`k <= n`), walking from the nearer end.
    fn cursor(&self, k: usize) -> Cursor {
        if k <= self.n as usize / 2 {
            self.cursor_from_front(k)
        } else {
            self.cursor_from_back(k)
        }
    }

    /// The position before element `k`, walking forwards from the first.
    fn cursor_from_front(&self, k: usize) -> Cursor {
        let mut c = Cursor { at: 0, prev: 0 };
        for _ in 0..k {
            let len = usize::from(self.bytes[c.at]) ^ c.prev;
            c = Cursor {
                at: c.at + 1 + len,
                prev: len,
            };
        }
        c
    }

    /// The position before element `k`, walking backwards from the end.
    fn cursor_from_back(&self, k: usize) -> Cursor {
        let mut c = Cursor {
            at: self.bytes.len(),
            prev: self.last as usize,
        };
        for _ in k..self.n as usize {
            let start = c.at - c.prev - 1;
            c = Cursor {
                at: start,
                prev: usize::from(self.bytes[start]) ^ c.prev,
            };
        }
        c
    }

    /// Rewrites the header at `at` (an element whose length is `len`) for a new predecessor
    /// length `prev`.
    fn relink(&mut self, at: usize, prev: usize, len: usize) {
        self.bytes[at] = (prev ^ len) as u8;
    }

    /// Appends a short element.
    pub fn push_back(&mut self, v: &[u8]) {
        debug_assert!(v.len() < LONG && !self.is_wide());
        self.reserve(1 + v.len());
        self.bytes.push((self.last as usize ^ v.len()) as u8);
        self.bytes.extend_from_slice(v);
        self.n += 1;
        self.last = v.len() as u32;
    }

    /// Adds a short element at the head.
    pub fn push_front(&mut self, v: &[u8]) {
        self.insert(0, v);
    }

    /// Inserts a short element before element `k` (`k <= n`).
    pub fn insert(&mut self, k: usize, v: &[u8]) {
        debug_assert!(v.len() < LONG && !self.is_wide());
        if k == self.n as usize {
            return self.push_back(v);
        }
        let c = self.cursor(k);
        let next = usize::from(self.bytes[c.at]) ^ c.prev;
        let add = 1 + v.len();
        self.reserve(add);
        let old = self.bytes.len();
        self.bytes.resize(old + add, 0);
        self.bytes.copy_within(c.at..old, c.at + add);
        self.bytes[c.at] = (c.prev ^ v.len()) as u8;
        self.bytes[c.at + 1..c.at + add].copy_from_slice(v);
        self.relink(c.at + add, v.len(), next);
        self.n += 1;
    }

    /// Removes element `k` (of at least two), calling `take` with its bytes first.
    pub fn remove<R>(&mut self, k: usize, take: impl FnOnce(&[u8]) -> R) -> R {
        debug_assert!(self.n >= 2 && k < self.n as usize);
        let c = self.cursor(k);
        let len = usize::from(self.bytes[c.at]) ^ c.prev;
        let end = c.at + 1 + len;
        let r = take(&self.bytes[c.at + 1..end]);
        if end < self.bytes.len() {
            let next = usize::from(self.bytes[end]) ^ len;
            self.relink(end, c.prev, next);
        } else {
            self.last = c.prev as u32;
        }
        self.bytes.drain(c.at..end);
        self.n -= 1;
        r
    }

    /// Keeps the first `k` elements (`1..n`).
    pub fn truncate(&mut self, k: usize) {
        let c = self.cursor(k);
        self.bytes.truncate(c.at);
        (self.n, self.last) = (k as u32, c.prev as u32);
    }

    /// Drops the first `k` elements (`1..n`).
    pub fn drop_front(&mut self, k: usize) {
        let c = self.cursor(k);
        let len = usize::from(self.bytes[c.at]) ^ c.prev;
        self.relink(c.at, 0, len);
        self.bytes.drain(..c.at);
        self.n -= k as u32;
    }

    /// Trims the capacity to the bytes used.
    pub fn shrink(&mut self) {
        self.bytes.shrink_to_fit();
    }
}

/// A double-ended walk over a chunk's elements from some index to its end. A forward walk
/// runs to the chunk's end (its caller counts what it wants); a backward walk first skips the
/// `trim` elements at the end that its caller's range leaves out.
#[derive(Clone)]
pub(crate) struct ChunkIter<'a> {
    /// The bytes of the elements not yet walked (and of the trimmed ones at the end).
    rest: &'a [u8],
    /// Length of the element before `rest`.
    front_prev: usize,
    /// Length of the last element in `rest`.
    back_prev: usize,
    /// Elements at the end of `rest` a backward walk skips.
    trim: usize,
}

impl<'a> ChunkIter<'a> {
    /// Walks nothing.
    pub fn empty() -> Self {
        ChunkIter {
            rest: &[],
            front_prev: 0,
            back_prev: 0,
            trim: 0,
        }
    }

    /// Leaves the last `n` elements out of a backward walk.
    pub fn trim_back(mut self, n: usize) -> Self {
        self.trim = n;
        self
    }

    /// The last element of `rest`, taken off.
    #[inline]
    fn take_back(&mut self) -> Option<&'a [u8]> {
        let len = self.back_prev;
        let split = self.rest.len().checked_sub(len)?;
        let (head, v) = self.rest.split_at(split);
        let (&h, head) = head.split_last()?;
        self.back_prev = usize::from(h) ^ len;
        self.rest = head;
        Some(v)
    }
}

impl<'a> Iterator for ChunkIter<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        let (&h, tail) = self.rest.split_first()?;
        let len = usize::from(h) ^ self.front_prev;
        if len == usize::from(WIDE) {
            self.rest = &[];
            return Some(tail);
        }
        let (v, tail) = tail.split_at(len);
        self.rest = tail;
        self.front_prev = len;
        Some(v)
    }
}

impl DoubleEndedIterator for ChunkIter<'_> {
    #[inline]
    fn next_back(&mut self) -> Option<Self::Item> {
        while self.trim > 0 {
            self.trim -= 1;
            self.take_back()?;
        }
        self.take_back()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn items(c: &Chunk) -> Vec<Vec<u8>> {
        c.walk_from(0).map(<[u8]>::to_vec).collect()
    }

    #[test]
    fn both_ends_and_the_middle() {
        let mut c = Chunk::single(b"bb");
        c.make_mut().push_back(b"");
        c.make_mut().insert(0, b"a");
        c.make_mut().insert(2, b"cccc");
        c.check();
        assert_eq!(items(&c), [&b"a"[..], b"bb", b"cccc", b""]);
        let back: Vec<&[u8]> = c.walk_from(0).rev().collect();
        assert_eq!(back, [&b""[..], b"cccc", b"bb", b"a"]);
        assert_eq!(c.get(2), b"cccc");
        let mid: Vec<&[u8]> = c.walk_from(1).trim_back(1).rev().collect();
        assert_eq!(mid, [&b"cccc"[..], b"bb"]);
        let mut ends = c.walk_from(1);
        assert_eq!(
            (ends.next(), ends.next_back()),
            (Some(&b"bb"[..]), Some(&b""[..]))
        );
        assert_eq!((ends.next(), ends.next_back()), (Some(&b"cccc"[..]), None));
        let snap = c.clone();
        assert_eq!(c.make_mut().remove(3, <[u8]>::to_vec), b"");
        assert_eq!(c.make_mut().remove(1, <[u8]>::to_vec), b"bb");
        c.check();
        assert_eq!(items(&c), [&b"a"[..], b"cccc"]);
        assert_eq!(items(&snap).len(), 4, "the snapshot kept its elements");
        c.make_mut().drop_front(1);
        c.check();
        assert_eq!(items(&c), [&b"cccc"[..]]);
    }

    #[test]
    fn pack_fills_chunks_and_long_elements_go_alone() {
        let long = vec![7u8; 300];
        let short = [1u8; 100];
        let mut all: Vec<&[u8]> = vec![&short; 30];
        all.insert(5, &long);
        let chunks = Chunk::pack(all.iter().copied());
        chunks.iter().for_each(Chunk::check);
        let lens: Vec<usize> = chunks.iter().map(Chunk::len).collect();
        assert_eq!(lens, [5, 1, 20, 5]);
        assert_eq!(chunks[1].get(0), &long[..]);
        assert_eq!(chunks[1].walk_from(0).next_back(), Some(&long[..]));
        assert_eq!(chunks[1].walk_from(0).next(), Some(&long[..]));
        let mut t = chunks[2].clone();
        t.make_mut().truncate(3);
        t.check();
        assert_eq!(t.len(), 3);
    }
}
