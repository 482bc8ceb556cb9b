//! Value syntax of redis.conf and `CONFIG SET`, as Redis 7.0 reads and writes it: memory sizes
//! with units, yes/no, strict integers, octal permissions, `save` points, the quoting of
//! `sdssplitargs` (reading) and `sdscatrepr` (writing back). Learned by experiment against
//! redis-server 7.0.15; see the tests for the cases checked.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;

/// Parses a memory size as Redis's `memtoull`: decimal digits (possibly none, meaning 0) then
/// an optional unit `b`, `k`, `kb`, `m`, `mb`, `g`, `gb` (any case; `k` = 1000, `kb` = 1024).
/// Digits saturate at `u64::MAX`; the unit multiplication wraps, as Redis's does.
pub fn parse_memory(s: &[u8]) -> Option<u64> {
    let digits_end = s
        .iter()
        .position(|c| !c.is_ascii_digit())
        .unwrap_or(s.len());
    let (digits, unit) = s.split_at(digits_end);
    let mul: u64 = match unit.to_ascii_lowercase().as_slice() {
        b"" | b"b" => 1,
        b"k" => 1000,
        b"kb" => 1024,
        b"m" => 1000 * 1000,
        b"mb" => 1024 * 1024,
        b"g" => 1000 * 1000 * 1000,
        b"gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    let n = digits.iter().fold(0u64, |acc, &c| {
        acc.saturating_mul(10).saturating_add(u64::from(c - b'0'))
    });
    Some(n.wrapping_mul(mul))
}

/// Renders a memory size for a rewritten config file: `1gb`, `100mb`, `1kb` when it divides
/// evenly, plain bytes otherwise (and for 0).
pub fn render_memory(v: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "gb"), (1 << 20, "mb"), (1 << 10, "kb")];
    for (size, unit) in UNITS {
        if v != 0 && v.is_multiple_of(size) {
            return alloc::format!("{}{unit}", v / size);
        }
    }
    alloc::format!("{v}")
}

/// `yes` / `no`, any case.
pub fn parse_bool(s: &[u8]) -> Option<bool> {
    if s.eq_ignore_ascii_case(b"yes") {
        Some(true)
    } else if s.eq_ignore_ascii_case(b"no") {
        Some(false)
    } else {
        None
    }
}

/// An octal number (`unixsocketperm 700`): octal digits only, at least one.
pub fn parse_octal(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 || !s.iter().all(|c| (b'0'..=b'7').contains(c)) {
        return None;
    }
    Some(s.iter().fold(0i64, |acc, &c| acc * 8 + i64::from(c - b'0')))
}

/// A permissive integer as C's `strtoll` reads a whole token: optional sign, digits (at least
/// one), saturating at the `i64` bounds. `save` parameters are read this way.
fn parse_lenient_i64(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s {
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mag = digits.iter().fold(0i128, |acc, &c| {
        (acc * 10 + i128::from(c - b'0')).min(i128::from(u64::MAX))
    });
    let v = if neg { -mag } else { mag };
    Some(v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64)
}

/// Parses `save` points from their words: `""` alone (or nothing) clears them; otherwise
/// `seconds changes` pairs with seconds >= 1 and changes >= 0. Redis keeps `changes` in a C
/// `int`, so a huge count shows truncated (`-1`), and so does Kayvee.
pub fn parse_save(words: &[&[u8]]) -> Option<Vec<(i64, i64)>> {
    if words.is_empty() || words == [b"".as_slice()] {
        return Some(Vec::new());
    }
    if !words.len().is_multiple_of(2) {
        return None;
    }
    let mut points = Vec::with_capacity(words.len() / 2);
    for pair in words.chunks(2) {
        let secs = parse_lenient_i64(pair[0])?;
        let changes = parse_lenient_i64(pair[1])?;
        if secs < 1 || changes < 0 {
            return None;
        }
        points.push((secs, i64::from(changes as i32)));
    }
    Some(points)
}

/// Renders save points as `CONFIG GET save` shows them: `3600 1 300 100`.
pub fn render_save(points: &[(i64, i64)]) -> String {
    let mut s = String::new();
    for (i, (secs, changes)) in points.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(&alloc::format!("{secs} {changes}"));
    }
    s
}

/// Why a line could not be split into arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnbalancedQuotes;

