//! Time: the TSC gives monotonic time. Its frequency comes from the hypervisor's CPUID timing
//! leaf (0x40000010) or CPUID 0x15 when offered; else from the PIT: a short first measurement
//! (0.25 ms) at boot, refined later over a longer span (the PIT keeps counting while we boot
//! and serve), so calibration costs the boot almost nothing. The wall-clock base comes from
//! kvm-clock's wall clock when KVM offers it (real KVM, Firecracker), else the CMOS RTC (q35,
//! pc, microvm with `rtc=on`), else the `time=` command-line parameter (the xtask passes the
//! host's unix time), else 0 (the epoch, logged as such): see [`WallSource`].

use crate::port::{inb, outb, rdtsc};
use core::cell::Cell;
use kayvee_bootargs::days_from_civil;

/// PIT input clock.
const PIT_HZ: u64 = 1_193_182;
/// PIT ticks of the first, boot-time measurement (0.25 ms: error about 0.3%, refined later).
const QUICK_TICKS: u64 = PIT_HZ / 4000;
/// Uptimes (us) at which the PIT measurement is refined: each refinement spans the whole time
/// since the first PIT edge, so the error shrinks to about one PIT tick (0.84 us) over it.
const REFINE_AT_US: [u64; 3] = [20_000, 300_000, 3_000_000];
/// Half a PIT period (16-bit counter) in ticks: refinement resolves counter wraps from the TSC
/// estimate, which must be closer than this.
const PIT_HALF_PERIOD: u64 = 1 << 15;

/// Where the TSC frequency came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TscSource {
    /// CPUID 0x40000010 (hypervisor timing leaf: KVM, VMware, ...).
    HypervisorLeaf,
    /// CPUID 0x15 (crystal clock ratio).
    Cpuid15,
    /// Measured against PIT channel 0 (refined while running).
    Pit,
    /// Nothing worked: a guess (no PIT, no CPUID leaf).
    Guess,
}

/// A monotonic clock with a wall-clock base. Interior mutability: the PIT refinement changes
/// the frequency while shared references are in use (one CPU, no interrupts).
#[derive(Debug)]
pub struct Clock {
    tsc_hz: Cell<u64>,
    source: TscSource,
    /// TSC at the last rebase and the uptime (us) it stood for.
    tsc_base: Cell<u64>,
    uptime_base_us: Cell<u64>,
    /// Unix time (us) at uptime 0; stepped once by an NTP answer ([`Clock::step_wall`]).
    unix_base_us: Cell<u64>,
    /// Measuring against the PIT: the baseline edge (count, TSC) and its uptime (us), for
    /// refinement; `None` when the frequency came from CPUID (or there is no PIT).
    pit_base: Cell<Option<(u16, u64, u64)>>,
    /// Refinements done since the baseline (index into [`REFINE_AT_US`]).
    refined: Cell<usize>,
}

impl Clock {
    /// Finds the TSC frequency; the wall clock starts at `unix_base_us`.
    pub fn new(unix_base_us: u64) -> Self {
        let (tsc_hz, source, pit_base) = match cpuid_tsc_hz() {
            Some((hz, src)) => (hz, src, None),
            None => match quick_pit_calibration() {
                Some((hz, (count, tsc))) => (hz, TscSource::Pit, Some((count, tsc, 0))),
                None => (2_000_000_000, TscSource::Guess, None),
            },
        };
        Clock {
            tsc_hz: Cell::new(tsc_hz),
            source,
            tsc_base: Cell::new(rdtsc()),
            uptime_base_us: Cell::new(0),
            unix_base_us: Cell::new(unix_base_us),
            pit_base: Cell::new(pit_base),
            refined: Cell::new(0),
        }
    }

    /// TSC frequency in use.
    pub fn tsc_hz(&self) -> u64 {
        self.tsc_hz.get()
    }

    /// Microseconds in `cycles` TSC cycles (a span timed with `rdtsc`).
    pub fn cycles_us(&self, cycles: u64) -> u64 {
        (u128::from(cycles) * 1_000_000 / u128::from(self.tsc_hz().max(1))) as u64
    }

    /// Where the frequency came from.
    pub fn source(&self) -> TscSource {
        self.source
    }

