//! Server commands: TIME, SHUTDOWN, DEBUG (its subcommands are in [`super::debug`]). CONFIG is in
//! [`super::config_cmd`], COMMAND in [`super::introspect`].

use crate::argv::Argv;
use crate::client::Handle;
use crate::cmd::spec::CommandSpec;
use crate::command::{acl, flags};
use crate::error::{CmdResult, Error};
use crate::reply::Reply;
use crate::reply::ReplySink;
use crate::shutdown::ShutdownFlags;
use crate::{Core, Cx, Outcome};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// Flags and categories of the administrative commands here.
const ADMIN_FLAGS: u32 = flags::ADMIN | flags::NOSCRIPT | flags::LOADING | flags::STALE;
const ADMIN_ACL: u32 = acl::ADMIN | acl::SLOW | acl::DANGEROUS;

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "time",
        arity: 1,
        flags: flags::LOADING | flags::STALE | flags::FAST,
        acl: acl::FAST,
        summary: "Return the current server time",
        since: "2.6.0",
        group: "server",
        tips: &["nondeterministic_output"],
        handler: time,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "shutdown",
        arity: -1,
        flags: ADMIN_FLAGS | flags::NO_MULTI | flags::ALLOW_BUSY,
        acl: ADMIN_ACL,
        summary: "Synchronously save the dataset to disk and then shut down the server",
        since: "1.0.0",
        group: "server",
        complexity: "O(N) when saving, where N is the total number of keys in all databases \
                     when saving data, otherwise O(1)",
        handler: shutdown,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "debug",
        arity: -2,
        flags: ADMIN_FLAGS,
        acl: ADMIN_ACL,
        summary: "A container for debugging commands",
        since: "1.0.0",
        group: "server",
        complexity: "Depends on subcommand.",
        handler: debug,
        ..CommandSpec::DEFAULT
    },
];

/// TIME: unix seconds and the microseconds within the second, as bulk strings.
fn time(cx: &mut Cx<'_>, _: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let us = cx.now.unix_us;
    out.array(2);
    out.bulk_str(&alloc::format!("{}", us / 1_000_000));
    out.bulk_str(&alloc::format!("{}", us % 1_000_000));
    Ok(())
}

/// SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]. On success nothing is replied: the shell
/// closes every connection and stops (redis-cli sees the connection close). NOW skips the
/// wait for lagging replicas; FORCE exits even when the shell cannot save the RDB or the
/// first AOF rewrite still runs. ABORT cancels the shutdown a signal asked for while the cron
/// has not started it, or the wait for replicas.
fn shutdown(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let mut flags = ShutdownFlags::default();
    let (mut abort, mut now_flag) = (false, false);
    for a in args.iter().skip(1) {
        match a.to_ascii_lowercase().as_slice() {
            b"nosave" if flags.save != Some(true) => flags.save = Some(false),
            b"save" if flags.save != Some(false) => flags.save = Some(true),
            b"now" => now_flag = true,
            b"force" => flags.force = true,
            b"abort" => abort = true,
            _ => return Err(Error::Syntax),
        }
    }
    if abort {
        if flags.save.is_some() || now_flag || flags.force {
            return Err(Error::Syntax);
        }
        if !abort_shutdown(cx.core) {
            return Err(Error::msg("ERR No shutdown in progress."));
        }
        cx.core.repl.note("Shutdown manually aborted.".into());
        out.ok();
        return Ok(());
    }
    // During the startup load the dataset is partial: saving it would overwrite the file
    // being loaded, so SHUTDOWN never saves then (Redis does the same).
    if cx.core.persist.loading.is_some() {
        flags.save = Some(false);
    }
    let now_ms = cx.now_ms();
    if wait_for_replicas(cx.core, flags, now_flag, Some(cx.me), now_ms) {
        cx.outcome = Outcome::Blocked;
        return Ok(());
    }
    cx.core.shutting_down = true;
    cx.outcome = Outcome::Shutdown(flags);
    Ok(())
}

/// Redis 7.0's answer to DEBUG when `enable-debug-command` does not let this client run it.
const DEBUG_NOT_ALLOWED: &str =
    "ERR DEBUG command not allowed. If the enable-debug-command option \
    is set to \"local\", you can run it from a local connection, otherwise you need to set this \
    option in the configuration file, and then restart the server.";

/// Whether `enable-debug-command` lets the running client use DEBUG: `yes`, or `local` and
/// the client is on a Unix socket or a loopback address.
fn debug_allowed(cx: &mut Cx<'_>) -> bool {
    match cx.core.config.enable_debug_command.as_str() {
        "yes" => true,
        "local" => crate::acl::is_local(&cx.client().conn.transport),
        _ => false,
    }
}

