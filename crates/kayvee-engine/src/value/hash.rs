//! `Hash`: a hash's fields, flat while Redis would keep a listpack, a persistent map after.
//!
//! The flat form is one exact-size buffer: the longest prefix common to all fields and the
//! longest prefix common to all values, each stored once (`varint(len) bytes`), then the pairs
//! in insertion order (as Redis's listpack), each holding only its suffixes:
//! `varint(field_suffix_len << 1 | same) field_suffix [varint(value_suffix_len)] value_suffix`,
//! where `same` says the value suffix is as long as the previous pair's (the first pair's
//! "previous" length is 0) and its length is left out. Both prefixes are the longest ones and
//! `same` is set whenever it can be, so one content has one buffer (canonical; an empty hash
//! is an empty buffer). A field or value read from it is two slices of the buffer, the prefix
//! and the suffix ([`Split`]), so readers still borrow instead of copying. Hashes whose fields
//! and values share nothing pay two bytes (the two empty prefixes) over plain pairs.
//!
//! No per-field allocation or inline slack, linear search (at most `hash-max-listpack-entries`
//! pairs; a field without the fields' prefix is known absent without a walk). Cloning it for
//! a snapshot copies that small buffer; the map form clones in O(1). The engine converts (one
//! way, as Redis does) when it marks the entry [`super::Meta::BIG`], see
//! [`super::Value::normalize`].

use super::flat::{get_varint, put_varint, varint_len};
use super::split::Split;
use alloc::boxed::Box;
use alloc::vec::Vec;
use kayvee_pds::{PMap, SmallBytes};

/// The persistent map form of a big hash.
pub type HashMap = PMap<SmallBytes, SmallBytes>;

/// A hash: field to value.
#[derive(Clone)]
pub struct Hash(Repr);

/// The two representations.
#[derive(Clone)]
enum Repr {
    /// Pairs in one buffer (`listpack` in Redis's terms).
    Flat(Box<[u8]>),
    /// A persistent hash trie (`hashtable`), or a corrupt hash.
    Map(Box<Big>),
}

/// The map form's box: the map and, for a [`Hash::corrupt`] hash (whose map stays empty), the
/// listpack. Boxed with the map so that a hash stays two words (a third variant would need a
/// tag, and every key's entry 8 more bytes).
#[derive(Clone)]
struct Big {
    map: HashMap,
    /// A listpack restored without deep sanitization whose entries do not all decode, kept
    /// byte for byte and never read.
    corrupt: Option<Box<[u8]>>,
}

impl Big {
    fn new(map: HashMap) -> Box<Self> {
        Box::new(Big { map, corrupt: None })
    }
}

impl core::ops::Deref for Big {
    type Target = HashMap;
    fn deref(&self) -> &HashMap {
        &self.map
    }
}

impl core::ops::DerefMut for Big {
    fn deref_mut(&mut self) -> &mut HashMap {
        &mut self.map
    }
}

/// Field/value pairs borrowed from a hash.
pub type Pairs<'a> = Vec<(Split<'a>, Split<'a>)>;

/// Iterates a flat buffer's pairs.
#[derive(Clone)]
pub struct FlatPairs<'a> {
    buf: &'a [u8],
    /// The prefix every field starts with.
    field_prefix: &'a [u8],
    /// The prefix every value starts with.
    value_prefix: &'a [u8],
    at: usize,
    /// The previous pair's value suffix length (0 before the first pair).
    prev_len: usize,
}

impl<'a> FlatPairs<'a> {
    /// The pairs of `buf` from its start (after the prefixes).
    #[inline]
    fn new(buf: &'a [u8]) -> Self {
        let mut it = FlatPairs {
            buf,
            field_prefix: &[],
            value_prefix: &[],
            at: 0,
            prev_len: 0,
        };
        if !buf.is_empty() {
            it.field_prefix = it.bytes();
            it.value_prefix = it.bytes();
        }
        it
    }

