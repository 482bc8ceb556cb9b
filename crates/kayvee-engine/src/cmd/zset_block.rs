//! Blocking sorted-set pops: BZPOPMIN, BZPOPMAX and BZMPOP (Redis 7.0.15). Each first tries
//! its non-blocking form; when every key is missing it blocks through [`crate::blocking`] and
//! is later served by its `serve_*` function from the key that became ready (only a sorted
//! set serves: a key of another type leaves it waiting), or times out with the null array
//! (`*-1` in RESP2, `_` in RESP3, as for the list pops).
//!
//! Argument order as Redis checks it: BZPOPMIN/BZPOPMAX parse their timeout before looking at
//! any key; BZMPOP parses `numkeys`, `MIN|MAX` and `COUNT` (as ZMPOP) before its timeout.

use super::list::propagate_pop;
use super::zset_pop::{end_pop, mpop_first, parse_mpop, pop, Mpop};
use crate::argv::Argv;
use crate::blocking::{parse_timeout, wait_on_keys};
use crate::command::{acl, flags, CommandSpec};
use crate::error::{CmdResult, Error};
use crate::keyspec::{kf, KeySpec};
use crate::reply::ReplySink;
use crate::value::Value;
use crate::Cx;
use alloc::vec::Vec;

const BPOP_CX: &str = "O(log(N)) with N being the number of elements in the sorted set.";
const BPOP_FLAGS: u32 = flags::WRITE | flags::NOSCRIPT | flags::BLOCKING | flags::FAST;
/// Every key but the last argument (the timeout).
const BPOP_KEYS: &[KeySpec] = &[KeySpec::range(kf::RW_ACCESS_DELETE, 1, -2, 1)];
const BPOP_ACL: u32 = acl::WRITE | acl::SORTEDSET | acl::FAST | acl::BLOCKING;

/// BZPOPMIN / BZPOPMAX: `key [key ...] timeout`.
const fn bpop_spec(
    name: &'static str,
    summary: &'static str,
    handler: crate::command::Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity: -3,
        flags: BPOP_FLAGS,
        first_key: 1,
        last_key: -2,
        key_step: 1,
        acl: BPOP_ACL,
        summary,
        since: "5.0.0",
        group: "sorted-set",
        complexity: BPOP_CX,
        handler,
        key_specs: BPOP_KEYS,
        ..CommandSpec::DEFAULT
    }
}

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[
    bpop_spec(
        "bzpopmin",
        "Remove and return the member with the lowest score from one or more sorted sets, or \
         block until one is available",
        bzpopmin,
    ),
    bpop_spec(
        "bzpopmax",
        "Remove and return the member with the highest score from one or more sorted sets, or \
         block until one is available",
        bzpopmax,
    ),
    CommandSpec {
        name: "bzmpop",
        arity: -5,
        flags: flags::WRITE | flags::BLOCKING | flags::MOVABLEKEYS,
        acl: acl::WRITE | acl::SORTEDSET | acl::SLOW | acl::BLOCKING,
        summary: "Remove and return members with scores in a sorted set or block until one is \
                  available",
        since: "7.0.0",
        group: "sorted-set",
        complexity: "O(K) + O(M*log(N)) where K is the number of provided keys, N being the \
                     number of elements in the sorted set, and M being the number of elements \
                     popped.",
        handler: bzmpop,
        key_specs: &[KeySpec::keynum(kf::RW_ACCESS_DELETE, 2)],
        ..CommandSpec::DEFAULT
    },
];

/// Whether `key` holds a sorted set now (only a sorted set serves a waiter).
fn holds_zset(cx: &mut Cx<'_>, key: &[u8]) -> bool {
    let now = cx.now_ms();
    matches!(cx.db().peek(key, now), Some(e) if matches!(e.value, Value::ZSet(_)))
}

/// Pops one member from the first sorted set among `keys` that exists and writes `[key,
/// member, score]`; false (nothing written) when all are missing. WRONGTYPE for a key of
/// another type met first.
fn bpop_first(
    cx: &mut Cx<'_>,
    keys: &[&[u8]],
    max: bool,
    out: &mut dyn ReplySink,
) -> Result<bool, Error> {
    for key in keys {
        if let Some(items) = pop(cx, key, 1, max)? {
            propagate_pop(cx, end_pop(max), key, None);
            let (member, score) = &items[0];
            out.array(3);
            out.bulk(key);
            out.bulk(member);
            out.double(*score);
            return Ok(true);
        }
    }
    Ok(false)
}

/// BZPOPMIN/BZPOPMAX key [key ...] timeout.
fn bzpop(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink, max: bool) -> CmdResult {
    let last = args.len() - 1;
    let deadline = parse_timeout(args.get(last), cx.now_ms())?;
    let keys: Vec<&[u8]> = (1..last).map(|i| args.get(i)).collect();
    if !bpop_first(cx, &keys, max, out)? {
        let serve = if max { serve_bzpopmax } else { serve_bzpopmin };
        wait_on_keys(cx, args, keys, deadline, serve, out);
    }
    Ok(())
}

/// Serves a BZPOPMIN/BZPOPMAX waiter from `key`.
fn serve_bzpop(
    cx: &mut Cx<'_>,
    key: &[u8],
    out: &mut dyn ReplySink,
    max: bool,
) -> Result<bool, Error> {
    if !holds_zset(cx, key) {
        return Ok(false);
    }
    bpop_first(cx, &[key], max, out)
}

fn serve_bzpopmin(
    cx: &mut Cx<'_>,
    key: &[u8],
    _: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> Result<bool, Error> {
    serve_bzpop(cx, key, out, false)
}

fn serve_bzpopmax(
    cx: &mut Cx<'_>,
    key: &[u8],
    _: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> Result<bool, Error> {
    serve_bzpop(cx, key, out, true)
}

/// BZPOPMIN key [key ...] timeout
fn bzpopmin(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    bzpop(cx, args, out, false)
}

/// BZPOPMAX key [key ...] timeout
fn bzpopmax(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    bzpop(cx, args, out, true)
}

/// BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count].
fn bzmpop(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let m = parse_mpop(args, 2)?;
    let deadline = parse_timeout(args.get(1), cx.now_ms())?;
    if !mpop_first(cx, &m, out)? {
        wait_on_keys(cx, args, m.keys, deadline, serve_bzmpop, out);
    }
    Ok(())
}

/// Serves a BZMPOP waiter from `key` with its end and count.
fn serve_bzmpop(
    cx: &mut Cx<'_>,
    key: &[u8],
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> Result<bool, Error> {
    if !holds_zset(cx, key) {
        return Ok(false);
    }
    let m = parse_mpop(args, 2)?;
    let one = Mpop {
        keys: alloc::vec![key],
        ..m
    };
    mpop_first(cx, &one, out)
}
