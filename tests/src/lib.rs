//! Shared helpers for the end-to-end tests: start `kayvee-server` or a reference `redis-server` on a
//! free loopback port, talk raw RESP to them, and find the external client tools.
//!
//! Environment variables:
//! - `KAYVEE_TARGET=redis`: `Server::kayvee` starts a second redis-server instead of kayvee-server
//!   (to check the harnesses themselves: redis against redis must give no mismatch).
//! - `KAYVEE_TARGET=unikernel` with `KAYVEE_UNIKERNEL_IMAGE=/path`: `Server::kayvee` boots the
//!   unikernel image under QEMU TCG (microvm) with a host port forward to a free port, translating
//!   `--name value` options to its `name=value` command line (`cargo xtask uk-test` runs
//!   the differential, blocking and client tests this way). `Server::port` is then a relay in
//!   front of QEMU's forward (see `Relay`); assertions on the process id are skipped.
//! - `KAYVEE_SERVER_BIN=/path`: use this kayvee-server binary instead of building one.
//! - `KAYVEE_REQUIRE_REDIS=1`: a missing redis-server / redis-cli / redis-benchmark fails the test
//!   instead of skipping it (CI sets it).

pub mod resp;

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub use resp::{frame_len, split_aggregate, FrameError};

/// How long a started server gets to answer PING before the start counts as failed.
const START_WAIT_MAX: Duration = Duration::from_secs(15);
/// How many ports are tried before giving up on starting a server.
const START_ATTEMPTS_MAX: u32 = 6;
/// Port range the test servers use (far from 6379 and from the helpers' 20000-29999).
const PORT_MIN: u32 = 30000;
const PORT_SPAN: u32 = 20000;
/// How long a reply may take before `Conn::read_reply` gives up.
pub const REPLY_WAIT_MAX: Duration = Duration::from_secs(10);

/// Which program a `Server` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The system under test.
    Kayvee,
    /// The system under test as the unikernel image under QEMU (`KAYVEE_TARGET=unikernel`).
    Unikernel,
    /// The reference: Debian's redis-server 7.0.15.
    Redis,
}

/// A server process on 127.0.0.1:`port`, killed when dropped.
pub struct Server {
    child: Child,
    port: u16,
    kind: Kind,
    log_path: PathBuf,
    /// The server's own empty working directory (removed on drop), so a stray dump.rdb or
    /// appendonlydir in a shared directory is never loaded into a test's server.
    work_dir: Option<PathBuf>,
    /// The unikernel's connection relay (see [`Relay`]), stopped on drop.
    relay: Option<Relay>,
}

impl Server {
    /// Starts the server under test with `--port P --bind 127.0.0.1` plus `args`.
    /// With `KAYVEE_TARGET=redis` this is a redis-server instead (harness self-check); in that
    /// case it returns `None` when redis-server is missing and not required.
    pub fn kayvee(args: &[&str]) -> Option<Server> {
        if target_is_redis() {
            return Server::redis(args);
        }
        if target_is_unikernel() {
            return Some(start_unikernel(args));
        }
        let bin = kayvee_bin();
        Some(start_with_retries(Kind::Kayvee, |port| {
            let mut cmd = Command::new(&bin);
            cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"]);
            // No save points unless a test asks (as for redis-server below): Redis's defaults
            // would drop dump.rdb files into the working directory.
            cmd.args(["--save", ""]);
            cmd.args(args);
            cmd
        }))
    }

    /// Starts a reference redis-server (no persistence) with `args` appended. Returns `None`,
    /// after printing why, when redis-server is not installed and `KAYVEE_REQUIRE_REDIS` is unset.
    pub fn redis(args: &[&str]) -> Option<Server> {
        if !tool_available("redis-server") {
            return None;
        }
        Some(start_with_retries(Kind::Redis, |port| {
            let mut cmd = Command::new("redis-server");
            cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"]);
            cmd.args(["--save", "", "--appendonly", "no", "--daemonize", "no"]);
            cmd.args(args);
            cmd
        }))
    }

