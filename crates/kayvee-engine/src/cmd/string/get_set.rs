//! GET, SET and its variants (SETNX, SETEX, PSETEX), MGET/MSET/MSETNX, GETSET, GETDEL, GETEX:
//! the string commands that read or replace a whole value. Option parsing for SET and GETEX is
//! in `options`.
//!
//! Semantics and reply texts follow Redis 7.0.15 (checked against the real server).

mod options;

use super::as_str;
use crate::argv::Argv;
use crate::cmd::notify::{class as nc, emit};
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::Cx;
use alloc::vec::Vec;
use options::{expire_at_ms, ExpireUnit, Mode, SetOpts};

/// GET key: the hot path, one hash lookup and no allocation.
pub(super) fn get(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let now = cx.now_ms();
    match cx.db().lookup_read(args.get(1), now) {
        Some(e) => out.bulk(as_str(e)?),
        None => out.null(),
    }
    Ok(())
}

/// SET key value [NX|XX] [GET] [EX s|PX ms|EXAT t|PXAT t|KEEPTTL]. Options are parsed only
/// when there are some, so plain SET is one store.
pub(super) fn set(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let now = cx.now_ms();
    if args.len() == 3 {
        cx.db().set_str(args.get(1), args.get(2), now, false);
        cx.propagate_verbatim();
        emit(cx, nc::STRING, "set", args.get(1));
        out.ok();
        return Ok(());
    }
    let opts = SetOpts::parse(args, 3, Mode::Set)?;
    let at = opts.expire_at(now, "set")?;
    set_generic(cx, args, &opts, at, out)
}

/// The body of SET once options are known: GET's old value first (WRONGTYPE stops here),
/// then the NX/XX condition, the store and the TTL.
fn set_generic(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    opts: &SetOpts<'_>,
    at: Option<u64>,
    out: &mut dyn ReplySink,
) -> CmdResult {
    let (key, val) = (args.get(1), args.get(2));
    let now = cx.now_ms();
    let db = cx.db();
    if opts.get {
        match db.lookup_read(key, now) {
            Some(e) => out.bulk(as_str(e)?),
            None => out.null(),
        }
    }
    if opts.nx || opts.xx {
        let found = db.contains(key, now);
        if (opts.nx && found) || (opts.xx && !found) {
            if !opts.get {
                out.null();
            }
            return Ok(());
        }
    }
    db.set_str(key, val, now, opts.keepttl);
    match at {
        Some(at) => {
            // A time already past still stores the key; it expires on its next access, as in
            // 7.0.
            db.set_expire(key, at);
            propagate_set_pxat(cx, key, val, at);
        }
        None if opts.get => propagate_without_get(cx, args),
        None => cx.propagate_verbatim(),
    }
    emit(cx, nc::STRING, "set", key);
    if at.is_some() {
        emit(cx, nc::GENERIC, "expire", key);
    }
    if !opts.get {
        out.ok();
    }
    Ok(())
}

/// Propagates a SET with a TTL (SET EX/PX/EXAT/PXAT, SETEX, PSETEX) as the absolute
/// `SET key value PXAT ms`.
fn propagate_set_pxat(cx: &mut Cx<'_>, key: &[u8], val: &[u8], at_ms: u64) {
    if cx.propagating() {
        let ms = crate::aof::itoa(at_ms);
        cx.propagate(&[b"SET", key, val, b"PXAT", ms.as_bytes()]);
    }
}

/// Propagates `SET ... GET` without its GET option (the old value only matters to the
/// client), as Redis 7.0 does; the other arguments keep the client's spelling.
fn propagate_without_get(cx: &mut Cx<'_>, args: &Argv<'_>) {
    if !cx.propagating() {
        return;
    }
    let mut dropped = false;
    let prop: Vec<&[u8]> = args
        .iter()
        .enumerate()
        .filter(|&(i, a)| {
            let get = !dropped && i >= 3 && a.eq_ignore_ascii_case(b"GET");
            dropped |= get;
            !get
        })
        .map(|(_, a)| a)
        .collect();
    cx.propagate(&prop);
}

/// SETNX key value: 1 when stored, 0 when the key existed.
pub(super) fn setnx(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let now = cx.now_ms();
    let db = cx.db();
    if db.contains(args.get(1), now) {
        out.int(0);
    } else {
        db.set_str(args.get(1), args.get(2), now, false);
        cx.propagate_verbatim();
        emit(cx, nc::STRING, "set", args.get(1));
        out.int(1);
    }
    Ok(())
}

/// SETEX key seconds value.
pub(super) fn setex(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    set_with_ttl(cx, args, ExpireUnit::Seconds, "setex", out)
}

/// PSETEX key milliseconds value.
pub(super) fn psetex(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    set_with_ttl(cx, args, ExpireUnit::Millis, "psetex", out)
}

