//! Differential generator for streams: XADD (explicit, `ms-*` and bad IDs, NOMKSTREAM,
//! MAXLEN/MINID with `=`/`~` and LIMIT), ranges, XLEN, XDEL, XTRIM, XREAD without BLOCK,
//! consumer groups (XGROUP, XREADGROUP with `>` and explicit IDs, NOACK, XACK, XPENDING, XCLAIM,
//! XAUTOCLAIM), XINFO and XSETID. Mostly on two keys of its own, where streams live long
//! enough to grow; else over the shared key space (WRONGTYPE on other types, other families'
//! commands on streams).
//!
//! Replies must not depend on time, so no ID is `*`: an XADD at step `n` uses milliseconds
//! `n` rounded down to a multiple of 8 (with `ms-*` several entries share it), which keeps IDs
//! increasing and lets reads guess existing IDs from the step alone. Idle thresholds
//! (XCLAIM/XAUTOCLAIM min-idle-time, XPENDING IDLE) are 0, an hour (more than any delivery in a
//! run is old) or 10^10 ms; XCLAIM IDLE/TIME set delivery times a day or more in the past (or
//! in the future, which Redis clamps to now), so every comparison of an idle time with a
//! threshold has one answer. The idle times and delivery times in replies are masked by the
//! harness (see `same_reply`). Sometimes a burst of XADDs to one key (queued in
//! `Gen::pending`) grows a stream past a node's 100 entries or 4096 bytes, so `~` trimming and
//! XINFO's radix-tree counters see several nodes.

use super::{args, Args, Gen};

/// Keys only this family uses (besides the shared ones), so streams live long.
pub(crate) const STREAM_KEYS: &[&str] = &["s1", "s1", "s1", "s2"];
/// Consumer group names (g3 rarely exists: NOGROUP errors).
const GROUPS: &[&str] = &["g1", "g1", "g1", "g2", "g2", "g3"];
/// Consumer names.
const CONSUMERS: &[&str] = &["alice", "bob", "carol"];
/// Field names: repeating the master entry's fields lets Redis's node compress them.
const FIELDS: &[&str] = &["f", "f", "g", "h", ""];
/// Field values, one long enough that a few of them fill a 4096-byte node.
const VALUES: &[&str] = &[
    "1",
    "v",
    "",
    "hello",
    "-5",
    "12345678901234567890",
    "a value of a few hundred bytes: 0123456789012345678901234567890123456789012345678901234567\
     8901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678\
     9012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789",
];
/// COUNT arguments (0 and negatives are accepted by some commands, errors for others).
const COUNTS: &[&str] = &["1", "2", "3", "5", "10", "100", "0", "-1", "abc"];
/// IDs that do not parse, or parse only in some places. None is above 2^64 - 1: Redis's
/// `strtoull` then leaves `errno` at ERANGE, and a later numeric SORT in the same process fails
/// with "One or more scores can't be converted into double" (it tests `errno` without clearing
/// it), a leak Kayvee does not reproduce.
const BAD_IDS: &[&str] = &["abc", "-1", "1-x", "1-", "-", "+", "0x10", "", "1-2-3"];
/// Idle thresholds: none, an hour, a few months (see the module comment).
const MIN_IDLE: &[&str] = &["0", "0", "3600000", "10000000000", "-1", "abc"];

impl Gen {
    /// The milliseconds of IDs written at this step.
    fn stream_ms(&self) -> u64 {
        self.step & !7
    }

    /// An ID that may exist: one recently added, or a recent step's milliseconds and a small
    /// sequence number.
    fn stream_guess(&mut self) -> String {
        if !self.stream_ids.is_empty() && self.rng.chance(50) {
            return self.stream_ids[self.rng.below(self.stream_ids.len())].clone();
        }
        let back = 8 * [0, 1, 2, 3, 5, 10, 30, 100][self.rng.below(8)];
        let ms = self.stream_ms().saturating_sub(back);
        match self.rng.below(10) {
            0 => ms.to_string(),
            1 | 2 => format!("{ms}-{}", 100 + self.rng.below(150)),
            _ => format!("{ms}-{}", self.rng.below(3)),
        }
    }

    /// An ID argument: mostly a guess, sometimes an edge or an invalid one.
    fn stream_id(&mut self) -> String {
        match self.rng.below(20) {
            0 => self.rng.pick(BAD_IDS).into(),
            1 => self.rng.pick(&["0", "0-0", "0-1"]).into(),
            2 => "18446744073709551615-18446744073709551615".into(),
            _ => self.stream_guess(),
        }
    }

