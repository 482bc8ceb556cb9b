//! RDB files on disk: loading `dir/dbfilename` at startup, SAVE (synchronous), background
//! saves on a thread (BGSAVE, save points) and crash-safe writing.
//!
//! A background save needs no fork: the engine's snapshot is O(1) (persistent structures), the
//! thread serialises it with `kayvee_rdb::RdbWriter` while the loop keeps serving, and the
//! loop's cron notices the end and reports it to the engine.
//!
//! Crash safety: the file is written to `temp-<pid>-<n>.rdb` in `dir`, fsynced, renamed over
//! `dbfilename`, then the directory is fsynced. A failure removes the temporary file and
//! leaves the previous snapshot intact.

use kayvee_engine::save_progress::{Writer, WriterProgress};
use kayvee_engine::{Engine, Now, Snapshot};
use kayvee_rdb::{LoadOptions, RdbWriter, WriteOptions};
use kayvee_session::Answer;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;
use tracing::{info, warn};

/// Distinguishes temporary files of saves started by one process.
static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// Where the RDB file lives.
pub fn rdb_path(engine: &Engine) -> PathBuf {
    let cfg = &engine.core.config;
    Path::new(&cfg.dir).join(&cfg.dbfilename)
}

/// The writer options from the configuration (and the memory figure for `used-mem`).
fn write_options(engine: &Engine) -> WriteOptions {
    let cfg = &engine.core.config;
    WriteOptions {
        compress: cfg.rdbcompression,
        checksum: cfg.rdbchecksum,
        used_mem: engine.core.host.used_memory,
        repl: engine
            .repl_save_info()
            .map(|(stream_db, replid, offset)| kayvee_rdb::ReplAux {
                stream_db,
                replid,
                offset,
            }),
        ..WriteOptions::default()
    }
}

/// The startup load running on a thread while the loop accepts clients (which get `-LOADING`
/// until it is done, as with Redis).
pub struct StartupLoad {
    thread: JoinHandle<anyhow::Result<kayvee_rdb::Loaded>>,
    progress: Arc<Mutex<kayvee_rdb::Progress>>,
    path: PathBuf,
    started: Instant,
}

impl StartupLoad {
    /// Starts loading `dir/dbfilename` if it exists (the engine enters the loading state);
    /// None when there is no file. A file that exists but cannot be read is an error now.
    pub fn start(engine: &mut Engine, now: Now) -> anyhow::Result<Option<Self>> {
        let path = rdb_path(engine);
        let size = match std::fs::metadata(&path) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => anyhow::bail!(
                "Fatal error loading the DB from {}: {e}. Exiting.",
                path.display()
            ),
        };
        engine.begin_loading(size, now);
        let progress = Arc::new(Mutex::new(kayvee_rdb::Progress::default()));
        let (config, seed, shared) = (
            engine.core.config.clone(),
            engine.core.seed,
            progress.clone(),
        );
        let file = path.clone();
        let thread = std::thread::Builder::new()
            .name("kayvee-load".into())
            .spawn(move || {
                let bytes = std::fs::read(&file)?;
                let opts = LoadOptions {
                    config: &config,
                    seed,
                    now_ms: now.ms(),
                };
                let report = &mut |p| *shared.lock().expect("progress lock") = p;
                kayvee_rdb::load_with_progress(&bytes, &opts, report)
                    .map_err(|e| anyhow::anyhow!("{e}"))
            })?;
        Ok(Some(StartupLoad {
            thread,
            progress,
            path,
            started: Instant::now(),
        }))
    }

    /// Copies the progress into the engine (INFO); true once the thread is done.
    pub fn poll(&self, engine: &mut Engine) -> bool {
        let p = *self.progress.lock().expect("progress lock");
        engine.loading_progress(p.bytes, p.keys, p.rdb_used_mem);
        self.thread.is_finished()
    }

    /// Hands the loaded data to the engine, or the error that must stop the server.
    pub fn finish(self, engine: &mut Engine, now: Now) -> anyhow::Result<()> {
        let loaded = self
            .thread
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the load thread panicked")))
            .map_err(|e| {
                anyhow::anyhow!(
                    "Fatal error loading the DB from {}: {e}. Exiting.",
                    self.path.display()
                )
            })?;
        info!(
            "Done loading RDB, keys loaded: {}, keys expired: {}.",
            loaded.keys_loaded, loaded.keys_expired
        );
        engine.load_dbs(loaded.dbs, loaded.keys_loaded, loaded.keys_expired, now);
        if let Some(r) = kayvee_rdb::ReplAux::from_aux(&loaded.aux) {
            info!(
                "Restored replication ID {} and offset {} from the RDB.",
                r.replid, r.offset
            );
            engine.restore_replication(r.stream_db, r.replid, r.offset, &loaded.expired);
        }
        engine
            .load_functions(&loaded.functions, false)
            .map_err(|e| {
                anyhow::anyhow!(
                    "Fatal error loading the DB from {}: {e}. Exiting.",
                    self.path.display()
                )
            })?;
        info!(
            "DB loaded from disk: {:.3} seconds",
            self.started.elapsed().as_secs_f64()
        );
        Ok(())
    }
}

