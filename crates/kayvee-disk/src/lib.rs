//! The unikernel's disk layout (sans-IO): where snapshots live on a block device and how a
//! save switches to a new one so that a crash at any instant leaves a valid snapshot.
//!
//! ```text
//!  sector 0      header of slot 0  (one 512-byte sector, 4 KiB apart so no torn write of a
//!  sector 8      header of slot 1   4 KiB device block can touch both)
//!  sector 2048   slot 0: an RDB file (kayvee-rdb's output, byte for byte), zero padded
//!  ...           slot 1: the same
//! ```
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
/// Layout version in the header.
pub const LAYOUT_VERSION: u32 = 1;
/// Bytes [`SlotWriter`] gathers before it hands out a run of sectors to write.
pub const RUN_BYTES: usize = 64 * 1024;

/// CRC-64/Jones (Redis's), for headers and snapshots.
static CRC: crc::Crc<u64> = crc::Crc::<u64>::new(&crc::CRC_64_REDIS);

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
    /// The snapshot's bytes do not match the header's length and checksum.
    BadSnapshot,
}

impl core::fmt::Display for DiskError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            DiskError::TooSmall => "the disk is too small (at least 3 MiB)",
            DiskError::Blank => "the header sector is blank",
            DiskError::BadHeader => "the header is not a Kayvee disk header or fails its checksum",
            DiskError::LayoutMismatch => "the header describes a larger disk than this one",
            DiskError::SlotFull => "the snapshot does not fit in a slot",
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
}

impl Geometry {
    /// The layout for a disk of `total_sectors`: two equal slots (4 KiB multiples) after
    /// [`DATA_START`].
    pub fn for_disk(total_sectors: u64) -> Result<Geometry, DiskError> {
        let slot_sectors = (total_sectors.saturating_sub(DATA_START) / 2) & !7;
        if slot_sectors < SLOT_MIN_SECTORS {
            return Err(DiskError::TooSmall);
        }
        Ok(Geometry {
            total_sectors,
            slot_sectors,
        })
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
        }
    }

    /// The header's sector.
    pub fn encode(&self) -> [u8; SECTOR] {
        let mut s = [0u8; SECTOR];
        s[..8].copy_from_slice(&MAGIC);
        s[8..12].copy_from_slice(&LAYOUT_VERSION.to_le_bytes());
        s[12..16].copy_from_slice(&self.slot.to_le_bytes());
        let fields = [
            self.geometry.total_sectors,
            self.geometry.slot_sectors,
            self.generation,
            self.len,
            self.crc,
            self.saved_ms,
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
        if s[..8] != MAGIC
            || u32_at(8) != LAYOUT_VERSION
            || u64_at(SECTOR - 8) != CRC.checksum(&s[..SECTOR - 8])
            || u32_at(12) > 1
        {
            return Err(DiskError::BadHeader);
        }
        let geometry = Geometry {
            total_sectors: u64_at(16),
            slot_sectors: u64_at(24),
        };
        if Geometry::for_disk(geometry.total_sectors) != Ok(geometry) {
            return Err(DiskError::BadHeader);
        }
        let h = Header {
            slot: u32_at(12),
            geometry,
            generation: u64_at(32),
            len: u64_at(40),
            crc: u64_at(48),
            saved_ms: u64_at(56),
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
    digest: crc::Digest<'static, u64>,
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
        self.len += bytes.len() as u64;
        if self.len > self.geometry.slot_bytes() {
            return Err(DiskError::SlotFull);
        }
        self.digest.update(bytes);
        self.pending.extend_from_slice(bytes);
        if self.pending.len() < RUN_BYTES {
            return Ok(None);
        }
        let whole = self.pending.len() / SECTOR * SECTOR;
        let rest = self.pending.split_off(whole);
        let run = core::mem::replace(&mut self.pending, rest);
        let at = self.next_sector;
        self.next_sector += (whole / SECTOR) as u64;
        Ok(Some((at, run)))
    }

    /// The last run (the tail, zero padded to a sector; `None` if nothing is left) and the
    /// header to write once the slot's data is flushed.
    pub fn finish(mut self, saved_ms: u64) -> (Option<Run>, Header) {
        let header = Header {
            slot: self.slot,
            geometry: self.geometry,
            generation: self.generation,
            len: self.len,
            crc: self.digest.finalize(),
            saved_ms,
        };
        if self.pending.is_empty() {
            return (None, header);
        }
        let padded = self.pending.len().div_ceil(SECTOR) * SECTOR;
        self.pending.resize(padded, 0);
        (Some((self.next_sector, self.pending)), header)
    }
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
        let (tail, header) = w.finish(42);
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
            Geometry::for_disk(4096 + 2048),
            Ok(Geometry {
                total_sectors: 6144,
                slot_sectors: 2048
            })
        );
        assert_eq!(Geometry::for_disk(6000), Err(DiskError::TooSmall));
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

    #[test]
    fn a_full_slot_is_refused() {
        let g = Geometry::for_disk(6144).unwrap();
        let mut w = SlotWriter::new(g, 0, 1);
        let big = vec![0u8; g.slot_bytes() as usize];
        assert!(w.push(&big).is_ok());
        assert_eq!(w.push(&[1]), Err(DiskError::SlotFull));
    }
}
