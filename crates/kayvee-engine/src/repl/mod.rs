//! Replication's state (Redis 7.0's PSYNC2): the replication ID and offset, the secondary ID
//! after a promotion, the backlog, the replica table with each replica's ACK, and, on a
//! replica, the link to its primary as INFO and ROLE report it. A feature (layer 3): it takes
//! only its own state; the commands are `cmd/repl/`, the bytes on the wire (the RDB transfer,
//! the handshake, the stream into each replica's output) are the connection layer's
//! (`kayvee-session`), and the stream itself is [`crate::aof::Propagation`]'s replica sink.
//! docs/decisions.md ("Replication") has the design.

pub mod backlog;

use crate::client::Handle;
use crate::rng::Rng;
use alloc::collections::BTreeSet;
use alloc::string::String;
use alloc::vec::Vec;
use backlog::Backlog;

/// The replication ID of "no ID" (`master_replid2` before any promotion).
pub const NO_REPLID: &str = "0000000000000000000000000000000000000000";

/// Where a replica of this server is (INFO's `state=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplicaState {
    /// Its full sync waits to start (`repl-diskless-sync-delay`; `wait_bgsave`).
    WaitBgsave,
    /// Its RDB is being produced into the link, up to the replica's first ACK after it
    /// (`wait_bgsave` too, as Redis names a replica while its RDB child writes to the socket;
    /// INFO counts it in `rdb_bgsave_in_progress`).
    Streaming,
    /// It gets the stream (`online`).
    Online,
}

impl ReplicaState {
    /// INFO's word.
    pub fn name(self) -> &'static str {
        match self {
            ReplicaState::WaitBgsave | ReplicaState::Streaming => "wait_bgsave",
            ReplicaState::Online => "online",
        }
    }
}

/// How a replica takes its primary's full-sync payload (`repl-diskless-load`, decided when
/// the payload starts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadMode {
    /// `disabled` (or `on-empty-db` with keys): received whole first ("to disk"), the old data
    /// served meanwhile, then loaded at once.
    Disk,
    /// Loaded as it comes: clients get `-LOADING` until it is in (INFO `loading:1`).
    Loading,
    /// `swapdb` with the same replication ID: the old data stays readable until the new one
    /// replaces it (INFO `async_loading:1`).
    AsyncLoading,
}

/// The load mode for a payload: `repl-diskless-load` (`setting`), whether the dataset is
/// empty, and whether the `+FULLRESYNC` ID is this replica's own (then the old data is an
/// older state of the same history, which Redis 7.0 keeps serving).
pub fn load_mode(setting: &[u8], empty: bool, same_replid: bool) -> LoadMode {
    match setting {
        b"swapdb" if same_replid => LoadMode::AsyncLoading,
        b"swapdb" => LoadMode::Loading,
        b"on-empty-db" if empty => LoadMode::Loading,
        _ => LoadMode::Disk,
    }
}

/// What a client announced with REPLCONF (kept from before its PSYNC).
#[derive(Clone, Debug, Default)]
pub struct Announced {
    /// `listening-port`.
    pub port: u16,
    /// `ip-address` (None: the connection's peer address).
    pub ip: Option<String>,
    /// `capa eof`: takes the diskless `$EOF:` framing.
    pub capa_eof: bool,
    /// `capa psync2`: takes `+CONTINUE <new replid>`.
    pub capa_psync2: bool,
    /// `rdb-filter-only functions` (redis-cli --functions-rdb): its full sync's RDB holds the
    /// function libraries only, no key.
    pub functions_only: bool,
}

/// One replica of this server.
#[derive(Clone, Debug)]
pub struct Replica {
    /// Its connection.
    pub handle: Handle,
    /// What it announced.
    pub announced: Announced,
    /// Where its sync is.
    pub state: ReplicaState,
    /// The stream offset of the first byte it gets after its RDB or from the backlog.
    pub stream_start: u64,
    /// The last offset it acknowledged (REPLCONF ACK).
    pub ack_offset: u64,
    /// When it last acknowledged (unix ms).
    pub ack_ms: u64,
}

