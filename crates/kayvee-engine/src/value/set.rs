//! `Set`: a set's members, packed while small, a persistent map after.
//!
//! Three forms, each write converting one way (as Redis converts its encodings, never back):
//! - `Ints` while every member is a canonical integer (Redis's `string2ll`) and there are at
//!   most `set-max-intset-entries`. Its state is the values in ascending order and a width
//!   (2, 4 or 8), the narrowest that held every value added (a removal never narrows it, as
//!   Redis's `intset`). `OBJECT ENCODING` answers `intset` for this form and only for it.
//!   It is kept in one of two places, chosen by size alone after every write (so a removal
//!   can bring a heap intset back inline):
//!   - inline, inside the `Set` itself, no allocation, when it fits [`INLINE_CAP`] bytes:
//!     the first value zig-zagged then each value's difference from the one before, all as
//!     LEB128 varints (10 values below 32768 spaced 97 apart take 12 bytes);
//!   - else one exact-size heap buffer: a width byte then the values, little-endian, each in
//!     that width.
//! - `Packed` while there are at most [`PACKED_LEN_MAX`] members of at most
//!   [`PACKED_MEMBER_MAX`] bytes: one exact-size heap buffer, a zero byte then
//!   `varint(len) member` in insertion order, searched linearly (encoding `hashtable`: Redis
//!   7.0 has no listpack sets).
//! - `Map`: a persistent hash trie (`hashtable`).
//!
//! A heap buffer is a `ThinArc` (one pointer; its count and length, 16 bytes, sit in the
//! allocation), so a `Set` is two words and an `Entry` three. Buffers are never written in
//! place: a write builds the new buffer (at most 4 KiB for an intset of 512 8-byte values,
//! 8.3 KiB packed), so clones, snapshots among them, share it in O(1); the map clones in O(1).

use super::flat::{get_bytes, get_varint, put_bytes, put_varint_in};
use crate::util::parse_i64;
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::ops::Deref;
use kayvee_pds::{PMap, SmallBytes};
use triomphe::ThinArc;

/// The persistent map form of a big set.
pub type SetMap = PMap<SmallBytes, ()>;

/// Most members a packed (non-integer) set holds (Redis 7.2's `set-max-listpack-entries`).
pub const PACKED_LEN_MAX: usize = 128;
/// Longest member a packed set holds (Redis 7.2's `set-max-listpack-value`).
pub const PACKED_MEMBER_MAX: usize = 64;
/// Bytes of varints an inline intset holds (so at most this many values).
pub const INLINE_CAP: usize = 14;

/// A set of byte strings.
#[derive(Clone)]
pub struct Set(Repr);

const _: () = assert!(core::mem::size_of::<Set>() == 16);

/// A heap buffer: a thin pointer to a shared, immutable byte slice.
type Heap = ThinArc<(), u8>;

/// The representations.
#[derive(Clone)]
enum Repr {
    /// A small intset inside the value.
    Inline(Inline),
    /// Sorted integers (`intset`: the width byte then the values; never empty, and only when
    /// they do not fit inline), or packed short members in insertion order ([`PACKED`], then
    /// `varint(len) member` each).
    Flat(Heap),
    /// A persistent hash trie.
    Map(Box<SetMap>),
}

/// First byte of a packed buffer (an intset's is its width, 2, 4 or 8).
const PACKED: u8 = 0;

/// Whether a heap buffer is an intset.
#[inline]
fn is_ints(buf: &[u8]) -> bool {
    buf.first() != Some(&PACKED)
}

/// An intset inside the `Set`: `meta` is the width (high four bits) and the bytes of `buf`
/// used (low four); `buf` holds the zig-zagged first value then the differences, as varints.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Inline {
    meta: u8,
    buf: [u8; INLINE_CAP],
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

impl Inline {
    /// The empty intset (width 2).
    const EMPTY: Inline = Inline {
        meta: 2 << 4,
        buf: [0; INLINE_CAP],
    };

    #[inline]
    fn width(&self) -> usize {
        usize::from(self.meta >> 4)
    }

    #[inline]
    fn bytes(&self) -> &[u8] {
        &self.buf[..usize::from(self.meta & 0x0f)]
    }

    /// The number of values (each varint ends with the one byte below 0x80).
    #[inline]
    fn len(&self) -> usize {
        self.bytes().iter().filter(|&&b| b < 0x80).count()
    }

