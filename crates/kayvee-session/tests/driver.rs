//! The driver without sockets: bytes in, bytes and closes out, with a clock the test moves.

use kayvee_engine::{ConnInfo, Engine, Handle, Now, Transport};
use kayvee_session::{Answer, Clock, Driver, Flushed, Notice, Request};
use std::cell::Cell;

const T0_US: u64 = 1_700_000_000_000_000;

/// A clock the test moves; DEBUG SLEEP moves it too.
struct TestClock(Cell<u64>);

impl Clock for TestClock {
    fn now(&self) -> Now {
        Now {
            unix_us: self.0.get(),
        }
    }
    fn sleep_us(&self, us: u64) {
        self.0.set(self.0.get() + us);
    }
}

struct Rig {
    driver: Driver,
    clock: TestClock,
    next_port: u16,
}

impl Rig {
    fn new() -> Self {
        let config = kayvee_engine::Config {
            enable_debug_command: "yes".into(),
            ..Default::default()
        };
        let mut engine = Engine::new(config, 7, Now { unix_us: T0_US });
        engine.core.host.storage = true;
        Rig {
            driver: Driver::new(engine),
            clock: TestClock(Cell::new(T0_US)),
            next_port: 40000,
        }
    }

    fn connect(&mut self) -> Handle {
        self.next_port += 1;
        let info = ConnInfo {
            transport: Transport::Tcp {
                addr: format!("127.0.0.1:{}", self.next_port),
                laddr: "127.0.0.1:6379".into(),
            },
            fd: i64::from(self.next_port),
        };
        self.driver.connect(info, self.clock.now()).unwrap()
    }

    fn send(&mut self, h: Handle, bytes: &[u8]) {
        assert!(self.driver.wants_input(h), "the driver wants input");
        self.driver.receive(h, bytes, &self.clock);
    }

    /// Writes every dirty connection whole; returns what each got and how each flush ended.
    fn write_all(&mut self) -> Vec<(Handle, Vec<u8>, Flushed)> {
        let mut dirty = Vec::new();
        self.driver.take_dirty(&mut dirty);
        let mut got = Vec::new();
        for h in dirty {
            let mut bytes = Vec::new();
            let flushed = self
                .driver
                .flush(h, &self.clock, |b: &[u8]| {
                    bytes.extend_from_slice(b);
                    Ok::<usize, ()>(b.len())
                })
                .unwrap();
            got.push((h, bytes, flushed));
        }
        got
    }

