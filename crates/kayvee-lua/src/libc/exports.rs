//! The `#[no_mangle]` C functions (see the parent module).
#![allow(clippy::missing_safety_doc)]

use super::format::{format_arg, Arg, Spec};
use super::parse::{is_space, strtod as parse_strtod, strtoul as parse_strtoul};
use alloc::alloc::{alloc, dealloc, realloc as grow, Layout};
use core::ffi::{c_char, c_int, c_long, c_uint, c_ulong, c_void};
use core::sync::atomic::{AtomicUsize, Ordering};

/// Where `stdout`/`stderr` writes go (0: nowhere), a `fn(&[u8])`.
static OUTPUT: AtomicUsize = AtomicUsize::new(0);
/// `clock()`'s source (0: always 0), a `fn() -> u64` giving microseconds.
static CLOCK: AtomicUsize = AtomicUsize::new(0);

/// Sends what Lua writes to `stdout`/`stderr` (`print`, the panic message) to `write`.
pub fn set_output(write: fn(&[u8])) {
    OUTPUT.store(write as usize, Ordering::Relaxed);
}

/// Makes `clock()` (`os.clock`) read `micros`, a processor-time (or uptime) clock in
/// microseconds.
pub fn set_clock(micros: fn() -> u64) {
    CLOCK.store(micros as usize, Ordering::Relaxed);
}

// ---- setjmp / longjmp: rbx, rbp, r12-r15, the caller's rsp and the return address.

core::arch::global_asm!(
    ".pushsection .text.kv_setjmp,\"ax\",@progbits",
    ".globl setjmp",
    ".type setjmp,@function",
    "setjmp:",
    "mov [rdi], rbx",
    "mov [rdi + 8], rbp",
    "mov [rdi + 16], r12",
    "mov [rdi + 24], r13",
    "mov [rdi + 32], r14",
    "mov [rdi + 40], r15",
    "lea rdx, [rsp + 8]",
    "mov [rdi + 48], rdx",
    "mov rdx, [rsp]",
    "mov [rdi + 56], rdx",
    "xor eax, eax",
    "ret",
    ".size setjmp, . - setjmp",
    ".globl longjmp",
    ".type longjmp,@function",
    "longjmp:",
    "mov eax, esi",
    "test eax, eax",
    "jnz 2f",
    "inc eax",
    "2:",
    "mov rbx, [rdi]",
    "mov rbp, [rdi + 8]",
    "mov r12, [rdi + 16]",
    "mov r13, [rdi + 24]",
    "mov r14, [rdi + 32]",
    "mov r15, [rdi + 40]",
    "mov rsp, [rdi + 48]",
    "jmp qword ptr [rdi + 56]",
    ".size longjmp, . - longjmp",
    ".popsection",
);

// ---- Allocation: a 16-byte header holding the size, then the block (16-byte aligned).

const HEADER: usize = 16;

#[no_mangle]
pub unsafe extern "C" fn malloc(n: usize) -> *mut c_void {
    let Some(total) = n.checked_add(HEADER) else {
        return core::ptr::null_mut();
    };
    let Ok(layout) = Layout::from_size_align(total, HEADER) else {
        return core::ptr::null_mut();
    };
    // SAFETY: `total` is not zero.
    let base = unsafe { alloc(layout) };
    if base.is_null() {
        return core::ptr::null_mut();
    }
    // SAFETY: the block has room for the header, aligned for a usize.
    unsafe {
        (base as *mut usize).write(n);
        base.add(HEADER) as *mut c_void
    }
}

#[no_mangle]
pub unsafe extern "C" fn calloc(n: usize, size: usize) -> *mut c_void {
    let Some(bytes) = n.checked_mul(size) else {
        return core::ptr::null_mut();
    };
    // SAFETY: plain allocation.
    let p = unsafe { malloc(bytes) };
    if !p.is_null() {
        // SAFETY: `bytes` bytes were just allocated.
        unsafe { core::ptr::write_bytes(p as *mut u8, 0, bytes) };
    }
    p
}

