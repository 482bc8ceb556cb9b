//! Log lines the store produces (cxenstored sends them to syslog): one datagram per line to
//! the syslog socket (`/dev/log`, facility daemon), or to stderr when there is no syslog.

use std::io;
use std::os::unix::net::UnixDatagram;
use std::path::Path;

use kayvee_xenstore::{LogLine, Severity};

/// The syslog socket.
pub const DEV_LOG: &str = "/dev/log";

/// `LOG_DAEMON`, the facility of a system daemon.
const FACILITY_DAEMON: u8 = 3;

/// The syslog priority number of a severity (RFC 3164 `<PRI>`: facility * 8 + severity).
fn priority(s: Severity) -> u8 {
    let level = match s {
        Severity::Err => 3,
        Severity::Warning => 4,
        Severity::Info => 6,
    };
    FACILITY_DAEMON * 8 + level
}

/// The datagram for one line, as syslog(3) sends it to the local socket (the daemon adds the
/// time stamp and host).
pub fn datagram(line: &LogLine, pid: u32) -> Vec<u8> {
    format!(
        "<{}>kayvee-xenstored[{pid}]: {}",
        priority(line.severity),
        line.text
    )
    .into_bytes()
}

/// Where log lines go.
#[derive(Debug)]
pub struct Syslog {
    sock: Option<UnixDatagram>,
    /// Also print every line to stderr (`--verbose`).
    echo: bool,
}

impl Syslog {
    /// Connect to the syslog socket at `path`; without one, lines go to stderr.
    pub fn open(path: &Path, echo: bool) -> Self {
        let sock = UnixDatagram::unbound()
            .and_then(|s| s.connect(path).map(|()| s))
            .ok();
        Syslog { sock, echo }
    }

    /// Log one line; a line syslog refuses goes to stderr.
    pub fn log(&self, line: &LogLine) {
        let sent = match &self.sock {
            Some(s) => s.send(&datagram(line, std::process::id())).is_ok(),
            None => false,
        };
        if self.echo || !sent {
            eprintln!("kayvee-xenstored: {}", line.text);
        }
    }

    /// Whether lines reach a syslog socket.
    pub fn connected(&self) -> bool {
        self.sock.is_some()
    }
}

/// Read one datagram (tests).
pub fn recv(sock: &UnixDatagram) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; 1024];
    let n = sock.recv(&mut buf)?;
    buf.truncate(n);
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(severity: Severity, text: &str) -> LogLine {
        LogLine {
            severity,
            text: text.to_string(),
        }
    }

    #[test]
    fn lines_reach_a_syslog_socket_with_daemon_priorities() {
        let dir = std::env::temp_dir().join(format!("kv-xs-syslog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("log");
        let _ = std::fs::remove_file(&path);
        let server = UnixDatagram::bind(&path).unwrap();
        let log = Syslog::open(&path, false);
        assert!(log.connected());
        let pid = std::process::id();
        for (sev, pri) in [
            (Severity::Err, 27),
            (Severity::Warning, 28),
            (Severity::Info, 30),
        ] {
            log.log(&line(sev, "Domain 3 exceeds soft memory quota"));
            let want =
                format!("<{pri}>kayvee-xenstored[{pid}]: Domain 3 exceeds soft memory quota");
            assert_eq!(recv(&server).unwrap(), want.as_bytes());
        }
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(!Syslog::open(&path, false).connected());
    }
}
