//! Reply encoder (API placeholder: the real encoder replaces the bodies).

use alloc::vec::Vec;
use kayvee_engine::{Protocol, ReplySink};

/// Encodes replies into a connection's output buffer for its protocol version.
pub struct RespWriter<'a> {
    out: &'a mut Vec<u8>,
    protocol: Protocol,
}

impl<'a> RespWriter<'a> {
    /// Appends to `out`, encoding for `protocol`.
    pub fn new(out: &'a mut Vec<u8>, protocol: Protocol) -> Self {
        RespWriter { out, protocol }
    }
}

impl ReplySink for RespWriter<'_> {
    fn protocol(&self) -> Protocol {
        self.protocol
    }
    fn set_protocol(&mut self, p: Protocol) {
        self.protocol = p;
    }
    fn simple(&mut self, s: &str) {
        self.out.push(b'+');
        self.out.extend_from_slice(s.as_bytes());
        self.out.extend_from_slice(b"\r\n");
    }
    fn error(&mut self, _: &str) {
        todo!()
    }
    fn int(&mut self, _: i64) {
        todo!()
    }
    fn bulk(&mut self, _: &[u8]) {
        todo!()
    }
    fn null(&mut self) {
        todo!()
    }
    fn null_array(&mut self) {
        todo!()
    }
    fn array(&mut self, _: usize) {
        todo!()
    }
    fn map(&mut self, _: usize) {
        todo!()
    }
    fn set(&mut self, _: usize) {
        todo!()
    }
    fn push(&mut self, _: usize) {
        todo!()
    }
    fn double(&mut self, _: f64) {
        todo!()
    }
    fn boolean(&mut self, _: bool) {
        todo!()
    }
    fn verbatim(&mut self, _: &str, _: &[u8]) {
        todo!()
    }
    fn big_number(&mut self, _: &str) {
        todo!()
    }
}
