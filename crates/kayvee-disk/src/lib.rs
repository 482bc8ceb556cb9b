//! The unikernel's disk layout (sans-IO): where snapshots and the append-only log live on a
//! block device and how a save switches to a new snapshot so that a crash at any instant
//! leaves a valid snapshot and the log of the writes made after it.
//!
//! ```text
//!  sector 0      header of slot 0  (one 512-byte sector, 4 KiB apart so no torn write of a
//!  sector 8      header of slot 1   4 KiB device block can touch both)
//!  sector 2048   slot 0: an RDB file (kayvee-rdb's output, byte for byte), zero padded
//!  ...           slot 1: the same
//!  ...           log half 0: the records following slot 0's snapshot (layout version 2)
//!  ...           log half 1: the records following slot 1's snapshot
//! ```
//!
//! Layout version 2 splits the space after the headers in three: two slots and the log area
//! (two halves). Version 1 disks (two slots of half the disk each, no log) are still read and
//! written; they have no log (`appendonly` is refused on them).
//!
//! **The log.** Each snapshot header carries a `log_id` (a nonce chosen when its save began).
//! The records that follow that snapshot live in the log half of the same slot, from its first
//! sector on, each starting on a fresh sector ([`encode_record`]: magic, the `log_id`, a
//! sequence number from 0, the payload's length, a CRC-64 over all of it, then the payload: the
//! engine's propagated RESP commands of one loop pass). A record is appended, never rewritten;
//! the log ends at the first sector that is not the next record of this `log_id` and sequence
//! ([`read_log`]); a record whose head matches but whose checksum fails is a write cut short by
//! a crash (reported as torn, and overwritten by the next append). A save writes the records
//! made while it runs to both logs: the current one, and the new snapshot's (from sequence 0);
//! when its header lands the new pair is current, and until then the old pair still is.
//! Stale records from an earlier use of a half, or from a save that never finished, carry
//! another `log_id` and end the log.
//!
//! Each header names its own slot: the layout (total sectors, the slot's start and size), the
//! snapshot's generation, length, CRC-64 and save time, and a CRC-64 of the header itself. A
//! save writes the slot *not* holding the newest valid snapshot, flushes, then writes that
//! slot's header with the next generation and flushes again. Until the header write lands the
//! newest snapshot is the old one, untouched; a torn header fails its checksum and the other
//! slot's header is still whole. At boot the newest header whose snapshot also passes its
//! checksum wins ([`candidates`]). Generation 0 marks a formatted, empty slot.
//!
//! The shell (the unikernel's virtio-blk, or the xtask's file) only moves sectors:
//! [`SlotWriter`] turns the RDB writer's chunks into whole-sector runs and the final header.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

use alloc::vec::Vec;

/// Bytes per sector (virtio-blk's unit).
pub const SECTOR: usize = 512;
/// The first sector of slot data (1 MiB in): the headers' area before it.
pub const DATA_START: u64 = 2048;
/// Smallest slot: a disk must hold at least two of these after [`DATA_START`] (1 MiB each).
pub const SLOT_MIN_SECTORS: u64 = 2048;
/// Header magic.
pub const MAGIC: [u8; 8] = *b"KAYVEEDK";
/// Layout version written on new disks (version 2: slots and a log area).
pub const LAYOUT_VERSION: u32 = 2;
/// The first layout: two slots of half the disk each, no log area (still read and written).
pub const LAYOUT_VERSION_1: u32 = 1;
/// Log record magic.
pub const RECORD_MAGIC: [u8; 8] = *b"KVLOGREC";
/// Bytes of a log record's head before its payload.
pub const RECORD_HEAD: usize = 40;
/// Bytes [`SlotWriter`] gathers before it hands out a run of sectors to write.
pub const RUN_BYTES: usize = 64 * 1024;

/// CRC-64/Jones (Redis's), for headers and snapshots (slice-by-16 tables: a snapshot's every
/// byte goes through it).
static CRC: crc::Crc<u64, crc::Table<16>> =
    crc::Crc::<u64, crc::Table<16>>::new(&crc::CRC_64_REDIS);