/// The state of this server's link to its primary (INFO `master_link_status`, ROLE's state).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkState {
    /// Must connect (the shell was asked to).
    Connect,
    /// Connecting (no reply from the primary yet).
    Connecting,
    /// In the handshake (PING ... PSYNC, until `+FULLRESYNC` or `+CONTINUE`).
    Handshake,
    /// Receiving the RDB.
    Transfer,
    /// Applying the stream.
    Connected,
}

impl LinkState {
    /// ROLE's word.
    pub fn role_word(self) -> &'static str {
        match self {
            LinkState::Connect => "connect",
            LinkState::Connecting => "connecting",
            LinkState::Handshake => "handshake",
            LinkState::Transfer => "sync",
            LinkState::Connected => "connected",
        }
    }
}

/// This server's primary, when it is a replica.
#[derive(Clone, Debug)]
pub struct Primary {
    /// `master_host`.
    pub host: String,
    /// `master_port`.
    pub port: u16,
    /// The link's state.
    pub state: LinkState,
    /// The connection to the primary (the handshake's, then the master client's).
    pub link: Option<Handle>,
    /// When the link last moved bytes (unix ms).
    pub last_io_ms: u64,
    /// When the link went down (unix ms; INFO `master_link_down_since_seconds`; 0: not
    /// noted yet, the driver's next poll notes it).
    pub down_since_ms: u64,
    /// Bytes of the RDB transfer read.
    pub transfer_read: u64,
    /// The transfer's size (-1 when unknown: the `$EOF:` form).
    pub transfer_size: i64,
    /// No connection attempt before this time (unix ms): one a second, as Redis's cron.
    pub next_attempt_ms: u64,
    /// Stream bytes received and not applied yet (INFO `slave_read_repl_offset` is the offset
    /// plus these): a command CLIENT PAUSE holds, and what waits behind it.
    pub read_ahead: u64,
    /// This link is a FAILOVER's: its PSYNC says `FAILOVER`, which makes the target (our
    /// replica until then) a primary before it answers.
    pub failover: bool,
    /// The database the stream had selected when the link went down: a partial resync goes
    /// on in it (the stream sends no SELECT until the database changes).
    pub stream_db: usize,
}

impl Primary {
    /// A primary to connect to at once.
    pub fn new(host: String, port: u16) -> Self {
        Primary {
            host,
            port,
            state: LinkState::Connect,
            link: None,
            last_io_ms: 0,
            down_since_ms: 0,
            transfer_read: 0,
            transfer_size: -1,
            next_attempt_ms: 0,
            read_ahead: 0,
            failover: false,
            stream_db: 0,
        }
    }
}

/// `Primary::down_since_ms` when the link just went down: the next poll notes the time.
pub const DOWN_UNNOTED: u64 = u64::MAX;

/// What a replica's handshake announces (see `kayvee_session::link`).
#[derive(Clone, Debug, Default)]
pub struct Handshake {
    /// `masteruser`.
    pub user: Option<String>,
    /// `masterauth`.
    pub password: Option<String>,
    /// `REPLCONF listening-port`.
    pub listening_port: u16,
    /// `REPLCONF ip-address` (`replica-announce-ip`).
    pub announce_ip: Option<String>,
    /// The replication ID to continue (PSYNC's first argument).
    pub replid: String,
    /// The offset applied so far (PSYNC asks for the next byte).
    pub offset: u64,
    /// PSYNC ends with `FAILOVER` (see [`Primary::failover`]).
    pub failover: bool,
}

/// Where a FAILOVER is (INFO `master_failover_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailoverState {
    /// Writes are held until a replica (the target, if one was named) acknowledged the whole
    /// stream.
    WaitForSync,
    /// This server connected to the target as its replica with `PSYNC ... FAILOVER`.
    InProgress,
}