#[no_mangle]
pub unsafe extern "C" fn free(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    // SAFETY: `p` came from `malloc`/`realloc`: its header is just below it.
    unsafe {
        let base = (p as *mut u8).sub(HEADER);
        let n = (base as *const usize).read();
        dealloc(base, Layout::from_size_align_unchecked(n + HEADER, HEADER));
    }
}

#[no_mangle]
pub unsafe extern "C" fn realloc(p: *mut c_void, n: usize) -> *mut c_void {
    if p.is_null() {
        // SAFETY: plain allocation.
        return unsafe { malloc(n) };
    }
    if n == 0 {
        // SAFETY: `p` is a live block (glibc's realloc(p, 0) frees it).
        unsafe { free(p) };
        return core::ptr::null_mut();
    }
    let Some(total) = n.checked_add(HEADER) else {
        return core::ptr::null_mut();
    };
    // SAFETY: `p` came from `malloc`/`realloc`, with the size in its header.
    unsafe {
        let base = (p as *mut u8).sub(HEADER);
        let old = (base as *const usize).read();
        let new = grow(
            base,
            Layout::from_size_align_unchecked(old + HEADER, HEADER),
            total,
        );
        if new.is_null() {
            return core::ptr::null_mut();
        }
        (new as *mut usize).write(n);
        new.add(HEADER) as *mut c_void
    }
}

#[no_mangle]
pub extern "C" fn abort() -> ! {
    panic!("the Lua VM called abort()")
}

#[no_mangle]
pub extern "C" fn exit(status: c_int) -> ! {
    panic!("the Lua VM called exit({status}) (an error outside any protected call)")
}

// ---- ctype, the "C" locale: bytes 128-255 and EOF are in no class.

fn byte(c: c_int) -> Option<u8> {
    u8::try_from(c).ok().filter(|b| b.is_ascii())
}

#[no_mangle]
pub extern "C" fn isalnum(c: c_int) -> c_int {
    byte(c).is_some_and(|b| b.is_ascii_alphanumeric()) as c_int
}
#[no_mangle]
pub extern "C" fn isalpha(c: c_int) -> c_int {
    byte(c).is_some_and(|b| b.is_ascii_alphabetic()) as c_int
}
#[no_mangle]
pub extern "C" fn iscntrl(c: c_int) -> c_int {
    byte(c).is_some_and(|b| b.is_ascii_control()) as c_int
}
#[no_mangle]
pub extern "C" fn isdigit(c: c_int) -> c_int {
    byte(c).is_some_and(|b| b.is_ascii_digit()) as c_int
}
#[no_mangle]
pub extern "C" fn isgraph(c: c_int) -> c_int {
    byte(c).is_some_and(|b| b.is_ascii_graphic()) as c_int
}
#[no_mangle]
pub extern "C" fn islower(c: c_int) -> c_int {
    byte(c).is_some_and(|b| b.is_ascii_lowercase()) as c_int
}
#[no_mangle]
pub extern "C" fn isprint(c: c_int) -> c_int {
    byte(c).is_some_and(|b| b == b' ' || b.is_ascii_graphic()) as c_int
}
#[no_mangle]
pub extern "C" fn ispunct(c: c_int) -> c_int {
    byte(c).is_some_and(|b| b.is_ascii_punctuation()) as c_int
}
#[no_mangle]
pub extern "C" fn isspace(c: c_int) -> c_int {
    byte(c).is_some_and(is_space) as c_int
}
#[no_mangle]
pub extern "C" fn isupper(c: c_int) -> c_int {
    byte(c).is_some_and(|b| b.is_ascii_uppercase()) as c_int
}
#[no_mangle]
pub extern "C" fn isxdigit(c: c_int) -> c_int {
    byte(c).is_some_and(|b| b.is_ascii_hexdigit()) as c_int
}
#[no_mangle]
pub extern "C" fn tolower(c: c_int) -> c_int {
    byte(c).map_or(c, |b| c_int::from(b.to_ascii_lowercase()))
}
#[no_mangle]
pub extern "C" fn toupper(c: c_int) -> c_int {
    byte(c).map_or(c, |b| c_int::from(b.to_ascii_uppercase()))
}

// ---- Strings.