/// SETEX/PSETEX: a SET with a relative TTL given as the second argument.
fn set_with_ttl(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    unit: ExpireUnit,
    cmd: &str,
    out: &mut dyn ReplySink,
) -> CmdResult {
    let now = cx.now_ms();
    let at = expire_at_ms(args.get(2), unit, false, now, cmd)?;
    let key = args.get(1);
    let db = cx.db();
    db.set_str(key, args.get(3), now, false);
    db.set_expire(key, at);
    propagate_set_pxat(cx, key, args.get(3), at);
    emit(cx, nc::STRING, "set", key);
    emit(cx, nc::GENERIC, "expire", key);
    out.ok();
    Ok(())
}

/// MGET key [key ...]: nil for missing keys and for keys of other types.
pub(super) fn mget(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let now = cx.now_ms();
    let db = cx.db();
    out.array(args.len() - 1);
    for key in args.iter().skip(1) {
        match db.lookup_read(key, now).map(as_str) {
            Some(Ok(s)) => out.bulk(s),
            _ => out.null(),
        }
    }
    Ok(())
}

/// Checks MSET/MSETNX's key/value pairing (Redis reports an odd count as an arity error).
fn check_pairs(args: &Argv<'_>, cmd: &str) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Err(Error::WrongArity(cmd.into()));
    }
    Ok(())
}

/// MSET key value [key value ...]
pub(super) fn mset(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    check_pairs(args, "mset")?;
    mset_all(cx, args);
    out.ok();
    Ok(())
}

/// Stores every pair of MSET/MSETNX, later pairs winning.
fn mset_all(cx: &mut Cx<'_>, args: &Argv<'_>) {
    let now = cx.now_ms();
    for i in (1..args.len()).step_by(2) {
        cx.db().set_str(args.get(i), args.get(i + 1), now, false);
        cx.propagate_verbatim();
        emit(cx, nc::STRING, "set", args.get(i));
    }
}

/// MSETNX key value [key value ...]: all or nothing; 0 when any key exists.
pub(super) fn msetnx(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    check_pairs(args, "msetnx")?;
    let now = cx.now_ms();
    let db = cx.db();
    if (1..args.len())
        .step_by(2)
        .any(|i| db.contains(args.get(i), now))
    {
        out.int(0);
        return Ok(());
    }
    mset_all(cx, args);
    out.int(1);
    Ok(())
}

/// GETSET key value: replies the old value, stores the new one (dropping any TTL).
pub(super) fn getset(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let now = cx.now_ms();
    let db = cx.db();
    match db.lookup_read(args.get(1), now) {
        Some(e) => out.bulk(as_str(e)?),
        None => out.null(),
    }
    db.set_str(args.get(1), args.get(2), now, false);
    // Propagated as SET, as Redis rewrites it.
    cx.propagate(&[b"SET", args.get(1), args.get(2)]);
    emit(cx, nc::STRING, "set", args.get(1));
    Ok(())
}

/// GETDEL key: replies the value and deletes the key (nil when missing).
pub(super) fn getdel(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let now = cx.now_ms();
    let db = cx.db();
    match db.lookup_read(args.get(1), now) {
        Some(e) => out.bulk(as_str(e)?),
        None => {
            out.null();
            return Ok(());
        }
    }
    db.remove(args.get(1), now);
    cx.propagate(&[b"DEL", args.get(1)]);
    emit(cx, nc::GENERIC, "del", args.get(1));
    Ok(())
}