    /// The TCP port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Which program this is (`Kayvee` is redis-server when `KAYVEE_TARGET=redis`).
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The server's process id (for /proc readings; QEMU's under `KAYVEE_TARGET=unikernel`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A new raw RESP connection to the server.
    pub fn conn(&self) -> Conn {
        Conn::connect(self.port).unwrap_or_else(|e| panic!("connect to port {}: {e}", self.port))
    }

    /// The last lines of the server's log, for failure messages.
    pub fn log_tail(&self) -> String {
        log_tail(&self.log_path)
    }

    /// The server's whole log (its standard output and error).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(relay) = self.relay.take() {
            relay.stop();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            // The test failed: the end of what the server said goes with the failure.
            eprintln!(
                "server log ({}):\n{}",
                self.log_path.display(),
                self.log_tail()
            );
        }
        let _ = std::fs::remove_file(&self.log_path);
        if let Some(dir) = &self.work_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// True when `KAYVEE_TARGET=redis` asks for redis-server in place of kayvee-server.
pub fn target_is_redis() -> bool {
    std::env::var("KAYVEE_TARGET").is_ok_and(|v| v == "redis")
}

/// True when `KAYVEE_TARGET=unikernel` asks for the unikernel image under QEMU.
pub fn target_is_unikernel() -> bool {
    std::env::var("KAYVEE_TARGET").is_ok_and(|v| v == "unikernel")
}

/// How long the unikernel gets to answer its first PING (TCG on a busy machine).
const UNIKERNEL_BOOT_MAX: Duration = Duration::from_secs(60);

/// The QEMU command booting `KAYVEE_UNIKERNEL_IMAGE` under TCG (microvm) listening on
/// `guest_port`, with 127.0.0.1:`host_port` forwarded to it. Server options `--name value`
/// become the image's `name=value` command-line words (a bare `--flag` becomes `flag=yes`).
fn unikernel_command(host_port: u16, guest_port: u16, args: &[&str]) -> Command {
    let image = std::env::var_os("KAYVEE_UNIKERNEL_IMAGE")
        .expect("KAYVEE_TARGET=unikernel needs KAYVEE_UNIKERNEL_IMAGE=/path/to/kayvee-unikernel");
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let mut cmdline = format!(
        "ip=10.0.2.15/24 gw=10.0.2.2 port={guest_port} time={}.{:06}",
        now.as_secs(),
        now.subsec_micros()
    );
    for word in unikernel_cmdline(args) {
        cmdline.push(' ');
        cmdline.push_str(&word);
    }
    let mut cmd = Command::new("qemu-system-x86_64");
    cmd.args([
        "-M",
        "microvm,pic=off,rtc=off,acpi=off,auto-kernel-cmdline=off",
    ])
    .args([
        "-accel",
        "tcg",
        "-m",
        "256M",
        "-nodefaults",
        "-no-user-config",
    ])
    .args(["-display", "none", "-serial", "stdio"])
    .args([
        "-device",
        "isa-debug-exit,iobase=0xf4,iosize=0x04",
        "-netdev",
    ])
    .arg(format!(
        "user,id=n0,hostfwd=tcp:127.0.0.1:{host_port}-:{guest_port}"
    ))
    .args(["-device", "virtio-net-device,netdev=n0", "-kernel"])
    .arg(image)
    .arg("-append")
    .arg(cmdline);
    cmd
}

