//! The append-only file in Redis 7's multi-part layout: `<dir>/<appenddirname>/` holds a base
//! (`<appendfilename>.<n>.base.rdb` or `.aof`), incremental files (`<appendfilename>.<n>.incr.aof`)
//! and the manifest `<appendfilename>.manifest` (lines `file <name> seq <n> type b|i`).
//!
//! Writing: the engine propagates each write as RESP commands ([`kayvee_engine::aof`]); the
//! loop drains them once per pass and [`Aof::write`]s them before any reply of that pass is
//! sent. `appendfsync always` fsyncs there too (group commit: one fsync per loop pass);
//! `everysec` hands the fsync to a thread at most once a second; `no` only writes.
//!
//! Rewriting (BGREWRITEAOF, auto-rewrite, turning the AOF on) needs no fork: a new increment
//! file is opened and recorded in the manifest, the engine's O(1) snapshot is written as the new
//! base on a thread, then the manifest switches to the new base and increment atomically (temp
//! file, fsync, rename, directory fsync) and the old files are deleted.
//!
//! Loading: the base (RDB or commands), then each increment, through a client that runs the
//! commands without replies. A truncated last command is dropped with `aof-load-truncated yes`
//! (and the file cut back), refused with `no`; a malformed file refuses to start.

use crate::savechild::{self, ChildRef, Kind, Sink, Spool};
use kayvee_engine::client::{ConnInfo, Transport};
use kayvee_engine::config::syntax::{repr, split_args};
use kayvee_engine::save_progress::{Writer, WriterProgress};
use kayvee_engine::{Discard, Engine, Now, Snapshot, ValueRef};
use kayvee_rdb::{LoadOptions, RdbWriter, WriteOptions};
use kayvee_resp::{Decoder, Limits};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;
use tracing::{info, warn};

/// When the AOF is fsynced (`appendfsync`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fsync {
    /// Before any reply of the writes is sent.
    Always,
    /// Once a second, on a thread.
    EverySec,
    /// Left to the kernel.
    No,
}

impl Fsync {
    /// From the configuration word.
    pub fn parse(word: &str) -> Self {
        match word {
            "always" => Fsync::Always,
            "no" => Fsync::No,
            _ => Fsync::EverySec,
        }
    }
}

/// One file of the manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    /// File name inside the AOF directory.
    pub name: String,
    /// Sequence number.
    pub seq: u64,
}

/// The manifest: one base (maybe none), the history and the increments in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Manifest {
    /// The base file.
    pub base: Option<Part>,
    /// Increment files, oldest first.
    pub incrs: Vec<Part>,
    /// Files a rewrite replaced, kept with `aof-disable-auto-gc yes` (type `h`), newest first.
    pub history: Vec<Part>,
}

impl Manifest {
    /// Parses a manifest with Redis 7.0's rules: `#` lines are skipped; every other line is
    /// `file <name> seq <n> type <b|h|i>` (more key/value pairs are ignored), its words split
    /// as Redis's `sdssplitargs` (quotes and escapes, so a name may hold spaces); a blank line,
    /// a short or odd line, a missing key, a line of 1,024 bytes or more, two bases, increments
    /// whose sequence does not grow, an unknown type and a manifest naming no file are errors,
    /// with Redis's messages.
    pub fn parse(text: &str) -> Result<Self, String> {
        const LINE_MAX: usize = 1024;
        let mut m = Manifest::default();
        let invalid = || "Invalid AOF manifest file format".to_string();
        // Read as Redis's `fgets` of LINE_MAX bytes: a chunk ends at a newline or LINE_MAX.
        let bytes = text.as_bytes();
        let mut pos = 0;
        while pos < bytes.len() {
            let window = &bytes[pos..(pos + LINE_MAX).min(bytes.len())];
            let (chunk, whole) = match window.iter().position(|&c| c == b'\n') {
                Some(i) => (&window[..=i], true),
                None => (window, false),
            };
            pos += chunk.len();
            if chunk[0] == b'#' {
                continue;
            }
            if !whole {
                return Err("The AOF manifest file contains too long line".into());
            }
            let line = chunk.trim_ascii();
            if line.is_empty() {
                return Err(invalid());
            }
            let words = split_args(line).map_err(|_| invalid())?;
            if words.len() < 6 || words.len() % 2 != 0 {
                return Err(invalid());
            }
            let (mut name, mut seq, mut kind) = (None, None, None);
            for pair in words.chunks(2) {
                let value = String::from_utf8_lossy(&pair[1]).into_owned();
                match pair[0].as_slice() {
                    b"file" => name = Some(value),
                    b"seq" => seq = value.parse::<u64>().ok(),
                    b"type" => kind = Some(value),
                    _ => {}
                }
            }
            let (Some(name), Some(seq), Some(kind)) = (name, seq, kind) else {
                return Err(invalid());
            };
            let part = Part { name, seq };
            match kind.as_str() {
                "b" if m.base.is_some() => {
                    return Err("Found duplicate base file information".into())
                }
                "b" => m.base = Some(part),
                "i" if m.incrs.last().is_some_and(|last| last.seq >= part.seq) => {
                    return Err("Found a non-monotonic sequence number".into())
                }
                "i" => m.incrs.push(part),
                "h" => m.history.push(part),
                _ => return Err("Unknown AOF file type".into()),
            }
        }
        if m.base.is_none() && m.incrs.is_empty() {
            return Err("Found an empty AOF manifest".into());
        }
        Ok(m)
    }

    /// The manifest text as Redis writes it (a name with spaces or unprintable bytes quoted).
    pub fn render(&self) -> String {
        let mut s = String::new();
        let name = |n: &str| match n
            .bytes()
            .any(|c| !(0x21..=0x7e).contains(&c) || c == b'"' || c == b'\\' || c == b'\'')
        {
            true => repr(n.as_bytes()),
            false => n.to_string(),
        };
        if let Some(b) = &self.base {
            s.push_str(&format!("file {} seq {} type b\n", name(&b.name), b.seq));
        }
        for h in &self.history {
            s.push_str(&format!("file {} seq {} type h\n", name(&h.name), h.seq));
        }
        for i in &self.incrs {
            s.push_str(&format!("file {} seq {} type i\n", name(&i.name), i.seq));
        }
        s
    }
}

/// Where the AOF lives and how it is named.
#[derive(Clone, Debug)]
pub struct Layout {
    /// `<dir>/<appenddirname>`.
    pub dir: PathBuf,
    /// `appendfilename`.
    pub name: String,
    /// `<dir>/<appendfilename>`: where Redis before 7.0 kept its single AOF file.
    pub old_style: PathBuf,
}

impl Layout {
    /// From the engine's configuration.
    pub fn of(engine: &Engine) -> Self {
        let c = &engine.core.config;
        Layout {
            dir: Path::new(&c.dir).join(&c.appenddirname),
            name: c.appendfilename.clone(),
            old_style: Path::new(&c.dir).join(&c.appendfilename),
        }
    }

    fn manifest_path(&self) -> PathBuf {
        self.dir.join(format!("{}.manifest", self.name))
    }

    fn incr_name(&self, seq: u64) -> String {
        format!("{}.{seq}.incr.aof", self.name)
    }

    /// `temp-<appendfilename>.incr`: where the writes go while the AOF turned on at runtime
    /// waits for its first rewrite (not in any manifest until that rewrite renames it in).
    fn temp_incr_name(&self) -> String {
        format!("temp-{}.incr", self.name)
    }

    fn base_name(&self, seq: u64, rdb: bool) -> String {
        let ext = if rdb { "rdb" } else { "aof" };
        format!("{}.{seq}.base.{ext}", self.name)
    }