impl FailoverState {
    /// INFO's words.
    pub fn name(state: Option<FailoverState>) -> &'static str {
        match state {
            None => "no-failover",
            Some(FailoverState::WaitForSync) => "waiting-for-sync",
            Some(FailoverState::InProgress) => "failover-in-progress",
        }
    }
}

/// A FAILOVER under way (Redis 7.0's coordinated failover).
#[derive(Clone, Debug)]
pub struct Failover {
    /// Where it is.
    pub state: FailoverState,
    /// `TO host port` (None: the first replica that catches up).
    pub target: Option<(String, u16)>,
    /// `TIMEOUT` (unix ms; None: none).
    pub deadline_ms: Option<u64>,
    /// `FORCE`: at the timeout, fail over to the target even if it did not catch up.
    pub force: bool,
}

/// What the cron must do about a FAILOVER.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FailoverStep {
    /// Nothing yet.
    Wait,
    /// Give up, with this reason (for the log).
    Abort(&'static str),
    /// Become a replica of this replica (`PSYNC ... FAILOVER`); `forced`: at the timeout,
    /// with FORCE.
    Switch {
        /// The target's address.
        host: String,
        /// Its port.
        port: u16,
        /// The timeout passed (FORCE).
        forced: bool,
    },
}

/// A client blocked in WAIT.
#[derive(Clone, Debug)]
pub struct Waiter {
    /// The client.
    pub handle: Handle,
    /// The offset its replicas must acknowledge.
    pub offset: u64,
    /// How many must.
    pub replicas: usize,
    /// When it gives up (unix ms; None: never).
    pub deadline_ms: Option<u64>,
}

/// Replication counters (INFO stats).
#[derive(Clone, Debug, Default)]
pub struct ReplStats {
    /// Full syncs served (`sync_full`).
    pub sync_full: u64,
    /// Partial resyncs accepted (`sync_partial_ok`).
    pub sync_partial_ok: u64,
    /// Partial resyncs refused (`sync_partial_err`).
    pub sync_partial_err: u64,
}

/// Replication state kept in `Core`.
#[derive(Debug)]
pub struct Replication {
    /// `master_replid`.
    pub replid: String,
    /// `master_replid2`.
    pub replid2: String,
    /// `master_repl_offset`: bytes of stream produced (or, on a replica, applied).
    pub offset: u64,
    /// `second_repl_offset` (-1: none).
    pub second_offset: i64,
    /// The backlog, once a replica attached (or this server was a replica).
    pub backlog: Option<Backlog>,
    /// Replicas, in attach order.
    pub replicas: Vec<Replica>,
    /// What clients announced with REPLCONF before their PSYNC.
    pub announced: Vec<(Handle, Announced)>,
    /// This server's primary (None: it is a primary).
    pub primary: Option<Primary>,
    /// On a writable replica, the keys (database, name) its own clients gave a TTL: it
    /// expires them itself (see [`Replication::expire_own_ttls`]).
    pub own_ttls: BTreeSet<(usize, Vec<u8>)>,
    /// Stream bytes not yet handed to the replicas, and the offset of their first byte.
    outgoing: Vec<u8>,
    outgoing_start: u64,
    /// When the last PING went to the replicas (unix ms).
    pub last_ping_ms: u64,
    /// Counters.
    pub stats: ReplStats,
    /// Clients blocked in WAIT, in arrival order.
    pub waiters: Vec<Waiter>,
    /// A FAILOVER under way.
    pub failover: Option<Failover>,
    /// Lines for the server's log (a FAILOVER's steps), oldest first; the connection layer
    /// takes them.
    pub notes: Vec<String>,
    /// Since when (unix ms) a primary with a backlog has had no replica (`repl-backlog-ttl`).
    alone_since_ms: Option<u64>,
    /// The most stream bytes one online replica's output still holds unsent (set by the
    /// connection layer). The stream is one, so what lags further back than the backlog
    /// extends the shared buffer (see [`Replication::shared_buffer_bytes`]).
    pub lagging_bytes: u64,
}

