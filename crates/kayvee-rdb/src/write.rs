//! The incremental RDB writer: header and AUX fields, then per non-empty database SELECTDB,
//! RESIZEDB and its keys (EXPIRETIME_MS before keys with a TTL), then EOF and the CRC-64.
//!
//! Sans-IO: [`RdbWriter::next_chunk`] appends the next piece (about `chunk_len` bytes) to a
//! buffer the caller writes wherever it wants. The writer owns a [`Snapshot`], so it can run
//! on another thread while the engine goes on changing its own (copy-on-write) databases.

use crate::encode::{type_of, write_body, write_len, write_string};
use crate::lzf::Lzf;
use crate::{opcode, CRC64, RDB_VERSION};
use alloc::vec::Vec;
use kayvee_engine::Snapshot;

/// The function libraries as Redis 7.0 writes them (in RDB files and FUNCTION DUMP): per
/// library the `FUNCTION2` opcode and its code as a string.
pub fn write_functions(out: &mut Vec<u8>, codes: &[Vec<u8>], mut lzf: Option<&mut Lzf>) {
    for code in codes {
        out.push(opcode::FUNCTION2);
        write_string(out, code, lzf.as_deref_mut());
    }
}

/// What the writer needs besides the snapshot.
#[derive(Clone, Debug)]
pub struct WriteOptions {
    /// LZF-compress long strings (`rdbcompression`).
    pub compress: bool,
    /// Append the CRC-64 (`rdbchecksum`); zero when off.
    pub checksum: bool,
    /// The `used-mem` AUX field (bytes).
    pub used_mem: u64,
    /// Keys serialised per [`RdbWriter::next_chunk`] step before checking the chunk size.
    pub chunk_len: usize,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            compress: true,
            checksum: true,
            used_mem: 0,
            chunk_len: 64 * 1024,
        }
    }
}

/// Where the writer is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Nothing written yet.
    Header,
    /// Writing database `db` from hash cursor `cursor` (`started`: SELECTDB written).
    Keys {
        db: usize,
        cursor: u64,
        started: bool,
    },
    /// EOF and checksum next.
    Trailer,
    /// Complete.
    Done,
}

/// The writer (see the module doc).
pub struct RdbWriter {
    snapshot: Snapshot,
    opts: WriteOptions,
    stage: Stage,
    digest: crc::Digest<'static, u64>,
    keys_written: u64,
    /// The LZF compressor (its table is reused across strings), when compressing.
    lzf: Option<Lzf>,
}

impl RdbWriter {
    /// A writer of `snapshot`.
    pub fn new(snapshot: Snapshot, opts: WriteOptions) -> Self {
        RdbWriter {
            snapshot,
            opts: opts.clone(),
            stage: Stage::Header,
            digest: CRC64.digest(),
            keys_written: 0,
            lzf: opts.compress.then(Lzf::new),
        }
    }

    /// Keys serialised so far.
    pub fn keys_written(&self) -> u64 {
        self.keys_written
    }

    /// Appends the next piece of the file to `out` (at least `chunk_len` bytes unless the end
    /// comes first). Returns false, appending nothing, once the file is complete.
    pub fn next_chunk(&mut self, out: &mut Vec<u8>) -> bool {
        if self.stage == Stage::Done {
            return false;
        }
        let start = out.len();
        while self.stage != Stage::Done && out.len() - start < self.opts.chunk_len.max(1) {
            self.step(out);
        }
        true
    }

    /// The whole file in one buffer (tests, DEBUG RELOAD-like uses).
    pub fn write_all(mut self) -> Vec<u8> {
        let mut out = Vec::new();
        while self.next_chunk(&mut out) {}
        out
    }

    /// One stage step; the bytes it appends go into the checksum.
    fn step(&mut self, out: &mut Vec<u8>) {
        let before = out.len();
        match self.stage {
            Stage::Header => {
                self.header(out);
                self.stage = self.next_db(0);
            }
            Stage::Keys {
                db,
                cursor,
                started,
            } => self.keys(out, db, cursor, started),
            Stage::Trailer => {
                out.push(opcode::EOF);
                self.digest.update(&out[before..]);
                let crc = if self.opts.checksum {
                    core::mem::replace(&mut self.digest, CRC64.digest()).finalize()
                } else {
                    0
                };
                out.extend_from_slice(&crc.to_le_bytes());
                self.stage = Stage::Done;
                return;
            }
            Stage::Done => return,
        }
        self.digest.update(&out[before..]);
    }

    /// `REDIS0010` and the AUX fields Redis 7.0 writes.
    fn header(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"REDIS");
        out.extend_from_slice(alloc::format!("{RDB_VERSION:04}").as_bytes());
        let ctime = alloc::format!("{}", self.snapshot.taken_ms / 1000);
        let used = alloc::format!("{}", self.opts.used_mem);
        let aux: [(&[u8], &[u8]); 5] = [
            (b"redis-ver", b"7.0.15"),
            (b"redis-bits", b"64"),
            (b"ctime", ctime.as_bytes()),
            (b"used-mem", used.as_bytes()),
            (b"aof-base", b"0"),
        ];
        for (k, v) in aux {
            out.push(opcode::AUX);
            write_string(out, k, None);
            write_string(out, v, None);
        }
        let mut lzf = self.opts.compress.then(Lzf::new);
        write_functions(out, &self.snapshot.functions, lzf.as_mut());
    }

    /// The stage for the first non-empty database at or after `db`.
    fn next_db(&self, db: usize) -> Stage {
        match (db..self.snapshot.dbs.len()).find(|&i| !self.snapshot.dbs[i].keys.is_empty()) {
            Some(db) => Stage::Keys {
                db,
                cursor: 0,
                started: false,
            },
            None => Stage::Trailer,
        }
    }

    /// SELECTDB and RESIZEDB when starting a database, then a batch of its keys.
    fn keys(&mut self, out: &mut Vec<u8>, db: usize, cursor: u64, started: bool) {
        let snap = &self.snapshot.dbs[db];
        if !started {
            out.push(opcode::SELECTDB);
            write_len(out, db as u64);
            out.push(opcode::RESIZEDB);
            write_len(out, snap.keys.len() as u64);
            write_len(out, snap.expires.len() as u64);
        }
        let lzf = &mut self.lzf;
        let mut n = 0;
        let batch = (self.opts.chunk_len / 64).clamp(1, 1024);
        let next = snap.keys.scan(cursor, batch, |k, e| {
            if let Some(&at) = snap.expires.get(&k[..]) {
                out.push(opcode::EXPIRETIME_MS);
                out.extend_from_slice(&at.to_le_bytes());
            }
            out.push(type_of(&e.value));
            write_string(out, k, lzf.as_mut());
            write_body(out, &e.value, lzf.as_mut());
            n += 1;
        });
        self.keys_written += n;
        // Let go of what is written: the live keyspace then writes those nodes in place again
        // instead of copying them, and the old values it replaces are freed now rather than at
        // the end of the save (the bound on a background save's extra memory).
        let snap = &mut self.snapshot.dbs[db];
        self.stage = if next == 0 {
            snap.keys.clear();
            snap.expires.clear();
            self.next_db(db + 1)
        } else {
            snap.keys.release_below(next);
            Stage::Keys {
                db,
                cursor: next,
                started: true,
            }
        };
    }
}
