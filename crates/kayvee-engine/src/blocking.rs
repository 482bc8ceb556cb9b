//! Clients blocked on keys (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP; the sorted-set blocking
//! pops plug in the same way): who waits on which key, the keys that became ready, the replies
//! owed to woken clients. The blocking commands' shared steps (timeout parsing, blocking the
//! running client) are in `crate::cmd::block`.
//!
//! The protocol between the engine and its shell (Linux server, unikernel):
//! 1. A blocking command that finds nothing blocks (`crate::cmd::block::block`): the client is
//!    registered as a [`Waiter`], no reply is written and the command's outcome is
//!    `Outcome::Blocked`. The shell must then stop running that connection's commands (further
//!    pipelined input stays buffered, unread by the engine) until the client is unblocked.
//! 2. Every write that may serve a waiter (a list push, LMOVE's destination, a key arriving by
//!    RENAME, MOVE, COPY, SWAPDB...) signals the key ([`Blocking::signal`]). It is cheap when
//!    nobody waits.
//! 3. After each top-level command, dispatch serves the ready keys: the waiters of a key are
//!    served first-come first-served by their command's serve function (a column of the
//!    command table, `crate::cmd::spec::ServeFn`) against the current data. A serve may make
//!    further keys ready (BLMOVE pushes to its destination), which are served in the same
//!    pass, as Redis does.
//! 4. The replies of served clients are held as owned [`Reply`] values; the shell collects them
//!    with `Engine::take_wakeups`, encodes each in its client's protocol, and resumes running
//!    that client's buffered input.
//! 5. Timeouts: the shell calls `Engine::expire_blocked(now)` on every loop turn (and bounds its
//!    poll timeout by `Engine::next_block_deadline`); timed-out clients get their command's
//!    timeout reply through the same wakeup list. A disconnect (`Engine::disconnect`) removes a
//!    waiter silently.
//!
//! Architecture invariant: a client is in `waiters` if and only if its handle is in the queue of
//! each of its keys (`CLIENT LIST flags=b` asks `Blocking::is_blocked`).

use crate::argv::ArgvBuf;
use crate::client::{ClientTable, Handle};
use crate::command::CommandId;
use crate::db::Key;
use crate::error::Error;
use crate::reply::{Reply, ReplySink, ReplyTree};
use crate::stats::{send_error, Stats};
use crate::time::Now;
use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::vec::Vec;

/// Writes the reply a waiter gets when its timeout passes (list pops: the null array).
pub type TimeoutFn = fn(&mut dyn ReplySink);

/// What a blocking command registers.
pub struct BlockSpec {
    /// The keys it waits on, in argument order.
    pub keys: Vec<Key>,
    /// Absolute unix ms when it times out; `None` waits forever.
    pub deadline_ms: Option<u64>,
    /// Its timeout reply.
    pub on_timeout: TimeoutFn,
    /// Whether it is also served when a key it waits on is deleted or changes type (XREADGROUP
    /// answers an error then): the keyspace then reports deletions (see
    /// [`Blocking::on_key_event`]).
    pub serve_missing: bool,
}

/// A blocked client.
pub struct Waiter {
    /// The database its keys are in (the one selected when it blocked).
    pub db: usize,
    /// What it waits for.
    pub spec: BlockSpec,
    /// Its command, kept to be re-read when served.
    pub argv: ArgvBuf,
    /// Its command id (whose serve function serves it).
    pub cmd: CommandId,
    /// How long its blocking call took (microseconds; logged with it once it is served).
    pub duration_us: u64,
}

/// The waiting room, kept in `Core`.
#[derive(Default)]
pub struct Blocking {
    waiters: BTreeMap<Handle, Waiter>,
    /// Per (db, key): the waiting clients, first come first.
    queues: BTreeMap<(usize, Key), VecDeque<Handle>>,
    /// Keys signalled since the last serving pass, in signal order, without repeats.
    ready: VecDeque<(usize, Key)>,
    ready_set: BTreeSet<(usize, Key)>,
    /// Replies owed to woken clients (served or timed out), in wake order.
    wakeups: Vec<(Handle, Vec<Reply>)>,
}

impl Blocking {
    /// Number of blocked clients (`INFO blocked_clients`).
    pub fn len(&self) -> usize {
        self.waiters.len()
    }

    /// Whether no client is blocked.
    pub fn is_empty(&self) -> bool {
        self.waiters.is_empty()
    }

