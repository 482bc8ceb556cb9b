//! Numbers for sorted sets and SORT: C `strtod` as glibc parses it (decimal, hex floats,
//! `inf`/`infinity`/`nan`, leading white space), the three ways Redis 7.0 accepts its result,
//! and `%.17g` text (what ZSCAN and stored listpack scores show). Shared by the `zset` group,
//! SORT and the server's AOF rewrite; it imports no command module.

use alloc::vec::Vec;

/// What `strtod` made of a text: the value, how many bytes it consumed (0 = no conversion)
/// and whether it set `ERANGE` (overflow, or underflow to zero or a subnormal).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Strtod {
    pub value: f64,
    pub consumed: usize,
    pub erange: bool,
}

/// C's `isspace` in the C locale.
fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Parses the longest prefix of `s` that C's `strtod` accepts.
pub(crate) fn strtod(s: &[u8]) -> Strtod {
    let none = Strtod {
        value: 0.0,
        consumed: 0,
        erange: false,
    };
    let mut i = s.iter().take_while(|&&c| is_c_space(c)).count();
    let neg = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let rest = &s[i..];
    let parsed = special(rest)
        .or_else(|| hex(rest))
        .or_else(|| decimal(rest));
    match parsed {
        Some((v, n, erange)) => Strtod {
            value: if neg { -v } else { v },
            consumed: i + n,
            erange,
        },
        None => none,
    }
}

/// `inf`, `infinity`, `nan`, `nan(chars)`, any case.
fn special(s: &[u8]) -> Option<(f64, usize, bool)> {
    let starts = |w: &[u8]| s.len() >= w.len() && s[..w.len()].eq_ignore_ascii_case(w);
    if starts(b"infinity") {
        Some((f64::INFINITY, 8, false))
    } else if starts(b"inf") {
        Some((f64::INFINITY, 3, false))
    } else if starts(b"nan") {
        let mut n = 3;
        if s.get(3) == Some(&b'(') {
            let body = s[4..]
                .iter()
                .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
                .count();
            if s.get(4 + body) == Some(&b')') {
                n = 5 + body;
            }
        }
        Some((f64::NAN, n, false))
    } else {
        None
    }
}