    /// A length-prefixed byte string at the cursor.
    #[inline]
    fn bytes(&mut self) -> &'a [u8] {
        let len = get_varint(self.buf, &mut self.at);
        let s = &self.buf[self.at..self.at + len];
        self.at += len;
        s
    }

    /// The next pair's field and value suffixes.
    #[inline]
    fn next_suffixes(&mut self) -> Option<(&'a [u8], &'a [u8])> {
        let buf = self.buf;
        if self.at >= buf.len() {
            return None;
        }
        let head = get_varint(buf, &mut self.at);
        let f = &buf[self.at..self.at + (head >> 1)];
        self.at += f.len();
        if head & 1 == 0 {
            self.prev_len = get_varint(buf, &mut self.at);
        }
        let v = &buf[self.at..self.at + self.prev_len];
        self.at += v.len();
        Some((f, v))
    }

    /// Finds `field`: where its value's suffix ends in the buffer, and the value.
    #[inline]
    fn find(mut self, field: &[u8]) -> Result<(usize, Split<'a>), Absent> {
        let Some(want) = field.strip_prefix(self.field_prefix) else {
            return Err(Absent {
                prev_len: 0,
                fields: None,
            });
        };
        let mut fields = 0;
        while let Some((f, v)) = self.next_suffixes() {
            if f == want {
                return Ok((self.at, Split::new(self.value_prefix, v)));
            }
            fields += 1;
        }
        Err(Absent {
            prev_len: self.prev_len,
            fields: Some(fields),
        })
    }

    /// Whether every value suffix is non-empty and starts with the same byte (the values'
    /// prefix is then no longer the longest common one).
    fn value_prefix_grows(mut self) -> bool {
        let Some(first) = self.next_suffixes().and_then(|(_, v)| v.first().copied()) else {
            return false;
        };
        while let Some((_, v)) = self.next_suffixes() {
            if v.first() != Some(&first) {
                return false;
            }
        }
        true
    }
}

/// What a walk for an absent field learnt.
struct Absent {
    /// The last pair's value suffix length (what an appended pair follows); meaningless when
    /// the field lacks the fields' prefix (it cannot be appended then).
    prev_len: usize,
    /// How many pairs there are; `None` when the field lacks the fields' prefix and the
    /// pairs were not walked.
    fields: Option<usize>,
}

impl<'a> Iterator for FlatPairs<'a> {
    type Item = (Split<'a>, Split<'a>);
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let (f, v) = self.next_suffixes()?;
        Some((
            Split::new(self.field_prefix, f),
            Split::new(self.value_prefix, v),
        ))
    }
}

/// Appends one pair's suffixes, after a pair whose value suffix was `prev_len` bytes long.
fn put_pair(out: &mut Vec<u8>, field: Split<'_>, value: Split<'_>, prev_len: usize) {
    let same = value.len() == prev_len;
    put_varint(out, field.len() << 1 | usize::from(same));
    field.extend_into(out);
    if !same {
        put_varint(out, value.len());
    }
    value.extend_into(out);
}

/// How many bytes `put_pair` writes for suffixes of these lengths.
fn pair_len(field_len: usize, value_len: usize, prev_len: usize) -> usize {
    let value_head = if value_len == prev_len {
        0
    } else {
        varint_len(value_len)
    };
    varint_len(field_len << 1) + field_len + value_head + value_len
}

/// The lengths of the longest prefix common to all fields and of the one common to all values
/// (`None` when there is no pair).
fn common_prefix_lens<'a>(
    mut pairs: impl Iterator<Item = (Split<'a>, Split<'a>)>,
) -> Option<(usize, usize)> {
    let (f0, v0) = pairs.next()?;
    let (mut fl, mut vl) = (f0.len(), v0.len());
    for (f, v) in pairs {
        fl = f0.take(fl).common_prefix_len(&f);
        vl = v0.take(vl).common_prefix_len(&v);
    }
    Some((fl, vl))
}

