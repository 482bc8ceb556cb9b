//! Sockets: the TCP and Unix listeners (Redis's `bind`, `port`, `unixsocket`,
//! `unixsocketperm`), the options set on accepted TCP connections (TCP_NODELAY, keepalive), and
//! the [`Stream`] a connection reads and writes.

use kayvee_engine::client::Transport;
use mio::event::Source;
use mio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use mio::{Interest, Registry, Token};
use socket2::{Domain, SockRef, Socket, TcpKeepalive, Type};
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

/// The backlog Redis uses by default (`tcp-backlog 511`).
const BACKLOG: i32 = 511;

/// A socket that could not be set up; Display is the log line.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// Could not create server TCP listening socket ADDR:PORT: ERROR
    #[error("Could not create server TCP listening socket {addr}:{port}: {source}")]
    Tcp {
        /// The `bind` address.
        addr: String,
        /// The port.
        port: u16,
        /// The OS error.
        source: io::Error,
    },
    /// Failed opening Unix socket: ERROR
    #[error("Failed opening Unix socket {path}: {source}")]
    Unix {
        /// The socket path.
        path: String,
        /// The OS error.
        source: io::Error,
    },
}

/// A listening socket.
pub enum Listener {
    /// TCP, with the address it is bound to.
    Tcp(TcpListener, SocketAddr),
    /// A Unix socket, with its path.
    Unix(UnixListener, String),
}

impl Listener {
    /// Registers the listener for accept readiness.
    pub fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        match self {
            Listener::Tcp(l, _) => registry.register(l, token, Interest::READABLE),
            Listener::Unix(l, _) => registry.register(l, token, Interest::READABLE),
        }
    }

    /// Accepts one pending connection (`WouldBlock` when none waits), with its transport as
    /// CLIENT LIST shows it.
    pub fn accept(&self) -> io::Result<(Stream, Transport)> {
        match self {
            Listener::Tcp(l, local) => l.accept().map(|(s, peer)| {
                let t = Transport::Tcp {
                    addr: peer.to_string(),
                    laddr: local.to_string(),
                };
                (Stream::Tcp(s), t)
            }),
            Listener::Unix(l, path) => l.accept().map(|(s, _)| {
                let t = Transport::Unix { path: path.clone() };
                (Stream::Unix(s), t)
            }),
        }
    }

    /// The file descriptor.
    pub fn fd(&self) -> RawFd {
        match self {
            Listener::Tcp(l, _) => l.as_raw_fd(),
            Listener::Unix(l, _) => l.as_raw_fd(),
        }
    }

    /// Stops accept readiness (before the listener is dropped or registered anew).
    pub fn deregister(&mut self, registry: &Registry) {
        let _ = match self {
            Listener::Tcp(l, _) => registry.deregister(l),
            Listener::Unix(l, _) => registry.deregister(l),
        };
    }

    /// Where it listens, for the log.
    pub fn describe(&self) -> String {
        match self {
            Listener::Tcp(_, a) => format!("tcp {a}"),
            Listener::Unix(_, p) => format!("unix {p}"),
        }
    }
}

/// A `bind` entry: the address, and whether a failure to bind it is tolerated (`-` prefix).
pub fn parse_bind(entry: &str) -> Option<(IpAddr, bool)> {
    let (entry, optional) = match entry.strip_prefix('-') {
        Some(rest) => (rest, true),
        None => (entry, false),
    };
    let ip = match entry {
        "*" => IpAddr::from([0, 0, 0, 0]),
        "::*" => IpAddr::from([0u16; 8]),
        other => other.parse().ok()?,
    };
    Some((ip, optional))
}

/// Binds and listens on `entry:port` (non-blocking, SO_REUSEADDR, IPv6-only for IPv6 so
/// `0.0.0.0` and `::` can both be bound). `Ok(None)`: an optional address that failed.
pub fn bind_tcp(entry: &str, port: u16) -> Result<Option<Listener>, ListenError> {
    let err = |source| ListenError::Tcp {
        addr: entry.trim_start_matches('-').into(),
        port,
        source,
    };
    let Some((ip, optional)) = parse_bind(entry) else {
        return Err(err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "invalid address",
        )));
    };
    match listen_tcp(SocketAddr::new(ip, port)) {
        Ok(l) => Ok(Some(l)),
        Err(_) if optional => Ok(None),
        Err(e) => Err(err(e)),
    }
}

/// The socket calls behind [`bind_tcp`].
fn listen_tcp(addr: SocketAddr) -> io::Result<Listener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    socket.set_nonblocking(true)?;
    let std_listener: std::net::TcpListener = socket.into();
    let local = std_listener.local_addr()?;
    Ok(Listener::Tcp(TcpListener::from_std(std_listener), local))
}

