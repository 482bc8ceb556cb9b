//! Hash counters: HINCRBY, HINCRBYFLOAT.
//!
//! HINCRBYFLOAT computes in x87 extended precision and prints like Redis 7.0's `long double`
//! path, through the same software arithmetic as INCRBYFLOAT (`cmd::long_double`), so replies are
//! byte-identical.

use super::{hash_put, write_hash, HashLimits};
use crate::argv::Argv;
use crate::cmd::long_double::{self, Ld};
use crate::cmd::notify::{class as nc, emit};
use crate::cmd::string::format_i64;
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::Cx;
use kayvee_pds::SmallBytes;

/// HINCRBY key field increment: adds to the field's integer (0 when missing); the new value.
pub(super) fn hincrby(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let incr = parse_i64(args.get(3)).ok_or(Error::NotInteger)?;
    let (new, _) = update_field(cx, args, "hincrby", |old| {
        let old = match old {
            Some(v) => parse_i64(v).ok_or(Error::msg("ERR hash value is not an integer"))?,
            None => 0,
        };
        let new = old.checked_add(incr).ok_or(Error::Overflow)?;
        let mut buf = [0u8; 20];
        Ok((new, SmallBytes::from_slice(format_i64(new, &mut buf))))
    })?;
    cx.propagate_verbatim();
    out.int(new);
    Ok(())
}

/// HINCRBYFLOAT key field increment: adds in extended precision; the new value as text.
pub(super) fn hincrbyfloat(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let incr = long_double::parse(args.get(3)).ok_or(Error::NotFloat)?;
    if incr.is_inf() {
        return Err(Error::msg("ERR value is NaN or Infinity"));
    }
    let ((), text) = update_field(cx, args, "hincrbyfloat", |old| {
        let old = match old {
            Some(v) => long_double::parse(v).ok_or(Error::msg("ERR hash value is not a float"))?,
            None => Ld::zero(false),
        };
        match old.add(incr) {
            Some(sum) if !sum.is_inf() => Ok(((), sum.to_human())),
            _ => Err(Error::msg("ERR increment would produce NaN or Infinity")),
        }
    })?;
    cx.propagate(&[b"HSET", args.get(1), args.get(2), text.as_bytes()]);
    out.bulk(text.as_bytes());
    Ok(())
}

/// The shared body of HINCRBY and HINCRBYFLOAT: sets the field at argument 2 of the hash at
/// argument 1 (created when missing) to the text `next` makes from its old value, notes the
/// write for WATCH (even for an increment of 0, as in Redis) and sends `event`. `next`
/// answers a reply value and the new text, or the error that leaves everything untouched.
fn update_field<R, T: AsRef<[u8]>>(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    event: &str,
    next: impl FnOnce(Option<&[u8]>) -> Result<(R, T), Error>,
) -> Result<(R, T), Error> {
    let (key, field) = (args.get(1), args.get(2));
    let lim = HashLimits::of(cx);
    let new = write_hash(cx, key, true, |h, meta| {
        let new = match h.get(field) {
            Some(old) => old.with_contiguous(|old| next(Some(old)))?,
            None => next(None)?,
        };
        hash_put(h, meta, lim, field, new.1.as_ref());
        Ok(new)
    })?;
    cx.db().modified(key);
    emit(cx, nc::HASH, event, key);
    Ok(new.expect("write_hash creates the hash"))
}