impl Replication {
    /// A primary with a fresh replication ID.
    pub fn new(rng: &mut Rng) -> Self {
        Replication {
            replid: new_replid(rng),
            replid2: String::from(NO_REPLID),
            offset: 0,
            second_offset: -1,
            backlog: None,
            replicas: Vec::new(),
            announced: Vec::new(),
            primary: None,
            own_ttls: BTreeSet::new(),
            outgoing: Vec::new(),
            outgoing_start: 1,
            last_ping_ms: 0,
            stats: ReplStats::default(),
            waiters: Vec::new(),
            failover: None,
            notes: Vec::new(),
            alone_since_ms: None,
            lagging_bytes: 0,
        }
    }

    /// Bytes of Redis 7.0's shared replication buffer (INFO `mem_total_replication_buffers`):
    /// the stream from the earliest byte the backlog or a replica still holds to the end.
    /// Every replica's pending stream and the backlog end at the same byte, so that is the
    /// longest of them, whether a replica lags, waits for its RDB (the backlog is pinned for
    /// it) or left.
    pub fn shared_buffer_bytes(&self) -> u64 {
        let backlog = self.backlog.as_ref().map_or(0, |b| b.histlen() as u64);
        backlog.max(self.lagging_bytes)
    }

    /// Creates the backlog if there is none (the replica sink must be on from now on).
    pub fn ensure_backlog(&mut self, size: usize) {
        if self.backlog.is_none() {
            self.backlog = Some(Backlog::new(size, self.offset + 1));
        }
    }

    /// New stream bytes: into the backlog and the offset, and queued for the replicas.
    pub fn feed(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        if let Some(b) = &mut self.backlog {
            b.feed(bytes);
        }
        if self.outgoing.is_empty() {
            self.outgoing_start = self.offset + 1;
        }
        self.offset += bytes.len() as u64;
        if !self.replicas.is_empty() {
            self.outgoing.extend_from_slice(bytes);
        }
    }

    /// Moves the stream bytes not yet handed out into `into` (which must be empty); returns
    /// the offset of their first byte.
    pub fn take_outgoing(&mut self, into: &mut Vec<u8>) -> u64 {
        core::mem::swap(into, &mut self.outgoing);
        self.outgoing_start
    }

    /// The stream offset one past the last byte handed to the replicas (the bytes after it
    /// wait for [`Self::take_outgoing`]).
    pub fn delivered_end(&self) -> u64 {
        if self.outgoing.is_empty() {
            self.offset + 1
        } else {
            self.outgoing_start
        }
    }

    /// Whether stream bytes wait for the replicas.
    pub fn has_outgoing(&self) -> bool {
        !self.outgoing.is_empty()
    }

    /// Whether PSYNC `replid` `offset` can continue from the backlog: the ID is ours, or our
    /// previous one up to the offset where it ended, and the backlog still holds `offset`.
    pub fn can_continue(&self, replid: &[u8], offset: u64) -> bool {
        let ours = replid == self.replid.as_bytes();
        let previous = replid == self.replid2.as_bytes()
            && i64::try_from(offset).is_ok_and(|o| o <= self.second_offset);
        (ours || previous)
            && self
                .backlog
                .as_ref()
                .is_some_and(|b| b.from_offset(offset).is_some())
    }

    /// Attaches client `h` as a replica (its REPLCONF announcements move over).
    pub fn attach(&mut self, h: Handle, state: ReplicaState, stream_start: u64, now_ms: u64) {
        let announced = self.take_announced(h);
        self.replicas.retain(|r| r.handle != h);
        if self.replicas.is_empty() {
            // The first PING goes one period after the first replica attaches, not at once
            // (a replica's stream starts with the writes, as with Redis's cron cadence).
            self.last_ping_ms = now_ms;
        }
        self.replicas.push(Replica {
            handle: h,
            announced,
            state,
            stream_start,
            ack_offset: 0,
            ack_ms: now_ms,
        });
    }

