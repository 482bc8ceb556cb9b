//! Persistence commands: SAVE, BGSAVE, LASTSAVE (server group) and DUMP, RESTORE (generic
//! group), with Redis 7.0.15's replies and error texts.
//!
//! SAVE and BGSAVE only change state and ask the shell to write through
//! [`Outcome::Save`]; DUMP and RESTORE serialise through the installed
//! [`crate::persist::ValueCodec`] (`kayvee-rdb`).

use crate::argv::Argv;
use crate::cmd::notify::{class as nc, emit};
use crate::cmd::spec::CommandSpec;
use crate::command::{acl, flags};
use crate::error::{CmdResult, Error};
use crate::persist::{RestoreError, ValueCodec};
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::value::Meta;
use crate::{Cx, Outcome};

/// The error while a background save runs.
const IN_PROGRESS: &str = "ERR Background save already in progress";

/// SAVE and BGSAVE on a shell without storage (the unikernel until it has a disk).
pub const NO_STORAGE: &str = "ERR Persistence is off: this server has no storage to save to";

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "save",
        arity: 1,
        flags: flags::ADMIN | flags::NOSCRIPT | flags::NO_ASYNC_LOADING | flags::NO_MULTI,
        acl: acl::ADMIN | acl::SLOW | acl::DANGEROUS,
        summary: "Synchronously save the dataset to disk",
        group: "server",
        complexity: "O(N) where N is the total number of keys in all databases",
        handler: save,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "bgsave",
        arity: -1,
        flags: flags::ADMIN | flags::NOSCRIPT | flags::NO_ASYNC_LOADING,
        acl: acl::ADMIN | acl::SLOW | acl::DANGEROUS,
        summary: "Asynchronously save the dataset to disk",
        group: "server",
        handler: bgsave,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "lastsave",
        arity: 1,
        flags: flags::LOADING | flags::STALE | flags::FAST,
        acl: acl::ADMIN | acl::FAST | acl::DANGEROUS,
        summary: "Get the UNIX time stamp of the last successful save to disk",
        group: "server",
        tips: &["nondeterministic_output"],
        handler: lastsave,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "dump",
        arity: 2,
        flags: flags::READONLY,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::KEYSPACE | acl::READ | acl::SLOW,
        summary: "Return a serialized version of the value stored at the specified key.",
        since: "2.6.0",
        complexity: "O(1) to access the key and additional O(N*M) to serialize it, where N is \
                     the number of Redis objects composing the value and M their average size. \
                     For small string values the time complexity is thus O(1)+O(1*M) where M is \
                     small, so simply O(1).",
        tips: &["nondeterministic_output"],
        handler: dump,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "restore",
        arity: -4,
        flags: flags::WRITE | flags::DENYOOM,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::KEYSPACE | acl::WRITE | acl::SLOW | acl::DANGEROUS,
        summary: "Create a key using the provided serialized value, previously obtained using \
                  DUMP.",
        since: "2.6.0",
        complexity: "O(1) to create the new key and additional O(N*M) to reconstruct the \
                     serialized value, where N is the number of Redis objects composing the \
                     value and M their average size. For small string values the time \
                     complexity is thus O(1)+O(1*M) where M is small, so simply O(1). However \
                     for sorted set values the complexity is O(N*M*log(N)) because inserting \
                     values into sorted sets is O(log(N)).",
        key_flags: &["OW", "update"],
        handler: restore,
        ..CommandSpec::DEFAULT
    },
];

/// SAVE: refused while a BGSAVE runs; otherwise the shell writes the file and replies.
fn save(cx: &mut Cx<'_>, _: &Argv<'_>, _: &mut dyn ReplySink) -> CmdResult {
    if !cx.core.host.storage {
        return Err(Error::msg(NO_STORAGE));
    }
    if cx.core.persist.bgsave_in_progress() {
        return Err(Error::msg(IN_PROGRESS));
    }
    cx.outcome = Outcome::Save { background: false };
    Ok(())
}

/// BGSAVE [SCHEDULE]: starts a background save, or (SCHEDULE) queues one behind the running.
fn bgsave(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let schedule = match args.len() {
        1 => false,
        2 if args.get(1).eq_ignore_ascii_case(b"schedule") => true,
        _ => return Err(Error::Syntax),
    };
    if !cx.core.host.storage {
        return Err(Error::msg(NO_STORAGE));
    }
    let p = &mut cx.core.persist;
    if p.bgsave_in_progress() {
        if !schedule {
            return Err(Error::msg(IN_PROGRESS));
        }
        p.bgsave_scheduled = true;
        out.simple("Background saving scheduled");
        return Ok(());
    }
    out.simple("Background saving started");
    cx.outcome = Outcome::Save { background: true };
    Ok(())
}

