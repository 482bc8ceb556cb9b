//! Values stored under keys, and the per-key metadata kept beside them.
//!
//! Every variant is a persistent structure (or a small immutable string): cloning a `Value` is
//! cheap and a clone is a snapshot.

use kayvee_pds::SmallBytes;

/// A stored value. Collection types (list, hash, set, zset) arrive with their issue.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A string (Redis encodings `int`, `embstr` or `raw`, see [`Meta::RAW`]).
    Str(SmallBytes),
}

impl Value {
    /// The name `TYPE` answers.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
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
                freq: 5, // LFU_INIT_VAL, as Redis starts new keys
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
