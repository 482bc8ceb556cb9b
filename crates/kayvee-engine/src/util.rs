//! Small helpers shared by command groups: Redis's strict integer parsing, glob matching, and
//! text sanitising for error messages.

use alloc::string::String;

/// Parses a signed 64-bit integer exactly as Redis's `string2ll`: optional `-`, no `+`, no
/// spaces, no leading zeros (`0` alone is fine), no overflow.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s {
        [] => return None,
        [b'0'] => return Some(0),
        [b'-', rest @ ..] => (true, rest),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 19 || !(b'1'..=b'9').contains(&digits[0]) {
        return None;
    }
    // At most 19 digits: below 10^19 < 2^64, so the u64 cannot overflow.
    let mut v: u64 = 0;
    for &c in digits {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v * 10 + u64::from(d);
    }
    if neg {
        if v > i64::MAX as u64 + 1 {
            return None;
        }
        Some((v as i64).wrapping_neg())
    } else {
        i64::try_from(v).ok()
    }
}

/// Parses a non-negative integer as Redis does for counts and indexes (`string2ll` then >= 0).
pub fn parse_u64(s: &[u8]) -> Option<u64> {
    parse_i64(s).and_then(|v| u64::try_from(v).ok())
}

/// Renders bytes for an error message: lossy UTF-8, at most `max` bytes, cut at the first NUL
/// (Redis formats these with `%s`, which stops there), CR and LF as spaces (as Redis does so an
/// error reply stays one line).
pub fn sanitize(b: &[u8], max: usize) -> String {
    let b = c_str_prefix(b, max);
    let mut s = String::from_utf8_lossy(b).into_owned();
    if s.contains(['\r', '\n']) {
        s = s.replace(['\r', '\n'], " ");
    }
    s
}

/// The bytes C's `%.*s` would print: at most `max`, cut at the first NUL.
pub fn c_str_prefix(b: &[u8], max: usize) -> &[u8] {
    let b = &b[..b.len().min(max)];
    match b.iter().position(|&c| c == 0) {
        Some(nul) => &b[..nul],
        None => b,
    }
}

/// Glob-style matching as Redis's `stringmatchlen`: `*`, `?`, `[abc]`, `[^a-z]`, `\x`.
pub fn glob_match(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    glob_inner(pattern, s, nocase, 0).unwrap_or(false)
}

const GLOB_DEPTH_MAX: usize = 1000;

fn glob_inner(mut p: &[u8], mut s: &[u8], nocase: bool, depth: usize) -> Option<bool> {
    if depth > GLOB_DEPTH_MAX {
        return None;
    }
    let eq = |a: u8, b: u8| {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    while !p.is_empty() {
        match p[0] {
            b'*' => {
                while p.len() > 1 && p[1] == b'*' {
                    p = &p[1..];
                }
                if p.len() == 1 {
                    return Some(true);
                }
                for i in 0..=s.len() {
                    if glob_inner(&p[1..], &s[i..], nocase, depth + 1)? {
                        return Some(true);
                    }
                }
                return Some(false);
            }
            b'?' => {
                if s.is_empty() {
                    return Some(false);
                }
                s = &s[1..];
            }
            b'[' => {
                let (matched, rest) = glob_class(&p[1..], s.first().copied()?, nocase);
                if !matched {
                    return Some(false);
                }
                p = rest;
                s = &s[1..];
                continue;
            }
            b'\\' if p.len() >= 2 => {
                p = &p[1..];
                if s.is_empty() || !eq(p[0], s[0]) {
                    return Some(false);
                }
                s = &s[1..];
            }
            c => {
                if s.is_empty() || !eq(c, s[0]) {
                    return Some(false);
                }
                s = &s[1..];
            }
        }
        p = &p[1..];
    }
    Some(s.is_empty())
}

/// Matches one character against a `[...]` class; `p` starts after `[`. Returns whether it
/// matched and the pattern after the closing `]`.
fn glob_class(mut p: &[u8], c: u8, nocase: bool) -> (bool, &[u8]) {
    let not = p.first() == Some(&b'^');
    if not {
        p = &p[1..];
    }
    let fold = |x: u8| if nocase { x.to_ascii_lowercase() } else { x };
    let c = fold(c);
    let mut matched = false;
    loop {
        match p {
            [] => break,
            [b']', rest @ ..] => {
                p = rest;
                break;
            }
            [b'\\', x, rest @ ..] => {
                matched |= fold(*x) == c;
                p = rest;
            }
            [a, b'-', b, rest @ ..] if *b != b']' => {
                let (lo, hi) = if fold(*a) <= fold(*b) {
                    (fold(*a), fold(*b))
                } else {
                    (fold(*b), fold(*a))
                };
                matched |= lo <= c && c <= hi;
                p = rest;
            }
            [x, rest @ ..] => {
                matched |= fold(*x) == c;
                p = rest;
            }
        }
    }
    (matched != not, p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_i64_is_strict() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-12"), Some(-12));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"-0",
            b"01",
            b"+1",
            b" 1",
            b"1 ",
            b"9223372036854775808",
            b"1a",
        ] {
            assert_eq!(parse_i64(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn glob_matches_like_redis() {
        assert!(glob_match(b"*", b"anything", false));
        assert!(glob_match(b"h?llo", b"hello", false));
        assert!(glob_match(b"h[ae]llo", b"hallo", false));
        assert!(!glob_match(b"h[^e]llo", b"hello", false));
        assert!(glob_match(b"h[a-b]llo", b"hbllo", false));
        assert!(glob_match(b"h\\*llo", b"h*llo", false));
        assert!(!glob_match(b"key:*", b"other", false));
        assert!(glob_match(b"KEY*", b"key1", true));
        assert!(glob_match(b"a*b*c", b"aXXbYYc", false));
    }
}
