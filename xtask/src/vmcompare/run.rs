//! The measuring half of `vm-compare`, run inside the network namespace that holds `tap0`:
//! boots each system under QEMU (same machine, vCPU, memory and NIC), times QEMU start to
//! the first real PONG, loads 100,000 keys and reads the memory figures, runs redis-benchmark
//! and appends every number to `measurements.csv` (`system,key,value`).

use super::report::{self, System};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The guest's address on the tap link (the host side is 10.0.3.1).
pub const GUEST_IP: [u8; 4] = [10, 0, 3, 2];
/// The guest NIC's MAC: the host gets a permanent neighbour entry for it, so a probe sent
/// before the guest is up is not held back by ARP's one-second retry.
pub const GUEST_MAC: &str = "52:54:00:4b:56:02";
/// Guest memory, the same for every system.
const GUEST_MEM: &str = "256M";
/// The same in KiB.
const GUEST_MEM_KIB: f64 = 256.0 * 1024.0;
/// How long a boot may take before the run gives up (the Linux guest under TCG: seconds).
const BOOT_TIMEOUT: Duration = Duration::from_secs(240);
/// How long one redis-benchmark invocation may take.
const BENCH_TIMEOUT: Duration = Duration::from_secs(900);
/// Keys loaded before the memory reading.
pub const LOAD_KEYS: usize = 100_000;

/// What the inner run needs.
pub struct Inputs {
    /// Debian's kernel.
    pub kernel: PathBuf,
    /// The initramfs.
    pub initramfs: PathBuf,
    /// The unikernel image.
    pub image: PathBuf,
    /// `tcg` or `kvm`.
    pub accel: String,
    /// The quick plan.
    pub quick: bool,
    /// Output directory (measurements.csv, console logs).
    pub out: PathBuf,
}

/// One redis-benchmark configuration: pipeline depth, `-t` list, `-n`, and how many times it
/// runs (the best round counts: on a shared machine, other jobs only ever slow a round down).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// `-P`.
    pub pipeline: u32,
    /// `-t`.
    pub tests: &'static str,
    /// `-n` of each round.
    pub requests: u32,
    /// Rounds.
    pub rounds: u32,
}

/// The fast tests of the seeds' table.
const FAST: &str = "ping_inline,ping_mbulk,set,get,incr,lpush,lpop,sadd,spop";
/// The LRANGE tests (a reply of 100 to 600 elements each: far fewer requests per second).
const LRANGE: &str = "lrange_100,lrange_300,lrange_500,lrange_600";

/// A step.
const fn step(pipeline: u32, tests: &'static str, requests: u32, rounds: u32) -> Step {
    Step {
        pipeline,
        tests,
        requests,
        rounds,
    }
}

/// The steps of a full or quick run, sized for about 20 minutes (full, three systems) and
/// under 2 minutes (quick, builds done) under TCG on this 2-core machine.
pub fn plan(quick: bool) -> Vec<Step> {
    if quick {
        return vec![step(16, "set,get", 100_000, 3)];
    }
    vec![
        step(1, FAST, 40_000, 2),
        step(1, LRANGE, 8_000, 2),
        step(16, FAST, 250_000, 2),
        step(16, LRANGE, 8_000, 2),
    ]
}

/// Kills QEMU when dropped (errors and timeouts included).
struct Guest {
    child: Child,
}

impl Drop for Guest {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The QEMU command for `system`: q35, one vCPU, [`GUEST_MEM`], virtio-net-pci on tap0.
///
/// The Linux guest gets `tsc=reliable`: under TCG its clocksource watchdog otherwise marks
/// the TSC unstable a few seconds into the boot and falls back to the HPET, and then every
/// `clock_gettime` of the servers (a few per command) is a system call plus an emulated MMIO
/// read instead of a vDSO read of the TSC, which the unikernel uses directly.
fn qemu(system: System, inp: &Inputs) -> Command {
    let ip = format!(
        "{}.{}.{}.{}",
        GUEST_IP[0], GUEST_IP[1], GUEST_IP[2], GUEST_IP[3]
    );
    let mut c = Command::new("qemu-system-x86_64");
    c.args([
        "-M", "q35", "-accel", &inp.accel, "-smp", "1", "-m", GUEST_MEM,
    ])
    .args(crate::unikernel::QEMU_COMMON)
    .args(["-netdev", "tap,id=n0,ifname=tap0,script=no,downscript=no"])
    .arg("-device")
    .arg(format!(
        "virtio-net-pci,netdev=n0,disable-legacy=on,romfile=,mac={GUEST_MAC}"
    ));
    match system {
        System::Unikernel => {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            c.arg("-kernel").arg(&inp.image).arg("-append").arg(format!(
                "ip={ip}/24 gw=10.0.3.1 port=6379 time={}.{:06}",
                t.as_secs(),
                t.subsec_micros()
            ));
        }
        System::LinuxRedis | System::LinuxKayvee => {
            let server = if system == System::LinuxRedis {
                "redis"
            } else {
                "kayvee"
            };
            c.arg("-kernel")
                .arg(&inp.kernel)
                .arg("-initrd")
                .arg(&inp.initramfs)
                .arg("-append")
                .arg(format!(
                    "console=ttyS0 quiet panic=-1 tsc=reliable kv.server={server} kv.ip={ip}/24"
                ));
        }
    }
    c
}

/// Copies QEMU's stdout (the guest console) into `log` with host timestamps.
fn capture_console(out: std::process::ChildStdout, mut log: std::fs::File, start: Instant) {
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            let ms = start.elapsed().as_secs_f64() * 1e3;
            let _ = writeln!(log, "[{ms:10.1} ms] {}", line.trim_end());
        }
    });
}

