//! What a key and its value cost in memory by Kayvee's own layout: the keyspace slot (key and
//! [`Entry`]) plus what the value holds on the heap, sampling collections as Redis does. MEMORY
//! USAGE reports it and eviction uses it as a floor for what a deletion freed.

use super::{Entry, ScoreMember, ValueRef, ZRef};
use core::mem::size_of;
use kayvee_pds::SmallBytes;

/// Collection elements MEMORY USAGE samples by default (Redis's `OBJ_COMPUTE_SIZE_DEF_SAMPLES`).
pub const DEFAULT_SAMPLES: usize = 5;
/// Bytes a hash-trie slot costs beyond its key and value (node bitmaps and pointers, amortised).
pub const TRIE_SLOT_OVERHEAD: usize = 16;
/// Bytes a list or ordered-set element costs beyond itself (B+tree chunk headers, amortised).
const TREE_ELEM_OVERHEAD: usize = 4;
/// Bytes a big list's element costs beyond its own: its header byte in a packed chunk plus the
/// chunk's share of its allocations and tree slot (a 2 KiB chunk costs about 80 B).
const LIST_ELEM_OVERHEAD: usize = 2;
/// Bytes a chunk of its own costs an element too long to share one (255 B or more).
const LIST_LONG_OVERHEAD: usize = 80;
/// Heap bytes a `SmallBytes` of `len` bytes holds (as [`SmallBytes::heap_size`] counts).
fn out_of_line(len: usize) -> usize {
    match len {
        n if n > kayvee_pds::bytes::INLINE_LEN_MAX => n + size_of::<usize>(),
        _ => 0,
    }
}

/// Bytes the key's slot and its value take: the keyspace slot (key, entry, trie overhead) plus
/// the value's heap, collections estimated from `samples` elements (0 = all) scaled to their
/// length.
pub fn entry_usage(key: &[u8], entry: &Entry, samples: usize) -> usize {
    slot_usage(key) + value_usage(entry, samples)
}

/// Bytes the key's keyspace slot takes (key, entry, trie overhead), without the value's heap.
pub fn slot_usage(key: &[u8]) -> usize {
    size_of::<SmallBytes>() + size_of::<Entry>() + TRIE_SLOT_OVERHEAD + out_of_line(key.len())
}

/// Whether the value is a persistent structure (a list past one packed node, a hash, set or
/// sorted set in its big encoding, a stream): a write in place copies only the nodes on its
/// path, the rest stays shared with any snapshot of it.
pub fn is_persistent(entry: &Entry) -> bool {
    match entry.value() {
        ValueRef::Str(_) => false,
        ValueRef::List(l) => !l.is_packed(),
        ValueRef::Hash(h) => h.is_big(),
        ValueRef::Set(s) => s.is_map(),
        ValueRef::ZSet(z) => z.is_big(),
        ValueRef::Stream(_) => true,
    }
}

/// The value's heap bytes (see [`entry_usage`]).
fn value_usage(entry: &Entry, samples: usize) -> usize {
    let elem = size_of::<SmallBytes>();
    match entry.value() {
        ValueRef::Str(_) => entry.str_heap_size(),
        // Small lists and sets are one packed buffer: its size is exact.
        ValueRef::List(l) if l.is_packed() => l.heap_size(),
        ValueRef::List(l) => {
            let per = |e: &[u8]| match e.len() {
                n if n >= 255 => n + LIST_LONG_OVERHEAD,
                n => n + LIST_ELEM_OVERHEAD,
            };
            size_of::<crate::value::ListTree>() + scaled(l.iter(), l.len(), samples, per)
        }
        // Small hashes and sorted sets are one flat buffer: its size is exact.
        ValueRef::Hash(h) if !h.is_big() => h.heap_size(),
        ValueRef::Hash(h) => {
            let per = |(f, v): (crate::value::Split<'_>, crate::value::Split<'_>)| {
                2 * elem + TRIE_SLOT_OVERHEAD + out_of_line(f.len()) + out_of_line(v.len())
            };
            size_of::<crate::value::Hash>() + scaled(h.iter(), h.len(), samples, per)
        }
        ValueRef::Set(s) if !s.is_map() => s.heap_size(),
        ValueRef::Set(s) => {
            let per =
                |m: crate::value::Member<'_>| elem + TRIE_SLOT_OVERHEAD + out_of_line(m.len());
            size_of::<crate::value::SetMap>() + scaled(s.iter(), s.len(), samples, per)
        }
        ValueRef::ZSet(z) if !z.is_big() => z.heap_size(),
        ValueRef::ZSet(z) => {
            // Each member is in the score map and in the order (one shared heap copy).
            let per = |e: ZRef<'_>| {
                elem + 8
                    + TRIE_SLOT_OVERHEAD
                    + size_of::<ScoreMember>()
                    + TREE_ELEM_OVERHEAD
                    + out_of_line(e.1.len())
            };
            size_of::<crate::value::ZSet>() + scaled(z.iter(), z.len(), samples, per)
        }
        ValueRef::Stream(s) => s.heap_size(),
    }
}