/// Splits a config line into arguments as Redis's `sdssplitargs`: whitespace separates;
/// `"..."` takes `\n \r \t \b \a \\ \"` and `\xHH` escapes; `'...'` takes only `\'`; a closing
/// quote must be followed by whitespace or the end of the line.
pub fn split_args(line: &[u8]) -> Result<Vec<Vec<u8>>, UnbalancedQuotes> {
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while i < line.len() && is_space(line[i]) {
            i += 1;
        }
        if i >= line.len() {
            return Ok(args);
        }
        let (arg, next) = split_one(line, i)?;
        args.push(arg);
        i = next;
    }
}

/// Whitespace as C's `isspace`.
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// Reads one argument starting at `i`; returns it and the index after it.
fn split_one(line: &[u8], mut i: usize) -> Result<(Vec<u8>, usize), UnbalancedQuotes> {
    let mut arg = Vec::new();
    while i < line.len() && !is_space(line[i]) {
        match line[i] {
            b'"' => i = read_double_quoted(line, i + 1, &mut arg)?,
            b'\'' => i = read_single_quoted(line, i + 1, &mut arg)?,
            c => {
                arg.push(c);
                i += 1;
            }
        }
    }
    Ok((arg, i))
}

/// Reads a `"..."` body from `i` (after the quote); returns the index after the closing quote.
fn read_double_quoted(
    line: &[u8],
    mut i: usize,
    arg: &mut Vec<u8>,
) -> Result<usize, UnbalancedQuotes> {
    loop {
        match line.get(i..) {
            None | Some([]) => return Err(UnbalancedQuotes),
            Some([b'\\', b'x', h, l, ..]) if hex(*h).is_some() && hex(*l).is_some() => {
                arg.push(hex(*h).unwrap_or(0) * 16 + hex(*l).unwrap_or(0));
                i += 4;
            }
            Some([b'\\', c, ..]) => {
                arg.push(match c {
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'b' => 0x08,
                    b'a' => 0x07,
                    c => *c,
                });
                i += 2;
            }
            Some([b'"', rest @ ..]) => return closing_ok(rest, i + 1),
            Some([c, ..]) => {
                arg.push(*c);
                i += 1;
            }
        }
    }
}

/// Reads a `'...'` body from `i` (after the quote); returns the index after the closing quote.
fn read_single_quoted(
    line: &[u8],
    mut i: usize,
    arg: &mut Vec<u8>,
) -> Result<usize, UnbalancedQuotes> {
    loop {
        match line.get(i..) {
            None | Some([]) => return Err(UnbalancedQuotes),
            Some([b'\\', b'\'', ..]) => {
                arg.push(b'\'');
                i += 2;
            }
            Some([b'\'', rest @ ..]) => return closing_ok(rest, i + 1),
            Some([c, ..]) => {
                arg.push(*c);
                i += 1;
            }
        }
    }
}

/// A closing quote must end the argument.
fn closing_ok(rest: &[u8], next: usize) -> Result<usize, UnbalancedQuotes> {
    match rest.first() {
        None => Ok(next),
        Some(&c) if is_space(c) => Ok(next),
        Some(_) => Err(UnbalancedQuotes),
    }
}

/// The value of a hex digit.
fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// Quotes bytes as Redis's `sdscatrepr` for a rewritten config file.
pub fn repr(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() + 2);
    repr_into(b, &mut s);
    s
}

