//! x86 port I/O, the time stamp counter, the privilege level and the final halt: the few
//! instructions the console, the clock and the exit paths need, in a module of their own below
//! them and `arch`. The image runs at ring 0 (or ring 3 with IOPL 3), so `in`/`out` are
//! allowed.

use core::arch::asm;

/// Reads a byte from `port`.
#[inline]
pub fn inb(port: u16) -> u8 {
    let v: u8;
    // SAFETY: port reads touch no memory; every port the image reads is a PC device register
    // (UART, PIT, CMOS) whose read side effects the callers expect.
    unsafe {
        asm!("in al, dx", out("al") v, in("dx") port, options(nomem, nostack, preserves_flags))
    };
    v
}

/// Writes a byte to `port`.
#[inline]
pub fn outb(port: u16, v: u8) {
    // SAFETY: as for `inb`: a device register write with no effect on memory.
    unsafe {
        asm!("out dx, al", in("dx") port, in("al") v, options(nomem, nostack, preserves_flags))
    };
}

/// Writes a 32-bit value to `port`.
#[inline]
pub fn outl(port: u16, v: u32) {
    // SAFETY: as for `inb`.
    unsafe {
        asm!("out dx, eax", in("dx") port, in("eax") v, options(nomem, nostack, preserves_flags))
    };
}

/// The time stamp counter.
#[inline]
pub fn rdtsc() -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: rdtsc reads a counter; no memory effects.
    unsafe {
        asm!("rdtsc", out("eax") lo, out("edx") hi, options(nomem, nostack, preserves_flags))
    };
    (u64::from(hi) << 32) | u64::from(lo)
}

/// Stops the CPU for good (interrupts off, `hlt` forever; ring-3 mode spins, `hlt` being
/// privileged there).
pub fn halt_forever() -> ! {
    loop {
        #[cfg(not(feature = "ring3"))]
        // SAFETY: cli/hlt only stop this CPU, which is what the caller wants.
        unsafe {
            asm!("cli", "hlt", options(nomem, nostack))
        };
        #[cfg(feature = "ring3")]
        core::hint::spin_loop();
    }
}

/// The current privilege level (0, or 3 in the `ring3` mode), from CS.
pub fn cpl() -> u16 {
    let cs: u16;
    // SAFETY: reading CS has no effects; allowed at any privilege level.
    unsafe { asm!("mov {0:x}, cs", out(reg) cs, options(nomem, nostack, preserves_flags)) };
    cs & 3
}
