//! CONFIG GET / SET / RESETSTAT / REWRITE / HELP (Redis 7.0: several patterns for GET, several
//! pairs for SET, applied atomically). The parameter table lives in [`crate::config`].

use crate::argv::Argv;
use crate::cmd::spec::CommandSpec;
use crate::command::{acl, flags};
use crate::error::{CmdResult, Error};
use crate::reply::{help_reply, ReplySink};
use crate::{Cx, Outcome, Stats};
use alloc::vec::Vec;

/// Flags CONFIG's administrative subcommands share.
const ADMIN_FLAGS: u32 = flags::ADMIN | flags::NOSCRIPT | flags::LOADING | flags::STALE;
/// ACL categories of CONFIG's administrative subcommands.
const ADMIN_ACL: u32 = acl::ADMIN | acl::SLOW | acl::DANGEROUS;
/// Complexity of GET and SET.
const PER_PARAM: &str = "O(N) when N is the number of configuration parameters provided";

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "config",
    arity: -2,
    acl: acl::SLOW,
    summary: "A container for server configuration commands",
    since: "2.0.0",
    group: "server",
    complexity: "Depends on subcommand.",
    subcommands: SUBCOMMANDS,
    ..CommandSpec::DEFAULT
}];

const SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "set",
        arity: -4,
        flags: ADMIN_FLAGS,
        acl: ADMIN_ACL,
        summary: "Set configuration parameters to the given values",
        since: "2.0.0",
        group: "server",
        complexity: PER_PARAM,
        tips: &["request_policy:all_nodes", "response_policy:all_succeeded"],
        handler: config_set,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "get",
        arity: -3,
        flags: ADMIN_FLAGS,
        acl: ADMIN_ACL,
        summary: "Get the values of configuration parameters",
        since: "2.0.0",
        group: "server",
        complexity: PER_PARAM,
        handler: config_get,
        ..CommandSpec::DEFAULT
    },
    CommandSpec::help_sub("5.0.0", "server", config_help),
    CommandSpec {
        name: "resetstat",
        arity: 2,
        flags: ADMIN_FLAGS,
        acl: ADMIN_ACL,
        summary: "Reset the stats returned by INFO",
        since: "2.0.0",
        group: "server",
        handler: config_resetstat,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "rewrite",
        arity: 2,
        flags: ADMIN_FLAGS,
        acl: ADMIN_ACL,
        summary: "Rewrite the configuration file with the in memory configuration",
        since: "2.8.0",
        group: "server",
        handler: config_rewrite,
        ..CommandSpec::DEFAULT
    },
];

/// CONFIG GET pattern [pattern ...]: a map of matching parameters (flat array in RESP2).
fn config_get(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let patterns: Vec<&[u8]> = args.iter().skip(2).collect();
    let mut found = cx.core.config.get_matching(&patterns);
    // `replicaof` (alias `slaveof`) shows the primary this server follows now, "host port",
    // or nothing (Redis renders it from its replication state, not from a stored value).
    for name in ["replicaof", "slaveof"] {
        let hit = patterns.iter().find(|pat| {
            if pat.iter().any(|c| b"*?[".contains(c)) {
                crate::util::glob_match(pat, name.as_bytes(), true)
            } else {
                pat.eq_ignore_ascii_case(name.as_bytes())
            }
        });
        if let Some(pat) = hit {
            let shown = match pat.iter().any(|c| b"*?[".contains(c)) {
                true => name.as_bytes().to_vec(),
                false => pat.to_vec(),
            };
            let value = match &cx.core.repl.primary {
                Some(p) => alloc::format!("{} {}", p.host, p.port).into_bytes(),
                None => Vec::new(),
            };
            found.push((shown, value));
        }
    }
    out.map(found.len());
    for (name, value) in &found {
        out.bulk(name);
        out.bulk(value);
    }
    Ok(())
}