/// The server's address in the guest.
fn server_addr(port: u16) -> SocketAddr {
    SocketAddr::from((GUEST_IP, port))
}

/// Waits for the first `+PONG` on fresh connections opened every 4 ms (each kept 300 ms:
/// a connect can succeed, or a SYN be queued, before the server answers); `alive` is checked
/// between rounds. Returns the time from `start`.
fn wait_pong(
    start: Instant,
    mut alive: impl FnMut() -> Result<(), String>,
) -> Result<Duration, String> {
    let every = Duration::from_millis(4);
    let ponged = crate::unikernel::probe_pong(server_addr(6379), every, every, || {
        alive()?;
        Ok(start.elapsed() >= BOOT_TIMEOUT)
    })?;
    match ponged {
        true => Ok(start.elapsed()),
        false => Err(format!("no PONG within {BOOT_TIMEOUT:?}")),
    }
}

/// Runs `program args` with `stdin`, bounded by `limit`; returns stdout.
fn client(
    program: &str,
    args: &[String],
    stdin: Vec<u8>,
    limit: Duration,
) -> Result<String, String> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    crate::unikernel::client_within(program, &args, &stdin, limit)
}

/// `redis-cli -h guest args...`.
fn cli(args: &[&str], stdin: Vec<u8>) -> Result<String, String> {
    let mut all: Vec<String> = vec!["-h".into(), "10.0.3.2".into(), "-p".into(), "6379".into()];
    all.extend(args.iter().map(|s| s.to_string()));
    client("redis-cli", &all, stdin, Duration::from_secs(300))
}

