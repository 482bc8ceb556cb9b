//! Server commands: TIME, SHUTDOWN, DEBUG (its subcommands are in [`super::debug`]). CONFIG is in
//! [`super::config_cmd`], COMMAND in [`super::introspect`].

use crate::argv::Argv;
use crate::cmd::spec::CommandSpec;
use crate::command::{acl, flags};
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::{Cx, Outcome};

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
/// closes every connection and stops (redis-cli sees the connection close). NOW and FORCE are
/// accepted; with no replicas to wait for, NOW changes nothing.
fn shutdown(cx: &mut Cx<'_>, args: &Argv<'_>, _: &mut dyn ReplySink) -> CmdResult {
    let (mut save, mut abort, mut other) = (None, false, false);
    for a in args.iter().skip(1) {
        match a.to_ascii_lowercase().as_slice() {
            b"nosave" if save != Some(true) => save = Some(false),
            b"save" if save != Some(false) => save = Some(true),
            b"now" | b"force" => other = true,
            b"abort" => abort = true,
            _ => return Err(Error::Syntax),
        }
    }
    if abort {
        if save.is_some() || other {
            return Err(Error::Syntax);
        }
        return Err(Error::msg("ERR No shutdown in progress."));
    }
    cx.core.shutting_down = true;
    // During the startup load the dataset is partial: saving it would overwrite the file
    // being loaded, so SHUTDOWN never saves then (Redis does the same).
    if cx.core.persist.loading.is_some() {
        save = Some(false);
    }
    cx.outcome = Outcome::Shutdown { save };
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
        assert_eq!(
            run(&mut e, "SHUTDOWN"),
            (Outcome::Shutdown { save: None }, alloc::vec![])
        );
        let r = run(&mut e, "shutdown now nosave force");
        assert_eq!(r, (Outcome::Shutdown { save: Some(false) }, alloc::vec![]));
        assert_eq!(
            run(&mut e, "SHUTDOWN SAVE").0,
            Outcome::Shutdown { save: Some(true) }
        );
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
