//! MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE] [AUTH password |
//! AUTH2 username password] [KEYS key ...], as Redis 7.0's `migrateCommand`: the keys go to
//! the target as `RESTORE key ttl payload [REPLACE]` (DUMP payloads, the remaining TTL), and
//! each one the target acknowledged is deleted here unless COPY.
//!
//! The command runs in two halves around the shell's I/O (see [`crate::migrate`]): [`migrate`]
//! checks the arguments and the keys, builds the bytes and leaves an [`Outcome::Migrate`];
//! [`finish`] reads the target's replies and answers. Between them nothing else runs (the shell
//! blocks on the link, within the timeout, as Redis does).

use crate::argv::Argv;
use crate::cmd::notify::{class as nc, emit};
use crate::cmd::spec::CommandSpec;
use crate::command::{acl, flags};
use crate::error::{CmdResult, Error};
use crate::keyspec::{BeginSearch, FindKeys, FoundKey, InvalidKeyArgs, KeySpec};
use crate::migrate::Pending;
use crate::outcome::{LinkError, MigrateJob};
use crate::reply::{Reply, ReplySink};
use crate::util::parse_i64;
use crate::value::Key;
use crate::{aof, Cx, Outcome};
use alloc::string::String;
use alloc::vec::Vec;

/// MIGRATE's key flags.
const RW_ACCESS_DELETE: &[&str] = &["RW", "access", "delete"];
const RW_ACCESS_DELETE_INCOMPLETE: &[&str] = &["RW", "access", "delete", "incomplete"];

/// The key argument, then the keys after the last `KEYS` (as Redis's key specs).
const MIGRATE_KEYS: &[KeySpec] = &[
    KeySpec::range(RW_ACCESS_DELETE, 3, 0, 1),
    KeySpec {
        notes: "",
        flags: RW_ACCESS_DELETE_INCOMPLETE,
        begin_search: BeginSearch::Keyword {
            keyword: "KEYS",
            startfrom: -2,
        },
        find_keys: FindKeys::Range {
            lastkey: -1,
            keystep: 1,
            limit: 0,
        },
    },
];

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "migrate",
    arity: -6,
    flags: flags::WRITE | flags::MOVABLEKEYS,
    first_key: 3,
    last_key: 3,
    key_step: 1,
    acl: acl::KEYSPACE | acl::WRITE | acl::SLOW | acl::DANGEROUS,
    summary: "Atomically transfer a key from a Redis instance to another one.",
    since: "2.6.0",
    complexity: "This command actually executes a DUMP+DEL in the source instance, and a \
                 RESTORE in the target instance. See the pages of these commands for time \
                 complexity. Also an O(N) data transfer between the two instances is performed.",
    tips: &["nondeterministic_output"],
    key_specs: MIGRATE_KEYS,
    get_keys: Some(migrate_keys),
    handler: migrate,
    ..CommandSpec::DEFAULT
}];

/// MIGRATE's keys as Redis's `migrateGetKeys`: the key argument, or with KEYS (after AUTH's
/// and AUTH2's arguments) everything after it.
fn migrate_keys(args: &Argv<'_>) -> Result<Vec<FoundKey>, InvalidKeyArgs> {
    let (first, count) = keys_range(args).map_err(|_| InvalidKeyArgs)?;
    Ok((first..first + count)
        .map(|index| FoundKey {
            index,
            flags: RW_ACCESS_DELETE,
        })
        .collect())
}

/// The options after the timeout.
#[derive(Default)]
struct Options<'a> {
    copy: bool,
    replace: bool,
    user: Option<&'a [u8]>,
    password: Option<&'a [u8]>,
    first_key: usize,
    keys: usize,
}

/// Where the keys are: (first index, count).
fn keys_range(args: &Argv<'_>) -> Result<(usize, usize), Error> {
    options(args).map(|o| (o.first_key, o.keys))
}

