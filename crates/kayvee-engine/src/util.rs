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

/// Glob-style matching as Redis's `stringmatchlen`: `*`, `?`, `[abc]`, `[^a-z]`, `\\x`.
///
/// Bounded time for every pattern: O(pattern × string) steps, no recursion. Every token but
/// `*` consumes exactly one byte, so when the text after a `*` fails, only the latest `*`
/// needs to take one more byte (earlier ones could only do worse): one backtrack point.
///
/// Redis gives up on a match that has to go through more than [`GLOB_STARS_MAX`] `*` groups
/// that are not at the pattern's end (its recursion depth limit), answering "no match"; this
/// matcher answers the same, so `KEYS` agrees with Redis on such patterns.
pub fn glob_match(p: &[u8], s: &[u8], nocase: bool) -> bool {
    let (mut pi, mut si) = (0, 0);
    // (pattern index after the latest `*` group, string index it resumes at, its group number)
    let mut backtrack: Option<(usize, usize, usize)> = None;
    let mut stars = 0;
    loop {
        if p.get(pi) == Some(&b'*') {
            while p.get(pi) == Some(&b'*') {
                pi += 1;
            }
            if pi == p.len() {
                return true;
            }
            stars += 1;
            if si == s.len() || stars > GLOB_STARS_MAX {
                return false;
            }
            backtrack = Some((pi, si, stars));
            continue;
        }
        if pi == p.len() && si == s.len() {
            return true;
        }
        if let Some(next) = (si < s.len())
            .then(|| glob_token(p, pi, s[si], nocase))
            .flatten()
        {
            pi = next;
            si += 1;
            continue;
        }
        match backtrack {
            Some((sp, ss, k)) if ss < s.len() => {
                backtrack = Some((sp, ss + 1, k));
                (pi, si, stars) = (sp, ss + 1, k);
            }
            _ => return false,
        }
    }
}

/// Most `*` groups a match may pass through (Redis 7.0's nesting limit of stringmatchlen).
pub const GLOB_STARS_MAX: usize = 1000;

/// Matches byte `c` against the token at `p[pi]` (not `*`): the index after the token, or
/// `None` when it does not match or the pattern has ended.
fn glob_token(p: &[u8], pi: usize, c: u8, nocase: bool) -> Option<usize> {
    let eq = |a: u8| {
        if nocase {
            a.eq_ignore_ascii_case(&c)
        } else {
            a == c
        }
    };
    match *p.get(pi)? {
        b'?' => Some(pi + 1),
        b'[' => {
            let (matched, rest) = glob_class(&p[pi + 1..], c, nocase);
            matched.then_some(p.len() - rest.len())
        }
        b'\\' if pi + 1 < p.len() => eq(p[pi + 1]).then_some(pi + 2),
        lit => eq(lit).then_some(pi + 1),
    }
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
    extern crate std;

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
        assert!(glob_match(b"*", b"", false));
        assert!(!glob_match(b"*a", b"", false));
        assert!(glob_match(b"a*", b"a", false));
        assert!(glob_match(b"*a*b", b"xxaxxab", false));
        assert!(!glob_match(b"*a*b", b"xxaxxa", false));
        assert!(glob_match(b"a\\", b"a\\", false));
        assert!(glob_match(b"*[0-9]", b"abc7", false));
    }

    /// The suite's regressions: these answered at once in Redis and hung the matcher before.
    #[test]
    fn glob_time_is_bounded() {
        let t = std::time::Instant::now();
        let key = [b'a'; 40];
        assert!(!glob_match(
            b"a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b",
            &key,
            false
        ));
        let key = [b'a'; 50_000];
        assert!(!glob_match(&b"*?".repeat(50_000), &key, false));
        let pattern = [&b"*a".repeat(1000)[..], b"b"].concat();
        assert!(!glob_match(&pattern, &key, false));
        assert!(
            t.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            t.elapsed()
        );
    }

    /// Redis answers "no match" past 1000 non-final `*` groups (checked with redis-server
    /// 7.0.15 against a 2000-byte key); a final `*` does not count.
    #[test]
    fn glob_star_limit_like_redis() {
        let key = [b'a'; 2000];
        assert!(glob_match(&b"*?".repeat(1000), &key, false));
        assert!(!glob_match(&b"*?".repeat(1001), &key, false));
        assert!(glob_match(
            &[&b"*?".repeat(1000)[..], b"*"].concat(),
            &key,
            false
        ));
        assert!(glob_match(&b"a*".repeat(1001), &key, false));
        assert!(!glob_match(
            &[&b"a*".repeat(1001)[..], b"a"].concat(),
            &key,
            false
        ));
    }
}
