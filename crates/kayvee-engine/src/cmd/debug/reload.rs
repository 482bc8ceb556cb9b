//! DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE]: Redis saves the RDB file, empties the dataset and
//! loads the file back. Kayvee does the same round trip in memory, through the RDB value codec
//! the shell installed (the one DUMP, RESTORE and the RDB files use): every value is encoded and
//! decoded again, so what would not survive a save and a load shows, and the reloaded values
//! take the encodings a load gives them. Expired keys are dropped, as a load does; LRU idle
//! times and LFU counters survive only under the policy that saves them. As a save does, the
//! file is then written (a SAVE: [`crate::Outcome::Save`], which replies; a shell without
//! storage, the unikernel without a disk, writes none and answers OK). NOSAVE loads the
//! file on disk as it is, over the dataset with NOFLUSH (MERGE: loaded keys and libraries
//! replace existing ones): the shell does that ([`crate::Outcome::LoadRdb`]).

use crate::argv::Argv;
use crate::db::Db;
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::value::{Entry, Meta, Value};
use crate::Cx;
use alloc::vec::Vec;

/// Redis's reply when the load fails.
const LOAD_FAILED: &str = "ERR Error trying to load the RDB dump, check server logs.";

/// Whether a collection has no element (a load skips such keys).
fn is_empty(v: &Value) -> bool {
    match v {
        Value::Str(_) => false,
        Value::List(l) => l.is_empty(),
        Value::Set(s) => s.is_empty(),
        Value::Hash(h) => h.is_empty(),
        Value::ZSet(z) => z.is_empty(),
        Value::Stream(_) => false,
    }
}

pub(super) fn reload(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (mut merge, mut noflush, mut nosave) = (false, false, false);
    for a in args.iter().skip(2) {
        match a.to_ascii_lowercase().as_slice() {
            b"merge" => merge = true,
            b"noflush" => noflush = true,
            b"nosave" => nosave = true,
            _ => {
                return Err(Error::msg(
                    "ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.",
                ))
            }
        }
    }
    if nosave {
        // The shell loads the file on disk and replies.
        cx.outcome = crate::Outcome::LoadRdb {
            flush: !noflush,
            merge,
        };
        return Ok(());
    }
    let codec = cx.core.persist.codec.ok_or_else(|| Error::msg("ERR"))?;
    // Loading over the dataset without MERGE finds every key (and function library) twice:
    // Redis stops there. The libraries are kept as they are (what a reload gives back).
    #[cfg(feature = "scripting")]
    let has_functions = !cx.core.scripts.libraries.is_empty();
    #[cfg(not(feature = "scripting"))]
    let has_functions = false;
    if noflush && !merge && (has_functions || cx.core.dbs.iter().any(|db| !db.is_empty())) {
        return Err(Error::msg(LOAD_FAILED));
    }
    let now = cx.now_ms();
    let (seed, config) = (cx.core.seed, &cx.core.config);
    // Loading checks the contents deeply with `sanitize-dump-payload yes` only.
    let deep = crate::config::extra::sanitize_dump_payload(config)
        == crate::config::extra::SanitizePayload::Yes;
    // The save writes the clock under an LRU or LFU policy (an `IDLE` or `FREQ` record)
    // and the load sets it back; under another policy the keys come back accessed now.
    let lfu = config.maxmemory_policy.contains("lfu");
    let keep = lfu || config.maxmemory_policy.contains("lru");
    let mut rebuilt: Vec<Db> = Vec::with_capacity(cx.core.dbs.len());
    for db in &cx.core.dbs {
        let mut fresh = Db::new(seed);
        for (key, old) in db.keys.iter() {
            let at = db.expire_at(key);
            if at.is_some_and(|t| t <= now) {
                continue;
            }
            let payload = codec.dump(old.value(), config.rdbcompression);
            let mut value = codec
                .restore(&payload, seed, false, deep)
                .map_err(|_| Error::msg(LOAD_FAILED))?;
            if is_empty(&value) {
                continue;
            }
            let big = crate::persist::loads_big(&value, config);
            value.normalize(big, seed);
            let mut meta = Meta::fresh(lfu, now);
            if keep {
                meta.set_clock(old.meta().clock());
            }
            meta.set_flag(Meta::BIG, big);
            let entry = Entry::with_meta(value, meta);
            fresh.insert_entry(key, entry, at);
        }
        rebuilt.push(fresh);
    }
    for (slot, mut db) in cx.core.dbs.iter_mut().zip(rebuilt) {
        db.stats = slot.stats;
        *slot = db;
    }
    crate::drain::sync(cx.core);
    let core = &mut *cx.core;
    crate::evict::sync(&mut core.evict, &mut core.dbs, &core.config, core.seed);
    // A shell without storage (the unikernel without a disk) has no file to write: the round
    // trip is the whole reload.
    if !core.host.storage {
        out.ok();
        return Ok(());
    }
    // The file is written as Redis writes it first (a later NOSAVE reload reads it); the
    // shell's save replies.
    cx.outcome = crate::Outcome::Save { background: false };
    Ok(())
}