    /// What `h` got in one write pass (empty when it was not dirty).
    fn output_of(&mut self, h: Handle) -> String {
        let all = self.write_all();
        let mine = all.iter().find(|(x, ..)| *x == h);
        mine.map(|(_, b, _)| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default()
    }
}

fn cmd(args: &[&str]) -> Vec<u8> {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    cmd_bytes(&args)
}

#[test]
fn commands_split_across_reads_and_pipelined_run_in_order() {
    let mut rig = Rig::new();
    let a = rig.connect();
    let mut bytes = cmd(&["SET", "k", "v"]);
    bytes.extend(cmd(&["GET", "k"]));
    bytes.extend_from_slice(b"PING\r\n");
    let (first, rest) = bytes.split_at(7);
    rig.send(a, first);
    assert_eq!(rig.output_of(a), "", "nothing complete yet");
    rig.send(a, rest);
    assert_eq!(rig.output_of(a), "+OK\r\n$1\r\nv\r\n+PONG\r\n");
}

#[test]
fn a_woken_client_gets_its_reply_then_runs_what_it_pipelined() {
    let mut rig = Rig::new();
    let (a, b) = (rig.connect(), rig.connect());
    let mut pipeline = cmd(&["BLPOP", "q", "0"]);
    pipeline.extend(cmd(&["LLEN", "q"]));
    pipeline.extend(cmd(&["ECHO", "after"]));
    rig.send(a, &pipeline);
    assert_eq!(rig.output_of(a), "", "blocked: the rest waits");
    rig.send(b, &cmd(&["RPUSH", "q", "x", "y"]));
    let out = rig.write_all();
    let text = |h: Handle| {
        let (_, bytes, _) = out.iter().find(|(x, ..)| *x == h).unwrap();
        String::from_utf8_lossy(bytes).into_owned()
    };
    assert_eq!(text(b), ":2\r\n");
    assert_eq!(text(a), "*2\r\n$1\r\nq\r\n$1\r\nx\r\n:1\r\n$5\r\nafter\r\n");
}

#[test]
fn a_blocked_client_times_out_at_its_deadline() {
    let mut rig = Rig::new();
    let a = rig.connect();
    rig.driver.poll(&rig.clock); // the first cron
    rig.send(a, &cmd(&["BLPOP", "q", "0.5"]));
    let mut polls = 0;
    let mut got = String::new();
    while got.is_empty() {
        let due = rig.driver.poll_at();
        assert!(due <= T0_US + 501_000, "{due}");
        rig.clock.0.set(due);
        rig.driver.poll(&rig.clock);
        got = rig.output_of(a);
        polls += 1;
        assert!(polls < 10);
    }
    assert_eq!(got, "*-1\r\n");
    assert!(
        rig.clock.now().unix_us > T0_US + 500_000,
        "not before its deadline"
    );
}

#[test]
fn publish_fans_out_to_every_subscriber_in_its_protocol() {
    let mut rig = Rig::new();
    let (s2, s3, p) = (rig.connect(), rig.connect(), rig.connect());
    rig.send(s2, &cmd(&["SUBSCRIBE", "ch"]));
    rig.send(s3, &cmd(&["HELLO", "3"]));
    rig.send(s3, &cmd(&["SUBSCRIBE", "ch"]));
    rig.write_all();
    rig.send(p, &cmd(&["PUBLISH", "ch", "hi"]));
    let out = rig.write_all();
    let text = |h: Handle| {
        let (_, bytes, _) = out.iter().find(|(x, ..)| *x == h).unwrap();
        String::from_utf8_lossy(bytes).into_owned()
    };
    assert_eq!(text(p), ":2\r\n");
    assert_eq!(text(s2), "*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n");
    assert_eq!(text(s3), ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n");
}

#[test]
fn keyspace_notifications_reach_other_connections() {
    let mut rig = Rig::new();
    let (sub, w) = (rig.connect(), rig.connect());
    rig.send(w, &cmd(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]));
    rig.send(sub, &cmd(&["SUBSCRIBE", "__keyevent@0__:set"]));
    rig.write_all();
    rig.send(w, &cmd(&["SET", "k", "v"]));
    let out = rig.output_of(sub);
    assert_eq!(
        out,
        "*3\r\n$7\r\nmessage\r\n$18\r\n__keyevent@0__:set\r\n$1\r\nk\r\n"
    );
}

#[test]
fn quit_answers_then_closes_once_written() {
    let mut rig = Rig::new();
    let a = rig.connect();
    let mut bytes = cmd(&["QUIT"]);
    bytes.extend(cmd(&["PING"]));
    rig.send(a, &bytes);
    let out = rig.write_all();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].1, b"+OK\r\n", "nothing after QUIT runs");
    assert_eq!(out[0].2, Flushed::Close);
    assert!(!rig.driver.wants_input(a));
    rig.driver.close(a);
    assert_eq!(rig.driver.engine().clients.len(), 0);
}

#[test]
fn client_kill_closes_the_other_after_one_write() {
    let mut rig = Rig::new();
    let (a, victim) = (rig.connect(), rig.connect());
    rig.send(victim, &cmd(&["CLIENT", "ID"]));
    let id_reply = rig.output_of(victim);
    let id = id_reply.trim_start_matches(':').trim_end();
    rig.send(a, &cmd(&["CLIENT", "KILL", "ID", id]));
    let out = rig.write_all();
    let (_, bytes, f) = out.iter().find(|(h, ..)| *h == a).unwrap();
    assert_eq!((bytes.as_slice(), *f), (&b":1\r\n"[..], Flushed::Open));
    let (_, _, f) = out.iter().find(|(h, ..)| *h == victim).unwrap();
    assert_eq!(*f, Flushed::Close);
    assert!(!rig.driver.wants_input(victim));
}

