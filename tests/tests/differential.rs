//! The drop-in proof: the same commands go to redis-server 7.0.15 and to kayvee-server over raw
//! TCP, and every reply must be byte-for-byte identical, error texts included, in RESP2 and (after
//! `HELLO 3`) in RESP3.
//!
//! Two tests: seeded random command sequences over a small key space (8 keys, 3 databases) so
//! commands collide, and a fixed list of hand-written edge cases (arity, syntax, overflow, inline
//! commands, protocol errors).
//!
//! Comparison rules (everything else is compared byte for byte):
//! - TTL / PTTL / EXPIRETIME / PEXPIRETIME: two non-negative integers match within 2 s (2000 ms),
//!   since the servers see each command a few microseconds apart; -1 / -2 must match exactly.
//!   Relative TTLs are large and all distinct (base + 3 s x step), so GT/LT outcomes never hinge on
//!   timing; absolute ones are far in the future or in the past.
//! - KEYS: elements are sorted before comparing (hash order legitimately differs).
//! - HELLO: the `id` field (connection id) is masked.
//! - ACL LOG: each entry's `age-seconds` and `client-info` values are masked.
//! - Unordered collection replies (SMEMBERS, HGETALL, ...) compare sorted; scans compare cursor and
//!   sorted batch; random picks compare by shape.
//! - SORT BY a pattern without `*` (no sorting): sorted elements, or the shape with LIMIT.
//! - Stream idle and delivery times: extended XPENDING's idle time, XINFO's `idle` values and
//!   any XINFO integer within 30 days of now (seen and delivery times) are masked. The stream
//!   generator uses explicit IDs only, and idle thresholds far from any real idle time.
//! - Lex ranges on sorted sets (ZRANGEBYLEX, ZLEXCOUNT, ZREMRANGEBYLEX, ZRANGE BYLEX) compare by
//!   reply type only: when members have different scores Redis's own answer depends on its skip
//!   list's random levels (seeded per process). Exact behaviour is covered by the transcripts.
//!
//! Left out because legitimately nondeterministic: RANDOMKEY, SCAN cursors, OBJECT IDLETIME/FREQ,
//! TIME, CLIENT ID/LIST/INFO, INFO, DEBUG, short TTLs that could expire mid-run,
//! stream IDs `*` (the time of day).
//!
//! Scripts (diff_gen/script.rs) are compared like any command: their replies must not depend on
//! hash order, time or randomness, so a script returning a set sorts it first. An image built
//! without Lua (`KAYVEE_TARGET=unikernel`) leaves the scripting family out.
//!
//! Environment: `KAYVEE_DIFF_SEED=N` reruns one seed; `KAYVEE_DIFF_SEEDS=N` sets how many seeds
//! (default 20); `KAYVEE_DIFF_CMDS=N` commands per seed (default 3000); `KAYVEE_TARGET=redis` runs
//! redis against redis (the harness self-check, must give 0 mismatches).

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::io;
use std::time::Duration;

// In a subdirectory: Cargo would build a `tests/*.rs` file as a test crate of its own.
#[path = "diff_gen/acl.rs"]
mod diff_gen_acl;
#[path = "diff_gen/bitfield.rs"]
mod diff_gen_bitfield;
#[path = "diff_gen/geo.rs"]
mod diff_gen_geo;
#[path = "diff_gen/hash.rs"]
mod diff_gen_hash;
#[path = "diff_gen/hll.rs"]
mod diff_gen_hll;
#[path = "diff_gen/list.rs"]
mod diff_gen_list;
#[path = "diff_gen/script.rs"]
mod diff_gen_script;
#[path = "diff_gen/set.rs"]
mod diff_gen_set;
#[path = "diff_gen/stream.rs"]
mod diff_gen_stream;
#[path = "diff_gen/txn.rs"]
mod diff_gen_txn;
#[path = "diff_gen/zset.rs"]
mod diff_gen_zset;

use kayvee_tests::{encode_command, show, show_args, split_aggregate, Conn, Rng, Server};

/// Distinct mismatches printed in full per test (more are only counted).
const SHOWN_MAX: usize = 40;
/// Reply characters that identify "the same mismatch" (so varying arguments do not multiply it).
const SIGNATURE_CHARS: usize = 24;
/// Commands of history printed with a mismatch.
const HISTORY_MAX: usize = 30;

/// The key space: few keys so that commands collide; names chosen for KEYS patterns.
const KEYS: &[&str] = &["k0", "k1", "k2", "k3", "foo", "foo:1", "bar", "x"];
/// String values: integers at the i64 edges, floats, embstr/raw lengths, binary bytes.
const VALUES: &[&str] = &[
    "",
    "0",
    "1",
    "-1",
    "42",
    "-17",
    "007",
    "3.5",
    "-0.25",
    "1e3",
    "abc",
    "hello world",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    " 5",
    "5 ",
    "-0",
    "+1",
    "\x00\u{7f}\x01\r\n",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "12345678901234567890",
    "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
    "\u{ff}\u{fe}",
];
/// Integer arguments for INCRBY/DECRBY, with the overflow edges and non-integers.
const INCREMENTS: &[&str] = &[
    "1",
    "-1",
    "0",
    "100",
    "-100",
    "9223372036854775807",
    "-9223372036854775808",
    "abc",
    "1.5",
    "",
    " 1",
];
/// INCRBYFLOAT increments: simple decimals (plus one non-number).
const FLOAT_INCREMENTS: &[&str] = &["1.5", "-0.25", "10", "0", "3", "-3", "0.5", "abc"];
/// Range / index arguments.
const INDEXES: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "-1",
    "-2",
    "-5",
    "5",
    "100",
    "-100",
    "9223372036854775807",
    "-9223372036854775808",
    "abc",
];
/// Bit offsets for SETBIT/GETBIT (small, so strings stay small), with errors.
const BIT_OFFSETS: &[&str] = &[
    "0",
    "1",
    "7",
    "8",
    "15",
    "63",
    "100",
    "-1",
    "abc",
    "4294967296",
];
/// Database indexes (0-2 used; the rest are errors).
const DBS: &[&str] = &["0", "1", "2", "0", "1", "16", "-1", "abc"];
/// KEYS patterns.
const PATTERNS: &[&str] = &[
    "*", "k*", "k[0-1]", "foo*", "?", "*:*", "nomatch*", "[a-c]*", "k\\1",
];

/// Builds random commands; `step` (the command's index) makes relative TTLs all distinct.
struct Gen {
    rng: Rng,
    step: u64,
    /// Commands of a scripted sequence still to emit (transactions), one per step.
    pending: std::collections::VecDeque<Args>,
    /// Stream IDs recently given to XADD (the stream family reads, acks and claims them).
    stream_ids: Vec<String>,
    /// SHA1s of the scripts both servers have run or loaded (the scripting family's EVALSHA).
    scripts_seen: Vec<String>,
    /// Whether the system under test runs scripts (an image built without Lua does not).
    scripting: bool,
}

/// A generator of one family of commands.
type Family = fn(&mut Gen) -> Args;

