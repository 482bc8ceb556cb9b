//! XINFO STREAM [FULL [COUNT n]], XINFO GROUPS, XINFO CONSUMERS and XINFO HELP, with the
//! fields Redis 7.0 reports.

use super::{reply_entries, reply_entry, reply_id};
use crate::argv::Argv;
use crate::error::{CmdResult, Error};
use crate::reply::{help_reply, ReplySink};
use crate::util::parse_i64;
use crate::value::stream::{Group, Pending, Stream, StreamId, ENTRIES_READ_INVALID};
use crate::value::ValueRef;
use crate::Cx;

const HELP: &[&str] = &[
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
];

/// XINFO HELP.
pub(super) fn xinfo_help(_: &mut Cx<'_>, _: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    help_reply(out, "XINFO", HELP);
    Ok(())
}

/// The stream at argument 2 (ERR no such key when missing), cloned (an O(groups) snapshot).
fn stream_arg(cx: &mut Cx<'_>, args: &Argv<'_>) -> Result<Stream, Error> {
    let now = cx.now_ms();
    match cx.db().lookup_read(args.get(2), now).map(|e| e.value()) {
        None => Err(Error::NoSuchKey),
        Some(ValueRef::Stream(s)) => super::readable(s).cloned(),
        Some(_) => Err(Error::WrongType),
    }
}

/// A group's entries-read: the counter, or null when not known.
fn reply_read(out: &mut dyn ReplySink, g: &Group) {
    if g.entries_read == ENTRIES_READ_INVALID {
        out.null();
    } else {
        out.int(g.entries_read);
    }
}

fn reply_lag(out: &mut dyn ReplySink, s: &Stream, g: &Group) {
    match s.lag(g) {
        Some(l) => out.int(l),
        None => out.null(),
    }
}

/// XINFO STREAM key [FULL [COUNT count]].
pub(super) fn xinfo_stream(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    // As Redis, the key is looked up before the options are checked.
    let s = stream_arg(cx, args)?;
    let mut full = None;
    match args.len() {
        3 => {}
        4 if args.get(3).eq_ignore_ascii_case(b"full") => full = Some(10),
        6 if args.get(3).eq_ignore_ascii_case(b"full")
            && args.get(4).eq_ignore_ascii_case(b"count") =>
        {
            let n = parse_i64(args.get(5)).ok_or(Error::NotInteger)?;
            full = Some(if n < 0 { 10 } else { n as usize });
        }
        _ => {
            let mut t = b"ERR unknown subcommand or wrong number of arguments for '".to_vec();
            t.extend_from_slice(crate::util::c_str_prefix(args.get(1), 128));
            t.extend_from_slice(b"'. Try XINFO HELP.");
            return Err(Error::Bytes(t));
        }
    }
    out.map(if full.is_some() { 9 } else { 10 });
    out.bulk(b"length");
    out.int(s.length as i64);
    out.bulk(b"radix-tree-keys");
    out.int(s.node_count() as i64);
    out.bulk(b"radix-tree-nodes");
    out.int(s.rax_nodes() as i64);
    out.bulk(b"last-generated-id");
    reply_id(out, s.last_id);
    out.bulk(b"max-deleted-entry-id");
    reply_id(out, s.max_deleted);
    out.bulk(b"entries-added");
    out.int(s.entries_added as i64);
    out.bulk(b"recorded-first-entry-id");
    reply_id(out, s.first_id);
    let Some(count) = full else {
        out.bulk(b"groups");
        out.int(s.groups.len() as i64);
        out.bulk(b"first-entry");
        match s.first_entry() {
            Some(e) => reply_entry(out, &e),
            None => out.null(),
        }
        out.bulk(b"last-entry");
        match s.last_entry() {
            Some(e) => reply_entry(out, &e),
            None => out.null(),
        }
        return Ok(());
    };
    out.bulk(b"entries");
    reply_entries(out, &s.collect(StreamId::MIN, StreamId::MAX, false, count));
    out.bulk(b"groups");
    out.array(s.groups.len());
    let now = cx.now_ms();
    for g in &s.groups {
        full_group(out, &s, g, count, now);
    }
    Ok(())
}

/// One group of XINFO STREAM FULL.
fn full_group(out: &mut dyn ReplySink, s: &Stream, g: &Group, count: usize, _now: u64) {
    let take = |n: usize| if count == 0 { n } else { n.min(count) };
    out.map(7);
    out.bulk(b"name");
    out.bulk(&g.name);
    out.bulk(b"last-delivered-id");
    reply_id(out, g.last_id);
    out.bulk(b"entries-read");
    reply_read(out, g);
    out.bulk(b"lag");
    reply_lag(out, s, g);
    out.bulk(b"pel-count");
    out.int(g.pel.len() as i64);
    out.bulk(b"pending");
    out.array(take(g.pel.len()));
    for p in g.pel.iter().take(take(g.pel.len())) {
        out.array(4);
        reply_id(out, p.id);
        out.bulk(&p.consumer);
        out.int(p.delivery_ms as i64);
        out.int(p.delivery_count as i64);
    }
    out.bulk(b"consumers");
    out.array(g.consumers.len());
    for c in &g.consumers {
        out.map(4);
        out.bulk(b"name");
        out.bulk(&c.name);
        out.bulk(b"seen-time");
        out.int(c.seen_ms as i64);
        out.bulk(b"pel-count");
        out.int(c.pel.len() as i64);
        out.bulk(b"pending");
        out.array(take(c.pel.len()));
        for id in c.pel.iter().take(take(c.pel.len())) {
            let p = g.pel.get(&Pending::probe(*id)).expect("pending");
            out.array(3);
            reply_id(out, p.id);
            out.int(p.delivery_ms as i64);
            out.int(p.delivery_count as i64);
        }
    }
}

/// XINFO GROUPS key.
pub(super) fn xinfo_groups(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let s = stream_arg(cx, args)?;
    out.array(s.groups.len());
    for g in &s.groups {
        out.map(6);
        out.bulk(b"name");
        out.bulk(&g.name);
        out.bulk(b"consumers");
        out.int(g.consumers.len() as i64);
        out.bulk(b"pending");
        out.int(g.pel.len() as i64);
        out.bulk(b"last-delivered-id");
        reply_id(out, g.last_id);
        out.bulk(b"entries-read");
        reply_read(out, g);
        out.bulk(b"lag");
        reply_lag(out, &s, g);
    }
    Ok(())
}

/// XINFO CONSUMERS key group.
pub(super) fn xinfo_consumers(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> CmdResult {
    let s = stream_arg(cx, args)?;
    let Some(g) = s.group(args.get(3)) else {
        let mut t = b"NOGROUP No such consumer group '".to_vec();
        t.extend_from_slice(args.get(3));
        t.extend_from_slice(b"' for key name '");
        t.extend_from_slice(args.get(2));
        t.extend_from_slice(b"'");
        return Err(Error::Bytes(t));
    };
    let now = cx.now_ms();
    out.array(g.consumers.len());
    for c in &g.consumers {
        out.map(3);
        out.bulk(b"name");
        out.bulk(&c.name);
        out.bulk(b"pending");
        out.int(c.pel.len() as i64);
        out.bulk(b"idle");
        out.int((now as i64 - c.seen_ms as i64).max(0));
    }
    Ok(())
}
