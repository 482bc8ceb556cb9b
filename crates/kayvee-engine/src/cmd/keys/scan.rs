//! Keyspace iteration: KEYS, SCAN and RANDOMKEY (Redis "generic" group).
//!
//! SCAN's cursor is the keyspace map's hash cursor ([`kayvee_pds::PMap::scan`]) printed as a
//! decimal u64, so its values differ from Redis's but keep Redis's guarantee: a key present
//! for the whole iteration is returned at least once. Expired keys are never returned; those
//! met by SCAN and RANDOMKEY are deleted, as Redis does (KEYS only skips them).

use crate::argv::Argv;
use crate::error::CmdResult;
use crate::reply::ReplySink;
use crate::util::glob_match;
use crate::{Core, Cx};

/// KEYS pattern: every live key matching the glob pattern, in hash order.
pub(super) fn keys(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
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
    // Redis writes KEYS's length last, so the whole reply counts against the output limit.
    cx.outcome = crate::Outcome::DeferredReply;
    Ok(())
}

/// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]: the next cursor and a batch of keys.
pub(super) fn scan(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let opts = crate::cmd::coll::parse_scan_at(args, 1, true)?;
    let now = cx.now_ms();
    let db = cx.db();
    let (next, mut found) = db.scan(opts.cursor, opts.count, now, |k| opts.matches(k));
    if let Some(t) = opts.type_name {
        found.retain(|k| {
            db.keys
                .get(&k[..])
                .is_some_and(|e| e.value().type_name().as_bytes().eq_ignore_ascii_case(t))
        });
    }
    crate::cmd::coll::write_scan_head(out, next, found.len());
    for k in &found {
        out.bulk(k);
    }
    Ok(())
}

/// RANDOMKEY: a random live key, or a null reply when the database holds none.
pub(super) fn randomkey(cx: &mut Cx<'_>, _args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let now = cx.now_ms();
    let Core { dbs, rng, .. } = &mut *cx.core;
    match dbs[cx.db_index].random_key(now, &mut || rng.next_u64()) {
        Some(k) => out.bulk(&k),
        None => out.null(),
    }
    Ok(())
}
