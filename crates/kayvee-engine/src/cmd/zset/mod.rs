//! Sorted-set commands (Redis "sorted-set" group): the command table and the shared helpers
//! (typed lookups, the listpack/skiplist encoding rule, scored replies). The commands on single
//! members (ZADD, ZINCRBY, ZREM, ZSCORE, ZMSCORE, ZCARD, ZRANK, ZREVRANK) are in `members`,
//! ranges in `range`, set algebra in `setops`, the pops (blocking forms included) in `pop`,
//! ZRANDMEMBER and ZSCAN in `scan`; scores are parsed and printed by `cmd::double`.
//!
//! Semantics, replies and error texts follow Redis 7.0.15 (checked against the real server;
//! `tests/transcripts/zset*.txt` were recorded from it).

mod members;
mod pop;
mod range;
mod scan;
mod setops;

use crate::cmd::spec::{CommandSpec, Handler};
use crate::command::{acl, flags};
use crate::config::Config;
use crate::error::Error;
use crate::keyspec::{kf, KeySpec};
use crate::reply::{Protocol, ReplySink};
use crate::value::{Entry, Meta, Split, Value, ValueRef, ZSet};
use crate::Cx;
use alloc::vec::Vec;
use kayvee_pds::SmallBytes;
/// ZADD, which GEOADD runs on the scores it computes.
pub(crate) use members::zadd;
use members::{zcard, zincrby, zmscore, zrank, zrem, zrevrank, zscore};
use pop::{bzmpop, bzpopmax, bzpopmin, serve_bzmpop, serve_bzpopmax, serve_bzpopmin};

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
    CommandSpec::first_key(
        "sorted-set",
        name,
        arity,
        flags,
        acl,
        summary,
        since,
        complexity,
        handler,
    )
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
    spec("zcount", 4, RO_FAST, A_R_FAST, "Count the members in a sorted set with scores within the given values", "2.0.0", "O(log(N)) with N being the number of elements in the sorted set.", range::zcount),
    spec("zlexcount", 4, RO_FAST, A_R_FAST, "Count the number of members in a sorted set between a given lexicographical range", "2.8.9", "O(log(N)) with N being the number of elements in the sorted set.", range::zlexcount),
    spec("zrange", -4, RO, A_R_SLOW, "Return a range of members in a sorted set", "1.2.0", C_RANGE, range::zrange),
    CommandSpec {
        last_key: 2,
        key_flags: &["OW", "update"],
        key_specs: &[KeySpec::range(kf::OW_UPDATE, 1, 0, 1), KeySpec::range(kf::RO_ACCESS, 2, 0, 1)],
        ..spec("zrangestore", -5, W_OOM, A_W_SLOW, "Store a range of members from sorted set into another key", "6.2.0", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements stored into the destination key.", range::zrangestore)
    },
    spec("zrevrange", -4, RO, A_R_SLOW, "Return a range of members in a sorted set, by index, with scores ordered from high to low", "1.2.0", C_RANGE, range::zrevrange),
    spec("zrangebyscore", -4, RO, A_R_SLOW, "Return a range of members in a sorted set, by score", "1.0.5", C_RANGE_LIMIT, range::zrangebyscore),
    spec("zrevrangebyscore", -4, RO, A_R_SLOW, "Return a range of members in a sorted set, by score, with scores ordered from high to low", "2.2.0", C_RANGE_LIMIT, range::zrevrangebyscore),
    spec("zrangebylex", -4, RO, A_R_SLOW, "Return a range of members in a sorted set, by lexicographical range", "2.8.9", C_RANGE_LIMIT, range::zrangebylex),
    spec("zrevrangebylex", -4, RO, A_R_SLOW, "Return a range of members in a sorted set, by lexicographical range, ordered from higher to lower strings.", "2.8.9", C_RANGE_LIMIT, range::zrevrangebylex),
    spec("zrank", 3, RO_FAST, A_R_FAST, "Determine the index of a member in a sorted set", "2.0.0", C_LOGN, zrank),
    spec("zrevrank", 3, RO_FAST, A_R_FAST, "Determine the index of a member in a sorted set, with scores ordered from high to low", "2.0.0", C_LOGN, zrevrank),
    CommandSpec {
        key_flags: &["RW", "access", "delete"],
        ..spec("zpopmin", -2, W_FAST, A_W_FAST, "Remove and return members with the lowest scores in a sorted set", "5.0.0", C_POP, pop::zpopmin)
    },
    CommandSpec {
        key_flags: &["RW", "access", "delete"],
        ..spec("zpopmax", -2, W_FAST, A_W_FAST, "Remove and return members with the highest scores in a sorted set", "5.0.0", C_POP, pop::zpopmax)
    },
    numkeys_spec(CommandSpec {
        key_flags: &["RW", "access", "delete"],
        key_specs: &[KeySpec::keynum(kf::RW_ACCESS_DELETE, 1)],
        ..spec("zmpop", -4, flags::WRITE | flags::MOVABLEKEYS, A_W_SLOW, "Remove and return members with scores in a sorted set", "7.0.0", "O(K) + O(M*log(N)) where K is the number of provided keys, N being the number of elements in the sorted set, and M being the number of elements popped.", pop::zmpop)
    }),
    CommandSpec {
        key_flags: &["RW", "delete"],
        ..spec("zremrangebyrank", 4, W, A_W_SLOW, "Remove all members in a sorted set within the given indexes", "2.0.0", C_REM_RANGE, range::zremrangebyrank)
    },
    CommandSpec {
        key_flags: &["RW", "delete"],
        ..spec("zremrangebyscore", 4, W, A_W_SLOW, "Remove all members in a sorted set within the given scores", "1.2.0", C_REM_RANGE, range::zremrangebyscore)
    },
    CommandSpec {
        key_flags: &["RW", "delete"],
        ..spec("zremrangebylex", 4, W, A_W_SLOW, "Remove all members in a sorted set between the given lexicographical range", "2.8.9", C_REM_RANGE, range::zremrangebylex)
    },
    numkeys_spec(CommandSpec {
        key_specs: &[KeySpec::keynum(kf::RO_ACCESS, 1)],
        ..spec("zunion", -3, RO_MOVE, A_R_SLOW, "Add multiple sorted sets", "6.2.0", C_UNION, setops::zunion)
    }),
    numkeys_spec(CommandSpec {
        key_specs: &[KeySpec::keynum(kf::RO_ACCESS, 1)],
        ..spec("zinter", -3, RO_MOVE, A_R_SLOW, "Intersect multiple sorted sets", "6.2.0", C_INTER, setops::zinter)
    }),
    numkeys_spec(CommandSpec {
        key_specs: &[KeySpec::keynum(kf::RO_ACCESS, 1)],
        ..spec("zdiff", -3, RO_MOVE, A_R_SLOW, "Subtract multiple sorted sets", "6.2.0", C_DIFF, setops::zdiff)
    }),
    CommandSpec {
        key_flags: &["OW", "update"],
        key_specs: &[KeySpec::range(kf::OW_UPDATE, 1, 0, 1), KeySpec::keynum(kf::RO_ACCESS, 2)],
        ..spec("zunionstore", -4, W_OOM_MOVE, A_W_SLOW, "Add multiple sorted sets and store the resulting sorted set in a new key", "2.0.0", C_UNIONSTORE, setops::zunionstore)
    },
    CommandSpec {
        key_flags: &["OW", "update"],
        key_specs: &[KeySpec::range(kf::OW_UPDATE, 1, 0, 1), KeySpec::keynum(kf::RO_ACCESS, 2)],
        ..spec("zinterstore", -4, W_OOM_MOVE, A_W_SLOW, "Intersect multiple sorted sets and store the resulting sorted set in a new key", "2.0.0", C_INTER, setops::zinterstore)
    },
    CommandSpec {
        key_flags: &["OW", "update"],
        key_specs: &[KeySpec::range(kf::OW_UPDATE, 1, 0, 1), KeySpec::keynum(kf::RO_ACCESS, 2)],
        ..spec("zdiffstore", -4, W_OOM_MOVE, A_W_SLOW, "Subtract multiple sorted sets and store the resulting sorted set in a new key", "6.2.0", C_DIFF, setops::zdiffstore)
    },
    numkeys_spec(CommandSpec {
        key_specs: &[KeySpec::keynum(kf::RO_ACCESS, 1)],
        ..spec("zintercard", -3, RO_MOVE, A_R_SLOW, "Intersect multiple sorted sets and return the cardinality of the result", "7.0.0", "O(N*K) worst case with N being the smallest input sorted set, K being the number of input sorted sets.", setops::zintercard)
    }),
    CommandSpec {
        tips: &["nondeterministic_output"],
        ..spec("zrandmember", -2, RO, A_R_SLOW, "Get one or multiple random elements from a sorted set", "6.2.0", "O(N) where N is the number of elements returned", scan::zrandmember)
    },
    CommandSpec {
        tips: &["nondeterministic_output"],
        ..spec("zscan", -3, RO, A_R_SLOW, "Incrementally iterate sorted sets elements and associated scores", "2.8.0", "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection..", scan::zscan)
    },
    bpop_spec(
        "bzpopmin",
        "Remove and return the member with the lowest score from one or more sorted sets, or \
         block until one is available",
        bzpopmin,
        serve_bzpopmin,
    ),
    bpop_spec(
        "bzpopmax",
        "Remove and return the member with the highest score from one or more sorted sets, or \
         block until one is available",
        bzpopmax,
        serve_bzpopmax,
    ),
    CommandSpec {
        name: "bzmpop",
        arity: -5,
        flags: flags::WRITE | flags::BLOCKING | flags::MOVABLEKEYS,
        acl: acl::WRITE | acl::SORTEDSET | acl::SLOW | acl::BLOCKING,
        summary: "Remove and return members with scores in a sorted set or block until one is \
                  available",
        since: "7.0.0",
        group: "sorted-set",
        complexity: "O(K) + O(M*log(N)) where K is the number of provided keys, N being the \
                     number of elements in the sorted set, and M being the number of elements \
                     popped.",
        handler: bzmpop,
        serve: Some(serve_bzmpop),
        key_specs: &[KeySpec::keynum(kf::RW_ACCESS_DELETE, 2)],
        ..CommandSpec::DEFAULT
    },
];

