//! Differential generator for sorted sets and SORT: every sorted-set command with valid and
//! invalid scores, ranges, flags and option mixes, over the shared key set (so WRONGTYPE paths
//! and stores onto other types run).
//!
//! Members stay short (no skiplist conversion), so lexicographic ranges on mixed scores behave
//! as Redis's listpack walk, which is deterministic. Members include `0`..`3` so numeric SORT
//! succeeds sometimes and `GET foo:*` reaches the key `foo:1`. SORT never combines ALPHA with
//! BY (Redis leaves the order of ties unspecified there).

use super::{args, Args, Gen, INDEXES};

/// Members: letters, digits (numeric SORT, `foo:*` / `k*` patterns) and an empty string.
const MEMBERS: &[&str] = &["a", "b", "c", "d", "m", "z", "aa", "0", "1", "2", "3", ""];
/// Scores: integers, fractions, infinities, hex, signed zero, and invalid ones. No overflow
/// (`1e400`): Redis's SORT reads a stale `errno == ERANGE` left by such a parse and then
/// fails on valid weights, which no reimplementation can reproduce.
const SCORES: &[&str] = &[
    "0", "1", "2", "2.5", "-1", "-0.5", "10", "1e3", "inf", "-inf", "+inf", "0x10", "-0", "abc",
    "nan", " 1", "1e",
];
/// Score-range bounds, open and closed, and invalid ones.
const SCORE_BOUNDS: &[&str] = &[
    "-inf", "+inf", "0", "1", "(1", "2", "(2.5", "10", "(-inf", "abc", "(", "", "(0x10",
];
/// Lexicographic bounds, and invalid ones.
const LEX_BOUNDS: &[&str] = &[
    "-", "+", "[a", "(b", "[c", "(m", "[z", "[", "(", "a", "", "[1",
];
/// Weights for ZUNION/ZINTER.
const WEIGHTS: &[&str] = &["1", "2", "0", "-1", "0.5", "inf", "abc"];

