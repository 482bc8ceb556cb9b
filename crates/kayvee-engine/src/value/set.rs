//! `Set`: a set's members, packed while small, a persistent map after.
//!
//! Three forms, each write converting one way (as Redis converts its encodings, never back):
//! - `Ints` while every member is a canonical integer (Redis's `string2ll`) and there are at
//!   most `set-max-intset-entries`: one exact-size buffer, a width byte (2, 4 or 8) then the
//!   values in ascending order, little-endian, each in that width, the narrowest that held
//!   every value added (a removal never narrows it, as Redis's `intset`). `OBJECT ENCODING`
//!   answers `intset` for this form and only for it.
//! - `Packed` while there are at most [`PACKED_LEN_MAX`] members of at most
//!   [`PACKED_MEMBER_MAX`] bytes: one exact-size buffer, a zero byte then `varint(len) member`
//!   in insertion order, searched linearly (encoding `hashtable`: Redis 7.0 has no listpack sets).
//! - `Map`: a persistent hash trie (`hashtable`).
//!
//! A small set's buffer is copied when a snapshot shares it and it is written (at most 4 KiB
//! for an intset of 512 8-byte values, 8.3 KiB packed); the map clones in O(1).

use super::flat::{get_bytes, put_bytes, varint_len};
use crate::util::parse_i64;
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::ops::Deref;
use kayvee_pds::{PMap, SmallBytes};

/// The persistent map form of a big set.
pub type SetMap = PMap<SmallBytes, ()>;

/// Most members a packed (non-integer) set holds (Redis 7.2's `set-max-listpack-entries`).
pub const PACKED_LEN_MAX: usize = 128;
/// Longest member a packed set holds (Redis 7.2's `set-max-listpack-value`).
pub const PACKED_MEMBER_MAX: usize = 64;

/// A set of byte strings.
#[derive(Clone)]
pub struct Set(Repr);

/// The representations. The two small forms share one variant, told apart by the buffer's
/// first byte, so a `Set` is two words and a `Value` stays three.
#[derive(Clone)]
enum Repr {
    /// Sorted integers (`intset`: empty, or the width byte then the values), or packed short
    /// members in insertion order ([`PACKED`], then `varint(len) member` each).
    Flat(Box<[u8]>),
    /// A persistent hash trie.
    Map(Box<SetMap>),
}

/// First byte of a packed buffer (an intset's is its width, 2, 4 or 8).
const PACKED: u8 = 0;

/// Whether a flat buffer is an intset (the empty buffer is the empty intset).
#[inline]
fn is_ints(buf: &[u8]) -> bool {
    buf.first() != Some(&PACKED)
}

/// A member read from a set: bytes it stores, or an integer of the intset spelled in decimal.
#[derive(Clone, Copy)]
pub enum Member<'a> {
    /// Stored bytes.
    Bytes(&'a [u8]),
    /// Decimal digits: `buf[..len]`.
    Int {
        /// Digits used.
        len: u8,
        /// The digits (an i64 takes at most 20).
        buf: [u8; 20],
    },
}

impl<'a> Member<'a> {
    /// `v` in decimal.
    pub fn int(v: i64) -> Self {
        let mut buf = [0u8; 20];
        let mut at = 20;
        let mut u = v.unsigned_abs();
        loop {
            at -= 1;
            buf[at] = b'0' + (u % 10) as u8;
            u /= 10;
            if u == 0 {
                break;
            }
        }
        if v < 0 {
            at -= 1;
            buf[at] = b'-';
        }
        buf.copy_within(at.., 0);
        Member::Int {
            len: (20 - at) as u8,
            buf,
        }
    }
}

impl Deref for Member<'_> {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        match self {
            Member::Bytes(b) => b,
            Member::Int { len, buf } => &buf[..usize::from(*len)],
        }
    }
}

impl core::fmt::Debug for Member<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        SmallBytes::from_slice(self).fmt(f)
    }
}

