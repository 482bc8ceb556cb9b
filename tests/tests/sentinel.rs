//! Sentinel (Debian's redis-sentinel 7.0.15; `redis-server --sentinel`, the same binary, when
//! the package is missing) monitoring Kayvee: a primary with two replicas on loopback, each
//! with a config file (Sentinel's reconfiguration ends with CONFIG REWRITE), watched by three
//! sentinels that find the replicas in the primary's INFO and each other through the
//! `__sentinel__:hello` channel on the Kayvees. A redis-py client (`tests/py/sentinel_client.py`)
//! asks Sentinel for the primary and writes with `WAIT 1` after each write. The primary is
//! killed with SIGKILL under that load: the sentinels agree it is down, elect a leader, which
//! promotes a replica (`SLAVEOF NO ONE` in a MULTI with CONFIG REWRITE and CLIENT KILL TYPE)
//! and points the other one at it; the client keeps writing to the new primary; the old
//! primary, started again on its port, is turned into a replica of the new one and syncs.
//! Every acknowledged write is on the promoted primary.

use kayvee_tests::{free_port, kayvee_bin, redis_required, tool_available, workspace_root};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long each step (discovery, failover, the old primary's conversion) may take.
const STEP_MAX: Duration = Duration::from_secs(45);
/// The master name the sentinels monitor.
const NAME: &str = "mymaster";

/// A process on 127.0.0.1:`port` with its log, killed (SIGKILL) when dropped.
struct Proc {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Proc {
    /// The log's last lines, for failure messages.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// Kills the process at once, as a crash would.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Spawns `cmd` with its output in `log`, then waits until `port` answers PING.
fn spawn(mut cmd: Command, port: u16, log: PathBuf) -> Proc {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .unwrap();
    let err = out.try_clone().unwrap();
    cmd.stdin(Stdio::null()).stdout(out).stderr(err);
    let child = cmd.spawn().expect("spawn");
    let mut p = Proc { child, port, log };
    let start = Instant::now();
    loop {
        if let Ok(Some(status)) = p.child.try_wait() {
            panic!("exited at start ({status}):\n{}", p.log_tail());
        }
        if query::<String>(port, &["PING"]).is_some_and(|r| r == "PONG") {
            return p;
        }
        assert!(start.elapsed() < STEP_MAX, "no PONG:\n{}", p.log_tail());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One command on a fresh connection (None on any error).
fn query<T: redis::FromRedisValue>(port: u16, args: &[&str]) -> Option<T> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).ok()?;
    let mut con = client
        .get_connection_with_timeout(Duration::from_secs(2))
        .ok()?;
    con.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(&mut con).ok()
}

/// Waits until `check` holds, failing with `what` and `context()` after [`STEP_MAX`].
fn wait_for(what: &str, mut check: impl FnMut() -> bool, context: impl Fn() -> String) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < STEP_MAX, "{what}:\n{}", context());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A Kayvee on `port` from a config file in `dir` (written once, kept across restarts: the
/// server's CONFIG REWRITE changes it).
fn kayvee(dir: &Path, port: u16, replicaof: Option<u16>) -> Proc {
    let conf = dir.join("kayvee.conf");
    if !conf.exists() {
        let mut text = format!(
            "port {port}\nbind 127.0.0.1\nsave \"\"\ndir {}\nrepl-ping-replica-period 1\n\
             repl-diskless-sync-delay 0\n",
            dir.display()
        );
        if let Some(p) = replicaof {
            text.push_str(&format!("replicaof 127.0.0.1 {p}\n"));
        }
        std::fs::write(&conf, text).unwrap();
    }
    let mut cmd = Command::new(kayvee_bin());
    cmd.arg(&conf).current_dir(dir);
    spawn(cmd, port, dir.join("kayvee.log"))
}

/// A sentinel on `port` monitoring the primary on `primary` (quorum 2), with small timeouts.
fn sentinel(dir: &Path, port: u16, primary: u16) -> Proc {
    let conf = dir.join("sentinel.conf");
    let text = format!(
        "port {port}\nbind 127.0.0.1\ndaemonize no\ndir {}\n\
         sentinel monitor {NAME} 127.0.0.1 {primary} 2\n\
         sentinel down-after-milliseconds {NAME} 3000\n\
         sentinel failover-timeout {NAME} 4000\n\
         sentinel parallel-syncs {NAME} 2\n",
        dir.display()
    );
    std::fs::write(&conf, text).unwrap();
    // redis-sentinel is redis-server's binary; `redis-server FILE --sentinel` is the same.
    let (program, extra) = if which("redis-sentinel") {
        ("redis-sentinel", None)
    } else {
        ("redis-server", Some("--sentinel"))
    };
    let mut cmd = Command::new(program);
    cmd.arg(&conf).args(extra).current_dir(dir);
    spawn(cmd, port, dir.join("sentinel.log"))
}

/// The primary's port as sentinel `port` sees it.
fn primary_port(port: u16) -> Option<u16> {
    let addr: Vec<String> = query(port, &["SENTINEL", "get-master-addr-by-name", NAME])?;
    addr.get(1)?.parse().ok()
}

/// One field of a sentinel's `SENTINEL MASTER` reply.
fn master_field(port: u16, name: &str) -> Option<String> {
    let flat: Vec<String> = query(port, &["SENTINEL", "MASTER", NAME])?;
    flat.chunks(2)
        .find(|kv| kv.first().is_some_and(|k| k == name))
        .and_then(|kv| kv.get(1).cloned())
}

/// ROLE as text: `master`, or `slave <port> <state>`.
fn role(port: u16) -> String {
    match query::<redis::Value>(port, &["ROLE"]) {
        Some(redis::Value::Array(items)) => {
            let words: Vec<String> = items
                .iter()
                .map(|v| match v {
                    redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                    redis::Value::Int(n) => n.to_string(),
                    other => format!("{other:?}"),
                })
                .collect();
            match words.first().map(String::as_str) {
                Some("slave") => format!("slave {} {}", words[2], words[3]),
                Some(w) => w.to_string(),
                None => String::new(),
            }
        }
        other => format!("{other:?}"),
    }
}

/// A python3 that can import redis: Debian's first (the package installs there), then PATH's.
fn python_with_redis() -> Option<&'static str> {
    ["/usr/bin/python3", "python3"].into_iter().find(|py| {
        Command::new(py)
            .args(["-c", "import redis.sentinel"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// Whether the tools are here (skips with a reason otherwise, unless they are required).
fn tools() -> Option<&'static str> {
    let python = python_with_redis();
    let sentinel = which("redis-sentinel") || tool_available("redis-server");
    match python {
        Some(py) if sentinel => Some(py),
        _ => {
            assert!(
                !redis_required(),
                "redis-sentinel (or redis-server) and python3-redis are needed"
            );
            eprintln!("skipped: needs redis-sentinel or redis-server, and python3-redis");
            None
        }
    }
}

/// Whether `tool --version` runs (no skip notice: the caller has a fallback).
fn which(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn read_progress(path: &Path) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn sentinel_fails_over_a_kayvee_primary_and_keeps_every_acknowledged_write() {
    let Some(python) = tools() else {
        return;
    };
    let root = std::env::temp_dir().join(format!("kayvee-sentinel-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let dirs: Vec<PathBuf> = ["p", "r1", "r2", "s1", "s2", "s3", "client"]
        .iter()
        .map(|d| root.join(d))
        .collect();
    for d in &dirs {
        std::fs::create_dir_all(d).unwrap();
    }
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let mut kv = vec![kayvee(&dirs[0], ports[0], None)];
    kv.push(kayvee(&dirs[1], ports[1], Some(ports[0])));
    kv.push(kayvee(&dirs[2], ports[2], Some(ports[0])));
    let logs = |kv: &[Proc]| {
        kv.iter()
            .map(|p| format!("--- kayvee {} ---\n{}", p.port, p.log_tail()))
            .collect::<Vec<_>>()
            .join("\n")
    };
    for r in &kv[1..] {
        wait_for(
            "replica link up",
            || role(r.port).ends_with("connected"),
            || logs(&kv),
        );
    }
    let sentinels: Vec<Proc> = (0..3)
        .map(|i| sentinel(&dirs[3 + i], free_port(), ports[0]))
        .collect();
    let s_ports: Vec<u16> = sentinels.iter().map(|s| s.port).collect();
    let s_logs = |s: &[Proc]| {
        s.iter()
            .map(|p| format!("--- sentinel {} ---\n{}", p.port, p.log_tail()))
            .collect::<Vec<_>>()
            .join("\n")
    };
    // Each sentinel knows both replicas (from the primary's INFO) and the two other
    // sentinels (from their hello messages on the Kayvees' `__sentinel__:hello`).
    for &s in &s_ports {
        wait_for(
            "sentinel discovery",
            || {
                master_field(s, "num-slaves").as_deref() == Some("2")
                    && master_field(s, "num-other-sentinels").as_deref() == Some("2")
            },
            || s_logs(&sentinels),
        );
    }

    let client_dir = &dirs[6];
    let stop = client_dir.join("stop");
    let progress = client_dir.join("progress");
    let script = workspace_root().join("tests/py/sentinel_client.py");
    let s_list = s_ports
        .iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let client = Command::new(python)
        .arg(&script)
        .arg(&s_list)
        .arg(&stop)
        .arg(&progress)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python3");
    wait_for(
        "the client's first acknowledged writes",
        || read_progress(&progress) >= 200,
        || logs(&kv),
    );

    // SIGKILL the primary under the load.
    kv[0].kill();
    let acked_at_kill = read_progress(&progress);
    let mut promoted = 0;
    wait_for(
        "failover",
        || {
            promoted = primary_port(s_ports[0]).unwrap_or(0);
            promoted != ports[0] && promoted != 0
        },
        || format!("{}\n{}", s_logs(&sentinels), logs(&kv)),
    );
    assert!(ports[1..].contains(&promoted), "promoted {promoted}");
    let other = if promoted == ports[1] {
        ports[2]
    } else {
        ports[1]
    };
    wait_for(
        "the promoted replica is a primary",
        || role(promoted) == "master",
        || logs(&kv),
    );
    let follows = format!("slave {promoted} connected");
    wait_for(
        "the other replica follows the promoted one",
        || role(other) == follows,
        || format!("{}\n{}", s_logs(&sentinels), logs(&kv)),
    );

    // The old primary comes back empty on its port and is made a replica of the new one.
    kv[0] = kayvee(&dirs[0], ports[0], None);
    wait_for(
        "the old primary rejoins as a replica",
        || role(ports[0]) == follows,
        || format!("{}\n{}", s_logs(&sentinels), logs(&kv)),
    );
    // Sentinel's CONFIG REWRITE kept the new role in its file.
    let conf = std::fs::read_to_string(dirs[0].join("kayvee.conf")).unwrap();
    assert!(
        conf.contains(&format!("replicaof 127.0.0.1 {promoted}")),
        "{conf}"
    );
    // The client writes on, acknowledged by the new primary's replicas.
    let before = read_progress(&progress);
    wait_for(
        "acknowledged writes after the failover",
        || read_progress(&progress) >= before + 100,
        || logs(&kv),
    );
    std::fs::write(&stop, "").unwrap();
    let out = client.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "acknowledged writes missing on the promoted primary ({}), {acked_at_kill} acked at \
         the kill:\n{stdout}\n{stderr}\n{}\n{}",
        out.status,
        s_logs(&sentinels),
        logs(&kv)
    );
    assert!(
        stdout.contains(&format!("\"127.0.0.1:{promoted}\"")),
        "no write acknowledged through the promoted primary: {stdout}"
    );
    eprintln!("client: {stdout}");
    drop(sentinels);
    drop(kv);
    let _ = std::fs::remove_dir_all(&root);
}
