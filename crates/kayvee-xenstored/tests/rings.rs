//! Guests on shared rings, without a hypervisor: the daemon's event loop runs in a thread on
//! the test Xen (memfd pages, eventfd channels), dom0 drives it over the Unix socket as a
//! toolstack does (INTRODUCE, permissions, RELEASE), and guests speak Xenstore through their
//! rings as a guest kernel does.

mod common;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::*;
use kayvee_xenstored::xen::guest::Guest;
use kayvee_xenstored::xen::host::DomainState;
use kayvee_xenstored::xen::ring;
use kayvee_xenstored::xen::testxen::{TestXen, TEST_GFN, TEST_PORT};
use kayvee_xswire::encode;

const RESUME: u32 = 18;
const GET_FEATURE: u32 = 23;
const SET_FEATURE: u32 = 24;

#[test]
fn introduced_guest_uses_its_home_and_is_confined() {
    let xen = TestXen::new();
    let sock = start(&xen, &[]);
    let mut d0 = Dom0::connect(&sock);
    d0.ok(WATCH, b"@introduceDomain\0i\0");
    d0.event("@introduceDomain");
    let mut g = Guest::new(xen.create_domain(5).unwrap());
    d0.introduce(5);
    d0.event("@introduceDomain");
    assert_eq!(d0.ok(IS_INTRODUCED, b"5\0"), b"T\0");
    let features = g.page().load(ring::SERVER_FEATURES, Ordering::Acquire);
    assert_eq!(features, ring::FEATURE_RECONNECTION | ring::FEATURE_ERROR);
    // GET_FEATURE (newer Xen) agrees with the page; features are fixed once introduced.
    assert_eq!(gok(&mut g, GET_FEATURE, 0, b""), b"3\0");
    assert_eq!(d0.ok(GET_FEATURE, b"5\0"), b"3\0");
    assert_eq!(
        d0.req(SET_FEATURE, 0, b"5\x001\0"),
        (ERROR, b"EBUSY\0".to_vec())
    );
    // Relative paths resolve under the guest's home.
    gok(&mut g, WRITE, 0, b"data/x\0hello");
    assert_eq!(d0.ok(READ, b"/local/domain/5/data/x\0"), b"hello");
    assert_eq!(gok(&mut g, READ, 0, b"/local/domain/5/data/x\0"), b"hello");
    // The guest may not read dom0's nodes, write outside its home, or act as dom0.
    d0.ok(WRITE, b"/secret\0s");
    gerr(&mut g, READ, 0, b"/secret\0", "EACCES");
    gerr(&mut g, WRITE, 0, b"/elsewhere\0x", "EACCES");
    gerr(&mut g, INTRODUCE, 0, b"6\x001\x001\0", "EACCES");
    // A watch on a relative path fires with relative paths.
    gok(&mut g, WATCH, 0, b"data\0tok\0");
    assert_eq!(g.event().unwrap().payload, b"data\0tok\0");
    d0.ok(WRITE, b"/local/domain/5/data/y\0v");
    assert_eq!(g.event().unwrap().payload, b"data/y\0tok\0");
    // Payloads longer than one ring (1 KiB) cross the wrap both ways (a guest's node-size
    // quota is 2048).
    let big = vec![b'z'; 1900];
    let mut w = b"data/big\0".to_vec();
    w.extend_from_slice(&big);
    gok(&mut g, WRITE, 0, &w);
    assert_eq!(gok(&mut g, READ, 0, b"data/big\0"), big);
    // Reconnection drops the guest's transactions and watches.
    let tid = gok(&mut g, TX_START, 0, b"\0");
    let tid: u32 = bs(&tid).trim_end_matches('|').parse().unwrap();
    g.reconnect().unwrap();
    gerr(&mut g, TX_END, tid, b"T\0", "ENOENT");
    d0.ok(WRITE, b"/local/domain/5/data/z\0v");
    gok(&mut g, WRITE, 0, b"data/after\0ok");
    assert!(g.events.is_empty());
    // RELEASE: the domain goes, @releaseDomain fires.
    d0.ok(WATCH, b"@releaseDomain\0r\0");
    d0.event("@releaseDomain");
    d0.ok(RELEASE, b"5\0");
    d0.event("@releaseDomain");
    assert_eq!(d0.ok(IS_INTRODUCED, b"5\0"), b"F\0");
}

