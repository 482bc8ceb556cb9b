//! Xenstore node paths: validation, relative-path resolution and prefix tests
//! (docs/misc/xenstore.txt "Paths"; limits as cxenstored 4.17 applies them).

use alloc::string::String;
use alloc::vec::Vec;

use crate::error::XsError;

/// A special watch path (`@introduceDomain`, `@releaseDomain`, or any `@name` for WATCH).
pub fn is_special(raw: &[u8]) -> bool {
    raw.first() == Some(&b'@')
}

/// The home of a domain, against which relative paths resolve: `/local/domain/<domid>`.
pub fn domain_home(domid: u32) -> String {
    let mut s = String::with_capacity(HOME_PREFIX.len() + 10);
    s.push_str(HOME_PREFIX);
    push_decimal(&mut s, domid);
    s
}

/// What every domain home starts with.
const HOME_PREFIX: &str = "/local/domain/";

/// Append `n` in decimal (cheaper than the formatter, once per request or so).
pub fn push_decimal(s: &mut String, mut n: u32) {
    let mut digits = [0u8; 10];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    s.push_str(core::str::from_utf8(&digits[at..]).expect("ASCII digits"));
}

/// Byte classes of node paths: 0 not allowed, 1 a name character (`[A-Za-z0-9_@-]`), 2 `/`.
const CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'@' || b == b'-' {
            t[c] = 1;
        }
        c += 1;
    }
    t[b'/' as usize] = 2;
    t
};

/// Check the shape rules shared by absolute and relative paths: allowed characters
/// (`[A-Za-z0-9/_@-]`), no `//`, no trailing `/` (except the root). One table look-up per
/// byte: this runs for every path of every request.
fn valid_shape(raw: &[u8]) -> bool {
    let Some(&last) = raw.last() else {
        return false;
    };
    let mut prev = 0;
    for &c in raw {
        let class = CLASS[c as usize];
        if class == 0 || (class & prev) == 2 {
            return false;
        }
        prev = class;
    }
    raw.len() == 1 || last != b'/'
}

/// Validate a node path as sent by a client of domain `domid` and return its absolute form.
/// Relative paths resolve against `/local/domain/<domid>`; `path_max` bounds the length of
/// the path as sent (cxenstored: 2048 for both kinds). Special `@` paths are EINVAL here.
pub fn canonicalize(raw: &[u8], domid: u32, path_max: usize) -> Result<String, XsError> {
    if !valid_shape(raw) || is_special(raw) || raw.len() > path_max {
        return Err(XsError::Einval);
    }
    let text = core::str::from_utf8(raw).map_err(|_| XsError::Einval)?;
    if text.starts_with('/') {
        return Ok(String::from(text));
    }
    let mut abs = String::with_capacity(HOME_PREFIX.len() + 11 + text.len());
    abs.push_str(HOME_PREFIX);
    push_decimal(&mut abs, domid);
    abs.push('/');
    abs.push_str(text);
    Ok(abs)
}

/// The path as a client of `domid` should see it in an event: relative when its watch was
/// relative (strip the domain home), absolute otherwise.
pub fn relativize(abs: &str, domid: u32, relative: bool) -> &str {
    if !relative {
        return abs;
    }
    let home = domain_home(domid);
    match abs.strip_prefix(home.as_str()) {
        Some(rest) if rest.starts_with('/') => &rest[1..],
        _ => abs,
    }
}

/// The components of an absolute path (`"/"` has none).
pub fn components(abs: &str) -> Vec<&str> {
    // Sized once: at most one component per separator, plus one.
    let mut v = Vec::with_capacity(abs.bytes().filter(|&b| b == b'/').count() + 1);
    v.extend(segments(abs));
    v
}

/// The non-empty components of a path, in order, without collecting them (a byte scan:
/// `str::split` costs more on these short strings).
pub fn segments(path: &str) -> Segments<'_> {
    Segments { rest: path }
}

/// Iterator of [`segments`].
#[derive(Clone, Debug)]
pub struct Segments<'a> {
    rest: &'a str,
}

impl<'a> Iterator for Segments<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let b = self.rest.as_bytes();
        let start = b.iter().position(|&c| c != b'/')?;
        let end = b[start..]
            .iter()
            .position(|&c| c == b'/')
            .map_or(b.len(), |n| start + n);
        // Both ends are at '/' bytes or the string's ends: character boundaries.
        let seg = &self.rest[start..end];
        self.rest = &self.rest[end..];
        Some(seg)
    }
}

