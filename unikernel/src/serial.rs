//! The console: the first 16550 UART (COM1, I/O port 0x3f8), polled, 115200 8N1. QEMU's
//! `-serial stdio` shows it; Firecracker and Xen PVH expose the same port.

use crate::port::{inb, outb};
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};

const COM1: u16 = 0x3f8;

/// Programs the UART: 115200 baud, 8 data bits, no parity, one stop bit, FIFO on.
pub fn init() {
    outb(COM1 + 1, 0x00); // no interrupts
    outb(COM1 + 3, 0x80); // DLAB on
    outb(COM1, 0x01); // divisor 1 = 115200 baud
    outb(COM1 + 1, 0x00);
    outb(COM1 + 3, 0x03); // 8N1, DLAB off
    outb(COM1 + 2, 0xC7); // FIFO on, cleared
    outb(COM1 + 4, 0x03); // DTR | RTS
}

/// Bytes the UART's transmit FIFO takes once it reports empty (16550 with FIFO enabled).
const FIFO_BYTES: u32 = 16;

/// Bytes written since the FIFO last reported empty.
static IN_FIFO: AtomicU32 = AtomicU32::new(FIFO_BYTES);

/// Writes one byte. The line status register is polled only when the FIFO may be full (once
/// per 16 bytes): each port access is a VM exit, the dominant boot cost under a nested-PVM
/// KVM. The wait is bounded, so a machine without a UART does not hang.
fn put(b: u8) {
    if IN_FIFO.load(Ordering::Relaxed) >= FIFO_BYTES {
        for _ in 0..100_000 {
            if inb(COM1 + 5) & 0x20 != 0 {
                break;
            }
        }
        IN_FIFO.store(0, Ordering::Relaxed);
    }
    outb(COM1, b);
    IN_FIFO.fetch_add(1, Ordering::Relaxed);
}

/// Writes bytes to the UART now, turning `\n` into `\r\n`.
fn write_now(s: &[u8]) {
    for &b in s {
        if b == b'\n' {
            put(b'\r');
        }
        put(b);
    }
}

/// Bytes the boot log holds back (more are written through at once).
const HELD_MAX: usize = 4096;

/// Whether console output is being held back (see [`hold`]).
static HOLDING: AtomicBool = AtomicBool::new(false);
/// Bytes held in [`HELD`].
static HELD_LEN: AtomicUsize = AtomicUsize::new(0);
/// The held-back boot log.
static mut HELD: [u8; HELD_MAX] = [0; HELD_MAX];

/// Holds console output back in memory until [`release`]: every byte written to the UART is a
/// VM exit and, under QEMU, a `write` system call (about 5 us each under TCG here), so the
/// ~1 KB boot log cost milliseconds on the way to the first answer. Failures release it first
/// ([`crate::exit`]), so nothing is lost when the boot stops.
pub fn hold() {
    HOLDING.store(true, Ordering::Relaxed);
}

/// Log lines whose formatting waits for [`release`] (see [`later`]).
static mut LATER: Vec<Box<dyn FnOnce()>> = Vec::new();

/// Runs `print` (a boot-log line) at [`release`], or now when nothing is held: under TCG the
/// formatting code (numbers, addresses, `Debug`) costs its translation too, so the ordinary
/// boot lines are formatted after the first answer. Failures release first, so they still show.
pub fn later(print: Box<dyn FnOnce()>) {
    if HOLDING.load(Ordering::Relaxed) {
        // SAFETY: single CPU; only `later` and `release` touch LATER, never reentrantly.
        unsafe { (*core::ptr::addr_of_mut!(LATER)).push(print) };
    } else {
        print();
    }
}

/// Prints a boot-log line through [`later`]: the arguments are moved into a closure.
#[macro_export]
macro_rules! println_later {
    ($($arg:tt)*) => {
        $crate::serial::later(alloc::boxed::Box::new(move || $crate::println!($($arg)*)))
    };
}

/// Drops the pending [`later`] lines unformatted (and without freeing them): the allocator
/// failed, and formatting them could allocate.
pub fn abandon_later() {
    // SAFETY: as in `later`.
    let lines = unsafe { core::mem::take(&mut *core::ptr::addr_of_mut!(LATER)) };
    core::mem::forget(lines);
}

/// Formats the pending [`later`] lines (into HELD while holding), keeping their order.
fn format_later() {
    // SAFETY: as in `later`; taken out first, so a line printed meanwhile does not recurse.
    let lines = unsafe { core::mem::take(&mut *core::ptr::addr_of_mut!(LATER)) };
    for print in lines {
        print();
    }
}

/// Writes whatever was held back (formatting the [`later`] lines first) and stops holding.
pub fn release() {
    if !HOLDING.load(Ordering::Relaxed) {
        return;
    }
    format_later();
    if !HOLDING.swap(false, Ordering::Relaxed) {
        return;
    }
    let n = HELD_LEN.swap(0, Ordering::Relaxed);
    // SAFETY: single CPU; HOLDING is off, so no writer touches HELD while we read it.
    let held = unsafe { &(&*core::ptr::addr_of!(HELD))[..n] };
    write_now(held);
}

/// Writes `s` to the UART at once, past anything held back (the "ready" line, whose time
/// the host measures).
pub fn write_through(s: &[u8]) {
    write_now(s);
}

/// Writes bytes to the console (held back while [`hold`] is in force and room remains).
pub fn write_bytes(s: &[u8]) {
    if HOLDING.load(Ordering::Relaxed) {
        // A line printed now (an error, most likely) comes after the deferred ones.
        // SAFETY: as in `later`: a read of the length only.
        if !unsafe { (*core::ptr::addr_of!(LATER)).is_empty() } {
            format_later();
        }
        let n = HELD_LEN.load(Ordering::Relaxed);
        if n + s.len() <= HELD_MAX {
            // SAFETY: single CPU, no console output from interrupt handlers while holding
            // (the exception handler releases first): nothing else writes HELD[n..].
            unsafe { (&mut *core::ptr::addr_of_mut!(HELD))[n..n + s.len()].copy_from_slice(s) };
            HELD_LEN.store(n + s.len(), Ordering::Relaxed);
            return;
        }
        release();
    }
    write_now(s);
}

/// `core::fmt` adapter for the console.
pub struct Console;

impl fmt::Write for Console {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        write_bytes(s.as_bytes());
        Ok(())
    }
}

/// Prints to the console.
#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => {{
        let _ = core::fmt::Write::write_fmt(&mut $crate::serial::Console, format_args!($($arg)*));
    }};
}

/// Prints a line to the console.
#[macro_export]
macro_rules! println {
    () => { $crate::print!("\n") };
    ($($arg:tt)*) => {{
        $crate::print!($($arg)*);
        $crate::print!("\n");
    }};
}
