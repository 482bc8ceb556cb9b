//! Unikernel figures: `bench-boot` (QEMU start to the first real PONG through the port forward,
//! over many boots: min and median) and `bench-mem` (the least `-m` with which the image boots,
//! holds 10,000 small keys and still answers).

use super::{
    build, console_time, console_time_line, free_port, wait_bounded, Boot, Machine, EXIT_SUCCESS,
};
use std::process::{Child, Stdio};
use std::time::Duration;

/// One boot's timings (from QEMU's start).
struct BootTimes {
    first_line: Option<Duration>,
    ready: Option<Duration>,
    pong: Duration,
    phases: String,
}

/// Options shared by both benches: `--mem M`, `--machine-opts ,a=b`, `--runs N`, key=value.
struct Opts {
    runs: usize,
    /// `--floor`: also boot [`null_pvh_image`] in every round (QEMU's own start-up floor).
    floor: bool,
    /// `--phases`: print every boot's guest phase line, not only the fastest one's.
    phases: bool,
    /// `--image PATH`: an image built elsewhere (no build).
    image: Option<std::path::PathBuf>,
    boot: Boot,
}

/// Parses the options; `runs` is the default run count.
fn parse(args: &[String], runs: usize) -> Result<Opts, String> {
    let mut o = Opts {
        runs,
        floor: false,
        phases: false,
        image: None,
        boot: Boot::new(Machine::Microvm, "tcg", 0),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--runs" => o.runs = val()?.parse().map_err(|_| "bad --runs")?,
            "--mem" => o.boot.mem = val()?.clone(),
            "--machine-opts" => o.boot.machine_opts = val()?.clone(),
            "--dhcp" => o.boot.net.clear(),
            "--floor" => o.floor = true,
            "--phases" => o.phases = true,
            "--qemu" => o.boot.qemu_extra.push(val()?.clone()),
            "--image" => o.image = Some(val()?.into()),
            w if w.contains('=') => o.boot.extra.push(w.to_string()),
            other => return Err(format!("unknown option '{other}'")),
        }
    }
    Ok(o)
}

/// Boots `boot` (on a fresh port) and waits for the first PONG; returns QEMU, the port, the
/// timings and the console.
fn boot_once(
    image: &std::path::Path,
    boot: &Boot,
    log: &str,
    limit: Duration,
) -> Result<(Child, u16, BootTimes), String> {
    let port = free_port()?;
    let mut b = boot.clone();
    b.host_port = port;
    let (mut qemu, start, console) = super::spawn_logged(image, &b, log)?;
    let ponged = super::await_pong(&mut qemu, port, start, limit);
    let pong = start.elapsed();
    if let Err(e) = ponged {
        let _ = qemu.kill();
        let _ = qemu.wait();
        return Err(e);
    }
    // The guest prints its held-back boot log (with the phase line) right after the first
    // answer; give the console thread up to a second to read it.
    let waited = std::time::Instant::now();
    while console_time_line(&console, "boot phases").is_none()
        && waited.elapsed() < Duration::from_secs(1)
    {
        std::thread::sleep(Duration::from_millis(2));
    }
    let times = BootTimes {
        first_line: console_time(&console, "booting"),
        ready: console_time(&console, "ready:"),
        pong,
        phases: console_time_line(&console, "boot phases").unwrap_or_default(),
    };
    Ok((qemu, port, times))
}

/// Milliseconds of an optional duration.
fn ms(d: Option<Duration>) -> f64 {
    d.map_or(f64::NAN, |d| d.as_secs_f64() * 1e3)
}

/// (min, median) of `v`.
fn min_median(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2])
}

