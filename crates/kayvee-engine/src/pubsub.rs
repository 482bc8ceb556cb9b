//! Pub/sub's engine side: who is subscribed to which channel, pattern and shard channel, and the
//! messages owed to subscribers. The commands are in [`crate::cmd::pubsub`].
//!
//! Delivery protocol with the shell: a message for the publishing client itself is written to
//! its reply sink at once (before PUBLISH's own reply, as Redis orders them); messages for other
//! clients go to the [`Outbox`] the shell drains after each command with `Engine::take_messages`,
//! encoding each in its receiver's protocol (a `>` push in RESP3, an array in RESP2). A message
//! is one reference-counted [`Reply`] shared by every receiver of the same kind (channel or
//! pattern), so a PUBLISH to N subscribers allocates one tree, plus one outbox slot each.
//!
//! Architecture invariant: a client's `ClientSubs` (kept here, by handle) names a channel if and
//! only if its handle is in that channel's list (same for patterns and shard channels).

use crate::client::{Handle, PerClient};
use crate::db::Key;
use crate::error::Error;
use crate::outbox::Outbox;
use crate::reply::{Reply, ReplySink};
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::rc::Rc;
use alloc::vec::Vec;

/// The three subscription spaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// SUBSCRIBE / PUBLISH.
    Channel,
    /// PSUBSCRIBE (glob patterns matched by PUBLISH).
    Pattern,
    /// SSUBSCRIBE / SPUBLISH.
    Shard,
}

/// A client's subscriptions.
#[derive(Clone, Debug, Default)]
pub struct ClientSubs {
    /// Channels.
    pub channels: BTreeSet<Key>,
    /// Patterns.
    pub patterns: BTreeSet<Key>,
    /// Shard channels.
    pub shard: BTreeSet<Key>,
}

impl ClientSubs {
    /// Whether the client is in subscribed mode (any subscription of any kind).
    #[inline]
    pub fn active(&self) -> bool {
        !self.channels.is_empty() || !self.patterns.is_empty() || !self.shard.is_empty()
    }

    /// The count SUBSCRIBE-like replies carry: channels and patterns for those two kinds,
    /// shard channels for the shard kind (as Redis 7.0 counts).
    pub fn count(&self, kind: Kind) -> usize {
        match kind {
            Kind::Shard => self.shard.len(),
            _ => self.channels.len() + self.patterns.len(),
        }
    }

    fn set_mut(&mut self, kind: Kind) -> &mut BTreeSet<Key> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }
}

/// The server's subscriptions and outbox, kept in `Core`.
#[derive(Default)]
pub struct PubSub {
    channels: BTreeMap<Key, Vec<Handle>>,
    patterns: BTreeMap<Key, Vec<Handle>>,
    shard: BTreeMap<Key, Vec<Handle>>,
    /// Messages owed to clients (other features queue theirs here too).
    pub outbox: Outbox,
    /// Each client's subscriptions.
    subs: PerClient<ClientSubs>,
}

impl PubSub {
    fn map(&self, kind: Kind) -> &BTreeMap<Key, Vec<Handle>> {
        match kind {
            Kind::Channel => &self.channels,
            Kind::Pattern => &self.patterns,
            Kind::Shard => &self.shard,
        }
    }

    fn map_mut(&mut self, kind: Kind) -> &mut BTreeMap<Key, Vec<Handle>> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }

    /// Channels (or shard channels) with at least one subscriber, matching `pattern` if given.
    pub fn names(&self, kind: Kind, pattern: Option<&[u8]>) -> Vec<Key> {
        self.map(kind)
            .keys()
            .filter(|k| pattern.is_none_or(|p| crate::util::glob_match(p, k, false)))
            .cloned()
            .collect()
    }

    /// Number of subscribers of a channel (or shard channel).
    pub fn subscribers(&self, kind: Kind, name: &[u8]) -> usize {
        self.map(kind).get(name).map_or(0, Vec::len)
    }

    /// Number of patterns with a subscriber (`PUBSUB NUMPAT`, INFO `pubsub_patterns`).
    pub fn pattern_count(&self) -> usize {
        self.patterns.len()
    }

    /// Number of channels with a subscriber (INFO `pubsub_channels`).
    pub fn channel_count(&self, kind: Kind) -> usize {
        self.map(kind).len()
    }

    /// Takes the messages owed to clients, in publish order.
    pub fn take_messages(&mut self) -> Vec<(Handle, Rc<Reply>)> {
        self.outbox.take()
    }

    /// Whether messages are waiting in the outbox.
    pub fn has_messages(&self) -> bool {
        !self.outbox.is_empty()
    }
}

impl PubSub {
    /// The subscriptions of `h`, if it ever had one.
    pub fn of(&self, h: Handle) -> Option<&ClientSubs> {
        self.subs.get(h)
    }

    /// Memory `h`'s subscriptions hold, for client eviction: a name's slot per subscription
    /// (names are short and shared with the channel tables; Redis too counts only its
    /// per-client dictionary and list entries).
    #[inline]
    pub fn memory(&self, h: Handle) -> usize {
        self.subs.get(h).map_or(0, |s| {
            (s.channels.len() + s.patterns.len() + s.shard.len()) * core::mem::size_of::<Key>()
        })
    }

    /// Whether `h` is in subscribed mode.
    #[inline]
    pub fn subscribed(&self, h: Handle) -> bool {
        self.subs.get(h).is_some_and(ClientSubs::active)
    }

    /// The outbox and the test whether a client is in subscribed mode, borrowed together
    /// (client tracking delivers through the one and asks the other).
    pub fn outbox_and_subscribed(&mut self) -> (&mut Outbox, impl Fn(Handle) -> bool + '_) {
        let subs = &self.subs;
        let subscribed = move |h| subs.get(h).is_some_and(ClientSubs::active);
        (&mut self.outbox, subscribed)
    }

