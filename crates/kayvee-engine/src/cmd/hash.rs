//! Hash commands (Redis "hash" group): HSET, HSETNX, HMSET, HGET, HMGET, HDEL, HLEN, HEXISTS,
//! HGETALL, HKEYS, HVALS, HSTRLEN. The counters (HINCRBY, HINCRBYFLOAT), HRANDFIELD and HSCAN
//! live in `hash_more`.
//!
//! A hash is a [`Hash`] (persistent map) whatever its size; `OBJECT ENCODING` reports
//! `listpack` until Redis 7.0 would convert it (more than `hash-max-listpack-entries` fields, or
//! a field or value longer than `hash-max-listpack-value` bytes stored), then `hashtable` for
//! good ([`Meta::BIG`]). Field order in replies is the map's hash order (Redis: insertion order
//! while small); Redis leaves it unspecified. Replies follow Redis 7.0.15 (transcripts in
//! `tests/transcripts/hash*.txt` were recorded from it).

use super::hash_more::{hincrby, hincrbyfloat, hrandfield, hscan};
use crate::argv::Argv;
use crate::command::{acl, flags, CommandSpec};
use crate::error::{CmdResult, Error};
use crate::notify::{class as nc, emit};
use crate::reply::ReplySink;
use crate::value::{Entry, Hash, Meta, Value};
use crate::Cx;

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
/// to the map form first.
pub(crate) fn hash_put(
    h: &mut Hash,
    meta: &mut Meta,
    lim: HashLimits,
    field: &[u8],
    value: &[u8],
) -> bool {
    if !meta.has(Meta::BIG) {
        let long = field.len() as u64 > lim.value || value.len() as u64 > lim.value;
        if long || (h.len() as u64 >= lim.entries && !h.contains_key(field)) {
            meta.set_flag(Meta::BIG, true);
            h.make_big(lim.seed);
        }
    }
    h.insert(field, value)
}

/// The hash at `key` for reading (counting a hit or miss), with its metadata; `None` when
/// missing, WRONGTYPE for another type.
pub(crate) fn read_hash<'c>(
    cx: &'c mut Cx<'_>,
    key: &[u8],
) -> Result<Option<(&'c Hash, Meta)>, Error> {
    let now = cx.now_ms();
    match cx.db().lookup_read(key, now) {
        None => Ok(None),
        Some(Entry {
            value: Value::Hash(h),
            meta,
        }) => Ok(Some((h, *meta))),
        Some(_) => Err(Error::WrongType),
    }
}

/// Runs `f` on the hash at `key` for writing. A missing key gives `Ok(None)` unless `create`,
/// in which case `f` runs on a new empty hash that is stored if `f` succeeds and leaves it
/// non-empty. A hash `f` empties is deleted. `f` must validate before it mutates: on `Err`
/// nothing may have changed.
pub(crate) fn write_hash<R>(
    cx: &mut Cx<'_>,
    key: &[u8],
    create: bool,
    f: impl FnOnce(&mut Hash, &mut Meta) -> Result<R, Error>,
) -> Result<Option<R>, Error> {
    let now = cx.now_ms();
    let db = cx.db();
    if let Some(e) = db.lookup_write(key, now) {
        let Value::Hash(h) = &mut e.value else {
            return Err(Error::WrongType);
        };
        let r = f(h, &mut e.meta)?;
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
        let mut e = Entry::new(Value::Hash(h), now);
        e.meta.set_flag(Meta::BIG, meta.has(Meta::BIG));
        db.insert_entry(key, e, None);
    }
    Ok(Some(r))
}

/// Sets the field/value pairs from argument 2 on; returns how many fields are new. An odd
/// number of them is the arity error of `name`.
fn set_pairs(cx: &mut Cx<'_>, args: &Argv<'_>, name: &str) -> Result<i64, Error> {
    if !args.len().is_multiple_of(2) {
        return Err(Error::WrongArity(name.into()));
    }
    let lim = HashLimits::of(cx);
    let added = write_hash(cx, args.get(1), true, |h, meta| {
        let mut added = 0;
        for i in (2..args.len()).step_by(2) {
            added += i64::from(hash_put(h, meta, lim, args.get(i), args.get(i + 1)));
        }
        Ok(added)
    })?;
    // A modification for WATCH even when every value was already there, as in Redis.
    let db = cx.db();
    db.modified(args.get(1));
    cx.propagate_verbatim();
    emit(cx, nc::HASH, "hset", args.get(1));
    Ok(added.unwrap_or(0))
}

