//! The replica's side of replication in the driver: the connection to this server's primary.
//! The shell opens it when [`Driver::primary_due`] names a primary (an outgoing TCP
//! connection: the only socket a shell opens itself) and hands it over with
//! [`Driver::connect_primary`]; from then on it is a session like any other for the shell
//! (read, [`Driver::receive`], flush, close). The driver runs the handshake and the RDB
//! transfer on it ([`crate::link::Link`]), loads the payload in place of the dataset (keys
//! already expired are kept: the primary's `DEL`s remove them), then runs what follows as the
//! master client's commands: replies dropped, `REPLCONF GETACK` answered with `REPLCONF ACK
//! <offset>`, each command's bytes counted in the offset and passed on as they came to the
//! backlog and this server's own replicas, and `REPLCONF ACK` sent every second.
//! docs/decisions.md ("Replication") has the design.

use crate::driver::Clock;
use crate::driver::{Driver, Notice};
use crate::link::{Link, LinkConfig, Load, Synced};
use crate::session::{Closing, Session, Upstream};
use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use kayvee_engine::repl::LoadMode;
use kayvee_engine::{ConnInfo, Handle, Now};

/// How often the replica acknowledges its offset (Redis: every replication cron, 1 s).
const ACK_PERIOD_MS: u64 = 1000;

/// Keys loaded between two looks at the clock while the primary's payload loads.
const LOAD_STEP_KEYS: u64 = 256;

/// How long one loop pass loads the primary's payload before it serves the other clients
/// again (Redis serves events every 2 MB of a load, about as often natively).
const LOAD_SLICE_US: u64 = 2_000;

impl Driver {
    /// The primary the shell should connect to now (`host`, `port`), if one is due: after
    /// REPLICAOF, and a second after a failed attempt or a lost link. The shell opens a TCP
    /// connection and calls [`Driver::connect_primary`], or [`Driver::primary_unreachable`].
    pub fn primary_due(&mut self, now: Now) -> Option<(String, u16)> {
        self.engine.core.repl.primary.as_ref()?;
        self.engine.primary_due(now)
    }

    /// The shell's connection to the primary (it may still be connecting: the first bytes
    /// wait in its output until the socket takes them). Returns its handle.
    pub fn connect_primary(&mut self, info: ConnInfo, now: Now) -> Handle {
        let h = self.engine.connect(info, now);
        let hs = self.engine.primary_handshake();
        let config = LinkConfig {
            user: hs.user,
            password: hs.password,
            listening_port: hs.listening_port,
            announce_ip: hs.announce_ip,
            cached: Some((hs.replid, hs.offset)),
            failover: hs.failover,
        };
        let mut session = Session::new(h, crate::driver::limits(&self.engine));
        let link = Link::start(config, &mut session.out);
        session.upstream = Some(Upstream::Handshake(Box::new(link)));
        if self.sessions.len() <= h.0 {
            self.sessions.resize_with(h.0 + 1, || None);
        }
        self.sessions[h.0] = Some(session);
        self.engine.primary_link_opened(h, now);
        self.mark_dirty(h.0);
        self.notice(Notice::Replication(String::from(
            "MASTER <-> REPLICA sync started",
        )));
        h
    }

    /// The connection to the primary could not be opened; the next attempt comes a second
    /// after this one.
    pub fn primary_unreachable(&mut self, why: &str) {
        self.engine.primary_link_failed();
        self.notice(Notice::Replication(alloc::format!(
            "Error condition on socket for SYNC: {why}"
        )));
    }

