//! Sorted-set commands (Redis "sorted-set" group): the command table, the shared helpers
//! (typed lookups, the listpack/skiplist encoding rule, scored replies) and the point commands
//! ZADD, ZINCRBY, ZREM, ZSCORE, ZMSCORE, ZCARD, ZRANK, ZREVRANK. Ranges live in `zset_range`,
//! set algebra in `zset_setops`, pops/random/scan in `zset_pop`, number parsing in `zset_num`.
//!
//! Semantics, replies and error texts follow Redis 7.0.15 (checked against the real server;
//! `tests/transcripts/zset*.txt` were recorded from it).

use super::zset_num::parse_score;
use super::{zset_pop, zset_range, zset_setops};
use crate::argv::Argv;
use crate::command::{acl, flags, CommandSpec, Handler};
use crate::config::Config;
use crate::error::{CmdResult, Error};
use crate::keyspec::{kf, KeySpec};
use crate::notify::{class as nc, emit, emptied_if_gone};
use crate::reply::{Protocol, ReplySink};
use crate::value::{Entry, Meta, Value, ZSet};
use crate::Cx;
use alloc::vec::Vec;
use kayvee_pds::SmallBytes;

/// A sorted-set command spec with one key at argument 1 (a table row: every field is
/// a column, hence the argument count).
#[allow(clippy::too_many_arguments)]
const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    acl: u32,
    summary: &'static str,
    since: &'static str,
    complexity: &'static str,
    handler: Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl,
        summary,
        since,
        group: "sorted-set",
        complexity,
        handler,
        ..CommandSpec::DEFAULT
    }
}

/// A command whose keys follow a `numkeys` argument (no fixed key positions).
const fn numkeys_spec(base: CommandSpec) -> CommandSpec {
    CommandSpec {
        first_key: 0,
        last_key: 0,
        key_step: 0,
        ..base
    }
}

const W_OOM_FAST: u32 = flags::WRITE | flags::DENYOOM | flags::FAST;
const W_FAST: u32 = flags::WRITE | flags::FAST;
const RO_FAST: u32 = flags::READONLY | flags::FAST;
const RO: u32 = flags::READONLY;
const W: u32 = flags::WRITE;
const W_OOM: u32 = flags::WRITE | flags::DENYOOM;
const RO_MOVE: u32 = flags::READONLY | flags::MOVABLEKEYS;
const W_OOM_MOVE: u32 = flags::WRITE | flags::DENYOOM | flags::MOVABLEKEYS;
const A_W_FAST: u32 = acl::WRITE | acl::SORTEDSET | acl::FAST;
const A_R_FAST: u32 = acl::READ | acl::SORTEDSET | acl::FAST;
const A_R_SLOW: u32 = acl::READ | acl::SORTEDSET | acl::SLOW;
const A_W_SLOW: u32 = acl::WRITE | acl::SORTEDSET | acl::SLOW;

