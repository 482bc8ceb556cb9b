//! The mio event loop: accept Unix-socket clients (all privileged dom0), move bytes between
//! sockets and [`Session`]s, write the trace file.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use mio::net::{UnixListener, UnixStream};
use mio::{Events, Interest, Poll, Token};

use kayvee_engine::xenstore::{ConnId, Xenstored};
use kayvee_engine::Now;

use crate::options::Options;
use crate::session::Session;

/// The listening socket's token.
const LISTENER: Token = Token(0);

/// The current time for the engine.
fn now() -> Now {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    Now {
        unix_us: d.as_micros() as u64,
    }
}

/// Bind the socket as cxenstored does: create the directory, unlink, bind, chmod 0600.
pub fn bind(path: &Path) -> io::Result<UnixListener> {
    if let Some(dir) = path.parent() {
        if !dir.as_os_str().is_empty() && !dir.exists() {
            fs::create_dir_all(dir)?;
            fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
        }
    }
    let _ = fs::remove_file(path);
    let listener = UnixListener::bind(path)?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// The daemon: engine, sockets and sessions.
pub struct Server {
    xs: Xenstored,
    poll: Poll,
    listener: UnixListener,
    streams: HashMap<ConnId, UnixStream>,
    sessions: HashMap<ConnId, Session>,
    /// Connections currently registered for writability (output is backed up).
    waiting: std::collections::HashSet<ConnId>,
    next_id: ConnId,
    trace: Option<File>,
    verbose: bool,
}

impl Server {
    /// Bind the socket and build the engine from the options.
    pub fn new(opts: &Options) -> io::Result<Self> {
        let mut listener = bind(&opts.socket)?;
        let poll = Poll::new()?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let trace = match &opts.trace_file {
            Some(p) => Some(OpenOptions::new().create(true).append(true).open(p)?),
            None => None,
        };
        Ok(Server {
            xs: Xenstored::new(opts.config.clone()),
            poll,
            listener,
            streams: HashMap::new(),
            sessions: HashMap::new(),
            waiting: std::collections::HashSet::new(),
            next_id: 1,
            trace,
            verbose: opts.verbose,
        })
    }

    /// Serve forever.
    pub fn run(&mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(256);
        loop {
            match self.poll.poll(&mut events, None) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => r?,
            }
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => self.accept()?,
                    Token(t) => self.service(t as ConnId, ev.is_readable()),
                }
            }
            self.flush_all();
        }
    }

    /// Accept every pending client.
    fn accept(&mut self) -> io::Result<()> {
        loop {
            match self.listener.accept() {
                Ok((mut stream, _)) => {
                    let id = self.next_id;
                    self.next_id += 1;
                    let token = Token(id as usize);
                    self.poll
                        .registry()
                        .register(&mut stream, token, Interest::READABLE)?;
                    self.streams.insert(id, stream);
                    self.sessions.insert(id, Session::new());
                    self.xs.connect(id, 0);
                    self.log(format_args!("connection {id} opened"));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    }

    /// Read what a client sent and run it; close on EOF, error or a framing violation.
    fn service(&mut self, id: ConnId, readable: bool) {
        if !readable {
            return;
        }
        let mut buf = [0u8; 16384];
        loop {
            let Some(stream) = self.streams.get_mut(&id) else {
                return;
            };
            match stream.read(&mut buf) {
                Ok(0) => return self.close(id, "closed by peer"),
                Ok(n) => {
                    if !self.feed(id, &buf[..n]) {
                        return self.close(id, "payload over 4096 bytes");
                    }
                    // A short read drained the socket: bytes arriving later raise a new
                    // readiness edge, so the read that would answer EAGAIN is skipped (one
                    // system call less per request).
                    if n < buf.len() {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return self.close(id, "read error"),
            }
        }
    }

    /// Run received bytes through the session; false when the connection must close.
    fn feed(&mut self, id: ConnId, bytes: &[u8]) -> bool {
        let mut trace = self.trace.as_ref().map(|_| Vec::new());
        let r = Session::received(
            id,
            bytes,
            &mut self.xs,
            &mut self.sessions,
            now(),
            &mut trace,
        );
        if let (Some(f), Some(lines)) = (self.trace.as_mut(), trace) {
            for l in lines {
                let _ = writeln!(f, "{l}");
            }
        }
        if let Some(name) = self.xs.take_logfile() {
            self.reopen_trace(&name);
        }
        r.is_ok()
    }

    /// `CONTROL logfile <file>`: trace to `file` from now on (appending, mode 0600, as
    /// cxenstored); when it cannot be opened, tracing stops and a line goes to stderr.
    fn reopen_trace(&mut self, name: &[u8]) {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::fs::OpenOptionsExt;
        let path = std::path::Path::new(std::ffi::OsStr::from_bytes(name));
        self.trace = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| eprintln!("kayvee-xenstored: could not open tracefile: {e}"))
            .ok();
    }

    /// Write pending output of every session; wait for writability where the socket is full.
    fn flush_all(&mut self) {
        let ids: Vec<ConnId> = self
            .sessions
            .iter()
            .filter(|(_, s)| !s.out.is_empty())
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            if !self.flush(id) {
                self.close(id, "write error");
            }
        }
    }

    /// Write as much of a session's output as the socket takes; false on error.
    fn flush(&mut self, id: ConnId) -> bool {
        let (Some(s), Some(stream)) = (self.sessions.get_mut(&id), self.streams.get_mut(&id))
        else {
            return true;
        };
        let mut done = 0;
        while done < s.out.len() {
            match stream.write(&s.out[done..]) {
                Ok(0) => return false,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return false,
            }
        }
        s.sent(done);
        if s.held && done > 0 && !self.feed(id, &[]) {
            return false;
        }
        let (Some(s), Some(stream)) = (self.sessions.get_mut(&id), self.streams.get_mut(&id))
        else {
            return true;
        };
        // Re-register only when the interest changes: one epoll_ctl per backlog, not per reply.
        let backed_up = !s.out.is_empty();
        if backed_up == self.waiting.contains(&id) {
            return true;
        }
        let interest = match backed_up {
            true => Interest::READABLE | Interest::WRITABLE,
            false => Interest::READABLE,
        };
        match backed_up {
            true => self.waiting.insert(id),
            false => self.waiting.remove(&id),
        };
        self.poll
            .registry()
            .reregister(stream, Token(id as usize), interest)
            .is_ok()
    }

    /// Drop a connection and everything it held.
    fn close(&mut self, id: ConnId, why: &str) {
        if let Some(mut s) = self.streams.remove(&id) {
            let _ = self.poll.registry().deregister(&mut s);
        }
        self.sessions.remove(&id);
        self.waiting.remove(&id);
        self.xs.disconnect(id);
        self.log(format_args!("connection {id} {why}"));
    }

    /// A verbose log line.
    fn log(&self, args: std::fmt::Arguments<'_>) {
        if self.verbose {
            eprintln!("kayvee-xenstored: {args}");
        }
    }
}
