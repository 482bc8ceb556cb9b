//! uk-test's disk checks: data written, SHUTDOWN SAVE, a second boot from the same disk with
//! the same DEBUG DIGEST; a background save; the exported snapshot passes redis-check-rdb; an
//! RDB written by redis-server 7.0.15, imported into a disk, boots with its keys (every key's
//! type, value and expiry time read back as from redis-server: Kayvee's DEBUG DIGEST is its
//! own, not Redis's); a disk too small, and `disk=required` without one, stop the boot with a
//! message.

use super::disk;
use super::{
    client, describe, dir, expect_cli, fault_boot, free_port, spawn_logged, wait_bounded,
    wait_pong, Boot, Machine, BOOT_TIMEOUT, EXIT_FAILURE, EXIT_SUCCESS,
};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Size of the test disks.
const DISK_SIZE: &str = "16M";

/// Runs the disk checks (see the module doc).
pub fn disk_test(image: &Path) -> Result<(), String> {
    let work = dir().join("target/uk-disk");
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    let disk_file = work.join("disk.img");
    disk::create(&disk_file, DISK_SIZE)?;
    let digest = write_and_save(image, &disk_file)?;
    reboot_and_compare(image, &disk_file, &digest, "after SHUTDOWN SAVE")?;
    let exported = work.join("export.rdb");
    let h = disk::export(&disk_file, &exported)?;
    check_rdb(&exported)?;
    println!(
        "uk-test: disk: exported snapshot generation {} ({} bytes) passes redis-check-rdb",
        h.generation, h.len
    );
    let (rdb, script, want) = redis_server_rdb(&work)?;
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
    kill_during_bgsave(image, &work)?;
    full_disk(image, &work)?;
    refusals(image, &work)
}

/// A snapshot larger than a slot (a 3 MiB disk: two 1 MiB slots): BGSAVE fails, writes get
/// Redis's MISCONF error (save points are on with a disk), SAVE answers `ERR`, SHUTDOWN
/// refuses to stop without its save, SHUTDOWN NOSAVE stops.
fn full_disk(image: &Path, work: &Path) -> Result<(), String> {
    let disk_file = work.join("disk-full.img");
    disk::create(&disk_file, "3M")?;
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
        if !set.starts_with("MISCONF ") {
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
/// never a mix, never nothing.
fn kill_during_bgsave(image: &Path, work: &Path) -> Result<(), String> {
    let disk_file = work.join("disk-kill.img");
    disk::create(&disk_file, "64M")?;
    let (mut qemu, mut port, _) = boot(image, &disk_file, "uk-test-disk-kill-console.log")?;
    cli(port, &["DEBUG", "POPULATE", "40000", "a"])?;
    expect_cli(port, &["SAVE"], "OK")?;
    let mut saved = cli(port, &["DEBUG", "DIGEST"])?;
    let (mut old_kept, mut new_kept) = (0, 0);
    for cycle in 0..KILL_CYCLES {
        let prefix = format!("c{cycle}");
        cli(port, &["DEBUG", "POPULATE", "20000", &prefix])?;
        let writing = cli(port, &["DEBUG", "DIGEST"])?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let delay = Duration::from_millis(u64::from(nanos % 400));
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
        "uk-test: disk: {KILL_CYCLES} SIGKILLs during BGSAVE: every boot loaded a whole snapshot \
         ({old_kept} the previous one, {new_kept} the new one)"
    );
    Ok(())
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
            let info = cli(port, &["INFO", "persistence"])?;
            if info.contains("rdb_bgsave_in_progress:0") {
                if !info.contains("rdb_last_bgsave_status:ok") {
                    return Err(format!("BGSAVE failed: {info}"));
                }
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
