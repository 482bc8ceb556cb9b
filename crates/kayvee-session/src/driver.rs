//! The driver: the engine and every connection's [`Session`], and the one order in which
//! bytes become commands, commands become replies, and replies owed to other clients are
//! delivered.
//!
//! A shell's loop pass, whatever the shell:
//! 1. for each readable connection, while [`Driver::wants_input`]: read, then
//!    [`Driver::receive`] (or [`Driver::receive_eof`]); the commands run at once;
//! 2. carry out [`Driver::next_request`]s and [`Driver::complete`] them;
//! 3. [`Driver::poll`] when [`Driver::poll_at`] is due (cron, blocked clients' timeouts);
//! 4. make durable what must be before replies go out (the AOF), then for each connection of
//!    [`Driver::take_dirty`]: [`Driver::flush`] into its socket, and close it or read it
//!    again as the answer says;
//! 5. sleep until readiness or [`Driver::poll_at`] (after [`Driver::sleep_timeout_us`]'s spin).
//!
//! Delivery order (after every command): pub/sub messages (keyspace notifications, tracking
//! invalidations and MONITOR lines travel the same way) first, then blocked clients' wakeups;
//! a woken client's reply is followed at once by the commands it pipelined behind the blocking
//! one, which may publish or wake others in turn: repeated until nothing is left.

use crate::busy::BusyPoll;
pub use crate::clock::Clock;
use crate::session::{Closing, Resized, Session, Upstream, OUTPUT_PAUSE};
use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::rc::Rc;
use alloc::string::String;
use alloc::vec::Vec;
use kayvee_engine::config::OutputLimit;
use kayvee_engine::outcome::{LinkError, MigrateJob};
use kayvee_engine::repl::ReplicaState;
use kayvee_engine::{ConnInfo, Engine, Handle, Now, Outcome, Protocol, Reply, ReplySink};
use kayvee_resp::{Limits, ProtocolError, RespWriter};

/// Work only the shell can do; the connection's further commands wait until
/// [`Driver::complete`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// SHUTDOWN, or the shutdown a signal asked for once the cron starts it (then with a
    /// handle of no connection, see [`kayvee_engine::Engine::ask_shutdown`]): save first if
    /// the flags' `save` says so (`None`: per the configured save points), then stop. On
    /// failure (without FORCE), call [`kayvee_engine::Engine::shutdown_failed`] and complete
    /// with `Answer::Error("ERR Errors trying to SHUTDOWN. Check logs.")`.
    Shutdown(kayvee_engine::ShutdownFlags),
    /// SAVE (`background` false: answer `Ok` or `Error("ERR")` once written) or BGSAVE (already
    /// answered: start the background save and answer `Nothing`).
    Save {
        /// BGSAVE or a save point.
        background: bool,
    },
    /// CONFIG REWRITE: write [`Engine::rewrite_config`]'s text, answer `Ok` or the error.
    RewriteConfig,
    /// ACL LOAD (`save` false) or ACL SAVE: do the file work, answer `Ok` or the error.
    AclFile {
        /// ACL SAVE.
        save: bool,
    },
    /// DEBUG LOADAOF: write out the AOF, empty the dataset, load it from the AOF files again;
    /// answer `Ok` (a file that does not load ends the process, as in Redis).
    LoadAof,
    /// DEBUG RELOAD NOSAVE: load `dir/dbfilename` in place of the dataset, or over it
    /// (`flush` false: NOFLUSH; `merge`: loaded keys and libraries replace existing ones, else
    /// they are an error); answer `Ok`, or the load error (the dataset kept).
    LoadRdb {
        /// Empty the dataset first.
        flush: bool,
        /// MERGE.
        merge: bool,
    },
    /// DEBUG SEGFAULT: die as a crashing server does (its crash report, then the signal's
    /// end); never answered.
    Crash,
    /// MIGRATE: connect to the job's target (or reuse the link cached under its name), send
    /// its bytes, read its replies (each step within its timeout; one retry on a fresh
    /// connection when a cached link fails before any reply, as Redis); answer
    /// `Answer::Migrate`. After each request and cron, keep only the links
    /// [`Engine::migrate_links`] names.
    Migrate(MigrateJob),
    /// CONFIG SET changed `port` or `bind`: listen on the configured addresses instead of the
    /// previous ones; answer `Ok`, or (the new ones could not all be bound: put the previous
    /// values back in the configuration, keep the old listeners) Redis's error,
    /// `ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this
    /// port` or `... argument 'bind') - Failed to bind to specified addresses.`.
    Rebind {
        /// The port listened on before.
        previous_port: u16,
        /// The `bind` addresses before.
        previous_bind: Vec<String>,
    },
}

/// The shell's answer to a [`Request`]: the reply the client gets.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// No reply (BGSAVE was answered when it ran).
    Nothing,
    /// `+OK`.
    Ok,
    /// An error reply with this text (counted in INFO errorstats).
    Error(String),
    /// MIGRATE's exchange: the target's replies, in order, and the link's failure if it cut
    /// them short. The engine answers.
    Migrate {
        /// The replies read.
        replies: Vec<Reply>,
        /// Why fewer than asked were read.
        error: Option<LinkError>,
    },
}

/// What the shell must do with a connection after [`Driver::flush`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flushed {
    /// Keep it.
    Open,
    /// Its output fell below the pause mark: its buffered commands ran; read its socket again
    /// (an edge-triggered shell gets no new event for bytes that waited meanwhile).
    ReadAgain,
    /// Close the socket and call [`Driver::close`].
    Close,
}

/// What [`Driver::poll`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Polled {
    /// The cron ran: the shell's own periodic work (persistence, host facts) is due too.
    pub cron: bool,
}

/// Something for the shell's log (Redis logs the same events).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Notice {
    /// A client broke the protocol; its connection closes after the error reply.
    ProtocolError {
        /// The client's id.
        id: u64,
        /// The error.
        error: ProtocolError,
    },
    /// "Closing client that reached max query buffer length".
    QueryBufferLimit {
        /// The client's id.
        id: u64,
    },
    /// "Client id=N scheduled to be closed ASAP for overcoming of output buffer limits."
    OutputLimit {
        /// The client's id.
        id: u64,
    },
    /// "Closing idle client".
    IdleTimeout {
        /// The client's id.
        id: u64,
    },
    /// "Evicting client": the clients' memory passed `maxmemory-clients` and this one was
    /// the biggest that may be evicted.
    ClientEvicted {
        /// The client's id.
        id: u64,
        /// Its `tot-mem`.
        mem: usize,
    },
    /// The link to this server's primary: a step of the sync, or why it failed (Redis's
    /// words).
    Replication(String),
    /// A warning in Redis's words (a replica of this server that made a reply, which is
    /// dropped, and is disconnected).
    Warning(String),
}

/// The part of a client's pending output the output limits do not count: Redis's static
/// reply buffer (`PROTO_REPLY_CHUNK_BYTES`), which its limits never see.
const REPLY_BUFFER_STATIC: usize = 16 * 1024;

/// Most counted output bytes a client that has not authenticated may have pending.
const UNAUTHENTICATED_OUTPUT_MAX: u64 = 1024;

/// Notices kept for a shell that does not drain them.
const NOTICES_MAX: usize = 256;

/// The Redis connection driver.
pub struct Driver {
    pub(crate) engine: Engine,
    /// Sessions by handle slot.
    pub(crate) sessions: Vec<Option<Session>>,
    /// Slots with output to write or a close to carry out, in the order they became so.
    dirty: Vec<usize>,
    /// Requests for the shell, oldest first.
    requests: VecDeque<(Handle, Request)>,
    notices: Vec<Notice>,
    /// When the next cron is due (unix us; 0: at the first poll).
    next_cron_us: u64,
    /// Whether command durations are measured (two clock readings per command).
    pub time_commands: bool,
    busy: BusyPoll,
    /// The memory of the clients client eviction counts (each session's `counted_mem`).
    clients_mem: usize,
    /// The clock reading that ended the last command run, when nothing ran after it (a
    /// batch's end needs no reading of its own).
    last_reading: Option<Now>,
    /// What a busy script left for after it (see [`crate::wait::Left`]). Kept, empty,
    /// between commands.
    script_left: crate::wait::Left,
    /// Loop passes so far (each [`Driver::after_wait`] starts one).
    pass: u64,
    /// The loop's time full syncs may take ([`crate::replicas::Pace`]), and when one that
    /// stopped for want of it, its replica ready for more, goes on ([`Driver::poll`]; unix
    /// us, `u64::MAX`: none).
    sync_pace: crate::replicas::Pace,
    syncs_held_until: u64,
    /// Connections a command closed go first in the next write pass ([`Driver::closes_first`]).
    closes_first: bool,
    /// The shell writes full syncs through files ([`Driver::enable_file_syncs`]).
    pub(crate) file_syncs: bool,
    /// The background save disk-based full syncs wait for (see `crate::filesync`).
    pub(crate) replica_save: Option<crate::replicas::ReplicaSave>,
}

