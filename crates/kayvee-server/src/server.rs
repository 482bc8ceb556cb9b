//! The event loop: one thread owns the [`Engine`] and runs a mio (epoll) loop over the
//! listeners, the client connections and the signal pipe, and runs the cron `hz` times a second.
//!
//! Per readable connection: read what is available, decode every complete command, run each
//! through the engine with replies encoded straight into the connection's output buffer, then
//! write that buffer with one `write`. Connections are registered once, edge-triggered, for
//! READABLE and WRITABLE: the WRITABLE edge arrives when a full socket buffer drains, which
//! replaces Redis's add/remove of a write handler and saves an `epoll_ctl` per blocked write.
//!
//! Time: the wall clock (`SystemTime`) is read once per wakeup; each command's [`Now`] is that
//! reading plus the monotonic time elapsed since, taken from the same monotonic reading that
//! starts the command's duration measurement. So a command costs two `clock_gettime` (vDSO, no
//! syscall) and `now` stays exact across long pipelines and `DEBUG SLEEP`.

use crate::conn::{Conn, FillEnd, OUTPUT_PAUSE};
use crate::net::{self, Listener, Stream};
use kayvee_engine::client::{ConnInfo, Transport};
use kayvee_engine::{Engine, Handle, Now, Outcome, Protocol};
use kayvee_resp::{Decoder, Limits, RespWriter};
use mio::{Events, Interest, Poll, Token};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook_mio::v1_0::Signals;
use std::io::{self, Write};
use std::time::{Duration, Instant, SystemTime};
use tracing::{debug, warn};

/// Token of the signal pipe.
const SIGNAL_TOKEN: Token = Token(usize::MAX);
/// Tokens of listeners are `LISTENER_BASE + index`; connections use their handle's slot.
const LISTENER_BASE: usize = usize::MAX / 2;

/// Size of the shared read buffer: one `read` takes up to this much.
const SCRATCH_LEN: usize = 64 * 1024;

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

/// The wall clock read at the last wakeup, and the monotonic clock at that moment.
struct Clock {
    unix_us: u64,
    mono_us: u64,
}

impl Clock {
    /// Reads both clocks.
    fn read() -> Self {
        let unix_us = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0);
        Clock {
            unix_us,
            mono_us: monotonic_us(),
        }
    }

    /// The wall time at monotonic time `t_us` (not before the reading).
    #[inline]
    fn at(&self, t_us: u64) -> Now {
        Now {
            unix_us: self.unix_us + t_us.saturating_sub(self.mono_us),
        }
    }

    /// The wall time now.
    fn now(&self) -> Now {
        self.at(monotonic_us())
    }
}

/// CLOCK_MONOTONIC in microseconds. Plain integers make the two readings per command cheap:
/// `Instant` subtraction (checked `Timespec` arithmetic) cost ~65 instructions per command.
#[inline]
fn monotonic_us() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable `timespec`; CLOCK_MONOTONIC always exists on Linux
    // (a failure would leave zeros, which only makes a duration read as 0).
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1000
}

/// What a batch of commands asked of the server beyond its own connection.
#[derive(Default)]
struct Batch {
    /// CLIENT KILL marked clients.
    kill: bool,
    /// SHUTDOWN was requested.
    shutdown: bool,
    /// ... and it must save first (SAVE, or save points configured).
    shutdown_save: bool,
    /// BGSAVE started a background save.
    bgsave: Option<crate::persist::BgSave>,
}

/// How often the loop looks at the startup load's progress while it runs.
const LOADING_POLL: Duration = Duration::from_millis(5);

