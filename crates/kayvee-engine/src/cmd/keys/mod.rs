//! Key commands (Redis "generic" group, and the whole-database commands of its "server"
//! group): the group's command table. DEL, UNLINK, EXISTS, TYPE, TOUCH, RENAME, RENAMENX, COPY,
//! MOVE and SELECT are in `generic`, KEYS/SCAN/RANDOMKEY in `scan`, DBSIZE, FLUSHDB, FLUSHALL
//! and SWAPDB in `db`, OBJECT in `object`.

pub mod db;
pub mod generic;
pub mod object;
pub mod scan;

use crate::cmd::spec::CommandSpec;
use crate::command::{acl, flags};
use crate::keyspec::{kf, KeySpec};
use db::{dbsize, flushall, flushdb, swapdb};
use generic::{copy, del, exists, move_, rename, renamenx, select, touch, type_};
use object::{object_encoding, object_freq, object_help, object_idletime, object_refcount};
use scan::{keys, randomkey, scan};

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "del",
        key_specs: &[KeySpec::range(kf::RM_DELETE, 1, -1, 1)],
        arity: -2,
        flags: flags::WRITE,
        first_key: 1,
        last_key: -1,
        key_step: 1,
        acl: acl::KEYSPACE | acl::WRITE | acl::SLOW,
        summary: "Delete a key",
        complexity: "O(N) where N is the number of keys that will be removed. When a key to remove holds a value other than a string, the individual complexity for this key is O(M) where M is the number of elements in the list, set, sorted set or hash. Removing a single key that holds a string value is O(1).",
        tips: &["request_policy:multi_shard", "response_policy:agg_sum"],
        handler: del,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "unlink",
        key_specs: &[KeySpec::range(kf::RM_DELETE, 1, -1, 1)],
        arity: -2,
        flags: flags::WRITE | flags::FAST,
        first_key: 1,
        last_key: -1,
        key_step: 1,
        acl: acl::KEYSPACE | acl::WRITE | acl::FAST,
        summary: "Delete a key asynchronously in another thread. Otherwise it is just as DEL, but non blocking.",
        since: "4.0.0",
        complexity: "O(1) for each key removed regardless of its size. Then the command does O(N) work in a different thread in order to reclaim memory, where N is the number of allocations the deleted objects where composed of.",
        tips: &["request_policy:multi_shard", "response_policy:agg_sum"],
        handler: del,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "exists",
        key_specs: &[KeySpec::range(kf::RO, 1, -1, 1)],
        arity: -2,
        flags: flags::READONLY | flags::FAST,
        first_key: 1,
        last_key: -1,
        key_step: 1,
        acl: acl::KEYSPACE | acl::READ | acl::FAST,
        summary: "Determine if a key exists",
        complexity: "O(N) where N is the number of keys to check.",
        tips: &["request_policy:multi_shard", "response_policy:agg_sum"],
        handler: exists,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "type",
        key_specs: &[KeySpec::range(kf::RO, 1, 0, 1)],
        arity: 2,
        flags: flags::READONLY | flags::FAST,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::KEYSPACE | acl::READ | acl::FAST,
        summary: "Determine the type stored at key",
        handler: type_,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "touch",
        key_specs: &[KeySpec::range(kf::RO, 1, -1, 1)],
        arity: -2,
        flags: flags::READONLY | flags::FAST,
        first_key: 1,
        last_key: -1,
        key_step: 1,
        acl: acl::KEYSPACE | acl::READ | acl::FAST,
        summary: "Alters the last access time of a key(s). Returns the number of existing keys specified.",
        since: "3.2.1",
        complexity: "O(N) where N is the number of keys that will be touched.",
        tips: &["request_policy:multi_shard", "response_policy:agg_sum"],
        handler: touch,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "rename",
        key_specs: &[KeySpec::range(kf::RW_ACCESS_DELETE, 1, 0, 1), KeySpec::range(kf::OW_UPDATE, 2, 0, 1)],
        arity: 3,
        flags: flags::WRITE,
        first_key: 1,
        last_key: 2,
        key_step: 1,
        acl: acl::KEYSPACE | acl::WRITE | acl::SLOW,
        summary: "Rename a key",
        handler: rename,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "renamenx",
        key_specs: &[KeySpec::range(kf::RW_ACCESS_DELETE, 1, 0, 1), KeySpec::range(kf::OW_INSERT, 2, 0, 1)],
        arity: 3,
        flags: flags::WRITE | flags::FAST,
        first_key: 1,
        last_key: 2,
        key_step: 1,
        acl: acl::KEYSPACE | acl::WRITE | acl::FAST,
        summary: "Rename a key, only if the new key does not exist",
        handler: renamenx,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "copy",
        key_specs: &[KeySpec::range(kf::RO_ACCESS, 1, 0, 1), KeySpec::range(kf::OW_UPDATE, 2, 0, 1)],
        arity: -3,
        flags: flags::WRITE | flags::DENYOOM,
        first_key: 1,
        last_key: 2,
        key_step: 1,
        acl: acl::KEYSPACE | acl::WRITE | acl::SLOW,
        summary: "Copy a key",
        since: "6.2.0",
        complexity: "O(N) worst case for collections, where N is the number of nested items. O(1) for string values.",
        handler: copy,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "move",
        key_specs: &[KeySpec::range(kf::RW_ACCESS_UPDATE, 1, 0, 1)],
        arity: 3,
        flags: flags::WRITE | flags::FAST,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::KEYSPACE | acl::WRITE | acl::FAST,
        summary: "Move a key to another database",
        handler: move_,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "select",
        arity: 2,
        flags: flags::LOADING | flags::STALE | flags::FAST,
        acl: acl::FAST | acl::CONNECTION,
        summary: "Change the selected database for the current connection",
        group: "connection",
        handler: select,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "keys",
        arity: 2,
        flags: flags::READONLY,
        acl: acl::KEYSPACE | acl::READ | acl::SLOW | acl::DANGEROUS,
        summary: "Find all keys matching the given pattern",
        complexity: "O(N) with N being the number of keys in the database, under the assumption that the key names in the database and the given pattern have limited length.",
        tips: &["request_policy:all_shards", "nondeterministic_output_order"],
        handler: keys,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "scan",
        arity: -2,
        flags: flags::READONLY,
        acl: acl::KEYSPACE | acl::READ | acl::SLOW,
        summary: "Incrementally iterate the keys space",
        since: "2.8.0",
        complexity: "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.",
        tips: &["nondeterministic_output", "request_policy:special"],
        handler: scan,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "randomkey",
        arity: 1,
        flags: flags::READONLY,
        acl: acl::KEYSPACE | acl::READ | acl::SLOW,
        summary: "Return a random key from the keyspace",
        tips: &["request_policy:all_shards", "nondeterministic_output"],
        handler: randomkey,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "dbsize",
        arity: 1,
        flags: flags::READONLY | flags::FAST,
        acl: acl::KEYSPACE | acl::READ | acl::FAST,
        summary: "Return the number of keys in the selected database",
        group: "server",
        tips: &["request_policy:all_shards", "response_policy:agg_sum"],
        handler: dbsize,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "flushdb",
        arity: -1,
        flags: flags::WRITE,
        acl: acl::KEYSPACE | acl::WRITE | acl::SLOW | acl::DANGEROUS,
        summary: "Remove all keys from the current database",
        group: "server",
        complexity: "O(N) where N is the number of keys in the selected database",
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        handler: flushdb,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "flushall",
        arity: -1,
        flags: flags::WRITE,
        acl: acl::KEYSPACE | acl::WRITE | acl::SLOW | acl::DANGEROUS,
        summary: "Remove all keys from all databases",
        group: "server",
        complexity: "O(N) where N is the total number of keys in all databases",
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        handler: flushall,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "swapdb",
        arity: 3,
        flags: flags::WRITE | flags::FAST,
        acl: acl::KEYSPACE | acl::WRITE | acl::FAST | acl::DANGEROUS,
        summary: "Swaps two Redis databases",
        since: "4.0.0",
        group: "server",
        complexity:
            "O(N) where N is the count of clients watching or blocking on keys from both databases.",
        handler: swapdb,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "object",
        arity: -2,
        acl: acl::SLOW,
        summary: "A container for object introspection commands",
        since: "2.2.3",
        complexity: "Depends on subcommand.",
        subcommands: SUBCOMMANDS,
        ..CommandSpec::DEFAULT
    },
];

