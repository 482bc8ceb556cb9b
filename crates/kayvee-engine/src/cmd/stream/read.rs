//! XREAD and XREADGROUP, blocking forms included.
//!
//! A read that finds nothing blocks through [`crate::blocking`] with its IDs resolved (`$`
//! becomes the stream's last ID when it blocked); it is served when an XADD makes a key ready,
//! with only that stream in its reply. An XREADGROUP waiter is also served when its key is
//! deleted or changes type, or its group is destroyed: it then gets Redis's error.

use super::{
    id_text, no_group, parse_strict_id, propagate_claim, propagate_group_id, reply_entry, reply_id,
    write_stream,
};
use crate::argv::{Argv, ArgvBuf};
use crate::blocking::BlockSpec;
use crate::cmd::block::block;
use crate::cmd::notify::{class as nc, emit};
use crate::db::Key;
use crate::error::{CmdResult, Error};
use crate::reply::{Protocol, ReplySink};
use crate::util::parse_i64;
use crate::value::stream::{OwnedEntry, Pending, Stream, StreamId};
use crate::value::ValueRef;
use crate::Cx;
use alloc::vec::Vec;

/// How many entries a blocked read without COUNT gets at most.
const BLOCKED_DEFAULT_COUNT: usize = 1000;

/// The parsed options of XREAD / XREADGROUP.
struct ReadArgs<'a> {
    /// `Some(deadline)` when BLOCK was given (`None` inside: forever).
    block: Option<Option<u64>>,
    count: usize,
    group: Option<(&'a [u8], &'a [u8])>,
    noack: bool,
    /// Index of the first key.
    streams_at: usize,
    /// Number of streams.
    n: usize,
}

fn parse_read<'a>(args: &Argv<'a>, xreadgroup: bool, now_ms: u64) -> Result<ReadArgs<'a>, Error> {
    let mut r = ReadArgs {
        block: None,
        count: 0,
        group: None,
        noack: false,
        streams_at: 0,
        n: 0,
    };
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - i - 1;
        let o = args.get(i);
        if o.eq_ignore_ascii_case(b"block") && more > 0 {
            i += 1;
            let ms = parse_i64(args.get(i))
                .ok_or(Error::msg("ERR timeout is not an integer or out of range"))?;
            if ms < 0 {
                return Err(Error::msg("ERR timeout is negative"));
            }
            r.block = Some((ms > 0).then(|| now_ms.saturating_add(ms as u64)));
        } else if o.eq_ignore_ascii_case(b"count") && more > 0 {
            i += 1;
            let n = parse_i64(args.get(i)).ok_or(Error::NotInteger)?;
            r.count = n.max(0) as usize;
        } else if o.eq_ignore_ascii_case(b"streams") && more > 0 {
            r.streams_at = i + 1;
            let rest = args.len() - r.streams_at;
            if !rest.is_multiple_of(2) {
                // 7.0 says XREAD and '$' for XREADGROUP too.
                return Err(Error::msg("ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified."));
            }
            r.n = rest / 2;
            break;
        } else if o.eq_ignore_ascii_case(b"group") && more >= 2 {
            if !xreadgroup {
                return Err(Error::msg("ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead."));
            }
            r.group = Some((args.get(i + 1), args.get(i + 2)));
            i += 2;
        } else if o.eq_ignore_ascii_case(b"noack") {
            if !xreadgroup {
                return Err(Error::msg("ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead."));
            }
            r.noack = true;
        } else {
            return Err(Error::Syntax);
        }
        i += 1;
    }
    if r.streams_at == 0 {
        return Err(Error::Syntax);
    }
    if xreadgroup && r.group.is_none() {
        return Err(Error::msg("ERR Missing GROUP option for XREADGROUP"));
    }
    Ok(r)
}

/// The ID meaning `>` (deliver new entries).
const NEW: StreamId = StreamId::MAX;

