//! REPLICAOF / SLAVEOF host port | NO ONE. `host port` makes this server a replica: the
//! connection layer opens the link when [`crate::repl::Replication::due_connect`] says so
//! (the handshake, the sync and the master client are `kayvee-session`'s). `NO ONE` promotes
//! this server: its data stays, the ID it followed becomes its secondary ID, and its own
//! replicas are disconnected to learn the new ID (they continue with a partial resync).

use crate::argv::Argv;
use crate::error::{CmdResult, Error};
use crate::repl::Primary;
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::{Cx, Outcome};
use alloc::string::String;

/// REPLICAOF / SLAVEOF.
pub fn replicaof(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if args.get(1).eq_ignore_ascii_case(b"no") && args.get(2).eq_ignore_ascii_case(b"one") {
        if cx.core.repl.primary.is_some() {
            drop_link(cx);
            let rng = &mut cx.core.rng;
            cx.core.repl.promote(rng);
            kill_replicas(cx);
            if cx.core.repl.backlog.is_some() {
                cx.core.aof.set_replicating(true);
                cx.core.aof.reset_repl_db();
                crate::drain::sync(cx.core);
            }
        }
        out.ok();
        return Ok(());
    }
    let port = parse_i64(args.get(2))
        .and_then(|p| u16::try_from(p).ok())
        .ok_or_else(|| Error::msg("ERR Invalid master port"))?;
    let host = String::from_utf8_lossy(args.get(1)).into_owned();
    if let Some(p) = &cx.core.repl.primary {
        if p.host.eq_ignore_ascii_case(&host) && p.port == port {
            out.simple("OK Already connected to specified master");
            return Ok(());
        }
    }
    drop_link(cx);
    cx.core.repl.primary = Some(Primary::new(host, port));
    // A replica's stream to its own replicas is its primary's, passed on as it arrives.
    cx.core.aof.set_replicating(false);
    crate::drain::sync(cx.core);
    out.ok();
    Ok(())
}

/// Closes the connection to the current primary, if any.
fn drop_link(cx: &mut Cx<'_>) {
    if let Some(h) = cx.core.repl.link() {
        if let Some(c) = cx.clients.get_mut(h) {
            c.killed = true;
            cx.outcome = Outcome::KillClients;
        }
        if let Some(p) = cx.core.repl.primary.as_mut() {
            p.link = None;
        }
    }
}

/// Disconnects this server's replicas.
fn kill_replicas(cx: &mut Cx<'_>) {
    for r in &cx.core.repl.replicas {
        if let Some(c) = cx.clients.get_mut(r.handle) {
            c.killed = true;
            cx.outcome = Outcome::KillClients;
        }
    }
}
