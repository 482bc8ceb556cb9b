//! The Xenstore daemon as a sans-IO state machine: connections send [`Op`]s (with their
//! transaction id and the time) and get a [`Reply`]; watch events queue up for the shell to
//! collect with [`Xenstored::take_events`].

use alloc::borrow::Cow;
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;

use crate::control::{self, Command, DomainUsage};
use crate::domain::Domains;
use crate::error::XsError;
use crate::exec::{Ctx, Effects};
use crate::node::Node;
use crate::op::{Op, Reply};
use crate::path::{canonicalize, domain_home, is_special};
use crate::perms::{parse_lenient, Perms};
use crate::store::{Actor, Change, Quota, Store};
use crate::txn::{CommitPath, ConflictPolicy, Txn};
use crate::watch::Watch;
use crate::Now;

/// A connection handle chosen by the shell.
pub type ConnId = u64;

/// The special watch path fired by INTRODUCE.
pub const INTRODUCE_DOMAIN: &str = "@introduceDomain";
/// The special watch path fired by RELEASE.
pub const RELEASE_DOMAIN: &str = "@releaseDomain";

/// Daemon settings (xenstored command-line options).
#[derive(Clone, Debug, Default)]
pub struct XsConfig {
    /// Per-domain limits.
    pub quota: Quota,
    /// Transaction conflict policy.
    pub policy: ConflictPolicy,
    /// Skip creating the initial nodes (`--no-domain-init` keeps the tree empty but for `/`).
    pub no_domain_init: bool,
    /// The ring features the shell offers guests (xenstore-ring.txt bits; 0 without rings):
    /// GET_FEATURE's answer and each introduced domain's initial features.
    pub features: u32,
}

/// An unsolicited WATCH_EVENT for a connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchEvent {
    /// The connection to send it to.
    pub conn: ConnId,
    /// The event path (relative when the watch was).
    pub path: Vec<u8>,
    /// The watch's token.
    pub token: Vec<u8>,
}

/// A change of the domain table the shell acts on: map a guest's ring page and bind its event
/// channel, or let them go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DomainChange {
    /// INTRODUCE (again, for a known domain: its event channel is to be bound anew).
    Introduced {
        /// The domain.
        domid: u32,
        /// Guest frame of its ring page.
        gfn: u64,
        /// Its event channel port.
        port: u32,
    },
    /// RELEASE or the domain's death: its connections are gone from the store.
    Released {
        /// The domain.
        domid: u32,
    },
    /// RESUME: the domain runs again, so its next shutdown is to be announced again.
    Resumed {
        /// The domain.
        domid: u32,
    },
}

/// Counters for CONTROL and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XsStats {
    /// Transactions committed by root swap.
    pub swaps: u64,
    /// Transactions committed by grafting.
    pub grafts: u64,
    /// Transactions committed by replay.
    pub replays: u64,
    /// Transactions refused with EAGAIN.
    pub conflicts: u64,
}

/// One connection's state.
#[derive(Clone, Debug)]
struct Conn {
    domid: u32,
    watches: Vec<Watch>,
    /// Open transactions by id (a handful at most: the per-domain quota is 10; a list keeps
    /// its room from one transaction to the next, where a map allocated a node per start).
    txns: Vec<(u32, Txn)>,
    next_tid: u32,
    /// Replies queued but not yet delivered, as the transport last reported.
    outstanding: usize,
    /// The only connection of its domain (a guest's ring, as a rule): flow control then
    /// counts this one's usage alone.
    alone: bool,
}

/// Ids below this index the connection table's vector directly (a shell's connection slots,
/// as a rule); larger ones go to its sorted list.
const DENSE_IDS: ConnId = 4096;

/// Connections by id: one vector indexed by the id for ids below [`DENSE_IDS`] (several
/// lookups per request, each one index), and a list sorted by id, searched by bisection, for
/// any larger id. Walked in id order.
#[derive(Clone, Debug, Default)]
struct ConnTable {
    dense: Vec<Option<Conn>>,
    sparse: Vec<(ConnId, Conn)>,
    len: usize,
}

impl ConnTable {
    /// Where `id` is, or would go, in the sorted list.
    fn find(&self, id: ConnId) -> Result<usize, usize> {
        self.sparse.binary_search_by_key(&id, |(k, _)| *k)
    }

    /// The connection `id`.
    fn get(&self, id: &ConnId) -> Option<&Conn> {
        match *id < DENSE_IDS {
            true => self.dense.get(*id as usize)?.as_ref(),
            false => self.find(*id).ok().map(|i| &self.sparse[i].1),
        }
    }

    /// The connection `id`, mutably.
    fn get_mut(&mut self, id: &ConnId) -> Option<&mut Conn> {
        match *id < DENSE_IDS {
            true => self.dense.get_mut(*id as usize)?.as_mut(),
            false => {
                let i = self.find(*id).ok()?;
                Some(&mut self.sparse[i].1)
            }
        }
    }

