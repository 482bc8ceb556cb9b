//! Sorted-set random members and scanning: ZRANDMEMBER and ZSCAN (Redis 7.0.15 semantics).
//!
//! ZSCAN follows Redis's two regimes: a listpack-sized set is returned whole in one call
//! (cursor 0), a skiplist-sized one is walked by the member map's hash cursor.

use super::{as_zset, read_zset, reply_scored};
use crate::argv::Argv;
use crate::cmd::coll;
use crate::cmd::double::format_g17;
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::value::Meta;
use crate::{Core, Cx};
use alloc::vec::Vec;
use kayvee_pds::SmallBytes;

/// ZRANDMEMBER key [count [WITHSCORES]].
pub(super) fn zrandmember(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let scores = args.len() == 4 && args.get(3).eq_ignore_ascii_case(b"WITHSCORES");
    let count = match args.try_get(2) {
        None => None,
        Some(c) => Some(coll::parse_rand_count(c, scores)?),
    };
    if args.len() > 4 || (args.len() == 4 && !scores) {
        return Err(Error::Syntax);
    }
    let draws = match count {
        Some(c) if c < 0 => coll::repeat_draws(cx, c, scores, out)?,
        _ => 0,
    };
    let Some((zs, big)) = read_zset(cx, args.get(1))? else {
        match count {
            Some(_) => out.array(0),
            None => out.null(),
        }
        return Ok(());
    };
    let rng = &mut cx.core.rng;
    let Some(count) = count else {
        let i = (rng.next_u64() % zs.len() as u64) as usize;
        let m = zs.nth(i).expect("in range").1;
        out.bulk_parts(m.head, m.tail);
        return Ok(());
    };
    let n = zs.len();
    if count < 0 {
        // Repeats: each draw is written as it is made (the count may be huge).
        let nested = scores && out.protocol() == crate::reply::Protocol::Resp3;
        out.array(draws * if scores && !nested { 2 } else { 1 });
        for _ in 0..draws {
            let e = zs
                .nth((rng.next_u64() % n as u64) as usize)
                .expect("in range");
            let (score, m) = (e.0, e.1);
            if nested {
                out.array(2);
            }
            out.bulk_parts(m.head, m.tail);
            if scores {
                out.double(score);
            }
        }
        return Ok(());
    }
    let picks: Vec<usize> = if count as u64 >= n as u64 {
        // The whole set: Redis walks a listpack from its tail here.
        if big {
            (0..n).collect()
        } else {
            (0..n).rev().collect()
        }
    } else {
        coll::shuffle_prefix((0..n).collect(), count as usize, rng)
    };
    let items: Vec<(SmallBytes, f64)> = picks
        .iter()
        .map(|&i| {
            let e = zs.nth(i).expect("in range");
            (e.1.to_small_bytes(), e.0)
        })
        .collect();
    reply_scored(out, &items, scores);
    Ok(())
}

/// ZSCAN key cursor [MATCH pattern] [COUNT count].
pub(super) fn zscan(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    coll::parse_scan_cursor(args)?;
    let now = cx.now_ms();
    let Core { dbs, .. } = &mut *cx.core;
    let Some(entry) = dbs[cx.db_index].lookup_read(args.get(1), now) else {
        coll::write_scan_head(out, 0, 0);
        return Ok(());
    };
    let zs = as_zset(entry)?.clone();
    let big = entry.meta().has(Meta::BIG);
    let scan = coll::parse_scan(args)?;
    let (next, mut found) = if big {
        zs.scan(scan.cursor, scan.count)
    } else {
        (0, zs.iter().collect())
    };
    found.retain(|e| scan.matches(&e.1.to_small_bytes()));
    coll::write_scan_head(out, next, found.len() * 2);
    let mut buf = Vec::new();
    for e in &found {
        out.bulk_parts(e.1.head, e.1.tail);
        buf.clear();
        format_g17(e.0, &mut buf);
        out.bulk(&buf);
    }
    Ok(())
}
