//! Generic commands on named keys (Redis's "generic" group): DEL, UNLINK, EXISTS, TYPE, TOUCH,
//! RENAME, RENAMENX, COPY, MOVE, and SELECT (a connection command in Redis, kept here beside the
//! other database-index parsing).
//!
//! Semantics follow Redis 7.0.15 as observed from the real server: a key whose TTL has passed is
//! absent (deleted lazily on access), write lookups count no keyspace hit or miss, reads do.

use crate::argv::Argv;
use crate::cmd::notify::{class as nc, emit};
use crate::drain::notify;
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::value::{usage, Entry, Meta};
use crate::Cx;

/// `ERR source and destination objects are the same` (RENAME-like commands on one key).
const SAME_OBJECT: &str = "ERR source and destination objects are the same";

/// Parses a C `int` as Redis's `getIntFromObjectOrReply`: strict integer, then 32-bit range.
pub(crate) fn parse_i32(arg: &[u8]) -> Result<i32, Error> {
    let v = parse_i64(arg).ok_or(Error::NotInteger)?;
    i32::try_from(v).map_err(|_| {
        Error::msg("ERR value is out of range, value must between -2147483648 and 2147483647")
    })
}

/// Parses a database index and checks it against the configured number of databases.
pub(crate) fn parse_db_index(cx: &Cx<'_>, arg: &[u8]) -> Result<usize, Error> {
    let id = parse_i32(arg)?;
    usize::try_from(id)
        .ok()
        .filter(|&i| i < cx.core.dbs.len())
        .ok_or(Error::DbIndexOutOfRange)
}

/// DEL key [key ...] and UNLINK key [key ...]: the number of keys removed. UNLINK frees in the
/// background in Redis; here both only drop a reference (the memory goes when no snapshot
/// holds it).
pub(super) fn del(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let now = cx.now_ms();
    let mut removed = 0;
    for k in args.iter().skip(1) {
        if let Some((entry, _)) = cx.db().remove(k, now) {
            count_lazyfree(cx, args, &entry);
            cx.propagate_verbatim();
            emit(cx, nc::GENERIC, "del", k);
            removed += 1;
        }
    }
    out.int(removed as i64);
    Ok(())
}

/// Counts a deleted value in `lazyfreed_objects` when Redis would have freed it on its
/// lazy-free thread: UNLINK's (or DEL's under `lazyfree-lazy-user-del`) of a big enough value.
fn count_lazyfree(cx: &mut Cx<'_>, args: &Argv<'_>, entry: &Entry) {
    let fill = cx.core.config.list_max_listpack_size;
    if usage::free_effort(entry, fill) > usage::LAZYFREE_THRESHOLD
        && (args.get(0).eq_ignore_ascii_case(b"unlink")
            || cx.core.config.bool_param("lazyfree-lazy-user-del"))
    {
        cx.core.stats.lazyfreed_objects += 1;
    }
}

/// EXISTS key [key ...]: how many of the keys exist (a key named twice counts twice).
pub(super) fn exists(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    out.int(count_present(cx, args, false) as i64);
    Ok(())
}

/// TYPE key: the value's type name, `none` when absent.
pub(super) fn type_(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let now = cx.now_ms();
    let name = match cx.db().lookup_notouch(args.get(1), now) {
        Some(e) => e.value().type_name(),
        None => "none",
    };
    out.simple(name);
    Ok(())
}

/// TOUCH key [key ...]: records an access on each key; the number of keys that exist.
pub(super) fn touch(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    out.int(count_present(cx, args, true) as i64);
    Ok(())
}

/// How many of the keys from argument 1 on exist, each looked up as a read (a hit or a miss
/// counts): TOUCH (`access`) records the access time, EXISTS leaves it alone.
fn count_present(cx: &mut Cx<'_>, args: &Argv<'_>, access: bool) -> usize {
    let now = cx.now_ms();
    let db = cx.db();
    let mut present = |k: &[u8]| {
        if access {
            db.lookup_read(k, now).is_some()
        } else {
            db.lookup_notouch(k, now).is_some()
        }
    };
    args.iter().skip(1).filter(|k| present(k)).count()
}

/// RENAME key newkey: `+OK`; replaces newkey; `ERR no such key` when key is absent.
pub(super) fn rename(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if rename_generic(cx, args.get(1), args.get(2), false)? {
        out.ok();
    }
    Ok(())
}

/// RENAMENX key newkey: 1 when renamed, 0 when newkey exists.
pub(super) fn renamenx(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let renamed = rename_generic(cx, args.get(1), args.get(2), true)?;
    out.int(renamed as i64);
    Ok(())
}

/// Renames `src` to `dst` with its TTL. Returns false when nothing was done because `dst`
/// exists and `nx` is set, or because the names are the same (RENAMENX answers 0 then).
fn rename_generic(cx: &mut Cx<'_>, src: &[u8], dst: &[u8], nx: bool) -> Result<bool, Error> {
    let now = cx.now_ms();
    let db = cx.db();
    if db.lookup_write(src, now).is_none() {
        return Err(Error::NoSuchKey);
    }
    if src == dst {
        return Ok(!nx);
    }
    if nx && db.contains(dst, now) {
        return Ok(false);
    }
    let Some((entry, ttl)) = db.remove(src, now) else {
        return Err(Error::NoSuchKey);
    };
    // Redis deletes the destination first, so the key counts as new (`new` event).
    db.remove(dst, now);
    db.insert_entry(dst, entry, ttl);
    cx.propagate_verbatim();
    emit(cx, nc::GENERIC, "rename_from", src);
    emit(cx, nc::GENERIC, "rename_to", dst);
    crate::cmd::block::signal_key_ready(cx, cx.db_index, dst);
    Ok(true)
}

