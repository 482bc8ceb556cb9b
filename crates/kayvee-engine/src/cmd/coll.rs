//! Helpers the collection commands share: SCAN-family argument parsing (HSCAN, SSCAN, ZSCAN
//! and the keyspace's SCAN, the cursor included), LMPOP/ZMPOP's arguments, the random-count
//! argument of HRANDFIELD/SRANDMEMBER/ZRANDMEMBER, and distinct random sampling.
//! The command groups use it; it imports none of them.
//!
//! Small encodings (`listpack` hashes, `intset` sets, packed sets) answer a whole scan in one
//! call with cursor 0 whatever the cursor given, as Redis 7.0 does for its small encodings;
//! big ones walk the map's hash order with a [`kayvee_pds::PMap::scan`] cursor (values differ
//! from Redis's, the guarantee is the same).

use crate::error::Error;
use crate::reply::ReplySink;
use crate::util::{glob_match, parse_i64};
use crate::{Cx, Rng};
use alloc::vec::Vec;

/// The SCAN family's default COUNT, as Redis's.
const SCAN_COUNT_DEFAULT: usize = 10;

/// Parsed `cursor [MATCH pattern] [COUNT count]` (and SCAN's `[TYPE type]`).
pub(crate) struct ScanArgs<'a> {
    /// Where to resume (a hash of the map's order).
    pub cursor: u64,
    /// Entries to visit at least (big encodings only).
    pub count: usize,
    /// Glob pattern the returned members or fields must match.
    pub pattern: Option<&'a [u8]>,
    /// SCAN's TYPE filter (always `None` for the collection scans).
    pub type_name: Option<&'a [u8]>,
}

impl ScanArgs<'_> {
    /// Whether a member or field passes MATCH.
    pub fn matches(&self, member: &[u8]) -> bool {
        self.pattern.is_none_or(|p| glob_match(p, member, false))
    }
}

/// Parses the cursor (argument 2) as Redis does first of all: a bad one is `ERR invalid cursor`.
pub(crate) fn parse_scan_cursor(args: &crate::Argv<'_>) -> Result<u64, Error> {
    parse_cursor_at(args, 2)
}

/// The cursor at argument `at`, or `ERR invalid cursor`.
fn parse_cursor_at(args: &crate::Argv<'_>, at: usize) -> Result<u64, Error> {
    parse_cursor(args.get(at)).ok_or(Error::msg("ERR invalid cursor"))
}

/// Parses HSCAN/SSCAN/ZSCAN's cursor and the options after it. Redis checks the options only
/// once the key was found with the right type.
pub(crate) fn parse_scan<'a>(args: &crate::Argv<'a>) -> Result<ScanArgs<'a>, Error> {
    parse_scan_at(args, 2, false)
}

/// Parses the cursor at argument `at` and the options after it, in order: COUNT not an
/// integer is the integer error, below 1 a syntax error; TYPE is an option only when
/// `with_type` (SCAN); an unknown option or one missing its value is a syntax error.
pub(crate) fn parse_scan_at<'a>(
    args: &crate::Argv<'a>,
    at: usize,
    with_type: bool,
) -> Result<ScanArgs<'a>, Error> {
    let mut scan = ScanArgs {
        cursor: parse_cursor_at(args, at)?,
        count: SCAN_COUNT_DEFAULT,
        pattern: None,
        type_name: None,
    };
    let mut i = at + 1;
    while i < args.len() {
        let (opt, value) = (args.get(i), args.try_get(i + 1).ok_or(Error::Syntax)?);
        if opt.eq_ignore_ascii_case(b"COUNT") {
            let n = parse_i64(value).ok_or(Error::NotInteger)?;
            if n < 1 {
                return Err(Error::Syntax);
            }
            scan.count = usize::try_from(n).unwrap_or(usize::MAX);
        } else if opt.eq_ignore_ascii_case(b"MATCH") {
            scan.pattern = Some(value);
        } else if with_type && opt.eq_ignore_ascii_case(b"TYPE") {
            scan.type_name = Some(value);
        } else {
            return Err(Error::Syntax);
        }
        i += 2;
    }
    Ok(scan)
}

/// Writes a scan reply: the cursor, then the elements `write` produces (`n` of them).
pub(crate) fn write_scan_head(out: &mut dyn crate::ReplySink, cursor: u64, n: usize) {
    out.array(2);
    out.bulk(alloc::format!("{cursor}").as_bytes());
    out.array(n);
}

