//! String commands (Redis "string" group): the group's command table and the helpers its files
//! share. GET, SET and their variants are in `get_set` (SET/GETEX option parsing in
//! `get_set::options`), the commands on part of a string (APPEND, STRLEN, GETRANGE/SUBSTR,
//! SETRANGE) in `range`, the counters (INCR family) in `numbers`, LCS in `lcs`; bit commands are in
//! `cmd::bits`.
//!
//! Semantics and reply texts follow Redis 7.0.15 (checked against the real server; the
//! transcripts in `tests/transcripts/string*.txt` were recorded from it).

pub(crate) mod get_set;
mod lcs;
mod numbers;
mod range;

use crate::argv::Argv;
use crate::cmd::spec::CommandSpec;
use crate::command::{acl, flags};
use crate::error::Error;
use crate::keyspec::{kf, FoundKey, InvalidKeyArgs, KeySpec};
use crate::value::{Entry, Meta, Value, ValueRef};
use alloc::vec::Vec;
use get_set::{get, getdel, getex, getset, mget, mset, msetnx, psetex, set, setex, setnx};
use kayvee_pds::SmallBytes;
use range::{append, getrange, setrange, strlen};

/// The string bytes of an entry, or WRONGTYPE for any other type.
#[inline]
pub(crate) fn as_str(entry: &Entry) -> Result<&[u8], Error> {
    match entry.value() {
        ValueRef::Str(s) => Ok(s),
        _ => Err(Error::WrongType),
    }
}

/// Takes the string out of an entry to modify it (the entry is left holding an empty string
/// until [`store_raw`] puts the result back), or WRONGTYPE (the entry untouched).
pub(crate) fn take_str(entry: &mut Entry) -> Result<Vec<u8>, Error> {
    entry.take_str().ok_or(Error::WrongType)
}

/// Stores a string modified in place: Redis reports such strings as `raw`. The buffer keeps its
/// spare room, and the next [`take_str`] gets it back without a copy while nothing shares it.
pub(crate) fn store_raw(entry: &mut Entry, bytes: Vec<u8>) {
    entry.set_value(Value::Str(SmallBytes::from_growable(bytes)));
    entry.meta_mut().set_flag(Meta::RAW | Meta::EMBSTR, false);
    entry.meta_mut().set_flag(Meta::RAW, true);
}

/// Makes room in `bytes` for `extra` more bytes the way Redis's `sdsMakeRoomFor` does: double
/// the needed length below 1 MiB, add 1 MiB above it, so a string grown by small writes costs
/// amortised O(1) per byte with at most 1 MiB of slack.
pub(crate) fn make_room(bytes: &mut Vec<u8>, extra: usize) {
    const MAX_PREALLOC: usize = 1024 * 1024;
    let need = bytes.len().saturating_add(extra);
    if need <= bytes.capacity() {
        return;
    }
    let target = if need < MAX_PREALLOC {
        need * 2
    } else {
        need.saturating_add(MAX_PREALLOC)
    };
    bytes.reserve_exact(target - bytes.len());
}

/// "00" to "99", for [`format_i64`].
const DIGIT_PAIRS: &[u8; 200] = b"00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899";