/// COPY source destination [DB destination-db] [REPLACE]: 1 when copied, 0 when the source is
/// absent or the destination exists without REPLACE. The copy keeps the TTL and encoding.
pub(super) fn copy(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (dst_db, replace) = parse_copy_options(cx, args)?;
    let (src, dst) = (args.get(1), args.get(2));
    if dst_db == cx.db_index && src == dst {
        return Err(Error::msg(SAME_OBJECT));
    }
    let now = cx.now_ms();
    let fresh = cx.db().touch.fresh(now);
    let Some(value) = cx.db().lookup_read(src, now).map(copy_entry(fresh)) else {
        out.int(0);
        return Ok(());
    };
    let ttl = cx.db().expire_at(src);
    let target = &mut cx.core.dbs[dst_db];
    if !replace && target.contains(dst, now) {
        out.int(0);
        return Ok(());
    }
    if replace {
        // Redis deletes the destination first, so the key counts as new (`new` event).
        target.remove(dst, now);
    }
    target.insert_entry(dst, value, ttl);
    cx.propagate_verbatim();
    notify(cx.core, dst_db, nc::GENERIC, "copy_to", dst);
    crate::cmd::block::signal_key_ready(cx, dst_db, dst);
    out.int(1);
    Ok(())
}

/// A fresh entry holding a copy of `e`'s value with the new key's `meta` (a new object:
/// accessed now, or the initial LFU counter), keeping its encoding flags (Redis duplicates a
/// collection in its current encoding).
fn copy_entry(meta: Meta) -> impl Fn(&Entry) -> Entry {
    move |e| {
        let mut meta = meta;
        for flag in [Meta::RAW, Meta::EMBSTR, Meta::BIG] {
            meta.set_flag(flag, e.meta().has(flag));
        }
        Entry::with_meta(e.to_value(), meta)
    }
}

/// COPY's options, checked in order as Redis does (a bad DB index is reported before a later
/// syntax error). Returns the destination database and REPLACE.
fn parse_copy_options(cx: &Cx<'_>, args: &Argv<'_>) -> Result<(usize, bool), Error> {
    let (mut dst_db, mut replace) = (cx.db_index, false);
    let mut i = 3;
    while i < args.len() {
        let opt = args.get(i);
        if opt.eq_ignore_ascii_case(b"REPLACE") {
            replace = true;
        } else if opt.eq_ignore_ascii_case(b"DB") && i + 1 < args.len() {
            dst_db = parse_db_index(cx, args.get(i + 1))?;
            i += 1;
        } else {
            return Err(Error::Syntax);
        }
        i += 1;
    }
    Ok((dst_db, replace))
}

/// MOVE key db: 1 when moved (with its TTL), 0 when absent here or present there.
pub(super) fn move_(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let dst_db = parse_db_index(cx, args.get(2))?;
    if dst_db == cx.db_index {
        return Err(Error::msg(SAME_OBJECT));
    }
    let (key, now) = (args.get(1), cx.now_ms());
    if cx.db().lookup_write(key, now).is_none() || cx.core.dbs[dst_db].contains(key, now) {
        out.int(0);
        return Ok(());
    }
    let Some((entry, ttl)) = cx.db().remove(key, now) else {
        out.int(0);
        return Ok(());
    };
    cx.core.dbs[dst_db].insert_entry(key, entry, ttl);
    cx.propagate_verbatim();
    emit(cx, nc::GENERIC, "move_from", key);
    notify(cx.core, dst_db, nc::GENERIC, "move_to", key);
    crate::cmd::block::signal_key_ready(cx, dst_db, key);
    out.int(1);
    Ok(())
}

/// SELECT index: switches this client's database (both the running context and the client).
pub(super) fn select(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let index = parse_db_index(cx, args.get(1))?;
    cx.db_index = index;
    cx.client().db = index;
    out.ok();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_i32_has_redis_errors() {
        assert_eq!(parse_i32(b"-5"), Ok(-5));
        assert_eq!(parse_i32(b"2147483647"), Ok(i32::MAX));
        assert_eq!(parse_i32(b"x"), Err(Error::NotInteger));
        assert_eq!(parse_i32(b"01"), Err(Error::NotInteger));
        let e = parse_i32(b"-2147483649").unwrap_err();
        assert_eq!(
            alloc::format!("{e}"),
            "ERR value is out of range, value must between -2147483648 and 2147483647"
        );
    }

    #[test]
    fn copy_entry_keeps_raw_and_resets_access() {
        let v = crate::Value::Str(kayvee_pds::SmallBytes::from_slice(b"abc"));
        let mut e = Entry::new(v.clone(), 1_000);
        e.meta_mut().set_flag(Meta::RAW, true);
        e.meta_mut().set_flag(Meta::HAS_EXPIRE, true);
        let c = copy_entry(Meta::fresh(false, 9_000))(&e);
        assert_eq!(c.value(), v.view());
        assert!(c.meta().has(Meta::RAW));
        assert!(!c.meta().has(Meta::HAS_EXPIRE));
        assert_eq!(c.meta().idle_s(9_000), 0);
        assert_eq!(e.meta().idle_s(9_000), 8);
    }
}