/// How much of the stream kept for a replica whose full sync ended goes into its output at once.
const STREAM_PIECE: usize = 64 * 1024;

/// Bytes one connection may hand over in a loop pass before the others get theirs: a client
/// that writes faster than its commands run (a deep pipeline, a big upload), or a primary
/// streaming a backlog to this replica, would otherwise keep a shell that reads until the
/// socket is empty on that one connection, every other client waiting. Redis reads 16 KiB a
/// client per event loop turn; a pass here costs more than a turn, so it takes more.
pub const READ_SHARE_BYTES: usize = 256 * 1024;

impl Driver {
    /// A driver around `engine`, with no connection yet.
    pub fn new(engine: Engine) -> Self {
        Driver {
            engine,
            sessions: Vec::new(),
            dirty: Vec::new(),
            requests: VecDeque::new(),
            notices: Vec::new(),
            next_cron_us: 0,
            time_commands: true,
            busy: BusyPoll::default(),
            clients_mem: 0,
            last_reading: None,
            script_left: Default::default(),
            pass: 0,
            sync_pace: Default::default(),
            syncs_held_until: u64::MAX,
            closes_first: false,
            file_syncs: false,
            replica_save: None,
        }
    }

    /// The engine.
    #[inline]
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The engine, to change (persistence, host facts, loading).
    #[inline]
    pub fn engine_mut(&mut self) -> &mut Engine {
        &mut self.engine
    }

    /// The engine, given back.
    pub fn into_engine(self) -> Engine {
        self.engine
    }

    // ---- Connections ----

