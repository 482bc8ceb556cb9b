//! [`format`](super::format) and [`parse`](super::parse) against glibc's own `snprintf`,
//! `strtod` and `strtoul` (the host's C library), on many values.
extern crate std;

use super::format::{format_arg, Arg, Spec};
use super::parse::{strtod as our_strtod, strtoul as our_strtoul};
use core::ffi::{c_char, c_int, c_ulong, CStr};
use std::ffi::CString;
use std::string::String;
use std::vec::Vec;

extern "C" {
    fn snprintf(s: *mut c_char, n: usize, fmt: *const c_char, ...) -> c_int;
    fn strtod(s: *const c_char, end: *mut *mut c_char) -> f64;
    fn strtoul(s: *const c_char, end: *mut *mut c_char, base: c_int) -> c_ulong;
}

/// Parses one conversion ("%-+ #0" flags, width, precision, an optional `l`, the letter).
fn spec(fmt: &str) -> Spec {
    let b = fmt.as_bytes();
    let mut i = 1;
    let mut flags = 0;
    while let Some(f) = b"-+ #0".iter().position(|&c| c == b[i]) {
        flags |= 1 << f;
        i += 1;
    }
    let mut width = 0;
    while b[i].is_ascii_digit() {
        width = width * 10 + i32::from(b[i] - b'0');
        i += 1;
    }
    let mut prec = -1;
    if b[i] == b'.' {
        i += 1;
        prec = 0;
        while b[i].is_ascii_digit() {
            prec = prec * 10 + i32::from(b[i] - b'0');
            i += 1;
        }
    }
    if b[i] == b'l' {
        i += 1;
    }
    Spec {
        flags,
        width,
        prec,
        conv: i32::from(b[i]),
    }
}

fn ours(fmt: &str, arg: Arg<'_>) -> String {
    let mut out = Vec::new();
    format_arg(&spec(fmt), arg, &mut |b: &[u8]| out.extend_from_slice(b));
    String::from_utf8(out).unwrap()
}

fn glibc_f(fmt: &str, v: f64) -> String {
    let f = CString::new(fmt).unwrap();
    let mut buf = [0 as c_char; 2048];
    // SAFETY: a valid format taking one double, a large enough buffer.
    unsafe { snprintf(buf.as_mut_ptr(), buf.len(), f.as_ptr(), v) };
    // SAFETY: snprintf wrote a C string.
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_str()
        .unwrap()
        .into()
}

fn glibc_i(fmt: &str, v: i64) -> String {
    let f = CString::new(fmt).unwrap();
    let mut buf = [0 as c_char; 512];
    // SAFETY: a valid format taking one long (or int for %c), a large enough buffer.
    unsafe { snprintf(buf.as_mut_ptr(), buf.len(), f.as_ptr(), v) };
    // SAFETY: snprintf wrote a C string.
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_str()
        .unwrap()
        .into()
}

/// xorshift64*.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Doubles of every kind: edge cases, random bit patterns, integers, short decimals, ties.
fn doubles(n: usize) -> Vec<f64> {
    let mut v = std::vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        1.5,
        2.5,
        0.125,
        0.1,
        0.2,
        0.3,
        1e15,
        1e16,
        1e17,
        123456789012345.0,
        99999999999999.5,
        999999999999999.0,
        1e23 - 8388608.0,
        1e23,
        1e300,
        1e-300,
        5e-324,
        2.2250738585072014e-308,
        2.225073858507201e-308,
        f64::MAX,
        f64::MIN_POSITIVE,
        f64::EPSILON,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -f64::NAN,
        0.000123456,
        0.0001,
        0.00001,
        1.0 / 3.0,
        2.0 / 3.0,
        3.172_59,
        2.0f64.powi(63),
        2.0f64.powi(64),
        -2.0f64.powi(53),
        9007199254740993.0,
        4.35,
        0.045,
        1.005,
    ];
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    for i in 0..n {
        let x = match i % 5 {
            0 => f64::from_bits(r.next()),
            1 => (r.next() % 2_000_000_000_000) as f64 - 1e12,
            2 => (r.next() % 100_000) as f64 / 10f64.powi((r.next() % 12) as i32),
            3 => (r.next() % 1_000_000) as f64 + 0.5,
            _ => {
                f64::from_bits(r.next() >> 2)
                    * if r.next().is_multiple_of(2) {
                        1.0
                    } else {
                        -1.0
                    }
            }
        };
        v.push(x);
    }
    v
}

