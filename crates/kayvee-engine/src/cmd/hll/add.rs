//! PFADD (Redis 7.0.15 semantics): creates the key as an empty sparse HLL, adds each element,
//! and when anything changed (the key created included) invalidates the cached cardinality,
//! propagates as sent and notifies `pfadd`.

use super::{as_hll, corrupt, store_hll};
use crate::argv::Argv;
use crate::cmd::notify::{class as nc, emit};
use crate::cmd::string::take_str;
use crate::error::CmdResult;
use crate::hll;
use crate::reply::ReplySink;
use crate::Cx;

/// PFADD key [element ...]: 1 when a register changed or the key was created, else 0.
pub(super) fn pfadd(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (key, now) = (args.get(1), cx.now_ms());
    let max_bytes = cx.core.config.hll_sparse_max_bytes;
    // The string is taken out of its entry (no copy unless a snapshot shares it) and put back
    // below, as Redis unshares the string before adding.
    let (mut bytes, created) = match cx.db().lookup_write(key, now) {
        Some(e) => {
            as_hll(e)?;
            (take_str(e)?, false)
        }
        None => (hll::empty(), true),
    };
    let mut updated = created;
    for element in args.iter().skip(2) {
        match hll::add(&mut bytes, element, max_bytes) {
            Ok(changed) => updated |= changed,
            Err(hll::Corrupt) => {
                // Redis keeps what the earlier elements did to the string, unannounced.
                if updated || !created {
                    store_hll(cx, key, bytes);
                }
                return Err(corrupt());
            }
        }
    }
    if updated {
        hll::invalidate(&mut bytes);
        store_hll(cx, key, bytes);
        cx.propagate_verbatim();
        emit(cx, nc::STRING, "pfadd", key);
    } else {
        store_hll(cx, key, bytes);
    }
    out.int(i64::from(updated));
    Ok(())
}
