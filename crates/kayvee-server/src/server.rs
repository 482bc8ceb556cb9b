//! The event loop: one thread owns the [`Driver`] (and through it the engine) and runs a mio
//! (epoll) loop over the listeners, the client sockets and the signal pipe. Everything between
//! a socket and the engine (buffers, decoding, delivery, limits, deadlines) is the driver's;
//! this loop only moves bytes, accepts and closes sockets, carries out the driver's requests
//! with files, and sleeps.
//!
//! One pass: read every readable connection into the shared buffer and hand the bytes to the
//! driver (its commands run at once); carry out the requests; run what is due (the driver's
//! cron and deadlines, then persistence); write the AOF; then write each connection with output
//! once. Connections are registered once, edge-triggered, for READABLE and WRITABLE: the
//! WRITABLE edge arrives when a full socket buffer drains, which replaces Redis's add/remove
//! of a write handler and saves an `epoll_ctl` per blocked write.
//!
//! Time ([`crate::clock`]): the wall clock (`SystemTime`) is read once per wakeup; each reading
//! after it is that reading plus the monotonic time elapsed since (the CPU's time-stamp counter
//! where the kernel's clocksource is), so a command's time and duration cost one cheap reading
//! and `now` stays exact across long pipelines and `DEBUG SLEEP`.

use crate::clock::{Calibration, Clock};
use crate::durability::Durability;
use crate::net::{self, Listener, Stream};
use kayvee_engine::client::{ConnInfo, Transport};
use kayvee_engine::{Engine, Handle, Now, ShutdownSignal};
use kayvee_session::{Answer, Driver, Flushed, Notice, Request};
use mio::{Events, Interest, Poll, Token};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook_mio::v1_0::Signals;
use std::cell::RefCell;
use std::io::{self, Read, Write};
use std::net::ToSocketAddrs;
use std::time::Duration;
use tracing::{debug, info, warn};

/// Token of the signal pipe.
const SIGNAL_TOKEN: Token = Token(usize::MAX);
/// Tokens of listeners are `LISTENER_BASE + index`; connections use their handle's slot.
const LISTENER_BASE: usize = usize::MAX / 2;

/// How often the loop looks at the startup load's progress while it runs.
const LOADING_POLL_US: u64 = 5_000;

/// Startup failures of the event loop.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// A socket could not be bound.
    #[error(transparent)]
    Listen(#[from] net::ListenError),
    /// The poller or the signal pipe failed.
    #[error("event loop: {0}")]
    Io(#[from] io::Error),
    /// Neither TCP nor a Unix socket is configured.
    #[error("Configured to not listen anywhere, exiting.")]
    NowhereToListen,
}

/// The clock the driver gets, with the sockets a long script's hook serves: while a script runs
/// past `busy-reply-threshold`, the other connections are read and answered (`-BUSY`, SCRIPT
/// KILL...) between the script's instructions (see `kayvee_engine::script_wait`), and new
/// connections are accepted (Redis's `processEventsWhileBlocked` accepts too: a new
/// redis-cli can send SCRIPT KILL). Their sockets wait in `joined` until the call returns.
struct Shell<'a> {
    clock: &'a Clock,
    sockets: &'a [Option<Stream>],
    listeners: &'a [Listener],
    registry: &'a mio::Registry,
    /// `tcp-keepalive`, for the sockets accepted meanwhile.
    keepalive_s: u64,
    /// Connections accepted while a script ran, by handle.
    joined: RefCell<Vec<(Handle, Stream)>>,
}

/// At most this many connections are accepted per serving round of a busy script.
const BUSY_ACCEPTS: usize = 64;

