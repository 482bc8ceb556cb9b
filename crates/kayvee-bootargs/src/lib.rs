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
use value::cut;
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
    /// An (S)NTP server to set the wall clock from once the network is up
    /// (`ntp=10.0.2.2` or `ntp=10.0.2.2:1123`; port 123 by default).
    pub ntp: Option<(Ipv4Addr, u16)>,
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
    /// `disk=auto|required|none`: whether the image keeps its data on a virtio-blk disk.
    pub disk: DiskUse,
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

/// Whether the image uses a disk (`disk=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DiskUse {
    /// Use a virtio-blk disk when there is one; without one, persistence is off.
    #[default]
    Auto,
    /// A virtio-blk disk must be there: without one the boot stops with a message.
    Required,
    /// Ignore any disk: persistence off.
    None,
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

/// The image's own keys: `key=value` words whose value is parsed here ([`apply`] handles
/// exactly these); any other key is a Redis directive.
pub const IMAGE_KEYS: &[&str] = &[
    "idle",
    "disk",
    "debug-fault",
    "virtio_mmio.device",
    "ip",
    "gw",
    "ntp",
    "time",
];

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
        "disk" => {
            args.disk = match value {
                "auto" => DiskUse::Auto,
                "required" => DiskUse::Required,
                "none" => DiskUse::None,
                _ => {
                    return Err(alloc::format!(
                        "disk={value}: expected auto, required or none"
                    ))
                }
            }
        }
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
        "ntp" => {
            let (addr, port) = match cut(value, b':') {
                Some((a, p)) => (a, p.parse::<u16>().ok().filter(|&p| p != 0)),
                None => (value, Some(123)),
            };
            match (parse_ipv4(addr), port) {
                (Some(ip), Some(port)) => args.ntp = Some((ip, port)),
                _ => {
                    return Err(alloc::format!(
                        "ntp={value}: expected an IPv4 address and an optional port such as 10.0.2.2:123"
                    ))
                }
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The error text `parse` gives for `line`.
    fn err(line: &str) -> String {
        parse(line).expect_err(line)
    }

    /// The directives `parse` passes through for `line`, as `(&str, &str)` pairs.
    fn directives(args: &Args) -> Vec<(&str, &str)> {
        args.config
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }

    #[test]
    fn the_xtask_line_configures_everything() {
        let a = parse(
            "ip=10.0.2.15/24 gw=10.0.2.2 port=6379 time=1795295281.472909 maxmemory=64mb \
             requirepass=\"a b\" idle=tick",
        )
        .unwrap();
        let ip = a.ip.unwrap();
        assert_eq!(
            (ip.address, ip.prefix_len),
            (Ipv4Addr::new(10, 0, 2, 15), 24)
        );
        assert_eq!(a.gw, Some(Ipv4Addr::new(10, 0, 2, 2)));
        assert_eq!(a.time_us, Some(1_795_295_281_472_909));
        assert_eq!(a.idle, Idle::Tick);
        assert_eq!(a.debug_fault, None);
        assert!(a.virtio_mmio.is_empty() && a.ignored.is_empty());
        assert_eq!(
            directives(&a),
            [
                ("port", "6379"),
                ("maxmemory", "64mb"),
                ("requirepass", "a b")
            ]
        );
    }

    #[test]
    fn an_empty_line_is_all_defaults() {
        for line in ["", "   ", "\t\n"] {
            let a = parse(line).unwrap();
            assert!(a.ip.is_none() && a.gw.is_none() && a.time_us.is_none());
            assert_eq!(a.idle, Idle::Halt);
            assert!(a.config.is_empty() && a.ignored.is_empty() && a.virtio_mmio.is_empty());
        }
    }

    #[test]
    fn directives_pass_through_in_order_with_their_raw_values() {
        let a = parse("save=\"\" appendonly=no requirepass=a=b SAVE=\"900 1\" nosuch=1 port=x")
            .unwrap();
        assert_eq!(
            directives(&a),
            [
                ("save", ""),
                ("appendonly", "no"),
                ("requirepass", "a=b"), // split at the first '='
                ("SAVE", "900 1"),
                ("nosuch", "1"), // unknown names are the engine's to reject
                ("port", "x"),   // and so are bad values
            ]
        );
    }

    #[test]
    fn kernel_keys_are_case_sensitive_and_a_repeat_wins() {
        let a = parse("ip=10.0.0.1/8 ip=10.0.2.15/24 IP=nonsense Idle=poll").unwrap();
        assert_eq!(a.ip.unwrap().address, Ipv4Addr::new(10, 0, 2, 15));
        assert_eq!(a.idle, Idle::Halt);
        assert_eq!(directives(&a), [("IP", "nonsense"), ("Idle", "poll")]);
    }

    #[test]
    fn words_split_on_ascii_blanks() {
        assert_eq!(words(" a=1\tb=2\n\r c=3  ").unwrap(), ["a=1", "b=2", "c=3"]);
        assert_eq!(words("").unwrap(), Vec::<String>::new());
    }

    #[test]
    fn quotes_join_and_may_cover_part_of_a_word() {
        assert_eq!(words("requirepass=\"a b\"").unwrap(), ["requirepass=a b"]);
        assert_eq!(words("\"k=v w\"").unwrap(), ["k=v w"]);
        assert_eq!(words("a\"b c\"d e").unwrap(), ["ab cd", "e"]);
        assert_eq!(words("x=\"\" \"\"").unwrap(), ["x=", ""]);
        assert_eq!(words("x=\"é ü\"").unwrap(), ["x=é ü"]);
        let a = parse("requirepass=\"a b\" masterauth=\"\"").unwrap();
        assert_eq!(directives(&a), [("requirepass", "a b"), ("masterauth", "")]);
    }

    #[test]
    fn an_unbalanced_quote_is_an_error() {
        for line in ["requirepass=\"a b", "\"", "a=\"b\" c=\"", "x=1 \"y=2 z=3"] {
            assert_eq!(err(line), "unbalanced double quote in the command line");
        }
    }

    #[test]
    fn a_word_without_equals_is_an_error() {
        assert_eq!(err("nonsense"), "'nonsense': expected key=value");
        assert_eq!(err("port=1 quiet"), "'quiet': expected key=value");
        assert_eq!(err("\"\""), "'': expected key=value");
        assert_eq!(
            err("virtio_mmio.device"),
            "'virtio_mmio.device': expected key=value"
        );
    }

    #[test]
    fn firecracker_boot_args_are_ignored_not_directives() {
        let a = parse(
            "console=ttyS0 reboot=k panic=1 pci=off nomodule swiotlb=noforce \
             8250.nr_uarts=0 i8042.noaux module.param=x port=7000",
        )
        .unwrap();
        assert_eq!(
            a.ignored,
            [
                "console=ttyS0",
                "reboot=k",
                "panic=1",
                "pci=off",
                "nomodule",
                "swiotlb=noforce",
                "8250.nr_uarts=0",
                "i8042.noaux",
                "module.param=x",
            ]
        );
        assert_eq!(directives(&a), [("port", "7000")]);
    }

    #[test]
    fn virtio_mmio_devices_are_read_in_order() {
        let a = parse("virtio_mmio.device=4K@0xd0000000:5 virtio_mmio.device=512@0xfeb00e00:12:3")
            .unwrap();
        assert_eq!(
            a.virtio_mmio,
            [
                MmioDevice {
                    base: 0xd000_0000,
                    size: 4096,
                    irq: 5
                },
                MmioDevice {
                    base: 0xfeb0_0e00,
                    size: 512,
                    irq: 12
                },
            ]
        );
        assert!(a.ignored.is_empty() && a.config.is_empty());
    }

    #[test]
    fn a_bad_virtio_mmio_device_is_an_error() {
        for v in ["4K", "255@0x1000:5", "4K@0xd0000002:5", "4K@0xd0000000", ""] {
            assert_eq!(
                err(&alloc::format!("virtio_mmio.device={v}")),
                alloc::format!(
                    "virtio_mmio.device={v}: expected SIZE@BASE:IRQ such as 4K@0xd0000000:5"
                )
            );
        }
    }

    #[test]
    fn bad_addresses_are_errors_naming_the_value() {
        for v in [
            "10.0.2.300/24",
            "10.0.2.15",
            "10.0.2.15/33",
            "1.2.3/24",
            "",
            "/24",
        ] {
            assert_eq!(
                err(&alloc::format!("ip={v}")),
                alloc::format!("ip={v}: expected ADDRESS/PREFIX such as 10.0.2.15/24")
            );
        }
        for v in ["256.1.1.1", "1.2.3", "1.2.3.4.5", "10.0.2.2/24", ""] {
            assert_eq!(
                err(&alloc::format!("gw={v}")),
                alloc::format!("gw={v}: expected an IPv4 address such as 10.0.2.2")
            );
        }
    }

    #[test]
    fn a_bad_time_is_an_error() {
        for v in ["soon", "1.1234567", "-1", "", "18446744073709551615"] {
            assert_eq!(
                err(&alloc::format!("time={v}")),
                alloc::format!("time={v}: expected unix seconds such as 1700000000.25")
            );
        }
        assert_eq!(parse("time=0").unwrap().time_us, Some(0));
        assert_eq!(parse("disk=required").unwrap().disk, DiskUse::Required);
        assert_eq!(parse("").unwrap().disk, DiskUse::Auto);
        assert_eq!(
            parse("disk=maybe").unwrap_err(),
            "disk=maybe: expected auto, required or none"
        );
    }

    #[test]
    fn idle_takes_halt_tick_or_poll() {
        for (v, want) in [
            ("halt", Idle::Halt),
            ("tick", Idle::Tick),
            ("poll", Idle::Poll),
        ] {
            assert_eq!(parse(&alloc::format!("idle={v}")).unwrap().idle, want);
        }
        for v in ["", "Poll", "spin", "halt "] {
            let line = alloc::format!("idle=\"{v}\"");
            assert_eq!(
                err(&line),
                alloc::format!("idle={v}: expected halt, tick or poll")
            );
        }
    }

    #[test]
    fn debug_fault_takes_the_five_faults() {
        let all = [
            ("pf", Fault::Page),
            ("ud", Fault::InvalidOpcode),
            ("gp", Fault::GeneralProtection),
            ("stack", Fault::StackOverflow),
            ("oom", Fault::OutOfMemory),
        ];
        for (v, want) in all {
            let a = parse(&alloc::format!("debug-fault={v}")).unwrap();
            assert_eq!(a.debug_fault, Some(want));
        }
        for v in ["", "PF", "de", "segv"] {
            assert_eq!(
                err(&alloc::format!("debug-fault={v}")),
                alloc::format!("debug-fault={v}: expected pf, ud, gp, stack or oom")
            );
        }
    }

    #[test]
    fn the_first_error_stops_the_parse() {
        // A bad kernel key before a bare word: the key's message, not the word's.
        assert_eq!(
            err("idle=never nonsense"),
            "idle=never: expected halt, tick or poll"
        );
        // A bad quote anywhere comes first: the words are split before any is read.
        assert_eq!(
            err("nonsense \""),
            "unbalanced double quote in the command line"
        );
    }

    #[test]
    fn ntp_names_a_server_and_an_optional_port() {
        let a = parse("ntp=10.0.2.2").unwrap();
        assert_eq!(a.ntp, Some((Ipv4Addr::new(10, 0, 2, 2), 123)));
        let a = parse("ntp=192.168.1.1:1123").unwrap();
        assert_eq!(a.ntp, Some((Ipv4Addr::new(192, 168, 1, 1), 1123)));
        assert_eq!(parse("ip=10.0.2.15/24").unwrap().ntp, None);
        for v in [
            "",
            "pool.ntp.org",
            "10.0.2.2:",
            "10.0.2.2:0",
            "10.0.2.2:70000",
            "1.2.3:5",
        ] {
            let e = parse(&alloc::format!("ntp={v}")).unwrap_err();
            assert!(e.starts_with(&alloc::format!("ntp={v}: expected")), "{e}");
        }
    }
}