    /// The values, ascending.
    #[inline]
    fn values(&self) -> InlineIter<'_> {
        InlineIter {
            buf: self.bytes(),
            at: 0,
            prev: 0,
        }
    }

    /// `values` (strictly ascending) of `width` inline, or `None` when they do not fit.
    #[inline]
    fn encode(width: usize, values: impl Iterator<Item = i64>) -> Option<Inline> {
        let mut buf = [0u8; INLINE_CAP];
        let mut at = 0;
        let mut prev = None;
        for v in values {
            let u = match prev {
                None => zigzag(v),
                Some(p) => (v as u64).wrapping_sub(p as u64),
            };
            prev = Some(v);
            if !put_varint_in(&mut buf, &mut at, u) {
                return None;
            }
        }
        Some(Inline {
            meta: ((width as u8) << 4) | at as u8,
            buf,
        })
    }
}

/// The values of an inline intset.
#[derive(Clone)]
pub struct InlineIter<'a> {
    buf: &'a [u8],
    at: usize,
    prev: i64,
}

impl Iterator for InlineIter<'_> {
    type Item = i64;
    #[inline]
    fn next(&mut self) -> Option<i64> {
        if self.at >= self.buf.len() {
            return None;
        }
        let first = self.at == 0;
        let u = get_varint(self.buf, &mut self.at) as u64;
        self.prev = if first {
            unzigzag(u)
        } else {
            self.prev.wrapping_add(u as i64)
        };
        Some(self.prev)
    }
}

/// An iterator that knows its length (what `ThinArc` needs to allocate once).
struct Exact<I> {
    it: I,
    left: usize,
}

