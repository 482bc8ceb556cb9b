//! End-to-end shutdown sequence, as in Redis 7.0: a SIGTERM only asks for the shutdown and the
//! cron carries it out, so with the cron paused (DEBUG PAUSE-CRON 1) SHUTDOWN ABORT cancels it
//! and the server stays up; a SIGTERM with the cron running ends the process. A primary whose
//! replica lags waits in SHUTDOWN until the replica caught up; SHUTDOWN ABORT ends that wait.

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

/// Waits until `done` holds (panics with `what` after 10 s).
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn shutdown_waits_for_a_lagging_replica_to_catch_up() {
    if kayvee_tests::target_is_unikernel() {
        return; // SIGSTOP would reach QEMU, not the server
    }
    let Some(primary) = Server::kayvee(&["--shutdown-timeout", "20"]) else {
        return;
    };
    let port = primary.port().to_string();
    let replica = Server::kayvee(&["--replicaof", "127.0.0.1", &port]).unwrap();
    let mut r = replica.conn();
    wait_until("the replica's sync", || {
        String::from_utf8_lossy(&r.cmd_str(&["INFO", "replication"]))
            .contains("master_link_status:up")
    });
    let mut p = primary.conn();
    assert_eq!(p.cmd_str(&["SET", "k", "1"]), b"+OK\r\n");
    wait_until("the replica's copy", || {
        r.cmd_str(&["GET", "k"]) == b"$1\r\n1\r\n"
    });
    send_signal(replica.pid(), "STOP");
    assert_eq!(p.cmd_str(&["INCR", "k"]), b":2\r\n");
    let mut waiting = primary.conn();
    waiting
        .send(&kayvee_tests::encode_command(&[b"SHUTDOWN"]))
        .unwrap();
    // The primary waits: still up, counting the time left and the blocked client.
    std::thread::sleep(Duration::from_millis(300));
    let left: u64 = p.info_field("server", "shutdown_in_milliseconds");
    assert!(left > 0, "{}", primary.log_tail());
    assert_eq!(p.info_field::<u64>("clients", "blocked_clients"), 1);
    send_signal(replica.pid(), "CONT");
    assert!(
        waiting.is_closed(Duration::from_secs(15)),
        "{}",
        primary.log_tail()
    );
    assert_eq!(r.cmd_str(&["GET", "k"]), b"$1\r\n2\r\n");
    wait_until("the primary's exit", || {
        primary.log_text().contains("bye bye")
    });
    let log = primary.log_text();
    assert!(log.contains("1 of 1 replicas are in sync"), "{log}");
    assert!(!log.contains("Lagging replica"), "{log}");
}

#[test]
fn shutdown_abort_ends_the_wait_for_replicas() {
    if kayvee_tests::target_is_unikernel() {
        return;
    }
    let Some(primary) = Server::kayvee(&[]) else {
        return;
    };
    let port = primary.port().to_string();
    let replica = Server::kayvee(&["--replicaof", "127.0.0.1", &port]).unwrap();
    let mut r = replica.conn();
    wait_until("the replica's sync", || {
        String::from_utf8_lossy(&r.cmd_str(&["INFO", "replication"]))
            .contains("master_link_status:up")
    });
    send_signal(replica.pid(), "STOP");
    let mut p = primary.conn();
    assert_eq!(p.cmd_str(&["INCR", "k"]), b":1\r\n");
    let mut waiting = primary.conn();
    waiting
        .send(&kayvee_tests::encode_command(&[b"SHUTDOWN"]))
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(p.cmd_str(&["SHUTDOWN", "ABORT"]), b"+OK\r\n");
    assert_eq!(
        waiting.read_reply().unwrap(),
        b"-ERR Errors trying to SHUTDOWN. Check logs.\r\n"
    );
    send_signal(replica.pid(), "CONT");
    assert_eq!(p.cmd_str(&["INCR", "k"]), b":2\r\n");
    assert!(primary.log_text().contains("Shutdown manually aborted"));
}
