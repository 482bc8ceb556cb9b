//! The kernel keys' value syntaxes: IPv4 dotted quads and `ADDRESS/PREFIX`, unix seconds with
//! a fraction, Linux's memory sizes and `virtio_mmio.device=<size>@<base>:<irq>[:<id>]`.
//! Hand-written byte scans (see the crate's doc for why: TCG translation time at boot).

use crate::{Cidr, MmioDevice};
use core::net::Ipv4Addr;

/// Splits `s` at the first `sep` (an ASCII byte): `str::split_once`'s searcher is far more
/// code for TCG to translate at boot than this scan.
pub(crate) fn cut(s: &str, sep: u8) -> Option<(&str, &str)> {
    let i = s.bytes().position(|b| b == sep)?;
    Some((&s[..i], &s[i + 1..]))
}

/// Parses a Linux memory size: decimal or 0x-hex, with an optional K, M or G suffix (either
/// case); `None` if the bytes overflow a `u64`.
fn parse_size(v: &str) -> Option<u64> {
    let (num, shift) = match v.as_bytes().last()? {
        b'K' | b'k' => (&v[..v.len() - 1], 10),
        b'M' | b'm' => (&v[..v.len() - 1], 20),
        b'G' | b'g' => (&v[..v.len() - 1], 30),
        _ => (v, 0),
    };
    parse_int(num)?.checked_mul(1 << shift)
}

/// Parses a decimal or 0x-prefixed hexadecimal integer (core's integer parser, so a leading
/// `+` is accepted).
fn parse_int(v: &str) -> Option<u64> {
    match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
    }
}

/// Parses `<size>@<base>:<irq>[:<id>]` (Linux's `virtio_mmio.device` syntax; the platform
/// device id after a second colon is ignored). The block must be at least 256 bytes (the
/// virtio-mmio registers) and its base 4-byte aligned.
pub fn parse_mmio_device(v: &str) -> Option<MmioDevice> {
    let (size, rest) = cut(v, b'@')?;
    let (base, rest) = cut(rest, b':')?;
    let irq = cut(rest, b':').map_or(rest, |(irq, _)| irq);
    let dev = MmioDevice {
        size: parse_size(size)?,
        base: parse_int(base)?,
        irq: irq.parse().ok()?,
    };
    (dev.size >= 0x100 && dev.base.is_multiple_of(4)).then_some(dev)
}

/// Parses a dotted-quad IPv4 address (`10.0.2.15`) by hand: the general parser is a long code
/// path to translate under TCG for four numbers. Each part is one to three decimal digits, at
/// most 255; leading zeros are decimal (`010.0.2.15` is 10.0.2.15, as Linux's `in_aton` reads
/// it, not octal as `inet_aton` would).
pub fn parse_ipv4(v: &str) -> Option<Ipv4Addr> {
    let mut octets = [0u8; 4];
    let mut rest = Some(v);
    for o in octets.iter_mut() {
        let (p, more) = match cut(rest?, b'.') {
            Some((p, more)) => (p, Some(more)),
            None => (rest?, None),
        };
        rest = more;
        if p.is_empty() || p.len() > 3 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let n = p.bytes().fold(0u16, |n, b| n * 10 + u16::from(b - b'0'));
        *o = u8::try_from(n).ok()?;
    }
    rest.is_none().then(|| Ipv4Addr::from(octets))
}

/// Parses `ADDRESS/PREFIX` (`10.0.2.15/24`): the prefix is one or two decimal digits, at
/// most 32.
pub fn parse_cidr(v: &str) -> Option<Cidr> {
    let (addr, prefix) = cut(v, b'/')?;
    if prefix.is_empty() || prefix.len() > 2 || !prefix.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let prefix_len = prefix.bytes().fold(0u8, |n, b| n * 10 + (b - b'0'));
    let address = parse_ipv4(addr)?;
    (prefix_len <= 32).then_some(Cidr {
        address,
        prefix_len,
    })
}

