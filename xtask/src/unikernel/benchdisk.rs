//! `cargo xtask bench-disk`: the unikernel's persistence figures under TCG with a virtio-blk
//! disk (`cache=writeback`, as `run --disk`): redis-benchmark SET at `-P 16` with the
//! append-only log off and with `appendfsync no`, `everysec` and `always`; then a BGSAVE of
//! `--keys` keys (`DEBUG POPULATE`): its time, the SET throughput of one pipelining client
//! during it against the same client's just before and just after, and `used_memory` during
//! it against before (the issue's targets: at least 80% of the throughput, at most 20% of
//! the dataset extra).
//!
//! `--linux` runs every row twice, on the same QEMU machine, memory, disk size and drive
//! options (raw, `cache=writeback`, slirp forwarding): once on the image, once on
//! kayvee-server in vm-compare's Linux guest with the disk formatted ext4 on the host and
//! mounted as its `--dir`; then prints the two side by side with ratios. The machine is
//! microvm with ACPI tables (`microvm-acpi`: virtio-blk-device and virtio-net-device on
//! virtio-mmio) for both sides: Debian's kernel lacks `CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES`, so
//! it finds virtio-mmio devices only through ACPI (the image's own microvm has `acpi=off`; it
//! boots the same with the tables there). `--machine q35 --linux` compares on q35 instead
//! (virtio over PCI).
//!
//! On the shared 2-core machine use `--quick` only (a smoke run of a minute or two); the full
//! run (1,000,000 keys, 2 GiB guest) belongs on a quiet machine.

use super::resp::Resp;
use super::{build, disk, free_port, spawn_logged, wait_pong, Boot, Machine, BOOT_TIMEOUT};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Options.
struct Opts {
    keys: u64,
    requests: u64,
    mem: String,
    disk_size: String,
    image: Option<PathBuf>,
    bgsave_only: bool,
    new_keys: bool,
    linux: bool,
    machine: Machine,
    /// vCPUs of the guest (`-smp`).
    cpus: u32,
}

/// Parses `--quick`, `--keys N`, `--requests N`, `--mem M`, `--disk-size S`, `--image PATH`,
/// `--bgsave-only`, `--new-keys`, `--machine microvm|microvm-acpi|q35`, `--linux` (microvm
/// becomes microvm-acpi for both sides), `--cpus N` (the guests' vCPUs, 1 by default).
fn parse(args: &[String]) -> Result<Opts, String> {
    let mut o = Opts {
        keys: 1_000_000,
        requests: 1_000_000,
        mem: "2G".into(),
        disk_size: "1G".into(),
        image: None,
        bgsave_only: false,
        new_keys: false,
        linux: false,
        machine: Machine::Microvm,
        cpus: 1,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--quick" => {
                o.keys = 50_000;
                o.requests = 100_000;
                o.mem = "512M".into();
                o.disk_size = "128M".into();
            }
            "--keys" => o.keys = val()?.parse().map_err(|_| "bad --keys")?,
            "--requests" => o.requests = val()?.parse().map_err(|_| "bad --requests")?,
            "--mem" => o.mem = val()?,
            "--disk-size" => o.disk_size = val()?,
            "--image" => o.image = Some(val()?.into()),
            "--bgsave-only" => o.bgsave_only = true,
            "--new-keys" => o.new_keys = true,
            "--machine" => o.machine = Machine::parse(&val()?)?,
            "--linux" => o.linux = true,
            "--cpus" => o.cpus = val()?.parse().map_err(|_| "bad --cpus")?,
            other => return Err(format!("bench-disk: unknown option '{other}'")),
        }
    }
    if o.linux && o.machine == Machine::Microvm {
        o.machine = Machine::MicrovmAcpi;
    }
    Ok(o)
}

/// What runs in the guest.
#[derive(Clone, Copy)]
enum Side<'a> {
    /// The unikernel image.
    Unikernel(&'a Path),
    /// kayvee-server in the Linux guest.
    Linux(&'a LinuxGuest),
}

/// The Linux guest's kernel and disk-variant initramfs (built by `vmcompare`, which the
/// caller passes in: `vmcompare` itself uses this module's parent).
pub struct LinuxGuest {
    /// The kernel (an ELF QEMU boots through PVH).
    pub kernel: PathBuf,
    /// The initramfs with the disk modules.
    pub initramfs: PathBuf,
}

impl Side<'_> {
    /// The label in the output.
    fn label(self) -> &'static str {
        match self {
            Side::Unikernel(_) => "unikernel",
            Side::Linux(_) => "linux",
        }
    }
}

