//! The server over real sockets: PING over TCP and a Unix socket, protocol errors, pipelining,
//! many concurrent clients, maxclients, graceful shutdown on SIGTERM/SIGINT.

mod common;

use common::{raise_nofile, read_n, read_to_eof, roundtrip, temp_path, Server};
use std::io::Write;
use std::time::Duration;

#[test]
fn starts_with_redis_like_options_and_answers_ping() {
    let server = Server::start_default(&[
        "--databases",
        "16",
        "--maxclients",
        "10000",
        "--timeout",
        "0",
        "--tcp-keepalive",
        "300",
        "--loglevel",
        "notice",
        "--logfile",
        "",
    ]);
    let mut c = server.connect();
    assert_eq!(roundtrip(&mut c, b"*1\r\n$4\r\nPING\r\n", 7), b"+PONG\r\n");
    assert_eq!(roundtrip(&mut c, b"PING hello\r\n", 11), b"$5\r\nhello\r\n");
    let log = server.log_text();
    assert!(log.contains("Server initialized"), "{log}");
    assert!(log.contains("Ready to accept connections tcp"), "{log}");
}

#[test]
fn listens_on_every_bind_address_and_the_unix_socket() {
    let port = common::free_port();
    let sock = temp_path("kayvee.sock");
    let p = port.to_string();
    let ipv6 = std::net::TcpListener::bind("[::1]:0").is_ok();
    let mut args = vec!["--port", &p, "--bind", "127.0.0.1"];
    if ipv6 {
        args.push("::1");
    }
    args.extend([
        "--unixsocket",
        sock.to_str().unwrap(),
        "--unixsocketperm",
        "700",
    ]);
    let server = Server::start(port, &args);
    let mut tcp = server.connect();
    assert_eq!(roundtrip(&mut tcp, b"PING\r\n", 7), b"+PONG\r\n");
    if ipv6 {
        let mut v6 = std::net::TcpStream::connect(("::1", port)).unwrap();
        assert_eq!(roundtrip(&mut v6, b"PING\r\n", 7), b"+PONG\r\n");
    }
    let mut unix = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    unix.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(roundtrip(&mut unix, b"PING\r\n", 7), b"+PONG\r\n");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
}

#[test]
fn protocol_error_replies_then_closes() {
    let server = Server::start_default(&[]);
    let mut c = server.connect();
    c.write_all(b"PING\r\n*abc\r\nPING\r\n").unwrap();
    let got = read_to_eof(&mut c);
    assert_eq!(
        String::from_utf8_lossy(&got),
        "+PONG\r\n-ERR Protocol error: invalid multibulk length\r\n"
    );
}

#[test]
fn pipeline_of_10000_pings_in_one_write_gets_10000_replies() {
    let server = Server::start_default(&[]);
    let mut c = server.connect();
    let req = b"PING\r\n".repeat(10_000);
    let mut writer = c.try_clone().unwrap();
    let t = std::thread::spawn(move || writer.write_all(&req).unwrap());
    let got = read_n(&mut c, 7 * 10_000);
    t.join().unwrap();
    assert!(got.chunks(7).all(|r| r == b"+PONG\r\n"));
    // Nothing more comes.
    c.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut extra = [0u8; 1];
    assert!(std::io::Read::read(&mut c, &mut extra).is_err());
}

#[test]
fn a_thousand_concurrent_connections_each_ping() {
    raise_nofile(4096);
    let server = Server::start_default(&[]);
    let mut conns: Vec<_> = (0..1000).map(|_| server.connect()).collect();
    for c in &mut conns {
        c.write_all(b"PING\r\n").unwrap();
    }
    for c in &mut conns {
        assert_eq!(read_n(c, 7), b"+PONG\r\n");
    }
}

#[test]
fn maxclients_reached_is_refused_with_redis_error() {
    let server = Server::start_default(&["--maxclients", "2"]);
    // The startup probe's connection may still count for a moment: retry until admitted.
    let a = admitted(&server);
    let _b = admitted(&server);
    let mut c = server.connect();
    assert_eq!(
        read_to_eof(&mut c),
        b"-ERR max number of clients reached\r\n"
    );
    // A slot frees when a client leaves.
    drop(a);
    std::thread::sleep(Duration::from_millis(100));
    let mut d = server.connect();
    assert_eq!(roundtrip(&mut d, b"PING\r\n", 7), b"+PONG\r\n");
}