    /// Blocked clients that have a timeout (`INFO clients_in_timeout_table`).
    pub fn with_timeout(&self) -> usize {
        self.waiters
            .values()
            .filter(|w| w.spec.deadline_ms.is_some())
            .count()
    }

    /// Whether some waiter wants to hear of deleted keys ([`BlockSpec::serve_missing`]).
    pub fn wants_deletions(&self) -> bool {
        self.waiters.values().any(|w| w.spec.serve_missing)
    }

    /// Whether waiter `h` is served when its key is missing ([`BlockSpec::serve_missing`]).
    pub fn serves_missing(&self, h: Handle) -> bool {
        self.waiters.get(&h).is_some_and(|w| w.spec.serve_missing)
    }

    /// Blocking's consumer of the key event stream (see [`crate::events`]): while a waiter is
    /// served on deletions, a key written, expired, evicted or flushed away is made ready.
    pub fn on_key_event(&mut self, db: usize, event: &crate::events::KeyEvent) {
        use crate::events::KeyEvent;
        if self.queues.is_empty() {
            return;
        }
        match event {
            KeyEvent::Modified(k) | KeyEvent::Expired(k) | KeyEvent::Evicted(k) => {
                self.signal(db, k)
            }
            KeyEvent::Flushed(_) => self.signal_db(db),
            _ => {}
        }
    }

    /// Whether client `h` is blocked.
    pub fn is_blocked(&self, h: Handle) -> bool {
        self.waiters.contains_key(&h)
    }

    /// Notes the duration of client `h`'s call that just blocked it; false when `h` is not
    /// blocked (its command ran to its end).
    pub fn note_duration(&mut self, h: Handle, usec: u64) -> bool {
        match self.waiters.get_mut(&h) {
            Some(w) => {
                w.duration_us = usec;
                true
            }
            None => false,
        }
    }

    /// The earliest timeout of any blocked client (absolute unix ms).
    pub fn next_deadline(&self) -> Option<u64> {
        self.waiters
            .values()
            .filter_map(|w| w.spec.deadline_ms)
            .min()
    }

    /// Registers `h` as waiting (replacing any earlier wait, so the queues stay consistent
    /// even if a shell ran a command for a blocked client).
    pub fn add(&mut self, h: Handle, w: Waiter) {
        self.remove(h);
        for k in &w.spec.keys {
            let q = self.queues.entry((w.db, k.clone())).or_default();
            if !q.contains(&h) {
                q.push_back(h);
            }
        }
        self.waiters.insert(h, w);
    }

    /// Unregisters `h` (disconnect, served, timed out); returns its record.
    pub fn remove(&mut self, h: Handle) -> Option<Waiter> {
        let w = self.waiters.remove(&h)?;
        for k in &w.spec.keys {
            let slot = (w.db, k.clone());
            if let Some(q) = self.queues.get_mut(&slot) {
                q.retain(|&x| x != h);
                if q.is_empty() {
                    self.queues.remove(&slot);
                }
            }
        }
        Some(w)
    }

    /// Marks `key` of database `db` ready if some client waits on it.
    pub fn signal(&mut self, db: usize, key: &[u8]) {
        if self.queues.is_empty() {
            return;
        }
        let slot = (db, Key::from_slice(key));
        if self.queues.contains_key(&slot) && self.ready_set.insert(slot.clone()) {
            self.ready.push_back(slot);
        }
    }

    /// Marks every waited-on key of database `db` ready (SWAPDB, FLUSHDB-like arrivals).
    pub fn signal_db(&mut self, db: usize) {
        let keys: Vec<Key> = self
            .queues
            .keys()
            .filter(|(d, _)| *d == db)
            .map(|(_, k)| k.clone())
            .collect();
        keys.iter().for_each(|k| self.signal(db, k));
    }

    /// Whether some key is waiting to be served.
    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// The next ready key.
    pub fn pop_ready(&mut self) -> Option<(usize, Key)> {
        let slot = self.ready.pop_front()?;
        self.ready_set.remove(&slot);
        Some(slot)
    }

