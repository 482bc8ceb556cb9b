//! End-to-end append-only file: data survives a kill and restart; BGREWRITEAOF while clients
//! write; `redis-check-aof` accepts Kayvee's directory and redis-server 7.0.15 loads it, and
//! Kayvee loads a Redis 7 AOF directory; a truncated file with `aof-load-truncated` yes / no.

use kayvee_tests::{kayvee_bin, redis_required, tool_available, Conn, Server};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A fresh empty directory for one test.
fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kayvee-aof-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Whether redis-server and redis-check-aof are here (skip otherwise, unless required).
fn have_redis() -> bool {
    // redis-check-aof has no --version (it would check a file of that name): look it up on PATH.
    let check_aof = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("redis-check-aof").is_file()));
    let ok = tool_available("redis-server") && check_aof;
    assert!(
        ok || !redis_required(),
        "redis-server / redis-check-aof missing"
    );
    ok
}

fn kayvee(dir: &Path, extra: &[&str]) -> Server {
    let mut args = vec![
        "--dir",
        dir.to_str().unwrap(),
        "--appendonly",
        "yes",
        "--save",
        "",
    ];
    args.extend_from_slice(extra);
    Server::kayvee(&args).expect("kayvee")
}

fn text(c: &mut Conn, args: &[&str]) -> String {
    String::from_utf8_lossy(&c.cmd_str(args)).into_owned()
}

/// The data set in comparable text: every key with its type, content and whether it has a TTL.
fn dataset(c: &mut Conn) -> Vec<String> {
    let keys = text(c, &["KEYS", "*"]);
    let mut names: Vec<String> = keys
        .split("\r\n")
        .filter(|l| !l.is_empty() && !l.starts_with('*') && !l.starts_with('$'))
        .map(String::from)
        .collect();
    names.sort();
    names
        .iter()
        .map(|k| {
            let ty = text(c, &["TYPE", k]);
            let body = match ty.trim() {
                "+string" => text(c, &["GET", k]),
                "+list" => text(c, &["LRANGE", k, "0", "-1"]),
                "+set" => text(c, &["SORT", k, "ALPHA"]),
                "+hash" => {
                    let mut v: Vec<String> = text(c, &["HGETALL", k])
                        .split("\r\n")
                        .map(String::from)
                        .collect();
                    v.sort();
                    v.join(",")
                }
                _ => text(c, &["ZRANGE", k, "0", "-1", "WITHSCORES"]),
            };
            let ttl = text(c, &["TTL", k]) != ":-1\r\n";
            format!("{k} {} {body} ttl={ttl}", ty.trim())
        })
        .collect()
}

/// Writes keys of every type, with TTLs, SPOP, INCRBYFLOAT, a transaction and another db.
fn fill(c: &mut Conn) {
    for cmd in [
        "SET s1 hello",
        "SET s2 v EX 1000",
        "RPUSH l a b c d",
        "LPOP l",
        "SADD set 1 2 3 4 x",
        "SPOP set",
        "HSET h f1 v1 f2 v2",
        "HINCRBYFLOAT h n 1.5",
        "ZADD z 1.5 a 2 b -3 c",
        "INCRBYFLOAT fl 2.25",
        "SETEX gone 1000 x",
        "DEL gone",
        "MULTI",
        "INCR n",
        "INCR n",
        "EXEC",
        "SELECT 3",
        "SET in3 x",
        "SELECT 0",
    ] {
        let args: Vec<&str> = cmd.split(' ').collect();
        c.cmd_str(&args);
    }
}

fn wait_rewrite(c: &mut Conn) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while text(c, &["INFO", "persistence"]).contains("aof_rewrite_in_progress:1") {
        assert!(Instant::now() < deadline, "rewrite did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn check_aof(dir: &Path) {
    let manifest = dir.join("appendonlydir/appendonly.aof.manifest");
    let out = Command::new("redis-check-aof")
        .arg(&manifest)
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "redis-check-aof failed:\n{log}");
}

