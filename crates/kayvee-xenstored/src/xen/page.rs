//! A 4 KiB page shared with another domain (a guest's `xenstore_domain_interface`), read and
//! written only through atomic accesses: the other side may change any byte at any time, so
//! nothing here ever forms a Rust reference to the page's plain bytes.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

/// Bytes in a Xen page.
pub const PAGE_SIZE: usize = 4096;

/// What gives a mapping back when its [`Page`] is dropped (munmap, grant unmap...).
pub type Unmap = Box<dyn FnOnce(NonNull<u8>) + Send>;

/// One mapped page. Every access is bounds-checked against [`PAGE_SIZE`] and atomic, so a
/// guest writing concurrently can make the daemon read garbage but never undefined behaviour.
pub struct Page {
    base: NonNull<u8>,
    unmap: Option<Unmap>,
}

// SAFETY: the page is only ever accessed through atomics, from whichever thread owns it.
unsafe impl Send for Page {}

impl std::fmt::Debug for Page {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Page({:p})", self.base)
    }
}

impl Page {
    /// Wrap a mapping of [`PAGE_SIZE`] bytes at `base`, page-aligned, valid until `unmap`
    /// runs (on drop).
    ///
    /// # Safety
    /// `base` must point to `PAGE_SIZE` readable and writable bytes, 4-byte aligned, that
    /// stay mapped until `unmap` is called with it.
    pub unsafe fn from_raw(base: NonNull<u8>, unmap: Unmap) -> Self {
        Page {
            base,
            unmap: Some(unmap),
        }
    }

    /// A private anonymous page (tests of the ring logic).
    pub fn anonymous() -> std::io::Result<Self> {
        // SAFETY: a fresh anonymous mapping with no file; checked for failure below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                PAGE_SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let base = NonNull::new(p.cast::<u8>()).expect("mmap never returns null on success");
        // SAFETY: the mapping is PAGE_SIZE bytes, page-aligned, ours until munmap.
        Ok(unsafe { Page::from_raw(base, Box::new(munmap)) })
    }

    /// The 32-bit word at byte `off` (4-byte aligned, inside the page).
    fn word(&self, off: usize) -> &AtomicU32 {
        assert!(
            off.is_multiple_of(4) && off + 4 <= PAGE_SIZE,
            "word offset {off}"
        );
        // SAFETY: in bounds and aligned (checked above; the base is page-aligned); the
        // mapping lives as long as `self`; all accesses to shared memory are atomic.
        unsafe { &*self.base.as_ptr().add(off).cast::<AtomicU32>() }
    }

    /// The byte at `off`.
    fn byte(&self, off: usize) -> &AtomicU8 {
        assert!(off < PAGE_SIZE, "byte offset {off}");
        // SAFETY: in bounds (checked above); the mapping lives as long as `self`.
        unsafe { &*self.base.as_ptr().add(off).cast::<AtomicU8>() }
    }

    /// Load the word at `off` with `order`.
    pub fn load(&self, off: usize, order: Ordering) -> u32 {
        self.word(off).load(order)
    }

    /// Store `v` at `off` with `order`.
    pub fn store(&self, off: usize, v: u32, order: Ordering) {
        self.word(off).store(v, order)
    }

    /// The 64-bit word at byte `off` (8-byte aligned, inside the page).
    fn word64(&self, off: usize) -> &AtomicU64 {
        assert!(
            off.is_multiple_of(8) && off + 8 <= PAGE_SIZE,
            "word offset {off}"
        );
        // SAFETY: in bounds and aligned (checked above; the base is page-aligned); the
        // mapping lives as long as `self`; all accesses to shared memory are atomic.
        unsafe { &*self.base.as_ptr().add(off).cast::<AtomicU64>() }
    }

    /// Copy `dst.len()` bytes starting at `off` out of the page: bytes up to an 8-byte
    /// boundary, then whole words, then the tail.
    pub fn read(&self, off: usize, dst: &mut [u8]) {
        let head = off.next_multiple_of(8).saturating_sub(off).min(dst.len());
        for (i, d) in dst[..head].iter_mut().enumerate() {
            *d = self.byte(off + i).load(Ordering::Relaxed);
        }
        let mut at = head;
        while dst.len() - at >= 8 {
            let w = self.word64(off + at).load(Ordering::Relaxed);
            dst[at..at + 8].copy_from_slice(&w.to_ne_bytes());
            at += 8;
        }
        for (i, d) in dst[at..].iter_mut().enumerate() {
            *d = self.byte(off + at + i).load(Ordering::Relaxed);
        }
    }

    /// Copy `src` into the page at `off` (bytes, words, bytes as [`Page::read`]).
    pub fn write(&self, off: usize, src: &[u8]) {
        let head = off.next_multiple_of(8).saturating_sub(off).min(src.len());
        for (i, &b) in src[..head].iter().enumerate() {
            self.byte(off + i).store(b, Ordering::Relaxed);
        }
        let mut at = head;
        while src.len() - at >= 8 {
            let w = u64::from_ne_bytes(src[at..at + 8].try_into().expect("8 bytes"));
            self.word64(off + at).store(w, Ordering::Relaxed);
            at += 8;
        }
        for (i, &b) in src[at..].iter().enumerate() {
            self.byte(off + at + i).store(b, Ordering::Relaxed);
        }
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        if let Some(unmap) = self.unmap.take() {
            unmap(self.base);
        }
    }
}

/// Unmap a page mapped with `mmap`.
pub fn munmap(base: NonNull<u8>) {
    // SAFETY: called once, by the Page that owned this PAGE_SIZE mapping.
    unsafe {
        libc::munmap(base.as_ptr().cast(), PAGE_SIZE);
    }
}

/// Map `PAGE_SIZE` bytes of `fd` at offset 0, shared.
pub fn map_fd(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<Page> {
    use std::os::fd::AsRawFd;
    // SAFETY: a shared mapping of a file we hold open; checked for failure below.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            PAGE_SIZE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    let base = NonNull::new(p.cast::<u8>()).expect("mmap never returns null on success");
    // SAFETY: PAGE_SIZE bytes, page-aligned, ours until munmap.
    Ok(unsafe { Page::from_raw(base, Box::new(munmap)) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_and_bytes_round_trip() {
        let p = Page::anonymous().unwrap();
        p.store(2048, 0xdead_beef, Ordering::Release);
        assert_eq!(p.load(2048, Ordering::Acquire), 0xdead_beef);
        p.write(1020, b"abcdefgh");
        let mut b = [0; 8];
        p.read(1020, &mut b);
        assert_eq!(&b, b"abcdefgh");
        // Every alignment and length across word boundaries.
        let data: Vec<u8> = (0..64).collect();
        for off in 0..16 {
            for len in 0..40 {
                p.write(100 + off, &data[..len]);
                let mut back = vec![0xff; len];
                p.read(100 + off, &mut back);
                assert_eq!(back, &data[..len], "off {off} len {len}");
            }
        }
    }
}
