//! Unikernel tasks: `image` (build the PVH image), `run` (boot it under QEMU microvm with a
//! host port forward) and `uk-test` (boot it under TCG, wait for a real PONG, drive it with
//! redis-cli and redis-benchmark, SHUTDOWN it and check QEMU's exit status). Uses only std.
//!
//! The image is built in `unikernel/` (a workspace of its own whose `.cargo/config.toml` holds
//! the image-only flags), so cargo runs with that directory as its working directory.

mod bench;
mod benchdisk;
pub mod disk;
mod disktest;
mod repltest;
mod resp;

pub use bench::{bench_boot, bench_mem, bench_net};
pub use benchdisk::{bench_disk, LinuxGuest};

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// QEMU's exit status when the image wrote the success value to isa-debug-exit.
const EXIT_SUCCESS: i32 = 33;
/// QEMU's exit status when the image failed (panic, bad command line).
const EXIT_FAILURE: i32 = 35;
/// How long `uk-test` waits for the first PONG.
pub(crate) const BOOT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long any client command of `uk-test` may take.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(180);

/// The unikernel's directory.
fn dir() -> PathBuf {
    super::root().join("unikernel")
}

/// Path of the built image.
fn image_path() -> PathBuf {
    dir().join("target/x86_64-unknown-linux-gnu/release/kayvee-unikernel")
}

/// Builds the image; returns its path and size in bytes.
pub(crate) fn build() -> Result<(PathBuf, u64), String> {
    build_with(&[])
}

/// Builds the image with extra cargo arguments (`--features ring3`).
fn build_with(extra: &[&str]) -> Result<(PathBuf, u64), String> {
    let cargo = super::cargo_bin();
    eprintln!(
        "xtask: (in unikernel/) cargo build --release {}",
        extra.join(" ")
    );
    let status = Command::new(cargo)
        .current_dir(dir())
        .args(["build", "--release"])
        .args(extra)
        // Outer flags would replace the image's own (see unikernel/.cargo/config.toml).
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .env_remove("CARGO_TARGET_DIR")
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!("building the unikernel failed ({status})"));
    }
    let path = image_path();
    let size = std::fs::metadata(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .len();
    Ok((path, size))
}

/// `cargo xtask image`: builds and prints the path and size.
pub fn image() -> Result<(), String> {
    let (path, size) = build()?;
    println!(
        "{} ({size} bytes, {:.1} KiB, stripped)",
        path.display(),
        size as f64 / 1024.0
    );
    Ok(())
}

/// The host's unix time as `SECONDS.MICROS`, for the image's `time=` parameter.
fn unix_time_param() -> String {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    format!("{}.{:06}", t.as_secs(), t.subsec_micros())
}

/// The port of this process's SNTP responder on 127.0.0.1 (a guest reaches it as
/// 10.0.2.2 through QEMU's user network), started on first use; `None` if it cannot bind.
/// It answers every 48-byte request as a stratum-1 server with the host's clock (RFC 4330).
pub(crate) fn ntp_port() -> Option<u16> {
    static PORT: std::sync::OnceLock<Option<u16>> = std::sync::OnceLock::new();
    *PORT.get_or_init(|| {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").ok()?;
        let port = socket.local_addr().ok()?.port();
        std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            while let Ok((n, from)) = socket.recv_from(&mut buf) {
                let received = ntp_now();
                if n < 48 {
                    continue;
                }
                let mut answer = [0u8; 48];
                answer[0] = 0x24; // LI 0, version 4, mode 4 (server)
                answer[1] = 1; // stratum 1
                answer[12..16].copy_from_slice(b"LOCL");
                answer[24..32].copy_from_slice(&buf[40..48]); // originate: the client's transmit
                answer[32..40].copy_from_slice(&received.to_be_bytes());
                answer[16..24].copy_from_slice(&received.to_be_bytes());
                answer[40..48].copy_from_slice(&ntp_now().to_be_bytes());
                let _ = socket.send_to(&answer, from);
            }
        });
        Some(port)
    })
}

/// The host's time as an NTP timestamp (seconds since 1900, 2^-32 fractions).
fn ntp_now() -> u64 {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let s = t.as_secs() + 2_208_988_800;
    (s << 32) | ((u64::from(t.subsec_nanos()) << 32) / 1_000_000_000)
}

/// KVM only when it is real hardware virtualization: this project's CI machines expose a
/// nested "PVM" /dev/kvm that aborts the ring-0 image on its first SSE instruction.
pub(crate) fn accel(requested: Option<&str>) -> &'static str {
    match requested {
        Some("kvm") => "kvm",
        Some(_) => "tcg",
        None => {
            let kvm = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/kvm")
                .is_ok();
            let pvm = std::path::Path::new("/sys/module/kvm_pvm").exists();
            if kvm && !pvm {
                "kvm"
            } else {
                "tcg"
            }
        }
    }
}

/// The machines the image boots on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Machine {
    /// QEMU microvm: no firmware, virtio-mmio (the default; Firecracker-like).
    Microvm,
    /// QEMU microvm with ACPI tables (`acpi=on`): what a Linux guest whose kernel lacks
    /// `CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES` (Debian's) needs to find virtio-mmio devices; the
    /// image boots on it too (`bench-disk --linux` runs both sides on it).
    MicrovmAcpi,
    /// QEMU q35: SeaBIOS, PCIe, virtio-net-pci (modern only; no option ROM).
    Q35,
}

impl Machine {
    /// Parses `--machine`'s value.
    fn parse(name: &str) -> Result<Machine, String> {
        match name {
            "microvm" => Ok(Machine::Microvm),
            "microvm-acpi" => Ok(Machine::MicrovmAcpi),
            "q35" => Ok(Machine::Q35),
            other => Err(format!(
                "unknown machine '{other}' (microvm, microvm-acpi or q35)"
            )),
        }
    }

    /// QEMU's `-M` value.
    fn qemu_name(self) -> &'static str {
        match self {
            Machine::Microvm => "microvm,pic=off,rtc=off,acpi=off,auto-kernel-cmdline=off",
            Machine::MicrovmAcpi => "microvm,pic=off,rtc=off,acpi=on,auto-kernel-cmdline=off",
            Machine::Q35 => "q35",
        }
    }

    /// The virtio-blk device for drive `d0`.
    fn blk(self) -> &'static str {
        match self {
            Machine::Microvm | Machine::MicrovmAcpi => "virtio-blk-device,drive=d0",
            Machine::Q35 => "virtio-blk-pci,drive=d0,disable-legacy=on,romfile=",
        }
    }

    /// The virtio-net device for netdev `n0`.
    fn nic(self) -> &'static str {
        match self {
            Machine::Microvm | Machine::MicrovmAcpi => "virtio-net-device,netdev=n0",
            Machine::Q35 => "virtio-net-pci,netdev=n0,disable-legacy=on,romfile=",
        }
    }
}