    /// What client `h` announced, forgotten here.
    fn take_announced(&mut self, h: Handle) -> Announced {
        match self.announced.iter().position(|(a, _)| *a == h) {
            Some(i) => self.announced.swap_remove(i).1,
            None => Announced::default(),
        }
    }

    /// Client `h`'s announcements, to change (REPLCONF).
    pub fn announced_mut(&mut self, h: Handle) -> &mut Announced {
        if let Some(r) = self.replicas.iter_mut().find(|r| r.handle == h) {
            return &mut r.announced;
        }
        let i = match self.announced.iter().position(|(a, _)| *a == h) {
            Some(i) => i,
            None => {
                self.announced.push((h, Announced::default()));
                self.announced.len() - 1
            }
        };
        &mut self.announced[i].1
    }

    /// The replica on connection `h`.
    pub fn replica_mut(&mut self, h: Handle) -> Option<&mut Replica> {
        self.replicas.iter_mut().find(|r| r.handle == h)
    }

    /// Whether client `h` is a replica.
    #[inline]
    pub fn is_replica(&self, h: Handle) -> bool {
        self.replicas.iter().any(|r| r.handle == h)
    }

    /// Forgets client `h` (its connection closed). The link to the primary going down
    /// leaves the replica waiting for its next connection attempt.
    pub fn remove(&mut self, h: Handle) {
        self.waiters.retain(|w| w.handle != h);
        self.replicas.retain(|r| r.handle != h);
        self.announced.retain(|(a, _)| *a != h);
        if self.replicas.is_empty() {
            self.outgoing.clear();
        }
        self.link_lost(h);
    }

    /// The link to the primary, if it is `h`, is gone: the replica waits for its next
    /// connection attempt.
    pub fn link_lost(&mut self, h: Handle) {
        if let Some(p) = self.primary.as_mut().filter(|p| p.link == Some(h)) {
            p.link = None;
            if p.state == LinkState::Connected {
                p.down_since_ms = DOWN_UNNOTED;
                // At once, not a second later: the backlog may not hold a second of writes
                // (Redis 7.0 reconnects at once too).
                p.next_attempt_ms = 0;
            }
            p.state = LinkState::Connect;
        }
    }

    /// Whether client `h` is this server's primary (the master client).
    #[inline]
    pub fn is_master_client(&self, h: Handle) -> bool {
        self.primary
            .as_ref()
            .is_some_and(|p| p.link == Some(h) && p.state == LinkState::Connected)
    }

    /// The connection to the primary, in any state.
    pub fn link(&self) -> Option<Handle> {
        self.primary.as_ref().and_then(|p| p.link)
    }

    /// The primary to connect to now, if one is due: its state moves to `Connecting`.
    pub fn due_connect(&mut self, now_ms: u64) -> Option<(String, u16)> {
        let p = self.primary.as_mut()?;
        if p.state != LinkState::Connect || now_ms < p.next_attempt_ms || p.link.is_some() {
            return None;
        }
        p.state = LinkState::Connecting;
        p.next_attempt_ms = now_ms + 1000;
        p.last_io_ms = now_ms;
        Some((p.host.clone(), p.port))
    }

    /// A replica's own client left `key` of database `db` with a TTL.
    pub fn remember_ttl(&mut self, db: usize, key: &[u8]) {
        self.own_ttls.insert((db, key.to_vec()));
    }

    /// The keys of [`Replication::own_ttls`] whose TTL passed by `now_ms`, forgotten; the
    /// ones that lost their TTL (or the key) are forgotten too. `expire_at` reads a key's
    /// expiry time in a database.
    pub fn expire_own_ttls(
        &mut self,
        now_ms: u64,
        mut expire_at: impl FnMut(usize, &[u8]) -> Option<u64>,
    ) -> Vec<(usize, Vec<u8>)> {
        let mut due = Vec::new();
        self.own_ttls.retain(|(db, key)| match expire_at(*db, key) {
            Some(at) if at <= now_ms => {
                due.push((*db, key.clone()));
                false
            }
            Some(_) => true,
            None => false,
        });
        due
    }