/// The narrowest intset width holding `v`.
fn int_width(v: i64) -> usize {
    if i16::try_from(v).is_ok() {
        2
    } else if i32::try_from(v).is_ok() {
        4
    } else {
        8
    }
}

/// The width of an intset buffer (2 for the empty one).
#[inline]
fn width_of(buf: &[u8]) -> usize {
    buf.first().map_or(2, |&w| usize::from(w))
}

/// The number of values in an intset buffer.
#[inline]
fn ints_len(buf: &[u8]) -> usize {
    buf.len().saturating_sub(1) / width_of(buf)
}

/// The `i`th value of an intset buffer.
#[inline]
fn int_at(buf: &[u8], i: usize) -> i64 {
    let w = width_of(buf);
    let b = &buf[1 + i * w..1 + (i + 1) * w];
    match w {
        2 => i64::from(i16::from_le_bytes([b[0], b[1]])),
        4 => i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        _ => i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
    }
}

/// Where `v` is in an intset buffer, or where it would go.
fn ints_search(buf: &[u8], v: i64) -> Result<usize, usize> {
    let (mut lo, mut hi) = (0, ints_len(buf));
    while lo < hi {
        let mid = (lo + hi) / 2;
        match int_at(buf, mid).cmp(&v) {
            core::cmp::Ordering::Less => lo = mid + 1,
            core::cmp::Ordering::Greater => hi = mid,
            core::cmp::Ordering::Equal => return Ok(mid),
        }
    }
    Err(lo)
}

/// An intset buffer of `width` holding `values` (ascending).
fn ints_build(width: usize, len: usize, values: impl Iterator<Item = i64>) -> Box<[u8]> {
    let mut out = Vec::with_capacity(1 + width * len);
    out.push(width as u8);
    for v in values {
        out.extend_from_slice(&v.to_le_bytes()[..width]);
    }
    out.into_boxed_slice()
}

/// Where `member` starts and ends in a packed buffer.
fn packed_find(buf: &[u8], member: &[u8]) -> Option<(usize, usize)> {
    let mut at = 0;
    while at < buf.len() {
        let start = at;
        if get_bytes(buf, &mut at) == member {
            return Some((start, at));
        }
    }
    None
}

/// The members of a packed buffer.
fn packed_iter(buf: &[u8]) -> impl Iterator<Item = &[u8]> + Clone {
    let mut at = 0;
    core::iter::from_fn(move || (at < buf.len()).then(|| get_bytes(buf, &mut at)))
}