/// DEBUG, behind `enable-debug-command` (default `no`) as in Redis 7.0; the subcommands are in
/// [`super::debug`].
fn debug(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if !debug_allowed(cx) {
        return Err(Error::msg(DEBUG_NOT_ALLOWED));
    }
    super::debug::run(cx, args, out)
}

// ---- The shutdown sequence's steps (see [`crate::shutdown`]) ----

/// Whether a replica has not acknowledged the whole replication stream.
fn replicas_lagging(core: &mut Core) -> bool {
    crate::drain::feed_replication(core);
    let offset = core.repl.offset;
    core.repl.replicas.iter().any(|r| r.ack_offset < offset)
}

/// Starts the wait for lagging replicas before a shutdown (or joins the one under way, with
/// `waiter` blocked); false when there is nothing to wait for: NOW, `shutdown-timeout 0`, or
/// every replica in sync.
pub(crate) fn wait_for_replicas(
    core: &mut Core,
    flags: ShutdownFlags,
    now_flag: bool,
    waiter: Option<Handle>,
    now_ms: u64,
) -> bool {
    if let Some(w) = &mut core.shutdown_wait {
        w.waiters.extend(waiter);
        return true;
    }
    let timeout_s = core.config.int_param("shutdown-timeout").max(0) as u64;
    if now_flag || timeout_s == 0 || !replicas_lagging(core) {
        return false;
    }
    core.shutdown_wait = Some(crate::shutdown::ShutdownWait {
        deadline_ms: now_ms + timeout_s * 1000,
        flags,
        waiters: waiter.into_iter().collect(),
    });
    if core.repl.failover.is_none() {
        core.pause.hold_writes(true);
    }
    core.aof
        .feed_repl_raw(b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n");
    core.repl
        .note(String::from("Waiting for replicas before shutting down."));
    true
}

/// Ends the wait when every replica acknowledged the stream or its time is up: logs the
/// replicas' state and returns the flags to shut down with. Its clients are answered only if
/// the shutdown then fails ([`shutdown_failed`]).
pub(crate) fn shutdown_wait_done(core: &mut Core, now_ms: u64) -> Option<ShutdownFlags> {
    let deadline_ms = core.shutdown_wait.as_ref()?.deadline_ms;
    if replicas_lagging(core) && now_ms < deadline_ms {
        return None;
    }
    let w = core.shutdown_wait.take()?;
    let offset = core.repl.offset;
    let mut lines = Vec::new();
    let mut in_sync = 0;
    for r in &core.repl.replicas {
        if r.ack_offset >= offset {
            in_sync += 1;
            continue;
        }
        lines.push(format!(
            "Lagging replica port {} reported offset {} behind master, lag={}, state={}.",
            r.announced.port,
            offset - r.ack_offset,
            now_ms.saturating_sub(r.ack_ms) / 1000,
            r.state.name()
        ));
    }
    lines.push(format!(
        "{in_sync} of {} replicas are in sync when shutting down.",
        core.repl.replicas.len()
    ));
    for line in lines {
        core.repl.note(line);
    }
    if core.repl.failover.is_none() {
        core.pause.hold_writes(false);
    }
    core.shutting_down = true;
    core.shutdown_waiters = w.waiters;
    Some(w.flags)
}

/// SHUTDOWN ABORT: cancels the shutdown a signal asked for or the wait for replicas (its
/// clients get the error); false when neither was under way.
pub(crate) fn abort_shutdown(core: &mut Core) -> bool {
    let asked = core.shutdown_signal.take().is_some();
    let Some(w) = core.shutdown_wait.take() else {
        return asked;
    };
    if core.repl.failover.is_none() {
        core.pause.hold_writes(false);
    }
    answer_failed(core, w.waiters);
    true
}

/// The shutdown did not happen (its save failed): the clients that waited get the error.
pub(crate) fn shutdown_failed(core: &mut Core) {
    core.shutting_down = false;
    let waiters = core::mem::take(&mut core.shutdown_waiters);
    answer_failed(core, waiters);
}

/// Answers `waiters` with [`crate::shutdown::FAILED`].
fn answer_failed(core: &mut Core, waiters: Vec<Handle>) {
    for h in waiters {
        core.blocking
            .push_wakeup(h, alloc::vec![Reply::Error(crate::shutdown::FAILED.into())]);
    }
}

/// Client `h` disconnected.
pub(crate) fn forget_shutdown_waiter(core: &mut Core, h: Handle) {
    if let Some(w) = &mut core.shutdown_wait {
        w.waiters.retain(|&x| x != h);
    }
    core.shutdown_waiters.retain(|&x| x != h);
}

/// Clients blocked in SHUTDOWN (INFO `blocked_clients`).
pub fn shutdown_blocked(core: &Core) -> usize {
    core.shutdown_wait.as_ref().map_or(0, |w| w.waiters.len())
}

/// Whether client `h` is blocked in SHUTDOWN.
pub fn shutdown_waiting(core: &Core, h: Handle) -> bool {
    core.shutdown_wait
        .as_ref()
        .is_some_and(|w| w.waiters.contains(&h))
        || core.shutdown_waiters.contains(&h)
}

/// INFO `shutdown_in_milliseconds`: the time left of the wait for replicas, else 0.
pub fn shutdown_remaining_ms(core: &Core, now_ms: u64) -> u64 {
    core.shutdown_wait
        .as_ref()
        .map_or(0, |w| w.deadline_ms.saturating_sub(now_ms))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::{Protocol, Reply, ReplyTree};
    use crate::{ArgvBuf, Config, ConnInfo, Engine, Now, Transport};

    /// Runs one command on a fresh connection; returns its outcome and replies.
    fn run(engine: &mut Engine, line: &str) -> (Outcome, alloc::vec::Vec<Reply>) {
        let now = Now::from_ms(1_700_000_000_000);
        let conn = ConnInfo {
            transport: Transport::Unix {
                path: "/tmp/k.sock".into(),
            },
            fd: 1,
        };
        let h = engine.connect(conn, now);
        let mut tree = ReplyTree::new(Protocol::Resp2);
        let outcome = engine.execute(h, &ArgvBuf::from_line(line).argv(), now, &mut tree);
        (outcome, tree.take())
    }

    /// A config with DEBUG enabled.
    fn debug_enabled() -> Config {
        let mut c = Config::default();
        c.apply_file("enable-debug-command yes\n").unwrap();
        c
    }

    #[test]
    fn debug_needs_enable_debug_command() {
        let mut e = Engine::new(Config::default(), 1, Now::default());
        let (outcome, replies) = run(&mut e, "DEBUG SLEEP 1e300");
        assert_eq!(outcome, Outcome::Continue);
        assert_eq!(replies, alloc::vec![Reply::Error(DEBUG_NOT_ALLOWED.into())]);
        let (_, got) = run(&mut e, "CONFIG GET enable-debug-command");
        assert_eq!(got.len(), 1);
        let (_, set) = run(&mut e, "CONFIG SET enable-debug-command yes");
        assert!(matches!(&set[0], Reply::Error(m) if m.contains("can't set immutable config")));
        // `local`: the test connection is a Unix socket, which counts as local.
        let mut c = Config::default();
        c.apply_file("enable-debug-command local\n").unwrap();
        let mut e = Engine::new(c, 1, Now::default());
        assert_eq!(run(&mut e, "DEBUG SLEEP 0").0, Outcome::Sleep(0));
    }

    #[test]
    fn shutdown_and_sleep_ask_the_shell() {
        let mut e = Engine::new(debug_enabled(), 1, Now::default());
        let flags = |save, force| Outcome::Shutdown(ShutdownFlags { save, force });
        assert_eq!(run(&mut e, "SHUTDOWN"), (flags(None, false), alloc::vec![]));
        let r = run(&mut e, "shutdown now nosave force");
        assert_eq!(r, (flags(Some(false), true), alloc::vec![]));
        assert_eq!(run(&mut e, "SHUTDOWN SAVE").0, flags(Some(true), false));
        let (_, r) = run(&mut e, "SHUTDOWN FORCE ABORT");
        assert_eq!(r, alloc::vec![Reply::Error("ERR syntax error".into())]);
        let r = run(&mut e, "DEBUG SLEEP 0.25");
        assert_eq!(
            r,
            (
                Outcome::Sleep(250_000),
                alloc::vec![Reply::Simple("OK".into())]
            )
        );
        let (_, help) = run(&mut e, "DEBUG HELP");
        assert!(matches!(&help[0], Reply::Array(l) if l.len() > 5));
    }

    #[test]
    fn config_rewrite_goes_through_the_shell() {
        let mut e = Engine::new(Config::default(), 1, Now::default());
        assert!(e.rewrite_config().is_err());
        let mut c = Config::default();
        c.apply_file("hz 11\n").unwrap();
        c.config_file = Some("/etc/kayvee.conf".into());
        let mut e = Engine::new(c, 1, Now::default());
        run(&mut e, "CONFIG SET hz 12 maxclients 5");
        assert_eq!(
            run(&mut e, "CONFIG REWRITE"),
            (Outcome::RewriteConfig, alloc::vec![])
        );
        let (path, text) = e.rewrite_config().unwrap();
        assert_eq!(path, "/etc/kayvee.conf");
        assert_eq!(
            text,
            "hz 12\n\n# Generated by CONFIG REWRITE\nmaxclients 5\n"
        );
        let (count, _) = (run(&mut e, "COMMAND COUNT").1, ());
        assert_eq!(
            count,
            alloc::vec![Reply::Int(e.command_table().count() as i64)]
        );
    }
}
