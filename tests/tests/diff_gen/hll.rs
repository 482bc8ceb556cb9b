//! Differential generator for HyperLogLog: PFADD, PFCOUNT, PFMERGE and PFDEBUG over the shared
//! key space, so HLLs meet strings (WRONGTYPE and "not a valid HyperLogLog"), other types, and
//! the string family's APPEND/SETRANGE (corrupt HLLs). GET of an HLL key (string family)
//! compares the bytes, cached cardinality included. Some PFADDs carry many elements so that the
//! sparse form grows and turns dense.

use super::{args, Args, Gen};

/// Elements: a few repeated words, so PFADD often changes nothing.
const ELEMENTS: &[&str] = &["a", "b", "c", "d", "e", "foo", "bar", "", "1", "2", "3"];

impl Gen {
    /// One HLL command.
    pub(crate) fn hll_command(&mut self) -> Args {
        let k = self.key();
        match self.rng.below(14) {
            0..=3 => {
                let mut cmd = args(&["PFADD", k]);
                (0..self.rng.below(5)).for_each(|_| cmd.push(self.rng.pick(ELEMENTS).into()));
                cmd
            }
            4 => {
                // Many distinct elements: registers above the sparse limit, a dense HLL.
                let n = [50, 400, 2000][self.rng.below(3)];
                let base = self.rng.below(1_000_000);
                let mut cmd = args(&["PFADD", k]);
                cmd.extend((0..n).map(|i| format!("e{}", base + i).into_bytes()));
                cmd
            }
            5..=7 => self.multi_key(&["PFCOUNT"], 1, 3, false),
            8 | 9 => self.multi_key(&["PFMERGE", k], 0, 3, false),
            10 => args(&[
                "PFDEBUG",
                self.rng.pick(&["ENCODING", "encoding", "TODENSE"]),
                k,
            ]),
            11 => args(&["PFDEBUG", self.rng.pick(&["DECODE", "foo"]), k]),
            12 => args(&["GET", k]),
            _ => args(&["PFCOUNT", k]),
        }
    }
}
