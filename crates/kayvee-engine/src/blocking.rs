//! Clients blocked on keys (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP; the sorted-set blocking
//! pops plug in the same way): who waits on which key, the keys that became ready, the replies
//! owed to woken clients, and the timeout parsing every blocking command shares.
//!
//! The protocol between the engine and its shell (Linux server, unikernel):
//! 1. A blocking command that finds nothing calls [`block`]: the client is registered as a
//!    [`Waiter`], no reply is written and the command's outcome is [`Outcome::Blocked`]. The
//!    shell must then stop running that connection's commands (further pipelined input stays
//!    buffered, unread by the engine) until the client is unblocked.
//! 2. Every write that may serve a waiter (a list push, LMOVE's destination, a key arriving by
//!    RENAME, MOVE, COPY, SWAPDB...) calls [`signal_key_ready`]. It is cheap when nobody waits.
//! 3. After each top-level command, `Engine::execute` serves the ready keys: the waiters of a
//!    key are served first-come first-served by their command's [`ServeFn`] against the current
//!    data. A serve may make further keys ready (BLMOVE pushes to its destination), which are
//!    served in the same pass, as Redis does.
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

use crate::argv::{Argv, ArgvBuf};
use crate::client::Handle;
use crate::db::Key;
use crate::error::Error;
use crate::reply::{Reply, ReplySink};
use crate::{CommandId, Cx, Outcome};
use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::vec::Vec;

/// Serves a waiter from the ready `key`, re-reading its blocked command's arguments. `Ok(true)`:
/// served, its reply was written; `Ok(false)`: nothing to take from `key` (wrong type, empty),
/// it keeps waiting and wrote nothing; `Err`: it is unblocked with that error reply.
pub type ServeFn = fn(&mut Cx<'_>, &[u8], &Argv<'_>, &mut dyn ReplySink) -> Result<bool, Error>;

/// Writes the reply a waiter gets when its timeout passes (list pops: the null array).
pub type TimeoutFn = fn(&mut dyn ReplySink);

/// What a blocking command registers.
pub struct BlockSpec {
    /// The keys it waits on, in argument order.
    pub keys: Vec<Key>,
    /// Absolute unix ms when it times out; `None` waits forever.
    pub deadline_ms: Option<u64>,
    /// How it is served when a key is ready.
    pub serve: ServeFn,
    /// Its timeout reply.
    pub on_timeout: TimeoutFn,
    /// Whether it is also served when a key it waits on is deleted or changes type (XREADGROUP
    /// answers an error then): the keyspace then reports deletions (see [`on_key_event`]).
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
    /// Its command id.
    pub cmd: CommandId,
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

