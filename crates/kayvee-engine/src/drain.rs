//! The glue between the key event stream and the features, above them: which kinds of key
//! event every database records ([`sync`]), the one place that hands the recorded events to
//! the features that care ([`drain`]), and the work that turns what the features noted into
//! effects on clients after a command (WATCH's dirty flags, [`settle`]; client tracking's
//! invalidations, [`after_run`] and [`after_command`]).
//!
//! [`drain`] empties the databases' logs, in order, and hands each event to every consumer:
//! - WATCH ([`crate::txn::Watches::on_key_event`]): watched keys become dirty (CAS);
//! - client tracking ([`crate::tracking::Tracking::on_key_event`]): readers get invalidations;
//! - keyspace notifications ([`crate::notify::of_key_event`]): `new`, `expired`, `evicted`,
//!   `keymiss`, published through pub/sub;
//! - propagation ([`crate::aof::Propagation::on_key_event`]): an expired or evicted key becomes
//!   `DEL key`;
//! - while a background save or AOF rewrite runs, its copy-on-write analogue
//!   ([`crate::save_progress::SaveProgress::on_key_event`]): the first change of a key its
//!   snapshot holds counts the value only the snapshot keeps now.
//!
//! The engine drains after each command runs (each command of an EXEC too), after serving
//! blocked clients, after eviction ([`evict()`]) and after the active-expiry cycle; a keyspace
//! notification a command sends drains before it publishes ([`notify()`]), so `SET` on an
//! expired key sends `expired`, `new`, `set`, in Redis's order. Consumers only queue work in
//! their own state; what needs the client table (dirty flags, invalidation messages) is
//! settled afterwards.
//!
//! The features never re-sync what is recorded themselves: the calls that start or stop a
//! consumer listening (WATCH, CLIENT TRACKING, the AOF) go through here ([`watch`],
//! [`unwatch_all`], [`discard`], [`forget_client`], [`tracking_command`], [`tracking_off`],
//! [`set_propagation`]), and so does a change of `notify-keyspace-events` (CONFIG SET calls
//! [`sync`]).

use crate::argv::Argv;
use crate::client::{ClientTable, Handle};
use crate::command::Registered;
use crate::cx::Core;
use crate::error::Error;
use crate::events::{listen, KeyEvent};
use crate::evict::{self, Evicted};
use crate::pubsub::Kind;
use crate::reply::{Discard, Protocol, ReplySink};
use crate::time::Now;
use crate::tracking::{self, Delivery};
use crate::{notify, txn};

/// Sets which kinds every database records, from what each consumer needs now. Call it when a
/// consumer starts or stops listening and when databases are replaced.
pub fn sync(core: &mut Core) {
    let mut mask = 0;
    if core.watches.active() {
        mask |= listen::CHANGES | listen::OPENED_VALUE;
    }
    if core.tracking.active() {
        mask |= listen::CHANGES;
    }
    if core.aof.enabled {
        mask |= listen::EXPIRED | listen::EVICTED;
    }
    if core.blocking.wants_deletions() {
        mask |= listen::MODIFIED | listen::EXPIRED | listen::EVICTED | listen::FLUSHED;
    }
    if core.save_progress.listening() {
        mask |= listen::CHANGES;
    }
    mask |= notify::listening(core.config.notify_keyspace_events);
    for db in &mut core.dbs {
        db.events.set_listen(mask);
    }
}

/// Hands every recorded event, database by database and in order, to WATCH, client tracking,
/// keyspace notifications and propagation. With no listener this is one test.
#[inline]
pub fn drain(core: &mut Core) {
    if core.dbs.first().is_none_or(|d| d.events.listening() == 0) {
        return;
    }
    drain_all(core);
}

/// [`drain`] past its test (out of line: the test is inlined at every call, the loop is not).
#[inline(never)]
fn drain_all(core: &mut Core) {
    for db in 0..core.dbs.len() {
        if core.dbs[db].events.is_empty() {
            continue;
        }
        let mut entries = core.dbs[db].events.take();
        for event in entries.drain(..) {
            deliver(core, db, &event);
        }
        // Keep the allocation for the next command, unless an event was recorded meanwhile.
        core.dbs[db].events.give_back(entries);
    }
}

/// One event of database `db` to each consumer; each checks whether it listens.
pub fn deliver(core: &mut Core, db: usize, event: &KeyEvent) {
    core.watches.on_key_event(db, event);
    core.tracking.on_key_event(event);
    if core.config.notify_keyspace_events != 0 {
        if let Some((class, name, key)) = notify::of_key_event(event) {
            publish(core, db, class, name, key);
        }
    }
    core.aof.on_key_event(db, event);
    core.blocking.on_key_event(db, event);
    if core.save_progress.listening() {
        core.save_progress.on_key_event(db, event, &core.dbs[db]);
    }
}