#[test]
fn sigterm_and_sigint_shut_down_gracefully_with_exit_0() {
    for (sig, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGINT, "SIGINT")] {
        let mut server = Server::start_default(&[]);
        let mut c = server.connect();
        assert_eq!(roundtrip(&mut c, b"PING\r\n", 7), b"+PONG\r\n");
        server.signal(sig);
        let status = server.wait_exit();
        assert_eq!(status.code(), Some(0), "{}", server.log_text());
        let log = server.log_text();
        assert!(
            log.contains(&format!("Received {name} scheduling shutdown...")),
            "{log}"
        );
        assert!(log.contains("ready to exit, bye bye"), "{log}");
        // The listener is gone.
        assert!(std::net::TcpStream::connect(("127.0.0.1", server.port)).is_err());
    }
}

/// A connection that got past maxclients (PING answered), retried for up to 2 s while the
/// server may still count a client that just left.
fn admitted(server: &Server) -> std::net::TcpStream {
    for _ in 0..100 {
        let mut c = server.connect();
        let mut reply = [0u8; 7];
        // A refused client may see a reset instead of the error: any failure means retry.
        let ok = c.write_all(b"PING\r\n").is_ok()
            && std::io::Read::read_exact(&mut c, &mut reply).is_ok()
            && &reply == b"+PONG\r\n";
        if ok {
            return c;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("never admitted:\n{}", server.log_text());
}

#[test]
fn commands_split_across_writes_and_large_arguments() {
    let server = Server::start_default(&[]);
    let mut c = server.connect();
    // A command arriving in three pieces.
    for piece in [&b"*2\r\n$4\r\nPI"[..], b"NG\r\n$3\r\nab", b"c\r\n"] {
        c.write_all(piece).unwrap();
        std::thread::sleep(Duration::from_millis(30));
    }
    assert_eq!(read_n(&mut c, 9), b"$3\r\nabc\r\n");
    // An argument far larger than the shared read buffer, echoed by PING.
    let big = vec![b'x'; 300_000];
    let mut req = b"*2\r\n$4\r\nPING\r\n$300000\r\n".to_vec();
    req.extend_from_slice(&big);
    req.extend_from_slice(b"\r\nPING\r\n");
    let mut writer = c.try_clone().unwrap();
    let t = std::thread::spawn(move || writer.write_all(&req).unwrap());
    let head = b"$300000\r\n";
    let got = read_n(&mut c, head.len() + big.len() + 2 + 7);
    t.join().unwrap();
    assert_eq!(&got[..head.len()], head);
    assert!(got[head.len()..head.len() + big.len()]
        .iter()
        .all(|&b| b == b'x'));
    assert_eq!(&got[head.len() + big.len()..], b"\r\n+PONG\r\n");
}

#[test]
fn quit_replies_then_closes_and_later_commands_are_ignored() {
    let server = Server::start_default(&[]);
    let mut c = server.connect();
    c.write_all(b"PING\r\nQUIT\r\nPING\r\n").unwrap();
    assert_eq!(read_to_eof(&mut c), b"+PONG\r\n+OK\r\n");
}

#[test]
fn requirepass_refuses_commands_until_auth() {
    let server = Server::start_default(&["--requirepass", "s3cret"]);
    let mut c = server.connect();
    let noauth = b"-NOAUTH Authentication required.\r\n";
    assert_eq!(roundtrip(&mut c, b"PING\r\n", noauth.len()), noauth);
    assert_eq!(roundtrip(&mut c, b"AUTH s3cret\r\n", 5), b"+OK\r\n");
    assert_eq!(roundtrip(&mut c, b"PING\r\n", 7), b"+PONG\r\n");
}

#[test]
fn shutdown_command_exits_0() {
    let mut server = Server::start_default(&[]);
    let mut c = server.connect();
    c.write_all(b"SHUTDOWN NOSAVE\r\n").unwrap();
    assert_eq!(read_to_eof(&mut c), b"");
    assert_eq!(server.wait_exit().code(), Some(0));
    assert!(server.log_text().contains("User requested shutdown..."));
}

#[test]
fn inline_request_over_64k_is_a_protocol_error() {
    let server = Server::start_default(&[]);
    let mut c = server.connect();
    let mut line = b"ECHO ".to_vec();
    line.extend(std::iter::repeat_n(b'a', 100_000));
    line.extend_from_slice(b"\r\n");
    c.write_all(&line).unwrap();
    assert_eq!(
        read_to_eof(&mut c),
        b"-ERR Protocol error: too big inline request\r\n"
    );
    let mut d = server.connect();
    assert_eq!(roundtrip(&mut d, b"PING\r\n", 7), b"+PONG\r\n");
}

#[test]
fn debug_is_refused_by_default() {
    let server = Server::start_default(&[]);
    let mut c = server.connect();
    let want: &[u8] = b"-ERR DEBUG command not allowed. If the enable-debug-command option is set \
        to \"local\", you can run it from a local connection, otherwise you need to set this option \
        in the configuration file, and then restart the server.\r\n";
    assert_eq!(
        roundtrip(&mut c, b"DEBUG SLEEP 1e300\r\n", want.len()),
        want
    );
    assert_eq!(roundtrip(&mut c, b"PING\r\n", 7), b"+PONG\r\n");
}

#[test]
fn debug_sleep_blocks_the_whole_server() {
    let server = Server::start_default(&["--enable-debug-command", "yes"]);
    let mut a = server.connect();
    let mut b = server.connect();
    assert_eq!(roundtrip(&mut b, b"PING\r\n", 7), b"+PONG\r\n");
    let t0 = std::time::Instant::now();
    a.write_all(b"DEBUG SLEEP 0.4\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(roundtrip(&mut b, b"PING\r\n", 7), b"+PONG\r\n");
    assert!(
        t0.elapsed() >= Duration::from_millis(350),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(read_n(&mut a, 5), b"+OK\r\n");
}

#[test]
fn client_kill_closes_the_other_connection() {
    let server = Server::start_default(&[]);
    let mut a = server.connect();
    let mut b = server.connect();
    a.write_all(b"CLIENT ID\r\n").unwrap();
    let id_reply = read_line(&mut a);
    let id = id_reply.trim_start_matches(':').trim_end();
    // The killer's pipeline goes on after the kill.
    let kill = format!("CLIENT KILL ID {id}\r\nPING\r\n");
    assert_eq!(roundtrip(&mut b, kill.as_bytes(), 11), b":1\r\n+PONG\r\n");
    assert_eq!(read_to_eof(&mut a), b"");
    // A client killing itself gets its reply, then the connection closes.
    let mut c = server.connect();
    c.write_all(b"CLIENT ID\r\n").unwrap();
    let own = read_line(&mut c);
    let own = own.trim_start_matches(':').trim_end();
    c.write_all(format!("CLIENT KILL ID {own} SKIPME no\r\nPING\r\n").as_bytes())
        .unwrap();
    assert_eq!(read_to_eof(&mut c), b":1\r\n");
}

#[test]
fn idle_clients_are_closed_after_timeout() {
    let server = Server::start_default(&["--timeout", "1"]);
    let mut c = server.connect();
    assert_eq!(roundtrip(&mut c, b"PING\r\n", 7), b"+PONG\r\n");
    let t0 = std::time::Instant::now();
    assert_eq!(read_to_eof(&mut c), b"");
    let idle = t0.elapsed();
    assert!(
        idle >= Duration::from_millis(900) && idle < Duration::from_secs(5),
        "{idle:?}"
    );
}

#[test]
fn info_reports_the_shells_host_facts() {
    let server = Server::start_default(&[]);
    let mut c = server.connect();
    c.write_all(b"INFO\r\n").unwrap();
    let text = read_bulk(&mut c);
    let field = |name: &str| -> String {
        let prefix = format!("{name}:");
        let line = text.lines().find(|l| l.starts_with(&prefix));
        line.unwrap_or_else(|| panic!("no {name} in INFO:\n{text}"))[prefix.len()..].to_string()
    };
    assert_eq!(field("process_id"), server.child.id().to_string());
    assert_eq!(field("tcp_port"), server.port.to_string());
    assert_eq!(field("multiplexing_api"), "epoll");
    assert!(field("os").starts_with("Linux "));
    assert!(field("used_memory").parse::<u64>().unwrap() > 0);
    assert!(field("used_memory_rss").parse::<u64>().unwrap() > 0);
    assert!(field("total_system_memory").parse::<u64>().unwrap() > 0);
}

/// Reads one `\r\n`-terminated line.
fn read_line<S: std::io::Read>(s: &mut S) -> String {
    let mut line = Vec::new();
    while !line.ends_with(b"\r\n") {
        line.extend(read_n(s, 1));
    }
    String::from_utf8(line).unwrap()
}

/// Reads one bulk string reply (`$N\r\n...\r\n`) and returns its text.
fn read_bulk<S: std::io::Read>(s: &mut S) -> String {
    let head = read_line(s);
    let n: usize = head[1..].trim_end().parse().unwrap();
    let body = read_n(s, n + 2);
    String::from_utf8(body[..n].to_vec()).unwrap()
}

/// One RESP command's bytes.
fn resp(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend(format!("${}\r\n{a}\r\n", a.len()).bytes());
    }
    out
}

#[test]
fn config_set_port_and_bind_listen_anew_or_keep_the_old_listeners() {
    let port = common::free_port();
    let server = Server::start(port, &["--port", &port.to_string(), "--bind", "127.0.0.1"]);
    let mut c = server.connect();
    let new_port = common::free_port().to_string();
    let ok = roundtrip(&mut c, &resp(&["CONFIG", "SET", "port", &new_port]), 5);
    assert_eq!(ok, b"+OK\r\n");
    let mut moved = std::net::TcpStream::connect(("127.0.0.1", new_port.parse().unwrap())).unwrap();
    assert_eq!(roundtrip(&mut moved, b"PING\r\n", 7), b"+PONG\r\n");
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "old port closed"
    );
    // A port in use: Redis's error, the configuration and the listener unchanged.
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy_port = busy.local_addr().unwrap().port().to_string();
    let want =
        "-ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on \
                this port\r\n";
    let got = roundtrip(
        &mut moved,
        &resp(&["CONFIG", "SET", "port", &busy_port]),
        want.len(),
    );
    assert_eq!(String::from_utf8_lossy(&got), want);
    let want = format!("*2\r\n$4\r\nport\r\n${}\r\n{new_port}\r\n", new_port.len());
    let got = roundtrip(&mut moved, &resp(&["CONFIG", "GET", "port"]), want.len());
    assert_eq!(String::from_utf8_lossy(&got), want);
    let want = "-ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to \
                specified addresses.\r\n";
    let got = roundtrip(
        &mut moved,
        &resp(&["CONFIG", "SET", "bind", "999.999.999.999"]),
        want.len(),
    );
    assert_eq!(String::from_utf8_lossy(&got), want);
    let mut again = std::net::TcpStream::connect(("127.0.0.1", new_port.parse().unwrap())).unwrap();
    assert_eq!(roundtrip(&mut again, b"PING\r\n", 7), b"+PONG\r\n");
}

#[test]
fn migrate_moves_keys_to_another_server_and_caches_the_link() {
    let (pa, pb) = (common::free_port(), common::free_port());
    let a = Server::start(pa, &["--port", &pa.to_string()]);
    let b = Server::start(pb, &["--port", &pb.to_string()]);
    let (mut ca, mut cb) = (a.connect(), b.connect());
    let line = |args: &[&str]| resp(args);
    assert_eq!(roundtrip(&mut ca, &line(&["SET", "k", "v"]), 5), b"+OK\r\n");
    assert_eq!(
        roundtrip(&mut ca, &line(&["PEXPIRE", "k", "100000"]), 4),
        b":1\r\n"
    );
    let pbs = pb.to_string();
    let migrate = line(&["MIGRATE", "127.0.0.1", &pbs, "k", "3", "5000"]);
    assert_eq!(roundtrip(&mut ca, &migrate, 5), b"+OK\r\n");
    assert_eq!(roundtrip(&mut ca, &line(&["EXISTS", "k"]), 4), b":0\r\n");
    assert_eq!(roundtrip(&mut cb, &line(&["SELECT", "3"]), 5), b"+OK\r\n");
    assert_eq!(roundtrip(&mut cb, &line(&["GET", "k"]), 7), b"$1\r\nv\r\n");
    let ttl = roundtrip(&mut cb, &line(&["PTTL", "k"]), 8);
    assert!(
        ttl.starts_with(b":99") || ttl.starts_with(b":100"),
        "{ttl:?}"
    );
    // The target's BUSYKEY is the client's error; the key stays here.
    assert_eq!(roundtrip(&mut ca, &line(&["SET", "k", "w"]), 5), b"+OK\r\n");
    let want =
        "-ERR Target instance replied with error: BUSYKEY Target key name already exists.\r\n";
    let got = roundtrip(&mut ca, &migrate, want.len());
    assert_eq!(String::from_utf8_lossy(&got), want);
    let info = line(&["INFO", "stats"]);
    ca.write_all(&info).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let mut buf = vec![0; 65536];
    let n = std::io::Read::read(&mut ca, &mut buf).unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).contains("migrate_cached_sockets:1"));
    drop(b);
    // A target that is gone: the link fails, the key stays.
    let got = roundtrip(&mut ca, &migrate, 5);
    assert_eq!(&got[..5], b"-IOER");
}