    /// Add or replace connection `id`.
    fn insert(&mut self, id: ConnId, c: Conn) {
        if id < DENSE_IDS {
            let i = id as usize;
            if self.dense.len() <= i {
                self.dense.resize_with(i + 1, || None);
            }
            if self.dense[i].replace(c).is_none() {
                self.len += 1;
            }
            return;
        }
        match self.find(id) {
            Ok(i) => self.sparse[i].1 = c,
            Err(i) => {
                self.sparse.insert(i, (id, c));
                self.len += 1;
            }
        }
    }

    /// Take connection `id` out.
    fn remove(&mut self, id: &ConnId) -> Option<Conn> {
        let c = match *id < DENSE_IDS {
            true => self.dense.get_mut(*id as usize)?.take(),
            false => {
                let i = self.find(*id).ok()?;
                Some(self.sparse.remove(i).1)
            }
        };
        if c.is_some() {
            self.len -= 1;
        }
        c
    }

    /// The connections in id order.
    fn iter(&self) -> impl Iterator<Item = (ConnId, &Conn)> {
        let dense = self.dense.iter().enumerate();
        let dense = dense.filter_map(|(i, c)| c.as_ref().map(|c| (i as ConnId, c)));
        dense.chain(self.sparse.iter().map(|(id, c)| (*id, c)))
    }

    /// The connections' states in id order.
    fn values(&self) -> impl Iterator<Item = &Conn> {
        self.iter().map(|(_, c)| c)
    }

    /// Number of connections.
    fn len(&self) -> usize {
        self.len
    }
}

/// The daemon state.
#[derive(Clone, Debug)]
pub struct Xenstored {
    store: Store,
    conns: ConnTable,
    /// Connections by domain (flow control asks for a guest's before each of its requests).
    by_domain: BTreeMap<u32, Vec<ConnId>>,
    /// Connections with at least one watch (the only ones a change can fire for).
    watchers: BTreeSet<ConnId>,
    /// The domain table.
    pub domains: Domains,
    /// Settings.
    pub config: XsConfig,
    /// Who may watch the special paths (SET_PERMS on `@introduceDomain` / `@releaseDomain`).
    special_perms: BTreeMap<String, Perms>,
    gen: u64,
    commits: u64,
    events: Vec<WatchEvent>,
    /// Commit statistics.
    pub stats: XsStats,
    /// `CONTROL log on|off`.
    pub logging: bool,
    /// `CONTROL logfile <file>`: the trace file the shell should switch to (taken with
    /// [`Xenstored::take_logfile`]).
    pub logfile: Option<Vec<u8>>,
    /// Memory-quota report state per unprivileged domain.
    mem_reports: BTreeMap<u32, MemReport>,
    /// Log lines for the shell (syslog in cxenstored), taken with [`Xenstored::take_log`].
    log: Vec<LogLine>,
    /// Seconds of the time the last request came with (the clock for report rate limits).
    now_s: u64,
    /// Tree versions a transaction end let go of, freed by [`Xenstored::sweep`] (see there).
    dead: Vec<Arc<Node>>,
    /// Domain changes for the shell, taken with [`Xenstored::take_domain_changes`].
    domain_changes: Vec<DomainChange>,
    /// Some domain got its own quota (SET_QUOTA) or a target (SET_TARGET): until then every
    /// request's actor and quota come without a look at the domain table.
    per_domain: bool,
    /// Scratch list of a request's effects (its vectors keep their room between requests).
    fx: Effects,
}

/// Versions [`Xenstored::dead`] holds at most: a shell that never calls
/// [`Xenstored::sweep`] frees them here, at a transaction end.
pub(super) const DEAD_MAX: usize = 768;

/// Minimum seconds between two memory-quota reports of one domain (cxenstored 4.17's
/// `MEM_WARN_MINTIME_SEC`); the first report is never held back.
pub const MEM_WARN_MINTIME_SEC: u64 = 10;

/// Syslog severity of a [`LogLine`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// `LOG_ERR`.
    Err,
    /// `LOG_WARNING`.
    Warning,
    /// `LOG_INFO`.
    Info,
}

/// A line the shell should log (cxenstored sends these to syslog).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLine {
    /// How serious it is.
    pub severity: Severity,
    /// The text, without a trailing newline.
    pub text: String,
}

/// Which memory-quota states of a domain were reported, and when the last report was.
#[derive(Clone, Copy, Debug, Default)]
struct MemReport {
    soft: bool,
    hard: bool,
    /// Seconds of the last report; `None` before the first.
    last_s: Option<u64>,
}

/// Bytes a connection's watches are charged (path and token of each).
fn watch_bytes(c: &Conn) -> u64 {
    c.watches
        .iter()
        .map(|w| (w.path.len() + w.token.len()) as u64)
        .sum()
}

