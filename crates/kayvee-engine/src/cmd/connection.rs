//! Connection commands: PING, ECHO, SELECT, QUIT, RESET, HELLO, AUTH.

use crate::argv::Argv;
use crate::command::{acl, flags, CommandSpec};
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::Cx;

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "ping",
    arity: -1,
    flags: flags::FAST,
    acl: acl::FAST | acl::CONNECTION,
    summary: "Returns the server's liveliness response.",
    group: "connection",
    tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
    handler: ping,
    ..CommandSpec::DEFAULT
}];

/// PING [message]
fn ping(_cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    match args.len() {
        1 => out.simple("PONG"),
        2 => out.bulk(args.get(1)),
        _ => return Err(Error::WrongArity("ping".into())),
    }
    Ok(())
}
