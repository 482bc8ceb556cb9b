//! `Split`: a byte string borrowed as two contiguous parts, a shared prefix and the rest.
//!
//! A flat hash stores the prefix its fields (and its values) share once, then each field's own
//! suffix (see `value/hash.rs`): a field read from it is the prefix and its suffix, two slices
//! of one buffer. Readers take it as it is (compare, measure, write as a two-part bulk reply)
//! instead of copying it into one slice; [`Split::with_contiguous`] gives one slice, on the
//! stack for short strings, to the few that parse or hash bytes.

use alloc::vec::Vec;
use core::fmt;

/// Strings up to this length are joined on the stack by [`Split::with_contiguous`].
const STACK_JOIN_LEN_MAX: usize = 64;

/// A byte string as `head` followed by `tail`.
#[derive(Clone, Copy, Default)]
pub struct Split<'a> {
    /// The first part (a shared prefix; often empty).
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

    /// One slice, whole (an empty head).
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

    /// Whether the string is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.head.is_empty() && self.tail.is_empty()
    }

    /// The string as one slice when it is one already (an empty head or tail).
    #[inline]
    pub fn as_slice(&self) -> Option<&'a [u8]> {
        match (self.head.is_empty(), self.tail.is_empty()) {
            (true, _) => Some(self.tail),
            (_, true) => Some(self.head),
            _ => None,
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
}

impl PartialEq<[u8]> for Split<'_> {
    #[inline]
    fn eq(&self, other: &[u8]) -> bool {
        other.len() == self.len()
            && other[..self.head.len()] == *self.head
            && other[self.head.len()..] == *self.tail
    }
}

impl PartialEq<&[u8]> for Split<'_> {
    #[inline]
    fn eq(&self, other: &&[u8]) -> bool {
        *self == **other
    }
}

impl<const N: usize> PartialEq<&[u8; N]> for Split<'_> {
    fn eq(&self, other: &&[u8; N]) -> bool {
        *self == other[..]
    }
}

impl PartialEq for Split<'_> {
    fn eq(&self, other: &Split<'_>) -> bool {
        self.len() == other.len() && self.bytes().eq(other.bytes())
    }
}

impl Eq for Split<'_> {}

impl fmt::Debug for Split<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.with_contiguous(|b| fmt::Debug::fmt(&kayvee_pds::SmallBytes::from_slice(b), f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
