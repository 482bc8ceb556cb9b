//! The RDB loader: reads a whole file (Redis 7.0's dumps, Kayvee's own, versions 1 to 10)
//! into engine databases. Keys already expired are dropped (as a Redis master does), empty
//! collections skipped; the CRC-64 is checked unless it is zero (`rdbchecksum no`).

use crate::read::Reader;
use crate::{opcode, Error, Result, CRC64, RDB_VERSION};
use alloc::vec::Vec;
use kayvee_engine::value::{Entry, Meta};
use kayvee_engine::{Config, Db, Value};

/// Module serialisation opcodes (what a module aux record holds), to skip them.
const MODULE_OPCODE_EOF: u64 = 0;
const MODULE_OPCODE_SINT: u64 = 1;
const MODULE_OPCODE_UINT: u64 = 2;
const MODULE_OPCODE_FLOAT: u64 = 3;
const MODULE_OPCODE_DOUBLE: u64 = 4;
const MODULE_OPCODE_STRING: u64 = 5;

/// What loading needs from the server.
pub struct LoadOptions<'a> {
    /// `databases` and the encoding thresholds (for `OBJECT ENCODING` after the load).
    pub config: &'a Config,
    /// Hash seed of the databases.
    pub seed: u64,
    /// The current time (keys expired by then are dropped).
    pub now_ms: u64,
}

/// A loaded file.
#[derive(Default)]
pub struct Loaded {
    /// One database per configured database.
    pub dbs: Vec<Db>,
    /// Keys loaded.
    pub keys_loaded: u64,
    /// Keys dropped because they had expired.
    pub keys_expired: u64,
    /// Those keys' databases and names (a primary restoring its replication history
    /// propagates their deletion, see `Engine::restore_replication`).
    pub expired: Vec<(usize, Vec<u8>)>,
    /// Names of the keys skipped because their collection is empty (Redis logs each).
    pub empty_skipped: Vec<Vec<u8>>,
    /// The AUX fields (`redis-ver`, `ctime`...).
    pub aux: Vec<(Vec<u8>, Vec<u8>)>,
    /// The function libraries' code (for [`kayvee_engine::Engine::load_functions`]).
    pub functions: Vec<Vec<u8>>,
    /// Bytes of the buffer the RDB took, through its checksum: an AOF with an RDB preamble
    /// goes on with commands from here.
    pub consumed: usize,
}

/// Per-key modifiers that precede a key.
#[derive(Default)]
struct Pending {
    expire_ms: Option<u64>,
    freq: Option<u8>,
    idle_s: Option<u64>,
}

/// Keys between two progress reports of [`load_with_progress`].
const PROGRESS_EVERY_KEYS: u64 = 1024;

/// Loads a whole RDB file.
pub fn load(buf: &[u8], opts: &LoadOptions<'_>) -> Result<Loaded> {
    load_with_progress(buf, opts, &mut |_| {})
}

/// How far a load got (for INFO's `loading_*` fields while a server loads).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Bytes of the file parsed.
    pub bytes: u64,
    /// Keys loaded.
    pub keys: u64,
    /// The `used-mem` AUX field of the file (0 until seen).
    pub rdb_used_mem: u64,
}

/// [`load`], calling `progress` every [`PROGRESS_EVERY_KEYS`] keys and at the end.
pub fn load_with_progress(
    buf: &[u8],
    opts: &LoadOptions<'_>,
    progress: &mut dyn FnMut(Progress),
) -> Result<Loaded> {
    let mut load = StepLoad::new(buf, opts, false)?;
    loop {
        if let Some(loaded) = load.step(opts, PROGRESS_EVERY_KEYS)? {
            progress(Progress {
                bytes: buf.len() as u64,
                ..load.progress()
            });
            return Ok(loaded);
        }
        progress(load.progress());
    }
}

/// A load that runs a few keys at a time, for a server that serves its clients between the
/// steps: a replica loading its primary's payload in its loop (Redis serves events every 2 MB
/// of a load, `loading-process-events-interval-bytes`). The checksum is summed as the steps
/// go, so no step costs more than its keys.
pub struct StepLoad<B> {
    buf: B,
    version: u16,
    keep_expired: bool,
    /// Bytes of `buf` parsed (the header's 9 included).
    pos: usize,
    /// The CRC-64 of `buf[..pos]` (RDB 5 and later).
    digest: Option<crate::crc64::Digest>,
    out: Loaded,
    db: usize,
    pending: Pending,
    rdb_used_mem: u64,
}

