//! Redis RDB files (version 10, as Redis 7.0 writes and reads them) for Kayvee, sans-IO.
//!
//! - [`RdbWriter`] serialises an O(1) [`kayvee_engine::Snapshot`] piece by piece into byte
//!   chunks (the shell writes them to a file, from a thread while the engine keeps serving),
//!   using the plain object types (string, set, hash, zset with binary scores), quicklist 2
//!   for lists and the intset blob for intsets, as Redis 7.0 writes them, which Redis 7.0
//!   loads and `redis-check-rdb` accepts.
//! - [`load`] reads a whole RDB file (Redis 7.0's own dumps included: listpack, quicklist 2,
//!   intset, ziplist, LZF strings, module and function aux records) into engine databases.
//!   Corrupt or truncated input is an [`Error`], never a panic.
//! - [`dump`] builds DUMP payloads and reads RESTORE ones ([`CODEC`] plugs into the engine).
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod compact;
pub mod crc64;
pub mod dump;
pub mod encode;
pub mod listpack;
pub mod load;
pub mod lzf;
pub mod object;
pub mod read;
pub mod stream;
pub mod write;

pub use dump::CODEC;
pub use load::{load, load_with_progress, LoadOptions, Loaded, Progress, StepLoad};
pub use write::{RdbWriter, ReplAux, WriteOptions};

/// The RDB version written (Redis 7.0), and the newest one read.
pub const RDB_VERSION: u16 = 10;

/// The CRC-64 of RDB files and DUMP payloads (Jones polynomial, reflected), slice-by-16 with
/// word loads ([`crc64`]): a save of a large dataset feels it (about a fifth of the writer's
/// instructions per key).
pub static CRC64: crc64::Crc64 = crc64::Crc64;

/// Record opcodes.
pub mod opcode {
    /// Function library (Redis 7.0 `FUNCTION2`).
    pub const FUNCTION2: u8 = 0xF5;
    /// Pre-release function record (7.0 RCs).
    pub const FUNCTION_PRE_GA: u8 = 0xF6;
    /// Module auxiliary data.
    pub const MODULE_AUX: u8 = 0xF7;
    /// LRU idle time of the next key.
    pub const IDLE: u8 = 0xF8;
    /// LFU frequency of the next key.
    pub const FREQ: u8 = 0xF9;
    /// Auxiliary field (name, value).
    pub const AUX: u8 = 0xFA;
    /// Database sizes hint.
    pub const RESIZEDB: u8 = 0xFB;
    /// Expiry of the next key in unix ms.
    pub const EXPIRETIME_MS: u8 = 0xFC;
    /// Expiry of the next key in unix seconds (old).
    pub const EXPIRETIME: u8 = 0xFD;
    /// Database selector.
    pub const SELECTDB: u8 = 0xFE;
    /// End of file (then the CRC-64).
    pub const EOF: u8 = 0xFF;
}

/// Object types.
pub mod types {
    /// String.
    pub const STRING: u8 = 0;
    /// Linked list of strings.
    pub const LIST: u8 = 1;
    /// Set of strings.
    pub const SET: u8 = 2;
    /// Sorted set with string scores.
    pub const ZSET: u8 = 3;
    /// Hash.
    pub const HASH: u8 = 4;
    /// Sorted set with binary scores.
    pub const ZSET_2: u8 = 5;
    /// Module value (old).
    pub const MODULE_PRE_GA: u8 = 6;
    /// Module value.
    pub const MODULE_2: u8 = 7;
    /// Hash as a zipmap (Redis 2.x).
    pub const HASH_ZIPMAP: u8 = 9;
    /// List as a ziplist.
    pub const LIST_ZIPLIST: u8 = 10;
    /// Set as an intset.
    pub const SET_INTSET: u8 = 11;
    /// Sorted set as a ziplist.
    pub const ZSET_ZIPLIST: u8 = 12;
    /// Hash as a ziplist.
    pub const HASH_ZIPLIST: u8 = 13;
    /// List as a quicklist of ziplists.
    pub const LIST_QUICKLIST: u8 = 14;
    /// Stream (listpacks).
    pub const STREAM_LISTPACKS: u8 = 15;
    /// Hash as a listpack.
    pub const HASH_LISTPACK: u8 = 16;
    /// Sorted set as a listpack.
    pub const ZSET_LISTPACK: u8 = 17;
    /// List as a quicklist of listpacks (Redis 7.0).
    pub const LIST_QUICKLIST_2: u8 = 18;
    /// Stream, version 2 (Redis 7.0).
    pub const STREAM_LISTPACKS_2: u8 = 19;
}

