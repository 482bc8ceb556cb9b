//! `cargo xtask disk create|import|export`: the unikernel's disk image as a host file, through
//! the same layout code the image uses (`kayvee-disk`): a blank formatted disk, an RDB file
//! (from redis-server or kayvee-server) put in as the newest snapshot, and the state a boot
//! would load taken out (for redis-check-rdb, redis-server, kayvee-server).
//!
//! Export reads what the image's boot reads: the newest snapshot whose checksum holds and the
//! log records that follow it (a torn last record ignored). Without records the snapshot's
//! bytes are the RDB file as they are; with records the snapshot is loaded into an engine (the
//! same no_std engine and RDB codec the image links), the records' commands replayed through
//! it as the image replays them, and its dataset written as a new RDB file. `--aof FILE` also
//! writes the snapshot followed by the records' commands: an AOF with an RDB preamble, which
//! redis-check-aof accepts and redis-server 7.0 loads (as `appendonly.aof` in its `dir`,
//! upgraded to the multi-part layout at its start).

use kayvee_disk::{Geometry, Header, Headers, SlotWriter, SECTOR};
use kayvee_engine::{ConnInfo, Discard, Engine, Now, Protocol, Transport};
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
        ["export", file, rdb] | ["export", file, rdb, "--aof", _] => {
            let aof = a.get(4).map(Path::new);
            let e = export_with(Path::new(file), Path::new(rdb), aof)?;
            println!(
                "{file}: {} and {} log records ({} bytes of commands{}) written to {rdb}{}",
                match e.header {
                    Some(h) => format!(
                        "snapshot generation {} (slot {}, {} bytes)",
                        h.generation, h.slot, h.len
                    ),
                    None => "no snapshot".into(),
                },
                e.records,
                e.log_bytes,
                match e.torn {
                    true => "; a torn last record ignored",
                    false => "",
                },
                match aof {
                    Some(p) => format!(" and, as an AOF with an RDB preamble, to {}", p.display()),
                    None => String::new(),
                }
            );
            Ok(())
        }
        _ => Err("usage: cargo xtask disk create FILE [SIZE, default 64M] | import FILE RDB | export FILE RDB [--aof AOF]".into()),
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

/// What `disk export` took out.
pub struct Exported {
    /// The snapshot's header (`None`: no snapshot yet, only a log).
    pub header: Option<Header>,
    /// Log records replayed after it.
    pub records: u64,
    /// Bytes of commands in them.
    pub log_bytes: u64,
    /// A torn last record was ignored.
    pub torn: bool,
}

/// `disk export` without `--aof`.
pub fn export(path: &Path, rdb: &Path) -> Result<Exported, String> {
    export_with(path, rdb, None)
}

/// `disk export`: the state a boot would load, as an RDB file at `rdb` and, with `aof`, as
/// an AOF with an RDB preamble (see the module doc).
pub fn export_with(path: &Path, rdb: &Path, aof: Option<&Path>) -> Result<Exported, String> {
    let (mut f, geometry, slots) = open(path)?;
    let mut found: Option<(Header, Vec<u8>)> = None;
    for h in kayvee_disk::candidates(&slots) {
        let bytes = read_at(
            &mut f,
            geometry.slot_start(h.slot),
            h.snapshot_sectors() as usize * SECTOR,
        )?;
        match h.verify(&bytes) {
            Ok(data) => {
                found = Some((h, data.to_vec()));
                break;
            }
            Err(e) => eprintln!(
                "xtask: snapshot generation {} (slot {}): {e}; trying the older one",
                h.generation, h.slot
            ),
        }
    }
    // As the boot: no snapshot means the empty disk's log (half 1, nonce 0).
    let (half, log_id) = found
        .as_ref()
        .map_or((1, 0), |(h, _)| (h.log_half(), h.log_id));
    let mut records: Vec<Vec<u8>> = Vec::new();
    let end = kayvee_disk::read_log(
        &geometry,
        half,
        log_id,
        |at, buf| {
            f.seek(SeekFrom::Start(at * SECTOR as u64))
                .and_then(|_| f.read_exact(buf))
        },
        |payload| records.push(payload.to_vec()),
    )
    .map_err(|e| format!("{}: reading the log: {e}", path.display()))?;
    let snapshot = found.as_ref().map(|(_, bytes)| bytes.as_slice());
    let out = match (snapshot, records.is_empty()) {
        (None, true) => {
            return Err(format!(
                "{}: no valid snapshot and no log on the disk",
                path.display()
            ))
        }
        (Some(bytes), true) => bytes.to_vec(),
        _ => replayed(snapshot, &records).map_err(|e| format!("{}: {e}", path.display()))?,
    };
    std::fs::write(rdb, out).map_err(|e| format!("{}: {e}", rdb.display()))?;
    if let Some(aof) = aof {
        let mut file = snapshot.unwrap_or_default().to_vec();
        records.iter().for_each(|r| file.extend_from_slice(r));
        std::fs::write(aof, file).map_err(|e| format!("{}: {e}", aof.display()))?;
    }
    Ok(Exported {
        header: found.map(|(h, _)| h),
        records: records.len() as u64,
        log_bytes: end.bytes,
        torn: end.torn.is_some(),
    })
}

