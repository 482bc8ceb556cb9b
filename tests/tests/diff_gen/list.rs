//! The differential generator's list family: every list command with valid and invalid
//! arguments over the shared key space (so WRONGTYPE paths run). Blocking commands get either
//! an invalid argument or a 10 ms timeout: they answer at once or time out with the null array,
//! the same on both servers (real waiting and wakeups are covered by tests/blocking.rs).

use super::{args, Args, Gen, INDEXES};

/// List elements: few, so LREM/LPOS/LINSERT find matches.
const ELEMENTS: &[&str] = &["a", "b", "c", "1", "", "a"];
/// Counts for LPOP/LMPOP/LPOS options, valid and not.
const COUNTS: &[&str] = &["0", "1", "2", "5", "-1", "x", "100", "-0"];
/// Blocking timeouts: short ones and invalid ones (never 0: that could block forever).
const TIMEOUTS: &[&str] = &["0.01", "0.01", "-1", "abc", "nan", "inf", "-0.5", "0.001"];

impl Gen {
    fn element(&mut self) -> &'static str {
        if self.rng.chance(10) {
            self.value()
        } else {
            self.rng.pick(ELEMENTS)
        }
    }

    fn side(&mut self) -> &'static str {
        self.rng.pick(&["LEFT", "RIGHT", "left", "right", "UP"])
    }

    /// One list command.
    pub(crate) fn list_command(&mut self) -> Args {
        match self.rng.below(20) {
            0..=3 => self.list_push(),
            4 | 5 => self.list_pop(),
            6 => self.list_range(),
            7 => {
                let k = self.key();
                let i = self.rng.pick(INDEXES);
                args(&["LINDEX", k, i])
            }
            8 => {
                let (k, i, e) = (self.key(), self.rng.pick(INDEXES), self.element());
                args(&["LSET", k, i, e])
            }
            9 => {
                let k = self.key();
                args(&["LLEN", k])
            }
            10 => {
                let (k, c, e) = (
                    self.key(),
                    self.rng.pick(&["0", "1", "-1", "2", "-2", "x"]),
                    self.element(),
                );
                args(&["LREM", k, c, e])
            }
            11 => {
                let (k, w, p, e) = (
                    self.key(),
                    self.rng.pick(&["BEFORE", "after", "MIDDLE"]),
                    self.element(),
                    self.element(),
                );
                args(&["LINSERT", k, w, p, e])
            }
            12 => self.list_lpos(),
            13 | 14 => self.list_move(),
            15 => self.list_mpop(false),
            16 => self.list_blocking(),
            17 => self.list_mpop(true),
            _ => {
                let k = self.key();
                let n = 1 + self.rng.below(5);
                let mut cmd = args(&["RPUSH", k]);
                (0..n).for_each(|_| cmd.push(self.element().into()));
                cmd
            }
        }
    }

    fn list_push(&mut self) -> Args {
        let name = self.rng.pick(&["LPUSH", "RPUSH", "LPUSHX", "RPUSHX"]);
        let k = self.key();
        let mut cmd = args(&[name, k]);
        for _ in 0..1 + self.rng.below(4) {
            cmd.push(self.element().into());
        }
        cmd
    }

    fn list_pop(&mut self) -> Args {
        let name = self.rng.pick(&["LPOP", "RPOP"]);
        let k = self.key();
        let mut cmd = args(&[name, k]);
        if self.rng.chance(50) {
            cmd.push(self.rng.pick(COUNTS).into());
        }
        cmd
    }

    fn list_range(&mut self) -> Args {
        let name = self.rng.pick(&["LRANGE", "LTRIM", "LRANGE"]);
        let (k, a, b) = (self.key(), self.rng.pick(INDEXES), self.rng.pick(INDEXES));
        args(&[name, k, a, b])
    }

    fn list_lpos(&mut self) -> Args {
        let (k, e) = (self.key(), self.element());
        let mut cmd = args(&["LPOS", k, e]);
        for _ in 0..self.rng.below(4) {
            let opt = self.rng.pick(&["RANK", "COUNT", "MAXLEN", "rank", "FOO"]);
            cmd.push(opt.into());
            if self.rng.chance(95) {
                let v =
                    self.rng
                        .pick(&["1", "-1", "2", "-2", "0", "3", "x", "-9223372036854775808"]);
                cmd.push(v.into());
            }
        }
        cmd
    }

    fn list_move(&mut self) -> Args {
        let (s, d) = (self.key(), self.key());
        if self.rng.chance(30) {
            return args(&["RPOPLPUSH", s, d]);
        }
        let (a, b) = (self.side(), self.side());
        args(&["LMOVE", s, d, a, b])
    }

    /// LMPOP, or BLMPOP with a short or invalid timeout.
    fn list_mpop(&mut self, blocking: bool) -> Args {
        let mut cmd = if blocking {
            args(&["BLMPOP", self.rng.pick(TIMEOUTS)])
        } else {
            args(&["LMPOP"])
        };
        let n = self.rng.below(4);
        let numkeys = if self.rng.chance(10) {
            self.rng.pick(&["0", "-1", "x", "5"]).to_string()
        } else {
            n.to_string()
        };
        cmd.push(numkeys.into());
        for _ in 0..n {
            cmd.push(self.key().into());
        }
        cmd.push(self.side().into());
        if self.rng.chance(40) {
            cmd.push(self.rng.pick(&["COUNT", "count", "FOO"]).into());
            if self.rng.chance(90) {
                cmd.push(self.rng.pick(COUNTS).into());
            }
        }
        cmd
    }

    /// BLPOP, BRPOP, BLMOVE, BRPOPLPUSH with a short or invalid timeout.
    fn list_blocking(&mut self) -> Args {
        let t = self.rng.pick(TIMEOUTS);
        match self.rng.below(4) {
            0 | 1 => {
                let name = self.rng.pick(&["BLPOP", "BRPOP"]);
                let mut cmd = args(&[name]);
                for _ in 0..1 + self.rng.below(3) {
                    cmd.push(self.key().into());
                }
                cmd.push(t.into());
                cmd
            }
            2 => {
                let (s, d) = (self.key(), self.key());
                args(&["BRPOPLPUSH", s, d, t])
            }
            _ => {
                let (s, d, a, b) = (self.key(), self.key(), self.side(), self.side());
                args(&["BLMOVE", s, d, a, b, t])
            }
        }
    }
}