    /// Microseconds since the clock was made.
    pub fn uptime_us(&self) -> u64 {
        let d = rdtsc().wrapping_sub(self.tsc_base.get());
        self.uptime_base_us.get() + ticks_to_us(d, self.tsc_hz.get())
    }

    /// Unix time in microseconds.
    pub fn unix_us(&self) -> u64 {
        self.unix_base_us.get() + self.uptime_us()
    }

    /// Moves the wall clock by `offset_us` (an NTP server's answer); monotonic time is left
    /// as it is.
    pub fn step_wall(&self, offset_us: i64) {
        let base = self.unix_base_us.get();
        self.unix_base_us.set(base.saturating_add_signed(offset_us));
    }

    /// Busy-waits `us` microseconds.
    pub fn spin_us(&self, us: u64) {
        let end = self.uptime_us() + us;
        while self.uptime_us() < end {
            core::hint::spin_loop();
        }
    }

    /// The uptime (us) of the next refinement point, if one is still to come: an idle loop
    /// halts no longer than that, so the refinement is not taken late.
    pub fn next_refine_us(&self) -> Option<u64> {
        let (_, _, base_us) = self.pit_base.get()?;
        REFINE_AT_US.get(self.refined.get()).map(|at| base_us + at)
    }

    /// Refines a PIT-measured frequency when the next point of [`REFINE_AT_US`] after the
    /// baseline is reached (cheap otherwise: call it every loop round). Uptime stays
    /// continuous: the clock is rebased at the current reading before the new rate applies.
    /// When the counter's wraps cannot be told apart (the loop came back too late for the
    /// current precision), the current edge becomes the new baseline and the steps restart.
    pub fn maybe_refine(&self) {
        let Some((count0, tsc0, base_us)) = self.pit_base.get() else {
            return;
        };
        let n = self.refined.get();
        let up = self.uptime_us();
        if n >= REFINE_AT_US.len() || up < base_us + REFINE_AT_US[n] {
            return;
        }
        let Some((count1, tsc1)) = pit_edge_tight() else {
            return;
        };
        let dtsc = tsc1.wrapping_sub(tsc0);
        let estimate = u128::from(dtsc) * u128::from(PIT_HZ) / u128::from(self.tsc_hz.get());
        let Some(ticks) = unwrap_pit(estimate as u64, count0.wrapping_sub(count1)) else {
            self.pit_base.set(Some((count1, tsc1, up)));
            self.refined.set(0);
            return;
        };
        self.refined.set(n + 1);
        let hz = (u128::from(dtsc) * u128::from(PIT_HZ) / u128::from(ticks)) as u64;
        let now = rdtsc();
        self.uptime_base_us.set(
            self.uptime_base_us.get()
                + ticks_to_us(now.wrapping_sub(self.tsc_base.get()), self.tsc_hz.get()),
        );
        self.tsc_base.set(now);
        self.tsc_hz.set(hz);
        if n + 1 == REFINE_AT_US.len() {
            crate::println!(
                "kayvee: TSC {} kHz (measured against the PIT over {} ms)",
                hz / 1000,
                (up - base_us) / 1000
            );
        }
    }
}

/// Microseconds in `ticks` TSC ticks at `hz`.
fn ticks_to_us(ticks: u64, hz: u64) -> u64 {
    ((u128::from(ticks) * 1_000_000) / u128::from(hz.max(1))) as u64
}

/// The PIT ticks elapsed given a TSC-based `estimate` and the counter's own (wrapping)
/// `delta`: the count of whole 65,536-tick periods is the one putting the total nearest the
/// estimate. `None` if the estimate is too rough to decide (or no tick passed).
fn unwrap_pit(estimate: u64, delta: u16) -> Option<u64> {
    let delta = u64::from(delta);
    let periods = (estimate + PIT_HALF_PERIOD).saturating_sub(delta) >> 16;
    let ticks = periods * 65_536 + delta;
    let off = ticks.abs_diff(estimate);
    (ticks > 0 && off < PIT_HALF_PERIOD / 2).then_some(ticks)
}

/// CPUID leaf `leaf` (subleaf 0): (eax, ebx, ecx, edx).
fn cpuid(leaf: u32) -> (u32, u32, u32, u32) {
    // SAFETY: CPUID exists on every x86_64 CPU and only reads identification registers.
    #[allow(unused_unsafe)]
    let r = unsafe { core::arch::x86_64::__cpuid(leaf) };
    (r.eax, r.ebx, r.ecx, r.edx)
}

