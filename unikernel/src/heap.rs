//! The global allocator: talc over the RAM the PVH memory map reports above the image.

use crate::pvh::Region;
use spinning_top::RawSpinlock;
use talc::source::Manual;
use talc::TalcLock;

#[global_allocator]
static ALLOCATOR: TalcLock<RawSpinlock, Manual> = TalcLock::new(Manual);

/// RAM the boot page tables map write-back (from 0xB0000000 up is mapped uncached: PCI ECAM
/// and MMIO; QEMU q35 keeps low RAM below it).
const MAPPED_END: u64 = 0xB000_0000;

extern "C" {
    static __image_end: u8;
}

/// Hands every RAM range (or part of one) above the end of the image to the allocator and
/// returns the number of bytes claimed. Memory below 1 MiB and the image itself are left alone
/// (the boot loader's start info and command line live low).
pub fn init(ram: &[Region]) -> u64 {
    let image_end = core::ptr::addr_of!(__image_end) as u64;
    let mut claimed = 0;
    for r in ram {
        let start = r.start.max(image_end);
        let end = r.end.min(MAPPED_END);
        if end <= start || end - start < 64 * 1024 {
            continue;
        }
        let size = (end - start) as usize;
        // SAFETY: the range is RAM per the memory map, identity mapped (below 4 GiB), above
        // the image and its .bss, and not handed out before.
        let ok = unsafe { ALLOCATOR.lock().claim(start as *mut u8, size) };
        if ok.is_some() {
            claimed += size as u64;
        }
    }
    claimed
}

/// Bytes currently allocated (INFO `used_memory`).
pub fn used_bytes() -> u64 {
    ALLOCATOR.lock().counters().allocated_bytes as u64
}
