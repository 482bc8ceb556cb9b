//! End-to-end persistence: Kayvee's RDB files pass `redis-check-rdb` and load into
//! redis-server 7.0.15 with the same data; Redis 7.0's dumps (every encoding) load into
//! Kayvee; DUMP/RESTORE payloads cross between the two; BGSAVE writes the state of the moment
//! it started while a client keeps writing; SHUTDOWN SAVE and restart; corrupt files stop the
//! start; a failing background save turns on MISCONF; BGSAVE writes from a child process that a
//! SIGKILL fails cleanly, into a file holding what SAVE writes.

use kayvee_tests::{redis_required, tool_available, Conn, Server};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// A fresh empty directory for one test.
fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kayvee-persist-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Whether redis-server and redis-check-rdb are here (skip otherwise, unless required).
fn have_redis() -> bool {
    let ok = tool_available("redis-server") && tool_available("redis-check-rdb");
    assert!(
        ok || !redis_required(),
        "redis-server / redis-check-rdb missing"
    );
    ok
}

/// The payload of a bulk string reply.
fn bulk(reply: &[u8]) -> Vec<u8> {
    assert_eq!(reply[0], b'$', "not a bulk: {}", kayvee_tests::show(reply));
    let nl = reply.iter().position(|&b| b == b'\n').unwrap();
    let n: usize = std::str::from_utf8(&reply[1..nl - 1])
        .unwrap()
        .parse()
        .unwrap();
    reply[nl + 1..nl + 1 + n].to_vec()
}

/// A key's type and content in a comparable form (unordered replies sorted).
fn canon(c: &mut Conn, key: &str) -> String {
    let ty = String::from_utf8(c.cmd_str(&["TYPE", key])).unwrap();
    let (cmd, sort): (&[&str], bool) = match ty.trim() {
        "+string" => (&["GET"], false),
        "+list" => (&["LRANGE", "$", "0", "-1"], false),
        "+set" => (&["SMEMBERS"], true),
        "+hash" => (&["HGETALL"], true),
        "+zset" => (&["ZRANGE", "$", "0", "-1", "WITHSCORES"], false),
        other => return other.to_string(),
    };
    let mut args: Vec<&str> = vec![cmd[0], key];
    args.extend(cmd.iter().skip(2));
    let reply = c.cmd_str(&args);
    let mut parts: Vec<&[u8]> = reply.split(|&b| b == b'\n').collect();
    if sort {
        parts.sort();
    }
    format!("{ty} {}", kayvee_tests::show(&parts.concat()))
}

/// Fills a redis-server with every type in every encoding 7.0 has, plus TTLs.
fn fill_reference(c: &mut Conn) -> Vec<String> {
    let mut keys = Vec::new();
    let mut run = |args: Vec<String>| {
        keys.push(args[1].clone());
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = c.cmd_str(&a);
        assert!(!r.starts_with(b"-"), "{args:?}: {}", kayvee_tests::show(&r));
    };
    let nums = |n: u32, p: &str| (1..=n).map(|i| format!("{p}{i}")).collect::<Vec<_>>();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    run(s(&["SET", "str", "hello"]));
    run(s(&["SET", "int", "12345"]));
    run(s(&["SET", "bigint", "3000000000"]));
    run([s(&["SET", "long"]), vec!["abc".repeat(300)]].concat());
    run(s(&["SET", "ttl", "v", "PX", "900000"]));
    run(s(&["RPUSH", "list", "a", "b", "1", "2"]));
    run([s(&["RPUSH", "biglist"]), nums(3000, "")].concat());
    run([
        s(&["RPUSH", "hugeelem"]),
        vec!["L".repeat(9000), "x".into()],
    ]
    .concat());
    run(s(&["SADD", "iset", "1", "2", "3"]));
    run([s(&["SADD", "bigset"]), nums(700, "")].concat());
    run(s(&["SADD", "strset", "a", "b", "c"]));
    run(s(&["HSET", "hash", "f", "v", "n", "7"]));
    let pairs: Vec<String> = (1..=600)
        .flat_map(|i| [format!("f{i}"), format!("v{i}")])
        .collect();
    run([s(&["HSET", "bighash"]), pairs].concat());
    run([s(&["HSET", "longhash", "f"]), vec!["q".repeat(100)]].concat());
    run(s(&["ZADD", "zset", "1.5", "a", "2", "b", "-inf", "c"]));
    let members: Vec<String> = (1..=300)
        .flat_map(|i| [format!("{}.25", i), format!("m{i}")])
        .collect();
    run([s(&["ZADD", "bigzset"]), members].concat());
    run(s(&["EXPIRE", "bigzset", "5000"]));
    keys.pop();
    keys
}

