//! What the blocking commands (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN, BZPOPMAX,
//! BZMPOP) share: their timeout argument, blocking the running client, and signalling the
//! keys a write made ready. The waiting room and its protocol with the shell are
//! [`crate::blocking`]'s; serving a waiter is dispatch's, with the command's serve function.

use crate::argv::{Argv, ArgvBuf};
use crate::blocking::{BlockSpec, Waiter};
use crate::db::Key;
use crate::error::Error;
use crate::outcome::Outcome;
use crate::reply::ReplySink;
use crate::Cx;

/// Marks a key ready for the clients blocked on it: call after any write that may create the
/// key or give it elements a blocked client waits for.
pub fn signal_key_ready(cx: &mut Cx<'_>, db: usize, key: &[u8]) {
    cx.core.blocking.signal(db, key);
}

/// Whether the running client may block: not inside MULTI (where blocking commands answer
/// their timeout reply at once, as Redis does).
pub fn may_block(cx: &mut Cx<'_>) -> bool {
    !cx.core.txn.in_multi(cx.me) && !cx.core.script_running
}

/// Blocks the running client on `spec` (or, when it may not block, writes the timeout reply):
/// the handler has written nothing else and returns `Ok(())` after this.
pub fn block(cx: &mut Cx<'_>, args: &Argv<'_>, spec: BlockSpec, out: &mut dyn ReplySink) {
    if !may_block(cx) {
        (spec.on_timeout)(out);
        return;
    }
    let waiter = Waiter {
        db: cx.db_index,
        spec,
        argv: ArgvBuf::from_args(args.iter()),
        cmd: cx.cmd,
        duration_us: 0,
    };
    let me = cx.me;
    let deletions = waiter.spec.serve_missing;
    cx.core.blocking.add(me, waiter);
    cx.outcome = Outcome::Blocked;
    if deletions {
        crate::drain::sync(cx.core);
    }
}

/// Blocks the running client on `keys`, answering the null array on timeout (`*-1` in RESP2,
/// `_` in RESP3): the waiting step of every blocking list and sorted-set command (each is
/// served by its table row's serve function).
pub fn wait_on_keys<'k>(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    keys: impl IntoIterator<Item = &'k [u8]>,
    deadline_ms: Option<u64>,
    out: &mut dyn ReplySink,
) {
    let spec = BlockSpec {
        keys: keys.into_iter().map(Key::from_slice).collect(),
        deadline_ms,
        on_timeout: |out| out.null_array(),
        serve_missing: false,
    };
    block(cx, args, spec, out);
}

/// Parses a blocking command's timeout in seconds as Redis 7.0 does on x86-64: `strtold`
/// (fractions, exponents, hex, `inf`), times 1000 in extended precision, rounded up to whole
/// ms; NaN or junk is `ERR timeout is not a float or out of range`; a negative result (or one
/// beyond i64, which the C cast turns into `LLONG_MIN`) is `ERR timeout is negative`. Returns
/// the absolute deadline in unix ms, `None` for 0 (wait forever).
pub fn parse_timeout(arg: &[u8], now_ms: u64) -> Result<Option<u64>, Error> {
    let v = super::long_double::parse(arg)
        .ok_or(Error::msg("ERR timeout is not a float or out of range"))?;
    let ms = ld_times_1000_ceil(v).ok_or(Error::msg("ERR timeout is negative"))?;
    if ms < 0 {
        return Err(Error::msg("ERR timeout is negative"));
    }
    Ok((ms > 0).then(|| now_ms.saturating_add(ms as u64)))
}

/// `ceill(v * 1000.0L)` converted to i64, `None` where x86's conversion gives `LLONG_MIN`
/// (infinities, magnitudes of 2^63 and more).
fn ld_times_1000_ceil(v: super::long_double::Ld) -> Option<i64> {
    use super::long_double::Ld;
    let Ld::Finite { neg, mant, exp } = v else {
        return None;
    };
    // The exact product has at most 74 bits; round it to a 64-bit significand, ties to even.
    let mut m = u128::from(mant) * 1000;
    let mut e = exp;
    let extra = (128 - m.leading_zeros()).saturating_sub(64);
    if extra > 0 {
        let half = 1u128 << (extra - 1);
        let rem = m & ((1u128 << extra) - 1);
        m >>= extra;
        e += i64::from(extra);
        if rem > half || (rem == half && m & 1 == 1) {
            m += 1;
        }
    }
    // The magnitude, rounded away from zero for positives (ceil) and toward zero for negatives.
    let mag: u128 = if e >= 0 {
        if e >= 64 || (m << e) >> e != m {
            return None;
        }
        m << e
    } else if e <= -128 {
        u128::from(m != 0 && !neg)
    } else {
        let sh = (-e) as u32;
        let q = m >> sh;
        let frac = m & ((1u128 << sh) - 1);
        q + u128::from(frac != 0 && !neg)
    };
    if mag >= 1u128 << 63 {
        return None;
    }
    Some(if neg { -(mag as i64) } else { mag as i64 })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Result<Option<u64>, Error> {
        parse_timeout(s.as_bytes(), 1_000_000)
    }

    #[test]
    fn timeouts_parse_as_redis_on_x86() {
        assert_eq!(t("0"), Ok(None));
        assert_eq!(t("1"), Ok(Some(1_001_000)));
        assert_eq!(t("1.5"), Ok(Some(1_001_500)));
        assert_eq!(t("0x10"), Ok(Some(1_016_000)));
        // Rounded up: a tiny positive timeout is 1 ms, not "forever".
        assert_eq!(t("0.0001"), Ok(Some(1_000_001)));
        assert_eq!(t("1e-300"), Ok(Some(1_000_001)));
        // -0.001 is a hair above -1 ms in extended precision: it rounds up to 0 (forever).
        assert_eq!(t("-0.001"), Ok(None));
        assert_eq!(t("-0.0009"), Ok(None));
        let neg = Err(Error::msg("ERR timeout is negative"));
        for s in [
            "-1",
            "-0.0015",
            "-0.002",
            "inf",
            "-inf",
            "1e400",
            "9223372036854776",
        ] {
            assert_eq!(t(s), neg, "{s}");
        }
        assert!(t("9223372036854775").unwrap().is_some());
        let nf = Err(Error::msg("ERR timeout is not a float or out of range"));
        for s in ["abc", "nan", "", " 1", "1 ", "1abc"] {
            assert_eq!(t(s), nf, "{s}");
        }
    }
}
