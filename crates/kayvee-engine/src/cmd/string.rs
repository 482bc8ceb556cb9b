//! String commands (Redis "string" group): GET, SET and its variants, MGET/MSET, GETSET,
//! GETDEL, GETEX, APPEND, STRLEN, GETRANGE/SUBSTR, SETRANGE. The counters (INCR family) live in
//! `string_num`, SET/GETEX option parsing in `string_opts`, bit commands in `bits`.
//!
//! Semantics and reply texts follow Redis 7.0.15 (checked against the real server; the
//! transcripts in `tests/transcripts/string*.txt` were recorded from it).

use super::string_num;
use super::string_opts::{expire_at_ms, ExpireUnit, Mode, SetOpts};
use crate::argv::Argv;
use crate::command::{acl, flags, CommandSpec};
use crate::error::{CmdResult, Error};
use crate::keyspec::{kf, FoundKey, InvalidKeyArgs, KeySpec};
use crate::notify::{class as nc, emit};
use crate::reply::ReplySink;
use crate::value::{Entry, Meta, Value};
use crate::{util, Cx};
use alloc::vec::Vec;
use kayvee_pds::SmallBytes;

/// The string bytes of an entry, or WRONGTYPE for any other type.
#[inline]
pub(crate) fn as_str(entry: &Entry) -> Result<&[u8], Error> {
    match &entry.value {
        Value::Str(s) => Ok(s),
        _ => Err(Error::WrongType),
    }
}

/// Takes the string out of an entry to modify it (the entry is left holding an empty string
/// until [`store_raw`] puts the result back), or WRONGTYPE (the entry untouched).
pub(crate) fn take_str(entry: &mut Entry) -> Result<Vec<u8>, Error> {
    match &mut entry.value {
        Value::Str(s) => Ok(core::mem::take(s).into_vec()),
        _ => Err(Error::WrongType),
    }
}

/// Stores a string modified in place: Redis reports such strings as `raw`.
pub(crate) fn store_raw(entry: &mut Entry, bytes: Vec<u8>) {
    entry.value = Value::Str(SmallBytes::from_vec(bytes));
    entry.meta.set_flag(Meta::RAW | Meta::EMBSTR, false);
    entry.meta.set_flag(Meta::RAW, true);
}

/// A fresh string value (Redis's `tryObjectEncoding` result: int/embstr/raw by content).
#[inline]
fn str_value(b: &[u8]) -> Value {
    Value::Str(SmallBytes::from_slice(b))
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
    handler: crate::command::Handler,
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
            string_num::incr,
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
            string_num::decr,
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
            string_num::incrby,
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
            string_num::decrby,
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
            string_num::incrbyfloat,
        )
    },
];

/// GET key: the hot path, one hash lookup and no allocation.
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

fn get(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let now = cx.now_ms();
    match cx.db().lookup_read(args.get(1), now) {
        Some(e) => out.bulk(as_str(e)?),
        None => out.null(),
    }
    Ok(())
}

/// SET key value [NX|XX] [GET] [EX s|PX ms|EXAT t|PXAT t|KEEPTTL]. Options are parsed only
/// when there are some, so plain SET is one store.
fn set(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let now = cx.now_ms();
    if args.len() == 3 {
        cx.db().set(args.get(1), str_value(args.get(2)), now, false);
        cx.propagate_verbatim();
        emit(cx, nc::STRING, "set", args.get(1));
        out.ok();
        return Ok(());
    }
    let opts = SetOpts::parse(args, 3, Mode::Set)?;
    let at = opts.expire_at(now, "set")?;
    set_generic(cx, args, &opts, at, out)
}

/// The body of SET once options are known: GET's old value first (WRONGTYPE stops here),
/// then the NX/XX condition, the store and the TTL.
fn set_generic(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    opts: &SetOpts<'_>,
    at: Option<u64>,
    out: &mut dyn ReplySink,
) -> CmdResult {
    let (key, val) = (args.get(1), args.get(2));
    let now = cx.now_ms();
    let db = cx.db();
    if opts.get {
        match db.lookup_read(key, now) {
            Some(e) => out.bulk(as_str(e)?),
            None => out.null(),
        }
    }
    if opts.nx || opts.xx {
        let found = db.contains(key, now);
        if (opts.nx && found) || (opts.xx && !found) {
            if !opts.get {
                out.null();
            }
            return Ok(());
        }
    }
    db.set(key, str_value(val), now, opts.keepttl);
    match at {
        Some(at) => {
            // A time already past still stores the key; it expires on its next access, as in
            // 7.0.
            db.set_expire(key, at);
            propagate_set_pxat(cx, key, val, at);
        }
        None if opts.get => propagate_without_get(cx, args),
        None => cx.propagate_verbatim(),
    }
    emit(cx, nc::STRING, "set", key);
    if at.is_some() {
        emit(cx, nc::GENERIC, "expire", key);
    }
    if !opts.get {
        out.ok();
    }
    Ok(())
}

