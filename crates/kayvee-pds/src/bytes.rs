//! `SmallBytes`: an immutable byte string that stores up to 22 bytes inline (no heap allocation)
//! and longer ones in one reference-counted slice (or, for a string written in place, a
//! reference-counted growable buffer). 24 bytes on the stack either way.
//!
//! Keys and short string values dominate a key-value store's memory; keeping them inline saves
//! one allocation (and its allocator overhead) per key.

use alloc::vec::Vec;
use core::borrow::Borrow;
use core::fmt;
use core::hash::{Hash, Hasher};
use core::ops::Deref;
/// The shared pointer behind [`SmallBytes::Heap`] and [`SmallBytes::Growable`], for code that
/// keeps those buffers in a layout of its own (the engine's keyspace entries).
pub use triomphe::Arc;

/// How many bytes fit inline.
pub const INLINE_LEN_MAX: usize = 22;

/// An immutable byte string, inline when short.
#[derive(Clone)]
pub enum SmallBytes {
    /// Short strings: `len` bytes of `buf` are used.
    Inline { len: u8, buf: [u8; INLINE_LEN_MAX] },
    /// Longer strings.
    /// Shared, not boxed: cloning is a count increment, so a snapshot's path copy of a map node
    /// (which clones every entry of the node) never copies the values themselves. That keeps a
    /// background save's extra memory to node arrays (see docs/decisions.md).
    Heap(Arc<[u8]>),
    /// Longer strings written in place (APPEND, SETRANGE, SETBIT): a buffer with room to grow.
    /// Shared the same way as `Heap`; while nothing else holds it, [`SmallBytes::into_vec`]
    /// hands the buffer back without a copy, so repeated small writes to a large string cost
    /// the write, not the string (Redis's `sds` with its free space).
    Growable(Arc<Vec<u8>>),
}

impl SmallBytes {
    /// The empty string.
    pub const fn new() -> Self {
        SmallBytes::Inline {
            len: 0,
            buf: [0; INLINE_LEN_MAX],
        }
    }

    /// Copies `bytes`.
    pub fn from_slice(bytes: &[u8]) -> Self {
        if bytes.len() <= INLINE_LEN_MAX {
            let mut buf = [0; INLINE_LEN_MAX];
            buf[..bytes.len()].copy_from_slice(bytes);
            SmallBytes::Inline {
                len: bytes.len() as u8,
                buf,
            }
        } else {
            SmallBytes::Heap(bytes.into())
        }
    }

    /// Takes ownership of `v` (no copy when it is long).
    pub fn from_vec(v: Vec<u8>) -> Self {
        if v.len() <= INLINE_LEN_MAX {
            Self::from_slice(&v)
        } else {
            SmallBytes::Heap(v.into())
        }
    }

    /// Takes ownership of `v` and keeps its spare capacity for later in-place writes (see
    /// [`SmallBytes::Growable`]); inline when short.
    pub fn from_growable(v: Vec<u8>) -> Self {
        if v.len() <= INLINE_LEN_MAX {
            Self::from_slice(&v)
        } else {
            SmallBytes::Growable(Arc::new(v))
        }
    }

    /// The bytes.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            SmallBytes::Inline { len, buf } => &buf[..*len as usize],
            SmallBytes::Heap(b) => b,
            SmallBytes::Growable(b) => b,
        }
    }

    /// Whether the bytes are stored inline.
    pub fn is_inline(&self) -> bool {
        matches!(self, SmallBytes::Inline { .. })
    }

    /// Heap bytes owned beyond `size_of::<SmallBytes>()`.
    pub fn heap_size(&self) -> usize {
        match self {
            SmallBytes::Inline { .. } => 0,
            // The slice and its reference count.
            SmallBytes::Heap(b) => b.len() + core::mem::size_of::<usize>(),
            // The buffer, the vector and its reference count.
            SmallBytes::Growable(b) => b.capacity() + core::mem::size_of::<Vec<u8>>() + 8,
        }
    }

    /// Converts into a `Vec`: copies when inline, shared or a `Heap` slice; an unshared
    /// `Growable` buffer is handed back as it is.
    pub fn into_vec(self) -> Vec<u8> {
        match self {
            SmallBytes::Inline { len, buf } => buf[..len as usize].to_vec(),
            SmallBytes::Heap(b) => b.to_vec(),
            SmallBytes::Growable(b) => Arc::try_unwrap(b).unwrap_or_else(|b| b.to_vec()),
        }
    }
}

impl Default for SmallBytes {
    fn default() -> Self {
        Self::new()
    }
}

impl Deref for SmallBytes {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl AsRef<[u8]> for SmallBytes {
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl Borrow<[u8]> for SmallBytes {
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl PartialEq for SmallBytes {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}
impl Eq for SmallBytes {}

impl PartialOrd for SmallBytes {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for SmallBytes {
    fn cmp(&self, other: &Self) -> core::cmp::Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

/// Hashes exactly as `[u8]` does, so `Borrow<[u8]>` lookups agree.
impl Hash for SmallBytes {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state)
    }
}

impl fmt::Debug for SmallBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "b\"{}\"", self.as_bytes().escape_ascii())
    }
}

impl From<&[u8]> for SmallBytes {
    fn from(b: &[u8]) -> Self {
        Self::from_slice(b)
    }
}
impl From<&str> for SmallBytes {
    fn from(s: &str) -> Self {
        Self::from_slice(s.as_bytes())
    }
}
impl From<Vec<u8>> for SmallBytes {
    fn from(v: Vec<u8>) -> Self {
        Self::from_vec(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_is_24_bytes() {
        assert_eq!(core::mem::size_of::<SmallBytes>(), 24);
    }

    #[test]
    fn inline_and_heap_round_trip() {
        for n in [0usize, 1, 21, 22, 23, 100] {
            let v: Vec<u8> = (0..n as u8).collect();
            let s = SmallBytes::from_slice(&v);
            assert_eq!(s.as_bytes(), &v[..]);
            assert_eq!(s.is_inline(), n <= INLINE_LEN_MAX);
            assert_eq!(SmallBytes::from_vec(v.clone()).into_vec(), v);
            let g = SmallBytes::from_growable(v.clone());
            assert_eq!(g.as_bytes(), &v[..]);
            assert_eq!(g, SmallBytes::from_slice(&v));
            assert_eq!(g.into_vec(), v);
        }
    }

    #[test]
    fn growable_unshared_is_handed_back_without_a_copy() {
        let mut v = Vec::with_capacity(1000);
        v.extend_from_slice(&[7u8; 100]);
        let ptr = v.as_ptr();
        let s = SmallBytes::from_growable(v);
        let back = s.into_vec();
        assert_eq!(back.as_ptr(), ptr, "an unshared buffer is not copied");
        assert_eq!(back.capacity(), 1000);
        // Shared (a snapshot holds it): copied, and the other holder keeps its bytes.
        let s = SmallBytes::from_growable(back);
        let held = s.clone();
        let mut mine = s.into_vec();
        assert_ne!(mine.as_ptr(), ptr);
        mine[0] = 1;
        assert_eq!(held.as_bytes()[0], 7);
    }
}
