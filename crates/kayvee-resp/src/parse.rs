//! Reply parser for clients and tests (API placeholder).

use kayvee_engine::Reply;

/// A malformed reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError;

/// Parses one RESP2/RESP3 reply at the start of `buf`: `Ok(None)` when incomplete, else the
/// reply and the number of bytes it used.
pub fn parse_reply(buf: &[u8]) -> Result<Option<(Reply, usize)>, ParseError> {
    let _ = buf;
    todo!("real parser")
}