/// Propagates a SET with a TTL (SET EX/PX/EXAT/PXAT, SETEX, PSETEX) as the absolute
/// `SET key value PXAT ms`.
fn propagate_set_pxat(cx: &mut Cx<'_>, key: &[u8], val: &[u8], at_ms: u64) {
    if cx.propagating() {
        let ms = crate::aof::itoa(at_ms);
        cx.propagate(&[b"SET", key, val, b"PXAT", ms.as_bytes()]);
    }
}

/// Propagates `SET ... GET` without its GET option (the old value only matters to the
/// client), as Redis 7.0 does; the other arguments keep the client's spelling.
fn propagate_without_get(cx: &mut Cx<'_>, args: &Argv<'_>) {
    if !cx.propagating() {
        return;
    }
    let mut dropped = false;
    let prop: Vec<&[u8]> = args
        .iter()
        .enumerate()
        .filter(|&(i, a)| {
            let get = !dropped && i >= 3 && a.eq_ignore_ascii_case(b"GET");
            dropped |= get;
            !get
        })
        .map(|(_, a)| a)
        .collect();
    cx.propagate(&prop);
}

/// SETNX key value: 1 when stored, 0 when the key existed.
fn setnx(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let now = cx.now_ms();
    let db = cx.db();
    if db.contains(args.get(1), now) {
        out.int(0);
    } else {
        db.set(args.get(1), str_value(args.get(2)), now, false);
        cx.propagate_verbatim();
        emit(cx, nc::STRING, "set", args.get(1));
        out.int(1);
    }
    Ok(())
}

/// SETEX key seconds value.
fn setex(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    set_with_ttl(cx, args, ExpireUnit::Seconds, "setex", out)
}

/// PSETEX key milliseconds value.
fn psetex(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    set_with_ttl(cx, args, ExpireUnit::Millis, "psetex", out)
}

/// SETEX/PSETEX: a SET with a relative TTL given as the second argument.
fn set_with_ttl(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    unit: ExpireUnit,
    cmd: &str,
    out: &mut dyn ReplySink,
) -> CmdResult {
    let now = cx.now_ms();
    let at = expire_at_ms(args.get(2), unit, false, now, cmd)?;
    let key = args.get(1);
    let db = cx.db();
    db.set(key, str_value(args.get(3)), now, false);
    db.set_expire(key, at);
    propagate_set_pxat(cx, key, args.get(3), at);
    emit(cx, nc::STRING, "set", key);
    emit(cx, nc::GENERIC, "expire", key);
    out.ok();
    Ok(())
}

/// MGET key [key ...]: nil for missing keys and for keys of other types.
fn mget(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let now = cx.now_ms();
    let db = cx.db();
    out.array(args.len() - 1);
    for key in args.iter().skip(1) {
        match db.lookup_read(key, now).map(as_str) {
            Some(Ok(s)) => out.bulk(s),
            _ => out.null(),
        }
    }
    Ok(())
}

/// Checks MSET/MSETNX's key/value pairing (Redis reports an odd count as an arity error).
fn check_pairs(args: &Argv<'_>, cmd: &str) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Err(Error::WrongArity(cmd.into()));
    }
    Ok(())
}

/// MSET key value [key value ...]
fn mset(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    check_pairs(args, "mset")?;
    mset_all(cx, args);
    out.ok();
    Ok(())
}

/// Stores every pair of MSET/MSETNX, later pairs winning.
fn mset_all(cx: &mut Cx<'_>, args: &Argv<'_>) {
    let now = cx.now_ms();
    for i in (1..args.len()).step_by(2) {
        cx.db()
            .set(args.get(i), str_value(args.get(i + 1)), now, false);
        cx.propagate_verbatim();
        emit(cx, nc::STRING, "set", args.get(i));
    }
}

/// MSETNX key value [key value ...]: all or nothing; 0 when any key exists.
fn msetnx(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    check_pairs(args, "msetnx")?;
    let now = cx.now_ms();
    let db = cx.db();
    if (1..args.len())
        .step_by(2)
        .any(|i| db.contains(args.get(i), now))
    {
        out.int(0);
        return Ok(());
    }
    mset_all(cx, args);
    out.int(1);
    Ok(())
}

