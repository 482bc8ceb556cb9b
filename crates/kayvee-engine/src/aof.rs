//! The propagated command stream for the append-only file and the replicas: encoding,
//! the `SELECT` before a command of another database, the `MULTI`/`EXEC` around the commands of
//! one top-level call, and the shell's interface ([`crate::Engine::drain_propagated`],
//! [`crate::Engine::set_propagation`]).
//!
//! What a write propagates is decided where it runs: the handler calls
//! [`crate::Cx::propagate`] (a rewritten form) or [`crate::Cx::propagate_verbatim`] (as the
//! client sent it) when it changed the dataset, as Redis's commands call `alsoPropagate`; a
//! key deleted by expiry or eviction arrives through the key event stream
//! ([`Propagation::on_key_event`]).
//! The shapes are Redis 7.0.15's (checked against `appendonlydir/*.incr.aof` of the real
//! server):
//! - A write that changed nothing (DEL of a missing key, SADD of a present member, SET NX that
//!   failed...) is not propagated.
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
//! Nothing here runs unless the shell turned propagation on ([`crate::Engine::set_propagation`]):
//! with it off a write's propagation is one flag test.

use crate::argv::Argv;
use crate::events::KeyEvent;
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
    /// CONFIG SET appendonly yes ran inside EXEC: the shell turns the AOF on after it and
    /// says so in the log, as Redis schedules it.
    pub enabled_in_exec: bool,
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
    /// Whether the last write to the AOF succeeded. While it did not (and the AOF is on),
    /// write commands and PING get `-MISCONF Errors writing to the AOF file: ...`.
    pub last_write_ok: bool,
    /// Why the last write failed, as the C library's `strerror` words it (`No space left on
    /// device`): the end of that MISCONF error.
    pub last_write_error: alloc::string::String,
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
            enabled_in_exec: false,
            rewrite_requested: false,
            last_rewrite_time_s: -1,
            last_bgrewrite_ok: true,
            rewrites: 0,
            consecutive_failures: 0,
            last_write_ok: true,
            last_write_error: alloc::string::String::new(),
            current_size: 0,
            base_size: 0,
        }
    }
}

/// One consumer of the propagated stream (the AOF, the replicas): its bytes not yet taken and
/// the database its stream last selected (`None`: the next command writes a SELECT).
#[derive(Default)]
struct Sink {
    on: bool,
    out: Vec<u8>,
    db: Option<usize>,
}

impl Sink {
    /// Writes `SELECT db` into the stream when it is not the stream's database.
    fn select(&mut self, db: usize) {
        if self.db != Some(db) {
            let digits = itoa(db as u64);
            encode(&mut self.out, &[b"SELECT", digits.as_bytes()]);
            self.db = Some(db);
        }
    }

    /// Appends one top-level call's commands (`ops`: each one's database, end offset in
    /// `pending` and the sinks it skips), those meant for this sink (`bit`), in MULTI/EXEC
    /// when the call has more than one (for every sink, as Redis).
    fn write_call(&mut self, pending: &[u8], ops: &[(usize, usize, u8)], bit: u8) {
        let wrap = ops.len() > 1;
        if wrap {
            self.select(ops[0].0);
            encode(&mut self.out, &[b"MULTI"]);
        }
        let mut start = 0;
        for &(db, end, skip) in ops {
            if skip & bit == 0 {
                self.select(db);
                self.out.extend_from_slice(&pending[start..end]);
            }
            start = end;
        }
        if wrap {
            encode(&mut self.out, &[b"EXEC"]);
        }
    }

    /// Moves the bytes into `into` (appending).
    fn drain_into(&mut self, into: &mut Vec<u8>) {
        if into.is_empty() {
            core::mem::swap(into, &mut self.out);
        } else {
            into.extend_from_slice(&self.out);
            self.out.clear();
        }
    }
}

/// A propagated command's bit for the AOF (Redis's `PROPAGATE_AOF`, `redis.REPL_AOF`).
pub const TO_AOF: u8 = 1;
/// Its bit for the replicas (`PROPAGATE_REPL`, `redis.REPL_REPLICA`).
pub const TO_REPL: u8 = 2;

/// The propagation state kept in `Core`: one encoder, two sinks (the AOF's and the
/// replicas', see [`crate::repl`]), each with its own selected database.
#[derive(Default)]
pub struct Propagation {
    /// Whether commands are propagated (the AOF is on, or replicas may be fed).
    pub enabled: bool,
    /// What INFO and BGREWRITEAOF see.
    pub status: AofStatus,
    /// The AOF's stream.
    aof: Sink,
    /// The replication stream (the backlog and the replicas take it).
    repl: Sink,
    /// Encoded commands of the running top-level call, and each one's (db, end offset, the
    /// sinks it skips).
    pending: Vec<u8>,
    pending_ops: Vec<(usize, usize, u8)>,
    /// The sinks the running script's calls skip (`redis.set_repl`): [`TO_AOF`], [`TO_REPL`].
    pub(crate) skip: u8,
    /// The running command asked to be propagated as the client sent it.
    pub(crate) verbatim: bool,
    /// The running command asked to reach the replicas only, as the client sent it.
    pub(crate) verbatim_repl: bool,
    /// The running command reported a change to the dataset (it asked to propagate, whether
    /// or not propagation is on): what counts toward `rdb_changes_since_last_save`.
    pub(crate) changed: bool,
}