/// A decimal number: digits, optional fraction, optional exponent (taken only when it has
/// digits). Correctly rounded by core's parser.
fn decimal(s: &[u8]) -> Option<(f64, usize, bool)> {
    let int = s.iter().take_while(|c| c.is_ascii_digit()).count();
    let mut n = int;
    let mut frac = 0;
    if s.get(n) == Some(&b'.') {
        frac = s[n + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if int + frac > 0 {
            n += 1 + frac;
        }
    }
    if int + frac == 0 {
        return None;
    }
    if matches!(s.get(n), Some(b'e' | b'E')) {
        let mut e = n + 1;
        if matches!(s.get(e), Some(b'+' | b'-')) {
            e += 1;
        }
        let digits = s[e.min(s.len())..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        if digits > 0 {
            n = e + digits;
        }
    }
    let text = core::str::from_utf8(&s[..n]).ok()?;
    let v: f64 = text.parse().ok()?;
    let nonzero = s[..int + frac + usize::from(frac > 0)]
        .iter()
        .any(|c| (b'1'..=b'9').contains(c));
    Some((v, n, range_error(v, nonzero)))
}

/// glibc's `ERANGE`: the result overflowed, or a non-zero text gave zero or a subnormal.
fn range_error(v: f64, nonzero: bool) -> bool {
    v.is_infinite() || (nonzero && (v == 0.0 || v.is_subnormal()))
}

/// A hex float `0x1.8p3` (the `0x` prefix needs a hex digit after it, else only `0` parses).
fn hex(s: &[u8]) -> Option<(f64, usize, bool)> {
    if s.len() < 2 || s[0] != b'0' || !matches!(s[1], b'x' | b'X') {
        return None;
    }
    let mut i = 2;
    let (mut mant, mut exp2, mut digits, mut nonzero) = (0u128, 0i64, 0, false);
    let mut seen_point = false;
    while let Some(&c) = s.get(i) {
        if c == b'.' && !seen_point {
            seen_point = true;
        } else if let Some(d) = (c as char).to_digit(16) {
            digits += 1;
            nonzero |= d != 0;
            if mant >> 120 == 0 {
                mant = mant << 4 | u128::from(d);
                if seen_point {
                    exp2 -= 4;
                }
            } else if !seen_point {
                exp2 += 4;
            }
        } else {
            break;
        }
        i += 1;
    }
    if digits == 0 {
        return None;
    }
    if matches!(s.get(i), Some(b'p' | b'P')) {
        let mut e = i + 1;
        let neg = s.get(e) == Some(&b'-');
        if matches!(s.get(e), Some(b'+' | b'-')) {
            e += 1;
        }
        let n = s[e.min(s.len())..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        if n > 0 {
            let v = s[e..e + n].iter().fold(0i64, |a, &c| {
                a.saturating_mul(10).saturating_add(i64::from(c - b'0'))
            });
            exp2 += if neg { -v } else { v };
            i = e + n;
        }
    }
    let v = scale2(mant as f64, exp2);
    Some((v, i, range_error(v, nonzero)))
}

/// `v * 2^e` by exact steps (core has no `ldexp` without std).
fn scale2(mut v: f64, mut e: i64) -> f64 {
    e = e.clamp(-2200, 2200);
    while e > 0 && v.is_finite() {
        let step = e.min(60);
        v *= (1u64 << step) as f64;
        e -= step;
    }
    while e < 0 && v != 0.0 {
        let step = (-e).min(60);
        v /= (1u64 << step) as f64;
        e += step;
    }
    v
}

/// The bytes C sees through a `char *`: everything before the first NUL.
fn c_str(s: &[u8]) -> &[u8] {
    s.iter().position(|&c| c == 0).map_or(s, |n| &s[..n])
}

/// A score, increment or weight argument, as Redis's `getDoubleFromObject`: the whole text
/// must parse, no leading space, no overflow or underflow to zero, not NaN.
pub(crate) fn parse_score(s: &[u8]) -> Option<f64> {
    if s.is_empty() || is_c_space(s[0]) {
        return None;
    }
    let r = strtod(s);
    let bad_range = r.erange && (r.value.is_infinite() || r.value == 0.0);
    (r.consumed == s.len() && !bad_range && !r.value.is_nan()).then_some(r.value)
}

/// A score-range bound after its optional `(`, as Redis's range parser: `strtod` on the C
/// string (leading space and an empty text accepted), the rest must be consumed, not NaN.
pub(crate) fn parse_range_score(s: &[u8]) -> Option<f64> {
    let s = c_str(s);
    let r = strtod(s);
    (r.consumed == s.len() && !r.value.is_nan()).then_some(r.value)
}

/// A SORT weight: `strtod` on the C string, fully consumed, no `ERANGE`, not NaN.
pub(crate) fn parse_sort_weight(s: &[u8]) -> Option<f64> {
    let s = c_str(s);
    let r = strtod(s);
    (r.consumed == s.len() && !r.erange && !r.value.is_nan()).then_some(r.value)
}

/// Appends `v` as C's `%.17g` (Redis's `d2string`): `inf`, `-inf`, `0`, `-0`, integers
/// below 1e17 as integers, else 17 significant digits without trailing zeros.
pub fn format_g17(v: f64, out: &mut Vec<u8>) {
    use core::fmt::Write;
    let mut s = alloc::string::String::new();
    if v.is_nan() {
        s.push_str("nan");
    } else if v.is_infinite() {
        s.push_str(if v < 0.0 { "-inf" } else { "inf" });
    } else if v == 0.0 {
        s.push_str(if v.is_sign_negative() { "-0" } else { "0" });
    } else if v.abs() < 1e17 && v == (v as i64) as f64 {
        let _ = write!(s, "{}", v as i64);
    } else {
        let _ = write!(s, "{v:.16e}");
        let (mant, exp) = s.split_once('e').expect("exponent form");
        let exp: i32 = exp.parse().expect("exponent digits");
        let (neg, mant) = mant.strip_prefix('-').map_or((false, mant), |m| (true, m));
        let digits: Vec<u8> = mant.bytes().filter(|c| c.is_ascii_digit()).collect();
        let mut t = alloc::string::String::new();
        layout_g(&digits, exp, neg, &mut t);
        s = t;
    }
    out.extend_from_slice(s.as_bytes());
}

/// Lays out 17 significant `digits` with decimal exponent `exp` as `%g` does.
fn layout_g(digits: &[u8], exp: i32, neg: bool, t: &mut alloc::string::String) {
    let end = digits.iter().rposition(|&c| c != b'0').map_or(1, |p| p + 1);
    let d = |r: core::ops::Range<usize>| core::str::from_utf8(&digits[r]).unwrap_or("");
    if neg {
        t.push('-');
    }
    if !(-4..17).contains(&exp) {
        t.push_str(d(0..1));
        if end > 1 {
            t.push('.');
            t.push_str(d(1..end));
        }
        let _ = core::fmt::Write::write_fmt(
            t,
            format_args!(
                "e{}{:02}",
                if exp < 0 { '-' } else { '+' },
                exp.unsigned_abs()
            ),
        );
    } else if exp >= 0 {
        let int_len = exp as usize + 1;
        t.push_str(d(0..int_len));
        if end > int_len {
            t.push('.');
            t.push_str(d(int_len..end));
        }
    } else {
        t.push_str("0.");
        (0..(-exp - 1)).for_each(|_| t.push('0'));
        t.push_str(d(0..end));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(v: f64) -> alloc::string::String {
        let mut out = Vec::new();
        format_g17(v, &mut out);
        alloc::string::String::from_utf8(out).unwrap()
    }

    #[test]
    fn scores_parse_as_redis_7_0_15() {
        assert_eq!(parse_score(b"0x10"), Some(16.0));
        assert_eq!(parse_score(b"inf"), Some(f64::INFINITY));
        assert_eq!(parse_score(b"-Infinity"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_score(b"1."), Some(1.0));
        assert_eq!(parse_score(b".5"), Some(0.5));
        assert!(parse_score(b"4e-320").is_some()); // subnormal: accepted
        for bad in [
            &b" 1"[..],
            b"1 ",
            b"",
            b"nan",
            b"1e400",
            b"1e-400",
            b"1e",
            b"abc",
        ] {
            assert_eq!(parse_score(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn range_bounds_are_lenient_like_strtod() {
        assert_eq!(parse_range_score(b" 1"), Some(1.0));
        assert_eq!(parse_range_score(b""), Some(0.0));
        assert_eq!(parse_range_score(b"1e400"), Some(f64::INFINITY));
        assert_eq!(parse_range_score(b"1\x00junk"), Some(1.0));
        assert_eq!(parse_range_score(b"1x"), None);
        assert_eq!(parse_range_score(b"nan"), None);
    }

    #[test]
    fn sort_weights_refuse_range_errors() {
        assert_eq!(parse_sort_weight(b" 2"), Some(2.0));
        assert_eq!(parse_sort_weight(b"3 "), None);
        assert_eq!(parse_sort_weight(b"4e-320"), None);
        assert_eq!(parse_sort_weight(b"-inf"), Some(f64::NEG_INFINITY));
    }

    #[test]
    fn hex_floats() {
        assert_eq!(strtod(b"0x1.8p1").value, 3.0);
        assert_eq!(strtod(b"0x").consumed, 1);
        assert_eq!(strtod(b"-0x10p-4").value, -1.0);
    }

    #[test]
    fn g17_matches_printf() {
        assert_eq!(g(0.1), "0.10000000000000001");
        assert_eq!(g(2.5), "2.5");
        assert_eq!(g(-0.0), "-0");
        assert_eq!(g(1e17), "1e+17");
        assert_eq!(g(1e-5), "1.0000000000000001e-05");
        assert_eq!(g(strtod(b"4e-320").value), "3.999955468730732e-320");
        assert_eq!(g(f64::NEG_INFINITY), "-inf");
        assert_eq!(g(123.25), "123.25");
    }
}