impl Xenstored {
    /// A daemon with the initial tree: `/tool/xenstored` and `/local` (as the reference
    /// daemons create them), unless `no_domain_init`.
    pub fn new(config: XsConfig) -> Self {
        let mut xs = Xenstored {
            store: Store::new(),
            conns: ConnTable::default(),
            by_domain: BTreeMap::new(),
            watchers: BTreeSet::new(),
            domains: Domains::default(),
            config,
            special_perms: BTreeMap::new(),
            gen: 0,
            commits: 0,
            events: Vec::new(),
            stats: XsStats::default(),
            logging: false,
            logfile: None,
            mem_reports: BTreeMap::new(),
            log: Vec::new(),
            now_s: 0,
            dead: Vec::new(),
            domain_changes: Vec::new(),
            per_domain: false,
            fx: Effects::default(),
        };
        if !xs.config.no_domain_init {
            for p in ["/tool/xenstored", "/local"] {
                let q = xs.config.quota;
                let mut cx = Ctx {
                    actor: Actor::DOM0,
                    quota: &q,
                    gen: &mut xs.gen,
                };
                let op = Op::Mkdir(p.into());
                crate::exec::apply(&mut xs.store, &mut cx, &op, &mut Effects::default());
            }
        }
        xs
    }

    /// The current store (a cheap snapshot).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// A new connection from domain `domid` (0 = privileged; every Unix socket client).
    pub fn connect(&mut self, conn: ConnId, domid: u32) {
        let c = Conn {
            domid,
            watches: Vec::new(),
            txns: Vec::new(),
            next_tid: 1,
            outstanding: 0,
            alone: true,
        };
        self.disconnect(conn);
        self.conns.insert(conn, c);
        self.by_domain.entry(domid).or_default().push(conn);
        self.note_alone(domid);
    }

    /// Mark whether each connection of `domid` is its only one.
    fn note_alone(&mut self, domid: u32) {
        let ids = self.by_domain.get(&domid).map_or(&[][..], Vec::as_slice);
        let alone = ids.len() == 1;
        for id in ids {
            if let Some(c) = self.conns.get_mut(id) {
                c.alone = alone;
            }
        }
    }

    /// The connection went away: its watches and transactions go with it.
    pub fn disconnect(&mut self, conn: ConnId) {
        let Some(c) = self.conns.remove(&conn) else {
            return;
        };
        self.watchers.remove(&conn);
        if let Some(ids) = self.by_domain.get_mut(&c.domid) {
            ids.retain(|&id| id != conn);
            if ids.is_empty() {
                self.by_domain.remove(&c.domid);
            }
        }
        self.note_alone(c.domid);
    }

    /// Flow control, asked by the transport before it decodes the next request of `conn`,
    /// with the number of its replies still undelivered. False (stop reading; no error) when
    /// an unprivileged domain is at its `outstanding` quota or at or over its hard `memory`
    /// quota, as cxenstored 4.17's `domain_can_read`. Dom0 is never held back.
    pub fn may_read(&mut self, conn: ConnId, outstanding: usize) -> bool {
        let Some(c) = self.conns.get_mut(&conn) else {
            return false;
        };
        c.outstanding = outstanding;
        let domid = c.domid;
        if domid == 0 {
            return true;
        }
        let own_watches = watch_bytes(c);
        // A guest has one connection (its ring) as a rule: then its usage is this one's.
        let alone = c.alone;
        let q = self.quota_of(domid);
        let busy: usize = match alone {
            true => outstanding,
            false => self.domain_conns(domid).map(|c| c.outstanding).sum(),
        };
        if busy >= q.outstanding as usize {
            return false;
        }
        if q.memory == 0 && q.memory_soft == 0 {
            return true;
        }
        let mem = match alone {
            true => self.store.memory_of(domid) + own_watches,
            false => self.memory_of(domid),
        };
        !self.report_memory(domid, mem, &q)
    }

    /// cxenstored 4.17's memory-quota reports for an unprivileged domain using `mem` bytes:
    /// at or over the hard quota, one error line ("stalled") and true (stop reading it); else,
    /// at most once per [`MEM_WARN_MINTIME_SEC`], lines when it drops below the hard quota,
    /// crosses the soft quota, or drops below it again. Each state is reported once per change.
    fn report_memory(&mut self, domid: u32, mem: u64, q: &Quota) -> bool {
        // The common case costs no map entry: under both quotas with nothing reported yet.
        let under = |limit: u32| limit == 0 || mem < u64::from(limit);
        if under(q.memory) && under(q.memory_soft) && !self.mem_reports.contains_key(&domid) {
            return false;
        }
        let now = self.now_s;
        let r = self.mem_reports.entry(domid).or_default();
        let mut lines = Vec::new();
        let stalled = q.memory != 0 && mem >= u64::from(q.memory);
        if stalled {
            if !r.hard {
                r.hard = true;
                r.last_s = Some(now);
                lines.push((
                    Severity::Err,
                    "exceeds hard memory quota, Xenstore interface to domain stalled",
                ));
            }
        } else if r
            .last_s
            .is_none_or(|t| now.saturating_sub(t) >= MEM_WARN_MINTIME_SEC)
        {
            let soft = u64::from(q.memory_soft);
            if r.hard {
                r.hard = false;
                r.last_s = Some(now);
                lines.push((Severity::Info, "below hard memory quota again"));
            }
            if soft != 0 && mem >= soft && !r.soft {
                r.soft = true;
                r.last_s = Some(now);
                lines.push((Severity::Warning, "exceeds soft memory quota"));
            }
            if mem < soft && r.soft {
                r.soft = false;
                r.last_s = Some(now);
                lines.push((Severity::Info, "below soft memory quota again"));
            }
        }
        for (severity, what) in lines {
            let text = alloc::format!("Domain {domid} {what}");
            self.log.push(LogLine { severity, text });
        }
        stalled
    }

