//! RESP2/RESP3 codec: an incremental request decoder (multibulk and inline), a reply encoder
//! that implements the engine's `ReplySink`, and a reply parser for clients and tests.
//!
//! Follows the Redis protocol specification (RESP2, and RESP3 for replies).
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod decode;
pub mod encode;
#[doc(hidden)]
pub mod fuzzing;
pub mod parse;

pub use decode::{Decoder, Frame, Limits, ProtocolError};
pub use encode::{format_double_g17, RespWriter};
pub use parse::{parse_reply, ParseError};
