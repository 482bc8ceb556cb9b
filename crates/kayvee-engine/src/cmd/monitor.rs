//! MONITOR: the client starts receiving every command the server runs (the lines and their
//! rules are [`crate::monitor`]'s).

use crate::argv::Argv;
use crate::cmd::spec::CommandSpec;
use crate::command::{acl, flags};
use crate::error::CmdResult;
use crate::reply::ReplySink;
use crate::Cx;

/// MONITOR's table entry.
pub const COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "monitor",
    arity: 1,
    flags: flags::ADMIN | flags::NOSCRIPT | flags::LOADING | flags::STALE,
    acl: acl::ADMIN | acl::SLOW | acl::DANGEROUS,
    summary: "Listen for all requests received by the server in real time",
    since: "1.0.0",
    group: "server",
    handler: monitor,
    ..CommandSpec::DEFAULT
}];

/// MONITOR: the client starts receiving every command; a monitor asking again gets no reply.
fn monitor(cx: &mut Cx<'_>, _args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if cx.core.monitors.add(cx.me) {
        out.ok();
    }
    Ok(())
}
