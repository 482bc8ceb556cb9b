//! The mio event loop: accept Unix-socket clients (all privileged dom0), move bytes between
//! sockets and [`Session`]s, write the trace file. With a [`XenHost`], guests' shared rings
//! are connections too (`guests`).

mod guests;

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mio::net::{UnixListener, UnixStream};
use mio::{Events, Interest, Poll, Token};

use kayvee_xenstore::perms::{parse_lenient, parse_lenient_u64};
use kayvee_xenstore::Now;
use kayvee_xenstore::{ConnId, Op, Xenstored};

use crate::batch::Batch;
use crate::options::Options;
use crate::session::{Session, Sessions};
use crate::syslog::{Syslog, DEV_LOG};
use crate::xen::host::XenHost;

/// Bytes read from a socket per system call.
const READ_BUF: usize = 16384;

/// Request bytes a peeked socket may hold, answered, before the daemon takes them off it
/// outside a batch (a batch takes them right after the replies; this bound serves a socket
/// that peeks after its batch failed). Taking bytes off a Unix socket frees the sender's
/// buffer space, which wakes the client if it sleeps in `read`, for nothing: it waits for
/// its reply, not for space. Taken at this many bytes, one such wakeup covers several
/// transactions. (Each peek walks the socket's queue past the bytes held, so this stays
/// small.)
const TAKE_AT: usize = 512;

/// How long answered bytes may stay on a socket at most (a client whose send buffer they fill
/// waits at most this long before the daemon takes them, even if it never reaches
/// [`TAKE_AT`]).
const TAKE_EVERY: Duration = Duration::from_millis(50);

/// Sends one [`Batch`] takes (a loop pass with more replies runs several batches).
const BATCH: u32 = 256;

/// Marks a batched read that takes answered bytes off a socket (its tag is the connection
/// id with this bit set; a send's is the id).
const TAKE: u64 = 1 << 63;

/// Bytes a batched read takes from one socket (a socket that fills it is read on with plain
/// reads).
const SLICE: usize = 4096;

/// The listening socket's token.
const LISTENER: Token = Token(0);

/// The Xen event-channel device's token (connection ids never reach it; `usize::MAX` is
/// left alone, older mio reserved it).
const EVTCHN: Token = Token(usize::MAX - 1);