/// The length of a C string. Not `CStr::from_ptr`: `core` implements it by calling `strlen`,
/// which is this library's own.
unsafe fn length(s: *const c_char) -> usize {
    let mut n = 0;
    // SAFETY: the caller passes a NUL-terminated string.
    while unsafe { *s.add(n) } != 0 {
        n += 1;
    }
    n
}

/// The bytes of a C string (without its NUL).
unsafe fn bytes<'a>(s: *const c_char) -> &'a [u8] {
    // SAFETY: the caller passes a NUL-terminated string of that length.
    unsafe { core::slice::from_raw_parts(s as *const u8, length(s)) }
}

#[no_mangle]
pub unsafe extern "C" fn strlen(s: *const c_char) -> usize {
    // SAFETY: a C string.
    unsafe { length(s) }
}

#[no_mangle]
pub unsafe extern "C" fn memchr(s: *const c_void, c: c_int, n: usize) -> *mut c_void {
    // SAFETY: the caller's range.
    let hay = unsafe { core::slice::from_raw_parts(s as *const u8, n) };
    match hay.iter().position(|&b| b == c as u8) {
        // SAFETY: inside the range.
        Some(i) => unsafe { (s as *mut u8).add(i) as *mut c_void },
        None => core::ptr::null_mut(),
    }
}

#[no_mangle]
pub unsafe extern "C" fn strcmp(a: *const c_char, b: *const c_char) -> c_int {
    // SAFETY: C strings.
    let (a, b) = unsafe { (bytes(a), bytes(b)) };
    match a.cmp(b) {
        core::cmp::Ordering::Less => -1,
        core::cmp::Ordering::Equal => 0,
        core::cmp::Ordering::Greater => 1,
    }
}

#[no_mangle]
pub unsafe extern "C" fn strcoll(a: *const c_char, b: *const c_char) -> c_int {
    // SAFETY: C strings; the "C" locale collates by byte.
    unsafe { strcmp(a, b) }
}

#[no_mangle]
pub unsafe extern "C" fn strncmp(a: *const c_char, b: *const c_char, n: usize) -> c_int {
    for i in 0..n {
        // SAFETY: both strings are read up to their NUL or `n` bytes.
        let (x, y) = unsafe { (*a.add(i) as u8, *b.add(i) as u8) };
        if x != y {
            return c_int::from(x) - c_int::from(y);
        }
        if x == 0 {
            break;
        }
    }
    0
}

#[no_mangle]
pub unsafe extern "C" fn strcpy(d: *mut c_char, s: *const c_char) -> *mut c_char {
    // SAFETY: `d` has room for `s` and its NUL.
    unsafe {
        let n = strlen(s);
        core::ptr::copy(s, d, n + 1);
    }
    d
}

#[no_mangle]
pub unsafe extern "C" fn strncpy(d: *mut c_char, s: *const c_char, n: usize) -> *mut c_char {
    let mut i = 0;
    // SAFETY: `d` has `n` bytes; `s` is read up to its NUL.
    unsafe {
        while i < n && *s.add(i) != 0 {
            *d.add(i) = *s.add(i);
            i += 1;
        }
        while i < n {
            *d.add(i) = 0;
            i += 1;
        }
    }
    d
}

#[no_mangle]
pub unsafe extern "C" fn strcat(d: *mut c_char, s: *const c_char) -> *mut c_char {
    // SAFETY: `d` has room for both strings.
    unsafe { strcpy(d.add(strlen(d)), s) };
    d
}

#[no_mangle]
pub unsafe extern "C" fn strncat(d: *mut c_char, s: *const c_char, n: usize) -> *mut c_char {
    // SAFETY: `d` has room for its string, `n` more bytes and a NUL.
    unsafe {
        let end = d.add(strlen(d));
        let mut i = 0;
        while i < n && *s.add(i) != 0 {
            *end.add(i) = *s.add(i);
            i += 1;
        }
        *end.add(i) = 0;
    }
    d
}

