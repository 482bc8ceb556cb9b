//! `cargo xtask disk create|import|export`: the unikernel's disk image as a host file, through
//! the same layout code the image uses (`kayvee-disk`): a blank formatted disk, an RDB file
//! (from redis-server or kayvee-server) put in as the newest snapshot, the newest valid
//! snapshot taken out as an RDB file (for redis-check-rdb, redis-server, kayvee-server).

use kayvee_disk::{Geometry, Header, Headers, SlotWriter, SECTOR};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

/// The default size of `disk create`.
pub const DEFAULT_SIZE: &str = "64M";

/// `cargo xtask disk create FILE [SIZE] | import FILE RDB | export FILE RDB`.
pub fn disk(args: &[String]) -> Result<(), String> {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    match a.as_slice() {
        ["create", file] => create(Path::new(file), DEFAULT_SIZE),
        ["create", file, size] => create(Path::new(file), size),
        ["import", file, rdb] => {
            let h = import(Path::new(file), Path::new(rdb))?;
            println!(
                "{file}: {rdb} imported as snapshot generation {} (slot {}, {} bytes)",
                h.generation, h.slot, h.len
            );
            Ok(())
        }
        ["export", file, rdb] => {
            let h = export(Path::new(file), Path::new(rdb))?;
            println!(
                "{file}: snapshot generation {} (slot {}, {} bytes) written to {rdb}",
                h.generation, h.slot, h.len
            );
            Ok(())
        }
        _ => Err("usage: cargo xtask disk create FILE [SIZE, default 64M] | import FILE RDB | export FILE RDB".into()),
    }
}

/// Parses `64M`, `1G`, `4096K` or plain bytes.
pub(crate) fn parse_size(s: &str) -> Result<u64, String> {
    let (num, mul) = match s.as_bytes().last() {
        Some(b'K' | b'k') => (&s[..s.len() - 1], 1 << 10),
        Some(b'M' | b'm') => (&s[..s.len() - 1], 1 << 20),
        Some(b'G' | b'g') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>()
        .map(|n| n * mul)
        .map_err(|_| format!("bad size '{s}' (such as 64M)"))
}

/// Writes `bytes` at `sector`.
fn write_at(f: &mut File, sector: u64, bytes: &[u8]) -> Result<(), String> {
    f.seek(SeekFrom::Start(sector * SECTOR as u64))
        .and_then(|_| f.write_all(bytes))
        .map_err(|e| format!("writing the disk: {e}"))
}

/// Reads `n` bytes at `sector`.
fn read_at(f: &mut File, sector: u64, n: usize) -> Result<Vec<u8>, String> {
    let mut buf = vec![0u8; n];
    f.seek(SeekFrom::Start(sector * SECTOR as u64))
        .and_then(|_| f.read_exact(&mut buf))
        .map_err(|e| format!("reading the disk: {e}"))?;
    Ok(buf)
}

/// `disk create`: a file of `size` with two empty slots and an empty log area.
pub fn create(path: &Path, size: &str) -> Result<(), String> {
    let bytes = parse_size(size)?;
    let geometry = Geometry::for_disk(bytes / SECTOR as u64)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut f = File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    f.set_len(bytes).map_err(|e| e.to_string())?;
    for slot in 0..2 {
        let h = Header::empty(slot, geometry);
        write_at(&mut f, kayvee_disk::header_sector(slot), &h.encode())?;
    }
    f.sync_all().map_err(|e| e.to_string())?;
    println!(
        "{}: {} MiB, two snapshot slots of {} KiB, a log area of two halves of {} KiB",
        path.display(),
        bytes >> 20,
        geometry.slot_bytes() / 1024,
        geometry.log_half_sectors() * SECTOR as u64 / 1024
    );
    Ok(())
}

/// Opens a disk file and reads its headers (a blank file gets the layout for its size).
fn open(path: &Path) -> Result<(File, Geometry, [Option<Header>; 2]), String> {
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let sectors = f.metadata().map_err(|e| e.to_string())?.len() / SECTOR as u64;
    let head = read_at(&mut f, 0, 9 * SECTOR)?;
    match kayvee_disk::read_headers(&head[..SECTOR], &head[8 * SECTOR..], sectors) {
        Ok(Headers::Formatted { geometry, slots }) => Ok((f, geometry, slots)),
        Ok(Headers::Blank) => {
            let g = Geometry::for_disk(sectors).map_err(|e| format!("{}: {e}", path.display()))?;
            Ok((f, g, [None, None]))
        }
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// `disk import`: the RDB file becomes the newest snapshot (the other slot's is kept as the
/// older one), written in the image's order: data, sync, header, sync.
pub fn import(path: &Path, rdb: &Path) -> Result<Header, String> {
    let data = std::fs::read(rdb).map_err(|e| format!("{}: {e}", rdb.display()))?;
    if !data.starts_with(b"REDIS") {
        return Err(format!("{}: not an RDB file", rdb.display()));
    }
    let (mut f, geometry, slots) = open(path)?;
    let (slot, generation) = kayvee_disk::next_save(&slots);
    let mut w = SlotWriter::new(geometry, slot, generation);
    for chunk in data.chunks(kayvee_disk::RUN_BYTES) {
        let run = w
            .push(chunk)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if let Some((at, bytes)) = run {
            write_at(&mut f, at, &bytes)?;
        }
    }
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    // A fresh nonce: the new snapshot's log half holds no record of it, so it starts empty.
    let log_id = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64 | 1);
    let (tail, header) = w.finish(now_ms, log_id);
    if let Some((at, bytes)) = tail {
        write_at(&mut f, at, &bytes)?;
    }
    f.sync_all().map_err(|e| e.to_string())?;
    write_at(&mut f, kayvee_disk::header_sector(slot), &header.encode())?;
    f.sync_all().map_err(|e| e.to_string())?;
    Ok(header)
}

/// `disk export`: the newest snapshot whose checksum holds, as an RDB file (the log records
/// after it are not included: SAVE or BGREWRITEAOF first to have them in the snapshot).
pub fn export(path: &Path, rdb: &Path) -> Result<Header, String> {
    let (mut f, geometry, slots) = open(path)?;
    for h in kayvee_disk::candidates(&slots) {
        let bytes = read_at(
            &mut f,
            geometry.slot_start(h.slot),
            h.snapshot_sectors() as usize * SECTOR,
        )?;
        match h.verify(&bytes) {
            Ok(data) => {
                std::fs::write(rdb, data).map_err(|e| format!("{}: {e}", rdb.display()))?;
                return Ok(h);
            }
            Err(e) => eprintln!(
                "xtask: snapshot generation {} (slot {}): {e}; trying the older one",
                h.generation, h.slot
            ),
        }
    }
    Err(format!("{}: no valid snapshot on the disk", path.display()))
}
