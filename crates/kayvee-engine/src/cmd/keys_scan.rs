//! Keyspace iteration: KEYS, SCAN and RANDOMKEY (Redis "generic" group).
//!
//! SCAN's cursor is the keyspace map's hash cursor ([`kayvee_pds::PMap::scan`]) printed as a
//! decimal u64, so its values differ from Redis's but keep Redis's guarantee: a key present
//! for the whole iteration is returned at least once. Expired keys are never returned; those
//! met by SCAN and RANDOMKEY are deleted, as Redis does (KEYS only skips them).

use crate::argv::Argv;
use crate::command::{acl, flags, CommandSpec};
use crate::error::CmdResult;
use crate::reply::ReplySink;
use crate::util::glob_match;
use crate::{Core, Cx};

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "keys",
        arity: 2,
        flags: flags::READONLY,
        acl: acl::KEYSPACE | acl::READ | acl::SLOW | acl::DANGEROUS,
        summary: "Find all keys matching the given pattern",
        complexity: "O(N) with N being the number of keys in the database, under the assumption that the key names in the database and the given pattern have limited length.",
        tips: &["request_policy:all_shards", "nondeterministic_output_order"],
        handler: keys,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "scan",
        arity: -2,
        flags: flags::READONLY,
        acl: acl::KEYSPACE | acl::READ | acl::SLOW,
        summary: "Incrementally iterate the keys space",
        since: "2.8.0",
        complexity: "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.",
        tips: &["nondeterministic_output", "request_policy:special"],
        handler: scan,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "randomkey",
        arity: 1,
        flags: flags::READONLY,
        acl: acl::KEYSPACE | acl::READ | acl::SLOW,
        summary: "Return a random key from the keyspace",
        tips: &["request_policy:all_shards", "nondeterministic_output"],
        handler: randomkey,
        ..CommandSpec::DEFAULT
    },
];

/// KEYS pattern: every live key matching the glob pattern, in hash order.
fn keys(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let pattern = args.get(1);
    let all = pattern == b"*";
    let now = cx.now_ms();
    let found = cx
        .db()
        .keys_matching(now, |k| all || glob_match(pattern, k, false));
    out.array(found.len());
    for k in &found {
        out.bulk(k);
    }
    Ok(())
}

/// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]: the next cursor and a batch of keys.
fn scan(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let opts = super::coll::parse_scan_at(args, 1, true)?;
    let now = cx.now_ms();
    let db = cx.db();
    let (next, mut found) = db.scan(opts.cursor, opts.count, now, |k| opts.matches(k));
    if let Some(t) = opts.type_name {
        found.retain(|k| {
            db.keys
                .get(&k[..])
                .is_some_and(|e| e.value.type_name().as_bytes().eq_ignore_ascii_case(t))
        });
    }
    super::coll::write_scan_head(out, next, found.len());
    for k in &found {
        out.bulk(k);
    }
    Ok(())
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

/// RANDOMKEY: a random live key, or a null reply when the database holds none.
fn randomkey(cx: &mut Cx<'_>, _args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let now = cx.now_ms();
    let Core { dbs, rng, .. } = &mut *cx.core;
    match dbs[cx.db_index].random_key(now, &mut || rng.next_u64()) {
        Some(k) => out.bulk(&k),
        None => out.null(),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
