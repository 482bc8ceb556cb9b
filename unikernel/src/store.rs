//! Persistence on a virtio-blk disk: the layout is `kayvee-disk`'s (two checksummed headers,
//! two snapshot slots, each snapshot an RDB file as kayvee-server writes it, from the same
//! `kayvee_rdb::RdbWriter`); this module only moves its sectors.
//!
//! - Boot ([`Store::open`]): a blank disk is formatted; otherwise the newest snapshot whose
//!   checksum holds is loaded (an older one if the newest is torn) and reported on the
//!   console. A disk that is too small, unreadable or holds a snapshot that does not load
//!   stops the boot with a message: never a silent empty database.
//! - SAVE and SHUTDOWN's save write the whole snapshot at once ([`Store::save`]).
//! - BGSAVE and the save points ([`Store::start_background`]): the engine's O(1) snapshot is
//!   serialised a chunk (about [`CHUNK_BYTES`]) a [`Store::step`], which the loop runs
//!   between serving clients (see `server::SAVE_SHARE`); the file's 64 KiB runs are written
//!   asynchronously ([`Disk::submit`]), waited for before the flush that precedes the header.
//!   No fork, no thread, no copy of the dataset.
//!
//! Every save goes to the slot not holding the newest snapshot, is flushed, and only then is
//! that slot's header written (and flushed): a crash at any instant leaves a valid snapshot.
//!
//! The append-only log (`appendonly yes`, layout version 2): the engine's propagated commands
//! (the bytes kayvee-server's AOF gets) become one checksummed record a loop pass
//! ([`Store::flush_log`], called before any reply of the pass is handed to a socket), in the
//! log half that follows the current snapshot. `appendfsync always`: the record is flushed
//! before the replies go out; `everysec`: flushed from the cron once a second; `no`: written
//! only. Every snapshot (SAVE, BGSAVE, save points, BGREWRITEAOF, `auto-aof-rewrite-*`) starts
//! a new log: records made while a background one is written go to both logs, and its header
//! switches to the new pair. At boot the snapshot's log is replayed after it; a torn last record
//! is reported and ignored. A log half that cannot take a pass's record gets a snapshot on the
//! spot (its log then starts empty). See `kayvee-disk` for the record format.
//!
//! A full disk (the log half cannot take the record and the snapshot does not fit in its slot
//! either): Redis's rules for a failed AOF write, without its exit under `appendfsync always`.
//! The writes stay in memory (their bytes kept for the log), INFO says
//! `aof_last_write_status:err`, and write commands (and PING) get `-MISCONF Errors writing to
//! the AOF file: No space left on device` while reads are served. Under `always` the replies of
//! the pass whose record failed are held back (nothing unwritten is acknowledged) until the
//! condition clears; under `everysec` and `no` they went out, as in Redis. A background
//! snapshot (a rewrite) is retried in the cron, at most once a second and only when something
//! changed (expiry's or eviction's deletions shrink the dataset), else once a minute; BGSAVE,
//! BGREWRITEAOF and SAVE try too. The first one that fits restarts the log, takes the kept
//! bytes that came after it began, and clears the condition (the held replies go out).
//! `CONFIG SET appendonly no` clears it too (the kept bytes are dropped: the log is off).

use crate::blk::{Disk, IoError};
use crate::println;
use crate::time::Clock;
use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;
use kayvee_disk::{Geometry, Header, Headers, LogWriter, SlotWriter, SECTOR};
use kayvee_engine::save_hook::SaveHook;
use kayvee_engine::{ConnInfo, Discard, Engine, Now, Protocol, Transport};
use kayvee_rdb::{RdbWriter, WriteOptions};
use kayvee_resp::{Decoder, Limits};
use kayvee_session::Clock as _;
use spinning_top::Spinlock;

/// The disk and what its headers say.
pub struct Store {
    disk: Disk,
    geometry: Geometry,
    /// Each slot's header, `None` where torn (as read at boot, then as written).
    slots: [Option<Header>; 2],
    /// The background save under way.
    background: Option<Writing>,
    /// The log of the current snapshot (where the next record goes).
    log: LogWriter,
    /// The current snapshot's length (INFO's `aof_base_size`).
    base_len: u64,
    /// Appending to the log (`appendonly yes` on a disk with a log area).
    appending: bool,
    /// Propagated bytes not yet in a record.
    pending: Vec<u8>,
    /// Records written since the last flush (`everysec`, `no`).
    unflushed: bool,
    /// Uptime of the last log flush.
    last_flush_us: u64,
    /// A BGSAVE that came while a rewrite ran: it starts when the rewrite ends.
    queued_bgsave: bool,
    /// After a failed rewrite, no automatic one before this uptime.
    auto_rewrite_after_us: u64,
    /// The disk is full: `pending` cannot be written and no snapshot fit (see the module doc).
    full: Option<Full>,
    /// Clients whose replies wait for the log to take their writes (`appendfsync always` on
    /// a full disk): handle and client id (a handle is reused by later connections).
    held: Vec<(kayvee_engine::Handle, u64)>,
    /// Clients whose held replies may go out now.
    released: Vec<kayvee_engine::Handle>,
}

