//! A global allocator that wraps the system allocator and counts the bytes in use, so INFO can
//! report `used_memory` the way Redis reports its allocator's count.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Bytes currently allocated through [`Counting`].
static ALLOCATED: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, counting: install it with `#[global_allocator]`.
pub struct Counting;

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so the
// `GlobalAlloc` contract holds exactly as it does for `System`; the counters are only
// bookkeeping (relaxed atomics: a total read now and then needs no ordering).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `alloc`'s contract (non-zero size), which we pass on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller guarantees `ptr` came from this allocator with `layout`, and this
        // allocator's blocks are `System`'s blocks.
        unsafe { System.dealloc(ptr, layout) };
        ALLOCATED.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `ptr`/`layout` describe a live block of ours (a
        // `System` block) and that `new_size` is valid for `layout.align()`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            // On failure the old block stays allocated, so the count only moves on success.
            ALLOCATED.fetch_add(new_size, Ordering::Relaxed);
            ALLOCATED.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }
}

/// Bytes currently allocated (what INFO calls `used_memory`).
pub fn allocated_bytes() -> usize {
    ALLOCATED.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Other test threads allocate too (this binary installs `Counting` globally), so compare
    /// with a big block and a tolerance far below its size.
    const BIG: usize = 64 << 20;
    const SLACK: usize = 4 << 20;

    #[test]
    fn counts_a_live_allocation_its_growth_and_its_release() {
        let layout = Layout::from_size_align(BIG, 8).unwrap();
        let before = allocated_bytes();
        // SAFETY: non-zero size; the block is freed below with its final layout.
        let p = unsafe { Counting.alloc(layout) };
        assert!(!p.is_null());
        assert!(allocated_bytes().abs_diff(before + BIG) < SLACK);
        // SAFETY: `p` came from `Counting.alloc(layout)`; new size valid for align 8.
        let p = unsafe { Counting.realloc(p, layout, 2 * BIG) };
        assert!(!p.is_null());
        assert!(allocated_bytes().abs_diff(before + 2 * BIG) < SLACK);
        let grown = Layout::from_size_align(2 * BIG, 8).unwrap();
        // SAFETY: `p` is the live block of `2 * BIG` bytes.
        unsafe { Counting.dealloc(p, grown) };
        assert!(allocated_bytes().abs_diff(before) < SLACK);
    }
}