/// What can be wrong with a disk or a header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskError {
    /// The disk is smaller than two slots of [`SLOT_MIN_SECTORS`] after [`DATA_START`].
    TooSmall,
    /// A header sector of zeros: never written.
    Blank,
    /// Not our magic, an unknown layout version, or a failed header checksum.
    BadHeader,
    /// The header describes a layout larger than the disk.
    LayoutMismatch,
    /// The snapshot does not fit in a slot.
    SlotFull,
    /// The log record does not fit in what is left of its log half.
    LogFull,
    /// The snapshot's bytes do not match the header's length and checksum.
    BadSnapshot,
}

impl core::fmt::Display for DiskError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            DiskError::TooSmall => "the disk is too small (at least 4 MiB)",
            DiskError::Blank => "the header sector is blank",
            DiskError::BadHeader => "the header is not a Kayvee disk header or fails its checksum",
            DiskError::LayoutMismatch => "the header describes a larger disk than this one",
            DiskError::SlotFull => "the snapshot does not fit in a slot",
            DiskError::LogFull => "the log is full",
            DiskError::BadSnapshot => "the snapshot fails its length or checksum",
        })
    }
}

/// Where the slots are on a disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// The disk's size in sectors when it was formatted.
    pub total_sectors: u64,
    /// Sectors per slot.
    pub slot_sectors: u64,
    /// Sectors of the log area after the slots (two equal halves); 0 on a version 1 disk.
    pub log_sectors: u64,
}

impl Geometry {
    /// The layout for a disk of `total_sectors` (version 2): a third of the space after
    /// [`DATA_START`] for each slot and a third for the log area (8 KiB multiples).
    pub fn for_disk(total_sectors: u64) -> Result<Geometry, DiskError> {
        let part = (total_sectors.saturating_sub(DATA_START) / 3) & !15;
        if part < SLOT_MIN_SECTORS {
            return Err(DiskError::TooSmall);
        }
        Ok(Geometry {
            total_sectors,
            slot_sectors: part,
            log_sectors: part,
        })
    }

    /// The version 1 layout of a disk of `total_sectors`: two equal slots, no log.
    pub fn for_disk_v1(total_sectors: u64) -> Result<Geometry, DiskError> {
        let slot_sectors = (total_sectors.saturating_sub(DATA_START) / 2) & !7;
        if slot_sectors < SLOT_MIN_SECTORS {
            return Err(DiskError::TooSmall);
        }
        Ok(Geometry {
            total_sectors,
            slot_sectors,
            log_sectors: 0,
        })
    }

    /// The layout version this geometry is written with.
    pub fn version(&self) -> u32 {
        match self.log_sectors {
            0 => LAYOUT_VERSION_1,
            _ => LAYOUT_VERSION,
        }
    }

    /// Whether the disk has a log area.
    pub fn has_log(&self) -> bool {
        self.log_sectors > 0
    }

    /// The first sector of log half `half` (0 or 1).
    pub fn log_start(&self, half: u32) -> u64 {
        DATA_START + 2 * self.slot_sectors + u64::from(half) * self.log_half_sectors()
    }

    /// Sectors per log half.
    pub fn log_half_sectors(&self) -> u64 {
        self.log_sectors / 2
    }

    /// The first sector of slot `slot` (0 or 1).
    pub fn slot_start(&self, slot: u32) -> u64 {
        DATA_START + u64::from(slot) * self.slot_sectors
    }

    /// Bytes a slot holds.
    pub fn slot_bytes(&self) -> u64 {
        self.slot_sectors * SECTOR as u64
    }
}

/// The sector holding slot `slot`'s header.
pub fn header_sector(slot: u32) -> u64 {
    u64::from(slot) * 8
}

/// One slot's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Which slot (0 or 1) this header describes.
    pub slot: u32,
    /// The layout.
    pub geometry: Geometry,
    /// Save counter: the newest valid snapshot has the highest; 0 = an empty slot.
    pub generation: u64,
    /// The snapshot's length in bytes (an RDB file).
    pub len: u64,
    /// CRC-64 of the snapshot's `len` bytes.
    pub crc: u64,
    /// Unix milliseconds of the save.
    pub saved_ms: u64,
    /// The nonce the log records following this snapshot carry (0: an empty slot's).
    pub log_id: u64,
}

