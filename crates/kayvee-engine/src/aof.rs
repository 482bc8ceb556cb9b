//! Command propagation for the append-only file: after each write, the commands that reproduce
//! its effect deterministically, RESP-encoded, in the shapes Redis 7.0.15 writes to its AOF
//! (checked against `appendonlydir/*.incr.aof` of the real server).
//!
//! Rules (Redis 7.0.15's, observed):
//! - A write that changed nothing (DEL of a missing key, SADD of a present member, SET NX that
//!   failed...) is not propagated. Kayvee tells them apart by the reply (see [`is_noop`]).
//! - Relative and random effects become absolute: EXPIRE/PEXPIRE/EXPIREAT/GETEX EX become
//!   `PEXPIREAT key ms` (its NX/XX/GT/LT kept), or `DEL key` when the time is already past; SET
//!   with EX/PX/EXAT/PXAT, SETEX and PSETEX become `SET key value PXAT ms`; INCRBYFLOAT becomes
//!   `SET key value KEEPTTL`, HINCRBYFLOAT `HSET key field value`; SPOP becomes `SREM` of the
//!   popped members (`DEL` when the set is gone); GETDEL becomes `DEL`; RESTORE with a TTL
//!   becomes `RESTORE key ms payload ... ABSTTL`; blocking pops and LMPOP/ZMPOP become
//!   `LPOP|RPOP key [n]`, `ZPOPMIN|ZPOPMAX key [n]`, `LMOVE`, `RPOPLPUSH`.
//! - Keys deleted by expiry (lazily or by the active cycle) become `DEL key` at once.
//! - The commands of one top-level call (EXEC, SPOP with a count) are wrapped in `MULTI` ...
//!   `EXEC` when there are more than one; a `SELECT` precedes a command of another database.
//! - Commands kept verbatim keep the client's spelling; rewritten ones are upper case.
//!
//! Nothing here runs unless the shell turned propagation on ([`crate::Engine::set_propagation`]).

use crate::argv::Argv;
use crate::reply::{Protocol, Reply, ReplySink, ReplyTree};
use crate::Core;
use alloc::vec::Vec;

/// The AOF state INFO persistence reports and BGREWRITEAOF reads; the shell keeps it current.
#[derive(Clone, Debug)]
pub struct AofStatus {
    /// The AOF is on (`aof_enabled`).
    pub on: bool,
    /// Unix ms at which the running rewrite started.
    pub rewrite_started_ms: Option<u64>,
    /// BGREWRITEAOF waits for the running BGSAVE.
    pub rewrite_scheduled: bool,
    /// BGREWRITEAOF asked the shell for a rewrite (the shell clears it when it starts one).
    pub rewrite_requested: bool,
    /// Duration of the last rewrite in seconds (-1: none yet).
    pub last_rewrite_time_s: i64,
    /// Whether the last rewrite succeeded.
    pub last_bgrewrite_ok: bool,
    /// Rewrites done.
    pub rewrites: u64,
    /// Failed rewrites in a row.
    pub consecutive_failures: u64,
    /// Whether the last write to the AOF succeeded.
    pub last_write_ok: bool,
    /// Bytes of the AOF (base plus increments).
    pub current_size: u64,
    /// Bytes of the base after the last rewrite or load.
    pub base_size: u64,
}

impl Default for AofStatus {
    fn default() -> Self {
        AofStatus {
            on: false,
            rewrite_started_ms: None,
            rewrite_scheduled: false,
            rewrite_requested: false,
            last_rewrite_time_s: -1,
            last_bgrewrite_ok: true,
            rewrites: 0,
            consecutive_failures: 0,
            last_write_ok: true,
            current_size: 0,
            base_size: 0,
        }
    }
}

/// The propagation state kept in [`Core`].
#[derive(Default)]
pub struct Propagation {
    /// Whether commands are propagated (AOF on).
    pub enabled: bool,
    /// What INFO and BGREWRITEAOF see.
    pub status: AofStatus,
    /// Encoded commands ready for the shell.
    out: Vec<u8>,
    /// The database the stream last selected (`None`: the next command writes a SELECT).
    db: Option<usize>,
    /// Encoded commands of the running top-level call, and each one's (db, end offset).
    pending: Vec<u8>,
    pending_ops: Vec<(usize, usize)>,
}