/// DEBUG RELOAD NOSAVE: loads `dir/dbfilename` as it is in place of the dataset (`flush`), or
/// over it (NOFLUSH: with `merge` loaded keys and libraries replace existing ones, else one
/// that exists fails the load). A file that is missing or does not load gets Redis's error
/// and leaves the dataset as it was (Redis empties it first).
pub fn reload_from_disk(engine: &mut Engine, now: Now, flush: bool, merge: bool) -> Answer {
    let path = rdb_path(engine);
    let loaded = std::fs::read(&path)
        .map_err(|e| e.to_string())
        .and_then(|bytes| {
            let opts = LoadOptions {
                config: &engine.core.config,
                seed: engine.core.seed,
                now_ms: now.ms(),
            };
            kayvee_rdb::load(&bytes, &opts).map_err(|e| e.to_string())
        });
    // The functions are replaced (or merged) as the keys are (a load that fails keeps both).
    let loaded = loaded.and_then(|loaded| {
        let saved = engine.function_codes();
        if flush {
            engine.flush_functions();
        }
        match engine.load_functions(&loaded.functions, merge) {
            Ok(()) => Ok(loaded),
            Err(e) => {
                engine.flush_functions();
                let _ = engine.load_functions(&saved, false);
                Err(e)
            }
        }
    });
    let loaded = match loaded {
        Ok(loaded) if !flush => {
            let keys = loaded.keys_loaded;
            match engine.merge_dbs(loaded.dbs, merge) {
                true => Ok((None, keys)),
                false => Err("a loaded key exists (NOFLUSH without MERGE)".to_string()),
            }
        }
        Ok(loaded) => {
            let keys = loaded.keys_loaded;
            Ok((Some(loaded), keys))
        }
        Err(e) => Err(e),
    };
    match loaded {
        Ok((None, keys)) => {
            info!(
                "DB merged by DEBUG RELOAD NOSAVE NOFLUSH from {}: {keys} keys loaded",
                path.display()
            );
            Answer::Ok
        }
        Ok((Some(loaded), _)) => {
            info!(
                "DB reloaded by DEBUG RELOAD NOSAVE from {}: {} keys loaded",
                path.display(),
                loaded.keys_loaded
            );
            engine.load_dbs(loaded.dbs, loaded.keys_loaded, loaded.keys_expired, now);
            Answer::Ok
        }
        Err(e) => {
            warn!("DEBUG RELOAD NOSAVE: loading {}: {e}", path.display());
            Answer::Error("ERR Error trying to load the RDB dump, check server logs.".into())
        }
    }
}

/// Serialises `snapshot` into `path` crash-safely (see the module doc).
pub fn write_rdb(snapshot: Snapshot, opts: WriteOptions, path: &Path) -> io::Result<()> {
    write_rdb_paced(snapshot, opts, path, &Pace::default())
}

/// How a background save goes: `rdb-key-save-delay` (microseconds slept after each key, the
/// test suite's slow save), the flag that stops it and the progress INFO reads (keys written,
/// how far the snapshot is let go of).
#[derive(Default)]
struct Pace {
    key_delay_us: u64,
    stop: Option<Arc<AtomicBool>>,
    progress: Option<Arc<WriterProgress>>,
}

