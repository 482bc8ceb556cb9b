//! Messages owed to clients other than the one running a command: pub/sub messages, keyspace
//! notifications, client tracking's invalidations, MONITOR lines. Features queue them here
//! (it is kept in `Core` with the subscriptions, [`crate::pubsub::PubSub::outbox`]); the shell
//! drains it after each command ([`crate::Engine::take_messages`]) and encodes each message in
//! its receiver's protocol.
//!
//! A message is one reference-counted [`Reply`], shared by all its receivers.

use crate::client::Handle;
use crate::reply::Reply;
use alloc::rc::Rc;
use alloc::vec::Vec;

/// The queue of messages for clients, in the order they were sent.
#[derive(Default)]
pub struct Outbox {
    msgs: Vec<(Handle, Rc<Reply>)>,
}

impl Outbox {
    /// Queues `msg` for client `h`.
    #[inline]
    pub fn push(&mut self, h: Handle, msg: Rc<Reply>) {
        self.msgs.push((h, msg));
    }

    /// Takes every queued message, in order.
    pub fn take(&mut self) -> Vec<(Handle, Rc<Reply>)> {
        core::mem::take(&mut self.msgs)
    }

    /// Whether no message waits.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.msgs.is_empty()
    }
}