/// The current time for the store.
fn now() -> Now {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    Now::from_ms(d.as_millis() as u64)
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

/// Give `stream` a peek offset (`SO_PEEK_OFF` 0): successive `MSG_PEEK` reads then return
/// successive bytes; false when the kernel refuses.
fn peek_offset(stream: &UnixStream) -> bool {
    let zero: libc::c_int = 0;
    // SAFETY: sets an int option from a live int of the size given.
    let r = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEEK_OFF,
            (&zero as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    r == 0
}

/// The daemon: store, sockets and sessions.
pub struct Server {
    xs: Xenstored,
    poll: Poll,
    listener: UnixListener,
    /// Sockets by connection id (= mio token = slot; see [`Sessions`]).
    streams: Vec<Option<UnixStream>>,
    sessions: Sessions,
    /// Connections currently registered for writability (output is backed up), by id.
    waiting: Vec<bool>,
    /// Per socket, by id: bytes read with `MSG_PEEK` (at the socket's peek offset) that are
    /// still on it; `None` when the socket takes no peek offset (then reads take the bytes).
    unread: Vec<Option<usize>>,
    /// Some socket holds answered bytes (see [`TAKE_AT`]).
    any_unread: bool,
    /// When [`Server::take_all`] last ran.
    last_take: Instant,
    /// Scratch list of connections to flush in this loop pass.
    to_flush: Vec<ConnId>,
    /// The replies of a loop pass sent in one system call, when the kernel has io_uring
    /// (else each socket is written on its own, right after its read).
    batch: Option<Batch>,
    /// Scratch: the sockets and lengths of the sends queued in `batch`.
    batched: Vec<(ConnId, usize)>,
    /// By id: a send of the connection is queued in `batch`.
    in_batch: Vec<bool>,
    /// The sockets whose reads are queued in `batch`, in the order of their slices.
    recvs: Vec<ConnId>,
    /// Where the batched reads land: [`SLICE`] bytes per socket, `BATCH` slices (allocated
    /// once, so queued reads never see it move).
    arena: Box<[u8]>,
    /// Scratch: a batch's completions.
    results: Vec<(u64, i32)>,
    /// Takes queued in `batch` (each reads into its own arena slice).
    takes: usize,
    /// The receive buffer, reused for every read.
    rbuf: Vec<u8>,
    trace: Option<File>,
    verbose: bool,
    /// Where the store's log lines (memory-quota reports) go.
    syslog: Syslog,
    /// Guests on shared rings, when the daemon runs on Xen (or a stand-in).
    xen: Option<guests::Guests>,
}

impl Server {
    /// Bind the socket and build the store from the options.
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
            streams: Vec::new(),
            sessions: Sessions::new(),
            waiting: Vec::new(),
            unread: Vec::new(),
            any_unread: false,
            last_take: Instant::now(),
            to_flush: Vec::new(),
            batch: Batch::new(BATCH).ok(),
            batched: Vec::new(),
            in_batch: Vec::new(),
            recvs: Vec::new(),
            arena: Box::default(),
            results: Vec::new(),
            takes: 0,
            rbuf: Vec::new(),
            trace,
            verbose: opts.verbose,
            syslog: Syslog::open(Path::new(DEV_LOG), opts.verbose),
            xen: None,
        })
    }

    /// Bind the socket and also serve guests through `host`: bind `VIRQ_DOM_EXC`, poll the
    /// event-channel device, and serve dom0's own ring if the host has one.
    pub fn with_xen(opts: &Options, host: Box<dyn XenHost>) -> io::Result<Self> {
        let mut server = Server::new(opts)?;
        let fd = host.fd();
        server.poll.registry().register(
            &mut mio::unix::SourceFd(&fd),
            EVTCHN,
            Interest::READABLE,
        )?;
        server.xs.config.features = crate::xen::ring::SERVER_FEATURES_OFFERED;
        let mut host = host;
        let dom0 = host.dom0_ring()?;
        server.xen = Some(guests::Guests::new(host)?);
        if let Some((page, port)) = dom0 {
            server.open_ring(0, page, port);
        }
        Ok(server)
    }

    /// Serve forever.
    pub fn run(&mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(256);
        let mut busy = false;
        loop {
            // Rings left with work are served again after one non-blocking look at the rest;
            // bytes left on sockets are taken within TAKE_EVERY.
            let timeout = match (busy, self.any_unread) {
                (true, _) => Some(Duration::ZERO),
                (false, true) => Some(TAKE_EVERY),
                (false, false) => None,
            };
            self.send_notifications();
            match self.poll.poll(&mut events, timeout) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => r?,
            }
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => self.accept()?,
                    EVTCHN => self.xen_events(),
                    Token(t) => {
                        let id = t as ConnId;
                        if ev.is_writable() {
                            self.sessions.mark_dirty(id);
                        }
                        if ev.is_readable() && self.queue_recv(id) {
                            continue;
                        }
                        self.service(id, ev.is_readable());
                        self.flush_now(id);
                    }
                }
            }
            self.run_recvs();
            busy = self.rings_again();
            self.flush_all();
            // The replies went out: now free what the commits let go of.
            self.xs.sweep();
            if self.any_unread && self.last_take.elapsed() >= TAKE_EVERY {
                self.take_all();
            }
        }
    }

    /// Accept every pending client.
    fn accept(&mut self) -> io::Result<()> {
        loop {
            match self.listener.accept() {
                Ok((mut stream, _)) => {
                    // The lowest free slot: ids are reused once a connection is gone (its
                    // store state went with it).
                    let id = self.sessions.free_id();
                    let token = Token(id as usize);
                    self.poll
                        .registry()
                        .register(&mut stream, token, Interest::READABLE)?;
                    let slot = id as usize;
                    if self.streams.len() <= slot {
                        self.streams.resize_with(slot + 1, || None);
                        self.waiting.resize(slot + 1, false);
                        self.unread.resize(slot + 1, None);
                        self.in_batch.resize(slot + 1, false);
                    }
                    // Peeked only with a batch: without one, plain reads measured no worse
                    // (the take is then a system call of its own every TAKE_AT bytes).
                    let peek = self.batch.is_some() && peek_offset(&stream);
                    self.unread[slot] = peek.then_some(0);
                    self.streams[slot] = Some(stream);
                    self.waiting[slot] = false;
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
        // One receive buffer for the daemon's life (a fresh zeroed 16 KiB array per event
        // cost a memset per request).
        let mut buf = std::mem::take(&mut self.rbuf);
        buf.resize(READ_BUF, 0);
        let outcome = self.read_all(id, &mut buf);
        self.rbuf = buf;
        if let Err(why) = outcome {
            self.close(id, why);
        }
    }

    /// Queue a peek at `id`'s socket in the batch, to be read with the other ready sockets in
    /// one system call (`run_recvs`); false when it must be read on its own (no batch, or a
    /// socket without a peek offset).
    fn queue_recv(&mut self, id: ConnId) -> bool {
        let slot = id as usize;
        if self.batch.is_none() || !matches!(self.unread.get(slot), Some(Some(_))) {
            return false;
        }
        if self.batch.as_ref().is_some_and(Batch::is_full) {
            self.run_recvs();
        }
        let Some(batch) = self.batch.as_mut() else {
            return false;
        };
        let Some(Some(stream)) = self.streams.get(slot) else {
            return false;
        };
        if self.arena.is_empty() {
            self.arena = vec![0; BATCH as usize * SLICE].into_boxed_slice();
        }
        let i = self.recvs.len();
        // SAFETY: slice `i` of the arena (fewer than BATCH reads are queued, as the batch
        // holds BATCH operations), which nothing else uses until `run_recvs` has run.
        unsafe {
            let buf = self.arena.as_mut_ptr().add(i * SLICE);
            batch.recv(stream.as_raw_fd(), buf, SLICE, libc::MSG_PEEK, i as u64);
        }
        self.recvs.push(id);
        true
    }

    /// Run the queued reads and the requests they brought, in the order they completed.
    fn run_recvs(&mut self) {
        let Some(batch) = self.batch.as_mut().filter(|b| !b.is_empty()) else {
            return;
        };
        let mut results = std::mem::take(&mut self.results);
        results.clear();
        match batch.run() {
            Ok(done) => results.extend(done.iter().map(|d| (d.tag, d.res))),
            Err(e) => {
                self.log(format_args!("io_uring: {e}; reading without it"));
                self.batch = None;
            }
        }
        let recvs = std::mem::take(&mut self.recvs);
        let arena = std::mem::take(&mut self.arena);
        if self.batch.is_none() {
            for &id in &recvs {
                self.service(id, true);
            }
        }
        for &(tag, res) in &results {
            let id = recvs[tag as usize];
            let slot = id as usize;
            if !matches!(self.streams.get(slot), Some(Some(_))) {
                continue;
            }
            let n = match res {
                0 => {
                    self.close(id, "closed by peer");
                    continue;
                }
                n if n > 0 => n as usize,
                n if n == -libc::EAGAIN => continue,
                n if n == -libc::EINTR => {
                    self.service(id, true);
                    continue;
                }
                _ => {
                    self.close(id, "read error");
                    continue;
                }
            };
            if let Some(Some(u)) = self.unread.get_mut(slot) {
                *u += n;
                self.any_unread = true;
            }
            let start = tag as usize * SLICE;
            if !self.feed(id, &arena[start..start + n]) {
                self.close(id, "payload over 4096 bytes");
            } else if n == SLICE {
                // Maybe more: read on until the socket is drained.
                self.service(id, true);
            }
        }
        self.arena = arena;
        self.recvs = recvs;
        self.recvs.clear();
        self.results = results;
    }

    /// Read and run until the socket is drained; `Err` says why the connection must close.
    ///
    /// A socket with a peek offset is read with `MSG_PEEK`: the bytes stay on it until
    /// [`Server::take`] (see [`TAKE_AT`]); otherwise reads take them.
    fn read_all(&mut self, id: ConnId, buf: &mut [u8]) -> Result<(), &'static str> {
        let slot = id as usize;
        loop {
            let Some(Some(stream)) = self.streams.get(slot) else {
                return Ok(());
            };
            let unread = self.unread[slot];
            let flags = if unread.is_some() { libc::MSG_PEEK } else { 0 };
            // SAFETY: receives at most `buf.len()` bytes into a live buffer.
            let n = unsafe {
                libc::recv(
                    stream.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    flags | libc::MSG_DONTWAIT,
                )
            };
            match n {
                0 => return Err("closed by peer"),
                n if n > 0 => {
                    let n = n as usize;
                    if let Some(u) = unread {
                        self.unread[slot] = Some(u + n);
                        self.any_unread = true;
                    }
                    if !self.feed(id, &buf[..n]) {
                        return Err("payload over 4096 bytes");
                    }
                    // A short read drained the socket: bytes arriving later raise a new
                    // readiness edge, so the read that would answer EAGAIN is skipped (one
                    // system call less per request).
                    if n < buf.len() {
                        return Ok(());
                    }
                }
                _ => match io::Error::last_os_error().kind() {
                    io::ErrorKind::WouldBlock => return Ok(()),
                    io::ErrorKind::Interrupted => continue,
                    _ => return Err("read error"),
                },
            }
        }
    }

    /// Take the bytes read from `id`'s socket off it once they reach [`TAKE_AT`] (or always,
    /// with `all`); false on error.
    fn take(&mut self, id: ConnId, all: bool) -> bool {
        let slot = id as usize;
        let Some(Some(mut left)) = self.unread.get(slot).copied() else {
            return true;
        };
        if left == 0 || (!all && left < TAKE_AT) {
            return true;
        }
        let Some(Some(stream)) = self.streams.get(slot) else {
            return true;
        };
        let fd = stream.as_raw_fd();
        let mut buf = std::mem::take(&mut self.rbuf);
        buf.resize(READ_BUF, 0);
        let mut ok = true;
        while left > 0 {
            let want = left.min(buf.len());
            // SAFETY: receives at most `want <= buf.len()` bytes into a live buffer.
            let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), want, libc::MSG_DONTWAIT) };
            if n > 0 {
                left -= n as usize;
            } else if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            } else {
                // The bytes were peeked, so they are there: anything else is a broken socket.
                ok = false;
                break;
            }
        }
        self.rbuf = buf;
        self.unread[slot] = Some(left);
        ok
    }

    /// Take the answered bytes off every socket (see [`TAKE_EVERY`]).
    fn take_all(&mut self) {
        self.last_take = Instant::now();
        self.any_unread = false;
        for slot in 0..self.unread.len() {
            if self.unread[slot].is_some_and(|n| n > 0) && !self.take(slot as ConnId, true) {
                self.close(slot as ConnId, "read error");
            }
        }
    }

    /// Run received bytes through the session; false when the connection must close.
    fn feed(&mut self, id: ConnId, bytes: &[u8]) -> bool {
        let mut trace = self.trace.as_ref().map(|_| Vec::new());
        let xen = &mut self.xen;
        let mut admit = |conn, op: &Op, xs: &Xenstored| match (op, xen.as_mut()) {
            (Op::Introduce(d, gfn, port), Some(g)) if xs.domain_of(conn) == Some(0) => g.prepare(
                parse_lenient(d),
                parse_lenient_u64(gfn),
                parse_lenient(port),
            ),
            // A domain named to GET_FEATURE / SET_FEATURE before its INTRODUCE must exist.
            (Op::GetFeature(args), Some(g)) | (Op::SetFeature(args), Some(g))
                if xs.domain_of(conn) == Some(0)
                    && args.len() == 1 + usize::from(matches!(op, Op::SetFeature(_))) =>
            {
                let d = parse_lenient(&args[0]);
                if xs.domains.exists(d) || xs.domains.preset_features.contains_key(&d) {
                    Ok(())
                } else {
                    g.check_exists(d)
                }
            }
            _ => Ok(()),
        };
        let r = Session::received(
            id,
            bytes,
            &mut self.xs,
            &mut self.sessions,
            now(),
            &mut trace,
            &mut admit,
        );
        if let (Some(f), Some(lines)) = (self.trace.as_mut(), trace) {
            for l in lines {
                let _ = writeln!(f, "{l}");
            }
        }
        if let Some(name) = self.xs.take_logfile() {
            self.reopen_trace(&name);
        }
        for line in self.xs.take_log() {
            self.syslog.log(&line);
        }
        self.domain_changes();
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

    /// Send `id`'s replies right after its read: the read woke the client if it was already
    /// waiting for its reply (a Unix socket announces the freed send space), and a reply sent
    /// at once finds it still runnable instead of asleep again. (Flushing at the end of the
    /// loop pass, after every other connection's requests, made that wakeup a real one.)
    ///
    /// With a [`Batch`], sockets are instead flushed together at the end of the loop pass
    /// (`flush_all`): then the clients are woken in one system call, and the daemon is switched
    /// out for them once per pass rather than once per reply.
    fn flush_now(&mut self, id: ConnId) {
        if self.is_ring(id) {
            return self.flush_ring(id);
        }
        if self.batch.is_some() {
            return;
        }
        let pending = self.sessions.get(&id).is_some_and(|s| !s.out.is_empty());
        if pending && !self.flush(id) {
            self.close(id, "write error");
            return;
        }
        // After the replies: the client they woke is not asleep on the socket now.
        if !self.take(id, false) {
            self.close(id, "read error");
        }
    }

    /// Write the pending output of the sessions that got some in this loop pass (or whose
    /// socket became writable); wait for writability where the socket is full.
    fn flush_all(&mut self) {
        let mut ids = std::mem::take(&mut self.to_flush);
        self.sessions.take_dirty(&mut ids);
        for &id in &ids {
            if self.is_ring(id) {
                // A ring's pump wrote what it could when the output was made: only output
                // left over (a full response queue) needs another pump here.
                if self.sessions.get(&id).is_some_and(|s| !s.out.is_empty()) {
                    self.flush_ring(id);
                }
            } else if self.batch.is_some() {
                self.queue_send(id);
            } else if !self.flush(id) {
                self.close(id, "write error");
            }
        }
        self.run_batch();
        self.to_flush = ids;
    }

    /// Queue `id`'s pending output in the batch (running the batch first when it is full).
    ///
    /// The bytes its requests came in are taken off the socket in the same batch, after the
    /// send: the client the reply wakes is then off the socket's wait queue, so freeing its
    /// send space wakes nobody (taken before the reply, it woke the client for nothing).
    fn queue_send(&mut self, id: ConnId) {
        if self
            .batch
            .as_ref()
            .is_some_and(|b| b.len() + 2 > BATCH as usize)
        {
            self.run_batch();
        }
        let Some(batch) = self.batch.as_mut() else {
            if !self.flush(id) {
                self.close(id, "write error");
            }
            return;
        };
        let Some(Some(stream)) = self.streams.get(id as usize) else {
            return;
        };
        let Some(s) = self.sessions.get(&id).filter(|s| !s.out.is_empty()) else {
            return;
        };
        // A connection may be listed twice (new output and writability): one send per
        // connection and batch, or the same bytes would go out twice.
        if std::mem::replace(&mut self.in_batch[id as usize], true) {
            return;
        }
        // SAFETY: the output is neither changed nor dropped until `run_batch` has run the
        // batch (nothing between here and there touches a session).
        unsafe { batch.send(stream.as_raw_fd(), s.out.as_ptr(), s.out.len(), id) };
        let unread = match self.unread.get(id as usize) {
            Some(Some(n)) => *n,
            _ => 0,
        };
        if unread > 0 {
            if self.arena.is_empty() {
                self.arena = vec![0; BATCH as usize * SLICE].into_boxed_slice();
            }
            let k = self.takes;
            self.takes += 1;
            // SAFETY: slice `k` of the arena (fewer than BATCH operations are queued), which
            // nothing else uses until `run_batch` has run (the reads of this pass ran before).
            unsafe {
                let buf = self.arena.as_mut_ptr().add(k * SLICE);
                let len = unread.min(SLICE);
                batch.recv(stream.as_raw_fd(), buf, len, 0, TAKE | id);
            }
        }
        self.batched.push((id, s.out.len()));
    }

    /// Send everything queued in the batch, then account for what went out as `flush` does.
    fn run_batch(&mut self) {
        let Some(batch) = self.batch.as_mut().filter(|b| !b.is_empty()) else {
            return;
        };
        let mut results = std::mem::take(&mut self.results);
        results.clear();
        self.takes = 0;
        match batch.run() {
            Ok(done) => results.extend(done.iter().map(|d| (d.tag, d.res))),
            Err(e) => {
                // The ring is unusable: from now on each socket is written on its own, and
                // the sends queued now are made that way.
                self.log(format_args!("io_uring: {e}; sending without it"));
                self.batch = None;
            }
        }
        let batched = std::mem::take(&mut self.batched);
        for &(id, _) in &batched {
            self.in_batch[id as usize] = false;
        }
        if self.batch.is_none() {
            for &(id, _) in &batched {
                if !self.flush(id) {
                    self.close(id, "write error");
                }
            }
        } else {
            for &(tag, res) in &results {
                if tag & TAKE != 0 {
                    let id = tag & !TAKE;
                    match res {
                        n if n > 0 => {
                            if let Some(Some(u)) = self.unread.get_mut(id as usize) {
                                *u -= n as usize;
                            }
                        }
                        n if n == -libc::EAGAIN || n == -libc::EINTR => {}
                        _ => self.close(id, "read error"),
                    }
                    continue;
                }
                let id = tag;
                let sent = match res {
                    n if n >= 0 => n as usize,
                    n if n == -libc::EAGAIN || n == -libc::EINTR => 0,
                    _ => {
                        self.close(id, "write error");
                        continue;
                    }
                };
                if !self.flushed(id, sent) {
                    self.close(id, "write error");
                }
            }
        }
        self.results = results;
        self.batched = batched;
        self.batched.clear();
    }

    /// The socket and session of `id`.
    fn conn_mut(&mut self, id: ConnId) -> Option<(&mut Session, &mut UnixStream)> {
        let stream = self.streams.get_mut(id as usize)?.as_mut()?;
        Some((self.sessions.get_mut(&id)?, stream))
    }

    /// Write as much of a session's output as the socket takes; false on error.
    fn flush(&mut self, id: ConnId) -> bool {
        let Some((s, stream)) = self.conn_mut(id) else {
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
        self.flushed(id, done)
    }

    /// `done` bytes of `id`'s output went out: drop them, run requests held for them, and
    /// wait for writability while output is left; false on error.
    fn flushed(&mut self, id: ConnId, done: usize) -> bool {
        let Some((s, _)) = self.conn_mut(id) else {
            return true;
        };
        s.sent(done);
        if s.held && done > 0 && !self.feed(id, &[]) {
            return false;
        }
        let Some((s, _)) = self.conn_mut(id) else {
            return true;
        };
        // Re-register only when the interest changes: one epoll_ctl per backlog, not per reply.
        let backed_up = !s.out.is_empty();
        let slot = id as usize;
        if backed_up == self.waiting[slot] {
            return true;
        }
        let interest = match backed_up {
            true => Interest::READABLE | Interest::WRITABLE,
            false => Interest::READABLE,
        };
        self.waiting[slot] = backed_up;
        let Some(Some(stream)) = self.streams.get_mut(slot) else {
            return true;
        };
        self.poll
            .registry()
            .reregister(stream, Token(slot), interest)
            .is_ok()
    }

    /// Drop a connection and everything it held.
    fn close(&mut self, id: ConnId, why: &str) {
        // Bytes left on a Unix socket at close reset the peer's connection (ECONNRESET
        // instead of end-of-file): take what is there first (the reads that found the
        // reason to close took at least as much before peeking).
        if matches!(self.unread.get(id as usize), Some(Some(_))) {
            if let Some(Some(stream)) = self.streams.get(id as usize) {
                let mut buf = std::mem::take(&mut self.rbuf);
                buf.resize(READ_BUF, 0);
                // SAFETY: receives at most `buf.len()` bytes into a live buffer.
                while unsafe {
                    libc::recv(
                        stream.as_raw_fd(),
                        buf.as_mut_ptr().cast(),
                        buf.len(),
                        libc::MSG_DONTWAIT,
                    )
                } > 0
                {}
                self.rbuf = buf;
            }
        }
        if let Some(mut s) = self.streams.get_mut(id as usize).and_then(Option::take) {
            let _ = self.poll.registry().deregister(&mut s);
        }
        self.sessions.remove(id);
        if let Some(w) = self.waiting.get_mut(id as usize) {
            *w = false;
        }
        if let Some(u) = self.unread.get_mut(id as usize) {
            *u = None;
        }
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
