//! The C memory functions the compiler emits calls to (`memcpy`, `memmove`, `memset`,
//! `memcmp`, `bcmp`). The host target's prebuilt `compiler_builtins` leaves them to libc,
//! which the image does not have. Written with string instructions: a plain Rust loop would be
//! recognised as the idiom and compiled back into a call to itself.

use core::arch::asm;

/// Copies `n` bytes forward (8 at a time, then the tail).
///
/// # Safety
/// `dst` and `src` valid for `n` bytes; regions may overlap only with `dst <= src`.
#[no_mangle]
pub unsafe extern "C" fn memcpy(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    // SAFETY: the caller guarantees both ranges are valid; DF is clear (the ABI requires it).
    unsafe {
        asm!(
            "rep movsq",
            "mov ecx, {tail:e}",
            "rep movsb",
            tail = in(reg) n & 7,
            inout("rcx") n >> 3 => _,
            inout("rdi") dst => _,
            inout("rsi") src => _,
            options(nostack, preserves_flags)
        );
    }
    dst
}

/// Copies `n` bytes between possibly overlapping regions.
///
/// # Safety
/// `dst` and `src` valid for `n` bytes.
#[no_mangle]
pub unsafe extern "C" fn memmove(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    if (dst as usize) <= (src as usize) || (dst as usize) >= (src as usize).wrapping_add(n) {
        // SAFETY: forward copy is correct when dst is below src or the regions are disjoint.
        return unsafe { memcpy(dst, src, n) };
    }
    // SAFETY: backward byte copy from the last byte; DF is set only for this instruction and
    // cleared again before returning, as the ABI requires.
    unsafe {
        asm!(
            "std",
            "rep movsb",
            "cld",
            inout("rcx") n => _,
            inout("rdi") dst.add(n - 1) => _,
            inout("rsi") src.add(n - 1) => _,
            options(nostack)
        );
    }
    dst
}

/// Fills `n` bytes with the low byte of `c`, 8 at a time then the tail (under QEMU TCG each
/// string-instruction iteration costs about the same whatever its width).
///
/// # Safety
/// `dst` valid for `n` bytes.
#[no_mangle]
pub unsafe extern "C" fn memset(dst: *mut u8, c: i32, n: usize) -> *mut u8 {
    // SAFETY: the caller guarantees the range is valid; DF is clear.
    unsafe {
        asm!(
            "rep stosq",
            "mov ecx, {tail:e}",
            "rep stosb",
            tail = in(reg) n & 7,
            inout("rcx") n >> 3 => _,
            inout("rdi") dst => _,
            in("rax") u64::from(c as u8) * 0x0101_0101_0101_0101,
            options(nostack, preserves_flags)
        );
    }
    dst
}

/// Compares `n` bytes; the sign of the first difference (as unsigned bytes), or 0.
///
/// # Safety
/// `a` and `b` valid for `n` bytes.
#[no_mangle]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    if n == 0 {
        return 0;
    }
    let left: usize;
    // SAFETY: the caller guarantees both ranges are valid; `repe cmpsb` stops at the first
    // difference, leaving rsi/rdi one past it.
    let (pa, pb): (*const u8, *const u8);
    unsafe {
        asm!(
            "repe cmpsb",
            inout("rcx") n => left,
            inout("rsi") a => pa,
            inout("rdi") b => pb,
            options(nostack, readonly)
        );
    }
    // SAFETY: both pointers point one past a compared byte inside the ranges.
    let (x, y) = unsafe { (*pa.sub(1), *pb.sub(1)) };
    let _ = left;
    i32::from(x) - i32::from(y)
}

/// Equal (0) or not (non-zero) for `n` bytes.
///
/// # Safety
/// `a` and `b` valid for `n` bytes.
#[no_mangle]
pub unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    // SAFETY: same contract.
    unsafe { memcmp(a, b, n) }
}

/// Referenced by the prebuilt `alloc` (built with unwinding); never called, since the image
/// aborts on panic.
#[no_mangle]
pub extern "C" fn _Unwind_Resume() -> ! {
    crate::exit::fail("_Unwind_Resume called")
}