#[test]
fn many_guests_run_transactions_at_once() {
    const GUESTS: u32 = 128;
    const TXNS: u32 = 20;
    let xen = TestXen::new();
    let sock = start(&xen, &[]);
    let mut d0 = Dom0::connect(&sock);
    let mut guests = Vec::new();
    for d in 1..=GUESTS {
        guests.push((d, Guest::new(xen.create_domain(d).unwrap())));
        d0.introduce(d);
    }
    d0.ok(WRITE, b"/shared\0s");
    d0.ok(SET_PERMS, b"/shared\0r0\0");
    let threads: Vec<_> = guests
        .into_iter()
        .map(|(d, mut g)| {
            std::thread::spawn(move || {
                let mut retries = 0;
                for i in 0..TXNS {
                    loop {
                        let tid = gok(&mut g, TX_START, 0, b"\0");
                        let tid: u32 = bs(&tid).trim_end_matches('|').parse().unwrap();
                        gok(&mut g, READ, tid, b"/shared\0");
                        let v = format!("device/vbd/{i}/state\0{d}-{i}");
                        gok(&mut g, WRITE, tid, v.as_bytes());
                        gok(&mut g, WRITE, tid, format!("count\0{i}").as_bytes());
                        let m = g.request(TX_END, tid, b"T\0").unwrap();
                        if m.header.ty == ERROR {
                            assert_eq!(m.payload, b"EAGAIN\0");
                            retries += 1;
                            continue;
                        }
                        break;
                    }
                }
                assert_eq!(
                    gok(&mut g, READ, 0, b"count\0"),
                    format!("{}", TXNS - 1).as_bytes()
                );
                retries
            })
        })
        .collect();
    let retries: u32 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    // Disjoint writes under each guest's home never conflict under `coalesce`.
    assert_eq!(retries, 0);
    for d in [1, GUESTS / 2, GUESTS] {
        let dir = d0.ok(
            DIRECTORY,
            format!("/local/domain/{d}/device/vbd\0").as_bytes(),
        );
        assert_eq!(dir.iter().filter(|&&c| c == 0).count(), TXNS as usize);
    }
}