const C_LOGN: &str = "O(log(N))";
const C_RANGE: &str = "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements returned.";
const C_RANGE_LIMIT: &str = "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).";
const C_REM_RANGE: &str = "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.";
const C_POP: &str = "O(log(N)*M) with N being the number of elements in the sorted set, and M being the number of elements popped.";
const C_UNION: &str = "O(N)+O(M*log(M)) with N being the sum of the sizes of the input sorted sets, and M being the number of elements in the resulting sorted set.";
const C_UNIONSTORE: &str = "O(N)+O(M log(M)) with N being the sum of the sizes of the input sorted sets, and M being the number of elements in the resulting sorted set.";
const C_INTER: &str = "O(N*K)+O(M*log(M)) worst case with N being the smallest input sorted set, K being the number of input sorted sets and M being the number of elements in the resulting sorted set.";
const C_DIFF: &str = "O(L + (N-K)log(N)) worst case where L is the total number of elements in all the sets, N is the size of the first set, and K is the size of the result set.";

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        key_flags: &["RW", "update"],
        ..spec("zadd", -4, W_OOM_FAST, A_W_FAST, "Add one or more members to a sorted set, or update its score if it already exists", "1.2.0", "O(log(N)) for each item added, where N is the number of elements in the sorted set.", zadd)
    },
    CommandSpec {
        key_flags: &["RW", "access", "update"],
        ..spec("zincrby", 4, W_OOM_FAST, A_W_FAST, "Increment the score of a member in a sorted set", "1.2.0", "O(log(N)) where N is the number of elements in the sorted set.", zincrby)
    },
    CommandSpec {
        key_flags: &["RW", "delete"],
        ..spec("zrem", -3, W_FAST, A_W_FAST, "Remove one or more members from a sorted set", "1.2.0", "O(M*log(N)) with N being the number of elements in the sorted set and M the number of elements to be removed.", zrem)
    },
    spec("zscore", 3, RO_FAST, A_R_FAST, "Get the score associated with the given member in a sorted set", "1.2.0", "O(1)", zscore),
    spec("zmscore", -3, RO_FAST, A_R_FAST, "Get the score associated with the given members in a sorted set", "6.2.0", "O(N) where N is the number of members being requested.", zmscore),
    CommandSpec {
        key_flags: &["RO"],
        ..spec("zcard", 2, RO_FAST, A_R_FAST, "Get the number of members in a sorted set", "1.2.0", "O(1)", zcard)
    },
    spec("zcount", 4, RO_FAST, A_R_FAST, "Count the members in a sorted set with scores within the given values", "2.0.0", "O(log(N)) with N being the number of elements in the sorted set.", zset_range::zcount),
    spec("zlexcount", 4, RO_FAST, A_R_FAST, "Count the number of members in a sorted set between a given lexicographical range", "2.8.9", "O(log(N)) with N being the number of elements in the sorted set.", zset_range::zlexcount),
    spec("zrange", -4, RO, A_R_SLOW, "Return a range of members in a sorted set", "1.2.0", C_RANGE, zset_range::zrange),
    CommandSpec {
        last_key: 2,
        key_flags: &["OW", "update"],
        key_specs: &[KeySpec::range(kf::OW_UPDATE, 1, 0, 1), KeySpec::range(kf::RO_ACCESS, 2, 0, 1)],
        ..spec("zrangestore", -5, W_OOM, A_W_SLOW, "Store a range of members from sorted set into another key", "6.2.0", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements stored into the destination key.", zset_range::zrangestore)
    },
    spec("zrevrange", -4, RO, A_R_SLOW, "Return a range of members in a sorted set, by index, with scores ordered from high to low", "1.2.0", C_RANGE, zset_range::zrevrange),
    spec("zrangebyscore", -4, RO, A_R_SLOW, "Return a range of members in a sorted set, by score", "1.0.5", C_RANGE_LIMIT, zset_range::zrangebyscore),
    spec("zrevrangebyscore", -4, RO, A_R_SLOW, "Return a range of members in a sorted set, by score, with scores ordered from high to low", "2.2.0", C_RANGE_LIMIT, zset_range::zrevrangebyscore),
    spec("zrangebylex", -4, RO, A_R_SLOW, "Return a range of members in a sorted set, by lexicographical range", "2.8.9", C_RANGE_LIMIT, zset_range::zrangebylex),
    spec("zrevrangebylex", -4, RO, A_R_SLOW, "Return a range of members in a sorted set, by lexicographical range, ordered from higher to lower strings.", "2.8.9", C_RANGE_LIMIT, zset_range::zrevrangebylex),
    spec("zrank", 3, RO_FAST, A_R_FAST, "Determine the index of a member in a sorted set", "2.0.0", C_LOGN, zrank),
    spec("zrevrank", 3, RO_FAST, A_R_FAST, "Determine the index of a member in a sorted set, with scores ordered from high to low", "2.0.0", C_LOGN, zrevrank),
    CommandSpec {
        key_flags: &["RW", "access", "delete"],
        ..spec("zpopmin", -2, W_FAST, A_W_FAST, "Remove and return members with the lowest scores in a sorted set", "5.0.0", C_POP, zset_pop::zpopmin)
    },
    CommandSpec {
        key_flags: &["RW", "access", "delete"],
        ..spec("zpopmax", -2, W_FAST, A_W_FAST, "Remove and return members with the highest scores in a sorted set", "5.0.0", C_POP, zset_pop::zpopmax)
    },
    numkeys_spec(CommandSpec {
        key_flags: &["RW", "access", "delete"],
        key_specs: &[KeySpec::keynum(kf::RW_ACCESS_DELETE, 1)],
        ..spec("zmpop", -4, flags::WRITE | flags::MOVABLEKEYS, A_W_SLOW, "Remove and return members with scores in a sorted set", "7.0.0", "O(K) + O(M*log(N)) where K is the number of provided keys, N being the number of elements in the sorted set, and M being the number of elements popped.", zset_pop::zmpop)
    }),
    CommandSpec {
        key_flags: &["RW", "delete"],
        ..spec("zremrangebyrank", 4, W, A_W_SLOW, "Remove all members in a sorted set within the given indexes", "2.0.0", C_REM_RANGE, zset_range::zremrangebyrank)
    },
    CommandSpec {
        key_flags: &["RW", "delete"],
        ..spec("zremrangebyscore", 4, W, A_W_SLOW, "Remove all members in a sorted set within the given scores", "1.2.0", C_REM_RANGE, zset_range::zremrangebyscore)
    },
    CommandSpec {
        key_flags: &["RW", "delete"],
        ..spec("zremrangebylex", 4, W, A_W_SLOW, "Remove all members in a sorted set between the given lexicographical range", "2.8.9", C_REM_RANGE, zset_range::zremrangebylex)
    },
    numkeys_spec(CommandSpec {
        key_specs: &[KeySpec::keynum(kf::RO_ACCESS, 1)],
        ..spec("zunion", -3, RO_MOVE, A_R_SLOW, "Add multiple sorted sets", "6.2.0", C_UNION, zset_setops::zunion)
    }),
    numkeys_spec(CommandSpec {
        key_specs: &[KeySpec::keynum(kf::RO_ACCESS, 1)],
        ..spec("zinter", -3, RO_MOVE, A_R_SLOW, "Intersect multiple sorted sets", "6.2.0", C_INTER, zset_setops::zinter)
    }),
    numkeys_spec(CommandSpec {
        key_specs: &[KeySpec::keynum(kf::RO_ACCESS, 1)],
        ..spec("zdiff", -3, RO_MOVE, A_R_SLOW, "Subtract multiple sorted sets", "6.2.0", C_DIFF, zset_setops::zdiff)
    }),
    CommandSpec {
        key_flags: &["OW", "update"],
        key_specs: &[KeySpec::range(kf::OW_UPDATE, 1, 0, 1), KeySpec::keynum(kf::RO_ACCESS, 2)],
        ..spec("zunionstore", -4, W_OOM_MOVE, A_W_SLOW, "Add multiple sorted sets and store the resulting sorted set in a new key", "2.0.0", C_UNIONSTORE, zset_setops::zunionstore)
    },
    CommandSpec {
        key_flags: &["OW", "update"],
        key_specs: &[KeySpec::range(kf::OW_UPDATE, 1, 0, 1), KeySpec::keynum(kf::RO_ACCESS, 2)],
        ..spec("zinterstore", -4, W_OOM_MOVE, A_W_SLOW, "Intersect multiple sorted sets and store the resulting sorted set in a new key", "2.0.0", C_INTER, zset_setops::zinterstore)
    },
    CommandSpec {
        key_flags: &["OW", "update"],
        key_specs: &[KeySpec::range(kf::OW_UPDATE, 1, 0, 1), KeySpec::keynum(kf::RO_ACCESS, 2)],
        ..spec("zdiffstore", -4, W_OOM_MOVE, A_W_SLOW, "Subtract multiple sorted sets and store the resulting sorted set in a new key", "6.2.0", C_DIFF, zset_setops::zdiffstore)
    },
    numkeys_spec(CommandSpec {
        key_specs: &[KeySpec::keynum(kf::RO_ACCESS, 1)],
        ..spec("zintercard", -3, RO_MOVE, A_R_SLOW, "Intersect multiple sorted sets and return the cardinality of the result", "7.0.0", "O(N*K) worst case with N being the smallest input sorted set, K being the number of input sorted sets.", zset_setops::zintercard)
    }),
    CommandSpec {
        tips: &["nondeterministic_output"],
        ..spec("zrandmember", -2, RO, A_R_SLOW, "Get one or multiple random elements from a sorted set", "6.2.0", "O(N) where N is the number of elements returned", zset_pop::zrandmember)
    },
    CommandSpec {
        tips: &["nondeterministic_output"],
        ..spec("zscan", -3, RO, A_R_SLOW, "Incrementally iterate sorted sets elements and associated scores", "2.8.0", "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection..", zset_pop::zscan)
    },
];

