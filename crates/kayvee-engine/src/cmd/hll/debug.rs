//! PFDEBUG and PFSELFTEST, the HLL group's internal commands (Redis 7.0.15 semantics for
//! PFDEBUG: GETREG, DECODE, ENCODING, TODENSE; a change of encoding propagates as sent).
//! PFSELFTEST checks this implementation's own invariants (register packing, sparse and dense
//! agreeing, the estimate's error) on a fixed pseudo-random sequence and answers OK.

use super::{as_hll, corrupt, store_hll};
use crate::argv::Argv;
use crate::error::{CmdResult, Error};
use crate::hll::{self, dense, Encoding, DENSE_REGS_LEN, REGISTERS};
use crate::reply::ReplySink;
use crate::Cx;
use alloc::vec;
use alloc::vec::Vec;

/// PFDEBUG GETREG|DECODE|ENCODING|TODENSE key (the key is looked up first).
pub(super) fn pfdebug(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (sub, key, now) = (args.get(1), args.get(2), cx.now_ms());
    let Some(e) = cx.db().lookup_write(key, now) else {
        return Err(Error::msg("ERR The specified key does not exist"));
    };
    let (bytes, enc) = as_hll(e)?;
    let is = |name: &[u8]| sub.eq_ignore_ascii_case(name);
    if is(b"getreg") {
        let mut bytes = bytes.to_vec();
        if enc == Encoding::Sparse {
            to_dense(cx, key, &mut bytes)?;
        }
        let regs = hll::registers(&bytes);
        out.array(regs.len());
        regs.iter().for_each(|&r| out.int(i64::from(r)));
    } else if is(b"decode") {
        if enc != Encoding::Sparse {
            return Err(Error::msg("ERR HLL encoding is not sparse"));
        }
        out.bulk(hll::decode_sparse(bytes).as_bytes());
    } else if is(b"encoding") {
        out.simple(enc.name());
    } else if is(b"todense") {
        let converted = enc == Encoding::Sparse;
        if converted {
            let mut bytes = bytes.to_vec();
            to_dense(cx, key, &mut bytes)?;
        }
        out.int(i64::from(converted));
    } else {
        let mut msg = b"ERR Unknown PFDEBUG subcommand '".to_vec();
        msg.extend_from_slice(crate::util::c_str_prefix(sub, usize::MAX));
        msg.push(b'\'');
        return Err(Error::Bytes(msg));
    }
    Ok(())
}

/// Makes the sparse HLL `bytes` of `key` dense and stores it; the change propagates.
fn to_dense(cx: &mut Cx<'_>, key: &[u8], bytes: &mut Vec<u8>) -> CmdResult {
    hll::make_dense(bytes).map_err(|_| corrupt())?;
    store_hll(cx, key, bytes.clone());
    cx.propagate_verbatim();
    Ok(())
}

/// Elements the self test also adds to a sparse HLL (each sparse update is linear in the
/// code's length).
const SPARSE_ELEMENTS: u64 = 3000;

/// A xorshift64 step: the self test's fixed pseudo-random sequence.
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// PFSELFTEST: OK, or `ERR TESTFAILED` with what failed.
pub(super) fn pfselftest(_: &mut Cx<'_>, _: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    registers_round_trip()?;
    estimates_within_error()?;
    out.ok();
    Ok(())
}

/// Random register writes read back, with no write disturbing a neighbour.
fn registers_round_trip() -> CmdResult {
    let mut regs = vec![0u8; DENSE_REGS_LEN];
    let mut model = vec![0u8; REGISTERS];
    let mut x = 0x2545_f491_4f6c_dd1d;
    for round in 0..8 {
        for (i, m) in model.iter_mut().enumerate() {
            let v = (next(&mut x) & u64::from(hll::REGISTER_MAX)) as u8;
            dense::put(&mut regs, i, v);
            *m = v;
        }
        if let Some(i) = (0..REGISTERS).find(|&i| dense::get(&regs, i) != model[i]) {
            return Err(Error::msg(alloc::format!(
                "ERR TESTFAILED Register error at {i} (round {round})"
            )));
        }
    }
    Ok(())
}

/// Sparse and dense HLLs fed the same elements agree (the sparse one over the first
/// [`SPARSE_ELEMENTS`], where the sparse form is used), and the estimate stays within six
/// standard errors (1.04 / sqrt(m)) of the true count.
fn estimates_within_error() -> CmdResult {
    let (mut sparse, mut dense) = (hll::empty(), hll::empty());
    hll::make_dense(&mut dense).map_err(|_| corrupt())?;
    let rel_err = 1.04 / libm::sqrt(REGISTERS as f64);
    let mut x = 0x9e37_79b9_7f4a_7c15;
    for n in 1..=100_000u64 {
        let element = next(&mut x).to_le_bytes();
        let b = hll::add(&mut dense, &element, 0).map_err(|_| corrupt())?;
        let sparse_fed = n <= SPARSE_ELEMENTS;
        if sparse_fed && hll::add(&mut sparse, &element, 1 << 20) != Ok(b) {
            return Err(Error::msg("ERR TESTFAILED sparse and dense disagree"));
        }
        if n.is_power_of_two() || n % 10_000 == 0 {
            let card = hll::count(&dense).map_err(|_| corrupt())?;
            let max_err = libm::ceil(rel_err * 6.0 * n as f64).max(1.0) as u64;
            let sparse_off = sparse_fed && hll::count(&sparse) != Ok(card);
            if card.abs_diff(n) > max_err || sparse_off {
                return Err(Error::msg(alloc::format!(
                    "ERR TESTFAILED Too big error. card:{card} error:{}",
                    card.abs_diff(n)
                )));
            }
        }
    }
    Ok(())
}