/// GETEX key [EX s|PX ms|EXAT t|PXAT t|PERSIST]: GET that also sets or clears the TTL; a time
/// already past deletes the key. Option syntax is checked first, the expire value only after
/// the lookup (a missing key answers nil even to `EX 0`), as in Redis.
pub(super) fn getex(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let opts = SetOpts::parse(args, 2, Mode::GetEx)?;
    let now = cx.now_ms();
    let key = args.get(1);
    let db = cx.db();
    let Some(e) = db.lookup_read(key, now) else {
        out.null();
        return Ok(());
    };
    let s = as_str(e)?;
    // The expire value is checked only once the key is known to hold a string.
    let at = opts.expire_at(now, "getex")?;
    out.bulk(s);
    let event = match at {
        Some(at) if at <= now => db.remove(key, now).map(|_| "del"),
        Some(at) => db.set_expire(key, at).then_some("expire"),
        None if opts.persist => db.persist(key).then_some("persist"),
        None => None,
    };
    if let Some(event) = event {
        match (event, at) {
            ("expire", Some(at)) if cx.propagating() => {
                let ms = crate::aof::itoa(at);
                cx.propagate(&[b"PEXPIREAT", key, ms.as_bytes()]);
            }
            ("del", _) => cx.propagate(&[b"DEL", key]),
            ("persist", _) => cx.propagate(&[b"PERSIST", key]),
            _ => {}
        }
        emit(cx, nc::GENERIC, event, key);
    }
    Ok(())
}
#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{ArgvBuf, Config, ConnInfo, Engine, Handle, Now, Reply, ReplyTree, Transport};
    use alloc::string::String;

    /// An engine with one client, for tests that need a configuration or look inside values.
    pub(crate) struct Bench {
        pub engine: Engine,
        client: Handle,
        now: Now,
    }

    impl Bench {
        pub fn new(config: Config) -> Self {
            let now = Now::from_ms(1_700_000_000_000);
            let mut engine = Engine::new(config, 7, now);
            let conn = ConnInfo {
                transport: Transport::Unix {
                    path: String::from("/t"),
                },
                fd: 1,
            };
            let client = engine.connect(conn, now);
            Bench {
                engine,
                client,
                now,
            }
        }

        /// Runs a whitespace-separated command; returns its one reply.
        pub fn run(&mut self, line: &str) -> Reply {
            self.run_args(&line.split_ascii_whitespace().collect::<Vec<_>>())
        }

        /// Runs a command given as arguments; returns its one reply.
        pub fn run_args(&mut self, args: &[&str]) -> Reply {
            let argv = ArgvBuf::from_args(args);
            let mut tree = ReplyTree::new(Default::default());
            self.engine
                .execute(self.client, &argv.argv(), self.now, &mut tree);
            tree.take().pop().expect("one reply")
        }

        /// The encoding OBJECT ENCODING would report for a key of db 0.
        pub fn encoding(&mut self, key: &str) -> &'static str {
            let e = self.engine.core.dbs[0]
                .peek(key.as_bytes(), 0)
                .expect("key");
            e.encoding()
        }
    }

    fn too_long() -> Reply {
        Reply::Error(alloc::format!("{}", Error::StringTooLong))
    }

    #[test]
    fn growth_is_bounded_by_proto_max_bulk_len() {
        let mut b = Bench::new(Config {
            proto_max_bulk_len: 10,
            ..Config::default()
        });
        assert_eq!(b.run("APPEND k 12345678"), Reply::Int(8));
        assert_eq!(b.run("APPEND k 12"), Reply::Int(10));
        assert_eq!(b.run("APPEND k x"), too_long());
        assert_eq!(b.run("SETRANGE k 9 x"), Reply::Int(10));
        assert_eq!(b.run("SETRANGE k 9 xy"), too_long());
        assert_eq!(b.run("SETRANGE n 10 x"), too_long());
        assert_eq!(b.run("GET k"), Reply::Bulk(b"123456781x".to_vec()));
        let bad_offset = Reply::Error("ERR bit offset is not an integer or out of range".into());
        assert_eq!(b.run("SETBIT k 80 1"), bad_offset);
        assert_eq!(b.run("GETBIT k 80"), bad_offset);
        assert_eq!(b.run("SETBIT k 79 1"), Reply::Int(0));
    }

    #[test]
    fn encodings_match_redis() {
        // Each expectation was checked with OBJECT ENCODING on redis-server 7.0.15.
        let mut b = Bench::new(Config::default());
        let cases = [
            ("SET a 123", "a", "int"),
            ("SET a abc", "a", "embstr"),
            ("MSET m 5", "m", "int"),
            ("GETSET m 7", "m", "int"),
            ("SETEX e 100 7", "e", "int"),
            ("INCRBYFLOAT f 3001", "f", "embstr"),
            ("INCRBYFLOAT f 1.5", "f", "embstr"),
            ("INCR f2", "f2", "int"),
            ("APPEND n 12", "n", "int"),
            ("SET x 1", "x", "int"),
            ("SETRANGE x 0 y", "x", "raw"),
            ("INCR i", "i", "int"),
            ("INCRBY i 5", "i", "int"),
            ("SETRANGE s 0 5", "s", "raw"),
            ("SETBIT bt 1 1", "bt", "raw"),
            ("SET c 12", "c", "int"),
            ("SETBIT c 100 0", "c", "raw"),
            ("BITOP NOT d c", "d", "raw"),
        ];
        for (cmd, key, want) in cases {
            b.run(cmd);
            assert_eq!(b.encoding(key), want, "after {cmd}");
        }
        b.run("SET z 10");
        b.run("INCRBYFLOAT z 1");
        assert_eq!(b.encoding("z"), "embstr");
        b.run("INCR z");
        assert_eq!(b.encoding("z"), "int");
        b.run("SET r 1");
        b.run_args(&["SETRANGE", "r", "0", ""]);
        assert_eq!(b.encoding("r"), "int");
        b.run_args(&["APPEND", "r", ""]);
        assert_eq!(b.encoding("r"), "raw");
        b.run_args(&["APPEND", "new", ""]);
        assert_eq!(b.encoding("new"), "embstr");
    }
}