    /// Free the tree versions that transaction ends let go of (a transaction's snapshot
    /// and private copy, the store a commit replaced). A transaction end does not free them
    /// itself: freeing a path copy is most of a commit's work, and done there it sits
    /// between the request and its reply; a shell calls this once its replies went out.
    /// Without calls, at most [`DEAD_MAX`] versions wait.
    pub fn sweep(&mut self) {
        self.dead.clear();
    }

    /// How many tree versions wait for [`Xenstored::sweep`].
    pub fn unswept(&self) -> usize {
        self.dead.len()
    }

    /// Keep a tree version (a transaction's, or the store a commit replaced) for
    /// [`Xenstored::sweep`] instead of freeing it now.
    fn bury(&mut self, root: Arc<Node>) {
        if self.dead.len() >= DEAD_MAX {
            self.sweep();
        }
        self.dead.push(root);
    }

    /// Log lines produced so far (memory-quota reports), in order.
    pub fn take_log(&mut self) -> Vec<LogLine> {
        core::mem::take(&mut self.log)
    }

    /// The connections of a domain.
    fn domain_conns(&self, domid: u32) -> impl Iterator<Item = &Conn> {
        let ids = self.by_domain.get(&domid).map_or(&[][..], Vec::as_slice);
        ids.iter().filter_map(|id| self.conns.get(id))
    }

    /// Accounted memory of a domain: its nodes (cxenstored's formula, see
    /// [`Store::memory_of`]) plus its watches (path and token bytes).
    pub fn memory_of(&self, domid: u32) -> u64 {
        let watches: u64 = self.domain_conns(domid).map(watch_bytes).sum();
        self.store.memory_of(domid) + watches
    }

    /// A domain's usage for `CONTROL quota <domid>`: watches, transactions, outstanding.
    pub fn domain_usage(&self, domid: u32) -> (usize, usize, usize) {
        let conns = || self.domain_conns(domid);
        let watches = conns().map(|c| c.watches.len()).sum();
        let txns = conns().map(|c| c.txns.len()).sum();
        let outstanding = conns().map(|c| c.outstanding).sum();
        (watches, txns, outstanding)
    }

    /// The trace file a `CONTROL logfile` asked for since the last call.
    pub fn take_logfile(&mut self) -> Option<Vec<u8>> {
        self.logfile.take()
    }

    /// Domain changes since the last call, in order.
    pub fn take_domain_changes(&mut self) -> Vec<DomainChange> {
        core::mem::take(&mut self.domain_changes)
    }

    /// The domain of a connection.
    pub fn domain_of(&self, conn: ConnId) -> Option<u32> {
        self.conns.get(&conn).map(|c| c.domid)
    }

    /// Xen says domain `d` died (the shell asked after `VIRQ_DOM_EXC`): as RELEASE, its
    /// connections go with their watches and transactions and `@releaseDomain` fires. False
    /// when the domain was not introduced.
    pub fn domain_died(&mut self, d: u32) -> bool {
        d != 0 && self.release(d).is_ok()
    }

    /// Xen says an introduced domain shut down (not yet dead): fire `@releaseDomain`, as
    /// cxenstored does, so toolstacks notice; the domain and its connection stay.
    pub fn domain_shut_down(&mut self) {
        self.fire_special(RELEASE_DOMAIN);
    }

    /// Watch events produced so far, in order.
    pub fn take_events(&mut self) -> Vec<WatchEvent> {
        core::mem::take(&mut self.events)
    }

    /// The acting identity of a connection.
    fn actor(&self, domid: u32) -> Actor {
        Actor {
            domid,
            privileged: domid == 0,
            target: self.domains.target(domid),
        }
    }

    /// The quota applying to a domain.
    fn quota_of(&self, domid: u32) -> Quota {
        match self.per_domain {
            true => self.domains.quota(domid, &self.config.quota),
            false => self.config.quota,
        }
    }

    /// The acting identity of a domain and the quota applying to it, with one look at the
    /// domain table.
    fn actor_quota(&self, domid: u32) -> (Actor, Quota) {
        let d = match self.per_domain {
            true => self.domains.table.get(&domid),
            false => None,
        };
        let actor = Actor {
            domid,
            privileged: domid == 0,
            target: d.and_then(|d| d.target),
        };
        (actor, d.and_then(|d| d.quota).unwrap_or(self.config.quota))
    }

    /// Handle one request of `conn` in transaction `tx_id` (0 = none).
    pub fn handle(&mut self, conn: ConnId, tx_id: u32, op: &Op, now: Now) -> Reply {
        self.handle_op(conn, tx_id, Cow::Borrowed(op), now)
    }