/// GETSET key value: replies the old value, stores the new one (dropping any TTL).
fn getset(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let now = cx.now_ms();
    let db = cx.db();
    match db.lookup_read(args.get(1), now) {
        Some(e) => out.bulk(as_str(e)?),
        None => out.null(),
    }
    db.set(args.get(1), str_value(args.get(2)), now, false);
    cx.propagate_verbatim();
    emit(cx, nc::STRING, "set", args.get(1));
    Ok(())
}

/// GETDEL key: replies the value and deletes the key (nil when missing).
fn getdel(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let now = cx.now_ms();
    let db = cx.db();
    match db.lookup_read(args.get(1), now) {
        Some(e) => out.bulk(as_str(e)?),
        None => {
            out.null();
            return Ok(());
        }
    }
    db.remove(args.get(1), now);
    cx.propagate(&[b"DEL", args.get(1)]);
    emit(cx, nc::GENERIC, "del", args.get(1));
    Ok(())
}

/// GETEX key [EX s|PX ms|EXAT t|PXAT t|PERSIST]: GET that also sets or clears the TTL; a time
/// already past deletes the key. Option syntax is checked first, the expire value only after
/// the lookup (a missing key answers nil even to `EX 0`), as in Redis.
fn getex(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let opts = SetOpts::parse(args, 2, Mode::GetEx)?;
    let now = cx.now_ms();
    let key = args.get(1);
    let db = cx.db();
    let Some(e) = db.lookup_read(key, now) else {
        out.null();
        return Ok(());
    };
    let s = as_str(e)?;
    // The expire value is checked only once the key is known to hold a string.
    let at = opts.expire_at(now, "getex")?;
    out.bulk(s);
    let event = match at {
        Some(at) if at <= now => db.remove(key, now).map(|_| "del"),
        Some(at) => db.set_expire(key, at).then_some("expire"),
        None if opts.persist => db.persist(key).then_some("persist"),
        None => None,
    };
    if let Some(event) = event {
        match (event, at) {
            ("expire", Some(at)) if cx.propagating() => {
                let ms = crate::aof::itoa(at);
                cx.propagate(&[b"PEXPIREAT", key, ms.as_bytes()]);
            }
            ("del", _) => cx.propagate(&[b"DEL", key]),
            ("persist", _) => cx.propagate(&[b"PERSIST", key]),
            _ => {}
        }
        emit(cx, nc::GENERIC, event, key);
    }
    Ok(())
}

/// APPEND key value: the new length. A new key takes the value as SET would; an existing
/// string grows in place (and becomes `raw`).
fn append(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (key, val) = (args.get(1), args.get(2));
    let now = cx.now_ms();
    let max = cx.core.config.proto_max_bulk_len;
    let db = cx.db();
    let Some(entry) = db.lookup_write(key, now) else {
        db.set(key, str_value(val), now, false);
        cx.propagate_verbatim();
        emit(cx, nc::STRING, "append", key);
        out.int(val.len() as i64);
        return Ok(());
    };
    let total = as_str(entry)?.len() + val.len();
    if total as u64 > max {
        return Err(Error::StringTooLong);
    }
    let mut bytes = take_str(entry)?;
    bytes.reserve_exact(val.len());
    bytes.extend_from_slice(val);
    store_raw(entry, bytes);
    // A modification for WATCH even when nothing was appended, as in Redis.
    db.modified(key);
    cx.propagate_verbatim();
    emit(cx, nc::STRING, "append", key);
    out.int(total as i64);
    Ok(())
}

/// STRLEN key: 0 when missing.
fn strlen(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let now = cx.now_ms();
    let len = match cx.db().lookup_read(args.get(1), now) {
        Some(e) => as_str(e)?.len(),
        None => 0,
    };
    out.int(len as i64);
    Ok(())
}

/// The byte range GETRANGE selects from a string of `len` bytes (inclusive indexes, negative
/// ones counting from the end), or `None` when empty.
pub(crate) fn clamp_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    if (start < 0 && end < 0 && start > end) || len == 0 {
        return None;
    }
    let start = if start < 0 { len + start } else { start }.max(0);
    let end = if end < 0 { len + end } else { end }.max(0).min(len - 1);
    (start <= end).then_some((start as usize, end as usize))
}

