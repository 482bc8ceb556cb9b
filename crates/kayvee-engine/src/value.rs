//! Values stored under keys, and the per-key metadata kept beside them.
//!
//! Every variant is a persistent structure, a small immutable string, or a small flat buffer
//! (hashes and sorted sets within Redis's listpack limits, sets within the intset or packed
//! limits, lists within one listpack node: see `value/hash.rs`, `value/zset.rs`,
//! `value/set.rs`, `value/list.rs`): cloning a `Value` is O(1) or copies at most that bounded
//! buffer, and a clone is a snapshot.

mod flat;
mod hash;
mod list;
mod set;
pub mod stream;
pub mod usage;
mod zset;

pub use hash::{Hash, HashIter};
pub use list::{List, ListTree, DEFAULT_FILL as LIST_DEFAULT_FILL};
pub use set::{Member, Set, SetIter, SetMap};
pub use stream::{Stream, StreamId};
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
    /// The name `TYPE` answers.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::List(_) => "list",
            Value::Hash(_) => "hash",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
            Value::Stream(_) => "stream",
        }
    }

    /// Puts a collection in the representation its encoding calls for: the compact (flat)
    /// form while `big` is false, the persistent form once it is (`seed` hashes the maps).
    /// Called wherever [`Meta::BIG`] is decided, so "flat" and "not BIG" go together; turning
    /// flat again only happens to new values (Redis never converts back). A set is an intset
    /// unless `big`, then packed while it fits; a list is packed while it fits one node of the
    /// default size.
    pub fn normalize(&mut self, big: bool, seed: u64) {
        match self {
            Value::Hash(h) if big => h.make_big(seed),
            Value::Hash(h) => h.make_flat(),
            Value::ZSet(z) if big => z.make_big(seed),
            Value::ZSet(z) => z.make_flat(),
            Value::Set(s) => s.normalize(big, seed),
            Value::List(l) => l.normalize(LIST_DEFAULT_FILL),
            Value::Str(_) | Value::Stream(_) => {}
        }
    }

    /// The name `OBJECT ENCODING` answers, as Redis 7.0 would for the same history: strings
    /// are `int` when they read as an i64 (20 bytes at most), `embstr` up to 44 bytes, `raw`
    /// beyond, or after an in-place change ([`Meta::RAW`]); INCRBYFLOAT results are never
    /// `int` ([`Meta::EMBSTR`]).
    pub fn encoding(&self, meta: &Meta) -> &'static str {
        match self {
            Value::Str(s) => {
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
            Value::List(_) => "quicklist",
            Value::Hash(_) if meta.has(Meta::BIG) => "hashtable",
            Value::Hash(_) => "listpack",
            Value::Set(s) if s.is_intset() => "intset",
            Value::Set(_) => "hashtable",
            Value::ZSet(_) if meta.has(Meta::BIG) => "skiplist",
            Value::ZSet(_) => "listpack",
            Value::Stream(_) => "stream",
        }
    }
}

/// Per-key metadata, kept in the entry beside the value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Meta {
    /// Last access time in seconds (low 32 bits of the unix time), for `OBJECT IDLETIME`.
    pub access_s: u32,
    /// Bit flags, see the associated constants.
    pub flags: u8,
    /// Logarithmic access counter (Redis's LFU counter) for `OBJECT FREQ`.
    pub freq: u8,
    /// When the LFU counter was last updated, in unix minutes (low 16 bits, Redis's LFU
    /// "decrement time"): the counter decays by one per `lfu-decay-time` minutes since.
    pub ldt_min: u16,
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

/// What the keyspace stores under a key.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// The value.
    pub value: Value,
    /// Its metadata.
    pub meta: Meta,
}

impl Entry {
    /// A fresh entry (no TTL, accessed now).
    pub fn new(value: Value, now_ms: u64) -> Self {
        Entry {
            value,
            meta: Meta {
                access_s: (now_ms / 1000) as u32,
                flags: 0,
                freq: LFU_INIT_VAL,
                ldt_min: minutes(now_ms),
            },
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
    /// for them.
    #[test]
    fn value_is_as_small_as_a_string() {
        assert_eq!(core::mem::size_of::<Value>(), 24);
        assert_eq!(core::mem::size_of::<Entry>(), 32);
        assert_eq!(core::mem::size_of::<Meta>(), 8);
    }
}
