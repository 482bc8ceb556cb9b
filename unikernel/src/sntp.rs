//! The wall clock from an NTP server (`ntp=ADDR[:PORT]`), asked once when the network is up:
//! an SNTP client request (RFC 4330, version 4, mode 3) over UDP, the offset from the four
//! timestamps ((T2 - T1) + (T3 - T4)) / 2, which cancels a symmetric network delay, applied
//! to the clock. A few tries a short while apart; without an answer the clock stays on its
//! first source (kvm-clock, the RTC, `time=`), said on the console. Under a hypervisor without
//! kvm-clock's wall time (TCG, Firecracker) this is what makes absolute expiry and TIME exact;
//! `time=` is stale by the VM's start-up.

use crate::net::NetDevice;
use crate::println;
use crate::time::Clock;
use alloc::vec;
use smoltcp::iface::{Interface, SocketSet};
use smoltcp::socket::udp;
use smoltcp::time::Instant;
use smoltcp::wire::{IpAddress, IpEndpoint, Ipv4Address};

/// Seconds from the NTP era (1900) to the unix epoch.
const NTP_UNIX_OFFSET_S: u64 = 2_208_988_800;
/// Tries, and how long each waits for its answer.
const TRIES: u32 = 3;
const WAIT_US: u64 = 300_000;
/// The client's local UDP port.
const LOCAL_PORT: u16 = 40_123;

/// Unix microseconds as an NTP timestamp (seconds since 1900 . 2^-32 fractions).
fn to_ntp(unix_us: u64) -> u64 {
    let s = unix_us / 1_000_000 + NTP_UNIX_OFFSET_S;
    let frac = ((unix_us % 1_000_000) << 32) / 1_000_000;
    (s << 32) | frac
}

/// An NTP timestamp as unix microseconds (0 for one before the epoch).
fn from_ntp(ts: u64) -> u64 {
    let s = (ts >> 32).saturating_sub(NTP_UNIX_OFFSET_S);
    s * 1_000_000 + (((ts & 0xffff_ffff) * 1_000_000) >> 32)
}

fn be64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

/// The clock's offset (us) from a server's answer to the request sent at `t1` (both NTP
/// timestamps), received at unix time `t4_us`; `None` for an answer that is not one to it.
fn offset_from(answer: &[u8], t1: u64, t4_us: u64) -> Option<i64> {
    if answer.len() < 48 || answer[0] & 0x07 != 4 || answer[1] == 0 || be64(&answer[24..]) != t1 {
        return None; // not a server's answer, a kiss-of-death (stratum 0), or not to this request
    }
    let (t2, t3) = (from_ntp(be64(&answer[32..])), from_ntp(be64(&answer[40..])));
    let t1 = from_ntp(t1);
    let d = (t2 as i128 - t1 as i128) + (t3 as i128 - t4_us as i128);
    Some((d / 2) as i64)
}

/// Asks `server` for the time and steps `clock` by the answer's offset.
pub fn sync(
    iface: &mut Interface,
    dev: &mut NetDevice,
    sockets: &mut SocketSet<'_>,
    server: (Ipv4Address, u16),
    clock: &Clock,
) {
    let rx = udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; 4], vec![0u8; 1024]);
    let tx = udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; 4], vec![0u8; 1024]);
    let handle = sockets.add(udp::Socket::new(rx, tx));
    if sockets
        .get_mut::<udp::Socket>(handle)
        .bind(LOCAL_PORT)
        .is_err()
    {
        sockets.remove(handle);
        return;
    }
    let to = IpEndpoint::new(IpAddress::Ipv4(server.0), server.1);
    let mut result = None;
    'tries: for _ in 0..TRIES {
        let mut request = [0u8; 48];
        request[0] = 0x23; // LI 0, version 4, mode 3 (client)
        let t1 = to_ntp(clock.unix_us());
        request[40..48].copy_from_slice(&t1.to_be_bytes());
        if sockets
            .get_mut::<udp::Socket>(handle)
            .send_slice(&request, to)
            .is_err()
        {
            break;
        }
        let deadline = clock.uptime_us() + WAIT_US;
        while clock.uptime_us() < deadline {
            iface.poll(Instant::from_micros(clock.uptime_us() as i64), dev, sockets);
            dev.kick();
            let socket = sockets.get_mut::<udp::Socket>(handle);
            while let Ok((data, _)) = socket.recv() {
                if let Some(offset) = offset_from(data, t1, clock.unix_us()) {
                    result = Some(offset);
                    break 'tries;
                }
            }
        }
    }
    sockets.remove(handle);
    match result {
        Some(offset) => {
            clock.step_wall(offset);
            println!(
                "kayvee: wall clock from the NTP server {}:{}: stepped {:+.3} ms",
                server.0,
                server.1,
                offset as f64 / 1000.0
            );
        }
        None => println!(
            "kayvee: no answer from the NTP server {}:{}: the wall clock stays as it was",
            server.0, server.1
        ),
    }
}