impl Shell<'_> {
    /// Reads what connection `h` sent into the driver's busy rules and writes their replies.
    fn serve_stream(
        &self,
        h: Handle,
        stream: &Stream,
        io: &mut dyn kayvee_session::BusyIo,
        buf: &mut [u8],
    ) {
        loop {
            match stream.read_shared(buf) {
                Ok(0) => {
                    io.closed(h);
                    break;
                }
                Err(_) => break,
                Ok(n) => {
                    io.input(h, &buf[..n]);
                    if n < buf.len() {
                        break;
                    }
                }
            }
        }
        if io.shutdown() {
            warn!("User requested shutdown while a script runs: exiting now, without saving.");
            // As Redis: no new connection is taken from here on (the listeners close
            // first, then the clients see the end).
            for fd in self.listeners.iter().map(Listener::fd) {
                // SAFETY: closing descriptors this process owns, right before it exits.
                unsafe { libc::close(fd) };
            }
            let joined = self.joined.borrow();
            let streams = self
                .sockets
                .iter()
                .flatten()
                .chain(joined.iter().map(|j| &j.1));
            for fd in streams.map(Stream::fd) {
                // SAFETY: as above.
                unsafe { libc::close(fd) };
            }
            std::process::exit(0);
        }
        let out = io.output(h);
        if !out.is_empty() {
            if let Ok(n) = stream.write_shared(out) {
                io.written(h, n);
            }
        }
    }

    /// Accepts what waits on the listeners, handing each connection to the driver.
    fn accept_busy(&self, io: &mut dyn kayvee_session::BusyIo) {
        for listener in self.listeners {
            for _ in 0..BUSY_ACCEPTS {
                let (mut stream, transport) = match listener.accept() {
                    Ok(accepted) => accepted,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                };
                let label = describe_transport(&transport);
                let info = ConnInfo {
                    fd: i64::from(stream.fd()),
                    transport,
                };
                let h = match io.connect(info) {
                    Ok(h) => h,
                    Err(refusal) => {
                        let _ = stream.write(refusal.as_bytes());
                        debug!("Refused a client: {}", refusal.trim_end());
                        continue;
                    }
                };
                configure_accepted(&stream, self.keepalive_s);
                let interest = Interest::READABLE | Interest::WRITABLE;
                if let Err(e) = self.registry.register(&mut stream, Token(h.0), interest) {
                    warn!("Registering a client connection: {e}");
                    io.closed(h);
                    continue;
                }
                debug!("Accepted {label} while a script runs");
                self.joined.borrow_mut().push((h, stream));
            }
        }
    }
}

impl kayvee_session::Clock for Shell<'_> {
    #[inline]
    fn now(&self) -> Now {
        self.clock.now()
    }

    fn sleep_us(&self, us: u64) {
        self.clock.sleep_us(us);
    }

    fn serve_busy(&self, running: Handle, io: &mut dyn kayvee_session::BusyIo) {
        let mut buf = [0u8; 16 * 1024];
        for (slot, stream) in self.sockets.iter().enumerate() {
            if let Some(stream) = stream.as_ref().filter(|_| slot != running.0) {
                self.serve_stream(Handle(slot), stream, io, &mut buf);
            }
        }
        self.accept_busy(io);
        let joined = self.joined.borrow();
        for (h, stream) in joined.iter() {
            self.serve_stream(*h, stream, io, &mut buf);
        }
    }

    fn write_wait(&self, h: Handle, mut data: &[u8]) -> bool {
        let Some(stream) = self.sockets.get(h.0).and_then(Option::as_ref) else {
            return false;
        };
        while !data.is_empty() {
            match stream.write_shared(data) {
                Ok(0) => return false,
                Ok(n) => data = &data[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Redis's debugging session gives a slow reader 5 s a write.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if !wait_fd(stream.fd(), libc::POLLOUT, 5000) {
                        return false;
                    }
                }
                Err(_) => return false,
            }
        }
        true
    }

    fn read_wait(&self, h: Handle, buf: &mut [u8]) -> usize {
        let Some(stream) = self.sockets.get(h.0).and_then(Option::as_ref) else {
            return 0;
        };
        loop {
            match stream.read_shared(buf) {
                Ok(n) => return n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if !wait_fd(stream.fd(), libc::POLLIN, -1) {
                        return 0;
                    }
                }
                Err(_) => return 0,
            }
        }
    }
}

/// Waits until `fd` is ready for `events` (or hung up), at most `timeout_ms` (-1: no limit).
/// False on a timeout or an error.
fn wait_fd(fd: std::os::fd::RawFd, events: libc::c_short, timeout_ms: libc::c_int) -> bool {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    loop {
        // SAFETY: `p` is one valid `pollfd`.
        match unsafe { libc::poll(&mut p, 1, timeout_ms) } {
            1 => return true,
            -1 if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => {}
            _ => return false,
        }
    }
}