/// The canonical flat buffer of `pairs`, exact-size.
fn encode<'a>(pairs: impl Iterator<Item = (Split<'a>, Split<'a>)> + Clone) -> Box<[u8]> {
    let Some((fl, vl)) = common_prefix_lens(pairs.clone()) else {
        return Box::default();
    };
    let mut prev = 0;
    let mut len = varint_len(fl) + fl + varint_len(vl) + vl;
    for (f, v) in pairs.clone() {
        len += pair_len(f.len() - fl, v.len() - vl, prev);
        prev = v.len() - vl;
    }
    let mut out = Vec::with_capacity(len);
    let mut first = true;
    prev = 0;
    for (f, v) in pairs {
        if first {
            put_varint(&mut out, fl);
            f.take(fl).extend_into(&mut out);
            put_varint(&mut out, vl);
            v.take(vl).extend_into(&mut out);
            first = false;
        }
        put_pair(&mut out, f.skip(fl), v.skip(vl), prev);
        prev = v.len() - vl;
    }
    debug_assert_eq!(out.len(), len);
    out.into_boxed_slice()
}

/// A field or value as an owned string.
fn small(s: Split<'_>) -> SmallBytes {
    s.with_contiguous(SmallBytes::from_slice)
}

/// A hash's pairs, whatever its form. Lives on the stack for one walk, so the size difference
/// between the variants costs nothing worth an allocation.
#[allow(clippy::large_enum_variant)]
pub enum HashIter<'a> {
    /// Over a flat buffer.
    Flat(FlatPairs<'a>),
    /// Over a map.
    Map(kayvee_pds::map::Iter<'a, SmallBytes, SmallBytes>),
}

impl<'a> Iterator for HashIter<'a> {
    type Item = (Split<'a>, Split<'a>);
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            HashIter::Flat(it) => it.next(),
            HashIter::Map(it) => it
                .next()
                .map(|(k, v)| (Split::whole(&k[..]), Split::whole(&v[..]))),
        }
    }
}

impl Default for Hash {
    fn default() -> Self {
        Self::new()
    }
}

impl Hash {
    /// An empty flat hash (no allocation until the first field).
    pub fn new() -> Self {
        Hash(Repr::Flat(Box::default()))
    }

    /// An empty map-form hash hashing with `seed` (for hashes known to be big).
    pub fn with_seed(seed: u64) -> Self {
        Hash(Repr::Map(Big::new(PMap::with_seed(seed))))
    }

    /// A hash holding `listpack`, a listpack that is not whole (a DUMP payload restored with
    /// `sanitize-dump-payload no`, whose header alone Redis checks then): kept as it is for
    /// DUMP and saving, never read. It reads as empty without being empty (so it is not
    /// dropped as an empty key); its commands answer [`super::CORRUPT_VALUE`] instead.
    pub fn corrupt(listpack: Vec<u8>) -> Self {
        Hash(Repr::Map(Box::new(Big {
            map: PMap::with_seed(0),
            corrupt: Some(listpack.into_boxed_slice()),
        })))
    }

    /// The listpack of a [`Hash::corrupt`] hash.
    pub fn corrupt_listpack(&self) -> Option<&[u8]> {
        match &self.0 {
            Repr::Map(m) => m.corrupt.as_deref(),
            Repr::Flat(_) => None,
        }
    }

    /// Whether this is the map form (a [`Hash::corrupt`] hash is not).
    pub fn is_big(&self) -> bool {
        matches!(&self.0, Repr::Map(m) if m.corrupt.is_none())
    }

    /// Converts to the map form (no-op when already there).
    pub fn make_big(&mut self, seed: u64) {
        if let Repr::Flat(buf) = &self.0 {
            let mut m = PMap::with_seed(seed);
            for (f, v) in FlatPairs::new(buf) {
                m.insert(small(f), small(v));
            }
            self.0 = Repr::Map(Big::new(m));
        }
    }