/// Sentinel's reconfiguration: SLAVEOF, CONFIG REWRITE and CLIENT KILL TYPE inside one
/// MULTI. EXEC's array holds CONFIG REWRITE's `+OK`; the file is then the shell's request,
/// whose answer is not sent again; the killed client closes.
#[test]
fn config_rewrite_inside_exec_answers_in_the_array_and_kills_still_happen() {
    let mut rig = Rig::new();
    rig.driver.engine_mut().core.config.config_file = Some("/nonexistent/kayvee.conf".into());
    let (a, victim) = (rig.connect(), rig.connect());
    let mut bytes = cmd(&["MULTI"]);
    bytes.extend(cmd(&["SLAVEOF", "NO", "ONE"]));
    bytes.extend(cmd(&["CONFIG", "REWRITE"]));
    bytes.extend(cmd(&["CLIENT", "KILL", "TYPE", "normal"]));
    bytes.extend(cmd(&["EXEC"]));
    bytes.extend(cmd(&["PING"]));
    rig.send(a, &bytes);
    assert_eq!(rig.driver.next_request(), Some((a, Request::RewriteConfig)));
    rig.driver.complete(
        a,
        Answer::Error("ERR Rewriting config file".into()),
        &rig.clock,
    );
    let out = rig.write_all();
    let (_, bytes, f) = out.iter().find(|(h, ..)| *h == a).unwrap();
    assert_eq!(
        String::from_utf8_lossy(bytes),
        "+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*3\r\n+OK\r\n+OK\r\n:1\r\n+PONG\r\n"
    );
    assert_eq!(*f, Flushed::Open);
    let (_, _, f) = out.iter().find(|(h, ..)| *h == victim).unwrap();
    assert_eq!(*f, Flushed::Close);
}

#[test]
fn protocol_errors_get_redis_bytes_then_close() {
    let mut rig = Rig::new();
    let a = rig.connect();
    rig.send(a, b"PING\r\n*x\r\n");
    let out = rig.write_all();
    assert_eq!(
        String::from_utf8_lossy(&out[0].1),
        "+PONG\r\n-ERR Protocol error: invalid multibulk length\r\n"
    );
    assert_eq!(out[0].2, Flushed::Close);
    assert!(matches!(
        rig.driver.take_notices().as_slice(),
        [Notice::ProtocolError { .. }]
    ));
}

#[test]
fn config_set_limits_apply_to_the_next_command() {
    let mut rig = Rig::new();
    let a = rig.connect();
    rig.send(a, &cmd(&["CONFIG", "SET", "proto-max-bulk-len", "1mb"]));
    assert_eq!(rig.output_of(a), "+OK\r\n");
    rig.send(a, b"*2\r\n$3\r\nGET\r\n$2000000\r\n");
    let out = rig.write_all();
    assert_eq!(
        String::from_utf8_lossy(&out[0].1),
        "-ERR Protocol error: invalid bulk length\r\n"
    );
    assert_eq!(out[0].2, Flushed::Close);
}

#[test]
fn the_output_limit_closes_a_subscriber_that_does_not_read() {
    let mut rig = Rig::new();
    let (sub, p) = (rig.connect(), rig.connect());
    rig.send(
        p,
        &cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "pubsub 1000 0 0",
        ]),
    );
    rig.send(sub, &cmd(&["SUBSCRIBE", "ch"]));
    rig.write_all();
    // Redis counts only what overflows the 16 KiB static reply buffer: 12 KiB does not.
    let payload = "x".repeat(12 * 1024);
    rig.send(p, &cmd(&["PUBLISH", "ch", &payload]));
    rig.send(p, &cmd(&["PUBLISH", "ch", &payload]));
    // The subscriber's socket takes nothing: its output passes the hard limit.
    let mut dirty = Vec::new();
    rig.driver.take_dirty(&mut dirty);
    assert!(dirty.contains(&sub));
    let f = rig
        .driver
        .flush(sub, &rig.clock, |_: &[u8]| Ok::<usize, ()>(0))
        .unwrap();
    assert_eq!(f, Flushed::Close);
    assert!(rig
        .driver
        .take_notices()
        .contains(&Notice::OutputLimit { id: 1 }));
}

#[test]
fn a_reply_written_length_last_counts_whole_against_the_output_limit() {
    let mut rig = Rig::new();
    let a = rig.connect();
    rig.send(
        a,
        &cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 10000 0 0",
        ]),
    );
    let mut sadd = vec!["SADD".to_string(), "s".to_string()];
    sadd.extend((0..400).map(|i| format!("member-with-padding-{i:04}")));
    rig.send(
        a,
        &cmd(&sadd.iter().map(String::as_str).collect::<Vec<_>>()),
    );
    rig.write_all();
    // About 12.4 KB each. SMEMBERS writes its length last in Redis, so all of it counts and
    // passes the 10,000-byte hard limit before any of it is written; SUNION's fits in the
    // 16 KiB static reply buffer, which counts against no limit.
    let (members, union) = (rig.connect(), rig.connect());
    rig.send(members, &cmd(&["SMEMBERS", "s"]));
    rig.send(union, &cmd(&["SUNION", "s"]));
    let got = rig.write_all();
    let flushed = |h: Handle| {
        got.iter()
            .find(|(g, ..)| *g == h)
            .map(|(_, b, f)| (b.len(), *f))
    };
    assert_eq!(flushed(members), Some((0, Flushed::Close)));
    let (written, f) = flushed(union).expect("SUNION's reply written");
    assert_eq!(f, Flushed::Open);
    assert!(written > 12_000, "SUNION's reply whole: {written} bytes");
    let notices = rig.driver.take_notices();
    assert!(
        notices.contains(&Notice::OutputLimit { id: 2 }),
        "{notices:?}"
    );
    assert!(
        !notices.contains(&Notice::OutputLimit { id: 3 }),
        "{notices:?}"
    );
}

