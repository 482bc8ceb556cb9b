//! [`Entry`]: what the keyspace stores under a key, a value and its [`Meta`] in 24 bytes.
//!
//! The keyspace holds one entry per key beside the key, so every byte here is paid once per
//! key (see docs/decisions.md, "What 0.7x on every small row would take"). A [`Value`] alone is
//! 24 bytes; a 4-byte [`Meta`] beside it would pad the pair to 32. Instead each variant
//! carries the metadata itself, in the bytes the variant leaves free after the tag: a string
//! of up to [`ENTRY_INLINE_MAX`] bytes inline (tag, metadata and length take the other 6),
//! longer strings and the collections (a 16-byte payload each) after it. The variants are
//! private: commands read through [`Entry::value`] and [`Entry::meta`], change through
//! [`Entry::value_mut`], [`Entry::meta_mut`] and [`Entry::set_value`].

use super::{Hash, List, Meta, Set, Stream, Value, ValueMut, ValueRef, ZSet};
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;
use kayvee_pds::bytes::Arc;
use kayvee_pds::SmallBytes;

/// How many bytes of a string an entry holds inline; longer ones are shared slices.
pub const ENTRY_INLINE_MAX: usize = 18;

/// What the keyspace stores under a key: a value and its metadata.
#[derive(Clone)]
pub struct Entry(Repr);

/// The variants, each with the metadata in its free bytes (a 1-aligned [`Meta`] packs right
/// after the tag).
#[derive(Clone)]
enum Repr {
    /// A short string: `len` bytes of `buf`.
    Inline {
        meta: Meta,
        len: u8,
        buf: [u8; ENTRY_INLINE_MAX],
    },
    /// A longer string, shared as [`SmallBytes::Heap`] shares it.
    Shared { meta: Meta, bytes: Arc<[u8]> },
    /// A string written in place, with room to grow ([`SmallBytes::Growable`]).
    Growable { meta: Meta, bytes: Arc<Vec<u8>> },
    /// A list.
    List { meta: Meta, list: List },
    /// A hash.
    Hash { meta: Meta, hash: Hash },
    /// A set.
    Set { meta: Meta, set: Set },
    /// A sorted set.
    ZSet { meta: Meta, zset: ZSet },
    /// A stream.
    Stream { meta: Meta, stream: Box<Stream> },
}

impl Entry {
    /// A fresh entry (no TTL) stamped for an LRU policy: accessed now. A database stamps
    /// for its own policy ([`crate::Db::new_entry`]).
    pub fn new(value: Value, now_ms: u64) -> Self {
        Self::with_meta(value, Meta::fresh(false, now_ms))
    }

    /// An entry with the given metadata. A string longer than [`ENTRY_INLINE_MAX`] that a
    /// [`SmallBytes`] held inline moves to the heap.
    pub fn with_meta(value: Value, meta: Meta) -> Self {
        Entry(match value {
            Value::Str(s) => return Self::string(s, meta),
            Value::List(list) => Repr::List { meta, list },
            Value::Hash(hash) => Repr::Hash { meta, hash },
            Value::Set(set) => Repr::Set { meta, set },
            Value::ZSet(zset) => Repr::ZSet { meta, zset },
            Value::Stream(stream) => Repr::Stream { meta, stream },
        })
    }

    /// A string entry holding a copy of `bytes`.
    pub fn from_str_bytes(bytes: &[u8], meta: Meta) -> Self {
        Entry(match bytes.len() {
            len if len <= ENTRY_INLINE_MAX => {
                let mut buf = [0; ENTRY_INLINE_MAX];
                buf[..len].copy_from_slice(bytes);
                Repr::Inline {
                    meta,
                    len: len as u8,
                    buf,
                }
            }
            _ => Repr::Shared {
                meta,
                bytes: Arc::from(bytes),
            },
        })
    }

    /// A string entry.
    fn string(s: SmallBytes, meta: Meta) -> Self {
        Entry(match s {
            SmallBytes::Heap(bytes) => Repr::Shared { meta, bytes },
            SmallBytes::Growable(bytes) => Repr::Growable { meta, bytes },
            SmallBytes::Inline { len, buf: src } if usize::from(len) <= ENTRY_INLINE_MAX => {
                // A fixed-size copy (the bytes past `len` are whatever `src` holds there):
                // a few moves, where a copy of `len` bytes would be a call.
                let mut buf = [0; ENTRY_INLINE_MAX];
                buf.copy_from_slice(&src[..ENTRY_INLINE_MAX]);
                Repr::Inline { meta, len, buf }
            }
            SmallBytes::Inline { len, buf } => Repr::Shared {
                meta,
                bytes: Arc::from(&buf[..usize::from(len)]),
            },
        })
    }