impl Header {
    /// An empty slot's header (a freshly formatted disk).
    pub fn empty(slot: u32, geometry: Geometry) -> Header {
        Header {
            slot,
            geometry,
            generation: 0,
            len: 0,
            crc: 0,
            saved_ms: 0,
            log_id: 0,
        }
    }

    /// The log half holding the records that follow this snapshot (its slot's).
    pub fn log_half(&self) -> u32 {
        self.slot
    }

    /// The header's sector.
    pub fn encode(&self) -> [u8; SECTOR] {
        let mut s = [0u8; SECTOR];
        s[..8].copy_from_slice(&MAGIC);
        s[8..12].copy_from_slice(&self.geometry.version().to_le_bytes());
        s[12..16].copy_from_slice(&self.slot.to_le_bytes());
        let fields = [
            self.geometry.total_sectors,
            self.geometry.slot_sectors,
            self.generation,
            self.len,
            self.crc,
            self.saved_ms,
            self.geometry.log_sectors,
            self.log_id,
        ];
        for (i, v) in fields.iter().enumerate() {
            s[16 + i * 8..24 + i * 8].copy_from_slice(&v.to_le_bytes());
        }
        let sum = CRC.checksum(&s[..SECTOR - 8]);
        s[SECTOR - 8..].copy_from_slice(&sum.to_le_bytes());
        s
    }

    /// Reads a header sector (`Blank` for zeros, `BadHeader` for anything not whole).
    pub fn decode(s: &[u8]) -> Result<Header, DiskError> {
        if s.len() < SECTOR {
            return Err(DiskError::BadHeader);
        }
        let s = &s[..SECTOR];
        if s.iter().all(|&b| b == 0) {
            return Err(DiskError::Blank);
        }
        let u64_at = |at: usize| u64::from_le_bytes(s[at..at + 8].try_into().expect("8 bytes"));
        let u32_at = |at: usize| u32::from_le_bytes(s[at..at + 4].try_into().expect("4 bytes"));
        let version = u32_at(8);
        if s[..8] != MAGIC
            || (version != LAYOUT_VERSION && version != LAYOUT_VERSION_1)
            || u64_at(SECTOR - 8) != CRC.checksum(&s[..SECTOR - 8])
            || u32_at(12) > 1
        {
            return Err(DiskError::BadHeader);
        }
        let geometry = Geometry {
            total_sectors: u64_at(16),
            slot_sectors: u64_at(24),
            log_sectors: u64_at(64),
        };
        let expected = match version {
            LAYOUT_VERSION_1 => Geometry::for_disk_v1(geometry.total_sectors),
            _ => Geometry::for_disk(geometry.total_sectors),
        };
        if expected != Ok(geometry) {
            return Err(DiskError::BadHeader);
        }
        let h = Header {
            slot: u32_at(12),
            geometry,
            generation: u64_at(32),
            len: u64_at(40),
            crc: u64_at(48),
            saved_ms: u64_at(56),
            log_id: u64_at(72),
        };
        if h.len > geometry.slot_bytes() {
            return Err(DiskError::BadHeader);
        }
        Ok(h)
    }

    /// Sectors the snapshot occupies (read this many from the slot's start).
    pub fn snapshot_sectors(&self) -> u64 {
        self.len.div_ceil(SECTOR as u64)
    }

    /// Checks `bytes` (at least the snapshot's sectors) against the length and checksum;
    /// returns the snapshot itself.
    pub fn verify<'a>(&self, bytes: &'a [u8]) -> Result<&'a [u8], DiskError> {
        let data = bytes
            .get(..self.len as usize)
            .ok_or(DiskError::BadSnapshot)?;
        match CRC.checksum(data) == self.crc {
            true => Ok(data),
            false => Err(DiskError::BadSnapshot),
        }
    }
}

/// The disk's state as its two header sectors tell it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Headers {
    /// Both sectors are zeros: a new disk, to be formatted.
    Blank,
    /// At least one header is whole; the layout, and each slot's header if whole.
    Formatted {
        /// The layout (from the whole header(s); both carry the same).
        geometry: Geometry,
        /// Slot 0's and slot 1's headers, `None` where torn or bad.
        slots: [Option<Header>; 2],
    },
}

