//! Key specifications (Redis 7.0's "key specs"): where a command's key arguments are and what it
//! does to them. They are data in the command table, shown by `COMMAND INFO` and used by
//! `COMMAND GETKEYS` / `GETKEYSANDFLAGS` (later by ACL key patterns and cluster routing).
//!
//! A spec has two steps, as in Redis: `begin_search` finds the first argument of interest (a
//! fixed index, or the argument after a keyword), then `find_keys` takes keys from there (a
//! range, or a count read from a `numkeys` argument). Specs Redis marks `unknown` (SORT's BY,
//! GET and STORE) describe keys only a command-specific [`KeysFn`] can find.

use crate::argv::Argv;
use alloc::vec::Vec;

/// Key-spec flags as `COMMAND INFO` shows them (`RO`, `access`; `RW`, `insert`; `OW`,
/// `update`; `RM`, `delete`...).
pub type KeyFlags = &'static [&'static str];

/// The flag sets Redis 7.0 uses, named after their flags.
pub mod kf {
    #![allow(missing_docs)]
    use super::KeyFlags;
    pub const OW_INSERT: KeyFlags = &["OW", "insert"];
    pub const OW_UPDATE: KeyFlags = &["OW", "update"];
    pub const RM_DELETE: KeyFlags = &["RM", "delete"];
    pub const RO: KeyFlags = &["RO"];
    pub const RO_ACCESS: KeyFlags = &["RO", "access"];
    pub const RW_ACCESS_DELETE: KeyFlags = &["RW", "access", "delete"];
    pub const RW_ACCESS_UPDATE: KeyFlags = &["RW", "access", "update"];
    pub const RW_ACCESS_UPDATE_VARIABLE_FLAGS: KeyFlags =
        &["RW", "access", "update", "variable_flags"];
    pub const RW_DELETE: KeyFlags = &["RW", "delete"];
    pub const RW_INSERT: KeyFlags = &["RW", "insert"];
    pub const RW_UPDATE: KeyFlags = &["RW", "update"];
}

/// Where the search for keys starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BeginSearch {
    /// At this argument index (the command name is 0).
    Index(i32),
    /// After the first argument equal to `keyword` (any case), searching from `startfrom`
    /// (negative: from the end, backwards).
    Keyword {
        /// The keyword, upper case.
        keyword: &'static str,
        /// Where the search starts.
        startfrom: i32,
    },
    /// Only the command's own [`KeysFn`] knows.
    Unknown,
}

/// How keys are taken from where the search began.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FindKeys {
    /// Every `keystep`-th argument up to `lastkey` (relative to the beginning; negative counts
    /// from the end of the arguments); `limit` > 1 keeps only the first 1/limit of them.
    Range {
        /// Last key, relative to the beginning (-1 = the last argument).
        lastkey: i32,
        /// Step between keys.
        keystep: i32,
        /// Divisor of the remaining arguments when `lastkey` is negative (0 or 1: all).
        limit: i32,
    },
    /// The number of keys is the argument at `keynumidx` (relative to the beginning); the keys
    /// start at `firstkey` (relative to the beginning), every `keystep`-th argument.
    Keynum {
        /// Index of `numkeys`, relative to the beginning.
        keynumidx: i32,
        /// Index of the first key, relative to the beginning.
        firstkey: i32,
        /// Step between keys.
        keystep: i32,
    },
    /// Only the command's own [`KeysFn`] knows.
    Unknown,
}

/// One key specification, as a `COMMAND INFO` key-spec map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeySpec {
    /// Free text `COMMAND INFO` shows first when not empty.
    pub notes: &'static str,
    /// Its flags.
    pub flags: KeyFlags,
    /// Where the search begins.
    pub begin_search: BeginSearch,
    /// How keys are found.
    pub find_keys: FindKeys,
}

