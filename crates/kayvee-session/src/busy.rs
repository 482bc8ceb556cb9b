//! The adaptive busy poll: after a loop pass that did work, a shell may keep polling for
//! `busy-poll-us` before it sleeps, so a request that arrives meanwhile does not pay the wakeup
//! of an idle (v)CPU. It only pays off when the server waits on one or two clients' round trips;
//! with many clients sending, a request that arrives while the server sleeps is served in the
//! next pass with the others, the wakeup is shared, and the spin only burns CPU time (at
//! `-P 16` with 50 clients it cost a third of the requests per CPU-second).
//!
//! So the loop spins only while both hold:
//! - few connections sent anything in the last epoch ([`EPOCH_US`]): at most
//!   [`SENDERS_MAX`];
//! - recent spins found work: a spin that ends with nothing found doubles the number of
//!   busy passes that follow without a spin (up to [`BACKOFF_MAX`]); a spin that finds work
//!   resets it.

/// Length of a sender-counting epoch.
pub const EPOCH_US: u64 = 2_000;
/// Most connections sending in an epoch for which the loop still spins.
pub const SENDERS_MAX: u32 = 2;
/// Most busy passes without a spin after spins that found nothing.
pub const BACKOFF_MAX: u32 = 64;

/// The busy-poll state (see the module documentation).
#[derive(Clone, Debug, Default)]
pub struct BusyPoll {
    /// The spin under way ends at this unix us (0: none).
    spin_until_us: u64,
    /// Busy passes still to go without a spin, and the next backoff's length.
    skip: u32,
    backoff: u32,
    /// The current epoch's number and end, its senders so far, and the last epoch's.
    epoch: u32,
    epoch_end_us: u64,
    senders: u32,
    senders_last: u32,
}

impl BusyPoll {
    /// The current epoch (a connection counts as a sender once per epoch).
    #[inline]
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// A connection sent its first bytes of this epoch.
    #[inline]
    pub fn note_sender(&mut self) {
        self.senders += 1;
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
    pub fn after_wait(&mut self, now_us: u64, worked: bool, window_us: u64) {
        self.roll_epoch(now_us);
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
        if window_us == 0 || self.senders_last.max(self.senders) > SENDERS_MAX {
            return;
        }
        if self.skip > 0 {
            self.skip -= 1;
            return;
        }
        self.spin_until_us = now_us + window_us;
    }

    /// Starts a new epoch when the current one is over.
    fn roll_epoch(&mut self, now_us: u64) {
        if now_us < self.epoch_end_us {
            return;
        }
        // A gap of several epochs without a wait (a long command) still ends one epoch.
        self.senders_last = self.senders;
        self.senders = 0;
        self.epoch = self.epoch.wrapping_add(1);
        self.epoch_end_us = now_us + EPOCH_US;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A busy pass of a loop whose one connection sends (counted once per epoch, as the
    /// driver does).
    fn one_sender(b: &mut BusyPoll, now: u64) {
        b.after_wait(now, true, 50);
        if b.senders == 0 {
            b.note_sender();
        }
    }

    #[test]
    fn one_client_spins_after_each_busy_pass() {
        let mut b = BusyPoll::default();
        one_sender(&mut b, 10);
        assert_eq!(b.timeout_us(20, 1000), 0);
        assert_eq!(b.timeout_us(60, 1000), 1000, "the window is over");
        b.after_wait(30, true, 50);
        assert_eq!(
            b.timeout_us(40, 1000),
            0,
            "work found in the spin: spin again"
        );
    }

    #[test]
    fn many_senders_never_spin() {
        let mut b = BusyPoll::default();
        b.after_wait(10, true, 50);
        for _ in 0..=SENDERS_MAX {
            b.note_sender();
        }
        b.after_wait(20, true, 50);
        assert_eq!(b.timeout_us(21, 1000), 1000, "this epoch has too many");
        // The next epoch still remembers the last one's senders.
        b.after_wait(EPOCH_US + 20, true, 50);
        assert_eq!(b.timeout_us(EPOCH_US + 21, 1000), 1000);
        b.note_sender();
        // An epoch with one sender after it spins again.
        one_sender(&mut b, 2 * EPOCH_US + 30);
        assert_eq!(b.timeout_us(2 * EPOCH_US + 31, 1000), 0);
    }

    #[test]
    fn empty_spins_back_off_and_a_paying_spin_resets() {
        let mut b = BusyPoll::default();
        one_sender(&mut b, 10);
        b.after_wait(70, false, 50); // the window passed with nothing
        assert_eq!(b.timeout_us(71, 1000), 1000);
        one_sender(&mut b, 100); // backoff 1: this busy pass does not spin
        assert_eq!(b.timeout_us(101, 1000), 1000);
        one_sender(&mut b, 200);
        assert_eq!(b.timeout_us(201, 1000), 0, "spins again");
        b.after_wait(260, false, 50);
        for t in [300, 400] {
            one_sender(&mut b, t); // backoff 2
            assert_eq!(b.timeout_us(t + 1, 1000), 1000);
        }
        one_sender(&mut b, 500);
        assert_eq!(b.timeout_us(501, 1000), 0);
        b.after_wait(520, true, 50); // found work: backoff cleared
        b.after_wait(580, false, 50);
        one_sender(&mut b, 600);
        assert_eq!(b.timeout_us(601, 1000), 1000, "backoff 1 again, not 4");
    }

    #[test]
    fn a_zero_window_turns_it_off() {
        let mut b = BusyPoll::default();
        b.note_sender();
        b.after_wait(10, true, 0);
        assert_eq!(b.timeout_us(11, 1000), 1000);
    }
}