    /// Bytes from the primary while the handshake or the transfer runs. Returns the bytes
    /// that follow the handshake (the stream), or None while it goes on or failed.
    pub(crate) fn receive_handshake(
        &mut self,
        slot: usize,
        data: &[u8],
        now: Now,
    ) -> Option<Vec<u8>> {
        let s = self.sessions[slot].as_mut()?;
        let Some(Upstream::Handshake(link)) = s.upstream.as_mut() else {
            return None;
        };
        let before = s.out.len();
        let starting = link.payload().is_none();
        let result = link.receive(data, &mut s.out);
        let transfer = link.transferring().then(|| link.transfer());
        let grew = s.out.len() > before;
        // The payload's header came in this read (or the whole payload did).
        let begun = match (&result, link.payload()) {
            _ if !starting => None,
            (_, Some((id, size))) => Some((String::from(id), size)),
            (Ok(Some(Synced::Full { replid, rdb, .. })), None) => {
                Some((replid.clone(), Some(rdb.len() as u64)))
            }
            _ => None,
        };
        if let Some((replid, size)) = begun {
            self.payload_begins(&replid, size, now);
        }
        self.engine.primary_io(now, transfer);
        if grew {
            self.mark_dirty(slot);
        }
        match result {
            Ok(None) => None,
            Ok(Some(synced)) => self.synced(slot, synced, now),
            Err(e) => {
                let why = match e {
                    crate::link::LinkError::Refused(text) => text,
                    crate::link::LinkError::Protocol(text) => {
                        alloc::format!("Unexpected reply from MASTER: {text}")
                    }
                };
                self.drop_upstream(slot, why);
                if self.engine.primary_refused() {
                    self.close_killed(Handle(usize::MAX));
                }
                self.take_repl_notes();
                None
            }
        }
    }

    /// The primary's payload starts: the load's window opens as `repl-diskless-load` says
    /// (see [`kayvee_engine::Engine::primary_payload_begins`]), with Redis's log line.
    fn payload_begins(&mut self, replid: &str, size: Option<u64>, now: Now) {
        let line = match self.engine.primary_payload_begins(replid, size, now) {
            LoadMode::Disk => match size {
                Some(n) => alloc::format!(
                    "MASTER <-> REPLICA sync: receiving {n} bytes from master to disk"
                ),
                None => String::from(
                    "MASTER <-> REPLICA sync: receiving streamed RDB from master with EOF to disk",
                ),
            },
            LoadMode::Loading | LoadMode::AsyncLoading => {
                String::from("MASTER <-> REPLICA sync: Loading DB in memory")
            }
        };
        self.notice(Notice::Replication(line));
    }

    /// The link closes while its payload arrives or loads: the load fails as a short read
    /// does in Redis (whose diskless load reads the socket as it loads), and the old data
    /// stays (the engine closes the window when the link goes).
    pub(crate) fn upstream_closed(&mut self, upstream: &Upstream) {
        let receiving = matches!(upstream, Upstream::Handshake(_) | Upstream::Loading(_));
        if !receiving || !self.engine.primary_loading() {
            return;
        }
        for line in [
            "Internal error in RDB reading offset 0, function at rdb.c:0 -> Unexpected EOF reading RDB file",
            "Failed trying to load the MASTER synchronization DB from socket, check server logs.",
        ] {
            self.notice(Notice::Replication(String::from(line)));
        }
    }

    /// Moves replication's log lines (a FAILOVER's steps) into the notices.
    pub(crate) fn take_repl_notes(&mut self) {
        if self.engine.core.repl.notes.is_empty() {
            return;
        }
        for line in self.engine.take_repl_notes() {
            self.notice(Notice::Replication(line));
        }
    }

