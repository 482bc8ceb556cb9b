//! Xenstore errors: the names sent on the wire in an ERROR reply (xs_wire.h `xsd_errors[]`).

use core::fmt;

/// A Xenstore error; `name()` is the exact text sent in the ERROR payload (without the NUL).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum XsError {
    /// Invalid argument: bad path, bad number of arguments, bad permission string.
    Einval,
    /// Permission denied by the node's permissions.
    Eacces,
    /// Already exists (duplicate watch).
    Eexist,
    /// Is a directory (kept for the ABI table; Kayvee never sends it).
    Eisdir,
    /// No such node, transaction or domain.
    Enoent,
    /// Out of memory.
    Enomem,
    /// A per-domain quota (nodes, node size, transactions, permissions) is exhausted (cxenstored).
    Enospc,
    /// I/O error.
    Eio,
    /// Directory not empty (kept for the ABI table).
    Enotempty,
    /// Unknown or unsupported message type.
    Enosys,
    /// Read-only (kept for the ABI table).
    Erofs,
    /// TRANSACTION_START inside a transaction.
    Ebusy,
    /// The transaction conflicted with a concurrent commit: retry it.
    Eagain,
    /// Already connected (kept for the ABI table).
    Eisconn,
    /// Too big: reply would not fit in a message, too many watches.
    E2big,
    /// Not privileged: a dom0-only operation, or an owner change by a guest.
    Eperm,
    /// oxenstored's quota error; not in xs_wire.h, so libxenstore reads it as EINVAL. Never sent
    /// by Kayvee, which follows cxenstored (ENOSPC / E2BIG); kept so the codec can name it.
    Equota,
}

impl XsError {
    /// The wire name, e.g. `"ENOENT"`.
    pub fn name(self) -> &'static str {
        match self {
            XsError::Einval => "EINVAL",
            XsError::Eacces => "EACCES",
            XsError::Eexist => "EEXIST",
            XsError::Eisdir => "EISDIR",
            XsError::Enoent => "ENOENT",
            XsError::Enomem => "ENOMEM",
            XsError::Enospc => "ENOSPC",
            XsError::Eio => "EIO",
            XsError::Enotempty => "ENOTEMPTY",
            XsError::Enosys => "ENOSYS",
            XsError::Erofs => "EROFS",
            XsError::Ebusy => "EBUSY",
            XsError::Eagain => "EAGAIN",
            XsError::Eisconn => "EISCONN",
            XsError::E2big => "E2BIG",
            XsError::Eperm => "EPERM",
            XsError::Equota => "EQUOTA",
        }
    }

    /// Every error, in xs_wire.h ABI order (EQUOTA, not in the ABI, last).
    pub const ALL: [XsError; 17] = [
        XsError::Einval,
        XsError::Eacces,
        XsError::Eexist,
        XsError::Eisdir,
        XsError::Enoent,
        XsError::Enomem,
        XsError::Enospc,
        XsError::Eio,
        XsError::Enotempty,
        XsError::Enosys,
        XsError::Erofs,
        XsError::Ebusy,
        XsError::Eagain,
        XsError::Eisconn,
        XsError::E2big,
        XsError::Eperm,
        XsError::Equota,
    ];

    /// The error with this wire name, if any.
    pub fn from_name(name: &[u8]) -> Option<XsError> {
        XsError::ALL
            .into_iter()
            .find(|e| e.name().as_bytes() == name)
    }
}

impl fmt::Display for XsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        for e in XsError::ALL {
            assert_eq!(XsError::from_name(e.name().as_bytes()), Some(e));
        }
        assert_eq!(XsError::from_name(b"ENOPE"), None);
        assert_eq!(XsError::ALL[4].name(), "ENOENT");
        assert_eq!(XsError::ALL[15].name(), "EPERM");
    }
}