/// Resolves every stream's ID (`$`, `>`, explicit), checking types and groups.
fn resolve_ids(cx: &mut Cx<'_>, args: &Argv<'_>, r: &ReadArgs<'_>) -> Result<Vec<StreamId>, Error> {
    let mut ids = Vec::with_capacity(r.n);
    for k in 0..r.n {
        let key = args.get(r.streams_at + k);
        let arg = args.get(r.streams_at + r.n + k);
        let now = cx.now_ms();
        let s = match cx.db().lookup_read(key, now) {
            None => None,
            Some(e) => match e.value() {
                ValueRef::Stream(s) => Some(super::readable(s)?),
                _ => return Err(Error::WrongType),
            },
        };
        if let Some((g, _)) = r.group {
            if s.is_none_or(|s| s.group(g).is_none()) {
                return Err(no_group(key, g, "XREADGROUP with GROUP option"));
            }
        }
        let id = if arg == b"$" {
            if r.group.is_some() {
                return Err(Error::msg("ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set."));
            }
            s.map_or(StreamId::MIN, |s| s.last_id)
        } else if arg == b">" {
            if r.group.is_none() {
                return Err(Error::msg("ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option."));
            }
            NEW
        } else {
            parse_strict_id(arg, 0)?
        };
        ids.push(id);
    }
    Ok(ids)
}

/// One item of a group read: an entry, or the ID of a pending entry deleted since.
enum Item {
    Entry(OwnedEntry),
    Gone(StreamId),
}

/// What a group read did, to propagate after.
struct Delivery {
    items: Vec<Item>,
    /// Each new pending entry, with the group's last ID right after it was delivered.
    claims: Vec<(Pending, StreamId)>,
    last_id: StreamId,
    entries_read: i64,
    moved: bool,
    created: bool,
}

/// Reads for consumer `cname` of group `gname` at `key`: new entries after `after` (the
/// group's last ID) or, when `history`, the consumer's pending entries after `after`.
#[allow(clippy::too_many_arguments)]
fn group_read(
    s: &mut Stream,
    gname: &[u8],
    cname: &[u8],
    after: StreamId,
    count: usize,
    noack: bool,
    history: bool,
    now_ms: u64,
) -> Delivery {
    let gi = s.group_pos(gname).expect("group checked");
    let (c, created) = s.groups[gi].consumer_or_create(cname, now_ms);
    c.seen_ms = now_ms;
    let mut d = Delivery {
        items: Vec::new(),
        claims: Vec::new(),
        last_id: StreamId::MIN,
        entries_read: 0,
        moved: false,
        created,
    };
    let Some(start) = after.incr() else {
        return d;
    };
    if history {
        let ids: Vec<StreamId> = {
            let c = s.groups[gi].consumer(cname).expect("consumer");
            let from = c.pel.count_less(&start);
            let it = c.pel.iter_from(from).copied();
            if count == 0 {
                it.collect()
            } else {
                it.take(count).collect()
            }
        };
        for id in ids {
            match s.get(id) {
                Some(e) => {
                    s.groups[gi].update_pending(id, |p| {
                        p.delivery_ms = now_ms;
                        p.delivery_count += 1;
                    });
                    d.items.push(Item::Entry(e));
                }
                None => d.items.push(Item::Gone(id)),
            }
        }
        return d;
    }
    let entries = s.collect(start, StreamId::MAX, false, count);
    for e in entries {
        d.moved |= s.advance_group(gi, e.id);
        if !noack {
            let g = &mut s.groups[gi];
            let p = g.deliver(cname, e.id, now_ms);
            d.claims.push((p, g.last_id));
        }
        d.items.push(Item::Entry(e));
    }
    let g = &s.groups[gi];
    d.last_id = g.last_id;
    d.entries_read = g.entries_read;
    d
}

