//! REPLICAOF / SLAVEOF host port | NO ONE. `host port` makes this server a replica: the
//! connection layer opens the link when [`crate::repl::Replication::due_connect`] says so
//! (the handshake, the sync and the master client are `kayvee-session`'s). `NO ONE` promotes
//! this server: its data stays, the ID it followed becomes its secondary ID, and its own
//! replicas are disconnected to learn the new ID (they continue with a partial resync).

use super::{become_primary, follow};
use crate::argv::Argv;
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::{Cx, Outcome};
use alloc::string::String;

/// FAILOVER holds the role until it ends.
const DURING_FAILOVER: &str = "ERR REPLICAOF not allowed while failing over.";

/// REPLICAOF / SLAVEOF.
pub fn replicaof(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if cx.core.repl.failover.is_some() {
        return Err(Error::msg(DURING_FAILOVER));
    }
    if args.get(1).eq_ignore_ascii_case(b"no") && args.get(2).eq_ignore_ascii_case(b"one") {
        if become_primary(cx.core, cx.clients) {
            cx.outcome = Outcome::KillClients;
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
    if follow(cx.core, cx.clients, host, port) {
        cx.outcome = Outcome::KillClients;
    }
    out.ok();
    Ok(())
}