/// Reads the two header sectors of a disk of `disk_sectors`. `Err` when neither is whole and
/// they are not both blank, or when the layout is larger than the disk.
pub fn read_headers(s0: &[u8], s1: &[u8], disk_sectors: u64) -> Result<Headers, DiskError> {
    let (h0, h1) = (Header::decode(s0), Header::decode(s1));
    if h0 == Err(DiskError::Blank) && h1 == Err(DiskError::Blank) {
        return Ok(Headers::Blank);
    }
    let slots = [
        h0.ok().filter(|h| h.slot == 0),
        h1.ok().filter(|h| h.slot == 1),
    ];
    let geometry = slots
        .iter()
        .flatten()
        .map(|h| h.geometry)
        .next()
        .ok_or(DiskError::BadHeader)?;
    if geometry.total_sectors > disk_sectors {
        return Err(DiskError::LayoutMismatch);
    }
    Ok(Headers::Formatted { geometry, slots })
}

/// The slots' headers holding a snapshot, newest first: the loader tries them in turn (an
/// older one if the newest fails its checksum).
pub fn candidates(slots: &[Option<Header>; 2]) -> Vec<Header> {
    let mut v: Vec<Header> = slots
        .iter()
        .flatten()
        .filter(|h| h.generation > 0)
        .copied()
        .collect();
    v.sort_by_key(|h| core::cmp::Reverse(h.generation));
    v
}

/// Where the next save goes: the slot not holding the newest snapshot (slot 0 on an empty
/// disk), and the generation it gets.
pub fn next_save(slots: &[Option<Header>; 2]) -> (u32, u64) {
    match candidates(slots).first() {
        Some(newest) => (1 - newest.slot, newest.generation + 1),
        None => (0, 1),
    }
}

/// A run of whole sectors to write: the first sector and the bytes.
pub type Run = (u64, Vec<u8>);

/// Turns an RDB file's chunks into whole-sector runs for one slot, keeping its length and
/// checksum for the header (see the module doc for the order of writes).
pub struct SlotWriter {
    geometry: Geometry,
    slot: u32,
    generation: u64,
    /// The next sector to write (absolute).
    next_sector: u64,
    /// Bytes not yet handed out (less than a run, or the tail).
    pending: Vec<u8>,
    len: u64,
    digest: crc::Digest<'static, u64, crc::Table<16>>,
}

impl SlotWriter {
    /// A writer of snapshot `generation` into `slot`.
    pub fn new(geometry: Geometry, slot: u32, generation: u64) -> SlotWriter {
        SlotWriter {
            geometry,
            slot,
            generation,
            next_sector: geometry.slot_start(slot),
            pending: Vec::with_capacity(RUN_BYTES + SECTOR),
            len: 0,
            digest: CRC.digest(),
        }
    }

    /// The slot being written.
    pub fn slot(&self) -> u32 {
        self.slot
    }

    /// Takes the next bytes of the file; returns a run to write once [`RUN_BYTES`] gathered.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Option<Run>, DiskError> {
        self.digest.update(bytes);
        self.push_unhashed(bytes)
    }

    /// As [`SlotWriter::push`], for a caller that computes the file's CRC-64 itself (an RDB
    /// writer does, over the same bytes) and gives it to [`SlotWriter::finish_with_crc`]: the
    /// bytes do not go through the CRC a second time. A writer takes all its bytes one way.
    pub fn push_unhashed(&mut self, bytes: &[u8]) -> Result<Option<Run>, DiskError> {
        self.len += bytes.len() as u64;
        if self.len > self.geometry.slot_bytes() {
            return Err(DiskError::SlotFull);
        }
        self.pending.extend_from_slice(bytes);
        if self.pending.len() < RUN_BYTES {
            return Ok(None);
        }
        let whole = self.pending.len() / SECTOR * SECTOR;
        // The rest starts the next run, in a buffer of a run's size (no regrowing).
        let mut rest = Vec::with_capacity(RUN_BYTES + SECTOR);
        rest.extend_from_slice(&self.pending[whole..]);
        self.pending.truncate(whole);
        let run = core::mem::replace(&mut self.pending, rest);
        let at = self.next_sector;
        self.next_sector += (whole / SECTOR) as u64;
        Ok(Some((at, run)))
    }

    /// The last run (the tail, zero padded to a sector; `None` if nothing is left) and the
    /// header to write once the slot's data is flushed; `log_id` names the log records that
    /// follow this snapshot.
    pub fn finish(self, saved_ms: u64, log_id: u64) -> (Option<Run>, Header) {
        let crc = self.digest.clone().finalize();
        self.finish_with_crc(crc, saved_ms, log_id)
    }

    /// As [`SlotWriter::finish`], with the CRC-64 of the file's bytes computed by the caller
    /// (see [`SlotWriter::push_unhashed`]).
    pub fn finish_with_crc(
        mut self,
        crc: u64,
        saved_ms: u64,
        log_id: u64,
    ) -> (Option<Run>, Header) {
        let header = Header {
            slot: self.slot,
            geometry: self.geometry,
            generation: self.generation,
            len: self.len,
            crc,
            saved_ms,
            log_id,
        };
        if self.pending.is_empty() {
            return (None, header);
        }
        let padded = self.pending.len().div_ceil(SECTOR) * SECTOR;
        self.pending.resize(padded, 0);
        (Some((self.next_sector, self.pending)), header)
    }
}

