//! Values stored under keys, and the per-key metadata kept beside them.
//!
//! Every variant is a persistent structure, a small immutable string, or a small flat buffer
//! (hashes and sorted sets within Redis's listpack limits, sets within the intset or packed
//! limits, lists within one listpack node: see `value/hash.rs`, `value/zset.rs`,
//! `value/set.rs`, `value/list.rs`): cloning a `Value` is O(1) or copies at most that bounded
//! buffer, and a clone is a snapshot.

mod entry;
mod flat;
mod hash;
mod list;
mod set;
mod split;
pub mod stream;
pub mod usage;
mod zset;

pub use entry::{Entry, ENTRY_INLINE_MAX};
pub use hash::{Hash, HashIter};
pub use list::{List, ListTree, DEFAULT_FILL as LIST_DEFAULT_FILL};
pub use set::{InlineIter, IntsIter, Member, Set, SetIter, SetMap};
pub use split::Split;
pub use stream::{Stream, StreamId};

/// The error a command answers for a value restored with `sanitize-dump-payload no` that is
/// not whole ([`Stream::corrupt`], [`Hash::corrupt`]): where Redis reads it and may crash on
/// an assertion, Kayvee reads none of it.
pub const CORRUPT_VALUE: &str = "ERR The value at this key is corrupt (restored with sanitize-dump-payload no); it can only be deleted, dumped or renamed";
pub use zset::{cmp_scored, ScoreMember, ZRef, ZSet, ZTree};

use alloc::boxed::Box;
use kayvee_pds::SmallBytes;

/// Counter a new key starts with (Redis's `LFU_INIT_VAL`): new keys are not evicted at once.
pub const LFU_INIT_VAL: u8 = 5;

/// The LFU clock: unix minutes, low 16 bits (as Redis's `LFUGetTimeInMinutes`).
pub fn minutes(now_ms: u64) -> u16 {
    ((now_ms / 60_000) & 0xFFFF) as u16
}

/// A key (and a member, a field, a channel name): a byte string, inline when short.
pub type Key = SmallBytes;

/// A stored value. Collections are one pointer (a small one's buffer, or a boxed persistent
/// structure) so a `Value` stays as small as a string's (the keyspace holds one per key);
/// cloning one is O(1) or copies a bounded buffer, and is a snapshot.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A string (Redis encodings `int`, `embstr` or `raw`, see [`Meta::RAW`]).
    Str(SmallBytes),
    /// A list (encoding `quicklist`, as Redis 7.0 reports for every list; packed while it
    /// fits one listpack node).
    List(List),
    /// A hash (`listpack` while small, `hashtable` once [`Meta::BIG`]).
    Hash(Hash),
    /// A set (`intset` while small and all integers, `hashtable` after; packed while small).
    Set(Set),
    /// A sorted set (`listpack` while small, `skiplist` once [`Meta::BIG`]).
    ZSet(ZSet),
    /// A stream (encoding `stream`).
    Stream(Box<Stream>),
}

impl Value {
    /// Puts a collection in the representation its encoding calls for: the compact (flat)
    /// form while `big` is false, the persistent form once it is (`seed` hashes the maps).
    /// Called wherever [`Meta::BIG`] is decided, so "flat" and "not BIG" go together; turning
    /// flat again only happens to new values (Redis never converts back). A set is an intset
    /// unless `big`, then packed while it fits; a list is packed while it fits one node of the
    /// default size.
    pub fn normalize(&mut self, big: bool, seed: u64) {
        self.view_mut().normalize(big, seed)
    }

    /// The name `OBJECT ENCODING` answers, as Redis 7.0 would for the same history: strings
    /// are `int` when they read as an i64 (20 bytes at most), `embstr` up to 44 bytes, `raw`
    /// beyond, or after an in-place change ([`Meta::RAW`]); INCRBYFLOAT results are never
    /// `int` ([`Meta::EMBSTR`]).
    pub fn encoding(&self, meta: &Meta) -> &'static str {
        self.view().encoding(meta)
    }

    /// The name `TYPE` answers.
    pub fn type_name(&self) -> &'static str {
        self.view().type_name()
    }
}

