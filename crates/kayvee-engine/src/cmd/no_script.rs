//! FUNCTION FLUSH in a build without scripting (the unikernel's): no function library can ever
//! be loaded there, so FLUSH has nothing to delete and answers as Redis does on an empty
//! registry. Clients and tools that reset a server with it (Redis's own test suite sends it
//! before every unit in external mode) work; the other FUNCTION subcommands stay unknown.

use crate::argv::Argv;
use crate::cmd::spec::CommandSpec;
use crate::command::{acl, flags};
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::Cx;

pub const COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "function",
    arity: -2,
    acl: acl::SLOW,
    summary: "A container for function commands",
    since: "7.0.0",
    group: "scripting",
    complexity: "Depends on subcommand.",
    subcommands: SUBCOMMANDS,
    ..CommandSpec::DEFAULT
}];

const SUBCOMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "flush",
    arity: -2,
    flags: flags::WRITE | flags::NOSCRIPT,
    acl: acl::WRITE | acl::SLOW | acl::SCRIPTING,
    summary: "Deleting all functions",
    since: "7.0.0",
    group: "scripting",
    complexity: "O(N) where N is the number of functions deleted",
    tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
    handler: function_flush,
    ..CommandSpec::DEFAULT
}];

/// FUNCTION FLUSH [ASYNC|SYNC]: Redis's argument checks; there is nothing to delete.
fn function_flush(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if args.len() > 3 {
        return Err(Error::Bytes(
            [
                &b"ERR unknown subcommand or wrong number of arguments for '"[..],
                args.get(1),
                b"'. Try FUNCTION HELP.",
            ]
            .concat(),
        ));
    }
    let mode_ok = args.len() == 2
        || args.get(2).eq_ignore_ascii_case(b"sync")
        || args.get(2).eq_ignore_ascii_case(b"async");
    if !mode_ok {
        return Err(Error::msg(
            "ERR FUNCTION FLUSH only supports SYNC|ASYNC option",
        ));
    }
    cx.propagate_verbatim();
    out.ok();
    Ok(())
}