/// How a QEMU boot of the image is set up (see [`qemu`] for the defaults).
#[derive(Clone, Debug)]
pub(crate) struct Boot {
    /// The machine.
    pub machine: Machine,
    /// `tcg` or `kvm`.
    pub accel: String,
    /// Guest RAM (`-m`).
    pub mem: String,
    /// Host port forwarded to the guest's 6379.
    pub host_port: u16,
    /// The kernel command line's network words (`ip=... gw=...`); empty asks for DHCP.
    pub net: String,
    /// Extra command-line words (`key=value`).
    pub extra: Vec<String>,
    /// Extra `-M` options appended to the machine's own (`,x-option-roms=off`).
    pub machine_opts: String,
    /// Extra QEMU arguments, appended (`bench-boot --qemu ARG`, for experiments).
    pub qemu_extra: Vec<String>,
    /// A disk image attached as virtio-blk (the command line gets `disk=required`).
    pub disk: Option<PathBuf>,
    /// Another guest instead of the image (`bench-disk --linux`): `-initrd` and the whole
    /// kernel command line; the machine, NIC, disk and forwarding stay the same.
    pub linux: Option<(PathBuf, String)>,
    /// `ntp=` to this process's SNTP responder ([`ntp_port`]): the guest's wall clock then
    /// matches the host's to about a millisecond (`time=` lags by QEMU's start-up, which the
    /// suite's absolute-expiry tests notice).
    pub ntp: bool,
}

impl Boot {
    /// The defaults: static 10.0.2.15/24 (slirp's), 256 MiB.
    pub fn new(machine: Machine, accel: &str, host_port: u16) -> Boot {
        Boot {
            machine,
            accel: accel.into(),
            mem: "256M".into(),
            host_port,
            net: "ip=10.0.2.15/24 gw=10.0.2.2".into(),
            extra: Vec::new(),
            machine_opts: String::new(),
            qemu_extra: Vec::new(),
            disk: None,
            linux: None,
            ntp: false,
        }
    }

    /// The QEMU command.
    pub fn command(&self, image: &std::path::Path) -> Command {
        let mut cmdline = format!("{} port=6379 time={}", self.net, unix_time_param());
        if self.ntp {
            if let Some(port) = ntp_port() {
                cmdline.push_str(&format!(" ntp=10.0.2.2:{port}"));
            }
        }
        if let Some((_, linux)) = &self.linux {
            cmdline = linux.clone();
        } else if self.disk.is_some() {
            cmdline.push_str(" disk=required");
        }
        for a in self.extra.iter().filter(|_| self.linux.is_none()) {
            cmdline.push(' ');
            cmdline.push_str(a);
        }
        let mut c = Command::new("qemu-system-x86_64");
        c.arg("-M")
            .arg(format!("{}{}", self.machine.qemu_name(), self.machine_opts))
            .args(["-accel", &self.accel, "-m", &self.mem])
            .args(QEMU_COMMON)
            .args(["-netdev"])
            .arg(format!(
                "user,id=n0,hostfwd=tcp:127.0.0.1:{}-:6379",
                self.host_port
            ))
            .args(["-device", self.machine.nic()]);
        if let Some(disk) = &self.disk {
            c.arg("-drive")
                .arg(format!(
                    "file={},if=none,id=d0,format=raw,cache=writeback",
                    disk.display()
                ))
                .args(["-device", self.machine.blk()]);
        }
        if let Some((initrd, _)) = &self.linux {
            c.arg("-initrd").arg(initrd);
        }
        c.arg("-kernel")
            .arg(image)
            .arg("-append")
            .arg(cmdline)
            .args(&self.qemu_extra);
        c
    }
}

/// The QEMU command for `image` on `machine`, forwarding `host_port` to the guest's 6379.
fn qemu(
    image: &std::path::Path,
    machine: Machine,
    accel: &str,
    host_port: u16,
    extra_cmdline: &[String],
) -> Command {
    let mut boot = Boot::new(machine, accel, host_port);
    boot.extra = extra_cmdline.to_vec();
    boot.ntp = true;
    boot.command(image)
}

/// Maps QEMU's exit status to the image's meaning.
pub(crate) fn describe(status: ExitStatus) -> String {
    match status.code() {
        Some(EXIT_SUCCESS) => "clean shutdown".into(),
        Some(EXIT_FAILURE) => "the unikernel reported a failure (see its console)".into(),
        _ => format!("QEMU ended with {status}"),
    }
}

/// `cargo xtask run [--port N] [--accel tcg|kvm] [--machine microvm|q35] [key=value...]`: boots the image with its
/// console on stdio; Ctrl-C stops it.
pub fn run(args: &[String]) -> Result<(), String> {
    let mut port = 6379u16;
    let mut requested_accel = None;
    let mut machine = Machine::Microvm;
    let mut extra = Vec::new();
    let mut disk = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--port" => {
                let v = it.next().ok_or("--port needs a value")?;
                port = v.parse().map_err(|_| format!("bad port '{v}'"))?;
            }
            "--accel" => requested_accel = Some(it.next().ok_or("--accel needs a value")?.as_str()),
            "--machine" => machine = Machine::parse(it.next().ok_or("--machine needs a value")?)?,
            "--disk" => disk = Some(PathBuf::from(it.next().ok_or("--disk needs a file")?)),
            other => extra.push(other.to_string()),
        }
    }
    let (path, _) = build()?;
    let accel = accel(requested_accel);
    eprintln!(
        "xtask: booting {} under QEMU {machine:?} ({accel}), 127.0.0.1:{port} -> guest 6379",
        path.display()
    );
    let mut boot = Boot::new(machine, accel, port);
    boot.ntp = true;
    boot.extra = extra;
    boot.disk = disk;
    let status = boot.command(&path).status().map_err(|e| {
        format!("cannot run qemu-system-x86_64 (apt-get install qemu-system-x86): {e}")
    })?;
    eprintln!("xtask: {}", describe(status));
    match status.code() {
        Some(EXIT_SUCCESS) => Ok(()),
        _ => Err(describe(status)),
    }
}