/// Command families and their weights. A data-type module adds its generator here (one line).
const FAMILIES: &[(u64, Family)] = &[
    (40, Gen::string_command),
    (15, Gen::bit_command),
    (25, Gen::key_command),
    (12, Gen::expire_command),
    (8, Gen::bad_command),
    (30, Gen::list_command),
    (40, Gen::zset_command),
    (30, Gen::hash_command),
    (30, Gen::set_family_command),
    (12, Gen::txn_command),
    (6, Gen::acl_command),
    (12, Gen::hll_command),
    (10, Gen::bitfield_command),
    (15, Gen::geo_command),
    (50, Gen::stream_command),
    (30, Gen::script_family_command),
];

type Args = Vec<Vec<u8>>;

/// What kind of expiry time an argument is.
#[derive(Clone, Copy)]
enum When {
    /// Seconds or milliseconds from now (large, unique per step).
    Relative,
    /// A unix time, far future or in the past (EXPIREAT/GETEX delete at once when past).
    At,
    /// A far-future unix time: SET with a past EXAT keeps an expired key that DBSIZE counts until
    /// active expiry, at a moment that differs between servers.
    FutureAt,
}

/// Builds an argument vector from string slices.
fn args(parts: &[&str]) -> Args {
    parts.iter().map(|p| p.as_bytes().to_vec()).collect()
}

impl Gen {
    fn key(&mut self) -> &'static str {
        self.rng.pick(KEYS)
    }

    fn value(&mut self) -> &'static str {
        self.rng.pick(VALUES)
    }

    /// A relative TTL in seconds: large and unique per step, so that GT/LT never tie.
    fn rel_secs(&mut self) -> String {
        let base = [100_000u64, 200_000, 1_000_000, 5_000_000][self.rng.below(4)];
        (base + 3 * self.step).to_string()
    }

    /// An absolute unix time in seconds: far future (may repeat: ties are deterministic) or past.
    fn abs_secs(&mut self, past_ok: bool) -> String {
        let t = [
            4_102_444_800u64,
            4_102_445_800,
            4_202_444_800,
            1,
            1_000_000_000,
        ][self.rng.below(if past_ok { 5 } else { 3 })];
        t.to_string()
    }

    /// A TTL argument: mostly valid, sometimes invalid or negative (negative deletes the key).
    fn ttl_arg(&mut self, ms: bool, when: When) -> String {
        match self.rng.below(20) {
            0 => self
                .rng
                .pick(&["abc", "1.5", "", "9223372036854775807", "0", "-5"])
                .to_string(),
            _ => {
                let s = match when {
                    When::Relative => self.rel_secs(),
                    When::At => self.abs_secs(true),
                    When::FutureAt => self.abs_secs(false),
                };
                if ms {
                    format!("{s}000")
                } else {
                    s
                }
            }
        }
    }

    /// One random command, from a family chosen by weight (see [`FAMILIES`]).
    fn command(&mut self) -> Args {
        if let Some(next) = self.pending.pop_front() {
            return next;
        }
        let total: u64 = FAMILIES.iter().map(|(w, _)| *w).sum();
        let mut pick = self.rng.below(total as usize) as u64;
        let mut family = FAMILIES[0].1;
        for (w, f) in FAMILIES {
            if pick < *w {
                family = *f;
                break;
            }
            pick -= w;
        }
        let mut cmd = family(self);
        if self.rng.chance(5) {
            cmd[0] = mix_case(&cmd[0], self.rng.next_u64());
        }
        cmd
    }

    /// Strings: GET/SET family, counters, ranges.
    pub(crate) fn string_command(&mut self) -> Args {
        let (k, v) = (self.key(), self.value());
        match self.rng.below(24) {
            0..=2 => self.set_command(),
            3 => args(&["GET", k]),
            4 => args(&["SETNX", k, v]),
            5 => args(&["SETEX", k, &self.ttl_arg(false, When::Relative), v]),
            6 => args(&["PSETEX", k, &self.ttl_arg(true, When::Relative), v]),
            7 => self.multi_key(&["MGET"], 1, 4, false),
            8 => self.multi_key(&["MSET"], 1, 3, true),
            9 => self.multi_key(&["MSETNX"], 1, 3, true),
            10 => args(&["GETSET", k, v]),
            11 => args(&["GETDEL", k]),
            12 => self.getex_command(),
            13 => args(&["APPEND", k, v]),
            14 => args(&["STRLEN", k]),
            15 => args(&["INCR", k]),
            16 => args(&["DECR", k]),
            17 => args(&["INCRBY", k, self.rng.pick(INCREMENTS)]),
            18 => args(&["DECRBY", k, self.rng.pick(INCREMENTS)]),
            19 => args(&["INCRBYFLOAT", k, self.rng.pick(FLOAT_INCREMENTS)]),
            20 => args(&[
                "GETRANGE",
                k,
                self.rng.pick(INDEXES),
                self.rng.pick(INDEXES),
            ]),
            21 => args(&["SUBSTR", k, self.rng.pick(INDEXES), self.rng.pick(INDEXES)]),
            22 => {
                let offset = self.rng.pick(&["0", "1", "3", "10", "40", "-1", "abc"]);
                args(&["SETRANGE", k, offset, v])
            }
            _ => args(&[
                "SET",
                k,
                self.rng
                    .pick(&["1", "100", "-5", "0", "9223372036854775806"]),
            ]),
        }
    }

    /// SET with a random, sometimes conflicting, set of options.
    fn set_command(&mut self) -> Args {
        let mut cmd = args(&["SET", self.key(), self.value()]);
        let mut opts: Vec<Vec<String>> = Vec::new();
        if self.rng.chance(30) {
            opts.push(vec![self.rng.pick(&["NX", "XX"]).into()]);
        }
        match self.rng.below(8) {
            0 => opts.push(vec!["EX".into(), self.ttl_arg(false, When::Relative)]),
            1 => opts.push(vec!["PX".into(), self.ttl_arg(true, When::Relative)]),
            2 => opts.push(vec!["EXAT".into(), self.ttl_arg(false, When::FutureAt)]),
            3 => opts.push(vec!["PXAT".into(), self.ttl_arg(true, When::FutureAt)]),
            4 => opts.push(vec!["KEEPTTL".into()]),
            _ => {}
        }
        if self.rng.chance(25) {
            opts.push(vec!["GET".into()]);
        }
        if self.rng.chance(5) {
            let bad = self
                .rng
                .pick(&["NX", "XX", "EX", "KEEPTTL", "FOO", "PX 100000000"]);
            opts.push(bad.split(' ').map(String::from).collect());
        }
        let shift = self.rng.below(opts.len() + 1);
        opts.rotate_left(shift);
        cmd.extend(opts.into_iter().flatten().map(String::into_bytes));
        cmd
    }

    /// GETEX with at most one option (sometimes two, which is a syntax error).
    fn getex_command(&mut self) -> Args {
        let mut cmd = args(&["GETEX", self.key()]);
        for _ in 0..[0, 1, 1, 1, 2][self.rng.below(5)] {
            let opt: Vec<String> = match self.rng.below(5) {
                0 => vec!["EX".into(), self.ttl_arg(false, When::Relative)],
                1 => vec!["PX".into(), self.ttl_arg(true, When::Relative)],
                2 => vec!["EXAT".into(), self.ttl_arg(false, When::At)],
                3 => vec!["PXAT".into(), self.ttl_arg(true, When::At)],
                _ => vec!["PERSIST".into()],
            };
            cmd.extend(opt.into_iter().map(String::into_bytes));
        }
        cmd
    }

    /// `prefix` then between `min` and `max` keys (each followed by a value when `pairs`).
    fn multi_key(&mut self, prefix: &[&str], min: usize, max: usize, pairs: bool) -> Args {
        let mut cmd = args(prefix);
        for _ in 0..min + self.rng.below(max - min + 1) {
            cmd.push(self.key().into());
            if pairs {
                cmd.push(self.value().into());
            }
        }
        cmd
    }

    /// SETBIT GETBIT BITCOUNT BITPOS BITOP.
    fn bit_command(&mut self) -> Args {
        let k = self.key();
        match self.rng.below(6) {
            0 | 1 => {
                let bit = self.rng.pick(&["0", "1", "1", "0", "2", "x"]);
                args(&["SETBIT", k, self.rng.pick(BIT_OFFSETS), bit])
            }
            2 => args(&["GETBIT", k, self.rng.pick(BIT_OFFSETS)]),
            3 => self.range_tail(&["BITCOUNT", k]),
            4 => {
                let bit = self.rng.pick(&["0", "1", "1", "0", "2"]);
                self.range_tail(&["BITPOS", k, bit])
            }
            _ => {
                let op = self.rng.pick(&["AND", "OR", "XOR", "NOT", "and", "FOO"]);
                let n = if op == "NOT" && self.rng.chance(80) {
                    1
                } else {
                    1 + self.rng.below(3)
                };
                let mut cmd = args(&["BITOP", op, self.key()]);
                cmd.extend((0..n).map(|_| self.key().as_bytes().to_vec()));
                cmd
            }
        }
    }

    /// `head` then optionally `start [end [BYTE|BIT]]`.
    fn range_tail(&mut self, head: &[&str]) -> Args {
        let mut cmd = args(head);
        let n = self.rng.below(4);
        for i in 0..n {
            let arg = match i {
                2 => self.rng.pick(&["BYTE", "BIT", "bit", "FOO"]),
                _ => self.rng.pick(INDEXES),
            };
            cmd.push(arg.into());
        }
        cmd
    }

    /// The keyspace commands.
    fn key_command(&mut self) -> Args {
        let (k, k2) = (self.key(), self.key());
        match self.rng.below(22) {
            0 => self.multi_key(&["DEL"], 1, 3, false),
            1 => self.multi_key(&["UNLINK"], 1, 3, false),
            2 => self.multi_key(&["EXISTS"], 1, 4, false),
            3 => self.multi_key(&["TOUCH"], 1, 3, false),
            4 => args(&["TYPE", k]),
            5 | 6 => args(&["RENAME", k, k2]),
            7 => args(&["RENAMENX", k, k2]),
            8 | 9 => self.copy_command(),
            10 => args(&["MOVE", k, self.rng.pick(DBS)]),
            11 => args(&["SWAPDB", self.rng.pick(DBS), self.rng.pick(DBS)]),
            12 | 13 => args(&["SELECT", self.rng.pick(DBS)]),
            14 => args(&["DBSIZE"]),
            15 if self.rng.chance(25) => args(&["FLUSHDB"]),
            16 if self.rng.chance(10) => args(&["FLUSHALL"]),
            17 | 18 => args(&["OBJECT", "ENCODING", k]),
            19 | 20 => args(&["KEYS", self.rng.pick(PATTERNS)]),
            _ => args(&["EXISTS", k]),
        }
    }

    /// COPY src dst [DB n] [REPLACE].
    fn copy_command(&mut self) -> Args {
        let mut cmd = args(&["COPY", self.key(), self.key()]);
        if self.rng.chance(30) {
            cmd.extend(args(&["DB", self.rng.pick(DBS)]));
        }
        if self.rng.chance(40) {
            cmd.push(b"REPLACE".to_vec());
        }
        cmd
    }

    /// EXPIRE family, TTL readers and PERSIST.
    fn expire_command(&mut self) -> Args {
        let k = self.key();
        let mut cmd = match self.rng.below(10) {
            0 | 1 => args(&["EXPIRE", k, &self.ttl_arg(false, When::Relative)]),
            2 => args(&["PEXPIRE", k, &self.ttl_arg(true, When::Relative)]),
            3 => args(&["EXPIREAT", k, &self.ttl_arg(false, When::At)]),
            4 => args(&["PEXPIREAT", k, &self.ttl_arg(true, When::At)]),
            5 => return args(&["PERSIST", k]),
            6 => return args(&["TTL", k]),
            7 => return args(&["PTTL", k]),
            8 => return args(&["EXPIRETIME", k]),
            _ => return args(&["PEXPIRETIME", k]),
        };
        for _ in 0..[0, 0, 1, 1, 1, 2][self.rng.below(6)] {
            cmd.push(self.rng.pick(&["NX", "XX", "GT", "LT", "nx", "FOO"]).into());
        }
        cmd
    }

    /// Wrong arity, unknown commands, extra arguments.
    fn bad_command(&mut self) -> Args {
        match self.rng.below(4) {
            0 => {
                let name = self
                    .rng
                    .pick(&["GET", "SET", "INCR", "EXPIRE", "MSET", "GETRANGE", "KEYS"]);
                args(&[name])
            }
            1 => {
                let cmd = self.rng.pick(&[
                    "GET k0 x",
                    "STRLEN k1 x",
                    "TTL foo x",
                    "DBSIZE x",
                    "MSET a",
                    "MSET a b c",
                    "PING a b",
                    "GETDEL a b",
                ]);
                args(&cmd.split(' ').collect::<Vec<_>>())
            }
            2 => {
                let name = self.rng.pick(&["FOOBAR", "GETT", "SETT", "xyzzy"]);
                let mut cmd = args(&[name]);
                cmd.extend((0..self.rng.below(3)).map(|_| self.value().as_bytes().to_vec()));
                cmd
            }
            _ => args(&["PING"]),
        }
    }
}

