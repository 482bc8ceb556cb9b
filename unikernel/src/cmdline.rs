//! The kernel command line: `key=value` words separated by spaces (a value may be
//! double-quoted to hold spaces). Kernel keys (`ip`, `gw`, `time`) configure the unikernel;
//! every other key is a Redis configuration directive with its config-file name
//! (`requirepass`, `maxmemory`, `port`, ...). Bad values are errors: the caller prints them
//! and stops, never running half-configured.

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
}

/// Splits the line into words, honouring double quotes around (parts of) a word.
fn words(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                in_word = true;
            }
            c if c.is_ascii_whitespace() && !quoted => {
                if in_word {
                    out.push(core::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if quoted {
        return Err("unbalanced double quote in the command line".into());
    }
    if in_word {
        out.push(cur);
    }
    Ok(out)
}

/// Parses `1700000000` or `1700000000.123456` seconds into microseconds.
fn parse_time_us(v: &str) -> Option<u64> {
    let (secs, frac) = v.split_once('.').unwrap_or((v, ""));
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
        let Some((key, value)) = w.split_once('=') else {
            return Err(alloc::format!("'{w}': expected key=value"));
        };
        match key {
            "ip" => {
                let cidr = value.parse::<Ipv4Cidr>().map_err(|_| {
                    alloc::format!("ip={value}: expected ADDRESS/PREFIX such as 10.0.2.15/24")
                })?;
                args.ip = Some(cidr);
            }
            "gw" => {
                let gw = value.parse::<Ipv4Address>().map_err(|_| {
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
