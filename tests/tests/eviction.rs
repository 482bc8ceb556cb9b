//! The memory limit end to end against kayvee-server (`KAYVEE_TARGET=redis` runs the same
//! checks against redis-server 7.0.15): a few megabytes of `maxmemory` over what the idle
//! server uses, filled with 1 KB values. noeviction answers the OOM error; allkeys-lru keeps
//! used memory near the limit and keeps recently read keys; volatile-lru evicts only keys with
//! a TTL and then refuses; allkeys-lfu keeps frequently read keys; `evicted_keys` counts.
//! Bounds are statistical and generous (eviction samples keys at random).

use std::time::Duration;

use kayvee_tests::{encode_command, show, Conn, Server};

/// Bytes of every value written.
const VALUE_LEN: usize = 1000;
/// Commands sent per pipelined batch.
const BATCH: usize = 100;
/// The OOM reply, exactly as Redis 7.0.15 sends it.
const OOM: &str = "-OOM command not allowed when used memory > 'maxmemory'.\\r\\n";

fn server() -> Option<Server> {
    Server::kayvee(&[])
}

/// Sends the commands in pipelined batches; returns every reply, shown.
fn pipeline(c: &mut Conn, cmds: &[Vec<String>]) -> Vec<String> {
    let mut replies = Vec::with_capacity(cmds.len());
    for chunk in cmds.chunks(BATCH) {
        let mut bytes = Vec::new();
        for cmd in chunk {
            let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
            bytes.extend_from_slice(&encode_command(&args));
        }
        c.send(&bytes).unwrap();
        for _ in chunk {
            replies.push(show(&c.read_reply().unwrap()));
        }
    }
    replies
}

/// `SET prefix:i <1 KB>` for `i` in `range`, with extra arguments appended.
fn sets(prefix: &str, range: std::ops::Range<usize>, extra: &[&str]) -> Vec<Vec<String>> {
    let value = "v".repeat(VALUE_LEN);
    range
        .map(|i| {
            let mut cmd = vec!["SET".to_string(), format!("{prefix}:{i}"), value.clone()];
            cmd.extend(extra.iter().map(|s| s.to_string()));
            cmd
        })
        .collect()
}

/// `cmd prefix:i` for `i` in `range`.
fn per_key(cmd: &str, prefix: &str, range: std::ops::Range<usize>) -> Vec<Vec<String>> {
    range
        .map(|i| vec![cmd.to_string(), format!("{prefix}:{i}")])
        .collect()
}

/// How many of `prefix:0..n` still exist.
fn surviving(c: &mut Conn, prefix: &str, n: usize) -> usize {
    pipeline(c, &per_key("EXISTS", prefix, 0..n))
        .iter()
        .filter(|r| *r == ":1\\r\\n")
        .count()
}

/// Runs a command and checks it answered `+OK`.
fn ok(c: &mut Conn, args: &[&str]) {
    assert_eq!(show(&c.cmd_str(args)), "+OK\\r\\n", "{args:?}");
}

/// Sets the limit to what the server uses now plus `extra_bytes`, with `policy`.
fn limit_above_now(c: &mut Conn, extra_bytes: u64, policy: &str) -> u64 {
    let limit = c.info_field::<u64>("everything", "used_memory") + extra_bytes;
    ok(c, &["CONFIG", "SET", "maxmemory-policy", policy]);
    ok(c, &["CONFIG", "SET", "maxmemory", &limit.to_string()]);
    limit
}

/// Lifts the limit before the test counts what survived: every command, EXISTS and INFO
/// included, may evict while used memory is over the limit, and used memory moves by a few
/// KiB with the connection's own buffers (Redis counts them alike), so keys counted as present
/// could be evicted by the count that follows.
fn lift_limit(c: &mut Conn) {
    ok(c, &["CONFIG", "SET", "maxmemory", "0"]);
}

/// The index of the first `-OOM` reply (the test fails if there is none).
fn first_refusal(replies: &[String]) -> usize {
    replies
        .iter()
        .position(|r| r == OOM)
        .expect("never refused")
}

#[test]
fn noeviction_refuses_writes_but_serves_reads_and_deletes() {
    let Some(server) = server() else { return };
    let mut c = server.conn();
    ok(&mut c, &["SET", "kept", "1"]);
    limit_above_now(&mut c, 2 << 20, "noeviction");
    let replies = pipeline(&mut c, &sets("k", 0..6000, &[]));
    let first_oom = first_refusal(&replies);
    assert!(first_oom > 500, "refused too early: {first_oom}");
    // Once refused, writes stay refused but for a few: the counted memory can fall back
    // under the limit when the cron shrinks a connection's buffers (Redis counts client
    // buffers in used_memory too, and frees them alike). Those are tens of KiB, against the
    // 2 MiB that `first_oom` writes filled.
    let after = &replies[first_oom..];
    assert!(after.iter().all(|r| r == OOM || r == "+OK\\r\\n"));
    let accepted = after.iter().filter(|r| *r != OOM).count();
    assert!(
        accepted <= first_oom / 16 + 8,
        "{accepted} of {} writes after the first refusal (at {first_oom}) were accepted",
        after.len()
    );
    assert_eq!(show(&c.cmd_str(&["GET", "kept"])), "$1\\r\\n1\\r\\n");
    assert_eq!(show(&c.cmd_str(&["INCR", "kept"])), OOM, "INCR is denyoom");
    assert_eq!(c.info_field::<u64>("everything", "evicted_keys"), 0);
    // Deleting makes room again.
    let deleted = pipeline(&mut c, &per_key("DEL", "k", 0..first_oom));
    assert!(deleted.iter().all(|r| r == ":1\\r\\n"));
    assert_eq!(show(&c.cmd_str(&["SET", "again", "1"])), "+OK\\r\\n");
}