/// One log record, padded to whole sectors: the head ([`RECORD_HEAD`] bytes: magic, `log_id`,
/// `seq`, the payload's length, a CRC-64 over those 32 bytes and the payload), then the
/// payload.
pub fn encode_record(log_id: u64, seq: u64, payload: &[u8]) -> Vec<u8> {
    let total = (RECORD_HEAD + payload.len()).div_ceil(SECTOR) * SECTOR;
    let mut r = Vec::with_capacity(total);
    r.extend_from_slice(&RECORD_MAGIC);
    r.extend_from_slice(&log_id.to_le_bytes());
    r.extend_from_slice(&seq.to_le_bytes());
    r.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    let mut digest = CRC.digest();
    digest.update(&r[..32]);
    digest.update(payload);
    r.extend_from_slice(&digest.finalize().to_le_bytes());
    r.extend_from_slice(payload);
    r.resize(total, 0);
    r
}

/// Sectors a record of `payload_len` bytes takes.
pub fn record_sectors(payload_len: usize) -> u64 {
    (RECORD_HEAD + payload_len).div_ceil(SECTOR) as u64
}

/// The log of one snapshot being appended to: where its next record goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogWriter {
    /// The half's first sector.
    start: u64,
    /// Sectors in the half.
    sectors: u64,
    /// The records' nonce.
    pub log_id: u64,
    /// The next record's sequence number (= records written).
    pub seq: u64,
    /// The next record's sector, relative to `start`.
    next: u64,
}

impl LogWriter {
    /// An empty log in half `half` of `geometry` for records of `log_id`.
    pub fn new(geometry: &Geometry, half: u32, log_id: u64) -> LogWriter {
        LogWriter {
            start: geometry.log_start(half),
            sectors: geometry.log_half_sectors(),
            log_id,
            seq: 0,
            next: 0,
        }
    }

    /// The run writing `payload` as the next record, or `LogFull`; [`LogWriter::advance`]
    /// once it is written.
    pub fn record(&self, payload: &[u8]) -> Result<Run, DiskError> {
        if self.next + record_sectors(payload.len()) > self.sectors {
            return Err(DiskError::LogFull);
        }
        Ok((
            self.start + self.next,
            encode_record(self.log_id, self.seq, payload),
        ))
    }

    /// The record of `payload_len` bytes was written.
    pub fn advance(&mut self, payload_len: usize) {
        self.next += record_sectors(payload_len);
        self.seq += 1;
    }

    /// Bytes of the log in use (whole sectors).
    pub fn used_bytes(&self) -> u64 {
        self.next * SECTOR as u64
    }

    /// Sectors of the half.
    pub fn capacity_sectors(&self) -> u64 {
        self.sectors
    }

    /// Sectors in use.
    pub fn used_sectors(&self) -> u64 {
        self.next
    }
}

/// How reading a log ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogEnd {
    /// The writer that appends after the last whole record.
    pub writer: LogWriter,
    /// Payload bytes read.
    pub bytes: u64,
    /// The sequence number of a record whose head matched but whose checksum failed (or whose
    /// length ran past the half): a write cut short, ignored.
    pub torn: Option<u64>,
}