/// Parses `[COPY] [REPLACE] [AUTH pw | AUTH2 user pw] [KEYS key ...]` with Redis's errors.
fn options<'a>(args: &Argv<'a>) -> Result<Options<'a>, Error> {
    let mut o = Options {
        first_key: 3,
        keys: 1,
        ..Options::default()
    };
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let a = args.get(j).to_ascii_lowercase();
        match a.as_slice() {
            b"copy" => o.copy = true,
            b"replace" => o.replace = true,
            b"auth" if more >= 1 => {
                o.password = Some(args.get(j + 1));
                j += 1;
            }
            b"auth2" if more >= 2 => {
                o.user = Some(args.get(j + 1));
                o.password = Some(args.get(j + 2));
                j += 2;
            }
            b"keys" => {
                if !args.get(3).is_empty() {
                    return Err(Error::msg(
                        "ERR When using MIGRATE KEYS option, the key argument must be set to \
                         the empty string",
                    ));
                }
                o.first_key = j + 1;
                o.keys = args.len() - j - 1;
                break;
            }
            _ => return Err(Error::Syntax),
        }
        j += 1;
    }
    Ok(o)
}

/// C's `atoi` for the port: leading digits, 0 when none (the connection then fails).
fn atoi_port(s: &[u8]) -> u16 {
    let digits = s.iter().take_while(|b| b.is_ascii_digit());
    let n = digits.fold(0u64, |n, d| (n * 10 + u64::from(d - b'0')).min(1 << 20));
    u16::try_from(n).unwrap_or(0)
}

/// The first half: validates, finds the keys that exist, and hands the shell the bytes.
fn migrate(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let o = options(args)?;
    let timeout = parse_i64(args.get(5)).ok_or(Error::NotInteger)?;
    let db = parse_i64(args.get(4)).ok_or(Error::NotInteger)?;
    let timeout_ms = if timeout <= 0 { 1000 } else { timeout as u64 };
    if cx.core.script_running || cx.core.txn.in_multi(cx.me) {
        return Err(Error::msg(
            "ERR MIGRATE is not supported inside MULTI/EXEC or scripts",
        ));
    }
    let now = cx.now_ms();
    let present: Vec<&[u8]> = (o.first_key..o.first_key + o.keys)
        .map(|i| args.get(i))
        .filter(|k| cx.db().lookup_read(k, now).is_some())
        .collect();
    if present.is_empty() {
        out.simple("NOKEY");
        return Ok(());
    }
    let codec = cx
        .core
        .persist
        .codec
        .ok_or_else(|| Error::msg("ERR DUMP/RESTORE are not available in this build"))?;
    let name = link_name(args);
    let select = cx.core.migrate.selected(&name) != Some(db as usize);
    let mut payload = Vec::new();
    let mut replies = 0;
    if let Some(pw) = o.password {
        match o.user {
            Some(user) => aof::encode(&mut payload, &[b"AUTH", user, pw]),
            None => aof::encode(&mut payload, &[b"AUTH", pw]),
        }
        replies += 1;
    }
    if select {
        aof::encode(&mut payload, &[b"SELECT", aof::itoa(db as u64).as_bytes()]);
        replies += 1;
    }
    let compress = cx.core.config.rdbcompression;
    let mut keys = Vec::with_capacity(present.len());
    for key in present {
        let ttl = match cx.db().expire_at(key) {
            Some(at) if at < now => continue,
            Some(at) => (at - now).max(1),
            None => 0,
        };
        let Some(entry) = cx.db().peek(key, now) else {
            continue;
        };
        let dump = codec.dump(entry.value(), compress);
        let ttl = aof::itoa(ttl);
        let mut restore: Vec<&[u8]> = alloc::vec![b"RESTORE", key, ttl.as_bytes(), &dump];
        if o.replace {
            restore.push(b"REPLACE");
        }
        aof::encode(&mut payload, &restore);
        keys.push(Key::from(key));
    }
    replies += keys.len();
    let pending = Pending {
        name: name.clone(),
        db: db as usize,
        keys,
        copy: o.copy,
        auth: o.password.is_some(),
        select,
    };
    cx.core.migrate.wait(cx.me, pending);
    cx.core.migrate.job = Some(MigrateJob {
        name,
        host: String::from_utf8_lossy(args.get(1)).into_owned(),
        port: atoi_port(args.get(2)),
        timeout_ms,
        payload,
        replies,
    });
    cx.outcome = Outcome::Migrate;
    Ok(())
}