#[test]
fn output_above_the_pause_mark_holds_further_commands_until_written() {
    let mut rig = Rig::new();
    let a = rig.connect();
    let big = "v".repeat(600 * 1024);
    rig.send(a, &cmd(&["SET", "big", &big]));
    rig.write_all();
    let mut pipeline = cmd(&["GET", "big"]);
    pipeline.extend(cmd(&["GET", "big"]));
    pipeline.extend(cmd(&["PING"]));
    rig.send(a, &pipeline);
    assert!(!rig.driver.wants_input(a), "two big replies: over the mark");
    let mut dirty = Vec::new();
    rig.driver.take_dirty(&mut dirty);
    let mut first = Vec::new();
    let f = rig
        .driver
        .flush(a, &rig.clock, |b: &[u8]| {
            first.extend_from_slice(b);
            Ok::<usize, ()>(b.len())
        })
        .unwrap();
    assert_eq!(f, Flushed::ReadAgain);
    assert!(!String::from_utf8_lossy(&first).contains("PONG"));
    assert_eq!(rig.output_of(a), "+PONG\r\n", "the held command ran");
}

#[test]
fn shell_requests_hold_the_pipeline_until_completed() {
    let mut rig = Rig::new();
    let a = rig.connect();
    let mut bytes = cmd(&["SAVE"]);
    bytes.extend(cmd(&["PING"]));
    rig.send(a, &bytes);
    assert_eq!(
        rig.driver.next_request(),
        Some((a, Request::Save { background: false }))
    );
    assert_eq!(rig.output_of(a), "");
    rig.driver
        .complete(a, Answer::Error("ERR".into()), &rig.clock);
    assert_eq!(rig.output_of(a), "-ERR\r\n+PONG\r\n");
    assert_eq!(rig.driver.next_request(), None);
}

#[test]
fn debug_sleep_is_timed_and_slowlogged() {
    let mut rig = Rig::new();
    let a = rig.connect();
    rig.send(
        a,
        &cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "100000"]),
    );
    rig.send(a, &cmd(&["DEBUG", "SLEEP", "0.2"]));
    rig.send(a, &cmd(&["SLOWLOG", "LEN"]));
    assert_eq!(rig.output_of(a), "+OK\r\n+OK\r\n:1\r\n");
    assert_eq!(rig.clock.now().unix_us, T0_US + 200_000);
}

#[test]
fn idle_clients_time_out_but_subscribers_do_not() {
    let mut rig = Rig::new();
    let (idle, sub) = (rig.connect(), rig.connect());
    rig.send(idle, &cmd(&["CONFIG", "SET", "timeout", "1"]));
    rig.send(sub, &cmd(&["SUBSCRIBE", "ch"]));
    rig.write_all();
    rig.clock.0.set(T0_US + 2_500_000);
    assert!(rig.driver.poll(&rig.clock).cron);
    let out = rig.write_all();
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].0, out[0].2), (idle, Flushed::Close));
    assert!(rig.driver.wants_input(sub));
}

#[test]
fn the_query_buffer_limit_closes_without_a_reply() {
    let mut rig = Rig::new();
    let a = rig.connect();
    rig.send(
        a,
        &cmd(&["CONFIG", "SET", "client-query-buffer-limit", "1048576"]),
    );
    rig.write_all();
    rig.send(a, b"*2\r\n$3\r\nSET\r\n$2000000\r\n");
    rig.send(a, &vec![b'x'; 1_100_000]);
    let out = rig.write_all();
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].1.len(), out[0].2), (0, Flushed::Close));
}