/// Sectors [`read_log`] reads at a time.
pub const LOG_READ_SECTORS: u64 = 512;

/// Reads the records of `log_id` in half `half`, in order, handing each payload to `each`;
/// `read(sector, buf)` reads whole sectors. Stops at the first sector that is not the next
/// record (another nonce, another sequence, not a record) or at a torn record.
pub fn read_log<E>(
    geometry: &Geometry,
    half: u32,
    log_id: u64,
    mut read: impl FnMut(u64, &mut [u8]) -> Result<(), E>,
    mut each: impl FnMut(&[u8]),
) -> Result<LogEnd, E> {
    let mut writer = LogWriter::new(geometry, half, log_id);
    let mut end = LogEnd {
        writer: writer.clone(),
        bytes: 0,
        torn: None,
    };
    if !geometry.has_log() {
        return Ok(end);
    }
    // A window of the half's sectors: [win_at, win_at + win.len() / SECTOR).
    let mut win: Vec<u8> = Vec::new();
    let mut win_at = 0u64;
    loop {
        let at = writer.next;
        if at >= writer.sectors {
            break;
        }
        let have = |win: &[u8], win_at: u64, from: u64, n: u64| {
            from >= win_at && (from + n - win_at) * SECTOR as u64 <= win.len() as u64
        };
        if !have(&win, win_at, at, 1) {
            let n = LOG_READ_SECTORS.min(writer.sectors - at);
            win.resize(n as usize * SECTOR, 0);
            read(writer.start + at, &mut win)?;
            win_at = at;
        }
        let off = (at - win_at) as usize * SECTOR;
        let head = &win[off..off + RECORD_HEAD];
        let u64_at = |i: usize| u64::from_le_bytes(head[i..i + 8].try_into().expect("8 bytes"));
        if head[..8] != RECORD_MAGIC || u64_at(8) != log_id || u64_at(16) != writer.seq {
            break;
        }
        let len = u64_at(24);
        let sectors = (RECORD_HEAD as u64)
            .saturating_add(len)
            .div_ceil(SECTOR as u64);
        if len > writer.sectors * SECTOR as u64 || at + sectors > writer.sectors {
            end.torn = Some(writer.seq);
            break;
        }
        if !have(&win, win_at, at, sectors) {
            let n = sectors.max(LOG_READ_SECTORS.min(writer.sectors - at));
            win.resize(n as usize * SECTOR, 0);
            read(writer.start + at, &mut win)?;
            win_at = at;
        }
        let off = (at - win_at) as usize * SECTOR;
        let record = &win[off..off + RECORD_HEAD + len as usize];
        let mut digest = CRC.digest();
        digest.update(&record[..32]);
        digest.update(&record[RECORD_HEAD..]);
        if digest.finalize().to_le_bytes() != record[32..40] {
            end.torn = Some(writer.seq);
            break;
        }
        each(&record[RECORD_HEAD..]);
        end.bytes += len;
        writer.advance(len as usize);
    }
    end.writer = writer;
    Ok(end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    /// A disk in memory: sectors written by runs.
    fn write(disk: &mut [u8], (at, bytes): &Run) {
        let at = *at as usize * SECTOR;
        disk[at..at + bytes.len()].copy_from_slice(bytes);
    }

    fn save(disk: &mut [u8], geometry: Geometry, data: &[u8], torn_header: bool) {
        let heads = read_headers(&disk[..SECTOR], &disk[8 * SECTOR..9 * SECTOR], 1 << 20);
        let slots = match heads {
            Ok(Headers::Formatted { slots, .. }) => slots,
            _ => [None, None],
        };
        let (slot, generation) = next_save(&slots);
        let mut w = SlotWriter::new(geometry, slot, generation);
        for chunk in data.chunks(1000) {
            if let Some(run) = w.push(chunk).unwrap() {
                write(disk, &run);
            }
        }
        let (tail, header) = w.finish(42, 7);
        if let Some(run) = tail {
            write(disk, &run);
        }
        let mut sector = header.encode().to_vec();
        if torn_header {
            sector[100] ^= 1;
        }
        write(disk, &(header_sector(slot), sector));
    }

    fn load(disk: &[u8]) -> Option<Vec<u8>> {
        let total = (disk.len() / SECTOR) as u64;
        let Ok(Headers::Formatted { slots, .. }) =
            read_headers(&disk[..SECTOR], &disk[8 * SECTOR..9 * SECTOR], total)
        else {
            return None;
        };
        candidates(&slots).into_iter().find_map(|h| {
            let at = h.geometry.slot_start(h.slot) as usize * SECTOR;
            let bytes = &disk[at..at + h.snapshot_sectors() as usize * SECTOR];
            h.verify(bytes).ok().map(<[u8]>::to_vec)
        })
    }

    #[test]
    fn saves_alternate_and_a_torn_header_falls_back() {
        let total = 8192u64;
        let g = Geometry::for_disk(total).unwrap();
        let mut disk = vec![0u8; total as usize * SECTOR];
        assert_eq!(
            read_headers(&disk[..SECTOR], &disk[8 * SECTOR..9 * SECTOR], total),
            Ok(Headers::Blank)
        );
        let a: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let b: Vec<u8> = (0..70_001u32).map(|i| (i % 13) as u8).collect();
        save(&mut disk, g, &a, false);
        assert_eq!(load(&disk).as_deref(), Some(&a[..]));
        save(&mut disk, g, &b, false);
        assert_eq!(load(&disk).as_deref(), Some(&b[..]));
        save(&mut disk, g, &a, true); // the crash tore the header: b stays
        assert_eq!(load(&disk).as_deref(), Some(&b[..]));
        // A torn slot (data changed after the header) falls back to the older snapshot.
        save(&mut disk, g, &a, false);
        let h = Header::decode(&disk[..SECTOR]).unwrap();
        assert_eq!(h.generation, 3); // the torn generation 3 never counted
        let at = g.slot_start(h.slot) as usize * SECTOR + 10;
        disk[at] ^= 0xff;
        assert_eq!(load(&disk).as_deref(), Some(&b[..]));
    }

    #[test]
    fn geometry_and_bad_headers() {
        assert_eq!(
            Geometry::for_disk(8192),
            Ok(Geometry {
                total_sectors: 8192,
                slot_sectors: 2048,
                log_sectors: 2048,
            })
        );
        assert_eq!(Geometry::for_disk(8000), Err(DiskError::TooSmall));
        assert_eq!(
            Geometry::for_disk_v1(4096 + 2048),
            Ok(Geometry {
                total_sectors: 6144,
                slot_sectors: 2048,
                log_sectors: 0,
            })
        );
        // A version 1 header (no log area) still decodes.
        let v1 = Geometry::for_disk_v1(100_000).unwrap();
        let h1 = Header::empty(0, v1).encode();
        assert_eq!(u32::from_le_bytes(h1[8..12].try_into().unwrap()), 1);
        assert_eq!(Header::decode(&h1), Ok(Header::empty(0, v1)));
        let g = Geometry::for_disk(100_000).unwrap();
        let mut s = Header::empty(1, g).encode();
        assert_eq!(Header::decode(&s), Ok(Header::empty(1, g)));
        s[3] = b'x';
        assert_eq!(Header::decode(&s), Err(DiskError::BadHeader));
        let z = [0u8; SECTOR];
        assert_eq!(read_headers(&z, &s, 100_000), Err(DiskError::BadHeader));
        let ok = Header::empty(1, g).encode();
        assert_eq!(
            read_headers(&z, &ok, 50_000),
            Err(DiskError::LayoutMismatch)
        );
        assert!(matches!(
            read_headers(&z, &ok, 100_000),
            Ok(Headers::Formatted { .. })
        ));
    }

    /// Any sector bytes decode to a header or an error, never a panic; a header that
    /// decodes describes a slot inside its own layout.
    #[test]
    fn arbitrary_sectors_never_panic() {
        let g = Geometry::for_disk(1 << 20).unwrap();
        let good = Header::empty(0, g).encode();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..20_000 {
            let mut s = good;
            for _ in 0..(round % 7) + 1 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                s[(x % SECTOR as u64) as usize] = (x >> 32) as u8;
            }
            if let Ok(h) = Header::decode(&s) {
                assert!(h.len <= h.geometry.slot_bytes());
                assert!(h.slot <= 1);
            }
            let _ = read_headers(&s, &good, 1 << 20);
            let _ = Header::decode(&s[..(x % SECTOR as u64) as usize]);
        }
    }

    /// Reads the log of `log_id` in `half` from an in-memory disk.
    fn read(disk: &[u8], g: &Geometry, half: u32, log_id: u64) -> (Vec<Vec<u8>>, LogEnd) {
        let mut got = Vec::new();
        let end = read_log::<()>(
            g,
            half,
            log_id,
            |at, buf| {
                let at = at as usize * SECTOR;
                buf.copy_from_slice(&disk[at..at + buf.len()]);
                Ok(())
            },
            |p| got.push(p.to_vec()),
        )
        .unwrap();
        (got, end)
    }

    #[test]
    fn log_records_read_back_and_a_torn_tail_is_ignored() {
        let total = 20_000u64;
        let g = Geometry::for_disk(total).unwrap();
        let mut disk = vec![0u8; total as usize * SECTOR];
        let mut w = LogWriter::new(&g, 1, 99);
        let payloads: Vec<Vec<u8>> = (0..300u32)
            .map(|i| (0..(i * 37 % 2000)).map(|j| (i + j) as u8).collect())
            .collect();
        for p in &payloads {
            let run = w.record(p).unwrap();
            write(&mut disk, &run);
            w.advance(p.len());
        }
        let (got, end) = read(&disk, &g, 1, 99);
        assert_eq!(got, payloads);
        assert_eq!(end.writer, w);
        assert_eq!(end.torn, None);
        // Another nonce (a stale log) reads as empty; so does the other half.
        assert!(read(&disk, &g, 1, 98).0.is_empty());
        assert!(read(&disk, &g, 0, 99).0.is_empty());
        // A torn last record: its payload's last sector never written.
        let long = vec![7u8; 3000];
        let (at, bytes) = w.record(&long).unwrap();
        write(&mut disk, &(at, bytes[..bytes.len() - SECTOR].to_vec()));
        let (got, end) = read(&disk, &g, 1, 99);
        assert_eq!(got.len(), 300);
        assert_eq!(end.torn, Some(300));
        assert_eq!(end.writer, w);
        // The next append overwrites it with a shorter record; the old tail does not count.
        let short = b"*1\r\n$4\r\nPING\r\n".to_vec();
        let run = w.record(&short).unwrap();
        write(&mut disk, &run);
        w.advance(short.len());
        let (got, end) = read(&disk, &g, 1, 99);
        assert_eq!(got.len(), 301);
        assert_eq!(got[300], short);
        assert_eq!(end.torn, None);
        // A corrupted byte in the middle ends the log there.
        let second = g.log_start(1) as usize * SECTOR + SECTOR + 45;
        disk[second] ^= 1;
        assert_eq!(read(&disk, &g, 1, 99).0.len(), 1);
    }

    #[test]
    fn a_full_log_half_is_refused() {
        let g = Geometry::for_disk(8192).unwrap();
        let mut w = LogWriter::new(&g, 0, 1);
        let p = vec![0u8; 100_000];
        let mut n = 0;
        while w.record(&p).is_ok() {
            w.advance(p.len());
            n += 1;
        }
        assert_eq!(n, 1024 / record_sectors(p.len()));
        assert_eq!(w.record(&p), Err(DiskError::LogFull));
    }

    #[test]
    fn unhashed_pushes_with_the_callers_crc_make_the_same_runs_and_header() {
        let g = Geometry::for_disk(8192).unwrap();
        let bytes: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let (mut a, mut b) = (SlotWriter::new(g, 1, 5), SlotWriter::new(g, 1, 5));
        for part in bytes.chunks(3000) {
            assert_eq!(a.push(part).unwrap(), b.push_unhashed(part).unwrap());
        }
        let crc = CRC.checksum(&bytes);
        assert_eq!(a.finish(9, 3), b.finish_with_crc(crc, 9, 3));
    }

    #[test]
    fn a_full_slot_is_refused() {
        let g = Geometry::for_disk(8192).unwrap();
        let mut w = SlotWriter::new(g, 0, 1);
        let big = vec![0u8; g.slot_bytes() as usize];
        assert!(w.push(&big).is_ok());
        assert_eq!(w.push(&[1]), Err(DiskError::SlotFull));
    }
}
