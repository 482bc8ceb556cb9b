//! End-to-end replication with real processes on loopback, in both directions: a Kayvee
//! primary with a redis-server 7.0.15 replica, a redis-server primary with a Kayvee replica
//! (disk and diskless payloads), and a chain of three Kayvees, each under a redis-benchmark
//! write load, the link killed from either side mid-stream (the replica must come back with a
//! partial resync, counted in the primary's `sync_partial_ok`), and the datasets compared key
//! by key once the load stops and the offsets meet. (DEBUG DIGEST is not comparable across the
//! two servers: Kayvee's digest is its own.) Then a replica's own rules: read-only, stale
//! data, keys past their TTL kept until the primary's DEL.

use kayvee_tests::{tool_available, Server};
use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

/// How long the replica gets to catch up with the primary.
const CATCH_UP_MAX: Duration = Duration::from_secs(30);

fn conn(port: u16) -> redis::Connection {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("client");
    client.get_connection().expect("connect")
}

/// One INFO field.
fn info_field(con: &mut redis::Connection, section: &str, name: &str) -> Option<String> {
    let text: String = redis::cmd("INFO").arg(section).query(con).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .map(|v| v.trim().to_string())
}

/// A value in a comparable form (unordered collections sorted).
fn canon(con: &mut redis::Connection, key: &str) -> String {
    let ty: String = redis::cmd("TYPE").arg(key).query(con).unwrap();
    let q = |c: &str, args: &[&str], con: &mut redis::Connection| -> Vec<Vec<u8>> {
        let mut cmd = redis::cmd(c);
        cmd.arg(key);
        for a in args {
            cmd.arg(*a);
        }
        cmd.query(con).unwrap()
    };
    let mut parts = match ty.as_str() {
        "string" => vec![redis::cmd("GET").arg(key).query::<Vec<u8>>(con).unwrap()],
        "list" => q("LRANGE", &["0", "-1"], con),
        "set" => q("SMEMBERS", &[], con),
        "hash" => q("HGETALL", &[], con)
            .chunks(2)
            .map(|p| [p[0].clone(), b"=".to_vec(), p[1].clone()].concat())
            .collect(),
        "zset" => q("ZRANGE", &["0", "-1", "WITHSCORES"], con),
        other => vec![other.as_bytes().to_vec()],
    };
    if matches!(ty.as_str(), "set" | "hash") {
        parts.sort();
    }
    format!("{ty} {:?}", parts)
}

/// Every key of database 0 with its value.
fn dataset(port: u16) -> BTreeMap<String, String> {
    let mut con = conn(port);
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut con).unwrap();
    keys.into_iter()
        .map(|k| {
            let v = canon(&mut con, &k);
            (k, v)
        })
        .collect()
}