/// The state of a full disk.
struct Full {
    /// The replies of the pass that found the disk full are still to be held (`always`).
    hold_next: bool,
    /// No retry of a snapshot before this uptime.
    retry_at_us: u64,
    /// The uptime of the last retry.
    tried_us: u64,
    /// `pending`'s length at the last try (a change means the dataset changed).
    pending_at_try: usize,
}

/// The shortest time between two snapshots tried on a full disk.
const FULL_RETRY_US: u64 = 1_000_000;
/// A snapshot is tried this often on a full disk even if nothing changed.
const FULL_RETRY_IDLE_US: u64 = 60_000_000;
/// `strerror(ENOSPC)`: the end of the MISCONF error a full log gives writes.
const NO_SPACE: &str = "No space left on device";

/// What a background snapshot is for (how its end is reported).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// BGSAVE or a save point.
    Save,
    /// BGREWRITEAOF or `auto-aof-rewrite-*`.
    Rewrite,
}

/// A save being written: the RDB writer of the live databases, the slot it fills, and the log
/// that will follow it.
struct Writing {
    rdb: Arc<Spinlock<RdbWriter>>,
    slot: SlotWriter,
    buf: Vec<u8>,
    log: LogWriter,
    kind: Kind,
    started_us: u64,
    /// Time spent in its steps (the writer's pieces and the disk's submissions), for the log
    /// line that ends it.
    steps_us: u64,
    /// TSC cycles of those steps spent in the RDB writer (serialising).
    rdb_cycles: u64,
    /// Bytes at the start of `Store::pending` when it began: the snapshot holds them, the new
    /// log must not.
    covered: usize,
    /// The most its undo log should hold (see [`Store::save_behind`]).
    undo_budget: usize,
}

/// A save's RDB writer, which walks the live databases between the loop's passes, shared
/// with the engine as its hook while the save runs in the background: before a command
/// changes a key the walk has not passed, the writer keeps the key's old value (an O(1)
/// clone), so the write copies no trie node whatever the save's pace
/// (`kayvee_engine::save_hook`). The hook is not timed: under TCG each TSC read is a
/// helper call that would cost the writes more than the hook's own work. Its lock is never
/// contended: the image has one thread.
struct Hook(Arc<Spinlock<RdbWriter>>);

impl SaveHook for Hook {
    fn before_write(&self, index: usize, key: &[u8], db: kayvee_engine::save_hook::DbView<'_>) {
        self.0.lock().before_write(index, key, db);
    }

    fn replaced(
        &self,
        index: usize,
        key: &[u8],
        old: Option<&kayvee_engine::value::Entry>,
        ttl: Option<u64>,
        db: kayvee_engine::save_hook::DbView<'_>,
    ) {
        self.0.lock().replaced(index, key, old, ttl, db);
    }

    fn before_replace(&self, index: usize, db: kayvee_engine::save_hook::DbView<'_>) {
        self.0.lock().before_replace(index, db);
    }
}

/// Why a save failed (for the console).
enum SaveError {
    Io(IoError),
    Layout(kayvee_disk::DiskError),
}

impl core::fmt::Display for SaveError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SaveError::Io(e) => write!(f, "disk I/O error: {:?}", e.0),
            SaveError::Layout(e) => write!(f, "{e}"),
        }
    }
}

impl From<IoError> for SaveError {
    fn from(e: IoError) -> Self {
        SaveError::Io(e)
    }
}

impl From<kayvee_disk::DiskError> for SaveError {
    fn from(e: kayvee_disk::DiskError) -> Self {
        SaveError::Layout(e)
    }
}

/// The RDB bytes a save step serialises (about: whole keys): small, so that a background save's
/// step keeps a request that lands meanwhile waiting briefly (tens of microseconds under TCG);
/// the slot's runs gather them into `kayvee_disk::RUN_BYTES` writes.
pub const CHUNK_BYTES: usize = 2 * 1024;

/// A background save's undo log is kept to this part of the memory in use when it began
/// (see [`Store::save_behind`]): with the rest of a save's extra memory (the disk's write
/// buffers, replies), well inside a fifth of the dataset.
const UNDO_BUDGET_PART: u64 = 10;

/// How long the automatic rewrite waits after a failed one.
const AUTO_REWRITE_RETRY_US: u64 = 60_000_000;

/// Stops the boot: the disk cannot be used.
fn refuse(why: &str) -> ! {
    println!("kayvee: disk: {why}");
    crate::exit::fail("refusing to start without the data on the disk")
}

