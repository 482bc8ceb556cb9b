//! List pushes: LPUSH, RPUSH, LPUSHX, RPUSHX (Redis 7.0.15 semantics).

use super::push_items;
use crate::argv::Argv;
use crate::error::CmdResult;
use crate::reply::ReplySink;
use crate::Cx;

/// LPUSH key element [element ...]
pub(super) fn lpush(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let n = push_items(cx, args.get(1), args.iter().skip(2), true, false)?;
    if n > 0 {
        cx.propagate_verbatim();
    }
    out.int(n as i64);
    Ok(())
}

/// RPUSH key element [element ...]
pub(super) fn rpush(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let n = push_items(cx, args.get(1), args.iter().skip(2), false, false)?;
    if n > 0 {
        cx.propagate_verbatim();
    }
    out.int(n as i64);
    Ok(())
}

/// LPUSHX key element [element ...]: only onto an existing list.
pub(super) fn lpushx(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let n = push_items(cx, args.get(1), args.iter().skip(2), true, true)?;
    if n > 0 {
        cx.propagate_verbatim();
    }
    out.int(n as i64);
    Ok(())
}

/// RPUSHX key element [element ...]: only onto an existing list.
pub(super) fn rpushx(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let n = push_items(cx, args.get(1), args.iter().skip(2), false, true)?;
    if n > 0 {
        cx.propagate_verbatim();
    }
    out.int(n as i64);
    Ok(())
}