/// A free TCP port on 127.0.0.1.
pub(crate) fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

/// Readiness probe for a guest behind QEMU's user-mode forward: a PING on a fresh
/// connection, each kept open for up to 300 ms; true at the first real `+PONG` (a forwarded
/// connect succeeds before the guest is up, so only the reply counts). The forward holds a
/// connection's SYN until the guest's NIC takes frames, so one waiting connection is enough:
/// a new one opens 1 ms after the last ended (refused before QEMU listens, reset if the guest
/// was not listening yet) and every 20 ms regardless. Opening one every millisecond made the
/// guest answer a burst of a dozen queued SYNs before its first PONG; `give_up` ends it.
fn wait_pong(port: u16, give_up: impl FnMut() -> Result<bool, String>) -> Result<bool, String> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    probe_pong(
        addr,
        Duration::from_millis(1),
        Duration::from_millis(20),
        give_up,
    )
}

/// Waits for the first PONG from the guest QEMU runs, forwarded to `port`: `Err` if QEMU
/// exits first or no PONG comes within `limit` of `start` (QEMU's spawn).
pub(crate) fn await_pong(
    qemu: &mut Child,
    port: u16,
    start: Instant,
    limit: Duration,
) -> Result<(), String> {
    let ponged = wait_pong(port, || {
        if let Some(st) = qemu.try_wait().map_err(|e| e.to_string())? {
            return Err(format!("QEMU exited before PONG: {}", describe(st)));
        }
        Ok(start.elapsed() > limit)
    })?;
    match ponged {
        true => Ok(()),
        false => Err(format!("no PONG within {limit:?}")),
    }
}

/// Opens a PING probe connection every `every` while none is waiting for its reply, and every
/// `busy_every` while some are (`vm-compare` passes the same 4 ms for both: on a tap network
/// a SYN sent before the guest is up is only retried after a second). Each probe waits for
/// its reply on a thread of its own, blocked in the kernel: the probe must not take the CPU
/// from the VM it times (a loop polling every open socket every 200 us took a good part of a
/// core on a 2-core host).
pub(crate) fn probe_pong(
    addr: std::net::SocketAddr,
    every: Duration,
    busy_every: Duration,
    mut give_up: impl FnMut() -> Result<bool, String>,
) -> Result<bool, String> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    const PROBE_PATIENCE: Duration = Duration::from_millis(300);
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let done = std::sync::Arc::new(AtomicBool::new(false));
    let waiting = std::sync::Arc::new(AtomicUsize::new(0));
    let mut last_open: Option<Instant> = None;
    let result = loop {
        let gap = match waiting.load(Ordering::Relaxed) {
            0 => every,
            _ => busy_every,
        };
        if last_open.is_none_or(|t| t.elapsed() >= gap) {
            last_open = Some(Instant::now());
            if let Ok(mut s) = TcpStream::connect_timeout(&addr, every) {
                if s.set_read_timeout(Some(PROBE_PATIENCE)).is_ok()
                    && s.write_all(b"PING\r\n").is_ok()
                {
                    let (tx, done, waiting) = (tx.clone(), done.clone(), waiting.clone());
                    waiting.fetch_add(1, Ordering::Relaxed);
                    std::thread::spawn(move || {
                        let mut got = Vec::new();
                        let mut buf = [0u8; 16];
                        while got.len() < 7 && !done.load(Ordering::Relaxed) {
                            match s.read(&mut buf) {
                                Ok(n) if n > 0 => got.extend_from_slice(&buf[..n]),
                                _ => break,
                            }
                        }
                        if got.starts_with(b"+PONG\r\n") {
                            let _ = tx.send(());
                        }
                        waiting.fetch_sub(1, Ordering::Relaxed);
                    });
                }
            }
        }
        match rx.recv_timeout(Duration::from_micros(500)) {
            Ok(()) => break Ok(true),
            Err(_) => match give_up() {
                Ok(true) => break Ok(false),
                Ok(false) => {}
                Err(e) => break Err(e),
            },
        }
    };
    done.store(true, Ordering::Relaxed);
    result
}

/// Waits for `child` up to `limit` (polled every 0.5 ms); kills it on timeout.
fn wait_bounded(child: &mut Child, limit: Duration) -> Result<ExitStatus, String> {
    let start = Instant::now();
    loop {
        if let Some(st) = child.try_wait().map_err(|e| e.to_string())? {
            return Ok(st);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("timed out after {limit:?}"));
        }
        // Fine-grained: bench-boot times the null image's exit with it.
        std::thread::sleep(Duration::from_micros(500));
    }
}

/// QEMU arguments every boot shares: no default devices or user config, no display, the
/// serial console on stdio, and the isa-debug-exit port the image exits through.
pub(crate) const QEMU_COMMON: &[&str] = &[
    "-nodefaults",
    "-no-user-config",
    "-display",
    "none",
    "-serial",
    "stdio",
    "-device",
    "isa-debug-exit,iobase=0xf4,iosize=0x04",
];

/// Runs a client program with `stdin` bytes, bounded in time; returns its stdout.
fn client(program: &str, args: &[&str], stdin: &[u8]) -> Result<String, String> {
    client_within(program, args, stdin, CLIENT_TIMEOUT)
}

/// [`client`] with a time limit of the caller's (vm-compare's benchmarks run for minutes).
pub(crate) fn client_within(
    program: &str,
    args: &[&str],
    stdin: &[u8],
    limit: Duration,
) -> Result<String, String> {
    let (st, text) = client_status_within(program, args, stdin, limit)?;
    if !st.success() {
        return Err(format!("{program} {args:?} failed ({st}): {text}"));
    }
    Ok(text)
}

/// [`client`] whatever the exit status (`redis-cli --pipe` fails when any reply was an
/// error); returns the status and stdout.
fn client_status(
    program: &str,
    args: &[&str],
    stdin: &[u8],
) -> Result<(ExitStatus, String), String> {
    client_status_within(program, args, stdin, CLIENT_TIMEOUT)
}

