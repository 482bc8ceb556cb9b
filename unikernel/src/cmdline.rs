//! The kernel command line: `key=value` words separated by spaces (a value may be
//! double-quoted to hold spaces). Kernel keys (`ip`, `gw`, `time`) configure the unikernel;
//! every other key is a Redis configuration directive with its config-file name
//! (`requirepass`, `maxmemory`, `port`, ...). Bad values are errors: the caller prints them
//! and stops, never running half-configured.
//!
//! Hypervisors add words of their own: Firecracker (and QEMU microvm with
//! `auto-kernel-cmdline=on`) name each virtio-mmio device as Linux's
//! `virtio_mmio.device=<size>@<base>:<irq>[:<id>]`, which becomes [`Args::virtio_mmio`];
//! other Linux parameters (a dotted `module.param=...`, or one of [`LINUX_PARAMS`]) are
//! ignored and listed in [`Args::ignored`].

use alloc::string::String;
use alloc::vec::Vec;
use smoltcp::wire::{Ipv4Address, Ipv4Cidr};

/// What the command line asks for.
#[derive(Debug, Default)]
pub struct Args {
    /// Static address (`ip=10.0.2.15/24`); DHCP when absent.
    pub ip: Option<Ipv4Cidr>,
    /// Default gateway (`gw=10.0.2.2`).
    pub gw: Option<Ipv4Address>,
    /// Unix time at boot in microseconds (`time=1700000000.123`).
    pub time_us: Option<u64>,
    /// Redis directives, in order: name and value.
    pub config: Vec<(String, String)>,
    /// `debug-fault=pf|ud|gp|stack|oom`: raise that CPU exception (or overflow the stack, or exhaust the heap) right after parsing (tests the
    /// exception handlers: the boot must end with their message and a failure exit).
    pub debug_fault: Option<Fault>,
    /// `idle=halt` (the default): after a quiet spell the loop halts until the NIC's
    /// interrupt or its next timer; `idle=tick`: halts in 500 us timer ticks only, the NIC
    /// polled (what q35 always does); `idle=poll`: never `hlt` (lowest latency, a busy host
    /// core).
    pub idle: Idle,
    /// virtio-mmio devices named on the command line (Firecracker), in order.
    pub virtio_mmio: Vec<MmioDevice>,
    /// Linux kernel parameters seen and ignored.
    pub ignored: Vec<String>,
}

/// A CPU exception `debug-fault=` raises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// A page fault: a read above the 4 GiB the image maps.
    Page,
    /// An invalid opcode (`ud2`).
    InvalidOpcode,
    /// A general protection fault: a read at a non-canonical address.
    GeneralProtection,
    /// A stack overflow: unbounded recursion into the guard page below the stack.
    StackOverflow,
    /// Heap exhaustion: 1 MiB blocks allocated until one fails (tests the allocator's stop).
    OutOfMemory,
}

/// What the loop does once idle (`idle=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Idle {
    /// Halt until the NIC interrupts or the next deadline (timer ticks where the NIC's
    /// interrupt is not wired).
    #[default]
    Halt,
    /// Halt in timer ticks only; the NIC is polled after each.
    Tick,
    /// Never halt.
    Poll,
}

/// A virtio-mmio device from `virtio_mmio.device=<size>@<base>:<irq>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MmioDevice {
    /// Physical address of its register block.
    pub base: u64,
    /// Bytes of the register block.
    pub size: u64,
    /// Its interrupt line: a GSI (`arch::ioapic` routes it to end the idle `hlt`).
    pub irq: u32,
}

/// Linux kernel parameters without a dot that Firecracker's documented `boot_args` carry;
/// the image ignores them rather than taking them for Redis directives.
pub const LINUX_PARAMS: &[&str] = &["console", "reboot", "panic", "pci", "nomodule", "swiotlb"];

/// Splits `s` at the first `sep` (an ASCII byte): `str::split_once`'s searcher is far more
/// code for TCG to translate at boot than this scan.
fn cut(s: &str, sep: u8) -> Option<(&str, &str)> {
    let i = s.bytes().position(|b| b == sep)?;
    Some((&s[..i], &s[i + 1..]))
}

/// Parses a Linux memory size: decimal or 0x-hex, with an optional K, M or G suffix.
fn parse_size(v: &str) -> Option<u64> {
    let (num, shift) = match v.as_bytes().last()? {
        b'K' | b'k' => (&v[..v.len() - 1], 10),
        b'M' | b'm' => (&v[..v.len() - 1], 20),
        b'G' | b'g' => (&v[..v.len() - 1], 30),
        _ => (v, 0),
    };
    parse_int(num)?.checked_mul(1 << shift)
}

