//! `Split`: a byte string lent as two contiguous slices, a head and a tail: a flat hash's fields
//! and values and a flat sorted set's members, each the common prefix its buffer stores once and
//! then its own suffix (see `value/hash.rs`, `value/zset.rs`).
//!
//! Comparisons and equality are those of the concatenated bytes (`memcmp` order, as Redis
//! compares members), so readers never need to join the parts; [`Split::to_small_bytes`] and
//! [`crate::ReplySink::bulk_parts`] copy them once where bytes leave the value, and
//! [`Split::with_contiguous`] gives one slice, on the stack for short strings, to the few
//! readers that parse or hash bytes.

use alloc::vec::Vec;
use core::cmp::Ordering;
use kayvee_pds::SmallBytes;

/// Strings up to this length are joined on the stack by [`Split::with_contiguous`].
const STACK_JOIN_LEN_MAX: usize = 64;

/// A byte string in two parts: `head` then `tail`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Split<'a> {
    /// The first part (empty for a member of the tree form).
    pub head: &'a [u8],
    /// The rest.
    pub tail: &'a [u8],
}

impl<'a> Split<'a> {
    /// `head` followed by `tail`.
    #[inline]
    pub fn new(head: &'a [u8], tail: &'a [u8]) -> Self {
        Split { head, tail }
    }

    /// One contiguous string (an empty head).
    #[inline]
    pub fn whole(bytes: &'a [u8]) -> Self {
        Split {
            head: &[],
            tail: bytes,
        }
    }

    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    /// Whether there is no byte.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.head.is_empty() && self.tail.is_empty()
    }

    /// The bytes as one slice when they are contiguous already (an empty part), else `None`.
    #[inline]
    pub fn as_slice(&self) -> Option<&'a [u8]> {
        if self.head.is_empty() {
            Some(self.tail)
        } else if self.tail.is_empty() {
            Some(self.head)
        } else {
            None
        }
    }

    /// The bytes in order.
    pub fn bytes(&self) -> impl Iterator<Item = u8> + 'a {
        self.head.iter().chain(self.tail).copied()
    }

    /// The string from byte `n` on (`n <= len()`).
    #[inline]
    pub fn skip(&self, n: usize) -> Split<'a> {
        match n.checked_sub(self.head.len()) {
            None => Split::new(&self.head[n..], self.tail),
            Some(k) => Split::whole(&self.tail[k..]),
        }
    }

    /// The first `n` bytes (`n <= len()`).
    #[inline]
    pub fn take(&self, n: usize) -> Split<'a> {
        match n.checked_sub(self.head.len()) {
            None => Split::whole(&self.head[..n]),
            Some(k) => Split::new(self.head, &self.tail[..k]),
        }
    }

    /// How many leading bytes `self` and `other` share.
    pub fn common_prefix_len(&self, other: &Split<'_>) -> usize {
        self.bytes()
            .zip(other.bytes())
            .take_while(|(a, b)| a == b)
            .count()
    }

    /// Appends the bytes to `out`.
    #[inline]
    pub fn extend_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.head);
        out.extend_from_slice(self.tail);
    }

    /// The bytes, copied.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len());
        self.extend_into(&mut v);
        v
    }

    /// Runs `f` on the string as one slice: borrowed when it is one already, joined on the
    /// stack when short, on the heap otherwise (for readers that parse or hash the bytes).
    pub fn with_contiguous<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        if let Some(s) = self.as_slice() {
            return f(s);
        }
        let len = self.len();
        if len <= STACK_JOIN_LEN_MAX {
            let mut buf = [0u8; STACK_JOIN_LEN_MAX];
            buf[..self.head.len()].copy_from_slice(self.head);
            buf[self.head.len()..len].copy_from_slice(self.tail);
            f(&buf[..len])
        } else {
            f(&self.to_vec())
        }
    }

    /// The bytes as a `SmallBytes` (inline up to its inline length, joined on the stack).
    pub fn to_small_bytes(&self) -> SmallBytes {
        if let Some(s) = self.as_slice() {
            return SmallBytes::from_slice(s);
        }
        let len = self.len();
        if len <= kayvee_pds::bytes::INLINE_LEN_MAX {
            let mut buf = [0u8; kayvee_pds::bytes::INLINE_LEN_MAX];
            buf[..self.head.len()].copy_from_slice(self.head);
            buf[self.head.len()..len].copy_from_slice(self.tail);
            SmallBytes::Inline {
                len: len as u8,
                buf,
            }
        } else {
            SmallBytes::from_vec(self.to_vec())
        }
    }

    /// Byte-order comparison with a contiguous string.
    #[inline]
    pub fn cmp_bytes(&self, other: &[u8]) -> Ordering {
        let n = self.head.len().min(other.len());
        match self.head.cmp(&other[..n]) {
            Ordering::Equal if n == self.head.len() => self.tail.cmp(&other[n..]),
            // `other` is a proper prefix of the head.
            Ordering::Equal => Ordering::Greater,
            o => o,
        }
    }

    /// Whether the bytes equal `other`.
    #[inline]
    pub fn eq_bytes(&self, other: &[u8]) -> bool {
        self.len() == other.len()
            && other[..self.head.len()] == *self.head
            && other[self.head.len()..] == *self.tail
    }
}