/// One SET row's result.
struct SetRow {
    rps: f64,
    aof_size: String,
}

/// The BGSAVE row's result.
struct SaveRow {
    populate: f64,
    took: f64,
    during: f64,
    /// The same client's rate over 3 s just before and just after the save: the host's
    /// neighbours change its capacity from minute to minute, and the two windows bracket the
    /// save.
    before: f64,
    after: f64,
    mem_before: u64,
    peak: u64,
    /// Host CPU seconds per wall second of the guest's vCPU 0 (the event loop's) before,
    /// during and after the save, and of the other vCPUs during it (from QEMU's named
    /// threads).
    cpu0_before: f64,
    cpu0_during: f64,
    cpu0_after: f64,
    cpus_other_during: f64,
}

impl SaveRow {
    /// Throughput during the save against the mean of before and after, in percent.
    fn kept(&self) -> f64 {
        100.0 * self.during / ((self.before + self.after) / 2.0).max(1.0)
    }

    /// Extra `used_memory` during the save, in percent of before.
    fn extra(&self) -> f64 {
        100.0 * self.peak.saturating_sub(self.mem_before) as f64 / self.mem_before.max(1) as f64
    }

    /// SETs per CPU-second of vCPU 0 during the save against before and after, in percent:
    /// what the loop's own core kept, whatever the host's other threads took from it.
    fn kept_per_cpu0(&self) -> f64 {
        let before = self.before / self.cpu0_before.max(1e-9);
        let after = self.after / self.cpu0_after.max(1e-9);
        let during = self.during / self.cpu0_during.max(1e-9);
        100.0 * during / ((before + after) / 2.0).max(1.0)
    }
}

/// Host CPU ticks (utime + stime) of QEMU process `pid`'s threads, split into vCPU 0 (`CPU
/// 0/TCG` or `CPU 0/KVM`, named with `-name ...,debug-threads=on`) and the other vCPUs.
fn vcpu_ticks(pid: u32) -> (u64, u64) {
    let (mut cpu0, mut other) = (0, 0);
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return (0, 0);
    };
    for t in tasks.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let f: Vec<u64> = rest
            .split_whitespace()
            .map(|x| x.parse().unwrap_or(0))
            .collect();
        let ticks = f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
        match comm.trim() {
            "CPU 0/TCG" | "CPU 0/KVM" => cpu0 += ticks,
            c if c.starts_with("CPU ") => other += ticks,
            _ => {}
        }
    }
    (cpu0, other)
}

/// Clock ticks a second (`sysconf(_SC_CLK_TCK)`: 100 on Linux).
const TICKS_PER_S: f64 = 100.0;

/// Entry point; `linux_guest` builds the Linux guest when `--linux` asks for it.
pub fn bench_disk(
    args: &[String],
    linux_guest: impl FnOnce() -> Result<LinuxGuest, String>,
) -> Result<(), String> {
    let o = parse(args)?;
    let image = match &o.image {
        Some(p) => p.clone(),
        None => build()?.0,
    };
    let guest = match o.linux {
        true => Some(linux_guest()?),
        false => None,
    };
    let mut sides = vec![Side::Unikernel(&image)];
    if let Some(g) = &guest {
        sides.push(Side::Linux(g));
    }
    let work = super::dir().join("target/bench-disk");
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    let modes: &[&str] = match o.bgsave_only {
        true => &[],
        false => &["off", "no", "everysec", "always"],
    };
    let mut sets: Vec<(&str, Vec<SetRow>)> = Vec::new();
    for &fsync in modes {
        let mut row = Vec::new();
        for &side in &sides {
            let r = set_row(side, &o, &work, fsync)?;
            println!(
                "bench-disk: {:<9} SET -c 8 -P 16 -n {}, {}: {:.0} requests per second \
                 (aof_current_size {})",
                side.label(),
                o.requests,
                mode_label(fsync),
                r.rps,
                r.aof_size
            );
            row.push(r);
        }
        sets.push((fsync, row));
    }
    let mut saves = Vec::new();
    for &side in &sides {
        let r = bgsave(side, &o, &work)?;
        println!(
            "bench-disk: {:<9} BGSAVE of {} keys (DEBUG POPULATE took {:.1} s): \
             {:.2} s; SET -P 16 from one client {:.0}/s during it against {:.0}/s just before \
             and {:.0}/s just after ({:.0}% of their mean); used_memory {} before, peak {} \
             during (+{:.1}%); host CPU of vCPU 0 {:.2} before, {:.2} during, {:.2} after (SETs \
             per its CPU-second {:.0}% of before and after), other vCPUs {:.2} during",
            side.label(),
            o.keys,
            r.populate,
            r.took,
            r.during,
            r.before,
            r.after,
            r.kept(),
            r.mem_before,
            r.peak,
            r.extra(),
            r.cpu0_before,
            r.cpu0_during,
            r.cpu0_after,
            r.kept_per_cpu0(),
            r.cpus_other_during,
        );
        saves.push(r);
    }
    if sides.len() == 2 {
        print!("{}", side_by_side(&o, &sets, &saves));
    }
    Ok(())
}

