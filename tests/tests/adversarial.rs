//! Worst-case inputs end to end: every command that takes a pattern, a count, an offset, a
//! range or a size gets its worst cases from one client, and after each one the server must
//! still answer PING on another connection at once, keep its resident memory bounded, and
//! give Redis 7.0.15's answer (each expected reply was read from redis-server 7.0.15 with the
//! same commands).
//!
//! This is no speed test: the deadlines are tens of times what Redis needs and only tell a
//! stall (a server that stops answering everyone) from an answer. Where Redis itself builds a
//! reply it cannot hold (`HRANDFIELD h -1099511627776` runs redis-server out of memory), Kayvee
//! refuses up front with Redis's out-of-range error, so those cases run against kayvee-server
//! only.

use std::time::{Duration, Instant};

use kayvee_tests::{show, target_is_redis, Conn, Server};

/// How long one adversarial command (or batch) may take before the test calls it a stall.
const DEADLINE: Duration = Duration::from_secs(20);
/// How long PING on a second connection may take after each case.
const PING_WITHIN: Duration = Duration::from_secs(2);
/// Resident memory the server may reach at any point of the run.
const RSS_MAX_BYTES: u64 = 1536 << 20;

/// What a case expects back.
enum Expect {
    /// Exactly these reply bytes (shown with `\r\n` escaped).
    Exact(&'static str),
    /// A reply starting with these bytes.
    Prefix(&'static str),
}

struct Case {
    what: &'static str,
    /// Commands sent first (their replies are read and ignored, but must come).
    setup: Vec<Vec<Vec<u8>>>,
    /// The adversarial command.
    cmd: Vec<Vec<u8>>,
    expect: Expect,
    /// Runs against redis-server too (false where Redis blows up, see the module docs).
    redis_too: bool,
}

fn args(s: &str) -> Vec<Vec<u8>> {
    s.split(' ').map(|a| a.as_bytes().to_vec()).collect()
}

fn case(what: &'static str, setup: &[&str], cmd: &str, expect: Expect) -> Case {
    Case {
        what,
        setup: setup.iter().map(|s| args(s)).collect(),
        cmd: args(cmd),
        expect,
        redis_too: true,
    }
}

/// A pattern that takes exponential time to a naive backtracking matcher.
fn bad_pattern() -> String {
    let mut p = "a*".repeat(20);
    p.push('b');
    p
}

/// The server closed `c` (EOF, or a reset because it left our request unread).
fn assert_closed(c: &mut Conn, after: &str) {
    c.set_timeout(DEADLINE);
    match c.read_reply() {
        Ok(r) => panic!("after {after}: another reply {}", show(&r)),
        Err(e) => assert!(
            !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
            "after {after}: still open"
        ),
    }
}

fn rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// PING on a fresh connection answers within [`PING_WITHIN`].
fn assert_responsive(server: &Server, after: &str) {
    let mut c = server.conn();
    c.set_timeout(PING_WITHIN);
    let t = Instant::now();
    let reply = c.cmd(&[b"PING"]);
    assert!(
        matches!(&reply, Ok(r) if r == b"+PONG\r\n"),
        "after {after}: PING answered {reply:?} in {:?}\n{}",
        t.elapsed(),
        server.log_tail()
    );
}

fn assert_rss_bounded(server: &Server, after: &str) {
    if let Some(rss) = rss_bytes(server.pid()) {
        assert!(
            rss <= RSS_MAX_BYTES,
            "after {after}: RSS {} MiB over the {} MiB bound",
            rss >> 20,
            RSS_MAX_BYTES >> 20
        );
    }
}

fn run(server: &Server, cases: &[Case]) {
    let redis = target_is_redis();
    for case in cases.iter().filter(|c| c.redis_too || !redis) {
        let mut c = server.conn();
        c.set_timeout(DEADLINE);
        for s in &case.setup {
            let a: Vec<&[u8]> = s.iter().map(Vec::as_slice).collect();
            c.cmd(&a)
                .unwrap_or_else(|e| panic!("{}: setup {}: {e}", case.what, show(&s.concat())));
        }
        let a: Vec<&[u8]> = case.cmd.iter().map(Vec::as_slice).collect();
        let t = Instant::now();
        let reply = c.cmd(&a);
        match (&case.expect, reply) {
            (Expect::Exact(want), Ok(r)) => assert_eq!(show(&r), *want, "{}", case.what),
            (Expect::Prefix(want), Ok(r)) => {
                assert!(show(&r).starts_with(want), "{}: {}", case.what, show(&r))
            }
            (_, Err(e)) => panic!(
                "{}: no reply after {:?}: {e}\n{}",
                case.what,
                t.elapsed(),
                server.log_tail()
            ),
        }
        assert_responsive(server, case.what);
        assert_rss_bounded(server, case.what);
    }
}

#[test]
fn patterns_are_bounded() {
    let Some(server) = Server::kayvee(&["--enable-debug-command", "yes"]) else {
        return;
    };
    let p = bad_pattern();
    let key = "a".repeat(40);
    let setup = [
        format!("SET {key} 1"),
        format!("HSET h {key} 1"),
        format!("SADD s {key}"),
        format!("ZADD z 1 {key}"),
    ];
    let setup: Vec<&str> = setup.iter().map(String::as_str).collect();
    let cmds = [
        (format!("KEYS {p}"), "*0\\r\\n"),
        (
            format!("SCAN 0 MATCH {p}"),
            "*2\\r\\n$1\\r\\n0\\r\\n*0\\r\\n",
        ),
        (
            format!("HSCAN h 0 MATCH {p}"),
            "*2\\r\\n$1\\r\\n0\\r\\n*0\\r\\n",
        ),
        (
            format!("SSCAN s 0 MATCH {p}"),
            "*2\\r\\n$1\\r\\n0\\r\\n*0\\r\\n",
        ),
        (
            format!("ZSCAN z 0 MATCH {p}"),
            "*2\\r\\n$1\\r\\n0\\r\\n*0\\r\\n",
        ),
        (format!("PUBSUB CHANNELS {p}"), "*0\\r\\n"),
        (format!("CONFIG GET {p}"), "*0\\r\\n"),
        (format!("DEBUG STRINGMATCH-LEN {p}"), ""),
    ];
    let mut cases = Vec::new();
    for (cmd, want) in &cmds {
        let cmd: &'static str = Box::leak(cmd.clone().into_boxed_str());
        let expect = match *want {
            "" => Expect::Prefix(""),
            w => Expect::Exact(Box::leak(w.to_string().into_boxed_str())),
        };
        cases.push(case(cmd, &setup, cmd, expect));
    }
    run(&server, &cases);

    // A pattern subscription hit by somebody's PUBLISH.
    let mut sub = server.conn();
    sub.set_timeout(DEADLINE);
    let r = sub.cmd(&[b"PSUBSCRIBE", p.as_bytes()]).unwrap();
    assert!(
        show(&r).starts_with("*3\\r\\n$10\\r\\npsubscribe"),
        "{}",
        show(&r)
    );
    let mut publisher = server.conn();
    publisher.set_timeout(DEADLINE);
    let r = publisher
        .cmd(&[b"PUBLISH", key.as_bytes(), b"hello"])
        .unwrap();
    assert_eq!(show(&r), ":0\\r\\n");
    assert_responsive(&server, "PUBLISH against a pathological PSUBSCRIBE pattern");
}

#[test]
fn counts_offsets_and_ranges_are_bounded() {
    let Some(server) = Server::kayvee(&[]) else {
        return;
    };
    let max = "9223372036854775807";
    let min = "-9223372036854775808";
    let mut cases = vec![
        case(
            "LRANGE to i64::MAX",
            &["DEL l", "RPUSH l a"],
            &format!("LRANGE l 0 {max}"),
            Expect::Exact("*1\\r\\n$1\\r\\na\\r\\n"),
        ),
        case(
            "LTRIM over the whole i64 range",
            &[],
            &format!("LTRIM l {min} {max}"),
            Expect::Exact("+OK\\r\\n"),
        ),
        case(
            "LINDEX at i64::MIN",
            &[],
            &format!("LINDEX l {min}"),
            Expect::Exact("$-1\\r\\n"),
        ),
        case(
            "ZRANGE over the whole i64 range",
            &["ZADD z 1 a"],
            &format!("ZRANGE z {min} {max}"),
            Expect::Exact("*1\\r\\n$1\\r\\na\\r\\n"),
        ),
        case(
            "ZRANGEBYSCORE LIMIT to i64::MAX",
            &[],
            &format!("ZRANGEBYSCORE z -inf +inf LIMIT 0 {max}"),
            Expect::Exact("*1\\r\\n$1\\r\\na\\r\\n"),
        ),
        case(
            "SCAN COUNT i64::MAX",
            &["FLUSHALL", "SET k 1"],
            &format!("SCAN 0 COUNT {max}"),
            Expect::Exact("*2\\r\\n$1\\r\\n0\\r\\n*1\\r\\n$1\\r\\nk\\r\\n"),
        ),
        case(
            "GETRANGE over the whole i64 range",
            &["SET g yz"],
            &format!("GETRANGE g {min} {max}"),
            Expect::Exact("$2\\r\\nyz\\r\\n"),
        ),
        case(
            "SETBIT past 2^32 bits",
            &[],
            "SETBIT bb 4294967296 1",
            Expect::Exact("-ERR bit offset is not an integer or out of range\\r\\n"),
        ),
        case(
            "BITPOS over the whole i64 range",
            &["SET bp zz"],
            &format!("BITPOS bp 1 {min} {max}"),
            Expect::Exact(":1\\r\\n"),
        ),
        case(
            "EXPIRE i64::MAX",
            &[],
            &format!("EXPIRE g {max}"),
            Expect::Exact("-ERR invalid expire time in 'expire' command\\r\\n"),
        ),
        case(
            "SET EX i64::MAX",
            &[],
            &format!("SET x 1 EX {max}"),
            Expect::Exact("-ERR invalid expire time in 'set' command\\r\\n"),
        ),
        case(
            "CLIENT PAUSE i64::MAX WRITE, then UNPAUSE",
            &[&format!("CLIENT PAUSE {max} WRITE")],
            "CLIENT UNPAUSE",
            Expect::Exact("+OK\\r\\n"),
        ),
        case(
            "DEBUG is refused unless enabled",
            &[],
            "DEBUG SLEEP 1e300",
            Expect::Prefix("-ERR DEBUG command not allowed."),
        ),
    ];
    for (what, cmd) in [
        ("HRANDFIELD -2^40", "HRANDFIELD h -1099511627776"),
        ("ZRANDMEMBER -2^40", "ZRANDMEMBER z -1099511627776"),
        ("SRANDMEMBER -2^40", "SRANDMEMBER s -1099511627776"),
    ] {
        cases.push(Case {
            redis_too: false,
            ..case(
                what,
                &["HSET h f1 v1 f2 v2", "ZADD z 1 a", "SADD s a b"],
                cmd,
                Expect::Exact("-ERR value is out of range\\r\\n"),
            )
        });
    }
    run(&server, &cases);
}

/// Large values built from small writes: each write costs the write, not the value (Redis's
/// strings grow in place with amortised room), so thousands of them finish at once.
#[test]
fn large_values_written_in_small_pieces() {
    let Some(server) = Server::kayvee(&[]) else {
        return;
    };
    let mut c = server.conn();
    c.set_timeout(DEADLINE);
    // A 256 MiB string, then small writes to it.
    let r = c.cmd_str(&["SETRANGE", "big", "268435455", "x"]);
    assert_eq!(show(&r), ":268435456\\r\\n");
    let t = Instant::now();
    let mut batch = Vec::new();
    for i in 0..300 {
        let off = (i * 4096).to_string();
        batch.extend(kayvee_tests::encode_command(&[
            b"SETRANGE",
            b"big",
            off.as_bytes(),
            b"y",
        ]));
        batch.extend(kayvee_tests::encode_command(&[
            b"SETBIT",
            b"big",
            off.as_bytes(),
            b"1",
        ]));
        batch.extend(kayvee_tests::encode_command(&[b"APPEND", b"big", b"z"]));
    }
    c.send(&batch).unwrap();
    for i in 0..300 {
        let len = 268435456 + i;
        assert_eq!(show(&c.read_reply().unwrap()), format!(":{len}\\r\\n"));
        c.read_reply().unwrap();
        assert_eq!(
            show(&c.read_reply().unwrap()),
            format!(":{}\\r\\n", 268435457 + i)
        );
    }
    assert!(
        t.elapsed() < DEADLINE,
        "900 small writes to a 256 MiB string took {:?}",
        t.elapsed()
    );
    assert_responsive(&server, "small writes to a 256 MiB string");
    assert_rss_bounded(&server, "small writes to a 256 MiB string");
    assert_eq!(show(&c.cmd_str(&["DEL", "big"])), ":1\\r\\n");

    // 3,000 appends of 10 KB (30 MB) in one pipeline.
    let piece = vec![b'v'; 10_000];
    let mut batch = Vec::new();
    for _ in 0..3000 {
        batch.extend(kayvee_tests::encode_command(&[b"APPEND", b"log", &piece]));
    }
    let t = Instant::now();
    c.send(&batch).unwrap();
    for i in 1..=3000 {
        assert_eq!(
            show(&c.read_reply().unwrap()),
            format!(":{}\\r\\n", i * 10_000)
        );
    }
    assert!(
        t.elapsed() < DEADLINE,
        "3,000 appends took {:?}",
        t.elapsed()
    );
    assert_eq!(show(&c.cmd_str(&["STRLEN", "log"])), ":30000000\\r\\n");
    assert_responsive(&server, "3,000 appends of 10 KB");
    assert_rss_bounded(&server, "3,000 appends of 10 KB");
}

/// Limits set at run time apply at once to the network layer, and oversized inline requests
/// close the connection as Redis does.
#[test]
fn absurd_sizes_are_refused() {
    let Some(server) = Server::kayvee(&[]) else {
        return;
    };
    let mut c = server.conn();
    c.set_timeout(DEADLINE);
    assert_eq!(
        show(&c.cmd_str(&["CONFIG", "SET", "proto-max-bulk-len", "1mb"])),
        "+OK\\r\\n"
    );
    // The refusal comes at the bulk's header, as in Redis, so only the header is sent: writing
    // the 2 MB payload too would race the close (a reset while the client still writes).
    let header = format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n", 2 << 20);
    c.send(header.as_bytes()).unwrap();
    match c.read_reply() {
        Ok(r) => assert!(
            show(&r).starts_with("-ERR Protocol error: invalid bulk length"),
            "{}",
            show(&r)
        ),
        Err(e) => panic!("a 2 MB bulk header over a 1 MB limit: {e}"),
    }
    assert_closed(&mut c, "a bulk over proto-max-bulk-len");
    assert_responsive(&server, "a bulk over proto-max-bulk-len");

    let mut c = server.conn();
    c.set_timeout(DEADLINE);
    let mut inline = vec![b'a'; 100 * 1024];
    inline.extend_from_slice(b"\r\n");
    c.send(&inline).unwrap();
    let r = c.read_reply().unwrap();
    assert_eq!(
        show(&r),
        "-ERR Protocol error: too big inline request\\r\\n"
    );
    assert_closed(&mut c, "a 100 KB inline request");
    assert_responsive(&server, "a 100 KB inline request");
}

/// Replies that pass a hard `client-output-buffer-limit` close their client and leave the
/// server serving, with its memory bounded: huge negative random counts (Redis stops building
/// the reply mid-run, Kayvee builds just enough of it to pass the limit) and KEYS, whose reply
/// counts against the limit whole (Redis writes its length last, so none of it stays in the
/// 16 KiB static reply buffer).
#[test]
fn replies_past_the_output_limit_close_the_client() {
    let Some(server) = Server::kayvee(&[]) else {
        return;
    };
    let mut c = server.conn();
    c.set_timeout(DEADLINE);
    for setup in [
        &["HSET", "h", "f1", "v1", "f2", "v2"][..],
        &["ZADD", "z", "1", "a"],
        &["SADD", "s", "a", "b"],
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            // A debug build makes about 12 MB of such a reply a second on a slow host: at
            // 256 MB it passed the limit only after the test's 20 s read deadline.
            "normal 32mb 0 0",
        ],
    ] {
        let r = c.cmd_str(setup);
        assert!(!show(&r).starts_with('-'), "{setup:?}: {}", show(&r));
    }
    for cmd in [
        "SRANDMEMBER s -100000000",
        "HRANDFIELD h -999999999 WITHVALUES",
        "ZRANDMEMBER z -1099511627776",
    ] {
        let mut c = server.conn();
        c.set_timeout(DEADLINE);
        c.send(&kayvee_tests::encode_command(
            &cmd.split(' ').map(str::as_bytes).collect::<Vec<_>>(),
        ))
        .unwrap();
        assert_closed(&mut c, cmd);
        assert_responsive(&server, cmd);
        assert_rss_bounded(&server, cmd);
    }

    // KEYS: 1,000 keys of 100-odd bytes make a reply of about 111 KB, 11 KB over the limit
    // only when none of it is left uncounted.
    let mut batch = Vec::new();
    for i in 0..1000 {
        let key = format!("long-key-name-prefix-of-100-chars-{:-<66}{i}", "");
        batch.extend(kayvee_tests::encode_command(&[
            b"SET",
            key.as_bytes(),
            b"v",
        ]));
    }
    c.send(&batch).unwrap();
    for _ in 0..1000 {
        assert_eq!(show(&c.read_reply().unwrap()), "+OK\\r\\n");
    }
    let limit = c.cmd_str(&[
        "CONFIG",
        "SET",
        "client-output-buffer-limit",
        "normal 100000 0 0",
    ]);
    assert_eq!(show(&limit), "+OK\\r\\n");
    let mut k = server.conn();
    k.set_timeout(DEADLINE);
    k.send(&kayvee_tests::encode_command(&[b"KEYS", b"*"]))
        .unwrap();
    assert_closed(&mut k, "KEYS past the output limit");
    assert_responsive(&server, "KEYS past the output limit");
    // A reply under the limit is whole.
    let r = c.cmd_str(&["KEYS", "long-key-name-prefix-of-100-chars-*1"]);
    assert!(show(&r).starts_with("*100\\r\\n"), "{}", show(&r));
}

/// Replies Redis writes with their length after their elements (SMEMBERS, SINTER, score and
/// lex ranges, XRANGE, LPOS COUNT) count whole against `client-output-buffer-limit`; the
/// others leave their first 16 KiB (Redis's static reply buffer) out of the count. Each reply
/// here is 12-14 KB against a hard limit of 10,000 bytes: the first kind closes the client,
/// the second (SUNION, a rank range, LRANGE) does not, nor does a small reply of the first.
#[test]
fn deferred_length_replies_count_whole_against_the_output_limit() {
    let Some(server) = Server::kayvee(&[]) else {
        return;
    };
    let mut c = server.conn();
    c.set_timeout(DEADLINE);
    let mut batch = Vec::new();
    for i in 0..400 {
        let member = format!("member-with-padding-{i:04}");
        let score = i.to_string();
        for cmd in [
            &[b"SADD", b"s".as_slice(), member.as_bytes()][..],
            &[b"ZADD", b"z", score.as_bytes(), member.as_bytes()],
            &[b"RPUSH", b"l", b"a", b"a", b"a", b"a", b"a"],
        ] {
            batch.extend(kayvee_tests::encode_command(cmd));
        }
        if i < 170 {
            batch.extend(kayvee_tests::encode_command(&[
                b"XADD",
                b"x",
                b"*",
                b"f",
                member.as_bytes(),
            ]));
        }
    }
    c.send(&batch).unwrap();
    for _ in 0..400 * 3 + 170 {
        let r = c.read_reply().unwrap();
        assert!(!show(&r).starts_with('-'), "set-up: {}", show(&r));
    }
    let limit = c.cmd_str(&[
        "CONFIG",
        "SET",
        "client-output-buffer-limit",
        "normal 10000 0 0",
    ]);
    assert_eq!(show(&limit), "+OK\\r\\n");
    for (cmd, closes) in [
        ("SMEMBERS s", true),
        ("SINTER s s", true),
        ("ZRANGEBYSCORE z -inf +inf", true),
        ("ZRANGE z ( [ BYLEX", false),
        ("ZRANGE z - + BYLEX", true),
        ("XRANGE x - +", true),
        ("LPOS l a COUNT 0", true),
        ("SUNION s", false),
        ("ZRANGE z 0 -1", false),
        ("LRANGE l 0 -1", false),
    ] {
        let mut k = server.conn();
        k.set_timeout(DEADLINE);
        k.send(&kayvee_tests::encode_command(
            &cmd.split(' ').map(str::as_bytes).collect::<Vec<_>>(),
        ))
        .unwrap();
        if closes {
            assert_closed(&mut k, cmd);
        } else {
            let r = show(&k.read_reply().unwrap());
            assert!(r.starts_with('*'), "{cmd}: {r}");
            assert_eq!(show(&k.cmd_str(&["PING"])), "+PONG\\r\\n", "after {cmd}");
        }
        assert_responsive(&server, cmd);
    }
}