/// The sorted set held by an entry, or WRONGTYPE.
pub(crate) fn as_zset(entry: &Entry) -> Result<&ZSet, Error> {
    match &entry.value {
        Value::ZSet(z) => Ok(z),
        _ => Err(Error::WrongType),
    }
}

/// A read lookup of a sorted set (a hit or miss is counted): an O(1) snapshot of it, `None`
/// when the key is missing, WRONGTYPE for another type.
pub(crate) fn read_zset(cx: &mut Cx<'_>, key: &[u8]) -> Result<Option<(ZSet, bool)>, Error> {
    let now = cx.now_ms();
    match cx.db().lookup_read(key, now) {
        None => Ok(None),
        Some(e) => Ok(Some((as_zset(e)?.clone(), e.meta.has(Meta::BIG)))),
    }
}

/// Whether Redis keeps a sorted set of `len` members, the longest `member_len_max` bytes, as
/// a listpack (else it converts to a skiplist, for good).
pub(crate) fn fits_listpack(config: &Config, len: usize, member_len_max: usize) -> bool {
    len as u64 <= config.zset_max_listpack_entries
        && member_len_max as u64 <= config.zset_max_listpack_value
}

/// Marks an entry `skiplist` after adding a member, when Redis would have converted it, and
/// moves it to the tree form then (`seed` hashes its member map).
pub(crate) fn note_growth(config: &Config, entry: &mut Entry, member_len: usize, seed: u64) {
    let len = match &entry.value {
        Value::ZSet(z) => z.len(),
        _ => return,
    };
    if !entry.meta.has(Meta::BIG) && !fits_listpack(config, len, member_len) {
        entry.meta.set_flag(Meta::BIG, true);
        entry.value.normalize(true, seed);
    }
}

