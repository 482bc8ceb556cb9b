//! Set commands (Redis "set" group): the group's command table and the helpers its files
//! share (reading, writing and growing a set, Redis's reply order). The commands on members
//! (SADD, SREM, SMEMBERS, SISMEMBER, SMISMEMBER, SCARD, SMOVE) are in `members`, the algebra
//! (SINTER, SUNION, SDIFF, their STORE forms, SINTERCARD) in `algebra`, SPOP, SRANDMEMBER and
//! SSCAN in `random`.
//!
//! A set is a [`Set`] (persistent map to `()`) whatever its members; `OBJECT ENCODING` reports
//! `intset` while every member reads as an integer (Redis's `string2ll`) and there are at most
//! `set-max-intset-entries`, then `hashtable` for good ([`Meta::BIG`]); Redis 7.0 has no
//! listpack sets. An intset-encoded set answers in ascending numeric order as Redis's does;
//! a big one in the map's hash order (Redis leaves it unspecified). Replies follow Redis
//! 7.0.15 (transcripts in `tests/transcripts/set*.txt` were recorded from it).

mod algebra;
mod members;
mod random;

use crate::cmd::spec::{CommandSpec, Handler};
use crate::command::{acl, flags};
use crate::error::Error;
use crate::keyspec::{kf, KeySpec};
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::value::{Entry, Meta, Set, Value};
use crate::Cx;
use algebra::{sdiff, sdiffstore, sinter, sintercard, sinterstore, sunion, sunionstore};
use alloc::boxed::Box;
use alloc::vec::Vec;
use kayvee_pds::SmallBytes;
use members::{sadd, scard, sismember, smembers, smismember, smove, srem};
use random::{spop, srandmember, sscan};

/// The cost of an intersection (SINTER, SINTERSTORE, SINTERCARD).
const INTER_CX: &str =
    "O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.";
/// The cost of a union or difference.
const ALL_CX: &str = "O(N) where N is the total number of elements in all given sets.";

/// SINTER / SUNION / SDIFF's row: read-only, every argument a key.
const fn algebra(
    name: &'static str,
    summary: &'static str,
    complexity: &'static str,
    handler: Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity: -2,
        flags: flags::READONLY,
        first_key: 1,
        last_key: -1,
        key_step: 1,
        acl: acl::READ | acl::SET | acl::SLOW,
        summary,
        since: "1.0.0",
        group: "set",
        complexity,
        tips: &["nondeterministic_output_order"],
        key_flags: &["RO", "access"],
        handler,
        ..CommandSpec::DEFAULT
    }
}

/// Key specs of a STORE form: the destination, then the sources.
const OW_STORE_KEYS: &[KeySpec] = &[
    KeySpec::range(kf::OW_UPDATE, 1, 0, 1),
    KeySpec::range(kf::RO_ACCESS, 2, -1, 1),
];

