//! Stream commands (Redis "stream" group): the command table and the shared helpers (ID
//! parsing, typed lookups, entry replies, XCLAIM propagation). Appends and deletions (XADD,
//! XTRIM, XDEL, XSETID, XLEN) are in `add`, ranges in `range`, XREAD and XREADGROUP (blocking
//! included) in `read`, XGROUP and XACK in `group`, XPENDING, XCLAIM and XAUTOCLAIM in
//! `claim`, XINFO in `info`.
//!
//! Semantics, replies and error texts follow Redis 7.0.15 (checked against the real server).

mod add;
mod claim;
mod group;
mod info;
mod range;
mod read;

use crate::cmd::spec::{CommandSpec, Handler};
use crate::command::{acl, flags};
use crate::error::Error;
use crate::keyspec::{kf, BeginSearch, FindKeys, KeySpec};
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::value::stream::{OwnedEntry, Pending, RawEntry, Stream, StreamId};
use crate::value::CORRUPT_VALUE;
use crate::value::{ValueMut, ValueRef};
use crate::Cx;
use alloc::string::ToString;
use alloc::vec::Vec;

/// Redis's text for an ID that does not parse.
pub(crate) const INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";

/// Whether the command is replayed from the AOF, which the shell does at time 0: as Redis's
/// `mustObeyClient`, a replayed trim has no LIMIT (and LIMIT needs no `~`), a replayed XCLAIM
/// keeps the TIME it carries.
pub(crate) fn replaying(cx: &Cx<'_>) -> bool {
    cx.now_ms() == 0
}

/// Parses `ms` or `ms-seq` strictly (`seq` defaults to `missing_seq`); `-` and `+` mean the
/// smallest and largest IDs unless `strict`. With `seq_star`, `ms-*` is accepted and the flag
/// returned is false (sequence to be generated).
pub(crate) fn parse_id_full(
    arg: &[u8],
    missing_seq: u64,
    strict: bool,
    seq_star: bool,
) -> Result<(StreamId, bool), Error> {
    let bad = || Error::msg(INVALID_ID);
    if arg.len() > 127 {
        return Err(bad());
    }
    match arg {
        b"-" if !strict => return Ok((StreamId::MIN, true)),
        b"+" if !strict => return Ok((StreamId::MAX, true)),
        _ => {}
    }
    let (ms, seq) = match arg.iter().position(|&b| b == b'-') {
        Some(i) => (&arg[..i], Some(&arg[i + 1..])),
        None => (arg, None),
    };
    let ms = parse_u64(ms).ok_or_else(bad)?;
    match seq {
        None => Ok((StreamId::new(ms, missing_seq), true)),
        Some(b"*") if seq_star => Ok((StreamId::new(ms, 0), false)),
        Some(s) => Ok((StreamId::new(ms, parse_u64(s).ok_or_else(bad)?), true)),
    }
}

/// A non-negative decimal as Redis's `string2ull` takes it.
fn parse_u64(s: &[u8]) -> Option<u64> {
    if let Some(v) = parse_i64(s) {
        return u64::try_from(v).ok();
    }
    if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    core::str::from_utf8(s).ok()?.parse().ok()
}

/// An ID argument (`-`/`+` allowed; `ms` alone gets sequence `missing_seq`).
pub(crate) fn parse_id(arg: &[u8], missing_seq: u64) -> Result<StreamId, Error> {
    parse_id_full(arg, missing_seq, false, false).map(|r| r.0)
}

/// An ID argument where `-` and `+` are refused.
pub(crate) fn parse_strict_id(arg: &[u8], missing_seq: u64) -> Result<StreamId, Error> {
    parse_id_full(arg, missing_seq, true, false).map(|r| r.0)
}

/// A range bound: an ID or, with a leading `(`, the ID excluded (`start`: the next one, else
/// the previous one). `Ok(None)`: the exclusive bound passed the end of the ID space.
pub(crate) fn parse_range_bound(
    arg: &[u8],
    missing_seq: u64,
    start: bool,
) -> Result<Option<StreamId>, Error> {
    if arg.len() > 1 && arg[0] == b'(' {
        let id = parse_strict_id(&arg[1..], missing_seq)?;
        return Ok(if start { id.incr() } else { id.decr() });
    }
    parse_id(arg, missing_seq).map(Some)
}

/// The decimal text of an ID.
pub(crate) fn id_text(id: StreamId) -> Vec<u8> {
    id.write_text(&mut [0; 41]).to_vec()
}