    /// The handshake ended: a full sync's payload starts loading (a slice a pass, see
    /// [`Driver::step_load`]), or the stream goes on after `+CONTINUE`. Returns the stream
    /// bytes to run now (none while a payload loads: they wait for it).
    fn synced(&mut self, slot: usize, synced: Synced, now: Now) -> Option<Vec<u8>> {
        let (killed, rest) = match synced {
            Synced::Full {
                replid,
                offset,
                rdb,
                rest,
            } => {
                self.notice(Notice::Replication(alloc::format!(
                    "Full resync from master: {replid}:{offset}"
                )));
                let opts = kayvee_rdb::LoadOptions {
                    config: &self.engine.core.config,
                    seed: self.engine.core.seed,
                    now_ms: now.ms(),
                };
                let load = match kayvee_rdb::StepLoad::new(rdb, &opts, true) {
                    Ok(l) => l,
                    Err(e) => {
                        self.load_failed(slot, e);
                        return None;
                    }
                };
                if !self.engine.primary_loading() {
                    // Received whole "to disk": the old data goes now, as in Redis.
                    for line in ["Flushing old data", "Loading DB in memory"] {
                        self.notice(Notice::Replication(alloc::format!(
                            "MASTER <-> REPLICA sync: {line}"
                        )));
                    }
                }
                self.engine.primary_load_begins(load.total_bytes(), now);
                let s = self.sessions[slot].as_mut()?;
                s.upstream = Some(Upstream::Loading(Box::new(Load {
                    load,
                    replid,
                    offset,
                    rest,
                })));
                // [`Driver::poll`] loads it a slice a pass from now on.
                return None;
            }
            Synced::Continue { replid, rest } => {
                let killed = self.engine.primary_continue(replid, now);
                self.notice(Notice::Replication(String::from(
                    "Successful partial resynchronization with master.",
                )));
                (killed, rest)
            }
        };
        self.stream_starts(slot, killed, now)?;
        Some(rest)
    }

    /// The link carries the stream from now on (after a load or `+CONTINUE`); closes the
    /// clients the sync killed and acknowledges at once.
    fn stream_starts(&mut self, slot: usize, killed: bool, now: Now) -> Option<()> {
        let s = self.sessions[slot].as_mut()?;
        s.upstream = Some(Upstream::Stream {
            last_ack_ms: now.ms(),
            held: Vec::new(),
        });
        let h = s.handle;
        if killed {
            self.close_killed(h);
        }
        // The primary learns at once where this replica is (it releases a diskless sync's
        // stream on this first ACK).
        self.send_ack(slot, now);
        Some(())
    }

    /// The link's slot while the primary's payload loads.
    pub(crate) fn loading_link(&self) -> Option<usize> {
        let h = self.engine.core.repl.link()?;
        let s = self.sessions.get(h.0)?.as_ref()?;
        matches!(s.upstream, Some(Upstream::Loading(_))).then_some(h.0)
    }

    /// Loads the primary's payload for [`LOAD_SLICE_US`], then leaves the rest of the pass
    /// to the other clients; at its end the payload replaces the dataset and the stream
    /// that waited runs.
    pub(crate) fn step_load(&mut self, slot: usize, clock: &dyn Clock) {
        let start = clock.now();
        loop {
            let Some(Upstream::Loading(load)) = self.sessions[slot]
                .as_mut()
                .and_then(|s| s.upstream.as_mut())
            else {
                return;
            };
            let opts = kayvee_rdb::LoadOptions {
                config: &self.engine.core.config,
                seed: self.engine.core.seed,
                now_ms: start.ms(),
            };
            match load.load.step(&opts, LOAD_STEP_KEYS) {
                Ok(None) => {
                    let p = load.load.progress();
                    self.engine
                        .loading_progress(p.bytes, p.keys, p.rdb_used_mem);
                    if clock.now().unix_us.saturating_sub(start.unix_us) >= LOAD_SLICE_US {
                        return;
                    }
                }
                Ok(Some(loaded)) => {
                    let s = self.sessions[slot].as_mut().expect("looked up above");
                    let Some(Upstream::Loading(load)) = s.upstream.take() else {
                        unreachable!("matched above");
                    };
                    self.loaded(slot, *load, loaded, clock);
                    return;
                }
                Err(e) => {
                    self.load_failed(slot, e);
                    return;
                }
            }
        }
    }

    /// The payload is loaded: it replaces the dataset and the functions, the link carries the
    /// stream, and the stream that came meanwhile runs.
    fn loaded(&mut self, slot: usize, load: Load, loaded: kayvee_rdb::Loaded, clock: &dyn Clock) {
        let now = clock.now();
        // The primary's function libraries replace this server's, as its keys do.
        self.engine.flush_functions();
        if let Err(e) = self.engine.load_functions(&loaded.functions, false) {
            self.notice(Notice::Replication(alloc::format!(
                "Failed loading the MASTER's functions: {e}"
            )));
        }
        let killed = self
            .engine
            .primary_full_sync(loaded.dbs, load.replid, load.offset, now);
        self.notice(Notice::Replication(String::from(
            "MASTER <-> REPLICA sync: Finished with success",
        )));
        if self.stream_starts(slot, killed, now).is_none() {
            return;
        }
        let s = self.sessions[slot].as_mut().expect("looked up above");
        s.append(&load.rest);
        self.run_buffered(slot, clock, false);
        self.note_read_ahead(slot);
        self.after_batch(slot, now);
    }