/// Appends `b` quoted as Redis's `sdscatrepr` (CONFIG REWRITE, MONITOR lines): `"..."` with
/// `\\ \" \n \r \t \a \b` escapes and `\xHH` for other non-printable bytes.
pub fn repr_into(b: &[u8], s: &mut String) {
    s.push('"');
    for &c in b {
        match c {
            b'\\' => s.push_str("\\\\"),
            b'"' => s.push_str("\\\""),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            0x07 => s.push_str("\\a"),
            0x08 => s.push_str("\\b"),
            0x20..=0x7e => s.push(c as char),
            _ => {
                let _ = write!(s, "\\x{c:02x}");
            }
        }
    }
    s.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn memory_units_as_redis() {
        assert_eq!(parse_memory(b"1gb"), Some(1 << 30));
        assert_eq!(parse_memory(b"1GB"), Some(1 << 30));
        assert_eq!(parse_memory(b"1gB"), Some(1 << 30));
        assert_eq!(parse_memory(b"100mb"), Some(100 << 20));
        assert_eq!(parse_memory(b"1k"), Some(1000));
        assert_eq!(parse_memory(b"1kb"), Some(1024));
        assert_eq!(parse_memory(b"1m"), Some(1_000_000));
        assert_eq!(parse_memory(b"1g"), Some(1_000_000_000));
        assert_eq!(parse_memory(b"1b"), Some(1));
        assert_eq!(parse_memory(b"05"), Some(5));
        // Checked against 7.0.15: an empty number is 0, digits saturate, units wrap.
        assert_eq!(parse_memory(b""), Some(0));
        assert_eq!(parse_memory(b"kb"), Some(0));
        assert_eq!(parse_memory(b"99999999999999999999"), Some(u64::MAX));
        assert_eq!(
            parse_memory(b"99999999999999999999gb"),
            Some(18446744072635809792)
        );
        assert_eq!(parse_memory(b"20000000000gb"), Some(3028092406290448384));
        for bad in [
            &b"-1"[..],
            b"+5",
            b" 5",
            b"5 ",
            b"1.5gb",
            b"1tb",
            b"1KiB",
            b"0x5",
            b"gb5",
            b"1e3",
        ] {
            assert_eq!(parse_memory(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn memory_renders_with_units_when_exact() {
        assert_eq!(render_memory(2 << 30), "2gb");
        assert_eq!(render_memory(2 << 20), "2mb");
        assert_eq!(render_memory(3 << 10), "3kb");
        assert_eq!(render_memory(1_500_000), "1500000");
        assert_eq!(render_memory(0), "0");
    }

    #[test]
    fn bools_and_octal() {
        assert_eq!(parse_bool(b"YES"), Some(true));
        assert_eq!(parse_bool(b"no"), Some(false));
        assert_eq!(parse_bool(b"1"), None);
        assert_eq!(parse_bool(b"true"), None);
        assert_eq!(parse_octal(b"700"), Some(0o700));
        assert_eq!(parse_octal(b"999"), None);
        assert_eq!(parse_octal(b""), None);
    }

    #[test]
    fn save_points() {
        let w =
            |s: &'static str| -> Vec<&'static [u8]> { s.split(' ').map(str::as_bytes).collect() };
        assert_eq!(
            parse_save(&w("3600 1 300 100")),
            Some(vec![(3600, 1), (300, 100)])
        );
        assert_eq!(parse_save(&w("")), Some(vec![]));
        assert_eq!(parse_save(&w("+1 1")), Some(vec![(1, 1)]));
        assert_eq!(
            parse_save(&w("1 1000000000000000000000")),
            Some(vec![(1, -1)])
        );
        for bad in [
            "100 10 20",
            "100 x",
            "0 0",
            "0 1",
            "-1 5",
            "1 -1",
            "1  1",
            "1 1 ",
        ] {
            assert_eq!(parse_save(&w(bad)), None, "{bad}");
        }
        assert_eq!(
            render_save(&[(3600, 1), (300, 100), (60, 10000)]),
            "3600 1 300 100 60 10000"
        );
    }

    #[test]
    fn split_args_quoting() {
        let s = |l: &str| split_args(l.as_bytes());
        assert_eq!(
            s("  hz   10 ").unwrap(),
            vec![b"hz".to_vec(), b"10".to_vec()]
        );
        assert_eq!(
            s(r#"requirepass "a\x41b\"c d""#).unwrap()[1],
            b"aAb\"c d".to_vec()
        );
        assert_eq!(s(r#"x "\n\t\\""#).unwrap()[1], b"\n\t\\".to_vec());
        assert_eq!(s(r"x 'it\'s'").unwrap()[1], b"it's".to_vec());
        assert_eq!(s("logfile ''").unwrap()[1], b"".to_vec());
        assert_eq!(s(r#"a"b c"d"#), Err(UnbalancedQuotes));
        assert_eq!(s(r#"hz "10"#), Err(UnbalancedQuotes));
        assert_eq!(s("hz '10"), Err(UnbalancedQuotes));
        assert_eq!(
            s(r#"a"b c" d"#).unwrap(),
            vec![b"ab c".to_vec(), b"d".to_vec()]
        );
        assert!(s("   ").unwrap().is_empty());
    }

    #[test]
    fn repr_round_trips_through_split() {
        let raw = b"a\"b\\c d\n\x01\xff".to_vec();
        let line = alloc::format!("x {}", repr(&raw));
        assert_eq!(line, "x \"a\\\"b\\\\c d\\n\\x01\\xff\"");
        assert_eq!(split_args(line.as_bytes()).unwrap()[1], raw);
    }
}
