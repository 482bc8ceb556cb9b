//! RDB files on disk: loading `dir/dbfilename` at startup, SAVE (synchronous), background
//! saves on a thread (BGSAVE, save points) and crash-safe writing.
//!
//! A background save needs no fork: the engine's snapshot is O(1) (persistent structures), a
//! thread serialises it with `kayvee_rdb::RdbWriter` while the loop keeps serving, into a
//! save-writer child process that writes `temp-<child pid>.rdb` (`crate::savechild`, as
//! Redis's child names it), and the loop's cron notices the end and reports it to the engine.
//!
//! Crash safety: the temporary file (`temp-<child pid>.rdb`, or `temp-<pid>-<n>.rdb` for SAVE)
//! in `dir` is fsynced, renamed over `dbfilename`, then the directory is fsynced. A failure
//! (the child killed, a write error) removes the temporary file and leaves the previous
//! snapshot intact.

use crate::savechild::{self, ChildRef, Kind, Spool};
use kayvee_engine::save_progress::{Writer, WriterProgress};
use kayvee_engine::{Engine, Now, Snapshot};
use kayvee_rdb::{LoadOptions, RdbWriter, WriteOptions};
use kayvee_session::Answer;
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
                kayvee_rdb::load_with_progress(&bytes, &opts, report).map_err(|e| {
                    if e.is_read_failure() {
                        // Redis's report of a file it cannot read through (the cause, then
                        // this line), ahead of the fatal error.
                        warn!("{e}");
                        warn!("Terminating server after rdb file reading failure.");
                    }
                    anyhow::anyhow!("{e}")
                })
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
        for key in &loaded.empty_skipped {
            warn!(
                "rdbLoadObject skipping empty key: {}",
                String::from_utf8_lossy(key)
            );
        }
        match loaded.empty_skipped.len() {
            0 => info!(
                "Done loading RDB, keys loaded: {}, keys expired: {}.",
                loaded.keys_loaded, loaded.keys_expired
            ),
            n => info!(
                "Done loading RDB, keys loaded: {}, keys expired: {}, empty keys skipped: {n}.",
                loaded.keys_loaded, loaded.keys_expired
            ),
        }
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

/// Serialises `snapshot` into `path` crash-safely (see the module doc), from this process.
pub fn write_rdb(snapshot: Snapshot, opts: WriteOptions, path: &Path) -> io::Result<()> {
    let seq = TEMP_SEQ.fetch_add(1, Ordering::Relaxed);
    let tmp = dir_of(path).join(format!("temp-{}-{seq}.rdb", std::process::id()));
    let spool = Spool::direct(tmp, Arc::default())?;
    savechild::write_with(spool, path, |out| {
        write_chunks(snapshot, opts, out, 0, None)
    })
    .map(drop)
}

