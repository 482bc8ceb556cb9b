//! The differential generator's transaction family: short scripted sequences (queued in
//! `Gen::pending`, emitted one command per step) of WATCH, writes to watched keys, MULTI, a few
//! string and list commands, queue-time errors (wrong arity, unknown command, nested MULTI,
//! WATCH inside MULTI) and EXEC or DISCARD; plus stray EXEC/DISCARD/UNWATCH outside MULTI.
//! The inner commands come from families with deterministic replies, so EXEC's array compares
//! byte for byte.

use super::{args, Args, Gen};

impl Gen {
    /// One transaction-related command (the first of a sequence; the rest follow in `pending`).
    pub(crate) fn txn_command(&mut self) -> Args {
        match self.rng.below(10) {
            // Never a lone MULTI: the commands of other families it would queue include some
            // with unordered replies (KEYS), which EXEC's array could not compare.
            0 => args(&[self.rng.pick(&["EXEC", "DISCARD", "UNWATCH"])]),
            1 => args(&[self.rng.pick(&["EXEC", "DISCARD", "WATCH", "UNWATCH"]), "x"]),
            _ => {
                self.script_transaction();
                self.pending.pop_front().expect("a script")
            }
        }
    }

    /// Queues WATCH (often), maybe a write to a watched key, MULTI, 0-4 commands with maybe a
    /// queue-time error, and EXEC (mostly) or DISCARD.
    fn script_transaction(&mut self) {
        let mut seq: Vec<Args> = Vec::new();
        if self.rng.chance(60) {
            let mut w = args(&["WATCH", self.key()]);
            if self.rng.chance(30) {
                w.push(self.key().into());
            }
            if self.rng.chance(50) {
                let k = String::from_utf8(w[1].clone()).expect("ascii key");
                seq.push(w);
                seq.push(self.touch_or_read(&k));
            } else {
                seq.push(w);
            }
        }
        seq.push(args(&["MULTI"]));
        for _ in 0..self.rng.below(5) {
            let inner = match self.rng.below(12) {
                0 => self.queue_time_error(),
                1..=6 => self.string_command(),
                _ => self.list_command(),
            };
            seq.push(inner);
        }
        seq.push(args(&[if self.rng.chance(90) {
            "EXEC"
        } else {
            "DISCARD"
        }]));
        self.pending.extend(seq);
    }

    /// A command between WATCH and MULTI: a write that may or may not modify `key`, or a read.
    fn touch_or_read(&mut self, key: &str) -> Args {
        let v = self.value();
        match self.rng.below(8) {
            0 => args(&["SET", key, v]),
            1 => args(&["SETNX", key, v]),
            2 => args(&["DEL", key]),
            3 => args(&["APPEND", key, ""]),
            4 => args(&["GET", key]),
            5 => args(&["RPUSH", key, "a"]),
            6 => args(&["PERSIST", key]),
            _ => args(&["EXPIRE", key, "100000", "NX"]),
        }
    }

    /// A command refused at queue time (the transaction then answers EXECABORT), or one that
    /// fails without aborting it (nested MULTI, WATCH inside MULTI).
    fn queue_time_error(&mut self) -> Args {
        let k = self.key();
        match self.rng.below(5) {
            0 => args(&["GET"]),
            1 => args(&["SET", k]),
            2 => args(&["NOSUCHCOMMAND", k]),
            3 => args(&["MULTI"]),
            _ => args(&["WATCH", k]),
        }
    }
}