/// Waits until INFO persistence says no background save runs.
fn wait_bgsave(c: &mut Conn) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while String::from_utf8_lossy(&c.cmd_str(&["INFO", "persistence"]))
        .contains("rdb_bgsave_in_progress:1")
    {
        assert!(Instant::now() < deadline, "BGSAVE never finished");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn check_rdb(path: &std::path::Path) {
    let out = Command::new("redis-check-rdb").arg(path).output().unwrap();
    assert!(
        out.status.success(),
        "redis-check-rdb: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn redis_dump_loads_into_kayvee_and_kayvee_rdb_loads_into_redis() {
    if !have_redis() {
        return;
    }
    let rdir = tmpdir("redis-src");
    let rd = rdir.to_str().unwrap();
    let reference = Server::redis(&["--dir", rd, "--dbfilename", "dump.rdb"]).unwrap();
    let mut r = reference.conn();
    let keys = fill_reference(&mut r);
    assert_eq!(r.cmd_str(&["SAVE"]), b"+OK\r\n");
    // Kayvee starts from Redis's own dump.
    let kdir = tmpdir("kayvee");
    std::fs::copy(rdir.join("dump.rdb"), kdir.join("dump.rdb")).unwrap();
    let kd = kdir.to_str().unwrap();
    let kayvee = Server::kayvee(&["--dir", kd, "--save", ""]).unwrap();
    let mut k = kayvee.conn();
    assert_eq!(k.cmd_str(&["DBSIZE"]), r.cmd_str(&["DBSIZE"]));
    for key in &keys {
        // Kayvee's DUMP restored into Redis must equal Redis's own key (any type).
        let payload = bulk(&k.cmd_str(&["DUMP", key]));
        let copy = format!("copy:{key}");
        let reply = r
            .cmd(&[b"RESTORE", copy.as_bytes(), b"0", &payload])
            .unwrap();
        assert_eq!(reply, b"+OK\r\n", "{key}");
        assert_eq!(canon(&mut r, key), canon(&mut r, &copy), "{key}");
        r.cmd_str(&["DEL", &copy]);
        let ttl = |c: &mut Conn| String::from_utf8(c.cmd_str(&["TTL", key])).unwrap();
        let (kt, rt) = (ttl(&mut k), ttl(&mut r));
        assert_eq!(kt == ":-1\r\n", rt == ":-1\r\n", "{key} TTL {kt} vs {rt}");
        let enc = |c: &mut Conn| c.cmd_str(&["OBJECT", "ENCODING", key]);
        assert_eq!(enc(&mut k), enc(&mut r), "{key} encoding");
    }
    // Strings DUMP byte for byte as Redis does.
    for key in ["str", "int", "bigint", "long"] {
        assert_eq!(
            k.cmd_str(&["DUMP", key]),
            r.cmd_str(&["DUMP", key]),
            "{key}"
        );
    }
    // Kayvee saves; the file passes redis-check-rdb and a fresh Redis loads the same data.
    k.cmd_str(&["SELECT", "5"]);
    k.cmd_str(&["SET", "in5", "five"]);
    assert_eq!(k.cmd_str(&["SAVE"]), b"+OK\r\n");
    check_rdb(&kdir.join("dump.rdb"));
    let bdir = tmpdir("redis-back");
    std::fs::copy(kdir.join("dump.rdb"), bdir.join("dump.rdb")).unwrap();
    let back =
        Server::redis(&["--dir", bdir.to_str().unwrap(), "--dbfilename", "dump.rdb"]).unwrap();
    let mut b = back.conn();
    for key in &keys {
        assert_eq!(
            canon(&mut b, key),
            canon(&mut r, key),
            "{key} after the round trip"
        );
    }
    assert_eq!(
        b.cmd_str(&["TTL", "ttl"]).len(),
        r.cmd_str(&["TTL", "ttl"]).len()
    );
    b.cmd_str(&["SELECT", "5"]);
    assert_eq!(b.cmd_str(&["GET", "in5"]), b"$4\r\nfive\r\n");
    for d in [rdir, kdir, bdir] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn restore_checks_like_redis() {
    let kayvee = Server::kayvee(&["--save", ""]).unwrap();
    let mut k = kayvee.conn();
    let good: &[u8] = b"\x00\x05hello\n\x00cr\xdfve4 \n";
    assert_eq!(k.cmd(&[b"RESTORE", b"a", b"0", good]).unwrap(), b"+OK\r\n");
    assert_eq!(
        k.cmd(&[b"RESTORE", b"a", b"0", good]).unwrap(),
        b"-BUSYKEY Target key name already exists.\r\n"
    );
    let mut bad = good.to_vec();
    bad[3] ^= 1;
    assert_eq!(
        k.cmd(&[b"RESTORE", b"b", b"0", &bad]).unwrap(),
        b"-ERR DUMP payload version or checksum are wrong\r\n"
    );
    assert_eq!(
        k.cmd(&[
            b"RESTORE",
            b"a",
            b"5000",
            good,
            b"REPLACE",
            b"IDLETIME",
            b"100"
        ])
        .unwrap(),
        b"+OK\r\n"
    );
    assert_eq!(k.cmd_str(&["OBJECT", "IDLETIME", "a"]), b":100\r\n");
    let pttl = String::from_utf8(k.cmd_str(&["PTTL", "a"])).unwrap();
    assert!(pttl.starts_with(":4") || pttl.starts_with(":5"), "{pttl}");
    assert_eq!(
        k.cmd(&[
            b"RESTORE",
            b"c",
            b"0",
            good,
            b"IDLETIME",
            b"1",
            b"FREQ",
            b"2"
        ])
        .unwrap(),
        b"-ERR syntax error\r\n"
    );
    assert_eq!(
        k.cmd(&[b"RESTORE", b"c", b"-1", good]).unwrap(),
        b"-ERR Invalid TTL value, must be >= 0\r\n"
    );
    assert_eq!(
        k.cmd(&[b"RESTORE", b"c", b"1000", good, b"ABSTTL"])
            .unwrap(),
        b"+OK\r\n"
    );
    assert_eq!(k.cmd_str(&["EXISTS", "c"]), b":0\r\n");
    assert_eq!(k.cmd_str(&["DUMP", "nokey"]), b"$-1\r\n");
}

#[test]
fn bgsave_writes_the_state_of_its_start_while_clients_write() {
    let dir = tmpdir("bgsave");
    let kayvee = Server::kayvee(&["--dir", dir.to_str().unwrap(), "--save", ""]).unwrap();
    let mut k = kayvee.conn();
    const N: usize = 50_000;
    let mut batch = Vec::new();
    for i in 0..N {
        batch.extend(kayvee_tests::encode_command(&[
            b"SET",
            format!("key:{i}").as_bytes(),
            b"old",
        ]));
    }
    k.send(&batch).unwrap();
    for _ in 0..N {
        k.read_reply().unwrap();
    }
    assert_eq!(k.cmd_str(&["BGSAVE"]), b"+Background saving started\r\n");
    // Overwrite everything right behind the BGSAVE, on the same connection.
    let mut batch = Vec::new();
    for i in 0..N {
        batch.extend(kayvee_tests::encode_command(&[
            b"SET",
            format!("key:{i}").as_bytes(),
            b"new",
        ]));
    }
    batch.extend(kayvee_tests::encode_command(&[b"SET", b"late", b"x"]));
    k.send(&batch).unwrap();
    for _ in 0..=N {
        k.read_reply().unwrap();
    }
    wait_bgsave(&mut k);
    let info = String::from_utf8(k.cmd_str(&["INFO", "persistence"])).unwrap();
    assert!(info.contains("rdb_last_bgsave_status:ok"), "{info}");
    assert!(
        info.contains(&format!("rdb_changes_since_last_save:{}", N + 1)),
        "{info}"
    );
    let file = std::fs::read(dir.join("dump.rdb")).unwrap();
    let config = kayvee_engine::Config::default();
    let opts = kayvee_rdb::LoadOptions {
        config: &config,
        seed: 1,
        now_ms: 0,
    };
    let loaded = kayvee_rdb::load(&file, &opts).unwrap();
    assert_eq!(loaded.keys_loaded as usize, N);
    let mut db = loaded.dbs[0].clone();
    for i in (0..N).step_by(997) {
        let e = db.peek(format!("key:{i}").as_bytes(), 0).unwrap();
        assert_eq!(e.value(), kayvee_engine::ValueRef::Str(&b"old"[..]));
    }
    assert!(db.peek(b"late", 0).is_none());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn shutdown_save_restart_and_corrupt_files() {
    let dir = tmpdir("restart");
    let d = dir.to_str().unwrap();
    {
        let kayvee = Server::kayvee(&["--dir", d, "--save", ""]).unwrap();
        let mut k = kayvee.conn();
        k.cmd_str(&["RPUSH", "l", "a", "b"]);
        k.cmd_str(&["SET", "t", "v", "EX", "1000"]);
        k.send(&kayvee_tests::encode_command(&[b"SHUTDOWN", b"SAVE"]))
            .unwrap();
        assert!(k.is_closed(Duration::from_secs(10)));
    }
    let kayvee = Server::kayvee(&["--dir", d, "--save", ""]).unwrap();
    let mut k = kayvee.conn();
    assert_eq!(
        k.cmd_str(&["LRANGE", "l", "0", "-1"]),
        b"*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    );
    let ttl = String::from_utf8(k.cmd_str(&["TTL", "t"])).unwrap();
    assert!(ttl.starts_with(":99") || ttl == ":1000\r\n", "{ttl}");
    let info = String::from_utf8(k.cmd_str(&["INFO", "persistence"])).unwrap();
    assert!(info.contains("rdb_last_load_keys_loaded:2"), "{info}");
    drop(kayvee);
    // A corrupt file stops the start with a message and exit code 1.
    let path = dir.join("dump.rdb");
    let mut bytes = std::fs::read(&path).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 0x55;
    std::fs::write(&path, &bytes).unwrap();
    let port = kayvee_tests::free_port().to_string();
    let out = Command::new(kayvee_tests::kayvee_bin())
        .args([
            "--port",
            &port,
            "--bind",
            "127.0.0.1",
            "--dir",
            d,
            "--save",
            "",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("Wrong RDB checksum"), "{text}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn failed_bgsave_turns_on_misconf() {
    let dir = tmpdir("misconf");
    let kayvee = Server::kayvee(&["--dir", dir.to_str().unwrap(), "--save", "3600", "1"]).unwrap();
    let mut k = kayvee.conn();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(k.cmd_str(&["BGSAVE"]), b"+Background saving started\r\n");
    wait_bgsave(&mut k);
    let info = String::from_utf8(k.cmd_str(&["INFO", "persistence"])).unwrap();
    assert!(info.contains("rdb_last_bgsave_status:err"), "{info}");
    let misconf = k.cmd_str(&["SET", "a", "b"]);
    assert!(misconf.starts_with(b"-MISCONF Redis is configured to save RDB snapshots"));
    assert_eq!(k.cmd_str(&["PING"]), misconf);
    assert_eq!(k.cmd_str(&["GET", "a"]), b"$-1\r\n");
    assert_eq!(k.cmd_str(&["SAVE"]), b"-ERR\r\n");
    k.cmd_str(&["CONFIG", "SET", "stop-writes-on-bgsave-error", "no"]);
    assert_eq!(k.cmd_str(&["SET", "a", "b"]), b"+OK\r\n");
    // Once the directory is back, a save succeeds and clears the error.
    std::fs::create_dir_all(&dir).unwrap();
    k.cmd_str(&["CONFIG", "SET", "stop-writes-on-bgsave-error", "yes"]);
    assert_eq!(k.cmd_str(&["SAVE"]), b"+OK\r\n");
    assert_eq!(k.cmd_str(&["SET", "a", "c"]), b"+OK\r\n");
    let _ = std::fs::remove_dir_all(dir);
}

/// While the startup load runs, the server accepts clients and answers `-LOADING` (INFO shows
/// the progress), then serves the loaded data, as Redis 7.0 does.
#[test]
fn clients_get_loading_during_the_startup_load() {
    if kayvee_tests::target_is_redis() || kayvee_tests::target_is_unikernel() {
        return;
    }
    const N: usize = 400_000;
    let dir = tmpdir("loading");
    let mut db = kayvee_engine::Db::new(1);
    for i in 0..N {
        let v = kayvee_engine::Value::Str(format!("value-{i}").as_str().into());
        db.set(format!("key:{i}").as_bytes(), v, 0, false);
    }
    let mut dbs = vec![db.snapshot()];
    dbs.extend((1..16).map(|_| kayvee_engine::Db::new(1).snapshot()));
    let snapshot = kayvee_engine::Snapshot {
        dbs,
        taken_ms: 0,
        functions: Vec::new(),
    };
    let file =
        kayvee_rdb::RdbWriter::new(snapshot, kayvee_rdb::WriteOptions::default()).write_all();
    std::fs::write(dir.join("dump.rdb"), &file).unwrap();

    let port = kayvee_tests::free_port();
    let mut child = Command::new(kayvee_tests::kayvee_bin())
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--dir", dir.to_str().unwrap(), "--save", ""])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut c = loop {
        if let Ok(c) = Conn::connect(port) {
            break c;
        }
        assert!(Instant::now() < deadline, "the server never listened");
        std::thread::sleep(Duration::from_millis(2));
    };
    let (mut saw_loading, mut saw_info) = (false, false);
    loop {
        let reply = c.cmd_str(&["PING"]);
        if reply == b"+PONG\r\n" {
            break;
        }
        assert_eq!(
            reply,
            b"-LOADING Redis is loading the dataset in memory\r\n"
        );
        saw_loading = true;
        let info = String::from_utf8(c.cmd_str(&["INFO", "persistence"])).unwrap();
        if info.contains("loading:1\r\n") {
            assert!(
                info.contains(&format!("loading_total_bytes:{}\r\n", file.len())),
                "{info}"
            );
            assert!(info.contains("loading_loaded_perc:"), "{info}");
            saw_info = true;
        }
        assert!(Instant::now() < deadline, "the load never finished");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(saw_loading && saw_info, "connected only after the load");
    assert_eq!(c.cmd_str(&["DBSIZE"]), format!(":{N}\r\n").into_bytes());
    assert_eq!(c.cmd_str(&["GET", "key:123"]), b"$9\r\nvalue-123\r\n");
    let info = String::from_utf8(c.cmd_str(&["INFO", "persistence"])).unwrap();
    assert!(
        info.contains("loading:0\r\n") && !info.contains("loading_start_time"),
        "{info}"
    );
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(dir);
}

/// INFO follows a slow background save (`rdb-key-save-delay`): the keys written grow toward
/// the snapshot's key count, and overwriting keys the snapshot still holds grows
/// `current_cow_size` by their old values (once per key: a second overwrite adds nothing);
/// the peak becomes `rdb_last_cow_size` and the current figures go back to zero. An AOF
/// rewrite reports the same way, its peak in `aof_last_cow_size`.
#[test]
fn info_follows_a_slow_save_and_its_copy_on_write_analogue() {
    // Kayvee's own meaning of the figures (Redis measures its child's dirty pages).
    if kayvee_tests::target_is_redis() || kayvee_tests::target_is_unikernel() {
        return;
    }
    let dir = tmpdir("saveinfo");
    let kayvee = Server::kayvee(&["--dir", dir.to_str().unwrap(), "--save", ""]).unwrap();
    let mut k = kayvee.conn();
    const N: usize = 2_000;
    let value = "A".repeat(500);
    let mut batch = Vec::new();
    for i in 0..N {
        batch.extend(kayvee_tests::encode_command(&[
            b"SET",
            format!("key{i}").as_bytes(),
            value.as_bytes(),
        ]));
    }
    k.send(&batch).unwrap();
    for _ in 0..N {
        k.read_reply().unwrap();
    }
    let field = |k: &mut Conn, name: &str| k.info_field::<f64>("persistence", name);
    let all_zero = |k: &mut Conn, names: &[&str]| {
        for name in names {
            assert_eq!(field(k, name), 0.0, "{name}");
        }
    };
    all_zero(
        &mut k,
        &[
            "current_cow_size",
            "current_save_keys_processed",
            "current_save_keys_total",
            "current_fork_perc",
            "rdb_last_cow_size",
        ],
    );
    // About 3 ms a key: the save takes some 6 s.
    k.cmd_str(&["CONFIG", "SET", "rdb-key-save-delay", "3000"]);
    assert_eq!(k.cmd_str(&["BGSAVE"]), b"+Background saving started\r\n");
    assert_eq!(field(&mut k, "current_save_keys_total"), N as f64);
    // Right away: at most a few keys are written out, the others' old values now live only
    // in the snapshot.
    let overwrite = |k: &mut Conn| {
        for i in 0..16 {
            let r = k.cmd_str(&["SETRANGE", &format!("key{i}"), "0", &"B".repeat(500)]);
            assert_eq!(r, b":500\r\n");
        }
    };
    overwrite(&mut k);
    let after = field(&mut k, "current_cow_size");
    assert!(after >= 12.0 * 500.0, "current_cow_size {after}");
    assert!(field(&mut k, "current_cow_peak") >= after);
    // Progress.
    let first = field(&mut k, "current_save_keys_processed");
    let deadline = Instant::now() + Duration::from_secs(10);
    while field(&mut k, "current_save_keys_processed") <= first {
        assert!(
            Instant::now() < deadline,
            "current_save_keys_processed never grew"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(field(&mut k, "current_fork_perc") > 0.0);
    assert!(field(&mut k, "current_save_keys_processed") <= N as f64);
    // The same keys again: their snapshot values were counted already (the figure may only
    // shrink, as the save lets go of what it wrote).
    overwrite(&mut k);
    assert!(field(&mut k, "current_cow_size") <= after);
    let peak = field(&mut k, "current_cow_peak");
    assert!(peak >= after);
    assert_eq!(field(&mut k, "rdb_bgsave_in_progress"), 1.0);
    wait_bgsave(&mut k);
    assert_eq!(field(&mut k, "rdb_last_cow_size"), peak);
    all_zero(
        &mut k,
        &[
            "current_cow_size",
            "current_cow_peak",
            "current_save_keys_processed",
            "current_save_keys_total",
            "current_fork_perc",
        ],
    );
    // An AOF rewrite (with the AOF off: a base alone) reports the same way.
    k.cmd_str(&["CONFIG", "SET", "rdb-key-save-delay", "1000"]);
    let r = k.cmd_str(&["BGREWRITEAOF"]);
    assert!(
        r.starts_with(b"+Background append only file rewriting"),
        "{r:?}"
    );
    assert_eq!(field(&mut k, "current_save_keys_total"), N as f64);
    for i in 100..116 {
        k.cmd_str(&["DEL", &format!("key{i}")]);
    }
    let during = field(&mut k, "current_cow_size");
    assert!(during >= 12.0 * 500.0, "current_cow_size {during}");
    let deadline = Instant::now() + Duration::from_secs(60);
    while field(&mut k, "aof_rewrite_in_progress") == 1.0 {
        assert!(Instant::now() < deadline, "BGREWRITEAOF never finished");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(field(&mut k, "aof_last_cow_size") >= during);
    assert_eq!(field(&mut k, "rdb_last_cow_size"), peak);
    assert_eq!(field(&mut k, "current_save_keys_total"), 0.0);
    let _ = std::fs::remove_dir_all(dir);
}

/// The pids of `parent`'s child processes (from `/proc/*/stat`, as `pgrep -P` reads them).
fn child_pids(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`: the name may hold spaces and parentheses.
        let after = &stat[stat.rfind(')').map_or(0, |i| i + 1)..];
        let ppid = after.split_whitespace().nth(1).and_then(|p| p.parse().ok());
        if ppid == Some(parent) {
            out.push(pid);
        }
    }
    out
}

/// Polls `cond` for up to ten seconds.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// BGSAVE writes from a child process of the server (as Redis's fork child, into
/// `temp-<child pid>.rdb`); a SIGKILL of that child fails the save (`rdb_last_bgsave_status:err`)
/// and leaves no temporary file, the server keeps serving, and the next BGSAVE succeeds.
#[test]
fn killed_bgsave_child_fails_the_save_and_leaves_no_temp_file() {
    if kayvee_tests::target_is_unikernel() {
        return;
    }
    let dir = tmpdir("killchild");
    let kayvee = Server::kayvee(&["--dir", dir.to_str().unwrap(), "--save", ""]).unwrap();
    let mut k = kayvee.conn();
    for i in 0..20 {
        k.cmd_str(&["SET", &format!("k{i}"), &format!("v{i}")]);
    }
    k.cmd_str(&["CONFIG", "SET", "rdb-key-save-delay", "2147483647"]);
    assert_eq!(k.cmd_str(&["BGSAVE"]), b"+Background saving started\r\n");
    let children = child_pids(kayvee.pid());
    assert_eq!(
        children.len(),
        1,
        "one save child: {children:?}\n{}",
        kayvee.log_tail()
    );
    let child = children[0];
    let temp = dir.join(format!("temp-{child}.rdb"));
    wait_for("the child's temporary file", || temp.exists());
    let killed = Command::new("kill")
        .args(["-9", &child.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    wait_bgsave(&mut k);
    let info = String::from_utf8(k.cmd_str(&["INFO", "persistence"])).unwrap();
    assert!(info.contains("rdb_last_bgsave_status:err"), "{info}");
    wait_for("the temporary file's removal", || !temp.exists());
    assert!(!dir.join("dump.rdb").exists());
    assert!(child_pids(kayvee.pid()).is_empty(), "the child is reaped");
    assert_eq!(k.cmd_str(&["GET", "k3"]), b"$2\r\nv3\r\n");
    k.cmd_str(&["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    assert_eq!(k.cmd_str(&["BGSAVE"]), b"+Background saving started\r\n");
    wait_bgsave(&mut k);
    let info = String::from_utf8(k.cmd_str(&["INFO", "persistence"])).unwrap();
    assert!(info.contains("rdb_last_bgsave_status:ok"), "{info}");
    let file = std::fs::read(dir.join("dump.rdb")).unwrap();
    let config = kayvee_engine::Config::default();
    let opts = kayvee_rdb::LoadOptions {
        config: &config,
        seed: 1,
        now_ms: 0,
    };
    let loaded = kayvee_rdb::load(&file, &opts).unwrap();
    assert_eq!(loaded.keys_loaded, 20);
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("temp-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let _ = std::fs::remove_dir_all(dir);
}

/// The keys of a loaded RDB file with their values and expiry, in key order.
fn rdb_contents(path: &std::path::Path) -> Vec<(usize, Vec<u8>, String, Option<u64>)> {
    let file = std::fs::read(path).unwrap();
    let config = kayvee_engine::Config::default();
    let opts = kayvee_rdb::LoadOptions {
        config: &config,
        seed: 1,
        now_ms: 0,
    };
    let loaded = kayvee_rdb::load(&file, &opts).unwrap();
    let mut out = Vec::new();
    for (i, db) in loaded.dbs.iter().enumerate() {
        let snap = db.snapshot();
        for (key, entry) in snap.keys.iter() {
            let value = format!("{:?}", entry.value());
            let ttl = snap.expires.get(&key[..]).copied();
            out.push((i, key.to_vec(), value, ttl));
        }
    }
    out.sort();
    out
}

/// A BGSAVE (written by the save child) holds the same data as a SAVE (written by the server).
#[test]
fn bgsave_file_has_the_content_of_save() {
    if kayvee_tests::target_is_unikernel() {
        return;
    }
    let dir = tmpdir("bgsave-vs-save");
    let kayvee = Server::kayvee(&["--dir", dir.to_str().unwrap(), "--save", ""]).unwrap();
    let mut k = kayvee.conn();
    let _ = fill_reference(&mut k);
    k.cmd_str(&["SELECT", "3"]);
    k.cmd_str(&["SET", "other-db", "x", "EX", "1000"]);
    assert_eq!(k.cmd_str(&["SAVE"]), b"+OK\r\n");
    std::fs::rename(dir.join("dump.rdb"), dir.join("save.rdb")).unwrap();
    assert_eq!(k.cmd_str(&["BGSAVE"]), b"+Background saving started\r\n");
    wait_bgsave(&mut k);
    let saved = rdb_contents(&dir.join("save.rdb"));
    let bg = rdb_contents(&dir.join("dump.rdb"));
    assert!(saved.len() > 5, "{}", saved.len());
    assert_eq!(saved, bg);
    let _ = std::fs::remove_dir_all(dir);
}

/// SHUTDOWN NOSAVE during a BGSAVE kills the save's child and removes its temporary file; the
/// child shows the `rdb-bgsave` title.
#[test]
fn shutdown_kills_the_bgsave_child_and_removes_its_file() {
    if kayvee_tests::target_is_unikernel() {
        return;
    }
    let dir = tmpdir("shutdown-child");
    let kayvee = Server::kayvee(&["--dir", dir.to_str().unwrap(), "--save", ""]).unwrap();
    let mut k = kayvee.conn();
    k.cmd_str(&["SET", "a", "b"]);
    k.cmd_str(&["CONFIG", "SET", "rdb-key-save-delay", "2147483647"]);
    assert_eq!(k.cmd_str(&["BGSAVE"]), b"+Background saving started\r\n");
    let children = child_pids(kayvee.pid());
    assert_eq!(children.len(), 1, "{children:?}");
    let child = children[0];
    let title = std::fs::read(format!("/proc/{child}/cmdline")).unwrap();
    assert!(
        String::from_utf8_lossy(&title).contains("rdb-bgsave"),
        "{}",
        String::from_utf8_lossy(&title)
    );
    let temp = dir.join(format!("temp-{child}.rdb"));
    wait_for("the child's temporary file", || temp.exists());
    k.send(&kayvee_tests::encode_command(&[b"SHUTDOWN", b"NOSAVE"]))
        .unwrap();
    assert!(k.is_closed(Duration::from_secs(10)));
    wait_for("the child's end", || {
        std::fs::read_to_string(format!("/proc/{child}/stat")).map_or(true, |s| s.contains(") Z "))
    });
    assert!(!temp.exists(), "the temporary file is removed");
    assert!(!dir.join("dump.rdb").exists());
    drop(kayvee);
    let _ = std::fs::remove_dir_all(dir);
}