/// Values whose [`free_effort`] passes this are the ones Redis frees on its lazy-free thread
/// (`LAZYFREE_THRESHOLD`); INFO's `lazyfreed_objects` counts them.
pub const LAZYFREE_THRESHOLD: usize = 64;

/// The allocations freeing the value takes as Redis 7.0 counts them (`lazyfreeGetFreeEffort`):
/// a `hashtable` or `skiplist` collection's length, a list's quicklist nodes (estimated from
/// `list-max-listpack-size`, `list_fill`), a stream's radix-tree nodes plus its groups times
/// one more than the first group's pending entries; 1 for anything else (one allocation).
pub fn free_effort(entry: &Entry, list_fill: i64) -> usize {
    match entry.value() {
        ValueRef::List(l) if l.is_packed() => 1,
        ValueRef::List(l) => match list_fill {
            n if n > 0 => l.len().div_ceil(n as usize),
            n => {
                // -1..-5: listpack nodes of 4 KiB..64 KiB.
                let node = 4096usize << (n.unsigned_abs().clamp(1, 5) - 1);
                value_usage(entry, DEFAULT_SAMPLES).div_ceil(node)
            }
        },
        ValueRef::Hash(h) if h.is_big() => h.len(),
        ValueRef::Set(s) if entry.encoding() == "hashtable" => s.len(),
        ValueRef::ZSet(z) if z.is_big() => z.len(),
        ValueRef::Stream(s) => {
            let pel = s.groups.first().map_or(0, |g| g.pel.len());
            s.rax_nodes() + s.groups.len() * (1 + pel)
        }
        _ => 1,
    }
}

/// The cost of `len` elements estimated from the first `samples` (0 = all) of `items`.
fn scaled<T>(
    items: impl Iterator<Item = T>,
    len: usize,
    samples: usize,
    per: impl Fn(T) -> usize,
) -> usize {
    let take = if samples == 0 { len } else { samples.min(len) };
    if take == 0 {
        return 0;
    }
    let sum: usize = items.take(take).map(per).sum();
    (sum as f64 / take as f64 * len as f64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{Hash, List, Value};

    fn s(n: usize) -> SmallBytes {
        SmallBytes::from_vec(alloc::vec![b'x'; n])
    }

    #[test]
    fn usage_scales_with_content() {
        let small = Entry::new(Value::Str(s(3)), 0);
        let big = Entry::new(Value::Str(s(1000)), 0);
        assert_eq!(
            entry_usage(b"k", &big, 5) - entry_usage(b"k", &small, 5),
            1000 + size_of::<usize>()
        );
        let list = |n: usize| {
            let mut l: List = (0..n).map(|_| s(100)).collect();
            l.make_tree();
            entry_usage(b"k", &Entry::new(Value::List(l), 0), 5)
        };
        let (ten, thousand) = (list(10), list(1000));
        assert!(
            thousand > 90 * ten && thousand < 110 * ten,
            "{ten} {thousand}"
        );
    }

    #[test]
    fn flat_collections_count_their_buffer() {
        let mut h = Hash::new();
        h.insert(b"field", &[b'x'; 300]);
        let e = Entry::new(Value::Hash(h.clone()), 0);
        let slot = entry_usage(b"h", &Entry::new(Value::Str(s(1)), 0), 5);
        assert_eq!(entry_usage(b"h", &e, 5), slot + h.heap_size());
        assert!(h.heap_size() >= 305);
    }

    #[test]
    fn samples_estimate_from_the_first_elements() {
        let mut h = Hash::with_seed(1);
        for i in 0..100 {
            let v = if i < 50 { s(1) } else { s(200) };
            h.insert(alloc::format!("f{i}").as_bytes(), &v);
        }
        let e = Entry::new(Value::Hash(h), 0);
        let all = entry_usage(b"h", &e, 0);
        let exact = size_of::<SmallBytes>()
            + size_of::<Entry>()
            + TRIE_SLOT_OVERHEAD
            + size_of::<Hash>()
            + 100 * (2 * size_of::<SmallBytes>() + TRIE_SLOT_OVERHEAD)
            + 50 * (200 + size_of::<usize>());
        assert_eq!(all, exact);
    }
}