/// HSET key field value [field value ...]: the number of new fields.
fn hset(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let added = set_pairs(cx, args, "hset")?;
    out.int(added);
    Ok(())
}

/// HMSET key field value [field value ...]: HSET answering `+OK`.
fn hmset(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    set_pairs(cx, args, "hmset")?;
    out.ok();
    Ok(())
}

/// HSETNX key field value: sets the field only when absent; 1 if set, 0 if not.
fn hsetnx(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (field, value) = (args.get(2), args.get(3));
    let lim = HashLimits::of(cx);
    let set = write_hash(cx, args.get(1), true, |h, meta| {
        Ok(!h.contains_key(field) && hash_put(h, meta, lim, field, value))
    })?;
    if set == Some(true) {
        cx.propagate_verbatim();
        emit(cx, nc::HASH, "hset", args.get(1));
    }
    out.int(i64::from(set == Some(true)));
    Ok(())
}

/// HGET key field: the value, or null.
fn hget(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    match read_hash(cx, args.get(1))?.and_then(|(h, _)| h.get(args.get(2))) {
        Some(v) => out.bulk(v),
        None => out.null(),
    }
    Ok(())
}

/// HMGET key field [field ...]: the values, null for missing fields (all null for a missing key).
fn hmget(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let h = read_hash(cx, args.get(1))?.map(|(h, _)| h);
    out.array(args.len() - 2);
    for field in args.iter().skip(2) {
        match h.and_then(|h| h.get(field)) {
            Some(v) => out.bulk(v),
            None => out.null(),
        }
    }
    Ok(())
}

/// HDEL key field [field ...]: the number of fields removed; an emptied hash is deleted.
fn hdel(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let removed = write_hash(cx, args.get(1), false, |h, _| {
        Ok(args.iter().skip(2).filter(|f| h.remove(f)).count())
    })?;
    if removed.unwrap_or(0) > 0 {
        cx.propagate_verbatim();
        emit(cx, nc::HASH, "hdel", args.get(1));
        crate::notify::emptied_if_gone(cx, args.get(1));
    }
    out.int(removed.unwrap_or(0) as i64);
    Ok(())
}

/// HLEN key: the number of fields (0 for a missing key).
fn hlen(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let n = read_hash(cx, args.get(1))?.map_or(0, |(h, _)| h.len());
    out.int(n as i64);
    Ok(())
}

/// HEXISTS key field: 1 or 0.
fn hexists(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let found = read_hash(cx, args.get(1))?.is_some_and(|(h, _)| h.contains_key(args.get(2)));
    out.int(i64::from(found));
    Ok(())
}

/// HSTRLEN key field: the value's length (0 when missing).
fn hstrlen(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let len = read_hash(cx, args.get(1))?
        .and_then(|(h, _)| h.get(args.get(2)))
        .map_or(0, |v| v.len());
    out.int(len as i64);
    Ok(())
}

/// HGETALL key: a map of fields to values (a flat array in RESP2).
fn hgetall(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let Some((h, _)) = read_hash(cx, args.get(1))? else {
        out.map(0);
        return Ok(());
    };
    out.map(h.len());
    for (k, v) in h.iter() {
        out.bulk(k);
        out.bulk(v);
    }
    Ok(())
}

/// HKEYS key: the fields.
fn hkeys(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    write_one_side(cx, args, true, out)
}

/// HVALS key: the values, in the same order as HKEYS's fields.
fn hvals(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    write_one_side(cx, args, false, out)
}

/// HKEYS / HVALS: the fields (`fields`) or the values of the hash at argument 1, in the
/// hash's order (an empty array for a missing key).
fn write_one_side(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    fields: bool,
    out: &mut dyn ReplySink,
) -> CmdResult {
    let h = read_hash(cx, args.get(1))?.map(|(h, _)| h);
    out.array(h.map_or(0, |h| h.len()));
    for (k, v) in h.iter().flat_map(|h| h.iter()) {
        out.bulk(if fields { k } else { v });
    }
    Ok(())
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
        assert_eq!(h.get(b"a"), Some(&b"12"[..]));
    }
}
