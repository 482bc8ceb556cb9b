//! uk-test's disk checks: data written, SHUTDOWN SAVE, a second boot from the same disk with
//! the same DEBUG DIGEST; a background save; a background save while a client rewrites,
//! deletes and creates keys holds exactly the keyspace of its start (its sections written
//! ahead of the walk included); the exported snapshot passes redis-check-rdb; an
//! RDB written by redis-server 7.0.15, imported into a disk, boots with its keys (every key's
//! type, value and expiry time read back as from redis-server: Kayvee's DEBUG DIGEST is its
//! own, not Redis's); SIGKILLs during BGSAVE; the crash test of the append-only log (every
//! acknowledged write survives SIGKILLs of QEMU, also during BGSAVE and BGREWRITEAOF); a full
//! slot; a full log on a full disk (Redis's MISCONF rules until a snapshot fits again); the
//! export of a log (written with `appendfsync always`, QEMU killed) as an RDB file and an AOF
//! that redis-check-rdb, redis-check-aof and redis-server accept, with every key; a disk too
//! small, and `disk=required` without one, stop the boot with a message.

use super::disk;
use super::resp::{resp_command, Resp};
use super::{
    client, describe, dir, expect_cli, fault_boot, free_port, spawn_logged, wait_bounded,
    wait_pong, Boot, Machine, BOOT_TIMEOUT, EXIT_FAILURE, EXIT_SUCCESS,
};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Size of the test disks.
const DISK_SIZE: &str = "16M";

/// The groups of checks, in the order they run (`uk-test --disk --only NAME,...` picks some).
pub const CHECKS: [&str; 9] = [
    "save",
    "bgsave-writes",
    "import",
    "kill",
    "crash",
    "full",
    "full-log",
    "export-log",
    "refusals",
];

/// Runs the disk checks (see the module doc) named in `only` (all when empty).
pub fn disk_test(image: &Path, only: &[String]) -> Result<(), String> {
    if let Some(bad) = only.iter().find(|n| !CHECKS.contains(&n.as_str())) {
        return Err(format!(
            "uk-test --disk --only: unknown check '{bad}' (of {CHECKS:?})"
        ));
    }
    let run = |name: &str| only.is_empty() || only.iter().any(|n| n == name);
    let work = dir().join("target/uk-disk");
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    // The full-log checks spend most of their time waiting for TTLs (40 s each) with their
    // guests idle: both run on threads of their own beside the other checks.
    std::thread::scope(|s| {
        let full_logs = run("full-log").then(|| {
            ["always", "everysec"].map(|fsync| {
                let work = &work;
                s.spawn(move || full_log(image, work, fsync))
            })
        });
        let others = sequential_checks(image, &work, &run);
        for h in full_logs.into_iter().flatten() {
            h.join()
                .map_err(|_| "a full-log check panicked".to_string())??;
        }
        others
    })
}

/// The disk checks that run one after the other (all but the full-log ones).
fn sequential_checks(image: &Path, work: &Path, run: &dyn Fn(&str) -> bool) -> Result<(), String> {
    if run("save") {
        save_reboot_export(image, work)?;
    }
    if run("bgsave-writes") {
        bgsave_under_writes(image, work)?;
    }
    if run("import") {
        import_redis_rdb(image, work)?;
    }
    if run("kill") {
        kill_during_bgsave(image, work)?;
    }
    if run("crash") {
        crash_test(image, work)?;
    }
    if run("full") {
        full_disk(image, work)?;
    }
    if run("export-log") {
        export_log(image, work)?;
    }
    if run("refusals") {
        refusals(image, work)?;
    }
    Ok(())
}

/// Writes, SHUTDOWN SAVE, a second boot with the same digest, the export checked.
fn save_reboot_export(image: &Path, work: &Path) -> Result<(), String> {
    let disk_file = work.join("disk.img");
    disk::create(&disk_file, DISK_SIZE)?;
    let digest = write_and_save(image, &disk_file)?;
    reboot_and_compare(image, &disk_file, &digest, "after SHUTDOWN SAVE")?;
    let exported = work.join("export.rdb");
    let e = disk::export(&disk_file, &exported)?;
    check_rdb(&exported)?;
    let h = e.header.ok_or("the export found no snapshot")?;
    println!(
        "uk-test: disk: exported snapshot generation {} ({} bytes) passes redis-check-rdb",
        h.generation, h.len
    );
    Ok(())
}

/// Keys of the background save under writes.
const AHEAD_KEYS: u32 = 100_000;