#[test]
fn an_unauthenticated_client_that_does_not_read_is_closed() {
    let mut rig = Rig::new();
    let admin = rig.connect();
    rig.send(admin, &cmd(&["CONFIG", "SET", "requirepass", "pw"]));
    rig.write_all();
    let stranger = rig.connect();
    let mut many = Vec::new();
    for _ in 0..1000 {
        many.extend(cmd(&["SET", "x", "5"]));
    }
    rig.send(stranger, &many);
    let mut dirty = Vec::new();
    rig.driver.take_dirty(&mut dirty);
    let f = rig
        .driver
        .flush(stranger, &rig.clock, |_: &[u8]| Ok::<usize, ()>(0))
        .unwrap();
    assert_eq!(f, Flushed::Close, "1000 NOAUTH errors it never read");
    // An authenticated client may keep as much as the normal class allows.
    rig.send(admin, &cmd(&["AUTH", "pw"]));
    rig.send(admin, &many);
    let f = rig
        .driver
        .flush(admin, &rig.clock, |_: &[u8]| Ok::<usize, ()>(0))
        .unwrap();
    assert_eq!(f, Flushed::Open);
}

/// MIGRATE's two halves around the shell: the request carries AUTH, SELECT and one RESTORE per
/// existing key; the answer's replies decide which keys go (the target's BUSYKEY keeps its
/// key, and is the client's error), and the link is cached until its TTL passes.
#[test]
fn migrate_sends_restores_and_deletes_what_the_target_took() {
    let mut rig = Rig::new();
    rig.driver.engine_mut().set_codec(&kayvee_rdb::CODEC);
    let a = rig.connect();
    rig.send(a, &cmd(&["MSET", "k1", "v1", "k2", "v2"]));
    assert_eq!(rig.output_of(a), "+OK\r\n");
    let line = [
        "MIGRATE", "h", "7000", "", "3", "500", "AUTH", "pw", "KEYS", "k1", "nokey", "k2",
    ];
    let mut bytes = cmd(&line);
    bytes.extend(cmd(&["PING"]));
    rig.send(a, &bytes);
    let Some((h, Request::Migrate(job))) = rig.driver.next_request() else {
        panic!("MIGRATE asks the shell");
    };
    assert_eq!(h, a);
    assert_eq!(
        (job.host.as_str(), job.port, job.timeout_ms),
        ("h", 7000, 500)
    );
    assert_eq!(job.name, "h:7000");
    assert_eq!(job.replies, 4, "AUTH, SELECT and two RESTOREs");
    let sent = String::from_utf8_lossy(&job.payload).into_owned();
    assert!(sent.starts_with("*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n*2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n"));
    assert_eq!(sent.matches("RESTORE").count(), 2);
    assert_eq!(rig.output_of(a), "", "the client waits for the exchange");
    let ok = kayvee_engine::Reply::Simple("OK".into());
    let busy = kayvee_engine::Reply::Error("BUSYKEY Target key name already exists.".into());
    let answer = Answer::Migrate {
        replies: vec![ok.clone(), ok.clone(), ok, busy],
        error: None,
    };
    rig.driver.complete(a, answer, &rig.clock);
    assert_eq!(
        rig.output_of(a),
        "-ERR Target instance replied with error: BUSYKEY Target key name already exists.\r\n+PONG\r\n"
    );
    rig.send(a, &cmd(&["EXISTS", "k1", "k2"]));
    assert_eq!(rig.output_of(a), ":1\r\n", "k1 went, k2 stayed");
    rig.send(a, &cmd(&["INFO", "stats"]));
    assert!(rig.output_of(a).contains("migrate_cached_sockets:1"));
    assert_eq!(
        rig.driver.engine().migrate_links().collect::<Vec<_>>(),
        ["h:7000"]
    );
    rig.clock.0.set(T0_US + 11_000_000);
    rig.driver.poll(&rig.clock);
    assert_eq!(
        rig.driver.engine().migrate_links().count(),
        0,
        "idle links expire"
    );
}

/// A link that fails is an IOERR and closes; nothing is deleted.
#[test]
fn migrate_link_failure_is_ioerr() {
    let mut rig = Rig::new();
    rig.driver.engine_mut().set_codec(&kayvee_rdb::CODEC);
    let a = rig.connect();
    rig.send(a, &cmd(&["SET", "k", "v"]));
    rig.send(a, &cmd(&["MIGRATE", "h", "1", "k", "0", "100"]));
    let Some((_, Request::Migrate(job))) = rig.driver.next_request() else {
        panic!("MIGRATE asks the shell");
    };
    assert_eq!(job.replies, 2, "SELECT and RESTORE");
    let answer = Answer::Migrate {
        replies: vec![],
        error: Some(kayvee_engine::outcome::LinkError::Write),
    };
    rig.driver.complete(a, answer, &rig.clock);
    rig.send(a, &cmd(&["EXISTS", "k"]));
    assert_eq!(
        rig.output_of(a),
        "+OK\r\n-IOERR error or timeout writing to target instance\r\n:1\r\n"
    );
    assert_eq!(rig.driver.engine().migrate_links().count(), 0);
}

