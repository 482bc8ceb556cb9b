//! The C library the Lua VM links where there is none (feature `freestanding`: the unikernel).
//!
//! `build.rs` then compiles Lua with `-ffreestanding -nostdinc` against the headers in
//! `libc/include/`, and this module defines, `#[no_mangle]`, exactly what those objects call
//! (the link names any missing one): allocation (`malloc` and friends, on Rust's global
//! allocator, for `lauxlib.c`'s unused default allocator), strings and `ctype` in the "C"
//! locale, `strtod`/`strtoul` ([`parse`]), the `printf` family (`libc/printf.c` parses a format,
//! [`format`] formats each conversion exactly as glibc), `setjmp`/`longjmp` (x86-64 assembly),
//! the math functions (the `libm` crate), `clock`, `localeconv`, `abort`/`exit`. There are no
//! files: `fopen` fails, and what Lua writes to `stdout`/`stderr` goes to the output the host
//! installs ([`set_output`]). `memcpy`, `memmove`, `memset`, `memcmp` and `bcmp` are not here:
//! every freestanding Rust binary already supplies them (the unikernel's `arch/mem.rs`).
//!
//! [`format`] and [`parse`] are plain Rust, compiled in every build (the engine's `cjson` formats
//! numbers with [`format::g`]); on the host the tests compare them with glibc's own `snprintf`
//! and `strtod`.

pub mod format;
pub mod parse;

#[cfg(feature = "freestanding")]
mod exports;

#[cfg(feature = "freestanding")]
pub use exports::{set_clock, set_output};

#[cfg(test)]
mod tests;