/// ASCII letters of `name` upper- or lower-cased by the bits of `bits`.
fn mix_case(name: &[u8], bits: u64) -> Vec<u8> {
    let flip = |(i, b): (usize, &u8)| match bits >> (i % 64) & 1 {
        1 => b.to_ascii_lowercase(),
        _ => b.to_ascii_uppercase(),
    };
    name.iter().enumerate().map(flip).collect()
}

/// A reply as raw bytes, or a description of the I/O failure (timeout, closed connection).
type Reply = Result<Vec<u8>, String>;

/// Sends `cmd` on `conn` and reads one reply.
fn exchange(conn: &mut Conn, cmd: &[Vec<u8>]) -> Reply {
    let refs: Vec<&[u8]> = cmd.iter().map(Vec::as_slice).collect();
    conn.send(&encode_command(&refs))
        .map_err(|e| e.to_string())?;
    conn.read_reply()
        .map_err(|e| format!("<{}: {e}>", kind_name(&e)))
}

/// Short name of an I/O error kind for messages.
fn kind_name(e: &io::Error) -> &'static str {
    match e.kind() {
        io::ErrorKind::UnexpectedEof => "connection closed",
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => "timeout",
        io::ErrorKind::InvalidData => "malformed reply",
        _ => "I/O error",
    }
}

