//! ACL and protected mode end to end, against kayvee-server and (where the behaviour is
//! compared) redis-server 7.0.15: protected mode refusing a client that connects from a
//! non-loopback address of this machine, the ACL file (startup, ACL LOAD, ACL SAVE), and the
//! clients Redis disconnects when users change.

use kayvee_tests::{kayvee_bin, show, Conn, Server};
use std::io::Read;
use std::net::{IpAddr, TcpStream, UdpSocket};
use std::process::Command;
use std::time::Duration;

/// A non-loopback IPv4 address of this machine (the source address of the default route),
/// or `None` when there is none (then only the engine-level test covers protected mode).
fn local_non_loopback_ip() -> Option<IpAddr> {
    let s = UdpSocket::bind("0.0.0.0:0").ok()?;
    // No packet is sent: connecting a UDP socket only picks the route and source address.
    s.connect("192.0.2.1:9").ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

/// Connects to `ip:port`, sends PING and reads until the server closes or 1 s passes.
fn ping_from(ip: IpAddr, port: u16) -> Vec<u8> {
    let mut s = TcpStream::connect((ip, port)).expect("connect via the non-loopback address");
    s.set_read_timeout(Some(Duration::from_millis(1000)))
        .unwrap();
    std::io::Write::write_all(&mut s, b"PING\r\n").unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
        if got.ends_with(b"\r\n") && !got.starts_with(b"-DENIED") {
            break;
        }
    }
    got
}

/// What a remote client sees: protected (DENIED, closed), then after `CONFIG SET
/// protected-mode no` (PONG), then with a password (NOAUTH).
fn protected_mode_story(server: &Server, ip: IpAddr) -> Vec<Vec<u8>> {
    let mut local = server.conn();
    let mut seen = vec![ping_from(ip, server.port())];
    local.cmd_str(&["CONFIG", "SET", "protected-mode", "no"]);
    seen.push(ping_from(ip, server.port()));
    local.cmd_str(&["CONFIG", "SET", "protected-mode", "yes"]);
    local.cmd_str(&["CONFIG", "SET", "requirepass", "pw"]);
    seen.push(ping_from(ip, server.port()));
    seen
}

#[test]
fn protected_mode_refuses_remote_clients_like_redis() {
    if kayvee_tests::target_is_unikernel() {
        eprintln!("skipped: the unikernel's only peer is its host's port forward");
        return;
    }
    let Some(ip) = local_non_loopback_ip() else {
        eprintln!("skipped: no non-loopback address (the engine unit test covers the rule)");
        return;
    };
    let Some(ours) = Server::kayvee(&["--bind", "0.0.0.0"]) else {
        return;
    };
    let got = protected_mode_story(&ours, ip);
    assert!(
        got[0].starts_with(b"-DENIED Redis is running in protected mode"),
        "{}",
        show(&got[0])
    );
    assert_eq!(got[1], b"+PONG\r\n");
    assert_eq!(got[2], b"-NOAUTH Authentication required.\r\n");
    if let Some(redis) = Server::redis(&["--bind", "0.0.0.0"]) {
        let want = protected_mode_story(&redis, ip);
        assert_eq!(got, want, "kayvee vs redis-server");
    }
}