impl<I: Iterator<Item = u8>> Iterator for Exact<I> {
    type Item = u8;
    #[inline]
    fn next(&mut self) -> Option<u8> {
        let b = self.it.next()?;
        self.left -= 1;
        Some(b)
    }
    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<I: Iterator<Item = u8>> ExactSizeIterator for Exact<I> {}

/// A heap buffer of the `len` bytes `bytes` gives.
fn heap(len: usize, bytes: impl Iterator<Item = u8>) -> Heap {
    ThinArc::from_header_and_iter(
        (),
        Exact {
            it: bytes,
            left: len,
        },
    )
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

/// The width of a heap intset buffer.
#[inline]
fn width_of(buf: &[u8]) -> usize {
    buf.first().map_or(2, |&w| usize::from(w))
}

/// The number of values in a heap intset buffer.
#[inline]
fn ints_len(buf: &[u8]) -> usize {
    buf.len().saturating_sub(1) / width_of(buf)
}

/// The `i`th value of a heap intset buffer.
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

/// Where `v` is in a heap intset buffer, or where it would go.
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

/// The intset of `width` holding the `len` `values` (strictly ascending): inline when they
/// fit, else a heap buffer.
fn ints_store(width: usize, len: usize, values: impl Iterator<Item = i64> + Clone) -> Repr {
    if let Some(s) = Inline::encode(width, values.clone()) {
        return Repr::Inline(s);
    }
    let bytes = values.flat_map(move |v| v.to_le_bytes().into_iter().take(width));
    Repr::Flat(heap(
        1 + width * len,
        core::iter::once(width as u8).chain(bytes),
    ))
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

/// An intset's values, ascending.
#[derive(Clone)]
pub enum IntsIter<'a> {
    /// Inline.
    Inline(InlineIter<'a>),
    /// A heap buffer and the next and end indexes.
    Heap(&'a [u8], usize, usize),
}

impl IntsIter<'_> {
    /// How many values are left.
    fn len(&self) -> usize {
        match self {
            IntsIter::Inline(it) => it.clone().count(),
            IntsIter::Heap(_, i, end) => end - i,
        }
    }

    /// Where `v` is among the values left, or where it would go (a linear walk inline, where
    /// at most [`INLINE_CAP`] bytes hold them; a binary search on the heap).
    fn search(&self, v: i64) -> Result<usize, usize> {
        match self {
            IntsIter::Inline(it) => {
                let mut at = 0;
                for x in it.clone() {
                    match x.cmp(&v) {
                        core::cmp::Ordering::Less => at += 1,
                        core::cmp::Ordering::Equal => return Ok(at),
                        core::cmp::Ordering::Greater => break,
                    }
                }
                Err(at)
            }
            IntsIter::Heap(buf, i, _) => {
                debug_assert_eq!(*i, 0, "searched from the start");
                ints_search(buf, v)
            }
        }
    }
}

impl Iterator for IntsIter<'_> {
    type Item = i64;
    #[inline]
    fn next(&mut self) -> Option<i64> {
        match self {
            IntsIter::Inline(it) => it.next(),
            IntsIter::Heap(buf, i, end) => (*i < *end).then(|| {
                *i += 1;
                int_at(buf, *i - 1)
            }),
        }
    }
}

/// Iterates a set's members: ascending for an intset, insertion order packed, hash order in
/// a map. Lives on the stack for one walk, so the size difference between the variants costs
/// nothing worth an allocation.
#[allow(clippy::large_enum_variant)]
pub enum SetIter<'a> {
    /// Over an intset.
    Ints(IntsIter<'a>),
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
            SetIter::Ints(it) => it.next().map(Member::int),
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
    /// An empty intset (inline: no allocation).
    pub fn new() -> Self {
        Set(Repr::Inline(Inline::EMPTY))
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
        (matches!(width, 2 | 4 | 8) && fits && sorted)
            .then(|| Set(ints_store(width, values.len(), values.iter().copied())))
    }

    /// Whether this is the intset form (`OBJECT ENCODING` `intset`).
    pub fn is_intset(&self) -> bool {
        match &self.0 {
            Repr::Inline(_) => true,
            Repr::Flat(h) => is_ints(&h.slice),
            Repr::Map(_) => false,
        }
    }

    /// Whether this is the map form.
    pub fn is_map(&self) -> bool {
        matches!(self.0, Repr::Map(_))
    }

    /// The intset's width and values, ascending (`None` for the other forms).
    pub fn intset(&self) -> Option<(usize, IntsIter<'_>)> {
        match &self.0 {
            Repr::Inline(s) => Some((s.width(), IntsIter::Inline(s.values()))),
            Repr::Flat(h) if is_ints(&h.slice) => {
                let buf = &h.slice;
                Some((width_of(buf), IntsIter::Heap(buf, 0, ints_len(buf))))
            }
            _ => None,
        }
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Inline(s) => s.len(),
            Repr::Flat(h) if is_ints(&h.slice) => ints_len(&h.slice),
            Repr::Flat(h) => packed_iter(&h.slice[1..]).count(),
            Repr::Map(m) => m.len(),
        }
    }

    /// Whether there is no member.
    pub fn is_empty(&self) -> bool {
        match &self.0 {
            Repr::Inline(s) => s.bytes().is_empty(),
            Repr::Flat(h) => h.slice.len() <= 1,
            Repr::Map(m) => m.is_empty(),
        }
    }

    /// Whether `member` is in the set.
    pub fn contains(&self, member: &[u8]) -> bool {
        match &self.0 {
            Repr::Inline(s) => parse_i64(member)
                .is_some_and(|v| s.values().take_while(|&x| x <= v).any(|x| x == v)),
            Repr::Flat(h) if is_ints(&h.slice) => {
                parse_i64(member).is_some_and(|v| ints_search(&h.slice, v).is_ok())
            }
            Repr::Flat(h) => packed_find(&h.slice[1..], member).is_some(),
            Repr::Map(m) => m.contains_key(member),
        }
    }

    /// Adds `member`; returns whether it is new. An intset becomes packed (or a map) on a
    /// member that is not an integer or past `intset_max` members; a packed set becomes a map
    /// past [`PACKED_LEN_MAX`] members or on a member longer than [`PACKED_MEMBER_MAX`]
    /// (`seed` hashes the map).
    pub fn insert(&mut self, member: &[u8], intset_max: u64, seed: u64) -> bool {
        if let Some((w, ints)) = self.intset() {
            if let Some(v) = parse_i64(member) {
                let n = ints.len();
                match ints.search(v) {
                    Ok(_) => return false,
                    Err(at) if (n as u64) < intset_max => {
                        let values = ints
                            .clone()
                            .take(at)
                            .chain(core::iter::once(v))
                            .chain(ints.skip(at));
                        self.0 = ints_store(w.max(int_width(v)), n + 1, values);
                        return true;
                    }
                    Err(_) => {}
                }
            }
            return self.ints_convert(member, intset_max, seed);
        }
        match &self.0 {
            Repr::Inline(_) => unreachable!("an inline set is an intset"),
            Repr::Flat(h) => {
                let buf = &h.slice;
                if packed_find(&buf[1..], member).is_some() {
                    return false;
                }
                let full = packed_iter(&buf[1..]).count() >= PACKED_LEN_MAX;
                if member.len() > PACKED_MEMBER_MAX || full {
                    self.make_map(seed);
                    return self.insert(member, intset_max, seed);
                }
                debug_assert_eq!(buf.first(), Some(&PACKED));
                // The member's length as a varint, then the member, after the old bytes.
                let (mut head, mut hl) = ([0u8; 10], 0);
                put_varint_in(&mut head, &mut hl, member.len() as u64);
                let len = buf.len() + hl + member.len();
                let bytes = buf.iter().chain(&head[..hl]).chain(member).copied();
                self.0 = Repr::Flat(heap(len, bytes));
                true
            }
            Repr::Map(_) => {
                let Repr::Map(m) = &mut self.0 else {
                    unreachable!()
                };
                if m.contains_key(member) {
                    return false;
                }
                m.insert(SmallBytes::from_slice(member), ());
                true
            }
        }
    }

    /// Adds `member`, which the intset cannot take, after converting: packed when one more
    /// member fits (the packed insert checks its length), else a map.
    fn ints_convert(&mut self, member: &[u8], intset_max: u64, seed: u64) -> bool {
        if self.len() < PACKED_LEN_MAX {
            self.make_packed();
        } else {
            self.make_map(seed);
        }
        self.insert(member, intset_max, seed)
    }

    /// Removes `member`; returns whether it was present. An intset keeps its width, and goes
    /// back inline when what is left fits.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        if let Some((w, ints)) = self.intset() {
            let Some(at) = parse_i64(member).and_then(|v| ints.search(v).ok()) else {
                return false;
            };
            let n = ints.len();
            let values = ints
                .enumerate()
                .filter(move |&(i, _)| i != at)
                .map(|(_, v)| v);
            self.0 = ints_store(w, n - 1, values);
            return true;
        }
        match &mut self.0 {
            Repr::Inline(_) => unreachable!("an inline set is an intset"),
            Repr::Flat(h) => match packed_find(&h.slice[1..], member) {
                Some((from, to)) => {
                    let buf = &h.slice;
                    let len = buf.len() - (to - from);
                    let bytes = buf[..from + 1].iter().chain(&buf[to + 1..]).copied();
                    self.0 = Repr::Flat(heap(len, bytes));
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
            Repr::Inline(s) => SetIter::Ints(IntsIter::Inline(s.values())),
            Repr::Flat(h) if is_ints(&h.slice) => {
                SetIter::Ints(IntsIter::Heap(&h.slice, 0, ints_len(&h.slice)))
            }
            Repr::Flat(h) => SetIter::Packed(&h.slice[1..], 0),
            Repr::Map(m) => SetIter::Map(m.iter()),
        }
    }

    /// The member `rnd` picks, uniformly (`None` when empty).
    pub fn random(&self, rnd: u64) -> Option<Member<'_>> {
        match &self.0 {
            Repr::Flat(h) if is_ints(&h.slice) => {
                let n = ints_len(&h.slice);
                (n > 0).then(|| Member::int(int_at(&h.slice, (rnd % n as u64) as usize)))
            }
            Repr::Inline(_) | Repr::Flat(_) => {
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
        if matches!(&self.0, Repr::Flat(h) if !is_ints(&h.slice)) {
            return;
        }
        let mut v = alloc::vec![PACKED];
        for m in self.iter() {
            put_bytes(&mut v, &m);
        }
        self.0 = Repr::Flat(heap(v.len(), v.into_iter()));
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
                self.0 = ints_store(w, values.len(), values.into_iter());
            }
        } else if self.fits_packed() {
            self.make_packed();
        } else {
            self.make_map(seed);
        }
    }