    /// Whether client `h` is blocked.
    pub fn is_blocked(&self, h: Handle) -> bool {
        self.waiters.contains_key(&h)
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
    fn add(&mut self, h: Handle, w: Waiter) {
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
    fn pop_ready(&mut self) -> Option<(usize, Key)> {
        let slot = self.ready.pop_front()?;
        self.ready_set.remove(&slot);
        Some(slot)
    }

    /// The clients waiting on a key, first come first.
    fn queue(&self, db: usize, key: &Key) -> Vec<Handle> {
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

    /// Queues replies for a client whose held command ran (see [`crate::pause`]).
    pub(crate) fn push_wakeup(&mut self, h: Handle, replies: Vec<Reply>) {
        self.wakeups.push((h, replies));
    }

    /// Takes the replies owed to woken clients, in wake order.
    pub fn take_wakeups(&mut self) -> Vec<(Handle, Vec<Reply>)> {
        core::mem::take(&mut self.wakeups)
    }
}

/// Marks a key ready for the clients blocked on it: call after any write that may create the
/// key or give it elements a blocked client waits for.
pub fn signal_key_ready(cx: &mut Cx<'_>, db: usize, key: &[u8]) {
    cx.core.blocking.signal(db, key);
}

/// Whether the running client may block: not inside MULTI (where blocking commands answer
/// their timeout reply at once, as Redis does).
pub fn may_block(cx: &mut Cx<'_>) -> bool {
    !cx.core.txn.in_multi(cx.me)
}

/// Blocks the running client on `spec` (or, when it may not block, writes the timeout reply):
/// the handler has written nothing else and returns `Ok(())` after this.
pub fn block(cx: &mut Cx<'_>, args: &Argv<'_>, spec: BlockSpec, out: &mut dyn ReplySink) {
    if !may_block(cx) {
        (spec.on_timeout)(out);
        return;
    }
    let waiter = Waiter {
        db: cx.db_index,
        spec,
        argv: ArgvBuf::from_args(args.iter()),
        cmd: cx.cmd,
    };
    let me = cx.me;
    let deletions = waiter.spec.serve_missing;
    cx.core.blocking.add(me, waiter);
    cx.outcome = Outcome::Blocked;
    if deletions {
        crate::events::sync(cx.core);
    }
}

/// Blocking's consumer of the key event stream (see [`crate::events`]): while a waiter is
/// served on deletions, a key written, expired, evicted or flushed away is made ready.
pub fn on_key_event(core: &mut crate::Core, db: usize, event: &crate::events::KeyEvent) {
    use crate::events::KeyEvent;
    if core.blocking.queues.is_empty() {
        return;
    }
    match event {
        KeyEvent::Modified(k) | KeyEvent::Expired(k) | KeyEvent::Evicted(k) => {
            core.blocking.signal(db, k)
        }
        KeyEvent::Flushed(_) => core.blocking.signal_db(db),
        _ => {}
    }
}

/// Blocks the running client on `keys` with `serve`, answering the null array on timeout
/// (`*-1` in RESP2, `_` in RESP3): the waiting step of every blocking list and sorted-set
/// command.
pub fn wait_on_keys<'k>(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    keys: impl IntoIterator<Item = &'k [u8]>,
    deadline_ms: Option<u64>,
    serve: ServeFn,
    out: &mut dyn ReplySink,
) {
    let spec = BlockSpec {
        keys: keys.into_iter().map(Key::from_slice).collect(),
        deadline_ms,
        serve,
        on_timeout: |out| out.null_array(),
        serve_missing: false,
    };
    block(cx, args, spec, out);
}

/// Parses a blocking command's timeout in seconds as Redis 7.0 does on x86-64: `strtold`
/// (fractions, exponents, hex, `inf`), times 1000 in extended precision, rounded up to whole
/// ms; NaN or junk is `ERR timeout is not a float or out of range`; a negative result (or one
/// beyond i64, which the C cast turns into `LLONG_MIN`) is `ERR timeout is negative`. Returns
/// the absolute deadline in unix ms, `None` for 0 (wait forever).
pub fn parse_timeout(arg: &[u8], now_ms: u64) -> Result<Option<u64>, Error> {
    let v = crate::cmd::long_double::parse(arg)
        .ok_or(Error::msg("ERR timeout is not a float or out of range"))?;
    let ms = ld_times_1000_ceil(v).ok_or(Error::msg("ERR timeout is negative"))?;
    if ms < 0 {
        return Err(Error::msg("ERR timeout is negative"));
    }
    Ok((ms > 0).then(|| now_ms.saturating_add(ms as u64)))
}

/// `ceill(v * 1000.0L)` converted to i64, `None` where x86's conversion gives `LLONG_MIN`
/// (infinities, magnitudes of 2^63 and more).
fn ld_times_1000_ceil(v: crate::cmd::long_double::Ld) -> Option<i64> {
    use crate::cmd::long_double::Ld;
    let Ld::Finite { neg, mant, exp } = v else {
        return None;
    };
    // The exact product has at most 74 bits; round it to a 64-bit significand, ties to even.
    let mut m = u128::from(mant) * 1000;
    let mut e = exp;
    let extra = (128 - m.leading_zeros()).saturating_sub(64);
    if extra > 0 {
        let half = 1u128 << (extra - 1);
        let rem = m & ((1u128 << extra) - 1);
        m >>= extra;
        e += i64::from(extra);
        if rem > half || (rem == half && m & 1 == 1) {
            m += 1;
        }
    }
    // The magnitude, rounded away from zero for positives (ceil) and toward zero for negatives.
    let mag: u128 = if e >= 0 {
        if e >= 64 || (m << e) >> e != m {
            return None;
        }
        m << e
    } else if e <= -128 {
        u128::from(m != 0 && !neg)
    } else {
        let sh = (-e) as u32;
        let q = m >> sh;
        let frac = m & ((1u128 << sh) - 1);
        q + u128::from(frac != 0 && !neg)
    };
    if mag >= 1u128 << 63 {
        return None;
    }
    Some(if neg { -(mag as i64) } else { mag as i64 })
}

/// Serves the ready keys (see the module doc, step 3). Runs after each top-level command.
pub(crate) fn serve_ready(
    core: &mut crate::Core,
    clients: &mut crate::ClientTable,
    now: crate::Now,
) {
    while let Some((db, key)) = core.blocking.pop_ready() {
        for h in core.blocking.queue(db, &key) {
            let missing = !core.dbs[db].contains(&key, now.ms());
            let on_missing = core
                .blocking
                .waiters
                .get(&h)
                .is_some_and(|w| w.spec.serve_missing);
            if missing && !on_missing {
                continue;
            }
            serve_one(core, clients, now, h, db, &key);
        }
    }
}

/// Tries to serve waiter `h` from `key`; unblocks it unless it keeps waiting.
fn serve_one(
    core: &mut crate::Core,
    clients: &mut crate::ClientTable,
    now: crate::Now,
    h: Handle,
    db: usize,
    key: &Key,
) {
    let Some(protocol) = clients.get(h).filter(|c| !c.killed).map(|c| c.protocol) else {
        return;
    };
    let Some(w) = core.blocking.waiters.remove(&h) else {
        return;
    };
    let mut tree = crate::ReplyTree::new(protocol);
    let mut cx = Cx {
        core,
        clients,
        me: h,
        db_index: db,
        now,
        outcome: Outcome::Continue,
        cmd: w.cmd,
    };
    let result = (w.spec.serve)(&mut cx, key, &w.argv.argv(), &mut tree);
    match result {
        Ok(false) => {
            core.blocking.waiters.insert(h, w);
            return;
        }
        Ok(true) => {}
        Err(e) => {
            // The blocked call was counted when it blocked; it fails now.
            if let Some(stat) = core.stats.commands.get_mut(usize::from(w.cmd.0)) {
                stat.failed_calls += 1;
            }
            crate::send_error(&mut core.stats, &e, &mut tree)
        }
    }
    let replies = tree.take();
    // The serve function propagated the pop it did (as its plain form): one call of its own.
    if core.aof.enabled {
        core.aof.flush();
    }
    core.blocking.waiters.insert(h, w);
    unblock(core, h, replies);
}

/// Removes waiter `h` and queues its replies for the shell.
fn unblock(core: &mut crate::Core, h: Handle, replies: Vec<Reply>) {
    core.blocking.remove(h);
    core.blocking.wakeups.push((h, replies));
}

/// CLIENT UNBLOCK: wakes waiter `h` at once with its timeout reply, or with Redis's
/// `-UNBLOCKED` error when `as_error`; false if `h` is not blocked on keys.
pub(crate) fn unblock_on_request(
    core: &mut crate::Core,
    clients: &mut crate::ClientTable,
    h: Handle,
    as_error: bool,
) -> bool {
    let Some(w) = core.blocking.waiters.get(&h) else {
        return false;
    };
    let protocol = clients.get(h).map(|c| c.protocol).unwrap_or_default();
    let mut tree = crate::ReplyTree::new(protocol);
    if as_error {
        let e = Error::msg("UNBLOCKED client unblocked via CLIENT UNBLOCK");
        crate::send_error(&mut core.stats, &e, &mut tree);
    } else {
        (w.spec.on_timeout)(&mut tree);
    }
    unblock(core, h, tree.take());
    true
}

/// Answers and unblocks every client whose timeout has passed.
pub(crate) fn expire(core: &mut crate::Core, clients: &mut crate::ClientTable, now: crate::Now) {
    if core.blocking.is_empty() {
        return;
    }
    for h in core.blocking.due(now.ms()) {
        let protocol = clients.get(h).map(|c| c.protocol).unwrap_or_default();
        let mut tree = crate::ReplyTree::new(protocol);
        if let Some(w) = core.blocking.waiters.get(&h) {
            (w.spec.on_timeout)(&mut tree);
        }
        unblock(core, h, tree.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Result<Option<u64>, Error> {
        parse_timeout(s.as_bytes(), 1_000_000)
    }

    #[test]
    fn timeouts_parse_as_redis_on_x86() {
        assert_eq!(t("0"), Ok(None));
        assert_eq!(t("1"), Ok(Some(1_001_000)));
        assert_eq!(t("1.5"), Ok(Some(1_001_500)));
        assert_eq!(t("0x10"), Ok(Some(1_016_000)));
        // Rounded up: a tiny positive timeout is 1 ms, not "forever".
        assert_eq!(t("0.0001"), Ok(Some(1_000_001)));
        assert_eq!(t("1e-300"), Ok(Some(1_000_001)));
        // -0.001 is a hair above -1 ms in extended precision: it rounds up to 0 (forever).
        assert_eq!(t("-0.001"), Ok(None));
        assert_eq!(t("-0.0009"), Ok(None));
        let neg = Err(Error::msg("ERR timeout is negative"));
        for s in [
            "-1",
            "-0.0015",
            "-0.002",
            "inf",
            "-inf",
            "1e400",
            "9223372036854776",
        ] {
            assert_eq!(t(s), neg, "{s}");
        }
        assert!(t("9223372036854775").unwrap().is_some());
        let nf = Err(Error::msg("ERR timeout is not a float or out of range"));
        for s in ["abc", "nan", "", " 1", "1 ", "1abc"] {
            assert_eq!(t(s), nf, "{s}");
        }
    }
}