/// Stores a computed sorted set under `key` (replacing any value and TTL), or deletes the key
/// when the set is empty. Like Redis's stored results, its encoding follows its content.
pub(crate) fn store_zset(cx: &mut Cx<'_>, key: &[u8], zs: ZSet) -> usize {
    let now = cx.now_ms();
    let len = zs.len();
    if len == 0 {
        if cx.db().delete(key) {
            cx.propagate_verbatim();
            crate::notify::emptied(cx, key);
        }
        return 0;
    }
    let longest = zs.iter().map(|e| e.1.len()).max().unwrap_or(0);
    let big = !fits_listpack(&cx.core.config, len, longest);
    let mut zs = zs;
    if !big {
        let signed: Vec<SmallBytes> = zs
            .iter()
            .filter(|e| e.0 == 0.0 && e.0.is_sign_negative())
            .map(|e| SmallBytes::from_slice(e.1))
            .collect();
        signed.iter().for_each(|m| {
            zs.insert(m, 0.0);
        });
    }
    let mut entry = Entry::new(Value::ZSet(zs), now);
    entry.meta.set_flag(Meta::BIG, big);
    entry.value.normalize(big, cx.core.seed);
    cx.db().store_result(key, entry, now);
    signal_zset_ready(cx, key);
    len
}

/// Tells clients blocked on `key` (BZPOPMIN, BZMPOP...) that it may hold members now: cheap
/// when nobody waits, and a waiter re-checks the key when served.
fn signal_zset_ready(cx: &mut Cx<'_>, key: &[u8]) {
    let db = cx.db_index;
    crate::blocking::signal_key_ready(cx, db, key);
}

