//! OBJECT (a container command): ENCODING, REFCOUNT, IDLETIME, FREQ, HELP — Redis's object
//! introspection, answered from the value and its [`crate::value::Meta`] as Redis 7.0.15 would answer.
//!
//! Kayvee has no real object encodings or reference counts; it reports what Redis would
//! report for the same history (see [`Entry::encoding`] and [`refcount`]).

use crate::argv::Argv;
use crate::config::Config;
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::value::{Entry, ValueRef};
use crate::Cx;

/// Redis's `OBJ_SHARED_REFCOUNT`: the refcount it reports for shared integer objects.
const SHARED_REFCOUNT: i64 = i32::MAX as i64;
/// Redis shares the integers `0..SHARED_INTEGERS` (`OBJ_SHARED_INTEGERS`).
const SHARED_INTEGERS: i64 = 10_000;

/// The entries of `OBJECT HELP` (between the header and HELP's own), as Redis 7.0.15 words
/// them.
const HELP: &[&str] = &[
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
];

/// The refcount Redis would report: shared integers (int-encoded `0..10000`, unless an LRU or
/// LFU maxmemory policy disables sharing) answer `2147483647`, everything else 1.
pub fn refcount(entry: &Entry, config: &Config) -> i64 {
    let policy = config.maxmemory_policy.as_str();
    let sharing = config.maxmemory == 0 || !(policy.contains("lru") || policy.contains("lfu"));
    let shared = sharing
        && entry.encoding() == "int"
        && matches!(entry.value(), ValueRef::Str(s)
            if parse_i64(s).is_some_and(|v| (0..SHARED_INTEGERS).contains(&v)));
    if shared {
        SHARED_REFCOUNT
    } else {
        1
    }
}

/// Whether the maxmemory policy is an LFU one (which decides what IDLETIME and FREQ track).
fn lfu_policy(config: &Config) -> bool {
    config.maxmemory_policy.contains("lfu")
}

/// Looks the key up for OBJECT (lazy expiry, no access recorded); `None` means reply null.
fn lookup<'a>(cx: &'a mut Cx<'_>, key: &[u8]) -> Option<&'a Entry> {
    let now = cx.now_ms();
    if cx.db().lookup_notouch(key, now).is_none() {
        crate::notify::unlog_miss(cx.db(), key);
    }
    cx.db().keys.get(key)
}

/// OBJECT ENCODING key.
pub(super) fn object_encoding(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> CmdResult {
    match lookup(cx, args.get(2)) {
        Some(e) => out.bulk_str(e.encoding()),
        None => out.null(),
    }
    Ok(())
}

/// OBJECT REFCOUNT key.
pub(super) fn object_refcount(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> CmdResult {
    let (now, key) = (cx.now_ms(), args.get(2));
    let core = &mut *cx.core;
    let db = &mut core.dbs[cx.db_index];
    if db.lookup_notouch(key, now).is_none() {
        crate::notify::unlog_miss(db, key);
    }
    match db.keys.get(key) {
        Some(e) => out.int(refcount(e, &core.config)),
        None => out.null(),
    }
    Ok(())
}

/// OBJECT IDLETIME key: seconds since the last access (not tracked under an LFU policy).
pub(super) fn object_idletime(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> CmdResult {
    let now_ms = cx.now_ms();
    let lfu = lfu_policy(&cx.core.config);
    let Some(meta) = lookup(cx, args.get(2)).map(|e| e.meta()) else {
        out.null();
        return Ok(());
    };
    if lfu {
        return Err(Error::msg("ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."));
    }
    out.int(meta.idle_s(now_ms) as i64);
    Ok(())
}

/// OBJECT FREQ key: the logarithmic access counter, decayed by the `lfu-decay-time` periods
/// since it was last updated (only tracked under an LFU policy).
pub(super) fn object_freq(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let now_min = crate::evict::minutes(cx.now_ms());
    let lfu = lfu_policy(&cx.core.config);
    let decay_min = cx.core.config.lfu_decay_time;
    let Some(meta) = lookup(cx, args.get(2)).map(|e| e.meta()) else {
        out.null();
        return Ok(());
    };
    if !lfu {
        return Err(Error::msg("ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."));
    }
    out.int(crate::evict::lfu_decayed(&meta, now_min, decay_min).into());
    Ok(())
}

/// OBJECT HELP.
pub(super) fn object_help(
    _cx: &mut Cx<'_>,
    _args: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> CmdResult {
    crate::reply::help_reply(out, "OBJECT", HELP);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{Meta, Value};
    use kayvee_pds::SmallBytes;

    fn entry(s: &str) -> Entry {
        Entry::new(Value::Str(SmallBytes::from_slice(s.as_bytes())), 0)
    }

    #[test]
    fn encodings_follow_redis_rules() {
        let enc = |s: &str| {
            let e = entry(s);
            e.encoding()
        };
        assert_eq!(enc("12345"), "int");
        assert_eq!(enc("-1"), "int");
        assert_eq!(enc("9223372036854775807"), "int");
        assert_eq!(enc("9223372036854775808"), "embstr");
        assert_eq!(enc("007"), "embstr");
        assert_eq!(enc(""), "embstr");
        assert_eq!(enc(&"a".repeat(44)), "embstr");
        assert_eq!(enc(&"a".repeat(45)), "raw");
        let mut e = entry("1");
        e.meta_mut().set_flag(Meta::RAW, true);
        assert_eq!(e.encoding(), "raw");
    }

    #[test]
    fn shared_integers_report_max_refcount() {
        let mut config = Config::default();
        assert_eq!(refcount(&entry("100"), &config), SHARED_REFCOUNT);
        assert_eq!(refcount(&entry("9999"), &config), SHARED_REFCOUNT);
        assert_eq!(refcount(&entry("10000"), &config), 1);
        assert_eq!(refcount(&entry("-1"), &config), 1);
        assert_eq!(refcount(&entry("v"), &config), 1);
        config.maxmemory = 1 << 20;
        config.maxmemory_policy = "allkeys-lru".into();
        assert_eq!(refcount(&entry("100"), &config), 1);
        config.maxmemory_policy = "noeviction".into();
        assert_eq!(refcount(&entry("100"), &config), SHARED_REFCOUNT);
    }
}