/// `host:port`, the link's name in the cache.
fn link_name(args: &Argv<'_>) -> String {
    let mut name = String::from_utf8_lossy(args.get(1)).into_owned();
    name.push(':');
    name.push_str(&String::from_utf8_lossy(args.get(2)));
    name
}

/// The second half: the replies the shell read (in order; fewer than asked when `error` cut
/// them short). Deletes each key the target acknowledged (unless COPY), propagates those as
/// one DEL, and answers `+OK`, the target's first error, or `IOERR`.
pub fn finish(
    cx: &mut Cx<'_>,
    replies: &[Reply],
    error: Option<LinkError>,
    out: &mut dyn ReplySink,
) -> CmdResult {
    let Some(p) = cx.core.migrate.take(cx.me) else {
        return Ok(());
    };
    let now = cx.now_ms();
    cx.core.migrate.touch(&p.name, now, cx.core.rng.next_u64());
    let mut at = 0;
    let mut preamble = |wanted: bool| {
        wanted.then(|| {
            at += 1;
            replies.get(at - 1)
        })
    };
    let auth = preamble(p.auth);
    let select = preamble(p.select);
    // The AUTH or SELECT reply missing: the link failed before any key.
    if auth.is_some_and(|r| r.is_none()) || select.is_some_and(|r| r.is_none()) {
        return Err(io_error(cx, &p, error.unwrap_or(LinkError::Read)));
    }
    let first_error = |r: Option<Option<&Reply>>| match r {
        Some(Some(Reply::Error(e))) => Some(e.clone()),
        _ => None,
    };
    let preamble_error = first_error(auth).or_else(|| first_error(select));
    let mut target_error: Option<String> = None;
    let mut deleted: Vec<&[u8]> = Vec::new();
    for (i, key) in p.keys.iter().enumerate() {
        let Some(reply) = replies.get(at + i) else {
            break;
        };
        let error = match (&preamble_error, reply) {
            (Some(e), _) => Some(e.clone()),
            (None, Reply::Error(e)) => Some(e.clone()),
            _ => None,
        };
        if let Some(e) = error {
            target_error.get_or_insert(e);
        } else if !p.copy && cx.db().remove(key, now).is_some() {
            emit(cx, nc::GENERIC, "del", key);
            deleted.push(&key[..]);
        }
    }
    if !deleted.is_empty() {
        let mut del: Vec<&[u8]> = alloc::vec![b"DEL"];
        del.extend(deleted.iter().copied());
        cx.propagate(&del);
    }
    if let Some(e) = target_error {
        cx.core.migrate.set_selected(&p.name, None);
        return Err(Error::msg(alloc::format!(
            "ERR Target instance replied with error: {e}"
        )));
    }
    if let Some(e) = error {
        return Err(io_error(cx, &p, e));
    }
    cx.core.migrate.set_selected(&p.name, Some(p.db));
    out.ok();
    Ok(())
}

/// The link failed: it is closed, and the client gets Redis's `IOERR`.
fn io_error(cx: &mut Cx<'_>, p: &Pending, e: LinkError) -> Error {
    cx.core.migrate.close(&p.name);
    Error::msg(match e {
        LinkError::Connect => "IOERR error or timeout connecting to the client",
        LinkError::Write => "IOERR error or timeout writing to target instance",
        LinkError::Read => "IOERR error or timeout reading to target instance",
    })
}