/// The server: the driver, sockets and files.
pub struct Server {
    poll: Poll,
    driver: Driver,
    listeners: Vec<Listener>,
    /// Client sockets by handle slot.
    sockets: Vec<Option<Stream>>,
    signals: Signals,
    clock: Clock,
    /// The rate of the counter the clock reads between wakeups (see [`crate::clock`]).
    cal: Calibration,
    shutdown: bool,
    /// Background save, AOF, startup load.
    pub files: Durability,
    /// Reused list of the connections to write.
    dirty: Vec<Handle>,
    /// MIGRATE's cached links to target instances.
    migrate: crate::migrate::Links,
    /// `oom-score-adj`'s writes to the process's score.
    oom: crate::oom::OomScore,
    /// The process title (`proc-title-template`).
    title: crate::proctitle::ProcTitle,
    /// Connections that handed over their share of a pass with more to read (see
    /// `Driver::read_share_spent`): edge-triggered epoll reports nothing new for them, so the
    /// next pass reads them again without waiting.
    unread: Vec<Handle>,
    /// Connections whose peer shut its side (epoll's RDHUP), by slot: their end of file may
    /// be queued behind data a short read took, and no new edge would report it, so they are
    /// read until the read says 0. Cleared by `close`, the one way a slot is freed.
    peer_shut: Vec<bool>,
}

impl Server {
    /// Binds every configured listener and sets up the poller and signals.
    pub fn bind(engine: Engine) -> Result<Self, ServerError> {
        let cfg = &engine.core.config;
        let mut listeners = Vec::new();
        if cfg.port != 0 {
            for entry in &cfg.bind {
                listeners.extend(net::bind_tcp(entry, cfg.port)?);
            }
        }
        if !cfg.unixsocket.is_empty() {
            listeners.push(net::bind_unix(&cfg.unixsocket, cfg.unixsocketperm)?);
        }
        if listeners.is_empty() {
            return Err(ServerError::NowhereToListen);
        }
        let poll = Poll::new()?;
        for (i, l) in listeners.iter_mut().enumerate() {
            l.register(poll.registry(), Token(LISTENER_BASE + i))?;
        }
        let mut signals = Signals::new([SIGTERM, SIGINT])?;
        crate::signals::install()?;
        poll.registry()
            .register(&mut signals, SIGNAL_TOKEN, Interest::READABLE)?;
        let mut cal = Calibration::detect();
        let mut driver = Driver::new(engine);
        // Disk-based full syncs write the RDB file as a BGSAVE and send it.
        driver.enable_file_syncs();
        Ok(Server {
            poll,
            driver,
            listeners,
            sockets: Vec::new(),
            signals,
            clock: Clock::read(&mut cal),
            cal,
            shutdown: false,
            files: Durability::default(),
            dirty: Vec::new(),
            migrate: Default::default(),
            oom: Default::default(),
            title: Default::default(),
            unread: Vec::new(),
            peer_shut: Vec::new(),
        })
    }

    /// Shows the process title through `title` from now on.
    pub fn set_title(&mut self, title: crate::proctitle::ProcTitle) {
        self.title = title;
        self.title.sync(self.driver.engine());
    }

    /// The engine, for loading data between binding and running.
    pub fn engine_mut(&mut self) -> &mut Engine {
        self.driver.engine_mut()
    }

    /// The addresses listened on, for the "Ready to accept connections" lines.
    pub fn listening(&self) -> Vec<String> {
        self.listeners.iter().map(Listener::describe).collect()
    }

    fn engine(&mut self) -> &mut Engine {
        self.driver.engine_mut()
    }

    fn now(&self) -> Now {
        kayvee_session::Clock::now(&self.clock)
    }

    /// Runs until SHUTDOWN or SIGTERM/SIGINT, then flushes the clients and returns.
    pub fn run(&mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        // The nap under heavy load lasts `busy-poll-us` (50 by default): with the default timer
        // slack of 50 us the kernel could double it. One microsecond of slack for this thread.
        // SAFETY: PR_SET_TIMERSLACK takes a plain integer and changes only this thread's slack.
        unsafe {
            libc::prctl(libc::PR_SET_TIMERSLACK, 1000u64);
        }
        while !self.shutdown {
            let timeout = self.sleep_timeout();
            if let Err(e) = self.wait(&mut events, timeout) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            self.clock = Clock::read(&mut self.cal);
            let unread = std::mem::take(&mut self.unread);
            self.driver
                .after_wait(self.now(), !events.is_empty() || !unread.is_empty());
            for event in events.iter() {
                self.dispatch(event.token(), event.is_writable(), event.is_read_closed());
                if self.shutdown {
                    break;
                }
            }
            // The rest of what the last pass left unread, after the connections that woke.
            for h in unread {
                if !self.shutdown && self.handle_at(h.0).is_some() {
                    self.read_conn(h);
                }
            }
            self.carry_out_requests();
            if self.shutdown {
                break;
            }
            self.run_due();
            self.connect_primary();
            // The log says what happened before the replies that follow it go out.
            self.log_notices();
            self.write_pass();
            let now = self.now();
            let (files, engine) = (&mut self.files, self.driver.engine_mut());
            files.loading_cron(engine, now)?;
            let engine = self.driver.engine();
            if !engine.shutdown_asked() && !engine.core.shutting_down {
                crate::signals::clear_asked();
            }
        }
        let now = self.now();
        let (files, engine) = (&mut self.files, self.driver.engine_mut());
        files.close(engine, now);
        self.finish();
        Ok(())
    }