/// Writes `v` in decimal into `buf` (20 bytes hold any i64) without allocating.
pub(crate) fn format_i64(v: i64, buf: &mut [u8; 20]) -> &[u8] {
    let mut n = v.unsigned_abs();
    let mut i = buf.len();
    // Two digits per division.
    while n >= 100 {
        let pair = (n % 100) as usize * 2;
        n /= 100;
        i -= 2;
        buf[i..i + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    }
    if n >= 10 {
        let pair = n as usize * 2;
        i -= 2;
        buf[i..i + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    } else {
        i -= 1;
        buf[i] = b'0' + n as u8;
    }
    if v < 0 {
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

const GETRANGE_COMPLEXITY: &str = "O(N) where N is the length of the returned string. The \
complexity is ultimately determined by the returned length, but because creating a substring \
from an existing string is very cheap, it can be considered O(1) for small strings.";

/// A string-group command spec with the fields every entry here shares.
const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    acl: u32,
    summary: &'static str,
    since: &'static str,
    handler: crate::cmd::spec::Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl,
        summary,
        since,
        group: "string",
        handler,
        ..CommandSpec::DEFAULT
    }
}

const RO_FAST: u32 = flags::READONLY | flags::FAST;
const W_OOM: u32 = flags::WRITE | flags::DENYOOM;
const W_OOM_FAST: u32 = flags::WRITE | flags::DENYOOM | flags::FAST;
const W_FAST: u32 = flags::WRITE | flags::FAST;
const ACL_R_FAST: u32 = acl::READ | acl::STRING | acl::FAST;
const ACL_W_FAST: u32 = acl::WRITE | acl::STRING | acl::FAST;
const ACL_W_SLOW: u32 = acl::WRITE | acl::STRING | acl::SLOW;
const ACL_R_SLOW: u32 = acl::READ | acl::STRING | acl::SLOW;

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[
    spec(
        "get",
        2,
        RO_FAST,
        ACL_R_FAST,
        "Get the value of a key",
        "1.0.0",
        get,
    ),
    CommandSpec {
        key_specs: &[KeySpec::range(kf::RW_ACCESS_UPDATE_VARIABLE_FLAGS, 1, 0, 1)
            .with_notes("RW and ACCESS due to the optional `GET` argument")],
        get_keys: Some(set_keys),
        ..spec(
            "set",
            -3,
            W_OOM,
            ACL_W_SLOW,
            "Set the string value of a key",
            "1.0.0",
            set,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::range(kf::OW_INSERT, 1, 0, 1)],
        ..spec(
            "setnx",
            3,
            W_OOM_FAST,
            ACL_W_FAST,
            "Set the value of a key, only if the key does not exist",
            "1.0.0",
            setnx,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::range(kf::OW_UPDATE, 1, 0, 1)],
        ..spec(
            "setex",
            4,
            W_OOM,
            ACL_W_SLOW,
            "Set the value and expiration of a key",
            "2.0.0",
            setex,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::range(kf::OW_UPDATE, 1, 0, 1)],
        ..spec(
            "psetex",
            4,
            W_OOM,
            ACL_W_SLOW,
            "Set the value and expiration in milliseconds of a key",
            "2.6.0",
            psetex,
        )
    },
    CommandSpec {
        last_key: -1,
        complexity: "O(N) where N is the number of keys to retrieve.",
        tips: &["request_policy:multi_shard"],
        ..spec(
            "mget",
            -2,
            RO_FAST,
            ACL_R_FAST,
            "Get the values of all the given keys",
            "1.0.0",
            mget,
        )
    },
    CommandSpec {
        last_key: -1,
        key_step: 2,
        complexity: "O(N) where N is the number of keys to set.",
        tips: &[
            "request_policy:multi_shard",
            "response_policy:all_succeeded",
        ],
        key_specs: &[KeySpec::range(kf::OW_UPDATE, 1, -1, 2)],
        ..spec(
            "mset",
            -3,
            W_OOM,
            ACL_W_SLOW,
            "Set multiple keys to multiple values",
            "1.0.1",
            mset,
        )
    },
    CommandSpec {
        last_key: -1,
        key_step: 2,
        complexity: "O(N) where N is the number of keys to set.",
        tips: &["request_policy:multi_shard", "response_policy:agg_min"],
        key_specs: &[KeySpec::range(kf::OW_INSERT, 1, -1, 2)],
        ..spec(
            "msetnx",
            -3,
            W_OOM,
            ACL_W_SLOW,
            "Set multiple keys to multiple values, only if none of the keys exist",
            "1.0.1",
            msetnx,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::range(kf::RW_ACCESS_UPDATE, 1, 0, 1)],
        ..spec(
            "getset",
            3,
            W_OOM_FAST,
            ACL_W_FAST,
            "Set the string value of a key and return its old value",
            "1.0.0",
            getset,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::range(kf::RW_ACCESS_DELETE, 1, 0, 1)],
        ..spec(
            "getdel",
            2,
            W_FAST,
            ACL_W_FAST,
            "Get the value of a key and delete the key",
            "6.2.0",
            getdel,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::range(kf::RW_ACCESS_UPDATE, 1, 0, 1)
            .with_notes("RW and UPDATE because it changes the TTL")],
        ..spec(
            "getex",
            -2,
            W_FAST,
            ACL_W_FAST,
            "Get the value of a key and optionally set its expiration",
            "6.2.0",
            getex,
        )
    },
    CommandSpec {
        complexity: "O(1). The amortized time complexity is O(1) assuming the appended value \
is small and the already present value is of any size, since the dynamic string library used \
by Redis will double the free space available on every reallocation.",
        key_specs: &[KeySpec::range(kf::RW_INSERT, 1, 0, 1)],
        ..spec(
            "append",
            3,
            W_OOM_FAST,
            ACL_W_FAST,
            "Append a value to a key",
            "2.0.0",
            append,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::range(kf::RO, 1, 0, 1)],
        ..spec(
            "strlen",
            2,
            RO_FAST,
            ACL_R_FAST,
            "Get the length of the value stored in a key",
            "2.2.0",
            strlen,
        )
    },
    CommandSpec {
        complexity: GETRANGE_COMPLEXITY,
        ..spec(
            "getrange",
            4,
            flags::READONLY,
            ACL_R_SLOW,
            "Get a substring of the string stored at a key",
            "2.4.0",
            getrange,
        )
    },
    CommandSpec {
        complexity: GETRANGE_COMPLEXITY,
        ..spec(
            "substr",
            4,
            flags::READONLY,
            ACL_R_SLOW,
            "Get a substring of the string stored at a key",
            "1.0.0",
            getrange,
        )
    },
    CommandSpec {
        complexity: "O(1), not counting the time taken to copy the new string in place. \
Usually, this string is very small so the amortized complexity is O(1). Otherwise, complexity \
is O(M) with M being the length of the value argument.",
        ..spec(
            "setrange",
            4,
            W_OOM,
            ACL_W_SLOW,
            "Overwrite part of a string at key starting at the specified offset",
            "2.2.0",
            setrange,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::range(kf::RW_ACCESS_UPDATE, 1, 0, 1)],
        ..spec(
            "incr",
            2,
            W_OOM_FAST,
            ACL_W_FAST,
            "Increment the integer value of a key by one",
            "1.0.0",
            numbers::incr,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::range(kf::RW_ACCESS_UPDATE, 1, 0, 1)],
        ..spec(
            "decr",
            2,
            W_OOM_FAST,
            ACL_W_FAST,
            "Decrement the integer value of a key by one",
            "1.0.0",
            numbers::decr,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::range(kf::RW_ACCESS_UPDATE, 1, 0, 1)],
        ..spec(
            "incrby",
            3,
            W_OOM_FAST,
            ACL_W_FAST,
            "Increment the integer value of a key by the given amount",
            "1.0.0",
            numbers::incrby,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::range(kf::RW_ACCESS_UPDATE, 1, 0, 1)],
        ..spec(
            "decrby",
            3,
            W_OOM_FAST,
            ACL_W_FAST,
            "Decrement the integer value of a key by the given number",
            "1.0.0",
            numbers::decrby,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::range(kf::RW_ACCESS_UPDATE, 1, 0, 1)],
        ..spec(
            "incrbyfloat",
            3,
            W_OOM_FAST,
            ACL_W_FAST,
            "Increment the float value of a key by the given amount",
            "2.6.0",
            numbers::incrbyfloat,
        )
    },
    CommandSpec {
        last_key: 2,
        complexity: "O(N*M) where N and M are the lengths of s1 and s2, respectively",
        ..spec(
            "lcs",
            -3,
            flags::READONLY,
            ACL_R_SLOW,
            "Find longest common substring",
            "7.0.0",
            lcs::lcs_command,
        )
    },
];

/// SET's key for COMMAND GETKEYSANDFLAGS: read and updated with a GET anywhere among the
/// options, else overwritten (Redis's `variable_flags`).
fn set_keys(args: &Argv<'_>) -> Result<Vec<FoundKey>, InvalidKeyArgs> {
    let get = (3..args.len()).any(|i| args.get(i).eq_ignore_ascii_case(b"GET"));
    let flags = if get {
        kf::RW_ACCESS_UPDATE
    } else {
        kf::OW_UPDATE
    };
    Ok(alloc::vec![FoundKey { index: 1, flags }])
}