/// Boots the unikernel (retrying a failed boot a few times) and puts a [`Relay`] in front of
/// its port forward. The guest listens on the relay's port, so what INFO reports as
/// `tcp_port` is the port clients use.
fn start_unikernel(args: &[&str]) -> Server {
    let mut last_log = String::new();
    for _ in 0..START_ATTEMPTS_MAX / 2 {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the relay");
        let port = listener.local_addr().expect("relay address").port();
        let forward = free_port();
        let log_path = std::env::temp_dir().join(format!("kayvee-tests-unikernel-{port}.log"));
        let log = std::fs::File::create(&log_path).expect("create console log");
        let err_log = log.try_clone().expect("clone log handle");
        let child = unikernel_command(forward, port, args)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err_log)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("spawn qemu-system-x86_64 (apt-get install qemu-system-x86): {e}")
            });
        let mut server = Server {
            child,
            port: forward,
            kind: Kind::Unikernel,
            log_path,
            work_dir: None,
            relay: None,
        };
        match wait_for_pong(&mut server) {
            Ok(()) => {
                server.relay = Some(Relay::start(listener, forward));
                server.port = port;
                return server;
            }
            Err(why) => last_log = format!("{why}\n--- console ---\n{}", server.log_tail()),
        }
    }
    panic!("could not boot the unikernel: {last_log}");
}

/// A loopback relay in front of QEMU's port forward. libslirp listens on a hostfwd port with
/// a backlog of 1: when many clients connect at once (50 threads, 1,000 connections) the host
/// kernel drops their SYNs or final ACKs and they stall for seconds. The relay accepts with a
/// deep backlog and opens the forwarded connections one at a time, then copies bytes both
/// ways (a thread per direction).
struct Relay {
    port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Relay {
    /// Pause after each forwarded connect, so slirp's one-deep accept queue never overflows.
    const CONNECT_GAP: Duration = Duration::from_millis(2);

    /// Relays every connection accepted on `listener` to 127.0.0.1:`target`.
    fn start(listener: TcpListener, target: u16) -> Relay {
        let port = listener.local_addr().expect("relay address").port();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if stopped.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(client) = client else { continue };
                let Ok(upstream) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                let _ = (client.set_nodelay(true), upstream.set_nodelay(true));
                copy_half(&client, &upstream);
                copy_half(&upstream, &client);
                std::thread::sleep(Self::CONNECT_GAP);
            }
        });
        Relay { port, stop }
    }

    /// Stops accepting (wakes the accept loop with one last connection).
    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Copies `from` into `to` on a thread until EOF or an error, then closes both directions
/// that belong to this copy (the peer sees EOF; a reset ends the other copy too).
fn copy_half(from: &TcpStream, to: &TcpStream) {
    let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
        return;
    };
    std::thread::Builder::new()
        .stack_size(64 * 1024)
        .spawn(move || {
            let _ = io::copy(&mut from, &mut to);
            let _ = to.shutdown(Shutdown::Write);
            let _ = from.shutdown(Shutdown::Read);
        })
        .ok();
}

/// Server options (`--name value`, `--flag`) as the unikernel's `name=value` words; values
/// with spaces are double-quoted (the image's command-line syntax).
pub fn unikernel_cmdline(args: &[&str]) -> Vec<String> {
    let mut words = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let name = args[i].trim_start_matches("--");
        let value = args.get(i + 1).filter(|v| !v.starts_with("--"));
        let value = match value {
            Some(v) => {
                i += 2;
                v.to_string()
            }
            None => {
                i += 1;
                "yes".to_string()
            }
        };
        if value.contains(' ') || value.is_empty() {
            words.push(format!("{name}=\"{value}\""));
        } else {
            words.push(format!("{name}={value}"));
        }
    }
    words
}

/// True when missing Redis tools must fail tests instead of skipping them.
pub fn redis_required() -> bool {
    std::env::var_os("KAYVEE_REQUIRE_REDIS").is_some_and(|v| !v.is_empty() && v != "0")
}

/// Whether `tool` (redis-server, redis-cli, redis-benchmark) is on PATH. When it is missing:
/// panics if `KAYVEE_REQUIRE_REDIS` is set, else prints a skip notice and returns false.
pub fn tool_available(tool: &str) -> bool {
    let found = Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            !redis_required(),
            "{tool} is not installed and KAYVEE_REQUIRE_REDIS is set"
        );
        eprintln!("SKIPPED: {tool} is not installed (set KAYVEE_REQUIRE_REDIS=1 to fail instead)");
    }
    found
}