    /// [`Xenstored::handle`] taking the request: a transaction keeps it for its replay
    /// without copying it.
    pub fn handle_owned(&mut self, conn: ConnId, tx_id: u32, op: Op, now: Now) -> Reply {
        self.handle_op(conn, tx_id, Cow::Owned(op), now)
    }

    /// Handle one request, borrowed or owned.
    fn handle_op(&mut self, conn: ConnId, tx_id: u32, op: Cow<'_, Op>, now: Now) -> Reply {
        self.now_s = now.secs();
        let Some(c) = self.conns.get(&conn) else {
            return Reply::Error(XsError::Einval);
        };
        let domid = c.domid;
        // cxenstored 4.17 checks XS_FLAG_PRIV before the transaction id, answering EACCES.
        if domid != 0 && op.is_privileged() {
            return Reply::Error(XsError::Eacces);
        }
        if tx_id != 0 && !c.txns.iter().any(|(t, _)| *t == tx_id) {
            return Reply::Error(XsError::Enoent);
        }
        if op.is_transactional() {
            if let Op::SetPerms(p, perms) = &*op {
                if is_special(p) {
                    let r = self.set_special_perms(domid, p, perms);
                    return r.unwrap_or_else(Reply::Error);
                }
            }
            return self.store_op(conn, domid, tx_id, op);
        }
        let op = &*op;
        let result = match op {
            Op::Invalid(e) => Err(*e),
            Op::TransactionStart if tx_id != 0 => Err(XsError::Ebusy),
            Op::TransactionStart => self.transaction_start(conn, domid, now),
            Op::TransactionEnd(_) if tx_id == 0 => Err(XsError::Enoent),
            Op::TransactionEnd(commit) => self.transaction_end(conn, domid, tx_id, *commit),
            Op::Watch(p, t) => self.watch(conn, domid, p, t),
            Op::Unwatch(p, t) => self.unwatch(conn, domid, p, t),
            Op::ResetWatches => self.reset_watches(conn),
            _ => self.domain_op(domid, op),
        };
        result.unwrap_or_else(Reply::Error)
    }

    /// A store operation, inside a transaction or directly.
    fn store_op(&mut self, conn: ConnId, domid: u32, tx_id: u32, op: Cow<'_, Op>) -> Reply {
        let (actor, quota) = self.actor_quota(domid);
        let mut cx = Ctx {
            actor,
            quota: &quota,
            gen: &mut self.gen,
        };
        if tx_id != 0 {
            let txn = self.conns.get_mut(&conn).and_then(|c| {
                let i = c.txns.iter().position(|(t, _)| *t == tx_id)?;
                Some(&mut c.txns[i].1)
            });
            return txn
                .expect("checked by handle")
                .run(&mut cx, op.into_owned(), &mut self.fx);
        }
        let mut fx = core::mem::take(&mut self.fx);
        let reply = crate::exec::apply(&mut self.store, &mut cx, &op, &mut fx);
        if !fx.changes.is_empty() {
            self.commits += 1;
        }
        for c in &fx.changes {
            self.fire(c);
        }
        fx.reads.clear();
        fx.changes.clear();
        self.fx = fx;
        reply
    }

    /// TRANSACTION_START: a new per-connection id (1, 2, 3...).
    fn transaction_start(&mut self, conn: ConnId, domid: u32, now: Now) -> Result<Reply, XsError> {
        let quota = self.quota_of(domid);
        let txn = Txn::new(&self.store, self.commits, now.ms());
        let c = self.conns.get_mut(&conn).expect("checked by handle");
        if domid != 0 && c.txns.len() >= quota.transactions as usize {
            return Err(XsError::Enospc);
        }
        let tid = c.next_tid;
        c.next_tid = c.next_tid.wrapping_add(1).max(1);
        c.txns.push((tid, txn));
        let mut id = String::with_capacity(10);
        crate::path::push_decimal(&mut id, tid);
        Ok(Reply::Text(id))
    }

    /// TRANSACTION_END: commit (`T`) or abort (`F`); the id is gone either way.
    fn transaction_end(
        &mut self,
        conn: ConnId,
        domid: u32,
        tid: u32,
        commit: bool,
    ) -> Result<Reply, XsError> {
        let c = self.conns.get_mut(&conn).expect("checked by handle");
        let i = c.txns.iter().position(|(t, _)| *t == tid);
        let (_, txn) = c.txns.swap_remove(i.ok_or(XsError::Enoent)?);
        self.bury(Arc::clone(&txn.start.root));
        self.bury(Arc::clone(&txn.store.root));
        if !commit {
            return Ok(Reply::Ok);
        }
        if txn.failed {
            return Err(XsError::Enomem);
        }
        let (actor, quota) = self.actor_quota(domid);
        let mut cx = Ctx {
            actor,
            quota: &quota,
            gen: &mut self.gen,
        };
        let policy = self.config.policy;
        let Some(done) = txn.commit(&mut self.store, self.commits, policy, &mut cx) else {
            self.stats.conflicts += 1;
            return Err(XsError::Eagain);
        };
        match done.how {
            CommitPath::Swap => self.stats.swaps += 1,
            CommitPath::Graft => self.stats.grafts += 1,
            CommitPath::Replay => self.stats.replays += 1,
        }
        if let Some(old) = done.replaced {
            self.bury(old.root);
        }
        if !done.changes.is_empty() {
            self.commits += 1;
        }
        for c in &done.changes {
            self.fire(c);
        }
        Ok(Reply::Ok)
    }