#[test]
fn data_survives_kill_and_rewrite_and_redis_loads_it() {
    for preamble in ["yes", "no"] {
        let dir = tmpdir(&format!("restart-{preamble}"));
        let opts = [
            "--appendfsync",
            "always",
            "--aof-use-rdb-preamble",
            preamble,
        ];
        let k = kayvee(&dir, &opts);
        let mut c = k.conn();
        fill(&mut c);
        let writer_port = k.port();
        let writer = std::thread::spawn(move || {
            let mut w = Conn::connect(writer_port).unwrap();
            for i in 0..1000 {
                w.cmd_str(&["INCR", "counter"]);
                w.cmd_str(&["RPUSH", "log", &i.to_string()]);
            }
        });
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(
            text(&mut c, &["BGREWRITEAOF"]),
            "+Background append only file rewriting started\r\n"
        );
        wait_rewrite(&mut c);
        writer.join().unwrap();
        c.cmd_str(&["SET", "after", "rewrite"]);
        let before = dataset(&mut c);
        assert!(before
            .iter()
            .any(|l| l.starts_with("counter +string $4\r\n1000")));
        drop(c);
        drop(k); // SIGKILL
        let k = kayvee(&dir, &opts);
        let mut c = k.conn();
        assert_eq!(dataset(&mut c), before, "preamble {preamble}");
        assert_eq!(text(&mut c, &["SELECT", "3"]), "+OK\r\n");
        assert_eq!(text(&mut c, &["GET", "in3"]), "$1\r\nx\r\n");
        drop(c);
        drop(k);
        if !have_redis() {
            continue;
        }
        check_aof(&dir);
        let r = Server::redis(&["--dir", dir.to_str().unwrap(), "--appendonly", "yes"]).unwrap();
        assert_eq!(
            dataset(&mut r.conn()),
            before,
            "redis-server loads Kayvee's AOF"
        );
    }
}

#[test]
fn kayvee_loads_a_redis_aof_directory() {
    if !have_redis() {
        return;
    }
    for preamble in ["yes", "no"] {
        let dir = tmpdir(&format!("from-redis-{preamble}"));
        let d = dir.to_str().unwrap();
        let r = Server::redis(&[
            "--dir",
            d,
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--aof-use-rdb-preamble",
            preamble,
        ])
        .unwrap();
        let mut c = r.conn();
        fill(&mut c);
        assert!(text(&mut c, &["BGREWRITEAOF"]).starts_with("+Background"));
        wait_rewrite(&mut c);
        c.cmd_str(&["RPUSH", "l", "tail"]);
        let before = dataset(&mut c);
        drop(c);
        drop(r);
        let k = kayvee(&dir, &[]);
        assert_eq!(dataset(&mut k.conn()), before, "preamble {preamble}");
    }
}

/// Starts kayvee-server on `dir`'s AOF (a Unix socket only) and says whether it exited with an
/// error; one still running after 10 s is killed and counts as started.
fn start_fails(dir: &Path, extra: &[&str]) -> bool {
    let socket = dir.join("s");
    let mut child = Command::new(kayvee_bin())
        .args(["--port", "0", "--unixsocket", socket.to_str().unwrap()])
        .args([
            "--dir",
            dir.to_str().unwrap(),
            "--appendonly",
            "yes",
            "--save",
            "",
        ])
        .args(extra)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return !status.success();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    false
}

#[test]
fn truncated_tail_loads_or_refuses_per_aof_load_truncated() {
    let dir = tmpdir("truncated");
    let k = kayvee(&dir, &["--appendfsync", "always"]);
    let mut c = k.conn();
    c.cmd_str(&["SET", "a", "1"]);
    c.cmd_str(&["SET", "b", "2"]);
    drop(c);
    drop(k);
    let incr = dir.join("appendonlydir/appendonly.aof.1.incr.aof");
    let good = std::fs::metadata(&incr).unwrap().len();
    let mut bytes = std::fs::read(&incr).unwrap();
    bytes.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$1\r\nc\r\n$3\r\nab");
    std::fs::write(&incr, &bytes).unwrap();
    let refused = start_fails(&dir, &["--aof-load-truncated", "no"]);
    assert!(refused, "a truncated AOF must stop the start");
    let k = kayvee(&dir, &["--aof-load-truncated", "yes"]);
    let mut c = k.conn();
    assert_eq!(text(&mut c, &["DBSIZE"]), ":2\r\n");
    assert_eq!(
        std::fs::metadata(&incr).unwrap().len(),
        good,
        "the tail is cut off"
    );
    c.cmd_str(&["SET", "c", "3"]);
    drop(c);
    drop(k);
    let k = kayvee(&dir, &[]);
    assert_eq!(text(&mut k.conn(), &["DBSIZE"]), ":3\r\n");
    std::fs::write(&incr, b"garbage\r\n").unwrap();
    drop(k);
    assert!(start_fails(&dir, &[]), "a corrupt AOF must stop the start");
}

