//! XRANGE and XREVRANGE: entries between two IDs (inclusive, or exclusive with `(`).

use super::{parse_range_bound, read_stream, reply_raw_entry};
use crate::argv::Argv;
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::Cx;

/// XRANGE / XREVRANGE key a b [COUNT count] (`rev`: `a` is the end).
fn range(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink, rev: bool) -> CmdResult {
    let (start_arg, end_arg) = if rev { (3, 2) } else { (2, 3) };
    let start = parse_range_bound(args.get(start_arg), 0, true)?
        .ok_or(Error::msg("ERR invalid start ID for the interval"))?;
    let end = parse_range_bound(args.get(end_arg), u64::MAX, false)?
        .ok_or(Error::msg("ERR invalid end ID for the interval"))?;
    let mut count: Option<usize> = None;
    let mut j = 4;
    while j < args.len() {
        if args.get(j).eq_ignore_ascii_case(b"count") && j + 1 < args.len() {
            let n = parse_i64(args.get(j + 1)).ok_or(Error::NotInteger)?;
            count = Some(n.max(0) as usize);
            j += 2;
        } else {
            return Err(Error::Syntax);
        }
    }
    let Some(s) = read_stream(cx, args.get(1))? else {
        out.array(0);
        return Ok(());
    };
    if count == Some(0) {
        out.null_array();
        return Ok(());
    }
    let limit = count.unwrap_or(0);
    let mut items = alloc::vec::Vec::new();
    s.range(start, end, rev, |e| {
        items.push(crate::value::stream::OwnedEntry::from(e));
        limit == 0 || items.len() < limit
    });
    let _ = reply_raw_entry;
    super::reply_entries(out, &items);
    // Redis writes this reply's length after its elements: all of it counts against the
    // client's output limit.
    cx.outcome = crate::Outcome::DeferredReply;
    Ok(())
}

/// XRANGE key start end [COUNT count].
pub(super) fn xrange(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    range(cx, args, out, false)
}

/// XREVRANGE key end start [COUNT count].
pub(super) fn xrevrange(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    range(cx, args, out, true)
}