/// The TSC frequency the (virtual) CPU states: the hypervisor timing leaf 0x40000010 (TSC kHz
/// in eax) when the hypervisor leaves go that far, else CPUID 0x15 when it names the crystal
/// clock. Neither exists under QEMU TCG's default CPU.
fn cpuid_tsc_hz() -> Option<(u64, TscSource)> {
    let hypervisor = cpuid(1).2 & (1 << 31) != 0;
    if hypervisor {
        let (max, ..) = cpuid(0x4000_0000);
        if (0x4000_0010..0x4000_0100).contains(&max) {
            let khz = u64::from(cpuid(0x4000_0010).0);
            if khz > 0 {
                return Some((khz * 1000, TscSource::HypervisorLeaf));
            }
        }
    }
    if cpuid(0).0 >= 0x15 {
        let (den, num, crystal_hz, _) = cpuid(0x15);
        if den != 0 && num != 0 && crystal_hz != 0 {
            let hz = u64::from(crystal_hz) * u64::from(num) / u64::from(den);
            return Some((hz, TscSource::Cpuid15));
        }
    }
    None
}

/// Reads PIT channel 0's current count with a latch command.
fn pit_read() -> u16 {
    outb(0x43, 0x00); // latch channel 0
    let lo = inb(0x40);
    let hi = inb(0x40);
    u16::from_le_bytes([lo, hi])
}

/// Spins until PIT channel 0's count changes from `from`; returns the new count, the TSC
/// read just before the read that saw it, and the TSC ticks that read took (its
/// uncertainty: large when the host descheduled us in between). `None` when the PIT does not
/// count.
fn pit_edge(from: u16) -> Option<(u16, u64, u64)> {
    for _ in 0..1_000_000 {
        let before = rdtsc();
        let now = pit_read();
        if now != from {
            let after = rdtsc();
            return Some((now, before, after - before));
        }
    }
    None
}

/// Most TSC ticks a PIT read may take for its edge to count as precise: about 10 us at a few
/// GHz; a host that deschedules the vCPU mid-read makes it far longer.
const EDGE_TICKS_MAX: u64 = 20_000;

/// A PIT edge whose read was not interrupted (a few tries): (count, TSC).
fn pit_edge_tight() -> Option<(u16, u64)> {
    let mut best = None;
    for _ in 0..8 {
        let (count, tsc, took) = pit_edge(pit_read())?;
        if took <= EDGE_TICKS_MAX {
            return Some((count, tsc));
        }
        best = Some((count, tsc));
    }
    best
}

/// Starts PIT channel 0 as a free-running rate generator from 0xffff (about 55 ms a period)
/// and counts TSC ticks over [`QUICK_TICKS`] PIT ticks, both ends taken just after a count
/// change, each end read without interruption (retried otherwise). Returns the frequency and
/// the first edge (for [`Clock::maybe_refine`]).
fn quick_pit_calibration() -> Option<(u64, (u16, u64))> {
    outb(0x43, 0x34); // channel 0, lo/hi access, mode 2
    outb(0x40, 0xff);
    outb(0x40, 0xff);
    let mut last = None;
    for _ in 0..8 {
        let (start, tsc0) = pit_edge_tight()?;
        let (mut now, mut tsc1, mut took) = (start, tsc0, 0);
        while u64::from(start.wrapping_sub(now)) < QUICK_TICKS {
            (now, tsc1, took) = pit_edge(now)?;
        }
        let elapsed = u64::from(start.wrapping_sub(now));
        last = Some(((tsc1 - tsc0) * PIT_HZ / elapsed, (start, tsc0)));
        if took <= EDGE_TICKS_MAX {
            break;
        }
    }
    last // refined later in any case
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

/// Where the wall clock's base came from, best first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WallSource {
    /// kvm-clock: `MSR_KVM_WALL_CLOCK_NEW` (the host's time at the guest's kvm-clock zero)
    /// plus the kvm-clock system time read through `MSR_KVM_SYSTEM_TIME_NEW`.
    KvmClock,
    /// The CMOS RTC (whole seconds).
    Rtc,
    /// The `time=` command-line parameter.
    Cmdline,
    /// Nothing: the clock starts at the unix epoch.
    Epoch,
}

