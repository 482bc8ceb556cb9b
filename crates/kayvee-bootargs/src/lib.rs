//! The Kayvee unikernel's kernel command line: `key=value` words separated by spaces (a value
//! may be double-quoted to hold spaces). Kernel keys (`ip`, `gw`, `time`, `idle`,
//! `debug-fault`) configure the unikernel; every other key is a Redis configuration directive
//! with its config-file name (`requirepass`, `maxmemory`, `port`, ...), passed through in order
//! for the engine's `Config::apply` to judge. Bad values are errors: the caller prints them and
//! stops, never running half-configured.
//!
//! Hypervisors add words of their own: Firecracker (and QEMU microvm with
//! `auto-kernel-cmdline=on`) name each virtio-mmio device as Linux's
//! `virtio_mmio.device=<size>@<base>:<irq>[:<id>]`, which becomes [`Args::virtio_mmio`];
//! other Linux parameters (a dotted `module.param=...`, or one of [`LINUX_PARAMS`]) are
//! ignored and listed in [`Args::ignored`].
//!
//! The parsing is by hand, on bytes, on purpose: the image runs it at boot, and under QEMU TCG
//! every distinct code path costs its translation time. So no `str::parse::<Ipv4Addr>`, no
//! `split_once` with a str pattern, no UTF-8 decoding loops. The crate is host-testable (the
//! unikernel's own crate builds only for the bare image); [`days_from_civil`], the RTC's date
//! arithmetic, lives here for the same reason.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

mod civil;
mod value;

use alloc::string::String;
use alloc::vec::Vec;
use core::net::Ipv4Addr;

pub use civil::days_from_civil;
pub use value::{parse_cidr, parse_ipv4, parse_mmio_device, parse_time_us};

/// What the command line asks for.
#[derive(Debug, Default)]
pub struct Args {
    /// Static address (`ip=10.0.2.15/24`); DHCP when absent.
    pub ip: Option<Cidr>,
    /// Default gateway (`gw=10.0.2.2`).
    pub gw: Option<Ipv4Addr>,
    /// Unix time at boot in microseconds (`time=1700000000.123`).
    pub time_us: Option<u64>,
    /// Redis directives, in order: name and value.
    pub config: Vec<(String, String)>,
    /// `debug-fault=pf|ud|gp|stack|oom`: raise that CPU exception (or overflow the stack, or
    /// exhaust the heap) right after parsing (tests the exception handlers: the boot must end
    /// with their message and a failure exit).
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

/// An IPv4 address with its prefix length (`10.0.2.15/24`); `prefix_len <= 32`. The unikernel
/// turns it into smoltcp's `Ipv4Cidr` (this crate depends on nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    /// The interface's own address.
    pub address: Ipv4Addr,
    /// Bits of network prefix, 0 to 32.
    pub prefix_len: u8,
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

/// Splits the line into words, honouring double quotes around (parts of) a word
/// (`a"b c"d` is the one word `ab cd`; `""` is an empty word). Works on bytes (quotes and
/// blanks are ASCII, so every cut falls on a character boundary): under TCG every distinct
/// code path costs its translation, and UTF-8 decoding is a long one.
pub fn words(line: &str) -> Result<Vec<String>, String> {
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

/// Whether `word` is a Linux kernel parameter to ignore: a dotted `module.param` (other than
/// `virtio_mmio.device`, which the image reads) or one of [`LINUX_PARAMS`], with or without a
/// value.
fn is_linux_param(word: &str) -> bool {
    let key = value::cut(word, b'=').map_or(word, |(k, _)| k);
    key != "virtio_mmio.device" && (key.bytes().any(|b| b == b'.') || LINUX_PARAMS.contains(&key))
}

/// Parses the whole command line. The error is the message for the console, naming the
/// offending word or value.
pub fn parse(line: &str) -> Result<Args, String> {
    let mut args = Args::default();
    for w in words(line)? {
        if is_linux_param(&w) {
            args.ignored.push(w);
            continue;
        }
        let Some((key, value)) = value::cut(&w, b'=') else {
            return Err(alloc::format!("'{w}': expected key=value"));
        };
        apply(&mut args, key, value)?;
    }
    Ok(args)
}

/// Applies one `key=value` word: a kernel key's value is parsed (an error names it); any other
/// key is a Redis directive, kept in order for the engine to judge.
fn apply(args: &mut Args, key: &str, value: &str) -> Result<(), String> {
    match key {
        "idle" => args.idle = parse_idle(value)?,
        "debug-fault" => args.debug_fault = Some(parse_fault(value)?),
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
    Ok(())
}

/// Parses `idle=`'s value.
fn parse_idle(value: &str) -> Result<Idle, String> {
    match value {
        "poll" => Ok(Idle::Poll),
        "tick" => Ok(Idle::Tick),
        "halt" => Ok(Idle::Halt),
        _ => Err(alloc::format!("idle={value}: expected halt, tick or poll")),
    }
}

/// Parses `debug-fault=`'s value.
fn parse_fault(value: &str) -> Result<Fault, String> {
    match value {
        "pf" => Ok(Fault::Page),
        "ud" => Ok(Fault::InvalidOpcode),
        "gp" => Ok(Fault::GeneralProtection),
        "oom" => Ok(Fault::OutOfMemory),
        "stack" => Ok(Fault::StackOverflow),
        _ => Err(alloc::format!(
            "debug-fault={value}: expected pf, ud, gp, stack or oom"
        )),
    }
}
