//! SLOWLOG (GET, LEN, RESET, HELP); the log itself is [`crate::slowlog`].

use crate::argv::Argv;
use crate::cmd::spec::CommandSpec;
use crate::command::{acl, flags};
use crate::error::{CmdResult, Error};
use crate::reply::{help_reply, ReplySink};
use crate::util::parse_i64;
use crate::Cx;

const ADMIN_SUB: u32 = flags::ADMIN | flags::LOADING | flags::STALE;
const ADMIN_ACL: u32 = acl::ADMIN | acl::SLOW | acl::DANGEROUS;

/// SLOWLOG's subcommands.
const SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "reset",
        arity: 2,
        flags: ADMIN_SUB,
        acl: ADMIN_ACL,
        summary: "Clear all entries from the slow log",
        since: "2.2.12",
        group: "server",
        complexity: "O(N) where N is the number of entries in the slowlog",
        tips: &["request_policy:all_nodes", "response_policy:all_succeeded"],
        handler: slowlog_reset,
        ..CommandSpec::DEFAULT
    },
    CommandSpec::help_sub("6.2.0", "server", slowlog_help),
    CommandSpec {
        name: "get",
        arity: -2,
        flags: ADMIN_SUB,
        acl: ADMIN_ACL,
        summary: "Get the slow log's entries",
        since: "2.2.12",
        group: "server",
        complexity: "O(N) where N is the number of entries returned",
        tips: &["request_policy:all_nodes", "nondeterministic_output"],
        handler: slowlog_get,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "len",
        arity: 2,
        flags: ADMIN_SUB,
        acl: ADMIN_ACL,
        summary: "Get the slow log's length",
        since: "2.2.12",
        group: "server",
        tips: &[
            "request_policy:all_nodes",
            "response_policy:agg_sum",
            "nondeterministic_output",
        ],
        handler: slowlog_len,
        ..CommandSpec::DEFAULT
    },
];

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "slowlog",
    arity: -2,
    acl: acl::SLOW,
    summary: "A container for slow log commands",
    since: "2.2.12",
    group: "server",
    complexity: "Depends on subcommand.",
    subcommands: SUBCOMMANDS,
    ..CommandSpec::DEFAULT
}];

/// The lines of SLOWLOG HELP between its header and HELP, as Redis 7.0.15 sends them.
const HELP: &[&str] = &[
    "GET [<count>]",
    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
    "    Entries are made of:",
    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
    "    client name",
    "LEN",
    "    Return the length of the slowlog.",
    "RESET",
    "    Reset the slowlog.",
];

/// SLOWLOG HELP.
fn slowlog_help(_cx: &mut Cx<'_>, _args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    help_reply(out, "SLOWLOG", HELP);
    Ok(())
}

/// SLOWLOG RESET.
fn slowlog_reset(cx: &mut Cx<'_>, _args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    cx.core.slowlog.entries.clear();
    out.ok();
    Ok(())
}

/// SLOWLOG LEN.
fn slowlog_len(cx: &mut Cx<'_>, _args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    out.int(cx.core.slowlog.entries.len() as i64);
    Ok(())
}

/// SLOWLOG GET [count]: the newest `count` entries (10 by default, -1 for all).
fn slowlog_get(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if args.len() > 3 {
        let sub = crate::util::sanitize(args.get(1), 128);
        return Err(Error::msg(alloc::format!(
            "ERR unknown subcommand or wrong number of arguments for '{sub}'. Try SLOWLOG HELP."
        )));
    }
    let count = match args.len() {
        3 => match parse_i64(args.get(2)) {
            Some(-1) => usize::MAX,
            Some(n) if n >= 0 => n as usize,
            _ => {
                return Err(Error::msg(
                    "ERR count should be greater than or equal to -1",
                ))
            }
        },
        _ => 10,
    };
    let log = &cx.core.slowlog.entries;
    out.array(count.min(log.len()));
    for e in log.iter().take(count) {
        out.array(6);
        out.int(e.id as i64);
        out.int(e.time_s);
        out.int(e.usec as i64);
        out.array(e.args.len());
        e.args.iter().for_each(|a| out.bulk(a));
        out.bulk(e.addr.as_bytes());
        out.bulk(&e.name);
    }
    Ok(())
}