impl Propagation {
    /// Forgets the selected database: the next command starts with a SELECT (a new file).
    pub fn reset_db(&mut self) {
        self.db = None;
    }

    /// Moves the encoded commands into `into` (appending).
    pub fn drain_into(&mut self, into: &mut Vec<u8>) {
        if into.is_empty() {
            core::mem::swap(into, &mut self.out);
        } else {
            into.extend_from_slice(&self.out);
            self.out.clear();
        }
    }

    /// Whether encoded commands wait for the shell.
    pub fn has_output(&self) -> bool {
        !self.out.is_empty()
    }

    /// Queues one command of the running call.
    fn push(&mut self, db: usize, args: &[&[u8]]) {
        encode(&mut self.pending, args);
        self.pending_ops.push((db, self.pending.len()));
    }

    /// Writes `SELECT db` into the stream when it is not the stream's database.
    fn select(&mut self, db: usize) {
        if self.db != Some(db) {
            let mut digits = itoa(db as u64);
            encode(&mut self.out, &[b"SELECT", digits.as_bytes_mut()]);
            self.db = Some(db);
        }
    }

    /// Ends the running top-level call: its commands go out, in MULTI/EXEC when more than one.
    pub fn flush(&mut self) {
        if self.pending_ops.is_empty() {
            return;
        }
        let wrap = self.pending_ops.len() > 1;
        if wrap {
            self.select(self.pending_ops[0].0);
            encode(&mut self.out, &[b"MULTI"]);
        }
        let mut start = 0;
        let ops = core::mem::take(&mut self.pending_ops);
        for &(db, end) in &ops {
            self.select(db);
            self.out.extend_from_slice(&self.pending[start..end]);
            start = end;
        }
        if wrap {
            encode(&mut self.out, &[b"EXEC"]);
        }
        self.pending.clear();
        self.pending_ops = ops;
        self.pending_ops.clear();
    }

    /// Emits a command on its own, outside the running call (deletions by expiry).
    fn emit_now(&mut self, db: usize, args: &[&[u8]]) {
        self.select(db);
        encode(&mut self.out, args);
    }
}

/// A small decimal string.
struct Digits {
    buf: [u8; 20],
    start: usize,
}

impl Digits {
    fn as_bytes_mut(&mut self) -> &[u8] {
        &self.buf[self.start..]
    }
}

/// `v` in decimal.
fn itoa(mut v: u64) -> Digits {
    let mut d = Digits {
        buf: [0; 20],
        start: 20,
    };
    loop {
        d.start -= 1;
        d.buf[d.start] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            return d;
        }
    }
}

/// Appends `args` as a RESP multibulk command (the AOF record format).
pub fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    encode_iter(out, args.len(), args.iter().copied());
}