/// A fresh temporary directory for ACL files.
fn temp_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("kayvee-acl-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// ACL LOAD's error for a bad file, with the file's path replaced by `<path>`.
fn load_error(server: &Server, path: &str) -> String {
    let reply = server.conn().cmd_str(&["ACL", "LOAD"]);
    String::from_utf8_lossy(&reply).replace(path, "<path>")
}

#[test]
fn acl_file_loads_saves_and_reports_errors_like_redis() {
    if kayvee_tests::target_is_unikernel() {
        eprintln!("skipped: the unikernel has no file system for an ACL file");
        return;
    }
    let dir = temp_dir("file");
    let path = dir.join("users.acl");
    let path_s = path.to_str().unwrap();
    std::fs::write(&path, "user alice on >pw ~a* +get\n").unwrap();
    let Some(ours) = Server::kayvee(&["--aclfile", path_s]) else {
        return;
    };
    let mut alice = ours.conn();
    assert_eq!(alice.cmd_str(&["AUTH", "alice", "pw"]), b"+OK\r\n");
    assert_eq!(alice.cmd_str(&["GET", "a1"]), b"$-1\r\n");
    let mut admin = ours.conn();
    let list = admin.cmd_str(&["ACL", "LIST"]);
    assert_eq!(
        show(&list),
        show(b"*2\r\n$108\r\nuser alice on #30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4 ~a* resetchannels -@all +get\r\n$34\r\nuser default on nopass ~* &* +@all\r\n")
    );
    admin.cmd_str(&["ACL", "SETUSER", "bob", "on", ">x", "~b", "+set"]);
    assert_eq!(admin.cmd_str(&["ACL", "SAVE"]), b"+OK\r\n");
    let saved = std::fs::read_to_string(&path).unwrap();
    assert!(saved.contains("\nuser bob on #2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881 ~b resetchannels -@all +set\n"), "{saved}");
    // ACL LOAD of the saved file disconnects the clients of users other than default.
    assert_eq!(admin.cmd_str(&["ACL", "LOAD"]), b"+OK\r\n");
    assert!(
        alice.is_closed(Duration::from_secs(2)),
        "alice's client should be closed"
    );
    assert_eq!(admin.cmd_str(&["PING"]), b"+PONG\r\n");
    // A bad file: every error in one message, nothing changed.
    std::fs::write(
        &path,
        "user alice on >pw ~a* +get\nfoo bar\nuser bob on +nosuch\nuser alice off\n",
    )
    .unwrap();
    let ours_err = load_error(&ours, path_s);
    assert!(
        ours_err.starts_with("-ERR <path>:2 should start with user keyword"),
        "{ours_err}"
    );
    assert_eq!(
        admin.cmd_str(&["ACL", "USERS"]),
        b"*3\r\n$5\r\nalice\r\n$3\r\nbob\r\n$7\r\ndefault\r\n"
    );
    let redis_path = dir.join("redis.acl");
    let redis_path_s = redis_path.to_str().unwrap();
    std::fs::write(&redis_path, "user alice on >pw ~a* +get\n").unwrap();
    if let Some(redis) = Server::redis(&["--aclfile", redis_path_s]) {
        std::fs::copy(&path, &redis_path).unwrap();
        assert_eq!(ours_err, load_error(&redis, redis_path_s));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_acl_file_aborts_startup() {
    let dir = temp_dir("startup");
    let path = dir.join("bad.acl");
    std::fs::write(&path, "user x on +nosuch\n").unwrap();
    let out = Command::new(kayvee_bin())
        .args(["--port", "0", "--aclfile", path.to_str().unwrap()])
        .output()
        .expect("run kayvee-server");
    assert!(!out.status.success());
    let log =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("Aborting Redis startup because of ACL errors:")
            && log.contains("Error in applying operation '+nosuch'"),
        "{log}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Redis disconnects a user's clients when the user is deleted, and its subscribers whose
/// channels it may no longer use; other changes leave connections open.
#[test]
fn user_changes_disconnect_clients_as_redis_does() {
    let Some(server) = Server::kayvee(&[]) else {
        return;
    };
    let mut admin = server.conn();
    admin.cmd_str(&["ACL", "SETUSER", "k", "on", ">pw", "+@all", "~*", "&*"]);
    let login = |cmds: &[&str]| -> Conn {
        let mut c = server.conn();
        assert_eq!(c.cmd_str(&["AUTH", "k", "pw"]), b"+OK\r\n");
        if !cmds.is_empty() {
            c.cmd_str(cmds);
        }
        c
    };
    let mut plain = login(&[]);
    admin.cmd_str(&["ACL", "SETUSER", "k", "off", "resetpass"]);
    assert_eq!(
        plain.cmd_str(&["PING"]),
        b"+PONG\r\n",
        "off keeps connections"
    );
    admin.cmd_str(&["ACL", "SETUSER", "k", "on", ">pw"]);
    let mut sub_a = login(&["SUBSCRIBE", "a"]);
    let mut sub_b = login(&["SUBSCRIBE", "b"]);
    admin.cmd_str(&["ACL", "SETUSER", "k", "resetchannels", "&a"]);
    assert!(
        sub_b.is_closed(Duration::from_secs(2)),
        "subscriber to b should be closed"
    );
    assert_eq!(sub_a.cmd_str(&["PING"]), b"*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    assert_eq!(admin.cmd_str(&["ACL", "DELUSER", "k"]), b":1\r\n");
    assert!(
        plain.is_closed(Duration::from_secs(2)),
        "deleted user's client should be closed"
    );
    assert!(sub_a.is_closed(Duration::from_secs(2)));
    assert_eq!(admin.cmd_str(&["PING"]), b"+PONG\r\n");
}