/// `appendonly no` or `appendonly yes, appendfsync X`.
fn mode_label(fsync: &str) -> String {
    match fsync {
        "off" => "appendonly no".into(),
        _ => format!("appendonly yes, appendfsync {fsync}"),
    }
}

/// The table of both sides (unikernel first) with the unikernel/Linux ratios.
fn side_by_side(o: &Opts, sets: &[(&str, Vec<SetRow>)], saves: &[SaveRow]) -> String {
    let machine = match o.machine {
        Machine::Q35 => "q35, virtio-blk-pci",
        _ => "microvm acpi=on, virtio-blk-device",
    };
    let mut t = format!(
        "\nbench-disk: side by side (QEMU {machine} TCG, {} RAM, raw {} cache=writeback; \
         Linux: kayvee-server on ext4)\n{:<44} {:>12} {:>12} {:>8}\n",
        o.mem, o.disk_size, "row", "unikernel", "linux", "ratio"
    );
    let mut line = |name: String, u: f64, l: f64, unit: &str| {
        t.push_str(&format!(
            "{name:<44} {:>12} {:>12} {:>7.2}x\n",
            format!("{u:.0}{unit}"),
            format!("{l:.0}{unit}"),
            u / l
        ));
    };
    for (fsync, row) in sets {
        if let [u, l] = &row[..] {
            let mode = match *fsync {
                "off" => "log off".to_string(),
                f => format!("appendfsync {f}"),
            };
            line(format!("SET -P 16 req/s, {mode}"), u.rps, l.rps, "");
        }
    }
    if let [u, l] = saves {
        let ms = |r: &SaveRow| r.took * 1e3;
        line(format!("BGSAVE of {} keys, ms", o.keys), ms(u), ms(l), "");
        line(
            "SET/s during BGSAVE, % of before and after".into(),
            u.kept(),
            l.kept(),
            "%",
        );
        line(
            "used_memory during BGSAVE, % extra".into(),
            u.extra(),
            l.extra(),
            "%",
        );
        line(
            "used_memory before BGSAVE, KiB".into(),
            u.mem_before as f64 / 1024.0,
            l.mem_before as f64 / 1024.0,
            "",
        );
    }
    t
}

/// One SET row: a fresh disk, redis-benchmark through the relay, INFO persistence.
fn set_row(side: Side, o: &Opts, work: &Path, fsync: &str) -> Result<SetRow, String> {
    let name = format!("{}-set-{fsync}", side.label());
    let (mut qemu, port) = boot(side, o, work, fsync, &name)?;
    let relay = super::start_relay(port)?;
    let (p, n) = (relay.to_string(), o.requests.to_string());
    let args = [
        "-p", &p, "-q", "-t", "set", "-n", &n, "-c", "8", "-P", "16", "-r", "1000000",
    ];
    let out = super::client("redis-benchmark", &args, b"");
    let info = info(port, "persistence");
    let _ = qemu.kill();
    let _ = qemu.wait();
    let rps = out?
        .split(['\r', '\n'])
        .filter(|l| l.contains("requests per second"))
        .filter_map(|l| l.split_once(':')?.1.split_whitespace().next()?.parse().ok())
        .next_back()
        .ok_or(format!(
            "{name}: no requests per second from redis-benchmark"
        ))?;
    let aof_size = field(&info.unwrap_or_default(), "aof_current_size").unwrap_or("-".into());
    Ok(SetRow { rps, aof_size })
}