    /// The count SUBSCRIBE-like replies to `h` carry (see [`ClientSubs::count`]).
    pub fn count(&self, h: Handle, kind: Kind) -> usize {
        self.subs.get(h).map_or(0, |s| s.count(kind))
    }

    /// Subscribes `h` to `name` (nothing when it already was).
    pub fn subscribe(&mut self, h: Handle, kind: Kind, name: &[u8]) {
        if self
            .subs
            .entry(h)
            .set_mut(kind)
            .insert(Key::from_slice(name))
        {
            let list = self.map_mut(kind).entry(Key::from_slice(name));
            list.or_default().push(h);
        }
    }

    /// Unsubscribes `h` from `name` (nothing when it was not subscribed).
    pub fn unsubscribe(&mut self, h: Handle, kind: Kind, name: &[u8]) {
        if !self.subs.entry(h).set_mut(kind).remove(name) {
            return;
        }
        let map = self.map_mut(kind);
        if let Some(list) = map.get_mut(name) {
            list.retain(|x| *x != h);
            if list.is_empty() {
                map.remove(name);
            }
        }
    }

    /// Drops every subscription of `h` (disconnect, RESET).
    pub fn remove(&mut self, h: Handle) {
        if !self.subscribed(h) {
            return;
        }
        for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
            for name in self.subscriptions(h, kind) {
                self.unsubscribe(h, kind, &name);
            }
        }
        self.subs.take(h);
    }

    /// The names `h` is subscribed to, in order.
    pub fn subscriptions(&self, h: Handle, kind: Kind) -> Vec<Key> {
        let Some(s) = self.subs.get(h) else {
            return Vec::new();
        };
        let set = match kind {
            Kind::Channel => &s.channels,
            Kind::Pattern => &s.patterns,
            Kind::Shard => &s.shard,
        };
        set.iter().cloned().collect()
    }

    /// PUBLISH / SPUBLISH: hands `message` to every subscriber of `channel` (and, for a plain
    /// channel, of every matching pattern); returns how many receivers got it. The
    /// publisher's own copies are written to `out` at once.
    pub fn publish(
        &mut self,
        me: Handle,
        kind: Kind,
        channel: &[u8],
        message: &[u8],
        out: &mut dyn ReplySink,
    ) -> usize {
        let ps = self;
        let mut receivers = 0;
        let named = match kind {
            Kind::Channel => &ps.channels,
            Kind::Pattern => &ps.patterns,
            Kind::Shard => &ps.shard,
        };
        if let Some(list) = named.get(channel) {
            let head = if kind == Kind::Shard {
                "smessage"
            } else {
                "message"
            };
            let msg = Rc::new(Reply::Push(alloc::vec![
                Reply::Bulk(head.into()),
                Reply::Bulk(channel.into()),
                Reply::Bulk(message.into()),
            ]));
            receivers += list.len();
            deliver(&mut ps.outbox, list, me, &msg, out);
        }
        if kind == Kind::Channel && !ps.patterns.is_empty() {
            for (pattern, list) in &ps.patterns {
                if !crate::util::glob_match(pattern, channel, false) {
                    continue;
                }
                let msg = Rc::new(Reply::Push(alloc::vec![
                    Reply::Bulk(b"pmessage".to_vec()),
                    Reply::Bulk(pattern.to_vec()),
                    Reply::Bulk(channel.into()),
                    Reply::Bulk(message.into()),
                ]));
                receivers += list.len();
                deliver(&mut ps.outbox, list, me, &msg, out);
            }
        }
        receivers
    }
}

/// Queues `msg` for every client of `list`, writing the publisher's own copy to `out`.
fn deliver(
    outbox: &mut Outbox,
    list: &[Handle],
    me: Handle,
    msg: &Rc<Reply>,
    out: &mut dyn ReplySink,
) {
    for &h in list {
        if h == me {
            msg.write_to(out);
        } else {
            outbox.push(h, Rc::clone(msg));
        }
    }
}

/// The commands a RESP2 client in subscribed mode may run.
pub fn allowed_when_subscribed(name: &str) -> bool {
    matches!(
        name,
        "subscribe"
            | "unsubscribe"
            | "psubscribe"
            | "punsubscribe"
            | "ssubscribe"
            | "sunsubscribe"
            | "ping"
            | "quit"
            | "reset"
    )
}

/// The error a RESP2 client in subscribed mode gets for any other command.
pub fn subscribed_context_error(full_name: &str) -> Error {
    Error::msg(alloc::format!(
        "ERR Can't execute '{full_name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / \
         RESET are allowed in this context"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscribed_mode_allows_only_the_subscription_commands() {
        assert!(allowed_when_subscribed("ping") && allowed_when_subscribed("sunsubscribe"));
        assert!(!allowed_when_subscribed("get") && !allowed_when_subscribed("publish"));
        let text = alloc::format!("{}", subscribed_context_error("client|info"));
        assert!(text.starts_with("ERR Can't execute 'client|info': only (P|S)SUBSCRIBE"));
        assert!(text.ends_with("QUIT / RESET are allowed in this context"));
    }

    #[test]
    fn counts_follow_redis_kinds() {
        let mut s = ClientSubs::default();
        s.channels.insert(Key::from_slice(b"a"));
        s.patterns.insert(Key::from_slice(b"p*"));
        s.shard.insert(Key::from_slice(b"s"));
        assert_eq!(s.count(Kind::Channel), 2);
        assert_eq!(s.count(Kind::Pattern), 2);
        assert_eq!(s.count(Kind::Shard), 1);
        assert!(s.active());
        assert!(!ClientSubs::default().active());
    }
}
