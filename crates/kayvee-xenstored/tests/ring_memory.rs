//! A guest that never reads its ring costs the daemon bounded memory. Its own test binary:
//! it measures the process's resident memory, which other tests running alongside would
//! disturb.

mod common;

use std::time::{Duration, Instant};

use common::*;
use kayvee_xenstored::xen::guest::Guest;
use kayvee_xenstored::xen::ring;
use kayvee_xenstored::xen::testxen::TestXen;
use kayvee_xswire::encode;

/// Resident memory of this process, in KiB.
fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = s.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_guest_that_never_reads_costs_bounded_memory() {
    let xen = TestXen::new();
    let sock = start(&xen, &[]);
    let mut d0 = Dom0::connect(&sock);
    let mut lazy = Guest::new(xen.create_domain(4).unwrap());
    let mut good = Guest::new(xen.create_domain(5).unwrap());
    d0.introduce(4);
    d0.introduce(5);
    d0.ok(MKDIR, b"/noise\0");
    d0.ok(SET_PERMS, b"/noise\0r0\0");
    // A watch the guest never reads: dom0 writes 20 MB of events for it.
    let mut w = Vec::new();
    encode(&mut w, WATCH, 0, 0, b"/noise\0t\0");
    lazy.send(&w).unwrap();
    // Then requests until its request queue is full: the daemon stops taking them at the
    // outstanding quota.
    let mut sent = 0;
    let mut req = Vec::new();
    encode(&mut req, READ, 0, 0, b"/noise\0");
    let room = |g: &Guest| {
        let used = ring::pending(g.page(), ring::REQUESTS).unwrap() as usize;
        ring::RING_SIZE as usize - used >= req.len()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if !room(&lazy) {
            std::thread::sleep(Duration::from_millis(50));
            if !room(&lazy) {
                break;
            }
        }
        assert_eq!(
            ring::produce(lazy.page(), ring::REQUESTS, &req).unwrap(),
            req.len()
        );
        lazy.kick();
        sent += 1;
    }
    assert!(sent < 200, "the daemon kept reading requests: {sent}");
    let before = rss_kib();
    // One node rewritten: each event carries its 900-byte path, the store stays small.
    let path = format!("/noise/{}\0", "n".repeat(900));
    for i in 0..20_000 {
        let mut v = path.clone().into_bytes();
        v.extend_from_slice(format!("{}", i % 10).as_bytes());
        d0.ok(WRITE, &v);
    }
    let grown = rss_kib().saturating_sub(before);
    assert!(grown < 10_000, "daemon grew by {grown} KiB");
    // Other guests are served all along.
    gok(&mut good, WRITE, 0, b"ok\0yes");
}