/// Writes an ID as a bulk string.
pub(crate) fn reply_id(out: &mut dyn ReplySink, id: StreamId) {
    out.bulk(id.write_text(&mut [0; 41]));
}

/// Writes one entry: `[id, [field, value, ...]]`.
pub(crate) fn reply_raw_entry(out: &mut dyn ReplySink, e: &RawEntry<'_>) {
    out.array(2);
    reply_id(out, e.id);
    out.array(e.fields.len());
    for f in &e.fields {
        f.with_bytes(|b| out.bulk(b));
    }
}

/// Writes one owned entry: `[id, [field, value, ...]]`.
pub(crate) fn reply_entry(out: &mut dyn ReplySink, e: &OwnedEntry) {
    out.array(2);
    reply_id(out, e.id);
    out.array(e.fields.len());
    for f in &e.fields {
        out.bulk(f);
    }
}

/// Writes entries as an array.
pub(crate) fn reply_entries(out: &mut dyn ReplySink, entries: &[OwnedEntry]) {
    out.array(entries.len());
    for e in entries {
        reply_entry(out, e);
    }
}

/// `s` when its entries can be read; [`CORRUPT_VALUE`] for a stream restored with nodes that
/// are not well formed.
pub(crate) fn readable(s: &Stream) -> Result<&Stream, Error> {
    match s.corrupt {
        true => Err(Error::msg(CORRUPT_VALUE)),
        false => Ok(s),
    }
}

/// The stream at `key` for reading (counts a hit or miss); WRONGTYPE for another type,
/// [`CORRUPT_VALUE`] for a stream whose entries cannot be read.
pub(crate) fn read_stream<'c>(cx: &'c mut Cx<'_>, key: &[u8]) -> Result<Option<&'c Stream>, Error> {
    let now = cx.now_ms();
    match cx.db().lookup_read(key, now) {
        None => Ok(None),
        Some(e) => match e.value() {
            ValueRef::Stream(s) => readable(s).map(Some),
            _ => Err(Error::WrongType),
        },
    }
}

/// The stream at `key` for writing; WRONGTYPE for another type, [`CORRUPT_VALUE`] for a
/// stream whose entries cannot be read.
pub(crate) fn write_stream<'c>(
    cx: &'c mut Cx<'_>,
    key: &[u8],
) -> Result<Option<&'c mut Stream>, Error> {
    let now = cx.now_ms();
    match cx.db().lookup_write(key, now) {
        None => Ok(None),
        Some(e) => match e.value_mut() {
            ValueMut::Stream(s) if s.corrupt => Err(Error::msg(CORRUPT_VALUE)),
            ValueMut::Stream(s) => Ok(Some(s)),
            _ => Err(Error::WrongType),
        },
    }
}

/// Whether `key` holds a value of another type than stream (peeking, no stats).
pub(crate) fn check_type(cx: &mut Cx<'_>, key: &[u8]) -> Result<bool, Error> {
    let now = cx.now_ms();
    match cx.db().peek(key, now) {
        None => Ok(false),
        Some(e) if matches!(e.value(), ValueRef::Stream(_)) => Ok(true),
        Some(_) => Err(Error::WrongType),
    }
}

/// Redis's error for a missing key or group (`NOGROUP`).
pub(crate) fn no_group(key: &[u8], group: &[u8], cmd: &str) -> Error {
    let mut t = b"NOGROUP No such key '".to_vec();
    t.extend_from_slice(key);
    t.extend_from_slice(b"' or consumer group '");
    t.extend_from_slice(group);
    t.extend_from_slice(b"'");
    if !cmd.is_empty() {
        t.extend_from_slice(b" in ");
        t.extend_from_slice(cmd.as_bytes());
    }
    Error::Bytes(t)
}

/// Propagates a delivery or claim of `p` as Redis does: `XCLAIM key group consumer 0 id TIME
/// ms RETRYCOUNT n FORCE JUSTID LASTID last`.
pub(crate) fn propagate_claim(
    cx: &mut Cx<'_>,
    key: &[u8],
    group: &[u8],
    last: StreamId,
    p: &Pending,
) {
    if !cx.propagating() {
        return;
    }
    let id = id_text(p.id);
    let time = p.delivery_ms.to_string();
    let count = p.delivery_count.to_string();
    let last = id_text(last);
    cx.propagate(&[
        b"XCLAIM",
        key,
        group,
        &p.consumer,
        b"0",
        &id,
        b"TIME",
        time.as_bytes(),
        b"RETRYCOUNT",
        count.as_bytes(),
        b"FORCE",
        b"JUSTID",
        b"LASTID",
        &last,
    ]);
}