/// BGSAVE while one client keeps rewriting, deleting and creating keys, and swaps and empties
/// databases: the writes change keys the save's walk has not reached yet, so it keeps their
/// old values (the console says how many keys). The next boot (the append-only log is off)
/// must hold the keyspace of the BGSAVE's instant: its DEBUG DIGEST, taken by the same client
/// just before, as nothing else runs between the two.
fn bgsave_under_writes(image: &Path, work: &Path) -> Result<(), String> {
    let disk_file = work.join("disk-ahead.img");
    disk::create(&disk_file, "64M")?;
    let log = "uk-test-disk-ahead-console.log";
    let (mut qemu, port, console) = boot_with(image, &disk_file, log, &[])?;
    let result = (|| {
        let n = AHEAD_KEYS.to_string();
        cli(port, &["DEBUG", "POPULATE", &n])?;
        cli(port, &["SET", "ttl-key", "v", "EX", "100000"])?;
        let mut c = Resp::open(port)?;
        c.set_timeout(Duration::from_secs(60))?;
        let digest = c.call(&["DEBUG", "DIGEST"])?;
        c.expect(&["BGSAVE"], "Background saving started")?;
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let (mut batches, deadline) = (0u32, Instant::now() + Duration::from_secs(120));
        loop {
            let mut batch = Vec::new();
            for _ in 0..64 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let k = format!("key:{}", rng % u64::from(AHEAD_KEYS + AHEAD_KEYS / 10));
                batch.extend(match rng % 5 {
                    0 => resp_command(&["DEL", &k]),
                    1 => resp_command(&["EXPIRE", &k, "1000"]),
                    _ => resp_command(&["SET", &k, "rewritten"]),
                });
            }
            // Whole databases replaced mid-save (the walk goes on in their old versions).
            let extra = match batches {
                60 | 62 => Some(resp_command(&["SWAPDB", "0", "1"])),
                64 => Some(resp_command(&["FLUSHDB"])),
                _ => None,
            };
            let replies = 64 + usize::from(extra.is_some());
            batch.extend(extra.unwrap_or_default());
            c.send(&batch)?;
            for _ in 0..replies {
                let r = c.reply()?;
                if r.starts_with('-') {
                    return Err(format!("a write during BGSAVE: {r}"));
                }
            }
            batches += 1;
            if bgsave_ended(&c.call(&["INFO", "persistence"])?)? {
                break;
            }
            if Instant::now() > deadline {
                return Err("BGSAVE did not end within 120 s".into());
            }
        }
        let ahead = console
            .lock()
            .map_err(|_| "console lock")?
            .iter()
            .rev()
            .find(|(_, l)| l.contains("changed ahead of its walk"))
            .map(|(_, l)| l.clone())
            .ok_or(format!(
                "the console has no line of old values kept (target/{log})"
            ))?;
        shutdown(&mut qemu, port, "NOSAVE")?;
        Ok((digest, batches, ahead))
    })();
    let (digest, batches, ahead) = match result {
        Ok(r) => r,
        Err(e) => {
            let _ = qemu.kill();
            let _ = qemu.wait();
            return Err(e);
        }
    };
    reboot_and_compare(image, &disk_file, &digest, "BGSAVE under writes")?;
    println!(
        "uk-test: disk: {} writes during the BGSAVE of {} keys; {}",
        batches * 64,
        AHEAD_KEYS + 1,
        ahead.trim_start_matches("kayvee: ")
    );
    Ok(())
}

/// An RDB written by redis-server 7.0.15, imported into a disk, boots with its keys.
fn import_redis_rdb(image: &Path, work: &Path) -> Result<(), String> {
    let (rdb, script, want) = redis_server_rdb(work)?;
    let disk2 = work.join("disk-redis.img");
    disk::create(&disk2, DISK_SIZE)?;
    disk::import(&disk2, &rdb)?;
    let (mut qemu, port, _) = boot(image, &disk2, "uk-test-disk-3-console.log")?;
    let got = run_script(port, &script);
    let _ = shutdown(&mut qemu, port, "NOSAVE");
    let _ = qemu.kill();
    let got = got?;
    if got != want {
        let _ = std::fs::write(work.join("script-redis.txt"), &want);
        let _ = std::fs::write(work.join("script-kayvee.txt"), &got);
        return Err(
            "redis-server's RDB imported: the keys read back differ from redis-server's \
             (target/uk-disk/script*.txt)"
                .into(),
        );
    }
    println!(
        "uk-test: disk: redis-server 7.0.15's RDB imported: {} reads of every key's type, \
         value and expiry answered as redis-server answers them",
        script.lines().count()
    );
    Ok(())
}

/// SIGKILLs while a client writes with `appendfsync always`.
const CRASH_CYCLES: usize = 20;
/// Then SIGKILLs during a BGSAVE, and as many during a BGREWRITEAOF, with the client writing.
const CRASH_SAVE_CYCLES: usize = 4;
/// Then SIGKILLs while writing with `appendfsync everysec` (a kill of QEMU, not of the host:
/// a completed write is in the host's page cache, so nothing acknowledged may be lost).
const CRASH_EVERYSEC_CYCLES: usize = 3;
/// Keys in the snapshot under the log (so a save takes a while).
const CRASH_BASE_KEYS: usize = 20_000;

/// What a crash cycle does besides writing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum During {
    Writes,
    Bgsave,
    Rewrite,
    Everysec,
}

