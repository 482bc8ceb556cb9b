//! FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT milliseconds] (Redis 7.0): a primary
//! hands its role to one of its replicas without losing a write. It holds writes (the
//! pause's FAILOVER hold), waits until a replica (the target, if named) acknowledged the whole
//! stream, then becomes that replica's replica with `PSYNC <replid> <offset> FAILOVER`, which
//! makes the target a primary before it answers `+CONTINUE`. The link coming up ends the
//! FAILOVER (the held writes then meet a replica: `-READONLY`); the timeout aborts it (FORCE:
//! switch to the target anyway), as does FAILOVER ABORT. The cron's part is [`cron`]; the
//! target's part is PSYNC's (`psync`). Errors are Redis 7.0.15's texts.

use super::{become_primary, follow, kill_replicas};
use crate::argv::Argv;
use crate::client::ClientTable;
use crate::cx::Core;
use crate::error::{CmdResult, Error};
use crate::repl::{replica_ip, Failover, FailoverState, FailoverStep};
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::Cx;
use alloc::string::String;

/// What FAILOVER's arguments asked for.
#[derive(Default)]
struct Args {
    timeout_ms: i64,
    target: Option<(String, u16)>,
    force: bool,
}

/// FAILOVER.
pub fn failover(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if args.len() == 2 && args.get(1).eq_ignore_ascii_case(b"abort") {
        if cx.core.repl.failover.is_none() {
            return Err(Error::msg("ERR No failover in progress."));
        }
        if abort(cx.core, cx.clients, "Failover manually aborted") {
            cx.outcome = crate::Outcome::KillClients;
        }
        out.ok();
        return Ok(());
    }
    let a = parse(args)?;
    check(cx, &a)?;
    let now_ms = cx.now_ms();
    cx.core.repl.failover = Some(Failover {
        state: FailoverState::WaitForSync,
        target: a.target,
        deadline_ms: (a.timeout_ms > 0).then(|| now_ms + a.timeout_ms as u64),
        force: a.force,
    });
    cx.core.pause.hold_writes(true);
    let line = match &cx
        .core
        .repl
        .failover
        .as_ref()
        .and_then(|f| f.target.clone())
    {
        Some((host, port)) => alloc::format!("FAILOVER requested to {host}:{port}."),
        None => String::from("FAILOVER requested to any replica."),
    };
    cx.core.repl.note(line);
    out.ok();
    Ok(())
}

/// The options, each at most once, as Redis parses them.
fn parse(args: &Argv<'_>) -> Result<Args, Error> {
    let mut a = Args::default();
    let mut i = 1;
    while i < args.len() {
        let word = args.get(i).to_ascii_lowercase();
        let left = args.len() - i - 1;
        match word.as_slice() {
            b"timeout" if left >= 1 && a.timeout_ms == 0 => {
                let t = parse_i64(args.get(i + 1)).ok_or(Error::NotInteger)?;
                if t <= 0 {
                    return Err(Error::msg("ERR FAILOVER timeout must be greater than 0"));
                }
                a.timeout_ms = t;
                i += 2;
            }
            b"to" if left >= 2 && a.target.is_none() => {
                let port = parse_i64(args.get(i + 2)).ok_or(Error::NotInteger)?;
                let host = String::from_utf8_lossy(args.get(i + 1)).into_owned();
                a.target = Some((host, port as u16));
                i += 3;
            }
            b"force" if !a.force => {
                a.force = true;
                i += 1;
            }
            _ => return Err(Error::Syntax),
        }
    }
    Ok(a)
}

/// The state checks, in Redis's order.
fn check(cx: &Cx<'_>, a: &Args) -> CmdResult {
    let repl = &cx.core.repl;
    if repl.failover.is_some() {
        return Err(Error::msg("ERR FAILOVER already in progress."));
    }
    if repl.primary.is_some() {
        return Err(Error::msg(
            "ERR FAILOVER is not valid when server is a replica.",
        ));
    }
    if repl.replicas.is_empty() {
        return Err(Error::msg("ERR FAILOVER requires connected replicas."));
    }
    if a.force && (a.timeout_ms == 0 || a.target.is_none()) {
        return Err(Error::msg(
            "ERR FAILOVER with force option requires both a timeout and target HOST and IP.",
        ));
    }
    let Some((host, port)) = &a.target else {
        return Ok(());
    };
    let found = repl.replicas.iter().find(|r| {
        r.announced.port == *port
            && cx.clients.get(r.handle).is_some_and(|c| {
                replica_ip(&r.announced, &c.conn.transport).eq_ignore_ascii_case(host)
            })
    });
    match found {
        None => Err(Error::msg(
            "ERR FAILOVER target HOST and PORT is not a replica.",
        )),
        Some(r) if r.state != crate::repl::ReplicaState::Online => {
            Err(Error::msg("ERR FAILOVER target replica is not online."))
        }
        Some(_) => Ok(()),
    }
}

/// Ends the FAILOVER: writes go on; in progress, this server is a primary again. Returns
/// whether clients were marked killed.
pub fn abort(core: &mut Core, clients: &mut ClientTable, why: &str) -> bool {
    let Some(f) = core.repl.failover.take() else {
        return false;
    };
    core.repl.note(alloc::format!("FAILOVER aborted: {why}"));
    core.pause.hold_writes(false);
    f.state == FailoverState::InProgress && become_primary(core, clients)
}

/// The target refused this server's PSYNC: the FAILOVER is over, this server a primary
/// again. Returns whether clients were marked killed.
pub fn rejected(core: &mut Core, clients: &mut ClientTable) -> bool {
    let in_progress = core
        .repl
        .failover
        .as_ref()
        .is_some_and(|f| f.state == FailoverState::InProgress);
    in_progress && abort(core, clients, "Failover target rejected psync request")
}

/// The link to the target carries the stream: the FAILOVER is over (the held writes run, and
/// meet a replica).
pub fn finished(core: &mut Core) {
    if core.repl.failover.take().is_some() {
        core.pause.hold_writes(false);
        if let Some(p) = core.repl.primary.as_mut() {
            p.failover = false;
        }
    }
}

/// The cron's part: the switch to the target once it caught up, or the timeout. Returns
/// whether clients were marked killed (the shell closes them).
pub fn cron(core: &mut Core, clients: &mut ClientTable, now_ms: u64) -> bool {
    let ip_of = |r: &crate::repl::Replica| match clients.get(r.handle) {
        Some(c) => replica_ip(&r.announced, &c.conn.transport),
        None => String::new(),
    };
    match core.repl.failover_step(now_ms, ip_of) {
        FailoverStep::Wait => false,
        FailoverStep::Abort(why) => abort(core, clients, why),
        FailoverStep::Switch { host, port, forced } => {
            let line = match forced {
                true => {
                    alloc::format!("FAILOVER to {host}:{port} time out exceeded, failing over.")
                }
                false => alloc::format!("FAILOVER to {host}:{port} started"),
            };
            core.repl.note(line);
            // Our replicas follow us again once we follow the target (a chain), as with
            // Redis, which drops them when it becomes a replica.
            let mut killed = kill_replicas(core, clients);
            killed |= follow(core, clients, host, port);
            if let Some(p) = core.repl.primary.as_mut() {
                p.failover = true;
            }
            if let Some(f) = core.repl.failover.as_mut() {
                f.state = FailoverState::InProgress;
            }
            killed
        }
    }
}