#[test]
fn floats_format_as_glibc() {
    let formats = [
        "%.14g", "%.17g", "%g", "%G", "%.0g", "%.1g", "%#g", "%#.3g", "%.20g", "%e", "%E", "%.0e",
        "%#.0e", "%.3e", "%.25e", "%f", "%.0f", "%#.0f", "%.1f", "%.3f", "%.20f", "%.99f", "%+.3e",
        "% f", "%10.4f", "%-12g", "%012.3f", "%+08.2g", "%-+15.6e", "%099.2f",
    ];
    let mut bad = Vec::new();
    for v in doubles(20_000) {
        for f in formats {
            let (a, b) = (ours(f, Arg::Float(v)), glibc_f(f, v));
            if a != b {
                bad.push(std::format!(
                    "{f} of {v:?} ({:#x}): ours {a:?}, glibc {b:?}",
                    v.to_bits()
                ));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{} differences, first: {:#?}",
        bad.len(),
        &bad[..bad.len().min(10)]
    );
}

#[test]
fn integers_chars_strings_and_pointers_format_as_glibc() {
    let mut r = Rng(7);
    let mut values = std::vec![0i64, 1, -1, 7, 8, 9, 10, 255, i64::MAX, i64::MIN, 1 << 31];
    for _ in 0..2000 {
        let x = r.next() as i64;
        values.push(x);
        values.push(x >> (r.next() % 60));
    }
    let signed = [
        "%ld", "%5ld", "%-5ld", "%05ld", "%+ld", "% ld", "%.3ld", "%.0ld", "%+.0ld", "%08.3ld",
    ];
    let unsigned = [
        "%lu", "%lx", "%#lx", "%lX", "%#lX", "%lo", "%#lo", "%#.0lo", "%#5lo", "%08lx", "%#08lx",
        "%.0lx",
    ];
    for &v in &values {
        for f in signed {
            assert_eq!(ours(f, Arg::Int(v)), glibc_i(f, v), "{f} of {v}");
        }
        for f in unsigned {
            assert_eq!(ours(f, Arg::Uint(v as u64)), glibc_i(f, v), "{f} of {v}");
        }
    }
    for f in ["%c", "%5c", "%-5c", "%05c"] {
        assert_eq!(ours(f, Arg::Int(65)), glibc_i(f, 65), "{f}");
    }
    for f in ["%p", "%20p", "%-20p"] {
        for v in [0i64, 0x7fff_1234_5678] {
            assert_eq!(ours(f, Arg::Uint(v as u64)), glibc_i(f, v), "{f} of {v}");
        }
    }
    let s = CString::new("hello world").unwrap();
    for f in ["%s", "%.2s", "%20s", "%-20s", "%.0s", "%5.3s", "%05s"] {
        let fm = CString::new(f).unwrap();
        let mut buf = [0 as c_char; 64];
        // SAFETY: a format taking one string.
        unsafe { snprintf(buf.as_mut_ptr(), 64, fm.as_ptr(), s.as_ptr()) };
        // SAFETY: a C string.
        let g = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap();
        assert_eq!(ours(f, Arg::Str(Some(b"hello world"))), g, "{f}");
    }
}

fn glibc_strtod(s: &str) -> (f64, usize) {
    let c = CString::new(s).unwrap();
    let mut end = core::ptr::null_mut();
    // SAFETY: a C string.
    let v = unsafe { strtod(c.as_ptr(), &mut end) };
    (v, end as usize - c.as_ptr() as usize)
}

#[test]
fn strtod_parses_as_glibc() {
    let mut inputs: Vec<String> = [
        "",
        " ",
        "x",
        "1",
        "-1",
        "+1",
        "  12abc",
        "1.",
        ".5",
        ".",
        "-.",
        "1e",
        "1e+",
        "1e5",
        "1E-5",
        "1e400",
        "-1e400",
        "1e-400",
        "2.4703282292062327e-324",
        "2.4703282292062328e-324",
        "inf",
        "-INF",
        "infinity",
        "Infinityx",
        "infini",
        "nan",
        "NaN(123)",
        "nan(",
        "-nan",
        "0x",
        "0x1",
        "0X1p4",
        "0x1.8",
        "0x.8p1",
        "0xg",
        "0x1p",
        "0x1p-1074",
        "0x1p-1075",
        "0x1.0000000000001p-1075",
        "0x1.fffffffffffff8p0",
        "0x1.fffffffffffff7ffp0",
        "0x1p1024",
        "0x123456789abcdef123",
        "0x0.0000000000001p-1022",
        "1.5 ",
        "\t\n 3",
        "0.1",
        "123456789012345678901234567890",
        "1_000",
        "12e3.5",
    ]
    .iter()
    .map(|s| String::from(*s))
    .collect();
    for v in doubles(5000) {
        for f in ["%.17g", "%.14g", "%a", "%.3e"] {
            inputs.push(glibc_f(f, v));
        }
    }
    for s in &inputs {
        let (a, an, _) = our_strtod(s.as_bytes());
        let (b, bn) = glibc_strtod(s);
        assert_eq!(an, bn, "strtod({s:?}) length");
        assert!(
            a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
            "strtod({s:?}): ours {a:?}, glibc {b:?}"
        );
    }
}

#[test]
fn strtoul_parses_as_glibc() {
    let inputs = [
        "",
        "0",
        "10",
        "-1",
        " +7",
        "ff",
        "0x1f",
        "0X",
        "0x",
        "0xg",
        "z",
        "Zz",
        "777",
        "18446744073709551615",
        "18446744073709551616",
        "99999999999999999999999",
        "12 ",
        "1.5",
        "-0x10",
        "0777",
    ];
    for s in inputs {
        for base in [0, 2, 8, 10, 16, 36] {
            let c = CString::new(s).unwrap();
            let mut end = core::ptr::null_mut();
            // SAFETY: a C string.
            let b = unsafe { strtoul(c.as_ptr(), &mut end, base) };
            let bn = end as usize - c.as_ptr() as usize;
            let (a, an, _) = our_strtoul(s.as_bytes(), base as u32);
            assert_eq!((a, an), (b as u64, bn), "strtoul({s:?}, {base})");
        }
    }
}
