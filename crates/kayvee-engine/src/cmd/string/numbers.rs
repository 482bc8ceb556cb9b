//! Counters on strings (the string group's numbers): INCR, DECR, INCRBY, DECRBY, INCRBYFLOAT.
//!
//! Redis 7.0 computes INCRBYFLOAT in C `long double` (80-bit x87) and prints the result with
//! `%.17Lf` before stripping trailing zeros; `cmd::long_double` reproduces that arithmetic exactly.

use super::{as_str, format_i64};
use crate::argv::Argv;
use crate::cmd::long_double::{self, Ld};
use crate::cmd::notify::{class as nc, emit};
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::value::{Meta, Value};
use crate::Cx;
use kayvee_pds::SmallBytes;

/// INCR key
pub(crate) fn incr(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    incr_by(cx, args.get(1), 1, out)
}

/// DECR key
pub(crate) fn decr(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    incr_by(cx, args.get(1), -1, out)
}

/// INCRBY key increment (the increment is checked before the key).
pub(crate) fn incrby(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let delta = parse_i64(args.get(2)).ok_or(Error::NotInteger)?;
    incr_by(cx, args.get(1), delta, out)
}

/// DECRBY key decrement; negating i64::MIN is refused with its own error.
pub(crate) fn decrby(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let delta = parse_i64(args.get(2)).ok_or(Error::NotInteger)?;
    let delta = delta
        .checked_neg()
        .ok_or(Error::msg("ERR decrement would overflow"))?;
    incr_by(cx, args.get(1), delta, out)
}

/// Adds `delta` to the integer at `key` (0 when missing), keeping its TTL; the result is an
/// `int`-encoded string.
fn incr_by(cx: &mut Cx<'_>, key: &[u8], delta: i64, out: &mut dyn ReplySink) -> CmdResult {
    let now = cx.now_ms();
    let db = cx.db();
    let entry = db.lookup_write(key, now);
    let old = match &entry {
        Some(e) => parse_i64(as_str(e)?).ok_or(Error::NotInteger)?,
        None => 0,
    };
    let new = old.checked_add(delta).ok_or(Error::Overflow)?;
    let mut buf = [0u8; 20];
    let value = Value::Str(SmallBytes::from_slice(format_i64(new, &mut buf)));
    match entry {
        Some(e) => {
            e.set_value(value);
            e.meta_mut().set_flag(Meta::RAW | Meta::EMBSTR, false);
        }
        None => db.set(key, value, now, false),
    }
    cx.propagate_verbatim();
    emit(cx, nc::STRING, "incrby", key);
    out.int(new);
    Ok(())
}

/// INCRBYFLOAT key increment: replies and stores the sum as text (an `embstr`, never `int`),
/// keeping the TTL. The stored value is parsed before the increment, as Redis does.
pub(crate) fn incrbyfloat(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (key, now) = (args.get(1), cx.now_ms());
    let db = cx.db();
    let entry = db.lookup_write(key, now);
    let old = match &entry {
        Some(e) => long_double::parse(as_str(e)?).ok_or(Error::NotFloat)?,
        None => Ld::zero(false),
    };
    let incr = long_double::parse(args.get(2)).ok_or(Error::NotFloat)?;
    let sum = match old.add(incr) {
        Some(sum) if !sum.is_inf() => sum,
        _ => return Err(Error::msg("ERR increment would produce NaN or Infinity")),
    };
    let text = sum.to_human();
    let value = Value::Str(SmallBytes::from_slice(text.as_bytes()));
    match entry {
        Some(e) => {
            e.set_value(value);
            e.meta_mut().set_flag(Meta::RAW, false);
            e.meta_mut().set_flag(Meta::EMBSTR, true);
        }
        None => {
            let mut e = db.new_entry(value, now);
            e.meta_mut().set_flag(Meta::EMBSTR, true);
            db.insert_entry(key, e, None);
        }
    }
    // The sum as text, so a replay does not depend on float formatting.
    cx.propagate(&[b"SET", key, text.as_bytes(), b"KEEPTTL"]);
    emit(cx, nc::STRING, "incrbyfloat", key);
    out.bulk(text.as_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_i64_covers_extremes() {
        let mut buf = [0u8; 20];
        for v in [0, 7, -7, 10, 99, 100, -100, 1234567890, i64::MAX, i64::MIN] {
            assert_eq!(format_i64(v, &mut buf), alloc::format!("{v}").as_bytes());
        }
        let mut x = 1i64;
        for _ in 0..19 {
            for v in [x - 1, x, x + 1, -x, 9 * x] {
                assert_eq!(format_i64(v, &mut buf), alloc::format!("{v}").as_bytes());
                assert_eq!(
                    crate::util::parse_i64(alloc::format!("{v}").as_bytes()),
                    Some(v)
                );
            }
            x = x.saturating_mul(10);
        }
    }
}