/// A key-reading OBJECT subcommand (`OBJECT <name> key`).
const fn key_sub(
    name: &'static str,
    summary: &'static str,
    since: &'static str,
    handler: crate::cmd::spec::Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity: 3,
        flags: flags::READONLY,
        first_key: 2,
        last_key: 2,
        key_step: 1,
        acl: acl::KEYSPACE | acl::READ | acl::SLOW,
        summary,
        since,
        tips: &["nondeterministic_output"],
        handler,
        ..CommandSpec::DEFAULT
    }
}

/// OBJECT's subcommands.
const SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        key_specs: &[KeySpec::range(kf::RO, 2, 0, 1)],
        ..key_sub(
            "encoding",
            "Inspect the internal encoding of a Redis object",
            "2.2.3",
            object_encoding,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::range(kf::RO, 2, 0, 1)],
        ..key_sub(
            "freq",
            "Get the logarithmic access frequency counter of a Redis object",
            "4.0.0",
            object_freq,
        )
    },
    CommandSpec {
        acl: acl::KEYSPACE | acl::SLOW,
        ..CommandSpec::help_sub("6.2.0", "generic", object_help)
    },
    CommandSpec {
        key_specs: &[KeySpec::range(kf::RO, 2, 0, 1)],
        ..key_sub(
            "idletime",
            "Get the time since a Redis object was last accessed",
            "2.2.3",
            object_idletime,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::range(kf::RO, 2, 0, 1)],
        ..key_sub(
            "refcount",
            "Get the number of references to the value of the key",
            "2.2.3",
            object_refcount,
        )
    },
];
