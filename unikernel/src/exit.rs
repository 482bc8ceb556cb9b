//! Leaving the VM: QEMU's `isa-debug-exit` device (port 0xf4, 4 bytes) makes QEMU exit with
//! status `(value << 1) | 1`. Kayvee writes 0x10 for success (QEMU exits 33) and 0x11 for
//! failure (QEMU exits 35). Without that device (Firecracker, Xen) the i8042 reset line stops
//! the VM (Firecracker treats it as shutdown), and failing that the CPU halts.

use crate::port::{halt_forever, outb, outl};

/// The value written for a clean exit; QEMU's exit status is then 33.
pub const SUCCESS_VALUE: u32 = 0x10;
/// The value written for a failure; QEMU's exit status is then 35.
pub const FAILURE_VALUE: u32 = 0x11;

/// Stops the VM with `value`.
fn exit_with(value: u32) -> ! {
    outl(0xf4, value);
    outb(0x64, 0xfe); // i8042 CPU reset: Firecracker's shutdown signal
    halt_forever()
}

/// Clean stop (SHUTDOWN).
pub fn success() -> ! {
    crate::serial::release();
    crate::println!("kayvee: exit (success)");
    exit_with(SUCCESS_VALUE)
}

/// Stops with a failure status after printing `why`.
pub fn fail(why: &str) -> ! {
    crate::serial::release();
    crate::println!("kayvee: fatal: {why}");
    exit_with(FAILURE_VALUE)
}