    /// Waits for readiness at most `timeout`. Under heavy load (big passes from many
    /// connections, see `BusyPoll::nap_us`) it first looks without waiting, then naps for the
    /// busy-poll window and looks again, and only then waits: one wakeup then serves what many
    /// connections sent meanwhile instead of a wakeup for each.
    fn wait(&mut self, events: &mut Events, timeout: Duration) -> io::Result<()> {
        let nap_us = if timeout.is_zero() {
            0
        } else {
            self.driver.nap_us()
        };
        if nap_us == 0 {
            return self.poll.poll(events, Some(timeout));
        }
        self.poll.poll(events, Some(Duration::ZERO))?;
        if events.is_empty() {
            std::thread::sleep(Duration::from_micros(nap_us).min(timeout));
            self.poll.poll(events, Some(Duration::ZERO))?;
        }
        if events.is_empty() {
            self.poll.poll(events, Some(timeout))?;
        }
        Ok(())
    }

    /// How long the poll may sleep: until the driver's next deadline (cron, a blocked
    /// client's timeout), sooner while the startup load runs, zero while the busy poll spins.
    fn sleep_timeout(&mut self) -> Duration {
        if !self.unread.is_empty() {
            return Duration::ZERO;
        }
        let now = self.now();
        let mut wanted_us = self.driver.poll_at().saturating_sub(now.unix_us);
        if self.files.loading.is_some() {
            wanted_us = wanted_us.min(LOADING_POLL_US);
        }
        Duration::from_micros(self.driver.sleep_timeout_us(now, wanted_us))
    }

    /// Runs the driver's due work (cron, blocked clients' timeouts) and, with its cron, the
    /// shell's: persistence, host facts.
    fn run_due(&mut self) {
        if self.now().unix_us >= self.driver.poll_at() {
            let polled = self.with_shell(|driver, shell| driver.poll(shell));
            if polled.cron {
                self.cron();
            }
        }
        let now = self.now();
        let (files, engine) = (&mut self.files, self.driver.engine_mut());
        files.after_pass(engine, now);
        self.report_replica_save();
        self.oom.sync(self.driver.engine());
        self.title.sync(self.driver.engine());
    }

    /// Hands the driver the end of a disk-based full sync's background save: the file it
    /// wrote, opened (the replicas that waited get it), or nothing when it failed or stopped.
    fn report_replica_save(&mut self) {
        let Some(ok) = self.files.take_replica_save_end() else {
            return;
        };
        let file = ok
            .then(|| crate::persist::SavedFile::open(&crate::persist::rdb_path(self.engine())))
            .and_then(|opened| {
                opened
                    .map_err(|e| warn!("Can't open the saved RDB file for the replicas: {e}"))
                    .ok()
            })
            .map(|f| Box::new(f) as Box<dyn kayvee_session::SyncFile>);
        self.driver.replica_save_finished(file, &self.clock);
    }

    /// The shell's part of the cron: persistence and the host facts INFO reports.
    fn cron(&mut self) {
        let now = self.now();
        let (files, engine) = (&mut self.files, self.driver.engine_mut());
        files.cron(engine, now);
        let core = &mut self.engine().core;
        crate::host::refresh(&mut core.host);
        core.used_memory_peak = core.used_memory_peak.max(core.host.used_memory);
        self.migrate.prune(self.driver.engine());
    }

    /// Writes the AOF, then each connection with output once; a connection whose output fell
    /// below the pause mark is read again, which may give more output: until none is left.
    fn write_pass(&mut self) {
        loop {
            let (files, engine) = (&mut self.files, self.driver.engine_mut());
            files.flush_aof(engine);
            let mut dirty = std::mem::take(&mut self.dirty);
            self.driver.take_dirty(&mut dirty);
            if dirty.is_empty() {
                self.dirty = dirty;
                return;
            }
            for h in dirty.drain(..) {
                self.write_conn(h);
            }
            self.dirty = dirty;
            self.carry_out_requests();
            if self.shutdown {
                return;
            }
        }
    }