impl<B: AsRef<[u8]>> StepLoad<B> {
    /// Checks the header of `buf`; nothing is loaded yet. With `keep_expired` (a replica
    /// loading its primary's payload) keys already expired are kept, since a replica deletes
    /// a key only when its primary's `DEL` comes (Redis's `rdbLoad` on a replica).
    pub fn new(buf: B, opts: &LoadOptions<'_>, keep_expired: bool) -> Result<Self> {
        let version = check_header(buf.as_ref())?;
        let digest = (version >= 5).then(|| {
            let mut d = CRC64.digest();
            d.update(&buf.as_ref()[..9]);
            d
        });
        Ok(StepLoad {
            buf,
            version,
            keep_expired,
            pos: 9,
            digest,
            out: Loaded {
                dbs: (0..opts.config.databases)
                    .map(|_| Db::new(opts.seed))
                    .collect(),
                ..Loaded::default()
            },
            db: 0,
            pending: Pending::default(),
            rdb_used_mem: 0,
        })
    }

    /// How far the load got.
    pub fn progress(&self) -> Progress {
        Progress {
            bytes: self.pos as u64,
            keys: self.out.keys_loaded,
            rdb_used_mem: self.rdb_used_mem,
        }
    }

    /// The buffer's length.
    pub fn total_bytes(&self) -> u64 {
        self.buf.as_ref().len() as u64
    }

    /// Loads up to `keys` more keys (and the records between them): the whole load once the
    /// EOF and the checksum are read, None while there is more. A file that does not parse
    /// and whose trailing checksum fails too is reported by its checksum: the likelier cause
    /// (a damaged file), and what an operator can check with redis-check-rdb.
    pub fn step(&mut self, opts: &LoadOptions<'_>, keys: u64) -> Result<Option<Loaded>> {
        match self.parse(opts, keys) {
            Err(e) if !matches!(e, Error::BadChecksum { .. }) && self.version >= 5 => {
                let buf = self.buf.as_ref();
                match buf.len().checked_sub(9 + 8) {
                    Some(_) => match verify_checksum(buf, buf.len() - 8) {
                        Err(bad @ Error::BadChecksum { .. }) => Err(bad),
                        _ => Err(e),
                    },
                    None => Err(e),
                }
            }
            result => result,
        }
    }

    /// Opcodes from `pos` until `keys` keys more are loaded or the EOF; then the checksum
    /// after it.
    fn parse(&mut self, opts: &LoadOptions<'_>, keys: u64) -> Result<Option<Loaded>> {
        let buf = self.buf.as_ref();
        let mut r = Reader::new(&buf[self.pos..]);
        let until = self.out.keys_loaded.saturating_add(keys);
        let parsed = loop {
            if self.out.keys_loaded >= until {
                break None;
            }
            let op = r.u8()?;
            match op {
                opcode::EOF => break Some(self.pos + r.pos()),
                opcode::AUX => {
                    let k = r.string()?.into_owned();
                    let v = r.string()?.into_owned();
                    if k == b"used-mem" {
                        self.rdb_used_mem = core::str::from_utf8(&v)
                            .ok()
                            .and_then(|v| v.parse().ok())
                            .unwrap_or(0);
                    }
                    self.out.aux.push((k, v));
                }
                opcode::SELECTDB => {
                    let n = r.len()?;
                    if n >= self.out.dbs.len() as u64 {
                        return Err(Error::DbOutOfRange(self.out.dbs.len() as u64));
                    }
                    self.db = n as usize;
                }
                opcode::RESIZEDB => {
                    r.len()?;
                    r.len()?;
                }
                opcode::EXPIRETIME_MS => self.pending.expire_ms = Some(r.u64_le()?),
                opcode::EXPIRETIME => self.pending.expire_ms = Some(u64::from(r.u32_le()?) * 1000),
                opcode::FREQ => self.pending.freq = Some(r.u8()?),
                opcode::IDLE => self.pending.idle_s = Some(r.len()?),
                opcode::MODULE_AUX => skip_module_aux(&mut r)?,
                opcode::FUNCTION2 => self.out.functions.push(r.string()?.into_owned()),
                opcode::FUNCTION_PRE_GA => return Err(Error::UnsupportedType(op)),
                ty => {
                    let p = core::mem::take(&mut self.pending);
                    let (db, keep) = (self.db, self.keep_expired);
                    load_key(&mut r, ty, p, &mut self.out, db, opts, keep)?;
                }
            }
        };
        let at = self.pos + r.pos();
        if let Some(d) = self.digest.as_mut() {
            d.update(&buf[self.pos..at]);
        }
        self.pos = at;
        let Some(end) = parsed else {
            return Ok(None);
        };
        self.out.consumed = match self.digest.take() {
            Some(d) => check_sum(buf, end, d.finalize())?,
            None => end,
        };
        // What stays behind keeps the counts [`StepLoad::progress`] reads.
        let left = Loaded {
            keys_loaded: self.out.keys_loaded,
            consumed: self.out.consumed,
            ..Loaded::default()
        };
        Ok(Some(core::mem::replace(&mut self.out, left)))
    }
}

