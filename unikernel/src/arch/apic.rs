//! Idling: the local APIC timer (xAPIC registers at 0xfee00000, identity mapped uncached),
//! armed one-shot just before a `hlt`, bounds it (the loop's next deadline; the NIC's
//! interrupt, routed by `arch::ioapic`, ends it sooner when a frame comes), so the loop can
//! halt when nothing happens instead of spinning (under QEMU TCG a spinning guest burns a host
//! core). Its handler (`arch::idt`) acknowledges it. Interrupts stay disabled except inside
//! `sti; hlt`, and the timer is stopped again after each halt: a busy loop takes no
//! interrupts at all (a periodic timer left running looked slower at pipeline 1 under TCG,
//! in noisy runs).
//!
//! The timer counts at the APIC bus frequency, which KVM and QEMU model as 1 GHz (one count a
//! nanosecond) with the divider at 1. The 8259 PICs are masked first: on q35 the firmware
//! leaves the PIT's IRQ 0 unmasked on vector 8, which would look like a double fault.

use super::idt::{SPURIOUS_VECTOR, TIMER_VECTOR};
use crate::port::outb;

/// The xAPIC register block.
const LAPIC_BASE: usize = 0xfee0_0000;
/// Spurious-interrupt vector register (bit 8: APIC software enable).
const SVR: usize = 0xf0;
/// LVT timer register (bits 17-18: mode, 0 = one-shot; bit 16: masked).
const LVT_TIMER: usize = 0x320;
/// LVT LINT0 (the 8259's ExtINT path) and LINT1.
const LVT_LINT0: usize = 0x350;
const LVT_LINT1: usize = 0x360;
/// Timer initial count and divide configuration.
const TIMER_INITIAL: usize = 0x380;
const TIMER_DIVIDE: usize = 0x3e0;
/// APIC bus counts a microsecond (1 GHz, divider 1).
const COUNTS_PER_US: u32 = 1000;

/// Writes a LAPIC register.
fn write(reg: usize, v: u32) {
    // SAFETY: the LAPIC register block is identity mapped uncached by the boot stub; these
    // are architectural registers written with 32-bit accesses as the SDM requires.
    unsafe { core::ptr::write_volatile((LAPIC_BASE + reg) as *mut u32, v) };
}

/// Masks both 8259 PICs, enables the LAPIC and sets its timer up one-shot (not started).
pub fn init_idle_timer() {
    outb(0x21, 0xff);
    outb(0xa1, 0xff);
    write(SVR, 0x100 | u32::from(SPURIOUS_VECTOR));
    write(LVT_LINT0, 1 << 16);
    write(LVT_LINT1, 1 << 16);
    write(TIMER_DIVIDE, 0b1011); // divide by 1
    write(LVT_TIMER, u32::from(TIMER_VECTOR));
}

/// Halts for up to `us` microseconds: arms the timer, `sti; hlt`, stops the timer. `sti;
/// hlt` cannot lose the wakeup: an interrupt pending at `sti` is taken once `hlt` starts.
pub fn halt_for(us: u32) {
    write(TIMER_INITIAL, us.saturating_mul(COUNTS_PER_US).max(1));
    // SAFETY: interrupts are enabled only for the `hlt`; the only ones unmasked (timer,
    // spurious) have handlers that return. No `nostack`: the compiler keeps nothing in the
    // red zone here, which the interrupt frame overwrites.
    unsafe { core::arch::asm!("sti", "hlt", "cli", options(nomem)) };
    write(TIMER_INITIAL, 0);
}