/// Boots `side` on a fresh disk of `--disk-size`: the image's own format with `fsync` on its
/// command line, or (Linux) ext4 made on the host with `kv.aof=fsync`.
fn boot(
    side: Side,
    o: &Opts,
    work: &Path,
    fsync: &str,
    name: &str,
) -> Result<(Child, u16), String> {
    let file = work.join(format!("{name}.img"));
    let _ = std::fs::remove_file(&file);
    let port = free_port()?;
    let mut b = Boot::new(o.machine, "tcg", port);
    b.mem = o.mem.clone();
    // Named threads ("CPU 0/TCG"): the BGSAVE row reads each vCPU's host CPU time.
    b.qemu_extra
        .extend(["-name".to_string(), "kayvee,debug-threads=on".to_string()]);
    if o.cpus > 1 {
        b.qemu_extra
            .extend(["-smp".to_string(), o.cpus.to_string()]);
    }
    let kernel = match side {
        Side::Unikernel(image) => {
            disk::create(&file, &o.disk_size)?;
            b.extra.push("enable-debug-command=yes".into());
            if fsync != "off" {
                b.extra.push("appendonly=yes".into());
                b.extra.push(format!("appendfsync={fsync}"));
            }
            image
        }
        Side::Linux(g) => {
            ext4_disk(&file, &o.disk_size)?;
            let mut cmdline = format!(
                "console=ttyS0 quiet panic=-1 tsc=reliable kv.server=kayvee \
                 kv.ip=10.0.2.15/24 kv.aof={fsync}"
            );
            if o.machine != Machine::Q35 {
                cmdline.push_str(&format!(" tsc_early_khz={}", host_tsc_khz()));
            }
            b.linux = Some((g.initramfs.clone(), cmdline));
            g.kernel.as_path()
        }
    };
    b.disk = Some(file);
    let (mut qemu, start, _) = spawn_logged(kernel, &b, &format!("bench-disk-{name}-console.log"))?;
    let limit = match side {
        Side::Unikernel(_) => BOOT_TIMEOUT,
        Side::Linux(_) => BOOT_TIMEOUT * 4,
    };
    if !wait_pong(port, || Ok(start.elapsed() > limit))? {
        let _ = qemu.kill();
        let _ = qemu.wait();
        return Err(format!(
            "{name}: no PONG (see target/bench-disk-{name}-console.log)"
        ));
    }
    Ok((qemu, port))
}

/// The host's TSC rate in kHz, measured over 200 ms. Under TCG the guest's `rdtsc` reads the
/// host's TSC; Linux on microvm has nothing to calibrate it against (no PIT channel 2 gate,
/// no HPET, no ACPI PM timer: it marks the TSC unstable and hangs), so the guest gets it as
/// `tsc_early_khz=`.
fn host_tsc_khz() -> u64 {
    #[allow(unused_unsafe)]
    // SAFETY: `rdtsc` reads a counter; it has no preconditions on x86_64.
    let tsc = || unsafe { core::arch::x86_64::_rdtsc() };
    let (t0, c0) = (Instant::now(), tsc());
    std::thread::sleep(Duration::from_millis(200));
    let (c1, us) = (tsc(), t0.elapsed().as_micros().max(1) as u64);
    c1.wrapping_sub(c0) * 1000 / us
}