    /// Converts to the flat form (for new values that fit a listpack; no-op when flat).
    pub fn make_flat(&mut self) {
        if let Repr::Map(m) = &self.0 {
            if m.corrupt.is_some() {
                return;
            }
            let pairs = m.iter().map(|(f, v)| (Split::whole(f), Split::whole(v)));
            self.0 = Repr::Flat(encode(pairs));
        }
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Flat(buf) => {
                let mut it = FlatPairs::new(buf);
                let mut n = 0;
                while it.next_suffixes().is_some() {
                    n += 1;
                }
                n
            }
            Repr::Map(m) => m.len(),
        }
    }

    /// Whether there is no field (never for a [`Hash::corrupt`] one).
    pub fn is_empty(&self) -> bool {
        match &self.0 {
            Repr::Flat(buf) => buf.is_empty(),
            Repr::Map(m) => m.is_empty() && m.corrupt.is_none(),
        }
    }

    /// A field's value.
    pub fn get(&self, field: &[u8]) -> Option<Split<'_>> {
        match &self.0 {
            Repr::Flat(buf) => FlatPairs::new(buf).find(field).ok().map(|(_, v)| v),
            Repr::Map(m) => m.get(field).map(|v| Split::whole(v)),
        }
    }

    /// Whether `field` is present.
    pub fn contains_key(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    /// Sets `field` to `value`; returns whether the field is new.
    pub fn insert(&mut self, field: &[u8], value: &[u8]) -> bool {
        self.insert_within(field, value, usize::MAX)
            .expect("no field limit")
    }

    /// [`Hash::insert`], unless `field` is new and the hash already holds `fields_max` fields:
    /// then `None`, nothing changed (the caller converts the hash first). On a flat hash one
    /// walk answers both the lookup and the count.
    pub fn insert_within(&mut self, field: &[u8], value: &[u8], fields_max: usize) -> Option<bool> {
        match &mut self.0 {
            Repr::Flat(buf) => Self::insert_flat(buf, field, value, fields_max),
            // Never written (its commands are refused before).
            Repr::Map(m) if m.corrupt.is_some() => Some(false),
            Repr::Map(m) => {
                let full = m.len() >= fields_max;
                match m.get_mut(field) {
                    Some(v) => {
                        *v = SmallBytes::from_slice(value);
                        Some(false)
                    }
                    None if full => None,
                    None => {
                        m.insert(SmallBytes::from_slice(field), SmallBytes::from_slice(value));
                        Some(true)
                    }
                }
            }
        }
    }

    /// [`Hash::insert_within`] on a flat buffer. A value of the old one's length that keeps
    /// the values' prefix overwrites the old suffix in place; a new pair whose field and value
    /// keep both prefixes is appended (in place when the allocator can grow the buffer);
    /// anything else re-encodes the buffer (with the shorter prefixes).
    fn insert_flat(
        buf: &mut Box<[u8]>,
        field: &[u8],
        value: &[u8],
        fields_max: usize,
    ) -> Option<bool> {
        let it = FlatPairs::new(buf);
        let (field_prefix, value_prefix) = (it.field_prefix, it.value_prefix);
        match it.find(field) {
            Ok((end, old)) => {
                let suffix = match value.strip_prefix(value_prefix) {
                    Some(s) if old.len() == value.len() => s,
                    _ => {
                        let pairs = FlatPairs::new(buf)
                            .map(|(f, v)| (f, if f == field { Split::whole(value) } else { v }));
                        *buf = encode(pairs);
                        return Some(false);
                    }
                };
                let first_changed = old.tail.first() != suffix.first();
                buf[end - suffix.len()..end].copy_from_slice(suffix);
                // A new first byte may leave every value with a longer common prefix.
                if first_changed && FlatPairs::new(buf).value_prefix_grows() {
                    *buf = encode(FlatPairs::new(buf));
                }
                Some(false)
            }
            Err(absent) => {
                let fields = absent.fields.unwrap_or_else(|| FlatPairs::new(buf).count());
                if fields >= fields_max {
                    return None;
                }
                let suffixes = (
                    field.strip_prefix(field_prefix),
                    value.strip_prefix(value_prefix),
                );
                if let (false, (Some(f), Some(v))) = (buf.is_empty(), suffixes) {
                    let prev_len = absent.prev_len;
                    let mut out = core::mem::take(buf).into_vec();
                    out.reserve_exact(pair_len(f.len(), v.len(), prev_len));
                    put_pair(&mut out, Split::whole(f), Split::whole(v), prev_len);
                    *buf = out.into_boxed_slice();
                } else {
                    let new = (Split::whole(field), Split::whole(value));
                    *buf = encode(FlatPairs::new(buf).chain(core::iter::once(new)));
                }
                Some(true)
            }
        }
    }

    /// Removes `field`; returns whether it was present.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match &mut self.0 {
            Repr::Flat(buf) => {
                if FlatPairs::new(buf).find(field).is_err() {
                    return false;
                }
                *buf = encode(FlatPairs::new(buf).filter(|(f, _)| *f != field));
                true
            }
            Repr::Map(m) => m.remove(field).is_some(),
        }
    }

    /// All pairs: insertion order when flat (as a listpack), hash order when big.
    pub fn iter(&self) -> HashIter<'_> {
        match &self.0 {
            Repr::Flat(buf) => HashIter::Flat(FlatPairs::new(buf)),
            Repr::Map(m) => HashIter::Map(m.iter()),
        }
    }

    /// Calls `f` on every pair in [`Hash::iter`]'s order, choosing the form once rather than
    /// per pair (the walk of HGETALL, HKEYS, HVALS).
    #[inline]
    pub fn for_each(&self, mut f: impl FnMut(Split<'_>, Split<'_>)) {
        match &self.0 {
            Repr::Flat(buf) => FlatPairs::new(buf).for_each(|(k, v)| f(k, v)),
            Repr::Map(m) => m
                .iter()
                .for_each(|(k, v)| f(Split::whole(k), Split::whole(v))),
        }
    }

    /// The pair `rnd` picks, uniformly (`None` when empty).
    pub fn random(&self, rnd: u64) -> Option<(Split<'_>, Split<'_>)> {
        match &self.0 {
            Repr::Flat(_) => {
                let n = self.len();
                (n > 0).then(|| self.iter().nth((rnd % n as u64) as usize))?
            }
            Repr::Map(m) => m
                .random(rnd)
                .map(|(k, v)| (Split::whole(k), Split::whole(v))),
        }
    }

    /// One scan step: a flat hash gives every pair and cursor 0 (as Redis answers listpacks);
    /// a map gives a batch of at least `count` in hash order from `cursor`.
    pub fn scan(&self, cursor: u64, count: usize) -> (u64, Pairs<'_>) {
        match &self.0 {
            Repr::Flat(_) => (0, self.iter().collect()),
            Repr::Map(m) => {
                let mut keys = Vec::new();
                let next = m.scan(cursor, count, |k, _| keys.push(k.clone()));
                let found = keys
                    .iter()
                    .filter_map(|k| m.get_key_value(&k[..]))
                    .map(|(k, v)| (Split::whole(k), Split::whole(v)))
                    .collect();
                (next, found)
            }
        }
    }

    /// Heap bytes owned (the flat buffer, or the map's nodes).
    pub fn heap_size(&self) -> usize {
        match &self.0 {
            Repr::Flat(buf) => buf.len(),
            Repr::Map(m) => {
                let lp = m.corrupt.as_ref().map_or(0, |lp| lp.len());
                core::mem::size_of::<HashMap>() + m.heap_size() + lp
            }
        }
    }

    /// Panics when the structure is inconsistent (a flat buffer that does not parse to whole
    /// pairs, is not the canonical one for its pairs, or repeats a field).
    pub fn check_invariants(&self) {
        match &self.0 {
            Repr::Flat(buf) => {
                let pairs: Vec<_> = FlatPairs::new(buf).collect();
                assert_eq!(
                    &encode(pairs.iter().copied())[..],
                    &buf[..],
                    "not canonical"
                );
                for (i, (f, _)) in pairs.iter().enumerate() {
                    assert!(pairs[..i].iter().all(|(g, _)| g != f), "repeated field");
                }
            }
            Repr::Map(m) => m.check_invariants(),
        }
    }
}