/// `cargo xtask bench-boot [--runs N] [--mem M] [--machine-opts ,k=v] [--dhcp] [key=value..]`.
pub fn bench_boot(args: &[String]) -> Result<(), String> {
    let o = parse(args, 20)?;
    let image = match &o.image {
        Some(p) => p.clone(),
        None => build()?.0,
    };
    let null = if o.floor {
        Some(null_pvh_image()?)
    } else {
        None
    };
    let cpu_before = cpu_times();
    let mut all = Vec::new();
    let mut floors = Vec::new();
    for i in 0..o.runs.max(1) {
        // The floor boot goes first in even rounds and last in odd ones.
        let floor_first = i % 2 == 0;
        if let (Some(n), true) = (&null, floor_first) {
            floors.push(floor_once(n, &o.boot)?);
        }
        let (mut qemu, _, t) = boot_once(
            &image,
            &o.boot,
            "bench-boot-console.log",
            Duration::from_secs(30),
        )?;
        let _ = qemu.kill();
        let _ = qemu.wait();
        if let (Some(n), false) = (&null, floor_first) {
            floors.push(floor_once(n, &o.boot)?);
        }
        let floor = floors
            .last()
            .map(|f| {
                format!(
                    " | null image: console {:6.1} ms, exit {:6.1} ms",
                    ms(Some(f.0)),
                    ms(Some(f.1))
                )
            })
            .unwrap_or_default();
        println!(
            "bench-boot: run {i:2}: first console line {:6.1} ms, ready {:6.1} ms, first PONG {:6.1} ms{floor}",
            ms(t.first_line),
            ms(t.ready),
            ms(Some(t.pong))
        );
        if o.phases {
            println!(
                "bench-boot: run {i:2}: guest {}",
                t.phases.trim_start_matches("kayvee: ")
            );
        }
        all.push(t);
        std::thread::sleep(Duration::from_millis(50));
    }
    let col = |f: &dyn Fn(&BootTimes) -> f64| min_median(all.iter().map(f).collect());
    let (l0, l1) = col(&|t| ms(t.first_line));
    let (r0, r1) = col(&|t| ms(t.ready));
    let (p0, p1) = col(&|t| ms(Some(t.pong)));
    println!(
        "bench-boot: {} boots, TCG microvm, -m {}: min/median ms: first console line {l0:.1}/{l1:.1}, ready {r0:.1}/{r1:.1}, first PONG {p0:.1}/{p1:.1}",
        all.len(),
        o.boot.mem
    );
    if !floors.is_empty() {
        let (c0, c1) = min_median(floors.iter().map(|f| ms(Some(f.0))).collect());
        let (e0, e1) = min_median(floors.iter().map(|f| ms(Some(f.1))).collect());
        println!(
            "bench-boot: {} boots of a null PVH image (the same QEMU command; its first instruction prints a line and exits): min/median ms: console line {c0:.1}/{c1:.1}, exit {e0:.1}/{e1:.1}",
            floors.len()
        );
        // Each round's PONG less the same round's floor: the image's own part, with QEMU's
        // start-up (and much of the host's mood that round) taken out.
        let (d0, d1) = min_median(
            all.iter()
                .zip(&floors)
                .map(|(t, f)| ms(Some(t.pong)) - ms(Some(f.0)))
                .collect(),
        );
        println!("bench-boot: first PONG less the same round's null-image console line: min/median ms {d0:.1}/{d1:.1}");
    }
    if let (Some(a), Some(b)) = (cpu_before, cpu_times()) {
        let total = (b.0 - a.0).max(1) as f64;
        println!(
            "bench-boot: host during the runs (/proc/stat): {:.0}% of CPU time stolen by the hypervisor, {:.0}% idle, load average {}",
            100.0 * (b.1 - a.1) as f64 / total,
            100.0 * (b.2 - a.2) as f64 / total,
            std::fs::read_to_string("/proc/loadavg").unwrap_or_default().split(' ').take(3).collect::<Vec<_>>().join(" ")
        );
    }
    let best = all.iter().min_by_key(|t| t.pong).expect("one run at least");
    println!(
        "bench-boot: fastest boot's guest {}",
        best.phases.trim_start_matches("kayvee: ")
    );
    Ok(())
}

/// The first line of /proc/stat summed: (all jiffies, steal, idle + iowait), or None off Linux.
fn cpu_times() -> Option<(u64, u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let v: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is inside user already).
    let total = v.iter().take(8).sum();
    Some((total, *v.get(7)?, v.get(3)? + v.get(4)?))
}

