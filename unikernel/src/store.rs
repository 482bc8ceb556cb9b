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
//!   serialised one chunk (64 KiB) a loop pass ([`Store::step`]), between serving clients;
//!   no fork, no thread, no copy of the dataset.
//!
//! Every save goes to the slot not holding the newest snapshot, is flushed, and only then is
//! that slot's header written (and flushed): a crash at any instant leaves a valid snapshot.

use crate::blk::{Disk, IoError};
use crate::println;
use crate::time::Clock;
use alloc::vec;
use alloc::vec::Vec;
use kayvee_disk::{Geometry, Header, Headers, SlotWriter, SECTOR};
use kayvee_engine::{Engine, Now};
use kayvee_rdb::{RdbWriter, WriteOptions};
use kayvee_session::Clock as _;

/// The disk and what its headers say.
pub struct Store {
    disk: Disk,
    geometry: Geometry,
    /// Each slot's header, `None` where torn (as read at boot, then as written).
    slots: [Option<Header>; 2],
    /// The background save under way.
    background: Option<Writing>,
}

/// A save being written: the RDB writer over a snapshot, and the slot it fills.
struct Writing {
    rdb: RdbWriter,
    slot: SlotWriter,
    buf: Vec<u8>,
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
        store.load(engine, clock);
        engine.core.host.storage = true;
        Some(store)
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
                    "kayvee: disk: blank, formatted: two snapshot slots of {} KiB",
                    geometry.slot_bytes() / 1024
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
        }
    }

    /// Loads the newest snapshot whose checksum holds (an older one if the newest is torn).
    fn load(&mut self, engine: &mut Engine, clock: &Clock) {
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
            return;
        }
        crate::println_later!("kayvee: disk: no snapshot yet: starting empty");
    }

    /// The writer options from the configuration, as kayvee-server's.
    fn write_options(engine: &Engine) -> WriteOptions {
        let cfg = &engine.core.config;
        WriteOptions {
            compress: cfg.rdbcompression,
            checksum: cfg.rdbchecksum,
            used_mem: engine.core.host.used_memory,
            ..WriteOptions::default()
        }
    }

    /// A writer of the engine's snapshot now, into the slot the next save goes to.
    fn begin(&self, engine: &Engine, now: Now) -> Writing {
        let (slot, generation) = kayvee_disk::next_save(&self.slots);
        Writing {
            rdb: RdbWriter::new(engine.snapshot(now), Store::write_options(engine)),
            slot: SlotWriter::new(self.geometry, slot, generation),
            buf: Vec::with_capacity(128 * 1024),
        }
    }

    /// Writes one chunk of `w`; true once the file is complete and its header written.
    fn advance(&mut self, w: &mut Writing, now: Now) -> Result<bool, SaveError> {
        w.buf.clear();
        if w.rdb.next_chunk(&mut w.buf) {
            if let Some((at, run)) = w.slot.push(&w.buf)? {
                self.disk.write(at, &run)?;
            }
            return Ok(false);
        }
        let slot = core::mem::replace(&mut w.slot, SlotWriter::new(self.geometry, 0, 0));
        let (tail, header) = slot.finish(now.ms());
        if let Some((at, run)) = tail {
            self.disk.write(at, &run)?;
        }
        self.disk.flush()?;
        self.disk
            .write(kayvee_disk::header_sector(header.slot), &header.encode())?;
        self.disk.flush()?;
        self.slots[header.slot as usize] = Some(header);
        Ok(true)
    }

    /// SAVE (and SHUTDOWN's save): the whole snapshot now, after any background save.
    pub fn save(&mut self, engine: &mut Engine, clock: &Clock) -> bool {
        self.finish_background(engine, clock);
        let now = clock.now();
        engine.save_started(false, now);
        let mut w = self.begin(engine, now);
        let result = loop {
            match self.advance(&mut w, now) {
                Ok(false) => {}
                Ok(true) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        let now = clock.now();
        match &result {
            Ok(()) => println!("kayvee: DB saved on disk"),
            Err(e) => println!("kayvee: failed saving the DB: {e}"),
        }
        engine.save_finished(result.is_ok(), false, now);
        result.is_ok()
    }

    /// BGSAVE or a save point: the engine counts the save as started already; the snapshot
    /// is taken now and written by [`Store::step`].
    pub fn start_background(&mut self, engine: &mut Engine, now: Now) {
        println!("kayvee: background saving started");
        self.background = Some(self.begin(engine, now));
    }

    /// Whether a background save is under way (the loop must not idle).
    pub fn busy(&self) -> bool {
        self.background.is_some()
    }

    /// One chunk of the background save, if one runs; its end is reported to the engine.
    pub fn step(&mut self, engine: &mut Engine, clock: &Clock) {
        let Some(mut w) = self.background.take() else {
            return;
        };
        let now = clock.now();
        match self.advance(&mut w, now) {
            Ok(false) => self.background = Some(w),
            Ok(true) => {
                println!("kayvee: background saving terminated with success");
                engine.save_finished(true, true, now);
            }
            Err(e) => {
                println!("kayvee: background saving error: {e}");
                engine.save_finished(false, true, now);
            }
        }
    }

    /// Runs the background save to its end (before SAVE or SHUTDOWN).
    fn finish_background(&mut self, engine: &mut Engine, clock: &Clock) {
        while self.busy() {
            self.step(engine, clock);
        }
    }

    /// The cron's part: a save point due (or BGSAVE SCHEDULE waiting) starts a background
    /// save.
    pub fn cron(&mut self, engine: &mut Engine, clock: &Clock) {
        let now = clock.now();
        if !self.busy() && engine.take_due_save(now) {
            self.start_background(engine, now);
        }
    }
}