/// Propagates a group read as Redis does: an XCLAIM per new pending entry (which also
/// creates the consumer and moves the group on a replica); with NOACK, XGROUP CREATECONSUMER
/// for a consumer it created and XGROUP SETID when the group moved.
fn after_group_read(
    cx: &mut Cx<'_>,
    key: &[u8],
    gname: &[u8],
    cname: &[u8],
    noack: bool,
    d: &Delivery,
) {
    if d.created {
        emit(cx, nc::STREAM, "xgroup-createconsumer", key);
        if noack {
            cx.propagate(&[b"XGROUP", b"CREATECONSUMER", key, gname, cname]);
        }
    }
    for (p, last) in &d.claims {
        propagate_claim(cx, key, gname, *last, p);
    }
    if d.moved && d.claims.is_empty() {
        propagate_group_id(cx, key, gname, d.last_id, d.entries_read);
    }
    if d.created || !d.claims.is_empty() || d.moved || !d.items.is_empty() {
        cx.db().modified(key);
    }
}

fn reply_items(out: &mut dyn ReplySink, items: &[Item]) {
    out.array(items.len());
    for it in items {
        match it {
            Item::Entry(e) => reply_entry(out, e),
            Item::Gone(id) => {
                out.array(2);
                reply_id(out, *id);
                out.null_array();
            }
        }
    }
}

/// Opens the reply for `n` streams: an array of pairs (RESP2) or a map (RESP3).
fn open_streams(out: &mut dyn ReplySink, n: usize) {
    if out.protocol() == Protocol::Resp3 {
        out.map(n);
    } else {
        out.array(n);
    }
}

/// Opens one stream's part of the reply.
fn open_stream(out: &mut dyn ReplySink, key: &[u8]) {
    if out.protocol() != Protocol::Resp3 {
        out.array(2);
    }
    out.bulk(key);
}

/// BLOCK from a script is an error, as Redis 7.0 words it (other blocking commands just do not
/// block there).
fn refuse_block_in_script(cx: &Cx<'_>, args: &Argv<'_>, r: &ReadArgs) -> CmdResult {
    if r.block.is_some() && cx.core.script_running {
        let mut text = b"ERR ".to_vec();
        text.extend_from_slice(args.get(0));
        text.extend_from_slice(b" command is not allowed with BLOCK option from scripts");
        return Err(Error::Bytes(text));
    }
    Ok(())
}

/// XREAD [COUNT count] [BLOCK ms] STREAMS key [key ...] id [id ...].
pub(super) fn xread(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let r = parse_read(args, false, cx.now_ms())?;
    refuse_block_in_script(cx, args, &r)?;
    let ids = resolve_ids(cx, args, &r)?;
    let mut found: Vec<(usize, Vec<OwnedEntry>)> = Vec::new();
    for (k, id) in ids.iter().enumerate() {
        let key = args.get(r.streams_at + k);
        let now = cx.now_ms();
        let Some(ValueRef::Stream(s)) = cx.db().peek(key, now).map(|e| e.value()) else {
            continue;
        };
        let s = super::readable(s)?;
        let top = s.last_live_id();
        if s.length == 0 || top.is_none_or(|t| t <= *id) {
            continue;
        }
        let Some(start) = id.incr() else { continue };
        found.push((k, s.collect(start, StreamId::MAX, false, r.count)));
    }
    if !found.is_empty() {
        open_streams(out, found.len());
        for (k, entries) in &found {
            open_stream(out, args.get(r.streams_at + k));
            super::reply_entries(out, entries);
        }
        return Ok(());
    }
    match r.block {
        Some(deadline) => block_read(cx, args, &r, &ids, deadline, false, out),
        None => out.null_array(),
    }
    Ok(())
}

/// Blocks with the IDs resolved into the kept arguments.
fn block_read(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    r: &ReadArgs<'_>,
    ids: &[StreamId],
    deadline: Option<u64>,
    group: bool,
    out: &mut dyn ReplySink,
) {
    let mut kept: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
    for (k, id) in ids.iter().enumerate() {
        if *id != NEW {
            kept[r.streams_at + r.n + k] = id_text(*id);
        }
    }
    let buf = ArgvBuf::from_args(kept.iter().map(|v| v.as_slice()));
    let spec = BlockSpec {
        keys: (0..r.n)
            .map(|k| Key::from_slice(args.get(r.streams_at + k)))
            .collect(),
        deadline_ms: deadline,
        on_timeout: |out| out.null_array(),
        serve_missing: group,
    };
    block(cx, &buf.argv(), spec, out);
}

