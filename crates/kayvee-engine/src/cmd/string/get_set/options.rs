//! Option parsing shared by SET and GETEX (`NX`, `XX`, `GET`, `KEEPTTL`, `PERSIST`, `EX`, `PX`,
//! `EXAT`, `PXAT`) and the conversion of an expire argument to an absolute unix time in ms.
//!
//! The combination rules are Redis 7.0.15's, checked on the real server: options are
//! case-insensitive; NX and XX exclude each other; NX with GET is allowed (new in 7.0); the four
//! expire options exclude each other and KEEPTTL/PERSIST, but one may repeat (the last value
//! wins); NX, XX, GET and KEEPTTL are SET-only, PERSIST is GETEX-only; anything else, or an
//! expire option missing its value, is `ERR syntax error`.

use crate::argv::Argv;
use crate::error::Error;
use crate::util::parse_i64;

/// Which command is parsing (they accept different options).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// SET key value [options].
    Set,
    /// GETEX key [options].
    GetEx,
}

/// The unit of an expire argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ExpireUnit {
    /// EX, EXAT, SETEX.
    Seconds,
    /// PX, PXAT, PSETEX.
    Millis,
}

/// An expire option and its (not yet parsed) argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ExpireOpt<'a> {
    /// Seconds or milliseconds.
    pub unit: ExpireUnit,
    /// EXAT/PXAT (absolute unix time) rather than EX/PX (relative).
    pub absolute: bool,
    /// The argument as given.
    pub arg: &'a [u8],
}

/// Parsed SET/GETEX options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SetOpts<'a> {
    /// NX: only when the key is missing.
    pub nx: bool,
    /// XX: only when the key exists.
    pub xx: bool,
    /// GET: reply the old value.
    pub get: bool,
    /// KEEPTTL: keep the key's TTL.
    pub keepttl: bool,
    /// PERSIST (GETEX): remove the TTL.
    pub persist: bool,
    /// EX/PX/EXAT/PXAT.
    pub expire: Option<ExpireOpt<'a>>,
}

impl<'a> SetOpts<'a> {
    /// Parses `args[from..]`.
    pub fn parse(args: &Argv<'a>, from: usize, mode: Mode) -> Result<Self, Error> {
        let mut o = SetOpts::default();
        let mut j = from;
        while j < args.len() {
            let next = args.try_get(j + 1);
            if o.apply(args.get(j), next, mode)? {
                j += 1;
            }
            j += 1;
        }
        Ok(o)
    }

    /// Applies one option; returns whether it consumed `next` as its value.
    fn apply(&mut self, opt: &[u8], next: Option<&'a [u8]>, mode: Mode) -> Result<bool, Error> {
        let is = |name: &str| opt.eq_ignore_ascii_case(name.as_bytes());
        let set = mode == Mode::Set;
        if set && is("nx") && !self.xx {
            self.nx = true;
        } else if set && is("xx") && !self.nx {
            self.xx = true;
        } else if set && is("get") {
            self.get = true;
        } else if set && is("keepttl") && !self.persist && self.expire.is_none() {
            self.keepttl = true;
        } else if !set && is("persist") && !self.keepttl && self.expire.is_none() {
            self.persist = true;
        } else if let Some(kind) = expire_kind(opt) {
            return self.apply_expire(kind, next);
        } else {
            return Err(Error::Syntax);
        }
        Ok(false)
    }

    /// Applies EX/PX/EXAT/PXAT: the same option may repeat, no other TTL option may be present.
    fn apply_expire(
        &mut self,
        (unit, absolute): (ExpireUnit, bool),
        next: Option<&'a [u8]>,
    ) -> Result<bool, Error> {
        let clash = self.keepttl
            || self.persist
            || self
                .expire
                .is_some_and(|e| e.unit != unit || e.absolute != absolute);
        match next {
            Some(arg) if !clash => {
                self.expire = Some(ExpireOpt {
                    unit,
                    absolute,
                    arg,
                });
                Ok(true)
            }
            _ => Err(Error::Syntax),
        }
    }

    /// The absolute expiry time the options ask for, if any (`cmd` names the command in the
    /// error text).
    pub fn expire_at(&self, now_ms: u64, cmd: &str) -> Result<Option<u64>, Error> {
        self.expire
            .map(|e| expire_at_ms(e.arg, e.unit, e.absolute, now_ms, cmd))
            .transpose()
    }
}

