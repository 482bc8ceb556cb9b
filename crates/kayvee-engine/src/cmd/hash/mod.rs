//! Hash commands (Redis "hash" group). The group's command table and the helpers its
//! files share (reading, writing and growing a hash); the commands on fields are in `fields`,
//! the counters (HINCRBY, HINCRBYFLOAT) in `numbers`, HRANDFIELD and HSCAN in `scan`.
//!
//! A hash is a [`struct@Hash`] (persistent map) whatever its size; `OBJECT ENCODING` reports
//! `listpack` until Redis 7.0 would convert it (more than `hash-max-listpack-entries` fields, or
//! a field or value longer than `hash-max-listpack-value` bytes stored), then `hashtable` for
//! good ([`Meta::BIG`]). Field order in replies is the map's hash order (Redis: insertion order
//! while small); Redis leaves it unspecified. Replies follow Redis 7.0.15 (transcripts in
//! `tests/transcripts/hash*.txt` were recorded from it).

mod fields;
mod numbers;
mod scan;

use crate::cmd::spec::CommandSpec;
use crate::command::{acl, flags};
use crate::error::Error;
use crate::reply::ReplySink;
use crate::value::{Hash, Meta, Split, Value, ValueMut, ValueRef};
use crate::Cx;
use fields::{
    hdel, hexists, hget, hgetall, hkeys, hlen, hmget, hmset, hset, hsetnx, hstrlen, hvals,
};
use numbers::{hincrby, hincrbyfloat};
use scan::{hrandfield, hscan};

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "hset",
        arity: -4,
        flags: flags::WRITE | flags::DENYOOM | flags::FAST,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::WRITE | acl::HASH | acl::FAST,
        summary: "Set the string value of a hash field",
        since: "2.0.0",
        group: "hash",
        complexity: "O(1) for each field/value pair added, so O(N) to add N field/value pairs when the command is called with multiple field/value pairs.",
        tips: &[],
        key_flags: &["RW", "update"],
        handler: hset,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hsetnx",
        arity: 4,
        flags: flags::WRITE | flags::DENYOOM | flags::FAST,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::WRITE | acl::HASH | acl::FAST,
        summary: "Set the value of a hash field, only if the field does not exist",
        since: "2.0.0",
        group: "hash",
        complexity: "O(1)",
        tips: &[],
        key_flags: &["RW", "insert"],
        handler: hsetnx,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hget",
        arity: 3,
        flags: flags::READONLY | flags::FAST,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::READ | acl::HASH | acl::FAST,
        summary: "Get the value of a hash field",
        since: "2.0.0",
        group: "hash",
        complexity: "O(1)",
        tips: &[],
        key_flags: &["RO", "access"],
        handler: hget,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hmset",
        arity: -4,
        flags: flags::WRITE | flags::DENYOOM | flags::FAST,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::WRITE | acl::HASH | acl::FAST,
        summary: "Set multiple hash fields to multiple values",
        since: "2.0.0",
        group: "hash",
        complexity: "O(N) where N is the number of fields being set.",
        tips: &[],
        key_flags: &["RW", "update"],
        handler: hmset,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hmget",
        arity: -3,
        flags: flags::READONLY | flags::FAST,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::READ | acl::HASH | acl::FAST,
        summary: "Get the values of all the given hash fields",
        since: "2.0.0",
        group: "hash",
        complexity: "O(N) where N is the number of fields being requested.",
        tips: &[],
        key_flags: &["RO", "access"],
        handler: hmget,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hdel",
        arity: -3,
        flags: flags::WRITE | flags::FAST,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::WRITE | acl::HASH | acl::FAST,
        summary: "Delete one or more hash fields",
        since: "2.0.0",
        group: "hash",
        complexity: "O(N) where N is the number of fields to be removed.",
        tips: &[],
        key_flags: &["RW", "delete"],
        handler: hdel,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hlen",
        arity: 2,
        flags: flags::READONLY | flags::FAST,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::READ | acl::HASH | acl::FAST,
        summary: "Get the number of fields in a hash",
        since: "2.0.0",
        group: "hash",
        complexity: "O(1)",
        tips: &[],
        key_flags: &["RO"],
        handler: hlen,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hexists",
        arity: 3,
        flags: flags::READONLY | flags::FAST,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::READ | acl::HASH | acl::FAST,
        summary: "Determine if a hash field exists",
        since: "2.0.0",
        group: "hash",
        complexity: "O(1)",
        tips: &[],
        key_flags: &["RO"],
        handler: hexists,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hgetall",
        arity: 2,
        flags: flags::READONLY,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::READ | acl::HASH | acl::SLOW,
        summary: "Get all the fields and values in a hash",
        since: "2.0.0",
        group: "hash",
        complexity: "O(N) where N is the size of the hash.",
        tips: &["nondeterministic_output_order"],
        key_flags: &["RO", "access"],
        handler: hgetall,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hkeys",
        arity: 2,
        flags: flags::READONLY,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::READ | acl::HASH | acl::SLOW,
        summary: "Get all the fields in a hash",
        since: "2.0.0",
        group: "hash",
        complexity: "O(N) where N is the size of the hash.",
        tips: &["nondeterministic_output_order"],
        key_flags: &["RO", "access"],
        handler: hkeys,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hvals",
        arity: 2,
        flags: flags::READONLY,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::READ | acl::HASH | acl::SLOW,
        summary: "Get all the values in a hash",
        since: "2.0.0",
        group: "hash",
        complexity: "O(N) where N is the size of the hash.",
        tips: &["nondeterministic_output_order"],
        key_flags: &["RO", "access"],
        handler: hvals,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hincrby",
        arity: 4,
        flags: flags::WRITE | flags::DENYOOM | flags::FAST,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::WRITE | acl::HASH | acl::FAST,
        summary: "Increment the integer value of a hash field by the given number",
        since: "2.0.0",
        group: "hash",
        complexity: "O(1)",
        tips: &[],
        key_flags: &["RW", "access", "update"],
        handler: hincrby,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hincrbyfloat",
        arity: 4,
        flags: flags::WRITE | flags::DENYOOM | flags::FAST,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::WRITE | acl::HASH | acl::FAST,
        summary: "Increment the float value of a hash field by the given amount",
        since: "2.6.0",
        group: "hash",
        complexity: "O(1)",
        tips: &[],
        key_flags: &["RW", "access", "update"],
        handler: hincrbyfloat,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hstrlen",
        arity: 3,
        flags: flags::READONLY | flags::FAST,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::READ | acl::HASH | acl::FAST,
        summary: "Get the length of the value of a hash field",
        since: "3.2.0",
        group: "hash",
        complexity: "O(1)",
        tips: &[],
        key_flags: &["RO"],
        handler: hstrlen,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hrandfield",
        arity: -2,
        flags: flags::READONLY,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::READ | acl::HASH | acl::SLOW,
        summary: "Get one or multiple random fields from a hash",
        since: "6.2.0",
        group: "hash",
        complexity: "O(N) where N is the number of fields returned",
        tips: &["nondeterministic_output"],
        key_flags: &["RO", "access"],
        handler: hrandfield,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hscan",
        arity: -3,
        flags: flags::READONLY,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::READ | acl::HASH | acl::SLOW,
        summary: "Incrementally iterate hash fields and associated values",
        since: "2.8.0",
        group: "hash",
        complexity: "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection..",
        tips: &["nondeterministic_output"],
        key_flags: &["RO", "access"],
        handler: hscan,
        ..CommandSpec::DEFAULT
    },
];