/// CONFIG SET name value [name value ...]: all or nothing.
fn config_set(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if !args.len().is_multiple_of(2) {
        return Err(Error::Syntax);
    }
    let pairs: Vec<(&[u8], &[u8])> = (2..args.len())
        .step_by(2)
        .map(|i| (args.get(i), args.get(i + 1)))
        .collect();
    let loading = cx.core.persist.loading.is_some() || cx.core.persist.async_loading;
    let named = |name: &[u8]| pairs.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    if loading && DENY_LOADING.iter().any(|&n| named(n)) {
        return Err(Error::msg(crate::persist::LOADING));
    }
    let maxmemory = cx.core.config.maxmemory;
    let appendonly = cx.core.config.appendonly;
    // The shell may fail to listen on a new `port` or `bind`: the whole call is undone then.
    let rebinds = pairs
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case(b"port") || n.eq_ignore_ascii_case(b"bind"));
    let previous = rebinds.then(|| cx.core.config.clone());
    let local = crate::acl::is_local(&cx.client().conn.transport);
    cx.core
        .config
        .set_many_as(&pairs, local)
        .map_err(Error::msg)?;
    cx.core.config.sets += 1;
    let requirepass = pairs
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case(b"requirepass"));
    apply(cx.core, requirepass);
    if named(&b"repl-backlog-size"[..]) {
        resize_backlog(cx.core);
    }
    if cx.core.config.appendonly && !appendonly && cx.core.in_exec {
        cx.core.aof.status.enabled_in_exec = true;
    }
    if cx.core.config.maxmemory != maxmemory && !cx.core.in_exec && !cx.core.script_running {
        // A new limit evicts at once, as Redis does on CONFIG SET maxmemory (inside EXEC or
        // a script, not before the next top-level command).
        crate::drain::evict(cx.core, cx.now);
    }
    if let Some(previous) = previous {
        let c = &cx.core.config;
        if c.port != previous.port || c.bind != previous.bind {
            // The shell listens anew, then replies (or rolls back, `rollback`).
            cx.outcome = Outcome::Rebind;
            cx.core.config_before_set = Some(alloc::boxed::Box::new(previous));
            return Ok(());
        }
    }
    out.ok();
    Ok(())
}

/// The parameters CONFIG SET refuses with `-LOADING` while a dataset loads (Redis's
/// `DENY_LOADING_CONFIG`).
const DENY_LOADING: [&[u8]; 3] = [b"appendonly", b"repl-diskless-load", b"dir"];

/// Smallest backlog Redis keeps whatever `repl-backlog-size` says (its
/// `CONFIG_REPL_BACKLOG_MIN_SIZE`).
const BACKLOG_MIN_BYTES: usize = 16 * 1024;

/// A new `repl-backlog-size` applies at once to the backlog, which keeps its newest bytes
/// that fit (a replica further behind then needs a full sync), as Redis resizes it.
fn resize_backlog(core: &mut crate::Core) {
    let size = usize::try_from(core.config.int_param("repl-backlog-size")).unwrap_or(usize::MAX);
    if let Some(b) = core.repl.backlog.as_mut() {
        b.resize(size.max(BACKLOG_MIN_BYTES));
    }
}

/// Makes the rest of the engine follow the configuration: the memory limit's parameters,
/// `requirepass` as the default user's password (see `crate::acl`), what is listened to.
fn apply(core: &mut crate::Core, requirepass: bool) {
    crate::evict::sync(&mut core.evict, &mut core.dbs, &core.config, core.seed);
    if requirepass {
        let pass = core.config.requirepass.clone();
        core.acl.set_requirepass(pass.as_deref());
    }
    crate::drain::sync(core);
}

/// Undoes the last CONFIG SET whose new `port` or `bind` the shell could not listen on: every
/// parameter of that call gets its previous value back, as Redis rolls back a failed apply.
pub fn rollback(core: &mut crate::Core) {
    if let Some(previous) = core.config_before_set.take() {
        let requirepass = previous.requirepass != core.config.requirepass;
        core.config = *previous;
        apply(core, requirepass);
    }
}

/// CONFIG RESETSTAT: zeroes the INFO counters (commands, errors, connections, keyspace hits,
/// misses and expiries, full and partial syncs) and restarts their clock.
fn config_resetstat(cx: &mut Cx<'_>, _: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let stats = &mut cx.core.stats;
    *stats = Stats {
        commands: alloc::vec![Default::default(); stats.commands.len()],
        reset_ms: cx.now.ms(),
        ..Default::default()
    };
    cx.core.repl.stats = Default::default();
    for db in &mut cx.core.dbs {
        db.stats = Default::default();
    }
    cx.core.latency.histograms.clear();
    out.ok();
    Ok(())
}

/// CONFIG REWRITE: the shell writes the file (the engine does no I/O) and sends the reply, so
/// nothing is written here unless there is no file to write. Inside a transaction (Sentinel
/// sends it in a MULTI with SLAVEOF) the reply is an element of EXEC's array: `+OK` goes
/// there now and the shell's answer is dropped.
fn config_rewrite(cx: &mut Cx<'_>, _: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if cx.core.config.config_file.is_none() {
        return Err(no_config_file());
    }
    if cx.core.txn.in_multi(cx.me) {
        out.ok();
        cx.core.rewrite_answered = true;
    }
    cx.outcome = Outcome::RewriteConfig;
    Ok(())
}

/// `ERR The server is running without a config file`.
pub fn no_config_file() -> Error {
    Error::msg("ERR The server is running without a config file")
}

/// CONFIG HELP.
fn config_help(_: &mut Cx<'_>, _: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    help_reply(
        out,
        "CONFIG",
        &[
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
        ],
    );
    Ok(())
}
