//! Requests and replies of the Xenstore protocol as values (docs/misc/xenstore.txt); the wire
//! codec (`kayvee-xswire`) turns bytes into [`Op`] and [`Reply`] into bytes.

use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;

use crate::error::XsError;

/// A request. Paths and domids are kept as sent: the engine validates them, because the rules
/// depend on the sender's domain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// CONTROL (alias DEBUG): a command and its arguments.
    Control(Vec<Vec<u8>>),
    /// DIRECTORY: list a node's children.
    Directory(Vec<u8>),
    /// READ: a node's value.
    Read(Vec<u8>),
    /// GET_PERMS: a node's permissions.
    GetPerms(Vec<u8>),
    /// WATCH: path, token.
    Watch(Vec<u8>, Vec<u8>),
    /// UNWATCH: path, token.
    Unwatch(Vec<u8>, Vec<u8>),
    /// TRANSACTION_START.
    TransactionStart,
    /// TRANSACTION_END: true commits (`T`), false aborts (`F`).
    TransactionEnd(bool),
    /// INTRODUCE: domid, gfn, event channel.
    Introduce(Vec<u8>, Vec<u8>, Vec<u8>),
    /// RELEASE: domid.
    Release(Vec<u8>),
    /// GET_DOMAIN_PATH: domid.
    GetDomainPath(Vec<u8>),
    /// WRITE: path, value.
    Write(Vec<u8>, Vec<u8>),
    /// MKDIR: path.
    Mkdir(Vec<u8>),
    /// RM: path.
    Rm(Vec<u8>),
    /// SET_PERMS: path, permission strings.
    SetPerms(Vec<u8>, Vec<Vec<u8>>),
    /// IS_DOMAIN_INTRODUCED: domid.
    IsDomainIntroduced(Vec<u8>),
    /// RESUME: domid.
    Resume(Vec<u8>),
    /// SET_TARGET: domid, target domid.
    SetTarget(Vec<u8>, Vec<u8>),
    /// RESET_WATCHES: drop the connection's watches and transactions.
    ResetWatches,
    /// DIRECTORY_PART: path, byte offset into the child list.
    DirectoryPart(Vec<u8>, Vec<u8>),
    /// GET_FEATURE: optional domid.
    GetFeature(Vec<Vec<u8>>),
    /// SET_FEATURE: domid, value.
    SetFeature(Vec<Vec<u8>>),
    /// GET_QUOTA: `[[domid] name]`.
    GetQuota(Vec<Vec<u8>>),
    /// SET_QUOTA: `[domid] name value`.
    SetQuota(Vec<Vec<u8>>),
    /// A request the codec could not give a shape to: its error reply.
    Invalid(XsError),
}

impl Op {
    /// True for operations recorded in a transaction and replayed at commit.
    pub fn is_transactional(&self) -> bool {
        matches!(
            self,
            Op::Directory(_)
                | Op::Read(_)
                | Op::GetPerms(_)
                | Op::Write(..)
                | Op::Mkdir(_)
                | Op::Rm(_)
                | Op::SetPerms(..)
                | Op::DirectoryPart(..)
        )
    }

    /// True for dom0-only operations (cxenstored 4.17's XS_FLAG_PRIV: CONTROL, INTRODUCE,
    /// RELEASE, IS_DOMAIN_INTRODUCED, RESUME, SET_TARGET; plus SET_FEATURE and SET_QUOTA of
    /// newer Xen). A guest gets EACCES for them.
    pub fn is_privileged(&self) -> bool {
        matches!(
            self,
            Op::Control(_)
                | Op::Introduce(..)
                | Op::Release(_)
                | Op::IsDomainIntroduced(_)
                | Op::Resume(_)
                | Op::SetTarget(..)
                | Op::SetFeature(_)
                | Op::SetQuota(_)
        )
    }
}

/// A reply; the codec writes it with the request's type, req_id and tx_id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// `OK\0`.
    Ok,
    /// Raw bytes, no terminator (READ): the node's own value, shared (no copy per READ or
    /// per transaction log entry).
    Value(Arc<[u8]>),
    /// Each item followed by NUL (DIRECTORY, GET_PERMS, DIRECTORY_PART); empty list = empty payload.
    List(Vec<Vec<u8>>),
    /// A string followed by NUL (transaction id, domain path, `T`/`F`, CONTROL output).
    Text(String),
    /// An ERROR reply: `E<NAME>\0`.
    Error(XsError),
}

impl From<XsError> for Reply {
    fn from(e: XsError) -> Self {
        Reply::Error(e)
    }
}

/// Fold a handler's result into a reply.
pub fn reply_of(r: Result<Reply, XsError>) -> Reply {
    r.unwrap_or_else(Reply::Error)
}
