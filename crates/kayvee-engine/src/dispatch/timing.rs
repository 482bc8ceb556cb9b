//! A command's measured duration and what it feeds: INFO commandstats (`usec`), the latency
//! histograms (`latency-tracking`), the latency monitor's `command` / `fast-command` events
//! and SLOWLOG, as Redis 7.0's `call()` and `updateStatsOnUnblock` feed them.
//!
//! The engine reads no clock: a top-level command is timed by the shell around
//! [`crate::Engine::execute`]; the commands EXEC runs and the blocked commands served after a
//! command are timed here through the shell's clock lent for the command
//! ([`crate::ScriptWait::now`]), each logged one by one while EXEC itself never is (it is
//! `skip_slowlog`). A command that blocks is not logged when it blocks: it is, with its
//! blocking call's duration added, once it is served.

use super::Dispatch;
use crate::argv::Argv;
use crate::client::Handle;
use crate::cmd;
use crate::command::{self, CommandId};
use crate::outcome::Outcome;
use crate::slowlog;
use crate::time::Now;
use alloc::string::String;

impl Dispatch<'_> {
    /// Command `id` of client `h` (`argv`, as the client sent it) took `usec`, ending at
    /// `now`: its statistics, latency and, when it did not block, SLOWLOG (see the module
    /// doc).
    #[inline]
    pub(crate) fn command_timed(
        &mut self,
        h: Handle,
        id: CommandId,
        argv: &Argv<'_>,
        usec: u64,
        now: Now,
    ) {
        self.core.stats.commands[id.0 as usize].usec += usec;
        self.command_latency(id, usec, now);
        // WAIT's blocking is not logged at all, as in Redis (it has no serve step).
        if self.core.blocking.note_duration(h, usec) || self.core.repl.is_waiting(h) {
            return;
        }
        if self.core.config.latency_tracking {
            self.core.latency.record_command(id.0, usec);
        }
        self.slowlog_if_slow(h, id, argv, usec, now);
    }

    /// A blocked command of client `h` was served ending at `now`: its blocking call took
    /// `call_us`, the serving `reply_us` (Redis's `updateStatsOnUnblock`, which counts the
    /// call's time in `usec` once more).
    pub(super) fn served_timed(
        &mut self,
        h: Handle,
        id: CommandId,
        argv: &Argv<'_>,
        (call_us, reply_us): (u64, u64),
        now: Now,
    ) {
        let usec = call_us + reply_us;
        self.core.stats.commands[id.0 as usize].usec += usec;
        let threshold = self.core.config.latency_monitor_threshold;
        if threshold != 0 {
            let (event, ms, now_s) = ("command-unblocking", reply_us / 1000, now.ms() / 1000);
            self.core
                .latency
                .add_sample_if_needed(threshold, event, ms, now_s);
        }
        if self.core.config.latency_tracking {
            self.core.latency.record_command(id.0, usec);
        }
        self.slowlog_if_slow(h, id, argv, usec, now);
    }

    /// Runs command `cmd` of an EXEC, timed on the shell's clock when one is lent (a DEBUG
    /// SLEEP then sleeps there and then, so that its command is the slow one). Without a
    /// clock the command is not timed and a sleep is left to the shell after EXEC.
    pub(super) fn exec_step(
        &mut self,
        h: Handle,
        cmd: CommandId,
        argv: &Argv<'_>,
        now: Now,
        out: &mut dyn crate::reply::ReplySink,
    ) -> Outcome {
        let start = self.wait.as_mut().map(|w| w.now());
        let mut step = self.run::<false>(h, cmd, argv, now, out);
        let Some(start) = start else {
            return step;
        };
        let wait = self.wait.as_mut().expect("lent for the command");
        if let Outcome::Sleep(us) = step {
            wait.sleep_us(us);
            self.state.exec_slept_us += us;
            step = Outcome::Continue;
        }
        let end = wait.now();
        let usec = end.unix_us.saturating_sub(start.unix_us);
        self.command_timed(h, cmd, argv, usec, end);
        step
    }

    /// The shell's clock, when one is lent for this command.
    pub(super) fn clock_now(&mut self) -> Option<Now> {
        self.wait.as_mut().map(|w| w.now())
    }

    /// Logs the command in SLOWLOG when it took at least `slowlog-log-slower-than` and is
    /// not `skip_slowlog` (EXEC, AUTH...).
    #[inline]
    fn slowlog_if_slow(&mut self, h: Handle, id: CommandId, argv: &Argv<'_>, usec: u64, now: Now) {
        if !slowlog::SlowLog::wants(self.core.config.slowlog_log_slower_than, usec)
            || self.spec(id).has(command::flags::SKIP_SLOWLOG)
        {
            return;
        }
        self.slowlog_entry(h, argv, usec, now);
    }

    /// Logs a slow command in SLOWLOG (out of line: the fast path runs after every command).
    #[cold]
    #[inline(never)]
    fn slowlog_entry(&mut self, h: Handle, argv: &Argv<'_>, usec: u64, now: Now) {
        let (addr, name) = match self.clients.get(h) {
            Some(c) => (
                cmd::client::peer_addr(c),
                c.name.clone().unwrap_or_default(),
            ),
            None => (String::new(), Default::default()),
        };
        let entry = slowlog::Entry {
            id: 0,
            time_s: (now.ms() / 1000) as i64,
            usec,
            args: slowlog::truncated_args(argv),
            addr,
            name,
        };
        let len_max = usize::try_from(self.core.config.slowlog_max_len).unwrap_or(usize::MAX);
        self.core.slowlog.push(entry, len_max);
    }

    /// The latency monitor's sample of a command's duration (a `command` or, for a fast
    /// command, `fast-command` event, at `latency-monitor-threshold`).
    fn command_latency(&mut self, id: CommandId, usec: u64, now: Now) {
        let threshold = self.core.config.latency_monitor_threshold;
        if threshold != 0 {
            let fast = self.spec(id).has(command::flags::FAST);
            let event = if fast { "fast-command" } else { "command" };
            self.core
                .latency
                .add_sample_if_needed(threshold, event, usec / 1000, now.ms() / 1000);
        }
    }
}