/// Parses a decimal or 0x-prefixed hexadecimal integer.
fn parse_int(v: &str) -> Option<u64> {
    match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
    }
}

/// Parses `<size>@<base>:<irq>[:<id>]` (Linux's `virtio_mmio.device` syntax).
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

/// Splits the line into words, honouring double quotes around (parts of) a word. Works on
/// bytes (quotes and blanks are ASCII, so every cut falls on a character boundary): under TCG
/// every distinct code path costs its translation, and UTF-8 decoding is a long one.
fn words(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quoted = false;
    let mut piece = 0; // start of the unquoted run not yet copied into `cur`
    for (i, &b) in line.as_bytes().iter().enumerate() {
        if b == b'"' {
            cur.push_str(&line[piece..i]);
            piece = i + 1;
            quoted = !quoted;
            in_word = true;
        } else if b.is_ascii_whitespace() && !quoted {
            cur.push_str(&line[piece..i]);
            piece = i + 1;
            if in_word {
                out.push(core::mem::take(&mut cur));
                in_word = false;
            }
        } else {
            in_word = true;
        }
    }
    if quoted {
        return Err("unbalanced double quote in the command line".into());
    }
    cur.push_str(&line[piece..]);
    if in_word {
        out.push(cur);
    }
    Ok(out)
}

/// Parses a dotted-quad IPv4 address (`10.0.2.15`) by hand: smoltcp's general parser is a
/// long code path to translate under TCG for four numbers.
fn parse_ipv4(v: &str) -> Option<Ipv4Address> {
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
    rest.is_none().then(|| Ipv4Address::from(octets))
}

/// Parses `ADDRESS/PREFIX` (`10.0.2.15/24`).
fn parse_cidr(v: &str) -> Option<Ipv4Cidr> {
    let (addr, prefix) = cut(v, b'/')?;
    if prefix.is_empty() || prefix.len() > 2 || !prefix.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let prefix = prefix.bytes().fold(0u8, |n, b| n * 10 + (b - b'0'));
    let addr = parse_ipv4(addr)?;
    (prefix <= 32).then(|| Ipv4Cidr::new(addr, prefix))
}

/// Parses `1700000000` or `1700000000.123456` seconds into microseconds.
fn parse_time_us(v: &str) -> Option<u64> {
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

/// Parses the whole command line.
pub fn parse(line: &str) -> Result<Args, String> {
    let mut args = Args::default();
    for w in words(line)? {
        let key = cut(&w, b'=').map_or(w.as_str(), |(k, _)| k);
        if key != "virtio_mmio.device"
            && (key.bytes().any(|b| b == b'.') || LINUX_PARAMS.contains(&key))
        {
            args.ignored.push(w);
            continue;
        }
        let Some((key, value)) = cut(&w, b'=') else {
            return Err(alloc::format!("'{w}': expected key=value"));
        };
        match key {
            "idle" => {
                args.idle = match value {
                    "poll" => Idle::Poll,
                    "tick" => Idle::Tick,
                    "halt" => Idle::Halt,
                    _ => return Err(alloc::format!("idle={value}: expected halt, tick or poll")),
                };
            }
            "debug-fault" => {
                args.debug_fault = Some(match value {
                    "pf" => Fault::Page,
                    "ud" => Fault::InvalidOpcode,
                    "gp" => Fault::GeneralProtection,
                    "oom" => Fault::OutOfMemory,
                    "stack" => Fault::StackOverflow,
                    _ => {
                        return Err(alloc::format!(
                            "debug-fault={value}: expected pf, ud, gp, stack or oom"
                        ))
                    }
                });
            }
            "virtio_mmio.device" => {
                let dev = parse_mmio_device(value).ok_or_else(|| {
                    alloc::format!(
                        "virtio_mmio.device={value}: expected SIZE@BASE:IRQ such as 4K@0xd0000000:5"
                    )
                })?;
                args.virtio_mmio.push(dev);
            }
            "ip" => {
                let cidr = parse_cidr(value).ok_or_else(|| {
                    alloc::format!("ip={value}: expected ADDRESS/PREFIX such as 10.0.2.15/24")
                })?;
                args.ip = Some(cidr);
            }
            "gw" => {
                let gw = parse_ipv4(value).ok_or_else(|| {
                    alloc::format!("gw={value}: expected an IPv4 address such as 10.0.2.2")
                })?;
                args.gw = Some(gw);
            }
            "time" => {
                let t = parse_time_us(value).ok_or_else(|| {
                    alloc::format!("time={value}: expected unix seconds such as 1700000000.25")
                })?;
                args.time_us = Some(t);
            }
            _ => args.config.push((key.into(), value.into())),
        }
    }
    Ok(args)
}
