//! PSYNC replid offset and SYNC: a client becomes a replica. PSYNC continues from the backlog
//! (`+CONTINUE`) when it can, else answers `+FULLRESYNC <replid> <offset>`; SYNC (the old
//! protocol, and Redis's test suite's stream reader) always syncs in full with no status
//! line. Either way the connection layer then sends the data ([`Outcome::Replicate`]).
//! `PSYNC replid offset FAILOVER` comes from a primary handing its role to this replica (its
//! FAILOVER): with our replication ID, this server becomes a primary first, then continues.

use crate::argv::Argv;
use crate::error::{CmdResult, Error};
use crate::repl::ReplicaState;
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::{drain, Cx, Outcome};

/// PSYNC on a replica whose own link is not up.
const NO_MASTER_LINK: &str = "NOMASTERLINK Can't SYNC while not connected with my master";

/// PSYNC replid offset [FAILOVER].
pub fn psync(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let replid = args.get(1);
    if args.len() > 3 && args.get(3).eq_ignore_ascii_case(b"failover") {
        if replid != cx.core.repl.replid.as_bytes() {
            return Err(Error::msg(
                "ERR PSYNC FAILOVER replid must match my replid.",
            ));
        }
        // The link to the old primary closes with the others the driver closes after it
        // starts this replica's stream.
        super::become_primary(cx.core, cx.clients);
    }
    refuse_unsynced(cx)?;
    // An offset that is not a number is refused before any sync starts (Redis 7.0.15; it
    // used to start a full sync and answer the error too).
    let Some(offset) = parse_i64(args.get(2)) else {
        let who = match cx.clients.get(cx.me).map(|c| &c.conn.transport) {
            Some(crate::client::Transport::Tcp { addr, .. }) => addr.clone(),
            _ => alloc::string::String::from("<unknown>"),
        };
        cx.core.repl.note(alloc::format!(
            "Replica {who} asks for synchronization but with a wrong offset"
        ));
        return Err(Error::msg("ERR value is not an integer or out of range"));
    };
    drain::start_replication(cx.core);
    drain::feed_replication(cx.core);
    if let Ok(offset) = u64::try_from(offset) {
        if cx.core.repl.can_continue(replid, offset) {
            return continue_from(cx, offset, out);
        }
    }
    if replid != b"?" {
        cx.core.repl.stats.sync_partial_err += 1;
    }
    let repl = &cx.core.repl;
    out.simple(&alloc::format!(
        "FULLRESYNC {} {}",
        repl.replid,
        repl.offset
    ));
    full_sync(cx);
    Ok(())
}

/// SYNC: a full sync in the disk form, without a status line.
pub fn sync(cx: &mut Cx<'_>, _args: &Argv<'_>, _out: &mut dyn ReplySink) -> CmdResult {
    refuse_unsynced(cx)?;
    drain::start_replication(cx.core);
    drain::feed_replication(cx.core);
    cx.core.repl.announced_mut(cx.me).capa_eof = false;
    full_sync(cx);
    Ok(())
}

/// A primary failing over, or a replica whose own primary link is not up, serves no sync.
fn refuse_unsynced(cx: &Cx<'_>) -> CmdResult {
    if cx.core.repl.failover.is_some() {
        return Err(Error::msg("NOMASTERLINK Can't SYNC while failing over"));
    }
    match &cx.core.repl.primary {
        Some(p) if p.state != crate::repl::LinkState::Connected => Err(Error::msg(NO_MASTER_LINK)),
        _ => Ok(()),
    }
}

/// `+CONTINUE`: the replica gets the backlog from `offset`, then the stream.
fn continue_from(cx: &mut Cx<'_>, offset: u64, out: &mut dyn ReplySink) -> CmdResult {
    let (me, now_ms) = (cx.me, cx.now_ms());
    let psync2 = cx.core.repl.announced_mut(me).capa_psync2;
    let repl = &mut cx.core.repl;
    if psync2 {
        out.simple(&alloc::format!("CONTINUE {}", repl.replid));
    } else {
        out.simple("CONTINUE");
    }
    repl.stats.sync_partial_ok += 1;
    let start = repl.offset + 1;
    repl.attach(me, ReplicaState::Online, start, now_ms);
    if let Some(r) = repl.replica_mut(me) {
        r.ack_offset = offset.saturating_sub(1);
    }
    cx.outcome = Outcome::Replicate {
        continue_from: Some(offset),
        eof: false,
    };
    Ok(())
}

/// A full sync from the current offset: the replica gets an RDB of the data as it is now,
/// then the stream from the next byte on, which starts with a SELECT.
fn full_sync(cx: &mut Cx<'_>) {
    let (me, now_ms) = (cx.me, cx.now_ms());
    let eof = cx.core.repl.announced_mut(me).capa_eof;
    let repl = &mut cx.core.repl;
    repl.stats.sync_full += 1;
    cx.core.stats.total_forks += 1;
    let start = repl.offset + 1;
    repl.attach(me, ReplicaState::WaitBgsave, start, now_ms);
    cx.core.aof.reset_repl_db();
    cx.outcome = Outcome::Replicate {
        continue_from: None,
        eof,
    };
}