/// Waits until the replica has applied everything the primary produced.
fn wait_caught_up(primary: u16, replica: u16) {
    let (mut p, mut r) = (conn(primary), conn(replica));
    let start = Instant::now();
    loop {
        let ours = info_field(&mut p, "replication", "master_repl_offset");
        let theirs = info_field(&mut r, "replication", "slave_repl_offset");
        let up = info_field(&mut r, "replication", "master_link_status");
        if ours.is_some() && ours == theirs && up.as_deref() == Some("up") {
            return;
        }
        assert!(
            start.elapsed() < CATCH_UP_MAX,
            "replica never caught up: primary {ours:?}, replica {theirs:?}, link {up:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits for the replica's link to be up.
fn wait_link_up(replica: u16) {
    let mut r = conn(replica);
    let start = Instant::now();
    while info_field(&mut r, "replication", "master_link_status").as_deref() != Some("up") {
        assert!(
            start.elapsed() < CATCH_UP_MAX,
            "the replica's link never came up"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// redis-benchmark writes of several types against `port` (random keys among `keys`).
fn benchmark(port: u16, requests: u32, keys: u32) -> std::process::Child {
    Command::new("redis-benchmark")
        .args(["-p", &port.to_string(), "-q", "-n", &requests.to_string()])
        .args(["-r", &keys.to_string(), "-P", "4", "-c", "8"])
        .args([
            "-t",
            "set,incr,lpush,rpush,lpop,sadd,spop,hset,zadd,zpopmin",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("redis-benchmark")
}

/// A redis-server replica of `primary` in its own directory (a replica writes the RDB of a
/// full sync to `dir/dbfilename` before loading it: two replicas in one directory would load
/// each other's files).
fn redis_replica(primary: &Server, name: &str) -> Server {
    let dir = tmpdir(&format!("{name}-replica"));
    let port = primary.port().to_string();
    Server::redis(&["--dir", &dir, "--replicaof", "127.0.0.1", &port]).unwrap()
}

/// A Kayvee primary in its own empty directory (nothing to load at startup), whose full
/// syncs start without the default 5-second wait for more replicas.
fn kayvee_primary(name: &str) -> Server {
    let dir = tmpdir(&format!("{name}-primary"));
    Server::kayvee(&["--dir", &dir, "--repl-diskless-sync-delay", "0"]).unwrap()
}

/// A Kayvee replica of `primary` (any server) in its own directory, with `extra` options.
fn kayvee_replica(primary: &Server, name: &str, extra: &[&str]) -> Server {
    let dir = tmpdir(&format!("{name}-replica"));
    let port = primary.port().to_string();
    let mut args = vec![
        "--dir",
        dir.as_str(),
        "--replicaof",
        "127.0.0.1",
        port.as_str(),
        // A replica can be a primary too (a chain).
        "--repl-diskless-sync-delay",
        "0",
    ];
    args.extend_from_slice(extra);
    Server::kayvee(&args).unwrap()
}

/// A redis-server primary in its own directory; `diskless`: the `$EOF:` payload (else the
/// disk form, `$<len>`), sent without the default 5-second wait for more replicas.
fn redis_primary(name: &str, diskless: bool) -> Server {
    let dir = tmpdir(&format!("{name}-primary"));
    let mode = if diskless { "yes" } else { "no" };
    Server::redis(&[
        "--dir",
        &dir,
        "--repl-diskless-sync",
        mode,
        "--repl-diskless-sync-delay",
        "0",
        "--enable-debug-command",
        "yes",
        "--repl-backlog-size",
        "64mb",
    ])
    .unwrap()
}

/// CLIENT KILL TYPE `ty` on `port`; the number killed.
fn kill_type(port: u16, ty: &str) -> i64 {
    redis::cmd("CLIENT")
        .arg(&["KILL", "TYPE", ty])
        .query(&mut conn(port))
        .unwrap()
}

/// Removes a test's server directories (kept when it fails, for its files).
fn remove_dirs(name: &str) {
    for side in ["primary", "replica", "sub-replica"] {
        let _ = std::fs::remove_dir_all(tmpdir_path(&format!("{name}-{side}")));
    }
}

fn tmpdir_path(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("kayvee-repl-{}-{name}", std::process::id()))
}

/// A fresh empty directory for one server.
fn tmpdir(name: &str) -> String {
    let dir = tmpdir_path(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.to_string_lossy().into_owned()
}

fn have_tools() -> bool {
    tool_available("redis-server") && tool_available("redis-benchmark")
}

fn assert_same_data(primary: &Server, replica: &Server) {
    let (a, b) = (dataset(primary.port()), dataset(replica.port()));
    assert!(!a.is_empty(), "the load wrote nothing");
    let missing: Vec<_> = a.keys().filter(|k| !b.contains_key(*k)).take(5).collect();
    let extra: Vec<_> = b.keys().filter(|k| !a.contains_key(*k)).take(5).collect();
    let differ: Vec<_> = a
        .iter()
        .filter(|(k, v)| b.get(*k).is_some_and(|w| w != *v))
        .map(|(k, _)| k)
        .take(5)
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty() && differ.is_empty(),
        "datasets differ: missing {missing:?}, extra {extra:?}, different {differ:?}"
    );
}

#[test]
fn kayvee_primary_serves_a_redis_replica_full_then_partial_resyncs() {
    if !have_tools() {
        return;
    }
    let primary = kayvee_primary("partial");
    // Data before the replica exists: the full sync carries it.
    let mut pre = benchmark(primary.port(), 20_000, 2_000);
    assert!(pre.wait().unwrap().success());
    let replica = redis_replica(&primary, "partial");
    wait_link_up(replica.port());
    let mut load = benchmark(primary.port(), 200_000, 5_000);
    std::thread::sleep(Duration::from_millis(300));
    // The primary drops its replica, then the replica drops its primary: both come back
    // with a partial resync from the backlog.
    let mut p = conn(primary.port());
    let killed: i64 = redis::cmd("CLIENT")
        .arg(&["KILL", "TYPE", "replica"])
        .query(&mut p)
        .unwrap();
    assert_eq!(killed, 1);
    wait_link_up(replica.port());
    std::thread::sleep(Duration::from_millis(300));
    let mut r = conn(replica.port());
    let killed: i64 = redis::cmd("CLIENT")
        .arg(&["KILL", "TYPE", "master"])
        .query(&mut r)
        .unwrap();
    assert_eq!(killed, 1);
    assert!(load.wait().unwrap().success());
    wait_caught_up(primary.port(), replica.port());
    let full = info_field(&mut p, "stats", "sync_full");
    assert_eq!(full.as_deref(), Some("1"), "one full sync only");
    let partial = info_field(&mut p, "stats", "sync_partial_ok");
    assert_eq!(partial.as_deref(), Some("2"), "{}", replica.log_tail());
    assert_same_data(&primary, &replica);
    // ROLE lists the replica with its acknowledged offset.
    let role: redis::Value = redis::cmd("ROLE").query(&mut p).unwrap();
    let text = format!("{role:?}");
    assert!(text.contains("master"), "{text}");
    assert!(text.contains(&replica.port().to_string()), "{text}");
    drop((primary, replica));
    remove_dirs("partial");
}

/// INFO field `name` of `section` on `port`, as a number (0 when missing).
fn info_num(port: u16, section: &str, name: &str) -> u64 {
    info_field(&mut conn(port), section, name).map_or(0, |v| v.parse().unwrap_or(0))
}

#[test]
fn a_disk_based_full_sync_is_one_background_save_whose_file_every_waiting_replica_gets() {
    if !have_tools() {
        return;
    }
    let dir = tmpdir("disksync-primary");
    let primary = Server::kayvee(&["--dir", &dir, "--repl-diskless-sync", "no"]).unwrap();
    let mut pre = benchmark(primary.port(), 5_000, 2_000);
    assert!(pre.wait().unwrap().success());
    let mut p = conn(primary.port());
    let keys: u64 = redis::cmd("DBSIZE").query(&mut p).unwrap();
    // About two seconds of save: the second replica asks while it runs and shares it.
    let delay_us = 2_000_000 / keys.max(1);
    redis::cmd("CONFIG")
        .arg(&["SET", "rdb-key-save-delay", &delay_us.to_string()])
        .query::<()>(&mut p)
        .unwrap();
    let forks_before = info_num(primary.port(), "stats", "total_forks");
    // Ten commands of 20,000 requests each: it runs through both syncs.
    let mut load = benchmark(primary.port(), 20_000, 5_000);
    let redis_side = redis_replica(&primary, "disksync");
    wait_until("the save for the first replica", || {
        info_num(primary.port(), "persistence", "rdb_bgsave_in_progress") == 1
    });
    let kayvee_side = kayvee_replica(&primary, "disksync-k", &[]);
    assert!(load.wait().unwrap().success());
    wait_caught_up(primary.port(), redis_side.port());
    wait_caught_up(primary.port(), kayvee_side.port());
    assert_same_data(&primary, &redis_side);
    assert_same_data(&primary, &kayvee_side);
    // One save served both, and it is the primary's RDB file.
    let forks = info_num(primary.port(), "stats", "total_forks") - forks_before;
    assert_eq!(forks, 1, "{}", primary.log_tail());
    assert_eq!(info_num(primary.port(), "stats", "sync_full"), 2);
    let status = info_field(&mut p, "persistence", "rdb_last_bgsave_status");
    assert_eq!(status.as_deref(), Some("ok"));
    let saved = std::fs::metadata(std::path::Path::new(&dir).join("dump.rdb")).unwrap();
    assert!(saved.len() > 0);
    assert!(primary
        .log_text()
        .contains("Background saving terminated with success"));

    // A save no replica waits for any more stops when no save point asks for the file.
    redis::cmd("CONFIG")
        .arg(&["SET", "rdb-key-save-delay", "1000000"])
        .query::<()>(&mut p)
        .unwrap();
    redis::cmd("CONFIG")
        .arg(&["SET", "save", ""])
        .query::<()>(&mut p)
        .unwrap();
    let late = kayvee_replica(&primary, "disksync-late", &[]);
    wait_until("the save for the late replica", || {
        info_num(primary.port(), "persistence", "rdb_bgsave_in_progress") == 1
    });
    redis::cmd("REPLICAOF")
        .arg(&["NO", "ONE"])
        .query::<()>(&mut conn(late.port()))
        .unwrap();
    wait_until("the unwanted save to stop", || {
        info_num(primary.port(), "persistence", "rdb_bgsave_in_progress") == 0
    });
    assert!(primary.log_text().contains("no replica waits for it"));
    // The others still follow the stream.
    redis::cmd("SET")
        .arg(&["after", "stop"])
        .query::<()>(&mut p)
        .unwrap();
    wait_caught_up(primary.port(), redis_side.port());
    wait_caught_up(primary.port(), kayvee_side.port());
    drop((primary, redis_side, kayvee_side, late));
    for side in ["primary", "replica", "k-replica", "late-replica"] {
        let _ = std::fs::remove_dir_all(tmpdir_path(&format!("disksync-{side}")));
    }
}

#[test]
fn redis_replica_of_kayvee_gets_expiry_and_multi_exec_as_the_stream_sends_them() {
    if !have_tools() {
        return;
    }
    let primary = kayvee_primary("expiry");
    let replica = redis_replica(&primary, "expiry");
    wait_link_up(replica.port());
    let mut p = conn(primary.port());
    let () = redis::cmd("SET")
        .arg(&["gone", "1", "PX", "50"])
        .query(&mut p)
        .unwrap();
    let () = redis::cmd("SET")
        .arg(&["kept", "1", "EX", "1000"])
        .query(&mut p)
        .unwrap();
    redis::pipe()
        .atomic()
        .cmd("INCR")
        .arg("n")
        .cmd("SELECT")
        .arg("3")
        .cmd("RPUSH")
        .arg(&["l", "a", "b"])
        .query::<()>(&mut p)
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    // The primary's active expiry deletes `gone` and propagates a DEL.
    let start = Instant::now();
    let mut r = conn(replica.port());
    loop {
        let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut r).unwrap();
        if keys.len() == 2 {
            break;
        }
        assert!(
            start.elapsed() < CATCH_UP_MAX,
            "DEL of the expired key never came: {keys:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    wait_caught_up(primary.port(), replica.port());
    let ttl: i64 = redis::cmd("TTL").arg("kept").query(&mut r).unwrap();
    assert!((990..=1000).contains(&ttl), "{ttl}");
    let () = redis::cmd("SELECT").arg("3").query(&mut r).unwrap();
    let l: Vec<String> = redis::cmd("LRANGE")
        .arg(&["l", "0", "-1"])
        .query(&mut r)
        .unwrap();
    assert_eq!(l, ["a", "b"]);
    drop((primary, replica));
    remove_dirs("expiry");
}

#[test]
fn kayvee_replica_of_redis_under_load_with_both_payloads_and_partial_resyncs() {
    if !have_tools() || kayvee_tests::target_is_redis() || kayvee_tests::target_is_unikernel() {
        return;
    }
    for diskless in [false, true] {
        let name = if diskless { "r2k-diskless" } else { "r2k-disk" };
        let primary = redis_primary(name, diskless);
        let mut pre = benchmark(primary.port(), 20_000, 2_000);
        assert!(pre.wait().unwrap().success());
        let replica = kayvee_replica(&primary, name, &[]);
        wait_link_up(replica.port());
        let mut load = benchmark(primary.port(), 150_000, 5_000);
        std::thread::sleep(Duration::from_millis(300));
        // The replica drops its primary, then the primary drops its replica: both times the
        // replica comes back with PSYNC <replid> <offset+1> and gets +CONTINUE.
        assert_eq!(kill_type(replica.port(), "master"), 1);
        wait_link_up(replica.port());
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(kill_type(primary.port(), "replica"), 1);
        assert!(load.wait().unwrap().success());
        wait_caught_up(primary.port(), replica.port());
        let mut p = conn(primary.port());
        let full = info_field(&mut p, "stats", "sync_full");
        assert_eq!(full.as_deref(), Some("1"), "{}", replica.log_tail());
        let partial = info_field(&mut p, "stats", "sync_partial_ok");
        assert_eq!(partial.as_deref(), Some("2"), "{}", replica.log_tail());
        assert_same_data(&primary, &replica);
        let role: redis::Value = redis::cmd("ROLE").query(&mut conn(replica.port())).unwrap();
        let text = format!("{role:?}");
        assert!(
            text.contains("slave") && text.contains("connected"),
            "{text}"
        );
        drop((primary, replica));
        remove_dirs(name);
    }
}

#[test]
fn chained_kayvee_replicas_follow_a_kayvee_primary() {
    if !have_tools() || kayvee_tests::target_is_redis() || kayvee_tests::target_is_unikernel() {
        return;
    }
    let primary = kayvee_primary("chain");
    let mut pre = benchmark(primary.port(), 20_000, 2_000);
    assert!(pre.wait().unwrap().success());
    let replica = kayvee_replica(&primary, "chain", &[]);
    wait_link_up(replica.port());
    let dir = tmpdir("chain-sub-replica");
    let port = replica.port().to_string();
    let sub = Server::kayvee(&["--dir", &dir, "--replicaof", "127.0.0.1", &port]).unwrap();
    wait_link_up(sub.port());
    let mut load = benchmark(primary.port(), 100_000, 5_000);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(kill_type(replica.port(), "master"), 1);
    wait_link_up(replica.port());
    assert!(load.wait().unwrap().success());
    wait_caught_up(primary.port(), replica.port());
    wait_caught_up(primary.port(), sub.port());
    let partial = info_field(&mut conn(primary.port()), "stats", "sync_partial_ok");
    assert_eq!(partial.as_deref(), Some("1"), "{}", replica.log_tail());
    // The middle replica passes its primary's stream on as it came: same ID, same offsets.
    let id = |port| info_field(&mut conn(port), "replication", "master_replid");
    assert_eq!(id(primary.port()), id(sub.port()));
    assert_same_data(&primary, &replica);
    assert_same_data(&primary, &sub);
    drop((primary, replica, sub));
    remove_dirs("chain");
}

#[test]
fn a_replica_refuses_writes_keeps_expired_keys_and_serves_stale_data_as_configured() {
    if !have_tools() || kayvee_tests::target_is_redis() || kayvee_tests::target_is_unikernel() {
        return;
    }
    let primary = redis_primary("rules", true);
    let mut p = conn(primary.port());
    let () = redis::cmd("DEBUG")
        .arg(&["SET-ACTIVE-EXPIRE", "0"])
        .query(&mut p)
        .unwrap();
    let () = redis::cmd("SET")
        .arg(&["k", "v", "PX", "300"])
        .query(&mut p)
        .unwrap();
    let replica = kayvee_replica(&primary, "rules", &["--replica-serve-stale-data", "no"]);
    wait_link_up(replica.port());
    wait_caught_up(primary.port(), replica.port());
    let mut r = conn(replica.port());
    let err = redis::cmd("SET")
        .arg(&["a", "1"])
        .query::<()>(&mut r)
        .unwrap_err();
    assert!(format!("{err:?}").contains("read only replica"), "{err:?}");
    std::thread::sleep(Duration::from_millis(400));
    // Past its TTL: hidden from the replica's clients, but still there until the DEL.
    let v: Option<String> = redis::cmd("GET").arg("k").query(&mut r).unwrap();
    assert_eq!(v, None);
    let n: i64 = redis::cmd("DBSIZE").query(&mut r).unwrap();
    assert_eq!(n, 1);
    // A read on the primary expires it there and propagates the DEL.
    let _: Option<String> = redis::cmd("GET").arg("k").query(&mut p).unwrap();
    wait_caught_up(primary.port(), replica.port());
    let n: i64 = redis::cmd("DBSIZE").query(&mut r).unwrap();
    assert_eq!(n, 0);
    // The primary goes away: with replica-serve-stale-data no, data commands are refused.
    drop(primary);
    let start = Instant::now();
    loop {
        let got = redis::cmd("GET").arg("k").query::<Option<String>>(&mut r);
        if let Err(e) = got {
            assert!(
                format!("{e:?}").contains("Link with MASTER is down"),
                "{e:?}"
            );
            break;
        }
        assert!(start.elapsed() < CATCH_UP_MAX, "the link never went down");
        std::thread::sleep(Duration::from_millis(50));
    }
    let role: redis::Value = redis::cmd("ROLE").query(&mut r).unwrap();
    assert!(format!("{role:?}").contains("slave"));
    drop(replica);
    remove_dirs("rules");
}

/// One INFO field on a fresh connection.
fn info_of(port: u16, section: &str, name: &str) -> Option<String> {
    info_field(&mut conn(port), section, name)
}

/// Waits until `check` holds (bounded by [`CATCH_UP_MAX`]).
fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < CATCH_UP_MAX, "{what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn failover_hands_the_primary_role_to_a_caught_up_replica_without_a_full_sync() {
    if !have_tools() {
        return;
    }
    let primary = kayvee_primary("failover");
    let r1 = kayvee_replica(&primary, "failover", &[]);
    let r2 = kayvee_replica(&primary, "failover-b", &[]);
    wait_link_up(r1.port());
    wait_link_up(r2.port());
    let mut p = conn(primary.port());
    // min-replicas-to-write: two good replicas let writes through, three do not.
    let set = |con: &mut redis::Connection, v: &str| -> redis::RedisResult<()> {
        redis::cmd("SET").arg(&["mr", v]).query(con)
    };
    let config_set = |con: &mut redis::Connection, name: &str, v: &str| {
        let () = redis::cmd("CONFIG")
            .arg(&["SET", name, v])
            .query(con)
            .unwrap();
    };
    config_set(&mut p, "min-replicas-to-write", "2");
    wait_until("two good replicas", || {
        info_of(primary.port(), "replication", "min_slaves_good_slaves").as_deref() == Some("2")
    });
    set(&mut p, "1").unwrap();
    config_set(&mut p, "min-replicas-to-write", "3");
    let refused = set(&mut p, "2").unwrap_err();
    assert_eq!(refused.code(), Some("NOREPLICAS"), "{refused}");
    config_set(&mut p, "min-replicas-to-write", "0");

    let mut load = benchmark(primary.port(), 20_000, 2_000);
    assert!(load.wait().unwrap().success());
    let r1_port = r1.port().to_string();
    let () = redis::cmd("FAILOVER")
        .arg(&["TO", "127.0.0.1", &r1_port])
        .query(&mut p)
        .unwrap();
    wait_until("the failover ends", || {
        info_of(primary.port(), "replication", "master_failover_state").as_deref()
            == Some("no-failover")
    });
    assert_eq!(
        info_of(r1.port(), "replication", "role").as_deref(),
        Some("master")
    );
    assert_eq!(
        info_of(primary.port(), "replication", "master_port").as_deref(),
        Some(r1_port.as_str())
    );
    // The other replica follows the new primary: partial resyncs only, on both.
    let () = redis::cmd("REPLICAOF")
        .arg(&["127.0.0.1", &r1_port])
        .query(&mut conn(r2.port()))
        .unwrap();
    wait_caught_up(r1.port(), primary.port());
    wait_caught_up(r1.port(), r2.port());
    assert_eq!(
        info_of(r1.port(), "stats", "sync_partial_ok").as_deref(),
        Some("2"),
        "{}\n{}",
        r1.log_tail(),
        primary.log_tail()
    );
    assert_eq!(
        info_of(r1.port(), "stats", "sync_full").as_deref(),
        Some("0")
    );
    assert_same_data(&r1, &primary);
    assert_same_data(&r1, &r2);
    // The old primary refuses writes now.
    let refused = set(&mut p, "3").unwrap_err();
    assert_eq!(refused.code(), Some("READONLY"), "{refused}");
    drop((primary, r1, r2));
    remove_dirs("failover");
    remove_dirs("failover-b");
}

#[test]
fn messages_published_on_the_primary_reach_the_replicas_subscribers() {
    if !have_tools() || kayvee_tests::target_is_unikernel() {
        return;
    }
    let primary = kayvee_primary("publish");
    let kayvee = kayvee_replica(&primary, "publish-kayvee", &[]);
    let redis = redis_replica(&primary, "publish-redis");
    let mut subscribers = Vec::new();
    for replica in [&kayvee, &redis] {
        wait_link_up(replica.port());
        let con = conn(replica.port());
        con.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        subscribers.push(con);
    }
    let mut pubsubs: Vec<_> = subscribers.iter_mut().map(|c| c.as_pubsub()).collect();
    for ps in &mut pubsubs {
        ps.subscribe("news").unwrap();
    }
    let mut p = conn(primary.port());
    let _: i64 = redis::cmd("PUBLISH")
        .arg("news")
        .arg("alone")
        .query(&mut p)
        .unwrap();
    // Inside a transaction too (Redis propagates it to the replicas only, never the AOF).
    let _: () = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("k")
        .arg("v")
        .ignore()
        .cmd("PUBLISH")
        .arg("news")
        .arg("in-multi")
        .ignore()
        .query(&mut p)
        .unwrap();
    for ps in &mut pubsubs {
        for expected in ["alone", "in-multi"] {
            let msg = ps.get_message().expect("the primary's message");
            assert_eq!(msg.get_channel_name(), "news");
            assert_eq!(msg.get_payload::<String>().unwrap(), expected);
        }
    }
    drop(pubsubs);
    drop((primary, kayvee, redis));
    remove_dirs("publish");
    remove_dirs("publish-kayvee");
    remove_dirs("publish-redis");
}

/// A replica working through a primary's flood still serves its own clients: the test plays
/// the primary (the handshake, an empty RDB, then tens of megabytes of SETs written as fast as
/// the socket takes them, `SET flood-done 1` last), and a client's PING to the replica must
/// be answered while the flood is still being applied. Found with a Kayvee replica of a
/// loaded primary: after its full sync it kept reading the buffered stream until the socket
/// was empty, and INFO waited 14 s. (`KAYVEE_TARGET=redis`: redis-server, which reads 16 KiB
/// a client per event loop turn, passes it too.)
/// Plays a primary's side of the handshake on the replica's connection to `listener`: `+PONG`
/// to PING, `+OK` to every REPLCONF, up to PSYNC (or SYNC). Returns the link's two halves.
fn fake_primary_handshake(
    listener: &std::net::TcpListener,
) -> (std::io::BufReader<std::net::TcpStream>, std::net::TcpStream) {
    use std::io::{BufRead, BufReader, Read, Write};
    let (link, _) = listener.accept().expect("the replica connects");
    link.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut reader = BufReader::new(link.try_clone().unwrap());
    let mut writer = link;
    // The handshake: PING, REPLCONF..., then PSYNC (RESP arrays).
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).expect("a handshake command");
        let argc: usize = header
            .trim_start_matches('*')
            .trim()
            .parse()
            .expect("an array");
        let mut args = Vec::new();
        for _ in 0..argc {
            let mut len = String::new();
            reader.read_line(&mut len).unwrap();
            let len: usize = len.trim_start_matches('$').trim().parse().unwrap();
            let mut arg = vec![0u8; len + 2];
            reader.read_exact(&mut arg).unwrap();
            arg.truncate(len);
            args.push(String::from_utf8_lossy(&arg).to_uppercase());
        }
        match args[0].as_str() {
            "PING" => writer.write_all(b"+PONG\r\n").unwrap(),
            "PSYNC" | "SYNC" => return (reader, writer),
            _ => writer.write_all(b"+OK\r\n").unwrap(),
        }
    }
}

/// A kayvee-server replica (in `<name>-replica`) of a primary the test plays, past the
/// handshake: the link's two halves. None where the replica cannot reach the test on
/// loopback (the image's link comes from 10.0.2.2) or the server is not there.
fn replica_of_a_fake_primary(
    name: &str,
) -> Option<(
    Server,
    std::io::BufReader<std::net::TcpStream>,
    std::net::TcpStream,
)> {
    if kayvee_tests::target_is_unikernel() {
        eprintln!("skipped: the image's replica link reaches the host as 10.0.2.2, not loopback");
        return None;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the fake primary");
    let primary_port = listener.local_addr().unwrap().port().to_string();
    let dir = tmpdir(&format!("{name}-replica"));
    let replica = Server::kayvee(&["--dir", &dir, "--replicaof", "127.0.0.1", &primary_port])?;
    let (reader, writer) = fake_primary_handshake(&listener);
    Some((replica, reader, writer))
}

/// A replica loading a big payload answers its clients meanwhile (`-LOADING`, as Redis
/// serves events every 2 MB of a load), then holds every key and runs the stream that came
/// after the payload.
#[test]
fn a_replica_loading_its_primarys_payload_answers_loading_meanwhile() {
    use std::io::{Read, Write};
    let Some((replica, mut reader, mut writer)) = replica_of_a_fake_primary("loading") else {
        return;
    };
    // An RDB 10 of KEYS strings (no checksum: eight zero bytes), sent "to disk" ($<len>).
    const KEYS: usize = 400_000;
    let mut rdb = b"REDIS0010".to_vec();
    let value = [b'v'; 40];
    for i in 0..KEYS {
        let key = format!("load:{i}");
        rdb.push(0); // a string
        rdb.push(key.len() as u8);
        rdb.extend_from_slice(key.as_bytes());
        rdb.push(value.len() as u8);
        rdb.extend_from_slice(&value);
    }
    rdb.extend_from_slice(b"\xff\0\0\0\0\0\0\0\0");
    let replid = "e".repeat(40);
    let mut client = replica.conn();
    client.set_timeout(Duration::from_secs(60));
    let last = format!("load:{}", KEYS - 1);
    assert_eq!(client.cmd_str(&["GET", &last]), b"$-1\r\n");
    let primary = std::thread::spawn(move || {
        let mut all = format!("+FULLRESYNC {replid} 0\r\n${}\r\n", rdb.len()).into_bytes();
        all.extend_from_slice(&rdb);
        // The stream after the payload: applied once it is loaded.
        all.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$10\r\nafter-load\r\n$1\r\n1\r\n");
        writer.write_all(&all).expect("send the payload");
        // Keeps the link open until the test ends.
        let _ = reader.read(&mut [0u8; 1]);
    });
    let loading = b"-LOADING Redis is loading the dataset in memory\r\n".to_vec();
    let (mut seen_loading, t0) = (0, Instant::now());
    loop {
        let reply = client.cmd_str(&["GET", &last]);
        if reply == loading {
            seen_loading += 1;
        } else if reply != b"$-1\r\n" {
            assert_eq!(reply, format!("$40\r\n{}\r\n", "v".repeat(40)).into_bytes());
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the payload never loaded"
        );
    }
    assert!(
        seen_loading > 0,
        "no command was answered while the payload loaded"
    );
    eprintln!("{seen_loading} GETs answered -LOADING");
    wait_until("the stream after the payload never ran", || {
        client.cmd_str(&["GET", "after-load"]) == b"$1\r\n1\r\n"
    });
    assert_eq!(
        client.cmd_str(&["DBSIZE"]),
        format!(":{}\r\n", KEYS + 1).into_bytes()
    );
    assert_eq!(client.info_field::<String>("persistence", "loading"), "0");
    drop(replica);
    let _ = primary.join();
    remove_dirs("loading");
}

#[test]
fn a_replica_applying_a_flood_from_its_primary_still_answers_its_clients() {
    use std::io::{Read, Write};
    let Some((replica, mut reader, mut writer)) = replica_of_a_fake_primary("flood") else {
        return;
    };
    // An empty RDB 10 (no checksum: eight zero bytes), then the flood.
    let rdb: &[u8] = b"REDIS0010\xff\0\0\0\0\0\0\0\0";
    let replid = "f".repeat(40);
    writer
        .write_all(format!("+FULLRESYNC {replid} 0\r\n${}\r\n", rdb.len()).as_bytes())
        .unwrap();
    writer.write_all(rdb).unwrap();
    let mut block = Vec::new();
    for i in 0..20_000 {
        let key = format!("flood:{i}");
        block.extend_from_slice(
            format!(
                "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n$5\r\nvalue\r\n",
                key.len()
            )
            .as_bytes(),
        );
    }
    // About 100 MB: far longer to apply than a PING takes to answer.
    const BLOCKS: usize = 150;
    let flood = std::thread::spawn(move || {
        for _ in 0..BLOCKS {
            if writer.write_all(&block).is_err() {
                return;
            }
        }
        let _ = writer.write_all(b"*3\r\n$3\r\nSET\r\n$10\r\nflood-done\r\n$1\r\n1\r\n");
        // Keeps the link open until the test ends.
        let _ = reader.read(&mut [0u8; 1]);
    });
    let mut client = replica.conn();
    client.set_timeout(Duration::from_secs(60));
    // The flood is under way once the replica has applied some of it.
    let t0 = Instant::now();
    while client.cmd_str(&["EXISTS", "flood:19999"]) != b":1\r\n" {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the flood never arrived"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(client.cmd_str(&["PING"]), b"+PONG\r\n");
    let done = client.cmd_str(&["GET", "flood-done"]);
    assert_eq!(
        done, b"$-1\r\n",
        "the replica answered only after applying the whole flood"
    );
    drop(replica);
    let _ = flood.join();
    remove_dirs("flood");
}

/// `repl-sync-share` (Kayvee's own): a full sync paced to a twentieth of a busy primary's
/// loop, under a write load from redis-benchmark, still ends with a redis-server replica that
/// holds exactly the primary's data (the held and resumed pieces of the payload, the stream
/// kept meanwhile); the parameter reads back and refuses values outside 1..=100.
#[test]
fn a_full_sync_paced_to_a_share_of_a_busy_primary_ends_with_the_same_data() {
    if !have_tools() || std::env::var("KAYVEE_TARGET").is_ok() {
        return; // Kayvee's own parameter: redis-server and the unikernel's tests lack it.
    }
    let primary = kayvee_primary("paced");
    let mut p = conn(primary.port());
    let set = |con: &mut redis::Connection, v: &str| {
        redis::cmd("CONFIG")
            .arg(&["SET", "repl-sync-share", v])
            .query::<String>(con)
    };
    assert_eq!(set(&mut p, "5").unwrap(), "OK");
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg(&["GET", "repl-sync-share"])
        .query(&mut p)
        .unwrap();
    assert_eq!(got, ["repl-sync-share", "5"]);
    for bad in ["0", "101"] {
        let err = set(&mut p, bad).unwrap_err().to_string();
        assert!(err.contains("must be between 1 and 100"), "{err}");
    }
    let mut pre = benchmark(primary.port(), 40_000, 10_000);
    assert!(pre.wait().unwrap().success());
    let mut load = benchmark(primary.port(), 60_000, 10_000);
    std::thread::sleep(Duration::from_millis(200));
    let replica = redis_replica(&primary, "paced");
    wait_link_up(replica.port());
    assert!(load.wait().unwrap().success());
    wait_caught_up(primary.port(), replica.port());
    let full = info_field(&mut p, "stats", "sync_full");
    assert_eq!(full.as_deref(), Some("1"), "{}", replica.log_tail());
    assert_same_data(&primary, &replica);
    drop((primary, replica));
    remove_dirs("paced");
}