    /// Heap bytes owned: none inline; a heap buffer with its count and length (16 bytes);
    /// the map's nodes.
    pub fn heap_size(&self) -> usize {
        match &self.0 {
            Repr::Inline(_) => 0,
            Repr::Flat(h) => 2 * core::mem::size_of::<usize>() + h.slice.len(),
            Repr::Map(m) => core::mem::size_of::<SetMap>() + m.heap_size(),
        }
    }

    /// Panics when the structure is inconsistent: an intset whose width is not 2, 4 or 8 or
    /// narrower than a value, whose values are not strictly ascending, whose heap length is
    /// not whole, that is on the heap while it fits inline or whose inline varints are not
    /// the canonical ones; a packed buffer that does not parse, repeats a member or passes
    /// the packed limits.
    pub fn check_invariants(&self) {
        match &self.0 {
            Repr::Inline(s) => {
                let w = s.width();
                assert!(matches!(w, 2 | 4 | 8), "intset width {w}");
                assert!(s.bytes().len() <= INLINE_CAP, "inline length");
                assert!(s.bytes().last().is_none_or(|&b| b < 0x80), "inline varint");
                let values: Vec<i64> = s.values().collect();
                assert!(values.windows(2).all(|p| p[0] < p[1]), "intset order");
                assert!(values.iter().all(|&v| int_width(v) <= w), "intset width");
                assert!(
                    Inline::encode(w, values.iter().copied()) == Some(*s),
                    "inline encoding"
                );
            }
            Repr::Flat(h) if is_ints(&h.slice) => {
                let buf = &h.slice;
                let w = width_of(buf);
                assert!(matches!(w, 2 | 4 | 8), "intset width {w}");
                assert_eq!((buf.len() - 1) % w, 0, "intset length");
                let n = ints_len(buf);
                assert!(n > 0, "empty heap intset");
                assert!(
                    (1..n).all(|i| int_at(buf, i - 1) < int_at(buf, i)),
                    "intset order"
                );
                let values = (0..n).map(|i| int_at(buf, i));
                assert!(
                    Inline::encode(w, values).is_none(),
                    "heap intset fits inline"
                );
            }
            Repr::Flat(h) => {
                let all: Vec<&[u8]> = packed_iter(&h.slice[1..]).collect();
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
            Repr::Inline(_) => "Set::Ints",
            Repr::Flat(h) if is_ints(&h.slice) => "Set::Ints",
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
        assert_eq!(s.heap_size(), 0, "inline");
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
    fn is_inline(s: &Set) -> bool {
        matches!(s.0, Repr::Inline(_))
    }

    fn ints(s: &Set) -> Option<(usize, Vec<i64>)> {
        s.intset().map(|(w, it)| (w, it.collect()))
    }

    /// The same intset on the heap, whatever its size (the form before inline intsets).
    fn on_heap(s: &Set) -> Set {
        let (w, values) = ints(s).unwrap();
        let bytes = values
            .iter()
            .flat_map(|v| v.to_le_bytes().into_iter().take(w));
        let buf: Vec<u8> = core::iter::once(w as u8).chain(bytes).collect();
        Set(Repr::Flat(heap(buf.len(), buf.into_iter())))
    }

    #[test]
    fn a_set_is_two_words() {
        assert_eq!(core::mem::size_of::<Set>(), 16);
        assert!(is_inline(&Set::new()) && Set::new().is_empty());
    }

    #[test]
    fn small_intsets_live_inline_and_cross_to_the_heap_and_back() {
        // Ten values below 32768 spaced 97 apart: 3 bytes then nine 1-byte differences.
        let mut s = Set::new();
        for j in 0..10 {
            s.insert((20_000 + j * 97).to_string().as_bytes(), 512, 1);
        }
        assert!(is_inline(&s) && s.heap_size() == 0 && s.len() == 10);
        let mut model = alloc::collections::BTreeSet::new();
        let mut s = Set::new();
        let mut was_heap = false;
        // Growing: inline until the varints pass 14 bytes, then the heap.
        for i in 0..40i64 {
            let v = (i * 7919) % 1000 - 500;
            assert_eq!(s.insert(v.to_string().as_bytes(), 512, 1), model.insert(v));
            s.check_invariants();
            assert!(s.is_intset());
            assert_eq!(
                ints(&s).unwrap().1,
                model.iter().copied().collect::<Vec<_>>()
            );
            was_heap |= !is_inline(&s);
        }
        assert!(was_heap && !is_inline(&s));
        let heap_width = ints(&s).unwrap().0;
        // Shrinking: back inline once it fits, at the same width.
        let all: Vec<i64> = model.iter().copied().collect();
        for v in all {
            assert!(s.remove(v.to_string().as_bytes()));
            assert!(!s.remove(v.to_string().as_bytes()));
            model.remove(&v);
            s.check_invariants();
            assert_eq!(
                ints(&s).unwrap(),
                (heap_width, model.iter().copied().collect())
            );
            assert_eq!(s.len(), model.len());
        }
        assert!(is_inline(&s) && s.is_empty() && s.is_intset());
    }

    #[test]
    fn inline_intsets_take_negative_and_extreme_values() {
        for values in [
            &[i64::MIN][..],
            &[i64::MAX],
            &[-1, 0, 1],
            &[i64::MIN, -1],
            &[i64::MIN, i64::MAX],
            &[-300, -5, 7, 70000, 1 << 40],
        ] {
            let mut s = Set::new();
            for v in values.iter().rev() {
                assert!(s.insert(v.to_string().as_bytes(), 512, 1));
            }
            s.check_invariants();
            let w = values.iter().map(|&v| int_width(v)).max().unwrap();
            assert_eq!(ints(&s), Some((w, values.to_vec())));
            for v in values {
                assert!(s.contains(v.to_string().as_bytes()));
            }
            assert!(!s.contains(b"2") && !s.contains(b"-2"));
            let expected: Vec<Vec<u8>> =
                values.iter().map(|v| v.to_string().into_bytes()).collect();
            assert_eq!(members(&s), expected);
            assert_eq!(
                Set::from_intset(w, values).map(|l| ints(&l)),
                Some(ints(&s))
            );
        }
        // One extreme value alone fits (10 bytes); both extremes do not (20).
        let mut s = Set::new();
        s.insert(b"-9223372036854775808", 512, 1);
        assert!(is_inline(&s));
        s.insert(b"9223372036854775807", 512, 1);
        assert!(!is_inline(&s));
        assert!(s.remove(b"9223372036854775807") && is_inline(&s));
        assert_eq!(ints(&s), Some((8, alloc::vec![i64::MIN])));
    }

    #[test]
    fn inline_width_survives_removals_and_loads() {
        let mut s = Set::new();
        for v in ["1", "2", "70000"] {
            s.insert(v.as_bytes(), 512, 1);
        }
        assert!(is_inline(&s));
        assert!(s.remove(b"70000"));
        assert_eq!(ints(&s), Some((4, alloc::vec![1, 2])));
        assert!(s.remove(b"1") && s.remove(b"2") && s.is_empty());
        assert_eq!(ints(&s), Some((4, alloc::vec![])), "empty, still 4 wide");
        s.insert(b"3", 512, 1);
        assert_eq!(ints(&s), Some((4, alloc::vec![3])));
        let loaded = Set::from_intset(8, &[5]).unwrap();
        assert!(is_inline(&loaded));
        assert_eq!(ints(&loaded), Some((8, alloc::vec![5])));
        s.check_invariants();
        loaded.check_invariants();
    }

    #[test]
    fn inline_and_heap_forms_give_the_same_intset() {
        let mut s = Set::new();
        for v in [-7, 0, 12, 300, 70000] {
            s.insert(v.to_string().as_bytes(), 512, 1);
        }
        assert!(is_inline(&s));
        let h = on_heap(&s);
        assert!(!is_inline(&h) && h.is_intset());
        // What DUMP and the RDB writer read: width and values.
        assert_eq!(ints(&s), ints(&h));
        assert_eq!(members(&s), members(&h));
        assert_eq!(s, h);
        for r in 0..10 {
            assert_eq!(
                s.random(r).map(|m| m.to_vec()),
                h.random(r).map(|m| m.to_vec())
            );
        }
        let (mut a, mut b) = (s.clone(), h.clone());
        assert_eq!(a.pop_random(3), b.pop_random(3));
        assert_eq!(ints(&a), ints(&b));
        // Both convert to the same packed set on a string member.
        a.insert(b"x", 512, 1);
        b.insert(b"x", 512, 1);
        assert!(!a.is_intset() && members(&a) == members(&b));
        a.check_invariants();
    }

    #[test]
    fn packed_buffers_are_shared_by_clones_and_rebuilt_on_writes() {
        let mut s = Set::new();
        for m in ["a", "bb", "ccc"] {
            s.insert(m.as_bytes(), 512, 1);
        }
        let snap = s.clone();
        assert!(s.remove(b"bb") && !s.remove(b"bb"));
        s.insert(&[b'y'; 64], 512, 1);
        assert_eq!(
            members(&snap),
            [b"a".to_vec(), b"bb".to_vec(), b"ccc".to_vec()]
        );
        assert_eq!(
            members(&s),
            [b"a".to_vec(), b"ccc".to_vec(), alloc::vec![b'y'; 64]]
        );
        assert_eq!(s.heap_size(), 16 + 1 + 2 + 4 + 65);
        s.check_invariants();
    }
}
