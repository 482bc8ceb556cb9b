//! Counters on strings: INCR, DECR, INCRBY, DECRBY, INCRBYFLOAT, and the number parsing and
//! formatting they need (Redis's `string2ll`, `string2ld` and human-friendly `ld2string`).
//!
//! Redis 7.0 computes INCRBYFLOAT in C `long double` (80-bit x87) and prints the result with
//! `%.17Lf` before stripping trailing zeros. We compute in `f64`; see [`format_float`] for how
//! the printed text is kept identical in the common cases and where it can still differ.

use super::string::as_str;
use crate::argv::Argv;
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::value::{Entry, Meta, Value};
use crate::Cx;
use alloc::string::String;
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
            e.value = value;
            e.meta.set_flag(Meta::RAW | Meta::EMBSTR, false);
        }
        None => db.set(key, value, now, false),
    }
    out.int(new);
    Ok(())
}

/// Writes `v` in decimal into `buf` (20 bytes hold any i64) without allocating.
pub(crate) fn format_i64(v: i64, buf: &mut [u8; 20]) -> &[u8] {
    let mut n = v.unsigned_abs();
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

/// INCRBYFLOAT key increment: replies and stores the sum as text (an `embstr`, never `int`),
/// keeping the TTL. The stored value is parsed before the increment, as Redis does.
pub(crate) fn incrbyfloat(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (key, now) = (args.get(1), cx.now_ms());
    let db = cx.db();
    let entry = db.lookup_write(key, now);
    let old = match &entry {
        Some(e) => parse_float(as_str(e)?).ok_or(Error::NotFloat)?,
        None => 0.0,
    };
    let incr = parse_float(args.get(2)).ok_or(Error::NotFloat)?;
    let sum = old + incr;
    if !sum.is_finite() {
        return Err(Error::msg("ERR increment would produce NaN or Infinity"));
    }
    let text = format_float(sum, (ulp(old) + ulp(incr)) / 2.0);
    let value = Value::Str(SmallBytes::from_slice(text.as_bytes()));
    match entry {
        Some(e) => {
            e.value = value;
            e.meta.set_flag(Meta::RAW, false);
            e.meta.set_flag(Meta::EMBSTR, true);
        }
        None => {
            let mut e = Entry::new(value, now);
            e.meta.set_flag(Meta::EMBSTR, true);
            db.insert_entry(key, e, None);
        }
    }
    out.bulk(text.as_bytes());
    Ok(())
}

/// Longest text Redis's `string2ld` accepts (its buffer is `MAX_LONG_DOUBLE_CHARS`, 5 KiB).
const FLOAT_TEXT_LEN_MAX: usize = 5 * 1024 - 1;

/// Parses a float as Redis's `string2ld` (C `strtold`) accepts it: no leading space, the
/// whole text consumed, `inf`/`infinity` allowed, NaN refused, no range error.
///
/// Deviations (f64 instead of long double): a finite literal beyond f64's range (up to
/// 1.19e4932 is a valid long double) is refused here; literals below f64's range read as 0
/// where Redis refuses those below 3.6e-4951; hexadecimal floats (`0x1p4`) are accepted as
/// strtold does, but only with an integer or fraction mantissa and a `p` exponent.
pub(crate) fn parse_float(s: &[u8]) -> Option<f64> {
    if s.is_empty() || s.len() > FLOAT_TEXT_LEN_MAX || is_c_space(s[0]) {
        return None;
    }
    let text = core::str::from_utf8(s).ok()?;
    let v = match text.parse::<f64>() {
        Ok(v) => v,
        Err(_) => parse_hex_float(s)?,
    };
    if v.is_nan() || (v.is_infinite() && !is_inf_literal(s)) {
        return None;
    }
    Some(v)
}

/// C `isspace` in the "C" locale.
fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Whether `s` spells infinity (`inf`, `-Infinity`...), which strtold accepts.
fn is_inf_literal(s: &[u8]) -> bool {
    let body = match s.first() {
        Some(b'+' | b'-') => &s[1..],
        _ => s,
    };
    body.eq_ignore_ascii_case(b"inf") || body.eq_ignore_ascii_case(b"infinity")
}

/// Parses a C hexadecimal float: `[+-]0x` hex digits with an optional `.` fraction and an
/// optional binary exponent `p[+-]digits`.
fn parse_hex_float(s: &[u8]) -> Option<f64> {
    let (neg, s) = match s.first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let s = s.strip_prefix(b"0x").or_else(|| s.strip_prefix(b"0X"))?;
    let (mut mant, mut exp, mut digits, mut seen_dot, mut i) = (0f64, 0i64, 0, false, 0);
    while i < s.len() {
        match s[i] {
            b'.' if !seen_dot => seen_dot = true,
            c if c.is_ascii_hexdigit() => {
                mant = mant * 16.0 + f64::from((c as char).to_digit(16)?);
                exp -= if seen_dot { 4 } else { 0 };
                digits += 1;
            }
            _ => break,
        }
        i += 1;
    }
    if digits == 0 {
        return None;
    }
    if i < s.len() {
        let e = s[i + 1..].strip_prefix(b"+").unwrap_or(&s[i + 1..]);
        if !matches!(s[i], b'p' | b'P') || e.first() == Some(&b'+') {
            return None;
        }
        exp += core::str::from_utf8(e).ok()?.parse::<i32>().ok()? as i64;
    }
    let v = mant * libm_pow2(exp.clamp(-2200, 2200) as i32);
    Some(if neg { -v } else { v })
}

/// 2^e without `std` (exact by repeated scaling).
fn libm_pow2(mut e: i32) -> f64 {
    let mut v = 1.0;
    while e > 0 {
        let step = e.min(1000);
        v *= f64::from_bits(((1023 + step) as u64) << 52);
        e -= step;
    }
    while e < 0 {
        let step = (-e).min(1000);
        v /= f64::from_bits(((1023 + step) as u64) << 52);
        e += step;
    }
    v
}

/// The gap between `x` and the next f64 away from zero: the rounding unit of a parsed input.
fn ulp(x: f64) -> f64 {
    let a = x.abs();
    if a == 0.0 || !a.is_finite() {
        return 0.0;
    }
    f64::from_bits(a.to_bits() + 1) - a
}

/// Most fractional digits Redis prints (`%.17Lf`).
const FRACTION_DIGITS_MAX: usize = 17;

/// Formats an INCRBYFLOAT result as Redis does: plain decimal notation (never an exponent), at
/// most 17 fractional digits, trailing zeros and a trailing dot removed, `-0` as `0`.
///
/// Redis adds in 80-bit long double, whose extra precision hides the rounding of decimal
/// inputs: 0.1 + 0.2 prints `0.3`. In f64 the sum is 0.30000000000000004, so we print the
/// shortest decimal within `input_err` (half the inputs' rounding units) plus the rounding
/// unit of `v`: that is the decimal sum the user typed whenever it has at most 17
/// significant digits. Where Redis's long double shows more than f64 holds (results past 2^53
/// with a fraction, or huge values whose binary expansion Redis prints digit by digit, as
/// 1e30), the digits differ.
pub(crate) fn format_float(v: f64, input_err: f64) -> String {
    // The candidate is compared as an f64, itself rounded: allow a whole unit for v's side.
    let tol = input_err + ulp(v);
    let mut sci = String::new();
    for precision in 0..17 {
        sci = alloc::format!("{v:.precision$e}");
        let back: f64 = sci.parse().unwrap_or(f64::NAN);
        if (back - v).abs() <= tol {
            break;
        }
    }
    let text = match sci_to_fixed(&sci) {
        Some(fixed) => fixed,
        None => strip_fraction_zeros(alloc::format!("{v:.FRACTION_DIGITS_MAX$}")),
    };
    if text == "-0" {
        return String::from("0");
    }
    text
}

/// Rewrites `d.ddde±x` (Rust's `{:e}`) in plain notation without trailing fractional zeros,
/// or `None` when that needs more than 17 fractional digits.
fn sci_to_fixed(sci: &str) -> Option<String> {
    let (mantissa, exp) = sci.split_once('e')?;
    let exp: i64 = exp.parse().ok()?;
    let (neg, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    let point = exp + 1; // digits before the decimal point
    let fraction_len = (digits.len() as i64 - point).max(0) as usize;
    if fraction_len > FRACTION_DIGITS_MAX {
        return None;
    }
    let mut s = String::new();
    if neg {
        s.push('-');
    }
    if point <= 0 {
        s.push_str("0.");
        (0..-point).for_each(|_| s.push('0'));
        s.push_str(digits);
    } else if point as usize >= digits.len() {
        s.push_str(digits);
        (0..point as usize - digits.len()).for_each(|_| s.push('0'));
    } else {
        s.push_str(&digits[..point as usize]);
        s.push('.');
        s.push_str(&digits[point as usize..]);
    }
    Some(s)
}

/// Drops trailing zeros after a decimal point, then the point itself if bare.
fn strip_fraction_zeros(mut s: String) -> String {
    if s.contains('.') {
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.pop();
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(a: &str, b: &str) -> String {
        let (x, y) = (parse_float(a.as_bytes()), parse_float(b.as_bytes()));
        let (x, y) = (x.unwrap(), y.unwrap());
        format_float(x + y, (ulp(x) + ulp(y)) / 2.0)
    }

    #[test]
    fn format_i64_covers_extremes() {
        let mut buf = [0u8; 20];
        for v in [0, 7, -7, 10, 1234567890, i64::MAX, i64::MIN] {
            assert_eq!(format_i64(v, &mut buf), alloc::format!("{v}").as_bytes());
        }
    }

    #[test]
    fn float_sums_print_as_redis() {
        // Replies checked against redis-server 7.0.15.
        assert_eq!(add("10.5", "0.1"), "10.6");
        assert_eq!(add("3.0e3", "1"), "3001");
        assert_eq!(add("0", "5.0e3"), "5000");
        assert_eq!(add("0.1", "0.2"), "0.3");
        assert_eq!(add("1", "-1.1"), "-0.1");
        assert_eq!(add("0", "1e20"), "100000000000000000000");
        assert_eq!(add("0", "1e-20"), "0");
        assert_eq!(add("0", "-1e-20"), "0");
        assert_eq!(add("17179869184", "1.5"), "17179869185.5");
        assert_eq!(add("1", "0.000000000000001"), "1.000000000000001");
        assert_eq!(add("0", "0.1234567890123456"), "0.1234567890123456");
        assert_eq!(add("2.5", "-2.5"), "0");
        assert_eq!(add("-5", "0.25"), "-4.75");
    }

    #[test]
    fn float_parsing_follows_strtold() {
        assert_eq!(parse_float(b"1.5"), Some(1.5));
        assert_eq!(parse_float(b"+.5"), Some(0.5));
        assert_eq!(parse_float(b"5."), Some(5.0));
        assert_eq!(parse_float(b"1E3"), Some(1000.0));
        assert_eq!(parse_float(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_float(b"Infinity"), Some(f64::INFINITY));
        assert_eq!(parse_float(b"0x10"), Some(16.0));
        assert_eq!(parse_float(b"0x1.8p1"), Some(3.0));
        assert_eq!(parse_float(b"-0X1P-2"), Some(-0.25));
        for bad in [
            "", " 1", "1 ", "1e", "abc", "nan", "NaN", "1e5000", "0x", "0x1q", "\t1", "1,5",
        ] {
            assert_eq!(parse_float(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(parse_float("1".repeat(5120).as_bytes()), None);
    }
}
