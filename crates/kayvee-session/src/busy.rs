//! The adaptive busy poll: after a loop pass that did work, a shell may keep polling for
//! `busy-poll-us` before it sleeps, so a request that arrives meanwhile does not pay the wakeup
//! of an idle (v)CPU, a cost its sender pays in its own CPU time. The spin pays off when passes
//! are small: each request then costs a wakeup, and with the load generator at 100% of its core
//! the wakeups slow it down (`-P 1`: one command per connection and round trip). When passes
//! carry many commands (`-P 16`: sixteen per read), one wakeup is shared by all of them and the
//! spin only burns the server's CPU time (it cost a third of the requests per CPU-second).
//!
//! So the loop spins only while both hold:
//! - the passes it served lately ran few commands: a moving average of commands per busy pass
//!   (weight 1/8 to the last pass) below [`COMMANDS_PER_PASS_MAX`];
//! - recent spins found work: a spin that ends with nothing found doubles the number of busy
//!   passes that follow without a spin (up to [`BACKOFF_MAX`]); a spin that finds work resets
//!   it.
//!
//! Under heavy load the loop naps instead ([`BusyPoll::nap_us`]): when passes are big and many
//! connections send (at least [`NAP_CONNECTIONS_MIN`] within [`ACTIVE_EPOCH_US`]), the load
//! generator is the bottleneck, and every write of its that finds the loop asleep in its wait
//! pays for waking it. The shell then looks for work without waiting, sleeps one to
//! [`NAP_WINDOWS`] times `busy-poll-us` (more with more connections) if there was none, looks
//! again, and only then waits: the writes of many connections queue
//! up meanwhile for one pass. The count of active connections keeps the nap away from a few
//! pipelining clients, whose every round trip it would lengthen. A shell with nothing else to
//! run on its CPU (the unikernel) has no use for it.

/// Commands per busy pass (moving average) at or above which the loop does not spin.
pub const COMMANDS_PER_PASS_MAX: u32 = 8;
/// Connections that sent data within one [`ACTIVE_EPOCH_US`] at or above which, with
/// passes of [`COMMANDS_PER_PASS_MAX`] commands or more, the loop naps before it waits.
pub const NAP_CONNECTIONS_MIN: u32 = 16;
/// The span over which active connections are counted.
pub const ACTIVE_EPOCH_US: u64 = 1000;
/// Most busy passes without a spin after spins that found nothing.
pub const BACKOFF_MAX: u32 = 64;
/// The nap lasts this many `busy-poll-us` windows (200 us at the default 50). Measured at
/// `redis-benchmark -c 50 -P 16 -t set` (server and client on a core each): with a 50 us nap
/// the server made 0.33 epoll waits per batch read and 8-9k context switches a second, and
/// used 571-660 ns of CPU per request; with 200 us, 0.15 waits, 3.6k switches and 512-531 ns
/// (redis-server: 0.06-0.13 waits, 0.5-3.4k switches, 704-814 ns).
pub const NAP_WINDOWS: u64 = 4;
/// The nap lasts one window per this many active connections (at least one window, at most
/// [`NAP_WINDOWS`]): each connection waits for its own reply, so a long nap cuts the rate of
/// fewer connections (a 200 us nap cost 5-10% of SET/s at `-c 16` to `-c 32`).
pub const NAP_CONNECTIONS_PER_WINDOW: u32 = 12;

/// Fixed-point scale of the average (1/16 of a command).
const SCALE: u32 = 16;

/// The busy-poll state (see the module documentation).
#[derive(Clone, Debug, Default)]
pub struct BusyPoll {
    /// The spin under way ends at this unix us (0: none).
    spin_until_us: u64,
    /// Busy passes still to go without a spin, and the next backoff's length.
    skip: u32,
    backoff: u32,
    /// Commands run since the last wait, and the moving average per busy pass (x [`SCALE`]).
    commands: u32,
    average: u32,
    /// The current epoch of active-connection counting (never 0, so a new connection's
    /// mark of 0 counts), when it ends (unix us), the connections counted in it so far, and
    /// the count of the last whole epoch.
    epoch: u32,
    epoch_end_us: u64,
    active: u32,
    active_last: u32,
}

impl BusyPoll {
    /// A command ran.
    #[inline]
    pub fn note_command(&mut self) {
        self.commands = self.commands.saturating_add(1);
    }

    /// A connection whose mark is `seen` (its last counted epoch; 0 at first) sent data.
    #[inline]
    pub fn note_read(&mut self, seen: &mut u32) {
        if *seen != self.epoch {
            *seen = self.epoch;
            self.active += 1;
        }
    }

