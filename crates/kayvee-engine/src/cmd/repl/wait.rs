//! WAIT numreplicas timeout: how many replicas acknowledged the stream up to now. Answered at
//! once (it does not block for the timeout yet: docs/compatibility.md).

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
    out.int(cx.core.repl.acked(offset) as i64);
    Ok(())
}
