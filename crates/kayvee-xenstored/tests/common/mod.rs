//! Shared by the ring tests: a daemon with ring support in a thread on the test Xen, a dom0
//! wire client on its socket, and guest request helpers.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kayvee_xenstored::options::parse;
use kayvee_xenstored::server::Server;
use kayvee_xenstored::xen::guest::{Guest, Msg};
use kayvee_xenstored::xen::testxen::{TestXen, TEST_GFN, TEST_PORT};
use kayvee_xswire::{encode, Header};

// Message types (xs_wire.h).
pub const CONTROL: u32 = 0;
pub const DIRECTORY: u32 = 1;
pub const READ: u32 = 2;
pub const WATCH: u32 = 4;
pub const TX_START: u32 = 6;
pub const TX_END: u32 = 7;
pub const INTRODUCE: u32 = 8;
pub const RELEASE: u32 = 9;
pub const WRITE: u32 = 11;
pub const MKDIR: u32 = 12;
pub const SET_PERMS: u32 = 14;
pub const EVENT: u32 = 15;
pub const ERROR: u32 = 16;
pub const IS_INTRODUCED: u32 = 17;

/// Start a daemon with ring support in a thread; its socket path.
pub fn start(xen: &TestXen, extra: &[&str]) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::SeqCst);
    let dir = PathBuf::from(format!("/tmp/xs-ring-{}-{n}", std::process::id()));
    // A directory left by an earlier run whose process had this pid (pids wrap) would make
    // the guests' proxy sockets fail to bind.
    let _ = std::fs::remove_dir_all(&dir);
    let socket = dir.join("socket");
    let args: Vec<String> = ["--no-fork"]
        .iter()
        .chain(extra)
        .map(|s| s.to_string())
        .collect();
    let opts = parse(&args, socket.clone()).unwrap().unwrap();
    let host = Box::new(xen.host().unwrap());
    let mut server = Server::with_xen(&opts, host).unwrap();
    std::thread::spawn(move || server.run());
    socket
}

/// A dom0 client on the socket.
pub struct Dom0 {
    s: UnixStream,
    pub events: Vec<Msg>,
}

impl Dom0 {
    pub fn connect(path: &PathBuf) -> Self {
        let s = UnixStream::connect(path).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        Dom0 {
            s,
            events: Vec::new(),
        }
    }

    pub fn recv(&mut self) -> Msg {
        let mut h = [0u8; 16];
        self.s.read_exact(&mut h).unwrap();
        let header = Header::read(&h);
        let mut payload = vec![0; header.len as usize];
        self.s.read_exact(&mut payload).unwrap();
        Msg { header, payload }
    }

    pub fn req(&mut self, ty: u32, tx: u32, payload: &[u8]) -> (u32, Vec<u8>) {
        let mut w = Vec::new();
        encode(&mut w, ty, 0, tx, payload);
        self.s.write_all(&w).unwrap();
        loop {
            let m = self.recv();
            if m.header.ty == EVENT {
                self.events.push(m);
                continue;
            }
            return (m.header.ty, m.payload);
        }
    }

    pub fn ok(&mut self, ty: u32, payload: &[u8]) -> Vec<u8> {
        let (t, p) = self.req(ty, 0, payload);
        assert_ne!(t, ERROR, "{ty} {:?}: {:?}", bs(payload), bs(&p));
        p
    }

    /// Wait for an event on `path`.
    pub fn event(&mut self, path: &str) {
        let want = format!("{path}\0");
        if let Some(i) = self
            .events
            .iter()
            .position(|e| e.payload.starts_with(want.as_bytes()))
        {
            self.events.remove(i);
            return;
        }
        loop {
            let m = self.recv();
            assert_eq!(m.header.ty, EVENT);
            if m.payload.starts_with(want.as_bytes()) {
                return;
            }
        }
    }

    /// Create domain `d`'s home owned by it, and introduce it.
    pub fn introduce(&mut self, d: u32) {
        let home = format!("/local/domain/{d}\0");
        self.ok(MKDIR, home.as_bytes());
        self.ok(SET_PERMS, format!("{home}n{d}\0").as_bytes());
        self.ok(
            INTRODUCE,
            format!("{d}\0{TEST_GFN}\0{TEST_PORT}\0").as_bytes(),
        );
    }
}

pub fn bs(b: &[u8]) -> String {
    String::from_utf8_lossy(b).replace('\0', "|")
}

/// A guest's request that must succeed; its reply payload.
pub fn gok(g: &mut Guest, ty: u32, tx: u32, payload: &[u8]) -> Vec<u8> {
    let m = g.request(ty, tx, payload).unwrap();
    assert_ne!(
        m.header.ty,
        ERROR,
        "{ty} {:?}: {:?}",
        bs(payload),
        bs(&m.payload)
    );
    m.payload
}

/// A guest's request that must fail with `err`.
pub fn gerr(g: &mut Guest, ty: u32, tx: u32, payload: &[u8], err: &str) {
    let m = g.request(ty, tx, payload).unwrap();
    assert_eq!((m.header.ty, bs(&m.payload)), (ERROR, format!("{err}|")));
}
