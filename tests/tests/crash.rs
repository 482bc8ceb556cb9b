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
        let log = server.log_tail();
        if log.contains("crashed by signal: 6") {
            break;
        }
        assert!(Instant::now() < deadline, "no crash report in:\n{log}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