/// Whether two replies to `cmd` count as the same under the rules in the file header.
fn same_reply(cmd: &[Vec<u8>], a: &Reply, b: &Reply) -> bool {
    let (Ok(a), Ok(b)) = (a, b) else {
        return a == b;
    };
    if a == b {
        return true;
    }
    let name = String::from_utf8_lossy(&cmd[0]).to_ascii_uppercase();
    match name.as_str() {
        "TTL" | "EXPIRETIME" => within(a, b, 2),
        "PTTL" | "PEXPIRETIME" => within(a, b, 2000),
        "KEYS" => sorted_elements(a) == sorted_elements(b),
        "HELLO" => mask_hello_id(a) == mask_hello_id(b),
        "ACL" if cmd[1].eq_ignore_ascii_case(b"log") => mask_acl_log(a) == mask_acl_log(b),
        "ZRANDMEMBER" => same_shape(a, b),
        "ZSCAN" => same_scan(cmd, a, b),
        "SORT" | "SORT_RO" if sorts_nothing(cmd) && has_arg(cmd, b"limit") => same_shape(a, b),
        "SORT" | "SORT_RO" if sorts_nothing(cmd) => sorted_elements(a) == sorted_elements(b),
        "ZRANGEBYLEX" | "ZREVRANGEBYLEX" | "ZLEXCOUNT" | "ZREMRANGEBYLEX" => same_shape(a, b),
        "ZRANGE" | "ZRANGESTORE" if has_arg(cmd, b"bylex") => same_shape(a, b),
        "XPENDING" if cmd.len() > 3 => mask_pending_idle(a) == mask_pending_idle(b),
        "XINFO" => mask_stream_times(a) == mask_stream_times(b),
        _ => same_collection_reply(&name, cmd, a, b),
    }
}

/// Hash and set replies whose order Redis leaves unspecified compare sorted; scans compare the
/// cursor and the sorted batch; random picks that may differ compare by shape (a bulk for a
/// single pick, the element count for picks with repeats).
fn same_collection_reply(name: &str, cmd: &[Vec<u8>], a: &[u8], b: &[u8]) -> bool {
    match name {
        "HGETALL" | "HKEYS" | "HVALS" | "SMEMBERS" | "SINTER" | "SUNION" | "SDIFF" => {
            sorted_elements(a) == sorted_elements(b)
        }
        "HSCAN" | "SSCAN" => sorted_scan(a) == sorted_scan(b),
        "HRANDFIELD" | "SRANDMEMBER" | "SPOP" => match cmd.get(2) {
            None => [a, b]
                .iter()
                .all(|r| r.starts_with(b"$") && !r.starts_with(b"$-1")),
            Some(count) if count.starts_with(b"-") && split_aggregate(a).is_some() => {
                split_aggregate(a).map(|(h, _)| h) == split_aggregate(b).map(|(h, _)| h)
            }
            Some(_) => sorted_elements(a) == sorted_elements(b),
        },
        _ => false,
    }
}

/// Random replies: neither an error, same type and (for aggregates) the same length.
fn same_shape(a: &[u8], b: &[u8]) -> bool {
    let head = |r: &[u8]| split_aggregate(r).map(|(h, _)| h.to_vec());
    a[0] == b[0] && a[0] != b'-' && head(a) == head(b)
}

/// ZSCAN of a skiplist walks a hash table: when a cursor (given or returned) is not 0 the
/// batches legitimately differ (both must still be well-formed); complete scans must hold the
/// same elements.
fn same_scan(cmd: &[Vec<u8>], a: &[u8], b: &[u8]) -> bool {
    let (Some((_, ia)), Some((_, ib))) = (split_aggregate(a), split_aggregate(b)) else {
        return false;
    };
    if ia.len() != 2 || ib.len() != 2 {
        return false;
    }
    let zero = b"$1\r\n0\r\n".as_slice();
    if ia[0] != zero || ib[0] != zero || cmd[2] != b"0" {
        return true;
    }
    sorted_elements(ia[1]) == sorted_elements(ib[1])
}

/// SORT ... BY <pattern without '*'> does not sort: a set comes back in hash order, which
/// legitimately differs (and with LIMIT, which elements are picked differs too).
fn sorts_nothing(cmd: &[Vec<u8>]) -> bool {
    cmd.windows(2)
        .any(|w| w[0].eq_ignore_ascii_case(b"by") && !w[1].contains(&b'*'))
}

/// Whether an argument (after the name) equals `word`, ignoring case (a set sorted BY nosort
/// comes back in hash order, which legitimately differs).
fn has_arg(cmd: &[Vec<u8>], word: &[u8]) -> bool {
    cmd[1..].iter().any(|a| a.eq_ignore_ascii_case(word))
}

/// An aggregate's header and its elements, sorted.
type Sorted = (Vec<u8>, Vec<Vec<u8>>);

/// A scan reply's cursor and its batch sorted.
fn sorted_scan(reply: &[u8]) -> Option<(Vec<u8>, Sorted)> {
    let (_, parts) = split_aggregate(reply)?;
    let [cursor, batch] = parts.as_slice() else {
        return None;
    };
    Some((cursor.to_vec(), sorted_elements(batch)))
}

/// Both are non-negative RESP integers at most `tolerance` apart.
fn within(a: &[u8], b: &[u8], tolerance: i64) -> bool {
    match (resp_int(a), resp_int(b)) {
        (Some(x), Some(y)) if x >= 0 && y >= 0 => (x - y).abs() <= tolerance,
        _ => false,
    }
}

/// The value of a `:N\r\n` reply.
fn resp_int(reply: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(reply.strip_prefix(b":")?.strip_suffix(b"\r\n")?).ok()?;
    text.parse().ok()
}

/// An aggregate's header and its elements sorted (the raw reply when not an aggregate).
fn sorted_elements(reply: &[u8]) -> (Vec<u8>, Vec<Vec<u8>>) {
    match split_aggregate(reply) {
        Some((head, items)) => {
            let mut items: Vec<Vec<u8>> = items.into_iter().map(<[u8]>::to_vec).collect();
            items.sort();
            (head.to_vec(), items)
        }
        None => (reply.to_vec(), Vec::new()),
    }
}

/// A HELLO reply with the value following the `id` field replaced by a fixed marker.
fn mask_hello_id(reply: &[u8]) -> Vec<u8> {
    let Some((head, items)) = split_aggregate(reply) else {
        return reply.to_vec();
    };
    let mut out = head.to_vec();
    let mut mask_next = false;
    for item in items {
        out.extend_from_slice(if mask_next { b"<id>" } else { item });
        mask_next = item == b"$2\r\nid\r\n";
    }
    out
}

/// An ACL LOG reply with each entry's age and client line masked (they differ by server).
fn mask_acl_log(reply: &[u8]) -> Vec<u8> {
    let Some((head, entries)) = split_aggregate(reply) else {
        return reply.to_vec();
    };
    let mut out = head.to_vec();
    for entry in entries {
        let Some((head, items)) = split_aggregate(entry) else {
            out.extend_from_slice(entry);
            continue;
        };
        out.extend_from_slice(head);
        let mut mask_next = false;
        for item in items {
            out.extend_from_slice(if mask_next { b"<masked>" } else { item });
            mask_next = item == b"$11\r\nage-seconds\r\n" || item == b"$11\r\nclient-info\r\n";
        }
    }
    out
}

/// An extended XPENDING reply with each entry's idle time (its third element) masked.
fn mask_pending_idle(reply: &[u8]) -> Vec<u8> {
    let Some((head, entries)) = split_aggregate(reply) else {
        return reply.to_vec();
    };
    let mut out = head.to_vec();
    for entry in entries {
        match split_aggregate(entry) {
            Some((head, items)) if items.len() == 4 => {
                out.extend_from_slice(head);
                for (i, item) in items.iter().enumerate() {
                    out.extend_from_slice(if i == 2 { b"<idle>" } else { item });
                }
            }
            _ => out.extend_from_slice(entry),
        }
    }
    out
}