/// Why an RDB file or DUMP payload could not be read. Display is the message for the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// The input ended inside a record.
    Truncated,
    /// The file does not start with `REDIS` and a four-digit version.
    BadMagic,
    /// A version newer than 10.
    UnsupportedVersion(u16),
    /// The CRC-64 at the end (`expected`) does not match the content's (`got`).
    BadChecksum {
        /// The checksum the file carries.
        expected: u64,
        /// The content's.
        got: u64,
    },
    /// An object type Kayvee does not hold (streams, modules, zipmaps).
    UnsupportedType(u8),
    /// An unknown opcode or object type byte.
    BadType(u8),
    /// A malformed encoding (listpack, ziplist, intset, LZF, length, number...).
    Corrupt(&'static str),
    /// A structure check failed (Redis's text: "Hash listpack integrity check failed.",
    /// "Duplicate set members detected"...).
    Integrity(&'static str),
    /// A database number beyond the configured `databases`.
    DbOutOfRange(u64),
    /// A hash listpack with a field twice, read without deep sanitization (Redis logs the
    /// listpack's hex dump when it meets the duplicate): the listpack.
    ListpackDups(alloc::vec::Vec<u8>),
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::Truncated => f.write_str("Short read or OOM loading DB. Unrecoverable error"),
            Error::BadMagic => f.write_str("Wrong signature trying to load DB from file"),
            Error::UnsupportedVersion(v) => write!(f, "Can't handle RDB format version {v}"),
            // Redis's two lines: its checksum warning and the corruption report.
            Error::BadChecksum { expected, got } => write!(
                f,
                "Wrong RDB checksum expected: ({expected:x}) got ({got:x}): RDB CRC error"
            ),
            Error::UnsupportedType(t) => {
                write!(f, "RDB object type {t} is not supported by Kayvee")
            }
            Error::BadType(t) => write!(f, "Unknown RDB record type {t}"),
            Error::Corrupt(what) => write!(f, "Corrupt RDB data: {what}"),
            Error::Integrity(what) => f.write_str(what),
            Error::ListpackDups(lp) => {
                let dump = kayvee_engine::persist::hex_dump("listpack with dup elements dump", lp);
                f.write_str(&dump.join("\n"))
            }
            Error::DbOutOfRange(n) => write!(
                f,
                "FATAL: Data file was created with a Redis server configured to handle more \
                 than the configured number of databases ({n}). Exiting"
            ),
        }
    }
}

impl Error {
    /// Whether the file could not be read through: it ends early, or its data is malformed
    /// or fails a check (Redis then logs "Terminating server after rdb file reading failure.").
    pub fn is_read_failure(&self) -> bool {
        matches!(
            self,
            Error::Truncated
                | Error::BadChecksum { .. }
                | Error::BadType(_)
                | Error::Corrupt(_)
                | Error::Integrity(_)
                | Error::ListpackDups(_)
        )
    }
}

/// A result with this crate's [`Error`].
pub type Result<T> = core::result::Result<T, Error>;

/// Bytes from a hex string (the tests' Redis payloads, as `DUMP` printed them).
#[cfg(test)]
pub(crate) fn unhex(s: &str) -> alloc::vec::Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}
