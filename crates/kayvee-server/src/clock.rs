//! The loop's clock: the wall clock read once per wakeup, and the monotonic time elapsed since
//! added to it for every later reading (each command's start and end).
//!
//! Where the kernel's own clocksource is the CPU's time-stamp counter, a reading is the counter
//! itself (`rdtsc`, a few cycles) scaled by a rate measured against `CLOCK_MONOTONIC` at each
//! wakeup; elsewhere it is `clock_gettime(CLOCK_MONOTONIC)`. The vDSO's `clock_gettime` reads
//! the same counter but costs far more around it: with one reading per command it was 4.5% of
//! kayvee-server's CPU at `redis-benchmark -c 50 -P 16 -t set` (perf, this machine), a fifth of
//! its user time. The kernel picks `tsc` only once it has found the counter invariant and in
//! step across CPUs, which is what makes the raw counter a monotonic clock here too.
//!
//! The rate is the counter's ticks over the monotonic microseconds since the first wakeup,
//! taken once that span is [`CALIBRATE_US`] long and refined at every wakeup after, so its error
//! shrinks as the server runs; until then readings are `clock_gettime`. A reading never goes
//! back before its wakeup's (see [`Clock::at`]).

use std::time::SystemTime;

/// The span of monotonic time the counter's rate is first measured over.
pub const CALIBRATE_US: u64 = 20_000;

/// The counter's rate against the monotonic clock, and whether the counter may be used.
#[derive(Debug)]
pub struct Calibration {
    /// The counter and the monotonic clock at the first wakeup; `None`: not used.
    start: Option<(u64, u64)>,
    /// Microseconds per tick in 32.32 fixed point; 0 until measured.
    scale: u64,
}

impl Calibration {
    /// The counter is used when the kernel's clocksource is `tsc` (x86-64 only).
    pub fn detect() -> Self {
        let tsc = cfg!(target_arch = "x86_64")
            && std::fs::read_to_string(
                "/sys/devices/system/clocksource/clocksource0/current_clocksource",
            )
            .is_ok_and(|s| s.trim() == "tsc");
        Calibration::new(tsc)
    }

    /// A calibration that uses the counter or not.
    pub fn new(tsc: bool) -> Self {
        Calibration {
            start: tsc.then(|| (ticks(), monotonic_us())),
            scale: 0,
        }
    }

    /// Notes a simultaneous reading of the counter and the monotonic clock.
    fn note(&mut self, tsc: u64, mono_us: u64) {
        let Some((tsc0, mono0)) = self.start else {
            return;
        };
        let (dt, du) = (tsc.wrapping_sub(tsc0), mono_us.saturating_sub(mono0));
        if du >= CALIBRATE_US && dt > du {
            self.scale = ((u128::from(du) << 32) / u128::from(dt)) as u64;
        }
    }
}

/// The wall clock read at the last wakeup, the monotonic clock at that moment, and the counter
/// with its rate when it stands in for the monotonic clock.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    unix_us: u64,
    mono_us: u64,
    tsc: u64,
    /// [`Calibration::scale`]; 0: read `clock_gettime` instead.
    scale: u64,
}

impl Clock {
    /// Reads the clocks at a wakeup (and refines the counter's rate with them).
    pub fn read(cal: &mut Calibration) -> Self {
        let unix_us = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0);
        let mono_us = monotonic_us();
        let tsc = if cal.start.is_some() { ticks() } else { 0 };
        cal.note(tsc, mono_us);
        Clock {
            unix_us,
            mono_us,
            tsc,
            scale: cal.scale,
        }
    }

    /// The monotonic clock now, in microseconds.
    #[inline]
    fn mono_now(&self) -> u64 {
        if self.scale == 0 {
            return monotonic_us();
        }
        let dt = ticks().wrapping_sub(self.tsc);
        self.mono_us + ((u128::from(dt) * u128::from(self.scale)) >> 32) as u64
    }

    /// The wall time at monotonic time `t_us` (not before the reading).
    #[inline]
    fn at(&self, t_us: u64) -> kayvee_engine::Now {
        kayvee_engine::Now {
            unix_us: self.unix_us + t_us.saturating_sub(self.mono_us),
        }
    }
}

impl kayvee_session::Clock for Clock {
    #[inline]
    fn now(&self) -> kayvee_engine::Now {
        self.at(self.mono_now())
    }

    fn sleep_us(&self, us: u64) {
        // DEBUG SLEEP blocks the whole server, as in Redis.
        std::thread::sleep(std::time::Duration::from_micros(us));
    }
}

/// The CPU's time-stamp counter (0 off x86-64, where it is never used).
#[inline]
fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` exists on every x86-64 CPU and only reads the counter.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

/// CLOCK_MONOTONIC in microseconds. Plain integers make the readings per command cheap:
/// `Instant` subtraction (checked `Timespec` arithmetic) cost ~65 instructions per command.
#[inline]
fn monotonic_us() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable `timespec`; CLOCK_MONOTONIC always exists on Linux
    // (a failure would leave zeros, which only makes a duration read as 0).
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1000
}

#[cfg(test)]
mod tests {
    use super::*;
    use kayvee_session::Clock as _;
    use std::time::Duration;

    #[test]
    fn clock_adds_monotonic_time_to_the_wall_reading() {
        let c = Clock {
            unix_us: 1_000_000,
            mono_us: 50,
            tsc: 0,
            scale: 0,
        };
        assert_eq!(c.at(5_050).unix_us, 1_005_000);
        // A reading before the wakeup's does not move time backwards.
        assert_eq!(c.at(10).unix_us, 1_000_000);
        let mut cal = Calibration::new(false);
        assert!(Clock::read(&mut cal).now().unix_us > 1_600_000_000_000_000);
        let a = monotonic_us();
        std::thread::sleep(Duration::from_millis(2));
        assert!(monotonic_us() - a >= 2000);
    }

    /// Wherever the counter is used, its readings follow `CLOCK_MONOTONIC` within a few
    /// microseconds over a sleep, and never go backwards.
    #[test]
    fn the_counter_keeps_to_the_monotonic_clock() {
        let mut cal = Calibration::detect();
        if cal.start.is_none() {
            // Not this machine's clocksource: every reading is clock_gettime.
            assert_eq!(Clock::read(&mut cal).scale, 0);
            return;
        }
        assert_eq!(Clock::read(&mut cal).scale, 0, "measured before its span");
        std::thread::sleep(Duration::from_micros(CALIBRATE_US + 5_000));
        let clock = Clock::read(&mut cal);
        assert_ne!(clock.scale, 0, "measured after {CALIBRATE_US} us");
        let mut last = clock.mono_now();
        for _ in 0..5 {
            std::thread::sleep(Duration::from_millis(10));
            let (ours, theirs) = (clock.mono_now(), monotonic_us());
            assert!(ours >= last, "went back from {last} to {ours}");
            // The two readings are back to back; the bound leaves room for a preemption
            // between them on a loaded machine, not for a rate off by more than a few %.
            let gap = ours.abs_diff(theirs);
            assert!(gap < 5_000, "counter {ours} against clock_gettime {theirs}");
            last = ours;
        }
    }
}