    /// One write of connection `h`'s output; closes or reads it again as the driver says.
    fn write_conn(&mut self, h: Handle) {
        if self.flush_conn(h) == Some(Flushed::ReadAgain) {
            self.read_conn(h);
        }
    }

    /// One write of connection `h`'s output; closes it when the driver says so (then, or when
    /// the socket is gone, `None`).
    fn flush_conn(&mut self, h: Handle) -> Option<Flushed> {
        let Some(stream) = self.sockets.get_mut(h.0).and_then(Option::as_mut) else {
            self.driver.close(h);
            return None;
        };
        match self
            .driver
            .flush(h, &self.clock, |bytes| write_once(stream, bytes))
        {
            Ok(Flushed::Close) => {}
            Ok(flushed) => return Some(flushed),
            Err(e) => debug!("Client connection error: {e}"),
        }
        self.close(h);
        None
    }

    /// Routes one readiness event.
    fn dispatch(&mut self, token: Token, writable: bool, read_closed: bool) {
        match token {
            SIGNAL_TOKEN => self.on_signal(),
            Token(t) if t >= LISTENER_BASE => self.accept(t - LISTENER_BASE),
            Token(slot) => {
                let Some(h) = self.handle_at(slot) else {
                    return;
                };
                if writable {
                    self.driver.writable(h);
                }
                if read_closed {
                    if self.peer_shut.len() <= slot {
                        self.peer_shut.resize(slot + 1, false);
                    }
                    self.peer_shut[slot] = true;
                }
                self.read_conn(h);
            }
        }
    }

    /// The handle of the connection in `slot`.
    fn handle_at(&self, slot: usize) -> Option<Handle> {
        self.sockets
            .get(slot)
            .and_then(Option::as_ref)
            .map(|_| Handle(slot))
    }

    /// Reads what connection `h` has while the driver wants it, handing each read over.
    /// Edge-triggered epoll reports every arrival of data, so a short read proves the socket
    /// was empty at that instant: the read that would only return `WouldBlock` is skipped.
    /// A connection that handed over its share of the pass (`Driver::read_share_spent`) is
    /// left for the next pass (`unread`), so one fast writer cannot hold the loop.
    fn read_conn(&mut self, h: Handle) {
        while self.driver.wants_input(h) {
            // Its share of the pass handed over: the others first, the rest next pass.
            if self.driver.read_share_spent(h) {
                if !self.unread.contains(&h) {
                    self.unread.push(h);
                }
                return;
            }
            let Some(stream) = self.sockets.get_mut(h.0).and_then(Option::as_mut) else {
                return;
            };
            // Into the connection's own query buffer, as Redis reads.
            let Some(room) = self.driver.read_buffer(h) else {
                return;
            };
            let space = room.len();
            let n = match stream.read(room) {
                Ok(0) => {
                    self.driver.receive_eof(h);
                    return;
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    debug!("Client connection error: {e}");
                    self.close(h);
                    return;
                }
            };
            self.with_shell(|driver, shell| driver.received(h, n, shell));
            // A big argument still arriving: what came is acknowledged at once (TCP_QUICKACK).
            // A client that writes it in pieces with Nagle on (the suite's Tcl client, 4 KiB
            // a write) holds its last short segment until the ones before are acknowledged,
            // which the delayed ACK put off by 40 ms; and its FIN after such an upload came
            // 10-18 ms after its close, later than its next connection's first command, for
            // which it still counted against maxmemory-clients.
            let big_argument = self.driver.awaits_big_argument(h);
            if big_argument {
                if let Some(stream) = self.sockets.get(h.0).and_then(Option::as_ref) {
                    stream.quickack();
                }
            }
            // A CONFIG SET oom-score-adj or REPLICAOF is in force before its reply goes out.
            self.oom.sync(self.driver.engine());
            self.title.sync(self.driver.engine());
            crate::durability::note_aof_scheduled(self.driver.engine_mut());
            self.files.after_read(self.driver.engine());
            // A command's log line (SHUTDOWN ABORT's "Shutdown manually aborted.") is in the
            // log before its reply goes out: a client that reads the reply finds the line.
            self.log_notices();
            // The replies go out at once, while they are hot in the cache (a pass that waited
            // for every connection held megabytes of LRANGE replies); with the AOF on they
            // wait for the pass's one AOF write instead (group commit, in `write_pass`). They
            // also wait while a request for the shell (BGSAVE...) or a rewrite (BGREWRITEAOF)
            // is pending, which is carried out first: whoever reads "Background saving
            // started" finds the save's child; and while connections a CLIENT KILL closed
            // wait for the write pass, which closes them first. The reading goes on either way.
            let hold = self.files.holds_replies(self.driver.engine())
                || self.driver.has_requests()
                || self.driver.closes_first()
                || self.driver.engine().core.aof.status.rewrite_requested;
            if !hold && self.flush_conn(h).is_none() {
                return;
            }
            // A big argument still arriving: its next piece is usually there by the time the
            // next read looks (`WouldBlock` ends the loop otherwise). A peer that shut its
            // side is read until the 0 that says so.
            let shut = self.peer_shut.get(h.0).copied().unwrap_or(false);
            if n < space && !big_argument && !shut {
                return;
            }
        }
    }

