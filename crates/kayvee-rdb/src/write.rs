//! The incremental RDB writer: header and AUX fields, then per non-empty database SELECTDB,
//! RESIZEDB and its keys (EXPIRETIME_MS before keys with a TTL), then EOF and the CRC-64.
//!
//! Sans-IO: [`RdbWriter::next_chunk`] appends the next piece (about `chunk_len` bytes) to a
//! buffer the caller writes wherever it wants. The writer owns a [`Snapshot`], so it can run
//! on another thread while the engine goes on changing its own (copy-on-write) databases.
//!
//! Write-ahead ([`RdbWriter::write_ahead`], behind the engine's `write_ahead::WriteAhead` hook, for a writer on
//! the engine's own thread): before the engine changes a key the snapshot still holds, the
//! writer serialises the snapshot's part around that key (a trie node of a few dozen keys,
//! `PMap::detach_around`) out of order and drops it, so the write copies nothing. An RDB file
//! need not follow hash order: each such section starts with its own SELECTDB, and the next
//! in-order piece selects its database again.

use crate::encode::{type_of, write_body, write_len, write_string};
use crate::lzf::Lzf;
use crate::{opcode, CRC64, RDB_VERSION};
use alloc::string::String;
use alloc::vec::Vec;
use kayvee_engine::db::Key;
use kayvee_engine::value::Entry;
use kayvee_engine::{Snapshot, ValueRef};
use kayvee_pds::PMap;

/// The function libraries as Redis 7.0 writes them (in RDB files and FUNCTION DUMP): per
/// library the `FUNCTION2` opcode and its code as a string.
pub fn write_functions(out: &mut Vec<u8>, codes: &[Vec<u8>], mut lzf: Option<&mut Lzf>) {
    for code in codes {
        out.push(opcode::FUNCTION2);
        write_string(out, code, lzf.as_deref_mut());
    }
}

/// Keys written between two releases of the written part of the snapshot (a few of its
/// leaves: the memory they hold a little longer is small).
const RELEASE_KEYS: usize = 256;

/// The most keys one write-ahead section takes (a leaf-level node holds a few dozen; a bigger
/// part, near the root of a small or thinned trie, is left to be copied).
const AHEAD_MAX_KEYS: usize = 128;

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
    /// The replication AUX fields (`repl-stream-db`, `repl-id`, `repl-offset`), which let a
    /// restarted primary or replica continue its replicas' or its own stream.
    pub repl: Option<ReplAux>,
}

/// Where the replication stream was when the snapshot was taken (Redis's `rdbSaveInfo`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplAux {
    /// The database the stream had selected.
    pub stream_db: usize,
    /// The replication ID.
    pub replid: String,
    /// The replication offset.
    pub offset: u64,
}

