//! XADD, XTRIM, XDEL, XSETID and XLEN: appending, trimming and deleting entries.

use super::{check_type, parse_id_full, parse_strict_id, read_stream, reply_id, write_stream};
use crate::argv::Argv;
use crate::cmd::block::signal_key_ready;
use crate::cmd::notify::{class as nc, emit};
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::value::stream::{Stream, StreamId, TrimStrategy};
use crate::value::Value;
use crate::Cx;
use alloc::boxed::Box;
use alloc::vec::Vec;

/// The trimming and ID options of XADD and XTRIM.
#[derive(Default)]
struct AddArgs {
    strategy: Option<TrimStrategy>,
    approx: bool,
    limit: u64,
    /// Index of the strategy's threshold argument (rewritten for propagation).
    threshold_at: usize,
    nomkstream: bool,
    /// The explicit ID and whether its sequence was given (`ms-*`: not).
    id: Option<(StreamId, bool)>,
}

/// Parses `[NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]]` and, for XADD, the ID;
/// returns the options and the index of the ID argument (XADD) or the end (XTRIM).
fn parse_add_args(
    args: &Argv<'_>,
    xadd: bool,
    node_max_entries: u64,
    obey: bool,
) -> Result<(AddArgs, usize), Error> {
    let mut a = AddArgs::default();
    let mut limit: Option<i64> = None;
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = args.get(i);
        if xadd && opt == b"*" {
            break;
        } else if (opt.eq_ignore_ascii_case(b"maxlen") || opt.eq_ignore_ascii_case(b"minid"))
            && more > 0
        {
            if a.strategy.is_some() {
                return Err(Error::msg(
                    "ERR syntax error, MAXLEN and MINID options at the same time are not compatible",
                ));
            }
            let next = args.get(i + 1);
            a.approx = false;
            if more >= 2 && next == b"~" {
                a.approx = true;
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            let arg = args.get(i + 1);
            if opt.eq_ignore_ascii_case(b"maxlen") {
                let n = parse_i64(arg).ok_or(Error::NotInteger)?;
                if n < 0 {
                    return Err(Error::msg("ERR The MAXLEN argument must be >= 0."));
                }
                a.strategy = Some(TrimStrategy::MaxLen(n as u64));
            } else {
                a.strategy = Some(TrimStrategy::MinId(parse_strict_id(arg, 0)?));
            }
            i += 1;
            a.threshold_at = i;
        } else if opt.eq_ignore_ascii_case(b"limit") && more > 0 {
            let n = parse_i64(args.get(i + 1)).ok_or(Error::NotInteger)?;
            if n < 0 {
                return Err(Error::msg("ERR The LIMIT argument must be >= 0."));
            }
            limit = Some(n);
            i += 1;
        } else if xadd && opt.eq_ignore_ascii_case(b"nomkstream") {
            a.nomkstream = true;
        } else if xadd {
            a.id = Some(parse_id_full(opt, 0, true, true)?);
            break;
        } else {
            return Err(Error::Syntax);
        }
        i += 1;
    }
    if limit.is_some_and(|l| l > 0) && a.strategy.is_none() {
        return Err(Error::msg(
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && a.strategy.is_none() {
        return Err(Error::msg(
            "ERR syntax error, XTRIM must be called with a trimming strategy",
        ));
    }
    match limit {
        _ if obey => a.limit = 0,
        Some(_) if !a.approx => {
            return Err(Error::msg(
                "ERR syntax error, LIMIT cannot be used without the special ~ option",
            ))
        }
        Some(l) => a.limit = l as u64,
        None if a.approx => {
            let l = node_max_entries.saturating_mul(100);
            a.limit = if l == 0 || l > 1 << 30 { 10_000 } else { l };
        }
        None => a.limit = 0,
    }
    Ok((a, i))
}

/// The node limits from the configuration.
fn node_limits(cx: &Cx<'_>) -> (u64, u64) {
    (
        cx.core.config.stream_node_max_bytes,
        cx.core.config.stream_node_max_entries,
    )
}

/// The ID XADD gives a new entry: the explicit one (its sequence generated for `ms-*`) or
/// the next after the top item (now's milliseconds when later), or Redis's error.
fn next_id(s: &Stream, given: Option<(StreamId, bool)>, now_ms: u64) -> Result<StreamId, Error> {
    let id = match given {
        Some((id, true)) => id,
        // `ms-*` after `ms-18446744073709551615`: Redis reports its generic append failure.
        Some((id, false)) if id.ms == s.last_id.ms => match s.last_id.seq.checked_add(1) {
            Some(seq) => StreamId::new(id.ms, seq),
            None => return Err(Error::msg("ERR Elements are too large to be stored")),
        },
        Some((id, false)) => id,
        None if now_ms > s.last_id.ms => StreamId::new(now_ms, 0),
        None => s.last_id.incr().ok_or_else(smaller)?,
    };
    if id > s.last_id {
        Ok(id)
    } else {
        Err(smaller())
    }
}

/// The argument vector with `~` made `=` and the threshold what the stream holds now, as
/// Redis rewrites an approximate trim for propagation.
fn rewrite_trim<'a>(
    args: &'a Argv<'_>,
    a: &AddArgs,
    s: &Stream,
    threshold: &'a mut [u8; 41],
) -> Vec<&'a [u8]> {
    let mut v: Vec<&[u8]> = args.iter().collect();
    if a.approx {
        v[a.threshold_at - 1] = b"=";
        v[a.threshold_at] = match a.strategy {
            Some(TrimStrategy::MaxLen(_)) => {
                let mut digits = [0u8; 20];
                let text = crate::cmd::string::format_i64(s.length as i64, &mut digits);
                threshold[..text.len()].copy_from_slice(text);
                &threshold[..text.len()]
            }
            _ => s.first_id.write_text(threshold),
        };
    }
    v
}

/// XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] *|id field value ...
pub(super) fn xadd(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (max_bytes, max_entries) = node_limits(cx);
    let (a, id_at) = parse_add_args(args, true, max_entries, super::replaying(cx))?;
    let field_at = id_at + 1;
    if args.len() < field_at + 2 || (args.len() - field_at) % 2 == 1 {
        return Err(Error::WrongArity("xadd".into()));
    }
    if matches!(a.id, Some((id, true)) if id.is_zero()) {
        return Err(Error::msg(
            "ERR The ID specified in XADD must be greater than 0-0",
        ));
    }
    let key = args.get(1);
    let exists = check_type(cx, key)?;
    if !exists && a.nomkstream {
        out.null();
        return Ok(());
    }
    let now = cx.now_ms();
    let fields: Vec<&[u8]> = (field_at..args.len()).map(|i| args.get(i)).collect();
    if !exists {
        let s = Stream::new();
        let id = next_id(&s, a.id, now)?;
        let mut s = s;
        s.append(id, &fields, max_bytes, max_entries);
        cx.db().set(key, Value::Stream(Box::new(s)), now, false);
        return added(cx, args, &a, id_at, id, out);
    }
    let s = write_stream(cx, key)?.expect("checked");
    if s.last_id == StreamId::MAX {
        return Err(Error::msg(
            "ERR The stream has exhausted the last possible ID, unable to add more items",
        ));
    }
    let id = next_id(s, a.id, now)?;
    s.append(id, &fields, max_bytes, max_entries);
    added(cx, args, &a, id_at, id, out)
}

fn smaller() -> Error {
    Error::msg("ERR The ID specified in XADD is equal or smaller than the target stream top item")
}

/// After XADD appended `id`: reply, notify, trim, propagate, wake readers.
fn added(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    a: &AddArgs,
    id_at: usize,
    id: StreamId,
    out: &mut dyn ReplySink,
) -> CmdResult {
    let key = args.get(1);
    reply_id(out, id);
    cx.db().modified(key);
    emit(cx, nc::STREAM, "xadd", key);
    let s = write_stream(cx, key)?.expect("just written");
    let mut trimmed = false;
    if let Some(strategy) = a.strategy {
        trimmed = s.trim(strategy, a.approx, a.limit) > 0;
    }
    let mut threshold = [0u8; 41];
    let mut prop = rewrite_trim(args, a, s, &mut threshold);
    if trimmed {
        emit(cx, nc::STREAM, "xtrim", key);
    }
    let mut id_buf = [0u8; 41];
    if !matches!(a.id, Some((_, true))) {
        prop[id_at] = id.write_text(&mut id_buf);
    }
    cx.propagate(&prop);
    let db = cx.db_index;
    signal_key_ready(cx, db, key);
    Ok(())
}

/// XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count].
pub(super) fn xtrim(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (_, max_entries) = node_limits(cx);
    let (a, _) = parse_add_args(args, false, max_entries, super::replaying(cx))?;
    let key = args.get(1);
    let Some(s) = write_stream(cx, key)? else {
        out.int(0);
        return Ok(());
    };
    let removed = s.trim(a.strategy.expect("parsed"), a.approx, a.limit);
    if removed > 0 {
        let mut threshold = [0u8; 41];
        let prop = rewrite_trim(args, &a, s, &mut threshold);
        emit(cx, nc::STREAM, "xtrim", key);
        cx.db().modified(key);
        cx.propagate(&prop);
    }
    out.int(removed as i64);
    Ok(())
}

/// XDEL key id [id ...].
pub(super) fn xdel(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let key = args.get(1);
    if !check_type(cx, key)? {
        out.int(0);
        return Ok(());
    }
    let ids = (2..args.len())
        .map(|i| parse_strict_id(args.get(i), 0))
        .collect::<Result<Vec<_>, _>>()?;
    let s = write_stream(cx, key)?.expect("checked");
    let deleted = ids.iter().filter(|id| s.delete(**id)).count();
    if deleted > 0 {
        s.deleted_done();
        cx.db().modified(key);
        emit(cx, nc::STREAM, "xdel", key);
        cx.propagate_verbatim();
    }
    out.int(deleted as i64);
    Ok(())
}

/// XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id].
pub(super) fn xsetid(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let id = parse_strict_id(args.get(2), 0)?;
    let mut entries_added: Option<u64> = None;
    let mut max_deleted = StreamId::MIN;
    let mut i = 3;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = args.get(i);
        if opt.eq_ignore_ascii_case(b"entriesadded") && more > 0 {
            let n = parse_i64(args.get(i + 1)).ok_or(Error::NotInteger)?;
            if n < 0 {
                return Err(Error::msg("ERR entries_added must be positive"));
            }
            entries_added = Some(n as u64);
        } else if opt.eq_ignore_ascii_case(b"maxdeletedid") && more > 0 {
            max_deleted = parse_strict_id(args.get(i + 1), 0)?;
            if id < max_deleted {
                return Err(Error::msg("ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id"));
            }
        } else {
            return Err(Error::Syntax);
        }
        i += 2;
    }
    let key = args.get(1);
    let Some(s) = write_stream(cx, key)? else {
        return Err(Error::NoSuchKey);
    };
    if s.length > 0 {
        let top = s.last_live_id().unwrap_or(StreamId::MIN);
        if id < top {
            return Err(Error::msg(
                "ERR The ID specified in XSETID is smaller than the target stream top item",
            ));
        }
        if entries_added.is_some_and(|n| s.length > n) {
            return Err(Error::msg("ERR The entries_added specified in XSETID is smaller than the target stream length"));
        }
    }
    s.last_id = id;
    if let Some(n) = entries_added {
        s.entries_added = n;
    }
    if !max_deleted.is_zero() {
        s.max_deleted = max_deleted;
    }
    cx.db().modified(key);
    emit(cx, nc::STREAM, "xsetid", key);
    cx.propagate_verbatim();
    out.simple("OK");
    Ok(())
}

/// XLEN key.
pub(super) fn xlen(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let n = read_stream(cx, args.get(1))?.map_or(0, |s| s.length);
    out.int(n as i64);
    Ok(())
}