/// Publishes the keyspace notification `event` of `class` on `key` of database `db` when the
/// class is enabled, after the pending `new` / `expired` events (so the stream keeps Redis's
/// order).
pub fn notify(core: &mut Core, db: usize, class: u32, event: &str, key: &[u8]) {
    if core.config.notify_keyspace_events == 0 {
        return;
    }
    drain(core);
    publish(core, db, class, event, key);
}

/// Sends the keyspace and keyevent messages of one event, as enabled, through pub/sub.
fn publish(core: &mut Core, db: usize, class: u32, event: &str, key: &[u8]) {
    let flags = core.config.notify_keyspace_events;
    let pubsub = &mut core.pubsub;
    // No client is the publisher: every receiver gets its copy through the outbox.
    let nobody = Handle(usize::MAX);
    notify::messages(flags, db, class, event, key, |channel, message| {
        let sink = &mut Discard(Protocol::Resp2);
        pubsub.publish(nobody, Kind::Channel, channel, message, sink);
    });
}

/// Evicts keys for `maxmemory` (see [`crate::evict`]); the evicted keys' events (WATCH,
/// tracking, `evicted`, `DEL` in the AOF) go out at once, before the command that needed the
/// memory runs, as in Redis. Nothing is evicted while the dataset loads (Redis's
/// `isSafeToPerformEvictions`).
pub fn evict(core: &mut Core, now: Now) -> Evicted {
    let result = if core.persist.loading.is_some() {
        Evicted::Ok
    } else {
        let not_counted = evict::not_counted(&core.evict, core.repl.backlog.as_ref());
        let keyspace = evict::Keyspace {
            dbs: &mut core.dbs,
            config: &core.config,
            rng: &mut core.rng,
            stats: &mut core.stats,
            host: &core.host,
            not_counted,
        };
        evict::perform(&mut core.evict, keyspace, now)
    };
    drain(core);
    result
}

/// WATCH's work after each command (each command of an EXEC too): the noted modifications of
/// watched keys become dirty flags on their watchers.
pub fn settle(core: &mut Core) {
    txn::settle(&mut core.txn, &mut core.watches, &core.dbs);
}

/// Client tracking's work after each command run (`reg`, `args`; EXEC's steps included): see
/// [`tracking::after_run`].
pub fn after_run(
    core: &mut Core,
    clients: &ClientTable,
    me: Handle,
    reg: &Registered,
    args: &Argv<'_>,
) {
    let in_multi = core.txn.in_multi(me);
    let (outbox, subscribed) = core.pubsub.outbox_and_subscribed();
    let mut d = Delivery { outbox, subscribed };
    tracking::after_run(&mut core.tracking, clients, &mut d, me, reg, in_multi, args);
}

/// Client tracking's work after a top-level command of `me` (EXEC as a whole) or the cron
/// (`me` none): see [`tracking::after_command`].
pub fn after_command(
    core: &mut Core,
    clients: &ClientTable,
    me: Option<Handle>,
    out: Option<&mut dyn ReplySink>,
) {
    let max_keys = core.config.tracking_table_max_keys as usize;
    let (outbox, subscribed) = core.pubsub.outbox_and_subscribed();
    let mut d = Delivery { outbox, subscribed };
    tracking::after_command(&mut core.tracking, clients, &mut d, max_keys, me, out);
}

/// Client tracking's work after the memory limit evicted keys before client `me`'s command
/// (see [`tracking::after_eviction`]).
pub fn after_eviction(core: &mut Core, clients: &ClientTable, me: Handle, out: &mut dyn ReplySink) {
    let (outbox, subscribed) = core.pubsub.outbox_and_subscribed();
    let mut d = Delivery { outbox, subscribed };
    tracking::after_eviction(&mut core.tracking, clients, &mut d, me, out);
}

/// WATCH of `key` in database `db` by client `h` (see [`txn::watch`]).
pub fn watch(core: &mut Core, h: Handle, db: usize, key: &[u8], now_ms: u64) {
    if txn::watch(
        &mut core.txn,
        &mut core.watches,
        &core.dbs,
        h,
        db,
        key,
        now_ms,
    ) {
        sync(core);
    }
}

/// UNWATCH (and EXEC): client `h` forgets its watched keys (see [`txn::unwatch_all`]).
pub fn unwatch_all(core: &mut Core, h: Handle) {
    if txn::unwatch_all(&mut core.txn, &mut core.watches, h) {
        sync(core);
    }
}

/// DISCARD (and EXEC, RESET): client `h` leaves MULTI and unwatches (see [`txn::discard`]).
pub fn discard(core: &mut Core, h: Handle) {
    if txn::discard(&mut core.txn, &mut core.watches, h) {
        sync(core);
    }
}

/// A disconnect: client `h` leaves tracking and MULTI, unwatches, and its state goes.
pub fn forget_client(core: &mut Core, clients: &ClientTable, h: Handle) {
    let tracking_stopped = tracking::disable(&mut core.tracking, clients, h);
    let watch_stopped = txn::remove(&mut core.txn, &mut core.watches, h);
    if tracking_stopped || watch_stopped {
        sync(core);
    }
}

