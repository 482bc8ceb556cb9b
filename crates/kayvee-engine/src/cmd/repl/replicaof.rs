//! REPLICAOF / SLAVEOF host port | NO ONE. `NO ONE` promotes this server (its data stays; the
//! ID it followed becomes its secondary ID). Following a primary needs the shell's outgoing
//! connection, which the connection layer does not open yet: `host port` is refused.

use crate::argv::Argv;
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::Cx;

/// REPLICAOF host port before the replica link exists.
const NOT_YET: &str = "ERR REPLICAOF host port is not supported yet: this server can only be a \
primary";

/// REPLICAOF / SLAVEOF.
pub fn replicaof(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if args.get(1).eq_ignore_ascii_case(b"no") && args.get(2).eq_ignore_ascii_case(b"one") {
        if cx.core.repl.primary.is_some() {
            let rng = &mut cx.core.rng;
            cx.core.repl.promote(rng);
        }
        out.ok();
        return Ok(());
    }
    crate::util::parse_i64(args.get(2)).ok_or(Error::NotInteger)?;
    Err(Error::msg(NOT_YET))
}