/// `REDIS` and four digits; returns the version (1..=10).
fn check_header(buf: &[u8]) -> Result<u16> {
    let head = buf.get(..9).ok_or(Error::Truncated)?;
    if &head[..5] != b"REDIS" || !head[5..].iter().all(u8::is_ascii_digit) {
        return Err(Error::BadMagic);
    }
    let v = head[5..]
        .iter()
        .fold(0u16, |a, &d| a * 10 + u16::from(d - b'0'));
    if v == 0 || v > RDB_VERSION {
        return Err(Error::UnsupportedVersion(v));
    }
    Ok(v)
}

/// Checks the CRC-64 (zero = not computed) that follows the EOF byte ending at `end`: it
/// covers everything up to and including that byte. Checked once the file is parsed, as Redis
/// does (bytes after it, an AOF's commands, are not the RDB's). Returns the end of the
/// checksum.
fn verify_checksum(buf: &[u8], end: usize) -> Result<usize> {
    check_sum(buf, end, CRC64.checksum(&buf[..end]))
}

/// [`verify_checksum`] with the sum of `buf[..end]` already taken (`got`).
fn check_sum(buf: &[u8], end: usize, got: u64) -> Result<usize> {
    let tail = buf.get(end..end + 8).ok_or(Error::Truncated)?;
    let stored = u64::from_le_bytes(tail.try_into().map_err(|_| Error::Truncated)?);
    if stored != 0 && stored != got {
        return Err(Error::BadChecksum {
            expected: stored,
            got,
        });
    }
    Ok(end + 8)
}

/// Reads one key and its value and stores it unless expired or empty.
fn load_key(
    r: &mut Reader<'_>,
    ty: u8,
    p: Pending,
    out: &mut Loaded,
    db: usize,
    opts: &LoadOptions<'_>,
    keep_expired: bool,
) -> Result<()> {
    let key = r.string()?;
    // A file is checked deeply with `sanitize-dump-payload yes` only, as Redis checks it.
    let deep = kayvee_engine::config::extra::sanitize_dump_payload(opts.config)
        == kayvee_engine::config::extra::SanitizePayload::Yes;
    let value = crate::object::read_value(r, ty, opts.seed, deep)?;
    if !keep_expired && p.expire_ms.is_some_and(|at| at <= opts.now_ms) {
        out.keys_expired += 1;
        out.expired.push((db, key.to_vec()));
        return Ok(());
    }
    if is_empty(&value) {
        out.empty_skipped.push(key.to_vec());
        return Ok(());
    }
    let big = kayvee_engine::persist::loads_big(&value, opts.config);
    let mut value = value;
    value.normalize(big, opts.seed);
    let lfu = opts.config.maxmemory_policy.contains("lfu");
    let mut meta = Meta::fresh(lfu, opts.now_ms);
    meta.set_saved_clock(lfu, p.idle_s, p.freq, opts.now_ms);
    meta.set_flag(Meta::BIG, big);
    let entry = Entry::with_meta(value, meta);
    out.dbs[db].insert_entry(&key, entry, p.expire_ms);
    out.keys_loaded += 1;
    Ok(())
}

/// Whether a collection has no element (Redis skips such keys when loading).
pub(crate) fn is_empty(v: &Value) -> bool {
    match v {
        Value::Str(_) => false,
        Value::List(l) => l.is_empty(),
        Value::Set(s) => s.is_empty(),
        Value::Hash(h) => h.is_empty(),
        Value::ZSet(z) => z.is_empty(),
        Value::Stream(_) => false,
    }
}

/// Skips a module aux record: module id, `when` opcode and value, then the module's values
/// up to its EOF opcode.
fn skip_module_aux(r: &mut Reader<'_>) -> Result<()> {
    r.len()?;
    if r.len()? != MODULE_OPCODE_UINT {
        return Err(Error::Corrupt("module aux when-opcode"));
    }
    r.len()?;
    loop {
        match r.len()? {
            MODULE_OPCODE_EOF => return Ok(()),
            MODULE_OPCODE_SINT | MODULE_OPCODE_UINT => {
                r.len()?;
            }
            MODULE_OPCODE_FLOAT => {
                r.take(4)?;
            }
            MODULE_OPCODE_DOUBLE => {
                r.take(8)?;
            }
            MODULE_OPCODE_STRING => {
                r.string()?;
            }
            _ => return Err(Error::Corrupt("module opcode")),
        }
    }
}