/// The workspace root (the parent of this crate's directory).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// The kayvee-server binary: `KAYVEE_SERVER_BIN`, else `target/<profile>/kayvee-server` next to the
/// running test binary, built once per process with `cargo build -p kayvee-server` so it is never
/// stale.
pub fn kayvee_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(bin) = std::env::var_os("KAYVEE_SERVER_BIN") {
            return PathBuf::from(bin);
        }
        let (target_dir, profile) = target_dir_and_profile();
        build_kayvee(&target_dir, &profile);
        let bin = target_dir.join(&profile).join("kayvee-server");
        assert!(bin.exists(), "{} missing after cargo build", bin.display());
        bin
    })
    .clone()
}

/// The target directory and profile name of the running test binary
/// (`<target>/<profile>/deps/<test>-<hash>`), defaulting to `<root>/target` and `debug`.
fn target_dir_and_profile() -> (PathBuf, String) {
    let exe = std::env::current_exe().ok();
    let profile_dir = exe.as_deref().and_then(Path::parent).and_then(Path::parent);
    match profile_dir.and_then(|d| Some((d.parent()?, d.file_name()?.to_str()?))) {
        Some((target, profile)) => (target.to_path_buf(), profile.to_string()),
        None => (workspace_root().join("target"), "debug".to_string()),
    }
}

/// Runs `cargo build -p kayvee-server` for `profile` into `target_dir`.
fn build_kayvee(target_dir: &Path, profile: &str) {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace_root())
        .args(["build", "-q", "-p", "kayvee-server"]);
    cmd.arg("--target-dir").arg(target_dir);
    match profile {
        "debug" => {}
        "release" => {
            cmd.arg("--release");
        }
        other => {
            cmd.args(["--profile", other]);
        }
    }
    let status = cmd.status().expect("run cargo build -p kayvee-server");
    assert!(
        status.success(),
        "cargo build -p kayvee-server failed: {status}"
    );
}

