//! Boot phase timing: TSC stamps taken at each step of the boot (the first two by the boot
//! stub), printed in microseconds once the TSC is calibrated. It shows where boot time goes.

use crate::port::rdtsc;
use crate::println;
use core::sync::atomic::{AtomicU64, Ordering};

/// Most phases recorded.
const PHASES_MAX: usize = 20;

/// Stamps after the boot stub's two, in order.
static STAMPS: [AtomicU64; PHASES_MAX] = [const { AtomicU64::new(0) }; PHASES_MAX];
/// Their names.
static mut NAMES: [&str; PHASES_MAX] = [""; PHASES_MAX];
/// Stamps recorded so far.
static COUNT: AtomicU64 = AtomicU64::new(0);

/// Records the end of phase `name` now.
pub fn stamp(name: &'static str) {
    let i = COUNT.load(Ordering::Relaxed) as usize;
    if i >= PHASES_MAX {
        return;
    }
    STAMPS[i].store(rdtsc(), Ordering::Relaxed);
    // SAFETY: single CPU, no interrupts: nothing else touches NAMES while we write slot i.
    unsafe { (*core::ptr::addr_of_mut!(NAMES))[i] = name };
    COUNT.store(i as u64 + 1, Ordering::Relaxed);
}

/// The boot stub's stamps: (entry, `.bss` zeroed).
fn stub_stamps() -> (u64, u64) {
    // SAFETY: written once by the boot stub before any Rust ran; only read afterwards.
    let t = unsafe { core::ptr::read_volatile(core::ptr::addr_of!(crate::arch::boot::BOOT_TSC)) };
    (t[0], t[1])
}

/// Microseconds in `ticks` TSC ticks at `tsc_hz`.
fn us(ticks: u64, tsc_hz: u64) -> u64 {
    ((u128::from(ticks) * 1_000_000) / u128::from(tsc_hz.max(1))) as u64
}

/// Prints every phase's duration and the total since the PVH entry.
pub fn report(tsc_hz: u64) {
    let (entry, bss) = stub_stamps();
    let n = COUNT.load(Ordering::Relaxed) as usize;
    crate::print!(
        "kayvee: boot phases (us): bss-zero {}",
        us(bss - entry, tsc_hz)
    );
    let mut prev = bss;
    for (i, s) in STAMPS.iter().enumerate().take(n) {
        let t = s.load(Ordering::Relaxed);
        // SAFETY: slots below COUNT were written by `stamp` and are only read now.
        let name = unsafe { (*core::ptr::addr_of!(NAMES))[i] };
        crate::print!(", {name} {}", us(t.wrapping_sub(prev), tsc_hz));
        prev = t;
    }
    println!("; total {} since the PVH entry", us(prev - entry, tsc_hz));
}
