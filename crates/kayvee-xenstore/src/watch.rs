//! Watches (xenstore.txt "Watches"): which registered (path, token) pairs an update fires,
//! and with which event path.

use alloc::string::String;
use alloc::vec::Vec;

use crate::path::{is_prefix, relativize};
use crate::store::Change;

/// One watch of a connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Watch {
    /// The path as the client sent it (relative, absolute or `@special`).
    pub path: Vec<u8>,
    /// The client's token.
    pub token: Vec<u8>,
    /// The absolute path watched, or the special name (`@...`).
    pub abs: String,
    /// Sent relative: events come back relative too.
    pub relative: bool,
}

impl Watch {
    /// True for `@introduceDomain`, `@releaseDomain` and other `@` names.
    pub fn is_special(&self) -> bool {
        self.abs.starts_with('@')
    }

    /// The event path this watch reports for `change`, if it fires: the changed path when the
    /// watch is on it or an ancestor; the watch's own path when a recursive removal took out
    /// an ancestor of it (one event per watch, not one per removed node).
    pub fn fires_for(&self, change: &Change, domid: u32) -> Option<Vec<u8>> {
        if self.is_special() {
            return None;
        }
        if is_prefix(&self.abs, &change.path) {
            return Some(
                relativize(&change.path, domid, self.relative)
                    .as_bytes()
                    .to_vec(),
            );
        }
        if change.recursive && is_prefix(&change.path, &self.abs) {
            return Some(self.path.clone());
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perms::Perms;
    use alloc::sync::Arc;

    fn change(path: &str, recursive: bool) -> Change {
        let perms = Arc::new(Perms::owned_by(0));
        Change {
            path: path.into(),
            recursive,
            perms,
            top_len: path.len(),
        }
    }

    fn watch(path: &str, abs: &str) -> Watch {
        let relative = !path.starts_with('/') && !path.starts_with('@');
        Watch {
            path: path.into(),
            token: b"t".to_vec(),
            abs: abs.into(),
            relative,
        }
    }

    #[test]
    fn the_checked_sequence_from_the_notes() {
        let w = watch("/probe/w", "/probe/w");
        assert_eq!(
            w.fires_for(&change("/probe/w/a", false), 0).unwrap(),
            b"/probe/w/a"
        );
        assert_eq!(
            w.fires_for(&change("/probe/w/a/b", false), 0).unwrap(),
            b"/probe/w/a/b"
        );
        assert_eq!(
            w.fires_for(&change("/probe/w/a", true), 0).unwrap(),
            b"/probe/w/a"
        );
        assert_eq!(w.fires_for(&change("/probe/other", false), 0), None);
        assert_eq!(
            w.fires_for(&change("/probe", true), 0).unwrap(),
            b"/probe/w"
        );
        assert_eq!(w.fires_for(&change("/probe", false), 0), None);
        let rel = watch("relw", "/local/domain/0/relw");
        assert_eq!(
            rel.fires_for(&change("/local/domain/0/relw/x", false), 0)
                .unwrap(),
            b"relw/x"
        );
        let special = watch("@releaseDomain", "@releaseDomain");
        assert_eq!(special.fires_for(&change("/", true), 0), None);
    }
}