const BPOP_CX: &str = "O(log(N)) with N being the number of elements in the sorted set.";
const BPOP_FLAGS: u32 = flags::WRITE | flags::NOSCRIPT | flags::BLOCKING | flags::FAST;
/// Every key but the last argument (the timeout).
const BPOP_KEYS: &[KeySpec] = &[KeySpec::range(kf::RW_ACCESS_DELETE, 1, -2, 1)];
const BPOP_ACL: u32 = acl::WRITE | acl::SORTEDSET | acl::FAST | acl::BLOCKING;

/// BZPOPMIN / BZPOPMAX: `key [key ...] timeout`.
const fn bpop_spec(
    name: &'static str,
    summary: &'static str,
    handler: crate::cmd::spec::Handler,
    serve: crate::cmd::spec::ServeFn,
) -> CommandSpec {
    CommandSpec {
        name,
        arity: -3,
        flags: BPOP_FLAGS,
        first_key: 1,
        last_key: -2,
        key_step: 1,
        acl: BPOP_ACL,
        summary,
        since: "5.0.0",
        group: "sorted-set",
        complexity: BPOP_CX,
        handler,
        serve: Some(serve),
        key_specs: BPOP_KEYS,
        ..CommandSpec::DEFAULT
    }
}

/// The sorted set held by an entry, or WRONGTYPE.
pub(crate) fn as_zset(entry: &Entry) -> Result<&ZSet, Error> {
    match entry.value() {
        ValueRef::ZSet(z) => Ok(z),
        _ => Err(Error::WrongType),
    }
}

