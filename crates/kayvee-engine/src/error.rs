//! Command errors. Each variant's `Display` is the exact text Redis 7.0 sends (without the
//! leading `-`); clients match on these prefixes, so they are part of the protocol.

use alloc::borrow::Cow;
use alloc::string::String;
use core::fmt;

/// The result of a command handler. On `Err`, the handler must not have written any reply yet.
pub type CmdResult = Result<(), Error>;

/// A user error: a reply, never a dropped connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// WRONGTYPE Operation against a key holding the wrong kind of value
    WrongType,
    /// ERR value is not an integer or out of range
    NotInteger,
    /// ERR value is not a valid float
    NotFloat,
    /// ERR syntax error
    Syntax,
    /// ERR increment or decrement would overflow
    Overflow,
    /// ERR wrong number of arguments for '<cmd>' command
    WrongArity(String),
    /// ERR no such key
    NoSuchKey,
    /// ERR DB index is out of range
    DbIndexOutOfRange,
    /// ERR index out of range
    IndexOutOfRange,
    /// ERR invalid expire time in '<cmd>' command
    InvalidExpire(String),
    /// ERR string exceeds maximum allowed size (proto-max-bulk-len)
    StringTooLong,
    /// NOAUTH Authentication required.
    NoAuth,
    /// Any other text, with its code (`ERR ...`, `NOPROTO ...`).
    Msg(Cow<'static, str>),
    /// A text that quotes client bytes verbatim (not necessarily UTF-8), as Redis echoes them.
    Bytes(alloc::vec::Vec<u8>),
}

impl Error {
    /// An error with an arbitrary (full) text.
    pub fn msg(s: impl Into<Cow<'static, str>>) -> Self {
        Error::Msg(s.into())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::WrongType => {
                f.write_str("WRONGTYPE Operation against a key holding the wrong kind of value")
            }
            Error::NotInteger => f.write_str("ERR value is not an integer or out of range"),
            Error::NotFloat => f.write_str("ERR value is not a valid float"),
            Error::Syntax => f.write_str("ERR syntax error"),
            Error::Overflow => f.write_str("ERR increment or decrement would overflow"),
            Error::WrongArity(cmd) => {
                write!(f, "ERR wrong number of arguments for '{cmd}' command")
            }
            Error::NoSuchKey => f.write_str("ERR no such key"),
            Error::DbIndexOutOfRange => f.write_str("ERR DB index is out of range"),
            Error::IndexOutOfRange => f.write_str("ERR index out of range"),
            Error::InvalidExpire(cmd) => write!(f, "ERR invalid expire time in '{cmd}' command"),
            Error::StringTooLong => {
                f.write_str("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
            }
            Error::NoAuth => f.write_str("NOAUTH Authentication required."),
            Error::Msg(s) => f.write_str(s),
            Error::Bytes(b) => f.write_str(&alloc::string::String::from_utf8_lossy(b)),
        }
    }
}