/// The STORE forms' row: the destination (argument 1, overwritten; SINTERSTORE's row marks
/// it RW instead, as Redis does), then the source keys.
const fn algebra_store(
    name: &'static str,
    summary: &'static str,
    complexity: &'static str,
    handler: Handler,
) -> CommandSpec {
    CommandSpec {
        arity: -3,
        flags: flags::WRITE | flags::DENYOOM,
        acl: acl::WRITE | acl::SET | acl::SLOW,
        tips: &[],
        key_flags: &["OW", "update"],
        key_specs: OW_STORE_KEYS,
        ..algebra(name, summary, complexity, handler)
    }
}

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "sadd",
        arity: -3,
        flags: flags::WRITE | flags::DENYOOM | flags::FAST,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::WRITE | acl::SET | acl::FAST,
        summary: "Add one or more members to a set",
        since: "1.0.0",
        group: "set",
        complexity: "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.",
        tips: &[],
        key_flags: &["RW", "insert"],
        handler: sadd,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "srem",
        arity: -3,
        flags: flags::WRITE | flags::FAST,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::WRITE | acl::SET | acl::FAST,
        summary: "Remove one or more members from a set",
        since: "1.0.0",
        group: "set",
        complexity: "O(N) where N is the number of members to be removed.",
        tips: &[],
        key_flags: &["RW", "delete"],
        handler: srem,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "smembers",
        arity: 2,
        flags: flags::READONLY,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::READ | acl::SET | acl::SLOW,
        summary: "Get all the members in a set",
        since: "1.0.0",
        group: "set",
        complexity: "O(N) where N is the set cardinality.",
        tips: &["nondeterministic_output_order"],
        key_flags: &["RO", "access"],
        handler: smembers,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "sismember",
        arity: 3,
        flags: flags::READONLY | flags::FAST,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::READ | acl::SET | acl::FAST,
        summary: "Determine if a given value is a member of a set",
        since: "1.0.0",
        group: "set",
        complexity: "O(1)",
        tips: &[],
        key_flags: &["RO"],
        handler: sismember,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "smismember",
        arity: -3,
        flags: flags::READONLY | flags::FAST,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::READ | acl::SET | acl::FAST,
        summary: "Returns the membership associated with the given elements for a set",
        since: "6.2.0",
        group: "set",
        complexity: "O(N) where N is the number of elements being checked for membership",
        tips: &[],
        key_flags: &["RO", "access"],
        handler: smismember,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "scard",
        arity: 2,
        flags: flags::READONLY | flags::FAST,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::READ | acl::SET | acl::FAST,
        summary: "Get the number of members in a set",
        since: "1.0.0",
        group: "set",
        complexity: "O(1)",
        tips: &[],
        key_flags: &["RO"],
        handler: scard,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "spop",
        arity: -2,
        flags: flags::WRITE | flags::FAST,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::WRITE | acl::SET | acl::FAST,
        summary: "Remove and return one or multiple random members from a set",
        since: "1.0.0",
        group: "set",
        complexity: "Without the count argument O(1), otherwise O(N) where N is the value of the passed count.",
        tips: &["nondeterministic_output"],
        key_flags: &["RW", "access", "delete"],
        handler: spop,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "srandmember",
        arity: -2,
        flags: flags::READONLY,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::READ | acl::SET | acl::SLOW,
        summary: "Get one or multiple random members from a set",
        since: "1.0.0",
        group: "set",
        complexity: "Without the count argument O(1), otherwise O(N) where N is the absolute value of the passed count.",
        tips: &["nondeterministic_output"],
        key_flags: &["RO", "access"],
        handler: srandmember,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "smove",
        arity: 4,
        flags: flags::WRITE | flags::FAST,
        first_key: 1,
        last_key: 2,
        key_step: 1,
        acl: acl::WRITE | acl::SET | acl::FAST,
        summary: "Move a member from one set to another",
        since: "1.0.0",
        group: "set",
        complexity: "O(1)",
        tips: &[],
        key_flags: &["RW", "access", "delete"],
        key_specs: &[KeySpec::range(kf::RW_ACCESS_DELETE, 1, 0, 1), KeySpec::range(kf::RW_INSERT, 2, 0, 1)],
        handler: smove,
        ..CommandSpec::DEFAULT
    },
    algebra("sinter", "Intersect multiple sets", INTER_CX, sinter),
    algebra("sunion", "Add multiple sets", ALL_CX, sunion),
    algebra("sdiff", "Subtract multiple sets", ALL_CX, sdiff),
    CommandSpec {
        key_flags: &["RW", "update"],
        key_specs: &[KeySpec::range(kf::RW_UPDATE, 1, 0, 1), KeySpec::range(kf::RO_ACCESS, 2, -1, 1)],
        ..algebra_store("sinterstore", "Intersect multiple sets and store the resulting set in a key", INTER_CX, sinterstore)
    },
    algebra_store("sunionstore", "Add multiple sets and store the resulting set in a key", ALL_CX, sunionstore),
    algebra_store("sdiffstore", "Subtract multiple sets and store the resulting set in a key", ALL_CX, sdiffstore),
    CommandSpec {
        name: "sintercard",
        arity: -3,
        flags: flags::READONLY | flags::MOVABLEKEYS,
        first_key: 0,
        last_key: 0,
        key_step: 0,
        acl: acl::READ | acl::SET | acl::SLOW,
        summary: "Intersect multiple sets and return the cardinality of the result",
        since: "7.0.0",
        group: "set",
        complexity: INTER_CX,
        tips: &[],
        key_flags: &["RO", "access"],
        key_specs: &[KeySpec::keynum(kf::RO_ACCESS, 1)],
        handler: sintercard,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "sscan",
        arity: -3,
        flags: flags::READONLY,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::READ | acl::SET | acl::SLOW,
        summary: "Incrementally iterate Set elements",
        since: "2.8.0",
        group: "set",
        complexity: "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection..",
        tips: &["nondeterministic_output"],
        key_flags: &["RO", "access"],
        handler: sscan,
        ..CommandSpec::DEFAULT
    },
];