/// GETRANGE key start end (and its old name SUBSTR): an empty string when out of range or
/// missing. The indexes are checked before the key.
fn getrange(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let start = util::parse_i64(args.get(2)).ok_or(Error::NotInteger)?;
    let end = util::parse_i64(args.get(3)).ok_or(Error::NotInteger)?;
    let now = cx.now_ms();
    let s = match cx.db().lookup_read(args.get(1), now) {
        Some(e) => as_str(e)?,
        None => &[],
    };
    match clamp_range(start, end, s.len()) {
        Some((a, b)) => out.bulk(&s[a..=b]),
        None => out.bulk(b""),
    }
    Ok(())
}

/// SETRANGE key offset value: overwrites from `offset`, zero-padding as needed; replies the
/// new length. An empty value changes nothing (and creates no key).
fn setrange(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (key, val) = (args.get(1), args.get(3));
    let offset = util::parse_i64(args.get(2)).ok_or(Error::NotInteger)?;
    if offset < 0 {
        return Err(Error::msg("ERR offset is out of range"));
    }
    let offset = offset as u64;
    let now = cx.now_ms();
    let max = cx.core.config.proto_max_bulk_len;
    let db = cx.db();
    let Some(entry) = db.lookup_write(key, now) else {
        if val.is_empty() {
            out.int(0);
            return Ok(());
        }
        let bytes = overwrite(Vec::new(), offset, val, max)?;
        out.int(bytes.len() as i64);
        let mut entry = Entry::new(Value::Str(SmallBytes::new()), now);
        store_raw(&mut entry, bytes);
        db.insert_entry(key, entry, None);
        cx.propagate_verbatim();
        emit(cx, nc::STRING, "setrange", key);
        return Ok(());
    };
    let olen = as_str(entry)?.len();
    if val.is_empty() {
        out.int(olen as i64);
        return Ok(());
    }
    if offset + val.len() as u64 > max {
        return Err(Error::StringTooLong);
    }
    let bytes = overwrite(take_str(entry)?, offset, val, max)?;
    out.int(bytes.len() as i64);
    store_raw(entry, bytes);
    // A modification for WATCH even when the bytes are the same, as in Redis.
    db.modified(key);
    cx.propagate_verbatim();
    emit(cx, nc::STRING, "setrange", key);
    Ok(())
}