    /// How long the loop should nap before it waits for readiness: `window_us` per
    /// [`NAP_CONNECTIONS_PER_WINDOW`] connections sending (at most [`NAP_WINDOWS`] windows)
    /// when the passes served lately were big and many connections are sending, else 0.
    ///
    /// Then the load generator, not the loop, is the bottleneck, and each of its writes that
    /// wakes the sleeping loop costs it an IPI and the loop a wakeup for a handful of
    /// commands. A short sleep that is not a wait lets the writes of many connections queue
    /// up for one pass. With few connections each waits for its own reply, and a nap would
    /// only add its length to every round trip.
    pub fn nap_us(&self, window_us: u64) -> u64 {
        if self.average >= COMMANDS_PER_PASS_MAX * SCALE && self.active_last >= NAP_CONNECTIONS_MIN
        {
            let windows = u64::from(self.active_last / NAP_CONNECTIONS_PER_WINDOW);
            window_us * windows.clamp(1, NAP_WINDOWS)
        } else {
            0
        }
    }

    /// The moving average of commands per busy pass (in sixteenths) and the connections that
    /// were active in the last epoch.
    pub fn load(&self) -> (u32, u32) {
        (self.average, self.active_last)
    }

    /// How long the loop may sleep when it would sleep `wanted_us`: 0 while a spin runs.
    pub fn timeout_us(&self, now_us: u64, wanted_us: u64) -> u64 {
        if now_us < self.spin_until_us {
            0
        } else {
            wanted_us
        }
    }