/// [`encode`] from an iterator of `len` arguments (no intermediate vector).
fn encode_iter<'a>(out: &mut Vec<u8>, len: usize, args: impl Iterator<Item = &'a [u8]>) {
    out.push(b'*');
    out.extend_from_slice(itoa(len as u64).as_bytes_mut());
    out.extend_from_slice(b"\r\n");
    for a in args {
        out.push(b'$');
        out.extend_from_slice(itoa(a.len() as u64).as_bytes_mut());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// Turns expiry logging on or off in every database.
pub fn set_enabled(core: &mut Core, on: bool) {
    core.aof.enabled = on;
    core.aof.db = None;
    for db in core.dbs.iter_mut() {
        db.expired_log = on.then(Vec::new);
    }
}

/// Emits `DEL key` for every key expiry deleted since the last call.
pub fn drain_expired(core: &mut Core) {
    for (i, db) in core.dbs.iter_mut().enumerate() {
        let Some(log) = db.expired_log.as_mut().filter(|l| !l.is_empty()) else {
            continue;
        };
        for key in core::mem::take(log) {
            core.aof.emit_now(i, &[b"DEL", &key]);
        }
    }
}

/// Propagates the deletion of `key` from database `db` as `DEL key`, outside the running call:
/// for deletions no command asked for (eviction under `maxmemory`, as Redis 7.0 propagates them).
pub fn propagate_del(core: &mut Core, db: usize, key: &[u8]) {
    if core.aof.enabled {
        core.aof.emit_now(db, &[b"DEL", key]);
    }
}

/// A reply sink that forwards to the client's sink and keeps a copy of the reply, which the
/// propagation rules read.
pub struct Tee<'a> {
    inner: &'a mut dyn ReplySink,
    tree: ReplyTree,
}

impl<'a> Tee<'a> {
    /// Wraps `inner`.
    pub fn new(inner: &'a mut dyn ReplySink) -> Self {
        let tree = ReplyTree::new(inner.protocol());
        Tee { inner, tree }
    }

    /// The first reply written, if any.
    pub fn reply(&mut self) -> Option<Reply> {
        self.tree.take().into_iter().next()
    }
}

impl ReplySink for Tee<'_> {
    fn protocol(&self) -> Protocol {
        self.inner.protocol()
    }
    fn set_protocol(&mut self, p: Protocol) {
        self.inner.set_protocol(p);
        self.tree.set_protocol(p);
    }
    fn simple(&mut self, s: &str) {
        self.inner.simple(s);
        self.tree.simple(s);
    }
    fn error(&mut self, s: &str) {
        self.inner.error(s);
        self.tree.error(s);
    }
    fn error_bytes(&mut self, b: &[u8]) {
        self.inner.error_bytes(b);
        self.tree.error_bytes(b);
    }
    fn int(&mut self, v: i64) {
        self.inner.int(v);
        self.tree.int(v);
    }
    fn bulk(&mut self, b: &[u8]) {
        self.inner.bulk(b);
        self.tree.bulk(b);
    }
    fn null(&mut self) {
        self.inner.null();
        self.tree.null();
    }
    fn null_array(&mut self) {
        self.inner.null_array();
        self.tree.null_array();
    }
    fn array(&mut self, len: usize) {
        self.inner.array(len);
        self.tree.array(len);
    }
    fn map(&mut self, len: usize) {
        self.inner.map(len);
        self.tree.map(len);
    }
    fn set(&mut self, len: usize) {
        self.inner.set(len);
        self.tree.set(len);
    }
    fn push(&mut self, len: usize) {
        self.inner.push(len);
        self.tree.push(len);
    }
    fn double(&mut self, v: f64) {
        self.inner.double(v);
        self.tree.double(v);
    }
    fn boolean(&mut self, v: bool) {
        self.inner.boolean(v);
        self.tree.boolean(v);
    }
    fn verbatim(&mut self, format: &str, text: &[u8]) {
        self.inner.verbatim(format, text);
        self.tree.verbatim(format, text);
    }
    fn big_number(&mut self, digits: &str) {
        self.inner.big_number(digits);
        self.tree.big_number(digits);
    }
}

/// Writes whose integer reply 0 means nothing changed.
const ZERO_NOOP: &[&str] = &[
    "del",
    "unlink",
    "sadd",
    "srem",
    "hdel",
    "zrem",
    "expire",
    "pexpire",
    "expireat",
    "pexpireat",
    "persist",
    "setnx",
    "hsetnx",
    "lrem",
    "renamenx",
    "msetnx",
    "smove",
    "lpushx",
    "rpushx",
    "zremrangebyscore",
    "zremrangebyrank",
    "zremrangebylex",
    "move",
    "copy",
    "linsert",
];

/// Writes whose null (or empty aggregate) reply means nothing changed.
const NULL_NOOP: &[&str] = &[
    "getdel",
    "lpop",
    "rpop",
    "spop",
    "lmove",
    "rpoplpush",
    "getex",
    "blpop",
    "brpop",
    "blmove",
    "brpoplpush",
    "bzpopmin",
    "bzpopmax",
    "lmpop",
    "blmpop",
    "zmpop",
    "bzmpop",
    "zpopmin",
    "zpopmax",
];

/// Whether a successful write with this reply changed nothing (so Redis propagates nothing).
pub fn is_noop(name: &str, reply: Option<&Reply>) -> bool {
    match reply {
        None => true,
        Some(Reply::Int(0)) => ZERO_NOOP.contains(&name),
        Some(Reply::Int(-1)) => name == "linsert",
        Some(Reply::Null | Reply::NullArray) => NULL_NOOP.contains(&name),
        Some(Reply::Array(v) | Reply::Set(v)) if v.is_empty() => NULL_NOOP.contains(&name),
        _ => false,
    }
}