/// Writes `val` into `bytes` at `offset`, zero-padding; fails past `max` bytes in total.
fn overwrite(mut bytes: Vec<u8>, offset: u64, val: &[u8], max: u64) -> Result<Vec<u8>, Error> {
    let end = offset
        .checked_add(val.len() as u64)
        .filter(|&e| e <= max)
        .ok_or(Error::StringTooLong)? as usize;
    if bytes.len() < end {
        bytes.resize(end, 0);
    }
    bytes[offset as usize..end].copy_from_slice(val);
    Ok(bytes)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{ArgvBuf, Config, ConnInfo, Engine, Handle, Now, Reply, ReplyTree, Transport};
    use alloc::string::String;

    /// An engine with one client, for tests that need a configuration or look inside values.
    pub(crate) struct Bench {
        pub engine: Engine,
        client: Handle,
        now: Now,
    }

    impl Bench {
        pub fn new(config: Config) -> Self {
            let now = Now::from_ms(1_700_000_000_000);
            let mut engine = Engine::new(config, 7, now);
            let conn = ConnInfo {
                transport: Transport::Unix {
                    path: String::from("/t"),
                },
                fd: 1,
            };
            let client = engine.connect(conn, now);
            Bench {
                engine,
                client,
                now,
            }
        }

        /// Runs a whitespace-separated command; returns its one reply.
        pub fn run(&mut self, line: &str) -> Reply {
            self.run_args(&line.split_ascii_whitespace().collect::<Vec<_>>())
        }

        /// Runs a command given as arguments; returns its one reply.
        pub fn run_args(&mut self, args: &[&str]) -> Reply {
            let argv = ArgvBuf::from_args(args);
            let mut tree = ReplyTree::new(Default::default());
            self.engine
                .execute(self.client, &argv.argv(), self.now, &mut tree);
            tree.take().pop().expect("one reply")
        }

        /// The encoding OBJECT ENCODING would report for a key of db 0.
        pub fn encoding(&mut self, key: &str) -> &'static str {
            let e = self.engine.core.dbs[0]
                .peek(key.as_bytes(), 0)
                .expect("key");
            e.value.encoding(&e.meta)
        }
    }

    fn too_long() -> Reply {
        Reply::Error(alloc::format!("{}", Error::StringTooLong))
    }

    #[test]
    fn growth_is_bounded_by_proto_max_bulk_len() {
        let mut b = Bench::new(Config {
            proto_max_bulk_len: 10,
            ..Config::default()
        });
        assert_eq!(b.run("APPEND k 12345678"), Reply::Int(8));
        assert_eq!(b.run("APPEND k 12"), Reply::Int(10));
        assert_eq!(b.run("APPEND k x"), too_long());
        assert_eq!(b.run("SETRANGE k 9 x"), Reply::Int(10));
        assert_eq!(b.run("SETRANGE k 9 xy"), too_long());
        assert_eq!(b.run("SETRANGE n 10 x"), too_long());
        assert_eq!(b.run("GET k"), Reply::Bulk(b"123456781x".to_vec()));
        let bad_offset = Reply::Error("ERR bit offset is not an integer or out of range".into());
        assert_eq!(b.run("SETBIT k 80 1"), bad_offset);
        assert_eq!(b.run("GETBIT k 80"), bad_offset);
        assert_eq!(b.run("SETBIT k 79 1"), Reply::Int(0));
    }

    #[test]
    fn encodings_match_redis() {
        // Each expectation was checked with OBJECT ENCODING on redis-server 7.0.15.
        let mut b = Bench::new(Config::default());
        let cases = [
            ("SET a 123", "a", "int"),
            ("SET a abc", "a", "embstr"),
            ("MSET m 5", "m", "int"),
            ("GETSET m 7", "m", "int"),
            ("SETEX e 100 7", "e", "int"),
            ("INCRBYFLOAT f 3001", "f", "embstr"),
            ("INCRBYFLOAT f 1.5", "f", "embstr"),
            ("INCR f2", "f2", "int"),
            ("APPEND n 12", "n", "int"),
            ("SET x 1", "x", "int"),
            ("SETRANGE x 0 y", "x", "raw"),
            ("INCR i", "i", "int"),
            ("INCRBY i 5", "i", "int"),
            ("SETRANGE s 0 5", "s", "raw"),
            ("SETBIT bt 1 1", "bt", "raw"),
            ("SET c 12", "c", "int"),
            ("SETBIT c 100 0", "c", "raw"),
            ("BITOP NOT d c", "d", "raw"),
        ];
        for (cmd, key, want) in cases {
            b.run(cmd);
            assert_eq!(b.encoding(key), want, "after {cmd}");
        }
        b.run("SET z 10");
        b.run("INCRBYFLOAT z 1");
        assert_eq!(b.encoding("z"), "embstr");
        b.run("INCR z");
        assert_eq!(b.encoding("z"), "int");
        b.run("SET r 1");
        b.run_args(&["SETRANGE", "r", "0", ""]);
        assert_eq!(b.encoding("r"), "int");
        b.run_args(&["APPEND", "r", ""]);
        assert_eq!(b.encoding("r"), "raw");
        b.run_args(&["APPEND", "new", ""]);
        assert_eq!(b.encoding("new"), "embstr");
    }

    #[test]
    fn clamp_range_follows_getrange() {
        assert_eq!(clamp_range(0, -1, 5), Some((0, 4)));
        assert_eq!(clamp_range(-3, -1, 5), Some((2, 4)));
        assert_eq!(clamp_range(-100, 100, 5), Some((0, 4)));
        assert_eq!(clamp_range(3, 1, 5), None);
        assert_eq!(clamp_range(-1, -3, 5), None);
        assert_eq!(clamp_range(0, 0, 0), None);
        assert_eq!(clamp_range(5, 10, 5), None);
        assert_eq!(clamp_range(i64::MIN, i64::MAX, 3), Some((0, 2)));
    }

    #[test]
    fn overwrite_pads_and_limits() {
        assert_eq!(
            overwrite(b"abc".to_vec(), 5, b"xy", 100).unwrap(),
            b"abc\0\0xy"
        );
        assert_eq!(
            overwrite(b"abcdef".to_vec(), 1, b"XY", 100).unwrap(),
            b"aXYdef"
        );
        assert_eq!(overwrite(Vec::new(), 8, b"ab", 10).unwrap().len(), 10);
        assert_eq!(
            overwrite(Vec::new(), 9, b"ab", 10),
            Err(Error::StringTooLong)
        );
        assert_eq!(
            overwrite(Vec::new(), u64::MAX, b"ab", 10),
            Err(Error::StringTooLong)
        );
    }
}