    /// A full sync's payload is loaded: the history is the primary's from `offset` on (a
    /// fresh backlog; no secondary ID).
    pub fn synced_full(&mut self, replid: String, offset: u64, backlog_size: usize) {
        self.replid = replid;
        self.replid2 = String::from(NO_REPLID);
        self.second_offset = -1;
        self.offset = offset;
        self.backlog = Some(Backlog::new(backlog_size, offset + 1));
        self.outgoing.clear();
    }

    /// A partial resync was accepted: the history goes on; a new primary ID makes the old
    /// one the secondary ID (valid up to here), as PSYNC2 does.
    pub fn synced_continue(&mut self, replid: Option<String>, backlog_size: usize) {
        if let Some(id) = replid.filter(|id| *id != self.replid) {
            self.replid2 = core::mem::replace(&mut self.replid, id);
            self.second_offset = self.offset as i64 + 1;
        }
        self.ensure_backlog(backlog_size);
    }

    /// Replicas online whose last ACK is at most `max_lag_s` seconds old (the
    /// `min-replicas-*` check counts them).
    pub fn good_replicas(&self, max_lag_s: u64, now_ms: u64) -> usize {
        self.replicas
            .iter()
            .filter(|r| r.state == ReplicaState::Online)
            .filter(|r| now_ms.saturating_sub(r.ack_ms) / 1000 <= max_lag_s)
            .count()
    }

    /// Replicas that acknowledged at least `offset`.
    pub fn acked(&self, offset: u64) -> usize {
        self.replicas
            .iter()
            .filter(|r| r.state == ReplicaState::Online && r.ack_offset >= offset)
            .count()
    }

    /// The WAIT clients whose replicas acknowledged enough, or whose time is up (`now_ms`
    /// past their deadline), with the count to answer; they are forgotten here.
    pub fn take_done_waiters(&mut self, now_ms: u64) -> Vec<(Handle, i64)> {
        let mut done = Vec::new();
        let mut i = 0;
        while i < self.waiters.len() {
            let w = &self.waiters[i];
            let acked = self.acked(w.offset);
            if acked >= w.replicas || w.deadline_ms.is_some_and(|d| now_ms > d) {
                done.push((w.handle, acked as i64));
                self.waiters.remove(i);
            } else {
                i += 1;
            }
        }
        done
    }

    /// The earliest WAIT deadline.
    pub fn next_wait_deadline(&self) -> Option<u64> {
        self.waiters.iter().filter_map(|w| w.deadline_ms).min()
    }

    /// Whether client `h` is blocked in WAIT.
    pub fn is_waiting(&self, h: Handle) -> bool {
        self.waiters.iter().any(|w| w.handle == h)
    }

    /// This server stops following its primary (REPLICAOF NO ONE): the ID it followed becomes
    /// the secondary ID, valid up to the current offset, and it draws a new one, so its own
    /// replicas (and the old primary's) continue with `+CONTINUE`.
    pub fn promote(&mut self, rng: &mut Rng) {
        self.primary = None;
        self.shift_replid(rng);
    }