/// The count argument of HRANDFIELD/SRANDMEMBER/ZRANDMEMBER: an integer in
/// -i64::MAX..=i64::MAX, with Redis's texts for a non-integer and for i64::MIN; when `pairs`
/// (WITHVALUES / WITHSCORES double the reply) it must also stay within +-i64::MAX/2.
pub(crate) fn parse_rand_count(arg: &[u8], pairs: bool) -> Result<i64, Error> {
    let n = parse_i64(arg).ok_or(Error::NotInteger)?;
    if n == i64::MIN {
        return Err(Error::msg(
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    if pairs && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&n) {
        return Err(Error::msg("ERR value is out of range"));
    }
    Ok(n)
}

/// Most draws a negative HRANDFIELD/SRANDMEMBER/ZRANDMEMBER count may ask for when no hard
/// `client-output-buffer-limit` for normal clients bounds the reply (or when the reply goes
/// to a script, not to a connection). Redis 7.0 starts building any such reply and runs out
/// of memory on counts like -1099511627776; Kayvee refuses them up front with Redis's
/// out-of-range text.
pub(crate) const RANDOM_DRAWS_MAX: u64 = 1 << 24;

/// The part of a reply the output limits never count: the connection layer's static reply
/// buffer (16 KiB, Redis's `PROTO_REPLY_CHUNK_BYTES`).
const UNCOUNTED_REPLY_BYTES: u64 = 16 * 1024;

/// The number of draws of a negative `count` (repeats allowed) for a reply written to `out`,
/// each draw a member or (`pairs`) a member and its value or score.
///
/// With a hard output limit for normal clients and a reply going to a connection, a count
/// whose reply must pass the limit (a draw takes 6 bytes at least, 12 with its pair) is cut
/// to just enough draws to pass it: Redis stops such a reply mid-run once the client is
/// marked for closing, and the connection layer closes this one once the command returns.
/// The callers write the draws as they make them, so the memory the reply takes is about
/// the limit's. Otherwise counts above [`RANDOM_DRAWS_MAX`] are refused.
pub(crate) fn repeat_draws(
    cx: &Cx<'_>,
    count: i64,
    pairs: bool,
    out: &dyn ReplySink,
) -> Result<usize, Error> {
    let hard = cx.core.config.client_output_buffer_limit[0].hard_bytes;
    let n = count.unsigned_abs();
    if hard > 0 && out.is_connection() {
        let draw_min = if pairs { 12 } else { 6 };
        let enough = (hard.saturating_add(UNCOUNTED_REPLY_BYTES) / draw_min).saturating_add(1);
        return Ok(usize::try_from(n.min(enough)).unwrap_or(usize::MAX));
    }
    match n <= RANDOM_DRAWS_MAX {
        true => Ok(n as usize),
        false => Err(Error::msg("ERR value is out of range")),
    }
}

/// The first `count` items of `all` after a partial Fisher-Yates shuffle: `count` distinct
/// items chosen uniformly (all of them when `count >= len`).
pub(crate) fn shuffle_prefix<T>(mut all: Vec<T>, count: usize, rng: &mut Rng) -> Vec<T> {
    let count = count.min(all.len());
    for i in 0..count {
        let j = i + (rng.next_u64() % (all.len() - i) as u64) as usize;
        all.swap(i, j);
    }
    all.truncate(count);
    all
}

/// LMPOP / ZMPOP's `numkeys key [key ...] END [COUNT count]`, parsed from argument `at`.
pub(crate) struct MpopArgs {
    /// Index of the first key.
    pub first: usize,
    /// Number of keys.
    pub numkeys: usize,
    /// Whether END was the first of the two words (LEFT, MIN) rather than the second.
    pub first_end: bool,
    /// COUNT (1 by default).
    pub count: usize,
}

/// Parses LMPOP / ZMPOP's (and their blocking forms') arguments from `at` in Redis's order:
/// numkeys, room for the keys and END, END (one of `ends`, any case), then a single COUNT,
/// whose value is checked before anything after it.
pub(crate) fn parse_mpop(
    args: &crate::Argv<'_>,
    at: usize,
    ends: [&str; 2],
) -> Result<MpopArgs, Error> {
    let n = parse_i64(args.get(at))
        .filter(|n| *n > 0)
        .ok_or(Error::msg("ERR numkeys should be greater than 0"))?;
    if n as u64 >= (args.len() - at) as u64 - 1 {
        return Err(Error::Syntax);
    }
    let (first, numkeys) = (at + 1, n as usize);
    let mut j = first + numkeys;
    let end = args.get(j);
    let first_end = match ends.map(|w| end.eq_ignore_ascii_case(w.as_bytes())) {
        [true, _] => true,
        [_, true] => false,
        _ => return Err(Error::Syntax),
    };
    j += 1;
    let mut count = None;
    while j < args.len() {
        if count.is_none() && args.get(j).eq_ignore_ascii_case(b"COUNT") && j + 1 < args.len() {
            let c = parse_i64(args.get(j + 1))
                .filter(|c| *c > 0)
                .ok_or(Error::msg("ERR count should be greater than 0"))?;
            count = Some(c as usize);
            j += 2;
        } else {
            return Err(Error::Syntax);
        }
    }
    Ok(MpopArgs {
        first,
        numkeys,
        first_end,
        count: count.unwrap_or(1),
    })
}

/// Parses a SCAN cursor as Redis does (C `strtoul`, base 10): optional sign (a minus negates
/// modulo 2^64), digits, nothing else; no leading space; overflow is an error; the empty
/// string is cursor 0.
pub(crate) fn parse_cursor(s: &[u8]) -> Option<u64> {
    let (neg, digits) = match s {
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        _ if s.is_empty() => return Some(0),
        _ => (false, s),
    };
    if digits.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ArgvBuf;

    fn scan_of(line: &str) -> Result<(u64, usize, Option<Vec<u8>>), Error> {
        let a = ArgvBuf::from_line(line);
        let s = parse_scan(&a.argv())?;
        Ok((s.cursor, s.count, s.pattern.map(<[u8]>::to_vec)))
    }

    #[test]
    fn scan_arguments_parse_like_redis() {
        assert_eq!(scan_of("SSCAN k 0"), Ok((0, 10, None)));
        assert_eq!(
            scan_of("SSCAN k 7 COUNT 3 match a* count 5"),
            Ok((7, 5, Some(b"a*".to_vec())))
        );
        assert_eq!(scan_of("SSCAN k x"), Err(Error::msg("ERR invalid cursor")));
        assert_eq!(scan_of("SSCAN k 0 COUNT 0"), Err(Error::Syntax));
        assert_eq!(scan_of("SSCAN k 0 COUNT x"), Err(Error::NotInteger));
        assert_eq!(scan_of("SSCAN k 0 MATCH"), Err(Error::Syntax));
        assert_eq!(scan_of("SSCAN k 0 TYPE set"), Err(Error::Syntax));
        let a = ArgvBuf::from_line("SCAN 3 type string MATCH k*");
        let s = parse_scan_at(&a.argv(), 1, true).expect("SCAN takes TYPE");
        assert_eq!(
            (s.cursor, s.type_name, s.pattern),
            (3, Some(&b"string"[..]), Some(&b"k*"[..]))
        );
        let a = ArgvBuf::from_line("SCAN -1 TYPE");
        assert_eq!(
            parse_scan_at(&a.argv(), 1, true).map(|s| s.cursor),
            Err(Error::Syntax)
        );
    }

    #[test]
    fn sampling_is_distinct_and_bounded() {
        let mut rng = Rng::new(9);
        let mut picked = shuffle_prefix((0..50u32).collect(), 20, &mut rng);
        picked.sort();
        picked.dedup();
        assert_eq!(picked.len(), 20);
        assert_eq!(shuffle_prefix((0..50u32).collect(), 80, &mut rng).len(), 50);
        assert_eq!(parse_rand_count(b"-5", false), Ok(-5));
        assert!(parse_rand_count(b"-9223372036854775808", false).is_err());
        assert_eq!(parse_rand_count(b"x", true), Err(Error::NotInteger));
        assert_eq!(
            parse_rand_count(b"4611686018427387904", true),
            Err(Error::msg("ERR value is out of range"))
        );
        assert_eq!(
            parse_rand_count(b"-4611686018427387903", true),
            Ok(-4611686018427387903)
        );
        assert_eq!(
            parse_rand_count(b"4611686018427387904", false),
            Ok(4611686018427387904)
        );
    }

    #[test]
    fn cursor_parses_like_strtoul() {
        assert_eq!(parse_cursor(b"0"), Some(0));
        assert_eq!(parse_cursor(b""), Some(0));
        assert_eq!(parse_cursor(b"007"), Some(7));
        assert_eq!(parse_cursor(b"+1"), Some(1));
        assert_eq!(parse_cursor(b"-1"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"-18446744073709551615"), Some(1));
        for bad in [
            &b"18446744073709551616"[..],
            b"-18446744073709551616",
            b" 1",
            b"1 ",
            b"\t1",
            b"0x10",
            b"1e3",
            b"-",
            b"+",
            b"abc",
        ] {
            assert_eq!(parse_cursor(bad), None, "{bad:?}");
        }
    }
}
