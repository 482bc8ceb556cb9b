//! Real clients over real sockets against kayvee-server: the `redis` crate (redis-rs, sync API),
//! redis-cli (including `--pipe`, `-3`, `--scan`, `-x`) and redis-benchmark, plus raw sockets for
//! many concurrent connections. Expected outputs were taken from redis-server 7.0.15 with the same
//! tools (`KAYVEE_TARGET=redis` runs this file against redis-server itself).

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use kayvee_tests::{show, tool_available, Conn, Server};

/// The server under test, or `None` (skip) when running against a missing redis.
fn server() -> Option<Server> {
    Server::kayvee(&[])
}

/// A redis-rs connection to `server`.
fn rs_conn(server: &Server) -> redis::Connection {
    let url = format!("redis://127.0.0.1:{}/", server.port());
    let client = redis::Client::open(url).expect("redis client");
    client
        .get_connection_with_timeout(Duration::from_secs(10))
        .expect("redis-rs connect")
}

#[test]
fn redis_rs_strings_and_expiry() {
    let Some(server) = server() else { return };
    let mut con = rs_conn(&server);
    let ok: String = redis::cmd("SET")
        .arg("greeting")
        .arg("hello")
        .query(&mut con)
        .unwrap();
    assert_eq!(ok, "OK");
    let got: Option<String> = redis::cmd("GET").arg("greeting").query(&mut con).unwrap();
    assert_eq!(got.as_deref(), Some("hello"));
    let missing: Option<String> = redis::cmd("GET").arg("nope").query(&mut con).unwrap();
    assert_eq!(missing, None);
    let () = redis::cmd("MSET")
        .arg("a")
        .arg("1")
        .arg("b")
        .arg("2")
        .query(&mut con)
        .unwrap();
    let many: Vec<Option<String>> = redis::cmd("MGET")
        .arg(&["a", "nope", "b"])
        .query(&mut con)
        .unwrap();
    assert_eq!(many, vec![Some("1".into()), None, Some("2".into())]);
    let n: i64 = redis::cmd("INCR").arg("a").query(&mut con).unwrap();
    assert_eq!(n, 2);
    let n: i64 = redis::cmd("INCRBY")
        .arg("a")
        .arg(40)
        .query(&mut con)
        .unwrap();
    assert_eq!(n, 42);
    let set: i64 = redis::cmd("EXPIRE")
        .arg("a")
        .arg(1000)
        .query(&mut con)
        .unwrap();
    assert_eq!(set, 1);
    let ttl: i64 = redis::cmd("TTL").arg("a").query(&mut con).unwrap();
    assert!((999..=1000).contains(&ttl), "TTL {ttl}");
    let ttl: i64 = redis::cmd("TTL").arg("b").query(&mut con).unwrap();
    assert_eq!(ttl, -1);
    let ttl: i64 = redis::cmd("TTL").arg("nope").query(&mut con).unwrap();
    assert_eq!(ttl, -2);
}

#[test]
fn redis_rs_errors_are_replies() {
    let Some(server) = server() else { return };
    let mut con = rs_conn(&server);
    let () = redis::cmd("SET")
        .arg("s")
        .arg("abc")
        .query(&mut con)
        .unwrap();
    let err = redis::cmd("INCR")
        .arg("s")
        .query::<i64>(&mut con)
        .unwrap_err();
    assert_eq!(
        err.detail(),
        Some("value is not an integer or out of range"),
        "{err:?}"
    );
    // The connection stays usable after a user error.
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
}

#[test]
fn redis_rs_pipeline() {
    let Some(server) = server() else { return };
    let mut con = rs_conn(&server);
    let (ok, value, count): (String, String, i64) = redis::pipe()
        .cmd("SET")
        .arg("p")
        .arg("v1")
        .cmd("GET")
        .arg("p")
        .cmd("EXISTS")
        .arg("p")
        .arg("p")
        .arg("q")
        .query(&mut con)
        .unwrap();
    assert_eq!((ok.as_str(), value.as_str(), count), ("OK", "v1", 2));
}