impl KeySpec {
    /// Keys from `index` to `lastkey` (relative to `index`; negative from the end), every `step`.
    pub const fn range(flags: KeyFlags, index: i32, lastkey: i32, step: i32) -> KeySpec {
        KeySpec {
            notes: "",
            flags,
            begin_search: BeginSearch::Index(index),
            find_keys: FindKeys::Range {
                lastkey,
                keystep: step,
                limit: 0,
            },
        }
    }

    /// `numkeys` at `index`, then that many keys right after it.
    pub const fn keynum(flags: KeyFlags, index: i32) -> KeySpec {
        KeySpec {
            notes: "",
            flags,
            begin_search: BeginSearch::Index(index),
            find_keys: FindKeys::Keynum {
                keynumidx: 0,
                firstkey: 1,
                keystep: 1,
            },
        }
    }

    /// A spec whose keys only the command's [`KeysFn`] finds.
    pub const fn unknown(flags: KeyFlags, notes: &'static str) -> KeySpec {
        KeySpec {
            notes,
            flags,
            begin_search: BeginSearch::Unknown,
            find_keys: FindKeys::Unknown,
        }
    }

    /// The same spec with notes.
    pub const fn with_notes(self, notes: &'static str) -> KeySpec {
        KeySpec { notes, ..self }
    }

    /// Whether Redis counts this spec as "movable": keys not at fixed positions.
    pub fn is_movable(&self) -> bool {
        !matches!(
            (self.begin_search, self.find_keys),
            (BeginSearch::Index(_), FindKeys::Range { .. })
        )
    }

    /// Appends this spec's keys in `args` to `keys`; `Err(InvalidKeyArgs)` when the arguments cannot hold
    /// them.
    pub fn find(&self, args: &Argv<'_>, keys: &mut Vec<FoundKey>) -> Result<(), InvalidKeyArgs> {
        let argc = args.len() as i64;
        let Some(start) = self.begin(args) else {
            return Ok(());
        };
        let (first, last, step) = match self.find_keys {
            FindKeys::Range {
                lastkey,
                keystep,
                limit,
            } => {
                let last = if lastkey >= 0 {
                    start + i64::from(lastkey)
                } else if limit > 1 {
                    start + (argc + i64::from(lastkey) + 1 - start) / i64::from(limit) - 1
                } else {
                    argc + i64::from(lastkey)
                };
                (start, last, i64::from(keystep))
            }
            FindKeys::Keynum {
                keynumidx,
                firstkey,
                keystep,
            } => {
                let at = start + i64::from(keynumidx);
                let n = args
                    .try_get(at as usize)
                    .and_then(crate::util::parse_i64)
                    .filter(|n| *n > 0)
                    .ok_or(InvalidKeyArgs)?;
                let first = start + i64::from(firstkey);
                let step = i64::from(keystep);
                (
                    first,
                    first.saturating_add((n - 1).saturating_mul(step)),
                    step,
                )
            }
            FindKeys::Unknown => return Ok(()),
        };
        if last >= argc {
            return Err(InvalidKeyArgs);
        }
        let mut i = first;
        while i <= last {
            keys.push(FoundKey {
                index: i as usize,
                flags: self.flags,
            });
            i += step.max(1);
        }
        Ok(())
    }

    /// The argument index where the search begins, `None` when there is none.
    fn begin(&self, args: &Argv<'_>) -> Option<i64> {
        let argc = args.len() as i64;
        match self.begin_search {
            BeginSearch::Index(i) => (i64::from(i) < argc).then_some(i64::from(i)),
            BeginSearch::Keyword { keyword, startfrom } => {
                let kw = keyword.as_bytes();
                let is_kw = |i: &i64| args.get(*i as usize).eq_ignore_ascii_case(kw);
                let found = if startfrom >= 0 {
                    (i64::from(startfrom)..argc).find(is_kw)
                } else {
                    (1..=argc + i64::from(startfrom)).rev().find(is_kw)
                };
                found.map(|i| i + 1)
            }
            BeginSearch::Unknown => None,
        }
    }
}