/// Boots the null image with `boot`'s QEMU command: (its console line, QEMU's exit), from
/// QEMU's start.
fn floor_once(null: &std::path::Path, boot: &Boot) -> Result<(Duration, Duration), String> {
    let mut b = boot.clone();
    b.host_port = free_port()?;
    let (mut qemu, start, console) = super::spawn_logged(null, &b, "bench-boot-null.log")?;
    let st = wait_bounded(&mut qemu, Duration::from_secs(20))
        .map_err(|e| format!("the null image: {e}"))?;
    let exit = start.elapsed();
    if st.code() != Some(EXIT_SUCCESS) {
        return Err(format!("the null image: {}", super::describe(st)));
    }
    // The console thread reads the line by the pipe's end at the latest.
    let waited = std::time::Instant::now();
    loop {
        if let Some(t) = console_time(&console, "null") {
            return Ok((t, exit));
        }
        if waited.elapsed() > Duration::from_secs(1) {
            return Err("the null image printed nothing".into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Writes the null PVH image: an ELF whose PVH entry (32-bit protected mode, as the PVH
/// boot protocol enters) prints "null" on the serial port and exits through isa-debug-exit
/// with the success status. Booted with the same QEMU command as Kayvee's image, it measures
/// what no guest can go below: QEMU's start, the firmware (qboot) and the PVH hand-over.
fn null_pvh_image() -> Result<std::path::PathBuf, String> {
    const BASE: u32 = 0x10_0000;
    const NOTE_OFF: usize = 64 + 2 * 56;
    const CODE_OFF: usize = NOTE_OFF + 20;
    let mut code = Vec::new();
    code.extend_from_slice(&[0x66, 0xba, 0xf8, 0x03]); // mov dx, 0x3f8 (COM1)
    for &b in b"null\n" {
        code.extend_from_slice(&[0xb0, b, 0xee]); // mov al, b; out dx, al
    }
    code.extend_from_slice(&[0x66, 0xba, 0xf4, 0x00]); // mov dx, 0xf4 (isa-debug-exit)
    code.extend_from_slice(&[0xb0, 0x10, 0xee]); // mov al, 0x10; out dx, al: status 33
    code.extend_from_slice(&[0xf4, 0xeb, 0xfd]); // hlt; jmp back to hlt
    let total = (CODE_OFF + code.len()) as u64;
    let entry = BASE + CODE_OFF as u32;
    let mut f = Vec::new();
    // ELF header: 64-bit, little-endian, executable, x86-64, two program headers.
    f.extend_from_slice(b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00");
    f.extend_from_slice(&2u16.to_le_bytes()); // e_type: EXEC
    f.extend_from_slice(&0x3eu16.to_le_bytes()); // e_machine: x86-64
    f.extend_from_slice(&1u32.to_le_bytes()); // e_version
    f.extend_from_slice(&u64::from(entry).to_le_bytes()); // e_entry
    f.extend_from_slice(&64u64.to_le_bytes()); // e_phoff
    f.extend_from_slice(&0u64.to_le_bytes()); // e_shoff
    f.extend_from_slice(&0u32.to_le_bytes()); // e_flags
    for v in [64u16, 56, 2, 64, 0, 0] {
        f.extend_from_slice(&v.to_le_bytes()); // ehsize, phentsize, phnum, shentsize, shnum, shstrndx
    }
    // PT_LOAD: the whole file at BASE, RWX.
    f.extend_from_slice(&1u32.to_le_bytes());
    f.extend_from_slice(&7u32.to_le_bytes());
    for v in [0, u64::from(BASE), u64::from(BASE), total, total, 0x1000] {
        f.extend_from_slice(&v.to_le_bytes());
    }
    // PT_NOTE: the Xen note naming the PVH entry.
    f.extend_from_slice(&4u32.to_le_bytes());
    f.extend_from_slice(&4u32.to_le_bytes());
    for v in [
        NOTE_OFF as u64,
        u64::from(BASE) + NOTE_OFF as u64,
        u64::from(BASE) + NOTE_OFF as u64,
        20,
        20,
        4,
    ] {
        f.extend_from_slice(&v.to_le_bytes());
    }
    // The note: namesz 4, descsz 4, type 18 (XEN_ELFNOTE_PHYS32_ENTRY), "Xen\0", the entry.
    for v in [4u32, 4, 18] {
        f.extend_from_slice(&v.to_le_bytes());
    }
    f.extend_from_slice(b"Xen\0");
    f.extend_from_slice(&entry.to_le_bytes());
    f.extend_from_slice(&code);
    debug_assert_eq!(f.len() as u64, total);
    let path = super::dir().join("target/null-pvh.elf");
    std::fs::write(&path, &f).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

/// Keys `bench-mem` loads.
const MEM_KEYS: usize = 10_000;

/// The `SET key:N <10-byte value>` pipeline for `bench-mem`.
fn mem_pipeline() -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..MEM_KEYS {
        let (k, v) = (format!("key:{i}"), format!("v{i:09}"));
        out.extend_from_slice(
            format!(
                "*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n${}\r\n{v}\r\n",
                k.len(),
                v.len()
            )
            .as_bytes(),
        );
    }
    out
}

/// Boots with `-m mem`, loads [`MEM_KEYS`] keys, checks they answer, reads INFO's
/// `used_memory` and shuts down cleanly; `Ok(used_memory)` or why it failed.
fn try_mem(image: &std::path::Path, boot: &Boot, mem: &str) -> Result<u64, String> {
    let mut b = boot.clone();
    b.mem = mem.to_string();
    let (mut qemu, port, _) =
        boot_once(image, &b, "bench-mem-console.log", Duration::from_secs(30))?;
    let result = (|| {
        let p = port.to_string();
        let out = super::client("redis-cli", &["-p", &p, "--pipe"], &mem_pipeline())?;
        if !out.contains(&format!("errors: 0, replies: {MEM_KEYS}")) {
            return Err(format!("redis-cli --pipe: {}", out.trim()));
        }
        let n = super::client("redis-cli", &["-p", &p, "DBSIZE"], b"")?;
        let last = super::client("redis-cli", &["-p", &p, "GET", "key:9999"], b"")?;
        if n.trim() != MEM_KEYS.to_string() || last.trim() != "v000009999" {
            return Err(format!(
                "after loading: DBSIZE {n:?}, GET key:9999 {last:?}"
            ));
        }
        let info = super::client("redis-cli", &["-p", &p, "INFO", "memory"], b"")?;
        let used = info
            .lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .and_then(|v| v.trim().parse().ok())
            .ok_or("no used_memory in INFO")?;
        let _ = super::client("redis-cli", &["-p", &p, "SHUTDOWN", "NOSAVE"], b"");
        let st = wait_bounded(&mut qemu, Duration::from_secs(20))?;
        if st.code() != Some(EXIT_SUCCESS) {
            return Err(format!("after SHUTDOWN: {}", super::describe(st)));
        }
        Ok(used)
    })();
    let _ = qemu.kill();
    let _ = qemu.wait();
    result
}

/// `cargo xtask bench-mem [--mem M] [key=value..]`: tries guest RAM sizes from 32 MiB down
/// (or only `--mem`) and reports the least one in which the image boots, holds 10,000 small
/// keys and still answers.
pub fn bench_mem(args: &[String]) -> Result<(), String> {
    let o = parse(args, 1)?;
    let image = match &o.image {
        Some(p) => p.clone(),
        None => build()?.0,
    };
    let size = std::fs::metadata(&image).map_err(|e| e.to_string())?.len();
    let sizes: Vec<String> = if args.iter().any(|a| a == "--mem") {
        vec![o.boot.mem.clone()]
    } else {
        [
            "32M", "24M", "16M", "12M", "10M", "8M", "7M", "6M", "5M", "4M", "3M",
        ]
        .map(String::from)
        .to_vec()
    };
    let mut least = None;
    for mem in &sizes {
        match try_mem(&image, &o.boot, mem) {
            Ok(used) => {
                println!("bench-mem: -m {mem}: boots, holds {MEM_KEYS} keys, answers (used_memory {used} bytes)");
                least = Some(mem.clone());
            }
            Err(e) => {
                println!("bench-mem: -m {mem}: fails: {e}");
                break;
            }
        }
    }
    match least {
        Some(m) => println!(
            "bench-mem: least RAM holding {MEM_KEYS} keys: -m {m} (image {size} bytes; console of the last try: unikernel/target/bench-mem-console.log)"
        ),
        None => return Err("bench-mem: no size worked".into()),
    }
    Ok(())
}

/// redis-benchmark's summary lines (`SET: ... requests per second`) for `args` against `port`.
fn redis_benchmark(port: u16, args: &[&str]) -> Result<Vec<String>, String> {
    let p = port.to_string();
    let mut all = vec!["-p", p.as_str(), "-q"];
    all.extend_from_slice(args);
    let out = super::client("redis-benchmark", &all, b"")?;
    Ok(out
        .split(['\r', '\n'])
        .filter(|l| l.contains("requests per second"))
        .map(|l| l.trim().to_string())
        .collect())
}

/// The redis-benchmark runs of `bench-net`: pipeline 1 and 16.
const NET_RUNS: [&[&str]; 2] = [
    &["-t", "set,get", "-n", "20000", "-c", "8", "-P", "1"],
    &["-t", "set,get", "-n", "200000", "-c", "8", "-P", "16"],
];

/// `cargo xtask bench-net [--image PATH] [--redis-port N]`: redis-benchmark SET/GET
/// (8 clients, pipeline 1 and 16) against the image under TCG microvm through the user-mode
/// port forward (behind the xtask's relay: slirp's listen backlog is 1), then against a
/// redis-server on the host, for a side-by-side figure.
pub fn bench_net(args: &[String]) -> Result<(), String> {
    let mut redis_port = 28379u16;
    let mut rest = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--redis-port" => {
                redis_port = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .ok_or("--redis-port N")?
            }
            _ => rest.push(a.clone()),
        }
    }
    let o = parse(&rest, 1)?;
    let image = match &o.image {
        Some(p) => p.clone(),
        None => build()?.0,
    };
    let (mut qemu, port, _) = boot_once(
        &image,
        &o.boot,
        "bench-net-console.log",
        Duration::from_secs(60),
    )?;
    let relay = super::start_relay(port)?;
    let result = (|| {
        for run in NET_RUNS {
            for l in redis_benchmark(relay, run)? {
                println!(
                    "bench-net: unikernel (TCG, hostfwd) {}: {l}",
                    run[6..].join(" ")
                );
            }
        }
        Ok::<(), String>(())
    })();
    let _ = qemu.kill();
    let _ = qemu.wait();
    result?;
    let mut server = std::process::Command::new("redis-server")
        .args([
            "--port",
            &redis_port.to_string(),
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run redis-server: {e}"))?;
    std::thread::sleep(Duration::from_millis(300));
    let result = (|| {
        for run in NET_RUNS {
            for l in redis_benchmark(redis_port, run)? {
                println!(
                    "bench-net: redis-server (host, loopback) {}: {l}",
                    run[6..].join(" ")
                );
            }
        }
        Ok::<(), String>(())
    })();
    let _ = server.kill();
    let _ = server.wait();
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_median_of_unsorted_values() {
        assert_eq!(min_median(vec![30.0, 10.0, 20.0]), (10.0, 20.0));
        assert_eq!(min_median(vec![4.0, 1.0, 3.0, 2.0]), (1.0, 3.0));
    }

    #[test]
    fn mem_pipeline_holds_every_key_once() {
        let p = String::from_utf8(mem_pipeline()).expect("ascii");
        assert_eq!(p.matches("*3\r\n$3\r\nSET\r\n").count(), MEM_KEYS);
        assert!(p.contains("$8\r\nkey:9999\r\n$10\r\nv000009999\r\n"));
    }

    #[test]
    fn options_parse_into_the_boot() {
        let args: Vec<String> = ["--mem", "8M", "--dhcp", "--runs", "3", "idle=poll"]
            .map(String::from)
            .to_vec();
        let o = parse(&args, 20).expect("valid options");
        assert_eq!((o.runs, o.boot.mem.as_str()), (3, "8M"));
        assert!(o.boot.net.is_empty());
        assert_eq!(o.boot.extra, vec!["idle=poll".to_string()]);
        assert!(parse(&["--bogus".to_string()], 1).is_err());
    }
}