/// The crash test (`appendonly yes`, `appendfsync always`): each cycle boots from the disk,
/// checks that every write acknowledged in all earlier cycles reads back, writes more
/// (recording the acknowledged ones) and SIGKILLs QEMU at a random moment; then the same with
/// a BGSAVE and a BGREWRITEAOF started before the writes (killed 0-150 ms after it started:
/// such a save takes about 100 ms here), then with `appendfsync everysec` set first.
/// `auto-aof-rewrite-percentage 50` makes the log's automatic rewrites run along the way.
/// Every boot must succeed.
fn crash_test(image: &Path, work: &Path) -> Result<(), String> {
    let disk_file = work.join("disk-crash.img");
    disk::create(&disk_file, DISK_SIZE)?;
    let log = "uk-test-disk-crash-console.log";
    let (mut qemu, port, mut console) = boot_with(image, &disk_file, log, &CRASH_CMDLINE)?;
    let setup = (|| {
        let mut c = Resp::open(port)?;
        c.expect(
            &["DEBUG", "POPULATE", &CRASH_BASE_KEYS.to_string(), "base"],
            "OK",
        )?;
        c.expect(&["SAVE"], "OK")
    })();
    if let Err(e) = setup {
        let _ = qemu.kill();
        return Err(format!("crash test set-up: {e}"));
    }
    let mut acked: Vec<(String, String)> = Vec::new();
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64 | 1);
    let mut random = move |below: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % below
    };
    let plan: Vec<During> = std::iter::repeat_n(During::Writes, CRASH_CYCLES)
        .chain(std::iter::repeat_n(During::Bgsave, CRASH_SAVE_CYCLES))
        .chain(std::iter::repeat_n(During::Rewrite, CRASH_SAVE_CYCLES))
        .chain(std::iter::repeat_n(During::Everysec, CRASH_EVERYSEC_CYCLES))
        .collect();
    let (mut port, mut torn, mut cut_saves, mut auto) = (port, 0, 0, 0);
    let started = Instant::now();
    for (cycle, during) in plan.iter().enumerate() {
        let delay = Duration::from_millis(match during {
            During::Writes | During::Everysec => 50 + random(600),
            During::Bgsave | During::Rewrite => random(150),
        });
        let before = acked.len();
        let wrote = write_until_killed(port, cycle, *during, qemu, delay, &mut acked);
        if let Ok(lines) = console.lock() {
            let has = |needle: &str| lines.iter().filter(|(_, l)| l.contains(needle)).count();
            let begun = has("background saving started") + has("rewriting started");
            let ended = has("saving terminated") + has("saving error") + has("AOF rewrite f");
            cut_saves += begun.saturating_sub(ended);
            auto += has("automatic rewriting");
        }
        if let Err(e) = wrote {
            return Err(format!("crash cycle {cycle} ({during:?}): {e}"));
        }
        let log = format!("uk-test-disk-crash-{cycle}-console.log");
        let (q, p, c) = boot_with(image, &disk_file, &log, &CRASH_CMDLINE)
            .map_err(|e| format!("boot after crash cycle {cycle} ({during:?}): {e}"))?;
        (qemu, port, console) = (q, p, c);
        let verified = verify_acked(port, &acked);
        if let Ok(lines) = console.lock() {
            torn += lines
                .iter()
                .filter(|(_, l)| l.contains("is incomplete"))
                .count();
        }
        if let Err(e) = verified {
            let _ = qemu.kill();
            return Err(format!(
                "after crash cycle {cycle} ({during:?}, killed {delay:?} in, {} acknowledged \
                 writes in the cycle): {e} (console: target/{log})",
                acked.len() - before
            ));
        }
    }
    shutdown(&mut qemu, port, "NOSAVE")?;
    println!(
        "uk-test: disk: {} SIGKILLs with appendfsync always ({CRASH_CYCLES} while writing, \
         {CRASH_SAVE_CYCLES} after a BGSAVE, {CRASH_SAVE_CYCLES} after a BGREWRITEAOF, then \
         {CRASH_EVERYSEC_CYCLES} with everysec; {cut_saves} cut a save short) in {:.0} s: every boot succeeded and held all {} acknowledged writes; \
         {torn} torn last records ignored; {auto} automatic rewrites",
        plan.len(),
        started.elapsed().as_secs_f64(),
        acked.len(),
    );
    Ok(())
}

/// The crash test's command line.
const CRASH_CMDLINE: [&str; 4] = [
    "appendonly=yes",
    "appendfsync=always",
    "auto-aof-rewrite-percentage=50",
    "auto-aof-rewrite-min-size=0",
];

/// Writes `SET k v` one at a time until the connection dies, recording each acknowledged one;
/// QEMU is SIGKILLed `delay` after the writes begin (a cycle during a save starts it first).
fn write_until_killed(
    port: u16,
    cycle: usize,
    during: During,
    mut qemu: Child,
    delay: Duration,
    acked: &mut Vec<(String, String)>,
) -> Result<(), String> {
    let killer = std::thread::spawn(move || {
        std::thread::sleep(delay);
        let _ = qemu.kill(); // SIGKILL
        let _ = qemu.wait();
    });
    let result = (|| {
        let Ok(mut c) = Resp::open(port) else {
            return Ok(()); // killed before the connection
        };
        let start = match during {
            During::Writes => None,
            During::Bgsave => Some((&["BGSAVE"][..], "Background saving started")),
            During::Rewrite => Some((
                &["BGREWRITEAOF"][..],
                "Background append only file rewriting",
            )),
            During::Everysec => Some((&["CONFIG", "SET", "appendfsync", "everysec"][..], "OK")),
        };
        if let Some((cmd, want)) = start {
            match c.call(cmd) {
                Ok(reply) if reply.starts_with(want) => {}
                // An automatic rewrite the boot's cron started (the replayed log was more than
                // half its half) is the rewrite this cycle wants.
                Ok(reply)
                    if during == During::Rewrite
                        && reply.contains("rewriting already in progress") => {}
                Ok(reply) => return Err(format!("{}: {reply}", cmd.join(" "))),
                Err(_) => return Ok(()),
            }
        }
        for i in 0.. {
            let key = format!("c{cycle}:{i}");
            let value = format!("{cycle}-{i}-{}", "x".repeat(i % 50));
            match c.call(&["SET", &key, &value]) {
                Ok(reply) if reply == "OK" => acked.push((key, value)),
                Ok(reply) => return Err(format!("SET {key}: {reply}")),
                Err(_) => return Ok(()),
            }
        }
        Ok(())
    })();
    let _ = killer.join();
    result
}

/// Every acknowledged key must read back with its value, and the snapshot's keys be there.
fn verify_acked(port: u16, acked: &[(String, String)]) -> Result<(), String> {
    let mut c = Resp::open(port)?;
    let keys: usize = c.call(&["DBSIZE"])?.parse().map_err(|_| "DBSIZE")?;
    if keys < CRASH_BASE_KEYS + acked.len() {
        return Err(format!(
            "DBSIZE {keys}, want at least {}",
            CRASH_BASE_KEYS + acked.len()
        ));
    }
    for batch in acked.chunks(500) {
        let mut out = Vec::new();
        for (k, _) in batch {
            out.extend_from_slice(&resp_command(&["GET", k]));
        }
        c.send(&out)?;
        for (k, v) in batch {
            let got = c.reply()?;
            if &got != v {
                return Err(format!("acknowledged {k} = {v}: read back {got:?}"));
            }
        }
    }
    Ok(())
}