impl Gen {
    fn member(&mut self) -> &'static str {
        self.rng.pick(MEMBERS)
    }

    /// A score, mostly valid.
    fn score(&mut self) -> &'static str {
        if self.rng.chance(85) {
            self.rng.pick(&SCORES[..13])
        } else {
            self.rng.pick(SCORES)
        }
    }

    /// Sorted sets and SORT.
    pub(crate) fn zset_command(&mut self) -> Args {
        let k = self.key();
        match self.rng.below(40) {
            0..=5 => self.zadd_command(),
            6 => args(&["ZINCRBY", k, self.score(), self.member()]),
            7 => {
                let mut c = args(&["ZREM", k]);
                c.extend((0..1 + self.rng.below(3)).map(|_| self.member().as_bytes().to_vec()));
                c
            }
            8 => args(&["ZSCORE", k, self.member()]),
            9 => args(&["ZMSCORE", k, self.member(), self.member()]),
            10 => args(&["ZCARD", k]),
            11 => args(&[
                "ZCOUNT",
                k,
                self.rng.pick(SCORE_BOUNDS),
                self.rng.pick(SCORE_BOUNDS),
            ]),
            12 => args(&[
                "ZLEXCOUNT",
                k,
                self.rng.pick(LEX_BOUNDS),
                self.rng.pick(LEX_BOUNDS),
            ]),
            13..=16 => self.zrange_command(false),
            17 => self.zrange_command(true),
            18 => args(&[
                "ZREVRANGE",
                k,
                self.rng.pick(INDEXES),
                self.rng.pick(INDEXES),
                "WITHSCORES",
            ]),
            19 => self.legacy_range(),
            20 => args(&[self.rng.pick(&["ZRANK", "ZREVRANK"]), k, self.member()]),
            21 if self.rng.chance(40) => self.zset_blocking_pop(),
            21 | 22 => {
                let name = self.rng.pick(&["ZPOPMIN", "ZPOPMAX"]);
                match self.rng.below(3) {
                    0 => args(&[name, k]),
                    _ => args(&[name, k, self.rng.pick(&["0", "1", "2", "5", "-1", "a"])]),
                }
            }
            23 => self.zmpop_command(),
            24 => args(&[
                "ZREMRANGEBYRANK",
                k,
                self.rng.pick(INDEXES),
                self.rng.pick(INDEXES),
            ]),
            25 => args(&[
                "ZREMRANGEBYSCORE",
                k,
                self.rng.pick(SCORE_BOUNDS),
                self.rng.pick(SCORE_BOUNDS),
            ]),
            26 => args(&[
                "ZREMRANGEBYLEX",
                k,
                self.rng.pick(LEX_BOUNDS),
                self.rng.pick(LEX_BOUNDS),
            ]),
            27..=30 => self.setop_command(),
            31 => {
                let mut c = args(&["ZINTERCARD", self.rng.pick(&["1", "2", "2", "0", "3"])]);
                c.extend((0..2).map(|_| self.key().as_bytes().to_vec()));
                if self.rng.chance(40) {
                    c.extend(args(&["LIMIT", self.rng.pick(&["0", "1", "2", "-1", "x"])]));
                }
                c
            }
            32 => {
                let mut c = args(&["ZRANDMEMBER", k]);
                if self.rng.chance(70) {
                    c.push(
                        self.rng
                            .pick(&["0", "1", "3", "-2", "10", "-10", "x"])
                            .into(),
                    );
                    if self.rng.chance(50) {
                        c.push(self.rng.pick(&["WITHSCORES", "withscores", "FOO"]).into());
                    }
                }
                c
            }
            33 => {
                let mut c = args(&["ZSCAN", k, self.rng.pick(&["0", "0", "x", "1"])]);
                if self.rng.chance(40) {
                    c.extend(args(&["MATCH", self.rng.pick(&["*", "a*", "[0-9]", "?"])]));
                }
                if self.rng.chance(30) {
                    c.extend(args(&["COUNT", self.rng.pick(&["1", "10", "0", "x"])]));
                }
                c
            }
            _ => self.sort_command(),
        }
    }

    /// ZADD with random (sometimes conflicting) flags and one to three pairs.
    fn zadd_command(&mut self) -> Args {
        let mut c = args(&["ZADD", self.key()]);
        for flag in ["NX", "XX", "GT", "LT", "CH", "INCR"] {
            if self.rng.chance(12) {
                c.push(flag.into());
            }
        }
        let pairs = [1, 1, 2, 3][self.rng.below(4)];
        for _ in 0..pairs {
            c.push(self.score().into());
            c.push(self.member().into());
        }
        if self.rng.chance(3) {
            c.push(self.score().into());
        }
        c
    }

    /// ZRANGE (or ZRANGESTORE) with a random form and options.
    fn zrange_command(&mut self, store: bool) -> Args {
        let mut c = if store {
            args(&["ZRANGESTORE", self.key(), self.key()])
        } else {
            args(&["ZRANGE", self.key()])
        };
        let form = self.rng.below(3);
        let (a, b) = match form {
            0 => (self.rng.pick(INDEXES), self.rng.pick(INDEXES)),
            1 => (self.rng.pick(SCORE_BOUNDS), self.rng.pick(SCORE_BOUNDS)),
            _ => (self.rng.pick(LEX_BOUNDS), self.rng.pick(LEX_BOUNDS)),
        };
        c.extend(args(&[a, b]));
        let mut opts: Vec<Vec<&str>> = Vec::new();
        match form {
            1 => opts.push(vec!["BYSCORE"]),
            2 => opts.push(vec!["BYLEX"]),
            _ => {}
        }
        if self.rng.chance(30) {
            opts.push(vec!["REV"]);
        }
        if self.rng.chance(30) || (form > 0 && self.rng.chance(20)) {
            let off = self.rng.pick(&["0", "1", "2", "-1", "x"]);
            let cnt = self.rng.pick(&["1", "2", "-1", "0", "10"]);
            opts.push(vec!["LIMIT", off, cnt]);
        }
        if self.rng.chance(if form == 2 { 10 } else { 40 }) {
            opts.push(vec!["WITHSCORES"]);
        }
        if self.rng.chance(4) {
            opts.push(vec![self.rng.pick(&["BYSCORE", "BYLEX", "FOO", "REV"])]);
        }
        let shift = self.rng.below(opts.len() + 1);
        opts.rotate_left(shift);
        c.extend(opts.into_iter().flatten().map(|s| s.as_bytes().to_vec()));
        c
    }

    /// Z[REV]RANGEBY{SCORE,LEX} with optional WITHSCORES / LIMIT.
    fn legacy_range(&mut self) -> Args {
        let k = self.key();
        let name = self.rng.pick(&[
            "ZRANGEBYSCORE",
            "ZREVRANGEBYSCORE",
            "ZRANGEBYLEX",
            "ZREVRANGEBYLEX",
        ]);
        let bounds = if name.ends_with("LEX") {
            LEX_BOUNDS
        } else {
            SCORE_BOUNDS
        };
        let mut c = args(&[name, k, self.rng.pick(bounds), self.rng.pick(bounds)]);
        if self.rng.chance(40) {
            c.push(b"WITHSCORES".to_vec());
        }
        if self.rng.chance(40) {
            c.extend(args(&[
                "LIMIT",
                self.rng.pick(&["0", "1", "-1"]),
                self.rng.pick(&["1", "2", "-1"]),
            ]));
        }
        c
    }

    /// BZPOPMIN/BZPOPMAX over 1-3 keys, or BZMPOP, with a short or invalid timeout (never 0:
    /// they answer at once or time out, the same on both servers).
    fn zset_blocking_pop(&mut self) -> Args {
        let t = self
            .rng
            .pick(&["0.01", "0.01", "-1", "abc", "nan", "inf", "0.001"]);
        if self.rng.chance(40) {
            let mut c = self.zmpop_command();
            c[0] = b"BZMPOP".to_vec();
            c.insert(1, t.as_bytes().to_vec());
            return c;
        }
        let mut c = args(&[self.rng.pick(&["BZPOPMIN", "BZPOPMAX"])]);
        for _ in 0..1 + self.rng.below(3) {
            c.push(self.key().into());
        }
        c.push(t.into());
        c
    }

    /// ZMPOP numkeys keys MIN|MAX [COUNT n].
    fn zmpop_command(&mut self) -> Args {
        let n = self.rng.pick(&["1", "2", "2", "0", "x"]);
        let mut c = args(&["ZMPOP", n]);
        c.extend((0..2).map(|_| self.key().as_bytes().to_vec()));
        c.push(self.rng.pick(&["MIN", "MAX", "min", "FOO"]).into());
        if self.rng.chance(40) {
            c.extend(args(&[
                "COUNT",
                self.rng.pick(&["1", "2", "10", "0", "-1"]),
            ]));
        }
        c
    }

    /// ZUNION / ZINTER / ZDIFF and their STORE forms with WEIGHTS / AGGREGATE / WITHSCORES.
    fn setop_command(&mut self) -> Args {
        let name = self.rng.pick(&[
            "ZUNION",
            "ZINTER",
            "ZDIFF",
            "ZUNIONSTORE",
            "ZINTERSTORE",
            "ZDIFFSTORE",
        ]);
        let mut c = args(&[name]);
        if name.ends_with("STORE") {
            c.push(self.key().into());
        }
        let n = [1usize, 2, 2, 3][self.rng.below(4)];
        c.push(if self.rng.chance(5) {
            self.rng.pick(&["0", "x", "9"]).into()
        } else {
            n.to_string().into_bytes()
        });
        c.extend((0..n).map(|_| self.key().as_bytes().to_vec()));
        if self.rng.chance(30) {
            c.push(b"WEIGHTS".to_vec());
            c.extend((0..n).map(|_| self.rng.pick(WEIGHTS).as_bytes().to_vec()));
        }
        if self.rng.chance(30) {
            c.extend(args(&[
                "AGGREGATE",
                self.rng.pick(&["SUM", "MIN", "MAX", "max", "FOO"]),
            ]));
        }
        if self.rng.chance(40) {
            c.push(b"WITHSCORES".to_vec());
        }
        c
    }

    /// SORT / SORT_RO with a deterministic mix of options.
    fn sort_command(&mut self) -> Args {
        let name = self.rng.pick(&["SORT", "SORT", "SORT_RO"]);
        let mut c = args(&[name, self.key()]);
        let alpha = self.rng.chance(40);
        if alpha {
            c.push(b"ALPHA".to_vec());
        } else if self.rng.chance(30) {
            c.extend(args(&[
                "BY",
                self.rng.pick(&["nosort", "k*", "foo:*", "nokey"]),
            ]));
        }
        if self.rng.chance(30) {
            c.push(self.rng.pick(&["DESC", "ASC"]).into());
        }
        if self.rng.chance(30) {
            c.extend(args(&[
                "LIMIT",
                self.rng.pick(&["0", "1", "-1", "x"]),
                self.rng.pick(&["1", "2", "-1", "0"]),
            ]));
        }
        for _ in 0..self.rng.below(3) {
            c.extend(args(&[
                "GET",
                self.rng.pick(&["#", "k*", "foo:*", "x", "k*->f"]),
            ]));
        }
        if self.rng.chance(20) {
            c.extend(args(&["STORE", self.key()]));
        }
        if self.rng.chance(3) {
            c.push(self.rng.pick(&["FOO", "LIMIT", "GET"]).into());
        }
        c
    }
}
