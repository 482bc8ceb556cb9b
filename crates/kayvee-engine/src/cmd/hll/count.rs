//! PFCOUNT and PFMERGE (Redis 7.0.15 semantics). A missing key counts as an empty HLL. PFCOUNT
//! of one key answers the cached cardinality when valid, else computes it and stores it in the
//! header (propagated as sent, no notification); of several keys, it merges their registers
//! and caches nothing. PFMERGE reads every key (the destination too) before it writes.

use super::{as_hll, corrupt, store_hll};
use crate::argv::Argv;
use crate::cmd::notify::{class as nc, emit};
use crate::error::CmdResult;
use crate::hll::{self, Encoding, REGISTERS};
use crate::reply::ReplySink;
use crate::Cx;
use alloc::vec;
use alloc::vec::Vec;

/// The registers of every HLL in `keys`, merged by maximum, and whether one was dense.
fn merged<'a>(
    cx: &mut Cx<'_>,
    keys: impl Iterator<Item = &'a [u8]>,
) -> Result<(Vec<u8>, bool), crate::Error> {
    let now = cx.now_ms();
    let mut max = vec![0u8; REGISTERS];
    let mut dense = false;
    for key in keys {
        let Some(e) = cx.db().lookup_read(key, now) else {
            continue;
        };
        let (bytes, enc) = as_hll(e)?;
        dense |= enc == Encoding::Dense;
        hll::merge_into(bytes, &mut max).map_err(|_| corrupt())?;
    }
    Ok((max, dense))
}

/// PFCOUNT key [key ...]: the estimated number of distinct elements added.
pub(super) fn pfcount(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if args.len() > 2 {
        let (max, _) = merged(cx, args.iter().skip(1))?;
        out.int(hll::count_registers(&max) as i64);
        return Ok(());
    }
    let (key, now) = (args.get(1), cx.now_ms());
    let Some(e) = cx.db().lookup_read(key, now) else {
        out.int(0);
        return Ok(());
    };
    let (bytes, _) = as_hll(e)?;
    if let Some(card) = hll::cached(bytes) {
        out.int(card as i64);
        return Ok(());
    }
    let card = hll::count(bytes).map_err(|_| corrupt())?;
    let mut bytes = bytes.to_vec();
    hll::set_cached(&mut bytes, card);
    store_hll(cx, key, bytes);
    cx.propagate_verbatim();
    out.int(card as i64);
    Ok(())
}

/// PFMERGE destkey [sourcekey ...]: the destination (created if missing) gets every register
/// at its maximum over the destination and the sources, dense when any input was.
pub(super) fn pfmerge(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (max, dense) = merged(cx, args.iter().skip(1))?;
    let (dest, now) = (args.get(1), cx.now_ms());
    let max_bytes = cx.core.config.hll_sparse_max_bytes;
    let mut bytes = match cx.db().lookup_write(dest, now) {
        Some(e) => as_hll(e)?.0.to_vec(),
        None => hll::empty(),
    };
    if dense {
        hll::make_dense(&mut bytes).map_err(|_| corrupt())?;
    }
    for (i, &v) in max.iter().enumerate() {
        if v != 0 {
            // The destination was read as a source: its code decodes.
            let _ = hll::raise(&mut bytes, i, v, max_bytes);
        }
    }
    hll::invalidate(&mut bytes);
    store_hll(cx, dest, bytes);
    cx.propagate_verbatim();
    emit(cx, nc::STRING, "pfadd", dest);
    out.ok();
    Ok(())
}