#[test]
fn config_set_appendonly_writes_the_current_data() {
    let dir = tmpdir("config-on");
    let k = Server::kayvee(&["--dir", dir.to_str().unwrap(), "--save", ""]).unwrap();
    let mut c = k.conn();
    c.cmd_str(&["SET", "before", "1"]);
    assert_eq!(
        text(&mut c, &["CONFIG", "SET", "appendonly", "yes"]),
        "+OK\r\n"
    );
    c.cmd_str(&["SET", "after", "2"]);
    assert!(text(&mut c, &["INFO", "persistence"]).contains("aof_enabled:1"));
    // The AOF holds the writes once its first rewrite is done (as Redis's).
    wait_rewrite(&mut c);
    drop(c);
    drop(k);
    let k = kayvee(&dir, &[]);
    assert_eq!(text(&mut k.conn(), &["DBSIZE"]), ":2\r\n");
}

/// CONFIG SET appendonly yes during a slow BGSAVE: the first rewrite waits for the save
/// (`aof_rewrite_scheduled:1`, no file written), then writes go to the temporary increment
/// while it runs, the manifest appears only when it is done (the temporary increment renamed
/// in as its first increment), and a restart from the AOF has every write.
#[test]
fn config_set_appendonly_during_bgsave_waits_for_the_first_rewrite() {
    let dir = tmpdir("config-on-bgsave");
    let k = Server::kayvee(&["--dir", dir.to_str().unwrap(), "--save", ""]).unwrap();
    let mut c = k.conn();
    for i in 0..5 {
        c.cmd_str(&["SET", &format!("fill{i}"), "x"]);
    }
    c.cmd_str(&["SET", "k1", "v1"]);
    c.cmd_str(&["CONFIG", "SET", "appendfsync", "always"]);
    // 0.1 s a key: the BGSAVE and then the rewrite take about 0.6 s each.
    c.cmd_str(&["CONFIG", "SET", "rdb-key-save-delay", "100000"]);
    assert!(text(&mut c, &["BGSAVE"]).starts_with('+'));
    assert_eq!(
        text(&mut c, &["CONFIG", "SET", "appendonly", "yes"]),
        "+OK\r\n"
    );
    let aof_dir = dir.join("appendonlydir");
    let manifest = aof_dir.join("appendonly.aof.manifest");
    let temp_incr = aof_dir.join("temp-appendonly.aof.incr");
    assert_eq!(
        c.info_field::<u8>("persistence", "aof_rewrite_scheduled"),
        1
    );
    assert_eq!(
        c.info_field::<u8>("persistence", "aof_rewrite_in_progress"),
        0
    );
    assert_eq!(c.info_field::<u8>("persistence", "aof_enabled"), 1);
    assert!(!manifest.exists() && !temp_incr.exists());
    c.cmd_str(&["SET", "k2", "v2"]);

    let deadline = Instant::now() + Duration::from_secs(20);
    while c.info_field::<u8>("persistence", "aof_rewrite_in_progress") == 0 {
        assert!(Instant::now() < deadline, "the first rewrite did not start");
        std::thread::sleep(Duration::from_millis(5));
    }
    c.cmd_str(&["SET", "k3", "v3"]);
    let temp = std::fs::read(&temp_incr).expect("the temporary increment");
    assert!(
        temp.windows(2).any(|w| w == b"k3"),
        "k3 not in the temporary increment"
    );
    assert!(
        !manifest.exists(),
        "a manifest before the first rewrite ended"
    );

    wait_rewrite(&mut c);
    let listed = std::fs::read_to_string(&manifest).expect("the manifest after the rewrite");
    assert!(listed.contains("appendonly.aof.1.base.rdb"), "{listed}");
    assert!(listed.contains("appendonly.aof.1.incr.aof"), "{listed}");
    assert!(!temp_incr.exists());
    let incr = std::fs::read(aof_dir.join("appendonly.aof.1.incr.aof")).unwrap();
    assert!(incr.windows(2).any(|w| w == b"k3"), "k3 not renamed in");
    c.cmd_str(&["SET", "k4", "v4"]);
    drop(c);
    drop(k);

    let k = kayvee(&dir, &[]);
    let mut c = k.conn();
    assert_eq!(text(&mut c, &["DBSIZE"]), ":9\r\n");
    for (key, v) in [("k1", "v1"), ("k2", "v2"), ("k3", "v3"), ("k4", "v4")] {
        assert_eq!(
            text(&mut c, &["GET", key]),
            format!("${}\r\n{v}\r\n", v.len())
        );
    }
}

