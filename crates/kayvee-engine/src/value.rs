//! Values stored under keys, and the per-key metadata kept beside them.
//!
//! Every variant is a persistent structure (or a small immutable string): cloning a `Value` is
//! cheap and a clone is a snapshot.

use alloc::boxed::Box;
use kayvee_pds::{PList, PMap, POrdSet, SmallBytes};

/// A list's elements, head first.
pub type List = PList<SmallBytes>;
/// A hash: field to value.
pub type Hash = PMap<SmallBytes, SmallBytes>;
/// A set's members.
pub type Set = PMap<SmallBytes, ()>;

/// A sorted set: member to score, and the (score, member) order with ranks.
#[derive(Clone, Debug, PartialEq)]
pub struct ZSet {
    /// Member to score.
    pub scores: PMap<SmallBytes, f64>,
    /// Members ordered by (score, member), with rank queries.
    pub order: POrdSet<ScoreMember>,
}

impl ZSet {
    /// An empty sorted set whose member map hashes with `seed`.
    pub fn new(seed: u64) -> Self {
        ZSet {
            scores: PMap::with_seed(seed),
            order: POrdSet::new(),
        }
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.scores.len()
    }

    /// Whether there is no member.
    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    /// A member's score.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.scores.get(member).copied()
    }

    /// Sets a member's score (adding it when new); returns the previous score.
    pub fn insert(&mut self, member: &[u8], score: f64) -> Option<f64> {
        let key = SmallBytes::from_slice(member);
        let old = self.scores.insert(key.clone(), score);
        if let Some(o) = old {
            self.order.remove(&ScoreMember(o, key.clone()));
        }
        self.order.insert(ScoreMember(score, key));
        old
    }

    /// Removes a member; returns its score.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let (key, score) = self.scores.remove(member)?;
        self.order.remove(&ScoreMember(score, key));
        Some(score)
    }

    /// Removes the members with ranks `lo..hi` (clamped); returns how many.
    pub fn remove_rank_range(&mut self, lo: usize, hi: usize) -> usize {
        let gone: alloc::vec::Vec<SmallBytes> = self
            .order
            .range_by_rank(lo, hi)
            .map(|e| e.1.clone())
            .collect();
        for m in &gone {
            self.scores.remove(&m[..]);
        }
        self.order.remove_range_by_rank(lo, hi)
    }

    /// Members in (score, member) order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &ScoreMember> + ExactSizeIterator {
        self.order.iter()
    }

    /// Panics when the member map and the order disagree.
    pub fn check_invariants(&self) {
        self.order.check_invariants();
        assert_eq!(
            self.order.len(),
            self.scores.len(),
            "map and order sizes differ"
        );
        for e in self.order.iter() {
            let s = self
                .scores
                .get(&e.1[..])
                .expect("ordered member missing from map");
            assert!(
                s.to_bits() == e.0.to_bits(),
                "score differs between map and order"
            );
            assert!(!s.is_nan(), "NaN score");
        }
    }
}

/// A sorted-set element in Redis's order: by score, then by member bytes. Scores are never NaN,
/// and `-0.0` equals `0.0` here as in Redis's comparisons (the stored score keeps its sign).
#[derive(Clone, Debug)]
pub struct ScoreMember(pub f64, pub SmallBytes);

impl PartialEq for ScoreMember {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == core::cmp::Ordering::Equal
    }
}
impl Eq for ScoreMember {}
impl PartialOrd for ScoreMember {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ScoreMember {
    fn cmp(&self, other: &Self) -> core::cmp::Ordering {
        self.0
            .partial_cmp(&other.0)
            .unwrap_or(core::cmp::Ordering::Equal)
            .then_with(|| self.1.cmp(&other.1))
    }
}

/// A stored value. Collections are boxed so a `Value` stays as small as a string's (the
/// keyspace holds one per key); each collection is a persistent structure, so cloning one is
/// O(1) and a snapshot.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A string (Redis encodings `int`, `embstr` or `raw`, see [`Meta::RAW`]).
    Str(SmallBytes),
    /// A list (encoding `quicklist`, as Redis 7.0 reports for every list).
    List(Box<List>),
    /// A hash (`listpack` while small, `hashtable` once [`Meta::BIG`]).
    Hash(Box<Hash>),
    /// A set (`intset` while small and all integers, `hashtable` once [`Meta::BIG`]).
    Set(Box<Set>),
    /// A sorted set (`listpack` while small, `skiplist` once [`Meta::BIG`]).
    ZSet(Box<ZSet>),
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
            Value::Set(_) if meta.has(Meta::BIG) => "hashtable",
            Value::Set(_) => "intset",
            Value::ZSet(_) if meta.has(Meta::BIG) => "skiplist",
            Value::ZSet(_) => "listpack",
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
                freq: crate::evict::LFU_INIT_VAL,
                ldt_min: crate::evict::minutes(now_ms),
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