/// Parses `1700000000` or `1700000000.123456` seconds into microseconds: at most six fraction
/// digits (the clock counts microseconds), `None` on overflow.
pub fn parse_time_us(v: &str) -> Option<u64> {
    let (secs, frac) = cut(v, b'.').unwrap_or((v, ""));
    let secs: u64 = secs.parse().ok()?;
    if frac.len() > 6 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut us = 0u64;
    for i in 0..6 {
        us = us * 10 + frac.as_bytes().get(i).map_or(0, |b| u64::from(b - b'0'));
    }
    secs.checked_mul(1_000_000)?.checked_add(us)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Some(a.b.c.d)` for the expected parse.
    fn ip(a: u8, b: u8, c: u8, d: u8) -> Option<Ipv4Addr> {
        Some(Ipv4Addr::new(a, b, c, d))
    }

    #[test]
    fn cut_splits_at_the_first_separator() {
        assert_eq!(cut("a=b=c", b'='), Some(("a", "b=c")));
        assert_eq!(cut("=x", b'='), Some(("", "x")));
        assert_eq!(cut("x=", b'='), Some(("x", "")));
        assert_eq!(cut("é=ü", b'='), Some(("é", "ü")));
        assert_eq!(cut("abc", b'='), None);
    }

    #[test]
    fn dotted_quads() {
        assert_eq!(parse_ipv4("10.0.2.15"), ip(10, 0, 2, 15));
        assert_eq!(parse_ipv4("0.0.0.0"), ip(0, 0, 0, 0));
        assert_eq!(parse_ipv4("255.255.255.255"), ip(255, 255, 255, 255));
    }

    /// Leading zeros are decimal (Linux's `ip=` reads them so), never octal, and a part is
    /// at most three digits.
    #[test]
    fn leading_zeros_are_decimal() {
        assert_eq!(parse_ipv4("01.2.3.4"), ip(1, 2, 3, 4));
        assert_eq!(parse_ipv4("010.0.2.015"), ip(10, 0, 2, 15));
        assert_eq!(parse_ipv4("000.000.000.000"), ip(0, 0, 0, 0));
        assert_eq!(parse_ipv4("0010.1.1.1"), None);
    }

    #[test]
    fn malformed_quads_are_rejected() {
        for v in [
            "256.1.1.1",
            "1.2.3.256",
            "999.1.1.1",
            "1.2.3",
            "1.2.3.4.5",
            "1..2.3",
            ".1.2.3",
            "1.2.3.",
            "",
            "1.2.3.4 ",
            " 1.2.3.4",
            "+1.2.3.4",
            "1.2.3.-4",
            "a.b.c.d",
            "0x1.2.3.4",
            "1.2.3.٣",
            "10.0.2.15/24",
        ] {
            assert_eq!(parse_ipv4(v), None, "{v:?}");
        }
    }

    #[test]
    fn cidrs() {
        let c = parse_cidr("10.0.2.15/24").unwrap();
        assert_eq!((c.address, c.prefix_len), (Ipv4Addr::new(10, 0, 2, 15), 24));
        assert_eq!(parse_cidr("0.0.0.0/0").unwrap().prefix_len, 0);
        assert_eq!(parse_cidr("1.2.3.4/32").unwrap().prefix_len, 32);
        assert_eq!(parse_cidr("1.2.3.4/07").unwrap().prefix_len, 7);
        for v in [
            "1.2.3.4/33",
            "1.2.3.4/99",
            "1.2.3.4/024",
            "1.2.3.4/",
            "1.2.3.4",
            "1.2.3.4/2a",
            "1.2.3.4/+8",
            "1.2.3.4/24/1",
            "/24",
            "1.2.3.256/24",
        ] {
            assert_eq!(parse_cidr(v), None, "{v:?}");
        }
    }

    #[test]
    fn times_with_up_to_six_fraction_digits() {
        assert_eq!(parse_time_us("1700000000"), Some(1_700_000_000_000_000));
        assert_eq!(parse_time_us("1700000000.25"), Some(1_700_000_000_250_000));
        assert_eq!(
            parse_time_us("1700000000.000001"),
            Some(1_700_000_000_000_001)
        );
        assert_eq!(parse_time_us("1.123456"), Some(1_123_456));
        assert_eq!(parse_time_us("1."), Some(1_000_000));
        assert_eq!(parse_time_us("0"), Some(0));
        // core's integer parser takes a leading '+' on the seconds (kept as it was).
        assert_eq!(parse_time_us("+5"), Some(5_000_000));
        for v in [
            "1.1234567",
            ".5",
            "",
            "1.2.3",
            "1.-5",
            "1.+5",
            "-1",
            "1e9",
            "soon",
        ] {
            assert_eq!(parse_time_us(v), None, "{v:?}");
        }
    }

    #[test]
    fn times_that_overflow_are_rejected() {
        assert_eq!(parse_time_us("18446744073709.551615"), Some(u64::MAX));
        assert_eq!(parse_time_us("18446744073709.551616"), None);
        assert_eq!(parse_time_us("18446744073710"), None);
        assert_eq!(parse_time_us("18446744073709551616"), None);
    }

    #[test]
    fn sizes_and_integers() {
        assert_eq!(parse_size("4K"), Some(4096));
        assert_eq!(parse_size("4k"), Some(4096));
        assert_eq!(parse_size("2M"), Some(2 << 20));
        assert_eq!(parse_size("1g"), Some(1 << 30));
        assert_eq!(parse_size("0x200"), Some(512));
        assert_eq!(parse_size("0x1K"), Some(1024));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("17179869183G"), Some(17_179_869_183 << 30));
        for v in ["", "K", "0x", "4KB", "4 K", "-4K", "17179869184G", "4T"] {
            assert_eq!(parse_size(v), None, "{v:?}");
        }
        assert_eq!(parse_int("0XfF"), Some(255));
        assert_eq!(parse_int("18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_int("18446744073709551616"), None);
    }

    #[test]
    fn mmio_devices() {
        let dev = |size, base, irq| Some(MmioDevice { base, size, irq });
        assert_eq!(
            parse_mmio_device("4K@0xd0000000:5"),
            dev(4096, 0xd000_0000, 5)
        );
        assert_eq!(
            parse_mmio_device("512@0xfeb00e00:12:3"),
            dev(512, 0xfeb0_0e00, 12)
        );
        // The platform id after the second colon is not read, even when empty.
        assert_eq!(parse_mmio_device("0x100@4096:7:"), dev(256, 4096, 7));
        assert_eq!(
            parse_mmio_device("1M@0XD0000000:0"),
            dev(1 << 20, 0xd000_0000, 0)
        );
    }

    #[test]
    fn bad_mmio_devices_are_rejected() {
        for v in [
            "255@0x1000:5",             // smaller than the 256-byte register block
            "4K@0xd0000002:5",          // base not 4-byte aligned
            "4K@0xd0000000",            // no interrupt
            "4K@0xd0000000:",           // empty interrupt
            "4K0xd0000000:5",           // no '@'
            "@0xd0000000:5",            // no size
            "K@0xd0000000:5",           // a suffix without a number
            "4K@:5",                    // no base
            "4K@0xzz:5",                // not hex
            "4K@0xd0000000:-1",         // negative interrupt
            "4K@0xd0000000:x",          // not a number
            "4K@0xd0000000:4294967296", // more than 32 bits
            "17179869184G@0x0:5",       // size overflows 64 bits
            "",
        ] {
            assert_eq!(parse_mmio_device(v), None, "{v:?}");
        }
    }
}
