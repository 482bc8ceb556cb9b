//! The C memory functions the compiler emits calls to (`memcpy`, `memmove`, `memset`,
//! `memcmp`, `bcmp`). The host target's prebuilt `compiler_builtins` leaves them to libc,
//! which the image does not have. Written with string instructions: a plain Rust loop would be
//! recognised as the idiom and compiled back into a call to itself.

use core::arch::asm;

/// Copies `n` bytes forward: 64-byte blocks through four SSE registers (every load of a block
/// before its stores), then 8 bytes at a time, then the tail. Under QEMU TCG each
/// string-instruction iteration costs a trip through the translated loop, so an unrolled
/// block loop moves about eight times as much per trip as `rep movsq`.
///
/// # Safety
/// `dst` and `src` valid for `n` bytes; regions may overlap only with `dst <= src`.
#[no_mangle]
pub unsafe extern "C" fn memcpy(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    // SAFETY: the caller guarantees both ranges are valid; DF is clear (the ABI requires it).
    // SSE is enabled by the boot stub before any Rust runs.
    unsafe {
        asm!(
            "cmp rcx, 64",
            "jb 3f",
            "2:",
            "movups xmm0, [rsi]",
            "movups xmm1, [rsi + 16]",
            "movups xmm2, [rsi + 32]",
            "movups xmm3, [rsi + 48]",
            "movups [rdi], xmm0",
            "movups [rdi + 16], xmm1",
            "movups [rdi + 32], xmm2",
            "movups [rdi + 48], xmm3",
            "add rsi, 64",
            "add rdi, 64",
            "sub rcx, 64",
            "cmp rcx, 64",
            "jae 2b",
            "3:",
            "mov {tail}, rcx",
            "shr rcx, 3",
            "rep movsq",
            "mov ecx, {tail:e}",
            "and ecx, 7",
            "rep movsb",
            tail = out(reg) _,
            inout("rcx") n => _,
            inout("rdi") dst => _,
            inout("rsi") src => _,
            out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _,
            options(nostack)
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

/// Fills `n` bytes with the low byte of `c`: 64-byte blocks of SSE stores, then 8 bytes at a
/// time, then the tail (see [`memcpy`] for why blocks: QEMU TCG).
///
/// # Safety
/// `dst` valid for `n` bytes.
#[no_mangle]
pub unsafe extern "C" fn memset(dst: *mut u8, c: i32, n: usize) -> *mut u8 {
    // SAFETY: the caller guarantees the range is valid; DF is clear; SSE is enabled.
    unsafe {
        asm!(
            "cmp rcx, 64",
            "jb 3f",
            "movq xmm0, rax",
            "punpcklqdq xmm0, xmm0",
            "2:",
            "movups [rdi], xmm0",
            "movups [rdi + 16], xmm0",
            "movups [rdi + 32], xmm0",
            "movups [rdi + 48], xmm0",
            "add rdi, 64",
            "sub rcx, 64",
            "cmp rcx, 64",
            "jae 2b",
            "3:",
            "mov {tail}, rcx",
            "shr rcx, 3",
            "rep stosq",
            "mov ecx, {tail:e}",
            "and ecx, 7",
            "rep stosb",
            tail = out(reg) _,
            inout("rcx") n => _,
            inout("rdi") dst => _,
            in("rax") u64::from(c as u8) * 0x0101_0101_0101_0101,
            out("xmm0") _,
            options(nostack)
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