/// Deletes the key when its sorted set became empty (Redis never keeps empty collections).
pub(crate) fn drop_if_empty(cx: &mut Cx<'_>, key: &[u8]) {
    let now = cx.now_ms();
    let empty = matches!(
        cx.db().peek(key, now).map(|e| &e.value),
        Some(Value::ZSet(z)) if z.is_empty()
    );
    if empty {
        cx.db().remove(key, now);
    }
}

/// Writes members (with scores when asked) as Redis's range replies do: a flat array in
/// RESP2, an array of `[member, score]` pairs in RESP3 when scores are included.
pub(crate) fn reply_scored(out: &mut dyn ReplySink, items: &[(SmallBytes, f64)], scores: bool) {
    if !scores {
        out.array(items.len());
        items.iter().for_each(|(m, _)| out.bulk(m));
    } else if out.protocol() == Protocol::Resp3 {
        out.array(items.len());
        for (m, s) in items {
            out.array(2);
            out.bulk(m);
            out.double(*s);
        }
    } else {
        out.array(items.len() * 2);
        for (m, s) in items {
            out.bulk(m);
            out.double(*s);
        }
    }
}

/// ZADD's flags.
#[derive(Default)]
struct ZaddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

/// Parses ZADD's leading flags; returns them and the index of the first score.
fn parse_zadd_flags(args: &Argv<'_>) -> (ZaddFlags, usize) {
    let mut f = ZaddFlags::default();
    let mut i = 2;
    while i < args.len() {
        let a = args.get(i);
        let flag = match a.to_ascii_uppercase().as_slice() {
            b"NX" => &mut f.nx,
            b"XX" => &mut f.xx,
            b"GT" => &mut f.gt,
            b"LT" => &mut f.lt,
            b"CH" => &mut f.ch,
            b"INCR" => &mut f.incr,
            _ => break,
        };
        *flag = true;
        i += 1;
    }
    (f, i)
}

/// ZADD's (score, member) pairs.
type Pairs<'a> = Vec<(f64, &'a [u8])>;

