//! The durability promise under kill -9: with `appendfsync always`, every write a client saw
//! acknowledged is present after SIGKILL and restart, and the AOF loads (cycles with random kill
//! moments); with `everysec`, at most about a second of acknowledged writes is lost.

use kayvee_tests::{Conn, Server};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WRITERS: usize = 4;

/// What one writer saw acknowledged.
#[derive(Default, Clone)]
struct Acked {
    /// Highest INCR reply on its counter.
    counter: i64,
    /// Values whose RPUSH was acknowledged.
    pushes: Vec<u64>,
    /// SET keys acknowledged (key = value).
    sets: Vec<u64>,
    /// When each acknowledgement arrived (for everysec), per push.
    push_times: Vec<Instant>,
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kayvee-aofcrash-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn start(dir: &Path, fsync: &str) -> Server {
    Server::kayvee(&[
        "--dir",
        dir.to_str().unwrap(),
        "--appendonly",
        "yes",
        "--appendfsync",
        fsync,
        "--save",
        "",
        // Rewrites during the run too: they must not lose acknowledged writes either.
        "--auto-aof-rewrite-min-size",
        "64kb",
    ])
    .expect("kayvee")
}

/// One writer: INCR, RPUSH, SET with unique values until the server dies.
fn writer(port: u16, id: usize, cycle: usize, acked: Arc<Mutex<Acked>>, stop: Arc<AtomicBool>) {
    let Ok(mut c) = Conn::connect(port) else {
        return;
    };
    c.set_timeout(Duration::from_secs(2));
    let counter = format!("counter:{id}");
    let list = format!("list:{id}");
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let unique = ((cycle as u64) << 32) | n;
        n += 1;
        let Ok(r) = c.cmd(&[b"INCR", counter.as_bytes()]) else {
            return;
        };
        let Some(v) = std::str::from_utf8(&r)
            .ok()
            .and_then(|s| s.trim()[1..].parse().ok())
        else {
            return;
        };
        acked.lock().unwrap().counter = v;
        let val = unique.to_string();
        match c.cmd(&[b"RPUSH", list.as_bytes(), val.as_bytes()]) {
            Ok(r) if r.starts_with(b":") => {
                let mut a = acked.lock().unwrap();
                a.pushes.push(unique);
                a.push_times.push(Instant::now());
            }
            _ => return,
        }
        let key = format!("k:{id}:{unique}");
        match c.cmd(&[b"SET", key.as_bytes(), val.as_bytes()]) {
            Ok(r) if r == b"+OK\r\n" => acked.lock().unwrap().sets.push(unique),
            _ => return,
        }
    }
}

/// Runs writers, kills the server after `run`, returns what was acknowledged and the kill time.
fn cycle(
    port: u16,
    server: Server,
    cycle: usize,
    run: Duration,
    acked: &[Arc<Mutex<Acked>>],
) -> Instant {
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..WRITERS)
        .map(|id| {
            let (a, s) = (Arc::clone(&acked[id]), Arc::clone(&stop));
            std::thread::spawn(move || writer(port, id, cycle, a, s))
        })
        .collect();
    std::thread::sleep(run);
    drop(server); // SIGKILL
    let killed = Instant::now();
    stop.store(true, Ordering::Relaxed);
    threads.into_iter().for_each(|t| t.join().unwrap());
    killed
}

/// The list's members on the restarted server.
fn members(c: &mut Conn, list: &str) -> std::collections::HashSet<u64> {
    let r = c.cmd_str(&["LRANGE", list, "0", "-1"]);
    String::from_utf8_lossy(&r)
        .split("\r\n")
        .filter(|l| !l.is_empty() && !l.starts_with('*') && !l.starts_with('$'))
        .map(|l| l.parse().unwrap())
        .collect()
}

fn counter(c: &mut Conn, id: usize) -> i64 {
    let r = c.cmd_str(&["GET", &format!("counter:{id}")]);
    let s = String::from_utf8_lossy(&r);
    s.split("\r\n")
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// A cheap deterministic random source for kill moments.
fn next(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

#[test]
fn always_keeps_every_acknowledged_write_across_kill_9() {
    let dir = tmpdir("always");
    let acked: Vec<_> = (0..WRITERS)
        .map(|_| Arc::new(Mutex::new(Acked::default())))
        .collect();
    let mut seed = 0x9E37_79B9_7F4A_7C15u64 ^ std::process::id() as u64;
    let cycles = 20;
    for i in 0..cycles {
        let server = start(&dir, "always");
        let port = server.port();
        let mut c = server.conn();
        for (id, a) in acked.iter().enumerate() {
            let a = a.lock().unwrap();
            let got = counter(&mut c, id);
            assert!(
                got >= a.counter,
                "cycle {i}: counter {id} is {got}, acknowledged {}",
                a.counter
            );
            let m = members(&mut c, &format!("list:{id}"));
            let lost = a.pushes.iter().filter(|v| !m.contains(v)).count();
            assert_eq!(
                lost, 0,
                "cycle {i}: writer {id} lost {lost} acknowledged pushes"
            );
            for &s in a.sets.iter().rev().take(20) {
                let r = c.cmd_str(&["GET", &format!("k:{id}:{s}")]);
                assert_eq!(
                    r,
                    format!("${}\r\n{s}\r\n", s.to_string().len()).into_bytes()
                );
            }
        }
        drop(c);
        let run = Duration::from_millis(150 + next(&mut seed) % 600);
        cycle(port, server, i, run, &acked);
    }
    let server = start(&dir, "always");
    let total: usize = acked.iter().map(|a| a.lock().unwrap().pushes.len()).sum();
    assert!(total > 100, "the writers did write ({total})");
    let mut c = server.conn();
    for (id, a) in acked.iter().enumerate() {
        let n = members(&mut c, &format!("list:{id}")).len();
        assert!(
            n >= a.lock().unwrap().pushes.len(),
            "writer {id}: {n} pushes left"
        );
    }
}

#[test]
fn everysec_loses_at_most_about_a_second() {
    let dir = tmpdir("everysec");
    let acked: Vec<_> = (0..WRITERS)
        .map(|_| Arc::new(Mutex::new(Acked::default())))
        .collect();
    for i in 0..3 {
        let server = start(&dir, "everysec");
        let port = server.port();
        let starts: Vec<usize> = acked
            .iter()
            .map(|a| a.lock().unwrap().pushes.len())
            .collect();
        let killed = cycle(port, server, i, Duration::from_millis(1500), &acked);
        let server = start(&dir, "everysec");
        let mut c = server.conn();
        for (id, a) in acked.iter().enumerate() {
            let a = a.lock().unwrap();
            let m = members(&mut c, &format!("list:{id}"));
            let from = starts[id];
            for (v, t) in a.pushes[from..].iter().zip(&a.push_times[from..]) {
                if !m.contains(v) {
                    let age = killed.saturating_duration_since(*t);
                    assert!(
                        age < Duration::from_millis(2200),
                        "cycle {i}: lost a write acknowledged {age:?} before the kill"
                    );
                }
            }
        }
        drop(c);
        drop(server);
    }
}