impl Propagation {
    /// Forgets the AOF stream's selected database: its next command starts with a SELECT (a
    /// new file).
    pub fn reset_db(&mut self) {
        self.aof.db = None;
    }

    /// Forgets the replication stream's selected database (a full sync starts, as Redis's
    /// `slaveseldb = -1`).
    pub fn reset_repl_db(&mut self) {
        self.repl.db = None;
    }

    /// The database the replication stream has selected (0 before its first SELECT).
    pub fn repl_db(&self) -> usize {
        self.repl.db.unwrap_or(0)
    }

    /// Moves the AOF's encoded commands into `into` (appending).
    pub fn drain_into(&mut self, into: &mut Vec<u8>) {
        self.aof.drain_into(into);
    }

    /// Moves the replication stream's new bytes into `into` (appending).
    pub fn drain_repl_into(&mut self, into: &mut Vec<u8>) {
        self.repl.drain_into(into);
    }

    /// Whether encoded commands wait for the AOF.
    pub fn has_output(&self) -> bool {
        !self.aof.out.is_empty()
    }

    /// Whether new replication stream bytes wait.
    pub fn has_repl_output(&self) -> bool {
        !self.repl.out.is_empty()
    }

    /// Appends bytes to the replication stream as they are (PING, REPLCONF GETACK, a
    /// primary's stream a replica passes on), with no SELECT.
    pub fn feed_repl_raw(&mut self, bytes: &[u8]) {
        if self.repl.on {
            self.repl.out.extend_from_slice(bytes);
        }
    }

    /// `DEL key` in database `db` into the replication stream only, outside any call (a key
    /// the startup load found expired, as Redis 7.0 feeds it to the backlog).
    pub fn feed_repl_del(&mut self, db: usize, key: &[u8]) {
        if self.repl.on {
            self.repl.select(db);
            encode(&mut self.repl.out, &[b"DEL", key]);
        }
    }

    /// Queues one command of the running call.
    pub(crate) fn push(&mut self, db: usize, args: &[&[u8]]) {
        if self.skip == TO_AOF | TO_REPL {
            return;
        }
        encode(&mut self.pending, args);
        self.pending_ops.push((db, self.pending.len(), self.skip));
    }

    /// After a command's handler (each command of an EXEC too): queues the command as the
    /// client sent it (`argv`, run in database `db`) if it asked for that.
    pub(crate) fn end_command(&mut self, db: usize, argv: &Argv<'_>) {
        if core::mem::take(&mut self.verbatim) && self.skip != TO_AOF | TO_REPL {
            encode_iter(&mut self.pending, argv.len(), argv.iter());
            self.pending_ops.push((db, self.pending.len(), self.skip));
        }
        // Only while the replicas are fed (Redis's `shouldPropagate`): otherwise it would
        // wrap a transaction's AOF record in MULTI/EXEC for nothing.
        if core::mem::take(&mut self.verbatim_repl) && self.repl.on && self.skip & TO_REPL == 0 {
            encode_iter(&mut self.pending, argv.len(), argv.iter());
            self.pending_ops
                .push((db, self.pending.len(), self.skip | TO_AOF));
        }
    }

    /// Ends the running top-level call: its commands go out to each sink that is on, in
    /// MULTI/EXEC when more than one.
    pub fn flush(&mut self) {
        if self.pending_ops.is_empty() {
            return;
        }
        for (sink, bit) in [(&mut self.aof, TO_AOF), (&mut self.repl, TO_REPL)] {
            if sink.on {
                sink.write_call(&self.pending, &self.pending_ops, bit);
            }
        }
        self.pending.clear();
        self.pending_ops.clear();
    }

    /// Emits a command on its own, outside the running call (deletions by expiry).
    fn emit_now(&mut self, db: usize, args: &[&[u8]]) {
        for sink in [&mut self.aof, &mut self.repl] {
            if sink.on {
                sink.select(db);
                encode(&mut sink.out, args);
            }
        }
    }
}

/// A small decimal string (a propagated time or count), built without allocating.
pub struct Digits {
    buf: [u8; 20],
    start: usize,
}

impl Digits {
    /// The digits.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[self.start..]
    }
}

