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