/// An XINFO reply with times masked at any depth: the value after an `idle` field and every
/// integer within 30 days of now (seen times and delivery times are unix milliseconds).
fn mask_stream_times(reply: &[u8]) -> Vec<u8> {
    let Some((head, items)) = split_aggregate(reply) else {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        return match resp_int(reply) {
            Some(t) if (t - now).abs() < 30 * 86_400_000 => b"<time>".to_vec(),
            _ => reply.to_vec(),
        };
    };
    let mut out = head.to_vec();
    let mut idle_next = false;
    for item in items {
        if idle_next {
            out.extend_from_slice(b"<idle>");
        } else {
            out.extend(mask_stream_times(item));
        }
        idle_next = item == b"$4\r\nidle\r\n";
    }
    out
}

/// One observed difference.
struct Mismatch {
    context: String,
    cmd: Args,
    redis: Reply,
    kayvee: Reply,
    history: Vec<String>,
}

impl Mismatch {
    /// What identifies "the same bug" for deduplication.
    fn signature(&self) -> String {
        let name = String::from_utf8_lossy(&self.cmd[0]).to_ascii_uppercase();
        let head = |r: &Reply| render(r).chars().take(SIGNATURE_CHARS).collect::<String>();
        format!("{name}|{}|{}", head(&self.redis), head(&self.kayvee))
    }

    /// The full report: context, history, command and both raw replies.
    fn describe(&self) -> String {
        let mut s = format!("MISMATCH {}\n", self.context);
        if !self.history.is_empty() {
            s.push_str("  history of the keys involved (command -> redis reply):\n");
            for line in &self.history {
                let _ = writeln!(s, "    {line}");
            }
        }
        let _ = writeln!(s, "  command: {}", show_args(&self.cmd));
        let _ = writeln!(s, "  redis:   {}", render(&self.redis));
        let _ = writeln!(s, "  kayvee:  {}", render(&self.kayvee));
        s
    }
}

/// A reply for a message: escaped raw bytes, or the failure text.
fn render(reply: &Reply) -> String {
    match reply {
        Ok(bytes) => show(bytes),
        Err(e) => e.clone(),
    }
}

/// Collects mismatches, deduplicated by signature.
#[derive(Default)]
struct Findings {
    seen: HashSet<String>,
    shown: Vec<String>,
    total: usize,
    /// Per command name and reply type byte, how many replies (coverage, `KAYVEE_DIFF_STATS=1`).
    stats: BTreeMap<(String, char), usize>,
}

impl Findings {
    fn add(&mut self, m: Mismatch) {
        self.total += 1;
        if self.seen.insert(m.signature()) && self.shown.len() < SHOWN_MAX {
            let text = m.describe();
            eprintln!("{text}");
            self.shown.push(text);
        }
    }

    /// Counts the redis reply to `cmd` by its type byte (errors counted apart).
    fn count(&mut self, cmd: &[Vec<u8>], reply: &Reply) {
        let name = String::from_utf8_lossy(&cmd[0]).to_ascii_uppercase();
        let kind = reply
            .as_ref()
            .ok()
            .and_then(|r| r.first())
            .map_or('?', |&b| b as char);
        *self.stats.entry((name, kind)).or_default() += 1;
    }

    /// Panics with a summary when anything mismatched.
    fn finish(self, what: &str) {
        if std::env::var_os("KAYVEE_DIFF_STATS").is_some() {
            for ((name, kind), n) in &self.stats {
                eprintln!("{name:>12} {kind} {n}");
            }
        }
        assert!(
            self.total == 0,
            "{what}: {} mismatches ({} distinct shown above, first:\n{})",
            self.total,
            self.seen.len(),
            self.shown.first().map_or("", String::as_str)
        );
    }
}

/// The two servers under comparison, or `None` (test skipped) when redis-server is missing.
fn servers() -> Option<(Server, Server)> {
    let redis = Server::redis(&[])?;
    let kayvee = Server::kayvee(&[])?;
    Some((redis, kayvee))
}

/// A pair of connections, one per server, switched to `proto` (2 or 3).
struct Pair {
    redis: Conn,
    kayvee: Conn,
}

impl Pair {
    /// Connects to both and sends `HELLO 3` when `proto` is 3 (its reply is compared too).
    fn open(servers: &(Server, Server), proto: u8, findings: &mut Findings) -> Pair {
        let mut pair = Pair {
            redis: servers.0.conn(),
            kayvee: servers.1.conn(),
        };
        pair.run_quiet(&args(&["FLUSHALL"]));
        if proto == 3 {
            let hello = args(&["HELLO", "3"]);
            let (r, k) = pair.both(&hello);
            if !same_reply(&hello, &r, &k) {
                let context = "on connect (RESP3)".to_string();
                findings.add(Mismatch {
                    context,
                    cmd: hello,
                    redis: r,
                    kayvee: k,
                    history: vec![],
                });
            }
        }
        pair
    }

    /// Sends `cmd` to both, returning (redis reply, kayvee reply).
    fn both(&mut self, cmd: &[Vec<u8>]) -> (Reply, Reply) {
        (
            exchange(&mut self.redis, cmd),
            exchange(&mut self.kayvee, cmd),
        )
    }

    /// Whether the system under test runs scripts. kayvee-server always does (a failing EVAL
    /// there is a mismatch like any other); an image built without Lua answers "unknown
    /// command", and the scripting family is then left out.
    fn runs_scripts(&mut self) -> bool {
        let (_, k) = self.both(&args(&["EVAL", "return 1", "0"]));
        let unknown = matches!(&k, Ok(r) if r.starts_with(b"-ERR unknown command"));
        !(unknown && std::env::var("KAYVEE_TARGET").as_deref() == Ok("unikernel"))
    }

    /// Sends `cmd` to both ignoring the replies (resynchronisation after a mismatch).
    fn run_quiet(&mut self, cmd: &[Vec<u8>]) {
        let _ = self.both(cmd);
    }
}

/// Whether an argument is one of the generators' key names.
fn is_key(arg: &[u8]) -> bool {
    KEYS.iter()
        .chain(diff_gen_stream::STREAM_KEYS)
        .any(|k| k.as_bytes() == arg)
}

/// Commands in `history` that touch any key of `cmd` or act on whole databases.
fn key_history(history: &[(usize, Args, String)], cmd: &[Vec<u8>]) -> Vec<String> {
    let keys: HashSet<&[u8]> = cmd[1..]
        .iter()
        .map(Vec::as_slice)
        .filter(|a| is_key(a))
        .collect();
    let global = ["SELECT", "SWAPDB", "FLUSHDB", "FLUSHALL", "MOVE", "COPY"];
    let relevant = |(_, c, _): &&(usize, Args, String)| {
        let name = String::from_utf8_lossy(&c[0]).to_ascii_uppercase();
        global.contains(&name.as_str()) || c[1..].iter().any(|a| keys.contains(a.as_slice()))
    };
    let lines: Vec<String> = history
        .iter()
        .filter(relevant)
        .map(|(i, c, r)| format!("#{i} {} -> {r}", show_args(c)))
        .collect();
    lines[lines.len().saturating_sub(HISTORY_MAX)..].to_vec()
}

