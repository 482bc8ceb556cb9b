//! Client tracking, MONITOR and CLIENT PAUSE over real connections: a RESP3 reader receives the
//! invalidation push for the key another connection wrote, BCAST prefixes, a RESP2 REDIRECT to a
//! `__redis__:invalidate` subscriber, FLUSHALL's null invalidation, `redis-cli monitor`, and a
//! WRITE pause that holds a write (and what was pipelined behind it) while reads answer. The
//! byte-exact scenarios also run against redis-server 7.0.15 when it is installed
//! (`KAYVEE_REQUIRE_REDIS=1` makes its absence a failure), and both must produce the same bytes.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kayvee_tests::{show, Conn, Server};

/// Runs a command and shows its reply.
fn run(c: &mut Conn, args: &[&str]) -> String {
    show(&c.cmd_str(args))
}

/// Reads one more reply (a push or message) as text.
fn next(c: &mut Conn) -> String {
    show(&c.read_reply().unwrap())
}

/// The servers to compare: Kayvee, then redis-server when available.
fn servers() -> Vec<Server> {
    let mut all: Vec<Server> = Server::kayvee(&[]).into_iter().collect();
    if kayvee_tests::target_is_redis() {
        return all;
    }
    all.extend(Server::redis(&[]));
    all
}

/// Checks a scenario's transcript on every server against the expected one.
fn check(scenario: fn(&Server) -> Vec<String>, want: &[&str]) {
    for server in servers() {
        let got = scenario(&server);
        assert_eq!(got, want, "{:?} differs", server.kind());
    }
}

/// RESP3 default mode: the reader's GET is remembered; another connection's SET sends one push
/// naming the key, and the key is forgotten (a second SET sends nothing); a write by the reader
/// itself is pushed after its own reply.
fn resp3_default(server: &Server) -> Vec<String> {
    let (mut r, mut w) = (server.conn(), server.conn());
    let mut t = vec![];
    r.cmd_str(&["HELLO", "3"]);
    t.push(run(&mut r, &["CLIENT", "TRACKING", "on"]));
    t.push(run(&mut r, &["GET", "user:1"]));
    t.push(run(&mut w, &["SET", "user:1", "x"]));
    t.push(next(&mut r));
    t.push(run(&mut w, &["SET", "user:1", "y"]));
    t.push(run(&mut r, &["MGET", "user:1", "other"]));
    t.push(run(&mut r, &["DEL", "other", "user:1"]));
    t.push(next(&mut r));
    t.push(run(&mut w, &["FLUSHALL"]));
    t.push(next(&mut r));
    t.push(run(&mut r, &["PING"]));
    t
}

#[test]
fn resp3_reader_is_told_which_key_changed() {
    check(
        resp3_default,
        &[
            "+OK\\r\\n",
            "_\\r\\n",
            "+OK\\r\\n",
            ">2\\r\\n$10\\r\\ninvalidate\\r\\n*1\\r\\n$6\\r\\nuser:1\\r\\n",
            "+OK\\r\\n",
            "*2\\r\\n$1\\r\\ny\\r\\n_\\r\\n",
            ":1\\r\\n",
            ">2\\r\\n$10\\r\\ninvalidate\\r\\n*1\\r\\n$6\\r\\nuser:1\\r\\n",
            "+OK\\r\\n",
            ">2\\r\\n$10\\r\\ninvalidate\\r\\n_\\r\\n",
            "+PONG\\r\\n",
        ],
    );
}

/// BCAST with two prefixes: one push per prefix with its keys sorted; other keys send nothing.
fn bcast(server: &Server) -> Vec<String> {
    let (mut r, mut w) = (server.conn(), server.conn());
    let mut t = vec![];
    r.cmd_str(&["HELLO", "3"]);
    t.push(run(
        &mut r,
        &[
            "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "user:", "PREFIX", "obj:",
        ],
    ));
    t.push(run(
        &mut w,
        &[
            "MSET", "user:2", "a", "nope", "b", "obj:1", "c", "user:1", "d",
        ],
    ));
    t.push(next(&mut r));
    t.push(next(&mut r));
    t.push(run(&mut w, &["SET", "other", "1"]));
    t.push(run(&mut r, &["PING"]));
    t
}

#[test]
fn bcast_prefixes_broadcast_matching_keys() {
    check(
        bcast,
        &[
            "+OK\\r\\n",
            "+OK\\r\\n",
            ">2\\r\\n$10\\r\\ninvalidate\\r\\n*1\\r\\n$5\\r\\nobj:1\\r\\n",
            ">2\\r\\n$10\\r\\ninvalidate\\r\\n*2\\r\\n$6\\r\\nuser:1\\r\\n$6\\r\\nuser:2\\r\\n",
            "+OK\\r\\n",
            "+PONG\\r\\n",
        ],
    );
}

/// The id CLIENT ID answers.
fn client_id(c: &mut Conn) -> String {
    let id = String::from_utf8(c.cmd_str(&["CLIENT", "ID"])).unwrap();
    id.trim().trim_start_matches(':').to_string()
}

