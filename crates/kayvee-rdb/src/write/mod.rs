//! The incremental RDB writer: header and AUX fields, then per non-empty database SELECTDB,
//! RESIZEDB and its keys (EXPIRETIME_MS before keys with a TTL), then EOF and the CRC-64.
//!
//! Sans-IO: [`RdbWriter::next_chunk`] appends the next piece (about `chunk_len` bytes) to a
//! buffer the caller writes wherever it wants. The writer owns a [`Snapshot`], so it can run
//! on another thread while the engine goes on changing its own (copy-on-write) databases.
//!
//! A writer on the engine's own thread can walk the live databases instead
//! ([`RdbWriter::live`], [`RdbWriter::next_chunk_of`]), between commands, with an undo log
//! behind the engine's `save_hook::SaveHook` hook ([`RdbWriter::before_write`],
//! [`RdbWriter::before_replace`]): before a key ahead of the walk changes, its value as it
//! was at the start is kept, and the walk writes that instead (or, for a key deleted since,
//! where the walk passes its hash). Writes then copy no trie node, whatever the save's pace.

use crate::encode::{type_of, write_body, write_len, write_string};
use crate::lzf::Lzf;
use crate::{opcode, CRC64, RDB_VERSION};
use alloc::string::String;
use alloc::vec::Vec;
use kayvee_engine::db::DbSnapshot;
use kayvee_engine::db::Key;
use kayvee_engine::save_hook::DbView;
use kayvee_engine::value::Entry;
use kayvee_engine::{Db, Snapshot, ValueRef};
use kayvee_pds::PMap;