#[test]
fn redis_rs_pipeline_of_10000_commands() {
    let Some(server) = server() else { return };
    let mut con = rs_conn(&server);
    let mut pipe = redis::pipe();
    for i in 0..10_000 {
        match i % 2 {
            0 => pipe.cmd("INCR").arg("counter"),
            _ => pipe
                .cmd("SET")
                .arg(format!("key:{i}"))
                .arg(format!("value:{i}")),
        };
    }
    let replies: Vec<redis::Value> = pipe.query(&mut con).unwrap();
    assert_eq!(replies.len(), 10_000);
    for (i, reply) in replies.iter().enumerate() {
        let expected = match i % 2 {
            0 => redis::Value::Int(i as i64 / 2 + 1),
            _ => redis::Value::Okay,
        };
        assert_eq!(reply, &expected, "reply #{i}");
    }
    let value: String = redis::cmd("GET").arg("key:9999").query(&mut con).unwrap();
    assert_eq!(value, "value:9999");
    let size: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(size, 5001);
}

/// A client that writes its whole pipeline before it reads any reply (Redis's own test suite
/// does, with a million commands) is served to the end, as by Redis: the replies it does not
/// read yet fill the socket, then the server's output, and the server reads on meanwhile. A
/// server that stopped reading until the client reads would leave both waiting.
#[test]
fn a_pipeline_written_whole_before_reading_completes() {
    // 100 MB through the image's emulated NIC under TCG takes minutes; the driver's own test
    // (`a_paused_peer_that_takes_no_output_gets_its_pause_lifted`) covers the image's shell.
    if kayvee_tests::target_is_unikernel() {
        return;
    }
    let Some(server) = server() else { return };
    let mut setup = Conn::connect(server.port()).unwrap();
    setup
        .send(b"*4\r\n$8\r\nSETRANGE\r\n$1\r\nk\r\n$6\r\n100000\r\n$1\r\nx\r\n")
        .unwrap();
    assert_eq!(setup.read_reply().unwrap(), b":100001\r\n");
    const N: usize = 2_000_000;
    let one = b"*4\r\n$8\r\nSETRANGE\r\n$1\r\nk\r\n$1\r\n0\r\n$10\r\nAAAAAAAAAA\r\n";
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", server.port())).unwrap();
    stream
        .set_write_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    // About 100 MB of commands and 18 MB of replies: far more than the sockets' buffers hold.
    let pipeline = one.repeat(N);
    stream
        .write_all(&pipeline)
        .expect("the server keeps reading the pipeline");
    let reply = b":100001\r\n";
    let mut got = 0usize;
    let mut buf = vec![0u8; 1 << 20];
    while got < N * reply.len() {
        let n = std::io::Read::read(&mut stream, &mut buf).expect("replies keep coming");
        assert!(n > 0, "closed after {got} bytes");
        got += n;
    }
    assert_eq!(got, N * reply.len());
    setup.send(b"*2\r\n$6\r\nSTRLEN\r\n$1\r\nk\r\n").unwrap();
    assert_eq!(
        setup.read_reply().unwrap(),
        b":100001\r\n",
        "every command ran"
    );
}

/// A client that writes its last commands and shuts its side at once (its end of file comes
/// in the same wakeup as its data) gets every reply, then the server closes the connection:
/// the end of file must not be lost behind the data a short read took.
#[test]
fn a_client_that_shuts_its_side_after_its_commands_is_answered_and_closed() {
    use std::io::Read;
    let Some(server) = server() else { return };
    let commands = b"*1\r\n$4\r\nPING\r\n".repeat(10);
    for round in 0..50 {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", server.port())).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream.write_all(&commands).unwrap();
        stream.shutdown(std::net::Shutdown::Write).unwrap();
        let mut got = Vec::new();
        let read = stream.read_to_end(&mut got);
        assert!(
            read.is_ok(),
            "round {round}: no end of file after {} bytes: {read:?}",
            got.len()
        );
        assert_eq!(show(&got), show(&b"+PONG\r\n".repeat(10)), "round {round}");
    }
}

/// Connections held open at the same time by `thousand_concurrent_connections`.
const CONNECTIONS: usize = 1000;