    /// A range bound: `-`/`+`, an ID, or an exclusive `(ID`.
    fn stream_bound(&mut self, low: bool) -> String {
        match self.rng.below(10) {
            0..=2 => (if low { "-" } else { "+" }).into(),
            3 => self.rng.pick(&["-", "+", "(-", "(+", "(abc"]).into(),
            4 | 5 => format!("({}", self.stream_id()),
            _ => self.stream_id(),
        }
    }

    /// A key: mostly one of the stream family's own (the other families overwrite the shared
    /// keys too often for streams to grow groups and nodes there), else a shared one.
    fn stream_key(&mut self) -> &'static str {
        if self.rng.chance(75) {
            self.rng.pick(STREAM_KEYS)
        } else {
            self.key()
        }
    }

    /// A group name.
    fn group(&mut self) -> &'static str {
        self.rng.pick(GROUPS)
    }

    /// One stream command.
    pub(crate) fn stream_command(&mut self) -> Args {
        let k = self.stream_key();
        match self.rng.below(200) {
            0..=47 => self.xadd(k),
            48 if self.rng.chance(60) => {
                self.xadd_burst(k);
                self.pending.pop_front().expect("a burst")
            }
            48 => self.xadd(k),
            49..=64 => self.xrange(k),
            65..=68 => args(&["XLEN", k]),
            69..=74 => {
                let mut cmd = args(&["XDEL", k]);
                (0..1 + self.rng.below(3)).for_each(|_| cmd.push(self.stream_id().into()));
                cmd
            }
            75..=80 => {
                let mut cmd = args(&["XTRIM", k]);
                cmd.extend(self.trim_args());
                cmd
            }
            81..=90 => self.xread(),
            91..=114 => self.xgroup(k),
            115..=138 => {
                let read = self.xreadgroup();
                if !self.rng.chance(25) {
                    return read;
                }
                // The group first (BUSYGROUP when it exists), so that reads find one.
                let streams = read.iter().position(|a| a == b"STREAMS");
                let key = read[streams.expect("STREAMS") + 1].clone();
                let mut create = args(&["XGROUP", "CREATE"]);
                create.extend([key, read[2].clone(), b"0".to_vec(), b"MKSTREAM".to_vec()]);
                self.pending.push_back(read);
                create
            }
            139..=148 => {
                let mut cmd = args(&["XACK", k, self.group()]);
                (0..1 + self.rng.below(3)).for_each(|_| cmd.push(self.stream_id().into()));
                cmd
            }
            149..=160 => self.xpending(k),
            161..=170 => self.xclaim(k),
            171..=178 => self.xautoclaim(k),
            179..=192 => self.xinfo(k),
            193..=196 => self.xsetid(k),
            _ => self.stream_bad(k),
        }
    }

    /// Field-value pairs (sometimes a field without its value).
    fn stream_fields(&mut self) -> Args {
        let mut out = Args::new();
        for _ in 0..1 + self.rng.below(3) {
            out.push(self.rng.pick(FIELDS).into());
            out.push(self.rng.pick(VALUES).into());
        }
        if self.rng.chance(3) {
            out.pop();
        }
        out
    }

    /// `MAXLEN|MINID [=|~] threshold [LIMIT n]`, sometimes malformed.
    fn trim_args(&mut self) -> Args {
        let mut out: Vec<String> = Vec::new();
        let minid = self.rng.chance(35);
        out.push((if minid { "MINID" } else { "MAXLEN" }).into());
        let approx = match self.rng.below(3) {
            0 => None,
            1 => Some("="),
            _ => Some("~"),
        };
        out.extend(approx.map(String::from));
        out.push(if minid {
            self.stream_id()
        } else {
            self.rng
                .pick(&["0", "1", "2", "5", "10", "50", "100", "150", "-1", "abc"])
                .into()
        });
        if self.rng.chance(20) {
            out.push("LIMIT".into());
            out.push(self.rng.pick(&["0", "1", "10", "100", "-1", "x"]).into());
        }
        if self.rng.chance(3) {
            out.push(self.rng.pick(&["MAXLEN", "FOO", "LIMIT"]).into());
        }
        out.into_iter().map(String::into_bytes).collect()
    }

    /// The ID of an XADD: mostly new (`ms-*` or explicit), sometimes too small or invalid.
    fn xadd_id(&mut self) -> String {
        let ms = self.stream_ms();
        match self.rng.below(20) {
            0..=7 => format!("{ms}-*"),
            8..=12 => format!("{ms}-{}", self.rng.below(4)),
            13 | 14 => ms.to_string(),
            15 => self.stream_guess(),
            16 => self.rng.pick(&["0-0", "0", "0-*", "0-1"]).into(),
            17 => self.rng.pick(BAD_IDS).into(),
            18 => self
                .rng
                .pick(&[
                    "18446744073709551615-18446744073709551615",
                    "18446744073709551615-*",
                ])
                .into(),
            // Never at milliseconds an `ms-*` uses (multiples of 8): after `ms-18446744073709551615`
            // Redis answers `ms-*` from a stale `errno` (EDOM left by an earlier failed XADD
            // gives "equal or smaller", anything else "Elements are too large to be stored").
            _ => format!("{}-18446744073709551615", ms + 7),
        }
    }

    /// XADD with options.
    fn xadd(&mut self, k: &str) -> Args {
        let mut cmd = args(&["XADD", k]);
        if self.rng.chance(10) {
            cmd.push(b"NOMKSTREAM".to_vec());
        }
        if self.rng.chance(20) {
            cmd.extend(self.trim_args());
        }
        let id = self.xadd_id();
        self.remember_id(&id);
        cmd.push(id.into_bytes());
        cmd.extend(self.stream_fields());
        cmd
    }

    /// Keeps the last few XADD IDs (`ms-*` taken as `ms-0`, usually right).
    fn remember_id(&mut self, id: &str) {
        let id = match id.strip_suffix("-*") {
            Some(ms) => format!("{ms}-0"),
            None => id.to_string(),
        };
        if self.stream_ids.len() == 16 {
            self.stream_ids.remove(0);
        }
        self.stream_ids.push(id);
    }

    /// Queues 60 to 200 XADDs to `k` (same milliseconds, increasing sequence numbers) so that
    /// the stream spans several nodes.
    fn xadd_burst(&mut self, k: &str) {
        let ms = self.stream_ms();
        let long = self.rng.chance(30);
        for seq in 0..60 + self.rng.below(140) {
            let v = if long && seq % 3 == 0 {
                VALUES[VALUES.len() - 1]
            } else {
                self.rng.pick(&["1", "2", "x"])
            };
            let id = format!("{ms}-{}", 100 + seq);
            if seq % 20 == 0 {
                self.remember_id(&id);
            }
            self.pending
                .push_back(args(&["XADD", k, &id, "f", v, self.rng.pick(FIELDS), "1"]));
        }
    }

    /// XRANGE or XREVRANGE, sometimes with COUNT.
    fn xrange(&mut self, k: &str) -> Args {
        let rev = self.rng.chance(40);
        let (lo, hi) = (self.stream_bound(true), self.stream_bound(false));
        let mut cmd = if rev {
            args(&["XREVRANGE", k, &hi, &lo])
        } else {
            args(&["XRANGE", k, &lo, &hi])
        };
        if self.rng.chance(40) {
            cmd.extend(args(&["COUNT", self.rng.pick(COUNTS)]));
        }
        if self.rng.chance(3) {
            cmd.push(b"FOO".to_vec());
        }
        cmd
    }

    /// `STREAMS k1 .. kn id1 .. idn` (sometimes one ID short), IDs from `id`.
    fn streams_tail(&mut self, cmd: &mut Args, id: fn(&mut Gen) -> String) {
        cmd.push(b"STREAMS".to_vec());
        let n = if self.rng.chance(80) { 1 } else { 2 };
        (0..n).for_each(|_| cmd.push(self.stream_key().into()));
        (0..n).for_each(|_| cmd.push(id(self).into_bytes()));
        if self.rng.chance(3) {
            cmd.pop();
        }
    }

    /// XREAD [COUNT n] STREAMS ... without BLOCK.
    fn xread(&mut self) -> Args {
        let mut cmd = args(&["XREAD"]);
        if self.rng.chance(50) {
            cmd.extend(args(&["COUNT", self.rng.pick(COUNTS)]));
        }
        self.streams_tail(&mut cmd, |g| match g.rng.below(8) {
            0 => "$".into(),
            1 => "0".into(),
            2 => g.rng.pick(&["+", ">", "abc"]).into(),
            _ => g.stream_guess(),
        });
        cmd
    }

    /// XGROUP subcommands.
    fn xgroup(&mut self, k: &str) -> Args {
        let g = self.group();
        let from = |gen: &mut Gen| -> String {
            match gen.rng.below(6) {
                0 => "$".into(),
                1 => "0".into(),
                _ => gen.stream_id(),
            }
        };
        let mut cmd = match self.rng.below(14) {
            0..=6 => {
                let mut cmd = args(&["XGROUP", "CREATE", k, g, &from(self)]);
                if self.rng.chance(60) {
                    cmd.push(b"MKSTREAM".to_vec());
                }
                cmd
            }
            7 | 8 => args(&["XGROUP", "SETID", k, g, &from(self)]),
            9 => args(&["XGROUP", "DESTROY", k, g]),
            10 | 11 => args(&["XGROUP", "CREATECONSUMER", k, g, self.rng.pick(CONSUMERS)]),
            12 => args(&["XGROUP", "DELCONSUMER", k, g, self.rng.pick(CONSUMERS)]),
            _ => {
                let sub = self
                    .rng
                    .pick(&["FOO", "create", "SETID", "HELP", "DESTROY"]);
                args(&["XGROUP", sub, k])
            }
        };
        if cmd.len() > 4 && self.rng.chance(15) {
            let n = self.rng.pick(&["0", "1", "3", "100", "-1", "-5", "x"]);
            cmd.extend(args(&["ENTRIESREAD", n]));
        }
        cmd
    }

    /// XREADGROUP GROUP g c [COUNT n] [NOACK] STREAMS ..., mostly with `>`.
    fn xreadgroup(&mut self) -> Args {
        let mut cmd = args(&[
            "XREADGROUP",
            "GROUP",
            self.group(),
            self.rng.pick(CONSUMERS),
        ]);
        if self.rng.chance(50) {
            cmd.extend(args(&["COUNT", self.rng.pick(COUNTS)]));
        }
        if self.rng.chance(20) {
            cmd.push(b"NOACK".to_vec());
        }
        self.streams_tail(&mut cmd, |g| match g.rng.below(10) {
            0..=5 => ">".into(),
            6 => "0".into(),
            7 => g.rng.pick(&["$", "+", "abc"]).into(),
            _ => g.stream_guess(),
        });
        cmd
    }

    /// XPENDING summary, or the extended form with IDLE, bounds, COUNT and a consumer.
    fn xpending(&mut self, k: &str) -> Args {
        let mut cmd = args(&["XPENDING", k, self.group()]);
        if self.rng.chance(30) {
            return cmd;
        }
        if self.rng.chance(20) {
            cmd.extend(args(&["IDLE", self.rng.pick(MIN_IDLE)]));
        }
        let (lo, hi) = (self.stream_bound(true), self.stream_bound(false));
        cmd.extend(args(&[&lo, &hi, self.rng.pick(COUNTS)]));
        if self.rng.chance(40) {
            cmd.push(self.rng.pick(CONSUMERS).into());
        }
        if self.rng.chance(3) {
            cmd.pop();
        }
        cmd
    }

    /// XCLAIM with any of its options.
    fn xclaim(&mut self, k: &str) -> Args {
        let mut cmd = args(&[
            "XCLAIM",
            k,
            self.group(),
            self.rng.pick(CONSUMERS),
            self.rng.pick(MIN_IDLE),
        ]);
        (0..1 + self.rng.below(3)).for_each(|_| cmd.push(self.stream_guess().into()));
        let mut opts: Vec<Vec<&str>> = Vec::new();
        if self.rng.chance(20) {
            let idle = self.rng.pick(&["0", "100000000", "1000000000", "-5", "x"]);
            opts.push(vec!["IDLE", idle]);
        }
        if self.rng.chance(10) {
            let time = self.rng.pick(&["1", "1000000000000", "4102444800000", "x"]);
            opts.push(vec!["TIME", time]);
        }
        if self.rng.chance(15) {
            opts.push(vec!["RETRYCOUNT", self.rng.pick(&["0", "5", "-1", "x"])]);
        }
        if self.rng.chance(20) {
            opts.push(vec!["FORCE"]);
        }
        if self.rng.chance(30) {
            opts.push(vec!["JUSTID"]);
        }
        if self.rng.chance(10) {
            let id = self.stream_guess();
            cmd.extend(opts.drain(..).flatten().map(|s| s.as_bytes().to_vec()));
            cmd.extend(args(&["LASTID", &id]));
        }
        if self.rng.chance(3) {
            opts.push(vec!["FOO"]);
        }
        cmd.extend(opts.into_iter().flatten().map(|s| s.as_bytes().to_vec()));
        cmd
    }

    /// XAUTOCLAIM key group consumer min-idle start [COUNT n] [JUSTID].
    fn xautoclaim(&mut self, k: &str) -> Args {
        let start = match self.rng.below(4) {
            0 => "0-0".into(),
            _ => self.stream_bound(true),
        };
        let mut cmd = args(&[
            "XAUTOCLAIM",
            k,
            self.group(),
            self.rng.pick(CONSUMERS),
            self.rng.pick(MIN_IDLE),
            &start,
        ]);
        if self.rng.chance(50) {
            cmd.extend(args(&["COUNT", self.rng.pick(COUNTS)]));
        }
        if self.rng.chance(30) {
            cmd.push(b"JUSTID".to_vec());
        }
        cmd
    }

    /// XINFO STREAM [FULL [COUNT n]], GROUPS, CONSUMERS (time fields masked by the harness).
    fn xinfo(&mut self, k: &str) -> Args {
        match self.rng.below(10) {
            0..=3 => args(&["XINFO", "STREAM", k]),
            4 | 5 => {
                let mut cmd = args(&["XINFO", "STREAM", k, "FULL"]);
                if self.rng.chance(40) {
                    cmd.extend(args(&["COUNT", self.rng.pick(COUNTS)]));
                }
                cmd
            }
            6 | 7 => args(&["XINFO", "GROUPS", k]),
            8 => args(&["XINFO", "CONSUMERS", k, self.group()]),
            _ => {
                let sub = self.rng.pick(&["FOO", "STREAM", "GROUPS", "CONSUMERS"]);
                let mut cmd = args(&["XINFO", sub]);
                if self.rng.chance(50) {
                    cmd.extend(args(&[k, "x", "y"]));
                }
                cmd
            }
        }
    }

    /// XSETID key id [ENTRIESADDED n] [MAXDELETEDID id].
    fn xsetid(&mut self, k: &str) -> Args {
        let id = match self.rng.below(4) {
            0 => self.stream_id(),
            _ => format!("{}-5", self.stream_ms()),
        };
        let mut cmd = args(&["XSETID", k, &id]);
        if self.rng.chance(40) {
            let n = self.rng.pick(&["0", "10", "1000", "100000", "-1", "x"]);
            cmd.extend(args(&["ENTRIESADDED", n]));
        }
        if self.rng.chance(30) {
            cmd.extend(args(&["MAXDELETEDID", &self.stream_id()]));
        }
        cmd
    }

    /// Wrong arity and stray arguments.
    fn stream_bad(&mut self, k: &str) -> Args {
        let line = self.rng.pick(&[
            "XADD",
            "XADD K",
            "XADD K 1-1",
            "XADD K 1-1 f",
            "XADD K MAXLEN 5",
            "XADD K MAXLEN ~ 5 LIMIT 1 1-1 f v",
            "XADD K MINID",
            "XRANGE K -",
            "XLEN",
            "XLEN K x",
            "XDEL K",
            "XTRIM K",
            "XTRIM K FOO 1",
            "XREAD",
            "XREAD STREAMS",
            "XREAD COUNT 1",
            "XREAD BLOCK x STREAMS K 0",
            "XREAD STREAMS K",
            "XREAD FOO STREAMS K 0",
            "XREADGROUP GROUP g1 alice STREAMS K",
            "XREADGROUP STREAMS K >",
            "XREADGROUP GROUP g1 STREAMS K >",
            "XREAD STREAMS K >",
            "XACK K g1",
            "XPENDING K",
            "XPENDING K g1 - +",
            "XPENDING K g1 IDLE 0 - + 10 alice x",
            "XCLAIM K g1 alice 0",
            "XAUTOCLAIM K g1 alice 0",
            "XAUTOCLAIM K g1 alice 0 0 COUNT 0",
            "XAUTOCLAIM K g1 alice 0 0 COUNT 1 FOO",
            "XINFO",
            "XINFO STREAM",
            "XINFO STREAM K FULL COUNT",
            "XINFO STREAM K FOO",
            "XSETID K",
            "XSETID K 1-1 ENTRIESADDED",
            "XGROUP",
            "XGROUP CREATE K g1",
            "XGROUP CREATE K g1 $ FOO",
            "XGROUP SETID K g1",
        ]);
        line.split(' ')
            .map(|w| if w == "K" { k } else { w }.as_bytes().to_vec())
            .collect()
    }
}
