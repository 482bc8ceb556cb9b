//! Keyspace notifications (Redis 7.0's `notify-keyspace-events`): every write publishes its
//! event to `__keyspace@<db>__:<key>` (message: the event name) and `__keyevent@<db>__:<event>`
//! (message: the key), through the ordinary pub/sub path, so RESP2 subscribers and RESP3 push
//! clients receive them like any message. Event names, classes and order were taken from
//! redis-server 7.0.15 by experiment.
//!
//! Four kinds of event do not come from a command handler's own call: `new` (a key created),
//! `expired` (a key deleted by lazy or active expiry), `evicted` (deleted for `maxmemory`) and
//! `keymiss` (a read lookup that found nothing, where Redis counts a keyspace miss). They come
//! from the keyspace's event stream ([`crate::events`], [`of_key_event`]), which is drained
//! before a command's own event is published (`crate::drain::notify`): so `SET k v` on an
//! expired `k` gives `expired`, `new`, `set`, as Redis sends them.
//!
//! Cost when notifications are off (the default): publishing compares one integer with zero
//! and returns; the keyspace records none of these events (see [`listening`]).
//!
//! This module says what is published ([`messages`]); the glue above the features
//! (`crate::drain`) publishes it through pub/sub, to every receiver, the client that ran the
//! command included (the shell delivers them right after the command's reply). The commands'
//! call is `crate::cmd::notify::emit`.

use crate::db::Db;
use crate::events::{listen, KeyEvent};
use crate::value::Key;
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

/// The notification a key event gives, if any: its class, event name and key (`new`,
/// `expired`, `evicted`, `keymiss`).
pub fn of_key_event(event: &KeyEvent) -> Option<(u32, &'static str, &Key)> {
    match event {
        KeyEvent::Created(k) => Some((class::NEW, "new", k)),
        KeyEvent::Expired(k) => Some((class::EXPIRED, "expired", k)),
        KeyEvent::Evicted(k) => Some((class::EVICTED, "evicted", k)),
        KeyEvent::Missed(k) => Some((class::KEY_MISS, "keymiss", k)),
        _ => None,
    }
}

/// The messages of one event under `flags` (the `notify-keyspace-events` setting), as enabled:
/// `publish(channel, message)` for the keyspace channel, then for the keyevent channel.
pub fn messages(
    flags: u32,
    db: usize,
    class: u32,
    event: &str,
    key: &[u8],
    mut publish: impl FnMut(&[u8], &[u8]),
) {
    if flags & class == 0 {
        return;
    }
    if flags & class::KEYSPACE != 0 {
        let mut channel = channel_prefix(b"__keyspace@", db);
        channel.extend_from_slice(key);
        publish(&channel, event.as_bytes());
    }
    if flags & class::KEYEVENT != 0 {
        let mut channel = channel_prefix(b"__keyevent@", db);
        channel.extend_from_slice(event.as_bytes());
        publish(&channel, key);
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

/// Drops the `keymiss` the last lookup of `key` logged: Redis's `LOOKUP_NONOTIFY`, for the
/// lookups that count a miss but send no event (OBJECT).
pub fn unlog_miss(db: &mut Db, key: &[u8]) {
    db.events.forget_miss(key);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages of `event` on `key` under the letters `flags`, as (channel, message).
    fn sent(flags: &str, db: usize, event: &KeyEvent) -> Vec<(Vec<u8>, Vec<u8>)> {
        let flags = parse_flags(flags.as_bytes()).unwrap();
        let mut got = Vec::new();
        if let Some((class, name, key)) = of_key_event(event) {
            messages(flags, db, class, name, key, |c, m| {
                got.push((c.to_vec(), m.to_vec()))
            });
        }
        got
    }

    #[test]
    fn evicted_goes_to_both_channels_when_enabled() {
        let evicted = KeyEvent::Evicted(Key::from_slice(b"k"));
        let got = sent("KEe", 3, &evicted);
        let want = |c: &str, m: &str| (c.as_bytes().to_vec(), m.as_bytes().to_vec());
        assert_eq!(
            got,
            [
                want("__keyspace@3__:k", "evicted"),
                want("__keyevent@3__:evicted", "k")
            ]
        );
        assert!(sent("KEg$", 0, &evicted).is_empty());
        assert!(sent("", 0, &evicted).is_empty());
        assert!(sent("KEA", 0, &KeyEvent::Modified(Key::from_slice(b"k"))).is_empty());
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
