//! Differential generator for the set family: SADD..SSCAN and the algebra over the shared key
//! space. Members mix integers (intsets) and words (hashtables). SPOP only in forms that take
//! nothing or everything, so both servers keep the same state; random reads are compared by
//! shape (see `same_reply`).

use super::{args, Args, Gen};

/// Members: integers (intset encoding) and words (hashtable), few so that sets overlap.
const MEMBERS: &[&str] = &["1", "2", "3", "-7", "10", "a", "b", "c", "007", ""];

impl Gen {
    fn set_member(&mut self) -> &'static str {
        if self.rng.chance(70) {
            self.rng.pick(&MEMBERS[..5])
        } else {
            self.rng.pick(MEMBERS)
        }
    }

    /// `head` then one to `max` members.
    fn with_members(&mut self, head: &[&str], max: usize) -> Args {
        let mut cmd = args(head);
        (0..1 + self.rng.below(max)).for_each(|_| cmd.push(self.set_member().into()));
        cmd
    }

    /// One set command.
    pub(crate) fn set_family_command(&mut self) -> Args {
        let (k, m) = (self.key(), self.set_member());
        match self.rng.below(22) {
            0..=3 => self.with_members(&["SADD", k], 4),
            4 | 5 => self.with_members(&["SREM", k], 3),
            6 => args(&[self.rng.pick(&["SMEMBERS", "SCARD"]), k]),
            7 => args(&["SISMEMBER", k, m]),
            8 => self.with_members(&["SMISMEMBER", k], 3),
            9 => args(&["SMOVE", k, self.key(), m]),
            10 | 11 => {
                let name = self.rng.pick(&["SINTER", "SUNION", "SDIFF"]);
                self.multi_key(&[name], 1, 3, false)
            }
            12 | 13 => {
                let name = self.rng.pick(&["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"]);
                self.multi_key(&[name, k], 1, 3, false)
            }
            14 => self.sintercard(),
            15 => self.spop(k),
            16 => self.srandmember(k),
            17 => self.sscan(k),
            18 => args(&["OBJECT", "ENCODING", k]),
            _ => args(&["SADD", k, m]),
        }
    }

    /// SINTERCARD with valid and invalid numkeys and LIMIT.
    fn sintercard(&mut self) -> Args {
        let n = 1 + self.rng.below(3);
        let numkeys = if self.rng.chance(10) {
            self.rng.pick(&["0", "-1", "x", "9"]).to_string()
        } else {
            n.to_string()
        };
        let mut cmd = self.multi_key(&["SINTERCARD", &numkeys], n, n, false);
        if self.rng.chance(40) {
            cmd.push(b"LIMIT".to_vec());
            cmd.push(self.rng.pick(&["0", "1", "2", "-1", "x"]).into());
        }
        cmd
    }

    /// SPOP taking nothing or everything (deterministic), or bad arguments.
    fn spop(&mut self, k: &str) -> Args {
        let count = self
            .rng
            .pick(&["0", "1000", "-1", "x", "9223372036854775807"]);
        let mut cmd = args(&["SPOP", k, count]);
        if self.rng.chance(10) {
            cmd.push(b"1".to_vec());
        }
        cmd
    }

    /// SRANDMEMBER: no count (compared by shape), whole-set or zero counts, repeats (compared by
    /// length), bad arguments.
    fn srandmember(&mut self, k: &str) -> Args {
        let mut cmd = args(&["SRANDMEMBER", k]);
        if self.rng.chance(80) {
            let count = self
                .rng
                .pick(&["0", "1000", "-3", "x", "-9223372036854775808"]);
            cmd.push(count.into());
        }
        if self.rng.chance(5) {
            cmd.push(b"2".to_vec());
        }
        cmd
    }

    /// SSCAN with a COUNT covering any set here, or bad arguments.
    fn sscan(&mut self, k: &str) -> Args {
        let cursor = self.rng.pick(&["0", "0", "0", "x"]);
        let mut cmd = args(&["SSCAN", k, cursor]);
        match self.rng.below(6) {
            0 => cmd.extend(args(&["COUNT", self.rng.pick(&["0", "x"])])),
            1 => cmd.extend(args(&["TYPE", "set"])),
            _ => cmd.extend(args(&["COUNT", "1000"])),
        }
        if self.rng.chance(40) {
            cmd.extend(args(&["MATCH", self.rng.pick(&["1*", "*", "?", "zz"])]));
        }
        cmd
    }
}