impl Store {
    /// Opens the disk `disk=` asks for and loads its newest snapshot into `engine`. `None`:
    /// persistence off (no disk and `disk=auto`, or `disk=none`).
    pub fn open(args: &crate::cmdline::Args, engine: &mut Engine, clock: &Clock) -> Option<Store> {
        use crate::cmdline::DiskUse;
        if args.disk == DiskUse::None {
            return None;
        }
        let disk = match Disk::probe(&args.virtio_mmio) {
            Ok(Some(d)) => d,
            Ok(None) if args.disk == DiskUse::Required => {
                refuse("no virtio-blk device, and disk=required")
            }
            Ok(None) => return None,
            Err(why) => refuse(&why),
        };
        if disk.readonly() {
            refuse(&alloc::format!(
                "the virtio-blk device at {} is read-only",
                disk.at
            ));
        }
        let mut store = Store::mount(disk);
        let loaded = store.load(engine, clock);
        store.replay_log(engine, loaded.as_ref());
        engine.core.host.storage = true;
        if engine.core.config.appendonly {
            if store.geometry.has_log() {
                let fsync = engine.core.config.appendfsync.clone();
                crate::println_later!("kayvee: disk: append only log on (appendfsync {fsync})");
                store.appending = true;
                engine.set_propagation(true);
                engine.core.aof.status.on = true;
            } else {
                println!("kayvee: disk: this disk (layout version 1) has no log area: appendonly stays off (cargo xtask disk create makes one with a log)");
                engine.core.config.appendonly = false;
            }
        }
        store.report(engine);
        Some(store)
    }

    /// Replays the records following the loaded snapshot (`None`: the empty disk's log) and
    /// places the writer after the last whole one. A torn last record is reported and ignored;
    /// a record that is whole but does not replay stops the boot.
    fn replay_log(&mut self, engine: &mut Engine, loaded: Option<&Header>) {
        let (half, log_id) = loaded.map_or((1, 0), |h| (h.log_half(), h.log_id));
        let conn = ConnInfo {
            transport: Transport::Unix { path: "log".into() },
            fd: -1,
        };
        let h = engine.connect(conn, Now { unix_us: 0 });
        if let Some(c) = engine.clients.get_mut(h) {
            c.authenticated = true; // the log's commands ran once already
        }
        // Obeyed as Redis's AOF-loading client: no OOM, MISCONF or READONLY refusal.
        engine.core.replay_client = Some(h);
        let (mut records, mut bad) = (0u64, None);
        let disk = &mut self.disk;
        let end = kayvee_disk::read_log(
            &self.geometry,
            half,
            log_id,
            |at, buf| disk.read(at, buf),
            |payload| {
                if bad.is_none() {
                    if let Err(e) = replay(engine, h, payload) {
                        bad = Some((records, e));
                    }
                }
                records += 1;
            },
        );
        engine.core.replay_client = None;
        engine.disconnect(h);
        let end = end.unwrap_or_else(|e| refuse(&alloc::format!("cannot read the log: {:?}", e.0)));
        if let Some((seq, why)) = bad {
            refuse(&alloc::format!("log record {seq} does not replay: {why}"));
        }
        if let Some(seq) = end.torn {
            println!(
                "kayvee: disk: the log's last record (number {seq}) is incomplete or fails its checksum: ignored (a write cut short)"
            );
        }
        if records > 0 {
            println!(
                "kayvee: disk: replayed {records} log records ({} bytes of commands) after snapshot generation {}",
                end.bytes,
                loaded.map_or(0, |h| h.generation)
            );
            engine.core.stats.dirty = 0;
        }
        self.log = end.writer;
    }

    /// Reads the headers (formatting a blank disk).
    fn mount(mut disk: Disk) -> Store {
        let sectors = disk.sectors();
        let mut head = vec![0u8; 9 * SECTOR];
        if let Err(e) = disk.read(0, &mut head) {
            refuse(&alloc::format!(
                "cannot read the headers at {}: {:?}",
                disk.at,
                e.0
            ));
        }
        let headers = kayvee_disk::read_headers(&head[..SECTOR], &head[8 * SECTOR..], sectors);
        let (geometry, slots) = match headers {
            Ok(Headers::Formatted { geometry, slots }) => (geometry, slots),
            Ok(Headers::Blank) => {
                let geometry = Geometry::for_disk(sectors).unwrap_or_else(|e| {
                    refuse(&alloc::format!("{} sectors at {}: {e}", sectors, disk.at))
                });
                let slots = [Header::empty(0, geometry), Header::empty(1, geometry)];
                let format = slots
                    .iter()
                    .try_for_each(|h| disk.write(kayvee_disk::header_sector(h.slot), &h.encode()));
                if let Err(e) = format.and_then(|()| disk.flush()) {
                    refuse(&alloc::format!("cannot format the blank disk: {:?}", e.0));
                }
                crate::println_later!(
                    "kayvee: disk: blank, formatted: two snapshot slots of {} KiB, two log halves of {} KiB",
                    geometry.slot_bytes() / 1024,
                    geometry.log_half_sectors() * SECTOR as u64 / 1024
                );
                (geometry, slots.map(Some))
            }
            Err(e) => refuse(&alloc::format!("{} ({} sectors): {e}", disk.at, sectors)),
        };
        let (at, flush) = (disk.at.clone(), disk.flush_offered);
        crate::println_later!(
            "kayvee: disk: virtio-blk at {at}, {} MiB, flush {}; snapshot slots of {} KiB",
            (sectors * SECTOR as u64) >> 20,
            if flush {
                "offered"
            } else {
                "not offered (write-through)"
            },
            geometry.slot_bytes() / 1024
        );
        Store {
            disk,
            geometry,
            slots,
            background: None,
            log: LogWriter::new(&geometry, 1, 0),
            base_len: 0,
            appending: false,
            pending: Vec::new(),
            unflushed: false,
            last_flush_us: 0,
            queued_bgsave: false,
            auto_rewrite_after_us: 0,
            full: None,
            held: Vec::new(),
            released: Vec::new(),
        }
    }

