//! `CLIENT PAUSE timeout [WRITE|ALL]` and `CLIENT UNPAUSE`, Redis 7.0 semantics.
//!
//! While a pause is in force, a command it covers (every command for ALL; for WRITE, write
//! commands and those that may replicate, such as PUBLISH, and EXEC of a transaction holding
//! one) does not run: the engine keeps it (Redis's "postponed" clients) and answers
//! `Outcome::Blocked`, so the shell holds the client's further pipelined commands, in order.
//! When the pause ends (its deadline, which [`Pause::deadline`] gives the shell's poll, or
//! CLIENT UNPAUSE) the kept commands run in arrival order and their replies come out of
//! `Engine::take_wakeups` like a served blocked client's. Active expiry stops meanwhile.
//! QUIT is never held (Redis answers it before the pause check).
//!
//! FAILOVER holds writes the same way for as long as it runs ([`Pause::hold_writes`]), beside
//! any CLIENT PAUSE, as Redis's pause purposes combine.

use crate::argv::{Argv, ArgvBuf};
use crate::client::Handle;
use crate::command::{flags, CommandInfo};
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use alloc::vec::Vec;

/// The pause in force and the commands it holds.
#[derive(Debug, Default)]
pub struct Pause {
    /// When the pause ends (unix ms), if one is in force.
    end_ms: Option<u64>,
    /// ALL (true) or WRITE (false).
    all: bool,
    /// Held commands, in arrival order.
    postponed: Vec<(Handle, ArgvBuf)>,
    /// A FAILOVER holds writes (no deadline: until it ends or is aborted).
    failover: bool,
}

impl Pause {
    /// Whether a pause is in force at `now_ms`.
    #[inline]
    pub fn active(&self, now_ms: u64) -> bool {
        self.failover || self.client_pause(now_ms)
    }

    /// Whether no pause can be in force, whatever the time: neither a CLIENT PAUSE (even one
    /// past its end, until [`Pause::take_due`] ends it) nor a FAILOVER's.
    #[inline]
    pub fn none(&self) -> bool {
        self.end_ms.is_none() && !self.failover
    }

    /// Whether a CLIENT PAUSE is in force at `now_ms`.
    fn client_pause(&self, now_ms: u64) -> bool {
        self.end_ms.is_some_and(|end| now_ms < end)
    }

    /// FAILOVER starts (`true`) or ends holding writes; the held commands run once no pause
    /// is left.
    pub fn hold_writes(&mut self, on: bool) {
        self.failover = on;
    }

    /// When the shell must wake to end the pause (or run held commands after UNPAUSE).
    pub fn deadline(&self) -> Option<u64> {
        match self.end_ms {
            Some(end) => Some(end),
            None if self.failover => None,
            None if !self.postponed.is_empty() => Some(0),
            None => None,
        }
    }

    /// Whether the pause covers a command with these flags (`write`: WRITE or MAY_REPLICATE,
    /// or EXEC of a transaction holding one).
    pub fn covers(&self, write: bool, now_ms: u64) -> bool {
        write || self.all && self.client_pause(now_ms)
    }

    /// Whether client `h` has a held command (its further commands wait behind it).
    pub fn holds(&self, h: Handle) -> bool {
        !self.postponed.is_empty() && self.postponed.iter().any(|(x, _)| *x == h)
    }

    /// Number of clients with a held command (INFO `blocked_clients` counts them, as Redis).
    pub fn held(&self) -> usize {
        self.postponed.len()
    }

    /// Holds a command of client `h` until the pause ends.
    pub fn postpone(&mut self, h: Handle, argv: &Argv<'_>) {
        self.postponed.push((h, ArgvBuf::from_args(argv.iter())));
    }

    /// Drops a disconnecting client's held command.
    pub fn remove(&mut self, h: Handle) {
        self.postponed.retain(|(x, _)| *x != h);
    }

    /// Ends the pause if its time has come (or it was lifted) and hands out the held commands.
    pub fn take_due(&mut self, now_ms: u64) -> Vec<(Handle, ArgvBuf)> {
        if !self.client_pause(now_ms) {
            self.end_ms = None;
        }
        if self.active(now_ms) {
            return Vec::new();
        }
        core::mem::take(&mut self.postponed)
    }
}