/// The thresholds past which Redis converts a hash to `hashtable`.
#[derive(Clone, Copy)]
pub(crate) struct HashLimits {
    /// `hash-max-listpack-entries`.
    pub entries: u64,
    /// `hash-max-listpack-value`.
    pub value: u64,
    /// The seed the map form hashes with.
    pub seed: u64,
}

impl HashLimits {
    /// The limits configured now.
    pub fn of(cx: &Cx<'_>) -> Self {
        HashLimits {
            entries: cx.core.config.hash_max_listpack_entries,
            value: cx.core.config.hash_max_listpack_value,
            seed: cx.core.seed,
        }
    }
}

/// Sets `field` to `value`; returns whether the field is new. Marks the hash [`Meta::BIG`] when
/// the store crosses a listpack limit, as Redis converts it then (and never back), and moves it
/// to the map form first. A flat hash is walked once: the lookup that misses a field has
/// counted the fields ([`Hash::insert_within`]).
pub(crate) fn hash_put(
    h: &mut Hash,
    meta: &mut Meta,
    lim: HashLimits,
    field: &[u8],
    value: &[u8],
) -> bool {
    if !meta.has(Meta::BIG) {
        let long = field.len() as u64 > lim.value || value.len() as u64 > lim.value;
        if !long {
            let entries_max = usize::try_from(lim.entries).unwrap_or(usize::MAX);
            if let Some(new) = h.insert_within(field, value, entries_max) {
                return new;
            }
        }
        meta.set_flag(Meta::BIG, true);
        h.make_big(lim.seed);
    }
    h.insert(field, value)
}

