//! The stack guard (ring 0): the lowest 4 KiB page of the boot stack is unmapped, so a stack
//! overflow is a page fault that `crate::fault` reports (and stops on) instead of silently
//! overwriting `.data` below the stack. The page fault and double fault gates switch to a
//! stack of their own (IST 1, through a TSS): the faulting stack cannot take the CPU's frame.

use super::boot::{BOOT_PAGE_TABLES, BOOT_STACK, STACK_BYTES};
use super::idt::BOOT_IDT;
use core::ptr::{addr_of, addr_of_mut};

/// A page table: the 2 MiB page holding the guard, split into 4 KiB pages.
#[repr(C, align(4096))]
struct PageTable([u64; 512]);

/// The page table replacing the guard's 2 MiB page (in `.bss`: zeroed by the stub).
static mut GUARD_PT: PageTable = PageTable([0; 512]);

/// Bytes of the exception stack.
const EXC_STACK_BYTES: usize = 16 * 1024;

/// The stack the page fault and double fault handlers run on.
#[repr(C, align(16))]
struct ExcStack([u8; EXC_STACK_BYTES]);

/// The exception stack (IST 1).
static mut EXC_STACK: ExcStack = ExcStack([0; EXC_STACK_BYTES]);

/// The 64-bit TSS (104 bytes): only IST 1 is used; no I/O bitmap (ring 0 needs none).
#[repr(C, align(16))]
struct Tss([u8; 104]);

/// The TSS.
static mut TSS: Tss = Tss([0; 104]);

/// A GDT like the stub's (same code and data selectors) plus the TSS descriptor at 0x18.
static mut GDT: [u64; 5] = [0, 0x00af_9a00_0000_ffff, 0x00cf_9200_0000_ffff, 0, 0];

/// The GDT pointer `lgdt` reads.
#[repr(C, packed)]
struct GdtPtr {
    limit: u16,
    base: u64,
}

/// The guard page's address (0 until [`install`]).
static GUARD: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// The unmapped page's address, for the fault report (0 when there is none).
pub fn guard_page() -> u64 {
    GUARD.load(core::sync::atomic::Ordering::Relaxed)
}

/// Bytes of stack usable above the guard.
pub fn stack_bytes() -> usize {
    STACK_BYTES - 4096
}

/// Unmaps the guard page and gives the page fault and double fault gates their own stack.
/// Runs once, first thing in `kmain` (ring 0, interrupts off).
pub fn install() {
    let guard = (addr_of!(BOOT_STACK) as u64 + 4095) & !4095;
    let big = guard >> 21; // the 2 MiB page holding it
                           // SAFETY: single CPU, interrupts off, before anything else uses these statics; the new
                           // page table maps the same 2 MiB identically (same flags) but for the guard page, and
                           // CR3 is reloaded before the change matters. The GDT keeps the stub's selectors.
    unsafe {
        let pde =
            &mut (*addr_of_mut!(BOOT_PAGE_TABLES)).pd[(big / 512) as usize][(big % 512) as usize];
        let flags = *pde & 0x1f; // present, writable, user, PWT, PCD (not the 2 MiB bit)
        let pt = &mut (*addr_of_mut!(GUARD_PT)).0;
        for (i, e) in pt.iter_mut().enumerate() {
            *e = ((big << 21) + (i as u64) * 4096) | flags;
        }
        pt[((guard >> 12) & 511) as usize] = 0;
        *pde = addr_of!(GUARD_PT) as u64 | (flags & 0x7);
        core::arch::asm!("mov {t}, cr3", "mov cr3, {t}", t = out(reg) _, options(nostack));

        let tss = addr_of!(TSS) as u64;
        let ist1 = addr_of!(EXC_STACK) as u64 + EXC_STACK_BYTES as u64;
        let tss_bytes = &mut (*addr_of_mut!(TSS)).0;
        tss_bytes[36..44].copy_from_slice(&ist1.to_le_bytes());
        tss_bytes[102..104].copy_from_slice(&104u16.to_le_bytes());
        let gdt = &mut *addr_of_mut!(GDT);
        // 64-bit TSS descriptor: limit 103, base, type 0x89 (present, available TSS).
        gdt[3] = 103 | (tss & 0xff_ffff) << 16 | 0x89 << 40 | (tss >> 24 & 0xff) << 56;
        gdt[4] = tss >> 32;
        let ptr = GdtPtr {
            limit: (core::mem::size_of::<[u64; 5]>() - 1) as u16,
            base: gdt.as_ptr() as u64,
        };
        core::arch::asm!("lgdt [{p}]", "ltr {s:x}", p = in(reg) &ptr, s = in(reg) 0x18u16, options(nostack));
        let idt = &mut (*addr_of_mut!(BOOT_IDT)).0;
        for vector in [8usize, 14] {
            idt[vector * 2] |= 1 << 32; // IST 1
        }
    }
    GUARD.store(guard, core::sync::atomic::Ordering::Relaxed);
}