/// Starts a server on a fresh free port, retrying on another port when the process dies early
/// (port taken between the probe and the bind). Panics with the log when every attempt fails.
fn start_with_retries(kind: Kind, make: impl Fn(u16) -> Command) -> Server {
    let mut last_log = String::new();
    for _ in 0..START_ATTEMPTS_MAX {
        let port = free_port();
        let log_path = std::env::temp_dir().join(format!("kayvee-tests-{kind:?}-{port}.log"));
        let log = std::fs::File::create(&log_path).expect("create server log");
        let err_log = log.try_clone().expect("clone log handle");
        let work_dir = std::env::temp_dir().join(format!(
            "kayvee-tests-{kind:?}-{port}-{}.d",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&work_dir);
        std::fs::create_dir_all(&work_dir).expect("create server working directory");
        let mut cmd = make(port);
        cmd.stdin(Stdio::null())
            .stdout(log)
            .stderr(err_log)
            .current_dir(&work_dir);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {kind:?} server: {e}"));
        let mut server = Server {
            child,
            port,
            kind,
            log_path,
            work_dir: Some(work_dir),
            relay: None,
        };
        match wait_for_pong(&mut server) {
            Ok(()) => return server,
            Err(why) => last_log = format!("{why}\n--- server log ---\n{}", server.log_tail()),
        }
    }
    panic!("could not start {kind:?} server after {START_ATTEMPTS_MAX} attempts: {last_log}");
}

/// Waits (bounded) until the server answers `PING` with exactly `+PONG\r\n`.
fn wait_for_pong(server: &mut Server) -> Result<(), String> {
    if server.kind == Kind::Unikernel {
        return wait_for_forwarded_pong(server);
    }
    let deadline = Instant::now() + START_WAIT_MAX;
    let mut last = String::from("no connection yet");
    while Instant::now() < deadline {
        if let Ok(Some(status)) = server.child.try_wait() {
            return Err(format!("server exited early: {status}"));
        }
        match ping_once(server.port) {
            Ok(reply) if reply == b"+PONG\r\n" => return Ok(()),
            Ok(reply) => last = format!("PING answered {}", show(&reply)),
            Err(e) => last = format!("PING failed: {e}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!("no +PONG within {START_WAIT_MAX:?} ({last})"))
}

/// The unikernel's readiness probe: QEMU's port forward accepts connections before the guest
/// is up (they then hang), so a fresh connection sends PING every few ms, each kept and polled
/// for a while; only a real `+PONG` counts.
fn wait_for_forwarded_pong(server: &mut Server) -> Result<(), String> {
    const PROBE_EVERY: Duration = Duration::from_millis(4);
    const PROBE_PATIENCE: Duration = Duration::from_millis(500);
    let start = Instant::now();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], server.port));
    let mut probes: Vec<(Instant, TcpStream, Vec<u8>)> = Vec::new();
    let mut last_open: Option<Instant> = None;
    while start.elapsed() < UNIKERNEL_BOOT_MAX {
        if let Ok(Some(status)) = server.child.try_wait() {
            return Err(format!("QEMU exited early: {status}"));
        }
        if last_open.is_none_or(|t| t.elapsed() >= PROBE_EVERY) {
            last_open = Some(Instant::now());
            if let Ok(mut s) = TcpStream::connect_timeout(&addr, PROBE_EVERY) {
                if s.set_nonblocking(true).is_ok() && s.write_all(b"PING\r\n").is_ok() {
                    probes.push((Instant::now(), s, Vec::new()));
                }
            }
        }
        for (_, s, got) in probes.iter_mut() {
            let mut buf = [0u8; 16];
            if let Ok(n) = s.read(&mut buf) {
                got.extend_from_slice(&buf[..n]);
            }
            if got.starts_with(b"+PONG\r\n") {
                return Ok(());
            }
        }
        probes.retain(|(t, _, _)| t.elapsed() < PROBE_PATIENCE);
        std::thread::sleep(Duration::from_millis(1));
    }
    Err(format!("no +PONG within {UNIKERNEL_BOOT_MAX:?}"))
}

/// One connection, one PING, one reply.
fn ping_once(port: u16) -> io::Result<Vec<u8>> {
    let mut conn = Conn::connect(port)?;
    conn.set_timeout(Duration::from_millis(500));
    conn.send(b"*1\r\n$4\r\nPING\r\n")?;
    conn.read_reply()
}

/// A port in 30000-49999 that nothing listens on right now (probed by binding it).
pub fn free_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let seed = std::process::id().wrapping_mul(7919) ^ nanos;
    for _ in 0..1000 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = (PORT_MIN + seed.wrapping_add(n.wrapping_mul(7_877)) % PORT_SPAN) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {PORT_MIN}..{}", PORT_MIN + PORT_SPAN);
}