#[test]
fn thousand_concurrent_connections() {
    let Some(server) = server() else { return };
    let started = Instant::now();
    let mut conns: Vec<Conn> = (0..CONNECTIONS).map(|_| server.conn()).collect();
    // Every connection sends before any reads, so all 1000 are in flight at once.
    for (i, conn) in conns.iter_mut().enumerate() {
        let cmd = format!("*3\r\n$3\r\nSET\r\n$6\r\nc:{i:04}\r\n$6\r\nv:{i:04}\r\n");
        conn.send(cmd.as_bytes()).unwrap();
    }
    for (i, conn) in conns.iter_mut().enumerate() {
        assert_eq!(
            conn.read_reply().unwrap(),
            b"+OK\r\n",
            "SET on connection {i}"
        );
    }
    for (i, conn) in conns.iter_mut().enumerate() {
        conn.send(format!("*2\r\n$3\r\nGET\r\n$6\r\nc:{i:04}\r\n").as_bytes())
            .unwrap();
    }
    for (i, conn) in conns.iter_mut().enumerate() {
        let expected = format!("$6\r\nv:{i:04}\r\n");
        assert_eq!(
            show(&conn.read_reply().unwrap()),
            show(expected.as_bytes()),
            "GET on {i}"
        );
    }
    let clients = server.conn().cmd_str(&["DBSIZE"]);
    assert_eq!(clients, b":1000\r\n");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn threads_with_their_own_connections() {
    let Some(server) = server() else { return };
    let port = server.port();
    let workers: Vec<_> = (0..50)
        .map(|t| std::thread::spawn(move || thread_round_trips(port, t)))
        .collect();
    for worker in workers {
        worker.join().expect("worker panicked");
    }
}

/// 20 SET/GET round trips with keys unique to thread `t`.
fn thread_round_trips(port: u16, t: usize) {
    let mut conn = Conn::connect(port).unwrap();
    for i in 0..20 {
        let (key, value) = (format!("t{t}:{i}"), format!("{t}-{i}"));
        assert_eq!(conn.cmd_str(&["SET", &key, &value]), b"+OK\r\n");
        let expected = format!("${}\r\n{value}\r\n", value.len());
        assert_eq!(conn.cmd_str(&["GET", &key]), expected.as_bytes());
    }
}

/// Runs redis-cli against `server` with `args` (and `stdin`), returning its output.
fn cli(server: &Server, args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut cmd = Command::new("redis-cli");
    cmd.args(["-p", &server.port().to_string()]).args(args);
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn redis-cli");
    if let Some(bytes) = stdin {
        child.stdin.take().unwrap().write_all(bytes).unwrap();
    }
    let out = child.wait_with_output().expect("redis-cli output");
    assert!(
        out.status.success(),
        "redis-cli {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// redis-cli's standard output as text.
fn cli_text(server: &Server, args: &[&str]) -> String {
    String::from_utf8(cli(server, args, None).stdout).expect("utf-8 output")
}

/// The server, when redis-cli is installed too.
fn server_with_cli() -> Option<Server> {
    if !tool_available("redis-cli") {
        return None;
    }
    server()
}

#[test]
fn redis_cli_basics() {
    let Some(server) = server_with_cli() else {
        return;
    };
    assert_eq!(cli_text(&server, &["PING"]), "PONG\n");
    assert_eq!(cli_text(&server, &["SET", "name", "kayvee"]), "OK\n");
    assert_eq!(cli_text(&server, &["GET", "name"]), "kayvee\n");
    assert_eq!(cli_text(&server, &["GET", "missing"]), "\n");
    assert_eq!(cli_text(&server, &["-r", "3", "INCR", "n"]), "1\n2\n3\n");
    assert_eq!(cli_text(&server, &["INCRBYFLOAT", "f", "1.5"]), "1.5\n");
    assert_eq!(cli_text(&server, &["-n", "1", "SET", "in1", "x"]), "OK\n");
    assert_eq!(cli_text(&server, &["-n", "1", "DBSIZE"]), "1\n");
    assert_eq!(cli_text(&server, &["DBSIZE"]), "3\n");
    let err = cli_text(&server, &["INCR", "name"]);
    assert_eq!(err, "ERR value is not an integer or out of range\n\n");
}

#[test]
fn redis_cli_stdin_argument() {
    let Some(server) = server_with_cli() else {
        return;
    };
    let out = cli(&server, &["-x", "SET", "fromstdin"], Some(b"hello\n"));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "OK\n");
    assert_eq!(
        server.conn().cmd_str(&["GET", "fromstdin"]),
        b"$6\r\nhello\n\r\n"
    );
}

#[test]
fn redis_cli_resp3() {
    let Some(server) = server_with_cli() else {
        return;
    };
    // In RESP3 a map prints as "key value" lines; in RESP2 the same reply is a flat list.
    assert_eq!(
        cli_text(&server, &["-3", "CONFIG", "GET", "appendonly"]),
        "appendonly no\n"
    );
    assert_eq!(
        cli_text(&server, &["CONFIG", "GET", "appendonly"]),
        "appendonly\nno\n"
    );
    assert_eq!(cli_text(&server, &["-3", "SET", "k", "v"]), "OK\n");
    assert_eq!(cli_text(&server, &["-3", "MGET", "missing", "k"]), "\nv\n");
    let hello = cli_text(&server, &["-3", "HELLO", "3"]);
    let lines: Vec<&str> = hello.lines().collect();
    assert_eq!(
        lines[..3],
        ["server redis", "version 7.0.15", "proto 3"],
        "{hello}"
    );
    assert!(lines[3].starts_with("id "), "{hello}");
    assert_eq!(
        lines[4..],
        ["mode standalone", "role master", "modules "],
        "{hello}"
    );
}

#[test]
fn redis_cli_info_and_config() {
    let Some(server) = server_with_cli() else {
        return;
    };
    let info = cli_text(&server, &["INFO", "server"]);
    assert!(info.starts_with("# Server\r\n"), "{info}");
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(str::to_string)
    };
    assert_eq!(field("redis_version").as_deref(), Some("7.0.15"));
    assert_eq!(field("redis_mode").as_deref(), Some("standalone"));
    assert_eq!(field("tcp_port"), Some(server.port().to_string()));
    if !kayvee_tests::target_is_unikernel() {
        // Under QEMU, pid() is QEMU's; the unikernel has no processes.
        assert_eq!(field("process_id"), Some(server.pid().to_string()));
    }
    let uptime: u64 = field("uptime_in_seconds")
        .expect("uptime")
        .parse()
        .expect("uptime number");
    assert!(uptime < 3600);
    // What redis-benchmark asks on start: "save" with its value, and "appendonly".
    let save = cli_text(&server, &["CONFIG", "GET", "save"]);
    assert!(
        save.starts_with("save\n") && save.lines().count() == 2,
        "{save:?}"
    );
    assert_eq!(
        cli_text(&server, &["CONFIG", "GET", "nosuchparameter"]),
        "\n"
    );
}

#[test]
fn redis_cli_pipe_mass_insertion() {
    let Some(server) = server_with_cli() else {
        return;
    };
    let mut input = Vec::new();
    for i in 0..10_000 {
        let (k, v) = (format!("mass:{i}"), format!("v{i}"));
        input.extend(
            format!(
                "*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n${}\r\n{v}\r\n",
                k.len(),
                v.len()
            )
            .bytes(),
        );
    }
    let out = cli(&server, &["--pipe"], Some(&input));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("errors: 0, replies: 10000"),
        "redis-cli --pipe said: {text}"
    );
    assert_eq!(cli_text(&server, &["DBSIZE"]), "10000\n");
    assert_eq!(cli_text(&server, &["GET", "mass:9999"]), "v9999\n");
}

