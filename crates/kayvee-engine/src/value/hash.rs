//! `Hash`: a hash's fields, flat while Redis would keep a listpack, a persistent map after.
//!
//! The flat form is one exact-size buffer of pairs in insertion order (as Redis's listpack):
//! `varint(field_len << 1 | same) field [varint(value_len)] value`, where `same` says the value
//! is as long as the previous pair's and its length is left out (values of one width, the
//! common case, cost one length byte per pair instead of two; the flag is set whenever it
//! can be, so the encoding is canonical). No per-field allocation or inline slack, linear
//! search (at most `hash-max-listpack-entries` pairs). Cloning it for a snapshot copies that
//! small buffer; the map form clones in O(1). The engine converts (one way, as Redis does)
//! when it marks the entry [`super::Meta::BIG`], see [`super::Value::normalize`].

use super::flat::{get_varint, put_varint, varint_len};
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
    /// A persistent hash trie (`hashtable`).
    Map(Box<HashMap>),
}

/// Field/value pairs borrowed from a hash.
pub type Pairs<'a> = Vec<(&'a [u8], &'a [u8])>;

/// Iterates a flat buffer's pairs.
#[derive(Clone)]
pub struct FlatPairs<'a> {
    buf: &'a [u8],
    at: usize,
    /// The previous pair's value length (`usize::MAX` before the first pair).
    prev_len: usize,
}

impl<'a> FlatPairs<'a> {
    /// The pairs of `buf` from its start.
    fn new(buf: &'a [u8]) -> Self {
        FlatPairs {
            buf,
            at: 0,
            prev_len: usize::MAX,
        }
    }
}

impl<'a> Iterator for FlatPairs<'a> {
    type Item = (&'a [u8], &'a [u8]);
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
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
}

/// Appends one pair, after a pair whose value was `prev_len` bytes long (`usize::MAX`: first).
fn put_pair(out: &mut Vec<u8>, field: &[u8], value: &[u8], prev_len: usize) {
    let same = value.len() == prev_len;
    put_varint(out, field.len() << 1 | usize::from(same));
    out.extend_from_slice(field);
    if !same {
        put_varint(out, value.len());
    }
    out.extend_from_slice(value);
}

/// How many bytes `put_pair` writes.
fn pair_len(field: &[u8], value: &[u8], prev_len: usize) -> usize {
    let value_head = if value.len() == prev_len {
        0
    } else {
        varint_len(value.len())
    };
    varint_len(field.len() << 1) + field.len() + value_head + value.len()
}