/// The last 30 lines of a log file.
fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// A raw RESP connection: send bytes, read back exactly one complete reply's raw bytes.
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    /// Connects to 127.0.0.1:`port` with the default reply timeout.
    pub fn connect(port: u16) -> io::Result<Conn> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(REPLY_WAIT_MAX))?;
        Ok(Conn {
            stream,
            buf: Vec::new(),
        })
    }

    /// Turns Nagle's algorithm off (`true`, as [`Conn::connect`] leaves it) or on (`false`,
    /// as clients that write a command in pieces often leave it).
    pub fn set_nodelay(&self, nodelay: bool) {
        let _ = self.stream.set_nodelay(nodelay);
    }

    /// Changes how long a read may block.
    pub fn set_timeout(&mut self, timeout: Duration) {
        let _ = self.stream.set_read_timeout(Some(timeout));
    }

    /// Writes raw bytes.
    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Reads one complete reply (RESP2 or RESP3) and returns its raw bytes. EOF before a
    /// complete frame is `UnexpectedEof`; a malformed frame is `InvalidData`.
    pub fn read_reply(&mut self) -> io::Result<Vec<u8>> {
        loop {
            match frame_len(&self.buf) {
                Ok(Some(n)) => return Ok(self.buf.drain(..n).collect()),
                Ok(None) => self.fill()?,
                Err(e) => {
                    let msg = format!("{e:?} in {}", show(&self.buf));
                    return Err(io::Error::new(io::ErrorKind::InvalidData, msg));
                }
            }
        }
    }

    /// Sends one command as a RESP multibulk and reads its reply.
    pub fn cmd(&mut self, args: &[&[u8]]) -> io::Result<Vec<u8>> {
        self.send(&encode_command(args))?;
        self.read_reply()
    }

    /// Like `cmd` with string arguments; panics on I/O errors.
    pub fn cmd_str(&mut self, args: &[&str]) -> Vec<u8> {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.cmd(&args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    /// One field of `INFO section` (`everything` for all), parsed as a `T`; panics when the
    /// field is missing or does not parse.
    pub fn info_field<T: std::str::FromStr>(&mut self, section: &str, name: &str) -> T {
        let info = String::from_utf8_lossy(&self.cmd_str(&["INFO", section])).into_owned();
        let prefix = format!("{name}:");
        info.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} (or not a number) in INFO {section}: {info}"))
    }

    /// True when the peer has closed the connection (EOF within `wait`, nothing buffered).
    pub fn is_closed(&mut self, wait: Duration) -> bool {
        self.set_timeout(wait);
        let closed = self.buf.is_empty()
            && matches!(self.fill(), Err(e) if e.kind() == io::ErrorKind::UnexpectedEof);
        self.set_timeout(REPLY_WAIT_MAX);
        closed
    }

    /// Half-closes the writing side (so the server sees EOF).
    pub fn shutdown_write(&self) {
        let _ = self.stream.shutdown(Shutdown::Write);
    }

    /// Reads more bytes into the buffer; EOF is an `UnexpectedEof` error.
    fn fill(&mut self) -> io::Result<()> {
        let mut chunk = [0u8; 16 * 1024];
        let n = self.stream.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed",
            ));
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }
}

/// Encodes a command as a RESP multibulk (`*N\r\n$len\r\narg\r\n...`).
pub fn encode_command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Renders raw bytes readably: printable ASCII as is, `\r` `\n` and others escaped.
pub fn show(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len());
    for &b in bytes {
        match b {
            b'\r' => s.push_str("\\r"),
            b'\n' => s.push_str("\\n"),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s
}

/// splitmix64: a tiny deterministic generator for the randomised end-to-end tests (the
/// sequence depends on the seed only, so a failing seed reruns exactly).
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// One of `items`.
    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// Renders a command's arguments as a redis-cli-like line.
pub fn show_args(args: &[Vec<u8>]) -> String {
    args.iter()
        .map(|a| show_arg(a))
        .collect::<Vec<_>>()
        .join(" ")
}

/// One argument, quoted when empty or holding spaces / non-printables.
fn show_arg(arg: &[u8]) -> String {
    let plain = !arg.is_empty() && arg.iter().all(|&b| b.is_ascii_graphic() && b != b'"');
    if plain {
        show(arg)
    } else {
        format!("\"{}\"", show(arg).replace('"', "\\\""))
    }
}

#[cfg(test)]
mod tests {
    use super::unikernel_cmdline;

    #[test]
    fn server_options_become_unikernel_words() {
        assert_eq!(
            unikernel_cmdline(&["--requirepass", "s3cret", "--maxmemory", "64mb"]),
            ["requirepass=s3cret", "maxmemory=64mb"]
        );
        assert_eq!(
            unikernel_cmdline(&["--appendonly", "--save", "", "--notify", "a b"]),
            ["appendonly=yes", "save=\"\"", "notify=\"a b\""]
        );
    }
}
