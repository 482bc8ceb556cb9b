//! Whole-database commands (Redis "server" group): DBSIZE, FLUSHDB, FLUSHALL, SWAPDB.
//!
//! Flushing and swapping are O(1) here: a flush drops the database's map roots (the memory goes
//! when no snapshot holds them), so FLUSHDB ASYNC and SYNC behave the same.

use crate::argv::Argv;
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::Cx;

/// DBSIZE: the number of keys, expired but not yet reclaimed ones included (as Redis).
pub(super) fn dbsize(cx: &mut Cx<'_>, _args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    out.int(cx.db().len() as i64);
    Ok(())
}

/// Checks FLUSHDB/FLUSHALL's optional `ASYNC` or `SYNC` (any case); anything else, or more
/// than one argument, is a syntax error.
fn check_flush_mode(args: &Argv<'_>) -> CmdResult {
    match args.len() {
        1 => Ok(()),
        2 if args.get(1).eq_ignore_ascii_case(b"ASYNC")
            || args.get(1).eq_ignore_ascii_case(b"SYNC") =>
        {
            Ok(())
        }
        _ => Err(Error::Syntax),
    }
}

/// Whether a flush is asynchronous in Redis: `ASYNC`, or no mode under
/// `lazyfree-lazy-user-flush`. Its keys then count in `lazyfreed_objects` (Kayvee frees
/// them at once either way).
fn flush_is_async(cx: &Cx<'_>, args: &Argv<'_>) -> bool {
    match args.len() {
        1 => cx.core.config.bool_param("lazyfree-lazy-user-flush"),
        _ => args.get(1).eq_ignore_ascii_case(b"ASYNC"),
    }
}

/// FLUSHDB [ASYNC|SYNC]: empties the selected database.
pub(super) fn flushdb(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    check_flush_mode(args)?;
    let (db, now) = (cx.db_index, cx.now_ms());
    crate::txn::before_flush(&mut cx.core.watches, &cx.core.dbs, db, now);
    if flush_is_async(cx, args) {
        cx.core.stats.lazyfreed_objects += cx.db().len() as u64;
    }
    cx.db().clear();
    cx.propagate_verbatim();
    out.ok();
    Ok(())
}

/// FLUSHALL [ASYNC|SYNC]: empties every database.
pub(super) fn flushall(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    check_flush_mode(args)?;
    let now = cx.now_ms();
    for db in 0..cx.core.dbs.len() {
        crate::txn::before_flush(&mut cx.core.watches, &cx.core.dbs, db, now);
    }
    let removed: usize = cx.core.dbs.iter().map(|db| db.len()).sum();
    if flush_is_async(cx, args) {
        cx.core.stats.lazyfreed_objects += removed as u64;
    }
    cx.core.dbs.iter_mut().for_each(|db| db.clear());
    cx.propagate_verbatim();
    // Redis counts every removed key as a change (the command itself adds one more below).
    cx.core.stats.dirty += (removed as u64).saturating_sub(1);
    // As Redis's `flushAllDataAndResetRDB`: a running background save is stopped (it would
    // write the data just flushed), and with save points the empty dataset is saved now; the
    // reply is OK whatever the save does (the shell's answer to the save is dropped).
    let p = &mut cx.core.persist;
    if p.bgsave_in_progress() {
        p.abort_bgsave = Some("FLUSHALL");
    }
    if cx.core.host.storage && !cx.core.config.save.is_empty() {
        cx.outcome = crate::Outcome::Save { background: false };
        cx.core.rewrite_answered = true;
    }
    out.ok();
    Ok(())
}

/// SWAPDB index1 index2: exchanges two databases' contents; clients keep their index, so they
/// see the other data at once.
pub(super) fn swapdb(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let first = swapdb_index(args.get(1), "ERR invalid first DB index")?;
    let second = swapdb_index(args.get(2), "ERR invalid second DB index")?;
    let n = cx.core.dbs.len();
    let (Some(a), Some(b)) = (in_range(first, n), in_range(second, n)) else {
        return Err(Error::DbIndexOutOfRange);
    };
    // A database swapped with itself changes nothing (Redis touches no watched key) but
    // still propagates.
    if a != b {
        let now = cx.now_ms();
        let core = &mut *cx.core;
        crate::txn::touch_swap(&mut core.txn, &mut core.watches, &core.dbs, a, b, now);
        // Events recorded so far belong to the index they were recorded under; watches stay
        // with the index (a client watching a key of db `a` still does).
        crate::drain::drain(cx.core);
        cx.core.dbs[a].replacing();
        cx.core.dbs[b].replacing();
        cx.core.dbs.swap(a, b);
        cx.core.save_progress.swapped(a, b);
        cx.core.blocking.signal_db(a);
        cx.core.blocking.signal_db(b);
    }
    cx.propagate_verbatim();
    out.ok();
    Ok(())
}

/// A SWAPDB index: any parse failure (not an integer, or out of C `int` range) gives `msg`.
fn swapdb_index(arg: &[u8], msg: &'static str) -> Result<i32, Error> {
    parse_i64(arg)
        .and_then(|v| i32::try_from(v).ok())
        .ok_or(Error::msg(msg))
}

/// `id` as a database index when it is in `0..n`.
fn in_range(id: i32, n: usize) -> Option<usize> {
    usize::try_from(id).ok().filter(|&i| i < n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ArgvBuf;

    #[test]
    fn flush_mode_accepts_only_async_or_sync() {
        for ok in ["FLUSHDB", "FLUSHDB async", "FLUSHDB SYNC", "FLUSHALL Async"] {
            assert_eq!(check_flush_mode(&ArgvBuf::from_line(ok).argv()), Ok(()));
        }
        for bad in ["FLUSHDB x", "FLUSHDB ASYNC SYNC", "FLUSHALL SYNC SYNC"] {
            let argv = ArgvBuf::from_line(bad);
            assert_eq!(check_flush_mode(&argv.argv()), Err(Error::Syntax));
        }
    }

    #[test]
    fn swapdb_index_errors() {
        assert_eq!(swapdb_index(b"3", "m"), Ok(3));
        assert_eq!(swapdb_index(b"-1", "m"), Ok(-1));
        assert_eq!(swapdb_index(b"2147483648", "m"), Err(Error::msg("m")));
        assert_eq!(swapdb_index(b"x", "m"), Err(Error::msg("m")));
        assert_eq!(in_range(-1, 16), None);
        assert_eq!(in_range(16, 16), None);
        assert_eq!(in_range(15, 16), Some(15));
    }
}