    /// Calls the driver with the shell a long script serves through (see [`Shell`]), then
    /// takes in the connections it accepted meanwhile.
    fn with_shell<R>(&mut self, f: impl FnOnce(&mut Driver, &Shell<'_>) -> R) -> R {
        let shell = Shell {
            clock: &self.clock,
            sockets: &self.sockets,
            listeners: &self.listeners,
            registry: self.poll.registry(),
            keepalive_s: self.driver.engine().core.config.tcp_keepalive_s,
            joined: RefCell::default(),
        };
        let r = f(&mut self.driver, &shell);
        let joined = shell.joined.into_inner();
        if !joined.is_empty() {
            self.take_joined(joined);
        }
        r
    }

    /// The sockets of the connections a long script's shell accepted (see [`Shell`]).
    #[cold]
    #[inline(never)]
    fn take_joined(&mut self, joined: Vec<(Handle, Stream)>) {
        for (h, stream) in joined {
            if self.sockets.len() <= h.0 {
                self.sockets.resize_with(h.0 + 1, || None);
            }
            self.sockets[h.0] = Some(stream);
        }
    }

    /// Carries out what commands asked of the shell, in order.
    fn carry_out_requests(&mut self) {
        if let Some(snapshot) = self.driver.take_replica_save() {
            let now = self.now();
            let (files, engine) = (&mut self.files, self.driver.engine_mut());
            files.start_replica_bgsave(engine, snapshot, now);
            self.report_replica_save();
        }
        while let Some((h, request)) = self.driver.next_request() {
            let now = self.now();
            let answer = match request {
                Request::Save { background: false } => {
                    // FLUSHALL's save: its stop of the running background save comes first.
                    let (files, engine) = (&mut self.files, self.driver.engine_mut());
                    files.abort_bgsave_if_asked(engine, now);
                    crate::requests::save(engine, now)
                }
                Request::Save { background: true } => {
                    let (files, engine) = (&mut self.files, self.driver.engine_mut());
                    files.start_bgsave(engine, now);
                    Answer::Nothing
                }
                Request::RewriteConfig => crate::requests::rewrite_config(self.engine()),
                Request::AclFile { save } => crate::acl::acl_file_command(self.engine(), save),
                Request::Crash => crate::crash::crash_now(),
                Request::LoadAof => {
                    // A slow script in the file serves the others meanwhile (-LOADING).
                    let mut files = std::mem::take(&mut self.files);
                    let answer = self.with_shell(|driver, shell| {
                        driver.serving_others(h, shell, |engine, wait| {
                            crate::requests::load_aof(engine, &mut files, now, wait)
                        })
                    });
                    self.files = files;
                    answer
                }
                Request::LoadRdb { flush, merge } => {
                    crate::persist::reload_from_disk(self.engine(), now, flush, merge)
                }
                Request::Migrate(job) => self.migrate.exchange(&job),
                Request::Rebind { previous_port, .. } => self.rebind(previous_port),
                Request::Shutdown(flags) => {
                    let (files, engine) = (&mut self.files, self.driver.engine_mut());
                    match crate::requests::shutdown(engine, files, flags, now) {
                        Ok(()) => {
                            self.shutdown = true;
                            return;
                        }
                        Err(answer) => answer,
                    }
                }
            };
            self.with_shell(|driver, shell| driver.complete(h, answer, shell));
            self.migrate.prune(self.driver.engine());
        }
    }

    /// Logs what the driver noticed, as Redis words it.
    fn log_notices(&mut self) {
        for notice in self.driver.take_notices() {
            match notice {
                Notice::ProtocolError { error, .. } => {
                    debug!("Protocol error ({error}) from client")
                }
                Notice::QueryBufferLimit { .. } => {
                    warn!("Closing client that reached max query buffer length")
                }
                Notice::OutputLimit { id } => warn!(
                    "Client id={id} scheduled to be closed ASAP for overcoming of output \
                     buffer limits."
                ),
                Notice::IdleTimeout { .. } => debug!("Closing idle client"),
                Notice::ClientEvicted { id, mem } => {
                    debug!("Evicting client: id={id} tot-mem={mem}")
                }
                Notice::Replication(text) => info!("{text}"),
                Notice::Warning(text) => warn!("{text}"),
            }
        }
    }

    /// SIGTERM / SIGINT: asks the engine for a shutdown, which its cron starts (see
    /// [`kayvee_engine::Engine::ask_shutdown`]); SHUTDOWN ABORT can cancel it meanwhile.
    fn on_signal(&mut self) {
        for sig in self.signals.pending() {
            let (name, signal) = if sig == SIGINT {
                ("SIGINT", ShutdownSignal::Int)
            } else {
                ("SIGTERM", ShutdownSignal::Term)
            };
            warn!("Received {name} scheduling shutdown...");
            self.engine().ask_shutdown(signal);
        }
    }

    /// CONFIG SET changed `port` or `bind`: binds the configured TCP addresses, then swaps them
    /// in for the old TCP listeners (the Unix socket stays). When one cannot be bound, the old
    /// listeners and the previous values stay, and the client gets Redis's error.
    fn rebind(&mut self, previous_port: u16) -> Answer {
        let cfg = &self.driver.engine().core.config;
        let (port, bind) = (cfg.port, cfg.bind.clone());
        let mut fresh = Vec::new();
        if port != 0 {
            for entry in &bind {
                match net::bind_tcp(entry, port) {
                    Ok(l) => fresh.extend(l),
                    Err(e) => {
                        warn!("{e}");
                        self.engine().rollback_config_set();
                        let (arg, why) = if port != previous_port {
                            ("port", "Unable to listen on this port")
                        } else {
                            ("bind", "Failed to bind to specified addresses.")
                        };
                        return Answer::Error(format!(
                            "ERR CONFIG SET failed (possibly related to argument '{arg}') - {why}"
                        ));
                    }
                }
            }
        }
        let registry = self.poll.registry();
        for l in &mut self.listeners {
            l.deregister(registry);
        }
        let unix = self
            .listeners
            .drain(..)
            .filter(|l| matches!(l, Listener::Unix(..)));
        let mut listeners: Vec<Listener> = fresh.into_iter().chain(unix).collect();
        for (i, l) in listeners.iter_mut().enumerate() {
            if let Err(e) = l.register(registry, Token(LISTENER_BASE + i)) {
                warn!("Registering a listener: {e}");
            }
        }
        self.listeners = listeners;
        self.engine().config_set_done();
        Answer::Ok
    }

    /// Opens the connection to this server's primary when the driver names one (REPLICAOF,
    /// or a retry after a lost link): a non-blocking connect whose socket is then a session
    /// like any other; its first bytes go out once it is connected.
    fn connect_primary(&mut self) {
        let now = self.now();
        let Some((host, port)) = self.driver.primary_due(now) else {
            return;
        };
        info!("Connecting to MASTER {host}:{port}");
        let addr = match (host.as_str(), port).to_socket_addrs() {
            Ok(mut addrs) => addrs.next(),
            Err(e) => {
                self.driver.primary_unreachable(&e.to_string());
                return;
            }
        };
        let Some(addr) = addr else {
            self.driver.primary_unreachable("no address");
            return;
        };
        let source =
            kayvee_engine::config::extra::bind_source_addr(&self.driver.engine().core.config);
        let mut stream = match net::connect_from(addr, &source) {
            Ok(s) => s,
            Err(e) => {
                self.driver.primary_unreachable(&e.to_string());
                return;
            }
        };
        let keepalive_s = self.driver.engine().core.config.tcp_keepalive_s;
        let _ = net::configure_tcp(&stream, keepalive_s);
        let laddr = stream
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let info = ConnInfo {
            fd: i64::from(std::os::fd::AsRawFd::as_raw_fd(&stream)),
            transport: Transport::Tcp {
                addr: addr.to_string(),
                laddr,
            },
        };
        let h = self.driver.connect_primary(info, now);
        let interest = Interest::READABLE | Interest::WRITABLE;
        if let Err(e) = self
            .poll
            .registry()
            .register(&mut stream, Token(h.0), interest)
        {
            warn!("Registering the connection to the primary: {e}");
            self.driver.close(h);
            return;
        }
        if self.sockets.len() <= h.0 {
            self.sockets.resize_with(h.0 + 1, || None);
        }
        self.sockets[h.0] = Some(Stream::Tcp(stream));
    }

    /// Accepts every pending connection on listener `li`.
    fn accept(&mut self, li: usize) {
        loop {
            let Some(listener) = self.listeners.get(li) else {
                return;
            };
            match listener.accept() {
                Ok((stream, transport)) => self.admit(stream, transport),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    warn!("Accepting client connection: {e}");
                    return;
                }
            }
        }
    }

