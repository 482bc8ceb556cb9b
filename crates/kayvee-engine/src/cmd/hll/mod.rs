//! HyperLogLog commands (Redis "hyperloglog" group): the command table and the helpers its
//! files share (reading a key as an HLL, storing one back, the two HLL errors). PFADD is in
//! `add`, PFCOUNT and PFMERGE in `count`, PFDEBUG and PFSELFTEST in `debug`; the encoding
//! itself is [`crate::hll`].
//!
//! An HLL is a string value holding Redis's exact bytes. Semantics, replies, propagation and
//! error texts follow Redis 7.0.15 (checked against the real server; the transcripts in
//! `tests/transcripts/hll*.txt` were recorded from it): PFADD and PFMERGE propagate as sent and
//! notify `pfadd`; PFCOUNT of one key stores the cardinality it computed in the header, a write
//! that propagates (and that a WRITE pause holds: `pause::held_by_write` names it, as
//! COMMAND INFO shows no may-replicate flag in 7.0) but notifies nothing.

mod add;
mod count;
mod debug;

use super::string::{as_str, store_raw};
use crate::cmd::spec::{CommandSpec, Handler};
use crate::command::{acl, flags};
use crate::error::Error;
use crate::hll::{self, Encoding};
use crate::keyspec::{KeyFlags, KeySpec};
use crate::value::{Entry, Value};
use crate::Cx;
use alloc::vec::Vec;
use kayvee_pds::SmallBytes;

/// An HLL-group command spec with one key at `first_key` (a table row).
#[allow(clippy::too_many_arguments)]
const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    acl: u32,
    summary: &'static str,
    complexity: &'static str,
    keys: (i32, i32),
    handler: Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        first_key: keys.0,
        last_key: keys.1,
        key_step: if keys.0 > 0 { 1 } else { 0 },
        acl,
        summary,
        since: "2.8.9",
        group: "hyperloglog",
        complexity,
        handler,
        ..CommandSpec::DEFAULT
    }
}

const RW_INSERT: KeyFlags = &["RW", "insert"];
const RW_ACCESS: KeyFlags = &["RW", "access"];
const RW_ACCESS_INSERT: KeyFlags = &["RW", "access", "insert"];
const RO_ACCESS: KeyFlags = &["RO", "access"];

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        key_specs: &[KeySpec::range(RW_INSERT, 1, 0, 1)],
        ..spec(
            "pfadd",
            -2,
            flags::WRITE | flags::DENYOOM | flags::FAST,
            acl::WRITE | acl::HYPERLOGLOG | acl::FAST,
            "Adds the specified elements to the specified HyperLogLog.",
            "O(1) to add every element.",
            (1, 1),
            add::pfadd,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::range(RW_ACCESS, 1, -1, 1).with_notes(
            "RW because it may change the internal representation of the key, and propagate to \
             replicas",
        )],
        ..spec(
            "pfcount",
            -2,
            flags::READONLY,
            acl::READ | acl::HYPERLOGLOG | acl::SLOW,
            "Return the approximated cardinality of the set(s) observed by the HyperLogLog at \
             key(s).",
            "O(1) with a very small average constant time when called with a single key. O(N) \
             with N being the number of keys, and much bigger constant times, when called with \
             multiple keys.",
            (1, -1),
            count::pfcount,
        )
    },
    CommandSpec {
        key_specs: &[
            KeySpec::range(RW_ACCESS_INSERT, 1, 0, 1),
            KeySpec::range(RO_ACCESS, 2, -1, 1),
        ],
        ..spec(
            "pfmerge",
            -2,
            flags::WRITE | flags::DENYOOM,
            acl::WRITE | acl::HYPERLOGLOG | acl::SLOW,
            "Merge N different HyperLogLogs into a single one.",
            "O(N) to merge N HyperLogLogs, but with high constant times.",
            (1, -1),
            count::pfmerge,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::range(RW_ACCESS, 2, 0, 1)],
        ..spec(
            "pfdebug",
            3,
            flags::WRITE | flags::DENYOOM | flags::ADMIN,
            acl::WRITE | acl::HYPERLOGLOG | acl::ADMIN | acl::SLOW | acl::DANGEROUS,
            "Internal commands for debugging HyperLogLog values",
            "N/A",
            (2, 2),
            debug::pfdebug,
        )
    },
    spec(
        "pfselftest",
        1,
        flags::ADMIN,
        acl::HYPERLOGLOG | acl::ADMIN | acl::SLOW | acl::DANGEROUS,
        "An internal command for testing HyperLogLog values",
        "N/A",
        (0, 0),
        debug::pfselftest,
    ),
];

/// The error for a string that is no HLL.
fn not_hll() -> Error {
    Error::msg("WRONGTYPE Key is not a valid HyperLogLog string value.")
}

/// The error for an HLL whose registers do not decode.
fn corrupt() -> Error {
    Error::msg("INVALIDOBJ Corrupted HLL object detected")
}

/// The HLL an entry holds and its encoding: WRONGTYPE for another type, [`not_hll`] for a
/// string that is no HLL.
fn as_hll(entry: &Entry) -> Result<(&[u8], Encoding), Error> {
    let s = as_str(entry)?;
    let enc = hll::encoding(s).map_err(|_| not_hll())?;
    Ok((s, enc))
}

/// Stores the HLL bytes under `key`: in place in the existing entry (a `raw` string, its TTL
/// kept), or as a new key.
fn store_hll(cx: &mut Cx<'_>, key: &[u8], bytes: Vec<u8>) {
    let now = cx.now_ms();
    let db = cx.db();
    match db.lookup_write(key, now) {
        Some(entry) => store_raw(entry, bytes),
        None => {
            let mut entry = db.new_entry(Value::Str(SmallBytes::new()), now);
            store_raw(&mut entry, bytes);
            db.insert_entry(key, entry, None);
        }
    }
}