/// A read lookup of a sorted set (a hit or miss is counted): an O(1) snapshot of it, `None`
/// when the key is missing, WRONGTYPE for another type.
pub(crate) fn read_zset(cx: &mut Cx<'_>, key: &[u8]) -> Result<Option<(ZSet, bool)>, Error> {
    let now = cx.now_ms();
    match cx.db().lookup_read(key, now) {
        None => Ok(None),
        Some(e) => Ok(Some((as_zset(e)?.clone(), e.meta().has(Meta::BIG)))),
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
    let len = match entry.value() {
        ValueRef::ZSet(z) => z.len(),
        _ => return,
    };
    if !entry.meta().has(Meta::BIG) && !fits_listpack(config, len, member_len) {
        entry.meta_mut().set_flag(Meta::BIG, true);
        entry.normalize(true, seed);
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
            crate::cmd::notify::emptied(cx, key);
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
            .map(|e| e.1.to_small_bytes())
            .collect();
        signed.iter().for_each(|m| {
            zs.insert(m, 0.0);
        });
    }
    let mut entry = cx.db().new_entry(Value::ZSet(zs), now);
    entry.meta_mut().set_flag(Meta::BIG, big);
    entry.normalize(big, cx.core.seed);
    cx.db().store_result(key, entry, now);
    signal_zset_ready(cx, key);
    len
}

/// Tells clients blocked on `key` (BZPOPMIN, BZMPOP...) that it may hold members now: cheap
/// when nobody waits, and a waiter re-checks the key when served.
pub(super) fn signal_zset_ready(cx: &mut Cx<'_>, key: &[u8]) {
    let db = cx.db_index;
    crate::cmd::block::signal_key_ready(cx, db, key);
}

/// Deletes the key when its sorted set became empty (Redis never keeps empty collections).
pub(crate) fn drop_if_empty(cx: &mut Cx<'_>, key: &[u8]) {
    let now = cx.now_ms();
    let empty = matches!(
        cx.db().peek(key, now).map(|e| e.value()),
        Some(ValueRef::ZSet(z)) if z.is_empty()
    );
    if empty {
        cx.db().remove(key, now);
    }
}

/// A member a reply writes as one bulk: owned bytes, or a set's member borrowed in two parts.
pub(crate) trait BulkMember {
    /// Writes the member as a bulk string.
    fn write(&self, out: &mut dyn ReplySink);
}

impl BulkMember for SmallBytes {
    fn write(&self, out: &mut dyn ReplySink) {
        out.bulk(self);
    }
}

impl BulkMember for Split<'_> {
    fn write(&self, out: &mut dyn ReplySink) {
        out.bulk_parts(self.head, self.tail);
    }
}

/// Writes members (with scores when asked) as Redis's range replies do: a flat array in
/// RESP2, an array of `[member, score]` pairs in RESP3 when scores are included.
pub(crate) fn reply_scored<M: BulkMember>(
    out: &mut dyn ReplySink,
    items: &[(M, f64)],
    scores: bool,
) {
    if !scores {
        out.array(items.len());
        items.iter().for_each(|(m, _)| m.write(out));
    } else if out.protocol() == Protocol::Resp3 {
        out.array(items.len());
        for (m, s) in items {
            out.array(2);
            m.write(out);
            out.double(*s);
        }
    } else {
        out.array(items.len() * 2);
        for (m, s) in items {
            m.write(out);
            out.double(*s);
        }
    }
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
}
