//! Set commands (Redis "set" group): the group's command table and the helpers its files
//! share (reading, writing and growing a set, Redis's reply order). The commands on members
//! (SADD, SREM, SMEMBERS, SISMEMBER, SMISMEMBER, SCARD, SMOVE) are in `members`, the algebra
//! (SINTER, SUNION, SDIFF, their STORE forms, SINTERCARD) in `algebra`, SPOP, SRANDMEMBER and
//! SSCAN in `random`.
//!
//! A set is a [`Set`]: an intset while every member reads as an integer (Redis's `string2ll`)
//! and there are at most `set-max-intset-entries` (`OBJECT ENCODING` `intset`), then
//! `hashtable` for good ([`Meta::BIG`]), held packed while small and as a persistent map
//! after; Redis 7.0 has no listpack sets. An intset answers in ascending numeric order as
//! Redis's does; a packed set in insertion order and a map in hash order (Redis leaves the
//! order of a `hashtable` unspecified). Replies follow Redis
//! 7.0.15 (transcripts in `tests/transcripts/set*.txt` were recorded from it).

mod algebra;
mod members;
mod random;

use crate::cmd::spec::{CommandSpec, Handler};
use crate::command::{acl, flags};
use crate::db::Db;
use crate::error::Error;
use crate::keyspec::{kf, KeySpec};
use crate::value::{Entry, Meta, Set, Value, ValueMut, ValueRef};
use crate::Cx;
use algebra::{sdiff, sdiffstore, sinter, sintercard, sinterstore, sunion, sunionstore};
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

/// Adds `member`; returns whether it is new. The set leaves its intset form as Redis
/// converts an intset (a non-integer member, or more than `intset_max` members); the entry is
/// then marked [`Meta::BIG`] for good.
pub(crate) fn set_add(s: &mut Set, meta: &mut Meta, limits: (u64, u64), member: &[u8]) -> bool {
    let (intset_max, seed) = limits;
    let added = s.insert(member, intset_max, seed);
    if !s.is_intset() {
        meta.set_flag(Meta::BIG, true);
    }
    added
}

/// What [`set_add`] needs from the core: `set-max-intset-entries` and the hash seed.
pub(crate) fn add_limits(cx: &Cx<'_>) -> (u64, u64) {
    (cx.core.config.set_max_intset_entries, cx.core.seed)
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
        Some(e) => match e.value() {
            ValueRef::Set(s) => Ok(Some((s, e.meta()))),
            _ => Err(Error::WrongType),
        },
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
    let now = cx.now_ms();
    let db = cx.db();
    if let Some(e) = db.lookup_write(key, now) {
        let (ValueMut::Set(s), meta) = e.parts_mut() else {
            return Err(Error::WrongType);
        };
        let r = f(s, meta)?;
        if s.is_empty() {
            db.remove(key, now);
        }
        return Ok(Some(r));
    }
    if !create {
        return Ok(None);
    }
    let mut s = Set::new();
    let mut meta = Meta::default();
    let r = f(&mut s, &mut meta)?;
    if !s.is_empty() {
        db.insert_entry(key, set_entry(db, s, now), None);
    }
    Ok(Some(r))
}

/// A new entry of `db` holding `s`, marked [`Meta::BIG`] unless it is an intset.
pub(crate) fn set_entry(db: &Db, s: Set, now_ms: u64) -> Entry {
    let big = !s.is_intset();
    let mut e = db.new_entry(Value::Set(s), now_ms);
    e.meta_mut().set_flag(Meta::BIG, big);
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn add_marks_big_like_an_intset_conversion() {
        let (mut s, mut meta) = (Set::new(), Meta::default());
        assert!(set_add(&mut s, &mut meta, (3, 1), b"-5"));
        assert!(!set_add(&mut s, &mut meta, (3, 1), b"-5"));
        set_add(&mut s, &mut meta, (3, 1), b"9223372036854775807");
        set_add(&mut s, &mut meta, (3, 1), b"0");
        assert!(!meta.has(Meta::BIG), "three integers fit the intset");
        let order: Vec<Vec<u8>> = s.iter().map(|m| m.to_vec()).collect();
        assert_eq!(
            order,
            [
                b"-5".to_vec(),
                b"0".to_vec(),
                b"9223372036854775807".to_vec()
            ]
        );
        set_add(&mut s, &mut meta, (3, 1), b"1");
        assert!(meta.has(Meta::BIG), "a fourth member converts");
        for not_int in [&b"007"[..], b"+1", b"-0", b"1.0", b"a", b""] {
            let (mut s, mut meta) = (Set::new(), Meta::default());
            set_add(&mut s, &mut meta, (512, 1), not_int);
            assert!(meta.has(Meta::BIG), "{not_int:?}");
        }
    }
}