    /// The metadata.
    #[inline]
    pub fn meta(&self) -> Meta {
        match &self.0 {
            Repr::Inline { meta, .. }
            | Repr::Shared { meta, .. }
            | Repr::Growable { meta, .. }
            | Repr::List { meta, .. }
            | Repr::Hash { meta, .. }
            | Repr::Set { meta, .. }
            | Repr::ZSet { meta, .. }
            | Repr::Stream { meta, .. } => *meta,
        }
    }

    /// The metadata, to change.
    #[inline]
    pub fn meta_mut(&mut self) -> &mut Meta {
        match &mut self.0 {
            Repr::Inline { meta, .. }
            | Repr::Shared { meta, .. }
            | Repr::Growable { meta, .. }
            | Repr::List { meta, .. }
            | Repr::Hash { meta, .. }
            | Repr::Set { meta, .. }
            | Repr::ZSet { meta, .. }
            | Repr::Stream { meta, .. } => meta,
        }
    }

    /// The value.
    #[inline]
    pub fn value(&self) -> ValueRef<'_> {
        match &self.0 {
            Repr::Inline { len, buf, .. } => ValueRef::Str(&buf[..usize::from(*len)]),
            Repr::Shared { bytes, .. } => ValueRef::Str(bytes),
            Repr::Growable { bytes, .. } => ValueRef::Str(bytes),
            Repr::List { list, .. } => ValueRef::List(list),
            Repr::Hash { hash, .. } => ValueRef::Hash(hash),
            Repr::Set { set, .. } => ValueRef::Set(set),
            Repr::ZSet { zset, .. } => ValueRef::ZSet(zset),
            Repr::Stream { stream, .. } => ValueRef::Stream(stream),
        }
    }

    /// The value, to change in place (strings are replaced instead).
    #[inline]
    pub fn value_mut(&mut self) -> ValueMut<'_> {
        self.parts_mut().0
    }

    /// The value to change and the metadata beside it.
    #[inline]
    pub fn parts_mut(&mut self) -> (ValueMut<'_>, &mut Meta) {
        match &mut self.0 {
            Repr::Inline { meta, .. } | Repr::Shared { meta, .. } | Repr::Growable { meta, .. } => {
                (ValueMut::Str, meta)
            }
            Repr::List { meta, list } => (ValueMut::List(list), meta),
            Repr::Hash { meta, hash } => (ValueMut::Hash(hash), meta),
            Repr::Set { meta, set } => (ValueMut::Set(set), meta),
            Repr::ZSet { meta, zset } => (ValueMut::ZSet(zset), meta),
            Repr::Stream { meta, stream } => (ValueMut::Stream(stream), meta),
        }
    }

    /// Replaces the value, keeping the metadata.
    #[inline]
    pub fn set_value(&mut self, value: Value) {
        *self = Self::with_meta(value, self.meta());
    }

    /// An owned copy of the value (a long string shared, not copied).
    pub fn to_value(&self) -> Value {
        match &self.0 {
            Repr::Shared { bytes, .. } => Value::Str(SmallBytes::Heap(bytes.clone())),
            Repr::Growable { bytes, .. } => Value::Str(SmallBytes::Growable(bytes.clone())),
            _ => self.value().to_value(),
        }
    }

    /// The value, giving up the metadata.
    pub fn into_value(self) -> Value {
        match self.0 {
            Repr::Inline { len, buf, .. } => {
                Value::Str(SmallBytes::from_slice(&buf[..usize::from(len)]))
            }
            Repr::Shared { bytes, .. } => Value::Str(SmallBytes::Heap(bytes)),
            Repr::Growable { bytes, .. } => Value::Str(SmallBytes::Growable(bytes)),
            Repr::List { list, .. } => Value::List(list),
            Repr::Hash { hash, .. } => Value::Hash(hash),
            Repr::Set { set, .. } => Value::Set(set),
            Repr::ZSet { zset, .. } => Value::ZSet(zset),
            Repr::Stream { stream, .. } => Value::Stream(stream),
        }
    }

    /// Takes a string's bytes out to modify them (the entry may hold an empty string until
    /// [`Entry::set_value`] puts the result back); `None` when the value is not a string. An
    /// unshared growable buffer comes back without a copy.
    pub fn take_str(&mut self) -> Option<Vec<u8>> {
        let meta = self.meta();
        let empty = Repr::Inline {
            meta,
            len: 0,
            buf: [0; ENTRY_INLINE_MAX],
        };
        match &self.0 {
            Repr::Inline { len, buf, .. } => Some(buf[..usize::from(*len)].to_vec()),
            Repr::Shared { bytes, .. } => Some(bytes.to_vec()),
            Repr::Growable { .. } => match core::mem::replace(&mut self.0, empty) {
                Repr::Growable { bytes, .. } => {
                    Some(Arc::try_unwrap(bytes).unwrap_or_else(|b| b.to_vec()))
                }
                _ => unreachable!("matched above"),
            },
            _ => None,
        }
    }

    /// Heap bytes a string value holds beyond the entry (0 for other types), counted as
    /// [`SmallBytes::heap_size`] counts.
    pub fn str_heap_size(&self) -> usize {
        match &self.0 {
            Repr::Shared { bytes, .. } => bytes.len() + core::mem::size_of::<usize>(),
            Repr::Growable { bytes, .. } => {
                bytes.capacity() + core::mem::size_of::<Vec<u8>>() + core::mem::size_of::<usize>()
            }
            _ => 0,
        }
    }

    /// Whether both entries hold one string's storage: the same shared buffer, or equal
    /// bytes inline (an inline string lives in the entry itself). False for collections,
    /// whose clones (a keyspace node copied on a write's path) own their own root.
    pub fn same_string(&self, other: &Entry) -> bool {
        match (&self.0, &other.0) {
            (Repr::Shared { bytes: a, .. }, Repr::Shared { bytes: b, .. }) => Arc::ptr_eq(a, b),
            (Repr::Growable { bytes: a, .. }, Repr::Growable { bytes: b, .. }) => Arc::ptr_eq(a, b),
            (Repr::Inline { len: a, buf: x, .. }, Repr::Inline { len: b, buf: y, .. }) => {
                a == b && x[..usize::from(*a)] == y[..usize::from(*b)]
            }
            _ => false,
        }
    }

    /// The name `OBJECT ENCODING` answers.
    pub fn encoding(&self) -> &'static str {
        self.value().encoding(&self.meta())
    }

    /// Puts a collection in the representation `big` calls for (see [`Value::normalize`]).
    pub fn normalize(&mut self, big: bool, seed: u64) {
        self.value_mut().normalize(big, seed)
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.meta() == other.meta() && self.value() == other.value()
    }
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("value", &self.value())
            .field("meta", &self.meta())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn str_entry(n: usize) -> Entry {
        Entry::new(Value::Str(SmallBytes::from_vec(alloc::vec![b'x'; n])), 0)
    }

    #[test]
    fn strings_round_trip_at_every_length() {
        for n in [0, 1, 17, 18, 19, 22, 23, 100] {
            let mut e = str_entry(n);
            e.meta_mut().set_flag(Meta::RAW, true);
            assert_eq!(e, Entry::from_str_bytes(&alloc::vec![b'x'; n], e.meta()));
            assert_eq!(e.value(), ValueRef::Str(&alloc::vec![b'x'; n]));
            assert_eq!(e.str_heap_size() == 0, n <= ENTRY_INLINE_MAX, "{n}");
            assert_eq!(
                e.to_value(),
                Value::Str(SmallBytes::from_vec(alloc::vec![b'x'; n]))
            );
            assert_eq!(e.clone().into_value(), e.to_value());
            assert_eq!(e.take_str(), Some(alloc::vec![b'x'; n]));
            assert!(e.meta().has(Meta::RAW), "the metadata stays");
        }
    }

    #[test]
    fn a_growable_buffer_comes_back_without_a_copy() {
        let mut v = Vec::with_capacity(1000);
        v.extend_from_slice(&[7u8; 100]);
        let ptr = v.as_ptr();
        let mut e = Entry::new(Value::Str(SmallBytes::from_growable(v)), 0);
        assert_eq!(e.str_heap_size(), 1000 + 24 + 8);
        let back = e.take_str().unwrap();
        assert_eq!(back.as_ptr(), ptr);
        assert_eq!(e.value(), ValueRef::Str(b""));
    }

    #[test]
    fn collections_keep_their_metadata_through_changes() {
        let mut h = Hash::new();
        h.insert(b"f", b"v");
        let mut e = Entry::new(Value::Hash(h), 5_000);
        e.meta_mut().set_flag(Meta::BIG, true);
        let (v, meta) = e.parts_mut();
        let ValueMut::Hash(h) = v else {
            panic!("a hash")
        };
        h.insert(b"g", b"w");
        meta.set_flag(Meta::HAS_EXPIRE, true);
        assert!(e.meta().has(Meta::BIG) && e.meta().has(Meta::HAS_EXPIRE));
        assert_eq!(e.meta().idle_s(5_000), 0);
        e.set_value(Value::Str(SmallBytes::from("s")));
        assert!(e.meta().has(Meta::BIG), "set_value keeps the metadata");
        assert_eq!(e.value().type_name(), "string");
        assert!(matches!(e.value_mut(), ValueMut::Str));
        assert_eq!(e.take_str(), Some(b"s".to_vec()));
        assert!(Entry::new(Value::List(List::new()), 0).take_str().is_none());
    }
}
