//! A server that dies of a fatal signal leaves a bug report in its log first (Redis's
//! "crashed by signal" report, which operators and Redis's `integration/logging` unit look for).

use std::time::{Duration, Instant};

use kayvee_tests::{target_is_unikernel, Server};

#[test]
fn sigabrt_leaves_a_crash_report() {
    if target_is_unikernel() {
        return;
    }
    let Some(server) = Server::kayvee(&[]) else {
        return;
    };
    let status = std::process::Command::new("kill")
        .args(["-ABRT", &server.pid().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = server.log_text();
        if log.contains("crashed by signal: 6") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no crash report in:\n{}",
            server.log_tail()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn debug_segfault_crashes_with_a_report() {
    if target_is_unikernel() {
        return;
    }
    let Some(server) = Server::kayvee(&["--enable-debug-command", "yes"]) else {
        return;
    };
    let mut c = server.conn();
    // No reply: the server dies.
    assert!(c.cmd(&[b"DEBUG", b"SEGFAULT"]).is_err());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = server.log_text();
        if log.contains("crashed by signal: 11") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no crash report in:\n{}",
            server.log_tail()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
