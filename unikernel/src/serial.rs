//! The console: the first 16550 UART (COM1, I/O port 0x3f8), polled, 115200 8N1. QEMU's
//! `-serial stdio` shows it; Firecracker and Xen PVH expose the same port.

use crate::arch::port::{inb, outb};
use core::fmt;
use core::sync::atomic::{AtomicU32, Ordering};

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

/// Writes bytes, turning `\n` into `\r\n`.
pub fn write_bytes(s: &[u8]) {
    for &b in s {
        if b == b'\n' {
            put(b'\r');
        }
        put(b);
    }
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
