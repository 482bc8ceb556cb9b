//! Incremental request decoder (API placeholder: the real decoder replaces the bodies).

use alloc::vec::Vec;
use core::fmt;
use kayvee_engine::argv::Span;
use kayvee_engine::Argv;

/// Bounds on what a client may send.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest bulk argument (`proto-max-bulk-len`, 512 MB by default).
    pub bulk_len_max: usize,
    /// Largest amount of buffered, not yet complete input (`client-query-buffer-limit`, 1 GB).
    pub query_buffer_max: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            bulk_len_max: 512 * 1024 * 1024,
            query_buffer_max: 1024 * 1024 * 1024,
        }
    }
}

/// A protocol violation: the shell sends `-ERR <Display>` and closes the connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProtocolError {
    /// Protocol error: invalid multibulk length
    InvalidMultibulkLength,
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtocolError::InvalidMultibulkLength => {
                f.write_str("Protocol error: invalid multibulk length")
            }
        }
    }
}

/// One decoded command.
#[derive(Debug)]
pub struct Frame<'a> {
    /// The arguments (may be empty: an empty inline line or `*0`, which the engine ignores).
    pub argv: Argv<'a>,
    /// Bytes of the input this command used; the caller drops them before the next call.
    pub consumed: usize,
}

/// Decodes commands from a connection's input, one at a time, resuming where it stopped when a
/// command arrives in pieces.
#[derive(Debug, Default)]
pub struct Decoder {
    spans: Vec<Span>,
    limits: Limits,
}

impl Decoder {
    /// A decoder with these limits.
    pub fn new(limits: Limits) -> Self {
        Decoder {
            spans: Vec::new(),
            limits,
        }
    }

    /// Decodes the next command at the start of `buf`. `Ok(None)`: more bytes are needed (call
    /// again with the same bytes plus more). `authenticated` tightens limits for clients that
    /// have not passed AUTH, as Redis does.
    pub fn decode<'a>(
        &'a mut self,
        buf: &'a [u8],
        authenticated: bool,
    ) -> Result<Option<Frame<'a>>, ProtocolError> {
        let _ = (buf, authenticated, self.limits);
        todo!("real decoder")
    }
}