    /// The FAILOVER's next step at `now_ms`, given each replica's address (`ip_of`): waiting
    /// for sync, the first online replica (the target, if named) whose ACK reached the whole
    /// stream, or the target at the timeout with FORCE; the timeout without it aborts. In
    /// progress the timeout no longer applies, as in Redis: the FAILOVER ends when the target
    /// answers the PSYNC (or refuses it), or by FAILOVER ABORT. (With FORCE the deadline has
    /// passed by then: an abort at the next cron left a target that was merely slow, stopped
    /// by integration/failover's SIGSTOP, a replica of the old primary.)
    pub fn failover_step(&self, now_ms: u64, ip_of: impl Fn(&Replica) -> String) -> FailoverStep {
        let Some(f) = &self.failover else {
            return FailoverStep::Wait;
        };
        if f.state == FailoverState::InProgress {
            return FailoverStep::Wait;
        }
        let timed_out = f.deadline_ms.is_some_and(|d| now_ms >= d);
        let caught_up = self.replicas.iter().find(|r| {
            let named = f.target.as_ref().is_none_or(|(host, port)| {
                r.announced.port == *port && ip_of(r).eq_ignore_ascii_case(host)
            });
            named && r.state == ReplicaState::Online && r.ack_offset >= self.offset
        });
        if let Some(r) = caught_up {
            return FailoverStep::Switch {
                host: ip_of(r),
                port: r.announced.port,
                forced: false,
            };
        }
        match (timed_out, &f.target) {
            (true, Some((host, port))) if f.force => FailoverStep::Switch {
                host: host.clone(),
                port: *port,
                forced: true,
            },
            (true, _) => FailoverStep::Abort("Replica never caught up before timeout"),
            (false, _) => FailoverStep::Wait,
        }
    }

    /// `repl-backlog-ttl` (seconds, 0: never), from the cron: a primary without replicas
    /// for that long frees its backlog and draws a new replication ID, so a replica that
    /// comes back syncs in full (Redis's `replicationCron`). Returns whether it did.
    pub fn backlog_cron(&mut self, now_ms: u64, ttl_s: u64, rng: &mut Rng) -> bool {
        if !self.replicas.is_empty() || self.primary.is_some() || self.backlog.is_none() {
            self.alone_since_ms = None;
            return false;
        }
        let since = *self.alone_since_ms.get_or_insert(now_ms);
        if ttl_s == 0 || now_ms.saturating_sub(since) < ttl_s * 1000 {
            return false;
        }
        self.backlog = None;
        self.alone_since_ms = None;
        self.replid = new_replid(rng);
        self.replid2 = String::from(NO_REPLID);
        self.second_offset = -1;
        self.note(alloc::format!(
            "Replication backlog freed after {ttl_s} seconds without connected replicas."
        ));
        true
    }

    /// A line for the log (kept to the last 64 when nobody takes them).
    pub fn note(&mut self, line: String) {
        if self.notes.len() >= 64 {
            self.notes.remove(0);
        }
        self.notes.push(line);
    }

    /// Moves the ID to the secondary ID and draws a new one.
    pub fn shift_replid(&mut self, rng: &mut Rng) {
        self.replid2 = core::mem::replace(&mut self.replid, new_replid(rng));
        self.second_offset = self.offset as i64 + 1;
    }
}

/// The address a replica is reported at (INFO `ip=`, ROLE): what it announced with
/// `REPLCONF ip-address`, else its connection's peer address without the port.
pub fn replica_ip(announced: &Announced, transport: &crate::client::Transport) -> String {
    if let Some(ip) = &announced.ip {
        return ip.clone();
    }
    match transport {
        crate::client::Transport::Tcp { addr, .. } => match addr.rsplit_once(':') {
            Some((host, _)) => String::from(host.trim_start_matches('[').trim_end_matches(']')),
            None => addr.clone(),
        },
        crate::client::Transport::Unix { .. } => String::from("127.0.0.1"),
    }
}