impl WallSource {
    /// The words for the console's boot line.
    pub fn describe(self) -> &'static str {
        match self {
            WallSource::KvmClock => "kvm-clock",
            WallSource::Rtc => "the CMOS RTC",
            WallSource::Cmdline => "the time= parameter",
            WallSource::Epoch => {
                "nothing (no kvm-clock, no RTC, no time=): starting at the unix epoch"
            }
        }
    }
}

/// The wall-clock base in unix microseconds and where it came from: kvm-clock, else the CMOS
/// RTC, else `time_us` (the command line's `time=`), else the epoch. A clock the machine
/// offers wins over the command line, which may be stale (a saved boot script, a restored VM).
pub fn wall_clock_base(time_us: Option<u64>) -> (u64, WallSource) {
    if let Some(us) = kvm_wall_clock_us() {
        return (us, WallSource::KvmClock);
    }
    if let Some(s) = rtc_unix_seconds() {
        return (s * 1_000_000, WallSource::Rtc);
    }
    match time_us {
        Some(t) => (t, WallSource::Cmdline),
        None => (0, WallSource::Epoch),
    }
}

/// `MSR_KVM_WALL_CLOCK_NEW`: the guest writes the physical address of a [`PvclockWallClock`];
/// the host fills it with the wall time at which kvm-clock read zero.
#[cfg(not(feature = "ring3"))]
const MSR_KVM_WALL_CLOCK_NEW: u32 = 0x4b56_4d00;
/// `MSR_KVM_SYSTEM_TIME_NEW`: the physical address of a [`PvclockVcpuTime`] with bit 0 set
/// enables it (0 disables it again).
#[cfg(not(feature = "ring3"))]
const MSR_KVM_SYSTEM_TIME_NEW: u32 = 0x4b56_4d01;
/// CPUID 0x40000001 eax: `KVM_FEATURE_CLOCKSOURCE2` (the `_NEW` MSRs exist).
#[cfg(not(feature = "ring3"))]
const KVM_FEATURE_CLOCKSOURCE2: u32 = 1 << 3;

/// `struct pvclock_wall_clock` (the KVM ABI).
#[cfg(not(feature = "ring3"))]
#[repr(C, align(16))]
struct PvclockWallClock {
    version: u32,
    sec: u32,
    nsec: u32,
}

/// `struct pvclock_vcpu_time_info` (the KVM ABI, 32 bytes).
#[cfg(not(feature = "ring3"))]
#[repr(C, align(64))]
struct PvclockVcpuTime {
    version: u32,
    pad0: u32,
    tsc_timestamp: u64,
    system_time: u64,
    tsc_to_system_mul: u32,
    tsc_shift: i8,
    flags: u8,
    pad: [u8; 2],
}

/// Whether CPUID says this is KVM with kvm-clock's `_NEW` MSRs.
#[cfg(not(feature = "ring3"))]
fn kvm_clock_offered() -> bool {
    if cpuid(1).2 & (1 << 31) == 0 {
        return false;
    }
    let (max, b, c, d) = cpuid(0x4000_0000);
    let kvm = [b, c, d] == [0x4b4d_564b, 0x564b_4d56, 0x0000_004d]; // "KVMKVMKVM\0\0\0"
    kvm && max >= 0x4000_0001 && cpuid(0x4000_0001).0 & KVM_FEATURE_CLOCKSOURCE2 != 0
}

/// Writes model-specific register `msr`.
///
/// # Safety
/// Ring 0 only, and `msr` must be one whose write the caller means (here kvm-clock's).
#[cfg(not(feature = "ring3"))]
unsafe fn wrmsr(msr: u32, value: u64) {
    // SAFETY: the caller's contract; wrmsr touches no memory of ours by itself.
    unsafe {
        core::arch::asm!("wrmsr", in("ecx") msr, in("eax") value as u32,
            in("edx") (value >> 32) as u32, options(nostack, preserves_flags))
    };
}