    /// Registers an accepted connection, or refuses it (`maxclients`, protected mode) with
    /// the driver's bytes.
    fn admit(&mut self, mut stream: Stream, transport: Transport) {
        let label = describe_transport(&transport);
        let info = ConnInfo {
            fd: i64::from(stream.fd()),
            transport,
        };
        let now = self.now();
        let h = match self.driver.connect(info, now) {
            Ok(h) => h,
            Err(refusal) => {
                // A fresh socket's buffer takes this short line; nothing more is owed to it.
                let _ = stream.write(refusal.as_bytes());
                debug!("Refused a client: {}", refusal.trim_end());
                return;
            }
        };
        configure_accepted(&stream, self.driver.engine().core.config.tcp_keepalive_s);
        let interest = Interest::READABLE | Interest::WRITABLE;
        if let Err(e) = self
            .poll
            .registry()
            .register(&mut stream, Token(h.0), interest)
        {
            warn!("Registering a client connection: {e}");
            self.driver.close(h);
            return;
        }
        if self.sockets.len() <= h.0 {
            self.sockets.resize_with(h.0 + 1, || None);
        }
        self.sockets[h.0] = Some(stream);
        debug!("Accepted {label}");
    }

    /// Closes connection `h`'s socket and forgets it in the driver.
    fn close(&mut self, h: Handle) {
        if let Some(shut) = self.peer_shut.get_mut(h.0) {
            *shut = false;
        }
        if let Some(mut stream) = self.sockets.get_mut(h.0).and_then(Option::take) {
            let _ = self.poll.registry().deregister(&mut stream);
            if let Some(c) = self.driver.engine().clients.get(h) {
                debug!("Client closed connection id={}", c.id);
            }
        }
        self.driver.close(h);
    }

