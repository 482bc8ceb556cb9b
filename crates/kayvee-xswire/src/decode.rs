//! The incremental message decoder: bytes in, whole messages out, bounded by PAYLOAD_MAX.

use alloc::vec::Vec;
use core::fmt;

use crate::{Header, HEADER_LEN, PAYLOAD_MAX};

/// A fatal framing error: the connection must be closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The header announced a payload longer than 4096 bytes ("will be immediately killed").
    PayloadTooLarge(u32),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::PayloadTooLarge(n) => write!(f, "payload of {n} bytes exceeds 4096"),
        }
    }
}

/// One decoded message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// Its header (`len` = payload length).
    pub header: Header,
    /// Its payload.
    pub payload: Vec<u8>,
}

/// Accumulates bytes and yields messages. After an error it stays failed.
#[derive(Clone, Debug, Default)]
pub struct Decoder {
    buf: Vec<u8>,
    start: usize,
    failed: Option<DecodeError>,
}

impl Decoder {
    /// An empty decoder.
    pub fn new() -> Self {
        Decoder::default()
    }

    /// Add received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.start > 0 && self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes buffered but not yet decoded.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.start
    }

    /// The next whole message; `Ok(None)` means more bytes are needed.
    pub fn next_message(&mut self) -> Result<Option<Message>, DecodeError> {
        let m = self.next_frame()?.map(|(header, payload)| Message {
            header,
            payload: payload.to_vec(),
        });
        Ok(m)
    }

    /// The next whole message as its header and its payload in place (valid until the next
    /// call: a daemon parses it straight from the buffer, with no copy); `Ok(None)` means
    /// more bytes are needed.
    pub fn next_frame(&mut self) -> Result<Option<(Header, &[u8])>, DecodeError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        self.compact();
        let avail = &self.buf[self.start..];
        let Some(head) = avail.first_chunk::<HEADER_LEN>() else {
            return Ok(None);
        };
        let header = Header::read(head);
        if header.len as usize > PAYLOAD_MAX {
            self.failed = Some(DecodeError::PayloadTooLarge(header.len));
            return Err(DecodeError::PayloadTooLarge(header.len));
        }
        let total = HEADER_LEN + header.len as usize;
        if avail.len() < total {
            return Ok(None);
        }
        let at = self.start;
        self.start += total;
        Ok(Some((header, &self.buf[at + HEADER_LEN..at + total])))
    }

    /// Drop consumed bytes once they dominate the buffer.
    fn compact(&mut self) {
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        } else if self.start > 8192 && self.start * 2 > self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode;

    #[test]
    fn byte_at_a_time() {
        let mut wire = Vec::new();
        encode(&mut wire, 2, 1, 0, b"/a\0");
        encode(&mut wire, 6, 2, 0, b"");
        let mut d = Decoder::new();
        let mut got = Vec::new();
        for b in &wire {
            d.push(core::slice::from_ref(b));
            while let Some(m) = d.next_message().unwrap() {
                got.push(m);
            }
        }
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].payload, b"/a\0");
        assert_eq!(got[1].header.ty, 6);
        assert!(got[1].payload.is_empty());
        assert_eq!(d.pending(), 0);
    }

    #[test]
    fn oversized_is_fatal_and_sticky() {
        let mut wire = Vec::new();
        encode(&mut wire, 11, 0, 0, &[b'x'; 4097]);
        let mut d = Decoder::new();
        d.push(&wire[..16]);
        assert_eq!(d.next_message(), Err(DecodeError::PayloadTooLarge(4097)));
        d.push(&wire[16..]);
        assert_eq!(d.next_message(), Err(DecodeError::PayloadTooLarge(4097)));
        let mut ok = Vec::new();
        encode(&mut ok, 11, 0, 0, &[b'x'; 4096]);
        let mut d = Decoder::new();
        d.push(&ok);
        assert_eq!(d.next_message().unwrap().unwrap().payload.len(), 4096);
    }
}