/// `SET k <len bytes>` without the bytes that end the value.
fn partial_set(len: usize) -> Vec<u8> {
    let mut bytes = format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${len}\r\n").into_bytes();
    bytes.resize(bytes.len() + len, b'v');
    bytes
}

/// The `tot-mem` CLIENT LIST shows for `h` (asked by `asker`).
fn tot_mem(rig: &mut Rig, asker: Handle, name: &str) -> Option<usize> {
    rig.send(asker, &cmd(&["CLIENT", "LIST"]));
    let list = rig.output_of(asker);
    let line = list
        .lines()
        .find(|l| l.contains(&format!(" name={name} ")))?;
    let field = line.split(' ').find_map(|f| f.strip_prefix("tot-mem="))?;
    Some(field.parse().unwrap())
}

#[test]
fn client_eviction_closes_the_biggest_client_above_the_limit() {
    let mut rig = Rig::new();
    let (control, small, big) = (rig.connect(), rig.connect(), rig.connect());
    rig.send(small, &cmd(&["CLIENT", "SETNAME", "small"]));
    rig.send(big, &cmd(&["CLIENT", "SETNAME", "big"]));
    rig.write_all();
    // Big arguments still waiting for their end.
    rig.send(big, &partial_set(600_000));
    rig.send(small, &partial_set(300_000));
    let mem = tot_mem(&mut rig, control, "big").unwrap();
    assert!((600_000..700_000).contains(&mem), "{mem}");
    rig.send(
        control,
        &cmd(&["CONFIG", "SET", "maxmemory-clients", "800kb"]),
    );
    let out = rig.write_all();
    assert!(out
        .iter()
        .any(|(h, bytes, f)| *h == big && bytes.is_empty() && *f == Flushed::Close));
    rig.driver.close(big);
    assert!(rig
        .driver
        .take_notices()
        .iter()
        .any(|n| matches!(n, Notice::ClientEvicted { id: 3, .. })));
    assert!(
        tot_mem(&mut rig, control, "small").is_some(),
        "below the limit now"
    );
    rig.send(control, &cmd(&["INFO", "stats"]));
    assert!(rig.output_of(control).contains("evicted_clients:1\r\n"));
}

#[test]
fn no_evict_clients_stay_and_a_lower_limit_evicts_at_once() {
    let mut rig = Rig::new();
    let (control, a, b) = (rig.connect(), rig.connect(), rig.connect());
    rig.send(control, &cmd(&["CLIENT", "NO-EVICT", "on"]));
    rig.send(a, &cmd(&["CLIENT", "NO-EVICT", "on"]));
    rig.write_all();
    for h in [a, b] {
        rig.send(h, &partial_set(300_000));
    }
    rig.send(
        control,
        &cmd(&["CONFIG", "SET", "maxmemory-clients", "100kb"]),
    );
    assert_eq!(rig.output_of(control), "+OK\r\n");
    rig.driver.close(b);
    // `a` is exempt: the total stays above the limit, and nothing more is evicted.
    rig.send(a, b"\r");
    rig.send(control, &cmd(&["INFO", "stats"]));
    assert!(rig.output_of(control).contains("evicted_clients:1\r\n"));
    assert!(rig.driver.wants_input(a));
}

#[test]
fn maxmemory_clients_as_a_percentage_of_maxmemory() {
    let mut rig = Rig::new();
    let (control, a) = (rig.connect(), rig.connect());
    rig.send(
        control,
        &cmd(&["CONFIG", "SET", "maxmemory-clients", "10%"]),
    );
    rig.send(a, &partial_set(300_000));
    rig.write_all();
    assert!(
        rig.driver.wants_input(a),
        "no maxmemory: no client eviction"
    );
    rig.send(control, &cmd(&["CONFIG", "SET", "maxmemory", "2mb"]));
    let out = rig.write_all();
    assert!(out.iter().any(|(h, _, f)| *h == a && *f == Flushed::Close));
}