/// The server: engine, sockets and the loop's state.
pub struct Server {
    poll: Poll,
    engine: Engine,
    listeners: Vec<Listener>,
    /// Connections by handle slot.
    conns: Vec<Option<Conn>>,
    signals: Signals,
    limits: Limits,
    clock: Clock,
    next_cron: Instant,
    shutdown: bool,
    /// The shared read buffer (see [`Server::run_from_scratch`]).
    scratch: Vec<u8>,
    /// Whether each command's duration is measured for INFO commandstats.
    pub time_commands: bool,
    /// The background save under way (BGSAVE, save points).
    bgsave: Option<crate::persist::BgSave>,
    /// A signal asked for the shutdown and save points are configured: save before exiting.
    signal_save: bool,
    /// The append-only file, when on.
    pub aof: Option<crate::aof::Aof>,
    /// Connections whose replies wait for this pass's AOF write (group commit).
    deferred: Vec<usize>,
    /// BGREWRITEAOF with the AOF off: the thread writing the base, and when it started.
    detached_rewrite: Option<(std::thread::JoinHandle<io::Result<u64>>, Instant)>,
    /// Slots of connections that got pub/sub messages this pass (see [`Server::flush_dirty`]).
    dirty: Vec<usize>,
    /// The startup load, while it runs.
    loading: Option<crate::persist::StartupLoad>,
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
        let limits = Limits {
            bulk_len_max: cfg.proto_max_bulk_len as usize,
            query_buffer_max: cfg.client_query_buffer_limit as usize,
        };
        let poll = Poll::new()?;
        for (i, l) in listeners.iter_mut().enumerate() {
            l.register(poll.registry(), Token(LISTENER_BASE + i))?;
        }
        let mut signals = Signals::new([SIGTERM, SIGINT])?;
        poll.registry()
            .register(&mut signals, SIGNAL_TOKEN, Interest::READABLE)?;
        Ok(Server {
            poll,
            engine,
            listeners,
            conns: Vec::new(),
            signals,
            limits,
            clock: Clock::read(),
            next_cron: Instant::now(),
            shutdown: false,
            scratch: vec![0; SCRATCH_LEN],
            time_commands: true,
            bgsave: None,
            signal_save: false,
            aof: None,
            deferred: Vec::new(),
            detached_rewrite: None,
            dirty: Vec::new(),
            loading: None,
        })
    }

    /// Serves clients (with `-LOADING`) while `load` runs; the loop hands its data to the
    /// engine when it is done, or stops with its error.
    pub fn set_loading(&mut self, load: Option<crate::persist::StartupLoad>) {
        self.loading = load;
    }

    /// Reports the startup load's progress; when it is done, installs the data or fails.
    fn loading_cron(&mut self) -> io::Result<()> {
        let done = match &self.loading {
            Some(load) => load.poll(&mut self.engine),
            None => return Ok(()),
        };
        if done {
            let load = self.loading.take().expect("checked above");
            load.finish(&mut self.engine, self.clock.now())
                .map_err(|e| {
                    warn!("{e}");
                    io::Error::other(e.to_string())
                })?;
        }
        Ok(())
    }

    /// Where the server listens, for the startup log.
    pub fn listening(&self) -> Vec<String> {
        self.listeners.iter().map(Listener::describe).collect()
    }

    /// Runs until SHUTDOWN or SIGTERM/SIGINT, then flushes the clients and returns.
    pub fn run(&mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        // Until when the loop polls without sleeping (`busy-poll-us` after a pass with events).
        let mut busy_until = Instant::now();
        while !self.shutdown {
            let mut timeout = self.poll_timeout();
            if !timeout.is_zero() && Instant::now() < busy_until {
                timeout = Duration::ZERO;
            }
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            let busy_poll_us = self.engine.core.config.busy_poll_us;
            if busy_poll_us > 0 && !events.is_empty() {
                busy_until = Instant::now() + Duration::from_micros(busy_poll_us.into());
            }
            self.clock = Clock::read();
            for event in events.iter() {
                self.dispatch(event.token());
                if self.shutdown {
                    break;
                }
            }
            self.run_deferred();
            if !self.shutdown && Instant::now() >= self.next_cron {
                self.cron();
            }
            self.expire_blocked();
            self.flush_dirty();
            self.loading_cron()?;
        }
        if self.signal_save {
            self.wait_bgsave();
            let _ = crate::persist::save_sync(&mut self.engine, self.clock.now());
        }
        if let Some(aof) = self.aof.take() {
            aof.close(&mut self.engine, self.clock.now());
        }
        self.finish();
        Ok(())
    }

    // ---- Blocked clients (BLPOP and co., see `kayvee_engine::blocking`) ----

    /// How long the poll may sleep: until the next cron, or just past the earliest timeout of
    /// a blocked client (the engine times a client out once the clock is past its deadline).
    fn poll_timeout(&self) -> Duration {
        if !self.deferred.is_empty() {
            return Duration::ZERO;
        }
        let mut cron = self.next_cron.saturating_duration_since(Instant::now());
        if self.loading.is_some() {
            cron = cron.min(LOADING_POLL);
        }
        match self.engine.next_block_deadline() {
            Some(deadline_ms) => {
                let due_us = (deadline_ms + 1) * 1000;
                let wait = Duration::from_micros(due_us.saturating_sub(self.clock.now().unix_us));
                cron.min(wait)
            }
            None => cron,
        }
    }

    /// Answers the blocked clients whose timeout passed (here or in the engine's cron).
    fn expire_blocked(&mut self) {
        if self.engine.next_block_deadline().is_some() {
            self.engine.expire_blocked(self.clock.now());
        }
        self.deliver_wakeups();
    }

    /// Sends woken clients (served or timed out) their replies, encoded in each client's
    /// protocol, then runs the commands they pipelined behind the blocking one. That may wake
    /// further clients: repeat until none is left.
    fn deliver_wakeups(&mut self) {
        loop {
            self.deliver_messages();
            let woken = self.engine.take_wakeups();
            if woken.is_empty() {
                return;
            }
            for (h, replies) in woken {
                let protocol = self.engine.protocol(h);
                let Some(conn) = self.conns.get_mut(h.0).and_then(Option::as_mut) else {
                    continue;
                };
                let mut sink = RespWriter::new(&mut conn.out, protocol);
                replies.iter().for_each(|r| r.write_to(&mut sink));
                self.service_conn(h.0);
            }
        }
    }

    // ---- Pub/sub messages and output buffer limits ----

    /// Appends the pub/sub messages the engine queued to each receiver's output (encoded in
    /// its protocol) and marks the receiver dirty. Nothing is written here: the dirty
    /// connections are written once per loop pass by [`Server::flush_dirty`], so a PUBLISH
    /// burst to N subscribers costs N writes per pass, not N per PUBLISH (Redis likewise
    /// writes pending replies once, before it sleeps).
    fn deliver_messages(&mut self) {
        let messages = self.engine.take_messages();
        if messages.is_empty() {
            return;
        }
        // A message goes to its receivers back to back, so it is encoded once per protocol
        // and copied: (the message, the protocol, its bytes).
        let mut encoded: Option<(std::rc::Rc<kayvee_engine::Reply>, Protocol, Vec<u8>)> = None;
        for (h, msg) in messages {
            let protocol = self.engine.protocol(h);
            let Some(conn) = self.conns.get_mut(h.0).and_then(Option::as_mut) else {
                continue;
            };
            if conn.closing {
                continue;
            }
            match &mut encoded {
                Some((m, p, bytes)) if std::rc::Rc::ptr_eq(m, &msg) && *p == protocol => {
                    conn.out.extend_from_slice(bytes);
                }
                slot => {
                    let mut bytes = Vec::new();
                    msg.write_to(&mut RespWriter::new(&mut bytes, protocol));
                    conn.out.extend_from_slice(&bytes);
                    *slot = Some((msg, protocol, bytes));
                }
            }
            if !conn.dirty {
                conn.dirty = true;
                self.dirty.push(h.0);
            }
        }
    }

    /// Writes every connection that received messages during this pass (one `write` each),
    /// then applies the output limit of its class (`pubsub` for subscribers).
    fn flush_dirty(&mut self) {
        // Taken and put back so its allocation is reused (flushing queues nothing new).
        let mut dirty = std::mem::take(&mut self.dirty);
        for &slot in &dirty {
            let Some(conn) = self.conns.get_mut(slot).and_then(Option::as_mut) else {
                continue;
            };
            conn.dirty = false;
            self.flush_and_check(slot);
        }
        dirty.clear();
        self.dirty = dirty;
    }

    /// One write of connection `slot`'s output, then the output limit check: closes it when
    /// over its class's limit or when the write failed.
    fn flush_and_check(&mut self, slot: usize) {
        let Some(mut conn) = self.conns.get_mut(slot).and_then(Option::take) else {
            return;
        };
        let ok = self.write_out(&mut conn).is_ok();
        let over = self.over_limit(&mut conn);
        self.conns[slot] = Some(conn);
        if over || !ok {
            self.close(slot);
        }
    }

    /// Whether a connection's pending output breaks the limit of its class (`pubsub` for a
    /// subscriber, `normal` otherwise), logging as Redis does when it does.
    fn over_limit(&mut self, conn: &mut Conn) -> bool {
        let h = conn.handle;
        let class = if self.engine.is_subscriber(h) { 2 } else { 0 };
        let limit = self.engine.core.config.client_output_buffer_limit[class];
        if limit.hard_bytes == 0 && limit.soft_bytes == 0 {
            return false;
        }
        if !conn.over_output_limit(limit, Instant::now()) {
            return false;
        }
        let id = self.engine.clients.get(h).map_or(0, |c| c.id);
        warn!("Client id={id} scheduled to be closed ASAP for overcoming of output buffer limits.");
        true
    }

    /// Routes one readiness event.
    fn dispatch(&mut self, token: Token) {
        match token {
            SIGNAL_TOKEN => self.on_signal(),
            Token(t) if t >= LISTENER_BASE => self.accept(t - LISTENER_BASE),
            Token(slot) => self.service(slot),
        }
    }

    /// SIGTERM / SIGINT: schedule a graceful shutdown.
    fn on_signal(&mut self) {
        for sig in self.signals.pending() {
            let name = if sig == SIGINT { "SIGINT" } else { "SIGTERM" };
            warn!("Received {name} scheduling shutdown...");
            if !self.shutdown {
                warn!("User requested shutdown...");
            }
            self.shutdown = true;
            // Never while the startup load runs: it would overwrite the file being loaded.
            self.signal_save =
                !self.engine.core.config.save.is_empty() && !self.engine.is_loading();
        }
    }

    /// Accepts every pending connection on listener `li`.
    fn accept(&mut self, li: usize) {
        loop {
            let accepted = match &self.listeners[li] {
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
            };
            match accepted {
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

    /// Registers an accepted connection, or refuses it when `maxclients` is reached.
    fn admit(&mut self, mut stream: Stream, transport: Transport) {
        let cfg = &self.engine.core.config;
        if self.engine.clients.len() as u64 >= cfg.maxclients {
            // A fresh socket's buffer takes this short line; nothing more is owed to it.
            let _ = stream.write(b"-ERR max number of clients reached\r\n");
            self.engine.core.stats.rejected_connections += 1;
            debug!("Rejected a client: max number of clients reached");
            return;
        }
        if let Some(denied) = self.engine.protected_mode_refusal(&transport) {
            // Redis sends its explanation to the fresh socket and closes it.
            let _ = stream.write(denied.as_bytes());
            self.engine.core.stats.total_connections_received += 1;
            debug!("Refused a non-loopback client: protected mode");
            return;
        }
        let cfg = &self.engine.core.config;
        if let Stream::Tcp(s) = &stream {
            if let Err(e) = net::configure_tcp(s, cfg.tcp_keepalive_s) {
                debug!("Setting socket options on an accepted connection: {e}");
            }
        }
        let info = ConnInfo {
            fd: i64::from(stream.fd()),
            transport,
        };
        let label = describe_transport(&info.transport);
        let handle = self.engine.connect(info, self.clock.now());
        let token = Token(handle.0);
        let interest = Interest::READABLE | Interest::WRITABLE;
        if let Err(e) = self.poll.registry().register(&mut stream, token, interest) {
            warn!("Registering a client connection: {e}");
            self.engine.disconnect(handle);
            return;
        }
        if self.conns.len() <= handle.0 {
            self.conns.resize_with(handle.0 + 1, || None);
        }
        let conn = Conn::new(stream, handle, Decoder::new(self.limits));
        self.note_io(&conn);
        self.conns[handle.0] = Some(conn);
        debug!("Accepted {label}");
    }

    /// Handles readiness on connection `slot`: writes pending output, reads and runs commands,
    /// then delivers the replies of the blocked clients those commands woke.
    fn service(&mut self, slot: usize) {
        self.service_conn(slot);
        self.deliver_wakeups();
    }

    /// [`Server::service`] without the wakeups.
    fn service_conn(&mut self, slot: usize) {
        // The connection leaves its slot while it runs, so the loop can lend `self` and it.
        let Some(mut conn) = self.conns.get_mut(slot).and_then(Option::take) else {
            return;
        };
        let mut batch = Batch::default();
        let keep = self.pump(&mut conn, &mut batch).unwrap_or_else(|e| {
            debug!("Client connection error: {e}");
            false
        });
        let over = keep && self.over_limit(&mut conn);
        self.conns[slot] = Some(conn);
        if !keep || over {
            self.close(slot);
        }
        if batch.kill {
            self.close_killed();
        }
        if let Some(bg) = batch.bgsave.take() {
            self.bgsave = Some(bg);
        }
        self.after_batch();
        if batch.shutdown {
            self.shutdown_from_command(slot, batch.shutdown_save);
        }
    }

    /// SHUTDOWN: saves first when asked (after the running background save, so an older
    /// snapshot cannot land last); a failed save cancels the shutdown with Redis's error.
    fn shutdown_from_command(&mut self, slot: usize, save: bool) {
        warn!("User requested shutdown...");
        if save {
            self.wait_bgsave();
            warn!("Saving the final RDB snapshot before exiting.");
            if crate::persist::save_sync(&mut self.engine, self.clock.now()).is_err() {
                warn!("Error trying to save the DB, can't exit.");
                self.engine.core.shutting_down = false;
                if let Some(conn) = self.conns.get_mut(slot).and_then(Option::as_mut) {
                    let text = "ERR Errors trying to SHUTDOWN. Check logs.";
                    self.engine.core.stats.count_error(text);
                    let _ = write!(conn.out, "-{text}\r\n");
                    let _ = conn.flush();
                }
                return;
            }
        }
        self.shutdown = true;
    }

    /// Waits for the running background save, if any, and reports it to the engine.
    fn wait_bgsave(&mut self) {
        if let Some(bg) = self.bgsave.take() {
            bg.finish(&mut self.engine, self.clock.now());
        }
    }

    /// Cron part of persistence: reports a finished background save, then starts the one a
    /// save point or BGSAVE SCHEDULE asks for.
    fn persistence_cron(&mut self, now: Now) {
        if self
            .bgsave
            .as_ref()
            .is_some_and(crate::persist::BgSave::is_finished)
        {
            self.wait_bgsave();
        }
        if self.bgsave.is_none() && self.engine.take_due_save(now) {
            match crate::persist::BgSave::start(&self.engine, now) {
                Ok(bg) => self.bgsave = Some(bg),
                Err(e) => {
                    warn!("Can't start the background save: {e}");
                    self.engine.save_finished(false, true, now);
                }
            }
        }
    }

    /// The read / run / write cycle of one connection. False: close it now.
    fn pump(&mut self, conn: &mut Conn, batch: &mut Batch) -> io::Result<bool> {
        if self.aof_pending() {
            // Writes wait for this pass's one AOF write (group commit): no reply goes out
            // before it; this connection's output is written at the end of the pass.
            self.deferred.push(conn.handle.0);
        } else {
            self.write_out(conn)?;
        }
        if conn.closing {
            return Ok(conn.out_pending() > 0);
        }
        if conn.out_pending() > OUTPUT_PAUSE {
            conn.read_paused = true;
            return Ok(true);
        }
        conn.read_paused = false;
        let query_max = self.limits.query_buffer_max;
        loop {
            let (n, end) = if conn.pending_input() == 0 {
                self.run_from_scratch(conn, batch)?
            } else {
                self.run_from_conn(conn, batch)?
            };
            self.engine.core.stats.total_net_input_bytes += n as u64;
            if end == FillEnd::Eof {
                conn.closing = true;
            }
            if self.aof_pending() {
                // Replies wait for the pass's one AOF write (and fsync): group commit.
                self.deferred.push(conn.handle.0);
                return Ok(true);
            }
            self.write_out(conn)?;
            if conn.closing {
                return Ok(conn.out_pending() > 0);
            }
            if batch.shutdown {
                return Ok(true);
            }
            if conn.out_pending() > OUTPUT_PAUSE {
                conn.read_paused = true;
                return Ok(true);
            }
            if end == FillEnd::Drained {
                self.note_io(conn);
                return Ok(true);
            }
            if conn.input_stuck(query_max) {
                warn!("Closing client that reached max query buffer length");
                return Ok(false);
            }
        }
    }

    /// With nothing pending, reads into the server's shared buffer and runs the commands from
    /// there; only an incomplete tail is copied into the connection's own buffer. So the many
    /// clients that send whole requests hold no input memory of their own.
    fn run_from_scratch(
        &mut self,
        conn: &mut Conn,
        batch: &mut Batch,
    ) -> io::Result<(usize, FillEnd)> {
        let mut scratch = std::mem::take(&mut self.scratch);
        let result = conn.read_into(&mut scratch);
        if let Ok((n, _)) = result {
            let used = run_commands(
                &mut self.engine,
                conn,
                &scratch[..n],
                &self.clock,
                self.time_commands,
                batch,
            );
            conn.stash(&scratch[used..n]);
        }
        self.scratch = scratch;
        result
    }

    /// With a partial command pending, reads into the connection's buffer behind it and runs
    /// the commands from there.
    fn run_from_conn(
        &mut self,
        conn: &mut Conn,
        batch: &mut Batch,
    ) -> io::Result<(usize, FillEnd)> {
        let result = conn.fill(self.limits.query_buffer_max)?;
        // The buffer leaves the connection for the run (a move, not a copy) so that the
        // decoder and the output buffer can be borrowed beside it.
        let input = std::mem::take(&mut conn.input);
        let pending = &input[conn.in_start..conn.in_end];
        let used = run_commands(
            &mut self.engine,
            conn,
            pending,
            &self.clock,
            self.time_commands,
            batch,
        );
        conn.input = input;
        conn.consume(used);
        Ok(result)
    }

    /// One `write` of the connection's pending output, counted in the stats.
    fn write_out(&mut self, conn: &mut Conn) -> io::Result<()> {
        self.aof_flush();
        let n = conn.flush()?;
        self.engine.core.stats.total_net_output_bytes += n as u64;
        Ok(())
    }

    // ---- The append-only file (see `crate::aof`) ----

    /// Whether propagated writes wait for the AOF.
    #[inline]
    fn aof_pending(&self) -> bool {
        self.aof
            .as_ref()
            .is_some_and(|a| a.needs_flush(&self.engine))
    }

    /// Writes (and under `always` fsyncs) what the engine propagated: before any reply goes out.
    #[inline]
    fn aof_flush(&mut self) {
        if self.aof_pending() {
            if let Some(aof) = self.aof.as_mut() {
                aof.flush(&mut self.engine);
            }
        }
    }

    /// The end of a loop pass: one AOF write for every connection whose replies wait, then
    /// those connections go on (write their replies, read more).
    fn run_deferred(&mut self) {
        if self.deferred.is_empty() {
            return;
        }
        self.aof_flush();
        let mut slots = std::mem::take(&mut self.deferred);
        slots.sort_unstable();
        slots.dedup();
        for &slot in &slots {
            self.flush_and_check(slot);
        }
        for slot in slots {
            self.service(slot);
        }
        self.after_batch();
    }

    /// Acts on the AOF requests of the last commands: BGREWRITEAOF, CONFIG SET appendonly.
    fn after_batch(&mut self) {
        let now = self.clock.now();
        let s = &self.engine.core.aof.status;
        if s.rewrite_scheduled && self.bgsave.is_none() {
            self.engine.core.aof.status.rewrite_requested = true;
        }
        if self.engine.core.aof.status.rewrite_requested {
            match self.aof.as_mut() {
                Some(aof) if !aof.rewriting() => aof.start_rewrite(&mut self.engine, now),
                Some(_) => {}
                None => self.start_detached_rewrite(now),
            }
        }
        if self
            .detached_rewrite
            .as_ref()
            .is_some_and(|(t, _)| t.is_finished())
        {
            self.finish_detached_rewrite();
        }
        let wanted = self.engine.core.config.appendonly;
        if wanted && self.aof.is_none() {
            while self.detached_rewrite.is_some() {
                std::thread::sleep(Duration::from_millis(2));
                if self
                    .detached_rewrite
                    .as_ref()
                    .is_some_and(|(t, _)| t.is_finished())
                {
                    self.finish_detached_rewrite();
                }
            }
            match crate::aof::Aof::open(&mut self.engine, now, false) {
                Ok((aof, _)) => self.aof = Some(aof),
                Err(e) => {
                    warn!("Can't turn the append only file on: {e}");
                    self.engine.core.config.appendonly = false;
                }
            }
        } else if !wanted {
            if let Some(aof) = self.aof.take() {
                aof.close(&mut self.engine, now);
            }
        }
    }

    /// BGREWRITEAOF with the AOF off: a base and a manifest on a thread (see
    /// [`crate::aof::rewrite_detached`]).
    fn start_detached_rewrite(&mut self, now: Now) {
        let s = &mut self.engine.core.aof.status;
        s.rewrite_requested = false;
        s.rewrite_scheduled = false;
        if self.detached_rewrite.is_some() {
            return;
        }
        match crate::aof::rewrite_detached(&self.engine, now) {
            Ok(t) => {
                self.engine.core.aof.status.rewrite_started_ms = Some(now.ms());
                self.detached_rewrite = Some((t, Instant::now()));
            }
            Err(e) => {
                warn!("Can't rewrite append only file in background: {e}");
                self.engine.core.aof.status.last_bgrewrite_ok = false;
            }
        }
    }

    /// Reports the end of a detached rewrite to the engine.
    fn finish_detached_rewrite(&mut self) {
        let Some((t, started)) = self.detached_rewrite.take() else {
            return;
        };
        let result = t
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the rewrite thread panicked")));
        let s = &mut self.engine.core.aof.status;
        s.rewrite_started_ms = None;
        s.last_rewrite_time_s = started.elapsed().as_secs() as i64;
        match result {
            Ok(_) => {
                tracing::info!("Background AOF rewrite finished successfully");
                s.last_bgrewrite_ok = true;
                s.rewrites += 1;
                s.consecutive_failures = 0;
            }
            Err(e) => {
                warn!("Background AOF rewrite failed: {e}");
                s.last_bgrewrite_ok = false;
                s.consecutive_failures += 1;
            }
        }
    }

    /// Copies a connection's buffer sizes into its engine client (for CLIENT LIST).
    fn note_io(&mut self, conn: &Conn) {
        if let Some(c) = self.engine.clients.get_mut(conn.handle) {
            c.io = conn.io_stats();
        }
    }

    /// Closes connection `slot` and unregisters its client.
    fn close(&mut self, slot: usize) {
        let Some(mut conn) = self.conns.get_mut(slot).and_then(Option::take) else {
            return;
        };
        let _ = self.poll.registry().deregister(&mut conn.stream);
        if let Some(c) = self.engine.clients.get(conn.handle) {
            debug!("Client closed connection id={}", c.id);
        }
        self.engine.disconnect(conn.handle);
    }

    /// Closes every client CLIENT KILL marked, after one last write of its output.
    fn close_killed(&mut self) {
        let killed: Vec<Handle> = self
            .engine
            .clients
            .iter()
            .filter(|(_, c)| c.killed)
            .map(|(h, _)| h)
            .collect();
        for h in killed {
            if let Some(conn) = self.conns.get_mut(h.0).and_then(Option::as_mut) {
                let _ = conn.flush();
            }
            self.close(h.0);
        }
    }

    /// The periodic work: engine cron (active expiry), host facts, idle clients, buffer stats.
    fn cron(&mut self) {
        let now = self.clock.now();
        self.engine.cron(now);
        self.persistence_cron(now);
        if let Some(aof) = self.aof.as_mut() {
            aof.cron(&mut self.engine, now);
        }
        self.after_batch();
        let core = &mut self.engine.core;
        crate::host::refresh(&mut core.host);
        core.used_memory_peak = core.used_memory_peak.max(core.host.used_memory);
        self.clients_cron(now);
        let hz = u64::from(self.engine.core.config.hz.clamp(1, 500));
        let period = Duration::from_micros(1_000_000 / hz);
        self.next_cron += period;
        let now_i = Instant::now();
        if self.next_cron <= now_i {
            self.next_cron = now_i + period;
        }
    }

    /// Closes clients idle past `timeout`, refreshes their IoStats, releases idle buffers.
    fn clients_cron(&mut self, now: Now) {
        let timeout_ms = self.engine.core.config.timeout_s.saturating_mul(1000);
        let mut idle = Vec::new();
        for conn in self.conns.iter_mut().flatten() {
            conn.release_idle_buffers();
            let Some(c) = self.engine.clients.get_mut(conn.handle) else {
                continue;
            };
            c.io = conn.io_stats();
            if timeout_ms > 0 && now.ms().saturating_sub(c.last_interaction_ms) > timeout_ms {
                idle.push(conn.handle.0);
            }
        }
        for slot in idle {
            debug!("Closing idle client");
            self.close(slot);
        }
    }

    /// Graceful end: one last write to every client, then release the sockets' files.
    fn finish(&mut self) {
        for conn in self.conns.iter_mut().flatten() {
            let _ = conn.flush();
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

/// Decodes and runs every complete command at the start of `input` (the connection's pending
/// bytes), stopping early when the connection must close, the output is over the pause bound,
/// or the server must act. Returns the bytes used.
fn run_commands(
    engine: &mut Engine,
    conn: &mut Conn,
    input: &[u8],
    clock: &Clock,
    timing: bool,
    batch: &mut Batch,
) -> usize {
    let h = conn.handle;
    let mut used = 0;
    // A blocked client's further commands wait (buffered) until it is served or times out.
    while used < input.len()
        && !conn.closing
        && conn.out_pending() <= OUTPUT_PAUSE
        && !engine.is_blocked(h)
    {
        let authenticated = engine.clients.get(h).is_some_and(|c| c.authenticated);
        let frame = match conn.decoder.decode(&input[used..], authenticated) {
            Ok(Some(frame)) => frame,
            Ok(None) => break,
            Err(e) => {
                debug!("Protocol error ({e}) from client");
                let _ = write!(conn.out, "-ERR {e}\r\n");
                conn.closing = true;
                break;
            }
        };
        used += frame.consumed;
        let start_us = monotonic_us();
        let protocol = engine.protocol(h);
        let mut sink = RespWriter::new(&mut conn.out, protocol);
        let outcome = engine.execute(h, &frame.argv, clock.at(start_us), &mut sink);
        if timing {
            let usec = monotonic_us().saturating_sub(start_us);
            engine.command_timed(h, &frame.argv, usec, clock.now());
        }
        if !apply_outcome(engine, conn, outcome, batch, clock.now()) {
            break;
        }
    }
    used
}

/// Acts on a command's [`Outcome`]; false stops the batch.
fn apply_outcome(
    engine: &mut Engine,
    conn: &mut Conn,
    outcome: Outcome,
    batch: &mut Batch,
    now: Now,
) -> bool {
    match outcome {
        Outcome::Continue => true,
        Outcome::Close => {
            conn.closing = true;
            false
        }
        Outcome::KillClients => {
            // The others close after this batch; this one goes on unless it killed itself.
            batch.kill = true;
            let killed_self = engine.clients.get(conn.handle).is_some_and(|c| c.killed);
            conn.closing |= killed_self;
            !killed_self
        }
        Outcome::Shutdown { save } => {
            batch.shutdown = true;
            batch.shutdown_save = save.unwrap_or(!engine.core.config.save.is_empty());
            false
        }
        Outcome::Save { background: false } => {
            save_command(engine, conn, now);
            true
        }
        Outcome::Save { background: true } => {
            engine.save_started(true, now);
            match crate::persist::BgSave::start(engine, now) {
                Ok(bg) => batch.bgsave = Some(bg),
                Err(e) => {
                    warn!("Can't start the background save: {e}");
                    engine.save_finished(false, true, now);
                }
            }
            true
        }
        Outcome::Sleep(us) => {
            // DEBUG SLEEP blocks the whole server, as in Redis.
            std::thread::sleep(Duration::from_micros(us));
            true
        }
        Outcome::RewriteConfig => {
            rewrite_config(engine, conn);
            true
        }
        Outcome::AclFile { save } => {
            if crate::acl::acl_file_command(engine, conn, save) {
                batch.kill = true;
                let killed_self = engine.clients.get(conn.handle).is_some_and(|c| c.killed);
                conn.closing |= killed_self;
                return !killed_self;
            }
            true
        }
        // Its reply comes later, through `Engine::take_wakeups`.
        Outcome::Blocked => false,
    }
}

/// SAVE: writes the snapshot now and replies `+OK`, or `-ERR` (the reason goes to the log).
fn save_command(engine: &mut Engine, conn: &mut Conn, now: Now) {
    use kayvee_engine::ReplySink;
    let ok = crate::persist::save_sync(engine, now).is_ok();
    let mut sink = RespWriter::new(&mut conn.out, engine.protocol(conn.handle));
    if ok {
        sink.ok();
    } else {
        engine.core.stats.count_error("ERR");
        sink.error("ERR");
    }
}

/// CONFIG REWRITE: the engine rewrites the file's text, the shell writes it and replies.
fn rewrite_config(engine: &mut Engine, conn: &mut Conn) {
    use kayvee_engine::ReplySink;
    let result = match engine.rewrite_config() {
        Ok((path, text)) => write_atomically(&path, &text)
            .map_err(|e| format!("ERR Rewriting config file: {}", os_error_text(&e))),
        Err(e) => Err(e.to_string()),
    };
    let mut sink = RespWriter::new(&mut conn.out, engine.protocol(conn.handle));
    match result {
        Ok(()) => {
            tracing::info!("CONFIG REWRITE executed with success.");
            sink.ok();
        }
        Err(text) => {
            warn!("CONFIG REWRITE failed: {text}");
            engine.core.stats.count_error(&text);
            sink.error(&text);
        }
    }
}

/// Replaces `path` with `text` atomically: a temporary file beside it, fsync, rename.
pub(crate) fn write_atomically(path: &str, text: &str) -> io::Result<()> {
    let tmp = format!("{path}.tmp-{}", std::process::id());
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// An OS error as `strerror` words it (`Permission denied`), without Rust's `(os error 13)`.
pub(crate) fn os_error_text(e: &io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// `127.0.0.1:41358` or the socket path, for the log.
fn describe_transport(t: &Transport) -> String {
    match t {
        Transport::Tcp { addr, .. } => addr.clone(),
        Transport::Unix { path } => format!("connection on {path}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_files_are_replaced_whole_and_errors_read_like_strerror() {
        let path = std::env::temp_dir().join(format!("kv-rewrite-{}.conf", std::process::id()));
        let p = path.to_str().unwrap();
        std::fs::write(p, "port 1\nold line\n").unwrap();
        write_atomically(p, "port 2\n").unwrap();
        assert_eq!(std::fs::read_to_string(p).unwrap(), "port 2\n");
        std::fs::remove_file(p).unwrap();
        let e = write_atomically("/nonexistent-dir/k.conf", "x").unwrap_err();
        assert_eq!(os_error_text(&e), "No such file or directory");
    }

    #[test]
    fn clock_adds_monotonic_time_to_the_wall_reading() {
        let c = Clock {
            unix_us: 1_000_000,
            mono_us: 50,
        };
        assert_eq!(c.at(5_050).unix_us, 1_005_000);
        // A reading before the wakeup's does not move time backwards.
        assert_eq!(c.at(10).unix_us, 1_000_000);
        assert!(Clock::read().unix_us > 1_600_000_000_000_000);
        let a = monotonic_us();
        std::thread::sleep(Duration::from_millis(2));
        assert!(monotonic_us() - a >= 2000);
    }
}