/// [`client_status`] with a time limit of the caller's.
fn client_status_within(
    program: &str,
    args: &[&str],
    stdin: &[u8],
    limit: Duration,
) -> Result<(ExitStatus, String), String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    let mut input = child.stdin.take().expect("piped");
    let data = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let mut out = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    // Drained too: `redis-cli --pipe` writes every error reply to stderr, and a full pipe
    // (64 KiB of `-OOM` lines) would block it forever.
    let mut err = child.stderr.take().expect("piped");
    let err_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
    });
    let st = wait_bounded(&mut child, limit).map_err(|e| format!("{program} {args:?}: {e}"))?;
    let _ = writer.join();
    let text = reader.join().unwrap_or_default();
    let _ = err_reader.join();
    Ok((st, text))
}

/// `redis-cli -p port args...` whose trimmed output must be `want`.
fn expect_cli(port: u16, args: &[&str], want: &str) -> Result<(), String> {
    let p = port.to_string();
    let mut all = vec!["-p", p.as_str()];
    all.extend_from_slice(args);
    let got = client("redis-cli", &all, b"")?;
    if got.trim() != want {
        return Err(format!(
            "redis-cli {args:?}: want {want:?}, got {:?}",
            got.trim()
        ));
    }
    println!("uk-test: redis-cli {} -> {}", args.join(" "), got.trim());
    Ok(())
}

/// [`expect_cli`] until it holds or `limit` passes (for state the guest reaches a little after
/// the host's side acted, such as closed connections).
fn await_cli(port: u16, args: &[&str], want: &str, limit: Duration) -> Result<(), String> {
    let start = Instant::now();
    loop {
        match expect_cli(port, args, want) {
            Err(e) if start.elapsed() < limit => {
                eprintln!("uk-test: {e}; again in 100 ms");
                std::thread::sleep(Duration::from_millis(100));
            }
            other => return other,
        }
    }
}

/// Starts a relay on a free port that forwards each accepted client to `target` (QEMU's
/// hostfwd port), opening the forwarded connections one at a time.
///
/// Why: libslirp listens on a hostfwd port with a backlog of 1, so when a client such as
/// redis-benchmark opens 20 connections at once the host kernel drops all but two SYNs, and the
/// clients retry with exponential backoff (1, 3, 7, 15, 31 s...). The relay's own listen queue
/// is deep, and it connects to slirp serially with a short pause.
pub(crate) fn start_relay(target: u16) -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("relay bind: {e}"))?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(upstream) = TcpStream::connect(("127.0.0.1", target)) else {
                continue;
            };
            let _ = (client.set_nodelay(true), upstream.set_nodelay(true));
            pipe(&client, &upstream);
            pipe(&upstream, &client);
            std::thread::sleep(Duration::from_millis(3));
        }
    });
    Ok(port)
}

/// Copies `from` into `to` on a thread until EOF, then half-closes `to`.
fn pipe(from: &TcpStream, to: &TcpStream) {
    let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
        return;
    };
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut from, &mut to);
        let _ = to.shutdown(std::net::Shutdown::Write);
    });
}

/// The client checks of `uk-test`; returns the redis-benchmark summary lines.
fn exercise(port: u16) -> Result<Vec<String>, String> {
    expect_cli(port, &["SET", "k", "v"], "OK")?;
    expect_cli(port, &["GET", "k"], "v")?;
    expect_cli(port, &["INCR", "n"], "1")?;
    expect_cli(port, &["INCR", "n"], "2")?;
    expect_cli(port, &["DBSIZE"], "2")?;
    // The image writes the addresses itself (no core::fmt): slirp's peer and the guest's end.
    let p = port.to_string();
    let me = client("redis-cli", &["-p", &p, "CLIENT", "INFO"], b"")?;
    let peer_ok = me
        .split(' ')
        .find_map(|w| w.strip_prefix("addr=10.0.2.2:"))
        .is_some_and(|port| port.parse::<u16>().is_ok());
    if !peer_ok || !me.contains(" laddr=10.0.2.15:6379 ") {
        return Err(format!("CLIENT INFO: {}", me.trim()));
    }
    println!("uk-test: CLIENT INFO: addr=10.0.2.2:<port> laddr=10.0.2.15:6379");
    let mut pipe = Vec::new();
    for i in 0..1000 {
        let (k, v) = (format!("key:{i}"), format!("value:{i}"));
        pipe.extend_from_slice(
            format!(
                "*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n${}\r\n{v}\r\n",
                k.len(),
                v.len()
            )
            .as_bytes(),
        );
    }
    let out = client("redis-cli", &["-p", &p, "--pipe"], &pipe)?;
    if !out.contains("errors: 0, replies: 1000") {
        return Err(format!("redis-cli --pipe: {out}"));
    }
    println!("uk-test: redis-cli --pipe: 1000 SETs, errors: 0, replies: 1000");
    expect_cli(port, &["DBSIZE"], "1002")?;
    expect_cli(port, &["GET", "key:999"], "value:999")?;
    let relay = start_relay(port)?.to_string();
    let bench = client(
        "redis-benchmark",
        &[
            "-p",
            &relay,
            "-t",
            "ping,set,get",
            "-n",
            "5000",
            "-c",
            "20",
            "-q",
        ],
        b"",
    )?;
    let lines: Vec<String> = bench
        .split(['\r', '\n'])
        .filter(|l| l.contains("requests per second"))
        .map(str::to_string)
        .collect();
    if lines.len() < 4 {
        return Err(format!("redis-benchmark gave no full summary: {bench}"));
    }
    Ok(lines)
}

/// Console lines of a running guest, each with the time since QEMU was started.
type ConsoleLines = std::sync::Arc<std::sync::Mutex<Vec<(Duration, String)>>>;

/// Spawns QEMU for `image` as `boot` says, its console lines timestamped into `target/<log>`;
/// returns QEMU, the instant just before the spawn and the console.
pub(crate) fn spawn_logged(
    image: &std::path::Path,
    boot: &Boot,
    log: &str,
) -> Result<(std::process::Child, Instant, ConsoleLines), String> {
    let path = dir().join("target").join(log);
    let file = std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let start = Instant::now();
    let mut qemu = boot
        .command(image)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run qemu-system-x86_64: {e}"))?;
    let console = capture_console(qemu.stdout.take().expect("piped"), file, start);
    Ok((qemu, start, console))
}

