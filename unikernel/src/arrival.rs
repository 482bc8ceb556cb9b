//! The order in which connections' input arrived: each attached pool slot's socket carries a
//! receive waker (smoltcp's `async` feature) that smoltcp wakes from inside
//! `poll_ingress_single` when a segment puts data in the socket's receive buffer, or when its
//! state changes (the peer's FIN, a reset). The waker appends the slot to [`Arrivals`]; the
//! loop serves those slots first, in that order, as epoll's ready list gives Redis and
//! kayvee-server their order. Without it a pass that took in several connections' frames
//! served them in the pool's order: two clients that blocked on one key in quick succession
//! were queued by where their sockets sat, not by who asked first.
//!
//! Cost: one push per wake and at most one wake per registration (smoltcp's wakers are one
//! shot; the loop registers again when it reads the slot), so a pass's frames cost O(frames),
//! never O(frames x connections). A slot may appear twice or after it went idle (a script's
//! hook read it meanwhile, or it was closed): serving it then finds nothing, which is harmless.

use alloc::sync::Arc;
use alloc::task::Wake;
use alloc::vec::Vec;
use core::task::Waker;
use spinning_top::Spinlock;

/// Pool slots in the order their sockets were woken since the last [`Arrivals::take`].
/// A lock rather than a `RefCell` only because a `Waker` must be `Send + Sync`; the image
/// has one thread and the lock is never contended.
#[derive(Default)]
pub struct Arrivals {
    woken: Spinlock<Vec<usize>>,
}

impl Arrivals {
    /// A waker that records pool slot `slot` here; made once per slot, kept in the slot and
    /// registered again and again (smoltcp keeps an equal waker without cloning it).
    pub fn waker(self: &Arc<Self>, slot: usize) -> Waker {
        Waker::from(Arc::new(SlotWaker {
            slot,
            arrivals: Arc::clone(self),
        }))
    }

    /// Moves the slots woken so far into `out` (which must be empty), oldest first; the
    /// buffers trade places, so neither is allocated again once warm.
    pub fn take(&self, out: &mut Vec<usize>) {
        debug_assert!(out.is_empty());
        core::mem::swap(&mut *self.woken.lock(), out);
    }

    /// Records that `slot`'s socket was woken.
    fn push(&self, slot: usize) {
        self.woken.lock().push(slot);
    }
}

/// The waker of one pool slot.
struct SlotWaker {
    slot: usize,
    arrivals: Arc<Arrivals>,
}

impl Wake for SlotWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.arrivals.push(self.slot);
    }
}