    /// The clients waiting on a key, first come first.
    pub fn queue(&self, db: usize, key: &Key) -> Vec<Handle> {
        self.queues
            .get(&(db, key.clone()))
            .map(|q| q.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Clients whose deadline is before `now_ms` (Redis times out strictly after the deadline).
    fn due(&self, now_ms: u64) -> Vec<Handle> {
        self.waiters
            .iter()
            .filter(|(_, w)| w.spec.deadline_ms.is_some_and(|d| d < now_ms))
            .map(|(&h, _)| h)
            .collect()
    }

    /// Takes waiter `h`'s record out to serve it; it stays in its keys' queues until
    /// [`Blocking::unblock`] (or [`Blocking::put_back`] when it keeps waiting).
    pub fn take_waiter(&mut self, h: Handle) -> Option<Waiter> {
        self.waiters.remove(&h)
    }

    /// Returns a waiter's record taken by [`Blocking::take_waiter`].
    pub fn put_back(&mut self, h: Handle, w: Waiter) {
        self.waiters.insert(h, w);
    }

    /// Removes waiter `h` and queues its replies for the shell.
    pub fn unblock(&mut self, h: Handle, replies: Vec<Reply>) {
        self.remove(h);
        self.wakeups.push((h, replies));
    }

    /// Queues replies for a client whose held command ran (see [`crate::pause`]).
    pub(crate) fn push_wakeup(&mut self, h: Handle, replies: Vec<Reply>) {
        self.wakeups.push((h, replies));
    }

    /// Whether woken clients' replies wait for [`Blocking::take_wakeups`].
    pub fn has_wakeups(&self) -> bool {
        !self.wakeups.is_empty()
    }

    /// Takes the replies owed to woken clients, in wake order.
    pub fn take_wakeups(&mut self) -> Vec<(Handle, Vec<Reply>)> {
        core::mem::take(&mut self.wakeups)
    }
}

/// CLIENT UNBLOCK: wakes waiter `h` at once with its timeout reply, or with Redis's
/// `-UNBLOCKED` error when `as_error`; false if `h` is not blocked on keys.
pub fn unblock_on_request(
    b: &mut Blocking,
    clients: &ClientTable,
    stats: &mut Stats,
    h: Handle,
    as_error: bool,
) -> bool {
    let Some(w) = b.waiters.get(&h) else {
        return false;
    };
    if as_error {
        let e = Error::msg("UNBLOCKED client unblocked via CLIENT UNBLOCK");
        return unblock_with_error(b, clients, stats, h, &e);
    }
    let protocol = clients.get(h).map(|c| c.protocol).unwrap_or_default();
    let mut tree = ReplyTree::new(protocol);
    (w.spec.on_timeout)(&mut tree);
    b.unblock(h, tree.take());
    true
}

/// Wakes waiter `h` at once with error `e`; false if `h` is not blocked on keys.
fn unblock_with_error(
    b: &mut Blocking,
    clients: &ClientTable,
    stats: &mut Stats,
    h: Handle,
    e: &Error,
) -> bool {
    let Some(w) = b.waiters.get(&h) else {
        return false;
    };
    let protocol = clients.get(h).map(|c| c.protocol).unwrap_or_default();
    let mut tree = ReplyTree::new(protocol);
    // The blocked call was counted when it blocked; it fails now.
    if let Some(stat) = stats.commands.get_mut(usize::from(w.cmd.0)) {
        stat.failed_calls += 1;
    }
    send_error(stats, e, &mut tree);
    b.unblock(h, tree.take());
    true
}

/// A primary becomes a replica: every client blocked on keys gets Redis's `-UNBLOCKED`
/// error, since the primary's stream, not this server, now changes its keys (a push from
/// the stream must not serve a waiter here: the replica would diverge).
pub fn unblock_all_for_replica(b: &mut Blocking, clients: &ClientTable, stats: &mut Stats) {
    let e = Error::msg(
        "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)",
    );
    let waiting: Vec<Handle> = b.waiters.keys().copied().collect();
    for h in waiting {
        unblock_with_error(b, clients, stats, h, &e);
    }
}

/// Answers and unblocks every client whose timeout has passed.
pub fn expire(b: &mut Blocking, clients: &ClientTable, now: Now) {
    if b.is_empty() {
        return;
    }
    for h in b.due(now.ms()) {
        let protocol = clients.get(h).map(|c| c.protocol).unwrap_or_default();
        let mut tree = ReplyTree::new(protocol);
        if let Some(w) = b.waiters.get(&h) {
            (w.spec.on_timeout)(&mut tree);
        }
        b.unblock(h, tree.take());
    }
}