    /// Loads the newest snapshot whose checksum holds (an older one if the newest is torn);
    /// returns its header.
    fn load(&mut self, engine: &mut Engine, clock: &Clock) -> Option<Header> {
        for h in kayvee_disk::candidates(&self.slots) {
            let mut bytes = vec![0u8; h.snapshot_sectors() as usize * SECTOR];
            let start = self.geometry.slot_start(h.slot);
            if let Err(e) = self.disk.read(start, &mut bytes) {
                refuse(&alloc::format!(
                    "cannot read snapshot slot {}: {:?}",
                    h.slot,
                    e.0
                ));
            }
            let Ok(rdb) = h.verify(&bytes) else {
                println!(
                    "kayvee: disk: snapshot generation {} (slot {}) fails its checksum: trying the older one",
                    h.generation, h.slot
                );
                continue;
            };
            let now = clock.now();
            let opts = kayvee_rdb::LoadOptions {
                config: &engine.core.config,
                seed: engine.core.seed,
                now_ms: now.ms(),
            };
            let loaded = kayvee_rdb::load(rdb, &opts).unwrap_or_else(|e| {
                refuse(&alloc::format!(
                    "snapshot generation {} (slot {}) does not load: {e}",
                    h.generation,
                    h.slot
                ))
            });
            println!(
                "kayvee: disk: loaded snapshot generation {} (slot {}, {} bytes, saved at unix ms {}): {} keys, {} expired dropped",
                h.generation, h.slot, h.len, h.saved_ms, loaded.keys_loaded, loaded.keys_expired
            );
            engine.load_dbs(loaded.dbs, loaded.keys_loaded, loaded.keys_expired, now);
            if let Err(e) = engine.load_functions(&loaded.functions, false) {
                refuse(&alloc::format!(
                    "snapshot generation {} (slot {}) does not load: {e}",
                    h.generation,
                    h.slot
                ));
            }
            self.base_len = h.len;
            return Some(h);
        }
        crate::println_later!("kayvee: disk: no snapshot yet: starting empty");
        None
    }

    /// The writer options from the configuration, as kayvee-server's.
    fn write_options(engine: &Engine) -> WriteOptions {
        let cfg = &engine.core.config;
        WriteOptions {
            compress: cfg.rdbcompression,
            checksum: cfg.rdbchecksum,
            used_mem: engine.core.host.used_memory,
            chunk_len: CHUNK_BYTES,
            ..WriteOptions::default()
        }
    }

    /// A writer of the engine's snapshot now, into the slot the next save goes to, with the
    /// log that will follow it (a new nonce). The log's propagated stream restarts (a SELECT
    /// comes first): records from here on also go to the new log.
    fn begin(&mut self, engine: &mut Engine, clock: &Clock, kind: Kind) -> Writing {
        let now = clock.now();
        let (slot, generation) = kayvee_disk::next_save(&self.slots);
        if self.appending {
            engine.drain_propagated(&mut self.pending);
        }
        engine.reset_propagation_db();
        let log_id = (crate::port::rdtsc() ^ now.unix_us.rotate_left(29)) | 1;
        // A failure of an earlier save's writes is that save's.
        self.disk.drain();
        let _ = self.disk.take_failure();
        Writing {
            rdb: Arc::new(Spinlock::new(RdbWriter::live(
                engine.snapshot(now),
                Store::write_options(engine),
            ))),
            slot: SlotWriter::new(self.geometry, slot, generation),
            buf: Vec::with_capacity(128 * 1024),
            log: LogWriter::new(&self.geometry, slot, log_id),
            kind,
            started_us: clock.uptime_us(),
            steps_us: 0,
            rdb_cycles: 0,
            covered: self.pending.len(),
            undo_budget: (crate::heap::used_bytes() / UNDO_BUDGET_PART) as usize,
        }
    }

    /// Writes one chunk of `w`; true once the file is complete and its header written (the
    /// new snapshot and its log are then the current pair).
    fn advance(&mut self, w: &mut Writing, engine: &Engine, now: Now) -> Result<bool, SaveError> {
        self.disk.reap();
        if let Some(e) = self.disk.take_failure() {
            return Err(e.into());
        }
        w.buf.clear();
        let t0 = crate::port::rdtsc();
        let more = w.rdb.lock().next_chunk_of(&engine.core.dbs, &mut w.buf);
        w.rdb_cycles += crate::port::rdtsc().wrapping_sub(t0);
        if more {
            self.push_run(w)?;
            return Ok(false);
        }
        let slot = core::mem::replace(&mut w.slot, SlotWriter::new(self.geometry, 0, 0));
        let crc = w.rdb.lock().file_crc().expect("the RDB file is complete");
        let (tail, header) = slot.finish_with_crc(crc, now.ms(), w.log.log_id);
        if let Some((at, run)) = tail {
            self.disk.write(at, &run)?;
        }
        // Every run of the file is complete (a synchronous request waits for them) and, once
        // flushed, on stable storage before the header names it.
        self.disk.flush()?;
        if let Some(e) = self.disk.take_failure() {
            return Err(e.into());
        }
        self.disk
            .write(kayvee_disk::header_sector(header.slot), &header.encode())?;
        self.disk.flush()?;
        self.slots[header.slot as usize] = Some(header);
        self.log = w.log.clone();
        self.base_len = header.len;
        Ok(true)
    }