/// The snapshot loaded into an engine, the log's commands replayed over it as the image's boot
/// replays them (through one client, without replies, at time 0: the log's DELs carry the
/// expirations), and the result written as an RDB file by the image's writer.
fn replayed(snapshot: Option<&[u8]>, records: &[Vec<u8>]) -> Result<Vec<u8>, String> {
    let now = Now {
        unix_us: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64),
    };
    let seed = now.unix_us ^ 0x6b61_7976_6565;
    let mut engine = Engine::new(kayvee_engine::Config::default(), seed, now);
    engine.set_codec(&kayvee_rdb::CODEC);
    if let Some(snapshot) = snapshot {
        let opts = kayvee_rdb::LoadOptions {
            config: &engine.core.config,
            seed,
            now_ms: now.ms(),
        };
        let loaded = kayvee_rdb::load(snapshot, &opts)
            .map_err(|e| format!("the snapshot does not load: {e}"))?;
        engine.load_dbs(loaded.dbs, loaded.keys_loaded, loaded.keys_expired, now);
        engine
            .load_functions(&loaded.functions, false)
            .map_err(|e| format!("the snapshot's functions do not load: {e}"))?;
    }
    let conn = ConnInfo {
        transport: Transport::Unix { path: "log".into() },
        fd: -1,
    };
    let h = engine.connect(conn, Now { unix_us: 0 });
    if let Some(c) = engine.clients.get_mut(h) {
        c.authenticated = true; // the log's commands ran once already
    }
    let limits = kayvee_resp::Limits {
        bulk_len_max: usize::MAX / 2,
        query_buffer_max: usize::MAX / 2,
    };
    let mut sink = Discard(Protocol::Resp2);
    for (seq, record) in records.iter().enumerate() {
        let mut decoder = kayvee_resp::Decoder::new(limits);
        let mut used = 0;
        while used < record.len() {
            let frame = match decoder.decode(&record[used..], true) {
                Ok(Some(f)) => f,
                Ok(None) => return Err(format!("log record {seq}: a command cut short")),
                Err(_) => return Err(format!("log record {seq}: not RESP commands")),
            };
            engine.execute(h, &frame.argv, Now { unix_us: 0 }, &mut sink);
            used += frame.consumed;
        }
    }
    engine.disconnect(h);
    let mut writer = kayvee_rdb::RdbWriter::new(
        engine.snapshot(now),
        kayvee_rdb::WriteOptions {
            compress: engine.core.config.rdbcompression,
            checksum: engine.core.config.rdbchecksum,
            ..kayvee_rdb::WriteOptions::default()
        },
    );
    let mut out = Vec::new();
    while writer.next_chunk(&mut out) {}
    Ok(out)
}