    /// Queue the events `change` fires, filtered by the watcher's read access.
    fn fire(&mut self, change: &Change) {
        let mut out = Vec::new();
        for id in &self.watchers {
            let Some(c) = self.conns.get(id) else {
                continue;
            };
            if !self.actor(c.domid).access(&change.perms).can_read() {
                continue;
            }
            for w in &c.watches {
                if let Some(path) = w.fires_for(change, c.domid) {
                    out.push(WatchEvent {
                        conn: *id,
                        path,
                        token: w.token.clone(),
                    });
                }
            }
        }
        self.events.extend(out);
    }

    /// Queue `@introduceDomain` / `@releaseDomain` events for dom0 and permitted domains.
    fn fire_special(&mut self, name: &str) {
        let perms = self
            .special_perms
            .get(name)
            .cloned()
            .unwrap_or(Perms::owned_by(0));
        let mut out = Vec::new();
        for (id, c) in self.conns.iter() {
            if !self.actor(c.domid).access(&perms).can_read() {
                continue;
            }
            for w in c.watches.iter().filter(|w| w.abs == name) {
                out.push(WatchEvent {
                    conn: id,
                    path: w.path.clone(),
                    token: w.token.clone(),
                });
            }
        }
        self.events.extend(out);
    }

    /// SET_PERMS on a special path: who receives its events (cxenstored semantics).
    fn set_special_perms(
        &mut self,
        domid: u32,
        p: &[u8],
        perms: &[Vec<u8>],
    ) -> Result<Reply, XsError> {
        let name = core::str::from_utf8(p).map_err(|_| XsError::Einval)?;
        if name != INTRODUCE_DOMAIN && name != RELEASE_DOMAIN {
            return Err(XsError::Einval);
        }
        if domid != 0 {
            return Err(XsError::Eacces);
        }
        let args: Vec<&[u8]> = perms.iter().map(Vec::as_slice).collect();
        self.special_perms
            .insert(String::from(name), Perms::parse(&args)?);
        Ok(Reply::Ok)
    }

    /// WATCH: register, then queue the immediate event.
    fn watch(
        &mut self,
        conn: ConnId,
        domid: u32,
        p: &[u8],
        token: &[u8],
    ) -> Result<Reply, XsError> {
        let quota = self.quota_of(domid);
        let w = self.make_watch(domid, p, token, &quota)?;
        let c = self.conns.get_mut(&conn).expect("checked by handle");
        if c.watches
            .iter()
            .any(|x| x.path == w.path && x.token == w.token)
        {
            return Err(XsError::Eexist);
        }
        if domid != 0 && c.watches.len() >= quota.watches as usize {
            return Err(XsError::E2big);
        }
        let ev = WatchEvent {
            conn,
            path: w.path.clone(),
            token: w.token.clone(),
        };
        c.watches.push(w);
        self.watchers.insert(conn);
        self.events.push(ev);
        Ok(Reply::Ok)
    }

    /// Validate a watch path (node path or any `@name`).
    fn make_watch(&self, domid: u32, p: &[u8], token: &[u8], q: &Quota) -> Result<Watch, XsError> {
        let abs = match is_special(p) {
            true if p.len() <= q.path_max as usize => {
                String::from(core::str::from_utf8(p).map_err(|_| XsError::Einval)?)
            }
            true => return Err(XsError::Einval),
            false => canonicalize(p, domid, q.path_max as usize)?,
        };
        let relative = !p.starts_with(b"/") && !is_special(p);
        Ok(Watch {
            path: p.to_vec(),
            token: token.to_vec(),
            abs,
            relative,
        })
    }

    /// UNWATCH: ENOENT unless the exact (path, token) is registered.
    fn unwatch(
        &mut self,
        conn: ConnId,
        _domid: u32,
        p: &[u8],
        token: &[u8],
    ) -> Result<Reply, XsError> {
        let c = self.conns.get_mut(&conn).expect("checked by handle");
        let i = c
            .watches
            .iter()
            .position(|w| w.path == p && w.token == token);
        c.watches.remove(i.ok_or(XsError::Enoent)?);
        if c.watches.is_empty() {
            self.watchers.remove(&conn);
        }
        Ok(Reply::Ok)
    }

    /// RESET_WATCHES: drop all watches and transactions of the connection.
    fn reset_watches(&mut self, conn: ConnId) -> Result<Reply, XsError> {
        let c = self.conns.get_mut(&conn).expect("checked by handle");
        c.watches.clear();
        c.txns.clear();
        self.watchers.remove(&conn);
        Ok(Reply::Ok)
    }