    /// Hands `w.buf` to the slot; a full run goes to the disk.
    fn push_run(&mut self, w: &mut Writing) -> Result<(), SaveError> {
        // The writer computes the file's CRC-64 (the header's) as it goes.
        if let Some((at, run)) = w.slot.push_unhashed(&w.buf)? {
            // Written while the loop goes on; waited for before the header's flush.
            self.disk.submit(at, run);
        }
        Ok(())
    }

    /// Writes a whole snapshot now (the loop waits).
    fn snapshot_now(&mut self, engine: &mut Engine, clock: &Clock) -> Result<(), SaveError> {
        let mut w = self.begin(engine, clock, Kind::Save);
        let now = clock.now();
        while !self.advance(&mut w, engine, now)? {}
        self.log_restarted(engine, w.covered);
        Ok(())
    }

    /// A snapshot's header landed: its log is the current one. The kept bytes it holds are
    /// dropped; on a full disk the rest (made while it was written) becomes the new log's
    /// first record, and writes are accepted again.
    fn log_restarted(&mut self, engine: &mut Engine, covered: usize) {
        self.pending.drain(..covered.min(self.pending.len()));
        if self.full.is_none() {
            return;
        }
        if !self.pending.is_empty() {
            match self.append(engine) {
                Ok(()) => {}
                Err(SaveError::Layout(_)) => return, // still too much: the next try
                Err(SaveError::Io(e)) => self.io_failed(engine, &e),
            }
        }
        self.full = None;
        let s = &mut engine.core.aof.status;
        s.last_write_ok = true;
        s.last_write_error.clear();
        self.released
            .extend(core::mem::take(&mut self.held).into_iter().map(|(h, _)| h));
        println!("kayvee: disk: the log has room again (a snapshot restarted it): writes accepted");
    }

    /// Flushes the disk's write cache (what the log wrote is then durable); at `up_us` of
    /// uptime. A failure stops the machine ([`Store::io_failed`]).
    fn flush_disk(&mut self, engine: &mut Engine, up_us: u64) {
        if let Err(e) = self.disk.flush() {
            self.io_failed(engine, &e);
        }
        (self.last_flush_us, self.unflushed) = (up_us, false);
    }

    /// DEBUG LOADAOF: the dataset read back from the disk as the next boot reads it (the
    /// newest snapshot, then the log records that follow it), once a running background save
    /// has ended and this pass's records are written and flushed. A full log refuses (the
    /// unwritten records would be lost); a disk that no longer reads stops the machine, as
    /// Redis and kayvee-server exit when the file does not load (the dataset is gone by then).
    pub fn reload(
        &mut self,
        engine: &mut Engine,
        clock: &Clock,
    ) -> Result<(), alloc::string::String> {
        self.finish_background(engine, clock);
        self.flush_log(engine, clock);
        if self.full.is_some() {
            return Err(alloc::format!(
                "MISCONF Errors writing to the AOF file: {NO_SPACE}"
            ));
        }
        if self.unflushed {
            self.flush_disk(engine, clock.uptime_us());
        }
        let propagating = engine.begin_reload(clock.now());
        let loaded = self.load(engine, clock);
        self.replay_log(engine, loaded.as_ref());
        engine.end_reload(propagating);
        self.report(engine);
        println!("kayvee: disk: the dataset was read back from the disk by DEBUG LOADAOF");
        Ok(())
    }

    /// SAVE (and SHUTDOWN's save): the whole snapshot now, after any background save.
    pub fn save(&mut self, engine: &mut Engine, clock: &Clock) -> bool {
        self.finish_background(engine, clock);
        // What this pass propagated goes to the log first if it fits (the snapshot holds it
        // anyway: on success it is dropped).
        self.flush_log_or_keep(engine);
        let now = clock.now();
        engine.save_started(false, now);
        let result = self.snapshot_now(engine, clock);
        let now = clock.now();
        match &result {
            Ok(()) => println!("kayvee: DB saved on disk"),
            Err(e) => println!("kayvee: failed saving the DB: {e}"),
        }
        engine.save_finished(result.is_ok(), false, now);
        self.report(engine);
        result.is_ok()
    }

    /// BGSAVE, a save point (the engine counts the save as started already), BGREWRITEAOF or
    /// an automatic rewrite: the snapshot is taken now and written by [`Store::step`]. A BGSAVE
    /// while a rewrite runs starts when it ends.
    pub fn start_background(&mut self, engine: &mut Engine, clock: &Clock, kind: Kind) {
        if self.busy() {
            self.queued_bgsave |= kind == Kind::Save;
            return;
        }
        // The records before the snapshot belong to the current log only.
        self.flush_log(engine, clock);
        match kind {
            Kind::Save => println!("kayvee: background saving started"),
            Kind::Rewrite => {
                println!("kayvee: background append only file rewriting started");
                let s = &mut engine.core.aof.status;
                s.rewrite_requested = false;
                s.rewrite_scheduled = false;
                engine.aof_rewrite_started(clock.now());
            }
        }
        let w = self.begin(engine, clock, kind);
        engine.set_save_hook(Some(Arc::new(Hook(w.rdb.clone()))));
        self.background = Some(w);
    }

