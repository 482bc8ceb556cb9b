//! The real `kayvee-xenstored` binary serving guests of the cross-process test Xen
//! (`--test-xen DIR`: pages as files, event channels as FIFOs): introduction, a guest's
//! requests through its ring, death.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use kayvee_xenstored::xen::guest::Guest;
use kayvee_xenstored::xen::host::DomainState;
use kayvee_xenstored::xen::testxen::DirXen;

/// The daemon process, killed on drop.
struct Daemon(Child, std::path::PathBuf);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_dir_all(&self.1);
    }
}

#[test]
fn the_daemon_binary_serves_guests_of_another_process() {
    let dir = std::path::PathBuf::from(format!("/tmp/xs-ring-proc-{}", std::process::id()));
    let xen_dir = dir.join("xen");
    let socket = dir.join("socket");
    std::fs::create_dir_all(&xen_dir).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_kayvee-xenstored"))
        .args(["--no-fork", "--test-xen"])
        .arg(&xen_dir)
        .env("XENSTORED_PATH", &socket)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let _daemon = Daemon(child, dir.clone());
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(Instant::now() < deadline, "daemon did not come up");
        std::thread::sleep(Duration::from_millis(20));
    }
    let xen = DirXen::new(&xen_dir);
    let mut d0 = Dom0::connect(&socket);
    let mut g = Guest::new(xen.create_domain(3).unwrap());
    d0.introduce(3);
    gok(&mut g, WRITE, 0, b"hello\0world");
    assert_eq!(d0.ok(READ, b"/local/domain/3/hello\0"), b"world");
    gok(&mut g, WATCH, 0, b"hello\0t\0");
    assert_eq!(g.event().unwrap().payload, b"hello\0t\0");
    d0.ok(WATCH, b"@releaseDomain\0r\0");
    d0.event("@releaseDomain");
    xen.set_state(3, DomainState::Dead).unwrap();
    d0.event("@releaseDomain");
    assert_eq!(d0.ok(IS_INTRODUCED, b"3\0"), b"F\0");
}