mod live;

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
    /// The undo log of a writer of the live databases (see the module doc); its snapshot
    /// then holds only the databases replaced whole since the start.
    live: Option<live::Live>,
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
            live: None,
        }
    }

    /// A writer of the live databases from now (see the module doc): `snapshot` gives the
    /// time, the function libraries and the number of databases; its databases are dropped
    /// here, before any write, so the live ones stay unshared. Pieces come from
    /// [`RdbWriter::next_chunk_of`]; the engine's hook must call
    /// [`RdbWriter::before_write`] and [`RdbWriter::before_replace`] from now on.
    pub fn live(mut snapshot: Snapshot, opts: WriteOptions) -> Self {
        let n = snapshot.dbs.len();
        for d in snapshot.dbs.iter_mut() {
            d.keys.clear();
            d.expires.clear();
        }
        let mut w = RdbWriter::new(snapshot, opts);
        w.live = Some(live::Live::new(n));
        w
    }

    /// Keys whose old value a live writer kept over its life, and keeps now.
    pub fn kept(&self) -> (u64, usize) {
        self.live
            .as_ref()
            .map_or((0, 0), |l| (l.kept_keys, l.kept_now))
    }

    /// The most bytes a live writer's undo log held at once (its table and array, not the
    /// old values' own heap parts).
    pub fn kept_peak_bytes(&self) -> usize {
        self.live.as_ref().map_or(0, |l| l.peak_bytes)
    }

    /// The bytes a live writer's undo log holds now (its table and array, not the old values
    /// themselves: most share what the keyspace held).
    pub fn kept_bytes(&self) -> usize {
        self.live.as_ref().map_or(0, live::Live::bytes)
    }

    /// The first database and hash the walk has not written yet (`None`: it is past the
    /// keys).
    fn position(&self) -> Option<(usize, u64)> {
        match self.stage {
            Stage::Header => Some((0, 0)),
            Stage::Keys { db, cursor, .. } => Some((db, cursor)),
            Stage::Trailer | Stage::Done => None,
        }
    }

    /// Before the live database `index` (now `db`) changes `key`: keeps its value as it was
    /// at the start when the walk has not passed it (a live writer's hook).
    pub fn before_write(&mut self, index: usize, key: &[u8], db: DbView<'_>) {
        self.keep_if_ahead(index, key, db, || {
            db.keys.get(key).map(|e| {
                let ttl = match db.expires.is_empty() {
                    true => None,
                    false => db.expires.get(key).copied(),
                };
                (e.clone(), ttl)
            })
        });
    }

    /// After the live database `index` (now `db`) stored a new value for `key` in place of
    /// `old` (with TTL `ttl`): [`RdbWriter::before_write`] with the old value at hand, which
    /// spares a lookup on SET's path (a live writer's hook).
    pub fn replaced(
        &mut self,
        index: usize,
        key: &[u8],
        old: Option<&Entry>,
        ttl: Option<u64>,
        db: DbView<'_>,
    ) {
        self.keep_if_ahead(index, key, db, || old.map(|e| (e.clone(), ttl)));
    }

    /// Keeps `old()` for `key` of database `index` when the walk has not passed the key and
    /// nothing is kept for it yet (`old` runs only then).
    fn keep_if_ahead(
        &mut self,
        index: usize,
        key: &[u8],
        db: DbView<'_>,
        old: impl FnOnce() -> live::Old,
    ) {
        let Some((live, from_hash)) = self.live_at(index) else {
            return;
        };
        if let Some(slot) = live.wants(index, key, db, from_hash) {
            live.keep(index, key, slot, old());
        }
    }

    /// A live writer's undo log, and the first hash of database `index` its walk has not
    /// written (`None` when it has written the whole database).
    fn live_at(&mut self, index: usize) -> Option<(&mut live::Live, u64)> {
        let (at_db, at_hash) = self.position()?;
        let live = self.live.as_mut().filter(|_| index >= at_db)?;
        Some((live, if index == at_db { at_hash } else { 0 }))
    }

    /// Before the live database `index` (now `db`) is emptied or replaced whole: the walk
    /// goes on in this version of it (a live writer's hook).
    pub fn before_replace(&mut self, index: usize, db: DbView<'_>) {
        if self
            .live_at(index)
            .is_some_and(|(live, _)| live.freeze(index))
        {
            self.snapshot.dbs[index] = DbSnapshot {
                keys: db.keys.clone(),
                expires: db.expires.clone(),
            };
        }
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
    /// comes first). Returns false, appending nothing, once the file is complete. For a
    /// writer of a snapshot; a live writer takes [`RdbWriter::next_chunk_of`].
    pub fn next_chunk(&mut self, out: &mut Vec<u8>) -> bool {
        self.next_chunk_of(&[], out)
    }

    /// [`RdbWriter::next_chunk`] of a live writer: `dbs` are the engine's databases now.
    pub fn next_chunk_of(&mut self, dbs: &[Db], out: &mut Vec<u8>) -> bool {
        if self.stage == Stage::Done {
            return false;
        }
        let start = out.len();
        while self.stage != Stage::Done && out.len() - start < self.opts.chunk_len.max(1) {
            self.step(dbs, out);
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
        self.step(&[], out);
        self.opts.chunk_len = chunk_len;
        true
    }

    /// The whole file in one buffer (tests, DEBUG RELOAD-like uses).
    pub fn write_all(mut self) -> Vec<u8> {
        let mut out = Vec::new();
        while self.next_chunk(&mut out) {}
        out
    }

    /// One stage step; the bytes it appends go into the checksum.
    fn step(&mut self, dbs: &[Db], out: &mut Vec<u8>) {
        let before = out.len();
        match self.stage {
            Stage::Header => {
                self.header(out);
                self.stage = self.next_db(dbs, 0);
            }
            Stage::Keys {
                db,
                cursor,
                started,
            } => self.keys(dbs, out, db, cursor, started),
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

    /// The stage for the first non-empty database at or after `db` (for a live writer, one
    /// with keys now or old values kept).
    fn next_db(&self, dbs: &[Db], db: usize) -> Stage {
        let has_keys = |i: usize| {
            let (keys, _) = source(&self.snapshot, self.live.as_ref(), dbs, i);
            !keys.is_empty() || self.live.as_ref().is_some_and(|l| l.has_kept(i))
        };
        match (db..self.snapshot.dbs.len()).find(|&i| has_keys(i)) {
            Some(db) => Stage::Keys {
                db,
                cursor: 0,
                started: false,
            },
            None => Stage::Trailer,
        }
    }

    /// SELECTDB and RESIZEDB when starting a database, then a batch of its keys.
    fn keys(&mut self, dbs: &[Db], out: &mut Vec<u8>, db: usize, cursor: u64, started: bool) {
        let (keys, expires) = source(&self.snapshot, self.live.as_ref(), dbs, db);
        if !started {
            out.push(opcode::SELECTDB);
            write_len(out, db as u64);
            out.push(opcode::RESIZEDB);
            write_len(out, keys.len() as u64);
            write_len(out, expires.len() as u64);
        }
        let (lzf, live) = (&mut self.lzf, &mut self.live);
        let mut n = 0;
        let batch = (self.opts.chunk_len / 64).clamp(1, 1024);
        // Most datasets have few keys with a TTL, often none: no lookup then.
        let expires = (!expires.is_empty()).then_some(expires);
        let ttl = |k: &Key| expires.and_then(|x| x.get(&k[..]).copied());
        let next = match live.as_mut() {
            None => keys.scan(cursor, batch, |k, e| {
                write_entry(out, k, e, ttl(k), lzf.as_mut());
                n += 1;
            }),
            Some(live) => {
                // The keys (the live ones, or the version handed over when the database was
                // replaced), each replaced by its old value where one is kept; then the keys
                // deleted since, at the database's end.
                let next = keys.scan(cursor, batch, |k, e| {
                    let taken = match live.has_kept(db) {
                        true => live.take(db, keys.hash_of(k), k),
                        false => None,
                    };
                    match taken {
                        None => write_entry(out, k, e, ttl(k), lzf.as_mut()),
                        Some(Some((e, ttl))) => write_entry(out, k, &e, ttl, lzf.as_mut()),
                        Some(None) => return, // new since the start
                    }
                    n += 1;
                });
                if next == 0 {
                    live.take_rest(db, |k, e, ttl| {
                        write_entry(out, k, e, ttl, lzf.as_mut());
                        n += 1;
                    });
                }
                next
            }
        };
        self.keys_written += n;
        self.unreleased += n as usize;
        let snap = &mut self.snapshot.dbs[db];
        self.stage = if next == 0 {
            snap.keys.clear();
            snap.expires.clear();
            self.unreleased = 0;
            self.released_below = 0;
            self.next_db(dbs, db + 1)
        } else {
            // Let go of what is written: the live keyspace then writes those nodes in place
            // again instead of copying them, and the old values it replaces are freed now
            // rather than at the end of the save (the bound on a background save's extra
            // memory). Every `RELEASE_KEYS` keys: each release reallocates the path's child
            // lists.
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

/// The keys and TTLs the walk reads for database `db`: the snapshot's, or a live writer's
/// live database (`dbs`) unless it was replaced whole.
fn source<'a>(
    snapshot: &'a Snapshot,
    live: Option<&live::Live>,
    dbs: &'a [Db],
    db: usize,
) -> (&'a PMap<Key, Entry>, &'a PMap<Key, u64>) {
    match live.filter(|l| !l.frozen(db)) {
        Some(_) => {
            let view = dbs[db].view();
            (view.keys, view.expires)
        }
        None => (&snapshot.dbs[db].keys, &snapshot.dbs[db].expires),
    }
}

/// One key: its expiry time when it has one, its type, name and value (inlined into the walk
/// and its undo log, like the string writes it makes).
#[inline(always)]
fn write_entry(out: &mut Vec<u8>, k: &Key, e: &Entry, ttl: Option<u64>, lzf: Option<&mut Lzf>) {
    if let Some(at) = ttl {
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