/// The RESP for `LOAD_KEYS` SETs of `key:N` to a 16-byte value.
fn load_script() -> Vec<u8> {
    let mut out = Vec::with_capacity(LOAD_KEYS * 48);
    for i in 0..LOAD_KEYS {
        let k = format!("key:{i:06}");
        let v = format!("value:{i:010}");
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

/// A value out of INFO's `name:value` lines.
pub fn info_field(info: &str, name: &str) -> Option<f64> {
    info.lines()
        .find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
}

/// `/proc/meminfo` (plus the server's VmRSS lines) from the guest's port 9100.
fn guest_meminfo() -> Result<String, String> {
    let mut s = TcpStream::connect_timeout(&server_addr(9100), Duration::from_secs(5))
        .map_err(|e| format!("guest meminfo port: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    if !text.contains("MemAvailable:") {
        return Err(format!("guest meminfo: unexpected reply {text:?}"));
    }
    Ok(text)
}

/// A `Name:   N kB` line of /proc files, in KiB.
pub fn meminfo_kib(text: &str, name: &str) -> Option<f64> {
    info_field(text, name).or_else(|| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
    })
}

/// Total PT_LOAD memory size of an ELF64 image (what the unikernel occupies before its heap).
pub fn elf_load_bytes(elf: &[u8]) -> Option<u64> {
    let u16_at = |o: usize| Some(u16::from_le_bytes(elf.get(o..o + 2)?.try_into().ok()?));
    let u32_at = |o: usize| Some(u32::from_le_bytes(elf.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_le_bytes(elf.get(o..o + 8)?.try_into().ok()?));
    if elf.get(..5)? != b"\x7fELF\x02" {
        return None;
    }
    let (phoff, phentsize, phnum) = (
        u64_at(0x20)? as usize,
        u16_at(0x36)? as usize,
        u16_at(0x38)?,
    );
    let mut total = 0;
    for i in 0..phnum as usize {
        let ph = phoff + i * phentsize;
        if u32_at(ph)? == 1 {
            total += u64_at(ph + 0x28)?;
        }
    }
    Some(total)
}

/// The resident set of a host process, in KiB.
fn host_rss_kib(pid: u32) -> Option<f64> {
    meminfo_kib(
        &std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?,
        "VmRSS",
    )
}

/// Appends measurements to the CSV.
struct Sink {
    file: std::fs::File,
}

impl Sink {
    /// Records one number (and echoes it).
    fn put(&mut self, system: System, key: &str, value: f64) -> Result<(), String> {
        println!("vm-compare: {:<13} {key} = {value:.1}", system.label());
        writeln!(self.file, "{},{key},{value}", system.label()).map_err(|e| e.to_string())
    }
}

/// Memory readings around loading [`LOAD_KEYS`] keys.
fn measure_memory(
    system: System,
    qemu_pid: u32,
    inp: &Inputs,
    sink: &mut Sink,
) -> Result<(), String> {
    let linux = system != System::Unikernel;
    let before = if linux { Some(guest_meminfo()?) } else { None };
    let info0 = cli(&["INFO", "memory"], vec![])?;
    let out = cli(&["--pipe"], load_script())?;
    if !out.contains(&format!("errors: 0, replies: {LOAD_KEYS}")) {
        return Err(format!("loading keys: {out}"));
    }
    let info = cli(&["INFO", "memory"], vec![])?;
    let kib = |v: Option<f64>| v.map_or(f64::NAN, |b| b / 1024.0);
    sink.put(
        system,
        "server_used_memory_idle_kib",
        kib(info_field(&info0, "used_memory")),
    )?;
    sink.put(
        system,
        "server_used_memory_kib",
        kib(info_field(&info, "used_memory")),
    )?;
    sink.put(
        system,
        "qemu_rss_kib",
        host_rss_kib(qemu_pid).unwrap_or(f64::NAN),
    )?;
    if let Some(before) = before {
        let after = guest_meminfo()?;
        let used = |t: &str| Some(meminfo_kib(t, "MemTotal")? - meminfo_kib(t, "MemAvailable")?);
        sink.put(
            system,
            "guest_used_idle_kib",
            used(&before).unwrap_or(f64::NAN),
        )?;
        sink.put(system, "guest_used_kib", used(&after).unwrap_or(f64::NAN))?;
        sink.put(
            system,
            "server_rss_kib",
            meminfo_kib(&after, "VmRSS").unwrap_or(f64::NAN),
        )?;
        let avail = meminfo_kib(&after, "MemAvailable").unwrap_or(f64::NAN);
        sink.put(system, "guest_unavailable_kib", GUEST_MEM_KIB - avail)?;
    } else {
        let image = std::fs::read(&inp.image).map_err(|e| e.to_string())?;
        let static_kib = elf_load_bytes(&image).unwrap_or(0) as f64 / 1024.0;
        let heap = |i: &str| kib(info_field(i, "used_memory"));
        sink.put(system, "guest_used_idle_kib", static_kib + heap(&info0))?;
        sink.put(system, "guest_used_kib", static_kib + heap(&info))?;
        sink.put(system, "server_rss_kib", f64::NAN)?;
        let free = kib(info_field(&info, "total_system_memory")) - heap(&info);
        sink.put(system, "guest_unavailable_kib", GUEST_MEM_KIB - free)?;
    }
    let flushed = cli(&["FLUSHALL"], vec![])?;
    if flushed.trim() != "OK" {
        return Err(format!("FLUSHALL: {flushed}"));
    }
    Ok(())
}

/// Runs one redis-benchmark step (every round) and records each test's best requests/s.
fn bench(system: System, step: &Step, sink: &mut Sink) -> Result<(), String> {
    let mut best: Vec<(String, f64)> = Vec::new();
    for round in 1..=step.rounds {
        let started = Instant::now();
        for (test, rps) in bench_round(step)? {
            let key = report::rps_key(step.pipeline, &test);
            sink.put(system, &format!("round{round}_{key}"), rps)?;
            match best.iter_mut().find(|(t, _)| *t == test) {
                Some(b) => b.1 = b.1.max(rps),
                None => best.push((test, rps)),
            }
        }
        eprintln!("vm-compare: ({:.0} s)", started.elapsed().as_secs_f64());
    }
    for (test, rps) in best {
        sink.put(system, &report::rps_key(step.pipeline, &test), rps)?;
    }
    Ok(())
}

/// One redis-benchmark invocation; its `(test, requests/s)` rows.
fn bench_round(step: &Step) -> Result<Vec<(String, f64)>, String> {
    let (p, n) = (step.pipeline.to_string(), step.requests.to_string());
    let args: Vec<String> = [
        "-h", "10.0.3.2", "-p", "6379", "-c", "50", "-P", &p, "-n", &n, "-t", step.tests, "--csv",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let out = client("redis-benchmark", &args, vec![], BENCH_TIMEOUT)?;
    let rows = report::parse_benchmark_csv(&out);
    let want = step.tests.split(',').count();
    if rows.len() < want {
        return Err(format!(
            "redis-benchmark {args:?}: {} of {want} results:\n{out}",
            rows.len()
        ));
    }
    Ok(rows)
}

/// Boots `system`, measures it, stops it.
fn one_system(system: System, inp: &Inputs, sink: &mut Sink) -> Result<(), String> {
    eprintln!("vm-compare: booting {} ({})", system.label(), inp.accel);
    let log_path = inp.out.join(format!("console-{}.log", system.label()));
    let log = std::fs::File::create(&log_path).map_err(|e| e.to_string())?;
    let start = Instant::now();
    let mut child = qemu(system, inp)
        .stdout(Stdio::piped())
        .stderr(log.try_clone().map_err(|e| e.to_string())?)
        .spawn()
        .map_err(|e| {
            format!("cannot run qemu-system-x86_64 (apt-get install qemu-system-x86): {e}")
        })?;
    let out = child.stdout.take().expect("piped");
    capture_console(out, log, start);
    let _ = Command::new("ip")
        .args([
            "neigh",
            "replace",
            "10.0.3.2",
            "lladdr",
            GUEST_MAC,
            "dev",
            "tap0",
            "nud",
            "permanent",
        ])
        .status();
    let mut guest = Guest { child };
    let boot = wait_pong(start, || match guest.child.try_wait() {
        Ok(Some(st)) => Err(format!(
            "QEMU exited before PONG ({st}); see {}",
            log_path.display()
        )),
        _ => Ok(()),
    })?;
    sink.put(system, "boot_ms", boot.as_secs_f64() * 1e3)?;
    measure_memory(system, guest.child.id(), inp, sink)?;
    for step in plan(inp.quick) {
        bench(system, &step, sink)?;
    }
    drop(guest);
    Ok(())
}

/// The inner run: every system in turn; measurements go to `out/measurements.csv`.
pub fn inner(inp: &Inputs) -> Result<(), String> {
    let path = inp.out.join("measurements.csv");
    let file = std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut sink = Sink { file };
    for system in System::ALL {
        one_system(system, inp, &mut sink)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_and_meminfo_fields() {
        let info = "# Memory\r\nused_memory:1048576\r\nused_memory_human:1.00M\r\n";
        assert_eq!(info_field(info, "used_memory"), Some(1048576.0));
        let mi = "MemTotal:         223456 kB\nMemAvailable:     180000 kB\nVmRSS:\t    9000 kB\n";
        assert_eq!(meminfo_kib(mi, "MemTotal"), Some(223456.0));
        assert_eq!(meminfo_kib(mi, "MemAvailable"), Some(180000.0));
        assert_eq!(meminfo_kib(mi, "VmRSS"), Some(9000.0));
        assert_eq!(meminfo_kib(mi, "Nope"), None);
    }

    #[test]
    fn elf_load_bytes_sums_pt_load_only() {
        let mut elf = vec![0u8; 0x40 + 3 * 0x38];
        elf[..5].copy_from_slice(b"\x7fELF\x02");
        elf[0x20..0x28].copy_from_slice(&0x40u64.to_le_bytes());
        elf[0x36..0x38].copy_from_slice(&0x38u16.to_le_bytes());
        elf[0x38..0x3a].copy_from_slice(&3u16.to_le_bytes());
        for (i, (ty, memsz)) in [(1u32, 4096u64), (4, 1 << 20), (1, 8192)]
            .iter()
            .enumerate()
        {
            let ph = 0x40 + i * 0x38;
            elf[ph..ph + 4].copy_from_slice(&ty.to_le_bytes());
            elf[ph + 0x28..ph + 0x30].copy_from_slice(&memsz.to_le_bytes());
        }
        assert_eq!(elf_load_bytes(&elf), Some(12288));
        assert_eq!(elf_load_bytes(b"not an elf"), None);
    }

    #[test]
    fn quick_plan_is_set_get_at_pipeline_16() {
        assert_eq!(plan(true).len(), 1);
        assert!(plan(true)[0].rounds >= 1);
        assert_eq!(plan(true)[0].pipeline, 16);
        assert_eq!(plan(true)[0].tests, "set,get");
        let full = plan(false);
        let tests: usize = full.iter().map(|s| s.tests.split(',').count()).sum();
        assert_eq!(tests, 2 * 13, "13 tests at each of -P 1 and -P 16");
    }

    #[test]
    fn load_script_has_every_key() {
        let s = load_script();
        let text = String::from_utf8_lossy(&s);
        assert_eq!(text.matches("*3\r\n$3\r\nSET\r\n").count(), LOAD_KEYS);
        assert!(text.contains("key:099999"));
    }
}