#[test]
fn redis_cli_scan() {
    let Some(server) = server_with_cli() else {
        return;
    };
    let mut conn = server.conn();
    let mut expected: Vec<String> = (0..300).map(|i| format!("scan:{i}")).collect();
    for key in &expected {
        assert_eq!(conn.cmd_str(&["SET", key, "x"]), b"+OK\r\n");
    }
    assert_eq!(conn.cmd_str(&["SET", "other", "x"]), b"+OK\r\n");
    let listed = cli_text(&server, &["--scan", "--pattern", "scan:*"]);
    let mut got: Vec<String> = listed.lines().map(str::to_string).collect();
    got.sort();
    expected.sort();
    assert_eq!(got, expected);
    assert_eq!(cli_text(&server, &["--scan"]).lines().count(), 301);
}

#[test]
fn redis_benchmark_set_get() {
    if !tool_available("redis-benchmark") {
        return;
    }
    let Some(server) = server() else { return };
    let port = server.port().to_string();
    let out = Command::new("redis-benchmark")
        .args(["-p", &port, "-t", "set,get", "-n", "2000", "-q"])
        .stdin(Stdio::null())
        .output()
        .expect("run redis-benchmark");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "redis-benchmark failed: {text}");
    for test in ["SET", "GET"] {
        let rate =
            benchmark_rate(&text, test).unwrap_or_else(|| panic!("no {test} rate in {text:?}"));
        assert!(rate > 0.0, "{test}: {rate} requests per second");
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("WARNING"),
        "redis-benchmark warned: {stderr}"
    );
}