/// Recognises EX, PX, EXAT and PXAT (any case).
fn expire_kind(opt: &[u8]) -> Option<(ExpireUnit, bool)> {
    let lower = |n: &str| opt.eq_ignore_ascii_case(n.as_bytes());
    if lower("ex") {
        Some((ExpireUnit::Seconds, false))
    } else if lower("px") {
        Some((ExpireUnit::Millis, false))
    } else if lower("exat") {
        Some((ExpireUnit::Seconds, true))
    } else if lower("pxat") {
        Some((ExpireUnit::Millis, true))
    } else {
        None
    }
}

/// Converts an expire argument to an absolute unix time in ms, with Redis's errors: not an
/// integer gives `ERR value is not an integer or out of range`; zero, negative, or a time
/// that overflows a signed 64-bit count of ms gives `ERR invalid expire time in '<cmd>'
/// command`.
pub(crate) fn expire_at_ms(
    arg: &[u8],
    unit: ExpireUnit,
    absolute: bool,
    now_ms: u64,
    cmd: &str,
) -> Result<u64, Error> {
    let v = parse_i64(arg).ok_or(Error::NotInteger)?;
    let invalid = || Error::InvalidExpire(cmd.into());
    if v <= 0 {
        return Err(invalid());
    }
    let ms = match unit {
        ExpireUnit::Seconds => v.checked_mul(1000).ok_or_else(invalid)?,
        ExpireUnit::Millis => v,
    };
    let at = if absolute {
        ms
    } else {
        let now = i64::try_from(now_ms).map_err(|_| invalid())?;
        ms.checked_add(now).ok_or_else(invalid)?
    };
    Ok(at as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ArgvBuf;

    fn parse(line: &str, mode: Mode) -> Result<SetOpts<'static>, Error> {
        let buf = alloc::boxed::Box::leak(alloc::boxed::Box::new(ArgvBuf::from_line(line)));
        SetOpts::parse(&buf.argv(), 0, mode)
    }

    #[test]
    fn set_option_combinations() {
        let o = parse("nx get EX 10", Mode::Set).unwrap();
        assert!(o.nx && o.get && !o.xx);
        assert_eq!(o.expire.unwrap().arg, b"10");
        assert_eq!(
            parse("ex 1 EX 2", Mode::Set).unwrap().expire.unwrap().arg,
            b"2"
        );
        assert!(parse("keepttl KEEPTTL xx xx", Mode::Set).unwrap().keepttl);
        for bad in [
            "nx xx",
            "xx nx",
            "ex 1 px 2",
            "px 1 pxat 2",
            "keepttl ex 1",
            "ex 1 keepttl",
            "ex",
            "persist",
            "foo",
        ] {
            assert_eq!(parse(bad, Mode::Set), Err(Error::Syntax), "{bad}");
        }
    }

    #[test]
    fn getex_option_combinations() {
        assert!(parse("persist PERSIST", Mode::GetEx).unwrap().persist);
        assert!(
            parse("exat 5", Mode::GetEx)
                .unwrap()
                .expire
                .unwrap()
                .absolute
        );
        for bad in [
            "nx",
            "get",
            "keepttl",
            "ex 1 persist",
            "persist px 1",
            "pxat",
        ] {
            assert_eq!(parse(bad, Mode::GetEx), Err(Error::Syntax), "{bad}");
        }
    }

    #[test]
    fn expire_times_and_errors() {
        let now = 1_700_000_000_000;
        let at = |a: &str, u, abs| expire_at_ms(a.as_bytes(), u, abs, now, "set");
        assert_eq!(at("10", ExpireUnit::Seconds, false), Ok(now + 10_000));
        assert_eq!(at("10", ExpireUnit::Millis, false), Ok(now + 10));
        assert_eq!(at("5", ExpireUnit::Seconds, true), Ok(5000));
        assert_eq!(
            at("1.5", ExpireUnit::Seconds, false),
            Err(Error::NotInteger)
        );
        let invalid = Err(Error::InvalidExpire("set".into()));
        assert_eq!(at("0", ExpireUnit::Millis, false), invalid);
        assert_eq!(at("-1", ExpireUnit::Seconds, true), invalid);
        assert_eq!(at("9223372036854775", ExpireUnit::Seconds, false), invalid);
        assert_eq!(
            at("9223372036854775807", ExpireUnit::Millis, false),
            invalid
        );
        assert_eq!(at("9223372036854776", ExpireUnit::Seconds, true), invalid);
        assert_eq!(
            at("9223372036854775807", ExpireUnit::Millis, true),
            Ok(i64::MAX as u64)
        );
    }
}