/// What a command propagates, given the state after it ran and its reply.
struct Rule<'c, 'a> {
    core: &'c mut Core,
    db: usize,
    argv: &'c Argv<'a>,
}

impl Rule<'_, '_> {
    fn verbatim(&mut self) {
        let p = &mut self.core.aof;
        encode_iter(&mut p.pending, self.argv.len(), self.argv.iter());
        p.pending_ops.push((self.db, p.pending.len()));
    }

    fn push(&mut self, args: &[&[u8]]) {
        self.core.aof.push(self.db, args);
    }

    /// The key's absolute expiry after the command, if the key is live.
    fn expire_of(&self, key: &[u8]) -> Option<Option<u64>> {
        let db = &self.core.dbs[self.db];
        db.keys.get(key)?;
        Some(db.expire_at(key))
    }

    /// `PEXPIREAT key ms [extra]` when the key has a TTL, `PERSIST`-less `DEL` when it is gone.
    fn absolute_expire(&mut self, key: &[u8], extra: &[&[u8]]) {
        match self.expire_of(key) {
            Some(Some(at)) => {
                let mut ms = itoa(at);
                let mut args: Vec<&[u8]> = alloc::vec![b"PEXPIREAT", key, ms.as_bytes_mut()];
                args.extend_from_slice(extra);
                self.core.aof.push(self.db, &args);
            }
            Some(None) => self.verbatim(),
            None => self.push(&[b"DEL", key]),
        }
    }

    /// `SET key value PXAT ms`, or DEL when the key is gone, or SET when it has no TTL.
    fn set_pxat(&mut self, key: &[u8], value: &[u8]) {
        match self.expire_of(key) {
            Some(Some(at)) => {
                let mut ms = itoa(at);
                self.push(&[b"SET", key, value, b"PXAT", ms.as_bytes_mut()]);
            }
            Some(None) => self.push(&[b"SET", key, value]),
            None => self.push(&[b"DEL", key]),
        }
    }
}

/// Whether `argv[from..]` holds one of `words` (any case).
fn has_word(argv: &Argv<'_>, from: usize, words: &[&str]) -> bool {
    argv.iter()
        .skip(from)
        .any(|a| words.iter().any(|w| a.eq_ignore_ascii_case(w.as_bytes())))
}