/// `GET` of each key of `cmd` on both servers, as lines for a mismatch report.
fn key_states(pair: &mut Pair, cmd: &[Vec<u8>]) -> Vec<String> {
    let mut keys: Vec<&Vec<u8>> = cmd[1..].iter().filter(|a| is_key(a)).collect();
    keys.dedup();
    let mut lines = Vec::new();
    for key in keys {
        let get = vec![b"GET".to_vec(), key.clone()];
        let (r, k) = pair.both(&get);
        lines.push(format!(
            "after the mismatch: {} -> redis {} / kayvee {}",
            show_args(&get),
            render(&r),
            render(&k)
        ));
    }
    lines
}

/// Runs one seed's command sequence in `proto` on fresh connections, recording mismatches.
/// After a mismatch both sides are flushed (and reset to db 0) so later commands stay meaningful.
fn run_seed(
    servers: &(Server, Server),
    seed: u64,
    proto: u8,
    count: usize,
    findings: &mut Findings,
) {
    let mut pair = Pair::open(servers, proto, findings);
    let mut gen = Gen {
        rng: Rng(seed),
        step: 0,
        pending: Default::default(),
        stream_ids: Vec::new(),
        scripts_seen: Vec::new(),
        scripting: pair.runs_scripts(),
    };
    let mut history: Vec<(usize, Args, String)> = Vec::new();
    for i in 0..count {
        gen.step = i as u64;
        let cmd = gen.command();
        let (r, k) = pair.both(&cmd);
        findings.count(&cmd, &r);
        if !same_reply(&cmd, &r, &k) {
            let context =
                format!("seed {seed} RESP{proto} command #{i} (rerun: KAYVEE_DIFF_SEED={seed})");
            let mut history_lines = key_history(&history, &cmd);
            if cmd.len() == 1 {
                // A command without arguments (EXEC): the commands just before it tell the story.
                history_lines.clear();
                history_lines.extend(
                    history
                        .iter()
                        .rev()
                        .take(12)
                        .rev()
                        .map(|(j, c, rep)| format!("    #{j} {} -> {rep}", show_args(c))),
                );
            }
            let broken = k.is_err() || r.is_err();
            if !broken {
                history_lines.extend(key_states(&mut pair, &cmd));
            }
            findings.add(Mismatch {
                context,
                cmd,
                redis: r,
                kayvee: k,
                history: history_lines,
            });
            if broken {
                return;
            }
            pair.run_quiet(&args(&["FLUSHALL"]));
            pair.run_quiet(&args(&["SELECT", "0"]));
            history.clear();
            continue;
        }
        history.push((i, cmd, render(&r)));
    }
}