/// Reads the guest console (QEMU's stdout) on a thread: every line goes to `log` prefixed with
/// the milliseconds since `start`, and into the returned list (for boot timing).
fn capture_console(
    out: std::process::ChildStdout,
    mut log: std::fs::File,
    start: Instant,
) -> ConsoleLines {
    let lines: ConsoleLines = Default::default();
    let shared = lines.clone();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            let t = start.elapsed();
            let _ = writeln!(
                log,
                "[{:9.3} ms] {}",
                t.as_secs_f64() * 1e3,
                line.trim_end()
            );
            if let Ok(mut v) = shared.lock() {
                v.push((t, line));
            }
        }
    });
    lines
}

/// When the first console line containing `needle` arrived.
fn console_time(lines: &ConsoleLines, needle: &str) -> Option<Duration> {
    let v = lines.lock().ok()?;
    v.iter().find(|(_, l)| l.contains(needle)).map(|(t, _)| *t)
}

/// `cargo xtask uk-test`: the boot-to-shutdown test under TCG.
pub fn uk_test() -> Result<(), String> {
    let (path, size) = build()?;
    let port = free_port()?;
    let log_path = dir().join("target/uk-test-console.log");
    let log =
        std::fs::File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
    let log2 = log.try_clone().map_err(|e| e.to_string())?;
    let start = Instant::now();
    let mut qemu = qemu(&path, Machine::Microvm, "tcg", port, &[])
        .stdout(Stdio::piped())
        .stderr(log2)
        .spawn()
        .map_err(|e| {
            format!("cannot run qemu-system-x86_64 (apt-get install qemu-system-x86): {e}")
        })?;
    let console = capture_console(qemu.stdout.take().expect("piped"), log, start);
    let result = drive(&mut qemu, port, start);
    if result.is_err() {
        let _ = qemu.kill();
        let _ = qemu.wait();
        std::thread::sleep(Duration::from_millis(100));
        let text = std::fs::read_to_string(&log_path).unwrap_or_default();
        eprintln!("uk-test: guest console:\n{text}");
    }
    let (first_pong, bench, status) = result?;
    println!(
        "uk-test: image {} bytes ({:.1} KiB, stripped)",
        size,
        size as f64 / 1024.0
    );
    let ms = |d: Option<Duration>| d.map_or(f64::NAN, |d| d.as_secs_f64() * 1e3);
    println!(
        "uk-test: QEMU start to first console line {:.1} ms, to \"ready\" {:.1} ms, to first PONG {:.1} ms (TCG, microvm)",
        ms(console_time(&console, "booting")),
        ms(console_time(&console, "ready:")),
        ms(Some(first_pong)),
    );
    if let Some(phases) = console_time_line(&console, "boot phases") {
        println!("uk-test: guest {}", phases.trim_start_matches("kayvee: "));
    }
    for l in &bench {
        println!(
            "uk-test: redis-benchmark -c 20 -n 5000 via relay + hostfwd: {}",
            l.trim()
        );
    }
    println!("uk-test: SHUTDOWN NOSAVE: {}", describe(status));
    let mut q35 = Boot::new(Machine::Q35, "tcg", 0);
    q35.net.clear(); // no ip=: DHCP from slirp
    smoke(
        &path,
        &q35,
        "q35 (SeaBIOS, virtio-net-pci), DHCP",
        "DHCP lease: address 10.0.2.15/24",
    )?;
    expect_console(Machine::Q35, "wall clock from the CMOS RTC")?;
    fault_test(&path)?;
    bad_cmdline_test(&path)?;
    oom_test(&path)?;
    nic_interrupt_test(&path)?;
    repltest::repl_test(&path)?;
    disktest::disk_test(&path, &[])?;
    run_suites(&path)?;
    ring3_smoke()?;
    println!("uk-test: boot test and the end-to-end suites passed");
    Ok(())
}

/// `cargo xtask uk-test --robustness`: only the failure checks (fault reports, bad command
/// lines, heap exhaustion), a few seconds, for working on them.
pub fn uk_test_robustness() -> Result<(), String> {
    let (path, _) = build()?;
    fault_test(&path)?;
    bad_cmdline_test(&path)?;
    oom_test(&path)
}

/// `cargo xtask uk-test --replication`: only the replication check.
pub fn uk_test_replication() -> Result<(), String> {
    let (path, _) = build()?;
    repltest::repl_test(&path)
}

/// `cargo xtask uk-test --disk`: only the disk checks.
pub fn uk_test_disk(only: &[String]) -> Result<(), String> {
    let (path, _) = build()?;
    disktest::disk_test(&path, only)
}

/// Builds the ring-3 variant (`--features ring3`, for nested-PVM KVM hosts) into its own
/// file and boots it under TCG like the q35 check, on microvm, so the mode keeps working. This
/// boot also takes the Firecracker path: QEMU's own command-line additions are off and the
/// command line names the NIC the way Firecracker does (`virtio_mmio.device=`, after a block
/// at Firecracker's first address, empty here) and carries Firecracker's usual Linux
/// parameters, which the image must ignore.
fn ring3_smoke() -> Result<(), String> {
    let (path, _) = build_with(&["--features", "ring3"])?;
    let ring3 = dir().join("target/kayvee-unikernel-ring3");
    std::fs::copy(&path, &ring3).map_err(|e| format!("{}: {e}", ring3.display()))?;
    let mut boot = Boot::new(Machine::Microvm, "tcg", 0);
    boot.extra = [
        "reboot=k",
        "panic=1",
        "pci=off",
        "virtio_mmio.device=4K@0xd0000000:5",
        MICROVM_NIC_CMDLINE,
    ]
    .map(String::from)
    .to_vec();
    smoke(
        &ring3,
        &boot,
        "ring-3 mode (microvm), NIC named on the command line",
        "(from the command line)",
    )
}

/// Boots with `debug-fault=pf` (the image must print the page fault: vector, RIP, CR2),
/// `debug-fault=stack` (unbounded recursion: the guard page's fault, reported on the
/// exception stack) and `debug-fault=oom` (heap exhausted: the allocator's message); each must
/// stop with the failure status, not reset or hang.
fn fault_test(image: &std::path::Path) -> Result<(), String> {
    // (command-line word, the console line to report, another text the console must hold)
    let cases = [
        (
            "debug-fault=pf",
            "CPU exception 14: page fault",
            "(CR2) 0x100000000",
        ),
        (
            "debug-fault=stack",
            "stack overflow: the guard page",
            "CPU exception 14: page fault",
        ),
        (
            "debug-fault=oom",
            "out of memory: an allocation of",
            "out of memory",
        ),
    ];
    for (word, report, also) in cases {
        let console = fault_boot(image, word)?;
        let line = console
            .lines()
            .find(|l| l.contains(report))
            .filter(|_| console.contains(also))
            .ok_or_else(|| format!("{word}: no '{report}' report with '{also}':\n{console}"))?;
        println!(
            "uk-test: {word}: {}, failure exit",
            line.trim().trim_start_matches("kayvee: ")
        );
    }
    Ok(())
}