    /// Admits a new connection, or refuses it with the bytes to send before closing it
    /// (`maxclients` reached, protected mode).
    pub fn connect(&mut self, info: ConnInfo, now: Now) -> Result<Handle, &'static str> {
        let h = self.engine.admit(info, now)?;
        let session = Session::new(h, limits(&self.engine));
        self.install(session);
        Ok(h)
    }

    /// Puts a new connection's session in its slot.
    fn install(&mut self, session: Session) {
        let slot = session.handle.0;
        if self.sessions.len() <= slot {
            self.sessions.resize_with(slot + 1, || None);
        }
        self.sessions[slot] = Some(session);
        self.account(slot);
    }

    /// Forgets a connection the shell closed (for any reason).
    pub fn close(&mut self, h: Handle) {
        if let Some(s) = self.sessions.get_mut(h.0).and_then(Option::take) {
            self.clients_mem -= s.counted_mem;
            self.requests.retain(|(r, _)| *r != s.handle);
            if let Some(upstream) = &s.upstream {
                self.upstream_closed(upstream);
            }
            let replica = self.engine.core.repl.is_replica(s.handle);
            self.engine.disconnect(s.handle);
            if replica {
                self.note_replica_output();
            }
            if let Some(sync) = &s.sync {
                let waited_for_file = sync.awaits_file();
                self.pin_backlog();
                if waited_for_file {
                    self.file_sync_left();
                }
            }
        }
    }

    /// Every open connection's handle.
    pub fn handles(&self) -> impl Iterator<Item = Handle> + '_ {
        self.sessions.iter().flatten().map(|s| s.handle)
    }

    /// Whether the shell should read connection `h` now: false while it closes, waits for a
    /// request, or has more output pending than [`OUTPUT_PAUSE`] (then [`Driver::flush`]
    /// says when to read again).
    pub fn wants_input(&mut self, h: Handle) -> bool {
        let pause = output_pause(&self.engine);
        let Some(s) = self.session_mut(h) else {
            return false;
        };
        if s.closing != Closing::No || s.awaiting {
            return false;
        }
        s.read_paused = !s.pause_lifted && s.out_pending() > pause;
        !s.read_paused
    }

    /// Whether connection `h` handed over its share of this loop pass
    /// ([`READ_SHARE_BYTES`]): a shell that reads until the socket is empty stops there and
    /// reads it again in the next pass, after the other connections.
    pub fn read_share_spent(&self, h: Handle) -> bool {
        self.sessions
            .get(h.0)
            .and_then(Option::as_ref)
            .is_some_and(|s| s.read_in_pass.0 == self.pass && s.read_in_pass.1 >= READ_SHARE_BYTES)
    }

    /// Whether connection `h` is in the middle of a big argument it announced (32 KiB or
    /// more): a shell that stops reading at a short read should read once more, as the rest
    /// is usually on its way (Redis reads the whole remainder of such an argument at once).
    pub fn awaits_big_argument(&self, h: Handle) -> bool {
        self.sessions
            .get(h.0)
            .and_then(Option::as_ref)
            .is_some_and(|s| s.handle == h && s.want > s.pending_input())
    }

    /// The room connection `h`'s next read goes into: the connection's own query buffer,
    /// behind what is pending (at least 16 KiB, or the rest of an announced big argument, as
    /// Redis reads). The shell reads into it and says how much with [`Driver::received`].
    /// None: no such connection.
    pub fn read_buffer(&mut self, h: Handle) -> Option<&mut [u8]> {
        Some(self.session_mut(h)?.read_space())
    }

    /// `n` bytes were read into [`Driver::read_buffer`]'s room: as [`Driver::receive`], without
    /// a copy.
    pub fn received(&mut self, h: Handle, n: usize, clock: &dyn Clock) {
        let slot = h.0;
        let Driver {
            sessions,
            busy,
            engine,
            ..
        } = self;
        let Some(s) = sessions
            .get_mut(slot)
            .and_then(Option::as_mut)
            .filter(|s| s.handle == h)
        else {
            return;
        };
        s.read_in_pass = match s.read_in_pass {
            (pass, bytes) if pass == self.pass => (pass, bytes + n),
            _ => (self.pass, n),
        };
        if s.upstream.is_some() || s.closing != Closing::No {
            // The link to the primary takes its bytes apart from the query buffer (the
            // handshake reads the RDB payload raw); a closing connection drops them.
            let data = s.input[s.in_end..s.in_end + n].to_vec();
            self.receive(h, &data, clock);
            return;
        }
        s.idle_since_cron = false;
        s.filled(n);
        busy.note_read(&mut s.active_epoch);
        engine.core.stats.total_net_input_bytes += n as u64;
        self.last_reading = None;
        self.run_lent(slot, clock, false);
        let now = self.last_reading.take().unwrap_or_else(|| clock.now());
        self.after_batch(slot, now);
    }

    /// Bytes read from connection `h`: runs every command they complete (with what was
    /// pending), then delivers what those commands owe other clients.
    pub fn receive(&mut self, h: Handle, data: &[u8], clock: &dyn Clock) {
        let Some(s) = self.session_mut(h) else {
            return;
        };
        s.idle_since_cron = false;
        let (open, upstream, pending) = (
            s.closing == Closing::No,
            s.upstream.is_some(),
            s.pending_input(),
        );
        self.engine.core.stats.total_net_input_bytes += data.len() as u64;
        if !open {
            return;
        }
        let slot = h.0;
        if upstream {
            self.receive_upstream(slot, data, clock);
            return;
        }
        self.last_reading = None;
        if let Some(s) = self.sessions[slot].as_mut() {
            self.busy.note_read(&mut s.active_epoch);
        }
        if pending == 0 {
            // The common case: whole commands, run from the shell's buffer without a copy.
            let used = self.run_commands(slot, data, clock, false);
            let max = limits(&self.engine).query_buffer_max;
            let s = self.sessions[slot]
                .as_mut()
                .expect("sessions stay while running");
            s.stash(&data[used..]);
            if s.pending_input() > max {
                self.check_query_limit(slot);
            }
        } else {
            let s = self.sessions[slot].as_mut().expect("looked up above");
            s.append(data);
            self.run_buffered(slot, clock, false);
            self.check_query_limit(slot);
        }
        let now = self.last_reading.take().unwrap_or_else(|| clock.now());
        self.after_batch(slot, now);
    }

    /// [`Driver::receive`] for the link to this server's primary.
    #[inline(never)]
    fn receive_upstream(&mut self, slot: usize, data: &[u8], clock: &dyn Clock) {
        let s = self.sessions[slot]
            .as_mut()
            .expect("looked up by the caller");
        let now = clock.now();
        match s.upstream.as_mut() {
            None => return,
            Some(Upstream::Loading(load)) => {
                // The stream that follows the payload waits for the load.
                load.rest.extend_from_slice(data);
                self.engine.primary_io(now, None);
                return;
            }
            Some(_) => {}
        }
        if matches!(s.upstream, Some(Upstream::Handshake(_))) {
            let Some(rest) = self.receive_handshake(slot, data, now) else {
                self.after_batch(slot, now);
                return;
            };
            let s = self.sessions[slot].as_mut().expect("looked up above");
            s.append(&rest);
            self.run_buffered(slot, clock, false);
            self.after_batch(slot, now);
            return;
        }
        self.engine.primary_io(now, None);
        let s = self.sessions[slot].as_mut().expect("looked up above");
        if s.pending_input() == 0 {
            let used = self.run_commands(slot, data, clock, false);
            let s = self.sessions[slot].as_mut().expect("sessions stay");
            s.stash(&data[used..]);
        } else {
            s.append(data);
            self.run_buffered(slot, clock, false);
        }
        self.note_read_ahead(slot);
        self.after_batch(slot, now);
    }

    /// The peer closed its side: the connection closes once its pending replies are written.
    pub fn receive_eof(&mut self, h: Handle) {
        if let Some(s) = self.session_mut(h) {
            if s.closing == Closing::No {
                s.closing = Closing::AfterReply;
                // A closing client counts no more for client eviction (Redis frees it at the
                // EOF): a new client in the same pass must not be evicted for its memory.
                self.account(h.0);
            }
            let Some(s) = self.session_mut(h) else {
                return;
            };
            // The link to the primary is down at once, not at the close after this pass:
            // INFO and ROLE in the same pass already say so, as Redis frees its master then.
            if let Some(upstream) = s.upstream.take() {
                self.upstream_closed(&upstream);
                self.engine.primary_link_lost(h);
                if let Some(s) = self.session_mut(h) {
                    s.upstream = Some(upstream);
                }
            }
            self.mark_dirty(h.0);
        }
    }

    /// The socket of connection `h` can take bytes again: it is flushed in the next write pass
    /// if it has output pending.
    pub fn writable(&mut self, h: Handle) {
        if let Some(s) = self.session_mut(h) {
            if s.out_pending() > 0 || s.closing != Closing::No {
                self.mark_dirty(h.0);
            }
        }
    }

    /// Moves the connections with output to write (or a close to carry out) into `into`.
    pub fn take_dirty(&mut self, into: &mut Vec<Handle>) {
        self.closes_first = false;
        for slot in self.dirty.drain(..) {
            if let Some(s) = self.sessions[slot].as_mut() {
                s.dirty = false;
                // A shell that wrote the connection right after its read left nothing to do.
                if s.out_pending() > 0 || s.closing != Closing::No || s.read_paused {
                    into.push(s.handle);
                }
            }
        }
    }

    /// Whether some connection has output to write.
    pub fn has_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }

    /// Hands connection `h`'s pending output to `write` (one call; it returns the bytes it
    /// took), then applies the output limit and the connection's closing. A `write` error
    /// comes back as is: the shell closes the connection.
    pub fn flush<E>(
        &mut self,
        h: Handle,
        clock: &dyn Clock,
        write: impl FnOnce(&[u8]) -> Result<usize, E>,
    ) -> Result<Flushed, E> {
        let Driver {
            engine,
            sessions,
            dirty,
            clients_mem,
            ..
        } = self;
        let Some(s) = sessions
            .get_mut(h.0)
            .and_then(Option::as_mut)
            .filter(|s| s.handle == h)
        else {
            return Ok(Flushed::Close);
        };
        if s.closing == Closing::Now {
            return Ok(Flushed::Close);
        }
        let syncing = s.sync.is_some();
        if s.out_pending() > 0 {
            let n = write(&s.out[s.out_sent..])?;
            s.written(n);
            if n > 0 {
                // The peer reads: a pause goes on waiting for it.
                s.paused_quiet_since_ms = None;
            }
            if s.out_pending() == 0 {
                s.pause_lifted = false;
                // Under a memory limit, and for a replica, an empty output keeps no more than
                // Redis's fixed reply buffer: capacity kept for nothing would count as used
                // memory and make keys go, or hold a second copy of a burst of the stream the
                // backlog already holds (Redis frees its reply blocks once they are written).
                if s.out.capacity() > REPLY_BUFFER_STATIC
                    && (engine.core.config.maxmemory != 0 || engine.core.repl.is_replica(h))
                {
                    s.out = Vec::new();
                }
            }
            engine.core.stats.total_net_output_bytes += n as u64;
            if engine.core.config.maxmemory_clients_bytes() > 0 {
                // Client eviction counts the output that is left.
                measure(engine, clients_mem, s);
            }
        }
        // What a replica took shortens the stream it lags by (INFO reads it).
        let replica = !engine.core.repl.replicas.is_empty() && engine.core.repl.is_replica(h);
        if syncing
            || replica
            || s.out_pending() > REPLY_BUFFER_STATIC
            || s.closing != Closing::No
            || s.read_again
            || s.read_paused
        {
            return self.flush_rest(h, clock, syncing, replica);
        }
        // `over_output_limit`'s test for output that counts against no limit.
        s.soft_since_ms = None;
        if s.out_pending() == 0 && s.dirty && dirty.last() == Some(&h.0) {
            // Written right after its batch: the write pass has nothing left to do for it
            // (`take_dirty` would pass over it).
            dirty.pop();
            s.dirty = false;
        }
        Ok(Flushed::Open)
    }

    /// [`Driver::flush`] after the write, for a connection that is a replica, syncs, has
    /// output that counts against a limit, closes, or has its reading paused.
    #[inline(never)]
    fn flush_rest<E>(
        &mut self,
        h: Handle,
        clock: &dyn Clock,
        syncing: bool,
        replica: bool,
    ) -> Result<Flushed, E> {
        // The clock is read only when something needs the time (most flushes do not).
        let mut now = None;
        if syncing {
            self.pump_sync(h.0, clock);
        }
        if replica {
            self.note_replica_output();
        }
        if self.over_output_limit(h.0, || *now.get_or_insert_with(|| clock.now())) {
            return Ok(Flushed::Close);
        }
        let s = self.sessions[h.0].as_mut().expect("looked up above");
        match s.closing {
            Closing::AfterReply if s.out_pending() == 0 => return Ok(Flushed::Close),
            _ => {}
        }
        let lifted = core::mem::take(&mut s.read_again);
        if lifted || s.read_paused && s.out_pending() <= output_pause(&self.engine) {
            s.read_paused = false;
            self.run_buffered(h.0, clock, false);
            self.after_batch(h.0, now.unwrap_or_else(|| clock.now()));
            return Ok(Flushed::ReadAgain);
        }
        Ok(Flushed::Open)
    }

    /// Connection `h`'s pending output, for a shell's last write at shutdown.
    pub fn pending_output(&self, h: Handle) -> &[u8] {
        self.sessions
            .get(h.0)
            .and_then(Option::as_ref)
            .map_or(&[], |s| &s.out[s.out_sent..])
    }

    // ---- Requests for the shell ----

    /// Whether requests wait for the shell.
    #[inline]
    pub fn has_requests(&self) -> bool {
        !self.requests.is_empty()
            || self
                .replica_save
                .as_ref()
                .is_some_and(|s| s.snapshot.is_some())
    }

    /// The oldest request waiting for the shell.
    pub fn next_request(&mut self) -> Option<(Handle, Request)> {
        self.requests.pop_front()
    }

    /// The shell carried out `h`'s request: sends `answer` and runs the commands that waited
    /// behind it.
    pub fn complete(&mut self, h: Handle, answer: Answer, clock: &dyn Clock) {
        let protocol = self.engine.protocol(h);
        let Some(s) = self.session_mut(h) else {
            return;
        };
        s.awaiting = false;
        let answer = if core::mem::take(&mut s.answered) {
            Answer::Nothing
        } else {
            answer
        };
        let mut sink = RespWriter::new(&mut s.out, protocol);
        match &answer {
            Answer::Nothing => {}
            Answer::Ok => sink.ok(),
            Answer::Error(text) => {
                sink.error(text);
                self.engine.core.stats.count_error(text);
            }
            Answer::Migrate { replies, error } => {
                let out = &mut self.sessions[h.0].as_mut().expect("looked up above").out;
                let mut sink = RespWriter::new(out, protocol);
                let now = clock.now();
                self.engine
                    .migrate_finished(h, replies, *error, now, &mut sink);
            }
        }
        // ACL LOAD may have logged users out.
        self.close_killed(h);
        self.run_buffered(h.0, clock, false);
        self.after_batch(h.0, clock.now());
    }

    /// What the log should say, oldest first.
    pub fn take_notices(&mut self) -> Vec<Notice> {
        // Log lines commands left (SHUTDOWN ABORT's) go out with the same pass's replies.
        self.take_repl_notes();
        core::mem::take(&mut self.notices)
    }

    // ---- Time ----

    /// Delays the first (or next) cron to `unix_us` (a booting unikernel keeps its code off
    /// the way to the first answer).
    pub fn defer_cron(&mut self, unix_us: u64) {
        self.next_cron_us = unix_us;
    }

    /// When (unix us) [`Driver::poll`] must run next: the cron at `hz`, or just past the
    /// earliest blocked client's (or CLIENT PAUSE's) deadline; now while the primary's
    /// payload loads.
    pub fn poll_at(&self) -> u64 {
        if self.loading_link().is_some() {
            // The primary's payload loads a slice each pass ([`Driver::poll`]).
            return 0;
        }
        // A held full sync goes on when the loop owes it time again.
        let mut at = self.next_cron_us.min(self.syncs_held_until);
        if let Some(ms) = self.engine.next_block_deadline() {
            // The engine times a client out once the clock's milliseconds are past it.
            at = at.min((ms + 1) * 1000);
        }
        at
    }

    /// Runs what is due: the cron (engine cron, idle clients, buffers, I/O fields), blocked
    /// clients' timeouts, and the delivery of what they owe; then a slice of the primary's
    /// payload while it loads.
    pub fn poll(&mut self, clock: &dyn Clock) -> Polled {
        let now = clock.now();
        let mut polled = Polled::default();
        if now.unix_us >= self.next_cron_us {
            self.cron(clock);
            let hz = u64::from(self.engine.core.config.hz.clamp(1, 500));
            let period_us = 1_000_000 / hz;
            self.next_cron_us = if self.next_cron_us + period_us <= now.unix_us {
                now.unix_us + period_us
            } else {
                self.next_cron_us + period_us
            };
            polled.cron = true;
        }
        self.expire_blocked(clock);
        if let Some(slot) = self.loading_link() {
            self.step_load(slot, clock);
        }
        if now.unix_us >= self.syncs_held_until {
            // A full sync waited for the loop's time, its replica ready for more.
            self.syncs_held_until = u64::MAX;
            self.syncs_cron(clock);
        }
        polled
    }

    /// The cron, now (whether due or not): the engine's (active expiry, eviction, blocked
    /// clients' timeouts), then idle clients, buffers and CLIENT LIST's I/O fields.
    pub fn cron(&mut self, clock: &dyn Clock) {
        let now = clock.now();
        if self.engine.cron_timed(now, &mut || clock.now()) {
            self.close_killed(Handle(usize::MAX));
        }
        if let Some(flags) = self.engine.take_due_shutdown(now) {
            // No client waits for a signal's shutdown: [`Driver::complete`] finds none.
            self.requests
                .push_back((Handle(usize::MAX), Request::Shutdown(flags)));
        }
        self.take_repl_notes();
        self.clients_cron(now);
        self.note_replica_output();
        self.lift_stalled_pauses(now);
        self.upstream_cron(now);
        self.syncs_cron(clock);
        let _ = self.deliver(clock, false);
    }

    /// Answers the blocked clients (and CLIENT PAUSE's held commands) whose deadline passed.
    pub fn expire_blocked(&mut self, clock: &dyn Clock) {
        if self.engine.next_block_deadline().is_some() {
            self.engine.expire_blocked(clock.now());
        }
        let _ = self.deliver(clock, false);
    }

    /// How long the shell may sleep, in us, when it would otherwise sleep `wanted_us`: zero
    /// while the adaptive busy poll spins (see [`BusyPoll`]).
    pub fn sleep_timeout_us(&mut self, now: Now, wanted_us: u64) -> u64 {
        if self.has_dirty() || !self.requests.is_empty() {
            return 0;
        }
        self.busy.timeout_us(now.unix_us, wanted_us)
    }

    /// How long the shell should nap (sleep briefly, then look for work once more) before it
    /// waits for readiness: see [`BusyPoll::nap_us`]. 0: wait at once.
    pub fn nap_us(&self) -> u64 {
        self.busy
            .nap_us(u64::from(self.engine.core.config.busy_poll_us))
    }

    /// The shell's wait ended, with readiness events (`worked`) or without.
    pub fn after_wait(&mut self, now: Now, worked: bool) {
        self.pass += 1;
        let window = u64::from(self.engine.core.config.busy_poll_us);
        self.busy.after_wait(now.unix_us, worked, window);
    }

    // ---- Running commands ----

    /// Runs the commands of slot's pending input (after a wakeup, a request, a drained
    /// output).
    pub(crate) fn run_buffered(&mut self, slot: usize, clock: &dyn Clock, nested: bool) {
        let s = self.sessions[slot]
            .as_mut()
            .expect("running a live session");
        if s.pending_input() == 0 {
            return;
        }
        self.run_lent(slot, clock, nested);
    }

    /// Runs the commands in session `slot`'s query buffer. The buffer leaves the session for
    /// the run (a move, not a copy) so that the decoder and the output can be borrowed beside
    /// it; what is left of an incomplete command stays, within `client-query-buffer-limit`.
    #[inline(always)]
    fn run_lent(&mut self, slot: usize, clock: &dyn Clock, nested: bool) {
        let s = self.sessions[slot]
            .as_mut()
            .expect("running a live session");
        let input = core::mem::take(&mut s.input);
        let (start, end) = (s.in_start, s.in_end);
        s.in_lent = input.len();
        let used = self.run_commands(slot, &input[start..end], clock, nested);
        let s = self.sessions[slot]
            .as_mut()
            .expect("sessions stay while running");
        s.input = input;
        s.in_lent = 0;
        s.consume(used);
        if s.pending_input() > 0 {
            s.note_wanted();
            if s.pending_input() > limits(&self.engine).query_buffer_max {
                self.check_query_limit(slot);
            }
        }
    }

    /// Decodes and runs every complete command at the start of `input`, stopping when the
    /// connection must close, is blocked or waits for a request, or has too much output
    /// pending. Returns the bytes used. `nested`: run from a delivery (which goes on itself).
    fn run_commands(
        &mut self,
        slot: usize,
        input: &[u8],
        clock: &dyn Clock,
        nested: bool,
    ) -> usize {
        let mut used = 0;
        // One clock reading per command: a command's end is the next one's start (what lies
        // between is decoding, well under the clock's microsecond).
        let mut next_start: Option<Now> = None;
        if let Some(s) = self.sessions[slot].as_mut() {
            s.ready_output();
            self.engine.begin_batch(s.handle);
        }
        loop {
            let Driver {
                engine,
                sessions,
                script_left,
                ..
            } = self;
            // The other sessions are lent to a script that runs long (see `wait`).
            let (before, rest) = sessions.split_at_mut(slot);
            let (this, after) = rest.split_first_mut().expect("the running slot");
            let s = this.as_mut().expect("running a live session");
            let h = s.handle;
            let pause = match s.pause_lifted {
                true => usize::MAX,
                false => output_pause(engine),
            };
            if used >= input.len() || !s.runnable(pause) || engine.is_blocked(h) {
                return used;
            }
            let decoder_limits = limits(engine);
            s.decoder.set_limits(decoder_limits);
            let auth_required = engine.core.acl.auth_required();
            // One look at the client for what the command needs of it.
            let (authenticated, protocol, debugging) = match engine.clients.get_mut(h) {
                Some(c) => {
                    // CLIENT LIST / CLIENT INFO during the next command see the buffers as
                    // they are: the query buffer is this batch's input (taken from the
                    // shell's buffer or lent out of the session's), the running command
                    // included, as Redis shows it.
                    c.io = s.io_stats(s.state_mem);
                    c.io.qbuf = input.len();
                    // Redis's `authRequired`: the tighter limits apply only while a
                    // password is set.
                    let authenticated = !auth_required || c.authenticated;
                    let debugging = c.lua_debug != kayvee_engine::client::LuaDebug::Off;
                    (authenticated, c.protocol, debugging)
                }
                None => (!auth_required, Protocol::default(), false),
            };
            let frame = match s.decoder.decode(&input[used..], authenticated) {
                Ok(Some(frame)) => frame,
                Ok(None) => return used,
                Err(error) => {
                    error.write_reply(&mut s.out);
                    s.closing = Closing::AfterReply;
                    let id = client_id(engine, h);
                    let notice = match error {
                        ProtocolError::QueryBufferLimit => Notice::QueryBufferLimit { id },
                        error => Notice::ProtocolError { id, error },
                    };
                    self.notice(notice);
                    return used;
                }
            };
            used += frame.consumed;
            self.busy.note_command();
            let start = next_start.take().unwrap_or_else(|| clock.now());
            let mut critical = None;
            let outcome = if s.upstream.is_some() {
                // The master client: no reply goes back but the ACK GETACK asks for (the
                // offset before the GETACK itself, as Redis counts it); the command's bytes
                // advance the offset and go on to this server's replicas as they came.
                if crate::session::is_getack(&frame.argv) {
                    let digits = kayvee_engine::aof::itoa(engine.core.repl.offset);
                    let ack: [&[u8]; 3] = [b"REPLCONF", b"ACK", digits.as_bytes()];
                    kayvee_engine::aof::encode(&mut s.out, &ack);
                }
                let mut sink = crate::master::MasterSink::new(protocol);
                let outcome = engine.execute(h, &frame.argv, start, &mut sink);
                if let Some(error) = sink.error {
                    critical = Some(crate::master::error_to_master(
                        engine,
                        &error,
                        frame.argv.get(0),
                    ));
                }
                let bytes = &input[used - frame.consumed..used];
                match (&outcome, s.upstream.as_mut()) {
                    (Outcome::Blocked, Some(Upstream::Stream { held, .. })) => {
                        held.extend_from_slice(bytes);
                    }
                    _ => engine.primary_applied(bytes),
                }
                outcome
            } else {
                // A replica of this server must never see a reply (its link carries the RDB and
                // the stream): one its command makes is dropped, and the link closes.
                let replica_from = engine.core.repl.is_replica(h).then_some(s.out.len());
                // A client in SCRIPT DEBUG mode: its EVAL may start a debugging session, which
                // writes to the connection itself (what is pending goes first) and reads it.
                let debug = debugging.then(|| {
                    let prior = s.out[s.out_sent..].to_vec();
                    s.out.clear();
                    s.out_sent = 0;
                    Box::new(crate::wait::DebugLink::new(
                        h,
                        protocol,
                        prior,
                        limits(engine),
                    ))
                });
                let mut wait = crate::wait::Waiter {
                    clock,
                    before,
                    after,
                    debug,
                    left: script_left,
                    limits: decoder_limits,
                };
                let outcome = engine.execute_waiting(
                    h,
                    &frame.argv,
                    start,
                    &mut RespWriter::new(&mut s.out, protocol),
                    &mut wait,
                );
                if let Some(link) = wait.debug {
                    // Output nobody sent (no session started) goes back in front.
                    if !link.prior.is_empty() {
                        let reply = core::mem::replace(&mut s.out, link.prior);
                        s.out.extend_from_slice(&reply);
                    }
                }
                if let Some(from) = replica_from.filter(|&from| s.out.len() > from) {
                    let reply = s.out.split_off(from);
                    s.closing = Closing::Now;
                    let lines = crate::master::reply_to_replica(
                        engine,
                        &reply,
                        &frame.argv,
                        client_id(engine, h),
                    );
                    self.notices.extend(lines.into_iter().map(Notice::Warning));
                }
                outcome
            };
            if let Outcome::Sleep(us) = outcome {
                clock.sleep_us(us);
            }
            if self.time_commands {
                let end = clock.now();
                let usec = end.unix_us.saturating_sub(start.unix_us);
                self.engine.command_timed(h, &frame.argv, usec, end);
                next_start = Some(end);
            }
            if let Some(line) = critical {
                self.notice(Notice::Replication(line));
            }
            self.apply_outcome(slot, outcome, clock);
            if !self.script_left.is_empty() {
                self.after_busy_script(clock);
            }
            if self.engine.has_deliveries() && self.deliver(clock, nested) {
                // Delivery took its own time: the next command reads the clock afresh.
                next_start = None;
            }
            self.last_reading = next_start;
        }
    }

    /// After a long run that served the other connections (see [`crate::wait::Left`]): the
    /// connections accepted meanwhile take their slots, those whose peer left close, and
    /// what the primary's link sent is taken in.
    #[cold]
    #[inline(never)]
    fn after_busy_script(&mut self, clock: &dyn Clock) {
        let crate::wait::Left {
            gone,
            held,
            joined,
            admitted,
        } = core::mem::take(&mut self.script_left);
        for session in joined {
            self.install(session);
        }
        for h in admitted {
            self.account(h.0);
            self.writable(h);
        }
        for h in gone {
            self.receive_eof(h);
        }
        for (h, bytes) in held {
            self.receive(h, &bytes, clock);
        }
    }

    /// Runs `f` on the engine for connection `h`'s request with the other connections served
    /// should a script it runs pass `busy-reply-threshold` (DEBUG LOADAOF replaying a slow
    /// script: the others get `-LOADING`, new clients are accepted), as a command's script is
    /// ([`Driver::receive`]).
    pub fn serving_others<R>(
        &mut self,
        h: Handle,
        clock: &dyn Clock,
        f: impl FnOnce(&mut Engine, &mut dyn kayvee_engine::ScriptWait) -> R,
    ) -> R {
        let Driver {
            engine,
            sessions,
            script_left,
            ..
        } = self;
        if sessions.len() <= h.0 {
            sessions.resize_with(h.0 + 1, || None);
        }
        let limits = limits(engine);
        let (before, rest) = sessions.split_at_mut(h.0);
        let after = &mut rest[1..];
        let mut wait = crate::wait::Waiter {
            clock,
            before,
            after,
            debug: None,
            left: script_left,
            limits,
        };
        let r = f(engine, &mut wait);
        if !self.script_left.is_empty() {
            self.after_busy_script(clock);
        }
        r
    }

    /// Acts on a command's [`Outcome`] (the loop in [`Driver::run_commands`] stops on its own
    /// when the session may not go on).
    fn apply_outcome(&mut self, slot: usize, outcome: Outcome, clock: &dyn Clock) {
        let s = self.sessions[slot]
            .as_mut()
            .expect("running a live session");
        let h = s.handle;
        let request = match outcome {
            // DEBUG SLEEP after CLIENT KILL inside EXEC: the kill still happens.
            Outcome::Sleep(_) => {
                self.close_killed(h);
                return;
            }
            Outcome::Continue | Outcome::Blocked => {
                if s.sync.is_some() {
                    // A syncing replica's REPLCONF ACK may have put it online.
                    self.pump_sync(slot, clock);
                }
                return;
            }
            Outcome::DeferredReply => {
                s.out_counted_whole = true;
                return;
            }
            Outcome::Close => {
                s.closing = Closing::AfterReply;
                return;
            }
            Outcome::KillClients => {
                self.close_killed(h);
                return;
            }
            Outcome::Replicate { continue_from, eof } => {
                self.start_replica(slot, continue_from, eof, clock);
                // `PSYNC ... FAILOVER` made this server a primary: its link closes.
                self.close_killed(h);
                return;
            }
            Outcome::Shutdown(flags) => Request::Shutdown(flags),
            Outcome::Save { background } => Request::Save { background },
            Outcome::RewriteConfig => Request::RewriteConfig,
            Outcome::AclFile { save } => Request::AclFile { save },
            Outcome::Crash => Request::Crash,
            Outcome::LoadAof => Request::LoadAof,
            Outcome::LoadRdb { flush, merge } => Request::LoadRdb { flush, merge },
            Outcome::Migrate => match self.engine.take_migrate_job() {
                Some(job) => Request::Migrate(job),
                None => return,
            },
            Outcome::Rebind => match self.engine.previous_listen() {
                Some((previous_port, previous_bind)) => Request::Rebind {
                    previous_port,
                    previous_bind,
                },
                None => return,
            },
        };
        let answered = self.engine.take_rewrite_answered();
        let s = self.sessions[slot]
            .as_mut()
            .expect("running a live session");
        s.awaiting = true;
        s.answered = answered;
        self.requests.push_back((h, request));
    }

    /// Marks the sessions of clients CLIENT KILL (or ACL LOAD) killed for closing: the one
    /// running (`me`) after its reply; the others at once, their pending output dropped, as
    /// Redis frees another client inside CLIENT KILL. They go first in the write pass, and
    /// [`Driver::closes_first`] tells the shell to hold this read's replies for it: whoever
    /// reads the killer's reply finds the killed connection's end already sent (a replica
    /// killed inside a MULTI sees its link drop before the EXEC's reply leaves).
    pub(crate) fn close_killed(&mut self, me: Handle) {
        let mut first = Vec::new();
        for slot in 0..self.sessions.len() {
            let Some(s) = self.sessions[slot].as_mut() else {
                continue;
            };
            let killed = self.engine.clients.get(s.handle).is_some_and(|c| c.killed);
            if !killed || s.closing != Closing::No {
                continue;
            }
            if s.handle == me {
                s.closing = Closing::AfterReply;
                self.mark_dirty(slot);
            } else {
                s.closing = Closing::Now;
                s.dirty = true;
                first.push(slot);
            }
        }
        if !first.is_empty() {
            self.dirty.retain(|slot| !first.contains(slot));
            first.append(&mut self.dirty);
            self.dirty = first;
            self.closes_first = true;
        }
    }

    /// Whether a command closed other connections since the last [`Driver::take_dirty`]
    /// (CLIENT KILL): the shell writes no reply before that pass, which closes them first.
    pub fn closes_first(&self) -> bool {
        self.closes_first
    }

    // ---- Delivery ----

    /// Delivers messages and wakeups until none is left. `nested` (inside a delivery): only
    /// messages; the outer loop takes the wakeups.
    /// Returns whether there was anything to deliver.
    fn deliver(&mut self, clock: &dyn Clock, nested: bool) -> bool {
        let mut delivered = false;
        loop {
            if self.engine.core.pubsub.has_messages() {
                self.deliver_messages();
                delivered = true;
            }
            if nested {
                return delivered;
            }
            if self.engine.has_replication() {
                self.feed_replicas();
            }
            let woken = self.engine.take_wakeups();
            if woken.is_empty() {
                return delivered;
            }
            delivered = true;
            for (h, replies) in woken {
                let protocol = self.engine.protocol(h);
                let Some(s) = self.session_mut(h) else {
                    continue;
                };
                // The master client's replies are never sent.
                if s.upstream.is_none() {
                    let mut sink = RespWriter::new(&mut s.out, protocol);
                    replies.iter().for_each(|r| r.write_to(&mut sink));
                } else {
                    self.upstream_resumed(h.0);
                }
                self.mark_dirty(h.0);
                self.run_buffered(h.0, clock, true);
                self.account(h.0);
            }
        }
    }

    /// Appends the engine's queued messages to their receivers' output, encoded in each
    /// receiver's protocol. A message goes to its receivers back to back, so it is encoded
    /// once per protocol and copied.
    fn deliver_messages(&mut self) {
        let mut encoded: Option<(Rc<Reply>, Protocol, Vec<u8>)> = None;
        // The receivers' grown output is measured at once: client eviction counts it, and
        // CLIENT LIST shows it (the output limits' timers start from what it shows).
        let mut receivers = Vec::new();
        for (h, msg) in self.engine.take_messages() {
            let protocol = self.engine.protocol(h);
            let Some(s) = self.sessions.get_mut(h.0).and_then(Option::as_mut) else {
                continue;
            };
            if s.closing != Closing::No {
                continue;
            }
            match &mut encoded {
                Some((m, p, bytes)) if Rc::ptr_eq(m, &msg) && *p == protocol => {
                    s.out.extend_from_slice(bytes);
                }
                cached => {
                    let mut bytes = Vec::new();
                    msg.write_to(&mut RespWriter::new(&mut bytes, protocol));
                    s.out.extend_from_slice(&bytes);
                    *cached = Some((msg, protocol, bytes));
                }
            }
            self.mark_dirty(h.0);
            if receivers.last() != Some(&h.0) {
                receivers.push(h.0);
            }
        }
        for slot in receivers {
            self.account(slot);
        }
        self.evict_clients();
    }

    // ---- Replicas (the primary's side; see `crate::replicas`) ----

    /// A client became a replica: the backlog from `continue_from`, or a full sync of a
    /// snapshot taken now (diskless when `eof`, else the whole RDB at once).
    fn start_replica(
        &mut self,
        slot: usize,
        continue_from: Option<u64>,
        eof: bool,
        clock: &dyn Clock,
    ) {
        let now = clock.now();
        let engine = &mut self.engine;
        let s = self.sessions[slot]
            .as_mut()
            .expect("running a live session");
        let h = s.handle;
        if let Some(from) = continue_from {
            if let Some(b) = engine
                .core
                .repl
                .backlog
                .as_ref()
                .and_then(|b| b.from_offset(from))
            {
                s.out.extend_from_slice(&b);
            }
        } else if self.sync_through_file(h, eof) && self.start_file_sync(slot, h, now) {
            self.pin_backlog();
            self.pump_sync(slot, clock);
        } else {
            let engine = &mut self.engine;
            let s = self.sessions[slot]
                .as_mut()
                .expect("running a live session");
            let mut snapshot = engine.snapshot(now);
            if engine.core.repl.announced_mut(h).functions_only {
                let seed = engine.core.seed;
                for db in &mut snapshot.dbs {
                    *db = kayvee_engine::Db::new(seed).snapshot();
                }
            }
            let cfg = &engine.core.config;
            let opts = kayvee_rdb::WriteOptions {
                compress: cfg.rdbcompression,
                checksum: cfg.rdbchecksum,
                used_mem: engine.core.host.used_memory,
                // A piece is a fraction of the loop's grant ([`crate::replicas::Pace`]).
                chunk_len: 16 * 1024,
                ..Default::default()
            };
            if eof {
                // Redis waits for more replicas to share a child writing to sockets only; a
                // disk-based sync (`repl-diskless-sync no`) starts its save at once.
                let delay_s = match cfg.bool_param("repl-diskless-sync") {
                    true => cfg.int_param("repl-diskless-sync-delay").max(0) as u64,
                    false => 0,
                };
                let start_us = now.unix_us + delay_s * 1_000_000;
                // The `+FULLRESYNC` line waits for the start, as in Redis.
                let preamble = if delay_s > 0 {
                    crate::replicas::take_fullresync(&mut s.out, s.out_sent)
                } else {
                    Vec::new()
                };
                let max_waiting = cfg.int_param("repl-diskless-sync-max-replicas").max(0);
                let stream_start = engine
                    .core
                    .repl
                    .replica_mut(h)
                    .map_or(0, |r| r.stream_start);
                let rng = &mut engine.core.rng;
                let mark = crate::replicas::eof_mark(|| rng.next_u64());
                s.sync = Some(crate::replicas::Sync::diskless(
                    snapshot,
                    opts,
                    mark,
                    start_us,
                    preamble,
                    stream_start,
                ));
                // The stream from its start on stays in the backlog until its RDB is out.
                self.pin_backlog();
                self.start_if_enough_wait(max_waiting as usize, clock);
                self.pump_sync(slot, clock);
            } else {
                crate::replicas::disk_payload(snapshot, opts, &mut s.out);
                set_replica_state(engine, h, ReplicaState::Online);
            }
        }
        self.mark_dirty(slot);
    }

    /// Writes more of slot's full sync into its output while the output is low and the loop
    /// grants the time ([`crate::replicas::Pace`]); once the RDB is out the replica is online
    /// and gets the stream directly.
    pub(crate) fn pump_sync(&mut self, slot: usize, clock: &dyn Clock) {
        let Some(s) = self.sessions[slot].as_mut() else {
            return;
        };
        let now = clock.now();
        let before = s.out.len();
        let pending = s.out_pending();
        let Some(sync) = s.sync.as_mut() else {
            return;
        };
        let key_delay_us = self
            .engine
            .core
            .config
            .int_param("rdb-key-save-delay")
            .max(0) as u64;
        let config = &self.engine.core.config;
        let grant_us = self.sync_pace.grant(
            now.unix_us,
            self.pass,
            self.engine.core.stats.total_commands_processed,
            config.repl_sync_share,
        );
        let until_us = now.unix_us.saturating_add(grant_us);
        let mut spent = || clock.now().unix_us >= until_us;
        let Ok(held) = sync.pump(&mut s.out, pending, now.unix_us, key_delay_us, &mut spent) else {
            // The saved file could not be read: the replica syncs again.
            s.closing = Closing::Now;
            s.sync = None;
            self.mark_dirty(slot);
            self.pin_backlog();
            self.notice(Notice::Warning(
                "SYNC failed. Can't read the saved RDB file".into(),
            ));
            return;
        };
        let end = clock.now().unix_us;
        self.sync_pace.spent(end, end.saturating_sub(now.unix_us));
        if held {
            let at = end + self.sync_pace.wait_us(config.repl_sync_share);
            self.syncs_held_until = self.syncs_held_until.min(at);
        }
        let h = s.handle;
        let state = self.engine.core.repl.replica_mut(h).map(|r| r.state);
        if sync.started() && state == Some(ReplicaState::WaitBgsave) {
            // Its RDB is being produced (INFO `rdb_bgsave_in_progress`).
            set_replica_state(&mut self.engine, h, ReplicaState::Streaming);
        }
        let mut state = state;
        if sync.is_file() && sync.rdb_sent && state != Some(ReplicaState::Online) {
            // A file's length is known: the replica is online once it is out, as Redis puts a
            // replica online when its bulk transfer ends.
            set_replica_state(&mut self.engine, h, ReplicaState::Online);
            state = Some(ReplicaState::Online);
        }
        let done = sync.rdb_sent && state == Some(ReplicaState::Online);
        let mut moved = false;
        if done {
            // Its RDB is in (and, diskless, its first ACK came): the stream the backlog kept for
            // it follows, a piece at a time while its output is low, the backlog letting go of
            // what it took (a copy of all of it at once would hold that stream twice), up to
            // the bytes not yet handed to the replicas; then the stream goes to it directly.
            let repl = &self.engine.core.repl;
            let end = repl.delivered_end();
            let mut pending = pending + (s.out.len() - before);
            let caught_up = loop {
                let want = end
                    .saturating_sub(sync.stream_start)
                    .min(STREAM_PIECE as u64);
                if want == 0 {
                    break true;
                }
                if pending >= crate::replicas::SYNC_LOW_WATER {
                    break false;
                }
                let read = repl
                    .backlog
                    .as_ref()
                    .and_then(|b| b.read_from(sync.stream_start, want as usize, &mut s.out));
                match read {
                    Some(n) if n > 0 => {
                        sync.stream_start += n as u64;
                        pending += n;
                        moved = true;
                    }
                    _ => {
                        // The backlog went (a role change): the replica must sync again.
                        s.closing = Closing::Now;
                        break true;
                    }
                }
            };
            if caught_up {
                s.sync = None;
                moved = true;
            }
        }
        if self.sessions[slot]
            .as_ref()
            .is_some_and(|s| s.out.len() > before || s.closing != Closing::No)
        {
            self.mark_dirty(slot);
        }
        if moved {
            self.pin_backlog();
            self.note_replica_output();
        }
    }

    /// With `repl-diskless-sync-max-replicas` (`max`, 0: none) replicas waiting for their
    /// full sync's delay, they all start now, as Redis starts its RDB child for them.
    fn start_if_enough_wait(&mut self, max: usize, clock: &dyn Clock) {
        let waiting = |s: &Session| {
            s.sync
                .as_ref()
                .is_some_and(|y| !y.is_file() && !y.started())
        };
        let count = self
            .sessions
            .iter()
            .flatten()
            .filter(|&s| waiting(s))
            .count();
        if max == 0 || count < max {
            return;
        }
        for slot in 0..self.sessions.len() {
            if let Some(sync) = self.sessions[slot].as_mut().and_then(|s| s.sync.as_mut()) {
                if !sync.started() {
                    sync.start_now();
                    self.pump_sync(slot, clock);
                }
            }
        }
    }

    /// Pins the backlog at the earliest stream start of a replica whose full sync runs (the
    /// stream it gets after its RDB), or lets it trim to its size when none does.
    fn pin_backlog(&mut self) {
        let first = self
            .sessions
            .iter()
            .flatten()
            .filter_map(|s| s.sync.as_ref().map(|y| y.stream_start))
            .min();
        if let Some(b) = self.engine.core.repl.backlog.as_mut() {
            b.set_pin(first);
        }
    }

    /// Full syncs go on that their start delay or key delay held back (see
    /// [`crate::replicas::Sync::pump`]).
    fn syncs_cron(&mut self, clock: &dyn Clock) {
        for slot in 0..self.sessions.len() {
            let sending = self.sessions[slot]
                .as_ref()
                .and_then(|s| s.sync.as_ref())
                .is_some_and(crate::replicas::Sync::sending);
            if sending {
                self.pump_sync(slot, clock);
            }
        }
    }

    /// Hands the new replication stream to every replica: into its output, or, while its
    /// full sync runs, left in the backlog (pinned from its start on) until its RDB is out; a
    /// replica whose stream starts later skips the bytes before its start.
    fn feed_replicas(&mut self) {
        let mut bytes = Vec::new();
        let start = self.engine.take_replication(&mut bytes);
        if bytes.is_empty() {
            return;
        }
        let targets: Vec<(Handle, u64)> = self
            .engine
            .core
            .repl
            .replicas
            .iter()
            .map(|r| (r.handle, r.stream_start))
            .collect();
        for (h, stream_start) in targets {
            let skip = usize::try_from(stream_start.saturating_sub(start)).unwrap_or(usize::MAX);
            let Some(part) = bytes.get(skip..).filter(|p| !p.is_empty()) else {
                continue;
            };
            let Some(s) = self.session_mut(h).filter(|s| s.closing == Closing::No) else {
                // A killed replica gets nothing more (Redis frees it at once): it resyncs
                // from where it was.
                continue;
            };
            if s.sync.is_none() {
                s.out.extend_from_slice(part);
            }
            // A syncing replica is looked at too: the stream it waits for counts against its
            // output limit.
            self.mark_dirty(h.0);
        }
        self.note_replica_output();
    }

    /// Tells the engine how much the replicas' output buffers hold (left out of the memory
    /// `maxmemory` counts, see `kayvee_engine::evict::not_counted`) and the most stream one
    /// of them still has to send (`kayvee_engine::repl::Replication::lagging_bytes`).
    fn note_replica_output(&mut self) {
        // Through the replica table, not every session: this runs after each write.
        let sessions = &self.sessions;
        let repl = &self.engine.core.repl;
        let (mut capacity, mut lagging) = (0, 0);
        for r in &repl.replicas {
            let Some(s) = sessions.get(r.handle.0).and_then(Option::as_ref) else {
                continue;
            };
            capacity += s.out.capacity();
            if s.sync.is_none() {
                // The stream is the tail of its output: an RDB sent from the output (a
                // disk-based sync) is no part of it.
                let streamed = (repl.offset + 1).saturating_sub(r.stream_start);
                lagging = lagging.max((s.out_pending() as u64).min(streamed));
            }
        }
        self.engine.core.evict.replica_output = capacity as u64;
        self.engine.core.repl.lagging_bytes = lagging;
    }

    // ---- Limits and the cron ----

    /// After a batch of a connection's commands: its I/O fields, its output limit, and its
    /// place in the dirty list.
    pub(crate) fn after_batch(&mut self, slot: usize, now: Now) {
        // The output limit first: a client it closes is not counted for client eviction.
        // (Its test before the slow path is `over_output_limit`'s, done here on the one
        // look-up of the session this needs.)
        let Some(s) = self.sessions[slot].as_mut() else {
            self.evict_clients();
            return;
        };
        let counts =
            s.out_pending() > REPLY_BUFFER_STATIC || s.sync.is_some() || s.out_counted_whole;
        let s = if s.closing == Closing::Now {
            s
        } else if !counts {
            s.soft_since_ms = None;
            s
        } else {
            // A session the limit closes has `Closing::Now`: marked dirty below.
            self.output_counted_over_limit(slot, now);
            self.sessions[slot].as_mut().expect("looked up above")
        };
        if (s.out_pending() > 0 || s.closing != Closing::No) && !s.dirty {
            s.dirty = true;
            self.dirty.push(slot);
        }
        measure(&mut self.engine, &mut self.clients_mem, s);
        self.evict_clients();
    }

    /// Measures slot's memory afresh (`CLIENT LIST`'s I/O fields and `tot-mem`) and updates
    /// the total client eviction counts: every client but replicas, the link to the primary
    /// and those closing, as Redis counts its normal and pub/sub clients.
    fn account(&mut self, slot: usize) {
        let Driver {
            engine,
            sessions,
            clients_mem,
            ..
        } = self;
        if let Some(s) = sessions[slot].as_mut() {
            measure(engine, clients_mem, s);
        }
    }

    /// Client eviction: while the clients' memory is above `maxmemory-clients`, closes the
    /// biggest client that may be evicted (see [`Engine::evictable`]), at once and without
    /// its pending replies, as Redis does. The total is measured afresh before anyone is
    /// evicted (output written or delivered since a client was last measured).
    #[inline]
    fn evict_clients(&mut self) {
        let limit = self.engine.core.config.maxmemory_clients_bytes();
        if limit == 0 || self.clients_mem as u64 <= limit {
            return;
        }
        self.evict_clients_over(limit);
    }

    /// [`Driver::evict_clients`] once the clients' memory passed `limit` (out of line: the
    /// test runs after every batch).
    #[inline(never)]
    fn evict_clients_over(&mut self, limit: u64) {
        for slot in 0..self.sessions.len() {
            self.account(slot);
        }
        if self.clients_mem as u64 <= limit {
            return;
        }
        let engine = &self.engine;
        let mut candidates: Vec<(usize, usize)> = self
            .sessions
            .iter()
            .enumerate()
            .filter_map(|(slot, s)| {
                let s = s.as_ref()?;
                let may = s.counted_mem > 0 && engine.evictable(s.handle);
                may.then_some((s.counted_mem, slot))
            })
            .collect();
        candidates.sort_unstable_by(|a, b| b.cmp(a));
        for (mem, slot) in candidates {
            if self.clients_mem as u64 <= limit {
                break;
            }
            let s = self.sessions[slot].as_mut().expect("a candidate is open");
            s.closing = Closing::Now;
            s.counted_mem = 0;
            self.clients_mem -= mem;
            self.engine.core.stats.evicted_clients += 1;
            let id = client_id(&self.engine, s.handle);
            self.notice(Notice::ClientEvicted { id, mem });
            self.mark_dirty(slot);
        }
    }

    /// Closes (silently, as Redis does) a connection whose buffered input passed
    /// `client-query-buffer-limit` without completing a command it may run.
    fn check_query_limit(&mut self, slot: usize) {
        let max = limits(&self.engine).query_buffer_max;
        let s = self.sessions[slot].as_mut().expect("checked by the caller");
        if s.pending_input() > max && s.closing == Closing::No {
            s.closing = Closing::Now;
            let id = client_id(&self.engine, s.handle);
            self.notice(Notice::QueryBufferLimit { id });
            self.mark_dirty(slot);
        }
    }

    /// Whether slot's pending output breaks the limit of its class (`pubsub` for a
    /// subscriber, `normal` otherwise): above the hard limit, or above the soft limit for
    /// longer than its seconds. Marks the session for closing when it does.
    /// `now` reads the time, when the limit needs it.
    #[inline]
    fn over_output_limit(&mut self, slot: usize, now: impl FnOnce() -> Now) -> bool {
        let Some(s) = self.sessions[slot].as_mut() else {
            return false;
        };
        if s.closing == Closing::Now {
            return true;
        }
        if s.out_pending() <= REPLY_BUFFER_STATIC && s.sync.is_none() && !s.out_counted_whole {
            // Nothing counts against any limit (the general path says the same).
            s.soft_since_ms = None;
            return false;
        }
        self.output_counted_over_limit(slot, now())
    }

    /// [`Driver::over_output_limit`] for a session with output that counts (out of line:
    /// the test before it runs after every batch).
    #[inline(never)]
    fn output_counted_over_limit(&mut self, slot: usize, now: Now) -> bool {
        let Some(s) = self.sessions[slot].as_mut() else {
            return false;
        };
        let class = if self.engine.core.repl.is_replica(s.handle) {
            1
        } else if self.engine.is_subscriber(s.handle) {
            2
        } else {
            0
        };
        let mut limit = self.engine.core.config.client_output_buffer_limit[class];
        if class == 1 && limit.hard_bytes > 0 {
            // A replica's hard limit is at least the backlog's size, as in Redis: a partial
            // resync may hand it that much at once (its memory is the backlog's, shared).
            let backlog = self
                .engine
                .core
                .config
                .int_param("repl-backlog-size")
                .max(0) as u64;
            limit.hard_bytes = limit.hard_bytes.max(backlog);
        }
        // Redis counts only what overflows a client's static reply buffer (all of it behind
        // a reply whose length it wrote last); a syncing replica's output holds the stream
        // kept for it in the shared backlog too.
        let uncounted = match s.out_counted_whole {
            true => 0,
            false => REPLY_BUFFER_STATIC,
        };
        let mut counted = s.out_pending().saturating_sub(uncounted) as u64;
        if let (Some(sync), Some(b)) = (&s.sync, &self.engine.core.repl.backlog) {
            counted += b.end_offset().saturating_sub(sync.stream_start);
        }
        // A client that has not authenticated may not hold more than a little: it could make
        // the server buffer replies it never reads (Redis's limit).
        let unauthenticated = counted > UNAUTHENTICATED_OUTPUT_MAX
            && self.engine.core.acl.auth_required()
            && !self
                .engine
                .clients
                .get(s.handle)
                .is_some_and(|c| c.authenticated);
        if !unauthenticated && !breaks(limit, counted, &mut s.soft_since_ms, now.ms()) {
            return false;
        }
        s.closing = Closing::Now;
        let id = client_id(&self.engine, s.handle);
        self.notice(Notice::OutputLimit { id });
        true
    }

    /// The clients part of the cron: idle `timeout` (blocked clients and subscribers are
    /// exempt, as in Redis), idle buffers, CLIENT LIST's I/O fields, client eviction.
    /// Lifts the output pause of a connection whose peer has taken none of its output for
    /// [`PAUSE_STALL_MS`]: a client that writes its whole pipeline before it reads a reply
    /// (Redis's own test suite does) would otherwise wait for us while we wait for it. Its
    /// commands run on and its output grows, as Redis's does (up to the output limits).
    fn lift_stalled_pauses(&mut self, now: Now) {
        for slot in 0..self.sessions.len() {
            let Some(s) = self.sessions[slot].as_mut().filter(|s| s.read_paused) else {
                continue;
            };
            let since = *s.paused_quiet_since_ms.get_or_insert(now.ms());
            if now.ms().saturating_sub(since) < PAUSE_STALL_MS {
                continue;
            }
            s.paused_quiet_since_ms = None;
            s.pause_lifted = true;
            s.read_again = true;
            self.mark_dirty(slot);
        }
    }

    fn clients_cron(&mut self, now: Now) {
        let timeout_ms = self.engine.core.config.timeout_s.saturating_mul(1000);
        for slot in 0..self.sessions.len() {
            let Some(s) = self.sessions[slot].as_mut() else {
                continue;
            };
            let debug = &self.engine.core.debug;
            let (reset, resizing) = (
                debug.reply_buffer_peak_reset_ms,
                debug.reply_buffer_resizing,
            );
            let stats = &mut self.engine.core.stats;
            match s.resize_reply_buffer(now.ms(), reset, resizing) {
                Resized::Kept => {}
                Resized::Shrunk => stats.reply_buffer_shrinks += 1,
                Resized::Expanded => stats.reply_buffer_expands += 1,
            }
            s.release_idle_buffers();
            let h = s.handle;
            self.account(slot);
            // A soft output limit runs out with no traffic too (Redis 7.0's clientsCron).
            if self.over_output_limit(slot, || now) {
                self.mark_dirty(slot);
                continue;
            }
            let s = self.sessions[slot].as_mut().expect("accounted above");
            let Some(c) = self.engine.clients.get(h) else {
                continue;
            };
            let idle_ms = now.ms().saturating_sub(c.last_interaction_ms);
            if timeout_ms == 0
                || idle_ms <= timeout_ms
                || s.closing != Closing::No
                || self.engine.is_blocked(h)
                || self.engine.is_subscriber(h)
                || self.engine.core.repl.is_replica(h)
                || self.engine.core.repl.link() == Some(h)
            {
                continue;
            }
            s.closing = Closing::Now;
            let id = client_id(&self.engine, h);
            self.notice(Notice::IdleTimeout { id });
            self.mark_dirty(slot);
        }
        self.evict_clients();
    }

    // ---- Small helpers ----

    fn session_mut(&mut self, h: Handle) -> Option<&mut Session> {
        self.sessions
            .get_mut(h.0)
            .and_then(Option::as_mut)
            .filter(|s| s.handle == h)
    }

    pub(crate) fn mark_dirty(&mut self, slot: usize) {
        if let Some(s) = self.sessions[slot].as_mut() {
            if !s.dirty {
                s.dirty = true;
                self.dirty.push(slot);
            }
        }
    }

    pub(crate) fn notice(&mut self, notice: Notice) {
        if self.notices.len() < NOTICES_MAX {
            self.notices.push(notice);
        }
    }
}