/// Iterates a set's members: ascending for an intset, insertion order packed, hash order in
/// a map. Lives on the stack for one walk, so the size difference between the variants costs
/// nothing worth an allocation.
#[allow(clippy::large_enum_variant)]
pub enum SetIter<'a> {
    /// Over an intset: the buffer and the next and end indexes.
    Ints(&'a [u8], usize, usize),
    /// Over a packed buffer: the buffer and the next offset.
    Packed(&'a [u8], usize),
    /// Over a map.
    Map(kayvee_pds::map::Iter<'a, SmallBytes, ()>),
}

impl<'a> Iterator for SetIter<'a> {
    type Item = Member<'a>;
    #[inline]
    fn next(&mut self) -> Option<Member<'a>> {
        match self {
            SetIter::Ints(buf, i, end) => (*i < *end).then(|| {
                *i += 1;
                Member::int(int_at(buf, *i - 1))
            }),
            SetIter::Packed(buf, at) => {
                (*at < buf.len()).then(|| Member::Bytes(get_bytes(buf, at)))
            }
            SetIter::Map(it) => it.next().map(|(m, _)| Member::Bytes(m)),
        }
    }
}

impl Default for Set {
    fn default() -> Self {
        Self::new()
    }
}

impl Set {
    /// An empty intset (no allocation until the first member).
    pub fn new() -> Self {
        Set(Repr::Flat(Box::default()))
    }

    /// An empty map-form set hashing with `seed` (for sets known to be big).
    pub fn with_seed(seed: u64) -> Self {
        Set(Repr::Map(Box::new(PMap::with_seed(seed))))
    }

    /// An intset of `width` (2, 4 or 8) from values read off an RDB intset, kept at that width
    /// as Redis keeps a loaded intset; `None` unless they are strictly ascending and fit it.
    pub fn from_intset(width: usize, values: &[i64]) -> Option<Self> {
        let fits = values.iter().all(|&v| int_width(v) <= width);
        let sorted = values.windows(2).all(|p| p[0] < p[1]);
        (matches!(width, 2 | 4 | 8) && fits && sorted).then(|| {
            Set(Repr::Flat(ints_build(
                width,
                values.len(),
                values.iter().copied(),
            )))
        })
    }

    /// Whether this is the intset form (`OBJECT ENCODING` `intset`).
    pub fn is_intset(&self) -> bool {
        matches!(&self.0, Repr::Flat(buf) if is_ints(buf))
    }

    /// Whether this is the map form.
    pub fn is_map(&self) -> bool {
        matches!(self.0, Repr::Map(_))
    }

    /// The intset's width and values, ascending (`None` for the other forms).
    pub fn intset(&self) -> Option<(usize, impl Iterator<Item = i64> + '_)> {
        match &self.0 {
            Repr::Flat(buf) if is_ints(buf) => {
                Some((width_of(buf), (0..ints_len(buf)).map(|i| int_at(buf, i))))
            }
            _ => None,
        }
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Flat(buf) if is_ints(buf) => ints_len(buf),
            Repr::Flat(buf) => packed_iter(&buf[1..]).count(),
            Repr::Map(m) => m.len(),
        }
    }

    /// Whether there is no member.
    pub fn is_empty(&self) -> bool {
        match &self.0 {
            Repr::Flat(buf) => buf.len() <= 1,
            Repr::Map(m) => m.is_empty(),
        }
    }

    /// Whether `member` is in the set.
    pub fn contains(&self, member: &[u8]) -> bool {
        match &self.0 {
            Repr::Flat(buf) if is_ints(buf) => {
                parse_i64(member).is_some_and(|v| ints_search(buf, v).is_ok())
            }
            Repr::Flat(buf) => packed_find(&buf[1..], member).is_some(),
            Repr::Map(m) => m.contains_key(member),
        }
    }

    /// Adds `member`; returns whether it is new. An intset becomes packed (or a map) on a
    /// member that is not an integer or past `intset_max` members; a packed set becomes a map
    /// past [`PACKED_LEN_MAX`] members or on a member longer than [`PACKED_MEMBER_MAX`]
    /// (`seed` hashes the map).
    pub fn insert(&mut self, member: &[u8], intset_max: u64, seed: u64) -> bool {
        match &mut self.0 {
            Repr::Flat(buf) if is_ints(buf) => {
                if let Some(v) = parse_i64(member) {
                    match ints_search(buf, v) {
                        Ok(_) => return false,
                        Err(at) if ints_len(buf) < intset_max as usize => {
                            Self::ints_insert(buf, at, v);
                            return true;
                        }
                        Err(_) => {}
                    }
                }
                // Packed when one more member fits (the packed insert checks its length).
                if ints_len(buf) < PACKED_LEN_MAX {
                    self.make_packed();
                } else {
                    self.make_map(seed);
                }
                self.insert(member, intset_max, seed)
            }
            Repr::Flat(buf) => {
                if packed_find(&buf[1..], member).is_some() {
                    return false;
                }
                let full = packed_iter(&buf[1..]).count() >= PACKED_LEN_MAX;
                if member.len() > PACKED_MEMBER_MAX || full {
                    self.make_map(seed);
                    return self.insert(member, intset_max, seed);
                }
                let mut v = core::mem::take(buf).into_vec();
                v.reserve_exact(varint_len(member.len()) + member.len());
                debug_assert_eq!(v.first(), Some(&PACKED));
                put_bytes(&mut v, member);
                *buf = v.into_boxed_slice();
                true
            }
            Repr::Map(m) => {
                if m.contains_key(member) {
                    return false;
                }
                m.insert(SmallBytes::from_slice(member), ());
                true
            }
        }
    }

    /// Inserts `v` at index `at` of an intset buffer, widening it when `v` needs it.
    fn ints_insert(buf: &mut Box<[u8]>, at: usize, v: i64) {
        let (old, n) = (width_of(buf), ints_len(buf));
        let w = old.max(int_width(v));
        if w == old && !buf.is_empty() {
            // Same width: the value's bytes go in place, the buffer grown by `realloc`.
            let at = 1 + at * w;
            super::flat::splice(buf, at, at, &v.to_le_bytes()[..w]);
            return;
        }
        let values = (0..at)
            .map(|i| int_at(buf, i))
            .chain(core::iter::once(v))
            .chain((at..n).map(|i| int_at(buf, i)));
        *buf = ints_build(w, n + 1, values);
    }

    /// Removes `member`; returns whether it was present.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match &mut self.0 {
            Repr::Flat(buf) if is_ints(buf) => {
                let Some(at) = parse_i64(member).and_then(|v| ints_search(buf, v).ok()) else {
                    return false;
                };
                let (w, n) = (width_of(buf), ints_len(buf));
                let values = (0..n).filter(|&i| i != at).map(|i| int_at(buf, i));
                *buf = ints_build(w, n - 1, values);
                true
            }
            Repr::Flat(buf) => match packed_find(&buf[1..], member) {
                Some((from, to)) => {
                    super::flat::splice(buf, from + 1, to + 1, &[]);
                    true
                }
                None => false,
            },
            Repr::Map(m) => m.remove(member).is_some(),
        }
    }

    /// All members: ascending for an intset, insertion order packed, hash order in a map.
    pub fn iter(&self) -> SetIter<'_> {
        match &self.0 {
            Repr::Flat(buf) if is_ints(buf) => SetIter::Ints(buf, 0, ints_len(buf)),
            Repr::Flat(buf) => SetIter::Packed(&buf[1..], 0),
            Repr::Map(m) => SetIter::Map(m.iter()),
        }
    }

    /// The member `rnd` picks, uniformly (`None` when empty).
    pub fn random(&self, rnd: u64) -> Option<Member<'_>> {
        match &self.0 {
            Repr::Flat(buf) if is_ints(buf) => {
                let n = ints_len(buf);
                (n > 0).then(|| Member::int(int_at(buf, (rnd % n as u64) as usize)))
            }
            Repr::Flat(_) => {
                let n = self.len();
                (n > 0).then(|| self.iter().nth((rnd % n as u64) as usize))?
            }
            Repr::Map(m) => m.random(rnd).map(|(k, _)| Member::Bytes(k)),
        }
    }

    /// Removes and returns the member [`random`](Self::random) picks with `rnd` (`None` when
    /// empty).
    pub fn pop_random(&mut self, rnd: u64) -> Option<SmallBytes> {
        if let Repr::Map(m) = &mut self.0 {
            return m.remove_random(rnd).map(|(k, ())| k);
        }
        let m = SmallBytes::from_slice(&self.random(rnd)?);
        self.remove(&m);
        Some(m)
    }

    /// One scan step: a small set gives every member and cursor 0 (as Redis answers an intset);
    /// a map gives a batch of at least `count` in hash order from `cursor`.
    pub fn scan(&self, cursor: u64, count: usize) -> (u64, Vec<Member<'_>>) {
        match &self.0 {
            Repr::Map(m) => {
                let mut keys = Vec::new();
                let next = m.scan(cursor, count, |k, _| keys.push(k.clone()));
                let found = keys
                    .iter()
                    .filter_map(|k| m.get_key_value(&k[..]))
                    .map(|(k, _)| Member::Bytes(k))
                    .collect();
                (next, found)
            }
            _ => (0, self.iter().collect()),
        }
    }

    /// Converts to the packed form (no-op when packed); the caller checks that it fits.
    fn make_packed(&mut self) {
        if matches!(&self.0, Repr::Flat(buf) if !is_ints(buf)) {
            return;
        }
        let mut v = alloc::vec![PACKED];
        for m in self.iter() {
            put_bytes(&mut v, &m);
        }
        self.0 = Repr::Flat(v.into_boxed_slice());
    }

    /// Converts to the map form (no-op when already there).
    fn make_map(&mut self, seed: u64) {
        if self.is_map() {
            return;
        }
        let mut m = PMap::with_seed(seed);
        for x in self.iter() {
            m.insert(SmallBytes::from_slice(&x), ());
        }
        self.0 = Repr::Map(Box::new(m));
    }

    /// Whether the members fit the packed form.
    fn fits_packed(&self) -> bool {
        self.len() <= PACKED_LEN_MAX && self.iter().all(|m| m.len() <= PACKED_MEMBER_MAX)
    }

    /// Puts a new value (loaded, restored) in the form Redis's encoding calls for: the intset
    /// unless `big` (every member must then be an integer), else packed when it fits, else a
    /// map. Existing values never go back to a smaller form.
    pub fn normalize(&mut self, big: bool, seed: u64) {
        if !big && self.iter().all(|m| parse_i64(&m).is_some()) {
            if !self.is_intset() {
                let mut values: Vec<i64> = self.iter().filter_map(|m| parse_i64(&m)).collect();
                values.sort_unstable();
                let w = values.iter().map(|&v| int_width(v)).max().unwrap_or(2);
                self.0 = Repr::Flat(ints_build(w, values.len(), values.into_iter()));
            }
        } else if self.fits_packed() {
            self.make_packed();
        } else {
            self.make_map(seed);
        }
    }

    /// Heap bytes owned (the buffer, or the map's nodes).
    pub fn heap_size(&self) -> usize {
        match &self.0 {
            Repr::Flat(buf) => buf.len(),
            Repr::Map(m) => core::mem::size_of::<SetMap>() + m.heap_size(),
        }
    }

    /// Panics when the structure is inconsistent: an intset whose width is not 2, 4 or 8,
    /// whose values are not strictly ascending or whose length is not whole; a packed buffer
    /// that does not parse, repeats a member or passes the packed limits.
    pub fn check_invariants(&self) {
        match &self.0 {
            Repr::Flat(buf) if is_ints(buf) => {
                if buf.is_empty() {
                    return;
                }
                let w = width_of(buf);
                assert!(matches!(w, 2 | 4 | 8), "intset width {w}");
                assert_eq!((buf.len() - 1) % w, 0, "intset length");
                let n = ints_len(buf);
                assert!(
                    (1..n).all(|i| int_at(buf, i - 1) < int_at(buf, i)),
                    "intset order"
                );
            }
            Repr::Flat(buf) => {
                let all: Vec<&[u8]> = packed_iter(&buf[1..]).collect();
                assert!(all.len() <= PACKED_LEN_MAX, "packed set too long");
                for (i, m) in all.iter().enumerate() {
                    assert!(m.len() <= PACKED_MEMBER_MAX, "packed member too long");
                    assert!(all[..i].iter().all(|o| o != m), "repeated member");
                }
            }
            Repr::Map(m) => m.check_invariants(),
        }
    }
}

