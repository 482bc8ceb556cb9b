//! uk-test's replication check: the image as a replica of redis-server 7.0.15 on the host (its
//! link is an outgoing TCP connection to QEMU's user-network gateway, 10.0.2.2, which is the
//! host's loopback), then as the primary of that redis-server (through the port forward). Each
//! way: a full sync of the data already there, then the command stream, compared key by key.

use super::{await_pong, client, describe, free_port, spawn_logged, wait_bounded};
use super::{Boot, Machine, BOOT_TIMEOUT, EXIT_SUCCESS};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a sync may take under TCG before the check gives up.
const SYNC_LIMIT: Duration = Duration::from_secs(60);

/// Keys the primary holds before the replica connects (a full sync carries them).
const KEYS_BEFORE: &str = "20000";

/// redis-server on the host, stopped when dropped.
struct Redis {
    child: Child,
    port: u16,
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let dir = super::dir().join(format!("target/uk-test-repl-redis-{}", self.port));
        let _ = std::fs::remove_dir_all(dir);
    }
}

fn start_redis() -> Result<Redis, String> {
    let port = free_port()?;
    // Its own empty directory: a replica writes the RDB it receives to `dir`, and a redis-server
    // started where one was left would load it.
    let dir = super::dir().join(format!("target/uk-test-repl-redis-{port}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .arg("--dir")
        .arg(&dir)
        .args(["--bind", "127.0.0.1", "--protected-mode", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("redis-server (apt-get install redis-server): {e}"))?;
    let redis = Redis { child, port };
    let p = port.to_string();
    let t = Instant::now();
    while client("redis-cli", &["-p", &p, "PING"], b"").map_or(true, |r| r.trim() != "PONG") {
        if t.elapsed() > Duration::from_secs(10) {
            return Err("redis-server did not answer PING".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(redis)
}

/// One INFO replication field.
fn repl_field(port: u16, key: &str) -> Result<String, String> {
    let info = client(
        "redis-cli",
        &["-p", &port.to_string(), "INFO", "replication"],
        b"",
    )?;
    Ok(info
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .unwrap_or("")
        .trim()
        .to_string())
}

/// Waits until `replica`'s link is up and its offset is the primary's.
fn await_synced(primary: u16, replica: u16) -> Result<Duration, String> {
    let t = Instant::now();
    loop {
        let up = repl_field(replica, "master_link_status")? == "up";
        let want = repl_field(primary, "master_repl_offset")?;
        if up && repl_field(replica, "slave_repl_offset")? == want {
            return Ok(t.elapsed());
        }
        if t.elapsed() > SYNC_LIMIT {
            return Err(format!(
                "the replica on port {replica} did not catch up with {primary} in {} s",
                SYNC_LIMIT.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every key of database 0 with its value on one line (SCAN, then a read by the key's kind:
/// the test writes strings, lists and hashes, named so), sorted.
fn contents(port: u16) -> Result<Vec<String>, String> {
    let p = port.to_string();
    let keys = client("redis-cli", &["-p", &p, "--scan"], b"")?;
    let mut keys: Vec<&str> = keys.lines().filter(|k| !k.is_empty()).collect();
    keys.sort_unstable();
    // SCAN may return a key twice.
    keys.dedup();
    let mut script = String::new();
    for k in &keys {
        let read = if k.ends_with(":list") {
            "return table.concat(redis.call('LRANGE', KEYS[1], 0, -1), ',')"
        } else if k.ends_with(":hash") {
            "local t = redis.call('HGETALL', KEYS[1]) local p = {} \
             for i = 1, #t, 2 do p[#p + 1] = t[i] .. '=' .. t[i + 1] end \
             table.sort(p) return table.concat(p, ',')"
        } else {
            "return redis.call('GET', KEYS[1])"
        };
        script.push_str(&format!("EVAL_RO \"{read}\" 1 {k}\n"));
    }
    let out = client("redis-cli", &["-p", &p], script.as_bytes())?;
    let values: Vec<&str> = out.lines().collect();
    if values.len() != keys.len() {
        return Err(format!(
            "port {port}: {} keys but {} values read",
            keys.len(),
            values.len()
        ));
    }
    Ok(keys
        .iter()
        .zip(values)
        .map(|(k, v)| format!("{k} {v}"))
        .collect())
}

/// Writes a mix of commands to `port`: strings, counters, a list, a hash, expiring keys.
fn write_mix(port: u16, tag: &str) -> Result<(), String> {
    let p = port.to_string();
    let mut script = String::new();
    for i in 0..500 {
        script.push_str(&format!("SET {tag}:s:{i} v{i}\nINCR {tag}:counter\n"));
        script.push_str(&format!(
            "RPUSH {tag}:list e{i}\nHSET {tag}:hash f{i} {i}\n"
        ));
    }
    script.push_str(&format!("SET {tag}:ttl x EX 1000\nDEL {tag}:s:7\n"));
    client("redis-cli", &["-p", &p], script.as_bytes()).map(|_| ())
}

fn compare(a: u16, b: u16, what: &str) -> Result<usize, String> {
    let (x, y) = (contents(a)?, contents(b)?);
    if x != y {
        let first = x
            .iter()
            .zip(&y)
            .find(|(l, r)| l != r)
            .map(|(l, r)| format!("{l} / {r}"))
            .unwrap_or_else(|| format!("{} keys against {}", x.len(), y.len()));
        return Err(format!("{what}: the data differ: {first}"));
    }
    Ok(x.len())
}

/// The check (see the module's comment).
pub fn repl_test(image: &Path) -> Result<(), String> {
    let port = free_port()?;
    let boot = Boot::new(Machine::Microvm, "tcg", port);
    let name = "uk-test-repl-console.log";
    let (mut qemu, start, _console) = spawn_logged(image, &boot, name)?;
    let result = (|| {
        await_pong(&mut qemu, port, start, BOOT_TIMEOUT)?;
        let redis = start_redis()?;
        let (r, u) = (redis.port.to_string(), port.to_string());
        client(
            "redis-cli",
            &["-p", &r, "DEBUG", "POPULATE", KEYS_BEFORE],
            b"",
        )
        .ok();
        // redis-server 7.0 refuses DEBUG by default: the keys go in with SETs then.
        if repl_field(redis.port, "master_repl_offset")? == "0" {
            let script: String = (0..20000)
                .map(|i| format!("SET key:{i} value:{i}\n"))
                .collect();
            client("redis-cli", &["-p", &r], script.as_bytes())?;
        }
        write_mix(redis.port, "before")?;
        // The image follows redis-server.
        let cmd = ["-p", &u, "REPLICAOF", "10.0.2.2", &r];
        let ok = client("redis-cli", &cmd, b"")?;
        if ok.trim() != "OK" {
            return Err(format!("REPLICAOF on the image: {ok:?}"));
        }
        let full = await_synced(redis.port, port)?;
        write_mix(redis.port, "after")?;
        let stream = await_synced(redis.port, port)?;
        let n = compare(redis.port, port, "the image as a replica")?;
        let ro = client("redis-cli", &["-p", &u, "SET", "x", "y"], b"")?;
        if !ro.starts_with("READONLY") {
            return Err(format!("a write to the replica image answered {ro:?}"));
        }
        println!(
            "uk-test: the image as redis-server's replica: full sync {:.1} s, then the stream \
             {:.1} s, {n} keys equal; writes refused (READONLY)",
            full.as_secs_f64(),
            stream.as_secs_f64()
        );
        // Now the other way: the image is the primary, a fresh redis-server its replica (a
        // full sync: the first one could continue the image's history with a partial one).
        client("redis-cli", &["-p", &u, "REPLICAOF", "NO", "ONE"], b"")?;
        drop(redis);
        let redis = start_redis()?;
        let r = redis.port.to_string();
        client("redis-cli", &["-p", &r, "REPLICAOF", "127.0.0.1", &u], b"")?;
        let full = await_synced(port, redis.port)?;
        write_mix(port, "primary")?;
        let stream = await_synced(port, redis.port)?;
        let n = compare(port, redis.port, "the image as the primary")?;
        let synced = client("redis-cli", &["-p", &u, "INFO", "stats"], b"")?;
        if !synced.contains("sync_full:1") {
            return Err(format!(
                "the image's INFO stats after one full sync: {synced}"
            ));
        }
        println!(
            "uk-test: redis-server as the image's replica: full sync {:.1} s, then the stream \
             {:.1} s, {n} keys equal",
            full.as_secs_f64(),
            stream.as_secs_f64()
        );
        drop(redis);
        let _ = client("redis-cli", &["-p", &u, "SHUTDOWN", "NOSAVE"], b"");
        let status = wait_bounded(&mut qemu, Duration::from_secs(20))?;
        if status.code() != Some(EXIT_SUCCESS) {
            return Err(format!("after SHUTDOWN NOSAVE: {}", describe(status)));
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = qemu.kill();
        let _ = qemu.wait();
    }
    result.map_err(|e| format!("replication: {e} (console: target/{name})"))
}