/// The commands of an incr file with every 13- or 14-digit number (a unix ms time) replaced
/// by `T`, so two servers' files compare.
fn incr_commands(dir: &Path) -> Vec<String> {
    let d = dir.join("appendonlydir");
    let mut names: Vec<_> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".incr.aof"))
        .collect();
    names.sort();
    let bytes = std::fs::read(d.join(names.last().unwrap())).unwrap();
    let text = String::from_utf8_lossy(&bytes);
    let mut out = Vec::new();
    let mut lines = text.split("\r\n");
    while let Some(head) = lines.next() {
        let Some(n) = head.strip_prefix('*').and_then(|n| n.parse::<usize>().ok()) else {
            continue;
        };
        let args: Vec<String> = (0..n)
            .map(|_| {
                lines.next();
                let a = lines.next().unwrap_or_default();
                let is_time = (13..=14).contains(&a.len()) && a.bytes().all(|b| b.is_ascii_digit());
                if is_time {
                    "T".to_string()
                } else {
                    a.to_string()
                }
            })
            .collect();
        out.push(args.join(" "));
    }
    out
}

/// What each server writes to its AOF for the same commands: the same commands, in Redis's
/// shapes (times aside).
#[test]
fn propagation_matches_redis_incr_file() {
    if !have_redis() {
        return;
    }
    let script: &[&str] = &[
        "SET a 1",
        "SET b 2 EX 100",
        "SETEX c 100 v",
        "PSETEX d 100000 v",
        "SET e v PX 5000 NX",
        "SET e v NX",
        "EXPIRE a 1000",
        "PEXPIRE a 10000 GT",
        "EXPIREAT a 99999999999",
        "GETEX b EX 50",
        "GETEX b PERSIST",
        "GETEX b",
        "SET f v KEEPTTL",
        "DEL zzz",
        "INCRBYFLOAT fl 1.5",
        "HINCRBYFLOAT h f 2.5",
        "SADD s1 only",
        "SPOP s1",
        "SADD s2 x y",
        "SPOP s2 5",
        "SELECT 3",
        "SET x y",
        "SELECT 0",
        "LPUSH l a b c d",
        "BLPOP l 0",
        "BLMOVE l l2 LEFT RIGHT 0",
        "BLMPOP 0 1 l LEFT",
        "LMPOP 1 l RIGHT COUNT 5",
        "ZADD z 1 a 2 b 3 c",
        "BZPOPMIN z 0",
        "ZMPOP 1 z MAX COUNT 5",
        "RPUSH q 1",
        "BRPOPLPUSH q q2 0",
        "GETDEL x",
        "GETDEL a",
        "EXPIRE f -1",
        "MULTI",
        "SET m 1",
        "INCR m",
        "GET m",
        "EXEC",
        "MULTI",
        "GET m",
        "EXEC",
        "SET gone v PX 1",
        "SLEEP",
        "GET gone",
        "SADD s3 a",
        "SADD s3 a",
        "HSET h2 f v",
        "HDEL h2 nope",
        "PERSIST m",
        "FLUSHALL",
    ];
    compare_incr_files("prop", script);
}

