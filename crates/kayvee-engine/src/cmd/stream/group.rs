//! XGROUP (CREATE, SETID, DESTROY, CREATECONSUMER, DELCONSUMER, HELP) and XACK.

use super::{parse_id, parse_strict_id, write_stream};
use crate::argv::Argv;
use crate::cmd::block::signal_key_ready;
use crate::cmd::notify::{class as nc, emit};
use crate::error::{CmdResult, Error};
use crate::reply::{help_reply, ReplySink};
use crate::util::parse_i64;
use crate::value::stream::{Group, Stream, StreamId, ENTRIES_READ_INVALID};
use crate::value::Value;
use crate::Cx;
use alloc::boxed::Box;
use alloc::vec::Vec;

const HELP: &[&str] = &[
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
];

/// XGROUP HELP.
pub(super) fn xgroup_help(_: &mut Cx<'_>, _: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    help_reply(out, "XGROUP", HELP);
    Ok(())
}

/// Redis's error for a subcommand with the wrong arguments.
fn sub_syntax(args: &Argv<'_>) -> Error {
    let mut t = b"ERR unknown subcommand or wrong number of arguments for '".to_vec();
    t.extend_from_slice(crate::util::c_str_prefix(args.get(1), 128));
    t.extend_from_slice(b"'. Try XGROUP HELP.");
    Error::Bytes(t)
}

/// CREATE's and SETID's options: (MKSTREAM, ENTRIESREAD).
fn parse_options(args: &Argv<'_>, create: bool) -> Result<(bool, i64), Error> {
    let (mut mkstream, mut read) = (false, ENTRIES_READ_INVALID);
    let mut i = 5;
    while i < args.len() {
        let a = args.get(i);
        if create && a.eq_ignore_ascii_case(b"mkstream") {
            mkstream = true;
            i += 1;
        } else if a.eq_ignore_ascii_case(b"entriesread") && i + 1 < args.len() {
            read = parse_i64(args.get(i + 1)).ok_or(Error::NotInteger)?;
            if read < 0 && read != ENTRIES_READ_INVALID {
                return Err(Error::msg(
                    "ERR value for ENTRIESREAD must be positive or -1",
                ));
            }
            i += 2;
        } else {
            return Err(sub_syntax(args));
        }
    }
    Ok((mkstream, read))
}

/// The stream of an XGROUP subcommand, which must exist; with `need_group`, so must the group.
fn target<'c>(
    cx: &'c mut Cx<'_>,
    args: &Argv<'_>,
    need_group: bool,
) -> Result<&'c mut Stream, Error> {
    let key = args.get(2);
    let Some(s) = write_stream(cx, key)? else {
        return Err(Error::msg("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically."));
    };
    if need_group && s.group(args.get(3)).is_none() {
        let mut t = b"NOGROUP No such consumer group '".to_vec();
        t.extend_from_slice(args.get(3));
        t.extend_from_slice(b"' for key name '");
        t.extend_from_slice(key);
        t.extend_from_slice(b"'");
        return Err(Error::Bytes(t));
    }
    Ok(s)
}