/// Per-key metadata, 4 bytes kept inside the entry: one 24-bit clock and the flags. As
/// Redis's `robj` keeps one `lru` field, the clock means what the `maxmemory-policy` asks for:
/// the last access in seconds (low 24 bits, Redis's `LRU_CLOCK`) under an LRU or any other
/// policy, or under an LFU one the last decrement time in minutes (low 16 bits) above a
/// logarithmic access counter (8 bits). A policy change reinterprets the clock, as in Redis
/// ("LRU and LFU data will take some time to adjust"). Bytes, not a `u32`, so the 1-aligned
/// field packs right after an entry's tag.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Meta {
    /// The clock, little-endian.
    clock: [u8; 3],
    /// Bit flags, see the associated constants.
    pub flags: u8,
}

/// The LRU clock's range: seconds, 24 bits (Redis's `LRU_CLOCK_MAX`).
pub const LRU_CLOCK_MAX: u32 = (1 << 24) - 1;

/// The LRU clock at `now_ms`: unix seconds, low 24 bits (Redis's `LRU_CLOCK`).
pub fn lru_clock(now_ms: u64) -> u32 {
    ((now_ms / 1000) as u32) & LRU_CLOCK_MAX
}

impl Meta {
    /// The key has a time to live (an entry in the database's `expires` map).
    pub const HAS_EXPIRE: u8 = 1;
    /// The string was modified in place (APPEND, SETRANGE, SETBIT...), so Redis would report
    /// encoding `raw` even when short.
    pub const RAW: u8 = 2;
    /// The string was built from a float (INCRBYFLOAT): Redis stores it as `embstr` (or `raw`
    /// when long) even when it reads as an integer.
    pub const EMBSTR: u8 = 4;
    /// A collection was converted to its big encoding (`hashtable`, `skiplist`): Redis never
    /// converts back, so the flag is sticky for the value's life (a new value starts without).
    /// A set's form says the same ([`Set::is_intset`]); the set commands keep both in step.
    pub const BIG: u8 = 8;

    /// A new key's metadata (no flags): accessed now under an LRU policy (`lfu` false), or
    /// under an LFU one decremented now with the initial counter (Redis's `createObject`).
    pub fn fresh(lfu: bool, now_ms: u64) -> Meta {
        let mut m = Meta::default();
        if lfu {
            m.set_lfu(LFU_INIT_VAL, minutes(now_ms));
        } else {
            m.set_clock(lru_clock(now_ms));
        }
        m
    }

    /// The raw 24-bit clock (what DEBUG OBJECT shows as `lru`).
    #[inline]
    pub fn clock(&self) -> u32 {
        u32::from_le_bytes([self.clock[0], self.clock[1], self.clock[2], 0])
    }

    /// Sets the raw clock (its low 24 bits).
    #[inline]
    pub fn set_clock(&mut self, clock: u32) {
        let b = clock.to_le_bytes();
        self.clock = [b[0], b[1], b[2]];
    }

    /// Seconds since the last access on the LRU clock (Redis's `estimateObjectIdleTime`,
    /// wrapping once).
    pub fn idle_s(&self, now_ms: u64) -> u64 {
        let (now, then) = (lru_clock(now_ms), self.clock());
        u64::from(if now >= then {
            now - then
        } else {
            now + (LRU_CLOCK_MAX - then)
        })
    }

    /// Sets the LRU clock `idle_s` seconds before `now_ms` (RESTORE IDLETIME, an RDB `IDLE`).
    pub fn set_idle_s(&mut self, idle_s: u64, now_ms: u64) {
        let now = u64::from(lru_clock(now_ms));
        let idle = idle_s % (u64::from(LRU_CLOCK_MAX) + 1);
        let at = if idle <= now {
            now - idle
        } else {
            now + u64::from(LRU_CLOCK_MAX) - idle
        };
        self.set_clock(at as u32);
    }

    /// Sets the clock from a saved idle time or counter (RESTORE's IDLETIME / FREQ, an RDB's
    /// `IDLE` / `FREQ`), as Redis's `objectSetLRUOrLFU`: only the one the policy keeps (the
    /// counter under an LFU policy, `lfu`, the idle time under another) counts; without it
    /// the clock is left as it is.
    pub fn set_saved_clock(
        &mut self,
        lfu: bool,
        idle_s: Option<u64>,
        freq: Option<u8>,
        now_ms: u64,
    ) {
        match (lfu, idle_s, freq) {
            (true, _, Some(f)) => self.set_lfu(f, minutes(now_ms)),
            (false, Some(idle), _) => self.set_idle_s(idle, now_ms),
            _ => {}
        }
    }