/// Writes that change nothing propagate nothing, and writes that change something only in
/// part propagate as Redis 7.0 decides, each judged where the command runs.
#[test]
fn noops_and_partial_writes_match_redis_incr_file() {
    if !have_redis() {
        return;
    }
    let script: &[&str] = &[
        "SETBIT b 1 1",
        "SETBIT b 1 1",
        "SETBIT b 1 0",
        "SET p v",
        "GETEX p PERSIST",
        "ZUNIONSTORE zd 1 nozset",
        "ZADD z 1 a",
        "ZADD z 1 a",
        "ZADD z 2 a",
        "ZADD zd 1 x",
        "ZINTERSTORE zd 2 z nozset",
        "SINTERSTORE sd s nosuch",
        "SADD s a b",
        "SINTERSTORE sd s nosuch",
        "BITOP AND bd nosuch",
        "HSET h f v",
        "HSET h f v",
        "HINCRBY h n 0",
        "RPUSH l a b c",
        "LINSERT l BEFORE nopivot x",
        "LREM l 0 nothere",
        "LTRIM l 0 -1",
        "LSET l 0 a",
        "LPOP l 0",
        "SPOP s 0",
        "SMOVE s s2 nothere",
        "SMOVE s s2 a",
        "ZREMRANGEBYSCORE z 10 20",
        "ZINCRBY z 0 a",
        "MSETNX p 1 q 2",
        "MSETNX q 2 r 3",
        "RENAMENX q r",
        "RENAME q q2",
        "COPY q2 q3",
        "COPY q2 q3",
        "MOVE q3 5",
        "MOVE nothere 5",
        "SWAPDB 0 5",
        "SWAPDB 0 5",
        "APPEND p ''",
        "SETRANGE p 0 ''",
        "SETRANGE nothere 0 ''",
        "EXPIRE nothere 10",
        "EXPIRE p 10 XX",
        "SORT l ALPHA STORE sorted",
        "SORT nothere STORE sorted",
        "SORT nothere STORE sorted",
        "FLUSHDB",
    ];
    compare_incr_files("noop", script);
}

/// More writes whose effect depends on the data, against Redis's propagation.
#[test]
fn conditional_writes_match_redis_incr_file() {
    if !have_redis() {
        return;
    }
    let script: &[&str] = &[
        "DEL nothere",
        "UNLINK nothere",
        "SET k v",
        "RENAME k k",
        "RENAMENX k k",
        "PERSIST k",
        "INCRBY n 0",
        "SET k w GET NX",
        "SET k w XX GET",
        "SET k2 w NX GET",
        "SETNX k x",
        "LPUSHX nolist a",
        "RPUSH l a b",
        "LMOVE l l LEFT RIGHT",
        "RPOPLPUSH l l",
        "SADD s a",
        "SMOVE s s a",
        "SREM s zz",
        "HSETNX h f v",
        "HSETNX h f v",
        "HDEL h zz",
        "ZADD z NX 1 a",
        "ZADD z NX 2 a",
        "ZADD z XX 1 b",
        "ZADD z GT 0 a",
        "ZADD z GT CH 5 a",
        "ZREM z zz",
        "ZPOPMIN nozset",
        "ZRANGESTORE zd z 5 10",
        "ZADD zd 1 q",
        "ZRANGESTORE zd z 5 10",
        "ZRANGESTORE zd z 0 -1",
        "SDIFFSTORE sd s",
        "BITOP OR bd k",
        "SET t v EX 100",
        "INCRBYFLOAT t2 0.5",
        "EXPIRE t2 100",
        "INCRBYFLOAT t2 1",
        "GETEX t EXAT 1",
        "PEXPIREAT k 1",
        "EXPIRE k2 0",
        "SPOP nothere",
        "GETDEL nothere",
        "LPOP nothere",
        "BLPOP nothere 0.01",
    ];
    compare_incr_files("cond", script);
}