    /// Reads the manifest; `None` when there is none.
    pub fn read_manifest(&self) -> anyhow::Result<Option<Manifest>> {
        match std::fs::read_to_string(self.manifest_path()) {
            Ok(t) => Ok(Some(Manifest::parse(&t).map_err(anyhow::Error::msg)?)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Replaces the manifest atomically: temp file, fsync, rename, directory fsync.
    fn write_manifest(&self, m: &Manifest) -> io::Result<()> {
        let tmp = self.dir.join(format!("temp-{}.manifest", self.name));
        let mut f = File::create(&tmp)?;
        f.write_all(m.render().as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, self.manifest_path())?;
        File::open(&self.dir)?.sync_all()
    }
}

/// The open AOF: the increment file being appended to and the fsync machinery.
pub struct Aof {
    layout: Layout,
    manifest: Manifest,
    file: File,
    policy: Fsync,
    /// Bytes drained from the engine, not yet written.
    buf: Vec<u8>,
    /// Bytes written since the last fsync started.
    unsynced: bool,
    last_fsync: Instant,
    /// The everysec fsync thread is busy.
    fsync_busy: Arc<AtomicBool>,
    incr_size: u64,
    base_size: u64,
    rewrite: Option<Rewrite>,
    /// The unix second of the last `#TS:` annotation written (aof-timestamp-enabled).
    annotated_s: u64,
    /// The automatic rewrite's back-off after repeated failures.
    limit: RewriteLimit,
    /// Turned on at runtime, waiting for its first rewrite ([`Aof::enable`]): `file` is the
    /// temporary increment, the manifest the one found on disk (only its sequence numbers
    /// count), and propagation is on only while a rewrite runs.
    pending: bool,
}

/// After [`RewriteLimit::FAILURES`] failed rewrites in a row the automatic rewrite waits, one
/// minute the first time, then twice as long each time up to an hour, as Redis 7.0 limits it
/// (BGREWRITEAOF is not held back).
#[derive(Default)]
struct RewriteLimit {
    /// Minutes of the last wait (0: not limited).
    delay_min: u64,
    /// Unix ms before which no automatic rewrite starts.
    until_ms: Option<u64>,
}

impl RewriteLimit {
    const FAILURES: u64 = 3;
    const MAX_MIN: u64 = 60;

    /// Whether an automatic rewrite due now must wait, with `failures` in a row so far.
    fn holds(&mut self, failures: u64, now: Now) -> bool {
        if failures < Self::FAILURES {
            *self = RewriteLimit::default();
            return false;
        }
        if let Some(until) = self.until_ms {
            if now.ms() < until {
                return true;
            }
            self.until_ms = None;
            return false;
        }
        self.delay_min = (self.delay_min * 2).clamp(1, Self::MAX_MIN);
        self.until_ms = Some(now.ms() + self.delay_min * 60_000);
        warn!(
            "Background AOF rewrite has repeatedly failed and triggered the limit, will retry in \
             {} minutes",
            self.delay_min
        );
        true
    }
}

/// A base being written on a thread, into a save-writer child.
struct Rewrite {
    thread: JoinHandle<io::Result<u64>>,
    /// Set to stop the thread (the AOF is turned off meanwhile).
    stop: Arc<AtomicBool>,
    /// The save-writer child (None when none could be started: the thread writes the file).
    child: Option<ChildRef>,
    base: Part,
    started: Instant,
}

impl Aof {
    /// Opens the AOF. With `load` (startup) an existing AOF is loaded (returns whether one
    /// was); otherwise, or when there is none, a new base of the current data is written now
    /// with a fresh increment, and the files of an older AOF are replaced. (Turning the AOF
    /// on at runtime goes through a background rewrite instead: [`Aof::enable`].)
    pub fn open(
        engine: &mut Engine,
        now: Now,
        load_existing: bool,
    ) -> anyhow::Result<(Self, bool)> {
        let layout = Layout::of(engine);
        std::fs::create_dir_all(&layout.dir)?;
        let mut on_disk = layout.read_manifest()?;
        if load_existing {
            on_disk = upgrade_old_style(&layout, on_disk)?;
        }
        let (mut manifest, loaded) = match on_disk {
            Some(m) if load_existing => {
                load(engine, &layout, &m, now, None)?;
                (m, true)
            }
            old => (fresh(engine, &layout, old.as_ref(), now)?, false),
        };
        if manifest.incrs.is_empty() {
            // A base alone (what BGREWRITEAOF leaves with the AOF off): add an increment.
            let seq = 1;
            manifest.incrs.push(Part {
                name: layout.incr_name(seq),
                seq,
            });
            open_append(&layout.dir.join(layout.incr_name(seq)))?.sync_all()?;
            layout.write_manifest(&manifest)?;
        }
        let incr = manifest
            .incrs
            .last()
            .cloned()
            .expect("a manifest with an increment");
        let file = open_append(&layout.dir.join(&incr.name))?;
        let incr_size = file.metadata()?.len();
        let mut aof = Aof::new(engine, layout, manifest, file, incr_size, false);
        aof.base_size = aof.file_size(aof.manifest.base.as_ref());
        engine.set_propagation(true);
        engine.core.aof.status.on = true;
        aof.report(engine);
        Ok((aof, loaded))
    }

    /// An AOF writing to `file` (an increment of `incr_size` bytes, or with `pending` the
    /// temporary increment of a first rewrite), nothing buffered, no rewrite running.
    fn new(
        engine: &Engine,
        layout: Layout,
        manifest: Manifest,
        file: File,
        incr_size: u64,
        pending: bool,
    ) -> Self {
        Aof {
            layout,
            manifest,
            file,
            policy: Fsync::parse(&engine.core.config.appendfsync),
            buf: Vec::new(),
            unsynced: false,
            last_fsync: Instant::now(),
            fsync_busy: Arc::new(AtomicBool::new(false)),
            incr_size,
            base_size: 0,
            rewrite: None,
            annotated_s: 0,
            limit: RewriteLimit::default(),
            pending,
        }
    }

    /// Turns the AOF on at runtime (`CONFIG SET appendonly yes`), as Redis 7.0 does: a
    /// background rewrite starts, the writes from its snapshot on go to a temporary increment
    /// (`temp-<appendfilename>.incr`), and only when the rewrite succeeds does that file
    /// become the first increment after the new base, in a new manifest. Until then the
    /// files on disk (an older AOF, if any) are untouched. A failed rewrite drops the
    /// temporary increment and the next one starts over (see [`Aof::finish_rewrite`]).
    pub fn enable(engine: &mut Engine, now: Now) -> anyhow::Result<Self> {
        let layout = Layout::of(engine);
        std::fs::create_dir_all(&layout.dir)?;
        let manifest = layout.read_manifest()?.unwrap_or_default();
        let file = create_truncated(&layout.dir.join(layout.temp_incr_name()))?;
        let mut aof = Aof::new(engine, layout, manifest, file, 0, true);
        engine.core.aof.status.on = true;
        aof.start_rewrite(engine, now);
        if aof.rewrite.is_none() {
            aof.drop_temp_incr(engine);
            engine.core.aof.status.on = false;
            anyhow::bail!("the first rewrite did not start");
        }
        aof.report(engine);
        Ok(aof)
    }

    /// The first rewrite failed (or the AOF goes off before it ended): the temporary
    /// increment is deleted and writes stop going anywhere until the next rewrite starts
    /// (its snapshot holds them).
    fn drop_temp_incr(&mut self, engine: &mut Engine) {
        self.flush(engine);
        self.buf.clear();
        engine.set_propagation(false);
        let name = self.layout.temp_incr_name();
        if std::fs::remove_file(self.layout.dir.join(&name)).is_ok() {
            info!("Removing the temp incr aof file {name} in the background");
        }
        self.incr_size = 0;
    }

    /// A rewrite of a pending AOF starts: a new empty temporary increment takes the writes
    /// from now on (the snapshot is taken in the same pass).
    fn open_temp_incr(&mut self, engine: &mut Engine) -> io::Result<()> {
        self.file = create_truncated(&self.layout.dir.join(self.layout.temp_incr_name()))?;
        self.buf.clear();
        self.incr_size = 0;
        engine.set_propagation(true);
        engine.reset_propagation_db();
        Ok(())
    }

    fn file_size(&self, p: Option<&Part>) -> u64 {
        p.and_then(|p| std::fs::metadata(self.layout.dir.join(&p.name)).ok())
            .map_or(0, |m| m.len())
    }

    /// Copies the sizes into the engine for INFO.
    fn report(&self, engine: &mut Engine) {
        let s = &mut engine.core.aof.status;
        s.base_size = self.base_size;
        s.current_size = self.base_size + self.incr_size;
    }

    /// Whether writes are waiting to be written before replies go out. Bytes kept after a
    /// failed write (everysec, no) do not hold replies back: the cron retries them.
    pub fn needs_flush(&self, engine: &Engine) -> bool {
        engine.has_propagated()
    }

    /// Writes what the engine propagated, and fsyncs under `always`: call before sending any
    /// reply of the commands that produced it.
    /// Writes out what the engine propagated and fsyncs it, whatever the policy (DEBUG
    /// LOADAOF reads the files back next).
    pub fn flush_and_sync(&mut self, engine: &mut Engine) -> io::Result<()> {
        self.flush(engine);
        self.file.sync_data()
    }

    pub fn flush(&mut self, engine: &mut Engine) {
        let new_from = self.buf.len();
        engine.drain_propagated(&mut self.buf);
        if self.buf.is_empty() {
            return;
        }
        if engine.core.config.aof_timestamp_enabled && self.buf.len() > new_from {
            self.annotate(new_from);
        }
        let result = self.file.write_all(&self.buf).and_then(|()| {
            let skip = engine.core.config.no_appendfsync_on_rewrite && self.rewrite.is_some();
            if self.policy == Fsync::Always && !skip {
                self.file.sync_data()
            } else {
                Ok(())
            }
        });
        match result {
            Ok(()) => {
                self.incr_size += self.buf.len() as u64;
                self.unsynced = self.policy != Fsync::Always;
                self.buf.clear();
                let status = &mut engine.core.aof.status;
                if !status.last_write_ok {
                    info!("AOF write error looks solved, Redis can write again.");
                    status.last_write_ok = true;
                }
            }
            Err(e) => self.write_failed(engine, &e),
        }
        self.report(engine);
    }

    /// With `aof-timestamp-enabled`, the commands of a new second start with a `#TS:<unix
    /// seconds>` line (Redis writes one before a command whenever the second moved on since
    /// the last; the loader skips them, `redis-check-aof --truncate-to-timestamp` cuts there).
    fn annotate(&mut self, at: usize) {
        let now_s = unix_s();
        if now_s <= self.annotated_s {
            return;
        }
        self.annotated_s = now_s;
        let line = ts_annotation(now_s);
        self.buf.splice(at..at, line.bytes());
    }

    /// A failed write or fsync. Under `always` the server cannot keep its promise and exits,
    /// as Redis does; otherwise a partial write is cut off and the bytes are retried on the
    /// next pass (INFO shows `aof_last_write_status:err` meanwhile).
    fn write_failed(&mut self, engine: &mut Engine, e: &io::Error) {
        if self.policy == Fsync::Always {
            tracing::error!(
                "Can't recover from AOF write error when the AOF fsync policy is 'always': {e}. Exiting..."
            );
            std::process::exit(1);
        }
        warn!("Error writing to the AOF file: {e}");
        let _ = self.file.set_len(self.incr_size);
        let status = &mut engine.core.aof.status;
        status.last_write_ok = false;
        status.last_write_error = strerror(e);
    }

    /// The cron part: the everysec fsync, the end of a rewrite, the auto-rewrite.
    pub fn cron(&mut self, engine: &mut Engine, now: Now) {
        self.policy = Fsync::parse(&engine.core.config.appendfsync);
        self.flush(engine);
        if self.policy == Fsync::EverySec
            && self.unsynced
            && self.last_fsync.elapsed().as_millis() >= 1000
        {
            self.background_fsync();
        }
        if self
            .rewrite
            .as_ref()
            .is_some_and(|r| r.thread.is_finished())
        {
            self.finish_rewrite(engine, now);
        }
        if self.pending && self.rewrite.is_none() {
            // The first rewrite did not start or failed: the shell tries again (after a
            // running BGSAVE), once a cron tick.
            engine.core.aof.status.rewrite_scheduled = true;
        }
        if self.rewrite.is_none()
            && !self.pending
            && self.auto_rewrite_due(engine)
            && !self
                .limit
                .holds(engine.core.aof.status.consecutive_failures, now)
        {
            info!("Starting automatic rewriting of AOF");
            self.start_rewrite(engine, now);
        }
    }

    /// Hands an fsync of the increment file to a thread, unless the previous one still runs.
    fn background_fsync(&mut self) {
        if self.fsync_busy.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(file) = self.file.try_clone() else {
            self.fsync_busy.store(false, Ordering::Release);
            return;
        };
        let busy = Arc::clone(&self.fsync_busy);
        self.unsynced = false;
        self.last_fsync = Instant::now();
        let spawned = std::thread::Builder::new()
            .name("kayvee-aof-fsync".into())
            .spawn(move || {
                if let Err(e) = file.sync_data() {
                    warn!("AOF fsync failed: {e}");
                }
                busy.store(false, Ordering::Release);
            });
        if spawned.is_err() {
            self.fsync_busy.store(false, Ordering::Release);
        }
    }

    /// `auto-aof-rewrite-percentage` / `-min-size`: the increments grew enough over the base.
    fn auto_rewrite_due(&self, engine: &Engine) -> bool {
        let c = &engine.core.config;
        let size = self.base_size + self.incr_size;
        let base = self.base_size.max(1);
        c.auto_aof_rewrite_percentage > 0
            && size >= c.auto_aof_rewrite_min_size
            && (size - base.min(size)) * 100 / base >= c.auto_aof_rewrite_percentage as u64
    }

    /// Whether a rewrite runs.
    pub fn rewriting(&self) -> bool {
        self.rewrite.is_some()
    }

    /// Starts a rewrite: new increment (in the manifest at once), snapshot, base on a thread.
    pub fn start_rewrite(&mut self, engine: &mut Engine, now: Now) {
        let s = &mut engine.core.aof.status;
        s.rewrite_requested = false;
        s.rewrite_scheduled = false;
        let opened = match self.pending {
            true => self.open_temp_incr(engine),
            false => self.open_next_incr(engine),
        };
        if let Err(e) = opened {
            warn!("Can't rewrite append only file in background: {e}");
            engine.core.aof.status.last_bgrewrite_ok = false;
            return;
        }
        let rdb = engine.core.config.aof_use_rdb_preamble;
        let seq = self.manifest.base.as_ref().map_or(0, |b| b.seq) + 1;
        let base = Part {
            name: self.layout.base_name(seq, rdb),
            seq,
        };
        let path = self.layout.dir.join(&base.name);
        let snapshot = engine.snapshot(now);
        let opts = base_options(engine);
        let ts = base_timestamp(engine, now);
        let mut pace = Pace::of(engine);
        let stop = Arc::new(AtomicBool::new(false));
        let spool = rewrite_spool(engine, &stop);
        if spool.is_ok() {
            pace.progress = Some(engine.writer_started(Writer::Aof, &snapshot));
        }
        let spawned = spool.and_then(|(spool, child)| {
            std::thread::Builder::new()
                .name("kayvee-aofrw".into())
                .spawn(move || write_base(snapshot, opts, (rdb, ts), &pace, spool, &path))
                .map(|thread| (thread, child))
                .inspect_err(|_| stop.store(true, Ordering::Relaxed))
        });
        match spawned {
            Ok((thread, child)) => {
                match &child {
                    Some(c) => info!(
                        "Background append only file rewriting started by pid {}",
                        c.id()
                    ),
                    None => info!("Background append only file rewriting started"),
                }
                engine.aof_rewrite_started(now);
                self.rewrite = Some(Rewrite {
                    thread,
                    stop,
                    child,
                    base,
                    started: Instant::now(),
                });
            }
            Err(e) => {
                warn!("Can't rewrite append only file in background: {e}");
                engine.core.aof.status.last_bgrewrite_ok = false;
                engine.writer_finished(Writer::Aof, false);
                if self.pending {
                    engine.set_propagation(false);
                }
            }
        }
    }

    /// The first rewrite of a pending AOF wrote `base`: the temporary increment, synced, is
    /// renamed to the increment after the old manifest's last and a manifest naming the two
    /// replaces the old one. A write acknowledged before this point (under `always`, synced
    /// in the temporary increment) is then in a listed file; one acknowledged after lands in
    /// the same file (the descriptor survives the rename).
    fn adopt_temp_incr(&mut self, engine: &mut Engine, base: Part) -> io::Result<Manifest> {
        self.flush(engine);
        self.file.sync_data()?;
        let old = &self.manifest;
        let seq = old.incrs.last().map_or(0, |p| p.seq) + 1;
        let incr = Part {
            name: self.layout.incr_name(seq),
            seq,
        };
        let history = match auto_gc_disabled(engine) {
            false => Vec::new(),
            true => old
                .incrs
                .iter()
                .rev()
                .chain(old.base.iter())
                .chain(old.history.iter())
                .cloned()
                .collect(),
        };
        let temp = self.layout.dir.join(self.layout.temp_incr_name());
        std::fs::rename(&temp, self.layout.dir.join(&incr.name))?;
        File::open(&self.layout.dir)?.sync_all()?;
        let next = Manifest {
            base: Some(base),
            incrs: vec![incr],
            history,
        };
        self.layout.write_manifest(&next)?;
        Ok(next)
    }

    /// Flushes the current increment and switches writes to a new one, recorded in the
    /// manifest before any write lands in it.
    fn open_next_incr(&mut self, engine: &mut Engine) -> io::Result<()> {
        self.flush(engine);
        self.file.sync_data()?;
        let seq = self.manifest.incrs.last().map_or(0, |p| p.seq) + 1;
        let part = Part {
            name: self.layout.incr_name(seq),
            seq,
        };
        let file = open_append(&self.layout.dir.join(&part.name))?;
        let mut next = self.manifest.clone();
        next.incrs.push(part);
        self.layout.write_manifest(&next)?;
        self.manifest = next;
        self.file = file;
        self.incr_size = 0;
        engine.reset_propagation_db();
        Ok(())
    }

    /// The base thread ended: on success the manifest switches to the new base and the last
    /// increment, and older files are deleted.
    fn finish_rewrite(&mut self, engine: &mut Engine, now: Now) {
        let Some(rw) = self.rewrite.take() else {
            return;
        };
        let result = rw
            .thread
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the rewrite thread panicked")))
            .and_then(|size| {
                if self.pending {
                    let next = self.adopt_temp_incr(engine, rw.base.clone())?;
                    let old = std::mem::replace(&mut self.manifest, next);
                    self.delete_unlisted(&old);
                    self.pending = false;
                    return Ok(size);
                }
                let incrs = &self.manifest.incrs;
                // With `aof-disable-auto-gc yes` the replaced files stay, listed as history
                // (newest first, as Redis lists them).
                let history = match auto_gc_disabled(engine) {
                    false => Vec::new(),
                    true => incrs[..incrs.len().saturating_sub(1)]
                        .iter()
                        .rev()
                        .chain(self.manifest.base.iter())
                        .chain(self.manifest.history.iter())
                        .cloned()
                        .collect(),
                };
                let next = Manifest {
                    base: Some(rw.base.clone()),
                    incrs: incrs.last().cloned().into_iter().collect(),
                    history,
                };
                self.layout.write_manifest(&next)?;
                let old = std::mem::replace(&mut self.manifest, next);
                self.delete_unlisted(&old);
                Ok(size)
            });
        engine.writer_finished(Writer::Aof, result.is_ok());
        let s = &mut engine.core.aof.status;
        s.rewrite_started_ms = None;
        s.last_rewrite_time_s = rw.started.elapsed().as_secs() as i64;
        match result {
            Ok(size) => {
                self.base_size = size;
                s.last_bgrewrite_ok = true;
                s.rewrites += 1;
                s.consecutive_failures = 0;
                info!("Background AOF rewrite finished successfully");
            }
            Err(e) => {
                log_rewrite_failure(&e);
                let _ = std::fs::remove_file(self.layout.dir.join(&rw.base.name));
                s.last_bgrewrite_ok = false;
                s.consecutive_failures += 1;
                if self.pending {
                    // As Redis: the temporary increment goes and the rewrite is scheduled
                    // again (the shell starts it once no background save runs).
                    s.rewrite_scheduled = true;
                    self.drop_temp_incr(engine);
                }
            }
        }
        self.report(engine);
        let _ = now;
    }

    /// Deletes the files of `old` that the current manifest no longer lists.
    fn delete_unlisted(&self, old: &Manifest) {
        let m = &self.manifest;
        let listed =
            |p: &Part| m.base.as_ref() == Some(p) || m.incrs.contains(p) || m.history.contains(p);
        for p in old
            .base
            .iter()
            .chain(old.incrs.iter())
            .chain(old.history.iter())
        {
            if !listed(p) {
                let _ = std::fs::remove_file(self.layout.dir.join(&p.name));
            }
        }
    }

    /// Whether the manifest lists history files (`aof-disable-auto-gc`).
    pub fn has_history(&self) -> bool {
        !self.manifest.history.is_empty()
    }

    /// `aof-disable-auto-gc` turned off: the history leaves the manifest and its files go.
    pub fn collect_history(&mut self, engine: &Engine) {
        if self.manifest.history.is_empty() || auto_gc_disabled(engine) {
            return;
        }
        let next = Manifest {
            history: Vec::new(),
            ..self.manifest.clone()
        };
        if let Err(e) = self.layout.write_manifest(&next) {
            warn!("Can't write the AOF manifest: {e}");
            return;
        }
        let old = std::mem::replace(&mut self.manifest, next);
        self.delete_unlisted(&old);
    }

    /// Whether this AOF was turned on at runtime and its first rewrite runs now.
    pub fn writing_first_base(&self) -> bool {
        self.pending && self.rewrite.is_some()
    }

    /// The server's end: [`Aof::close`], except that a first rewrite not done yet (the AOF
    /// turned on at runtime, its writes in the temporary increment only) is finished in the
    /// foreground: a base of the current data, a fresh increment and the manifest, as SAVE
    /// writes an RDB at shutdown. SHUTDOWN reaches this with a first rewrite running only with
    /// FORCE ([`crate::requests::shutdown`]; Redis 7.0 then exits with the AOF unwritten);
    /// writing the base keeps every write acknowledged since the AOF was turned on.
    pub fn close_at_exit(self, engine: &mut Engine, now: Now) {
        if !self.pending {
            return self.close(engine);
        }
        let old = self.manifest.clone();
        self.close(engine);
        write_first_base_at_exit(engine, Some(&old), now);
    }

    /// Waits for a running rewrite and writes everything out with an fsync (shutdown, AOF off).
    pub fn close(mut self, engine: &mut Engine) {
        if let Some(rw) = self.rewrite.take() {
            // As Redis kills its rewrite child: the base is dropped (the thread removes its
            // temporary file); the increment opened for it stays in the manifest.
            info!("Killing running AOF rewrite child");
            rw.stop.store(true, Ordering::Relaxed);
            if let Some(c) = &rw.child {
                c.kill();
            }
            let _ = rw.thread.join();
            engine.core.aof.status.rewrite_started_ms = None;
            engine.writer_finished(Writer::Aof, false);
        }
        if self.pending {
            // The first rewrite's retry must not run as a BGREWRITEAOF of the AOF turned off.
            engine.core.aof.status.rewrite_scheduled = false;
            self.drop_temp_incr(engine);
        } else {
            self.flush(engine);
            let _ = self.file.sync_data();
        }
        engine.set_propagation(false);
        engine.core.aof.status.on = false;
    }
}

/// DEBUG LOADAOF's work (the open AOF written out first by the caller): empties the dataset
/// and loads the AOF the manifest on disk names, without propagating what it replays; the
/// dataset then counts as unchanged (`rdb_changes_since_last_save` 0), as in Redis.
///
/// `wait` serves the other connections should a script in the file run past
/// `busy-reply-threshold` (they get `-LOADING`, as from Redis during a load).
pub fn reload(
    engine: &mut Engine,
    now: Now,
    wait: &mut dyn kayvee_engine::ScriptWait,
) -> anyhow::Result<()> {
    let layout = Layout::of(engine);
    let propagating = engine.begin_reload(now);
    let result = match layout.read_manifest() {
        Ok(Some(m)) => load(engine, &layout, &m, now, Some(wait)),
        Ok(None) => Ok(()),
        Err(e) => Err(e),
    };
    engine.end_reload(propagating);
    result
}

/// Takes over the single AOF file of Redis before 7.0 (`<dir>/<appendfilename>`) as Redis 7.0
/// does: with no manifest, a manifest naming it as the base is written, then the file moves
/// into the AOF directory; a manifest naming it whose file is still in `<dir>` (an upgrade
/// interrupted between the two steps) gets the move done. A file already in the directory
/// wins over one left in `<dir>`.
fn upgrade_old_style(
    layout: &Layout,
    on_disk: Option<Manifest>,
) -> anyhow::Result<Option<Manifest>> {
    let moved = layout.dir.join(&layout.name);
    let m = match on_disk {
        None if layout.old_style.is_file() => {
            let m = Manifest {
                base: Some(Part {
                    name: layout.name.clone(),
                    seq: 1,
                }),
                history: Vec::new(),
                incrs: Vec::new(),
            };
            layout.write_manifest(&m)?;
            m
        }
        Some(m) if m.base.as_ref().is_some_and(|b| b.name == layout.name) => m,
        other => return Ok(other),
    };
    if !moved.exists() && layout.old_style.is_file() {
        std::fs::rename(&layout.old_style, &moved)?;
        File::open(&layout.dir)?.sync_all()?;
        info!(
            "Successfully migrated an old-style AOF into the AOF directory ({})",
            layout.name
        );
    }
    Ok(Some(m))
}

/// At the server's end with the AOF turned on but its first rewrite not done: a new AOF of
/// the current data, written now (see [`Aof::close_at_exit`]).
pub fn write_first_base_at_exit(engine: &Engine, old: Option<&Manifest>, now: Now) {
    info!("Writing initial AOF before exiting (its first rewrite had not finished)");
    let layout = Layout::of(engine);
    let old = match old {
        Some(m) => Ok(Some(m.clone())),
        None => std::fs::create_dir_all(&layout.dir)
            .map_err(anyhow::Error::from)
            .and_then(|()| layout.read_manifest()),
    };
    match old.and_then(|old| fresh(engine, &layout, old.as_ref(), now)) {
        Ok(_) => info!("Initial AOF written"),
        Err(e) => warn!("Error writing the initial AOF at exit: {e}"),
    }
}

/// Writes a new AOF of the current data: base, empty increment, manifest; then deletes the
/// files of the `old` manifest.
fn fresh(
    engine: &Engine,
    layout: &Layout,
    old: Option<&Manifest>,
    now: Now,
) -> anyhow::Result<Manifest> {
    let seq = |p: Option<&Part>| p.map_or(0, |p| p.seq) + 1;
    let rdb = engine.core.config.aof_use_rdb_preamble;
    let base_seq = seq(old.and_then(|m| m.base.as_ref()));
    let incr_seq = seq(old.and_then(|m| m.incrs.last()));
    let m = Manifest {
        base: Some(Part {
            name: layout.base_name(base_seq, rdb),
            seq: base_seq,
        }),
        incrs: vec![Part {
            name: layout.incr_name(incr_seq),
            seq: incr_seq,
        }],
        history: Vec::new(),
    };
    let base_path = layout.dir.join(&m.base.as_ref().expect("set").name);
    let ts = base_timestamp(engine, now);
    let snapshot = engine.snapshot(now);
    let spool = direct_spool(&layout.dir, Arc::default())?;
    write_base(
        snapshot,
        base_options(engine),
        (rdb, ts),
        &Pace::default(),
        spool,
        &base_path,
    )?;
    open_append(&layout.dir.join(&m.incrs[0].name))?.sync_all()?;
    layout.write_manifest(&m)?;
    if let Some(old) = old {
        for p in old
            .base
            .iter()
            .chain(old.incrs.iter())
            .chain(old.history.iter())
        {
            let _ = std::fs::remove_file(layout.dir.join(&p.name));
        }
    }
    Ok(m)
}

/// BGREWRITEAOF with the AOF off, as Redis 7.0 does it: a new base of `snapshot` and a
/// manifest listing only that base, written on a thread; older AOF files are deleted. Returns
/// the base's size.
pub fn rewrite_detached(engine: &mut Engine, now: Now) -> io::Result<Detached> {
    let layout = Layout::of(engine);
    let rdb = engine.core.config.aof_use_rdb_preamble;
    let snapshot = engine.snapshot(now);
    let opts = base_options(engine);
    let ts = base_timestamp(engine, now);
    let mut pace = Pace::of(engine);
    std::fs::create_dir_all(&layout.dir)?;
    let stop = Arc::new(AtomicBool::new(false));
    let (spool, child) = rewrite_spool(engine, &stop)?;
    pace.progress = Some(engine.writer_started(Writer::Aof, &snapshot));
    let thread = std::thread::Builder::new()
        .name("kayvee-aofrw".into())
        .spawn(move || {
            let old = layout.read_manifest().map_err(io::Error::other)?;
            let seq = old
                .as_ref()
                .and_then(|m| m.base.as_ref())
                .map_or(0, |b| b.seq)
                + 1;
            let base = Part {
                name: layout.base_name(seq, rdb),
                seq,
            };
            let path = layout.dir.join(&base.name);
            let size = write_base(snapshot, opts, (rdb, ts), &pace, spool, &path)?;
            let m = Manifest {
                base: Some(base),
                incrs: Vec::new(),
                history: Vec::new(),
            };
            layout.write_manifest(&m)?;
            let old_parts = |o: &Manifest| {
                let parts = o.base.iter().chain(o.incrs.iter());
                parts.chain(o.history.iter()).cloned().collect::<Vec<_>>()
            };
            for p in old.iter().flat_map(old_parts) {
                if m.base.as_ref() != Some(&p) {
                    let _ = std::fs::remove_file(layout.dir.join(&p.name));
                }
            }
            Ok(size)
        });
    match thread {
        Ok(thread) => Ok(Detached {
            thread,
            stop,
            child,
        }),
        Err(e) => {
            if let Some(c) = &child {
                c.kill();
            }
            engine.writer_finished(Writer::Aof, false);
            Err(e)
        }
    }
}

/// A rewrite with the AOF off under way: its thread, the flag that stops it and its child.
pub struct Detached {
    pub thread: JoinHandle<io::Result<u64>>,
    pub stop: Arc<AtomicBool>,
    pub child: Option<ChildRef>,
}

/// The spool of a background rewrite: a save-writer child writing
/// `temp-rewriteaof-bg-<its pid>.aof` in `dir` (where Redis's child writes it; the base is
/// renamed into the AOF directory), or the thread itself.
fn rewrite_spool(engine: &Engine, stop: &Arc<AtomicBool>) -> io::Result<(Spool, Option<ChildRef>)> {
    let dir = Path::new(&engine.core.config.dir);
    let fallback = dir.join(Kind::AofRewrite.temp_name(std::process::id()));
    crate::persist::background_spool(engine, Kind::AofRewrite, dir, stop, fallback)
}

/// A spool writing the base from this process, to `temp-rewriteaof-bg-<pid>.aof` in `dir`.
fn direct_spool(dir: &Path, stop: Arc<AtomicBool>) -> io::Result<Spool> {
    Spool::direct(
        dir.join(Kind::AofRewrite.temp_name(std::process::id())),
        stop,
    )
}

/// Logs a failed rewrite as Redis does: killed by a signal, or ended with an error.
pub fn log_rewrite_failure(e: &io::Error) {
    match crate::savechild::killed_by(e) {
        Some(signal) => warn!("Background AOF rewrite terminated by signal {signal}"),
        None => warn!("Background AOF rewrite terminated with error: {e}"),
    }
}

/// Whether `aof-disable-auto-gc` keeps the files a rewrite replaced.
fn auto_gc_disabled(engine: &Engine) -> bool {
    matches!(
        engine.core.config.extra.get("aof-disable-auto-gc"),
        Some(kayvee_engine::config::table::Val::Bool(true))
    )
}

/// Opens a file for appending, creating it.
/// Creates `path` empty (truncating an older file) and opens it for appending.
fn create_truncated(path: &Path) -> io::Result<File> {
    File::create(path)?;
    open_append(path)
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// RDB options for a base.
fn base_options(engine: &Engine) -> WriteOptions {
    let cfg = &engine.core.config;
    WriteOptions {
        compress: cfg.rdbcompression,
        checksum: cfg.rdbchecksum,
        used_mem: engine.core.host.used_memory,
        ..WriteOptions::default()
    }
}

/// The unix second a base of commands starts with as a `#TS:` annotation, with
/// `aof-timestamp-enabled` (Redis's rewrite writes one first, whatever the last was).
fn base_timestamp(engine: &Engine, now: Now) -> Option<u64> {
    engine
        .core
        .config
        .aof_timestamp_enabled
        .then_some(now.ms() / 1000)
}

/// `#TS:<unix seconds>\r\n`, an AOF's timestamp annotation.
fn ts_annotation(unix_s: u64) -> String {
    format!("#TS:{unix_s}\r\n")
}

/// The wall clock's unix seconds.
fn unix_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// How a rewrite goes: `rdb-key-save-delay` (microseconds slept after each key, the test
/// suite's slow rewrite, as Redis's rewrite child sleeps) and the progress INFO reads (keys
/// written, how far an RDB base lets go of the snapshot).
#[derive(Default)]
struct Pace {
    key_delay_us: u64,
    progress: Option<Arc<WriterProgress>>,
}

impl Pace {
    /// The pace the configuration asks for.
    fn of(engine: &Engine) -> Pace {
        let delay = engine.core.config.int_param("rdb-key-save-delay");
        Pace {
            key_delay_us: delay.max(0) as u64,
            progress: None,
        }
    }

    /// Publishes that `keys` keys are written, and how far the snapshot is let go of.
    fn written(&self, keys: u64, released: Option<(usize, u64)>) {
        if let Some(p) = &self.progress {
            p.set_keys(keys);
            if let Some(r) = released {
                p.set_released(r);
            }
        }
    }

    /// After a key: stops the rewrite if asked or if the child is gone, else pauses the key's
    /// delay.
    fn after_key(&self, out: &mut impl Sink) -> io::Result<()> {
        out.pause(self.key_delay_us)
    }
}

/// Writes a base (`form`: RDB, or commands after the `#TS:` annotation of its second if any)
/// into `spool` at `pace`, then completes it as `path` (fsync, rename: see
/// [`savechild::write_with`]); returns its size.
fn write_base(
    snapshot: Snapshot,
    mut opts: WriteOptions,
    (rdb, ts_s): (bool, Option<u64>),
    pace: &Pace,
    spool: Spool,
    path: &Path,
) -> io::Result<u64> {
    savechild::write_with(spool, path, |out| {
        if rdb {
            if pace.key_delay_us > 0 {
                opts.chunk_len = 1; // a key a chunk, paused after
            }
            let mut writer = RdbWriter::new(snapshot, opts);
            let mut buf = Vec::with_capacity(128 * 1024);
            while writer.next_chunk(&mut buf) {
                out.write_all(&buf)?;
                buf.clear();
                pace.written(writer.keys_written(), Some(writer.released()));
                pace.after_key(out)?;
            }
            Ok(())
        } else {
            if let Some(ts_s) = ts_s {
                out.write_all(ts_annotation(ts_s).as_bytes())?;
            }
            write_commands(&snapshot, out, pace)
        }
    })
}

/// Items per command in a command base, as Redis's `AOF_REWRITE_ITEMS_PER_CMD`.
const ITEMS_PER_CMD: usize = 64;

/// The data as commands (Redis's rewrite without preamble): FUNCTION LOAD per library, then
/// SELECT per database and per key SET / RPUSH / SADD / HMSET / ZADD in batches of 64 items,
/// and PEXPIREAT for a TTL.
fn write_commands(snapshot: &Snapshot, out: &mut impl Sink, pace: &Pace) -> io::Result<()> {
    use kayvee_engine::aof::encode;
    let mut buf = Vec::with_capacity(64 * 1024);
    let mut written = 0;
    // The function libraries first, as Redis's rewrite writes them.
    for code in &snapshot.functions {
        encode(&mut buf, &[b"FUNCTION", b"LOAD", code]);
    }
    for (i, db) in snapshot.dbs.iter().enumerate() {
        if db.keys.is_empty() {
            continue;
        }
        encode(&mut buf, &[b"SELECT", i.to_string().as_bytes()]);
        for (key, entry) in db.keys.iter() {
            key_commands(key, entry.value(), &mut buf);
            if let Some(at) = db.expires.get(&key[..]) {
                encode(&mut buf, &[b"PEXPIREAT", key, at.to_string().as_bytes()]);
            }
            if buf.len() > 32 * 1024 || pace.key_delay_us > 0 {
                out.write_all(&buf)?;
                buf.clear();
            }
            written += 1;
            pace.written(written, None);
            pace.after_key(out)?;
        }
    }
    out.write_all(&buf)
}

/// `RESTORE key 0 <DUMP payload> REPLACE`: a value rebuilt from its bytes.
fn restore_command(key: &[u8], value: ValueRef<'_>, buf: &mut Vec<u8>) {
    let payload = kayvee_rdb::dump::dump(value, false);
    kayvee_engine::aof::encode(buf, &[b"RESTORE", key, b"0", &payload, b"REPLACE"]);
}

/// The commands that rebuild one value.
fn key_commands(key: &[u8], value: ValueRef<'_>, buf: &mut Vec<u8>) {
    use kayvee_engine::aof::encode;
    let batched = |buf: &mut Vec<u8>, cmd: &[u8], items: Vec<Vec<u8>>, per: usize| {
        for chunk in items.chunks(ITEMS_PER_CMD * per) {
            let mut args: Vec<&[u8]> = vec![cmd, key];
            args.extend(chunk.iter().map(Vec::as_slice));
            encode(buf, &args);
        }
    };
    match value {
        ValueRef::Str(s) => encode(buf, &[b"SET", key, s]),
        ValueRef::List(l) => batched(buf, b"RPUSH", l.iter().map(|e| e.to_vec()).collect(), 1),
        ValueRef::Set(s) => batched(buf, b"SADD", s.iter().map(|m| m.to_vec()).collect(), 1),
        // A value that cannot be read (restored with sanitize-dump-payload no) is written as
        // it is: a RESTORE of its DUMP payload.
        ValueRef::Stream(s) if s.corrupt => restore_command(key, value, buf),
        ValueRef::Hash(h) if h.corrupt_listpack().is_some() => restore_command(key, value, buf),
        ValueRef::Hash(h) => {
            let items = h
                .iter()
                .flat_map(|(f, v)| [f.to_vec(), v.to_vec()])
                .collect();
            batched(buf, b"HMSET", items, 2)
        }
        ValueRef::ZSet(z) => {
            let items = z
                .iter()
                .flat_map(|e| {
                    let mut score = Vec::new();
                    kayvee_engine::cmd::double::format_g17(e.0, &mut score);
                    [score, e.1.to_vec()]
                })
                .collect();
            batched(buf, b"ZADD", items, 2)
        }
        ValueRef::Stream(s) => stream_commands(key, s, buf),
    }
}

/// The commands that rebuild a stream, as Redis's rewrite emits them: one XADD per entry (an
/// empty stream: `XADD key MAXLEN 0 0-1 x y`), XSETID with the 7.0 counters, then per group
/// XGROUP CREATE and, per consumer, XCLAIM ... JUSTID FORCE for each pending entry (XGROUP
/// CREATECONSUMER for a consumer without any).
fn stream_commands(key: &[u8], s: &kayvee_engine::value::Stream, buf: &mut Vec<u8>) {
    use kayvee_engine::aof::encode;
    use kayvee_engine::value::StreamId;
    let id = |i: StreamId| i.to_string().into_bytes();
    let entries = s.collect(StreamId::MIN, StreamId::MAX, false, 0);
    if entries.is_empty() {
        encode(buf, &[b"XADD", key, b"MAXLEN", b"0", b"0-1", b"x", b"y"]);
    }
    for e in &entries {
        let eid = id(e.id);
        let mut args: Vec<&[u8]> = vec![b"XADD", key, &eid];
        args.extend(e.fields.iter().map(Vec::as_slice));
        encode(buf, &args);
    }
    let (last, added, maxdel) = (
        id(s.last_id),
        s.entries_added.to_string(),
        id(s.max_deleted),
    );
    encode(
        buf,
        &[
            b"XSETID",
            key,
            &last,
            b"ENTRIESADDED",
            added.as_bytes(),
            b"MAXDELETEDID",
            &maxdel,
        ],
    );
    for g in &s.groups {
        let (glast, read) = (id(g.last_id), g.entries_read.to_string());
        encode(
            buf,
            &[
                b"XGROUP",
                b"CREATE",
                key,
                &g.name,
                &glast,
                b"ENTRIESREAD",
                read.as_bytes(),
            ],
        );
        for c in &g.consumers {
            if c.pel.is_empty() {
                encode(buf, &[b"XGROUP", b"CREATECONSUMER", key, &g.name, &c.name]);
                continue;
            }
            for pid in c.pel.iter() {
                let Some(p) = g
                    .pel
                    .get(&kayvee_engine::value::stream::Pending::probe(*pid))
                else {
                    continue;
                };
                let (pid, time, count) = (
                    id(p.id),
                    p.delivery_ms.to_string(),
                    p.delivery_count.to_string(),
                );
                encode(
                    buf,
                    &[
                        b"XCLAIM",
                        key,
                        &g.name,
                        &c.name,
                        b"0",
                        &pid,
                        b"TIME",
                        time.as_bytes(),
                        b"RETRYCOUNT",
                        count.as_bytes(),
                        b"JUSTID",
                        b"FORCE",
                    ],
                );
            }
        }
    }
}

/// Startup failures of loading, with Redis's words.
fn load_error(path: &Path, what: &str) -> anyhow::Error {
    anyhow::anyhow!("{what} reading the append only file {}", path.display())
}

/// Loads the base and the increments of `m` into the engine.
fn load<'w>(
    engine: &mut Engine,
    layout: &Layout,
    m: &Manifest,
    now: Now,
    mut wait: Option<&mut (dyn kayvee_engine::ScriptWait + 'w)>,
) -> anyhow::Result<()> {
    let start = Instant::now();
    let files: Vec<&Part> = m.base.iter().chain(m.incrs.iter()).collect();
    let conn = ConnInfo {
        transport: Transport::Unix { path: "aof".into() },
        fd: -1,
    };
    let h = engine.connect(conn, now);
    for (i, part) in files.iter().enumerate() {
        let path = layout.dir.join(&part.name);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                anyhow::bail!(
                    "The append log file {} doesn't exist: No such file or directory",
                    part.name
                )
            }
            Err(e) => anyhow::bail!(
                "Fatal error: can't open the append log file {} for reading: {e}",
                part.name
            ),
        };
        let mut commands = &bytes[..];
        if bytes.starts_with(b"REDIS") {
            let opts = LoadOptions {
                config: &engine.core.config,
                seed: engine.core.seed,
                now_ms: now.ms(),
            };
            let loaded = kayvee_rdb::load(&bytes, &opts)
                .map_err(|e| load_error(&path, &format!("Bad file format ({e})")))?;
            commands = &bytes[loaded.consumed.min(bytes.len())..];
            engine.load_dbs(loaded.dbs, loaded.keys_loaded, loaded.keys_expired, now);
            engine
                .load_functions(&loaded.functions, false)
                .map_err(|e| load_error(&path, &format!("Bad file format ({e})")))?;
            if commands.is_empty() {
                continue;
            }
            // An RDB preamble: the commands written after the rewrite follow it.
        }
        let last = i + 1 == files.len();
        let truncate_ok = engine.core.config.aof_load_truncated;
        let offset = bytes.len() - commands.len();
        match replay_waiting(engine, h, commands, wait.as_deref_mut()) {
            Replay::Done => {}
            Replay::Truncated(valid) if last && truncate_ok => {
                warn!(
                    "!!! Warning: short read while loading the AOF file {}!!!",
                    part.name
                );
                warn!(
                    "AOF {} loaded anyway because aof-load-truncated is enabled",
                    part.name
                );
                OpenOptions::new()
                    .write(true)
                    .open(&path)?
                    .set_len((offset + valid) as u64)?;
            }
            Replay::Truncated(_) => {
                engine.disconnect(h);
                return Err(load_error(&path, "Unexpected end of file"));
            }
            Replay::Bad => {
                engine.disconnect(h);
                return Err(load_error(&path, "Bad file format"));
            }
            Replay::Unknown(name) => {
                engine.disconnect(h);
                return Err(load_error(&path, &format!("Unknown command '{name}'")));
            }
        }
    }
    engine.disconnect(h);
    info!(
        "DB loaded from append only file: {:.3} seconds",
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// How replaying one file ended.
#[derive(Debug, PartialEq, Eq)]
enum Replay {
    /// Every command ran.
    Done,
    /// The file ends inside a command (or an open MULTI): bytes up to here are whole.
    Truncated(usize),
    /// Not RESP commands.
    Bad,
    /// A command this server does not know.
    Unknown(String),
}

/// Runs the commands of one AOF file through client `h`, without replies and without expiry
/// (time 0: Redis expires nothing while loading; the file's DELs carry the expirations).
#[cfg(test)]
fn replay(engine: &mut Engine, h: kayvee_engine::Handle, bytes: &[u8]) -> Replay {
    replay_waiting(engine, h, bytes, None)
}

/// [`replay`], with `wait` serving the other connections during a long script.
fn replay_waiting<'w>(
    engine: &mut Engine,
    h: kayvee_engine::Handle,
    bytes: &[u8],
    wait: Option<&mut (dyn kayvee_engine::ScriptWait + 'w)>,
) -> Replay {
    engine.core.replay_client = Some(h);
    let result = replay_commands(engine, h, bytes, wait);
    engine.core.replay_client = None;
    result
}

/// [`replay`]'s work.
fn replay_commands<'w>(
    engine: &mut Engine,
    h: kayvee_engine::Handle,
    bytes: &[u8],
    mut wait: Option<&mut (dyn kayvee_engine::ScriptWait + 'w)>,
) -> Replay {
    let limits = Limits {
        bulk_len_max: usize::MAX / 2,
        query_buffer_max: usize::MAX / 2,
    };
    let mut decoder = Decoder::new(limits);
    let mut used = 0;
    let mut before_multi = None;
    let mut sink = Discard(kayvee_engine::Protocol::Resp2);
    while used < bytes.len() {
        if bytes[used] == b'#' {
            // An annotation (`#TS:...` with aof-timestamp-enabled): skipped, as Redis does.
            match bytes[used..].iter().position(|&b| b == b'\n') {
                Some(end) => used += end + 1,
                None => return Replay::Truncated(used),
            }
            continue;
        }
        if bytes[used] != b'*' {
            return Replay::Bad;
        }
        let frame = match decoder.decode(&bytes[used..], true) {
            Ok(Some(f)) => f,
            Ok(None) => return Replay::Truncated(before_multi.unwrap_or(used)),
            Err(_) => return Replay::Bad,
        };
        let name = frame.argv.get(0);
        if engine.command_table().lookup(name).is_none() {
            let name = String::from_utf8_lossy(name).into_owned();
            return Replay::Unknown(name);
        }
        if name.eq_ignore_ascii_case(b"multi") {
            before_multi = Some(used);
        } else if name.eq_ignore_ascii_case(b"exec") {
            before_multi = None;
        }
        let consumed = frame.consumed;
        let frozen = Now { unix_us: 0 };
        match wait.as_deref_mut() {
            Some(wait) => engine.execute_waiting(h, &frame.argv, frozen, &mut sink, wait),
            None => engine.execute(h, &frame.argv, frozen, &mut sink),
        };
        used += consumed;
    }
    match before_multi {
        Some(at) => {
            // An open transaction at the end: revert it, as Redis does.
            engine.execute(
                h,
                &kayvee_engine::ArgvBuf::from_args(["DISCARD"]).argv(),
                Now { unix_us: 0 },
                &mut sink,
            );
            Replay::Truncated(at)
        }
        None => Replay::Done,
    }
}

/// An I/O error's words as the C library's `strerror` gives them (Redis's MISCONF text):
/// without Rust's ` (os error N)` suffix.
fn strerror(e: &io::Error) -> String {
    let text = e.to_string();
    match (e.raw_os_error(), text.rfind(" (os error ")) {
        (Some(_), Some(at)) => text[..at].to_string(),
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A base of commands written into memory, unpaced.
    impl Sink for Vec<u8> {
        fn pause(&mut self, _us: u64) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn write_errors_read_as_strerror_words() {
        let enospc = io::Error::from_raw_os_error(28);
        assert_eq!(strerror(&enospc), "No space left on device");
        let other = io::Error::other("made up");
        assert_eq!(strerror(&other), "made up");
    }

    #[test]
    fn manifest_round_trips_in_redis_format() {
        let text = "file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n";
        let m = Manifest::parse(text).unwrap();
        assert_eq!(m.base.as_ref().unwrap().name, "appendonly.aof.1.base.rdb");
        assert_eq!(m.incrs.len(), 1);
        assert_eq!(m.render(), text);
        assert!(Manifest::parse("file x seq y type b\n").is_err());
        let h = Manifest::parse("file a seq 1 type h\nfile b seq 2 type i\n").unwrap();
        assert!(h.base.is_none() && h.incrs[0].name == "b" && h.history[0].name == "a");
        assert_eq!(h.render(), "file a seq 1 type h\nfile b seq 2 type i\n");
    }

    #[test]
    fn manifest_errors_are_redis_words() {
        let base = "file a.1.base.aof seq 1 type b\n";
        let long = format!("{}\n", "file a seq 1 type b ".repeat(60));
        for (text, error) in [
            ("", "Found an empty AOF manifest"),
            ("# only a comment\n", "Found an empty AOF manifest"),
            (&format!("{base}\n"), "Invalid AOF manifest file format"),
            ("filx a seq 1 type b\n", "Invalid AOF manifest file format"),
            ("file a type b\n", "Invalid AOF manifest file format"),
            (
                "file a seq 1 type b x\n",
                "Invalid AOF manifest file format",
            ),
            (
                "file a seq 1 type b",
                "The AOF manifest file contains too long line",
            ),
            (&long, "The AOF manifest file contains too long line"),
            ("file a seq 1 type x\n", "Unknown AOF file type"),
            (
                &format!("{base}{base}"),
                "Found duplicate base file information",
            ),
            (
                "file b seq 2 type i\nfile a seq 1 type i\n",
                "Found a non-monotonic sequence number",
            ),
        ] {
            assert_eq!(Manifest::parse(text), Err(error.to_string()), "{text:?}");
        }
        // Extra pairs are ignored.
        let m = Manifest::parse("file a seq 1 type b newkey newvalue\n").unwrap();
        assert_eq!(m.base.unwrap().name, "a");
    }

    #[test]
    fn manifest_names_with_spaces_are_quoted() {
        let name = " file seq \n\n.aof .2.incr.aof";
        let m = Manifest {
            base: None,
            incrs: vec![Part {
                name: name.into(),
                seq: 2,
            }],
            history: Vec::new(),
        };
        let text = m.render();
        assert_eq!(
            text,
            "file \" file seq \\n\\n.aof .2.incr.aof\" seq 2 type i\n"
        );
        assert_eq!(Manifest::parse(&text).unwrap(), m);
    }

    fn engine() -> (Engine, kayvee_engine::Handle) {
        let mut e = Engine::new(kayvee_engine::Config::default(), 1, Now::from_ms(1000));
        let conn = ConnInfo {
            transport: Transport::Unix { path: "t".into() },
            fd: -1,
        };
        let h = e.connect(conn, Now::from_ms(1000));
        (e, h)
    }

    #[test]
    fn replay_stops_at_a_truncated_command_or_open_multi() {
        let (mut e, h) = engine();
        let good = b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n";
        let mut bytes = good.to_vec();
        bytes.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$1\r\nb");
        assert_eq!(replay(&mut e, h, &bytes), Replay::Truncated(good.len()));
        assert_eq!(e.core.dbs[0].len(), 1);
        let mut multi = good.to_vec();
        multi.extend_from_slice(b"*1\r\n$5\r\nMULTI\r\n*3\r\n$3\r\nSET\r\n$1\r\nc\r\n$1\r\n1\r\n");
        let (mut e, h) = engine();
        assert_eq!(replay(&mut e, h, &multi), Replay::Truncated(good.len()));
        assert_eq!(e.core.dbs[0].len(), 1, "the open transaction is reverted");
        assert_eq!(replay(&mut e, h, b"SET a 1\r\n"), Replay::Bad);
        let unknown = b"*1\r\n$6\r\nNOSUCH\r\n";
        assert_eq!(replay(&mut e, h, unknown), Replay::Unknown("NOSUCH".into()));
        let annotated = b"#TS:1700000000\r\n*3\r\n$3\r\nSET\r\n$1\r\nz\r\n$1\r\n1\r\n";
        assert_eq!(replay(&mut e, h, annotated), Replay::Done);
        assert!(e.core.dbs[0].expire_at(b"z").is_none() && e.core.dbs[0].len() == 2);
    }

    #[test]
    fn replay_does_not_expire_while_loading() {
        let (mut e, h) = engine();
        let cmds = b"*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n$4\r\nPXAT\r\n$1\r\n5\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nw\r\n";
        assert_eq!(replay(&mut e, h, cmds), Replay::Done);
        assert_eq!(e.core.dbs[0].len(), 1);
        assert_eq!(
            e.core.dbs[0].expire_at(b"k"),
            None,
            "plain SET cleared the TTL"
        );
    }

    #[test]
    fn a_command_base_starts_with_its_timestamp_and_loads() {
        let (e, _) = engine();
        let dir = std::env::temp_dir().join(format!("kayvee-aof-ts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("base.aof");
        let snapshot = e.snapshot(Now::from_ms(1000));
        let (form, pace) = ((false, Some(17)), Pace::default());
        let spool = direct_spool(&dir, Arc::default()).unwrap();
        write_base(snapshot, WriteOptions::default(), form, &pace, spool, &path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(bytes.starts_with(b"#TS:17\r\n"), "{bytes:?}");
        let (mut e2, h2) = engine();
        assert_eq!(replay(&mut e2, h2, &bytes), Replay::Done);
    }

    #[test]
    fn a_stopped_rewrite_writes_no_base() {
        let (mut e, h) = engine();
        let argv = kayvee_engine::ArgvBuf::from_args(["SET", "k", "v"]);
        e.execute(
            h,
            &argv.argv(),
            Now::from_ms(1000),
            &mut Discard(Default::default()),
        );
        let pace = Pace::default();
        let stop = Arc::new(AtomicBool::new(true));
        let dir = std::env::temp_dir().join(format!("kayvee-aof-stop-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("base.aof");
        let snapshot = e.snapshot(Now::from_ms(1000));
        let spool = direct_spool(&dir, stop).unwrap();
        let written = write_base(
            snapshot,
            WriteOptions::default(),
            (false, None),
            &pace,
            spool,
            &path,
        );
        let left = std::fs::read_dir(&dir).unwrap().count();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(written.is_err());
        assert_eq!(left, 0, "no base, no temporary file");
    }

    #[test]
    fn command_base_rebuilds_every_type() {
        let (mut e, h) = engine();
        for c in [
            "RPUSH l a b c",
            "SADD s x y",
            "HSET h f v",
            "ZADD z 1.5 m 2 n",
            "SET k v",
            "PEXPIREAT k 99999999999999",
            "SELECT 2",
            "SET other 1",
        ] {
            let args: Vec<&str> = c.split(' ').collect();
            e.execute(
                h,
                &kayvee_engine::ArgvBuf::from_args(&args).argv(),
                Now::from_ms(1000),
                &mut Discard(Default::default()),
            );
        }
        let mut out = Vec::new();
        let snapshot = e.snapshot(Now::from_ms(1000));
        write_commands(&snapshot, &mut out, &Pace::default()).unwrap();
        let (mut e2, h2) = engine();
        assert_eq!(replay(&mut e2, h2, &out), Replay::Done);
        assert_eq!(e2.core.dbs[0].len(), 5);
        assert_eq!(e2.core.dbs[2].len(), 1);
        assert_eq!(e2.core.dbs[0].expire_at(b"k"), Some(99999999999999));
        let text = String::from_utf8_lossy(&out);
        assert!(
            text.contains("ZADD\r\n$1\r\nz\r\n") && text.contains("1.5"),
            "{text}"
        );
    }
}