impl PartialEq for Hash {
    fn eq(&self, other: &Self) -> bool {
        if self.corrupt_listpack().is_some() || other.corrupt_listpack().is_some() {
            return self.corrupt_listpack() == other.corrupt_listpack();
        }
        self.len() == other.len()
            && self
                .iter()
                .all(|(f, v)| f.with_contiguous(|f| other.get(f) == Some(v)))
    }
}

impl core::fmt::Debug for Hash {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let fm = match &self.0 {
            Repr::Map(m) if m.corrupt.is_some() => "Hash::Corrupt",
            Repr::Map(_) => "Hash::Map",
            Repr::Flat(_) => "Hash::Flat",
        };
        f.write_str(fm)?;
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::collections::BTreeMap;
    use proptest::prelude::*;

    fn get(h: &Hash, f: &[u8]) -> Option<Vec<u8>> {
        h.get(f).map(|v| v.to_vec())
    }

    #[test]
    fn flat_insert_update_remove() {
        let mut h = Hash::new();
        assert!(h.insert(b"a", b"1"));
        assert!(h.insert(b"bb", b"22"));
        assert!(!h.insert(b"a", b"333"));
        assert_eq!(get(&h, b"a"), Some(b"333".to_vec()));
        assert_eq!(h.len(), 2);
        let order: Vec<_> = h.iter().map(|(f, _)| f.to_vec()).collect();
        assert_eq!(order, [b"a".to_vec(), b"bb".to_vec()]);
        assert!(h.remove(b"a"));
        assert!(!h.remove(b"a"));
        // One pair: both prefixes are the whole field and value, the pair holds empty suffixes.
        assert_eq!(h.heap_size(), 1 + 2 + 1 + 2 + 1);
        h.check_invariants();
    }

