//! End-to-end shutdown sequence, as in Redis 7.0: a SIGTERM only asks for the shutdown and the
//! cron carries it out, so with the cron paused (DEBUG PAUSE-CRON 1) SHUTDOWN ABORT cancels it
//! and the server stays up; a SIGTERM with the cron running ends the process.

use kayvee_tests::Server;
use std::process::Command;
use std::time::{Duration, Instant};

/// Sends `signal` (a `kill` name such as `TERM`) to process `pid`.
fn send_signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{signal} {pid}");
}

#[test]
fn shutdown_abort_cancels_a_sigterm_the_paused_cron_holds() {
    if kayvee_tests::target_is_unikernel() {
        return; // the signal would reach QEMU, not the server
    }
    let Some(server) = Server::kayvee(&["--enable-debug-command", "yes"]) else {
        return;
    };
    let mut c = server.conn();
    assert_eq!(c.cmd_str(&["DEBUG", "PAUSE-CRON", "1"]), b"+OK\r\n");
    assert_eq!(
        c.cmd_str(&["SHUTDOWN", "ABORT"]),
        b"-ERR No shutdown in progress.\r\n"
    );
    send_signal(server.pid(), "TERM");
    // The signal is asked, not carried out: the server keeps answering meanwhile.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(c.cmd_str(&["PING"]), b"+PONG\r\n", "{}", server.log_tail());
    assert_eq!(c.cmd_str(&["SHUTDOWN", "ABORT"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["DEBUG", "PAUSE-CRON", "0"]), b"+OK\r\n");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(c.cmd_str(&["PING"]), b"+PONG\r\n", "{}", server.log_tail());
    let log = server.log_text();
    assert!(
        log.contains("Received SIGTERM scheduling shutdown..."),
        "{log}"
    );
    assert!(log.contains("Shutdown manually aborted"), "{log}");

    // With the cron running, the next SIGTERM ends the process.
    send_signal(server.pid(), "TERM");
    assert!(
        c.is_closed(Duration::from_secs(10)),
        "{}",
        server.log_tail()
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !server.log_text().contains("ready to exit, bye bye") {
        assert!(Instant::now() < deadline, "{}", server.log_tail());
        std::thread::sleep(Duration::from_millis(20));
    }
}