/// Propagates a group's position as `XGROUP SETID key group id ENTRIESREAD n`.
pub(crate) fn propagate_group_id(
    cx: &mut Cx<'_>,
    key: &[u8],
    group: &[u8],
    last: StreamId,
    read: i64,
) {
    if !cx.propagating() {
        return;
    }
    let id = id_text(last);
    let read = read.to_string();
    cx.propagate(&[
        b"XGROUP",
        b"SETID",
        key,
        group,
        &id,
        b"ENTRIESREAD",
        read.as_bytes(),
    ]);
}

/// A stream command with one key at argument 1.
const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    acl: u32,
    summary: &'static str,
    since: &'static str,
    handler: Handler,
) -> CommandSpec {
    CommandSpec::first_key(
        "stream", name, arity, flags, acl, summary, since, "O(1)", handler,
    )
}

/// An XGROUP / XINFO subcommand with its key at argument 2.
const fn sub(
    name: &'static str,
    arity: i32,
    flags: u32,
    acl: u32,
    key_flags: &'static [&'static str],
    summary: &'static str,
    handler: Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        first_key: 2,
        last_key: 2,
        key_step: 1,
        acl,
        summary,
        since: "5.0.0",
        group: "stream",
        key_flags,
        handler,
        ..CommandSpec::DEFAULT
    }
}

const W: u32 = flags::WRITE;
const W_OOM: u32 = flags::WRITE | flags::DENYOOM;
const W_FAST: u32 = flags::WRITE | flags::FAST;
const RO: u32 = flags::READONLY;
const A_W_FAST: u32 = acl::WRITE | acl::STREAM | acl::FAST;
const A_W_SLOW: u32 = acl::WRITE | acl::STREAM | acl::SLOW;
const A_R_SLOW: u32 = acl::READ | acl::STREAM | acl::SLOW;
const NONDET: &[&str] = &["nondeterministic_output"];

/// XREAD's key spec: the keys are the first half of what follows STREAMS.
const XREAD_SPECS: &[KeySpec] = &[KeySpec {
    notes: "",
    flags: kf::RO_ACCESS,
    begin_search: BeginSearch::Keyword {
        keyword: "STREAMS",
        startfrom: 1,
    },
    find_keys: FindKeys::Range {
        lastkey: -1,
        keystep: 1,
        limit: 2,
    },
}];

/// XREADGROUP's key spec, the same after its GROUP arguments.
const XREADGROUP_SPECS: &[KeySpec] = &[KeySpec {
    notes: "",
    flags: kf::RO_ACCESS,
    begin_search: BeginSearch::Keyword {
        keyword: "STREAMS",
        startfrom: 4,
    },
    find_keys: FindKeys::Range {
        lastkey: -1,
        keystep: 1,
        limit: 2,
    },
}];

const XGROUP_SUBS: &[CommandSpec] = &[
    CommandSpec {
        complexity: "O(1)",
        ..sub(
            "delconsumer",
            5,
            W,
            A_W_SLOW,
            kf::RW_DELETE,
            "Delete a consumer from a consumer group.",
            group::xgroup_delconsumer,
        )
    },
    CommandSpec {
        since: "6.2.0",
        ..sub(
            "createconsumer",
            5,
            W_OOM,
            A_W_SLOW,
            kf::RW_INSERT,
            "Create a consumer in a consumer group.",
            group::xgroup_createconsumer,
        )
    },
    sub(
        "setid",
        -5,
        W,
        A_W_SLOW,
        kf::RW_UPDATE,
        "Set a consumer group to an arbitrary last delivered ID value.",
        group::xgroup_setid,
    ),
    CommandSpec {
        complexity:
            "O(N) where N is the number of entries in the group's pending entries list (PEL).",
        ..sub(
            "destroy",
            4,
            W,
            A_W_SLOW,
            kf::RW_DELETE,
            "Destroy a consumer group.",
            group::xgroup_destroy,
        )
    },
    CommandSpec {
        complexity: "O(1)",
        ..sub(
            "create",
            -5,
            W_OOM,
            A_W_SLOW,
            kf::RW_INSERT,
            "Create a consumer group.",
            group::xgroup_create,
        )
    },
    CommandSpec {
        acl: acl::STREAM | acl::SLOW,
        ..CommandSpec::help_sub("5.0.0", "stream", group::xgroup_help)
    },
];