/// RESP2: invalidations go to the REDIRECT target as messages on `__redis__:invalidate`.
fn resp2_redirect(server: &Server) -> Vec<String> {
    let (mut sub, mut r, mut w) = (server.conn(), server.conn(), server.conn());
    let mut t = vec![];
    let id = client_id(&mut sub);
    t.push(run(&mut sub, &["SUBSCRIBE", "__redis__:invalidate"]));
    t.push(run(&mut r, &["CLIENT", "TRACKING", "on", "REDIRECT", &id]));
    t.push(run(&mut r, &["GET", "k"]));
    t.push(run(&mut w, &["SET", "k", "v"]));
    t.push(next(&mut sub));
    t.push(run(&mut w, &["FLUSHALL"]));
    t.push(next(&mut sub));
    t
}

#[test]
fn resp2_invalidations_reach_the_redirect_subscriber() {
    check(
        resp2_redirect,
        &[
            "*3\\r\\n$9\\r\\nsubscribe\\r\\n$20\\r\\n__redis__:invalidate\\r\\n:1\\r\\n",
            "+OK\\r\\n",
            "$-1\\r\\n",
            "+OK\\r\\n",
            "*3\\r\\n$7\\r\\nmessage\\r\\n$20\\r\\n__redis__:invalidate\\r\\n*1\\r\\n$1\\r\\nk\\r\\n",
            "+OK\\r\\n",
            "*3\\r\\n$7\\r\\nmessage\\r\\n$20\\r\\n__redis__:invalidate\\r\\n$-1\\r\\n",
        ],
    );
}

/// `redis-cli monitor` prints the other connections' commands in Redis's format, with AUTH's
/// arguments redacted and admin commands left out.
#[test]
fn redis_cli_monitor_shows_commands() {
    if !kayvee_tests::tool_available("redis-cli") {
        return;
    }
    for server in servers() {
        let mut child = Command::new("redis-cli")
            .args(["-p", &server.port().to_string(), "monitor"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        assert_eq!(lines.next().unwrap().unwrap(), "OK");
        let mut c = server.conn();
        c.cmd_str(&["SET", "k", "a \"b\"\n"]);
        c.cmd_str(&["CONFIG", "GET", "port"]);
        c.cmd_str(&["AUTH", "secret"]);
        c.cmd_str(&["SELECT", "2"]);
        c.cmd_str(&["MULTI"]);
        c.cmd_str(&["INCR", "n"]);
        c.cmd_str(&["EXEC"]);
        let got: Vec<String> = (0..6).map(|_| lines.next().unwrap().unwrap()).collect();
        let _ = child.kill();
        let _ = child.wait();
        let tails: Vec<&str> = got.iter().map(|l| &l[l.find(" [").unwrap()..]).collect();
        let addr = &tails[0][4..tails[0].find(']').unwrap()];
        let want = [
            format!(" [0 {addr}] \"SET\" \"k\" \"a \\\"b\\\"\\n\""),
            format!(" [0 {addr}] \"AUTH\" \"(redacted)\""),
            format!(" [2 {addr}] \"SELECT\" \"2\""),
            format!(" [2 {addr}] \"MULTI\""),
            format!(" [2 {addr}] \"INCR\" \"n\""),
            format!(" [2 {addr}] \"EXEC\""),
        ];
        assert_eq!(tails, want, "{:?}", server.kind());
        // `<secs>.<usec>`: six digits of microseconds.
        let stamp = &got[0][..got[0].find(' ').unwrap()];
        assert_eq!(stamp.split('.').nth(1).map(str::len), Some(6), "{stamp}");
    }
}

/// Sends a command without waiting for its reply.
fn send(c: &mut Conn, args: &[&str]) {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    c.send(&kayvee_tests::encode_command(&args)).unwrap();
}

/// CLIENT PAUSE WRITE: a write (and the read pipelined behind it) waits for the pause to end
/// while another connection's read answers at once; CLIENT UNPAUSE ends a long pause early.
#[test]
fn pause_write_holds_writes_but_not_reads() {
    for server in servers() {
        let (mut admin, mut writer, mut reader) = (server.conn(), server.conn(), server.conn());
        writer.set_timeout(Duration::from_secs(10));
        assert_eq!(
            run(&mut admin, &["CLIENT", "PAUSE", "1000", "WRITE"]),
            "+OK\\r\\n"
        );
        let start = Instant::now();
        send(&mut writer, &["SET", "k", "1"]);
        send(&mut writer, &["GET", "k"]);
        assert_eq!(run(&mut reader, &["GET", "k"]), "$-1\\r\\n");
        let read_ms = start.elapsed().as_millis();
        assert_eq!(next(&mut writer), "+OK\\r\\n");
        let write_ms = start.elapsed().as_millis();
        assert_eq!(next(&mut writer), "$1\\r\\n1\\r\\n");
        assert!(read_ms < 700, "{:?}: read took {read_ms} ms", server.kind());
        assert!(
            write_ms >= 800,
            "{:?}: write took {write_ms} ms",
            server.kind()
        );
        // A long pause, lifted by UNPAUSE from a connection whose command is not held.
        assert_eq!(
            run(&mut admin, &["CLIENT", "PAUSE", "60000", "WRITE"]),
            "+OK\\r\\n"
        );
        let start = Instant::now();
        send(&mut writer, &["INCR", "k"]);
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(run(&mut admin, &["CLIENT", "UNPAUSE"]), "+OK\\r\\n");
        assert_eq!(next(&mut writer), ":2\\r\\n");
        let waited = start.elapsed();
        assert!(
            waited < Duration::from_secs(5),
            "{:?}: {waited:?}",
            server.kind()
        );
    }
}