    /// The payload does not load: the link closes (the next attempt syncs again), the old
    /// data stays.
    fn load_failed(&mut self, slot: usize, e: kayvee_rdb::Error) {
        let why =
            alloc::format!("Failed trying to load the MASTER synchronization DB from socket: {e}");
        self.drop_upstream(slot, why);
    }

    /// Closes the link with a log line; the next attempt comes a second after the last one.
    fn drop_upstream(&mut self, slot: usize, why: String) {
        if let Some(s) = self.sessions[slot].as_mut() {
            s.closing = Closing::Now;
        }
        self.mark_dirty(slot);
        self.notice(Notice::Replication(why));
    }

    /// `REPLCONF ACK <offset>` into the link's output.
    pub(crate) fn send_ack(&mut self, slot: usize, now: Now) {
        let offset = self.engine.core.repl.offset;
        let Some(s) = self.sessions[slot].as_mut() else {
            return;
        };
        if let Some(Upstream::Stream { last_ack_ms, .. }) = s.upstream.as_mut() {
            *last_ack_ms = now.ms();
            let digits = kayvee_engine::aof::itoa(offset);
            kayvee_engine::aof::encode(&mut s.out, &[b"REPLCONF", b"ACK", digits.as_bytes()]);
            self.mark_dirty(slot);
        }
    }

    /// The link's part of the cron: `REPLCONF ACK` every second, and the end of a link
    /// silent for longer than `repl-timeout`.
    pub(crate) fn upstream_cron(&mut self, now: Now) {
        let Some(h) = self.engine.core.repl.link() else {
            return;
        };
        let Some(s) = self.sessions.get(h.0).and_then(Option::as_ref) else {
            return;
        };
        let timeout_ms = (self.engine.core.config.int_param("repl-timeout").max(1) as u64) * 1000;
        let last_io_ms = self
            .engine
            .core
            .repl
            .primary
            .as_ref()
            .map_or(0, |p| p.last_io_ms);
        let loading = matches!(s.upstream, Some(Upstream::Loading(_)));
        // A link is not silent while its payload loads (Redis runs no replication cron
        // during a load).
        if now.ms().saturating_sub(last_io_ms) > timeout_ms && s.closing == Closing::No && !loading
        {
            self.drop_upstream(h.0, String::from("Timeout connecting to the MASTER..."));
            return;
        }
        if let Some(Upstream::Stream { last_ack_ms, .. }) = s.upstream {
            if now.ms().saturating_sub(last_ack_ms) >= ACK_PERIOD_MS {
                self.send_ack(h.0, now);
            }
        }
    }
}

impl Driver {
    /// The master client's held command ran (its pause ended): its bytes count now.
    pub(crate) fn upstream_resumed(&mut self, slot: usize) {
        let Some(s) = self.sessions[slot].as_mut() else {
            return;
        };
        if let Some(Upstream::Stream { held, .. }) = s.upstream.as_mut() {
            let bytes = core::mem::take(held);
            self.engine.primary_applied(&bytes);
        }
        self.note_read_ahead(slot);
    }

    /// Notes how much of the stream is received but not applied (INFO's read offset).
    pub(crate) fn note_read_ahead(&mut self, slot: usize) {
        let Some(s) = self.sessions[slot].as_ref() else {
            return;
        };
        let held = match &s.upstream {
            Some(Upstream::Stream { held, .. }) => held.len(),
            _ => return,
        };
        let ahead = (held + s.pending_input()) as u64;
        if let Some(p) = self.engine.core.repl.primary.as_mut() {
            p.read_ahead = ahead;
        }
    }
}