/// Reads a numeric environment variable.
fn env_num(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

#[test]
fn random_sequences_match_redis() {
    let Some(servers) = servers() else { return };
    let seeds: Vec<u64> = match env_num("KAYVEE_DIFF_SEED") {
        Some(seed) => vec![seed],
        None => (1..=env_num("KAYVEE_DIFF_SEEDS").unwrap_or(20)).collect(),
    };
    let count = env_num("KAYVEE_DIFF_CMDS").unwrap_or(3000) as usize;
    let mut findings = Findings::default();
    for &seed in &seeds {
        for proto in [2, 3] {
            run_seed(&servers, seed, proto, count, &mut findings);
        }
    }
    findings.finish(&format!("seeds {seeds:?} x {count} commands x RESP2/RESP3"));
}

/// Hand-written cases: each is a list of commands, one per line, arguments split on spaces;
/// `""` is an empty argument and `\xNN` a byte. Run on a fresh, flushed pair of connections.
const EDGE_CASES: &[&str] = &[
    // SET options.
    "SET k v EX 0\nSET k v EX -1\nSET k v PX 0\nSET k v NX XX\nSET k v EX 10 PX 100",
    "SET k v KEEPTTL EX 10\nSET k v EX\nSET k v FOO\nSET k v EX abc\nSET k v EX 9223372036854775807",
    "SET k v PX 9223372036854775807\nSET k v EXAT 9223372036854775807\nSET k v GET\nSET k w NX GET\nSET k x XX GET",
    "SET k v EX 100000\nSET k w KEEPTTL\nTTL k\nSET k z\nTTL k\nSET k v EXAT 1\nEXISTS k",
    "SET k v get\nSET k v ex 100 nx\nSET k v Px 100000 xx GET\nPTTL k",
    // Counters.
    "SET n 9223372036854775807\nINCR n\nINCRBY n -1\nDECRBY n -9223372036854775808\nGET n",
    "SET n -9223372036854775808\nDECR n\nDECRBY n 1\nINCRBY n 1.5\nINCRBY n abc\nINCRBY n \"\"",
    "SET n abc\nINCR n\nDECR n\nINCRBYFLOAT n 1\nSET n \\x201\nINCR n\nSET n 1\\x00\nINCR n",
    "SET f 10.5\nINCRBYFLOAT f 0.1\nSET f 5.0e3\nINCRBYFLOAT f 200\nINCRBYFLOAT f inf\nINCRBYFLOAT f abc",
    "INCRBYFLOAT f 1\nINCRBYFLOAT f -1\nGET f\nINCRBYFLOAT f 1.0e1\nINCRBYFLOAT f 0.0001\nINCRBYFLOAT f \"\"",
    "SET n 007\nINCR n\nSET n -0\nINCR n\nSET n +1\nINCR n\nSET n 12345678901234567890\nINCR n",
    "INCR new\nOBJECT ENCODING new\nAPPEND new 1\nOBJECT ENCODING new\nINCR new\nOBJECT ENCODING new",
    // Encodings at the embstr/raw boundary (44 bytes).
    "SET e 12345678901234567890123456789012345678901234\nOBJECT ENCODING e\nSET e 123456789012345678901234567890123456789012345\nOBJECT ENCODING e",
    "SET e 123\nOBJECT ENCODING e\nSET e 12345678901234567890\nOBJECT ENCODING e\nSET e -1\nOBJECT ENCODING e\nSET e 01\nOBJECT ENCODING e",
    "OBJECT ENCODING missing\nOBJECT FOO k\nOBJECT\nOBJECT ENCODING",
    // Ranges.
    "GETRANGE missing 0 -1\nSET s Hello\nGETRANGE s 0 -1\nGETRANGE s -3 -1\nGETRANGE s 5 10\nGETRANGE s 3 1\nGETRANGE s -100 100\nSUBSTR s 1 2",
    "SETRANGE s -1 x\nSETRANGE s 536870912 x\nSETRANGE s 536870911 \"\"\nSETRANGE m 3 abc\nGET m\nSETRANGE m 0 \"\"\nSTRLEN m",
    "APPEND a x\nAPPEND a yz\nSTRLEN a\nGET a\nSTRLEN missing",
    // Bits.
    "SETBIT b 4294967296 1\nSETBIT b 0 2\nSETBIT b -1 1\nSETBIT b 7 1\nGET b\nGETBIT b 7\nGETBIT b 100\nGETBIT b -1",
    "SET b \\xff\\xf0\\x00\nBITCOUNT b\nBITCOUNT b 0\nBITCOUNT b 0 -1 BIT\nBITCOUNT b 1 1 BYTE\nBITCOUNT b 5 30 BIT\nBITCOUNT b 0 0 FOO",
    "SET b \\xff\\xf0\\x00\nBITPOS b 0\nBITPOS b 1\nBITPOS b 2\nBITPOS b 0 1\nBITPOS b 1 2\nBITPOS b 0 0 -1 BIT\nBITPOS b 1 3 100 BIT",
    "BITPOS missing 0\nBITPOS missing 1\nSET b \\xff\\xff\nBITPOS b 0\nBITPOS b 0 0 -1\nBITPOS b 0 0",
    "SET a \\x0f\nSET b \\xf0\\x01\nBITOP AND d a b\nGET d\nBITOP OR d a b\nGET d\nBITOP XOR d a b b\nGET d\nBITOP NOT d a b\nBITOP NOT d b\nGET d\nBITOP FOO d a",
    "BITOP AND d missing1 missing2\nEXISTS d\nBITOP AND\nBITOP OR d",
    // Keys.
    "RENAME missing x\nRENAMENX missing x\nSET a 1\nRENAME a a\nRENAMENX a a\nSET b 2\nRENAMENX a b\nRENAME a b\nGET b",
    "SET a 1\nCOPY a a\nCOPY a b\nCOPY a b\nCOPY a b REPLACE\nCOPY a b DB 16\nCOPY a b DB abc\nCOPY a b FOO\nCOPY missing c",
    "SET a 1\nMOVE a 0\nMOVE a 16\nMOVE a abc\nMOVE a 1\nSELECT 1\nGET a\nSWAPDB 0 1\nSELECT 0\nGET a\nSWAPDB 0 16\nSWAPDB a 1",
    "SELECT 16\nSELECT -1\nSELECT abc\nSELECT 15\nDBSIZE\nSELECT 0",
    "MSET a 1 b 2 c 3\nEXISTS a a b z\nTOUCH a z\nDEL a a b\nUNLINK c z\nDBSIZE\nTYPE a\nSET t v\nTYPE t",
    "MSETNX a 1 b 2\nMSETNX b 3 c 4\nMGET a b c\nGETSET a 9\nGETDEL a\nGETDEL a\nGETSET a\nMSET a",
    "SET g v\nGETEX g\nGETEX g EX 100000\nTTL g\nGETEX g PERSIST\nTTL g\nGETEX g EX 0\nGETEX g EX 10 PX 10\nGETEX g FOO\nGETEX missing EX 10",
    "SETNX a 1\nSETNX a 2\nSETEX a 0 v\nSETEX a -5 v\nSETEX a abc v\nPSETEX a 0 v\nSETEX a 100000 v\nTTL a\nPSETEX a 100000000 w\nPTTL a",
    "KEYS\nKEYS * x\nMSET a 1 ab 2 abc 3 b 4\nKEYS a?\nKEYS a*\nKEYS [ab]\nKEYS *c\nKEYS \\a*",
    // Expiry.
    "SET e v\nEXPIRE e 100000 NX XX\nEXPIRE e 100000 GT LT\nEXPIRE e 100000 NX GT\nEXPIRE e 100000 FOO\nEXPIRE e abc\nEXPIRE e 9223372036854775807",
    "SET e v\nEXPIRE e 100000 XX\nEXPIRE e 100000 NX\nTTL e\nEXPIRE e 200000 GT\nEXPIRE e 50000 GT\nEXPIRE e 50000 LT\nTTL e",
    "SET e v\nEXPIRE e 100000 GT\nEXPIRE e 100000 LT\nTTL e\nPERSIST e\nPERSIST e\nTTL e\nPTTL missing\nPERSIST missing",
    "SET e v\nEXPIREAT e 4102444800\nEXPIRETIME e\nPEXPIRETIME e\nPEXPIREAT e 4102444800001\nPEXPIRETIME e\nEXPIREAT e 1\nEXISTS e\nEXPIRETIME e",
    "SET e v\nEXPIRE e -1\nEXISTS e\nSET e v\nPEXPIRE e 0\nEXISTS e\nSET e v\nEXPIREAT e 9223372036854775807\nPEXPIREAT e 9223372036854775807\nPEXPIRE e 9223372036854775807",
    // Arity and unknown commands.
    "GET\nGET a b\nSET k\nMSET a\nMSET a b c\nGETRANGE a 0\nPING a b\nEXISTS\nDBSIZE x\nFLUSHDB x y",
    "FOOBAR\nFOOBAR a b\nGETT k\n\"\"\nfoo \"\" x\nFOOBAR aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "FOOBAR a\\x00b \\xff\nfoobar a b c d e f g h i j k l m n o p q r s t u v w x y z",
    "set a 1\nGeT a\nsEt a 2 ex 100000\nttl a",
    // Misc.
    "PING\nPING hello\nECHO hi\nECHO\nHELLO 4\nHELLO abc\nHELLO 2 AUTH",
    "FLUSHDB ASYNC\nFLUSHDB SYNC\nFLUSHDB FOO\nFLUSHALL ASYNC\nFLUSHALL FOO",
];

/// Splits an edge-case line into arguments (spaces separate; `""` is empty; `\xNN` is a byte).
fn parse_line(line: &str) -> Args {
    line.split(' ')
        .filter(|t| !t.is_empty())
        .map(|t| if t == "\"\"" { Vec::new() } else { unescape(t) })
        .collect()
}

/// Replaces `\xNN` escapes with their byte.
fn unescape(token: &str) -> Vec<u8> {
    let bytes = token.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 2..i + 4)
            .and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok());
        match (bytes[i], bytes.get(i + 1), hex) {
            (b'\\', Some(b'x'), Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// Raw byte streams (inline commands, pipelining, protocol errors): each is sent in one write and
/// the given number of replies is read; `true` means the server must then close the connection.
const RAW_CASES: &[(&str, &[u8], usize, bool)] = &[
    ("inline ping", b"PING\r\n", 1, false),
    ("inline set/get", b"SET a b\r\nGET a\r\n", 2, false),
    ("inline spaces", b"  GET   a  \r\nPING\r\n", 2, false),
    ("inline empty lines", b"\r\n\r\nPING\r\n", 1, false),
    ("inline bare LF", b"PING\nECHO x\n", 2, false),
    ("inline quotes", b"SET \"a b\" 'c d'\r\nGET \"a b\"\r\nSET q \"x\\x41\\n\"\r\nGET q\r\n", 4, false),
    ("inline unbalanced quotes", b"SET \"a b\r\n", 1, true),
    ("pipelined multibulk", b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$1\r\n1\r\n*2\r\n$4\r\nINCR\r\n$1\r\nx\r\n*2\r\n$3\r\nGET\r\n$1\r\nx\r\n", 3, false),
    ("empty multibulk", b"*0\r\n*1\r\n$4\r\nPING\r\n", 1, false),
    ("negative multibulk", b"*-1\r\n*1\r\n$4\r\nPING\r\n", 1, false),
    ("bad bulk length", b"*1\r\n$x\r\n", 1, true),
    ("bad multibulk length", b"*abc\r\n", 1, true),
    ("bulk without $", b"*1\r\n+PING\r\n", 1, true),
    ("negative bulk length", b"*1\r\n$-1\r\n", 1, true),
    ("unknown command multibulk", b"*2\r\n$6\r\nFOOBAR\r\n$0\r\n\r\n", 1, false),
];

/// Runs one list of commands on a fresh pair of connections in `proto`.
fn run_edge_case(servers: &(Server, Server), case: &str, proto: u8, findings: &mut Findings) {
    let mut pair = Pair::open(servers, proto, findings);
    for (i, line) in case.lines().enumerate() {
        let cmd = parse_line(line);
        let (r, k) = pair.both(&cmd);
        if !same_reply(&cmd, &r, &k) {
            let context = format!(
                "edge case RESP{proto} line {} of:\n    {}",
                i + 1,
                case.replace('\n', "\n    ")
            );
            findings.add(Mismatch {
                context,
                cmd,
                redis: r,
                kayvee: k,
                history: vec![],
            });
            return;
        }
    }
}

/// Sends one raw byte stream to both servers and compares the replies and the closing.
fn run_raw_case(
    servers: &(Server, Server),
    case: &(&str, &[u8], usize, bool),
    proto: u8,
    findings: &mut Findings,
) {
    let (name, bytes, replies, closes) = *case;
    let mut pair = Pair::open(servers, proto, findings);
    let read_all = |conn: &mut Conn| -> Reply {
        conn.send(bytes).map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        for _ in 0..replies {
            out.extend(
                conn.read_reply()
                    .map_err(|e| format!("{}<{}>", show(&out), kind_name(&e)))?,
            );
        }
        if closes && !conn.is_closed(Duration::from_secs(2)) {
            out.extend_from_slice(b"<still open>");
        }
        Ok(out)
    };
    let (r, k) = (read_all(&mut pair.redis), read_all(&mut pair.kayvee));
    if r != k {
        let context = format!("raw case '{name}' RESP{proto}");
        findings.add(Mismatch {
            context,
            cmd: vec![bytes.to_vec()],
            redis: r,
            kayvee: k,
            history: vec![],
        });
    }
}

#[test]
fn edge_cases_match_redis() {
    let Some(servers) = servers() else { return };
    let mut findings = Findings::default();
    for proto in [2, 3] {
        for case in EDGE_CASES {
            run_edge_case(&servers, case, proto, &mut findings);
        }
        for case in RAW_CASES {
            run_raw_case(&servers, case, proto, &mut findings);
        }
    }
    findings.finish("hand-written edge cases");
}

#[test]
fn generator_is_deterministic_and_varied() {
    let gen_n = |seed| {
        let mut gen = Gen {
            rng: Rng(seed),
            step: 0,
            pending: Default::default(),
            stream_ids: Vec::new(),
            scripts_seen: Vec::new(),
            scripting: true,
        };
        (0..500).map(|_| gen.command()).collect::<Vec<_>>()
    };
    assert_eq!(gen_n(7), gen_n(7));
    assert_ne!(gen_n(7), gen_n(8));
    let names: HashSet<String> = gen_n(7)
        .iter()
        .map(|c| String::from_utf8_lossy(&c[0]).to_ascii_uppercase())
        .collect();
    assert!(
        names.len() > 40,
        "only {} distinct commands: {names:?}",
        names.len()
    );
}

#[test]
fn comparison_rules() {
    let ttl = args(&["TTL", "k"]);
    assert!(same_reply(
        &ttl,
        &Ok(b":100\r\n".to_vec()),
        &Ok(b":99\r\n".to_vec())
    ));
    assert!(!same_reply(
        &ttl,
        &Ok(b":100\r\n".to_vec()),
        &Ok(b":-1\r\n".to_vec())
    ));
    assert!(!same_reply(
        &ttl,
        &Ok(b":100\r\n".to_vec()),
        &Ok(b":10\r\n".to_vec())
    ));
    let keys = args(&["KEYS", "*"]);
    let ab = Ok(b"*2\r\n$1\r\na\r\n$1\r\nb\r\n".to_vec());
    let ba = Ok(b"*2\r\n$1\r\nb\r\n$1\r\na\r\n".to_vec());
    assert!(same_reply(&keys, &ab, &ba));
    assert!(!same_reply(&args(&["MGET", "a", "b"]), &ab, &ba));
    assert!(same_reply(&args(&["SMEMBERS", "s"]), &ab, &ba));
    let scan = |batch: &str| Ok(format!("*2\r\n$1\r\n0\r\n{batch}").into_bytes());
    let sscan = args(&["SSCAN", "s", "0"]);
    assert!(same_reply(
        &sscan,
        &scan("*2\r\n$1\r\na\r\n$1\r\nb\r\n"),
        &scan("*2\r\n$1\r\nb\r\n$1\r\na\r\n")
    ));
    assert!(!same_reply(
        &sscan,
        &scan("*1\r\n$1\r\na\r\n"),
        &scan("*1\r\n$1\r\nb\r\n")
    ));
    let (one_a, one_b) = (Ok(b"$1\r\na\r\n".to_vec()), Ok(b"$1\r\nb\r\n".to_vec()));
    assert!(same_reply(&args(&["SRANDMEMBER", "s"]), &one_a, &one_b));
    assert!(!same_reply(
        &args(&["SRANDMEMBER", "s"]),
        &one_a,
        &Ok(b"$-1\r\n".to_vec())
    ));
    let repeats = args(&["HRANDFIELD", "h", "-2"]);
    assert!(same_reply(
        &repeats,
        &ab,
        &Ok(b"*2\r\n$1\r\na\r\n$1\r\na\r\n".to_vec())
    ));
    assert!(!same_reply(
        &repeats,
        &ab,
        &Ok(b"*1\r\n$1\r\na\r\n".to_vec())
    ));
    let hello = args(&["HELLO", "3"]);
    let h1 = Ok(b"%2\r\n$2\r\nid\r\n:5\r\n$5\r\nproto\r\n:3\r\n".to_vec());
    let h2 = Ok(b"%2\r\n$2\r\nid\r\n:9\r\n$5\r\nproto\r\n:3\r\n".to_vec());
    let h3 = Ok(b"%2\r\n$2\r\nid\r\n:9\r\n$5\r\nproto\r\n:2\r\n".to_vec());
    assert!(same_reply(&hello, &h1, &h2));
    assert!(!same_reply(&hello, &h1, &h3));
    let pending = |idle: &str| {
        Ok(format!("*1\r\n*4\r\n$3\r\n1-0\r\n$1\r\nc\r\n:{idle}\r\n:1\r\n").into_bytes())
    };
    let xpending = args(&["XPENDING", "s", "g", "-", "+", "10"]);
    assert!(same_reply(&xpending, &pending("3"), &pending("7")));
    assert!(!same_reply(
        &args(&["XPENDING", "s", "g"]),
        &pending("3"),
        &pending("7")
    ));
    let consumer = |idle: &str, pel: &str| {
        Ok(
            format!("*1\r\n*4\r\n$4\r\nidle\r\n:{idle}\r\n$7\r\npending\r\n:{pel}\r\n")
                .into_bytes(),
        )
    };
    let xinfo = args(&["XINFO", "CONSUMERS", "s", "g"]);
    assert!(same_reply(&xinfo, &consumer("3", "1"), &consumer("9", "1")));
    assert!(!same_reply(
        &xinfo,
        &consumer("3", "1"),
        &consumer("3", "2")
    ));
    assert_eq!(
        parse_line("SET a \"\" \\x00b"),
        vec![b"SET".to_vec(), b"a".to_vec(), vec![], b"\x00b".to_vec()]
    );
}
