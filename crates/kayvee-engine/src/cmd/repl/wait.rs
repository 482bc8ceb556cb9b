//! WAIT numreplicas timeout: how many replicas acknowledged the stream up to now. When too
//! few did, the client blocks (answered from the wakeups, see [`crate::repl::Waiter`]) until
//! enough ACKs come or the timeout passes, and the replicas are asked for an ACK at once
//! (`REPLCONF GETACK *` in the stream).

use crate::argv::Argv;
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::Cx;

/// WAIT on a replica.
const ON_REPLICA: &str = "ERR WAIT cannot be used with replica instances. Please also note \
that since Redis 4.0 if a replica is configured to be writable (which is not the default) \
writes to replicas are just local and are not propagated.";

/// WAIT.
pub fn wait(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if cx.core.repl.primary.is_some() {
        return Err(Error::msg(ON_REPLICA));
    }
    parse_i64(args.get(1)).ok_or(Error::NotInteger)?;
    let timeout = parse_i64(args.get(2))
        .ok_or_else(|| Error::msg("ERR timeout is not an integer or out of range"))?;
    if timeout < 0 {
        return Err(Error::msg("ERR timeout is negative"));
    }
    crate::drain::feed_replication(cx.core);
    let offset = cx.core.repl.offset;
    let acked = cx.core.repl.acked(offset);
    let wanted = usize::try_from(parse_i64(args.get(1)).unwrap_or(0)).unwrap_or(0);
    if acked >= wanted || cx.core.script_running || cx.core.txn.in_multi(cx.me) {
        out.int(acked as i64);
        return Ok(());
    }
    let deadline_ms = (timeout > 0).then(|| cx.now_ms() + timeout as u64);
    cx.core.repl.waiters.push(crate::repl::Waiter {
        handle: cx.me,
        offset,
        replicas: wanted,
        deadline_ms,
    });
    // Not while a FAILOVER holds writes: it waits for a replica to reach the offset.
    if cx.core.repl.failover.is_none() {
        cx.core
            .aof
            .feed_repl_raw(b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n");
    }
    cx.outcome = crate::Outcome::Blocked;
    Ok(())
}
