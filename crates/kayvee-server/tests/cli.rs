//! The command line and configuration: redis-server's conventions (config file first, then
//! `--name value...` options), `--version`, `--help`, fatal errors with exit code 1.

mod common;

use common::{free_port, temp_path, Server, BIN};
use std::process::Command;

#[test]
fn version_and_help_exit_zero() {
    for flag in ["-v", "--version"] {
        let out = Command::new(BIN).arg(flag).output().unwrap();
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.starts_with("Kayvee server v="), "{text}");
    }
    for flag in ["-h", "--help"] {
        let out = Command::new(BIN).arg(flag).output().unwrap();
        assert!(out.status.success());
        let text = String::from_utf8(out.stderr).unwrap();
        assert!(
            text.starts_with("Usage: kayvee-server [/path/to/kayvee.conf]"),
            "{text}"
        );
    }
}

#[test]
fn unknown_option_is_a_startup_error_with_exit_code_1() {
    let port = free_port().to_string();
    let out = Command::new(BIN)
        .args(["--port", &port, "--no-such-directive", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("FATAL CONFIG FILE ERROR"), "{err}");
    assert!(err.contains("no-such-directive \"1\""), "{err}");
}

#[test]
fn bad_value_is_a_startup_error_with_exit_code_1() {
    let out = Command::new(BIN).args(["--port", "abc"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("port \"abc\""), "{err}");
}

#[test]
fn stray_argument_and_missing_file_exit_1() {
    let out = Command::new(BIN).args(["-x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let out = Command::new(BIN)
        .arg("/nonexistent/kayvee.conf")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("can't open config file '/nonexistent/kayvee.conf'"),
        "{err}"
    );
}

#[test]
fn config_file_is_applied_and_options_override_it() {
    let file_port = free_port();
    let option_port = free_port();
    let conf = temp_path("override.conf");
    std::fs::write(
        &conf,
        format!("# a comment\nport {file_port}\nbind 127.0.0.1\n"),
    )
    .unwrap();
    // The file alone: the server listens on the file's port.
    let server = Server::start(file_port, &[conf.to_str().unwrap()]);
    let mut c = server.connect();
    assert_eq!(common::roundtrip(&mut c, b"PING\r\n", 7), b"+PONG\r\n");
    drop(server);
    // File then option: the option wins.
    let p = option_port.to_string();
    let server = Server::start(option_port, &[conf.to_str().unwrap(), "--port", &p]);
    assert!(std::net::TcpStream::connect(("127.0.0.1", file_port)).is_err());
    drop(server);
    std::fs::remove_file(conf).unwrap();
}

#[test]
fn pidfile_is_written_and_removed_on_shutdown() {
    let pidfile = temp_path("kayvee.pid");
    let mut server = Server::start_default(&["--pidfile", pidfile.to_str().unwrap()]);
    let text = std::fs::read_to_string(&pidfile).unwrap();
    assert_eq!(text.trim(), server.child.id().to_string());
    server.signal(libc::SIGTERM);
    assert!(server.wait_exit().success());
    assert!(!pidfile.exists());
}

#[test]
fn config_rewrite_writes_the_file_it_was_started_with() {
    let port = free_port();
    let conf = temp_path("rewrite.conf");
    std::fs::write(&conf, format!("# mine\nport {port}\nbind 127.0.0.1\n")).unwrap();
    let server = Server::start(port, &[conf.to_str().unwrap()]);
    let mut c = server.connect();
    let set = b"CONFIG SET timeout 123\r\n";
    assert_eq!(common::roundtrip(&mut c, set, 5), b"+OK\r\n");
    assert_eq!(
        common::roundtrip(&mut c, b"CONFIG REWRITE\r\n", 5),
        b"+OK\r\n"
    );
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(text.starts_with("# mine\n"), "{text}");
    assert!(text.contains(&format!("port {port}")), "{text}");
    assert!(text.contains("timeout 123"), "{text}");
    drop(server);
    std::fs::remove_file(conf).unwrap();
}

#[test]
fn config_rewrite_without_a_file_is_refused() {
    let server = Server::start_default(&[]);
    let mut c = server.connect();
    let err = b"-ERR The server is running without a config file\r\n";
    assert_eq!(
        common::roundtrip(&mut c, b"CONFIG REWRITE\r\n", err.len()),
        err
    );
}

#[test]
fn low_fd_limit_reduces_maxclients_with_redis_warnings() {
    let port = free_port();
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "ulimit -n 128 && exec \"$0\" \"$@\"", BIN])
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"]);
    let server = Server::start_command(port, cmd);
    let log = server.log_text();
    assert!(
        log.contains(
            "You requested maxclients of 10000 requiring at least 10032 max file descriptors."
        ),
        "{log}"
    );
    assert!(
        log.contains("Current maximum open files is 128. maxclients has been reduced to 96"),
        "{log}"
    );
    let mut c = server.connect();
    let reply = b"*2\r\n$10\r\nmaxclients\r\n$2\r\n96\r\n";
    let got = common::roundtrip(&mut c, b"CONFIG GET maxclients\r\n", reply.len());
    assert_eq!(got, reply);
}