/// Boots with a bad command-line value each time (the parser's own kernel keys, a Redis
/// directive the engine's config rejects, a word without `=`, an unbalanced quote): the
/// console must name it in `kayvee: bad command line: ...`, QEMU must exit with the failure
/// status, and no "ready:" line may appear (never a half-configured server).
fn bad_cmdline_test(image: &std::path::Path) -> Result<(), String> {
    // (command-line word, the console line it must produce)
    let cases = [
        (
            "maxmemory=lots",
            "bad command line: maxmemory=lots: argument must be a memory value",
        ),
        (
            "ip=10.0.2.300/24",
            "bad command line: ip=10.0.2.300/24: expected ADDRESS/PREFIX such as 10.0.2.15/24",
        ),
        (
            "port=99999",
            "bad command line: port=99999: argument must be between 0 and 65535 inclusive",
        ),
        (
            "nonsense",
            "bad command line: 'nonsense': expected key=value",
        ),
        (
            "requirepass=\"a",
            "bad command line: unbalanced double quote in the command line",
        ),
    ];
    for (word, want) in cases {
        let console = fault_boot(image, word)?;
        if !console
            .lines()
            .any(|l| l.trim() == format!("kayvee: {want}"))
        {
            return Err(format!("{word}: no 'kayvee: {want}' line:\n{console}"));
        }
        if console.contains("ready:") {
            return Err(format!("{word}: the server got ready anyway:\n{console}"));
        }
        println!("uk-test: {word}: \"{want}\", failure exit, never ready");
    }
    Ok(())
}

/// Boots with `word` on the command line; QEMU must exit with the failure status. Returns
/// the console.
fn fault_boot(image: &std::path::Path, word: &str) -> Result<String, String> {
    let mut boot = Boot::new(Machine::Microvm, "tcg", free_port()?);
    boot.mem = "32M".into();
    boot.extra.push(word.into());
    let mut qemu = boot
        .command(image)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run qemu-system-x86_64: {e}"))?;
    let mut out = qemu.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let status = wait_bounded(&mut qemu, BOOT_TIMEOUT)?;
    let console = reader.join().unwrap_or_default();
    if status.code() != Some(EXIT_FAILURE) {
        return Err(format!(
            "{word}: want exit {EXIT_FAILURE}, got {}:\n{console}",
            describe(status)
        ));
    }
    Ok(console)
}

/// Values `oom_test` writes: 1,000 of 16 KiB, more than a 16 MiB VM's default maxmemory.
const OOM_VALUES: usize = 1000;

/// Heap exhaustion from clients: a 16 MiB VM (default maxmemory derived from its heap) is sent
/// 16 MB of SETs. Some must succeed, the rest get Redis's `-OOM` error, and the server must
/// still answer and shut down cleanly (not die or hang).
fn oom_test(image: &std::path::Path) -> Result<(), String> {
    let port = free_port()?;
    let mut boot = Boot::new(Machine::Microvm, "tcg", port);
    boot.mem = "16M".into();
    let log = dir().join("target/uk-test-oom-console.log");
    let (mut qemu, start, _console) = spawn_logged(image, &boot, "uk-test-oom-console.log")?;
    let result = (|| {
        if !wait_pong(port, || Ok(start.elapsed() > BOOT_TIMEOUT))? {
            return Err("no PONG within the boot timeout".to_string());
        }
        let value = "x".repeat(16 * 1024);
        let mut pipe = Vec::new();
        for i in 0..OOM_VALUES {
            let k = format!("big:{i}");
            pipe.extend_from_slice(
                format!(
                    "*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n${}\r\n{value}\r\n",
                    k.len(),
                    value.len()
                )
                .as_bytes(),
            );
        }
        let p = port.to_string();
        let (_, out) = client_status("redis-cli", &["-p", &p, "--pipe"], &pipe)?;
        let errors: usize = out
            .split("errors: ")
            .nth(1)
            .and_then(|r| r.split(',').next())
            .and_then(|n| n.trim().parse().ok())
            .ok_or_else(|| format!("redis-cli --pipe: {out}"))?;
        if !out.contains(&format!("replies: {OOM_VALUES}")) || errors == 0 || errors == OOM_VALUES {
            return Err(format!(
                "want some -OOM errors among {OOM_VALUES} replies: {out}"
            ));
        }
        let max = client("redis-cli", &["-p", &p, "CONFIG", "GET", "maxmemory"], b"")?;
        let max: u64 = max
            .lines()
            .nth(1)
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        if max == 0 || max >= 16 << 20 {
            return Err(format!("default maxmemory under -m 16M: {max}"));
        }
        expect_cli(port, &["PING"], "PONG")?;
        expect_cli(port, &["DBSIZE"], &(OOM_VALUES - errors).to_string())?;
        let flood = connection_flood(port)?;
        // The flood's connections close as their FINs cross slirp and reach the guest: until
        // then a new client may still be over maxclients, as on Redis.
        await_cli(port, &["PING"], "PONG", Duration::from_secs(10))?;
        expect_cli(port, &["DBSIZE"], &(OOM_VALUES - errors).to_string())?;
        let _ = client("redis-cli", &["-p", &p, "SHUTDOWN", "NOSAVE"], b"");
        let status = wait_bounded(&mut qemu, Duration::from_secs(20))?;
        if status.code() != Some(EXIT_SUCCESS) {
            return Err(format!("after SHUTDOWN NOSAVE: {}", describe(status)));
        }
        Ok((errors, max, flood))
    })();
    if result.is_err() {
        let _ = qemu.kill();
        let _ = qemu.wait();
    }
    let (errors, max, (served, refused)) =
        result.map_err(|e| format!("oom: {e} (console: {})", log.display()))?;
    println!(
        "uk-test: -m 16M (default maxmemory {max} bytes), {OOM_VALUES} SETs of 16 KiB: {} stored, \
         {errors} refused with -OOM; then {FLOOD_CONNECTIONS} connections held open at once: \
         {served} served, {refused} refused; PING, DBSIZE, clean shutdown",
        OOM_VALUES - errors
    );
    Ok(())
}