    /// The LFU counter (the clock's low 8 bits).
    #[inline]
    pub fn freq(&self) -> u8 {
        self.clock[0]
    }

    /// The LFU decrement time in minutes (the clock's high 16 bits).
    #[inline]
    pub fn ldt_min(&self) -> u16 {
        u16::from_le_bytes([self.clock[1], self.clock[2]])
    }

    /// Sets the LFU counter and decrement time.
    #[inline]
    pub fn set_lfu(&mut self, freq: u8, ldt_min: u16) {
        let t = ldt_min.to_le_bytes();
        self.clock = [freq, t[0], t[1]];
    }

    /// Whether a flag is set.
    #[inline]
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    /// Sets or clears a flag.
    #[inline]
    pub fn set_flag(&mut self, flag: u8, on: bool) {
        if on {
            self.flags |= flag;
        } else {
            self.flags &= !flag;
        }
    }
}

/// A stored value, borrowed from an [`Entry`] (or a [`Value`], [`Value::view`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ValueRef<'a> {
    /// A string's bytes.
    Str(&'a [u8]),
    /// A list.
    List(&'a List),
    /// A hash.
    Hash(&'a Hash),
    /// A set.
    Set(&'a Set),
    /// A sorted set.
    ZSet(&'a ZSet),
    /// A stream.
    Stream(&'a Stream),
}

/// A stored value, mutably borrowed from an [`Entry`]. Strings are immutable: they are
/// replaced whole ([`Entry::set_value`], [`Entry::take_str`]).
#[derive(Debug)]
pub enum ValueMut<'a> {
    /// A string (see above).
    Str,
    /// A list.
    List(&'a mut List),
    /// A hash.
    Hash(&'a mut Hash),
    /// A set.
    Set(&'a mut Set),
    /// A sorted set.
    ZSet(&'a mut ZSet),
    /// A stream.
    Stream(&'a mut Stream),
}

impl Value {
    /// The value borrowed as an entry lends it.
    #[inline]
    pub fn view(&self) -> ValueRef<'_> {
        match self {
            Value::Str(s) => ValueRef::Str(s),
            Value::List(l) => ValueRef::List(l),
            Value::Hash(h) => ValueRef::Hash(h),
            Value::Set(s) => ValueRef::Set(s),
            Value::ZSet(z) => ValueRef::ZSet(z),
            Value::Stream(s) => ValueRef::Stream(s),
        }
    }

    /// The value mutably borrowed as an entry lends it.
    #[inline]
    pub fn view_mut(&mut self) -> ValueMut<'_> {
        match self {
            Value::Str(_) => ValueMut::Str,
            Value::List(l) => ValueMut::List(l),
            Value::Hash(h) => ValueMut::Hash(h),
            Value::Set(s) => ValueMut::Set(s),
            Value::ZSet(z) => ValueMut::ZSet(z),
            Value::Stream(s) => ValueMut::Stream(s),
        }
    }
}

impl<'a> ValueRef<'a> {
    /// The name `TYPE` answers.
    pub fn type_name(self) -> &'static str {
        match self {
            ValueRef::Str(_) => "string",
            ValueRef::List(_) => "list",
            ValueRef::Hash(_) => "hash",
            ValueRef::Set(_) => "set",
            ValueRef::ZSet(_) => "zset",
            ValueRef::Stream(_) => "stream",
        }
    }

    /// An owned copy (O(1) or a bounded buffer copy, as [`Value`]'s clone).
    pub fn to_value(self) -> Value {
        match self {
            ValueRef::Str(s) => Value::Str(SmallBytes::from_slice(s)),
            ValueRef::List(l) => Value::List(l.clone()),
            ValueRef::Hash(h) => Value::Hash(h.clone()),
            ValueRef::Set(s) => Value::Set(s.clone()),
            ValueRef::ZSet(z) => Value::ZSet(z.clone()),
            ValueRef::Stream(s) => Value::Stream(Box::new(s.clone())),
        }
    }

    /// The name `OBJECT ENCODING` answers (see [`Value::encoding`]).
    pub fn encoding(self, meta: &Meta) -> &'static str {
        match self {
            ValueRef::Str(s) => {
                if meta.has(Meta::RAW) || s.len() > 44 {
                    "raw"
                } else if !meta.has(Meta::EMBSTR)
                    && s.len() <= 20
                    && crate::util::parse_i64(s).is_some()
                {
                    "int"
                } else {
                    "embstr"
                }
            }
            ValueRef::List(_) => "quicklist",
            ValueRef::Hash(_) if meta.has(Meta::BIG) => "hashtable",
            ValueRef::Hash(_) => "listpack",
            ValueRef::Set(s) if s.is_intset() => "intset",
            ValueRef::Set(_) => "hashtable",
            ValueRef::ZSet(_) if meta.has(Meta::BIG) => "skiplist",
            ValueRef::ZSet(_) => "listpack",
            ValueRef::Stream(_) => "stream",
        }
    }
}

impl ValueMut<'_> {
    /// See [`Value::normalize`].
    pub fn normalize(self, big: bool, seed: u64) {
        match self {
            ValueMut::Hash(h) if big => h.make_big(seed),
            ValueMut::Hash(h) => h.make_flat(),
            ValueMut::ZSet(z) if big => z.make_big(seed),
            ValueMut::ZSet(z) => z.make_flat(),
            ValueMut::Set(s) => s.normalize(big, seed),
            ValueMut::List(l) => l.normalize(LIST_DEFAULT_FILL),
            ValueMut::Str | ValueMut::Stream(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(s: &str, flags: u8) -> &'static str {
        let meta = Meta {
            flags,
            ..Meta::default()
        };
        Value::Str(SmallBytes::from(s)).encoding(&meta)
    }

    #[test]
    fn one_clock_serves_lru_or_lfu() {
        let mut m = Meta::fresh(true, 61_000 * 60);
        assert_eq!((m.freq(), m.ldt_min()), (LFU_INIT_VAL, 61));
        m.set_lfu(200, 65_535);
        assert_eq!((m.freq(), m.ldt_min()), (200, 65_535));
        let now_ms = 1_700_000_000_000;
        let mut m = Meta::fresh(false, now_ms);
        assert_eq!(m.clock(), lru_clock(now_ms));
        assert_eq!(m.idle_s(now_ms + 5_000), 5);
        m.set_idle_s(100, now_ms);
        assert_eq!(m.idle_s(now_ms), 100);
        // Wrapping: a clock just below the top, read just after the wrap.
        m.set_clock(LRU_CLOCK_MAX - 1);
        assert_eq!(m.idle_s(u64::from(LRU_CLOCK_MAX + 1 + 3) * 1000), 4);
        m.set_flag(Meta::BIG, true);
        assert_eq!(m.clock(), LRU_CLOCK_MAX - 1, "flags leave the clock alone");
    }

    #[test]
    fn string_encodings_follow_redis() {
        assert_eq!(enc("123", 0), "int");
        assert_eq!(enc("-9223372036854775808", 0), "int");
        assert_eq!(enc("12345678901234567890", 0), "embstr"); // overflows i64
        assert_eq!(enc("09", 0), "embstr");
        assert_eq!(enc("+1", 0), "embstr");
        assert_eq!(enc(&"x".repeat(44), 0), "embstr");
        assert_eq!(enc(&"x".repeat(45), 0), "raw");
        assert_eq!(enc("123", Meta::RAW), "raw");
        assert_eq!(enc("3001", Meta::EMBSTR), "embstr");
        assert_eq!(enc(&"1".repeat(45), Meta::EMBSTR), "raw");
    }
}

#[cfg(test)]
mod size_tests {
    use super::*;

    /// The keyspace stores one `Entry` per key: collections are boxed so strings pay nothing
    /// for them, and the metadata sits in the bytes a `Value` leaves free.
    #[test]
    fn entry_is_as_small_as_a_value() {
        assert_eq!(core::mem::size_of::<Value>(), 24);
        assert_eq!(core::mem::size_of::<Entry>(), 24);
        assert_eq!(core::mem::size_of::<Meta>(), 4);
        assert_eq!(core::mem::align_of::<Meta>(), 1);
    }
}
