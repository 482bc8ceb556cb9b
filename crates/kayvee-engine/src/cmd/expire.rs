//! Expiry commands (EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT with NX/XX/GT/LT; TTL, PTTL,
//! EXPIRETIME, PEXPIRETIME; PERSIST). The active expiry cycle is [`crate::expire`].
//!
//! Expiry times are absolute unix milliseconds, compared with the time passed into the engine
//! (`cx.now_ms()`). Argument checks, their order and their error texts follow Redis 7.0.15.

use crate::argv::Argv;
use crate::cmd::notify::{class as nc, emit};
use crate::cmd::spec::CommandSpec;
use crate::command::{acl, flags};
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::util::{parse_i64, sanitize};
use crate::Cx;

/// The flags, arity and key position shared by the four EXPIRE-family commands.
const fn set_expire_spec(
    name: &'static str,
    summary: &'static str,
    since: &'static str,
    handler: crate::cmd::spec::Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity: -3,
        flags: flags::WRITE | flags::FAST,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::KEYSPACE | acl::WRITE | acl::FAST,
        summary,
        since,
        handler,
        ..CommandSpec::DEFAULT
    }
}

/// The flags, arity and key position shared by the TTL-family commands.
const fn get_expire_spec(
    name: &'static str,
    summary: &'static str,
    since: &'static str,
    tips: &'static [&'static str],
    handler: crate::cmd::spec::Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity: 2,
        flags: flags::READONLY | flags::FAST,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::KEYSPACE | acl::READ | acl::FAST,
        summary,
        since,
        tips,
        handler,
        ..CommandSpec::DEFAULT
    }
}

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[
    set_expire_spec(
        "expire",
        "Set a key's time to live in seconds",
        "1.0.0",
        expire,
    ),
    set_expire_spec(
        "pexpire",
        "Set a key's time to live in milliseconds",
        "2.6.0",
        pexpire,
    ),
    set_expire_spec(
        "expireat",
        "Set the expiration for a key as a UNIX timestamp",
        "1.2.0",
        expireat,
    ),
    set_expire_spec(
        "pexpireat",
        "Set the expiration for a key as a UNIX timestamp specified in milliseconds",
        "2.6.0",
        pexpireat,
    ),
    get_expire_spec(
        "ttl",
        "Get the time to live for a key in seconds",
        "1.0.0",
        &["nondeterministic_output"],
        ttl,
    ),
    get_expire_spec(
        "pttl",
        "Get the time to live for a key in milliseconds",
        "2.6.0",
        &["nondeterministic_output"],
        pttl,
    ),
    get_expire_spec(
        "expiretime",
        "Get the expiration Unix timestamp for a key",
        "7.0.0",
        &[],
        expiretime,
    ),
    get_expire_spec(
        "pexpiretime",
        "Get the expiration Unix timestamp for a key in milliseconds",
        "7.0.0",
        &[],
        pexpiretime,
    ),
    CommandSpec {
        name: "persist",
        arity: 2,
        flags: flags::WRITE | flags::FAST,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::KEYSPACE | acl::WRITE | acl::FAST,
        summary: "Remove the expiration from a key",
        since: "2.2.0",
        handler: persist,
        ..CommandSpec::DEFAULT
    },
];

/// How an EXPIRE-family command reads its time argument.
#[derive(Clone, Copy)]
struct TimeArg {
    /// Seconds (true) or milliseconds.
    seconds: bool,
    /// Relative to now (true) or an absolute unix time.
    relative: bool,
    /// The command's name, for `ERR invalid expire time in '<name>' command`.
    name: &'static str,
}

/// EXPIRE key seconds [NX|XX|GT|LT].
fn expire(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let t = TimeArg {
        seconds: true,
        relative: true,
        name: "expire",
    };
    set_expire_generic(cx, args, out, t)
}

/// PEXPIRE key milliseconds [NX|XX|GT|LT].
fn pexpire(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let t = TimeArg {
        seconds: false,
        relative: true,
        name: "pexpire",
    };
    set_expire_generic(cx, args, out, t)
}

/// EXPIREAT key unix-time-seconds [NX|XX|GT|LT].
fn expireat(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let t = TimeArg {
        seconds: true,
        relative: false,
        name: "expireat",
    };
    set_expire_generic(cx, args, out, t)
}

/// PEXPIREAT key unix-time-milliseconds [NX|XX|GT|LT].
fn pexpireat(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let t = TimeArg {
        seconds: false,
        relative: false,
        name: "pexpireat",
    };
    set_expire_generic(cx, args, out, t)
}