    /// A wait ended at `now_us`, with events (`worked`) or not; `window_us` is `busy-poll-us`.
    /// The commands counted since the last wait were the last pass's.
    pub fn after_wait(&mut self, now_us: u64, worked: bool, window_us: u64) {
        if now_us >= self.epoch_end_us {
            self.active_last = core::mem::take(&mut self.active);
            self.epoch = self.epoch.wrapping_add(1).max(1);
            self.epoch_end_us = now_us + ACTIVE_EPOCH_US;
        }
        let ran = core::mem::take(&mut self.commands);
        if ran > 0 {
            let sample = ran.min(1024) * SCALE;
            self.average = self.average - self.average / 8 + sample / 8;
        }
        let spinning = self.spin_until_us != 0;
        if !worked {
            if spinning && now_us >= self.spin_until_us {
                // The whole window went by without work: spin less for a while.
                self.spin_until_us = 0;
                self.backoff = (self.backoff * 2).clamp(1, BACKOFF_MAX);
                self.skip = self.backoff;
            }
            return;
        }
        if spinning {
            self.backoff = 0;
        }
        self.spin_until_us = 0;
        if window_us == 0 || self.average >= COMMANDS_PER_PASS_MAX * SCALE {
            return;
        }
        if self.skip > 0 {
            self.skip -= 1;
            return;
        }
        self.spin_until_us = now_us + window_us;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A busy pass that ran `n` commands (counted before the next wait, as the driver does).
    fn pass(b: &mut BusyPoll, now: u64, n: u32) {
        b.after_wait(now, true, 50);
        for _ in 0..n {
            b.note_command();
        }
    }

    #[test]
    fn small_passes_spin_after_each_busy_pass() {
        let mut b = BusyPoll::default();
        pass(&mut b, 10, 1);
        assert_eq!(b.timeout_us(20, 1000), 0);
        assert_eq!(b.timeout_us(60, 1000), 1000, "the window is over");
        pass(&mut b, 30, 1);
        assert_eq!(
            b.timeout_us(40, 1000),
            0,
            "work found in the spin: spin again"
        );
    }

    #[test]
    fn pipelined_passes_stop_the_spin_and_small_ones_bring_it_back() {
        let mut b = BusyPoll::default();
        let mut t = 0;
        for _ in 0..20 {
            t += 100;
            pass(&mut b, t, 16);
        }
        t += 100;
        b.after_wait(t, true, 50);
        assert_eq!(b.timeout_us(t + 1, 1000), 1000, "sixteen a pass: no spin");
        let mut spun = false;
        for _ in 0..40 {
            t += 100;
            pass(&mut b, t, 1);
            spun |= b.timeout_us(t + 1, 1000) == 0;
        }
        assert!(spun, "the average came down");
    }

    #[test]
    fn empty_spins_back_off_and_a_paying_spin_resets() {
        let mut b = BusyPoll::default();
        pass(&mut b, 10, 1);
        b.after_wait(70, false, 50); // the window passed with nothing
        assert_eq!(b.timeout_us(71, 1000), 1000);
        pass(&mut b, 100, 1); // backoff 1: this busy pass does not spin
        assert_eq!(b.timeout_us(101, 1000), 1000);
        pass(&mut b, 200, 1);
        assert_eq!(b.timeout_us(201, 1000), 0, "spins again");
        b.after_wait(260, false, 50);
        for t in [300, 400] {
            pass(&mut b, t, 1); // backoff 2
            assert_eq!(b.timeout_us(t + 1, 1000), 1000);
        }
        pass(&mut b, 500, 1);
        assert_eq!(b.timeout_us(501, 1000), 0);
        pass(&mut b, 520, 1); // found work: backoff cleared
        b.after_wait(580, false, 50);
        pass(&mut b, 600, 1);
        assert_eq!(b.timeout_us(601, 1000), 1000, "backoff 1 again, not 4");
    }

    /// `rounds` busy passes, every 100 us, each reading `reads` of the connections (their
    /// marks) in turn and running `n` commands.
    fn passes(
        b: &mut BusyPoll,
        t: &mut u64,
        marks: &mut [u32],
        rounds: usize,
        reads: usize,
        n: u32,
    ) {
        let mut next = 0;
        for _ in 0..rounds {
            *t += 100;
            b.after_wait(*t, true, 50);
            for _ in 0..reads {
                b.note_read(&mut marks[next % marks.len()]);
                next += 1;
            }
            for _ in 0..n {
                b.note_command();
            }
        }
    }

    #[test]
    fn big_passes_from_many_connections_nap() {
        let mut b = BusyPoll::default();
        let (mut t, mut marks) = (0, [0u32; 20]);
        passes(&mut b, &mut t, &mut marks, 100, 4, 64);
        assert_eq!(
            b.nap_us(50),
            50,
            "twenty connections, 64 commands a pass: one window"
        );
        assert_eq!(b.timeout_us(t + 1, 1000), 1000, "and no spin");
        // One window per twelve connections, at most four.
        let mut marks = [0u32; 36];
        passes(&mut b, &mut t, &mut marks, 100, 6, 64);
        assert_eq!(b.nap_us(50), 150, "thirty-six connections");
        let mut marks = [0u32; 48];
        passes(&mut b, &mut t, &mut marks, 100, 6, 64);
        assert_eq!(b.nap_us(50), 50 * NAP_WINDOWS, "forty-eight");
        let mut marks = [0u32; 200];
        passes(&mut b, &mut t, &mut marks, 100, 25, 64);
        assert_eq!(b.nap_us(50), 50 * NAP_WINDOWS, "two hundred");
    }

    #[test]
    fn few_connections_or_small_passes_do_not_nap() {
        let mut b = BusyPoll::default();
        let (mut t, mut marks) = (0, [0u32; 4]);
        passes(&mut b, &mut t, &mut marks, 100, 2, 32);
        assert_eq!(
            b.nap_us(50),
            0,
            "four connections wait for their own replies"
        );
        let mut b = BusyPoll::default();
        let mut marks = [0u32; 40];
        passes(&mut b, &mut t, &mut marks, 100, 4, 4);
        assert_eq!(b.load().1, 40, "forty connections a millisecond");
        assert_eq!(b.nap_us(50), 0, "but one command a read: the spin's case");
    }

    #[test]
    fn the_count_is_per_epoch() {
        let mut b = BusyPoll::default();
        let (mut t, mut marks) = (0, [0u32; 20]);
        passes(&mut b, &mut t, &mut marks, 100, 4, 64);
        assert!(b.nap_us(50) > 0);
        // The same twenty connections, but one of them sends only every 2 ms now.
        let mut one = [marks[0]];
        for _ in 0..3 {
            t += 2000;
            b.after_wait(t, true, 50);
            b.note_read(&mut one[0]);
            for _ in 0..16 {
                b.note_command();
            }
        }
        t += 2000;
        b.after_wait(t, true, 50);
        assert_eq!(b.load().1, 1);
        assert_eq!(b.nap_us(50), 0, "one connection is active now");
    }

    #[test]
    fn a_zero_window_turns_it_off() {
        let mut b = BusyPoll::default();
        pass(&mut b, 10, 1);
        b.after_wait(20, true, 0);
        assert_eq!(b.timeout_us(21, 1000), 1000);
    }
}