#[test]
fn allkeys_lru_stays_near_the_limit_and_keeps_recently_read_keys() {
    let Some(server) = server() else { return };
    let mut c = server.conn();
    let (hot, cold, fresh) = (500, 2500, 2000);
    pipeline(&mut c, &sets("hot", 0..hot, &[]));
    pipeline(&mut c, &sets("cold", 0..cold, &[]));
    let limit = limit_above_now(&mut c, 1 << 20, "allkeys-lru");
    // LRU clocks tick in seconds (Kayvee) or milliseconds (Redis): let the writes age.
    std::thread::sleep(Duration::from_millis(1100));
    pipeline(&mut c, &per_key("GET", "hot", 0..hot));
    let replies = pipeline(&mut c, &sets("fresh", 0..fresh, &[]));
    assert!(
        replies.iter().all(|r| r == "+OK\\r\\n"),
        "a write was refused"
    );
    let used = c.info_field::<u64>("everything", "used_memory");
    assert!(used <= limit + (64 << 10), "used {used} over limit {limit}");
    assert!(
        used >= limit - (2 << 20),
        "used {used} far under limit {limit}"
    );
    lift_limit(&mut c);
    let (hot_left, cold_left) = (
        surviving(&mut c, "hot", hot),
        surviving(&mut c, "cold", cold),
    );
    let fresh_left = surviving(&mut c, "fresh", fresh);
    let evicted = c.info_field::<u64>("everything", "evicted_keys") as usize;
    assert!(evicted >= 1000, "only {evicted} evicted");
    assert_eq!(
        evicted,
        hot + cold + fresh - hot_left - cold_left - fresh_left
    );
    let hot_rate = hot_left as f64 / hot as f64;
    let cold_rate = cold_left as f64 / cold as f64;
    assert!(
        hot_rate >= 0.9,
        "hot kept {hot_rate}, cold kept {cold_rate}"
    );
    assert!(
        hot_rate > cold_rate + 0.2,
        "hot {hot_rate} cold {cold_rate}"
    );
}

#[test]
fn volatile_lru_evicts_only_keys_with_a_ttl_then_refuses() {
    let Some(server) = server() else { return };
    let mut c = server.conn();
    let volatile = 1000;
    pipeline(&mut c, &sets("ttl", 0..volatile, &["EX", "1000"]));
    limit_above_now(&mut c, 1 << 20, "volatile-lru");
    let replies = pipeline(&mut c, &sets("plain", 0..8000, &[]));
    let first_oom = first_refusal(&replies);
    assert!(first_oom > 1000, "refused too early: {first_oom}");
    assert!(replies[..first_oom].iter().all(|r| r == "+OK\\r\\n"));
    lift_limit(&mut c);
    assert_eq!(surviving(&mut c, "plain", first_oom), first_oom);
    let ttl_left = surviving(&mut c, "ttl", volatile);
    assert!(ttl_left < volatile / 10, "{ttl_left} keys with a TTL left");
    assert_eq!(
        c.info_field::<u64>("everything", "evicted_keys") as usize,
        volatile - ttl_left
    );
}

#[test]
fn allkeys_lfu_keeps_frequently_read_keys() {
    let Some(server) = server() else { return };
    let mut c = server.conn();
    let (hot, cold, fresh) = (500, 2500, 2000);
    pipeline(&mut c, &sets("hot", 0..hot, &[]));
    pipeline(&mut c, &sets("cold", 0..cold, &[]));
    limit_above_now(&mut c, 1 << 20, "allkeys-lfu");
    for _ in 0..10 {
        pipeline(&mut c, &per_key("GET", "hot", 0..hot));
    }
    let freq = show(&c.cmd_str(&["OBJECT", "FREQ", "hot:0"]));
    assert!(freq != ":5\\r\\n" && freq.starts_with(':'), "{freq}");
    pipeline(&mut c, &sets("fresh", 0..fresh, &[]));
    lift_limit(&mut c);
    let hot_rate = surviving(&mut c, "hot", hot) as f64 / hot as f64;
    let cold_rate = surviving(&mut c, "cold", cold) as f64 / cold as f64;
    assert!(
        hot_rate >= 0.9,
        "hot kept {hot_rate}, cold kept {cold_rate}"
    );
    assert!(
        hot_rate > cold_rate + 0.2,
        "hot {hot_rate} cold {cold_rate}"
    );
    assert!(c.info_field::<u64>("everything", "evicted_keys") >= 1000);
}