/// Reads a kvm-clock structure consistently: `read` runs until the version it saw before and
/// after is the same even number (the host sets it odd while updating).
#[cfg(not(feature = "ring3"))]
fn read_versioned<T>(version: *const u32, read: impl Fn() -> T) -> T {
    loop {
        // SAFETY: `version` points into a static the host writes; volatile reads of an
        // aligned u32.
        let v0 = unsafe { core::ptr::read_volatile(version) };
        core::sync::atomic::fence(core::sync::atomic::Ordering::Acquire);
        let value = read();
        core::sync::atomic::fence(core::sync::atomic::Ordering::Acquire);
        // SAFETY: as above.
        let v1 = unsafe { core::ptr::read_volatile(version) };
        if v0 == v1 && v0 & 1 == 0 {
            return value;
        }
    }
}

/// Unix microseconds from kvm-clock, when KVM offers it (never under TCG, nor in the ring-3
/// mode, which cannot write MSRs): the wall clock at kvm-clock's zero plus kvm-clock's system
/// time now. The system-time MSR is turned off again afterwards: the TSC keeps the time.
/// Untested here (this machine's /dev/kvm cannot run the ring-0 image).
#[cfg(not(feature = "ring3"))]
pub fn kvm_wall_clock_us() -> Option<u64> {
    static mut WALL: PvclockWallClock = PvclockWallClock {
        version: 0,
        sec: 0,
        nsec: 0,
    };
    static mut VCPU: PvclockVcpuTime = PvclockVcpuTime {
        version: 0,
        pad0: 0,
        tsc_timestamp: 0,
        system_time: 0,
        tsc_to_system_mul: 0,
        tsc_shift: 0,
        flags: 0,
        pad: [0; 2],
    };
    if !kvm_clock_offered() {
        return None;
    }
    let wall = core::ptr::addr_of_mut!(WALL);
    let vcpu = core::ptr::addr_of_mut!(VCPU);
    // SAFETY: ring 0 (this function is not built for ring 3); the statics are identity
    // mapped (virtual == physical), aligned as the ABI asks, and only the host writes them
    // while the MSRs point at them.
    unsafe {
        wrmsr(MSR_KVM_WALL_CLOCK_NEW, wall as u64);
        wrmsr(MSR_KVM_SYSTEM_TIME_NEW, vcpu as u64 | 1);
    }
    // SAFETY (both closures): volatile reads of fields of the statics above.
    let (sec, nsec) = read_versioned(unsafe { core::ptr::addr_of!((*wall).version) }, || unsafe {
        (
            core::ptr::read_volatile(core::ptr::addr_of!((*wall).sec)),
            core::ptr::read_volatile(core::ptr::addr_of!((*wall).nsec)),
        )
    });
    let system_ns = read_versioned(unsafe { core::ptr::addr_of!((*vcpu).version) }, || unsafe {
        let tsc0 = core::ptr::read_volatile(core::ptr::addr_of!((*vcpu).tsc_timestamp));
        let base = core::ptr::read_volatile(core::ptr::addr_of!((*vcpu).system_time));
        let mul = core::ptr::read_volatile(core::ptr::addr_of!((*vcpu).tsc_to_system_mul));
        let shift = core::ptr::read_volatile(core::ptr::addr_of!((*vcpu).tsc_shift));
        base.wrapping_add(pvclock_scale(rdtsc().wrapping_sub(tsc0), mul, shift))
    });
    // SAFETY: as above; 0 turns kvm-clock's per-vCPU updates off.
    unsafe { wrmsr(MSR_KVM_SYSTEM_TIME_NEW, 0) };
    if sec == 0 {
        return None;
    }
    let ns = u64::from(sec) * 1_000_000_000 + u64::from(nsec) + system_ns;
    Some(ns / 1000)
}

/// The ring-3 mode cannot write MSRs: no kvm-clock.
#[cfg(feature = "ring3")]
pub fn kvm_wall_clock_us() -> Option<u64> {
    None
}

/// Nanoseconds in `delta` TSC ticks by kvm-clock's scale: shifted by `shift`, then times
/// `mul` / 2^32 (the pvclock ABI).
#[cfg_attr(feature = "ring3", allow(dead_code))]
fn pvclock_scale(delta: u64, mul: u32, shift: i8) -> u64 {
    let d = if shift >= 0 {
        delta << shift
    } else {
        delta >> shift.unsigned_abs()
    };
    ((u128::from(d) * u128::from(mul)) >> 32) as u64
}
