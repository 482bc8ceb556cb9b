//! Transaction commands: MULTI, EXEC, DISCARD, WATCH, UNWATCH, with Redis 7.0.15's replies and
//! error texts (checked against the real server). The queueing while in MULTI and EXEC's run of
//! the queue live in [`crate::dispatch`]; the bookkeeping in [`crate::txn`].

use crate::argv::Argv;
use crate::cmd::spec::CommandSpec;
use crate::command::{acl, flags};
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::Cx;

/// Flags Redis 7.0 gives MULTI, DISCARD, WATCH and UNWATCH.
const TXN_FLAGS: u32 =
    flags::NOSCRIPT | flags::LOADING | flags::STALE | flags::FAST | flags::ALLOW_BUSY;

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "multi",
        arity: 1,
        flags: TXN_FLAGS,
        acl: acl::FAST | acl::TRANSACTION,
        summary: "Mark the start of a transaction block",
        since: "1.2.0",
        group: "transactions",
        handler: multi,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "exec",
        arity: 1,
        flags: flags::NOSCRIPT | flags::LOADING | flags::STALE | flags::SKIP_SLOWLOG,
        acl: acl::SLOW | acl::TRANSACTION,
        summary: "Execute all commands issued after MULTI",
        since: "1.2.0",
        group: "transactions",
        complexity: "Depends on commands in the transaction",
        handler: exec,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "discard",
        arity: 1,
        flags: TXN_FLAGS,
        acl: acl::FAST | acl::TRANSACTION,
        summary: "Discard all commands issued after MULTI",
        since: "2.0.0",
        group: "transactions",
        complexity: "O(N), when N is the number of queued commands",
        handler: discard,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "watch",
        arity: -2,
        flags: TXN_FLAGS,
        first_key: 1,
        last_key: -1,
        key_step: 1,
        acl: acl::FAST | acl::TRANSACTION,
        summary: "Watch the given keys to determine execution of the MULTI/EXEC block",
        since: "2.2.0",
        group: "transactions",
        complexity: "O(1) for every key.",
        handler: watch,
        key_flags: &["RO"],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "unwatch",
        arity: 1,
        flags: TXN_FLAGS,
        acl: acl::FAST | acl::TRANSACTION,
        summary: "Forget about all watched keys",
        since: "2.2.0",
        group: "transactions",
        handler: unwatch,
        ..CommandSpec::DEFAULT
    },
];

/// MULTI: enters the queueing state.
fn multi(cx: &mut Cx<'_>, _args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if cx.core.txn.in_multi(cx.me) {
        return Err(Error::msg("ERR MULTI calls can not be nested"));
    }
    cx.core.txn.begin(cx.me);
    out.ok();
    Ok(())
}

/// EXEC is run by [`crate::dispatch`] itself (it runs the queued commands); this handler is
/// only reached if something bypasses the dispatcher.
fn exec(_cx: &mut Cx<'_>, _args: &Argv<'_>, _out: &mut dyn ReplySink) -> CmdResult {
    Err(Error::msg("ERR EXEC without MULTI"))
}

/// DISCARD: drops the queue and the watched keys.
fn discard(cx: &mut Cx<'_>, _args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if !cx.core.txn.in_multi(cx.me) {
        return Err(Error::msg("ERR DISCARD without MULTI"));
    }
    crate::drain::discard(cx.core, cx.me);
    out.ok();
    Ok(())
}

/// WATCH key [key ...]: EXEC will answer null if one of them is modified before it.
fn watch(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if cx.core.txn.in_multi(cx.me) {
        return Err(Error::msg("ERR WATCH inside MULTI is not allowed"));
    }
    for key in args.iter().skip(1) {
        crate::drain::watch(cx.core, cx.me, cx.db_index, key, cx.now.ms());
    }
    out.ok();
    Ok(())
}

/// UNWATCH: forgets every watched key (and that one was modified).
fn unwatch(cx: &mut Cx<'_>, _args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    crate::drain::unwatch_all(cx.core, cx.me);
    out.ok();
    Ok(())
}
