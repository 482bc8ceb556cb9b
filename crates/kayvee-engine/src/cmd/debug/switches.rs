//! DEBUG SLEEP and the switches: SET-ACTIVE-EXPIRE, PAUSE-CRON, QUICKLIST-PACKED-THRESHOLD,
//! SET-SKIP-CHECKSUM-VALIDATION, and the subcommands that only touch Redis's internals
//! (CHANGE-REPL-ID, LOG, REPLYBUFFER), which are accepted with `+OK`.

use crate::argv::Argv;
use crate::config::syntax::parse_memory;
use crate::debug::PACKED_THRESHOLD_DEFAULT;
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::{Cx, Outcome};

/// Longest number text read by [`parse_float_prefix`] (bounds its quadratic scan).
const FLOAT_LEN_MAX: usize = 64;

/// Reads a number as C's `strtod` does: the longest decimal prefix after leading spaces, 0
/// when there is none (`DEBUG SLEEP abc` sleeps 0 seconds in Redis too).
fn parse_float_prefix(s: &[u8]) -> f64 {
    let s = s.trim_ascii_start();
    let s = &s[..s.len().min(FLOAT_LEN_MAX)];
    let mut end = 0;
    let mut best = 0.0;
    while end < s.len() {
        end += 1;
        if let Some(v) = core::str::from_utf8(&s[..end])
            .ok()
            .and_then(|t| t.parse::<f64>().ok())
        {
            if v.is_finite() {
                best = v;
            }
        }
    }
    best
}

/// C's `atoi` as Redis reads these switches: an optional sign and the leading digits, 0 when
/// there are none.
fn atoi(s: &[u8]) -> i64 {
    let s = s.trim_ascii_start();
    let (neg, digits) = match s {
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        _ => (false, s),
    };
    let v = digits
        .iter()
        .take_while(|c| c.is_ascii_digit())
        .fold(0i64, |acc, &c| {
            acc.saturating_mul(10).saturating_add(i64::from(c - b'0'))
        });
    if neg {
        -v
    } else {
        v
    }
}

/// DEBUG SLEEP seconds: the shell stops the whole server that long.
pub(super) fn sleep(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let secs = parse_float_prefix(args.get(2)).max(0.0);
    cx.outcome = Outcome::Sleep((secs * 1e6) as u64);
    out.ok();
    Ok(())
}

/// DEBUG SET-ACTIVE-EXPIRE 0|1: whether the cron expires keys nobody reads.
pub(super) fn set_active_expire(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> CmdResult {
    cx.core.debug.active_expire = atoi(args.get(2)) != 0;
    out.ok();
    Ok(())
}

/// DEBUG SET-DISABLE-DENY-SCRIPTS 0|1: whether scripts may call `noscript` commands.
pub(super) fn disable_deny_scripts(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> CmdResult {
    cx.core.debug.disable_deny_scripts = atoi(args.get(2)) != 0;
    out.ok();
    Ok(())
}

/// DEBUG PAUSE-CRON 0|1: stops the cron's work (active expiry, eviction, metrics).
pub(super) fn pause_cron(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    cx.core.debug.cron_paused = atoi(args.get(2)) != 0;
    out.ok();
    Ok(())
}

/// DEBUG AOF-FLUSH-SLEEP us: the shell sleeps that long before each AOF write (`atoi`, as
/// Redis; 0 or less: no sleep).
pub(super) fn aof_flush_sleep(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> CmdResult {
    cx.core.debug.aof_flush_sleep_us = u64::try_from(atoi(args.get(2))).unwrap_or(0);
    out.ok();
    Ok(())
}

/// DEBUG QUICKLIST-PACKED-THRESHOLD size: a memory value below 4 GB (0 restores the default).
pub(super) fn packed_threshold(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> CmdResult {
    let size = parse_memory(args.get(2))
        .filter(|&v| v <= u64::from(u32::MAX))
        .ok_or_else(|| {
            Error::msg("ERR argument must be a memory value bigger than 1 and smaller than 4gb")
        })?;
    cx.core.debug.quicklist_packed_threshold = if size == 0 {
        PACKED_THRESHOLD_DEFAULT
    } else {
        size
    };
    out.ok();
    Ok(())
}

/// DEBUG SET-SKIP-CHECKSUM-VALIDATION 0|1.
pub(super) fn skip_checksum(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> CmdResult {
    cx.core.debug.skip_checksum_validation = atoi(args.get(2)) != 0;
    out.ok();
    Ok(())
}

/// DEBUG REPLYBUFFER PEAK-RESET-TIME <NEVER|RESET|ms> | RESIZING <0|1>: how the connection
/// layer's cron resizes each client's reply buffer (see kayvee-session's `Session`).
pub(super) fn replybuffer(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (what, value) = (args.get(2), args.get(3));
    let debug = &mut cx.core.debug;
    if what.eq_ignore_ascii_case(b"peak-reset-time") {
        debug.reply_buffer_peak_reset_ms = if value.eq_ignore_ascii_case(b"never") {
            None
        } else if value.eq_ignore_ascii_case(b"reset") {
            Some(crate::debug::REPLY_PEAK_RESET_DEFAULT_MS)
        } else {
            let ms = crate::util::parse_i64(value).ok_or(Error::NotInteger)?;
            // Redis keeps a negative time as "never".
            u64::try_from(ms).ok()
        };
    } else if what.eq_ignore_ascii_case(b"resizing") {
        debug.reply_buffer_resizing = atoi(value) != 0;
    } else {
        return Err(super::unknown(args.get(1)));
    }
    out.ok();
    Ok(())
}

/// Subcommands that only touch Redis's internals (CHANGE-REPL-ID, LOG): `+OK`.
pub(super) fn accepted(out: &mut dyn ReplySink) -> CmdResult {
    out.ok();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_c_does() {
        assert_eq!(parse_float_prefix(b"0.5"), 0.5);
        assert_eq!(parse_float_prefix(b" 2"), 2.0);
        assert_eq!(parse_float_prefix(b"1e-3"), 0.001);
        assert_eq!(parse_float_prefix(b"1.5xyz"), 1.5);
        assert_eq!(parse_float_prefix(b"abc"), 0.0);
        assert_eq!(parse_float_prefix(b"-1"), -1.0);
        assert_eq!(atoi(b"12x"), 12);
        assert_eq!(atoi(b"-3"), -3);
        assert_eq!(atoi(b"x"), 0);
    }
}
