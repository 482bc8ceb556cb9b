//! Differential generator for BITFIELD and BITFIELD_RO: chains of GET/SET/INCRBY on every
//! width, `#N` offsets, OVERFLOW rules and bad arguments, over the shared key space (strings of
//! the string family, integers, other types).

use super::{args, Args, Gen};

/// Field types, valid and not.
const TYPES: &[&str] = &[
    "i1", "i5", "i8", "u8", "i16", "u15", "i32", "u31", "i63", "u63", "i64", "u64", "i0", "x8",
    "I8", "i65", "",
];
/// Offsets, plain and `#N`, valid and not.
const OFFSETS: &[&str] = &[
    "0",
    "1",
    "7",
    "8",
    "13",
    "63",
    "100",
    "#0",
    "#1",
    "#3",
    "#-1",
    "-1",
    "abc",
    "4294967296000",
];
/// SET values and increments.
const VALUES: &[&str] = &[
    "0",
    "1",
    "-1",
    "100",
    "-100",
    "127",
    "128",
    "255",
    "256",
    "-129",
    "9223372036854775807",
    "-9223372036854775808",
    "x",
    "1.5",
];

impl Gen {
    /// One BITFIELD or BITFIELD_RO command.
    pub(crate) fn bitfield_command(&mut self) -> Args {
        let name = self
            .rng
            .pick(&["BITFIELD", "BITFIELD", "BITFIELD", "BITFIELD_RO"]);
        let mut cmd = args(&[name, self.key()]);
        for _ in 0..self.rng.below(4) {
            let (ty, off) = (self.rng.pick(TYPES), self.rng.pick(OFFSETS));
            let op: Vec<&str> = match self.rng.below(10) {
                0..=2 => vec!["GET", ty, off],
                3..=5 => vec!["SET", ty, off, self.rng.pick(VALUES)],
                6..=7 => vec!["INCRBY", ty, off, self.rng.pick(VALUES)],
                8 => vec![
                    "OVERFLOW",
                    self.rng.pick(&["WRAP", "SAT", "FAIL", "sat", "foo"]),
                ],
                _ => vec![self.rng.pick(&["GET", "SET", "FOO", "OVERFLOW"])],
            };
            cmd.extend(op.iter().map(|s| s.as_bytes().to_vec()));
        }
        cmd
    }
}