/// The requests per second redis-benchmark -q printed for `test` (after its last `\r`).
fn benchmark_rate(output: &str, test: &str) -> Option<f64> {
    output
        .split(['\r', '\n'])
        .filter_map(|l| l.trim().strip_prefix(&format!("{test}: ")))
        .find_map(|rest| {
            rest.strip_suffix(" msec")
                .or(Some(rest))?
                .split(" requests per second")
                .next()?
                .parse()
                .ok()
        })
}

/// An `INFO stats` field's value.
fn info_field(con: &mut redis::Connection, name: &str) -> String {
    let info: String = redis::cmd("INFO").arg("stats").query(con).unwrap();
    let prefix = format!("{name}:");
    info.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {name} in {info}"))
        .to_string()
}

#[test]
fn instantaneous_rates_follow_the_load_and_fall_back() {
    let Some(server) = server() else { return };
    let mut con = rs_conn(&server);
    // Load for about 1 s (ten 100 ms samples), in pipelines of 100 PINGs with 1 KiB arguments.
    let payload = "x".repeat(1024);
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(1) {
        let mut pipe = redis::pipe();
        for _ in 0..100 {
            pipe.cmd("PING").arg(&payload);
        }
        let _: Vec<String> = pipe.query(&mut con).unwrap();
    }
    let ops: u64 = info_field(&mut con, "instantaneous_ops_per_sec")
        .parse()
        .unwrap();
    assert!(ops > 100, "instantaneous_ops_per_sec:{ops}");
    let input: f64 = info_field(&mut con, "instantaneous_input_kbps")
        .parse()
        .unwrap();
    let output: f64 = info_field(&mut con, "instantaneous_output_kbps")
        .parse()
        .unwrap();
    assert!(input > 100.0 && output > 100.0, "in {input} out {output}");
    // Idle (but for these INFO calls, a few per second): once the 16 samples (1.6 s) of the
    // load have passed, the rate is down to those.
    let start = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let now: u64 = info_field(&mut con, "instantaneous_ops_per_sec")
            .parse()
            .unwrap();
        if now < 20 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "never fell back");
    }
}

#[test]
fn busy_poll_is_a_kayvee_parameter_that_config_set_changes_live() {
    if std::env::var("KAYVEE_TARGET").is_ok() {
        return; // Kayvee's own parameter: redis-server and the unikernel lack it.
    }
    let Some(server) = server() else { return };
    let mut con = rs_conn(&server);
    let get = |con: &mut redis::Connection| -> Vec<String> {
        redis::cmd("CONFIG")
            .arg("GET")
            .arg("busy-poll-us")
            .query(con)
            .unwrap()
    };
    assert_eq!(get(&mut con), ["busy-poll-us", "50"]);
    for v in ["0", "1000"] {
        let ok: String = redis::cmd("CONFIG")
            .arg("SET")
            .arg("busy-poll-us")
            .arg(v)
            .query(&mut con)
            .unwrap();
        assert_eq!(ok, "OK");
        assert_eq!(get(&mut con), ["busy-poll-us", v]);
        // The loop still sleeps and wakes as it should: requests keep being answered.
        for i in 0..100 {
            let n: i64 = redis::cmd("INCR").arg("n").query(&mut con).unwrap();
            assert!(n > i);
        }
    }
    let err = redis::cmd("CONFIG")
        .arg("SET")
        .arg("busy-poll-us")
        .arg("-1")
        .query::<String>(&mut con)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("argument must be between 0 and 1000000 inclusive"),
        "{err}"
    );
}