    #[test]
    fn shared_prefixes_are_stored_once() {
        let mut h = Hash::new();
        for j in 0..10u8 {
            let v = [b"00000000000042:".as_slice(), &[b'0' + j]].concat();
            h.insert(&[b"field:".as_slice(), &[b'0' + j]].concat(), &v);
            h.check_invariants();
        }
        // Prefixes 1 + 6 and 1 + 15, then 10 pairs of head, field byte, value byte, and the
        // first pair's value length.
        assert_eq!(h.heap_size(), 7 + 16 + 10 * 3 + 1);
        assert_eq!(get(&h, b"field:3"), Some(b"00000000000042:3".to_vec()));
        assert_eq!(get(&h, b"field:"), None);
        assert_eq!(get(&h, b"other"), None);
        // In place: same length, same prefix; then a value that breaks the prefix.
        assert!(!h.insert(b"field:3", b"00000000000042:9"));
        assert_eq!(h.heap_size(), 54);
        assert!(!h.insert(b"field:3", b"10000000000042:9"));
        assert_eq!(get(&h, b"field:3"), Some(b"10000000000042:9".to_vec()));
        h.check_invariants();
        // Back: the prefix grows again.
        assert!(!h.insert(b"field:3", b"00000000000042:3"));
        assert_eq!(h.heap_size(), 54);
        h.check_invariants();
    }

    #[test]
    fn without_shared_prefixes_two_bytes_more_than_plain_pairs() {
        let mut h = Hash::new();
        h.insert(b"a", b"xy");
        h.insert(b"b", b"zw");
        // Two empty prefixes, then (head, field, value length, value) and (head, field, value).
        assert_eq!(h.heap_size(), 2 + 5 + 4);
        h.check_invariants();
    }

    #[test]
    fn an_update_that_changes_the_first_suffix_byte_keeps_the_form_canonical() {
        let mut h = Hash::new();
        h.insert(b"a", b"xa");
        h.insert(b"b", b"ya");
        h.insert(b"c", b"yb");
        // Values' prefix "": "xa" -> "ya" makes it "y".
        h.insert(b"a", b"ya");
        h.check_invariants();
        assert_eq!(get(&h, b"a"), Some(b"ya".to_vec()));
        h.insert(b"b", b"yc");
        h.check_invariants();
    }