    /// Whether a background save is under way (the loop must not idle).
    pub fn busy(&self) -> bool {
        self.background.is_some()
    }

    /// Whether a background save's undo log holds more than its budget (a tenth of the memory
    /// in use when the save began): the loop then gives the save a bigger share of its time,
    /// so that its walk passes, and lets go of, the kept values sooner. Under a fast writer
    /// the log grows with the save's length; this bounds it.
    pub fn save_behind(&self) -> bool {
        self.background
            .as_ref()
            .is_some_and(|w| w.rdb.lock().kept_bytes() > w.undo_budget)
    }

    /// One chunk of the background save, if one runs; its end is reported to the engine.
    pub fn step(&mut self, engine: &mut Engine, clock: &Clock) {
        let Some(mut w) = self.background.take() else {
            return;
        };
        let now = clock.now();
        let t0 = clock.uptime_us();
        let advanced = self.advance(&mut w, engine, now);
        w.steps_us += clock.uptime_us().saturating_sub(t0);
        let result = match advanced {
            Ok(false) => {
                self.background = Some(w);
                return;
            }
            Ok(true) => {
                self.log_restarted(engine, w.covered);
                Ok(())
            }
            Err(e) => Err(e),
        };
        engine.set_save_hook(None);
        let (kept, peak, written) = {
            let r = w.rdb.lock();
            (r.kept().0, r.kept_peak_bytes(), r.keys_written())
        };
        if kept > 0 {
            println!(
                "kayvee: the snapshot kept the old values of {kept} of its {written} keys, changed ahead of its walk (at most {} KiB at once)",
                peak / 1024
            );
        }
        let took_us = clock.uptime_us().saturating_sub(w.started_us);
        println!(
            "kayvee: the snapshot of {written} keys took {} ms, {} ms of them in its own steps, {} ms serialising in order",
            took_us / 1000,
            w.steps_us / 1000,
            clock.cycles_us(w.rdb_cycles) / 1000
        );
        self.finished(engine, clock, w.kind, w.started_us, result);
        if core::mem::take(&mut self.queued_bgsave) {
            self.start_background(engine, clock, Kind::Save);
        }
    }

    /// Reports the end of a background snapshot of `kind`.
    fn finished(
        &mut self,
        engine: &mut Engine,
        clock: &Clock,
        kind: Kind,
        started_us: u64,
        result: Result<(), SaveError>,
    ) {
        let now = clock.now();
        match (kind, &result) {
            (Kind::Save, Ok(())) => println!("kayvee: background saving terminated with success"),
            (Kind::Save, Err(e)) => println!("kayvee: background saving error: {e}"),
            (Kind::Rewrite, Ok(())) => {
                println!("kayvee: background AOF rewrite finished successfully")
            }
            (Kind::Rewrite, Err(e)) => println!("kayvee: background AOF rewrite failed: {e}"),
        }
        match kind {
            Kind::Save => engine.save_finished(result.is_ok(), true, now),
            Kind::Rewrite => {
                let s = &mut engine.core.aof.status;
                s.rewrite_started_ms = None;
                s.last_rewrite_time_s =
                    (clock.uptime_us().saturating_sub(started_us) / 1_000_000) as i64;
                s.last_bgrewrite_ok = result.is_ok();
                if result.is_ok() {
                    s.rewrites += 1;
                    s.consecutive_failures = 0;
                } else {
                    s.consecutive_failures += 1;
                    // The automatic rewrite waits a minute before it tries again.
                    self.auto_rewrite_after_us = clock.uptime_us() + AUTO_REWRITE_RETRY_US;
                }
            }
        }
        self.report(engine);
    }

    /// Runs the background save to its end (before SAVE or SHUTDOWN).
    fn finish_background(&mut self, engine: &mut Engine, clock: &Clock) {
        while self.busy() {
            self.step(engine, clock);
        }
    }

    /// The cron's part: a save point due (or BGSAVE SCHEDULE waiting) starts a background
    /// save; the log is flushed once a second under `everysec`; a log grown past
    /// `auto-aof-rewrite-percentage` of the snapshot (and `-min-size`), or past half its
    /// half, gets a rewrite.
    pub fn cron(&mut self, engine: &mut Engine, clock: &Clock) {
        let now = clock.now();
        if !self.busy() && engine.take_due_save(now) {
            self.start_background(engine, clock, Kind::Save);
        }
        self.flush_log(engine, clock);
        let up = clock.uptime_us();
        if self.unflushed
            && engine.core.config.appendfsync != "no"
            && up.saturating_sub(self.last_flush_us) >= 1_000_000
        {
            self.flush_disk(engine, up);
        }
        let busy = self.busy();
        if let Some(full) = self.full.as_mut().filter(|_| !busy) {
            let changed = self.pending.len() != full.pending_at_try;
            let due = up.saturating_sub(full.tried_us) >= FULL_RETRY_IDLE_US;
            if up >= full.retry_at_us && (changed || due) {
                (full.tried_us, full.retry_at_us) = (up, up + FULL_RETRY_US);
                full.pending_at_try = self.pending.len();
                println!("kayvee: disk: the log is full: trying a snapshot to restart it");
                self.start_background(engine, clock, Kind::Rewrite);
            }
        } else if self.appending
            && !self.busy()
            && up >= self.auto_rewrite_after_us
            && self.rewrite_due(engine)
        {
            println!("kayvee: starting automatic rewriting of the append only log");
            self.start_background(engine, clock, Kind::Rewrite);
        }
    }