/// HyperLogLog, geo and BITFIELD writes propagate as Redis 7.0 propagates them: PFADD, PFMERGE
/// and the PFCOUNT that refreshes the cached cardinality as sent (not a cached PFCOUNT, nor a
/// PFADD that changed nothing), PFDEBUG only when it changed the encoding, GEOADD as the ZADD it
/// ran (lower case, the computed scores), the searches that store as sent, BITFIELD as sent
/// when a field changed.
#[test]
fn hll_geo_bitfield_writes_match_redis_incr_file() {
    if !have_redis() {
        return;
    }
    let script: &[&str] = &[
        "PFADD h",
        "PFADD h a b c",
        "PFADD h a",
        "PFCOUNT h",
        "PFCOUNT h",
        "PFCOUNT h nokey",
        "PFMERGE h2 h",
        "PFDEBUG ENCODING h2",
        "PFDEBUG TODENSE h2",
        "PFDEBUG TODENSE h2",
        "PFDEBUG GETREG h",
        "PFADD s",
        "SET str x",
        "PFADD str a",
        "GEOADD g 13.361389 38.115556 Palermo 15.087269 37.502669 Catania",
        "GEOADD g NX CH 13.361389 38.115556 Palermo 1 2 x",
        "GEOADD g XX 13.361389 38.115556 Palermo",
        "GEOADD g XX 200 0 bad",
        "GEORADIUS g 15 37 200 km",
        "GEORADIUS g 15 37 200 km STORE g2",
        "GEORADIUSBYMEMBER g Palermo 1 m STOREDIST g3",
        "GEOSEARCHSTORE g4 g FROMLONLAT 15 37 BYRADIUS 200 km",
        "GEOSEARCHSTORE g4 g FROMLONLAT 15 37 BYRADIUS 1 m",
        "GEOSEARCHSTORE g4 g FROMLONLAT 15 37 BYRADIUS 1 m",
        "GEOSEARCHSTORE g5 nokey FROMLONLAT 15 37 BYRADIUS 1 m",
        "BITFIELD b SET u8 0 255",
        "BITFIELD b SET u8 0 255",
        "BITFIELD b GET u8 0",
        "BITFIELD b INCRBY u8 0 0",
        "BITFIELD b OVERFLOW FAIL INCRBY u8 0 1",
        "BITFIELD b INCRBY i8 8 1",
        "BITFIELD f OVERFLOW FAIL SET u2 0 5",
        "BITFIELD_RO b GET u8 0",
    ];
    compare_incr_files("hll-geo-bits", script);
}