impl PartialEq for Set {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().all(|m| other.contains(&m))
    }
}

impl core::fmt::Debug for Set {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match &self.0 {
            Repr::Flat(buf) if is_ints(buf) => "Set::Ints",
            Repr::Flat(_) => "Set::Packed",
            Repr::Map(_) => "Set::Map",
        })?;
        f.debug_set().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    fn members(s: &Set) -> Vec<Vec<u8>> {
        s.iter().map(|m| m.to_vec()).collect()
    }

    #[test]
    fn integers_spell_as_redis_does() {
        for v in [0, 7, -7, 10, 32767, -32768, i64::MAX, i64::MIN] {
            assert_eq!(&*Member::int(v), v.to_string().as_bytes());
        }
    }

    #[test]
    fn intset_stays_sorted_widens_and_never_narrows() {
        let mut s = Set::new();
        for m in ["5", "-3", "100", "5"] {
            s.insert(m.as_bytes(), 512, 1);
        }
        assert_eq!(
            members(&s),
            [b"-3".to_vec(), b"5".to_vec(), b"100".to_vec()]
        );
        assert_eq!(s.heap_size(), 1 + 3 * 2);
        assert!(s.insert(b"70000", 512, 1));
        assert_eq!(s.intset().map(|(w, _)| w), Some(4));
        assert!(s.remove(b"70000"));
        assert!(!s.remove(b"70000"));
        assert_eq!(s.intset().map(|(w, _)| w), Some(4), "no narrowing");
        assert!(s.insert(b"-9223372036854775808", 512, 1));
        assert_eq!(s.intset().map(|(w, _)| w), Some(8));
        assert!(s.contains(b"-9223372036854775808") && !s.contains(b"0"));
        assert!(!s.contains(b"05") && !s.contains(b"x"));
        s.check_invariants();
    }

    #[test]
    fn intset_converts_on_a_string_or_past_its_limit() {
        let mut s = Set::new();
        (0..3).for_each(|i| {
            s.insert(i.to_string().as_bytes(), 3, 1);
        });
        assert!(s.is_intset());
        s.insert(b"3", 3, 1);
        assert!(!s.is_intset() && !s.is_map(), "packed");
        assert_eq!(s.len(), 4);
        let mut t = Set::new();
        t.insert(b"1", 512, 1);
        t.insert(b"+1", 512, 1);
        assert!(!t.is_intset() && t.contains(b"1") && t.contains(b"+1"));
        t.insert(&[b'x'; 65], 512, 1);
        assert!(t.is_map() && t.len() == 3);
        t.check_invariants();
    }

    #[test]
    fn packed_becomes_a_map_past_its_limit_and_clones_are_snapshots() {
        let mut s = Set::new();
        s.insert(b"a", 512, 1);
        let snap = s.clone();
        for i in 1..PACKED_LEN_MAX {
            s.insert(alloc::format!("m{i}").as_bytes(), 512, 1);
        }
        assert!(!s.is_map());
        s.insert(b"one more", 512, 1);
        assert!(s.is_map());
        assert_eq!(s.len(), PACKED_LEN_MAX + 1);
        assert_eq!(members(&snap), [b"a".to_vec()]);
        assert!(s.remove(b"a") && !s.contains(b"a"));
        s.check_invariants();
    }

    #[test]
    fn normalize_picks_the_form_of_the_encoding() {
        let mut s = Set::with_seed(1);
        for m in ["300", "-1", "2"] {
            s.insert(m.as_bytes(), 512, 1);
        }
        let mut small = s.clone();
        small.normalize(false, 1);
        assert!(small.is_intset());
        assert_eq!(
            members(&small),
            [b"-1".to_vec(), b"2".to_vec(), b"300".to_vec()]
        );
        s.normalize(true, 1);
        assert!(!s.is_intset() && !s.is_map());
        assert_eq!(s, small);
        let loaded = Set::from_intset(8, &[1, 2]).unwrap();
        assert_eq!(loaded.intset().map(|(w, _)| w), Some(8));
        assert!(Set::from_intset(2, &[2, 1]).is_none());
        assert!(Set::from_intset(2, &[70000]).is_none());
    }
}