    /// `auto-aof-rewrite-percentage`/`-min-size` over the snapshot's size (Redis's rule with
    /// the snapshot as the base), or the log half more than half full.
    fn rewrite_due(&self, engine: &Engine) -> bool {
        let c = &engine.core.config;
        let used = self.log.used_bytes();
        let size = self.base_len + used;
        let base = self.base_len.max(1);
        let by_rule = c.auto_aof_rewrite_percentage > 0
            && size >= c.auto_aof_rewrite_min_size
            && (size - base.min(size)) * 100 / base >= c.auto_aof_rewrite_percentage as u64;
        by_rule || self.log.used_sectors() * 2 >= self.log.capacity_sectors()
    }

    /// After each pass's commands: `CONFIG SET appendonly` (on: a snapshot first, so the log
    /// that starts holds every later write; off: the last record flushed), BGREWRITEAOF
    /// (queued behind a running BGSAVE, as Redis does).
    pub fn after_pass(&mut self, engine: &mut Engine, clock: &Clock) {
        let wanted = engine.core.config.appendonly;
        if wanted && !self.appending {
            if !self.geometry.has_log() {
                println!("kayvee: disk: this disk (layout version 1) has no log area: appendonly stays off");
                engine.core.config.appendonly = false;
            } else {
                self.finish_background(engine, clock);
                match self.snapshot_now(engine, clock) {
                    Ok(()) => {
                        println!(
                            "kayvee: append only log turned on (a snapshot was written first)"
                        );
                        self.appending = true;
                        engine.set_propagation(true);
                        engine.core.aof.status.on = true;
                    }
                    Err(e) => {
                        println!("kayvee: cannot turn the append only log on: {e}");
                        engine.core.config.appendonly = false;
                    }
                }
                self.report(engine);
            }
        } else if !wanted && self.appending {
            self.flush_log(engine, clock);
            if let Err(e) = self.disk.flush() {
                self.io_failed(engine, &e);
            }
            if self.full.take().is_some() {
                println!(
                    "kayvee: disk: append only log turned off on a full disk: {} bytes of writes never reached it",
                    self.pending.len()
                );
                self.pending.clear();
                let s = &mut engine.core.aof.status;
                s.last_write_ok = true;
                s.last_write_error.clear();
                self.released
                    .extend(core::mem::take(&mut self.held).into_iter().map(|(h, _)| h));
            }
            self.appending = false;
            engine.set_propagation(false);
            engine.core.aof.status.on = false;
        }
        let s = &mut engine.core.aof.status;
        if s.rewrite_scheduled && !self.busy() {
            s.rewrite_requested = true;
        }
        if engine.core.aof.status.rewrite_requested && !self.busy() {
            self.start_background(engine, clock, Kind::Rewrite);
        }
    }

    /// Writes this pass's propagated commands as a record of the current log (and of the
    /// log of the snapshot being written), flushed under `appendfsync always`: called before
    /// any reply of the pass is handed to a socket. A log that cannot take the record gets a
    /// snapshot now instead (it holds those writes; its log starts empty).
    pub fn flush_log(&mut self, engine: &mut Engine, clock: &Clock) {
        if !self.appending {
            return;
        }
        engine.drain_propagated(&mut self.pending);
        if self.pending.is_empty() {
            return;
        }
        if self.full.is_some() {
            // Kept until a snapshot restarts the log.
            self.report(engine);
            return;
        }
        match self.append(engine) {
            Ok(()) => {}
            Err(SaveError::Layout(_)) => self.snapshot_for_full_log(engine, clock),
            Err(SaveError::Io(e)) => self.io_failed(engine, &e),
        }
        self.report(engine);
    }

    /// As [`Store::flush_log`], but a full log keeps the bytes (the caller is writing a
    /// snapshot that holds them).
    fn flush_log_or_keep(&mut self, engine: &mut Engine) {
        if !self.appending {
            return;
        }
        engine.drain_propagated(&mut self.pending);
        if self.pending.is_empty() || self.full.is_some() {
            return;
        }
        if let Err(SaveError::Io(e)) = self.append(engine) {
            self.io_failed(engine, &e);
        }
    }