/// Whether a WRITE pause holds this command: writes, and the commands Redis 7.0 flags
/// may-replicate (a flag COMMAND INFO does not show; these are the ones the real server held).
pub fn held_by_write(spec: &CommandInfo) -> bool {
    spec.has(flags::WRITE)
        || spec.has(flags::MAY_REPLICATE)
        || matches!(
            spec.name,
            "publish" | "spublish" | "pfcount" | "eval" | "evalsha" | "fcall"
        )
}

/// CLIENT PAUSE timeout [WRITE|ALL] at `now` (unix ms): a longer or stricter pause than the
/// current one wins.
pub fn pause_command(
    p: &mut Pause,
    now: u64,
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> CmdResult {
    if args.len() > 4 {
        let sub = crate::util::sanitize(args.get(1), 128);
        return Err(Error::msg(alloc::format!(
            "ERR unknown subcommand or wrong number of arguments for '{sub}'. Try CLIENT HELP."
        )));
    }
    let timeout = crate::util::parse_i64(args.get(2))
        .ok_or_else(|| Error::msg("ERR timeout is not an integer or out of range"))?;
    if timeout < 0 {
        return Err(Error::msg("ERR timeout is negative"));
    }
    let all = match args.len() {
        3 => true,
        _ => match args.get(3).to_ascii_lowercase().as_slice() {
            b"all" => true,
            b"write" => false,
            _ => return Err(Error::msg("ERR CLIENT PAUSE mode must be WRITE or ALL")),
        },
    };
    // Redis adds the timeout to the clock in a signed 64-bit sum: past i64::MAX it wraps to
    // a deadline in the past, so the pause ends at once (checked with redis-server 7.0.15:
    // `CLIENT PAUSE 9223372036854775807 WRITE` answers +OK and pauses nothing).
    let end = match now.checked_add(timeout as u64) {
        Some(end) if end <= i64::MAX as u64 => end,
        _ => now,
    };
    let running = p.active(now);
    p.end_ms = Some(match p.end_ms {
        Some(cur) if running => cur.max(end),
        _ => end,
    });
    p.all = all || (running && p.all);
    out.ok();
    Ok(())
}

/// CLIENT UNPAUSE: lifts the pause; the held commands run on the shell's next turn.
pub fn unpause_command(p: &mut Pause, out: &mut dyn ReplySink) -> CmdResult {
    p.end_ms = None;
    out.ok();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pause_ends_at_its_deadline_and_hands_out_held_commands_in_order() {
        let mut p = Pause {
            end_ms: Some(100),
            all: false,
            postponed: Vec::new(),
            failover: false,
        };
        let a = ArgvBuf::from_args([b"set".as_slice(), b"k", b"v"]);
        p.postpone(Handle(3), &a.argv());
        p.postpone(Handle(1), &a.argv());
        assert!(p.active(99) && p.holds(Handle(3)) && !p.holds(Handle(2)));
        assert!(p.covers(true, 99) && !p.covers(false, 99));
        assert!(p.take_due(99).is_empty());
        let due = p.take_due(100);
        assert_eq!(
            due.iter().map(|d| d.0).collect::<Vec<_>>(),
            [Handle(3), Handle(1)]
        );
        assert_eq!(p.deadline(), None);
    }

    #[test]
    fn failover_holds_writes_past_a_client_pause_until_it_ends() {
        let mut p = Pause {
            end_ms: Some(100),
            all: true,
            postponed: Vec::new(),
            failover: false,
        };
        p.hold_writes(true);
        let a = ArgvBuf::from_args([b"set".as_slice(), b"k", b"v"]);
        p.postpone(Handle(1), &a.argv());
        assert!(p.covers(false, 99) && !p.covers(false, 100) && p.covers(true, 100));
        assert!(p.take_due(100).is_empty() && p.active(100));
        assert_eq!(p.deadline(), None);
        p.hold_writes(false);
        assert_eq!(p.deadline(), Some(0));
        assert_eq!(p.take_due(101).len(), 1);
    }
}