/// A field or value as a bulk reply, written from its two parts without joining them.
#[inline]
pub(crate) fn bulk(out: &mut dyn ReplySink, s: Split<'_>) {
    out.bulk_parts(s.head, s.tail);
}

/// The hash at `key` for reading (counting a hit or miss), with its metadata; `None` when
/// missing, WRONGTYPE for another type, [`crate::value::CORRUPT_VALUE`] for a hash whose
/// listpack cannot be read.
pub(crate) fn read_hash<'c>(
    cx: &'c mut Cx<'_>,
    key: &[u8],
) -> Result<Option<(&'c Hash, Meta)>, Error> {
    let now = cx.now_ms();
    match cx.db().lookup_read(key, now) {
        None => Ok(None),
        Some(e) => match e.value() {
            ValueRef::Hash(h) if h.corrupt_listpack().is_some() => {
                Err(Error::msg(crate::value::CORRUPT_VALUE))
            }
            ValueRef::Hash(h) => Ok(Some((h, e.meta()))),
            _ => Err(Error::WrongType),
        },
    }
}

/// Runs `f` on the hash at `key` for writing. A missing key gives `Ok(None)` unless `create`,
/// in which case `f` runs on a new empty hash that is stored if `f` succeeds and leaves it
/// non-empty. A hash `f` empties is deleted. `f` must validate before it mutates: on `Err`
/// nothing may have changed. A hash whose listpack cannot be read is
/// [`crate::value::CORRUPT_VALUE`].
pub(crate) fn write_hash<R>(
    cx: &mut Cx<'_>,
    key: &[u8],
    create: bool,
    f: impl FnOnce(&mut Hash, &mut Meta) -> Result<R, Error>,
) -> Result<Option<R>, Error> {
    let now = cx.now_ms();
    let db = cx.db();
    if let Some(e) = db.lookup_write(key, now) {
        let (ValueMut::Hash(h), meta) = e.parts_mut() else {
            return Err(Error::WrongType);
        };
        if h.corrupt_listpack().is_some() {
            return Err(Error::msg(crate::value::CORRUPT_VALUE));
        }
        let r = f(h, meta)?;
        if h.is_empty() {
            db.remove(key, now);
        }
        return Ok(Some(r));
    }
    if !create {
        return Ok(None);
    }
    let mut h = Hash::new();
    let mut meta = Meta::default();
    let r = f(&mut h, &mut meta)?;
    if !h.is_empty() {
        let mut e = db.new_entry(Value::Hash(h), now);
        e.meta_mut().set_flag(Meta::BIG, meta.has(Meta::BIG));
        db.insert_entry(key, e, None);
    }
    Ok(Some(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_marks_big_past_the_limits() {
        let lim = HashLimits {
            entries: 3,
            value: 4,
            seed: 1,
        };
        let (mut h, mut meta) = (Hash::new(), Meta::default());
        assert!(hash_put(&mut h, &mut meta, lim, b"a", b"1234"));
        assert!(!hash_put(&mut h, &mut meta, lim, b"a", b"12"));
        hash_put(&mut h, &mut meta, lim, b"b", b"1");
        hash_put(&mut h, &mut meta, lim, b"c", b"1");
        assert!(!meta.has(Meta::BIG), "3 short entries stay small");
        assert!(!h.is_big(), "and flat");
        hash_put(&mut h, &mut meta, lim, b"d", b"1");
        assert!(meta.has(Meta::BIG), "a 4th entry converts");
        assert!(h.is_big(), "to the map form");
        assert_eq!(h.len(), 4);
        let mut meta = Meta::default();
        hash_put(
            &mut h,
            &mut meta,
            HashLimits {
                entries: 9,
                value: 4,
                seed: 1,
            },
            b"x",
            b"12345",
        );
        assert!(meta.has(Meta::BIG), "a long value converts");
        assert_eq!(h.get(b"a"), Some(Split::whole(b"12")));
    }
}
