//! The Xenstore wire protocol (xen/include/public/io/xs_wire.h, docs/misc/xenstore.txt):
//! 16-byte header `{type, req_id, tx_id, len}` in host (little-endian) order, then `len <= 4096`
//! payload bytes.
//!
//! * [`Decoder`]: incremental; never panics; never desynchronises. A header announcing more
//!   than [`PAYLOAD_MAX`] bytes is fatal ([`DecodeError::PayloadTooLarge`]): the caller closes
//!   the connection, as cxenstored does (oxenstored answers E2BIG instead; it cannot resync
//!   either without reading the oversized payload). An empty payload is a complete message;
//!   [`parse_request`] turns it into EINVAL for every type that takes arguments (cxenstored).
//! * [`parse_request`]: a message to the store's [`Op`] (`kayvee-xenstore`), with cxenstored's argument rules.
//! * [`encode_reply`], [`encode_event`], [`encode`]: bytes out.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

mod decode;
mod msgtype;
mod parse;

pub use decode::{DecodeError, Decoder, Message};
pub use msgtype::MsgType;
pub use parse::parse_request;

use alloc::vec::Vec;
use kayvee_xenstore::{Reply, XsError};

/// Header length in bytes.
pub const HEADER_LEN: usize = 16;
/// Largest payload (XENSTORE_PAYLOAD_MAX).
pub const PAYLOAD_MAX: usize = 4096;

/// The error names in xs_wire.h `xsd_errors[]` order (ABI: append only), then oxenstored's
/// EQUOTA which is not in the table.
pub const ERROR_NAMES: [&str; 17] = [
    "EINVAL",
    "EACCES",
    "EEXIST",
    "EISDIR",
    "ENOENT",
    "ENOMEM",
    "ENOSPC",
    "EIO",
    "ENOTEMPTY",
    "ENOSYS",
    "EROFS",
    "EBUSY",
    "EAGAIN",
    "EISCONN",
    "E2BIG",
    "EPERM",
    "EQUOTA",
];

/// A message header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Message type (see [`MsgType`]).
    pub ty: u32,
    /// Request id, echoed in the reply.
    pub req_id: u32,
    /// Transaction id (0 = none), echoed in the reply.
    pub tx_id: u32,
    /// Payload length.
    pub len: u32,
}

impl Header {
    /// Read a header from 16 bytes.
    pub fn read(b: &[u8; HEADER_LEN]) -> Self {
        let word = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Header {
            ty: word(0),
            req_id: word(4),
            tx_id: word(8),
            len: word(12),
        }
    }

    /// The 16 header bytes.
    pub fn bytes(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        for (i, w) in [self.ty, self.req_id, self.tx_id, self.len]
            .into_iter()
            .enumerate()
        {
            out[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
        }
        out
    }
}

/// Append one message.
pub fn encode(out: &mut Vec<u8>, ty: u32, req_id: u32, tx_id: u32, payload: &[u8]) {
    let len = payload.len() as u32;
    out.extend_from_slice(
        &Header {
            ty,
            req_id,
            tx_id,
            len,
        }
        .bytes(),
    );
    out.extend_from_slice(payload);
}

/// The payload of a reply.
pub fn reply_payload(reply: &Reply, out: &mut Vec<u8>) {
    match reply {
        Reply::Ok => out.extend_from_slice(b"OK\0"),
        Reply::Value(v) => out.extend_from_slice(v),
        Reply::List(items) => {
            for it in items {
                out.extend_from_slice(it);
                out.push(0);
            }
        }
        Reply::Text(t) => {
            out.extend_from_slice(t.as_bytes());
            out.push(0);
        }
        Reply::Error(e) => error_payload(*e, out),
    }
}

/// `E<NAME>\0`.
fn error_payload(e: XsError, out: &mut Vec<u8>) {
    out.extend_from_slice(e.name().as_bytes());
    out.push(0);
}

/// Append the reply to the request with header `req`: same type, req_id and tx_id, or type
/// ERROR for an error.
pub fn encode_reply(out: &mut Vec<u8>, req: &Header, reply: &Reply) {
    let ty = match reply {
        Reply::Error(_) => MsgType::Error as u32,
        _ => req.ty,
    };
    let start = out.len();
    out.extend_from_slice(&[0u8; HEADER_LEN]);
    reply_payload(reply, out);
    let len = (out.len() - start - HEADER_LEN) as u32;
    let h = Header {
        ty,
        req_id: req.req_id,
        tx_id: req.tx_id,
        len,
    };
    out[start..start + HEADER_LEN].copy_from_slice(&h.bytes());
}

/// Append a WATCH_EVENT (`req_id = tx_id = 0`, payload `path\0token\0`).
pub fn encode_event(out: &mut Vec<u8>, path: &[u8], token: &[u8]) {
    let len = (path.len() + token.len() + 2) as u32;
    let h = Header {
        ty: MsgType::WatchEvent as u32,
        req_id: 0,
        tx_id: 0,
        len,
    };
    out.extend_from_slice(&h.bytes());
    out.extend_from_slice(path);
    out.push(0);
    out.extend_from_slice(token);
    out.push(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_table_matches_engine_order() {
        for (i, e) in XsError::ALL.iter().enumerate() {
            assert_eq!(ERROR_NAMES[i], e.name());
        }
    }

    #[test]
    fn header_round_trip() {
        let h = Header {
            ty: 2,
            req_id: 7,
            tx_id: 3,
            len: 5,
        };
        assert_eq!(Header::read(&h.bytes()), h);
        assert_eq!(h.bytes(), [2, 0, 0, 0, 7, 0, 0, 0, 3, 0, 0, 0, 5, 0, 0, 0]);
    }
}