/// The position of `key` among a read's streams.
fn key_index(args: &Argv<'_>, r: &ReadArgs<'_>, key: &[u8]) -> Option<usize> {
    (0..r.n).find(|&k| args.get(r.streams_at + k) == key)
}

/// Serves an XREAD waiter from `key`.
pub(super) fn serve_xread(
    cx: &mut Cx<'_>,
    key: &[u8],
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> Result<bool, Error> {
    let r = parse_read(args, false, 0)?;
    let Some(k) = key_index(args, &r, key) else {
        return Ok(false);
    };
    let id = parse_strict_id(args.get(r.streams_at + r.n + k), 0)?;
    let now = cx.now_ms();
    let Some(ValueRef::Stream(s)) = cx.db().peek(key, now).map(|e| e.value()) else {
        return Ok(false);
    };
    if s.last_id <= id {
        return Ok(false);
    }
    let count = if r.count == 0 {
        BLOCKED_DEFAULT_COUNT
    } else {
        r.count
    };
    let entries = id.incr().map_or_else(Vec::new, |start| {
        s.collect(start, StreamId::MAX, false, count)
    });
    open_streams(out, 1);
    open_stream(out, key);
    super::reply_entries(out, &entries);
    Ok(true)
}

/// XREADGROUP GROUP group consumer [COUNT count] [BLOCK ms] [NOACK] STREAMS key ... id ...
pub(super) fn xreadgroup(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let r = parse_read(args, true, cx.now_ms())?;
    refuse_block_in_script(cx, args, &r)?;
    let ids = resolve_ids(cx, args, &r)?;
    let (gname, cname) = r.group.expect("checked");
    let now = cx.now_ms();
    let mut served: Vec<(usize, Delivery)> = Vec::new();
    for (k, id) in ids.iter().enumerate() {
        let key = args.get(r.streams_at + k);
        let s = write_stream(cx, key)?.expect("checked");
        let history = *id != NEW;
        let after = if history {
            *id
        } else {
            let last = s.group(gname).expect("checked").last_id;
            let top = s.last_live_id();
            if s.length == 0 || top.is_none_or(|t| t <= last) {
                continue;
            }
            last
        };
        let d = group_read(s, gname, cname, after, r.count, r.noack, history, now);
        after_group_read(cx, key, gname, cname, r.noack, &d);
        served.push((k, d));
    }
    if !served.is_empty() {
        open_streams(out, served.len());
        for (k, d) in &served {
            open_stream(out, args.get(r.streams_at + k));
            reply_items(out, &d.items);
        }
        return Ok(());
    }
    match r.block {
        Some(deadline) => block_read(cx, args, &r, &ids, deadline, true, out),
        None => out.null_array(),
    }
    Ok(())
}

/// Serves an XREADGROUP waiter from `key` (or fails it when the key or group went away).
pub(super) fn serve_xreadgroup(
    cx: &mut Cx<'_>,
    key: &[u8],
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> Result<bool, Error> {
    let r = parse_read(args, true, 0)?;
    if key_index(args, &r, key).is_none() {
        return Ok(false);
    }
    let (gname, cname) = r.group.expect("checked");
    let gone = || Error::msg("UNBLOCKED the stream key no longer exists");
    let now = cx.now_ms();
    let s = match write_stream(cx, key) {
        Ok(Some(s)) => s,
        _ => return Err(gone()),
    };
    let Some(g) = s.group(gname) else {
        return Err(Error::msg(
            "NOGROUP the consumer group this client was blocked on no longer exists",
        ));
    };
    if s.last_id <= g.last_id {
        return Ok(false);
    }
    let after = g.last_id;
    let count = if r.count == 0 {
        BLOCKED_DEFAULT_COUNT
    } else {
        r.count
    };
    let d = group_read(s, gname, cname, after, count, r.noack, false, now);
    after_group_read(cx, key, gname, cname, r.noack, &d);
    open_streams(out, 1);
    open_stream(out, key);
    reply_items(out, &d.items);
    Ok(true)
}