    /// Graceful end: one last write to every client, then release the sockets' files.
    fn finish(&mut self) {
        let handles: Vec<Handle> = self.driver.handles().collect();
        for h in handles {
            if let Some(stream) = self.sockets.get_mut(h.0).and_then(Option::as_mut) {
                let _ = write_once(stream, self.driver.pending_output(h));
            }
        }
        let unix_paths: Vec<String> = self
            .listeners
            .iter()
            .filter_map(|l| match l {
                Listener::Unix(_, p) => Some(p.clone()),
                Listener::Tcp(..) => None,
            })
            .collect();
        self.listeners.clear();
        for p in unix_paths {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// One `write` (retried on EINTR); 0 when the socket would block.
#[inline(always)]
fn write_once(stream: &mut Stream, bytes: &[u8]) -> io::Result<usize> {
    if bytes.is_empty() {
        return Ok(0);
    }
    loop {
        match stream.write(bytes) {
            Ok(n) => return Ok(n),
            // A connection to a primary that is still being set up takes nothing yet.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::NotConnected
                ) =>
            {
                return Ok(0)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// `127.0.0.1:41358` or the socket path, for the log.
fn describe_transport(t: &Transport) -> String {
    match t {
        Transport::Tcp { addr, .. } => addr.clone(),
        Transport::Unix { path } => format!("connection on {path}"),
    }
}

/// An accepted TCP connection's socket options (no delay, keepalive).
fn configure_accepted(stream: &Stream, keepalive_s: u64) {
    if let Stream::Tcp(s) = stream {
        if let Err(e) = net::configure_tcp(s, keepalive_s) {
            debug!("Setting socket options on an accepted connection: {e}");
        }
    }
}