/// LASTSAVE: unix seconds of the last successful save.
fn lastsave(cx: &mut Cx<'_>, _: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    out.int((cx.core.persist.last_save_ms / 1000) as i64);
    Ok(())
}

/// The installed codec, or the error DUMP/RESTORE give without one.
fn codec(cx: &Cx<'_>) -> Result<&'static dyn ValueCodec, Error> {
    cx.core
        .persist
        .codec
        .ok_or_else(|| Error::msg("ERR DUMP/RESTORE are not available in this build"))
}

/// DUMP key: the value's payload, or a null for a missing key.
fn dump(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let codec = codec(cx)?;
    let compress = cx.core.config.rdbcompression;
    let now = cx.now_ms();
    match cx.db().lookup_read(args.get(1), now) {
        Some(e) => out.bulk(&codec.dump(e.value(), compress)),
        None => out.null(),
    }
    Ok(())
}

/// RESTORE's options after the payload.
#[derive(Default)]
struct RestoreOpts {
    replace: bool,
    absttl: bool,
    idle_s: Option<i64>,
    freq: Option<i64>,
}

/// Parses `[REPLACE] [ABSTTL] [IDLETIME s] [FREQ f]` as Redis does (IDLETIME and FREQ
/// exclude each other: syntax error).
fn restore_opts(args: &Argv<'_>) -> Result<RestoreOpts, Error> {
    let mut o = RestoreOpts::default();
    let mut i = 4;
    while i < args.len() {
        let a = args.get(i).to_ascii_lowercase();
        let more = i + 1 < args.len();
        match a.as_slice() {
            b"replace" => o.replace = true,
            b"absttl" => o.absttl = true,
            b"idletime" if more && o.freq.is_none() => {
                i += 1;
                let v = parse_i64(args.get(i)).ok_or(Error::NotInteger)?;
                if v < 0 {
                    return Err(Error::msg("ERR Invalid IDLETIME value, must be >= 0"));
                }
                o.idle_s = Some(v);
            }
            b"freq" if more && o.idle_s.is_none() => {
                i += 1;
                let v = parse_i64(args.get(i)).ok_or(Error::NotInteger)?;
                if !(0..=255).contains(&v) {
                    return Err(Error::msg(
                        "ERR Invalid FREQ value, must be >= 0 and <= 255",
                    ));
                }
                o.freq = Some(v);
            }
            _ => return Err(Error::Syntax),
        }
        i += 1;
    }
    Ok(o)
}

/// Propagates a RESTORE with a relative TTL as `RESTORE key ms payload [options] ABSTTL`.
fn propagate_absttl(cx: &mut Cx<'_>, args: &Argv<'_>, at_ms: u64) {
    if !cx.propagating() {
        return;
    }
    let ms = crate::aof::itoa(at_ms);
    let mut prop: alloc::vec::Vec<&[u8]> =
        alloc::vec![b"RESTORE", args.get(1), ms.as_bytes(), args.get(3)];
    prop.extend(args.iter().skip(4));
    prop.push(b"ABSTTL");
    cx.propagate(&prop);
}

/// Whether RESTORE checks the payload deeply, as Redis decides from `sanitize-dump-payload`:
/// always with `yes`, never with `no`, and with `clients` unless the command is replayed from
/// the AOF or the client's user has `skip-sanitize-payload`.
fn deep_sanitize(cx: &mut Cx<'_>) -> bool {
    use crate::config::extra::{sanitize_dump_payload, SanitizePayload};
    match sanitize_dump_payload(&cx.core.config) {
        SanitizePayload::Yes => true,
        SanitizePayload::No => false,
        SanitizePayload::Clients => {
            if crate::cmd::stream::replaying(cx) {
                return false;
            }
            let user = cx.client().user.clone();
            let skip = cx
                .core
                .acl
                .users
                .get(user.as_bytes())
                .is_some_and(|u| u.sanitize == Some(false));
            !skip
        }
    }
}

/// RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f].
fn restore(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let opts = restore_opts(args)?;
    let ttl = parse_i64(args.get(2)).ok_or(Error::NotInteger)?;
    if ttl < 0 {
        return Err(Error::msg("ERR Invalid TTL value, must be >= 0"));
    }
    let key = args.get(1);
    let now = cx.now_ms();
    if !opts.replace && cx.db().contains(key, now) {
        return Err(Error::msg("BUSYKEY Target key name already exists."));
    }
    let codec = codec(cx)?;
    let skip_checksum = cx.core.debug.skip_checksum_validation;
    let deep = deep_sanitize(cx);
    let value = codec
        .restore(args.get(3), cx.core.seed, skip_checksum, deep)
        .map_err(|e| match e {
            RestoreError::VersionOrChecksum => {
                Error::msg("ERR DUMP payload version or checksum are wrong")
            }
            RestoreError::BadFormat => Error::msg("ERR Bad data format"),
            RestoreError::Integrity(why) => {
                if let Some(log) = cx.core.persist.log {
                    log(3, why.as_bytes());
                }
                Error::msg("ERR Bad data format")
            }
            RestoreError::ListpackDups(lp) => {
                if let Some(log) = cx.core.persist.log {
                    let dump = crate::persist::hex_dump("listpack with dup elements dump", &lp);
                    dump.iter().for_each(|line| log(3, line.as_bytes()));
                }
                Error::msg("ERR Bad data format")
            }
        })?;
    let at = match ttl {
        0 => None,
        t if opts.absttl => Some(t as u64),
        t => Some(now.saturating_add(t as u64)),
    };
    let db_index = cx.db_index;
    let big = crate::persist::loads_big(&value, &cx.core.config);
    let mut value = value;
    value.normalize(big, cx.core.seed);
    let db = &mut cx.core.dbs[db_index];
    let replaced = db.remove(key, now).is_some();
    if at.is_some_and(|at| at <= now) {
        // Already expired: as Redis, the key is deleted (or simply not created).
        if replaced {
            cx.propagate(&[b"DEL", key]);
            emit(cx, nc::GENERIC, "del", key);
        }
        out.ok();
        return Ok(());
    }
    let lfu = db.touch.lfu;
    let mut entry = db.new_entry(value, now);
    let (idle, freq) = (opts.idle_s.map(|i| i as u64), opts.freq.map(|f| f as u8));
    entry.meta_mut().set_saved_clock(lfu, idle, freq, now);
    entry.meta_mut().set_flag(Meta::BIG, big);
    db.insert_entry(key, entry, at);
    match at {
        Some(at) if !opts.absttl => propagate_absttl(cx, args, at),
        _ => cx.propagate_verbatim(),
    }
    emit(cx, nc::GENERIC, "restore", key);
    crate::cmd::block::signal_key_ready(cx, db_index, key);
    out.ok();
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::{ArgvBuf, Config, ConnInfo, Engine, Now, Outcome, Reply, ReplyTree, Transport};

    /// Runs one command on a fresh client; the outcome and the replies.
    fn run(e: &mut Engine, args: &[&str]) -> (Outcome, alloc::vec::Vec<Reply>) {
        let conn = ConnInfo {
            transport: Transport::Unix { path: "/s".into() },
            fd: 1,
        };
        let h = e.connect(conn, Now::from_ms(5000));
        let argv = ArgvBuf::from_args(args.iter().map(|a| a.as_bytes()));
        let mut t = ReplyTree::new(e.protocol(h));
        let outcome = e.execute(h, &argv.argv(), Now::from_ms(5000), &mut t);
        (outcome, t.take())
    }

    #[test]
    fn without_storage_saves_are_refused_not_pretended() {
        let mut e = Engine::new(Config::default(), 1, Now::from_ms(1000));
        for cmd in [&["SAVE"][..], &["BGSAVE"], &["BGSAVE", "SCHEDULE"]] {
            let (outcome, replies) = run(&mut e, cmd);
            assert_eq!(outcome, Outcome::Continue, "{cmd:?}");
            assert_eq!(replies, [Reply::Error(super::NO_STORAGE.into())], "{cmd:?}");
        }
    }

    #[test]
    fn with_storage_the_shell_is_asked_to_save() {
        let mut e = Engine::new(Config::default(), 1, Now::from_ms(1000));
        e.core.host.storage = true;
        let (outcome, replies) = run(&mut e, &["SAVE"]);
        assert_eq!(outcome, Outcome::Save { background: false });
        assert!(replies.is_empty());
        let (outcome, replies) = run(&mut e, &["BGSAVE"]);
        assert_eq!(outcome, Outcome::Save { background: true });
        assert_eq!(replies, [Reply::Simple("Background saving started".into())]);
    }
}