    /// Appends `pending` as one record to the current log, and what the snapshot being
    /// written does not hold to its new log.
    fn append(&mut self, engine: &Engine) -> Result<(), SaveError> {
        let len = self.pending.len();
        let (at, run) = self.log.record(&self.pending)?;
        let next = match &self.background {
            Some(w) if w.covered < len => {
                let tail = &self.pending[w.covered..];
                Some((w.log.record(tail)?, tail.len()))
            }
            _ => None,
        };
        self.disk.write(at, &run)?;
        if let Some(((at, run), _)) = &next {
            self.disk.write(*at, run)?;
        }
        if engine.core.config.appendfsync == "always" {
            self.disk.flush()?;
        } else {
            self.unflushed = true;
        }
        self.log.advance(len);
        if let Some(w) = self.background.as_mut() {
            if let Some((_, tail)) = next {
                w.log.advance(tail);
            }
            w.covered = 0;
        }
        self.pending.clear();
        Ok(())
    }

    /// The log cannot take this pass's record: a snapshot on the spot (the background one,
    /// if any, is replaced by it and reported as done, or as failed with it). Without room
    /// for the snapshot either, the disk is full (see the module doc).
    fn snapshot_for_full_log(&mut self, engine: &mut Engine, clock: &Clock) {
        println!("kayvee: disk: the log is full: writing a snapshot now");
        let replaced = self.background.take();
        let result = self.snapshot_now(engine, clock);
        if let Some(w) = replaced {
            let outcome = match &result {
                Ok(()) => Ok(()),
                Err(_) => Err(SaveError::Layout(kayvee_disk::DiskError::SlotFull)),
            };
            self.finished(engine, clock, w.kind, w.started_us, outcome);
        }
        match result {
            Ok(()) => {}
            Err(SaveError::Io(e)) => self.io_failed(engine, &e),
            Err(SaveError::Layout(e)) => {
                println!("kayvee: disk: Error writing to the append only log: the log is full and the snapshot does not fit ({e}): writes refused (MISCONF) until a snapshot fits");
                let up = clock.uptime_us();
                self.full = Some(Full {
                    hold_next: engine.core.config.appendfsync == "always",
                    retry_at_us: up + FULL_RETRY_US,
                    tried_us: up,
                    pending_at_try: self.pending.len(),
                });
                let s = &mut engine.core.aof.status;
                s.last_write_ok = false;
                s.last_write_error = NO_SPACE.into();
            }
        }
    }

    /// Takes out of `dirty` the clients whose replies must wait: on the pass that found the
    /// disk full under `appendfsync always`, every client with output (its replies may tell
    /// of writes the log does not hold); afterwards, those same clients until the log has
    /// room again.
    pub fn hold_replies(&mut self, engine: &Engine, dirty: &mut Vec<kayvee_engine::Handle>) {
        let id = |h| engine.clients.get(h).map(|c| c.id);
        if let Some(full) = self.full.as_mut().filter(|f| f.hold_next) {
            full.hold_next = false;
            let held = dirty.drain(..).filter_map(|h| Some((h, id(h)?)));
            self.held.extend(held);
            return;
        }
        if !self.held.is_empty() {
            let held = &self.held;
            dirty.retain(|&h| !held.iter().any(|&(k, i)| k == h && id(h) == Some(i)));
        }
    }

    /// Clients whose held replies may go out now (the shell marks them writable).
    pub fn take_released(&mut self) -> Vec<kayvee_engine::Handle> {
        core::mem::take(&mut self.released)
    }

    /// A failed log write or flush: the promise made to clients cannot be kept (Redis exits
    /// too under `appendfsync always`).
    fn io_failed(&mut self, engine: &mut Engine, e: &IoError) -> ! {
        engine.core.aof.status.last_write_ok = false;
        println!(
            "kayvee: disk: writing the append only log failed: {:?}",
            e.0
        );
        crate::exit::fail("the append only log cannot be written")
    }

    /// SHUTDOWN: the last record written and flushed.
    pub fn close(&mut self, engine: &mut Engine, clock: &Clock) {
        self.flush_log(engine, clock);
        if self.full.is_some() {
            println!(
                "kayvee: disk: the log is full: {} bytes of writes made since are not on the disk",
                self.pending.len()
            );
        }
        if let Err(e) = self.disk.flush() {
            self.io_failed(engine, &e);
        }
    }

    /// The sizes INFO persistence reports (`aof_base_size`: the snapshot; `aof_current_size`:
    /// it and the log).
    fn report(&self, engine: &mut Engine) {
        let s = &mut engine.core.aof.status;
        s.base_size = self.base_len;
        s.current_size = self.base_len + self.log.used_bytes();
    }
}

/// Runs one record's commands through client `h`, without replies and without expiry (time
/// 0, as kayvee-server's AOF loader: the log's DELs carry the expirations).
fn replay(engine: &mut Engine, h: kayvee_engine::Handle, bytes: &[u8]) -> Result<(), &'static str> {
    let limits = Limits {
        bulk_len_max: usize::MAX / 2,
        query_buffer_max: usize::MAX / 2,
    };
    let mut decoder = Decoder::new(limits);
    let mut sink = Discard(Protocol::Resp2);
    let mut used = 0;
    while used < bytes.len() {
        let frame = match decoder.decode(&bytes[used..], true) {
            Ok(Some(f)) => f,
            Ok(None) => return Err("a command cut short"),
            Err(_) => return Err("not RESP commands"),
        };
        engine.execute(h, &frame.argv, Now { unix_us: 0 }, &mut sink);
        used += frame.consumed;
    }
    Ok(())
}