/// The `qbuf=` of the client named `name` in CLIENT LIST, or `None` when it is gone.
fn qbuf_of(control: &mut Conn, name: &str) -> Option<usize> {
    let list = String::from_utf8_lossy(&control.cmd_str(&["CLIENT", "LIST"])).into_owned();
    let field = format!(" name={name} ");
    let line = list.lines().find(|l| l.contains(&field))?;
    line.split(' ')
        .find_map(|f| f.strip_prefix("qbuf="))
        .and_then(|v| v.parse().ok())
}

/// The sequence of Redis's unit/client-eviction 'client no-evict on/off': a client (Nagle on,
/// 4 KiB a write, as the suite's Tcl client) sends one argument a byte over
/// maxmemory-clients, without its CRLF, and closes once the server holds all of it; the next
/// client must then be served, not evicted for the closed one's memory. Twenty rounds: the
/// delayed ACK held the FIN of such an upload past the next client's first command (before
/// TCP_QUICKACK: within the first four rounds in four runs of four); at most two rounds may
/// miss, as one did on a loaded CI machine, and a client after the close is then served.
/// Kayvee-server's own:
/// redis-server 7.0.15 fails it the same way (its suite passes at the Tcl client's pace,
/// mostly). The image fails it in its first rounds behind the test's relay (whose threads
/// carry the FIN and the next connection separately), unless the next client waits some 30 ms;
/// straight to QEMU's port forward, 4 runs of 6 passed all twenty rounds, and turning
/// smoltcp's ACK delay off during a big argument changed nothing.
#[test]
fn a_client_closed_after_a_big_argument_counts_no_more_for_client_eviction() {
    if std::env::var("KAYVEE_TARGET").is_ok() {
        return;
    }
    let Some(server) = server() else { return };
    const LIMIT: usize = 3_000_000;
    let mut control = server.conn();
    let limit = LIMIT.to_string();
    assert_eq!(
        control.cmd_str(&["CONFIG", "SET", "maxmemory-clients", &limit]),
        b"+OK\r\n"
    );
    assert_eq!(control.cmd_str(&["CLIENT", "NO-EVICT", "on"]), b"+OK\r\n");
    let size = LIMIT + 1;
    let mut upload = format!("*1\r\n${size}\r\n").into_bytes();
    upload.resize(upload.len() + size, b'v');
    let mut missed = Vec::new();
    for round in 0..20 {
        let name = format!("big{round}");
        let mut big = server.conn();
        big.set_nodelay(false);
        assert_eq!(big.cmd_str(&["CLIENT", "SETNAME", &name]), b"+OK\r\n");
        assert_eq!(big.cmd_str(&["CLIENT", "NO-EVICT", "on"]), b"+OK\r\n");
        for piece in upload.chunks(4096) {
            big.send(piece).expect("upload");
            // At an interpreter's pace: the server keeps up, so the last short piece waits
            // for an acknowledgement.
            let sent = Instant::now();
            while sent.elapsed() < Duration::from_micros(20) {
                std::hint::spin_loop();
            }
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while qbuf_of(&mut control, &name) != Some(size) {
            assert!(
                Instant::now() < deadline,
                "round {round}: the query buffer never held the whole argument ({:?})",
                qbuf_of(&mut control, &name)
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        drop(big);
        let mut next = server.conn();
        let served = [&[&b"SELECT"[..], b"9"][..], &[b"PING"]]
            .into_iter()
            .all(|args| matches!(next.cmd(args), Ok(r) if r.starts_with(b"+")));
        if !served {
            // The FIN came after the next client's first command (a loaded machine can still
            // hold it that long): the round is a miss if the closed client, once gone, counts
            // no more.
            missed.push(round);
            let deadline = Instant::now() + Duration::from_secs(20);
            while qbuf_of(&mut control, &name).is_some() {
                assert!(
                    Instant::now() < deadline,
                    "round {round}: the closed client stayed"
                );
                std::thread::sleep(Duration::from_millis(2));
            }
            let mut again = server.conn();
            let reply = again.cmd(&[b"PING"]);
            assert!(
                matches!(&reply, Ok(r) if r.starts_with(b"+")),
                "round {round}: a client after the close was not served ({reply:?}); log:\n{}",
                server.log_tail()
            );
        }
    }
    // Without the quick ACK most rounds missed (the first miss within four rounds in four
    // runs of four); a rare miss under load is the race Redis has too.
    assert!(
        missed.len() <= 2,
        "rounds whose next client was evicted: {missed:?}"
    );
}