    #[test]
    fn insert_within_refuses_a_new_field_past_the_limit() {
        let mut h = Hash::new();
        assert_eq!(h.insert_within(b"field:1", b"v1", 2), Some(true));
        assert_eq!(h.insert_within(b"field:2", b"v2", 2), Some(true));
        let before = h.clone();
        // Counted by the walk, and (a field without the fields' prefix) without it.
        assert_eq!(h.insert_within(b"field:3", b"v3", 2), None);
        assert_eq!(h.insert_within(b"other", b"v3", 2), None);
        assert_eq!(h, before);
        assert_eq!(h.heap_size(), before.heap_size());
        assert_eq!(h.insert_within(b"field:2", b"v9", 2), Some(false));
        h.make_big(1);
        assert_eq!(h.insert_within(b"field:3", b"v3", 2), None);
        assert_eq!(h.insert_within(b"field:3", b"v3", 3), Some(true));
    }

    #[test]
    fn conversion_keeps_content_and_clones_are_snapshots() {
        let mut h = Hash::new();
        for i in 0..20u8 {
            h.insert(&[b'f', i], &[i; 30]);
        }
        let snap = h.clone();
        h.make_big(7);
        assert!(h.is_big() && !snap.is_big());
        assert_eq!(h, snap);
        h.insert(b"x", b"y");
        assert_eq!(snap.len(), 20);
        assert_eq!(snap.get(b"x"), None);
        h.make_flat();
        assert!(!h.is_big());
        assert_eq!(h.len(), 21);
        h.check_invariants();
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(Vec<u8>, Vec<u8>),
        Remove(Vec<u8>),
    }

    /// Byte strings over a small alphabet, with or without a shared start.
    fn bytes(shared: &'static [u8]) -> impl Strategy<Value = Vec<u8>> {
        (any::<bool>(), prop::collection::vec(b'a'..b'd', 0..4)).prop_map(move |(p, tail)| {
            if p {
                [shared, &tail].concat()
            } else {
                tail
            }
        })
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (bytes(b"field:"), bytes(b"0000042:")).prop_map(|(f, v)| Op::Insert(f, v)),
            1 => bytes(b"field:").prop_map(Op::Remove),
        ]
    }

    proptest! {
        /// Inserts, updates and removes against a model: same pairs in insertion order, the
        /// canonical buffer after every step, and the same content once converted to a map.
        #[test]
        fn flat_matches_a_model(ops in prop::collection::vec(op(), 1..60)) {
            let mut h = Hash::new();
            let mut model: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
            for op in ops {
                match op {
                    Op::Insert(f, v) => {
                        let at = model.iter().position(|(g, _)| *g == f);
                        prop_assert_eq!(h.insert(&f, &v), at.is_none());
                        match at {
                            Some(i) => model[i].1 = v,
                            None => model.push((f, v)),
                        }
                    }
                    Op::Remove(f) => {
                        let at = model.iter().position(|(g, _)| *g == f);
                        prop_assert_eq!(h.remove(&f), at.is_some());
                        if let Some(i) = at {
                            model.remove(i);
                        }
                    }
                }
                h.check_invariants();
                let pairs: Vec<_> = h.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
                prop_assert_eq!(&pairs, &model);
                prop_assert_eq!(h.len(), model.len());
                prop_assert_eq!(h.is_empty(), model.is_empty());
                for (f, v) in &model {
                    prop_assert_eq!(get(&h, f), Some(v.clone()));
                }
            }
            let mut big = h.clone();
            big.make_big(3);
            prop_assert!(big == h);
            let sorted: BTreeMap<_, _> = big.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
            prop_assert_eq!(sorted, model.iter().cloned().collect::<BTreeMap<_, _>>());
            big.make_flat();
            big.check_invariants();
        }
    }
}