/// Validates ZADD's arguments in Redis's order; returns the (score, member) pairs.
fn parse_zadd<'a>(args: &Argv<'a>) -> Result<(ZaddFlags, Pairs<'a>), Error> {
    let (f, first) = parse_zadd_flags(args);
    let rest = args.len() - first;
    if !rest.is_multiple_of(2) || rest == 0 {
        return Err(Error::Syntax);
    }
    if f.nx && f.xx {
        return Err(Error::msg(
            "ERR XX and NX options at the same time are not compatible",
        ));
    }
    if (f.nx && (f.gt || f.lt)) || (f.gt && f.lt) {
        return Err(Error::msg(
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if f.incr && rest > 2 {
        return Err(Error::msg(
            "ERR INCR option supports a single increment-element pair",
        ));
    }
    let mut pairs = Vec::with_capacity(rest / 2);
    for i in (first..args.len()).step_by(2) {
        let score = parse_score(args.get(i)).ok_or(Error::NotFloat)?;
        pairs.push((score, args.get(i + 1)));
    }
    Ok((f, pairs))
}

/// What one ZADD element did.
enum Added {
    New,
    Updated,
    Same,
    Skipped,
}

/// Applies one (score, member) to `zs` under ZADD's flags (`big`: the set is or becomes a
/// skiplist); returns what happened and the score computed (the reply's, which may differ
/// from the stored one in the sign of a zero). `Err` = the increment made NaN.
fn zadd_one(
    zs: &mut ZSet,
    f: &ZaddFlags,
    score: f64,
    member: &[u8],
    big: bool,
) -> Result<(Added, f64), ()> {
    match zs.score(member) {
        Some(old) => {
            if f.nx {
                return Ok((Added::Skipped, old));
            }
            let new = if f.incr { old + score } else { score };
            if new.is_nan() {
                return Err(());
            }
            if (f.lt && new >= old) || (f.gt && new <= old) {
                return Ok((Added::Skipped, old));
            }
            if new == old {
                return Ok((Added::Same, new));
            }
            zs.insert(member, stored_score(new, big));
            Ok((Added::Updated, new))
        }
        None if f.xx => Ok((Added::Skipped, 0.0)),
        None => {
            zs.insert(member, stored_score(score, big));
            Ok((Added::New, score))
        }
    }
}

/// The listpack encoding keeps no sign on a zero score (`-0` reads back as `0`); the
/// skiplist keeps the double as is.
fn stored_score(score: f64, big: bool) -> f64 {
    if score == 0.0 && !big {
        0.0
    } else {
        score
    }
}

/// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...].
fn zadd(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (f, pairs) = parse_zadd(args)?;
    let key = args.get(1);
    let now = cx.now_ms();
    let seed = cx.core.seed;
    let (db, config) = (&mut cx.core.dbs[cx.db_index], &cx.core.config);
    let exists = match db.lookup_write(key, now) {
        Some(e) => {
            as_zset(e)?;
            true
        }
        None => false,
    };
    if !exists {
        if f.xx {
            reply_zadd_nothing(&f, out);
            return Ok(());
        }
        let entry = Entry::new(Value::ZSet(ZSet::new_flat()), now);
        db.insert_entry(key, entry, None);
    }
    let entry = db.lookup_write(key, now).expect("just checked");
    let (mut added, mut changed, mut last) = (0, 0, None);
    for (score, member) in pairs {
        let Value::ZSet(zs) = &mut entry.value else {
            unreachable!("type checked");
        };
        let big = entry.meta.has(Meta::BIG) || !fits_listpack(config, zs.len() + 1, member.len());
        let before = zs.len();
        match zadd_one(zs, &f, score, member, big) {
            Err(()) => {
                drop_if_empty(cx, key);
                return Err(Error::msg("ERR resulting score is not a number (NaN)"));
            }
            Ok((what, s)) => {
                if zs.len() > before {
                    note_growth(config, entry, member.len(), seed);
                }
                match what {
                    Added::New => added += 1,
                    Added::Updated => changed += 1,
                    _ => {}
                }
                last = (!matches!(what, Added::Skipped)).then_some(s);
            }
        }
    }
    if f.incr {
        match last {
            Some(s) => out.double(s),
            None => out.null(),
        }
    } else {
        out.int(if f.ch { added + changed } else { added });
    }
    drop_if_empty(cx, key);
    if added + changed > 0 {
        cx.propagate_verbatim();
        emit(cx, nc::ZSET, if f.incr { "zincr" } else { "zadd" }, key);
    }
    signal_zset_ready(cx, key);
    Ok(())
}

/// ZADD's reply when nothing was done (XX on a missing key).
fn reply_zadd_nothing(f: &ZaddFlags, out: &mut dyn ReplySink) {
    if f.incr {
        out.null();
    } else {
        out.int(0);
    }
}

/// ZINCRBY key increment member: ZADD INCR without flags.
fn zincrby(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let incr = parse_score(args.get(2)).ok_or(Error::NotFloat)?;
    let (key, member) = (args.get(1), args.get(3));
    let now = cx.now_ms();
    let seed = cx.core.seed;
    let (db, config) = (&mut cx.core.dbs[cx.db_index], &cx.core.config);
    match db.lookup_write(key, now) {
        Some(e) => {
            as_zset(e)?;
        }
        None => {
            let entry = Entry::new(Value::ZSet(ZSet::new_flat()), now);
            db.insert_entry(key, entry, None);
        }
    }
    let entry = db.lookup_write(key, now).expect("just checked");
    let Value::ZSet(zs) = &mut entry.value else {
        unreachable!("type checked");
    };
    let old = zs.score(member);
    let new = old.map_or(incr, |old| old + incr);
    if new.is_nan() {
        drop_if_empty(cx, key);
        return Err(Error::msg("ERR resulting score is not a number (NaN)"));
    }
    let big = entry.meta.has(Meta::BIG) || !fits_listpack(config, zs.len() + 1, member.len());
    if zs.insert(member, stored_score(new, big)).is_none() {
        note_growth(config, entry, member.len(), seed);
    }
    out.double(new);
    // An increment that leaves the score as it was changes nothing: no event, nothing
    // propagated, as in Redis.
    if old != Some(new) {
        cx.propagate_verbatim();
        emit(cx, nc::ZSET, "zincr", key);
    }
    signal_zset_ready(cx, key);
    Ok(())
}

/// ZREM key member [member ...]: how many were removed; the key goes when emptied.
fn zrem(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let key = args.get(1);
    let now = cx.now_ms();
    let Some(entry) = cx.db().lookup_write(key, now) else {
        out.int(0);
        return Ok(());
    };
    let Value::ZSet(zs) = &mut entry.value else {
        return Err(Error::WrongType);
    };
    let removed = args
        .iter()
        .skip(2)
        .filter(|m| zs.remove(m).is_some())
        .count();
    drop_if_empty(cx, key);
    if removed > 0 {
        cx.propagate_verbatim();
        emit(cx, nc::ZSET, "zrem", key);
        emptied_if_gone(cx, key);
    }
    out.int(removed as i64);
    Ok(())
}

/// ZSCORE key member.
fn zscore(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    match read_zset(cx, args.get(1))?.and_then(|(z, _)| z.score(args.get(2))) {
        Some(s) => out.double(s),
        None => out.null(),
    }
    Ok(())
}

/// ZMSCORE key member [member ...]: a score or nil per member.
fn zmscore(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let zs = read_zset(cx, args.get(1))?;
    out.array(args.len() - 2);
    for m in args.iter().skip(2) {
        match zs.as_ref().and_then(|(z, _)| z.score(m)) {
            Some(s) => out.double(s),
            None => out.null(),
        }
    }
    Ok(())
}

/// ZCARD key.
fn zcard(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let n = read_zset(cx, args.get(1))?.map_or(0, |(z, _)| z.len());
    out.int(n as i64);
    Ok(())
}

/// ZRANK key member / ZREVRANK: the 0-based rank, or nil.
fn rank(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink, rev: bool) -> CmdResult {
    let member = args.get(2);
    let found = read_zset(cx, args.get(1))?.and_then(|(z, _)| {
        let r = z.rank(member)?;
        Some(if rev { z.len() - 1 - r } else { r })
    });
    match found {
        Some(r) => out.int(r as i64),
        None => out.null(),
    }
    Ok(())
}

fn zrank(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    rank(cx, args, out, false)
}

fn zrevrank(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    rank(cx, args, out, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listpack_limits_follow_config() {
        let c = Config::default();
        assert!(fits_listpack(&c, 128, 64));
        assert!(!fits_listpack(&c, 129, 1));
        assert!(!fits_listpack(&c, 1, 65));
    }

    #[test]
    fn zadd_one_honours_gt_lt_nx_xx() {
        let mut z = ZSet::new(1);
        let plain = ZaddFlags::default();
        assert!(matches!(
            zadd_one(&mut z, &plain, 5.0, b"a", false),
            Ok((Added::New, _))
        ));
        let gt = ZaddFlags {
            gt: true,
            ..Default::default()
        };
        assert!(matches!(
            zadd_one(&mut z, &gt, 4.0, b"a", false),
            Ok((Added::Skipped, _))
        ));
        assert!(matches!(
            zadd_one(&mut z, &gt, 6.0, b"a", false),
            Ok((Added::Updated, _))
        ));
        let xx = ZaddFlags {
            xx: true,
            ..Default::default()
        };
        assert!(matches!(
            zadd_one(&mut z, &xx, 1.0, b"b", false),
            Ok((Added::Skipped, _))
        ));
        let incr = ZaddFlags {
            incr: true,
            ..Default::default()
        };
        z.insert(b"i", f64::INFINITY);
        assert!(zadd_one(&mut z, &incr, f64::NEG_INFINITY, b"i", false).is_err());
        assert_eq!(z.score(b"a"), Some(6.0));
        z.check_invariants();
    }

    #[test]
    fn listpack_drops_the_sign_of_zero() {
        assert!(stored_score(-0.0, false).is_sign_positive());
        assert!(stored_score(-0.0, true).is_sign_negative());
    }
}
