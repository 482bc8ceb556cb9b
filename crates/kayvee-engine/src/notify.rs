//! Keyspace notifications (Redis 7.0's `notify-keyspace-events`): every write publishes its
//! event to `__keyspace@<db>__:<key>` (message: the event name) and `__keyevent@<db>__:<event>`
//! (message: the key), through the ordinary pub/sub path, so RESP2 subscribers and RESP3 push
//! clients receive them like any message. Event names, classes and order were taken from
//! redis-server 7.0.15 by experiment.
//!
//! Four kinds of event do not come from a command handler's own call: `new` (a key created),
//! `expired` (a key deleted by lazy or active expiry), `evicted` (deleted for `maxmemory`) and
//! `keymiss` (a read lookup that found nothing, where Redis counts a keyspace miss). They come
//! from the keyspace's event stream ([`crate::events`], [`on_key_event`]), which [`notify`]
//! drains before it publishes: so `SET k v` on an expired `k` gives `expired`, `new`, `set`,
//! as Redis sends them.
//!
//! Cost when notifications are off (the default): [`notify`] compares one integer with zero and
//! returns; the keyspace records none of these events (see [`listening`]).
//!
//! Messages go to the outbox ([`crate::pubsub`]) for every receiver, the client that ran the
//! command included (the shell delivers them right after the command's reply).

use crate::client::Handle;
use crate::db::Db;
use crate::events::{listen, KeyEvent};
use crate::pubsub::Kind;
use crate::reply::Discard;
use crate::{Core, Cx};
use alloc::vec::Vec;

pub use crate::config::keyspace_events::{class, parse_flags, render_flags, BAD_CLASS};

/// Whether events of `class` are published at all under `flags`.
#[inline]
fn wanted(flags: u32, class: u32) -> bool {
    flags & class != 0 && flags & (class::KEYSPACE | class::KEYEVENT) != 0
}

/// The key events (bits of [`listen`]) notifications need under `flags`.
pub fn listening(flags: u32) -> u8 {
    let mut mask = 0;
    for (class, kind) in [
        (class::NEW, listen::CREATED),
        (class::EXPIRED, listen::EXPIRED),
        (class::EVICTED, listen::EVICTED),
        (class::KEY_MISS, listen::MISSED),
    ] {
        if wanted(flags, class) {
            mask |= kind;
        }
    }
    mask
}

/// Publishes `event` on `key` of the running command's database (one call per write site).
#[inline]
pub fn emit(cx: &mut Cx<'_>, class: u32, event: &str, key: &[u8]) {
    notify(cx.core, cx.db_index, class, event, key);
}

/// Publishes `event` on `key` of database `db` when `class` is enabled, after the pending
/// `new` / `expired` events (so the stream keeps Redis's order).
pub fn notify(core: &mut Core, db: usize, class: u32, event: &str, key: &[u8]) {
    if core.config.notify_keyspace_events == 0 {
        return;
    }
    crate::events::drain(core);
    publish(core, db, class, event, key);
}

/// Notifications' consumer of the key event stream (see [`crate::events`]).
pub fn on_key_event(core: &mut Core, db: usize, event: &KeyEvent) {
    if core.config.notify_keyspace_events == 0 {
        return;
    }
    let (class, name, key) = match event {
        KeyEvent::Created(k) => (class::NEW, "new", k),
        KeyEvent::Expired(k) => (class::EXPIRED, "expired", k),
        KeyEvent::Evicted(k) => (class::EVICTED, "evicted", k),
        KeyEvent::Missed(k) => (class::KEY_MISS, "keymiss", k),
        _ => return,
    };
    publish(core, db, class, name, key);
}

/// Sends the keyspace and keyevent messages of one event, as enabled.
fn publish(core: &mut Core, db: usize, class: u32, event: &str, key: &[u8]) {
    let flags = core.config.notify_keyspace_events;
    if flags & class == 0 {
        return;
    }
    // No client is the publisher: every receiver gets its copy through the outbox.
    let nobody = Handle(usize::MAX);
    if flags & class::KEYSPACE != 0 {
        let mut channel = channel_prefix(b"__keyspace@", db);
        channel.extend_from_slice(key);
        core.pubsub.publish(
            nobody,
            Kind::Channel,
            &channel,
            event.as_bytes(),
            &mut Discard(crate::Protocol::Resp2),
        );
    }
    if flags & class::KEYEVENT != 0 {
        let mut channel = channel_prefix(b"__keyevent@", db);
        channel.extend_from_slice(event.as_bytes());
        core.pubsub.publish(
            nobody,
            Kind::Channel,
            &channel,
            key,
            &mut Discard(crate::Protocol::Resp2),
        );
    }
}

/// `__keyspace@<db>__:` or `__keyevent@<db>__:`.
fn channel_prefix(head: &[u8], db: usize) -> Vec<u8> {
    let mut c = Vec::with_capacity(head.len() + 24);
    c.extend_from_slice(head);
    c.extend_from_slice(alloc::format!("{db}").as_bytes());
    c.extend_from_slice(b"__:");
    c
}

/// The `del` a command sends when it removed the last element of a collection (after its own
/// event, as Redis does).
pub fn emptied(cx: &mut Cx<'_>, key: &[u8]) {
    emit(cx, class::GENERIC, "del", key);
}

/// The `del` of a command that may have removed the last element of the collection at `key`
/// (sent when the key is gone), after the command's own event.
pub fn emptied_if_gone(cx: &mut Cx<'_>, key: &[u8]) {
    let now = cx.now_ms();
    if !cx.db().contains(key, now) {
        emptied(cx, key);
    }
}

/// Drops the `keymiss` the last lookup of `key` logged: Redis's `LOOKUP_NONOTIFY`, for the
/// lookups that count a miss but send no event (OBJECT).
pub fn unlog_miss(db: &mut Db, key: &[u8]) {
    db.events.forget_miss(key);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An engine with one client subscribed to every keyspace channel.
    fn engine_with_subscriber(flags: &str) -> crate::Engine {
        use crate::{ArgvBuf, ConnInfo, Engine, Now, ReplyTree, Transport};
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
            let mut out = ReplyTree::new(crate::Protocol::Resp2);
            e.execute(h, &ArgvBuf::from_line(&line).argv(), now, &mut out);
        }
        e
    }

    #[test]
    fn evicted_publishes_both_channels_when_enabled() {
        let mut e = engine_with_subscriber("KEe");
        on_key_event(
            &mut e.core,
            3,
            &KeyEvent::Evicted(crate::db::Key::from_slice(b"k")),
        );
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
        on_key_event(
            &mut e.core,
            0,
            &KeyEvent::Evicted(crate::db::Key::from_slice(b"k")),
        );
        assert!(e.take_messages().is_empty());
        let mut e = engine_with_subscriber("");
        on_key_event(
            &mut e.core,
            0,
            &KeyEvent::Evicted(crate::db::Key::from_slice(b"k")),
        );
        assert!(e.take_messages().is_empty());
    }

    #[test]
    fn listens_only_to_wanted_events() {
        let f = |s: &str| listening(parse_flags(s.as_bytes()).unwrap());
        assert_eq!(f(""), 0);
        assert_eq!(f("n"), 0, "no K or E: nothing is published");
        assert_eq!(f("Kn"), listen::CREATED);
        assert_eq!(f("Exm"), listen::EXPIRED | listen::MISSED);
        assert_eq!(f("KA"), listen::EXPIRED | listen::EVICTED);
    }
}