#[no_mangle]
pub unsafe extern "C" fn strchr(s: *const c_char, c: c_int) -> *mut c_char {
    let c = c as u8;
    let mut p = s;
    // SAFETY: read up to the NUL, which is itself found for c == 0.
    unsafe {
        loop {
            let b = *p as u8;
            if b == c {
                return p as *mut c_char;
            }
            if b == 0 {
                return core::ptr::null_mut();
            }
            p = p.add(1);
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn strrchr(s: *const c_char, c: c_int) -> *mut c_char {
    // SAFETY: a C string; its NUL is part of it for c == 0.
    let all = unsafe { core::slice::from_raw_parts(s as *const u8, length(s) + 1) };
    match all.iter().rposition(|&b| b == c as u8) {
        // SAFETY: inside the string.
        Some(i) => unsafe { s.add(i) as *mut c_char },
        None => core::ptr::null_mut(),
    }
}

#[no_mangle]
pub unsafe extern "C" fn strstr(h: *const c_char, n: *const c_char) -> *mut c_char {
    // SAFETY: C strings.
    let (hay, needle) = unsafe { (bytes(h), bytes(n)) };
    if needle.is_empty() {
        return h as *mut c_char;
    }
    match hay.windows(needle.len()).position(|w| w == needle) {
        // SAFETY: inside the string.
        Some(i) => unsafe { h.add(i) as *mut c_char },
        None => core::ptr::null_mut(),
    }
}

#[no_mangle]
pub unsafe extern "C" fn strspn(s: *const c_char, accept: *const c_char) -> usize {
    // SAFETY: C strings.
    let (s, set) = unsafe { (bytes(s), bytes(accept)) };
    s.iter().take_while(|b| set.contains(b)).count()
}

#[no_mangle]
pub unsafe extern "C" fn strcspn(s: *const c_char, reject: *const c_char) -> usize {
    // SAFETY: C strings.
    let (s, set) = unsafe { (bytes(s), bytes(reject)) };
    s.iter().take_while(|b| !set.contains(b)).count()
}

#[no_mangle]
pub unsafe extern "C" fn strpbrk(s: *const c_char, accept: *const c_char) -> *mut c_char {
    // SAFETY: C strings.
    let (hay, set) = unsafe { (bytes(s), bytes(accept)) };
    match hay.iter().position(|b| set.contains(b)) {
        // SAFETY: inside the string.
        Some(i) => unsafe { s.add(i) as *mut c_char },
        None => core::ptr::null_mut(),
    }
}

#[no_mangle]
pub extern "C" fn strerror(_e: c_int) -> *const c_char {
    c"I/O error".as_ptr()
}

#[no_mangle]
pub static mut errno: c_int = 0;

fn set_errno_range() {
    // SAFETY: single-threaded C callers; a plain store.
    unsafe { core::ptr::addr_of_mut!(errno).write(34) };
}

// ---- Numbers.

#[no_mangle]
pub unsafe extern "C" fn strtod(s: *const c_char, end: *mut *mut c_char) -> f64 {
    // SAFETY: a C string.
    let (v, used, range) = parse_strtod(unsafe { bytes(s) });
    if range {
        set_errno_range();
    }
    if !end.is_null() {
        // SAFETY: `used` is within the string.
        unsafe { *end = s.add(used) as *mut c_char };
    }
    v
}

#[no_mangle]
pub unsafe extern "C" fn strtoul(s: *const c_char, end: *mut *mut c_char, base: c_int) -> c_ulong {
    // SAFETY: a C string.
    let (v, used, range) = parse_strtoul(unsafe { bytes(s) }, base as u32);
    if range {
        set_errno_range();
    }
    if !end.is_null() {
        // SAFETY: `used` is within the string.
        unsafe { *end = s.add(used) as *mut c_char };
    }
    v as c_ulong
}

#[no_mangle]
pub unsafe extern "C" fn strtol(s: *const c_char, end: *mut *mut c_char, base: c_int) -> c_long {
    // SAFETY: a C string.
    let text = unsafe { bytes(s) };
    let (v, used, range) = parse_strtoul(text, base as u32);
    let negative = text.iter().find(|b| !is_space(**b)) == Some(&b'-');
    if !end.is_null() {
        // SAFETY: `used` is within the string.
        unsafe { *end = s.add(used) as *mut c_char };
    }
    let magnitude = if negative { v.wrapping_neg() } else { v };
    if range || (negative && magnitude > 1 << 63) || (!negative && magnitude > i64::MAX as u64) {
        set_errno_range();
        return if negative { c_long::MIN } else { c_long::MAX };
    }
    if negative {
        (magnitude as i64).wrapping_neg()
    } else {
        magnitude as i64
    }
}

#[no_mangle]
pub extern "C" fn abs(x: c_int) -> c_int {
    x.wrapping_abs()
}

/// `rand`'s state (the engine gives scripts its own `math.random`; this only backs `lmathlib.c`'s
/// replaced one).
static RAND: AtomicUsize = AtomicUsize::new(1);

#[no_mangle]
pub extern "C" fn rand() -> c_int {
    let next = RAND
        .load(Ordering::Relaxed)
        .wrapping_mul(1_103_515_245)
        .wrapping_add(12_345);
    RAND.store(next, Ordering::Relaxed);
    ((next >> 16) & 0x7fff_ffff) as c_int
}

#[no_mangle]
pub extern "C" fn srand(seed: c_uint) {
    RAND.store(seed as usize, Ordering::Relaxed);
}

/// Formats one conversion for `printf.c` (`kv_libc_format_arg` there).
#[no_mangle]
pub unsafe extern "C" fn kv_libc_format_arg(
    out: *mut u8,
    n: usize,
    len: *mut usize,
    sp: *const Spec,
    i: i64,
    u: u64,
    d: f64,
    s: *const c_char,
) {
    // SAFETY: `printf.c` passes its spec and length.
    let (spec, len) = unsafe { (&*sp, &mut *len) };
    let arg = match u8::try_from(spec.conv).unwrap_or(0) {
        b'd' | b'i' | b'c' => Arg::Int(i),
        b'o' | b'u' | b'x' | b'X' | b'p' => Arg::Uint(u),
        b's' if s.is_null() => Arg::Str(None),
        // SAFETY: `%s` is given a C string.
        b's' => Arg::Str(Some(unsafe { bytes(s) })),
        _ => Arg::Float(d),
    };
    format_arg(spec, arg, &mut |chunk: &[u8]| {
        let room = n.saturating_sub(1).saturating_sub(*len).min(chunk.len());
        if room > 0 {
            // SAFETY: `out` has `n` bytes; `*len + room < n`.
            unsafe { core::ptr::copy_nonoverlapping(chunk.as_ptr(), out.add(*len), room) };
        }
        *len += chunk.len();
    });
}

// ---- Math (the `libm` crate).

macro_rules! unary {
    ($($name:ident),*) => {$(
        #[no_mangle]
        pub extern "C" fn $name(x: f64) -> f64 {
            libm::$name(x)
        }
    )*};
}
unary!(acos, asin, atan, ceil, cos, cosh, exp, fabs, floor, log, log10, sin, sinh, sqrt, tan, tanh);

#[no_mangle]
pub extern "C" fn atan2(y: f64, x: f64) -> f64 {
    libm::atan2(y, x)
}
#[no_mangle]
pub extern "C" fn fmod(x: f64, y: f64) -> f64 {
    libm::fmod(x, y)
}
#[no_mangle]
pub extern "C" fn pow(x: f64, y: f64) -> f64 {
    libm::pow(x, y)
}
#[no_mangle]
pub extern "C" fn ldexp(x: f64, e: c_int) -> f64 {
    libm::ldexp(x, e)
}
#[no_mangle]
pub unsafe extern "C" fn frexp(x: f64, e: *mut c_int) -> f64 {
    let (m, exp) = libm::frexp(x);
    // SAFETY: the caller's int.
    unsafe { *e = exp };
    m
}
#[no_mangle]
pub unsafe extern "C" fn modf(x: f64, i: *mut f64) -> f64 {
    let (frac, int) = libm::modf(x);
    // SAFETY: the caller's double.
    unsafe { *i = int };
    frac
}

// ---- Time and locale.

#[no_mangle]
pub extern "C" fn clock() -> c_long {
    let f = CLOCK.load(Ordering::Relaxed);
    if f == 0 {
        return 0;
    }
    // SAFETY: only `set_clock` stores here, a `fn() -> u64`.
    let f: fn() -> u64 = unsafe { core::mem::transmute::<usize, fn() -> u64>(f) };
    f() as c_long
}

#[no_mangle]
pub unsafe extern "C" fn time(t: *mut c_long) -> c_long {
    let now = clock() / 1_000_000;
    if !t.is_null() {
        // SAFETY: the caller's time_t.
        unsafe { *t = now };
    }
    now
}

/// `struct lconv` as `libc/include/locale.h` declares it.
#[repr(C)]
pub struct Lconv {
    decimal_point: *const c_char,
    thousands_sep: *const c_char,
    grouping: *const c_char,
}

// SAFETY: read-only pointers to static strings.
unsafe impl Sync for Lconv {}

static LCONV: Lconv = Lconv {
    decimal_point: c".".as_ptr(),
    thousands_sep: c"".as_ptr(),
    grouping: c"".as_ptr(),
};

#[no_mangle]
pub extern "C" fn localeconv() -> *const Lconv {
    &LCONV
}

// ---- Streams: no files; stdout and stderr write to the host's output.

/// A `FILE *` value (`libc/include/stdio.h`'s `extern FILE *stdout`).
#[repr(transparent)]
pub struct Stream(*const u8);

// SAFETY: an address used only as a token.
unsafe impl Sync for Stream {}

static IN: u8 = 0;
static OUT: u8 = 1;
static ERR: u8 = 2;

#[no_mangle]
pub static stdin: Stream = Stream(&IN);
#[no_mangle]
pub static stdout: Stream = Stream(&OUT);
#[no_mangle]
pub static stderr: Stream = Stream(&ERR);

/// Writes to a stream (`printf.c`'s `fprintf` calls it too).
#[no_mangle]
pub unsafe extern "C" fn kv_libc_write(f: *const u8, p: *const u8, n: usize) {
    let w = OUTPUT.load(Ordering::Relaxed);
    if w == 0 || core::ptr::eq(f, &IN) || p.is_null() {
        return;
    }
    // SAFETY: only `set_output` stores here, a `fn(&[u8])`; `p` has `n` bytes.
    unsafe {
        let w: fn(&[u8]) = core::mem::transmute::<usize, fn(&[u8])>(w);
        w(core::slice::from_raw_parts(p, n));
    }
}

#[no_mangle]
pub unsafe extern "C" fn fputs(s: *const c_char, f: *const u8) -> c_int {
    // SAFETY: a C string.
    unsafe {
        let b = bytes(s);
        kv_libc_write(f, b.as_ptr(), b.len());
    }
    0
}

#[no_mangle]
pub unsafe extern "C" fn fwrite(p: *const c_void, size: usize, n: usize, f: *const u8) -> usize {
    // SAFETY: the caller's buffer of `size * n` bytes.
    unsafe { kv_libc_write(f, p as *const u8, size.saturating_mul(n)) };
    n
}

#[no_mangle]
pub extern "C" fn fflush(_f: *const u8) -> c_int {
    0
}

#[no_mangle]
pub extern "C" fn fopen(_path: *const c_char, _mode: *const c_char) -> *mut c_void {
    set_errno_range();
    core::ptr::null_mut()
}

#[no_mangle]
pub extern "C" fn freopen(
    _path: *const c_char,
    _mode: *const c_char,
    _f: *mut c_void,
) -> *mut c_void {
    core::ptr::null_mut()
}

#[no_mangle]
pub extern "C" fn fclose(_f: *mut c_void) -> c_int {
    0
}

#[no_mangle]
pub extern "C" fn fread(_p: *mut c_void, _size: usize, _n: usize, _f: *mut c_void) -> usize {
    0
}

#[no_mangle]
pub extern "C" fn getc(_f: *mut c_void) -> c_int {
    -1
}

#[no_mangle]
pub extern "C" fn ungetc(c: c_int, _f: *mut c_void) -> c_int {
    c
}

#[no_mangle]
pub extern "C" fn feof(_f: *mut c_void) -> c_int {
    1
}

#[no_mangle]
pub extern "C" fn ferror(_f: *mut c_void) -> c_int {
    0
}