/// A snapshot larger than a slot (a 4 MiB disk: two 1 MiB slots and a 1 MiB log area): BGSAVE fails, writes get
/// Redis's MISCONF error (save points are on with a disk), SAVE answers `ERR`, SHUTDOWN
/// refuses to stop without its save, SHUTDOWN NOSAVE stops.
fn full_disk(image: &Path, work: &Path) -> Result<(), String> {
    let disk_file = work.join("disk-full.img");
    disk::create(&disk_file, "4M")?;
    let (mut qemu, port, _) = boot(image, &disk_file, "uk-test-disk-full-console.log")?;
    let result = (|| {
        cli(port, &["DEBUG", "POPULATE", "60000"])?;
        expect_cli(port, &["BGSAVE"], "Background saving started")?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while !cli(port, &["INFO", "persistence"])?.contains("rdb_bgsave_in_progress:0") {
            if Instant::now() > deadline {
                return Err("BGSAVE did not end within 60 s".to_string());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if !cli(port, &["INFO", "persistence"])?.contains("rdb_last_bgsave_status:err") {
            return Err("a snapshot larger than the slot: BGSAVE did not fail".into());
        }
        let set = cli(port, &["SET", "k", "v"])?;
        if set != RDB_MISCONF {
            return Err(format!("SET after the failed BGSAVE: {set}"));
        }
        expect_cli(port, &["SAVE"], "ERR")?;
        expect_cli(
            port,
            &["SHUTDOWN"],
            "ERR Errors trying to SHUTDOWN. Check logs.",
        )?;
        shutdown(&mut qemu, port, "NOSAVE")
    })();
    if result.is_err() {
        let _ = qemu.kill();
        let _ = qemu.wait();
    }
    result?;
    println!("uk-test: disk: a snapshot larger than its slot: BGSAVE fails, MISCONF, SAVE and SHUTDOWN refused, SHUTDOWN NOSAVE stops");
    Ok(())
}

/// Kills during a background save, each after a different delay.
const KILL_CYCLES: usize = 3;

/// QEMU killed with SIGKILL while a BGSAVE runs: each next boot must succeed and hold either
/// the snapshot before it or the one being written (DEBUG DIGEST equal to one of the two),
/// never a mix, never nothing. The kills land in successive thirds of the save's length, as
/// a timed BGSAVE of the first keys gives it (an idle image saves these keys in tens of
/// milliseconds: fixed delays would mostly land after the save).
fn kill_during_bgsave(image: &Path, work: &Path) -> Result<(), String> {
    let disk_file = work.join("disk-kill.img");
    disk::create(&disk_file, "64M")?;
    let (mut qemu, mut port, _) = boot(image, &disk_file, "uk-test-disk-kill-console.log")?;
    cli(port, &["DEBUG", "POPULATE", "40000", "a"])?;
    expect_cli(port, &["SAVE"], "OK")?;
    let mut saved = cli(port, &["DEBUG", "DIGEST"])?;
    let t = Instant::now();
    expect_cli(port, &["BGSAVE"], "Background saving started")?;
    while !cli(port, &["INFO", "persistence"])?.contains("rdb_bgsave_in_progress:0") {
        if t.elapsed() > Duration::from_secs(60) {
            return Err("BGSAVE did not end within 60 s".to_string());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let first_save = t.elapsed();
    let (mut old_kept, mut new_kept) = (0, 0);
    for cycle in 0..KILL_CYCLES {
        let prefix = format!("c{cycle}");
        cli(port, &["DEBUG", "POPULATE", "20000", &prefix])?;
        let writing = cli(port, &["DEBUG", "DIGEST"])?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        // This save holds 40,000 + 20,000 (cycle + 1) keys; its length scales with them.
        let length = first_save.mul_f64((2 + cycle + 1) as f64 / 2.0);
        let third = f64::from(nanos) / 1e9;
        let delay = length.mul_f64((cycle as f64 + third) / KILL_CYCLES as f64);
        expect_cli(port, &["BGSAVE"], "Background saving started")?;
        std::thread::sleep(delay);
        let _ = qemu.kill(); // SIGKILL
        let _ = qemu.wait();
        let log = format!("uk-test-disk-kill-{cycle}-console.log");
        (qemu, port) = match boot(image, &disk_file, &log) {
            Ok((q, p, _)) => (q, p),
            Err(e) => return Err(format!("boot after a kill during BGSAVE: {e}")),
        };
        let got = cli(port, &["DEBUG", "DIGEST"])?;
        if got == saved {
            old_kept += 1;
        } else if got == writing {
            new_kept += 1;
            saved = writing;
        } else {
            let _ = qemu.kill();
            return Err(format!(
                "after a kill {delay:?} into BGSAVE: digest {got}, want the previous snapshot's {saved} or the new one's {writing}"
            ));
        }
    }
    shutdown(&mut qemu, port, "NOSAVE")?;
    println!(
        "uk-test: disk: {KILL_CYCLES} SIGKILLs during BGSAVE (in successive thirds of its length; \
         a BGSAVE of the first 40,000 keys took {} ms, polled from the host): every boot loaded \
         a whole snapshot ({old_kept} the previous one, {new_kept} the new one)",
        first_save.as_millis()
    );
    Ok(())
}

/// Whether INFO persistence says the background save ended; an error if it failed.
fn bgsave_ended(info: &str) -> Result<bool, String> {
    if !info.contains("rdb_bgsave_in_progress:0") {
        return Ok(false);
    }
    if !info.contains("rdb_last_bgsave_status:ok") {
        return Err(format!("BGSAVE failed: {info}"));
    }
    Ok(true)
}

/// Boots with the disk; returns QEMU, the port and the console.
fn boot(image: &Path, disk_file: &Path, log: &str) -> Result<(Child, u16, Instant), String> {
    let port = free_port()?;
    let mut b = Boot::new(Machine::Microvm, "tcg", port);
    b.disk = Some(disk_file.to_path_buf());
    b.extra.push("enable-debug-command=yes".into());
    let (mut qemu, start, _console) = spawn_logged(image, &b, log)?;
    if !wait_pong(port, || Ok(start.elapsed() > BOOT_TIMEOUT))? {
        let _ = qemu.kill();
        return Err(format!("no PONG with the disk (console: target/{log})"));
    }
    Ok((qemu, port, start))
}

/// [`boot`] with more command-line words; returns QEMU, the port and the console lines.
fn boot_with(
    image: &Path,
    disk_file: &Path,
    log: &str,
    extra: &[&str],
) -> Result<(Child, u16, super::ConsoleLines), String> {
    let port = free_port()?;
    let mut b = Boot::new(Machine::Microvm, "tcg", port);
    b.disk = Some(disk_file.to_path_buf());
    b.extra.push("enable-debug-command=yes".into());
    b.extra.extend(extra.iter().map(|w| w.to_string()));
    let (mut qemu, start, console) = spawn_logged(image, &b, log)?;
    let booted = wait_pong(port, || {
        // A failed boot ends QEMU: no need to wait out the timeout.
        Ok(start.elapsed() > BOOT_TIMEOUT || matches!(qemu.try_wait(), Ok(Some(_))))
    })?;
    if !booted {
        let _ = qemu.kill();
        let _ = qemu.wait();
        return Err(format!("no PONG with the disk (console: target/{log})"));
    }
    Ok((qemu, port, console))
}

/// `redis-cli -p port args...`, trimmed.
fn cli(port: u16, args: &[&str]) -> Result<String, String> {
    let p = port.to_string();
    let mut all = vec!["-p", p.as_str()];
    all.extend_from_slice(args);
    Ok(client("redis-cli", &all, b"")?.trim().to_string())
}

/// Sends SHUTDOWN with `how`; QEMU must exit with success.
fn shutdown(qemu: &mut Child, port: u16, how: &str) -> Result<(), String> {
    let _ = cli(port, &["SHUTDOWN", how]);
    let st = wait_bounded(qemu, Duration::from_secs(60))?;
    if st.code() != Some(EXIT_SUCCESS) {
        return Err(format!("after SHUTDOWN {how}: {}", describe(st)));
    }
    Ok(())
}

/// Writes keys of every type, runs a BGSAVE to its end, writes once more and SHUTDOWN SAVE;
/// returns the DEBUG DIGEST before the shutdown.
fn write_and_save(image: &Path, disk_file: &Path) -> Result<String, String> {
    let (mut qemu, port, _) = boot(image, disk_file, "uk-test-disk-1-console.log")?;
    let result = (|| {
        for cmd in [
            &["SET", "s", "v"][..],
            &["RPUSH", "l", "a", "b", "c"],
            &["HSET", "h", "f", "v", "g", "w"],
            &["SADD", "set", "1", "2", "3"],
            &["ZADD", "z", "1", "a", "2.5", "b"],
            &["SET", "ttl", "x", "EX", "100000"],
            &["DEBUG", "POPULATE", "3000"],
        ] {
            cli(port, cmd)?;
        }
        expect_cli(port, &["BGSAVE"], "Background saving started")?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if bgsave_ended(&cli(port, &["INFO", "persistence"])?)? {
                break;
            }
            if Instant::now() > deadline {
                return Err("BGSAVE did not end within 60 s".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        cli(port, &["SET", "after-bgsave", "1"])?;
        expect_cli(port, &["DBSIZE"], "3007")?;
        let digest = cli(port, &["DEBUG", "DIGEST"])?;
        shutdown(&mut qemu, port, "SAVE")?;
        Ok(digest)
    })();
    if result.is_err() {
        let _ = qemu.kill();
        let _ = qemu.wait();
    }
    result
}

/// Boots from `disk_file`: DEBUG DIGEST must be `digest`; then SHUTDOWN NOSAVE.
fn reboot_and_compare(
    image: &Path,
    disk_file: &Path,
    digest: &str,
    what: &str,
) -> Result<(), String> {
    let (mut qemu, port, start) = boot(image, disk_file, "uk-test-disk-2-console.log")?;
    let up = start.elapsed();
    let result = (|| {
        let got = cli(port, &["DEBUG", "DIGEST"])?;
        if got != digest {
            return Err(format!("{what}: DEBUG DIGEST {got}, want {digest}"));
        }
        let keys = cli(port, &["DBSIZE"])?;
        shutdown(&mut qemu, port, "NOSAVE")?;
        println!(
            "uk-test: disk: {what}: booted in {:.0} ms with {keys} keys, DEBUG DIGEST equal",
            up.as_secs_f64() * 1e3
        );
        Ok(())
    })();
    if result.is_err() {
        let _ = qemu.kill();
        let _ = qemu.wait();
    }
    result
}

/// redis-check-rdb must accept the file.
fn check_rdb(rdb: &Path) -> Result<(), String> {
    let out = Command::new("redis-check-rdb")
        .arg(rdb)
        .output()
        .map_err(|e| format!("cannot run redis-check-rdb (apt-get install redis-tools): {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || !text.contains("RDB looks OK") {
        return Err(format!("redis-check-rdb {}: {text}", rdb.display()));
    }
    Ok(())
}

/// Runs `script` (one command a line) through redis-cli; returns the replies.
fn run_script(port: u16, script: &str) -> Result<String, String> {
    let p = port.to_string();
    client("redis-cli", &["-p", &p], script.as_bytes())
}

/// Has redis-server 7.0.15 write an RDB of keys of every type in their small and big
/// encodings; returns the file, a script reading every key back (type, value, expiry time)
/// and redis-server's replies to it.
fn redis_server_rdb(work: &Path) -> Result<(PathBuf, String, String), String> {
    let port = free_port()?;
    let name = "redis.rdb";
    let _ = std::fs::remove_file(work.join(name));
    let mut server = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .args(["--enable-debug-command", "yes", "--dbfilename", name])
        .arg("--dir")
        .arg(work)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run redis-server: {e}"))?;
    let result = (|| {
        if !wait_pong(port, || Ok(false))? {
            return Err("redis-server did not answer".to_string());
        }
        let many: Vec<String> = (0..300).map(|i| i.to_string()).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let mut big_set = vec!["SADD", "bigset"];
        big_set.extend(&many);
        let mut big_list = vec!["RPUSH", "biglist"];
        big_list.extend(&many);
        let mut big_hash = vec!["HSET", "bighash"];
        big_hash.extend(many.iter().flat_map(|m| [*m, *m]));
        for cmd in [
            &["SET", "str", "hello"][..],
            &["SET", "num", "12345"],
            &["RPUSH", "list", "a", "b", "c"],
            &big_list,
            &["SADD", "intset", "1", "2", "3"],
            &["SADD", "strset", "x", "y"],
            &big_set,
            &["HSET", "hash", "f", "v", "g", "w"],
            &big_hash,
            &["ZADD", "zset", "1", "a", "2.5", "b"],
            &["XADD", "stream", "1-1", "f", "v"],
            &["SET", "expiring", "x", "EX", "100000"],
            &["DEBUG", "POPULATE", "1000", "pop"],
        ] {
            cli(port, cmd)?;
        }
        let script = read_back_script(port)?;
        let want = run_script(port, &script)?;
        expect_cli(port, &["SAVE"], "OK")?;
        let _ = std::fs::write(work.join("script.txt"), &script);
        Ok((script, want))
    })();
    let _ = server.kill();
    let _ = server.wait();
    let (script, want) = result?;
    Ok((work.join(name), script, want))
}

/// Commands reading every key of the server at `port` back in an order-independent way:
/// its type, its expiry time and its value (sets sorted, hash fields one by one).
fn read_back_script(port: u16) -> Result<String, String> {
    let mut keys: Vec<String> = cli(port, &["KEYS", "*"])?
        .lines()
        .map(str::to_string)
        .collect();
    keys.sort();
    let types: String = keys.iter().map(|k| format!("TYPE {k}\n")).collect();
    let types = run_script(port, &types)?;
    let mut script = String::new();
    for (k, t) in keys.iter().zip(types.lines()) {
        script.push_str(&format!("TYPE {k}\nEXPIRETIME {k}\n"));
        match t.trim() {
            "string" => script.push_str(&format!("GET {k}\n")),
            "list" => script.push_str(&format!("LRANGE {k} 0 -1\n")),
            "set" => script.push_str(&format!("SORT {k} ALPHA\n")),
            "zset" => script.push_str(&format!("ZRANGE {k} 0 -1 WITHSCORES\n")),
            "stream" => script.push_str(&format!("XRANGE {k} - +\n")),
            "hash" => {
                script.push_str(&format!("HLEN {k}\n"));
                for f in cli(port, &["HKEYS", k])?.lines() {
                    script.push_str(&format!("HGET {k} {f}\n"));
                }
            }
            other => return Err(format!("key {k}: unexpected type {other}")),
        }
    }
    Ok(script)
}

/// A disk too small, a disk whose headers are foreign bytes (never formatted over), and
/// `disk=required` without a disk: each stops the boot with a message.
fn refusals(image: &Path, work: &Path) -> Result<(), String> {
    let tiny = work.join("tiny.img");
    std::fs::File::create(&tiny)
        .and_then(|f| f.set_len(1 << 20))
        .map_err(|e| format!("{}: {e}", tiny.display()))?;
    let mut b = Boot::new(Machine::Microvm, "tcg", free_port()?);
    b.disk = Some(tiny);
    b.mem = "32M".into();
    let out = b
        .command(image)
        .stderr(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run qemu-system-x86_64: {e}"))?;
    let console = String::from_utf8_lossy(&out.stdout);
    if out.status.code() != Some(EXIT_FAILURE) || !console.contains("the disk is too small") {
        return Err(format!(
            "a 1 MiB disk: want exit {EXIT_FAILURE} and 'the disk is too small':\n{console}"
        ));
    }
    let foreign = work.join("foreign.img");
    let mut bytes = vec![0xabu8; 8192];
    bytes.resize(16 << 20, 0);
    std::fs::write(&foreign, &bytes).map_err(|e| format!("{}: {e}", foreign.display()))?;
    let mut b = Boot::new(Machine::Microvm, "tcg", free_port()?);
    b.disk = Some(foreign);
    b.mem = "32M".into();
    let out = b
        .command(image)
        .stderr(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run qemu-system-x86_64: {e}"))?;
    let console = String::from_utf8_lossy(&out.stdout);
    if out.status.code() != Some(EXIT_FAILURE)
        || !console.contains("not a Kayvee disk header")
        || console.contains("ready:")
    {
        return Err(format!(
            "a disk of foreign bytes: want exit {EXIT_FAILURE}, 'not a Kayvee disk header', never ready:\n{console}"
        ));
    }
    let console = fault_boot(image, "disk=required")?;
    if !console.contains("kayvee: disk: no virtio-blk device, and disk=required") {
        return Err(format!("disk=required without a disk:\n{console}"));
    }
    println!("uk-test: disk: a 1 MiB disk, a disk of foreign bytes and disk=required without one: refused with a message, failure exit");
    Ok(())
}

/// The error writes get after a failed BGSAVE (redis-server 7.0.15's text, as redis-cli
/// prints it).
const RDB_MISCONF: &str = "MISCONF Redis is configured to save RDB snapshots, but it's \
currently unable to persist to disk. Commands that may modify the data set are disabled, \
because this instance is configured to report errors during writes if RDB snapshotting fails \
(stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB \
error.";

/// The error writes get while the log cannot be written (redis-server 7.0.15's text for a
/// failed AOF write with ENOSPC).
const AOF_MISCONF: &str = "-MISCONF Errors writing to the AOF file: No space left on device";
/// Keys written with a TTL first in [`full_log`]: their expiry frees the room a snapshot needs.
const FULL_EXPIRING: usize = 200;
/// Their TTL (the permanent writes must fill the disk before it ends).
const FULL_TTL_S: &str = "40";
/// Bytes of each value (random letters: LZF cannot shrink them).
const FULL_VALUE: usize = 4000;

/// A full log on a full disk (4 MiB: slots of 1 MiB, log halves of 512 KiB), `appendonly yes`
/// with `fsync` (`always` or `everysec`): 200 keys of 4 KB with a TTL, then permanent ones
/// until the log is full and no snapshot fits. Then, as Redis after a failed AOF write: writes
/// and PING get the MISCONF error, reads are served, INFO says `aof_last_write_status:err`;
/// under `always` the reply of the write that found the disk full is held back, under
/// `everysec` it was sent. Once the TTL keys expire a snapshot fits: the held reply comes
/// (OK), writes are accepted, INFO says `ok`. QEMU is then SIGKILLed: the next boot holds every
/// acknowledged write.
fn full_log(image: &Path, work: &Path, fsync: &str) -> Result<(), String> {
    let disk_file = work.join(format!("disk-full-log-{fsync}.img"));
    disk::create(&disk_file, "4M")?;
    let log = format!("uk-test-disk-full-log-{fsync}-console.log");
    let policy = format!("appendfsync={fsync}");
    let cmdline = ["appendonly=yes", policy.as_str()];
    let (mut qemu, port, console) = boot_with(image, &disk_file, &log, &cmdline)?;
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut value = move || -> String {
        (0..FULL_VALUE)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                char::from(b'a' + (seed % 26) as u8)
            })
            .collect()
    };
    let started = Instant::now();
    let result = (|| {
        let mut c = Resp::open(port)?;
        for i in 0..FULL_EXPIRING {
            let key = format!("t:{i}");
            c.expect(&["SET", &key, &value(), "EX", FULL_TTL_S], "OK")?;
        }
        c.set_timeout(Duration::from_secs(5))?;
        let mut acked: Vec<(String, String)> = Vec::new();
        let mut held = None;
        for i in 0.. {
            if i == 2000 {
                return Err("2000 writes of 4 KB and the 4 MiB disk is not full".into());
            }
            let (key, v) = (format!("p:{i}"), value());
            c.send(&resp_command(&["SET", &key, &v]))?;
            match c.reply() {
                Ok(r) if r == "OK" => acked.push((key, v)),
                Ok(r) if r == AOF_MISCONF && fsync != "always" => break,
                Ok(r) => return Err(format!("SET {key}: {r}")),
                Err(_) if matches!(qemu.try_wait(), Ok(Some(_))) => {
                    return Err(format!("the image stopped at SET {key}"))
                }
                Err(_) if fsync == "always" => {
                    held = Some((key, v));
                    break;
                }
                Err(e) => return Err(format!("SET {key}: {e}")),
            }
        }
        let filled = started.elapsed();
        let mut c2 = Resp::open(port)?;
        let (first, first_value) = acked.first().ok_or("the first write found the disk full")?;
        let got = c2.call(&["GET", first])?;
        if &got != first_value {
            return Err(format!("GET {first} on the full disk: {got:.60}"));
        }
        for cmd in [&["SET", "after", "1"][..], &["PING"]] {
            let got = c2.call(cmd)?;
            if got != AOF_MISCONF {
                return Err(format!("{} on the full disk: {got}", cmd.join(" ")));
            }
        }
        if !c2
            .call(&["INFO", "persistence"])?
            .contains("aof_last_write_status:err")
        {
            return Err("INFO on the full disk: no aof_last_write_status:err".into());
        }
        // The TTL keys expire; a snapshot then fits and restarts the log.
        let deadline = Instant::now() + Duration::from_secs(120);
        if let Some((key, v)) = held.take() {
            c.set_timeout(Duration::from_secs(120))?;
            match c.reply()? {
                r if r == "OK" => acked.push((key, v)),
                r => return Err(format!("the held reply to SET {key}: {r}")),
            }
        }
        while !c2
            .call(&["INFO", "persistence"])?
            .contains("aof_last_write_status:ok")
        {
            if Instant::now() > deadline {
                return Err("the full disk did not clear within 120 s of expiry".into());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let cleared = started.elapsed();
        c2.expect(&["SET", "after", "1"], "OK")?;
        acked.push(("after".into(), "1".into()));
        // A snapshot may fit before every TTL key has expired: the rest expire before the
        // kill, so the next boot must hold exactly the acknowledged keys.
        let want = acked.len().to_string();
        while c2.call(&["DBSIZE"])? != want {
            if Instant::now() > deadline {
                return Err(format!("DBSIZE never came down to {want}"));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok((acked, filled, cleared))
    })();
    let (acked, filled, cleared) = match result {
        Ok(r) => r,
        Err(e) => {
            let _ = qemu.kill();
            let _ = qemu.wait();
            return Err(format!("full log ({fsync}): {e} (console: target/{log})"));
        }
    };
    let room = console.lock().map_or(0, |lines| {
        lines
            .iter()
            .filter(|(_, l)| l.contains("the log has room again"))
            .count()
    });
    let _ = qemu.kill(); // SIGKILL
    let _ = qemu.wait();
    if room == 0 {
        return Err(format!(
            "full log ({fsync}): the console does not say the log has room again (target/{log})"
        ));
    }
    let log2 = format!("uk-test-disk-full-log-{fsync}-2-console.log");
    let (mut qemu, port, _) = boot_with(image, &disk_file, &log2, &cmdline)?;
    let verified = (|| {
        let mut c = Resp::open(port)?;
        let keys = c.call(&["DBSIZE"])?;
        if keys != acked.len().to_string() {
            return Err(format!("DBSIZE {keys}, want {}", acked.len()));
        }
        for (k, v) in &acked {
            let got = c.call(&["GET", k])?;
            if &got != v {
                return Err(format!("acknowledged {k}: read back {got:.60}"));
            }
        }
        Ok(())
    })();
    match verified {
        Ok(()) => shutdown(&mut qemu, port, "NOSAVE")?,
        Err(e) => {
            let _ = qemu.kill();
            let _ = qemu.wait();
            return Err(format!(
                "full log ({fsync}), after a SIGKILL: {e} (console: target/{log2})"
            ));
        }
    }
    println!(
        "uk-test: disk: full log with appendfsync {fsync} (4 MiB disk, full after {:.1} s): \
         MISCONF for SET and PING, reads served, aof_last_write_status:err{}; cleared by a \
         snapshot after the TTL keys expired ({:.1} s); after a SIGKILL all {} acknowledged \
         writes read back",
        filled.as_secs_f64(),
        match fsync {
            "always" => ", the reply of the write that found it full held back until then",
            _ => "",
        },
        cleared.as_secs_f64(),
        acked.len()
    );
    Ok(())
}

/// The export of a log: a snapshot (SAVE), then writes of every type with `appendfsync
/// always` (one in database 1, a DEL of a snapshot key, INCRs); QEMU SIGKILLed. `disk export
/// --aof` must give an RDB file that redis-check-rdb accepts and an AOF that redis-check-aof
/// accepts, and redis-server 7.0.15 loading either must answer the read-back of every key as
/// the image did before the kill.
fn export_log(image: &Path, work: &Path) -> Result<(), String> {
    let disk_file = work.join("disk-export.img");
    disk::create(&disk_file, DISK_SIZE)?;
    let log = "uk-test-disk-export-console.log";
    let cmdline = ["appendonly=yes", "appendfsync=always"];
    let (mut qemu, port, _) = boot_with(image, &disk_file, log, &cmdline)?;
    let written = (|| {
        let mut c = Resp::open(port)?;
        for cmd in [
            &["SET", "snap", "in the snapshot"][..],
            &["SET", "gone", "deleted by the log"],
            &["RPUSH", "list", "a", "b"],
            &["HSET", "hash", "f", "v"],
        ] {
            c.call(cmd)?;
        }
        c.expect(&["SAVE"], "OK")?;
        for cmd in [
            &["SET", "str", "from the log"][..],
            &["INCR", "counter"],
            &["INCR", "counter"],
            &["RPUSH", "list", "c"],
            &["HSET", "hash", "g", "w"],
            &["SADD", "set", "1", "2", "x"],
            &["ZADD", "zset", "1", "a", "2.5", "b"],
            &["XADD", "stream", "1-1", "f", "v"],
            &["SET", "expiring", "x", "EX", "100000"],
            &["DEL", "gone"],
            &["SELECT", "1"],
            &["SET", "in-db1", "yes"],
        ] {
            let r = c.call(cmd)?;
            if r.starts_with('-') {
                return Err(format!("{}: {r}", cmd.join(" ")));
            }
        }
        let script = read_back_script(port)?;
        let want = run_script(port, &script)?;
        Ok((script, want))
    })();
    let _ = qemu.kill(); // SIGKILL: the log's records are all there is of the writes
    let _ = qemu.wait();
    let (script, want) = written.map_err(|e| format!("export of a log: {e} (target/{log})"))?;
    let rdb_dir = work.join("export-rdb");
    let aof_dir = work.join("export-aof");
    for d in [&rdb_dir, &aof_dir] {
        let _ = std::fs::remove_dir_all(d);
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    let rdb = rdb_dir.join("dump.rdb");
    let aof = aof_dir.join("appendonly.aof");
    let e = disk::export_with(&disk_file, &rdb, Some(&aof))?;
    if e.records == 0 {
        return Err("export of a log: the disk's log has no records".into());
    }
    check_rdb(&rdb)?;
    let out = Command::new("redis-check-aof")
        .arg(&aof)
        .output()
        .map_err(|e| format!("cannot run redis-check-aof: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || !text.contains("is valid") {
        return Err(format!("redis-check-aof {}: {text}", aof.display()));
    }
    for (what, dir, args) in [
        ("the RDB file", &rdb_dir, &["--appendonly", "no"]),
        ("the AOF", &aof_dir, &["--appendonly", "yes"]),
    ] {
        let (mut server, port) = redis_server_in(dir, args)?;
        let got = run_script(port, &script).and_then(|got| {
            let db1 = cli(port, &["-n", "1", "GET", "in-db1"])?;
            Ok((got, db1))
        });
        let _ = server.kill();
        let _ = server.wait();
        let (got, db1) = got?;
        if got != want || db1 != "yes" {
            let _ = std::fs::write(work.join("export-want.txt"), &want);
            let _ = std::fs::write(work.join("export-got.txt"), &got);
            return Err(format!(
                "redis-server loading the exported {what}: the keys read back differ from the \
                 image's (target/uk-disk/export-*.txt; database 1: {db1:?})"
            ));
        }
    }
    println!(
        "uk-test: disk: a log exported after a SIGKILL (snapshot generation {} and {} records): \
         redis-check-rdb and redis-check-aof accept it; redis-server 7.0.15 loading the RDB \
         file or the AOF answers all {} reads as the image did",
        e.header.map_or(0, |h| h.generation),
        e.records,
        script.lines().count()
    );
    Ok(())
}

/// redis-server 7.0.15 started in `dir` (no save points) with `args`; returns it and its port
/// once it answers PING.
fn redis_server_in(dir: &Path, args: &[&str]) -> Result<(Child, u16), String> {
    let port = free_port()?;
    let mut server = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--save", ""])
        .args(args)
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run redis-server: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(30);
    if !wait_pong(port, || Ok(Instant::now() > deadline))? {
        let _ = server.kill();
        let _ = server.wait();
        return Err(format!("redis-server in {} did not answer", dir.display()));
    }
    Ok((server, port))
}
