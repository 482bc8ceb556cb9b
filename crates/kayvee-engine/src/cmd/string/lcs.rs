//! LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN]: the longest common subsequence of
//! two strings (a missing key is an empty string), its length, or the matching ranges.
//!
//! The classic dynamic-programming table, then a walk back from its end that collects the
//! common bytes and, with IDX, the ranges of contiguous matches, last first, in the order and
//! shape Redis 7.0 replies (checked against redis-server 7.0.15). The table takes
//! `(len1 + 1) * (len2 + 1)` 32-bit cells: above `proto-max-bulk-len` bytes the command is
//! refused, as later Redis versions do (7.0 would try to allocate it).

use super::as_str;
use crate::argv::Argv;
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::Cx;
use alloc::vec;
use alloc::vec::Vec;

/// The options after the two keys.
#[derive(Default)]
struct Opts {
    len: bool,
    idx: bool,
    min_match: usize,
    with_match_len: bool,
}

fn parse_opts(args: &Argv<'_>) -> Result<Opts, Error> {
    let mut o = Opts::default();
    let mut i = 3;
    while i < args.len() {
        let a = args.get(i);
        if a.eq_ignore_ascii_case(b"len") {
            o.len = true;
        } else if a.eq_ignore_ascii_case(b"idx") {
            o.idx = true;
        } else if a.eq_ignore_ascii_case(b"withmatchlen") {
            o.with_match_len = true;
        } else if a.eq_ignore_ascii_case(b"minmatchlen") && i + 1 < args.len() {
            let v = parse_i64(args.get(i + 1)).ok_or(Error::NotInteger)?;
            o.min_match = usize::try_from(v).unwrap_or(0);
            i += 1;
        } else {
            return Err(Error::Syntax);
        }
        i += 1;
    }
    if o.len && o.idx {
        return Err(Error::msg(
            "ERR If you want both the length and indexes, please just use IDX.",
        ));
    }
    Ok(o)
}

/// The string at `key` (empty when missing), or Redis's error for another type.
fn string_at(cx: &mut Cx<'_>, key: &[u8]) -> Result<Vec<u8>, Error> {
    let now = cx.now_ms();
    match cx.db().lookup_read(key, now) {
        None => Ok(Vec::new()),
        Some(e) => as_str(e)
            .map(<[u8]>::to_vec)
            .map_err(|_| Error::msg("ERR The specified keys must contain string values")),
    }
}

/// One contiguous match: the ranges in both strings (inclusive) and its length.
struct Match {
    a: (usize, usize),
    b: (usize, usize),
    len: usize,
}

/// The LCS of `a` and `b`, and the contiguous matches of at least `min_match` bytes (all
/// when 0), last first.
fn lcs(a: &[u8], b: &[u8], min_match: usize) -> (Vec<u8>, Vec<Match>) {
    let (alen, blen) = (a.len(), b.len());
    let w = blen + 1;
    let mut t = vec![0u32; (alen + 1) * w];
    for i in 1..=alen {
        for j in 1..=blen {
            t[i * w + j] = if a[i - 1] == b[j - 1] {
                t[(i - 1) * w + j - 1] + 1
            } else {
                t[(i - 1) * w + j].max(t[i * w + j - 1])
            };
        }
    }
    let mut idx = t[alen * w + blen] as usize;
    let mut common = vec![0u8; idx];
    let mut matches = Vec::new();
    let (mut i, mut j) = (alen, blen);
    // The range being grown backwards: None between ranges.
    let mut range: Option<(usize, usize, usize, usize)> = None;
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            common[idx - 1] = a[i - 1];
            range = match range {
                None => Some((i - 1, i - 1, j - 1, j - 1)),
                Some((a0, a1, b0, b1)) if a0 == i && b0 == j => Some((a0 - 1, a1, b0 - 1, b1)),
                Some(r) => {
                    emit = true;
                    Some(r)
                }
            };
            if range.is_some_and(|(a0, _, b0, _)| a0 == 0 || b0 == 0) {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            j -= 1;
        } else {
            if t[(i - 1) * w + j] > t[i * w + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            emit = range.is_some();
        }
        if emit {
            if let Some((a0, a1, b0, b1)) = range.take() {
                let len = a1 - a0 + 1;
                if min_match == 0 || len >= min_match {
                    matches.push(Match {
                        a: (a0, a1),
                        b: (b0, b1),
                        len,
                    });
                }
            }
        }
    }
    (common, matches)
}

pub(super) fn lcs_command(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let a = string_at(cx, args.get(1))?;
    let b = string_at(cx, args.get(2))?;
    let o = parse_opts(args)?;
    let cells = (a.len() as u64 + 1).saturating_mul(b.len() as u64 + 1);
    if cells.saturating_mul(4) > cx.core.config.proto_max_bulk_len {
        return Err(Error::msg(
            "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        ));
    }
    let (common, matches) = lcs(&a, &b, o.min_match);
    if o.idx {
        // Redis writes the matches' length after them: all of the reply counts against the
        // client's output limit.
        cx.outcome = crate::Outcome::DeferredReply;
        out.map(2);
        out.bulk(b"matches");
        out.array(matches.len());
        for m in &matches {
            out.array(2 + usize::from(o.with_match_len));
            for (s, e) in [m.a, m.b] {
                out.array(2);
                out.int(s as i64);
                out.int(e as i64);
            }
            if o.with_match_len {
                out.int(m.len as i64);
            }
        }
        out.bulk(b"len");
        out.int(common.len() as i64);
    } else if o.len {
        out.int(common.len() as i64);
    } else {
        out.bulk(&common);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_like_redis() {
        let (common, m) = lcs(b"ohmytext", b"mynewtext", 0);
        assert_eq!(common, b"mytext");
        let got: Vec<_> = m.iter().map(|m| (m.a, m.b, m.len)).collect();
        assert_eq!(got, [((4, 7), (5, 8), 4), ((2, 3), (0, 1), 2)]);
        assert_eq!(lcs(b"", b"abc", 0).0, b"");
        assert_eq!(lcs(b"abcabc", b"abc", 0).1.len(), 1);
    }
}