/// 40 random hex digits.
pub fn new_replid(rng: &mut Rng) -> String {
    (0..40)
        .map(|_| char::from(b"0123456789abcdef"[(rng.next_u64() % 16) as usize]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continues_from_our_id_or_the_previous_one_up_to_its_end() {
        let mut rng = Rng::new(1);
        let mut r = Replication::new(&mut rng);
        r.ensure_backlog(100);
        r.feed(b"0123456789");
        assert_eq!(r.offset, 10);
        let id = r.replid.clone();
        assert!(r.can_continue(id.as_bytes(), 11));
        assert!(r.can_continue(id.as_bytes(), 1));
        assert!(!r.can_continue(id.as_bytes(), 12));
        assert!(!r.can_continue(b"?", 1));
        r.promote(&mut rng);
        assert_eq!(r.second_offset, 11);
        assert!(r.can_continue(id.as_bytes(), 11));
        r.feed(b"ab");
        assert!(!r.can_continue(id.as_bytes(), 12));
        assert!(r.can_continue(r.replid.clone().as_bytes(), 12));
    }

    #[test]
    fn load_mode_follows_the_setting_the_dataset_and_the_id() {
        assert_eq!(load_mode(b"disabled", true, true), LoadMode::Disk);
        assert_eq!(load_mode(b"on-empty-db", true, false), LoadMode::Loading);
        assert_eq!(load_mode(b"on-empty-db", false, false), LoadMode::Disk);
        assert_eq!(load_mode(b"swapdb", false, false), LoadMode::Loading);
        assert_eq!(load_mode(b"swapdb", false, true), LoadMode::AsyncLoading);
    }

    /// A replica at `port` that acknowledged `ack` (online).
    fn replica(h: usize, port: u16, ack: u64) -> Replica {
        Replica {
            handle: Handle(h),
            announced: Announced {
                port,
                ..Announced::default()
            },
            state: ReplicaState::Online,
            stream_start: 1,
            ack_offset: ack,
            ack_ms: 0,
        }
    }

    #[test]
    fn failover_switches_to_a_caught_up_replica_or_times_out_before_the_switch() {
        let mut r = Replication::new(&mut Rng::new(1));
        r.feed(b"0123456789");
        r.replicas = alloc::vec![replica(1, 7001, 5), replica(2, 7002, 10)];
        let ip = |_: &Replica| String::from("127.0.0.1");
        r.failover = Some(Failover {
            state: FailoverState::WaitForSync,
            target: None,
            deadline_ms: Some(100),
            force: false,
        });
        let to_7002 = FailoverStep::Switch {
            host: "127.0.0.1".into(),
            port: 7002,
            forced: false,
        };
        assert_eq!(r.failover_step(0, ip), to_7002);
        // A named target that has not caught up: wait, then abort, or with FORCE switch.
        let f = r.failover.as_mut().unwrap();
        f.target = Some(("127.0.0.1".into(), 7001));
        assert_eq!(r.failover_step(99, ip), FailoverStep::Wait);
        assert!(matches!(r.failover_step(100, ip), FailoverStep::Abort(_)));
        r.failover.as_mut().unwrap().force = true;
        let forced = FailoverStep::Switch {
            host: "127.0.0.1".into(),
            port: 7001,
            forced: true,
        };
        assert_eq!(r.failover_step(100, ip), forced);
        // In progress, only the target's answer to the PSYNC ends it: no timeout.
        r.failover.as_mut().unwrap().state = FailoverState::InProgress;
        assert_eq!(r.failover_step(99, ip), FailoverStep::Wait);
        assert_eq!(r.failover_step(100, ip), FailoverStep::Wait);
        assert_eq!(r.failover_step(1_000_000, ip), FailoverStep::Wait);
    }

    #[test]
    fn backlog_goes_after_its_ttl_without_replicas() {
        let mut rng = Rng::new(1);
        let mut r = Replication::new(&mut rng);
        r.ensure_backlog(100);
        r.feed(b"abc");
        let id = r.replid.clone();
        assert!(!r.backlog_cron(1000, 2, &mut rng));
        assert!(!r.backlog_cron(2999, 2, &mut rng));
        assert!(r.backlog_cron(3000, 2, &mut rng));
        assert!(r.backlog.is_none() && r.replid != id && r.offset == 3);
        assert!(!r.can_continue(id.as_bytes(), 4));
    }
}