impl Ord for Split<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        if other.head.is_empty() {
            return self.cmp_bytes(other.tail);
        }
        if self.head.is_empty() {
            return other.cmp_bytes(self.tail).reverse();
        }
        let n = self.head.len().min(other.head.len());
        match self.head[..n].cmp(&other.head[..n]) {
            Ordering::Equal => {}
            o => return o,
        }
        // One head is a prefix of the other: compare what follows it.
        if n == self.head.len() {
            Split::new(&other.head[n..], other.tail)
                .cmp_bytes(self.tail)
                .reverse()
        } else {
            Split::new(&self.head[n..], self.tail).cmp_bytes(other.tail)
        }
    }
}

impl PartialOrd for Split<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Split<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Split<'_> {}

impl PartialEq<[u8]> for Split<'_> {
    fn eq(&self, other: &[u8]) -> bool {
        self.eq_bytes(other)
    }
}

impl PartialEq<&[u8]> for Split<'_> {
    fn eq(&self, other: &&[u8]) -> bool {
        self.eq_bytes(other)
    }
}

impl<const N: usize> PartialEq<&[u8; N]> for Split<'_> {
    fn eq(&self, other: &&[u8; N]) -> bool {
        self.eq_bytes(&other[..])
    }
}

impl From<Split<'_>> for SmallBytes {
    fn from(s: Split<'_>) -> Self {
        s.to_small_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every way of cutting each of a few strings, compared with every other: the order and
    /// equality are those of the joined bytes.
    #[test]
    fn order_and_equality_are_the_joined_bytes() {
        let words: [&[u8]; 9] = [
            b"", b"a", b"ab", b"abc", b"abd", b"b", b"ba", b"\xff", b"a\0",
        ];
        let cuts = |w: &'static [u8]| (0..=w.len()).map(move |i| Split::new(&w[..i], &w[i..]));
        for a in words {
            for b in words {
                for sa in cuts(a) {
                    assert_eq!(sa.cmp_bytes(b), a.cmp(b));
                    assert_eq!(sa == b, a == b);
                    assert_eq!(sa.len(), a.len());
                    assert_eq!(sa.to_vec(), a);
                    assert_eq!(&sa.to_small_bytes()[..], a);
                    for sb in cuts(b) {
                        assert_eq!(sa.cmp(&sb), a.cmp(b), "{sa:?} {sb:?}");
                        assert_eq!(sa == sb, a == b);
                    }
                }
            }
        }
    }

    #[test]
    fn long_strings_leave_the_inline_form() {
        let long = [b'x'; 40];
        let s = Split::new(&long[..10], &long[10..]);
        assert_eq!(&s.to_small_bytes()[..], &long[..]);
        assert_eq!(s.as_slice(), None);
        assert_eq!(Split::whole(&long).as_slice(), Some(&long[..]));
    }

    #[test]
    fn parts_read_as_one_string() {
        let s = Split::new(b"field:", b"12");
        assert_eq!(s.len(), 8);
        assert_eq!(s, &b"field:12"[..]);
        assert_ne!(s, &b"field:1"[..]);
        assert_ne!(s, &b"fielx:12"[..]);
        assert_eq!(s.to_vec(), b"field:12");
        assert_eq!(s, Split::new(b"fi", b"eld:12"));
        assert_eq!(s.skip(3), &b"ld:12"[..]);
        assert_eq!(s.skip(7), &b"2"[..]);
        assert_eq!(s.take(3), &b"fie"[..]);
        assert_eq!(s.take(7), &b"field:1"[..]);
        assert_eq!(s.common_prefix_len(&Split::whole(b"field:3")), 6);
        assert_eq!(s.as_slice(), None);
        assert_eq!(Split::new(b"ab", b"").as_slice(), Some(&b"ab"[..]));
        assert_eq!(s.with_contiguous(|b| b.to_vec()), b"field:12");
        let long = [7u8; 100];
        let l = Split::new(&long[..30], &long[30..]);
        assert_eq!(l.with_contiguous(|b| b.len()), 100);
    }
}
