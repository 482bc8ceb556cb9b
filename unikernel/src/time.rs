//! Time: the TSC, calibrated against the PIT, gives monotonic time; a wall-clock base comes
//! from the `time=` command-line parameter (the xtask passes the host's unix time) or else the
//! CMOS RTC, or else 0 (the epoch, logged as such).

use crate::arch::port::{inb, outb, rdtsc};

/// PIT input clock.
const PIT_HZ: u64 = 1_193_182;
/// PIT ticks to calibrate over (2 ms: both ends are aligned on a PIT count change, so the
/// error is about one PIT tick, 0.84 us, in 2 ms: 0.04%; boot time matters more).
const CALIBRATE_TICKS: u64 = PIT_HZ / 500;

/// A monotonic clock with a wall-clock base.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    tsc_hz: u64,
    tsc_base: u64,
    unix_base_us: u64,
}

impl Clock {
    /// Calibrates the TSC; the wall clock starts at `unix_base_us`.
    pub fn new(unix_base_us: u64) -> Self {
        let tsc_hz = calibrate_tsc_hz();
        Clock {
            tsc_hz,
            tsc_base: rdtsc(),
            unix_base_us,
        }
    }

    /// TSC frequency found at boot.
    pub fn tsc_hz(&self) -> u64 {
        self.tsc_hz
    }

    /// Microseconds since the clock was made.
    pub fn uptime_us(&self) -> u64 {
        let d = rdtsc().wrapping_sub(self.tsc_base);
        ((u128::from(d) * 1_000_000) / u128::from(self.tsc_hz)) as u64
    }

    /// Unix time in microseconds.
    pub fn unix_us(&self) -> u64 {
        self.unix_base_us + self.uptime_us()
    }

    /// Busy-waits `us` microseconds.
    pub fn spin_us(&self, us: u64) {
        let end = self.uptime_us() + us;
        while self.uptime_us() < end {
            core::hint::spin_loop();
        }
    }
}

/// Reads PIT channel 0's current count with a latch command.
fn pit_read() -> u16 {
    outb(0x43, 0x00); // latch channel 0
    let lo = inb(0x40);
    let hi = inb(0x40);
    u16::from_le_bytes([lo, hi])
}

/// Spins until PIT channel 0's count changes from `from`; returns the new count and the TSC
/// read right after it (or `None` when the PIT does not count).
fn pit_edge(from: u16) -> Option<(u16, u64)> {
    for _ in 0..1_000_000 {
        let now = pit_read();
        if now != from {
            return Some((now, rdtsc()));
        }
    }
    None
}

/// Counts TSC ticks over `CALIBRATE_TICKS` PIT ticks, both ends taken just after a count
/// change. Channel 0 runs as a rate generator from 0xffff (about 55 ms a period), so the
/// window sees at most one wrap.
fn calibrate_tsc_hz() -> u64 {
    /// Used when the PIT never counts (no PIT): rather a wrong clock than a hang.
    const FALLBACK_HZ: u64 = 2_000_000_000;
    outb(0x43, 0x34); // channel 0, lo/hi access, mode 2
    outb(0x40, 0xff);
    outb(0x40, 0xff);
    let Some((start, tsc0)) = pit_edge(pit_read()) else {
        return FALLBACK_HZ;
    };
    let mut now = start;
    let mut tsc1 = tsc0;
    while u64::from(start.wrapping_sub(now)) < CALIBRATE_TICKS {
        match pit_edge(now) {
            Some((n, t)) => (now, tsc1) = (n, t),
            None => return FALLBACK_HZ,
        }
    }
    let elapsed = u64::from(start.wrapping_sub(now));
    (tsc1 - tsc0) * PIT_HZ / elapsed
}

/// Reads CMOS register `reg`.
fn cmos(reg: u8) -> u8 {
    outb(0x70, reg | 0x80); // NMI stays disabled
    inb(0x71)
}

/// Unix seconds from the CMOS RTC, or `None` when there is no RTC (reads float high: 0xff).
pub fn rtc_unix_seconds() -> Option<u64> {
    if cmos(0x0A) == 0xff && cmos(0x0B) == 0xff {
        return None;
    }
    // Wait out an update in progress (bounded).
    for _ in 0..1_000_000 {
        if cmos(0x0A) & 0x80 == 0 {
            break;
        }
    }
    let status_b = cmos(0x0B);
    let bcd = status_b & 0x04 == 0;
    let conv = |v: u8| if bcd { (v & 0x0f) + (v >> 4) * 10 } else { v };
    let sec = conv(cmos(0x00));
    let min = conv(cmos(0x02));
    let hour_raw = cmos(0x04);
    let mut hour = conv(hour_raw & 0x7f);
    if status_b & 0x02 == 0 && hour_raw & 0x80 != 0 {
        hour = (hour % 12) + 12; // 12-hour mode, PM
    }
    let day = conv(cmos(0x07));
    let month = conv(cmos(0x08));
    let year = 2000 + u64::from(conv(cmos(0x09)));
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let days = days_from_civil(year, u64::from(month), u64::from(day));
    Some(days * 86_400 + u64::from(hour) * 3600 + u64::from(min) * 60 + u64::from(sec))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (years from 1970).
pub fn days_from_civil(y: u64, m: u64, d: u64) -> u64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}