/// The NX/XX/GT/LT conditions of the EXPIRE family.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Conditions {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

impl Conditions {
    /// Whether a key whose current expiry is `current` (None = no TTL, an infinite one) may
    /// get the expiry `when` (absolute ms).
    fn allow(self, current: Option<i64>, when: i64) -> bool {
        match current {
            None => !(self.xx || self.gt),
            Some(cur) => !(self.nx || (self.gt && when <= cur) || (self.lt && when >= cur)),
        }
    }
}

/// Parses the options after the time (repeats allowed); unknown ones fail first, then the
/// incompatible combinations, NX's error before GT-and-LT's.
fn parse_conditions(args: &Argv<'_>) -> Result<Conditions, Error> {
    let mut c = Conditions::default();
    for opt in args.iter().skip(3) {
        match opt.to_ascii_uppercase().as_slice() {
            b"NX" => c.nx = true,
            b"XX" => c.xx = true,
            b"GT" => c.gt = true,
            b"LT" => c.lt = true,
            _ => {
                // Redis formats the option with `%s`: it stops at a NUL byte.
                let shown = opt.split(|&b| b == 0).next().unwrap_or_default();
                let shown = sanitize(shown, usize::MAX);
                return Err(Error::msg(alloc::format!("ERR Unsupported option {shown}")));
            }
        }
    }
    if c.nx && (c.xx || c.gt || c.lt) {
        return Err(Error::msg(
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if c.gt && c.lt {
        return Err(Error::msg(
            "ERR GT and LT options at the same time are not compatible",
        ));
    }
    Ok(c)
}

/// Converts the time argument to absolute unix ms, refusing what would overflow a signed
/// 64-bit millisecond time, as Redis does.
fn absolute_ms(arg: &[u8], t: TimeArg, now_ms: u64) -> Result<i64, Error> {
    let invalid = || Error::InvalidExpire(t.name.into());
    let mut when = parse_i64(arg).ok_or(Error::NotInteger)?;
    if t.seconds {
        when = when.checked_mul(1000).ok_or_else(invalid)?;
    }
    if t.relative {
        let base = i64::try_from(now_ms).map_err(|_| invalid())?;
        when = when.checked_add(base).ok_or_else(invalid)?;
    }
    Ok(when)
}

/// The EXPIRE family: 1 when the TTL was set (or the key deleted because the time is already
/// past), 0 when the key is absent or a condition refused.
fn set_expire_generic(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
    t: TimeArg,
) -> CmdResult {
    let cond = parse_conditions(args)?;
    let now = cx.now_ms();
    let when = absolute_ms(args.get(2), t, now)?;
    let key = args.get(1);
    let db = cx.db();
    if db.lookup_write(key, now).is_none() {
        out.int(0);
        return Ok(());
    }
    let current = db
        .expire_at(key)
        .map(|at| i64::try_from(at).unwrap_or(i64::MAX));
    if !cond.allow(current, when) {
        out.int(0);
        return Ok(());
    }
    let event = match u64::try_from(when) {
        Ok(at) if at > now => {
            db.set_expire(key, at);
            propagate_pexpireat(cx, key, at, args);
            "expire"
        }
        _ => {
            db.remove(key, now);
            cx.propagate(&[b"DEL", key]);
            "del"
        }
    };
    emit(cx, nc::GENERIC, event, key);
    out.int(1);
    Ok(())
}

/// Propagates a TTL set by EXPIRE, PEXPIRE, EXPIREAT or PEXPIREAT as the absolute
/// `PEXPIREAT key ms`, with the command's NX/XX/GT/LT as the client spelled them.
fn propagate_pexpireat(cx: &mut Cx<'_>, key: &[u8], at_ms: u64, args: &Argv<'_>) {
    if !cx.propagating() {
        return;
    }
    let ms = crate::aof::itoa(at_ms);
    let mut prop: alloc::vec::Vec<&[u8]> = alloc::vec![b"PEXPIREAT", key, ms.as_bytes()];
    prop.extend(args.iter().skip(3));
    cx.propagate(&prop);
}

/// TTL key: remaining seconds (rounded), -1 without TTL, -2 when absent.
fn ttl(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    get_expire_generic(cx, args, out, false, false)
}

/// PTTL key: remaining milliseconds, -1 without TTL, -2 when absent.
fn pttl(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    get_expire_generic(cx, args, out, true, false)
}

/// EXPIRETIME key: the absolute expiry in unix seconds (rounded), -1 / -2 as TTL.
fn expiretime(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    get_expire_generic(cx, args, out, false, true)
}

/// PEXPIRETIME key: the absolute expiry in unix ms, -1 / -2 as TTL.
fn pexpiretime(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    get_expire_generic(cx, args, out, true, true)
}

/// The TTL family. Seconds are rounded to the nearest (`(ms + 500) / 1000`, computed without
/// overflow as Redis's compiled code effectively does for times near `i64::MAX`).
fn get_expire_generic(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
    ms: bool,
    absolute: bool,
) -> CmdResult {
    let (key, now) = (args.get(1), cx.now_ms());
    let db = cx.db();
    if db.lookup_notouch(key, now).is_none() {
        out.int(-2);
        return Ok(());
    }
    let Some(at) = db.expire_at(key) else {
        out.int(-1);
        return Ok(());
    };
    let v = if absolute { at } else { at.saturating_sub(now) };
    let v = if ms { v } else { v.saturating_add(500) / 1000 };
    out.int(i64::try_from(v).unwrap_or(i64::MAX));
    Ok(())
}

/// PERSIST key: 1 when a TTL was removed, 0 when the key is absent or had none.
fn persist(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (key, now) = (args.get(1), cx.now_ms());
    let db = cx.db();
    let removed = db.lookup_write(key, now).is_some() && db.persist(key);
    if removed {
        cx.propagate_verbatim();
        emit(cx, nc::GENERIC, "persist", key);
    }
    out.int(removed as i64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ArgvBuf;

    fn conds(line: &str) -> Result<Conditions, Error> {
        parse_conditions(&ArgvBuf::from_line(line).argv())
    }

    #[test]
    fn condition_errors_in_redis_order() {
        let nx = "ERR NX and XX, GT or LT options at the same time are not compatible";
        let gtlt = "ERR GT and LT options at the same time are not compatible";
        assert_eq!(conds("EXPIRE k 1 nx xx"), Err(Error::msg(nx)));
        assert_eq!(conds("EXPIRE k 1 GT LT NX"), Err(Error::msg(nx)));
        assert_eq!(conds("EXPIRE k 1 LT GT XX"), Err(Error::msg(gtlt)));
        assert_eq!(
            conds("EXPIRE k 1 NX XX foo"),
            Err(Error::msg("ERR Unsupported option foo"))
        );
        assert_eq!(
            conds("EXPIRE k 1 XX XX GT"),
            Ok(Conditions {
                xx: true,
                gt: true,
                ..Default::default()
            })
        );
    }

    #[test]
    fn conditions_treat_no_ttl_as_infinite() {
        let c = |line: &str| conds(line).unwrap();
        assert!(c("E k 1 NX").allow(None, 5));
        assert!(!c("E k 1 NX").allow(Some(9), 5));
        assert!(!c("E k 1 XX").allow(None, 5));
        assert!(!c("E k 1 GT").allow(None, 5));
        assert!(c("E k 1 LT").allow(None, 5));
        assert!(c("E k 1 GT").allow(Some(4), 5));
        assert!(!c("E k 1 GT").allow(Some(5), 5));
        assert!(c("E k 1 LT").allow(Some(6), 5));
        assert!(!c("E k 1 LT").allow(Some(5), 5));
        assert!(c("E k 1 XX GT").allow(Some(4), 5));
    }

    #[test]
    fn absolute_ms_overflow_is_invalid_expire() {
        let s = TimeArg {
            seconds: true,
            relative: true,
            name: "expire",
        };
        let now = 1_700_000_000_000;
        assert_eq!(absolute_ms(b"10", s, now), Ok(now as i64 + 10_000));
        assert_eq!(absolute_ms(b"x", s, now), Err(Error::NotInteger));
        for big in [
            &b"9223372036854775807"[..],
            b"9223372036854775",
            b"-9223372036854775807",
        ] {
            assert_eq!(
                absolute_ms(big, s, now),
                Err(Error::InvalidExpire("expire".into()))
            );
        }
        let pat = TimeArg {
            seconds: false,
            relative: false,
            name: "pexpireat",
        };
        assert_eq!(absolute_ms(b"9223372036854775807", pat, now), Ok(i64::MAX));
        assert_eq!(absolute_ms(b"-5", pat, now), Ok(-5));
    }
}
