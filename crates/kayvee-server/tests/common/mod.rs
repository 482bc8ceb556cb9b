//! Shared helpers for the end-to-end tests: start `kayvee-server` on a free port in
//! 30000-39999, talk raw RESP over TCP or a Unix socket, stop it at the end.
#![allow(dead_code)] // each test file uses a different subset

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_kayvee-server");

/// How long a server may take to start listening.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// Ports tried by [`Server::start_default`].
const START_ATTEMPTS: usize = 5;

static NEXT: AtomicU16 = AtomicU16::new(0);

/// A port in 30000-39999 nobody listens on now (spread by process id, so parallel test
/// binaries rarely collide, and checked by binding it).
pub fn free_port() -> u16 {
    let base = (std::process::id() % 1000) * 10;
    loop {
        let n = u32::from(NEXT.fetch_add(1, Ordering::Relaxed));
        let port = 30000 + ((base + n * 7) % 10000) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// A scratch path unique to this process and `tag`.
pub fn temp_path(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("kayvee-test-{}-{tag}", std::process::id()))
}

/// A running server; killed on drop.
pub struct Server {
    pub child: Child,
    pub port: u16,
    pub log: PathBuf,
}

impl Server {
    /// Starts the server with `args` and waits until `port` accepts connections.
    pub fn start(port: u16, args: &[&str]) -> Server {
        let mut cmd = Command::new(BIN);
        cmd.args(args);
        Server::start_command(port, cmd)
    }

    /// Starts the server as `cmd` runs it (e.g. under a shell that sets `ulimit`), in its own
    /// working directory: a save on shutdown (default save points) must not leave a dump.rdb
    /// that another test's server loads at startup (and answers -LOADING).
    pub fn start_command(port: u16, cmd: Command) -> Server {
        Server::spawn(port, cmd).unwrap_or_else(|log| panic!("server exited at startup {log}"))
    }

    /// Starts with `--port PORT --bind 127.0.0.1` plus `extra`, on another free port when the
    /// one probed was taken before the server bound it (an outgoing connection's ephemeral
    /// port can land in the range between the probe and the bind).
    pub fn start_default(extra: &[&str]) -> Server {
        for _ in 0..START_ATTEMPTS {
            let port = free_port();
            let p = port.to_string();
            let mut args = vec!["--port", p.as_str(), "--bind", "127.0.0.1"];
            args.extend_from_slice(extra);
            let mut cmd = Command::new(BIN);
            cmd.args(&args);
            match Server::spawn(port, cmd) {
                Ok(server) => return server,
                Err(log) if log.contains("Address already in use") => continue,
                Err(log) => panic!("server exited at startup:\n{log}"),
            }
        }
        panic!("no free port after {START_ATTEMPTS} attempts");
    }

    /// Spawns `cmd` and waits until it listens; the log when it exited first.
    fn spawn(port: u16, mut cmd: Command) -> Result<Server, String> {
        let log = temp_path(&format!("{port}.log"));
        let out = std::fs::File::create(&log).unwrap();
        let dir = temp_path(&format!("{port}.dir"));
        std::fs::create_dir_all(&dir).unwrap();
        let child = cmd
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("spawn kayvee-server");
        let mut server = Server { child, port, log };
        server.try_wait_ready()?;
        Ok(server)
    }

    /// Waits until the server accepts connections; `Err(log)` when it exited first.
    fn try_wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(s) = TcpStream::connect(("127.0.0.1", self.port)) {
                // A connection to a port in the ephemeral range that nothing listens on yet
                // can connect to itself (TCP simultaneous open): that is not the server.
                if s.local_addr().ok() != s.peer_addr().ok() {
                    return Ok(());
                }
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                return Err(format!("({status})\n{}", self.log_text()));
            }
            assert!(
                Instant::now() < deadline,
                "server did not start:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What the server logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// A new TCP connection.
    pub fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s
    }

    /// Sends a signal to the server.
    pub fn signal(&self, sig: i32) {
        // SAFETY: `kill` has no memory-safety preconditions; the pid is our child's.
        let rc = unsafe { libc::kill(self.child.id() as i32, sig) };
        assert_eq!(rc, 0);
    }

    /// Waits up to 10 s for the server to exit.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "server did not exit:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            // The test failed: what the server said goes with the failure.
            eprintln!(
                "kayvee-server log (port {}):\n{}",
                self.port,
                self.log_text()
            );
        }
        let _ = std::fs::remove_file(&self.log);
        let _ = std::fs::remove_dir_all(temp_path(&format!("{}.dir", self.port)));
    }
}

/// Writes `req` and reads exactly `expected.len()` bytes, returning them.
pub fn roundtrip<S: Read + Write>(s: &mut S, req: &[u8], reply_len: usize) -> Vec<u8> {
    s.write_all(req).unwrap();
    read_n(s, reply_len)
}

/// Reads exactly `n` bytes (panics on EOF or timeout with what was read).
pub fn read_n<S: Read>(s: &mut S, n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    let mut got = 0;
    while got < n {
        match s.read(&mut buf[got..]) {
            Ok(0) => panic!(
                "EOF after {got} of {n} bytes: {:?}",
                String::from_utf8_lossy(&buf[..got])
            ),
            Ok(k) => got += k,
            Err(e) => panic!("read error after {got} of {n} bytes: {e}"),
        }
    }
    buf
}

/// Reads until EOF (the server closed), returning everything.
pub fn read_to_eof<S: Read>(s: &mut S) -> Vec<u8> {
    let mut out = Vec::new();
    s.read_to_end(&mut out)
        .expect("read until the server closes");
    out
}

/// Raises this process's descriptor soft limit to at least `n` (to hold many connections).
pub fn raise_nofile(n: u64) {
    // SAFETY: `rlimit` is plain old data; `getrlimit`/`setrlimit` read or write only it.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut r), 0);
        if (r.rlim_cur as u64) < n {
            r.rlim_cur = (n as libc::rlim_t).min(r.rlim_max);
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &r), 0);
        }
    }
}