/// A raw file of `size` formatted ext4 on the host, the inode tables and journal written now
/// (no lazy initialisation in the guest during the measurement).
fn ext4_disk(file: &Path, size: &str) -> Result<(), String> {
    let bytes = disk::parse_size(size)?;
    let f = std::fs::File::create(file).map_err(|e| format!("{}: {e}", file.display()))?;
    f.set_len(bytes).map_err(|e| e.to_string())?;
    drop(f);
    let out = Command::new("mkfs.ext4")
        .args(["-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"])
        .arg(file)
        .output()
        .map_err(|e| format!("mkfs.ext4 (apt-get install e2fsprogs): {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "mkfs.ext4 {}: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

/// INFO `section` as text.
fn info(port: u16, section: &str) -> Result<String, String> {
    let p = port.to_string();
    super::client("redis-cli", &["-p", &p, "INFO", section], b"")
}

/// INFO persistence and memory on the bench's one watching connection, then 50 ms of quiet:
/// one look of the watch (spawning redis-cli twice every 50 ms loaded the host, and the
/// guest's accept path, in the window it watched only).
fn observe(watch: &mut Resp) -> Result<String, String> {
    let text = watch.call(&["INFO", "persistence"])? + &watch.call(&["INFO", "memory"])?;
    std::thread::sleep(Duration::from_millis(50));
    Ok(text)
}

/// A field of an INFO text.
fn field(info: &str, name: &str) -> Option<String> {
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(|v| v.trim().to_string())
}

/// One client sending SETs of the populated keys (`key:0` .. `key:{keys-1}`, overwritten: the
/// dataset does not grow, the save's snapshot and the writes share what they did not change)
/// in pipelines of 16 until `stop`, counting replies into `done`.
fn set_loop(
    port: u16,
    keys: u64,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
) -> Result<(), String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut i = 0u64;
    let mut reply = [0u8; 16 * 5];
    while !stop.load(Ordering::Relaxed) {
        let mut out = Vec::with_capacity(16 * 48);
        for _ in 0..16 {
            let key = match keys {
                0 => format!("new:{i}"),
                _ => format!("key:{}", i % keys),
            };
            i += 1;
            out.extend_from_slice(
                format!(
                    "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n$3\r\nxyz\r\n",
                    key.len()
                )
                .as_bytes(),
            );
        }
        s.write_all(&out).map_err(|e| e.to_string())?;
        s.read_exact(&mut reply).map_err(|e| e.to_string())?;
        if !reply.starts_with(b"+OK\r\n") {
            return Err(format!("SET: {}", String::from_utf8_lossy(&reply)));
        }
        done.fetch_add(16, Ordering::Relaxed);
    }
    Ok(())
}

/// BGSAVE of `--keys` keys: its time, SET throughput and `used_memory` during it.
fn bgsave(side: Side, o: &Opts, work: &Path) -> Result<SaveRow, String> {
    let name = format!("{}-bgsave", side.label());
    let (mut qemu, port) = boot(side, o, work, "off", &name)?;
    let result = (|| {
        let p = port.to_string();
        let keys = o.keys.to_string();
        let t = Instant::now();
        super::client_within(
            "redis-cli",
            &["-p", &p, "DEBUG", "POPULATE", &keys],
            b"",
            Duration::from_secs(1800),
        )?;
        let populate = t.elapsed();
        let mem_before: u64 = field(&info(port, "memory")?, "used_memory")
            .and_then(|v| v.parse().ok())
            .ok_or("no used_memory")?;
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicU64::new(0));
        let (s, d) = (stop.clone(), done.clone());
        let n = if o.new_keys { 0 } else { o.keys };
        let writer = std::thread::spawn(move || set_loop(port, n, s, d));
        // The save is watched through INFO every 50 ms on one connection; the same watching
        // runs over the window before it, so both windows bear the observer alike.
        let mut watch = Resp::open(port)?;
        // The same client's rate before the save, over 3 s.
        std::thread::sleep(Duration::from_millis(500));
        let pid = qemu.id();
        let (c0, t0, k0) = (
            done.load(Ordering::Relaxed),
            Instant::now(),
            vcpu_ticks(pid),
        );
        while t0.elapsed() < Duration::from_secs(3) {
            observe(&mut watch)?;
        }
        let k1 = vcpu_ticks(pid);
        let before = (done.load(Ordering::Relaxed) - c0) as f64 / t0.elapsed().as_secs_f64();
        let cpu0_before = (k1.0 - k0.0) as f64 / TICKS_PER_S / t0.elapsed().as_secs_f64();
        let started = Instant::now();
        let c1 = done.load(Ordering::Relaxed);
        let reply = super::client("redis-cli", &["-p", &p, "BGSAVE"], b"")?;
        if !reply.contains("Background saving started") {
            return Err(format!("BGSAVE: {reply}"));
        }
        let mut peak = mem_before;
        loop {
            let text = observe(&mut watch)?;
            if let Some(m) = field(&text, "used_memory").and_then(|v| v.parse().ok()) {
                peak = peak.max(m);
            }
            if field(&text, "rdb_bgsave_in_progress").as_deref() == Some("0") {
                if field(&text, "rdb_last_bgsave_status").as_deref() != Some("ok") {
                    return Err("BGSAVE failed (see the console log)".into());
                }
                break;
            }
            if started.elapsed() > Duration::from_secs(1800) {
                return Err("BGSAVE did not end within 30 minutes".into());
            }
        }
        let took = started.elapsed();
        let c2 = done.load(Ordering::Relaxed);
        let during = (c2 - c1) as f64 / took.as_secs_f64();
        let k2 = vcpu_ticks(pid);
        let cpu0_during = (k2.0 - k1.0) as f64 / TICKS_PER_S / took.as_secs_f64();
        let cpus_other_during = (k2.1 - k1.1) as f64 / TICKS_PER_S / took.as_secs_f64();
        // And over 3 s after it, watched the same way.
        let t2 = Instant::now();
        while t2.elapsed() < Duration::from_secs(3) {
            observe(&mut watch)?;
        }
        let after = (done.load(Ordering::Relaxed) - c2) as f64 / t2.elapsed().as_secs_f64();
        let cpu0_after =
            (vcpu_ticks(pid).0 - k2.0) as f64 / TICKS_PER_S / t2.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        let _ = writer.join();
        Ok(SaveRow {
            populate: populate.as_secs_f64(),
            took: took.as_secs_f64(),
            during,
            before,
            after,
            mem_before,
            peak,
            cpu0_before,
            cpu0_during,
            cpu0_after,
            cpus_other_during,
        })
    })();
    let _ = qemu.kill();
    let _ = qemu.wait();
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The QEMU words of a command.
    fn words(b: &Boot, kernel: &str) -> Vec<String> {
        let c = b.command(Path::new(kernel));
        c.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn both_sides_get_the_same_machine_and_drive() {
        let mut u = Boot::new(Machine::Q35, "tcg", 4000);
        u.mem = "512M".into();
        u.disk = Some("/d.img".into());
        u.extra.push("appendonly=yes".into());
        let mut l = u.clone();
        l.linux = Some(("/initrd".into(), "console=ttyS0 kv.aof=always".into()));
        let (wu, wl) = (words(&u, "/image"), words(&l, "/vmlinux"));
        let after = |w: &[String], flag: &str| {
            let i = w.iter().position(|a| a == flag).expect(flag);
            w[i + 1].clone()
        };
        for flag in ["-M", "-m", "-drive", "-netdev"] {
            assert_eq!(after(&wu, flag), after(&wl, flag), "{flag}");
        }
        assert!(after(&wl, "-drive").contains("cache=writeback"));
        assert!(wu.contains(&"virtio-blk-pci,drive=d0,disable-legacy=on,romfile=".into()));
        assert!(wl.contains(&"virtio-blk-pci,drive=d0,disable-legacy=on,romfile=".into()));
        assert_eq!(after(&wl, "-initrd"), "/initrd");
        assert_eq!(after(&wl, "-append"), "console=ttyS0 kv.aof=always");
        assert!(!wu.contains(&"-initrd".into()));
        assert!(after(&wu, "-append").contains("disk=required appendonly=yes"));
    }

    #[test]
    fn linux_runs_both_sides_on_microvm_with_acpi() {
        let o = parse(&["--quick".into(), "--linux".into()]).unwrap();
        assert!(o.linux && o.machine == Machine::MicrovmAcpi);
        assert_eq!(o.disk_size, "128M");
        assert!(parse(&[]).unwrap().machine == Machine::Microvm);
        let q = parse(&["--machine".into(), "q35".into(), "--linux".into()]).unwrap();
        assert!(q.machine == Machine::Q35);
    }

    #[test]
    fn microvm_acpi_gives_both_sides_the_same_machine_and_drive() {
        let mut u = Boot::new(Machine::MicrovmAcpi, "tcg", 4000);
        u.mem = "512M".into();
        u.disk = Some("/d.img".into());
        let mut l = u.clone();
        l.linux = Some(("/initrd".into(), "console=ttyS0 kv.aof=always".into()));
        let (wu, wl) = (words(&u, "/image"), words(&l, "/vmlinux"));
        let after = |w: &[String], flag: &str| {
            let i = w.iter().position(|a| a == flag).expect(flag);
            w[i + 1].clone()
        };
        for flag in ["-M", "-m", "-drive", "-netdev"] {
            assert_eq!(after(&wu, flag), after(&wl, flag), "{flag}");
        }
        assert!(after(&wu, "-M").contains("acpi=on"));
        assert!(wl.contains(&"virtio-blk-device,drive=d0".into()));
        assert!(wl.contains(&"virtio-net-device,netdev=n0".into()));
    }
}