/// The directory of `path` (`.` for a bare name).
fn dir_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Writes the RDB bytes of `snapshot` into `out`, pausing `key_delay_us` after each key
/// (`rdb-key-save-delay`, the test suite's slow save).
fn write_chunks(
    snapshot: Snapshot,
    mut opts: WriteOptions,
    out: &mut Spool,
    key_delay_us: u64,
    progress: Option<&WriterProgress>,
) -> io::Result<()> {
    if key_delay_us > 0 {
        opts.chunk_len = 1; // a key a chunk, paused after
    }
    let mut writer = RdbWriter::new(snapshot, opts);
    let mut buf = Vec::with_capacity(128 * 1024);
    while writer.next_chunk(&mut buf) {
        out.write_all(&buf)?;
        buf.clear();
        if let Some(p) = progress {
            p.set_keys(writer.keys_written());
            p.set_released(writer.released());
        }
        out.pause(key_delay_us)?;
    }
    Ok(())
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

/// The save on shutdown: as [`save_sync`], but into `temp-<pid>.rdb` (the file the signal
/// handler deletes when a second SIGINT ends the process during the save) and with
/// `rdb-key-save-delay` after each key, as Redis's.
pub fn save_on_shutdown(engine: &mut Engine, now: Now) -> io::Result<()> {
    engine.save_started(false, now);
    let path = rdb_path(engine);
    let key_delay_us = engine.core.config.int_param("rdb-key-save-delay").max(0) as u64;
    let tmp = dir_of(&path).join(format!("temp-{}.rdb", std::process::id()));
    crate::signals::set_temp_rdb(&tmp);
    let (snapshot, opts) = (engine.snapshot(now), write_options(engine));
    let result = Spool::direct(tmp, Arc::default()).and_then(|spool| {
        savechild::write_with(spool, &path, |out| {
            write_chunks(snapshot, opts, out, key_delay_us, None)
        })
        .map(drop)
    });
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
    thread: JoinHandle<io::Result<u64>>,
    started: Instant,
    /// Set to stop the thread between keys (FLUSHALL, shutdown).
    stop: Arc<AtomicBool>,
    /// The save-writer child (None when none could be started: the thread writes the file).
    child: Option<ChildRef>,
}

/// How a background save's child presents itself, from the configuration.
pub fn child_setup(engine: &Engine, kind: Kind) -> savechild::Setup {
    savechild::Setup {
        title: crate::proctitle::wanted(engine, kind.title()),
        oom_score: crate::oom::child_score(),
    }
}

/// A spool for a background save of `kind` into `dir`: a save-writer child, or, when none can
/// be started, the file `fallback` written by the thread itself.
pub fn background_spool(
    engine: &Engine,
    kind: Kind,
    dir: &Path,
    stop: &Arc<AtomicBool>,
    fallback: PathBuf,
) -> io::Result<(Spool, Option<ChildRef>)> {
    match Spool::child(kind, dir, stop.clone(), &child_setup(engine, kind)) {
        Ok((spool, child)) => Ok((spool, Some(child))),
        Err(e) => {
            warn!("Can't start the save-writer child ({e}): writing from the server instead");
            Ok((Spool::direct(fallback, stop.clone())?, None))
        }
    }
}

impl BgSave {
    /// Takes the snapshot now, starts the save-writer child and the thread that feeds it.
    /// The engine must already count the save as started (BGSAVE's outcome,
    /// [`Engine::take_due_save`]); INFO follows the thread's progress from now on.
    pub fn start(engine: &mut Engine, now: Now) -> io::Result<Self> {
        let snapshot = engine.snapshot(now);
        Self::start_of(engine, snapshot, true)
    }

    /// [`BgSave::start`] of a snapshot taken before (a disk-based full sync's, taken at its
    /// PSYNC's offset); `yielding`: the thread gives way to the loop ([`SAVE_THREAD_NICE`]).
    pub fn start_of(
        engine: &mut Engine,
        snapshot: kayvee_engine::Snapshot,
        yielding: bool,
    ) -> io::Result<Self> {
        let progress = engine.writer_started(Writer::Rdb, &snapshot);
        let opts = write_options(engine);
        let path = rdb_path(engine);
        let stop = Arc::new(AtomicBool::new(false));
        let key_delay_us = engine.core.config.int_param("rdb-key-save-delay").max(0) as u64;
        let seq = TEMP_SEQ.fetch_add(1, Ordering::Relaxed);
        let fallback = dir_of(&path).join(format!("temp-{}-{seq}.rdb", std::process::id()));
        let (spool, child) = background_spool(engine, Kind::Rdb, &dir_of(&path), &stop, fallback)?;
        let thread = std::thread::Builder::new()
            .name("kayvee-bgsave".into())
            .spawn(move || {
                if yielding {
                    yield_to_the_loop();
                }
                savechild::write_with(spool, &path, |out| {
                    write_chunks(snapshot, opts, out, key_delay_us, Some(&progress))
                })
            });
        let thread = match thread {
            Ok(t) => t,
            Err(e) => {
                if let Some(c) = &child {
                    c.kill();
                }
                return Err(e);
            }
        };
        match &child {
            Some(c) => info!("Background saving started by pid {}", c.id()),
            None => info!("Background saving started"),
        }
        Ok(BgSave {
            thread,
            started: Instant::now(),
            stop,
            child,
        })
    }

    /// Stops the save (FLUSHALL, shutdown): the child is killed, the thread quits and removes
    /// the temporary file; the engine hears it ended without success or failure.
    pub fn abort(self, engine: &mut Engine, now: Now, why: &str) {
        info!("Killing the running background save ({why})");
        self.stop.store(true, Ordering::Relaxed);
        if let Some(c) = &self.child {
            c.kill();
        }
        let _ = self.thread.join();
        engine.save_aborted(now);
        info!("Background saving terminated by {why}");
    }

    /// Whether the thread is done.
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Waits for the thread and reports the result to the engine; whether the file is written.
    pub fn finish(self, engine: &mut Engine, now: Now) -> bool {
        let result = self
            .thread
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the save thread panicked")));
        match &result {
            Ok(_) => info!(
                "Background saving terminated with success ({:.3} s)",
                self.started.elapsed().as_secs_f64()
            ),
            Err(e) => match savechild::killed_by(e) {
                Some(signal) => warn!("Background saving terminated by signal {signal}"),
                None => warn!("Background saving error: {e}"),
            },
        }
        engine.save_finished(result.is_ok(), true, now);
        result.is_ok()
    }
}

/// A saved RDB file a disk-based full sync sends to its replicas (opened once: a later save
/// renames another file over the name, this one stays readable).
pub struct SavedFile {
    file: std::fs::File,
    len: u64,
}

impl SavedFile {
    /// Opens the file at `path`.
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = std::fs::File::open(path)?;
        let len = file.metadata()?.len();
        Ok(SavedFile { file, len })
    }
}

impl kayvee_session::SyncFile for SavedFile {
    fn size(&self) -> u64 {
        self.len
    }

    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Option<usize> {
        use std::os::unix::fs::FileExt;
        match self.file.read_at(buf, offset) {
            Ok(n) => Some(n),
            Err(e) => {
                warn!("Can't read the saved RDB file for a replica: {e}");
                None
            }
        }
    }
}