/// Adds `member`; returns whether it is new. Marks the set [`Meta::BIG`] when Redis would
/// convert its intset: a non-integer member, or more than `intset_max` members.
pub(crate) fn set_add(s: &mut Set, meta: &mut Meta, intset_max: u64, member: &[u8]) -> bool {
    if s.contains_key(member) {
        return false;
    }
    s.insert(SmallBytes::from_slice(member), ());
    if !meta.has(Meta::BIG) && (parse_i64(member).is_none() || s.len() as u64 > intset_max) {
        meta.set_flag(Meta::BIG, true);
    }
    true
}

/// The set at `key` for reading (counting a hit or miss), with its metadata; `None` when
/// missing, WRONGTYPE for another type.
pub(crate) fn read_set<'c>(
    cx: &'c mut Cx<'_>,
    key: &[u8],
) -> Result<Option<(&'c Set, Meta)>, Error> {
    let now = cx.now_ms();
    match cx.db().lookup_read(key, now) {
        None => Ok(None),
        Some(Entry {
            value: Value::Set(s),
            meta,
        }) => Ok(Some((s, *meta))),
        Some(_) => Err(Error::WrongType),
    }
}

/// Runs `f` on the set at `key` for writing, as [`crate::cmd::hash::write_hash`] does for hashes:
/// a missing key is `Ok(None)` unless `create`; an emptied set is deleted; `f` validates
/// before it mutates.
pub(crate) fn write_set<R>(
    cx: &mut Cx<'_>,
    key: &[u8],
    create: bool,
    f: impl FnOnce(&mut Set, &mut Meta) -> Result<R, Error>,
) -> Result<Option<R>, Error> {
    let (now, seed) = (cx.now_ms(), cx.core.seed);
    let db = cx.db();
    if let Some(e) = db.lookup_write(key, now) {
        let Value::Set(s) = &mut e.value else {
            return Err(Error::WrongType);
        };
        let r = f(s, &mut e.meta)?;
        if s.is_empty() {
            db.remove(key, now);
        }
        return Ok(Some(r));
    }
    if !create {
        return Ok(None);
    }
    let mut s = Set::with_seed(seed);
    let mut meta = Meta::default();
    let r = f(&mut s, &mut meta)?;
    if !s.is_empty() {
        db.insert_entry(key, set_entry(s, meta, now), None);
    }
    Ok(Some(r))
}

/// A new entry holding `s`, keeping the BIG flag of `meta`.
pub(crate) fn set_entry(s: Set, meta: Meta, now_ms: u64) -> Entry {
    let mut e = Entry::new(Value::Set(Box::new(s)), now_ms);
    e.meta.set_flag(Meta::BIG, meta.has(Meta::BIG));
    e
}

/// Members in the order Redis answers: ascending numeric for an intset (`intset` true),
/// the given order otherwise.
pub(crate) fn redis_order(mut members: Vec<&SmallBytes>, intset: bool) -> Vec<&SmallBytes> {
    if intset {
        members.sort_by_key(|m| parse_i64(m).unwrap_or(0));
    }
    members
}

/// Writes members as a set reply (an array in RESP2).
pub(crate) fn write_members(out: &mut dyn ReplySink, members: &[&SmallBytes]) {
    out.set(members.len());
    members.iter().for_each(|m| out.bulk(m));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_marks_big_like_an_intset_conversion() {
        let (mut s, mut meta) = (Set::with_seed(1), Meta::default());
        assert!(set_add(&mut s, &mut meta, 3, b"-5"));
        assert!(!set_add(&mut s, &mut meta, 3, b"-5"));
        set_add(&mut s, &mut meta, 3, b"9223372036854775807");
        set_add(&mut s, &mut meta, 3, b"0");
        assert!(!meta.has(Meta::BIG), "three integers fit the intset");
        set_add(&mut s, &mut meta, 3, b"1");
        assert!(meta.has(Meta::BIG), "a fourth member converts");
        for not_int in [&b"007"[..], b"+1", b"-0", b"1.0", b"a", b""] {
            let (mut s, mut meta) = (Set::with_seed(1), Meta::default());
            set_add(&mut s, &mut meta, 512, not_int);
            assert!(meta.has(Meta::BIG), "{not_int:?}");
        }
    }

    #[test]
    fn intset_order_is_numeric() {
        let v: Vec<SmallBytes> = ["10", "-3", "2"].iter().map(|s| (*s).into()).collect();
        let got = redis_order(v.iter().collect(), true);
        let got: Vec<&[u8]> = got.iter().map(|m| &m[..]).collect();
        assert_eq!(got, [&b"-3"[..], b"2", b"10"]);
    }
}