    /// Domain management, features, quotas and CONTROL.
    fn domain_op(&mut self, domid: u32, op: &Op) -> Result<Reply, XsError> {
        match op {
            Op::GetDomainPath(d) => Ok(Reply::Text(domain_home(parse_lenient(d)))),
            Op::GetFeature(args) => self.get_feature(domid, args),
            Op::GetQuota(args) => self.get_quota(args),
            _ if domid != 0 => Err(XsError::Eacces),
            Op::IsDomainIntroduced(d) => {
                let yes = self.domains.exists(parse_lenient(d));
                Ok(Reply::Text(String::from(if yes { "T" } else { "F" })))
            }
            Op::Introduce(d, gfn, port) => Ok(self.introduce(d, gfn, port)),
            Op::Release(d) => self.release(parse_lenient(d)),
            Op::Resume(d) => self.resume(parse_lenient(d)),
            Op::SetTarget(d, t) => self.set_target(parse_lenient(d), parse_lenient(t)),
            Op::SetFeature(args) => self.set_feature(args),
            Op::SetQuota(args) => self.set_quota(args),
            Op::Control(args) => self.control(args),
            _ => Err(XsError::Enosys),
        }
    }

    /// CONTROL (dom0 only; see [`control`]): runs the parsed command on the daemon's state.
    fn control(&mut self, args: &[Vec<u8>]) -> Result<Reply, XsError> {
        let ok = || Ok(Reply::Text(String::from("OK")));
        match control::parse(args)? {
            Command::Help => Ok(Reply::Text(String::from(control::HELP))),
            Command::Check => {
                self.store().check_invariants();
                ok()
            }
            Command::Log(on) => {
                self.logging = on;
                ok()
            }
            Command::Print => ok(),
            Command::Quota => Ok(Reply::Text(control::quota_report(&self.config.quota))),
            Command::QuotaSet(name, v) => {
                let v = alloc::format!("{v}");
                control::quota_set(&mut self.config.quota, name, v.as_bytes())?;
                ok()
            }
            Command::QuotaSoft => {
                let q = &self.config.quota;
                Ok(Reply::Text(control::quota_soft_report(q)))
            }
            Command::QuotaSoftSet(v) => {
                self.config.quota.memory_soft = v;
                ok()
            }
            Command::Logfile(file) => {
                // The shell owns files: it reopens its trace file at this name (an empty or
                // unopenable name closes tracing; the reply is OK either way, as cxenstored).
                self.logfile = Some(file.to_vec());
                ok()
            }
            Command::DomainQuota(d) => {
                if !self.domains.exists(d) {
                    return Err(XsError::Enoent);
                }
                let (watches, transactions, outstanding) = self.domain_usage(d);
                let usage = DomainUsage {
                    nodes: u64::from(self.store().nodes_of(d)),
                    watches,
                    transactions,
                    outstanding,
                    memory: self.memory_of(d),
                };
                Ok(Reply::Text(control::domain_quota_report(d, &usage)))
            }
            Command::MemReport => {
                let s = self.stats;
                let commits = [s.swaps, s.grafts, s.replays, s.conflicts];
                let nodes = self.store().root.count();
                Ok(Reply::Text(control::memreport(
                    nodes,
                    self.counts(),
                    commits,
                )))
            }
        }
    }

    /// INTRODUCE: record the domain; a new one fires `@introduceDomain`.
    fn introduce(&mut self, d: &[u8], gfn: &[u8], port: &[u8]) -> Reply {
        let (d, port) = (parse_lenient(d), parse_lenient(port));
        let gfn = crate::perms::parse_lenient_u64(gfn);
        if d == 0 {
            return Reply::Ok;
        }
        let fresh = self.domains.introduce(d, gfn, port);
        if fresh {
            let preset = self.domains.preset_features.remove(&d);
            if let Some(dom) = self.domains.table.get_mut(&d) {
                dom.features = preset.unwrap_or(self.config.features);
            }
        }
        self.domain_changes.push(DomainChange::Introduced {
            domid: d,
            gfn,
            port,
        });
        if fresh {
            self.fire_special(INTRODUCE_DOMAIN);
        }
        Reply::Ok
    }

