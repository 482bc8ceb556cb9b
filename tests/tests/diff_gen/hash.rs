//! Differential generator for the hash family: HSET..HSCAN over the shared key space, so hashes
//! collide with strings and sets (WRONGTYPE paths run). Random picks are only generated where
//! the outcome is deterministic (count 0, counts covering the whole hash, errors), or compared
//! by shape (see `same_reply`), so both servers keep the same state.

use super::{args, Args, Gen};

/// Fields: few, so commands hit the same ones.
const FIELDS: &[&str] = &["f1", "f2", "f3", "a", "n", "x:1"];
/// Values: integers at the edges, floats, text, a value longer than hash-max-listpack-value.
const HASH_VALUES: &[&str] = &[
    "1",
    "-5",
    "0",
    "9223372036854775807",
    "-9223372036854775808",
    "3.5",
    "1e3",
    "abc",
    "",
    " 7",
    "01",
    "vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv",
];
/// Integer increments, including invalid and overflowing ones.
const INCRS: &[&str] = &["1", "-1", "100", "9223372036854775807", "x", "1.5", ""];
/// Float increments, including invalid ones, infinities and exponents.
const FLOAT_INCRS: &[&str] = &[
    "1", "-0.5", "0.1", "2.5e2", "1e-3", "x", "inf", "nan", "", "1e400", "0x10",
];
/// Counts for HRANDFIELD whose outcome does not depend on the random source. (A huge negative
/// count without WITHVALUES is valid and makes both servers build a reply of that many fields:
/// never generated.)
const RAND_COUNTS: &[&str] = &["0", "1000", "-9223372036854775808", "x"];

impl Gen {
    fn field(&mut self) -> &'static str {
        self.rng.pick(FIELDS)
    }

    /// One hash command.
    pub(crate) fn hash_command(&mut self) -> Args {
        let (k, f) = (self.key(), self.field());
        let v = self.rng.pick(HASH_VALUES);
        match self.rng.below(20) {
            0..=2 => self.field_pairs("HSET", k),
            3 => self.field_pairs("HMSET", k),
            4 => args(&["HSETNX", k, f, v]),
            5 => args(&["HGET", k, f]),
            6 => {
                let mut cmd = args(&["HMGET", k]);
                (0..1 + self.rng.below(3)).for_each(|_| cmd.push(self.field().into()));
                cmd
            }
            7 => {
                let mut cmd = args(&["HDEL", k]);
                (0..1 + self.rng.below(3)).for_each(|_| cmd.push(self.field().into()));
                cmd
            }
            8 => args(&[self.rng.pick(&["HLEN", "HGETALL", "HKEYS", "HVALS"]), k]),
            9 => args(&[self.rng.pick(&["HEXISTS", "HSTRLEN"]), k, f]),
            10 | 11 => args(&["HINCRBY", k, f, self.rng.pick(INCRS)]),
            12 | 13 => args(&["HINCRBYFLOAT", k, f, self.rng.pick(FLOAT_INCRS)]),
            14 => self.hrandfield(k),
            15 => self.hscan(k),
            16 => args(&["OBJECT", "ENCODING", k]),
            17 => args(&["HSET", k]),
            _ => args(&["HSET", k, f, v, self.field()]),
        }
    }

    /// `name key` then one to three field/value pairs.
    fn field_pairs(&mut self, name: &str, k: &str) -> Args {
        let mut cmd = args(&[name, k]);
        for _ in 0..1 + self.rng.below(3) {
            cmd.push(self.field().into());
            cmd.push(self.rng.pick(HASH_VALUES).into());
        }
        cmd
    }

    /// HRANDFIELD in forms whose outcome is deterministic (or compared by shape).
    fn hrandfield(&mut self, k: &str) -> Args {
        let mut cmd = args(&["HRANDFIELD", k]);
        match self.rng.below(6) {
            0 => {}
            5 => return args(&["HRANDFIELD", k, "-4611686018427387904", "WITHVALUES"]),
            1 => cmd.push(b"-3".to_vec()),
            _ => cmd.push(self.rng.pick(RAND_COUNTS).into()),
        }
        if cmd.len() == 3 && self.rng.chance(50) {
            cmd.push(self.rng.pick(&["WITHVALUES", "withvalues", "x"]).into());
        }
        cmd
    }

    /// HSCAN with a COUNT covering any hash here (one call returns all), or bad arguments.
    fn hscan(&mut self, k: &str) -> Args {
        let cursor = self.rng.pick(&["0", "0", "0", "x"]);
        let mut cmd = args(&["HSCAN", k, cursor]);
        match self.rng.below(6) {
            0 => cmd.extend(args(&["COUNT", self.rng.pick(&["0", "x"])])),
            1 => cmd.extend(args(&["MATCH"])),
            _ => cmd.extend(args(&["COUNT", "1000"])),
        }
        if self.rng.chance(40) {
            cmd.extend(args(&["MATCH", self.rng.pick(&["f*", "*", "x:?", "zz"])]));
        }
        cmd
    }
}