/// The bulk strings of an array reply (or of a nested array at `index`).
fn bulks(reply: &Reply) -> Vec<&[u8]> {
    match reply {
        Reply::Array(v) | Reply::Set(v) => v
            .iter()
            .filter_map(|r| match r {
                Reply::Bulk(b) => Some(&b[..]),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Element `i` of an array reply as bytes.
fn item(reply: &Reply, i: usize) -> Option<&[u8]> {
    match reply {
        Reply::Array(v) => match v.get(i)? {
            Reply::Bulk(b) => Some(b),
            _ => None,
        },
        _ => None,
    }
}

/// How many items an LMPOP/ZMPOP reply (`[key, items]`, or a map in RESP3) holds.
fn mpop_count(reply: &Reply) -> usize {
    let items = match reply {
        Reply::Array(v) => v.get(1),
        Reply::Map(m) => m.first().map(|(_, v)| v),
        _ => None,
    };
    match items {
        Some(Reply::Array(a) | Reply::Set(a)) => a.len(),
        Some(Reply::Map(m)) => m.len(),
        _ => 0,
    }
}

/// The key of an LMPOP/ZMPOP reply (an array `[key, items]`, a map in RESP3).
fn mpop_key(reply: &Reply) -> Option<&[u8]> {
    match reply {
        Reply::Map(m) => match m.first() {
            Some((Reply::Bulk(k), _)) => Some(k),
            _ => None,
        },
        r => item(r, 0),
    }
}

/// Records what a successful write command propagates (run after its handler, with its reply).
pub fn after_command(
    core: &mut Core,
    db: usize,
    name: &str,
    argv: &Argv<'_>,
    reply: Option<&Reply>,
) {
    if is_noop(name, reply) {
        return;
    }
    let mut r = Rule { core, db, argv };
    let key = argv.try_get(1).unwrap_or_default();
    match name {
        "set" => {
            if has_word(argv, 3, &["EX", "PX", "EXAT", "PXAT"]) {
                r.set_pxat(key, argv.get(2));
            } else if matches!(reply, Some(Reply::Null)) && !has_word(argv, 3, &["GET"]) {
                // NX / XX refused: nothing changed.
            } else {
                r.verbatim();
            }
        }
        "setex" | "psetex" => r.set_pxat(key, argv.get(3)),
        "expire" | "pexpire" | "expireat" | "pexpireat" => {
            let extra: Vec<&[u8]> = argv.iter().skip(3).collect();
            r.absolute_expire(key, &extra);
        }
        "getex" => getex(&mut r, key),
        "getdel" => r.push(&[b"DEL", key]),
        "incrbyfloat" => {
            if let Some(Reply::Bulk(v)) = reply {
                r.push(&[b"SET", key, v, b"KEEPTTL"]);
            }
        }
        "hincrbyfloat" => {
            if let Some(Reply::Bulk(v)) = reply {
                r.push(&[b"HSET", key, argv.get(2), v]);
            }
        }
        "spop" => spop(&mut r, key, reply.expect("not a no-op")),
        "restore" => restore(&mut r, key),
        _ => pops(&mut r, name, reply.expect("not a no-op")),
    }
}

/// GETEX: `PEXPIREAT` / `DEL` for EX, PX, EXAT, PXAT; `PERSIST` for PERSIST; nothing without
/// an option.
fn getex(r: &mut Rule<'_, '_>, key: &[u8]) {
    if has_word(r.argv, 2, &["PERSIST"]) {
        r.push(&[b"PERSIST", key]);
    } else if r.argv.len() > 2 {
        r.absolute_expire(key, &[]);
    }
}

/// SPOP: `SREM key member` per popped member, or `DEL key` when the set is gone.
fn spop(r: &mut Rule<'_, '_>, key: &[u8], reply: &Reply) {
    let members: Vec<&[u8]> = match reply {
        Reply::Bulk(b) => alloc::vec![&b[..]],
        other => bulks(other),
    };
    if r.argv.len() > 2 && r.expire_of(key).is_none() {
        r.push(&[b"DEL", key]);
        return;
    }
    for m in members {
        r.push(&[b"SREM", key, m]);
    }
}

/// RESTORE with a relative TTL: `RESTORE key abs-ms payload [options] ABSTTL`.
fn restore(r: &mut Rule<'_, '_>, key: &[u8]) {
    let ttl = r.argv.get(2);
    if ttl == b"0" || has_word(r.argv, 4, &["ABSTTL"]) {
        r.verbatim();
        return;
    }
    let Some(Some(at)) = r.expire_of(key) else {
        r.verbatim();
        return;
    };
    let mut ms = itoa(at);
    let mut args: Vec<&[u8]> = alloc::vec![b"RESTORE", key, ms.as_bytes_mut(), r.argv.get(3)];
    args.extend(r.argv.iter().skip(4));
    args.push(b"ABSTTL");
    r.core.aof.push(r.db, &args);
}

/// Blocking pops and the multi-key pops become their plain single-key forms; anything else is
/// propagated verbatim.
fn pops(r: &mut Rule<'_, '_>, name: &str, reply: &Reply) {
    let argv = r.argv;
    match name {
        "blpop" | "brpop" | "bzpopmin" | "bzpopmax" => {
            let cmd: &[u8] = match name {
                "blpop" => b"LPOP",
                "brpop" => b"RPOP",
                "bzpopmin" => b"ZPOPMIN",
                _ => b"ZPOPMAX",
            };
            if let Some(key) = item(reply, 0) {
                r.push(&[cmd, key]);
            }
        }
        "blmove" => {
            let args: Vec<&[u8]> = core::iter::once(&b"LMOVE"[..])
                .chain(argv.iter().skip(1).take(4))
                .collect();
            r.push(&args);
        }
        "brpoplpush" => r.push(&[b"RPOPLPUSH", argv.get(1), argv.get(2)]),
        "lmpop" | "blmpop" | "zmpop" | "bzmpop" => mpop(r, name, reply),
        _ => r.verbatim(),
    }
}

/// LMPOP / ZMPOP (and the blocking forms): `LPOP|RPOP|ZPOPMIN|ZPOPMAX key count`.
fn mpop(r: &mut Rule<'_, '_>, name: &str, reply: &Reply) {
    let argv = r.argv;
    let first = if name.starts_with('b') { 2 } else { 1 };
    let Some(numkeys) = crate::util::parse_u64(argv.get(first)) else {
        return;
    };
    let dir = argv.get(first + 1 + numkeys as usize);
    let cmd: &[u8] = match (
        name.ends_with("zmpop"),
        dir.eq_ignore_ascii_case(b"left") || dir.eq_ignore_ascii_case(b"min"),
    ) {
        (false, true) => b"LPOP",
        (false, false) => b"RPOP",
        (true, true) => b"ZPOPMIN",
        (true, false) => b"ZPOPMAX",
    };
    let Some(key) = mpop_key(reply) else {
        return;
    };
    let key = key.to_vec();
    let mut n = itoa(mpop_count(reply) as u64);
    r.push(&[cmd, &key, n.as_bytes_mut()]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ArgvBuf, Config, ConnInfo, Engine, Handle, Now, Transport};
    use alloc::string::String;

    /// An engine with propagation on and two clients.
    struct T {
        e: Engine,
        c: [Handle; 2],
        now: Now,
    }

    impl T {
        fn new() -> Self {
            let now = Now::from_ms(1_700_000_000_000);
            let mut e = Engine::new(Config::default(), 7, now);
            let conn = || ConnInfo {
                transport: Transport::Unix { path: "/t".into() },
                fd: 1,
            };
            let c = [e.connect(conn(), now), e.connect(conn(), now)];
            e.set_propagation(true);
            T { e, c, now }
        }

        /// Runs a command on client `i`.
        fn on(&mut self, i: usize, line: &str) {
            let args: Vec<&str> = line.split_ascii_whitespace().collect();
            let argv = ArgvBuf::from_args(&args);
            let mut tree = ReplyTree::new(Default::default());
            self.e.execute(self.c[i], &argv.argv(), self.now, &mut tree);
        }

        /// Runs commands on client 0 and returns what they propagated, one line per command.
        fn run(&mut self, lines: &[&str]) -> Vec<String> {
            lines.iter().for_each(|l| self.on(0, l));
            self.take()
        }

        fn take(&mut self) -> Vec<String> {
            let mut buf = Vec::new();
            self.e.drain_propagated(&mut buf);
            decode(&buf)
        }
    }

    /// Decodes RESP multibulk commands into space-joined lines.
    fn decode(mut b: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        let num = |b: &mut &[u8]| -> usize {
            let end = b.iter().position(|&c| c == b'\r').unwrap();
            let n = core::str::from_utf8(&b[1..end]).unwrap().parse().unwrap();
            *b = &b[end + 2..];
            n
        };
        while !b.is_empty() {
            let n = num(&mut b);
            let mut args = Vec::new();
            for _ in 0..n {
                let len = num(&mut b);
                args.push(String::from_utf8_lossy(&b[..len]).into_owned());
                b = &b[len + 2..];
            }
            out.push(args.join(" "));
        }
        out
    }

    #[test]
    fn plain_writes_are_verbatim_and_noops_are_dropped() {
        let mut t = T::new();
        let got = t.run(&[
            "set a 1",
            "get a",
            "del zzz",
            "set a 2 nx",
            "sadd s x",
            "sadd s x",
        ]);
        assert_eq!(got, ["SELECT 0", "set a 1", "sadd s x"]);
        assert_eq!(
            t.run(&["select 3", "set x y", "select 0", "set y z"]),
            ["SELECT 3", "set x y", "SELECT 0", "set y z"]
        );
        assert_eq!(t.run(&["flushall"]), ["flushall"]);
    }

    #[test]
    fn relative_times_become_absolute() {
        let mut t = T::new();
        let got = t.run(&[
            "set b 2 ex 100",
            "setex c 100 v",
            "psetex d 100000 v",
            "set e v px 5000 nx",
            "expire b 1000",
            "expire b 2000 gt",
            "pexpireat b 99999999999000",
            "getex e persist",
            "getex e",
            "set f v keepttl",
            "expire f -1",
        ]);
        assert_eq!(
            got,
            [
                "SELECT 0",
                "SET b 2 PXAT 1700000100000",
                "SET c v PXAT 1700000100000",
                "SET d v PXAT 1700000100000",
                "SET e v PXAT 1700000005000",
                "PEXPIREAT b 1700001000000",
                "PEXPIREAT b 1700002000000 gt",
                "PEXPIREAT b 99999999999000",
                "PERSIST e",
                "set f v keepttl",
                "DEL f",
            ]
        );
    }

    #[test]
    fn floats_and_random_pops_become_deterministic() {
        let mut t = T::new();
        let got = t.run(&["incrbyfloat fl 1.5", "hincrbyfloat h f 2.5", "sadd s 1 2 3"]);
        assert_eq!(
            got[1..],
            ["SET fl 1.5 KEEPTTL", "HSET h f 2.5", "sadd s 1 2 3"]
        );
        let got = t.run(&["spop s"]);
        assert_eq!(got.len(), 1);
        assert!(got[0].starts_with("SREM s "), "{got:?}");
        let got = t.run(&["spop s 1"]);
        assert!(got.len() == 1 && got[0].starts_with("SREM s "), "{got:?}");
        assert_eq!(
            t.run(&["sadd s 7 8 9", "spop s 2"]).len(),
            5,
            "sadd, MULTI, 2 SREM, EXEC"
        );
        assert_eq!(t.run(&["spop s 10", "spop s"]), ["DEL s"]);
    }

    #[test]
    fn blocking_and_multi_pops_become_plain_pops() {
        let mut t = T::new();
        let got = t.run(&[
            "lpush l a b c d",
            "blpop l 0",
            "blmove l l2 left right 0",
            "blmpop 0 1 l left",
            "lmpop 1 l right count 5",
            "zadd z 1 a 2 b 3 c",
            "bzpopmin z 0",
            "zmpop 1 z max count 2",
            "brpoplpush l l3 0",
        ]);
        assert_eq!(
            got,
            [
                "SELECT 0",
                "lpush l a b c d",
                "LPOP l",
                "LMOVE l l2 left right",
                "LPOP l 1",
                "RPOP l 1",
                "zadd z 1 a 2 b 3 c",
                "ZPOPMIN z",
                "ZPOPMAX z 2",
            ]
        );
    }

    #[test]
    fn served_blocked_clients_propagate_after_the_push() {
        let mut t = T::new();
        t.on(1, "blpop q 0");
        assert_eq!(t.take(), Vec::<String>::new());
        assert_eq!(
            t.run(&["rpush q x y"]),
            ["SELECT 0", "rpush q x y", "LPOP q"]
        );
    }

    #[test]
    fn transactions_wrap_more_than_one_command() {
        let mut t = T::new();
        let got = t.run(&["multi", "set a 1", "incr a", "get a", "exec"]);
        assert_eq!(got, ["SELECT 0", "MULTI", "set a 1", "incr a", "EXEC"]);
        assert_eq!(t.run(&["multi", "get a", "exec"]), Vec::<String>::new());
        assert_eq!(
            t.run(&["multi", "set e v ex 10", "exec"]),
            ["SET e v PXAT 1700000010000"]
        );
    }

    #[test]
    fn expired_keys_become_del() {
        let mut t = T::new();
        t.run(&["set k v px 10", "set k2 v px 10"]);
        t.now = Now::from_ms(t.now.ms() + 20);
        assert_eq!(t.run(&["get k", "incr k2"]), ["DEL k", "DEL k2", "incr k2"]);
        t.run(&["set k3 v px 10"]);
        t.now = Now::from_ms(t.now.ms() + 20);
        t.e.cron(t.now);
        assert_eq!(t.take(), ["DEL k3"]);
    }

    #[test]
    fn evictions_propagate_as_del_in_their_database() {
        let mut t = T::new();
        t.run(&["set a 1"]);
        propagate_del(&mut t.e.core, 2, b"victim");
        assert_eq!(t.take(), ["SELECT 2", "DEL victim"]);
    }

    #[test]
    fn nothing_is_recorded_when_propagation_is_off() {
        let mut t = T::new();
        t.e.set_propagation(false);
        t.run(&["set a 1", "set b 1 px 1"]);
        t.now = Now::from_ms(t.now.ms() + 5);
        t.run(&["get b"]);
        assert!(!t.e.has_propagated());
        assert!(t.e.core.dbs.iter().all(|d| d.expired_log.is_none()));
    }
}
