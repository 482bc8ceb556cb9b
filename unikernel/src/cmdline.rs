//! The kernel command line, parsed by the host-testable `kayvee-bootargs` crate (the syntax,
//! the error texts and their unit and property tests live there: crates/kayvee-bootargs).
//! This module re-exports it under the name the image uses and turns its address into
//! smoltcp's.

pub use kayvee_bootargs::{parse, Args, DiskUse, Fault, Idle, MmioDevice};
use smoltcp::wire::Ipv4Cidr;

/// smoltcp's form of `ip=` (the crate's `prefix_len` is at most 32, which `Ipv4Cidr::new`
/// asserts).
pub fn ipv4_cidr(cidr: kayvee_bootargs::Cidr) -> Ipv4Cidr {
    Ipv4Cidr::new(cidr.address, cidr.prefix_len)
}