#[test]
fn under_client_eviction_output_has_no_pause_mark() {
    let mut rig = Rig::new();
    let a = rig.connect();
    rig.send(a, &cmd(&["CONFIG", "SET", "maxmemory-clients", "100mb"]));
    let big = "v".repeat(600 * 1024);
    rig.send(a, &cmd(&["SET", "big", &big]));
    rig.write_all();
    let mut pipeline = cmd(&["GET", "big"]);
    pipeline.extend(cmd(&["GET", "big"]));
    pipeline.extend(cmd(&["PING"]));
    rig.send(a, &pipeline);
    assert!(rig.driver.wants_input(a), "the output grows as in Redis");
    assert!(rig.output_of(a).ends_with("+PONG\r\n"));
}

#[test]
fn a_paused_peer_that_takes_no_output_gets_its_pause_lifted() {
    // A client that writes its whole pipeline before it reads (Redis's test suite does) stops
    // taking output; waiting for it would deadlock: after a quiet spell the pause is lifted.
    let mut rig = Rig::new();
    let a = rig.connect();
    let big = "v".repeat(600 * 1024);
    rig.send(a, &cmd(&["SET", "big", &big]));
    rig.write_all();
    let mut pipeline = cmd(&["GET", "big"]);
    pipeline.extend(cmd(&["GET", "big"]));
    pipeline.extend(cmd(&["PING"]));
    rig.send(a, &pipeline);
    assert!(!rig.driver.wants_input(a), "two big replies: over the mark");
    let stuck = |rig: &mut Rig| {
        rig.driver
            .flush(a, &rig.clock, |_: &[u8]| Ok::<usize, ()>(0))
            .unwrap()
    };
    assert_eq!(stuck(&mut rig), Flushed::Open, "the peer took nothing");
    // The cron notes the pause, then lifts it once it made no progress for a while.
    rig.driver.cron(&rig.clock);
    assert!(!rig.driver.wants_input(a));
    rig.clock.0.set(rig.clock.0.get() + 150_000);
    rig.driver.cron(&rig.clock);
    assert_eq!(
        stuck(&mut rig),
        Flushed::ReadAgain,
        "read again, output or not"
    );
    assert!(
        rig.driver.wants_input(a),
        "the pause is off while the output drains"
    );
    assert!(
        rig.output_of(a).ends_with("+PONG\r\n"),
        "the held command ran"
    );
    // Once the output is all written, the mark applies again.
    rig.send(a, &pipeline);
    assert!(!rig.driver.wants_input(a), "paused again");
}

/// An INFO field's value as `client` reads it.
fn info_field(rig: &mut Rig, client: Handle, name: &str) -> u64 {
    rig.send(client, &cmd(&["INFO", "everything"]));
    let info = rig.output_of(client);
    let line = info
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")));
    line.and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} in {info}"))
}

#[test]
fn a_lagging_replica_extends_the_replication_buffer_until_it_catches_up() {
    let mut rig = Rig::new();
    let client = rig.connect();
    rig.send(client, &cmd(&["CONFIG", "SET", "repl-diskless-sync", "no"]));
    rig.send(
        client,
        &cmd(&["CONFIG", "SET", "repl-backlog-size", "16384"]),
    );
    rig.write_all();
    let replica = rig.connect();
    rig.send(replica, &cmd(&["REPLCONF", "listening-port", "6380"]));
    rig.send(replica, &cmd(&["PSYNC", "?", "-1"]));
    let value = "v".repeat(1000);
    for i in 0..200 {
        rig.send(client, &cmd(&["SET", &format!("k{i}"), &value]));
        // The client reads its replies; the replica reads nothing.
        let mut dirty = Vec::new();
        rig.driver.take_dirty(&mut dirty);
        for h in dirty.into_iter().filter(|&h| h != replica) {
            let _ = rig
                .driver
                .flush(h, &rig.clock, |b: &[u8]| Ok::<_, ()>(b.len()));
        }
    }
    // The replica's pending stream (its RDB is not part of it) outgrows the backlog: the
    // shared buffer is that stream, counted once.
    let offset = info_field(&mut rig, client, "master_repl_offset");
    let histlen = info_field(&mut rig, client, "repl_backlog_histlen");
    let buffers = info_field(&mut rig, client, "mem_total_replication_buffers");
    assert!(histlen < 40_000, "{histlen}");
    assert!(
        buffers > 200_000 && buffers <= offset,
        "{buffers} of {offset}"
    );
    // Caught up: back to the backlog, whatever capacity the replica's buffer kept.
    let flushed = rig
        .driver
        .flush(replica, &rig.clock, |b: &[u8]| Ok::<_, ()>(b.len()));
    assert_eq!(flushed, Ok(Flushed::Open));
    let histlen = info_field(&mut rig, client, "repl_backlog_histlen");
    let buffers = info_field(&mut rig, client, "mem_total_replication_buffers");
    assert_eq!(buffers, histlen);
}