/// A flat buffer of `pairs`, exact-size.
fn encode<'a>(pairs: impl Iterator<Item = (&'a [u8], &'a [u8])> + Clone) -> Box<[u8]> {
    let mut prev = usize::MAX;
    let len: usize = pairs
        .clone()
        .map(|(f, v)| {
            let n = pair_len(f, v, prev);
            prev = v.len();
            n
        })
        .sum();
    let mut out = Vec::with_capacity(len);
    prev = usize::MAX;
    for (f, v) in pairs {
        put_pair(&mut out, f, v, prev);
        prev = v.len();
    }
    out.into_boxed_slice()
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
    type Item = (&'a [u8], &'a [u8]);
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            HashIter::Flat(it) => it.next(),
            HashIter::Map(it) => it.next().map(|(k, v)| (&k[..], &v[..])),
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
        Hash(Repr::Map(Box::new(PMap::with_seed(seed))))
    }

    /// Whether this is the map form.
    pub fn is_big(&self) -> bool {
        matches!(self.0, Repr::Map(_))
    }

    /// Converts to the map form (no-op when already there).
    pub fn make_big(&mut self, seed: u64) {
        if let Repr::Flat(buf) = &self.0 {
            let mut m = PMap::with_seed(seed);
            for (f, v) in FlatPairs::new(buf) {
                m.insert(SmallBytes::from_slice(f), SmallBytes::from_slice(v));
            }
            self.0 = Repr::Map(Box::new(m));
        }
    }

    /// Converts to the flat form (for new values that fit a listpack; no-op when flat).
    pub fn make_flat(&mut self) {
        if let Repr::Map(m) = &self.0 {
            self.0 = Repr::Flat(encode(m.iter().map(|(f, v)| (&f[..], &v[..]))));
        }
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Flat(buf) => FlatPairs::new(buf).count(),
            Repr::Map(m) => m.len(),
        }
    }

    /// Whether there is no field.
    pub fn is_empty(&self) -> bool {
        match &self.0 {
            Repr::Flat(buf) => buf.is_empty(),
            Repr::Map(m) => m.is_empty(),
        }
    }

    /// Where `field`'s value ends in a flat buffer, with the value; or, when absent, the last
    /// pair's value length (`usize::MAX` when empty) to append after.
    fn find_flat<'b>(buf: &'b [u8], field: &[u8]) -> Result<(usize, &'b [u8]), usize> {
        let mut it = FlatPairs::new(buf);
        while let Some((f, v)) = it.next() {
            if f == field {
                return Ok((it.at, v));
            }
        }
        Err(it.prev_len)
    }

    /// A field's value.
    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match &self.0 {
            Repr::Flat(buf) => Self::find_flat(buf, field).ok().map(|(_, v)| v),
            Repr::Map(m) => m.get(field).map(|v| &v[..]),
        }
    }

    /// Whether `field` is present.
    pub fn contains_key(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    /// Sets `field` to `value`; returns whether the field is new.
    pub fn insert(&mut self, field: &[u8], value: &[u8]) -> bool {
        match &mut self.0 {
            Repr::Flat(buf) => match Self::find_flat(buf, field) {
                // A value of the same length: the pair's framing and the next pair's flag stay.
                Ok((end, old)) if old.len() == value.len() => {
                    buf[end - value.len()..end].copy_from_slice(value);
                    false
                }
                Ok(_) => {
                    let pairs =
                        FlatPairs::new(buf).map(|(f, v)| (f, if f == field { value } else { v }));
                    *buf = encode(pairs);
                    false
                }
                Err(prev_len) => {
                    // Appended in place when the allocator can grow the buffer.
                    let mut v = core::mem::take(buf).into_vec();
                    v.reserve_exact(pair_len(field, value, prev_len));
                    put_pair(&mut v, field, value, prev_len);
                    *buf = v.into_boxed_slice();
                    true
                }
            },
            Repr::Map(m) => match m.get_mut(field) {
                Some(v) => {
                    *v = SmallBytes::from_slice(value);
                    false
                }
                None => {
                    m.insert(SmallBytes::from_slice(field), SmallBytes::from_slice(value));
                    true
                }
            },
        }
    }

    /// Removes `field`; returns whether it was present.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match &mut self.0 {
            Repr::Flat(buf) => {
                if Self::find_flat(buf, field).is_err() {
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

    /// The pair `rnd` picks, uniformly (`None` when empty).
    pub fn random(&self, rnd: u64) -> Option<(&[u8], &[u8])> {
        match &self.0 {
            Repr::Flat(_) => {
                let n = self.len();
                (n > 0).then(|| self.iter().nth((rnd % n as u64) as usize))?
            }
            Repr::Map(m) => m.random(rnd).map(|(k, v)| (&k[..], &v[..])),
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
                    .map(|(k, v)| (&k[..], &v[..]))
                    .collect();
                (next, found)
            }
        }
    }

    /// Heap bytes owned (the flat buffer, or the map's nodes).
    pub fn heap_size(&self) -> usize {
        match &self.0 {
            Repr::Flat(buf) => buf.len(),
            Repr::Map(m) => core::mem::size_of::<HashMap>() + m.heap_size(),
        }
    }

    /// Panics when the structure is inconsistent (a flat buffer that does not parse to whole
    /// pairs, or a repeated field).
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
        self.len() == other.len() && self.iter().all(|(f, v)| other.get(f) == Some(v))
    }
}

impl core::fmt::Debug for Hash {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let fm = if self.is_big() {
            "Hash::Map"
        } else {
            "Hash::Flat"
        };
        f.write_str(fm)?;
        f.debug_map()
            .entries(
                self.iter()
                    .map(|(k, v)| (SmallBytes::from_slice(k), SmallBytes::from_slice(v))),
            )
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_insert_update_remove() {
        let mut h = Hash::new();
        assert!(h.insert(b"a", b"1"));
        assert!(h.insert(b"bb", b"22"));
        assert!(!h.insert(b"a", b"333"));
        assert_eq!(h.get(b"a"), Some(&b"333"[..]));
        assert_eq!(h.len(), 2);
        let order: Vec<_> = h.iter().map(|(f, _)| f.to_vec()).collect();
        assert_eq!(order, [b"a".to_vec(), b"bb".to_vec()]);
        assert!(h.remove(b"a"));
        assert!(!h.remove(b"a"));
        assert_eq!(h.heap_size(), 6);
        h.check_invariants();
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
}
