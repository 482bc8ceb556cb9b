//! The global allocator: talc over the RAM the PVH memory map reports above the image. An
//! allocation that cannot be served stops the VM with a console message (see [`Heap`]); the
//! engine's `maxmemory` (by default derived from the heap, [`default_maxmemory`]) keeps
//! clients' writes from getting there.

use crate::pvh::Region;
use core::alloc::{GlobalAlloc, Layout};
use spinning_top::RawSpinlock;
use talc::source::Manual;
use talc::TalcLock;

/// talc, behind a check that turns a failed allocation into a clear stop.
struct Heap(TalcLock<RawSpinlock, Manual>);

#[global_allocator]
static ALLOCATOR: Heap = Heap(TalcLock::new(Manual));

/// Bytes handed to the allocator at boot.
static HEAP_BYTES: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

// SAFETY: every call is forwarded unchanged to talc's lock, a correct allocator; a null
// result never returns (the VM stops), which callers cannot observe as unsound.
unsafe impl GlobalAlloc for Heap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded under the caller's contract.
        checked(unsafe { self.0.alloc(layout) }, layout.size())
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded under the caller's contract.
        checked(unsafe { self.0.alloc_zeroed(layout) }, layout.size())
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded under the caller's contract.
        unsafe { self.0.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded under the caller's contract.
        checked(unsafe { self.0.realloc(ptr, layout, new_size) }, new_size)
    }
}

/// `ptr`, unless it is null: then the heap is exhausted and the VM stops with a message
/// (rather than a panic that would allocate to format, or an undefined state).
fn checked(ptr: *mut u8, size: usize) -> *mut u8 {
    if ptr.is_null() {
        out_of_memory(size);
    }
    ptr
}

/// Prints what failed and stops with the failure status. Allocates nothing.
fn out_of_memory(size: usize) -> ! {
    crate::serial::abandon_later();
    crate::serial::release();
    crate::println!(
        "kayvee: out of memory: an allocation of {size} bytes failed ({} of {} heap bytes in use); \
         give the VM more RAM (-m) or a lower maxmemory",
        used_bytes(),
        HEAP_BYTES.load(core::sync::atomic::Ordering::Relaxed)
    );
    crate::exit::fail("out of memory")
}

/// The `maxmemory` the image uses when the command line sets none: the heap less an eighth
/// (at least 1 MiB) kept for what the limit does not stop (connection buffers, a command's
/// transient allocations), so clients get `-OOM` errors before the allocator runs dry.
pub fn default_maxmemory(heap_bytes: u64) -> u64 {
    heap_bytes.saturating_sub((heap_bytes / 8).max(1 << 20))
}

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
        let ok = unsafe { ALLOCATOR.0.lock().claim(start as *mut u8, size) };
        if ok.is_some() {
            claimed += size as u64;
        }
    }
    HEAP_BYTES.store(claimed, core::sync::atomic::Ordering::Relaxed);
    claimed
}

/// Bytes of heap not allocated (some may be too fragmented for a large block).
pub fn free_bytes() -> u64 {
    HEAP_BYTES
        .load(core::sync::atomic::Ordering::Relaxed)
        .saturating_sub(used_bytes())
}

/// Bytes currently allocated (INFO `used_memory`).
pub fn used_bytes() -> u64 {
    ALLOCATOR.0.lock().counters().allocated_bytes as u64
}