/// Runs `script` (lines split on spaces, `''` an empty argument; `SLEEP` waits 20 ms) on redis-server and on Kayvee
/// with the AOF on, and compares the commands of their incremental files.
fn compare_incr_files(name: &str, script: &[&str]) {
    let mut files = Vec::new();
    for kind in ["redis", "kayvee"] {
        let dir = tmpdir(&format!("{name}-{kind}"));
        let args = [
            "--dir",
            dir.to_str().unwrap(),
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--aof-use-rdb-preamble",
            "no",
        ];
        let server = if kind == "redis" {
            Server::redis(&args).unwrap()
        } else {
            Server::kayvee(&args).unwrap()
        };
        let mut c = server.conn();
        for line in script {
            if *line == "SLEEP" {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            // `''` stands for an empty argument.
            let args: Vec<&str> = line
                .split(' ')
                .map(|a| if a == "''" { "" } else { a })
                .collect();
            c.cmd_str(&args);
        }
        drop(c);
        drop(server);
        files.push(incr_commands(&dir));
    }
    assert!(
        files[0].len() > script.len() / 3,
        "redis wrote {:?}",
        files[0]
    );
    assert_eq!(files[1], files[0], "kayvee (left) vs redis (right)");
}

/// Stream writes reach the AOF in Redis 7.0's shapes: XADD with the ID it generated and an
/// approximate trim made exact, XREADGROUP and XAUTOCLAIM as XCLAIMs (and XGROUP
/// CREATECONSUMER / SETID under NOACK), the group commands as sent.
#[test]
fn stream_propagation_matches_redis_incr_file() {
    if !have_redis() {
        return;
    }
    let script: &[&str] = &[
        "XADD s 1-1 a 1",
        "XADD s 1-* b 2",
        "XADD s 5-* c 3",
        "XADD s NOMKSTREAM 6-0 d 4",
        "XADD nokey NOMKSTREAM 1-0 a 1",
        "XADD s MAXLEN ~ 1 7-0 e 5",
        "XADD s MAXLEN ~ 1 LIMIT 10 8-0 e 5",
        "XADD s MINID = 2 9-0 f 6",
        "XGROUP CREATE s g 0",
        "XGROUP CREATE e g $ MKSTREAM",
        "XREADGROUP GROUP g alice COUNT 2 STREAMS s >",
        "XREADGROUP GROUP g bob NOACK STREAMS s >",
        "XREADGROUP GROUP g alice STREAMS s 0",
        "XCLAIM s g carol 0 8-0",
        "XCLAIM s g carol 0 9-0 JUSTID LASTID 10-0",
        "XAUTOCLAIM s g dave 0 0",
        "XACK s g 8-0 99-0",
        "XDEL s 9-0 42-0",
        "XTRIM s MAXLEN 0",
        "XSETID s 20-0 ENTRIESADDED 30 MAXDELETEDID 10-0",
        "XGROUP CREATECONSUMER s g eve",
        "XGROUP DELCONSUMER s g eve",
        "XGROUP SETID s g 0 ENTRIESREAD 0",
        "XGROUP DESTROY s g",
        "XGROUP DESTROY s g",
    ];
    compare_incr_files("stream-prop", script);
}

/// SHUTDOWN while the first rewrite of an AOF turned on at runtime runs is refused, as in
/// Redis 7.0 ("Writing initial AOF, can't exit"), and so is a SIGTERM's shutdown; SHUTDOWN
/// FORCE exits, and Kayvee (unlike Redis) writes the AOF's first base in the foreground then,
/// so every write acknowledged under `appendfsync always` is there at the next start. A first
/// rewrite still waiting for a slow BGSAVE does not refuse (Redis neither): the base is written
/// at exit the same way.
#[test]
fn shutdown_before_the_first_rewrite_keeps_the_writes() {
    if kayvee_tests::target_is_redis() || kayvee_tests::target_is_unikernel() {
        return; // Redis loses those writes; the unikernel has no AOF
    }
    for behind_a_bgsave in [true, false] {
        let dir = tmpdir(&format!("exit-first-rewrite-{behind_a_bgsave}"));
        let k = Server::kayvee(&["--dir", dir.to_str().unwrap(), "--save", ""]).unwrap();
        let mut c = k.conn();
        c.cmd_str(&["SET", "k1", "v1"]);
        c.cmd_str(&["CONFIG", "SET", "appendfsync", "always"]);
        // 10 s a key: neither the BGSAVE nor the rewrite ends during the test.
        c.cmd_str(&["CONFIG", "SET", "rdb-key-save-delay", "10000000"]);
        if behind_a_bgsave {
            assert!(text(&mut c, &["BGSAVE"]).starts_with('+'));
        }
        assert_eq!(
            text(&mut c, &["CONFIG", "SET", "appendonly", "yes"]),
            "+OK\r\n"
        );
        assert_eq!(
            c.info_field::<u8>("persistence", "aof_rewrite_in_progress"),
            u8::from(!behind_a_bgsave)
        );
        c.cmd_str(&["SET", "k2", "v2"]);
        let mut shutdown = &[b"SHUTDOWN".as_slice(), b"NOSAVE"][..];
        if !behind_a_bgsave {
            refuses_to_exit(&k, &mut c);
            c.cmd_str(&["SET", "k3", "v3"]);
            shutdown = &[b"SHUTDOWN", b"NOSAVE", b"FORCE"];
        }
        let pid = k.pid();
        c.send(&kayvee_tests::encode_command(shutdown)).unwrap();
        assert!(c.is_closed(Duration::from_secs(20)), "{}", k.log_tail());
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| !s.contains(") Z "))
        {
            assert!(Instant::now() < deadline, "the server did not exit");
            std::thread::sleep(Duration::from_millis(10));
        }
        if !behind_a_bgsave {
            assert!(k.log_text().contains("Writing initial AOF. Exit anyway."));
        }
        drop(k);
        let k = kayvee(&dir, &[]);
        let mut c = k.conn();
        let keys = if behind_a_bgsave { ":2\r\n" } else { ":3\r\n" };
        assert_eq!(text(&mut c, &["DBSIZE"]), keys, "{behind_a_bgsave}");
        assert_eq!(text(&mut c, &["GET", "k2"]), "$2\r\nv2\r\n");
        drop(c);
        drop(k);
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// While the first rewrite runs: SHUTDOWN without FORCE gets Redis's error and a SIGTERM's
/// shutdown is refused too; the server keeps serving, the rewrite still running.
fn refuses_to_exit(k: &Server, c: &mut Conn) {
    assert_eq!(
        text(c, &["SHUTDOWN", "NOSAVE"]),
        "-ERR Errors trying to SHUTDOWN. Check logs.\r\n"
    );
    let status = Command::new("kill")
        .args(["-TERM", &k.pid().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    while k
        .log_text()
        .matches("Writing initial AOF, can't exit.")
        .count()
        < 2
    {
        assert!(Instant::now() < deadline, "{}", k.log_tail());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(text(c, &["PING"]), "+PONG\r\n");
    assert_eq!(
        c.info_field::<u8>("persistence", "aof_rewrite_in_progress"),
        1
    );
    let log = k.log_text();
    assert!(
        log.contains("Errors trying to shut down the server. Check the logs"),
        "{log}"
    );
}