    /// RELEASE: forget the domain (dom0: EINVAL; unknown: ENOENT) and fire `@releaseDomain`.
    fn release(&mut self, d: u32) -> Result<Reply, XsError> {
        if d == 0 {
            return Err(XsError::Einval);
        }
        self.domains.table.remove(&d).ok_or(XsError::Enoent)?;
        self.domains.preset_features.remove(&d);
        self.mem_reports.remove(&d);
        let dropped: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.domid == d)
            .map(|(id, _)| id)
            .collect();
        for id in dropped {
            self.disconnect(id);
        }
        self.domain_changes
            .push(DomainChange::Released { domid: d });
        self.fire_special(RELEASE_DOMAIN);
        Ok(Reply::Ok)
    }

    /// RESUME: dom0 EINVAL, unknown ENOENT, else OK.
    fn resume(&mut self, d: u32) -> Result<Reply, XsError> {
        if d == 0 {
            return Err(XsError::Einval);
        }
        let dom = self.domains.table.get_mut(&d).ok_or(XsError::Enoent)?;
        dom.resumed += 1;
        self.domain_changes.push(DomainChange::Resumed { domid: d });
        Ok(Reply::Ok)
    }

    /// SET_TARGET: `d` may act as the owner for nodes of `t`; both must exist.
    fn set_target(&mut self, d: u32, t: u32) -> Result<Reply, XsError> {
        if !self.domains.exists(t) {
            return Err(XsError::Enoent);
        }
        let dom = self.domains.table.get_mut(&d).ok_or(XsError::Enoent)?;
        dom.target = Some(t);
        self.per_domain = true;
        Ok(Reply::Ok)
    }

    /// GET_FEATURE (newer Xen): without a domid, the caller's own features (a socket's or
    /// dom0's: all the daemon offers, 0 without rings); with one (dom0 only, else EACCES),
    /// that domain's: introduced, preset by SET_FEATURE, or the default for a domain the
    /// shell found in Xen (ENOENT without rings, where no domain exists before INTRODUCE).
    fn get_feature(&self, caller: u32, args: &[Vec<u8>]) -> Result<Reply, XsError> {
        let value = match args {
            [] => self.domain_features(caller).unwrap_or(self.config.features),
            _ if caller != 0 => return Err(XsError::Eacces),
            [d] => self
                .domain_features(parse_lenient(d))
                .ok_or(XsError::Enoent)?,
            _ => return Err(XsError::Einval),
        };
        Ok(Reply::Text(alloc::format!("{value}")))
    }

    /// The features domain `d` has or will get at INTRODUCE (None: no such domain known).
    fn domain_features(&self, d: u32) -> Option<u32> {
        if d == 0 {
            return Some(self.config.features);
        }
        if let Some(dom) = self.domains.table.get(&d) {
            return Some(dom.features);
        }
        if let Some(&v) = self.domains.preset_features.get(&d) {
            return Some(v);
        }
        // With rings, the shell answered ENOENT already for a domain Xen does not know.
        (self.config.features != 0).then_some(self.config.features)
    }

    /// SET_FEATURE (newer Xen): the features a domain will be offered on its ring, set before
    /// INTRODUCE (EBUSY after it, and for dom0, which has them all); a subset of the
    /// daemon's (else EINVAL). A domain unknown to Xen was refused by the shell (ENOENT);
    /// without rings every domain not introduced is unknown.
    fn set_feature(&mut self, args: &[Vec<u8>]) -> Result<Reply, XsError> {
        let [d, v] = args else {
            return Err(XsError::Einval);
        };
        let d = parse_lenient(d);
        if d == 0 || self.domains.table.contains_key(&d) {
            return Err(XsError::Ebusy);
        }
        if self.config.features == 0 {
            return Err(XsError::Enoent);
        }
        let v = crate::perms::parse_u32(v).ok_or(XsError::Einval)?;
        if v & !self.config.features != 0 {
            return Err(XsError::Einval);
        }
        self.domains.preset_features.insert(d, v);
        Ok(Reply::Ok)
    }

    /// Xen says domain `d`, not introduced, no longer exists: forget features preset for it.
    pub fn forget_preset(&mut self, d: u32) {
        self.domains.preset_features.remove(&d);
    }

    /// GET_QUOTA: names, a global value, or a domain's value.
    fn get_quota(&self, args: &[Vec<u8>]) -> Result<Reply, XsError> {
        let (q, name) = match args {
            [] => return Ok(Reply::Text(control::QUOTA_NAMES.join(" "))),
            [name] => (self.config.quota, name),
            [d, name] => (self.domain_quota(d)?, name),
            _ => return Err(XsError::Einval),
        };
        let v = control::quota_get(&q, name).ok_or(XsError::Einval)?;
        Ok(Reply::Text(alloc::format!("{v}")))
    }

    /// The quota of an introduced domain (ENOENT otherwise).
    fn domain_quota(&self, d: &[u8]) -> Result<Quota, XsError> {
        let d = parse_lenient(d);
        match self.domains.table.get(&d) {
            Some(dom) => Ok(dom.quota.unwrap_or(self.config.quota)),
            None => Err(XsError::Enoent),
        }
    }

    /// SET_QUOTA: a global value, or a domain's.
    fn set_quota(&mut self, args: &[Vec<u8>]) -> Result<Reply, XsError> {
        match args {
            [name, v] => control::quota_set(&mut self.config.quota, name, v)?,
            [d, name, v] => {
                let mut q = self.domain_quota(d)?;
                control::quota_set(&mut q, name, v)?;
                let dom = self
                    .domains
                    .table
                    .get_mut(&parse_lenient(d))
                    .expect("checked");
                dom.quota = Some(q);
                self.per_domain = true;
            }
            _ => return Err(XsError::Einval),
        }
        Ok(Reply::Ok)
    }

    /// Connections, watches and open transactions, for CONTROL memreport.
    pub fn counts(&self) -> (usize, usize, usize) {
        let watches = self.conns.values().map(|c| c.watches.len()).sum();
        let txns = self.conns.values().map(|c| c.txns.len()).sum();
        (self.conns.len(), watches, txns)
    }
}