/// How long (ms) a paused connection's peer may take none of its output before the pause is
/// lifted (see [`Driver::lift_stalled_pauses`]).
const PAUSE_STALL_MS: u64 = 100;

/// The output above which a client's further commands wait: [`OUTPUT_PAUSE`], or none while
/// client eviction bounds the clients' memory (Redis has no such mark; its clients' output
/// grows until an output limit or client eviction closes them).
#[inline]
fn output_pause(engine: &Engine) -> usize {
    if engine.core.config.maxmemory_clients_bytes() > 0 {
        usize::MAX
    } else {
        OUTPUT_PAUSE
    }
}

/// The decoder limits the configuration gives now (CONFIG SET applies to the next command).
#[inline]
pub(crate) fn limits(engine: &Engine) -> Limits {
    let cfg = &engine.core.config;
    Limits {
        bulk_len_max: usize::try_from(cfg.proto_max_bulk_len).unwrap_or(usize::MAX),
        query_buffer_max: usize::try_from(cfg.client_query_buffer_limit).unwrap_or(usize::MAX),
    }
}

/// [`Driver::account`] of session `s`: its I/O fields in the engine's client, its counted
/// memory and the total `clients_mem` of them.
#[inline(always)]
fn measure(engine: &mut Engine, clients_mem: &mut usize, s: &mut Session) {
    let h = s.handle;
    s.state_mem = engine.client_state_memory(h);
    s.note_out_peak();
    let io = s.io_stats(s.state_mem);
    let counted =
        s.closing == Closing::No && s.upstream.is_none() && !engine.core.repl.is_replica(h);
    let counted = if counted { io.tot_mem } else { 0 };
    *clients_mem = *clients_mem - s.counted_mem + counted;
    s.counted_mem = counted;
    if let Some(c) = engine.clients.get_mut(h) {
        c.io = io;
    }
}