/// Binds the Unix socket at `path` (replacing a stale file) with permissions `perm` (0 = leave
/// the umask's).
pub fn bind_unix(path: &str, perm: u32) -> Result<Listener, ListenError> {
    let err = |source| ListenError::Unix {
        path: path.into(),
        source,
    };
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path).map_err(err)?;
    if perm != 0 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(perm)).map_err(err)?;
    }
    Ok(Listener::Unix(listener, path.into()))
}

/// A non-blocking TCP connection to `addr` (under way when this returns), from `source`
/// (`bind-source-addr`: a local IP address, any port) when it is not empty.
pub fn connect_from(addr: SocketAddr, source: &str) -> io::Result<TcpStream> {
    if source.is_empty() {
        return TcpStream::connect(addr);
    }
    let ip: IpAddr = source.parse().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bind-source-addr {source:?} is not an IP address"),
        )
    })?;
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_nonblocking(true)?;
    socket.bind(&SocketAddr::new(ip, 0).into())?;
    match socket.connect(&addr.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(e),
    }
    Ok(TcpStream::from_std(socket.into()))
}

/// Sets TCP_NODELAY and, when `keepalive_s > 0`, SO_KEEPALIVE with Redis's timing (idle time
/// `keepalive_s`, probes every third of it, three probes).
pub fn configure_tcp(stream: &TcpStream, keepalive_s: u64) -> io::Result<()> {
    stream.set_nodelay(true)?;
    if keepalive_s > 0 {
        let idle = Duration::from_secs(keepalive_s);
        let interval = Duration::from_secs((keepalive_s / 3).max(1));
        let ka = TcpKeepalive::new()
            .with_time(idle)
            .with_interval(interval)
            .with_retries(3);
        SockRef::from(stream).set_tcp_keepalive(&ka)?;
    }
    Ok(())
}

/// A connected client socket.
pub enum Stream {
    /// TCP.
    Tcp(TcpStream),
    /// Unix domain.
    Unix(UnixStream),
}

impl Stream {
    /// The file descriptor (`CLIENT LIST fd=`).
    pub fn fd(&self) -> RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
        }
    }
}

impl Stream {
    /// Acknowledges at once what TCP has received (TCP_QUICKACK; a Unix socket has no ACKs).
    pub fn quickack(&self) {
        if let Stream::Tcp(s) = self {
            let _ = SockRef::from(s).set_tcp_quickack(true);
        }
    }

    /// A read through a shared reference (a long script's hook reads the other sockets while
    /// the socket table is borrowed).
    pub fn read_shared(&self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => (&*s).read(buf),
            Stream::Unix(s) => (&*s).read(buf),
        }
    }

    /// A write through a shared reference (see [`Stream::read_shared`]).
    pub fn write_shared(&self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => (&*s).write(buf),
            Stream::Unix(s) => (&*s).write(buf),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Source for Stream {
    fn register(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.register(r, t, i),
            Stream::Unix(s) => s.register(r, t, i),
        }
    }
    fn reregister(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.reregister(r, t, i),
            Stream::Unix(s) => s.reregister(r, t, i),
        }
    }
    fn deregister(&mut self, r: &Registry) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.deregister(r),
            Stream::Unix(s) => s.deregister(r),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_entries_like_redis() {
        assert_eq!(
            parse_bind("127.0.0.1"),
            Some(([127, 0, 0, 1].into(), false))
        );
        assert_eq!(parse_bind("*"), Some(([0, 0, 0, 0].into(), false)));
        assert_eq!(parse_bind("-::*"), Some(([0u16; 8].into(), true)));
        assert_eq!(parse_bind("-::1"), Some(("::1".parse().unwrap(), true)));
        assert_eq!(parse_bind("nonsense"), None);
    }

    #[test]
    fn binds_an_ephemeral_port_and_refuses_a_taken_one() {
        let Some(Listener::Tcp(_l, addr)) = bind_tcp("127.0.0.1", 0).unwrap() else {
            panic!("expected a TCP listener");
        };
        assert_ne!(addr.port(), 0);
        assert!(bind_tcp("127.0.0.1", addr.port()).is_err());
        assert!(bind_tcp("-127.0.0.1", addr.port()).unwrap().is_none());
    }

    #[test]
    fn unix_socket_gets_its_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let path = std::env::temp_dir().join(format!("kv-net-{}.sock", std::process::id()));
        let p = path.to_str().unwrap();
        let _l = bind_unix(p, 0o700).unwrap();
        let mode = std::fs::metadata(p).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        std::fs::remove_file(p).unwrap();
    }
}