const XINFO_SUBS: &[CommandSpec] = &[
    sub(
        "groups",
        3,
        RO,
        A_R_SLOW,
        kf::RO_ACCESS,
        "List the consumer groups of a stream",
        info::xinfo_groups,
    ),
    CommandSpec {
        acl: acl::STREAM | acl::SLOW,
        ..CommandSpec::help_sub("5.0.0", "stream", info::xinfo_help)
    },
    CommandSpec {
        complexity: "O(1)",
        ..sub(
            "stream",
            -3,
            RO,
            A_R_SLOW,
            kf::RO_ACCESS,
            "Get information about a stream",
            info::xinfo_stream,
        )
    },
    CommandSpec {
        tips: NONDET,
        complexity: "O(1)",
        ..sub(
            "consumers",
            4,
            RO,
            A_R_SLOW,
            kf::RO_ACCESS,
            "List the consumers in a consumer group",
            info::xinfo_consumers,
        )
    },
];

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        key_flags: kf::RW_UPDATE,
        key_specs: &[KeySpec::range(kf::RW_UPDATE, 1, 0, 1).with_notes("UPDATE instead of INSERT because of the optional trimming feature")],
        tips: NONDET,
        complexity: "O(1) when adding a new entry, O(N) when trimming where N being the number of entries evicted.",
        ..spec("xadd", -5, W_OOM | flags::FAST, A_W_FAST, "Appends a new entry to a stream", "5.0.0", add::xadd)
    },
    CommandSpec {
        key_flags: kf::RO,
        ..spec("xlen", 2, RO | flags::FAST, acl::READ | acl::STREAM | acl::FAST, "Return the number of entries in a stream", "5.0.0", add::xlen)
    },
    CommandSpec {
        key_flags: kf::RW_DELETE,
        complexity: "O(1) for each single item to delete in the stream, regardless of the stream size.",
        ..spec("xdel", -3, W_FAST, A_W_FAST, "Removes the specified entries from the stream. Returns the number of items actually deleted, that may be different from the number of IDs passed in case certain IDs do not exist.", "5.0.0", add::xdel)
    },
    CommandSpec {
        key_flags: kf::RW_DELETE,
        tips: NONDET,
        complexity: "O(N), with N being the number of evicted entries. Constant times are very small however, since entries are organized in macro nodes containing multiple entries that can be released with a single deallocation.",
        ..spec("xtrim", -4, W, A_W_SLOW, "Trims the stream to (approximately if '~' is passed) a certain size", "5.0.0", add::xtrim)
    },
    CommandSpec {
        key_flags: kf::RW_UPDATE,
        ..spec("xsetid", -3, W_OOM | flags::FAST, A_W_FAST, "An internal command for replicating stream values", "5.0.0", add::xsetid)
    },
    CommandSpec {
        key_flags: kf::RO_ACCESS,
        complexity: "O(N) with N being the number of elements being returned. If N is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1).",
        ..spec("xrange", -4, RO, A_R_SLOW, "Return a range of elements in a stream, with IDs matching the specified IDs interval", "5.0.0", range::xrange)
    },
    CommandSpec {
        key_flags: kf::RO_ACCESS,
        complexity: "O(N) with N being the number of elements returned. If N is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1).",
        ..spec("xrevrange", -4, RO, A_R_SLOW, "Return a range of elements in a stream, with IDs matching the specified IDs interval, in reverse order (from greater to smaller IDs) compared to XRANGE", "5.0.0", range::xrevrange)
    },
    CommandSpec {
        first_key: 0,
        last_key: 0,
        key_step: 0,
        key_specs: XREAD_SPECS,
        complexity: "For each stream mentioned: O(N) with N being the number of elements being returned, it means that XREAD-ing with a fixed COUNT is O(1). Note that when the BLOCK option is used, XADD will pay O(M) time in order to serve the M clients blocked on the stream getting new data.",
        serve: Some(read::serve_xread),
        ..spec("xread", -4, RO | flags::BLOCKING | flags::MOVABLEKEYS, A_R_SLOW | acl::BLOCKING, "Return never seen elements in multiple streams, with IDs greater than the ones reported by the caller for each stream. Can block.", "5.0.0", read::xread)
    },
    CommandSpec {
        first_key: 0,
        last_key: 0,
        key_step: 0,
        key_specs: XREADGROUP_SPECS,
        complexity: "For each stream mentioned: O(M) with M being the number of elements returned. If M is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1). On the other side when XREADGROUP blocks, XADD will pay the O(N) time in order to serve the N clients blocked on the stream getting new data.",
        serve: Some(read::serve_xreadgroup),
        ..spec("xreadgroup", -7, W | flags::BLOCKING | flags::MOVABLEKEYS, A_W_SLOW | acl::BLOCKING, "Return new entries from a stream using a consumer group, or access the history of the pending entries for a given consumer. Can block.", "5.0.0", read::xreadgroup)
    },
    CommandSpec {
        key_flags: kf::RW_UPDATE,
        complexity: "O(1) for each message ID processed.",
        ..spec("xack", -4, W_FAST, A_W_FAST, "Marks a pending message as correctly processed, effectively removing it from the pending entries list of the consumer group. Return value of the command is the number of messages successfully acknowledged, that is, the IDs we were actually able to resolve in the PEL.", "5.0.0", group::xack)
    },
    CommandSpec {
        key_flags: kf::RO_ACCESS,
        tips: NONDET,
        complexity: "O(N) with N being the number of elements returned, so asking for a small fixed number of entries per call is O(1). O(M), where M is the total number of entries scanned when used with the IDLE filter. When the command returns just the summary and the list of consumers is small, it runs in O(1) time; otherwise, an additional O(N) time for iterating every consumer.",
        ..spec("xpending", -3, RO, A_R_SLOW, "Return information and entries from a stream consumer group pending entries list, that are messages fetched but never acknowledged.", "5.0.0", claim::xpending)
    },
    CommandSpec {
        key_flags: kf::RW_UPDATE,
        tips: NONDET,
        complexity: "O(log N) with N being the number of messages in the PEL of the consumer group.",
        ..spec("xclaim", -6, W_FAST, A_W_FAST, "Changes (or acquires) ownership of a message in a consumer group, as if the message was delivered to the specified consumer.", "5.0.0", claim::xclaim)
    },
    CommandSpec {
        key_flags: kf::RW_DELETE,
        tips: NONDET,
        complexity: "O(1) if COUNT is small.",
        ..spec("xautoclaim", -6, W_FAST, A_W_FAST, "Changes (or acquires) ownership of messages in a consumer group, as if the messages were delivered to the specified consumer.", "6.2.0", claim::xautoclaim)
    },
    CommandSpec {
        name: "xgroup",
        arity: -2,
        acl: acl::SLOW,
        summary: "A container for consumer groups commands",
        since: "5.0.0",
        group: "stream",
        complexity: "Depends on subcommand.",
        subcommands: XGROUP_SUBS,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "xinfo",
        arity: -2,
        acl: acl::SLOW,
        summary: "A container for stream introspection commands",
        since: "5.0.0",
        group: "stream",
        complexity: "Depends on subcommand.",
        subcommands: XINFO_SUBS,
        ..CommandSpec::DEFAULT
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_as_redis() {
        assert_eq!(parse_id(b"1-2", 0), Ok(StreamId::new(1, 2)));
        assert_eq!(parse_id(b"5", 7), Ok(StreamId::new(5, 7)));
        assert_eq!(parse_id(b"-", 0), Ok(StreamId::MIN));
        assert_eq!(parse_id(b"+", 0), Ok(StreamId::MAX));
        assert_eq!(
            parse_id(b"18446744073709551615-18446744073709551615", 0),
            Ok(StreamId::MAX)
        );
        for bad in [
            &b"a"[..],
            b"1-",
            b"-1",
            b"1-2-3",
            b"1-x",
            b"",
            b"18446744073709551616",
        ] {
            assert!(parse_id(bad, 0).is_err(), "{bad:?}");
        }
        assert!(parse_strict_id(b"-", 0).is_err());
        assert_eq!(
            parse_id_full(b"5-*", 0, true, true),
            Ok((StreamId::new(5, 0), false))
        );
        assert_eq!(
            parse_range_bound(b"(1-2", 0, true),
            Ok(Some(StreamId::new(1, 3)))
        );
        assert_eq!(
            parse_range_bound(b"(1-0", 0, false),
            Ok(Some(StreamId::new(0, u64::MAX)))
        );
    }
}