impl ReplAux {
    /// The fields from a loaded file's AUX records, when all three are there and valid.
    pub fn from_aux(aux: &[(Vec<u8>, Vec<u8>)]) -> Option<ReplAux> {
        let get = |name: &[u8]| {
            aux.iter()
                .find(|(k, _)| k == name)
                .and_then(|(_, v)| core::str::from_utf8(v).ok())
        };
        let replid = get(b"repl-id").filter(|id| id.len() == 40)?;
        Some(ReplAux {
            stream_db: get(b"repl-stream-db")?.parse().ok()?,
            replid: String::from(replid),
            offset: get(b"repl-offset")?.parse().ok()?,
        })
    }
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            compress: true,
            checksum: true,
            used_mem: 0,
            chunk_len: 64 * 1024,
            repl: None,
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
    digest: crate::crc64::Digest,
    keys_written: u64,
    /// The CRC-64 of the whole file, trailer included, once complete.
    file_crc: Option<u64>,
    /// Keys written since the written part of the snapshot was last let go of.
    unreleased: usize,
    /// The cursor below which the current database's keys are let go (`release_below`).
    released_below: u64,
    /// The LZF compressor (its table is reused across strings), when compressing.
    lzf: Option<Lzf>,
    /// Write-ahead sections not yet handed out (see the module doc), and the database the
    /// last one selected.
    ahead: Vec<u8>,
    ahead_db: Option<usize>,
    /// Keys written ahead, and their bytes, over the writer's life.
    ahead_keys: u64,
    ahead_bytes: u64,
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
            file_crc: None,
            unreleased: 0,
            released_below: 0,
            lzf: opts.compress.then(Lzf::new),
            ahead: Vec::new(),
            ahead_db: None,
            ahead_keys: 0,
            ahead_bytes: 0,
        }
    }

    /// Keys written ahead of the hash order, and the bytes of those sections (see the module
    /// doc).
    pub fn ahead_written(&self) -> (u64, u64) {
        (self.ahead_keys, self.ahead_bytes)
    }

    /// Before the live database `db` (the snapshot's index) changes `key`: writes the
    /// snapshot's part around `key` that is not written yet into the next piece, and lets go
    /// of it (see the module doc). Nothing when that part is written already or too big.
    pub fn write_ahead(&mut self, db: usize, key: &[u8]) {
        let (current, cursor) = match self.stage {
            Stage::Header => (0, 0),
            Stage::Keys { db, cursor, .. } => (db, cursor),
            Stage::Trailer | Stage::Done => return,
        };
        let Some(snap) = self.snapshot.dbs.get_mut(db).filter(|_| db >= current) else {
            return;
        };
        let Some(part) = snap
            .keys
            .detach_around(snap.keys.hash_of(key), AHEAD_MAX_KEYS)
        else {
            return;
        };
        let out = &mut self.ahead;
        let start = out.len();
        if self.ahead_db != Some(db) {
            out.push(opcode::SELECTDB);
            write_len(out, db as u64);
            self.ahead_db = Some(db);
        }
        // Entries the in-order walk has passed (stored inline on its path) are written already.
        let skip_below = match db == current && cursor > part.lowest_hash() {
            true => cursor,
            false => 0, // the whole part lies at or past the walk's cursor
        };
        let expires = (!snap.expires.is_empty()).then_some(&snap.expires);
        let (keys, lzf) = (&snap.keys, &mut self.lzf);
        let mut n = 0;
        part.for_each(|k, e| {
            if skip_below == 0 || keys.hash_of(k) >= skip_below {
                write_entry(out, k, e, expires, lzf.as_mut());
                n += 1;
            }
        });
        self.keys_written += n;
        self.ahead_keys += n;
        self.ahead_bytes += (out.len() - start) as u64;
    }

    /// Keys serialised so far.
    pub fn keys_written(&self) -> u64 {
        self.keys_written
    }

    /// How far the snapshot is written and let go: every database before `.0`, and the keys
    /// of database `.0` whose hash is below the cursor `.1` (see `PMap::release_below`).
    /// Past the last database once the keys are all written.
    pub fn released(&self) -> (usize, u64) {
        match self.stage {
            Stage::Header => (0, 0),
            Stage::Keys { db, .. } => (db, self.released_below),
            Stage::Trailer | Stage::Done => (self.snapshot.dbs.len(), 0),
        }
    }

    /// The CRC-64 (Redis's) of every byte of the file, its trailer included, once it is
    /// complete: what a copy of the file is checked with, without reading its bytes again.
    pub fn file_crc(&self) -> Option<u64> {
        self.file_crc
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

    /// Appends one piece of the file: the header, one key, or the trailer (a writer paced
    /// key by key). Returns false, appending nothing, once the file is complete.
    pub fn next_step(&mut self, out: &mut Vec<u8>) -> bool {
        if self.stage == Stage::Done {
            return false;
        }
        // A chunk length under 64 bytes makes a key batch of one.
        let chunk_len = core::mem::replace(&mut self.opts.chunk_len, 1);
        self.step(out);
        self.opts.chunk_len = chunk_len;
        true
    }

    /// The whole file in one buffer (tests, DEBUG RELOAD-like uses).
    pub fn write_all(mut self) -> Vec<u8> {
        let mut out = Vec::new();
        while self.next_chunk(&mut out) {}
        out
    }

    /// Appends the write-ahead sections made since the last piece, if any, without walking
    /// further (so they leave memory at once); returns whether it appended anything.
    pub fn take_ahead(&mut self, out: &mut Vec<u8>) -> bool {
        let before = out.len();
        self.hand_out_ahead(out);
        self.digest.update(&out[before..]);
        out.len() > before
    }

    /// Moves the pending write-ahead sections to `out` (after the header only), then selects
    /// the walk's database again.
    fn hand_out_ahead(&mut self, out: &mut Vec<u8>) {
        if self.ahead.is_empty() || self.stage == Stage::Header {
            return;
        }
        out.append(&mut self.ahead);
        self.ahead_db = None;
        if let Stage::Keys {
            db, started: true, ..
        } = self.stage
        {
            out.push(opcode::SELECTDB);
            write_len(out, db as u64);
        }
    }

    /// One stage step; the bytes it appends go into the checksum.
    fn step(&mut self, out: &mut Vec<u8>) {
        let before = out.len();
        self.hand_out_ahead(out);
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
                let mut whole = self.digest.clone();
                let crc = if self.opts.checksum {
                    core::mem::replace(&mut self.digest, CRC64.digest()).finalize()
                } else {
                    0
                };
                out.extend_from_slice(&crc.to_le_bytes());
                whole.update(&crc.to_le_bytes());
                self.file_crc = Some(whole.finalize());
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
        let mut aux: Vec<(&[u8], Vec<u8>)> = alloc::vec![
            (b"redis-ver", b"7.0.15".to_vec()),
            (b"redis-bits", b"64".to_vec()),
            (b"ctime", ctime.into_bytes()),
            (b"used-mem", used.into_bytes()),
        ];
        // Redis 7.0 writes them between `used-mem` and `aof-base`.
        if let Some(r) = &self.opts.repl {
            aux.push((
                b"repl-stream-db",
                alloc::format!("{}", r.stream_db).into_bytes(),
            ));
            aux.push((b"repl-id", r.replid.clone().into_bytes()));
            aux.push((b"repl-offset", alloc::format!("{}", r.offset).into_bytes()));
        }
        aux.push((b"aof-base", b"0".to_vec()));
        for (k, v) in &aux {
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
        // Most datasets have few keys with a TTL, often none: no lookup then.
        let expires = (!snap.expires.is_empty()).then_some(&snap.expires);
        let next = snap.keys.scan(cursor, batch, |k, e| {
            write_entry(out, k, e, expires, lzf.as_mut());
            n += 1;
        });
        self.keys_written += n;
        self.unreleased += n as usize;
        // Let go of what is written: the live keyspace then writes those nodes in place again
        // instead of copying them, and the old values it replaces are freed now rather than at
        // the end of the save (the bound on a background save's extra memory). Every
        // `RELEASE_KEYS` keys: each release reallocates the path's child lists.
        let snap = &mut self.snapshot.dbs[db];
        self.stage = if next == 0 {
            snap.keys.clear();
            snap.expires.clear();
            self.unreleased = 0;
            self.released_below = 0;
            self.next_db(db + 1)
        } else {
            if self.unreleased >= RELEASE_KEYS {
                snap.keys.release_below(next);
                self.unreleased = 0;
                self.released_below = next;
            }
            Stage::Keys {
                db,
                cursor: next,
                started: true,
            }
        };
    }
}

/// One key: its expiry time when it has one, its type, name and value (inlined into the walk
/// and the write-ahead, like the string writes it makes).
#[inline(always)]
fn write_entry(
    out: &mut Vec<u8>,
    k: &Key,
    e: &Entry,
    expires: Option<&PMap<Key, u64>>,
    lzf: Option<&mut Lzf>,
) {
    if let Some(&at) = expires.and_then(|x| x.get(&k[..])) {
        out.push(opcode::EXPIRETIME_MS);
        out.extend_from_slice(&at.to_le_bytes());
    }
    let mut lzf = lzf;
    // Most keys hold a string: one reservation for the entry, no second look at its type.
    if let ValueRef::Str(v) = e.value() {
        out.reserve(k.len() + v.len() + 3);
        out.push(crate::types::STRING);
        write_string(out, k, lzf.as_deref_mut());
        write_string(out, v, lzf);
        return;
    }
    out.push(type_of(e.value()));
    write_string(out, k, lzf.as_deref_mut());
    write_body(out, e.value(), lzf);
}