/// CLIENT TRACKING of client `me` (see [`tracking::command`]).
pub fn tracking_command(
    core: &mut Core,
    clients: &ClientTable,
    me: Handle,
    args: &Argv<'_>,
) -> Result<(), Error> {
    if tracking::command(&mut core.tracking, clients, me, args)? {
        sync(core);
    }
    Ok(())
}

/// Turns tracking off for client `me` (RESET; see [`tracking::disable`]).
pub fn tracking_off(core: &mut Core, clients: &ClientTable, me: Handle) {
    if tracking::disable(&mut core.tracking, clients, me) {
        sync(core);
    }
}

/// Moves the replica sink's new bytes into the backlog, the offset and the replicas' queue
/// (see [`crate::repl`]); PSYNC calls it before it names an offset.
pub fn feed_replication(core: &mut Core) {
    if !core.aof.has_repl_output() {
        return;
    }
    let mut bytes = alloc::vec::Vec::new();
    core.aof.drain_repl_into(&mut bytes);
    core.repl.feed(&bytes);
}

/// Starts the replication stream (a backlog of `repl-backlog-size`, the replica sink on),
/// once: the first replica attaches. A replica's sink stays off: what its replicas get is its
/// primary's stream, passed on as it arrives.
pub fn start_replication(core: &mut Core) {
    let size = usize::try_from(core.config.int_param("repl-backlog-size")).unwrap_or(1 << 20);
    core.repl.ensure_backlog(size);
    core.aof.set_replicating(core.repl.primary.is_none());
    sync(core);
}

/// The primary's PING to its replicas every `repl-ping-replica-period` seconds (no SELECT
/// before it, as Redis's), from the cron.
pub fn ping_replicas(core: &mut Core, now: Now) {
    if core.repl.replicas.is_empty() || core.repl.primary.is_some() {
        return;
    }
    let period_ms = (core.config.int_param("repl-ping-replica-period").max(1) as u64) * 1000;
    if now.ms().saturating_sub(core.repl.last_ping_ms) < period_ms {
        return;
    }
    core.repl.last_ping_ms = now.ms();
    core.aof.feed_repl_raw(b"*1\r\n$4\r\nPING\r\n");
}

/// Turns command propagation on or off; the keyspace records expired and evicted keys only
/// while it is on.
pub fn set_propagation(core: &mut Core, on: bool) {
    core.aof.set_enabled(on);
    sync(core);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::Key;
    use alloc::vec::Vec;

    /// An engine with one client subscribed to every keyspace channel.
    fn engine_with_subscriber(flags: &str) -> crate::Engine {
        use crate::{ArgvBuf, ConnInfo, Engine, ReplyTree, Transport};
        let now = Now::from_ms(1_000);
        let mut e = Engine::new(crate::Config::default(), 7, now);
        let conn = ConnInfo {
            transport: Transport::Tcp {
                addr: "127.0.0.1:1".into(),
                laddr: "127.0.0.1:2".into(),
            },
            fd: 1,
        };
        let h = e.connect(conn, now);
        for line in [
            alloc::format!("CONFIG SET notify-keyspace-events {flags}"),
            "PSUBSCRIBE __key*__:*".into(),
        ] {
            let mut out = ReplyTree::new(Protocol::Resp2);
            e.execute(h, &ArgvBuf::from_line(&line).argv(), now, &mut out);
        }
        e
    }

    #[test]
    fn evicted_publishes_both_channels_when_enabled() {
        let mut e = engine_with_subscriber("KEe");
        deliver(&mut e.core, 3, &KeyEvent::Evicted(Key::from_slice(b"k")));
        let got: Vec<_> = e.take_messages().into_iter().map(|(_, m)| m).collect();
        let want = |channel: &str, msg: &str| {
            crate::Reply::Push(alloc::vec![
                crate::Reply::Bulk(b"pmessage".to_vec()),
                crate::Reply::Bulk(b"__key*__:*".to_vec()),
                crate::Reply::Bulk(channel.as_bytes().to_vec()),
                crate::Reply::Bulk(msg.as_bytes().to_vec()),
            ])
        };
        assert_eq!(got.len(), 2);
        assert_eq!(*got[0], want("__keyspace@3__:k", "evicted"));
        assert_eq!(*got[1], want("__keyevent@3__:evicted", "k"));
    }

    #[test]
    fn evicted_is_silent_without_its_class() {
        let mut e = engine_with_subscriber("KEg$");
        deliver(&mut e.core, 0, &KeyEvent::Evicted(Key::from_slice(b"k")));
        assert!(e.take_messages().is_empty());
        let mut e = engine_with_subscriber("");
        deliver(&mut e.core, 0, &KeyEvent::Evicted(Key::from_slice(b"k")));
        assert!(e.take_messages().is_empty());
    }
}