/// XGROUP CREATE key group id|$ [MKSTREAM] [ENTRIESREAD n].
pub(super) fn xgroup_create(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> CmdResult {
    if args.len() > 8 {
        return Err(sub_syntax(args));
    }
    let (mkstream, read) = parse_options(args, true)?;
    let key = args.get(2);
    let exists = super::check_type(cx, key)?;
    if !exists && !mkstream {
        target(cx, args, false)?;
    }
    let id = if args.get(4) == b"$" {
        None
    } else {
        Some(parse_strict_id(args.get(4), 0)?)
    };
    if !exists {
        let now = cx.now_ms();
        cx.db()
            .set(key, Value::Stream(Box::new(Stream::new())), now, false);
    }
    let s = write_stream(cx, key)?.expect("exists");
    let id = id.unwrap_or(s.last_id);
    let name = args.get(3);
    match s.group_pos(name) {
        Ok(_) => {
            if !exists {
                cx.propagate_verbatim();
            }
            return Err(Error::msg("BUSYGROUP Consumer Group name already exists"));
        }
        Err(at) => s.groups.insert(at, Group::new(name, id, read)),
    }
    cx.db().modified(key);
    emit(cx, nc::STREAM, "xgroup-create", key);
    cx.propagate_verbatim();
    out.simple("OK");
    Ok(())
}

/// XGROUP SETID key group id|$ [ENTRIESREAD n].
pub(super) fn xgroup_setid(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if args.len() != 5 && args.len() != 7 {
        return Err(sub_syntax(args));
    }
    let (_, read) = parse_options(args, false)?;
    let s = target(cx, args, true)?;
    let id = if args.get(4) == b"$" {
        s.last_id
    } else {
        parse_id(args.get(4), 0)?
    };
    let g = s.group_mut(args.get(3)).expect("checked");
    g.last_id = id;
    g.entries_read = read;
    let key = args.get(2);
    cx.db().modified(key);
    emit(cx, nc::STREAM, "xgroup-setid", key);
    cx.propagate_verbatim();
    out.simple("OK");
    Ok(())
}

/// XGROUP DESTROY key group.
pub(super) fn xgroup_destroy(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> CmdResult {
    let s = target(cx, args, false)?;
    let Ok(at) = s.group_pos(args.get(3)) else {
        out.int(0);
        return Ok(());
    };
    s.groups.remove(at);
    let key = args.get(2);
    cx.db().modified(key);
    emit(cx, nc::STREAM, "xgroup-destroy", key);
    cx.propagate_verbatim();
    let db = cx.db_index;
    signal_key_ready(cx, db, key);
    out.int(1);
    Ok(())
}

/// XGROUP CREATECONSUMER key group consumer.
pub(super) fn xgroup_createconsumer(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> CmdResult {
    let now = cx.now_ms();
    let s = target(cx, args, true)?;
    let g = s.group_mut(args.get(3)).expect("checked");
    let (_, created) = g.consumer_or_create(args.get(4), now);
    if created {
        let key = args.get(2);
        cx.db().modified(key);
        emit(cx, nc::STREAM, "xgroup-createconsumer", key);
        cx.propagate_verbatim();
    }
    out.int(i64::from(created));
    Ok(())
}

/// XGROUP DELCONSUMER key group consumer: answers how many entries it had pending.
pub(super) fn xgroup_delconsumer(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> CmdResult {
    let s = target(cx, args, true)?;
    let g = s.group_mut(args.get(3)).expect("checked");
    let Ok(at) = g.consumer_pos(args.get(4)) else {
        out.int(0);
        return Ok(());
    };
    let c = g.consumers.remove(at);
    let ids: Vec<StreamId> = c.pel.iter().copied().collect();
    for id in &ids {
        g.pel.remove(&crate::value::stream::Pending::probe(*id));
    }
    let key = args.get(2);
    cx.db().modified(key);
    emit(cx, nc::STREAM, "xgroup-delconsumer", key);
    cx.propagate_verbatim();
    out.int(ids.len() as i64);
    Ok(())
}

/// XACK key group id [id ...].
pub(super) fn xack(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let key = args.get(1);
    let Some(s) = write_stream(cx, key)? else {
        out.int(0);
        return Ok(());
    };
    let Some(g) = s.group_mut(args.get(2)) else {
        out.int(0);
        return Ok(());
    };
    // As Redis, the IDs are parsed only once the key and group exist (all before any ack).
    let ids = (3..args.len())
        .map(|i| parse_strict_id(args.get(i), 0))
        .collect::<Result<Vec<_>, _>>()?;
    let acked = ids.iter().filter(|id| g.ack(**id)).count();
    if acked > 0 {
        cx.db().modified(key);
        cx.propagate_verbatim();
    }
    out.int(acked as i64);
    Ok(())
}