/// Connections `connection_flood` holds open at once: each costs the image a socket's buffers
/// and a session's, far more together than a full 16 MiB VM has left.
const FLOOD_CONNECTIONS: usize = 150;

/// Opens [`FLOOD_CONNECTIONS`] connections to a VM whose heap is nearly full and holds them all
/// open, each sending PING. Every connection must be served (PONG) or refused (Redis's "max
/// number of clients" error, or a TCP reset or close), none may hang, and the server must live
/// on. Returns how many were served and how many refused.
fn connection_flood(port: u16) -> Result<(usize, usize), String> {
    let mut held = Vec::new();
    let (mut served, mut refused) = (0, 0);
    for i in 0..FLOOD_CONNECTIONS {
        let Ok(mut c) = TcpStream::connect_timeout(
            &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
            Duration::from_secs(10),
        ) else {
            refused += 1;
            continue;
        };
        c.set_read_timeout(Some(Duration::from_secs(20)))
            .map_err(|e| e.to_string())?;
        let mut got = Vec::new();
        let mut buf = [0u8; 256];
        let sent = c.write_all(b"PING\r\n").is_ok();
        while sent && !got.ends_with(b"\r\n") {
            match c.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(e) => return Err(format!("connection {i} of the flood: {e}")),
            }
        }
        match got.as_slice() {
            b"+PONG\r\n" => served += 1,
            b"" | b"-ERR max number of clients reached\r\n" => refused += 1,
            other => {
                return Err(format!(
                    "connection {i} of the flood got {:?}",
                    String::from_utf8_lossy(other)
                ))
            }
        }
        held.push(c);
    }
    if served == 0 {
        return Err(format!(
            "no connection of the flood was served ({refused} refused)"
        ));
    }
    drop(held);
    Ok((served, refused))
}

/// Where QEMU microvm puts the first (only) virtio-mmio NIC, as Linux's parameter: the last
/// slot of its window, interrupt 12 (what QEMU itself appends with `auto-kernel-cmdline=on`).
const MICROVM_NIC_CMDLINE: &str = "virtio_mmio.device=512@0xfeb00e00:12";

/// Boots `image` as `boot` says under TCG, checks PONG, a SET/GET, a clean SHUTDOWN and a
/// console line containing `expect`.
fn smoke(image: &std::path::Path, boot: &Boot, what: &str, expect: &str) -> Result<(), String> {
    let port = free_port()?;
    let mut boot = boot.clone();
    boot.host_port = port;
    let name = format!("uk-test-{:?}-console.log", boot.machine);
    let log = dir().join("target").join(&name);
    let (mut qemu, start, console) = spawn_logged(image, &boot, &name)?;
    let result = (|| {
        await_pong(&mut qemu, port, start, BOOT_TIMEOUT).map_err(|e| format!("{what}: {e}"))?;
        let first_pong = start.elapsed();
        expect_cli(port, &["SET", "smoke", "ok"], "OK")?;
        expect_cli(port, &["GET", "smoke"], "ok")?;
        let p = port.to_string();
        if boot.machine == Machine::Q35 {
            check_time(port)?;
        }
        let _ = client("redis-cli", &["-p", &p, "SHUTDOWN", "NOSAVE"], b"");
        let status = wait_bounded(&mut qemu, Duration::from_secs(20))?;
        if status.code() != Some(EXIT_SUCCESS) {
            return Err(format!(
                "{what}: after SHUTDOWN NOSAVE: {}",
                describe(status)
            ));
        }
        Ok(first_pong)
    })();
    if result.is_err() {
        let _ = qemu.kill();
        let _ = qemu.wait();
    }
    let first_pong = result.map_err(|e| format!("{e} (console: {})", log.display()))?;
    if console_time_line(&console, expect).is_none() {
        return Err(format!(
            "{what}: no console line with {expect:?} (see {})",
            log.display()
        ));
    }
    let nic = console_time_line(&console, "virtio-net at").unwrap_or_default();
    let ring = console_time_line(&console, "; ring ").unwrap_or_default();
    let ring = ring
        .split("; ")
        .find(|p| p.starts_with("ring "))
        .unwrap_or("ring ?");
    println!(
        "uk-test: {what}: {ring}, {}: first PONG {:.1} ms, SET/GET, clean shutdown",
        nic.trim_start_matches("kayvee: "),
        first_pong.as_secs_f64() * 1e3
    );
    if let Some(lease) = console_time_line(&console, "DHCP lease:") {
        println!("uk-test: {what}: {}", lease.trim_start_matches("kayvee: "));
    }
    Ok(())
}

/// Most the guest's TIME may differ from the host's: the CMOS RTC has whole seconds, and
/// redis-cli's round trip under TCG adds a little.
const TIME_SKEW_MAX_S: f64 = 3.0;

/// TIME must be the host's wall time (q35: the image reads the CMOS RTC, which QEMU sets to
/// the host's UTC, rather than the command line's `time=`).
fn check_time(port: u16) -> Result<(), String> {
    let p = port.to_string();
    let out = client("redis-cli", &["-p", &p, "TIME"], b"")?;
    let host = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    let mut it = out.split_whitespace().map(|w| w.parse::<f64>());
    let (Some(Ok(s)), Some(Ok(us))) = (it.next(), it.next()) else {
        return Err(format!("TIME: {out:?}"));
    };
    let skew = s + us / 1e6 - host;
    if skew.abs() > TIME_SKEW_MAX_S {
        return Err(format!(
            "TIME is {skew:.3} s off the host's (want within {TIME_SKEW_MAX_S} s)"
        ));
    }
    println!("uk-test: q35 TIME vs the host: {skew:+.3} s (wall clock from the CMOS RTC)");
    Ok(())
}

/// PINGs the NIC interrupt check sends to the idle guest.
const IRQ_PINGS: u64 = 5;

