//! The global allocator: talc over the RAM the PVH memory map reports above the image, handed
//! to talc a step at a time as the heap grows ([`Grow`]). An allocation that cannot be served
//! stops the VM with a console message (see [`Heap`]); the engine's `maxmemory` (by default
//! derived from the heap, [`default_maxmemory`]) keeps clients' writes from getting there.

use crate::pvh::Region;
use core::alloc::{GlobalAlloc, Layout};
use core::ptr::NonNull;
use spinning_top::RawSpinlock;
use talc::base::binning::Binning;
use talc::base::Talc;
use talc::source::Source;
use talc::TalcLock;

/// talc, behind a check that turns a failed allocation into a clear stop.
struct Heap(TalcLock<RawSpinlock, Grow>);

#[global_allocator]
static ALLOCATOR: Heap = Heap(TalcLock::new(Grow::EMPTY));

/// Most RAM ranges the heap takes from the memory map.
const RANGES_MAX: usize = 8;

/// Bytes added to the heap at a time (more when one allocation needs more).
const GROW_STEP: usize = 2 << 20;

/// talc's memory source: the RAM ranges of the memory map not yet in the heap, handed over
/// [`GROW_STEP`] at a time when talc runs out. Claiming all RAM at boot would write talc's
/// boundary tag at the top of it: memory the boot never uses, touched anyway (under QEMU
/// that is a host page fault, and with transparent huge pages a 2 MiB one, which took 0.3
/// to 15 ms on the development host). Growing keeps what the boot touches next to the image.
#[derive(Debug)]
struct Grow {
    /// RAM ranges (start, end), lowest first.
    ranges: [(usize, usize); RANGES_MAX],
    /// Ranges in `ranges`.
    count: usize,
    /// The range being handed over.
    current: usize,
    /// How far the current range is in the heap (its start when nothing is yet).
    claimed_to: usize,
    /// talc's end of the heap over the current range (0 before its first claim).
    heap_end: usize,
}

impl Grow {
    /// No memory: `init` fills the ranges in.
    const EMPTY: Grow = Grow {
        ranges: [(0, 0); RANGES_MAX],
        count: 0,
        current: 0,
        claimed_to: 0,
        heap_end: 0,
    };
}

// SAFETY: `acquire` only claims or extends through the `talc` it is given, over RAM ranges
// of the memory map that nothing else uses (see `init`), and allocates nothing.
unsafe impl Source for Grow {
    fn acquire<B: Binning>(talc: &mut Talc<Self, B>, layout: Layout) -> Result<(), ()> {
        // Room for the block at any alignment plus talc's tags.
        let need = layout
            .size()
            .saturating_add(layout.align())
            .saturating_add(256);
        let step = need.max(GROW_STEP).next_multiple_of(4096);
        loop {
            let g = &talc.source;
            if g.current >= g.count {
                return Err(());
            }
            let (start, end) = g.ranges[g.current];
            let (claimed_to, heap_end) = (g.claimed_to.max(start), g.heap_end);
            if end - claimed_to < 64 {
                let g = &mut talc.source;
                g.current += 1;
                g.heap_end = 0;
                g.claimed_to = 0;
                continue;
            }
            let top = end.min(claimed_to.saturating_add(step));
            let new_end = match NonNull::new(heap_end as *mut u8) {
                // SAFETY: [start, top) is RAM of the memory map above the image, not in the heap.
                None => unsafe { talc.claim(start as *mut u8, top - start) },
                // SAFETY: `h` is this heap's end as talc last returned it; up to `top` is
                // RAM of the same range, not in the heap.
                Some(h) => Some(unsafe { talc.extend(h, top as *mut u8) }),
            };
            let g = &mut talc.source;
            g.claimed_to = top;
            match new_end {
                Some(e) => {
                    g.heap_end = e.as_ptr() as usize;
                    return Ok(());
                }
                // Too small a range for talc's metadata: the next one.
                None => {
                    g.current += 1;
                    g.heap_end = 0;
                    g.claimed_to = 0;
                }
            }
        }
    }
}

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

/// Gives the allocator every RAM range (or part of one) above the end of the image, to take a
/// step at a time, and returns their bytes. Memory below 1 MiB and the image itself are left
/// alone (the boot loader's start info and command line live low).
pub fn init(ram: &[Region]) -> u64 {
    let image_end = core::ptr::addr_of!(__image_end) as u64;
    let mut total = 0;
    let mut talc = ALLOCATOR.0.lock();
    let g = &mut talc.source;
    for r in ram {
        let start = r.start.max(image_end);
        let end = r.end.min(MAPPED_END);
        if end <= start || end - start < 64 * 1024 || g.count == RANGES_MAX {
            continue;
        }
        g.ranges[g.count] = (start as usize, end as usize);
        g.count += 1;
        total += end - start;
    }
    HEAP_BYTES.store(total, core::sync::atomic::Ordering::Relaxed);
    total
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
