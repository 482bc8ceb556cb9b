//! BGREWRITEAOF, with Redis 7.0.15's replies. The rewrite itself is the shell's: the command
//! only sets [`crate::aof::AofStatus::rewrite_requested`], which the shell polls after each
//! batch of commands (no new [`crate::Outcome`], so every shell keeps building).

use crate::argv::Argv;
use crate::cmd::spec::CommandSpec;
use crate::command::{acl, flags};
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::Cx;

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "bgrewriteaof",
    arity: 1,
    flags: flags::ADMIN | flags::NOSCRIPT | flags::NO_ASYNC_LOADING,
    acl: acl::ADMIN | acl::SLOW | acl::DANGEROUS,
    summary: "Asynchronously rewrite the append-only file",
    since: "1.0.0",
    group: "server",
    complexity: "O(1)",
    handler: bgrewriteaof,
    ..CommandSpec::DEFAULT
}];

/// BGREWRITEAOF: refused while one runs; queued behind a running BGSAVE or the running EXEC,
/// as Redis does.
fn bgrewriteaof(cx: &mut Cx<'_>, _: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if !cx.core.host.storage {
        return Err(Error::msg(super::persist::NO_STORAGE));
    }
    let bgsave = cx.core.persist.bgsave_in_progress();
    let s = &mut cx.core.aof.status;
    if s.rewrite_started_ms.is_some() {
        return Err(Error::msg(
            "ERR Background append only file rewriting already in progress",
        ));
    }
    // Inside EXEC it waits for the transaction's end, as Redis's `in_exec`.
    if bgsave || cx.core.in_exec {
        s.rewrite_scheduled = true;
        s.consecutive_failures = 0;
        out.simple("Background append only file rewriting scheduled");
    } else {
        s.rewrite_requested = true;
        out.simple("Background append only file rewriting started");
    }
    Ok(())
}