/// [`write_rdb`] at `pace`.
fn write_rdb_paced(
    snapshot: Snapshot,
    opts: WriteOptions,
    path: &Path,
    pace: &Pace,
) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let seq = TEMP_SEQ.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!("temp-{}-{seq}.rdb", std::process::id()));
    let result = write_file(snapshot, opts, &tmp, pace).and_then(|()| {
        std::fs::rename(&tmp, path)?;
        File::open(&dir)?.sync_all()
    });
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Writes the whole file at `tmp` and fsyncs it.
fn write_file(
    snapshot: Snapshot,
    mut opts: WriteOptions,
    tmp: &Path,
    pace: &Pace,
) -> io::Result<()> {
    let mut file = File::create(tmp)?;
    if pace.key_delay_us > 0 {
        opts.chunk_len = 1; // a key a chunk, slept after
    }
    let mut writer = RdbWriter::new(snapshot, opts);
    let mut buf = Vec::with_capacity(128 * 1024);
    while writer.next_chunk(&mut buf) {
        if pace
            .stop
            .as_ref()
            .is_some_and(|s| s.load(Ordering::Relaxed))
        {
            return Err(io::Error::other("stopped"));
        }
        file.write_all(&buf)?;
        buf.clear();
        if let Some(p) = &pace.progress {
            p.set_keys(writer.keys_written());
            p.set_released(writer.released());
        }
        if pace.key_delay_us > 0 {
            std::thread::sleep(std::time::Duration::from_micros(pace.key_delay_us));
        }
    }
    file.sync_all()
}

/// SAVE and the save on shutdown: snapshot and write now, on the loop's thread.
pub fn save_sync(engine: &mut Engine, now: Now) -> io::Result<()> {
    engine.save_started(false, now);
    let path = rdb_path(engine);
    let result = write_rdb(engine.snapshot(now), write_options(engine), &path);
    engine.save_finished(result.is_ok(), false, now);
    match &result {
        Ok(()) => info!("DB saved on disk"),
        Err(e) => warn!("Failed saving the DB to {}: {e}", path.display()),
    }
    result
}

/// Nice value of the background save thread: the save reads an immutable snapshot and has no
/// deadline, while the event loop answers clients; when both want the same core the loop gets
/// about nine tenths of it (CFS weights 1024 : 110) and the save takes longer.
const SAVE_THREAD_NICE: libc::c_int = 10;

/// Lowers the calling thread's scheduling priority to [`SAVE_THREAD_NICE`] (Linux nice values are
/// per thread). Failure only costs foreground latency, so it is logged and ignored.
fn yield_to_the_loop() {
    // SAFETY: plain system calls on the calling thread with no pointers.
    let rc = unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, SAVE_THREAD_NICE)
    };
    if rc != 0 {
        warn!(
            "Could not lower the save thread's priority: {}",
            io::Error::last_os_error()
        );
    }
}

/// A background save under way.
pub struct BgSave {
    thread: JoinHandle<io::Result<()>>,
    started: Instant,
    /// Set to stop the thread between keys (FLUSHALL).
    stop: Arc<AtomicBool>,
}

impl BgSave {
    /// Takes the snapshot now and starts the writing thread. The engine must already count the
    /// save as started (BGSAVE's outcome, [`Engine::take_due_save`]); INFO follows the
    /// thread's progress from now on.
    pub fn start(engine: &mut Engine, now: Now) -> io::Result<Self> {
        let snapshot = engine.snapshot(now);
        let progress = engine.writer_started(Writer::Rdb, &snapshot);
        let opts = write_options(engine);
        let path = rdb_path(engine);
        let stop = Arc::new(AtomicBool::new(false));
        let pace = Pace {
            key_delay_us: engine.core.config.int_param("rdb-key-save-delay").max(0) as u64,
            stop: Some(stop.clone()),
            progress: Some(progress),
        };
        let thread = std::thread::Builder::new()
            .name("kayvee-bgsave".into())
            .spawn(move || {
                yield_to_the_loop();
                write_rdb_paced(snapshot, opts, &path, &pace)
            })?;
        info!("Background saving started");
        Ok(BgSave {
            thread,
            started: Instant::now(),
            stop,
        })
    }

    /// Stops the save (FLUSHALL): the thread quits between keys and removes its temporary
    /// file; the engine hears it ended without success or failure.
    pub fn abort(self, engine: &mut Engine, now: Now) {
        info!("Killing the running background save (FLUSHALL)");
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
        engine.save_aborted(now);
        info!("Background saving terminated by FLUSHALL");
    }

    /// Whether the thread is done.
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Waits for the thread and reports the result to the engine.
    pub fn finish(self, engine: &mut Engine, now: Now) {
        let result = self
            .thread
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the save thread panicked")));
        match &result {
            Ok(()) => info!(
                "Background saving terminated with success ({:.3} s)",
                self.started.elapsed().as_secs_f64()
            ),
            Err(e) => warn!("Background saving error: {e}"),
        }
        engine.save_finished(result.is_ok(), true, now);
    }
}