/// The arguments cannot hold the keys a spec announces (a bad or too large `numkeys`): `COMMAND
/// GETKEYS` answers `ERR Invalid arguments specified for command`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidKeyArgs;

/// A key found in a command's arguments: its index and its flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FoundKey {
    /// Argument index.
    pub index: usize,
    /// The flags of the spec that found it.
    pub flags: KeyFlags,
}

/// A command's own key finder, for keys its specs cannot locate (SORT's STORE) or whose flags
/// depend on other arguments (SET ... GET). `Err(InvalidKeyArgs)`: invalid arguments.
pub type KeysFn = fn(&Argv<'_>) -> Result<Vec<FoundKey>, InvalidKeyArgs>;

/// Finds the keys the `specs` describe, in spec order.
pub fn find_keys(specs: &[KeySpec], args: &Argv<'_>) -> Result<Vec<FoundKey>, InvalidKeyArgs> {
    let mut keys = Vec::new();
    for spec in specs {
        spec.find(args, &mut keys)?;
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ArgvBuf;

    const RW: KeyFlags = &["RW"];

    fn idx(specs: &[KeySpec], line: &str) -> Result<Vec<usize>, InvalidKeyArgs> {
        let a = ArgvBuf::from_line(line);
        find_keys(specs, &a.argv()).map(|k| k.iter().map(|k| k.index).collect())
    }

    #[test]
    fn ranges_from_the_start_and_from_the_end() {
        let mset = [KeySpec::range(RW, 1, -1, 2)];
        assert_eq!(idx(&mset, "mset a 1 b 2"), Ok(alloc::vec![1, 3]));
        assert_eq!(idx(&mset, "mset a 1 b"), Ok(alloc::vec![1, 3]));
        let bpop = [KeySpec::range(RW, 1, -2, 1)];
        assert_eq!(idx(&bpop, "bzpopmin a b 0"), Ok(alloc::vec![1, 2]));
        let lmove = [KeySpec::range(RW, 1, 0, 1), KeySpec::range(RW, 2, 0, 1)];
        assert_eq!(idx(&lmove, "lmove a b left right"), Ok(alloc::vec![1, 2]));
    }

    #[test]
    fn keynum_counts_and_rejects_bad_numkeys() {
        let zs = [KeySpec::range(RW, 1, 0, 1), KeySpec::keynum(RW, 2)];
        assert_eq!(idx(&zs, "zunionstore d 2 a b w"), Ok(alloc::vec![1, 3, 4]));
        assert_eq!(idx(&zs, "zunionstore d 1 a b"), Ok(alloc::vec![1, 3]));
        assert_eq!(idx(&zs, "zunionstore d 3 a b"), Err(InvalidKeyArgs));
        assert_eq!(idx(&zs, "zunionstore d 0 a b"), Err(InvalidKeyArgs));
        assert_eq!(idx(&zs, "zunionstore d x a b"), Err(InvalidKeyArgs));
        assert_eq!(idx(&zs, "zunionstore d"), Ok(alloc::vec![1]));
    }

    #[test]
    fn keyword_search_both_ways_and_limit() {
        let kw = |startfrom| KeySpec {
            begin_search: BeginSearch::Keyword {
                keyword: "STREAMS",
                startfrom,
            },
            find_keys: FindKeys::Range {
                lastkey: -1,
                keystep: 1,
                limit: 2,
            },
            ..KeySpec::range(RW, 0, 0, 1)
        };
        let line = "xread count 2 streams a b 0 0";
        assert_eq!(idx(&[kw(1)], line), Ok(alloc::vec![4, 5]));
        assert_eq!(idx(&[kw(-2)], line), Ok(alloc::vec![4, 5]));
        assert_eq!(idx(&[kw(1)], "xread count 2"), Ok(alloc::vec![]));
        assert!(kw(1).is_movable());
        assert!(!KeySpec::range(RW, 1, 0, 1).is_movable());
    }
}