/// A RESP command of binary arguments.
fn cmd_bytes(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Redis's fuzzer findings as RESTORE payloads (object and RDB version, the CRC-64 added):
/// a type-15 stream whose first entry's lp-count is 86 instead of 5 ('stream bad lp_count'),
/// and a hash listpack whose last value runs past the end ('lpFind invalid access').
const BAD_LP_COUNT: &str = "0f011000000173dedf7d9b00000000000000004042420000001800030100010201846974656d058576616c75650600010201000100010101000156010201220100010101825f3103050102012c010001010102010501ff038100000173dedf7dc70001076d7967726f75708100000173dedf7d9b000100000173dedf7d9b0000000000000000f97ddfde73010000010105416c696365eb7ddfde730100000100000173dedf7d9b00000000000000000900";
const LP_FIND: &str = "1039390000001400060106010301825f33030701825f370300010001040104010901825f39030501825f3503080108010101825f31030201f001ff0a00";

/// With `sanitize-dump-payload no`, RESTORE keeps a stream or hash whose compact encoding has
/// a sound header but entries that do not decode, as Redis keeps it; Kayvee then refuses to
/// read it (where Redis may crash on an assertion) but DUMP gives it back and DEL removes it.
/// With `yes` the same payloads are refused.
#[test]
fn unsanitized_corrupt_values_are_kept_unread() {
    let mut rig = Rig::new();
    rig.driver.engine_mut().set_codec(&kayvee_rdb::CODEC);
    let a = rig.connect();
    let corrupt =
        "-ERR The value at this key is corrupt (restored with sanitize-dump-payload no); \
                   it can only be deleted, dumped or renamed\r\n";
    // Key, payload, where its listpack is and how long, commands that read it.
    type Case<'a> = (&'a str, &'a str, usize, usize, [&'a [&'a str]; 3]);
    let cases: [Case<'_>; 2] = [
        (
            "s",
            BAD_LP_COUNT,
            21,
            66,
            [
                &["XREVRANGE", "s", "+", "-"],
                &["XADD", "s", "*", "a", "1"],
                &["XINFO", "STREAM", "s", "FULL"],
            ],
        ),
        (
            "h",
            LP_FIND,
            2,
            57,
            [
                &["HGETALL", "h"],
                &["HSETNX", "h", "2", "x"],
                &["HSCAN", "h", "0"],
            ],
        ),
    ];
    for (key, hex, lp_at, lp_len, reads) in cases {
        let mut payload = unhex(hex);
        let crc = kayvee_rdb::CRC64.checksum(&payload);
        payload.extend_from_slice(&crc.to_le_bytes());
        rig.send(a, &cmd(&["CONFIG", "SET", "sanitize-dump-payload", "yes"]));
        assert_eq!(rig.output_of(a), "+OK\r\n");
        rig.send(a, &cmd_bytes(&[b"RESTORE", key.as_bytes(), b"0", &payload]));
        assert_eq!(rig.output_of(a), "-ERR Bad data format\r\n");
        rig.send(a, &cmd(&["CONFIG", "SET", "sanitize-dump-payload", "no"]));
        assert_eq!(rig.output_of(a), "+OK\r\n");
        rig.send(a, &cmd_bytes(&[b"RESTORE", key.as_bytes(), b"0", &payload]));
        assert_eq!(rig.output_of(a), "+OK\r\n");
        for args in reads {
            rig.send(a, &cmd(args));
            assert_eq!(rig.output_of(a), corrupt, "{args:?}");
        }
        // DUMP carries the listpack as it came.
        rig.send(a, &cmd(&["DUMP", key]));
        let all = rig.write_all();
        let dumped = &all.iter().find(|(h, ..)| *h == a).expect("a reply").1;
        let lp = &payload[lp_at..lp_at + lp_len];
        assert!(dumped.windows(lp.len()).any(|w| w == lp));
        rig.send(a, &cmd(&["DEL", key]));
        assert_eq!(rig.output_of(a), ":1\r\n");
    }
}