/// Moves replica `h` to `state` in the engine's table (INFO, ROLE, WAIT read it).
fn set_replica_state(engine: &mut Engine, h: Handle, state: ReplicaState) {
    if let Some(r) = engine.core.repl.replica_mut(h) {
        r.state = state;
    }
}

fn client_id(engine: &Engine, h: Handle) -> u64 {
    engine.clients.get(h).map_or(0, |c| c.id)
}

/// Whether `pending` output bytes break `limit` at `now_ms`; `soft_since_ms` is when the output
/// was first seen above the soft limit (reset when it falls back below).
fn breaks(limit: OutputLimit, pending: u64, soft_since_ms: &mut Option<u64>, now_ms: u64) -> bool {
    if limit.hard_bytes > 0 && pending >= limit.hard_bytes {
        return true;
    }
    if limit.soft_bytes == 0 || pending < limit.soft_bytes {
        *soft_since_ms = None;
        return false;
    }
    match *soft_since_ms {
        None => {
            *soft_since_ms = Some(now_ms);
            false
        }
        Some(since) => now_ms.saturating_sub(since) > limit.soft_s.saturating_mul(1000),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_limits_hard_at_once_soft_after_its_seconds() {
        let limit = OutputLimit {
            hard_bytes: 100,
            soft_bytes: 10,
            soft_s: 2,
        };
        let mut since = None;
        assert!(breaks(limit, 100, &mut since, 0));
        assert!(!breaks(limit, 50, &mut since, 1_000));
        assert_eq!(since, Some(1_000));
        assert!(!breaks(limit, 50, &mut since, 3_000), "exactly its seconds");
        assert!(breaks(limit, 50, &mut since, 3_001));
        assert!(!breaks(limit, 5, &mut since, 3_002));
        assert_eq!(since, None, "below the soft limit the clock stops");
        let none = OutputLimit {
            hard_bytes: 0,
            soft_bytes: 0,
            soft_s: 0,
        };
        assert!(!breaks(none, u64::MAX, &mut since, 0));
    }
}