/// `v` in decimal.
pub fn itoa(mut v: u64) -> Digits {
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
    out.extend_from_slice(itoa(len as u64).as_bytes());
    out.extend_from_slice(b"\r\n");
    for a in args {
        out.push(b'$');
        out.extend_from_slice(itoa(a.len() as u64).as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

impl Propagation {
    /// Turns propagation on or off; the keyspace records expired and evicted keys only while
    /// it is on (the caller re-syncs what it records, `crate::drain::set_propagation`).
    pub fn set_enabled(&mut self, on: bool) {
        self.aof.on = on;
        self.aof.db = None;
        self.enabled = self.aof.on || self.repl.on;
    }

    /// Turns the replication sink on or off (on once a backlog exists).
    pub fn set_replicating(&mut self, on: bool) {
        if self.repl.on != on {
            self.repl.on = on;
            self.repl.db = None;
        }
        self.enabled = self.aof.on || self.repl.on;
    }

    /// Whether the AOF sink is on.
    pub fn aof_on(&self) -> bool {
        self.aof.on
    }

    /// Propagation's consumer of the key event stream (see [`crate::events`]): a key of
    /// database `db` deleted by expiry or eviction becomes `DEL key`, outside the running call,
    /// as Redis 7.0 propagates it.
    pub fn on_key_event(&mut self, db: usize, event: &KeyEvent) {
        if !self.enabled {
            return;
        }
        if let KeyEvent::Expired(key) | KeyEvent::Evicted(key) = event {
            self.emit_now(db, &[b"DEL", key]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ArgvBuf, Config, ConnInfo, Engine, Handle, Now, ReplyTree, Transport};
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
        let victim = KeyEvent::Evicted(crate::db::Key::from_slice(b"victim"));
        t.e.core.aof.on_key_event(2, &victim);
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
        assert!(t.e.core.dbs.iter().all(|d| d.events.is_empty()));
    }

    /// A DUMP codec for strings only: the payload is the bytes.
    struct RawStrings;

    impl crate::persist::ValueCodec for RawStrings {
        fn dump(&self, value: crate::ValueRef<'_>, _: bool) -> Vec<u8> {
            match value {
                crate::ValueRef::Str(s) => s.to_vec(),
                _ => Vec::new(),
            }
        }
        fn restore(
            &self,
            payload: &[u8],
            _: u64,
            _: bool,
            _: bool,
        ) -> Result<crate::Value, crate::persist::RestoreError> {
            Ok(crate::Value::Str(kayvee_pds::SmallBytes::from_slice(
                payload,
            )))
        }
    }

    #[test]
    fn deletions_and_restores_become_absolute() {
        let mut t = T::new();
        t.e.set_codec(&RawStrings);
        let got = t.run(&[
            "set a 1",
            "getdel a",
            "getdel a",
            "restore r 5000 payload",
            "restore r2 0 payload",
            "restore r 99999999999000 payload replace absttl",
            "restore r -1 payload",
            "restore r 1 payload replace absttl",
        ]);
        assert_eq!(
            got,
            [
                "SELECT 0",
                "set a 1",
                "DEL a",
                "RESTORE r 1700000005000 payload ABSTTL",
                "restore r2 0 payload",
                "restore r 99999999999000 payload replace absttl",
                "DEL r",
            ]
        );
    }

    #[test]
    fn set_get_drops_get_and_unchanged_writes_propagate_nothing() {
        let mut t = T::new();
        let got = t.run(&[
            "set k v get",
            "set k w xx get",
            "set k x get px 100",
            "setbit b 1 1",
            "setbit b 1 1",
            "rpush l a b",
            "ltrim l 0 -1",
            "ltrim l 0 0",
            "zincrby z 1 m",
            "zincrby z 0 m",
            "lpop l 0",
            "spop nothere 2",
        ]);
        assert_eq!(
            got,
            [
                "SELECT 0",
                "set k v",
                "set k w xx",
                "SET k x PXAT 1700000000100",
                "setbit b 1 1",
                "rpush l a b",
                "ltrim l 0 0",
                "zincrby z 1 m",
            ]
        );
    }

    #[test]
    fn keyspace_commands_are_verbatim_in_their_database() {
        let mut t = T::new();
        let got = t.run(&[
            "set a 1",
            "copy a b db 2",
            "copy a b db 2",
            "swapdb 0 2",
            "select 2",
            "move a 0",
            "flushdb",
            "flushdb",
        ]);
        assert_eq!(
            got,
            [
                "SELECT 0",
                "set a 1",
                "copy a b db 2",
                "swapdb 0 2",
                "SELECT 2",
                "move a 0",
                "flushdb",
                "flushdb",
            ]
        );
    }

    #[test]
    fn served_moves_and_multi_pops_propagate_their_plain_forms() {
        let mut t = T::new();
        t.on(1, "blmove src dst right left 0");
        assert_eq!(
            t.run(&["rpush src a b"]),
            ["SELECT 0", "rpush src a b", "LMOVE src dst right left"]
        );
        t.on(1, "brpoplpush src2 dst 0");
        assert_eq!(
            t.run(&["lpush src2 x"]),
            ["lpush src2 x", "RPOPLPUSH src2 dst"]
        );
        t.on(1, "bzmpop 0 2 z1 z2 max count 5");
        assert_eq!(
            t.run(&["zadd z2 1 a 2 b"]),
            ["zadd z2 1 a 2 b", "ZPOPMAX z2 2"]
        );
        t.on(1, "bzpopmax z3 0");
        assert_eq!(t.run(&["zadd z3 1 a"]), ["zadd z3 1 a", "ZPOPMAX z3"]);
    }
}