/// The parent of an absolute path; the root is its own parent.
pub fn parent(abs: &str) -> &str {
    match abs.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &abs[..i],
    }
}

/// True when `ancestor` is `path` or one of its ancestors (prefix on `/` boundaries).
pub fn is_prefix(ancestor: &str, path: &str) -> bool {
    if ancestor == "/" || ancestor == path {
        return true;
    }
    path.starts_with(ancestor) && path.as_bytes().get(ancestor.len()) == Some(&b'/')
}

/// The longest common prefix of two absolute paths, on component boundaries.
pub fn common_prefix(a: &str, b: &str) -> String {
    let mut out = String::new();
    for (x, y) in segments(a).zip(segments(b)) {
        if x != y {
            break;
        }
        out.push('/');
        out.push_str(x);
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

/// For a canonical absolute path `a`: the length of its prefix that is [`common_prefix`]
/// of `a` and `b` (so a prefix can be narrowed in place).
pub fn common_prefix_len(a: &str, b: &str) -> usize {
    let mut end = 0;
    for (x, y) in segments(a).zip(segments(b)) {
        if x != y {
            break;
        }
        end = x.as_ptr() as usize - a.as_ptr() as usize + x.len();
    }
    end.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_match_split() {
        for p in [
            "/",
            "",
            "/a",
            "/a/b/c",
            "a/b",
            "//a///b/",
            "/local/domain/12/x",
        ] {
            let want: Vec<&str> = p.split('/').filter(|c| !c.is_empty()).collect();
            assert_eq!(segments(p).collect::<Vec<_>>(), want, "{p}");
            assert_eq!(components(p), want, "{p}");
        }
    }

    #[test]
    fn shapes() {
        assert_eq!(canonicalize(b"/a/b", 0, 2048).unwrap(), "/a/b");
        assert_eq!(canonicalize(b"/", 0, 2048).unwrap(), "/");
        assert_eq!(
            canonicalize(b"x/y", 3, 2048).unwrap(),
            "/local/domain/3/x/y"
        );
        assert_eq!(domain_home(0), "/local/domain/0");
        assert_eq!(domain_home(u32::MAX), "/local/domain/4294967295");
        assert_eq!(
            canonicalize(b"a", 1234, 2048).unwrap(),
            "/local/domain/1234/a"
        );
        for bad in [
            &b""[..],
            b"/a/",
            b"/a//b",
            b"/a b",
            b"@introduceDomain",
            b"/a\xff",
        ] {
            assert_eq!(canonicalize(bad, 0, 2048), Err(XsError::Einval), "{bad:?}");
        }
        let long = [b'a'; 2049];
        assert_eq!(canonicalize(&long, 0, 2048), Err(XsError::Einval));
        assert!(canonicalize(&long[..2048], 0, 2048).is_ok());
    }

    #[test]
    fn prefixes() {
        assert!(is_prefix("/a", "/a/b"));
        assert!(is_prefix("/a", "/a"));
        assert!(!is_prefix("/a", "/ab"));
        assert!(is_prefix("/", "/x"));
        assert_eq!(common_prefix("/a/b/c", "/a/b/d"), "/a/b");
        assert_eq!(common_prefix("/a", "/b"), "/");
        assert_eq!(common_prefix("/ab", "/a"), "/");
        for (a, b) in [
            ("/a/b/c", "/a/b/d"),
            ("/a", "/b"),
            ("/ab", "/a"),
            ("/", "/x"),
            ("/x/y", "/x/y/z"),
        ] {
            assert_eq!(
                &a[..common_prefix_len(a, b)],
                common_prefix(a, b),
                "{a} {b}"
            );
        }
        assert_eq!(parent("/a/b"), "/a");
        assert_eq!(parent("/a"), "/");
        assert_eq!(parent("/"), "/");
        assert_eq!(relativize("/local/domain/0/x", 0, true), "x");
        assert_eq!(
            relativize("/local/domain/0/x", 0, false),
            "/local/domain/0/x"
        );
        assert_eq!(relativize("/other", 0, true), "/other");
    }
}
