//! What a command sends as keyspace notifications (see [`crate::notify`] for the events and
//! their classes): its own event, after the keyspace's pending `new` / `expired` ones
//! ([`crate::drain::notify`]), and the `del` of a collection it emptied.

use crate::Cx;

pub use crate::notify::class;

/// Publishes `event` on `key` of the running command's database (one call per write site).
#[inline]
pub fn emit(cx: &mut Cx<'_>, class: u32, event: &str, key: &[u8]) {
    crate::drain::notify(cx.core, cx.db_index, class, event, key);
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