/// Boots the image on microvm and checks that the NIC's interrupt ends its idle halts: after
/// an idle spell (the guest halted: `kayvee_idle_halts` in INFO server went up), each of
/// [`IRQ_PINGS`] PINGs sent 200 ms apart (the guest halts between them) is answered, and
/// `kayvee_nic_interrupts` went up by at least one per PING (each new connection's frames
/// reach a halted guest). No timing is asserted.
fn nic_interrupt_test(image: &std::path::Path) -> Result<(), String> {
    let port = free_port()?;
    let boot = Boot::new(Machine::Microvm, "tcg", port);
    let name = "uk-test-irq-console.log";
    let log = dir().join("target").join(name);
    let (mut qemu, start, _console) = spawn_logged(image, &boot, name)?;
    let p = port.to_string();
    let counters = || -> Result<(u64, u64), String> {
        let info = client("redis-cli", &["-p", &p, "INFO", "server"], b"")?;
        let get = |key: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix(':')?.trim().parse().ok())
                .ok_or_else(|| format!("INFO server has no {key}: {info}"))
        };
        Ok((get("kayvee_nic_interrupts")?, get("kayvee_idle_halts")?))
    };
    let result = (|| {
        await_pong(&mut qemu, port, start, BOOT_TIMEOUT)?;
        let (irqs0, halts0) = counters()?;
        let idle = Duration::from_millis(1500);
        std::thread::sleep(idle);
        let (irqs1, halts1) = counters()?;
        if halts1 <= halts0 {
            return Err(format!(
                "the idle guest never halted ({halts0} -> {halts1})"
            ));
        }
        for _ in 0..IRQ_PINGS {
            std::thread::sleep(Duration::from_millis(200));
            let pong = client("redis-cli", &["-p", &p, "PING"], b"")?;
            if pong.trim() != "PONG" {
                return Err(format!("PING answered {:?}", pong.trim()));
            }
        }
        let (irqs2, _) = counters()?;
        if irqs2 < irqs1 + IRQ_PINGS {
            return Err(format!(
                "{IRQ_PINGS} PINGs to the halted guest: NIC interrupts {irqs1} -> {irqs2}, want one a PING at least"
            ));
        }
        let _ = client("redis-cli", &["-p", &p, "SHUTDOWN", "NOSAVE"], b"");
        let status = wait_bounded(&mut qemu, Duration::from_secs(20))?;
        if status.code() != Some(EXIT_SUCCESS) {
            return Err(format!("after SHUTDOWN NOSAVE: {}", describe(status)));
        }
        println!(
            "uk-test: NIC interrupt (microvm): idle {:.1} s: {} halts, {} NIC interrupts; \
             {IRQ_PINGS} PINGs 200 ms apart: NIC interrupts {irqs1} -> {irqs2}",
            idle.as_secs_f64(),
            halts1 - halts0,
            irqs1 - irqs0
        );
        Ok(())
    })();
    if result.is_err() {
        let _ = qemu.kill();
        let _ = qemu.wait();
    }
    result.map_err(|e| format!("NIC interrupt: {e} (console: {})", log.display()))
}

/// Differential seeds run against the image (the Linux server runs 20).
const UK_DIFF_SEEDS: &str = "10";

/// The end-to-end suites of the tests crate that need no file system: they run against the
/// image as they run against kayvee-server (tests that need one skip themselves).
const UK_SUITES: [&str; 9] = [
    "differential",
    "clients",
    "blocking",
    "pubsub",
    "tracking",
    "notify",
    "eviction",
    "acl",
    "scripting",
];

/// Runs the end-to-end suites of the tests crate ([`UK_SUITES`]: differential against
/// redis-server, real clients, blocking commands, pub/sub, tracking, keyspace notifications,
/// eviction, ACL, scripts and functions) against the image: `KAYVEE_TARGET=unikernel` makes `Server::kayvee` boot it
/// under QEMU TCG behind the port forward.
fn run_suites(image: &std::path::Path) -> Result<(), String> {
    let cargo = super::cargo_bin();
    let suites = UK_SUITES;
    eprintln!("uk-test: end-to-end suites against the image: {suites:?} (KAYVEE_TARGET=unikernel)");
    let mut cmd = Command::new(cargo);
    cmd.current_dir(super::root())
        .args(["test", "-p", "kayvee-tests"]);
    for s in suites {
        cmd.args(["--test", s]);
    }
    let status = cmd
        .env("KAYVEE_TARGET", "unikernel")
        .env("KAYVEE_UNIKERNEL_IMAGE", image)
        .env("KAYVEE_REQUIRE_REDIS", "1")
        .env("KAYVEE_DIFF_SEEDS", UK_DIFF_SEEDS)
        .status()
        .map_err(|e| format!("cannot run cargo test: {e}"))?;
    if !status.success() {
        return Err(format!(
            "end-to-end suites against the unikernel failed ({status})"
        ));
    }
    Ok(())
}

/// The console log `smoke` kept of its boot on `machine` must hold `needle`.
fn expect_console(machine: Machine, needle: &str) -> Result<(), String> {
    let log = dir().join(format!("target/uk-test-{machine:?}-console.log"));
    let text = std::fs::read_to_string(&log).map_err(|e| format!("{}: {e}", log.display()))?;
    if !text.contains(needle) {
        return Err(format!("{}: no {needle:?}", log.display()));
    }
    Ok(())
}

/// The first console line containing `needle`.
fn console_time_line(lines: &ConsoleLines, needle: &str) -> Option<String> {
    let v = lines.lock().ok()?;
    v.iter()
        .find(|(_, l)| l.contains(needle))
        .map(|(_, l)| l.trim_end().to_string())
}

/// Waits for the first PONG, runs the clients, shuts the guest down; returns the time to the
/// first PONG, the benchmark lines and QEMU's exit status.
fn drive(
    qemu: &mut Child,
    port: u16,
    start: Instant,
) -> Result<(Duration, Vec<String>, ExitStatus), String> {
    await_pong(qemu, port, start, BOOT_TIMEOUT)?;
    let first_pong = start.elapsed();
    let bench = exercise(port)?;
    let p = port.to_string();
    // redis-cli reports the closed connection of a successful SHUTDOWN; its status is not the test.
    let _ = client("redis-cli", &["-p", &p, "SHUTDOWN", "NOSAVE"], b"");
    let status = wait_bounded(qemu, Duration::from_secs(20))
        .map_err(|e| format!("QEMU after SHUTDOWN: {e}"))?;
    if status.code() != Some(EXIT_SUCCESS) {
        return Err(format!("after SHUTDOWN NOSAVE: {}", describe(status)));
    }
    Ok((first_pong, bench, status))
}
