//! The differential generator's ACL family: a scripted sequence (queued in `Gen::pending`)
//! that gives the user `restricted` a few random rules from a small set (categories, single
//! commands, a first argument, read/write key patterns, channels), AUTHs the test connection
//! as it, runs random commands of the data-type families (some refused: NOPERM for the
//! command, a key or a channel; some inside MULTI, where a refusal makes EXEC answer
//! EXECABORT), ACL WHOAMI / DRYRUN / LOG, and AUTHs back as `default`. ACL LOG entries are
//! compared without their age and client line (see `mask_acl_log`).

use super::{args, Args, Gen};

/// Command rules: whole categories, single commands, a subcommand, a first argument.
const COMMAND_RULES: &[&str] = &[
    "+@string",
    "+@list",
    "+@hash",
    "+@read",
    "+@write",
    "+@keyspace",
    "+@set",
    "+@sortedset",
    "+@all",
    "-@write",
    "-@dangerous",
    "-@list",
    "+get",
    "-get",
    "+set",
    "+del",
    "-del",
    "+lpush",
    "+object|encoding",
    "+select|0",
    "+multi",
    "+exec",
    "+publish",
    "+acl|whoami",
];
/// Key rules: read/write patterns over the differential key space.
const KEY_RULES: &[&str] = &[
    "~k*", "~foo*", "%R~k*", "%W~k*", "%R~foo*", "%W~bar", "~x", "allkeys", "%RW~k1",
];
/// Channel rules.
const CHANNEL_RULES: &[&str] = &["&ch*", "&news", "allchannels"];

impl Gen {
    /// The first command of an ACL sequence; the rest follow in `pending`.
    pub(crate) fn acl_command(&mut self) -> Args {
        let mut setuser = args(&["ACL", "SETUSER", "restricted", "reset", "on", "nopass"]);
        for _ in 0..1 + self.rng.below(3) {
            setuser.push(self.rng.pick(COMMAND_RULES).into());
        }
        for _ in 0..self.rng.below(3) {
            setuser.push(self.rng.pick(KEY_RULES).into());
        }
        if self.rng.chance(50) {
            setuser.push(self.rng.pick(CHANNEL_RULES).into());
        }
        let mut seq = vec![args(&["AUTH", "restricted", "any"])];
        let in_multi = self.rng.chance(25);
        if in_multi {
            seq.push(args(&["MULTI"]));
        }
        for _ in 0..1 + self.rng.below(6) {
            // Inside MULTI only families with ordered replies, so EXEC's array compares.
            let cmd = if in_multi {
                self.restricted_command_in_multi()
            } else {
                self.restricted_command()
            };
            seq.push(cmd);
        }
        if in_multi {
            seq.push(args(&["EXEC"]));
        }
        seq.push(args(&["AUTH", "default", "any"]));
        if self.rng.chance(30) {
            seq.push(args(&["ACL", "LOG", "2"]));
        }
        self.pending.extend(seq);
        setuser
    }

    /// A command for the restricted user: mostly from the data-type families.
    fn restricted_command(&mut self) -> Args {
        match self.rng.below(14) {
            0 => args(&["ACL", "WHOAMI"]),
            1 => {
                let ch = self.rng.pick(&["ch1", "news", "other"]);
                args(&["PUBLISH", ch, "m"])
            }
            2 => {
                let mut c = args(&["ACL", "DRYRUN", "restricted"]);
                c.extend(self.string_command());
                c
            }
            3 => args(&["SELECT", self.rng.pick(&["0", "1"])]),
            4 => args(&["OBJECT", "ENCODING", self.key()]),
            5..=7 => self.string_command(),
            8 | 9 => self.list_command(),
            10 => self.hash_command(),
            11 => self.set_family_command(),
            _ => self.key_command(),
        }
    }

    /// A command for the restricted user inside MULTI: string and list commands, PUBLISH,
    /// OBJECT ENCODING and WHOAMI (replies in a fixed order).
    fn restricted_command_in_multi(&mut self) -> Args {
        match self.rng.below(8) {
            0 => args(&["ACL", "WHOAMI"]),
            1 => args(&["PUBLISH", self.rng.pick(&["ch1", "news"]), "m"]),
            2 => args(&["OBJECT", "ENCODING", self.key()]),
            3..=5 => self.string_command(),
            _ => self.list_command(),
        }
    }
}