#[test]
fn a_guest_breaking_its_ring_is_dropped_and_others_keep_working() {
    let xen = TestXen::new();
    let sock = start(&xen, &["--verbose"]);
    let mut d0 = Dom0::connect(&sock);
    let mut good = Guest::new(xen.create_domain(1).unwrap());
    let mut bad_index = Guest::new(xen.create_domain(2).unwrap());
    let mut too_long = Guest::new(xen.create_domain(3).unwrap());
    for d in 1..=3 {
        d0.introduce(d);
    }
    for g in [&mut good, &mut bad_index, &mut too_long] {
        gok(g, WRITE, 0, b"x\x001");
    }
    // A producer index 5000 bytes ahead of the consumer.
    let cons = bad_index.page().load(ring::REQ_CONS, Ordering::Acquire);
    bad_index
        .page()
        .store(ring::REQ_PROD, cons.wrapping_add(5000), Ordering::Release);
    bad_index.kick();
    // A header announcing a 5000-byte payload.
    let mut w = Vec::new();
    encode(&mut w, WRITE, 0, 0, b"");
    w[12..16].copy_from_slice(&5000u32.to_le_bytes());
    too_long.send(&w).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let error = |g: &Guest| g.page().load(ring::ERROR, Ordering::Acquire);
    while error(&bad_index) == 0 || error(&too_long) == 0 {
        assert!(Instant::now() < deadline, "errors not set");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(error(&bad_index), ring::RingError::RingIdx as u32);
    assert_eq!(error(&too_long), ring::RingError::Proto as u32);
    assert!(bad_index.request(READ, 0, b"x\0").is_err());
    // The others are unaffected.
    assert_eq!(gok(&mut good, READ, 0, b"x\0"), b"1");
    assert_eq!(d0.ok(READ, b"/local/domain/3/x\0"), b"1");
    // A reconnection revives the broken guest.
    bad_index.reconnect().unwrap();
    assert_eq!(error(&bad_index), 0);
    assert_eq!(gok(&mut bad_index, READ, 0, b"x\0"), b"1");
}

#[test]
fn a_dying_guest_loses_its_transactions_and_watches() {
    let xen = TestXen::new();
    let sock = start(&xen, &[]);
    let mut d0 = Dom0::connect(&sock);
    let mut g = Guest::new(xen.create_domain(7).unwrap());
    let _other = Guest::new(xen.create_domain(8).unwrap());
    d0.introduce(7);
    d0.introduce(8);
    d0.ok(WATCH, b"@releaseDomain\0r\0");
    d0.event("@releaseDomain");
    gok(&mut g, WATCH, 0, b"w\0tok\0");
    let tid = gok(&mut g, TX_START, 0, b"\0");
    let tid: u32 = bs(&tid).trim_end_matches('|').parse().unwrap();
    gok(&mut g, WRITE, tid, b"in-tx\0v");
    let report = bs(&d0.ok(CONTROL, b"memreport\0"));
    assert!(
        report.contains("watches: 2\n") && report.contains("transactions: 1\n"),
        "{report}"
    );
    // Shutdown announces @releaseDomain but keeps the domain.
    xen.set_state(7, DomainState::Shutdown);
    d0.event("@releaseDomain");
    assert_eq!(d0.ok(IS_INTRODUCED, b"7\0"), b"T\0");
    // Resumed (the toolstack says RESUME), then shut down again: announced again.
    xen.set_state(7, DomainState::Alive);
    d0.ok(RESUME, b"7\0");
    xen.set_state(7, DomainState::Shutdown);
    d0.event("@releaseDomain");
    // A suspend and resume that Xen never reported as running in between: RESUME alone
    // makes the next shutdown news again.
    d0.ok(RESUME, b"7\0");
    xen.set_state(7, DomainState::Shutdown);
    d0.event("@releaseDomain");
    // Death drops it with its watch and transaction.
    xen.set_state(7, DomainState::Dead);
    d0.event("@releaseDomain");
    assert_eq!(d0.ok(IS_INTRODUCED, b"7\0"), b"F\0");
    assert_eq!(d0.ok(IS_INTRODUCED, b"8\0"), b"T\0");
    let report = bs(&d0.ok(CONTROL, b"memreport\0"));
    assert!(
        report.contains("watches: 1\n") && report.contains("transactions: 0\n"),
        "{report}"
    );
    // The transaction's write never landed.
    let (t, _) = d0.req(READ, 0, b"/local/domain/7/in-tx\0");
    assert_eq!(t, ERROR);
}

#[test]
fn introduce_of_an_unreachable_domain_fails_and_guests_have_quotas() {
    let xen = TestXen::new();
    let sock = start(&xen, &["--transaction", "2", "--entry-nb", "5"]);
    let mut d0 = Dom0::connect(&sock);
    // No such domain in Xen: EINVAL, nothing recorded.
    let (t, p) = d0.req(INTRODUCE, 0, b"9\x00123\x001\0");
    assert_eq!((t, p), (ERROR, b"EINVAL\0".to_vec()));
    assert_eq!(d0.ok(IS_INTRODUCED, b"9\0"), b"F\0");
    // A guest that queued a request before it was introduced is answered once it is.
    let mut g = Guest::new(xen.create_domain(3).unwrap());
    let mut w = Vec::new();
    encode(&mut w, WRITE, 77, 0, b"early\0bird");
    g.send(&w).unwrap();
    d0.introduce(3);
    let m = g.recv().unwrap();
    assert_eq!((m.header.req_id, m.payload), (77, b"OK\0".to_vec()));
    // Its quotas: two transactions, five nodes.
    gok(&mut g, TX_START, 0, b"\0");
    gok(&mut g, TX_START, 0, b"\0");
    gerr(&mut g, TX_START, 0, b"\0", "ENOSPC");
    for i in 0..10 {
        let m = g.request(WRITE, 0, format!("n{i}\0v").as_bytes()).unwrap();
        if m.header.ty == ERROR {
            assert_eq!(m.payload, b"ENOSPC\0");
            assert!(i >= 3, "only {i} nodes");
            return;
        }
    }
    panic!("the node quota never applied");
}

#[test]
fn xenstore_utils_act_as_a_guest_through_its_ring() {
    use std::process::Command;
    if Command::new("xenstore-read")
        .arg("--help")
        .output()
        .is_err()
    {
        assert!(
            std::env::var_os("KAYVEE_REQUIRE_XENSTORE").is_none(),
            "KAYVEE_REQUIRE_XENSTORE is set but xenstore-utils are missing"
        );
        eprintln!("SKIPPED: xenstore-utils not installed");
        return;
    }
    let xen = TestXen::new();
    let sock = start(&xen, &[]);
    let mut d0 = Dom0::connect(&sock);
    let mut g = Guest::new(xen.create_domain(6).unwrap());
    d0.introduce(6);
    d0.ok(WRITE, b"/secret\0s");
    // A socket whose clients are carried over guest 6's ring, one at a time.
    let path = sock.with_file_name("guest6");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    std::thread::spawn(move || {
        for c in listener.incoming() {
            g.proxy(c.unwrap()).unwrap();
        }
    });
    let tool = |name: &str, args: &[&str]| {
        Command::new(name)
            .args(args)
            .env("XENSTORED_PATH", &path)
            .output()
            .unwrap()
    };
    let out = tool("xenstore-write", &["data/x", "hello", "data/y", "two"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(d0.ok(READ, b"/local/domain/6/data/x\0"), b"hello");
    let out = tool("xenstore-read", &["/local/domain/6/data/y"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "two\n");
    let out = tool("xenstore-list", &["data"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "x\ny\n");
    // The guest's identity holds: dom0's node is out of reach.
    let out = tool("xenstore-read", &["/secret"]);
    assert!(!out.status.success());
    let out = tool("xenstore-rm", &["data/x"]);
    assert!(out.status.success(), "{out:?}");
    let (t, _) = d0.req(READ, 0, b"/local/domain/6/data/x\0");
    assert_eq!(t, ERROR);
}

#[test]
fn xen_test_xenstore_passes_as_a_guest_through_its_ring() {
    use std::process::Command;
    let bin = "/usr/lib/xen-4.17/bin/test-xenstore";
    if !std::path::Path::new(bin).exists() {
        assert!(
            std::env::var_os("KAYVEE_REQUIRE_XENSTORE").is_none(),
            "{bin} not installed (apt-get install xen-utils-4.17)"
        );
        eprintln!("SKIPPED: {bin} not installed (xen-utils-4.17)");
        return;
    }
    let xen = TestXen::new();
    // test-xenstore writes 4000-byte values: a guest's default node size (2048) is too small.
    let sock = start(&xen, &["--entry-size", "4096"]);
    let mut d0 = Dom0::connect(&sock);
    let mut g = Guest::new(xen.create_domain(9).unwrap());
    d0.introduce(9);
    let path = sock.with_file_name("guest9");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    std::thread::spawn(move || {
        for c in listener.incoming() {
            g.proxy(c.unwrap()).unwrap();
        }
    });
    let out = Command::new(bin)
        .env("XENSTORED_PATH", &path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // One timing line per test, from `read 1` to `ta err`; it exits 0 only if all passed.
    let timed: Vec<&str> = text.lines().filter(|l| l.ends_with(" ns")).collect();
    assert_eq!(timed.len(), 12, "{text}");
    assert!(
        timed[0].starts_with("read 1") && timed[11].starts_with("ta err"),
        "{text}"
    );
    // It cleans up after itself (its relative test path was under the guest's home).
    let (t, _) = d0.req(DIRECTORY, 0, b"/local/domain/9/xenstore-test\0");
    assert_eq!(t, ERROR);
}

#[test]
fn dom0s_own_ring_is_privileged() {
    let xen = TestXen::new();
    // Dom0's kernel ring exists before the daemon starts, as /proc/xen/xsd_kva does.
    let mut dom0 = Guest::new(xen.create_domain(0).unwrap());
    let sock = start(&xen, &[]);
    let mut g = Guest::new(xen.create_domain(4).unwrap());
    // Through its ring, dom0 writes anywhere and introduces a guest.
    gok(&mut dom0, WRITE, 0, b"/anywhere\0x");
    gok(&mut dom0, MKDIR, 0, b"/local/domain/4\0");
    gok(&mut dom0, SET_PERMS, 0, b"/local/domain/4\0n4\0");
    gok(&mut dom0, WATCH, 0, b"@introduceDomain\0i\0");
    assert_eq!(dom0.event().unwrap().payload, b"@introduceDomain\0i\0");
    let intro = format!("4\0{TEST_GFN}\0{TEST_PORT}\0");
    gok(&mut dom0, INTRODUCE, 0, intro.as_bytes());
    assert_eq!(dom0.event().unwrap().payload, b"@introduceDomain\0i\0");
    gok(&mut g, WRITE, 0, b"x\0from-guest");
    assert_eq!(
        gok(&mut dom0, READ, 0, b"/local/domain/4/x\0"),
        b"from-guest"
    );
    // Its relative paths are dom0's.
    gok(&mut dom0, WRITE, 0, b"mine\0y");
    let mut d0 = Dom0::connect(&sock);
    assert_eq!(d0.ok(READ, b"/local/domain/0/mine\0"), b"y");
}

#[test]
fn a_device_model_acts_for_its_target_after_set_target() {
    const SET_TARGET: u32 = 19;
    let xen = TestXen::new();
    let sock = start(&xen, &[]);
    let mut d0 = Dom0::connect(&sock);
    let mut guest = Guest::new(xen.create_domain(11).unwrap());
    let mut dm = Guest::new(xen.create_domain(12).unwrap());
    d0.introduce(11);
    d0.introduce(12);
    gok(&mut guest, WRITE, 0, b"private\0p");
    gerr(&mut dm, READ, 0, b"/local/domain/11/private\0", "EACCES");
    d0.ok(SET_TARGET, b"12\x0011\0");
    assert_eq!(gok(&mut dm, READ, 0, b"/local/domain/11/private\0"), b"p");
    gok(&mut dm, WRITE, 0, b"/local/domain/11/private\0q");
    assert_eq!(gok(&mut guest, READ, 0, b"private\0"), b"q");
}

/// Wait until `cond` holds (10 s at most).
fn until(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn features_set_before_introduce_are_what_the_guest_gets() {
    let xen = TestXen::new();
    let sock = start(&xen, &[]);
    let mut d0 = Dom0::connect(&sock);
    assert_eq!(d0.ok(GET_FEATURE, b""), b"3\0");
    // A domain Xen does not know has no features to set.
    let enoent = (ERROR, b"ENOENT\0".to_vec());
    assert_eq!(d0.req(SET_FEATURE, 0, b"40\x001\0"), enoent);
    assert_eq!(d0.req(GET_FEATURE, 0, b"40\0"), enoent);
    // ERROR only for domain 2, RECONNECTION only for domain 3, set before INTRODUCE as a
    // toolstack does; bits the daemon lacks are refused.
    let mut g2 = Guest::new(xen.create_domain(2).unwrap());
    let mut g3 = Guest::new(xen.create_domain(3).unwrap());
    assert_eq!(d0.ok(GET_FEATURE, b"2\0"), b"3\0");
    assert_eq!(
        d0.req(SET_FEATURE, 0, b"2\x008\0"),
        (ERROR, b"EINVAL\0".to_vec())
    );
    d0.ok(SET_FEATURE, b"2\x002\0");
    d0.ok(SET_FEATURE, b"3\x001\0");
    assert_eq!(d0.ok(GET_FEATURE, b"2\0"), b"2\0");
    d0.introduce(2);
    d0.introduce(3);
    let features = |g: &Guest| g.page().load(ring::SERVER_FEATURES, Ordering::Acquire);
    assert_eq!((features(&g2), features(&g3)), (2, 1));
    assert_eq!(gok(&mut g2, GET_FEATURE, 0, b""), b"2\0");
    gerr(&mut g2, GET_FEATURE, 0, b"3\0", "EACCES");
    // Without RECONNECTION, connection = 1 means nothing: the daemon leaves the field and
    // the queues alone and keeps serving.
    gok(&mut g2, WRITE, 0, b"x\x001");
    assert_eq!(
        g2.reconnect().unwrap_err().kind(),
        std::io::ErrorKind::Unsupported
    );
    g2.page()
        .store(ring::CONNECTION, ring::RECONNECT, Ordering::SeqCst);
    g2.kick();
    assert_eq!(gok(&mut g2, READ, 0, b"x\0"), b"1");
    assert_eq!(
        g2.page().load(ring::CONNECTION, Ordering::Acquire),
        ring::RECONNECT
    );
    // Without ERROR, a broken ring is dropped silently: no error code, no more answers,
    // until the guest reconnects.
    gok(&mut g3, WRITE, 0, b"y\x001");
    gok(&mut g3, WATCH, 0, b"y\0t\0");
    g3.event().unwrap();
    let watches = |d0: &mut Dom0| {
        let r = bs(&d0.ok(CONTROL, b"memreport\0"));
        r.lines()
            .find(|l| l.starts_with("watches: "))
            .unwrap()
            .to_string()
    };
    assert_eq!(watches(&mut d0), "watches: 1");
    let cons = g3.page().load(ring::REQ_CONS, Ordering::Acquire);
    g3.page()
        .store(ring::REQ_PROD, cons.wrapping_add(5000), Ordering::Release);
    g3.kick();
    // The drop takes the guest's watch with it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while watches(&mut d0) != "watches: 0" {
        assert!(Instant::now() < deadline, "the broken ring was not dropped");
        std::thread::sleep(Duration::from_millis(5));
    }
    g3.page().store(ring::REQ_PROD, cons, Ordering::Release);
    g3.patience(Duration::from_millis(300));
    let lost = g3.request(READ, 0, b"y\0").unwrap_err();
    assert_eq!(lost.kind(), std::io::ErrorKind::TimedOut);
    assert_eq!(g3.page().load(ring::ERROR, Ordering::Acquire), 0);
    g3.patience(kayvee_xenstored::xen::guest::WAIT);
    g3.reconnect().unwrap();
    assert_eq!(gok(&mut g3, READ, 0, b"y\0"), b"1");
    // Once released, a domain's features may be set again for its next introduction.
    d0.ok(RELEASE, b"2\0");
    d0.ok(SET_FEATURE, b"2\x003\0");
    // Features preset for a domain that dies before its introduction are forgotten (the
    // death of domain 3, announced after, shows the daemon has looked).
    let _g7 = Guest::new(xen.create_domain(7).unwrap());
    d0.ok(SET_FEATURE, b"7\x001\0");
    assert_eq!(d0.ok(GET_FEATURE, b"7\0"), b"1\0");
    d0.ok(WATCH, b"@releaseDomain\0r\0");
    d0.event("@releaseDomain");
    xen.set_state(7, DomainState::Dead);
    xen.set_state(3, DomainState::Dead);
    d0.event("@releaseDomain");
    assert_eq!(d0.req(GET_FEATURE, 0, b"7\0"), enoent);
}

#[test]
fn a_guest_waiting_for_the_daemon_before_introduce_is_connected() {
    // A guest that came up before the daemon (or that Xen built so) sets connection = 1
    // and waits; INTRODUCE empties its queues and sets connection = 0 before serving it.
    let xen = TestXen::new();
    let sock = start(&xen, &[]);
    let mut d0 = Dom0::connect(&sock);
    let mut g = Guest::new(xen.create_domain(6).unwrap());
    // Half a request left from before, which must not be taken as the start of the next.
    ring::produce(g.page(), ring::REQUESTS, b"\x02\0\0\0garbage").unwrap();
    g.page().store(ring::ERROR, 3, Ordering::SeqCst);
    g.page()
        .store(ring::CONNECTION, ring::RECONNECT, Ordering::SeqCst);
    d0.introduce(6);
    until("connection = 0 after INTRODUCE", || {
        g.page().load(ring::CONNECTION, Ordering::Acquire) == ring::CONNECTED
    });
    assert_eq!(g.page().load(ring::ERROR, Ordering::Acquire), 0);
    assert_eq!(ring::pending(g.page(), ring::REQUESTS), Some(0));
    gok(&mut g, WRITE, 0, b"up\0yes");
    assert_eq!(d0.ok(READ, b"/local/domain/6/up\0"), b"yes");
    // After INTRODUCE the same request is a reconnection: the session starts again.
    gok(&mut g, WATCH, 0, b"up\0t\0");
    assert_eq!(g.event().unwrap().payload, b"up\0t\0");
    g.reconnect().unwrap();
    d0.ok(WRITE, b"/local/domain/6/up\0again");
    assert_eq!(gok(&mut g, READ, 0, b"up\0"), b"again");
    assert!(g.events.is_empty(), "the watch survived the reconnection");
}
