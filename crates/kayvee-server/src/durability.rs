//! What the server keeps on disk besides the sockets' work: the background save (BGSAVE and
//! save points), the append-only file with its group commit and rewrites (BGREWRITEAOF, also
//! with the AOF off), and the startup load. The event loop calls in at fixed points: before
//! any reply is written ([`Durability::flush_aof`]), after each pass
//! ([`Durability::after_pass`]) and at the cron ([`Durability::cron`]).

use kayvee_engine::{Engine, Now};
use std::io;
use std::time::{Duration, Instant};
use tracing::warn;

/// The files' state.
#[derive(Default)]
pub struct Durability {
    /// The background save under way (BGSAVE, save points).
    bgsave: Option<crate::persist::BgSave>,
    /// The append-only file, when on.
    pub aof: Option<crate::aof::Aof>,
    /// BGREWRITEAOF with the AOF off: the thread writing the base, and when it started.
    detached_rewrite: Option<(crate::aof::Detached, Instant)>,
    /// The startup load, while it runs.
    pub loading: Option<crate::persist::StartupLoad>,
    /// CONFIG SET appendonly yes came during a background save: the AOF's first rewrite
    /// waits for its end.
    aof_on_scheduled: bool,
    /// The running background save is a disk-based full sync's
    /// (`Driver::take_replica_save`).
    bgsave_for_replicas: bool,
    /// How the last background save for replicas ended (true: it wrote the file), until the
    /// loop hands that to the driver ([`Durability::take_replica_save_end`]).
    replica_save_end: Option<bool>,
}

impl Durability {
    /// Whether replies must wait for the pass's AOF write: the AOF is on and holds writes of
    /// this pass.
    #[inline]
    pub fn holds_replies(&self, engine: &Engine) -> bool {
        self.aof.as_ref().is_some_and(|a| a.needs_flush(engine))
    }

    /// Writes (and under `always` fsyncs) what the engine propagated: called before any reply
    /// of the pass goes out (group commit).
    #[inline]
    pub fn flush_aof(&mut self, engine: &mut Engine) {
        if let Some(aof) = self.aof.as_mut() {
            if aof.needs_flush(engine) {
                let sleep_us = engine.core.debug.aof_flush_sleep_us;
                if sleep_us > 0 {
                    // DEBUG AOF-FLUSH-SLEEP, as Redis's `flushAppendOnlyFile`.
                    std::thread::sleep(std::time::Duration::from_micros(sleep_us));
                }
                aof.flush(engine);
            }
        }
    }

    /// BGSAVE: starts the background save of an O(1) snapshot (reported to the engine).
    pub fn start_bgsave(&mut self, engine: &mut Engine, now: Now) {
        engine.save_started(true, now);
        match crate::persist::BgSave::start(engine, now) {
            Ok(bg) => self.bgsave = Some(bg),
            Err(e) => {
                warn!("Can't start the background save: {e}");
                engine.save_finished(false, true, now);
            }
        }
    }

    /// A disk-based full sync's background save of `snapshot` (the engine counts it started).
    pub fn start_replica_bgsave(
        &mut self,
        engine: &mut Engine,
        snapshot: kayvee_engine::Snapshot,
        now: Now,
    ) {
        // Replicas wait for it, and the snapshot's old versions pile up while it runs: it does
        // not give way to the loop as a BGSAVE does.
        match crate::persist::BgSave::start_of(engine, snapshot, false) {
            Ok(bg) => {
                self.bgsave = Some(bg);
                self.bgsave_for_replicas = true;
            }
            Err(e) => {
                warn!("Can't start the background save for replication: {e}");
                engine.save_finished(false, true, now);
                self.replica_save_end = Some(false);
            }
        }
    }

    /// How the last background save for replicas ended, once (true: the file is written).
    pub fn take_replica_save_end(&mut self) -> Option<bool> {
        self.replica_save_end.take()
    }

    /// A background save ended (`ok`: it wrote the file): one for replicas is reported.
    fn bgsave_ended(&mut self, ok: bool) {
        if std::mem::take(&mut self.bgsave_for_replicas) {
            self.replica_save_end = Some(ok);
        }
    }

    /// After a read's commands, before their replies go out: `aof-disable-auto-gc no` drops
    /// the history from the manifest (one test while there is none).
    #[inline]
    pub fn after_read(&mut self, engine: &Engine) {
        if let Some(aof) = self.aof.as_mut().filter(|a| a.has_history()) {
            aof.collect_history(engine);
        }
    }

    /// Stops the running background save if FLUSHALL asked for it.
    pub fn abort_bgsave_if_asked(&mut self, engine: &mut Engine, now: Now) {
        if let Some(why) = engine.take_bgsave_abort_reason() {
            if let Some(bg) = self.bgsave.take() {
                bg.abort(engine, now, why);
                self.bgsave_ended(false);
            }
        }
    }

    /// Waits for the running background save, if any, and reports it to the engine.
    pub fn wait_bgsave(&mut self, engine: &mut Engine, now: Now) {
        if let Some(bg) = self.bgsave.take() {
            let ok = bg.finish(engine, now);
            self.bgsave_ended(ok);
        }
    }

    /// Shutdown: a running background save is killed (its child and temporary file go), as
    /// Redis kills its child before the last save or the exit.
    pub fn kill_bgsave(&mut self, engine: &mut Engine, now: Now) {
        if let Some(bg) = self.bgsave.take() {
            warn!("There is a child saving an .rdb. Killing it!");
            bg.abort(engine, now, "shutdown");
            self.bgsave_ended(false);
        }
    }

    /// The cron part: a finished background save is reported and the one a save point or
    /// BGSAVE SCHEDULE asks for starts; the AOF's own cron (everysec, rewrites) runs.
    pub fn cron(&mut self, engine: &mut Engine, now: Now) {
        if self
            .bgsave
            .as_ref()
            .is_some_and(crate::persist::BgSave::is_finished)
        {
            self.wait_bgsave(engine, now);
        }
        if self.bgsave.is_none() && engine.take_due_save(now) {
            match crate::persist::BgSave::start(engine, now) {
                Ok(bg) => self.bgsave = Some(bg),
                Err(e) => {
                    warn!("Can't start the background save: {e}");
                    engine.save_finished(false, true, now);
                }
            }
        }
        if let Some(aof) = self.aof.as_mut() {
            aof.cron(engine, now);
        }
        self.after_pass(engine, now);
    }

    /// Acts on the AOF requests of the last commands: CONFIG SET appendonly, BGREWRITEAOF
    /// (after the running BGSAVE).
    pub fn after_pass(&mut self, engine: &mut Engine, now: Now) {
        self.abort_bgsave_if_asked(engine, now);
        if self.detached_finished() {
            self.finish_detached_rewrite(engine);
        }
        let wanted = engine.core.config.appendonly;
        if wanted && self.aof.is_none() {
            self.turn_aof_on(engine, now);
        } else if !wanted {
            if let Some(aof) = self.aof.take() {
                aof.close(engine);
            }
            if std::mem::take(&mut self.aof_on_scheduled) {
                let s = &mut engine.core.aof.status;
                s.rewrite_scheduled = false;
                s.on = false;
            }
        }
        let s = &engine.core.aof.status;
        if s.rewrite_scheduled && self.bgsave.is_none() {
            engine.core.aof.status.rewrite_requested = true;
        }
        if engine.core.aof.status.rewrite_requested {
            match self.aof.as_mut() {
                Some(aof) if !aof.rewriting() => aof.start_rewrite(engine, now),
                Some(_) => {}
                None => self.start_detached_rewrite(engine, now),
            }
        }
    }

    /// CONFIG SET appendonly yes: the first rewrite starts now ([`crate::aof::Aof::enable`]),
    /// or, while a background save runs, once it is over (INFO `aof_rewrite_scheduled`), as
    /// Redis schedules it.
    fn turn_aof_on(&mut self, engine: &mut Engine, now: Now) {
        note_aof_scheduled(engine);
        if self.bgsave.is_some() {
            if !self.aof_on_scheduled {
                self.aof_on_scheduled = true;
                warn!(
                    "AOF was enabled but there is already another background operation. An AOF \
                     background was scheduled to start when possible."
                );
                let s = &mut engine.core.aof.status;
                s.rewrite_scheduled = true;
                s.on = true;
            }
            return;
        }
        while self.detached_rewrite.is_some() {
            std::thread::sleep(Duration::from_millis(2));
            if self.detached_finished() {
                self.finish_detached_rewrite(engine);
            }
        }
        self.aof_on_scheduled = false;
        match crate::aof::Aof::enable(engine, now) {
            Ok(aof) => self.aof = Some(aof),
            Err(e) => {
                warn!("Can't turn the append only file on: {e}");
                engine.core.config.appendonly = false;
                let s = &mut engine.core.aof.status;
                s.rewrite_scheduled = false;
                s.on = false;
            }
        }
    }

    /// Reports the startup load's progress; when it is done, installs the data or fails.
    pub fn loading_cron(&mut self, engine: &mut Engine, now: Now) -> io::Result<()> {
        let done = match &self.loading {
            Some(load) => load.poll(engine),
            None => return Ok(()),
        };
        if done {
            let load = self.loading.take().expect("checked above");
            load.finish(engine, now).map_err(|e| {
                warn!("{e}");
                io::Error::other(e.to_string())
            })?;
        }
        Ok(())
    }

    /// Whether the first rewrite of the AOF turned on at runtime runs: the AOF on disk does
    /// not hold the data yet, and SHUTDOWN without FORCE refuses to exit (Redis 7.0's
    /// "Writing initial AOF").
    pub fn writing_initial_aof(&self) -> bool {
        self.aof
            .as_ref()
            .is_some_and(crate::aof::Aof::writing_first_base)
    }

    /// The end: a running background save or rewrite is killed (no child and no temporary
    /// file outlives the server), then the last AOF write and fsync.
    pub fn close(&mut self, engine: &mut Engine, now: Now) {
        self.kill_bgsave(engine, now);
        if let Some((t, _)) = self.detached_rewrite.take() {
            warn!("Killing running AOF rewrite child");
            t.stop.store(true, std::sync::atomic::Ordering::Relaxed);
            if let Some(c) = &t.child {
                c.kill();
            }
            let _ = t.thread.join();
            engine.core.aof.status.rewrite_started_ms = None;
        }
        if let Some(aof) = self.aof.take() {
            aof.close_at_exit(engine, now);
        } else if std::mem::take(&mut self.aof_on_scheduled) {
            // Turned on while a background save ran: its first rewrite never started.
            crate::aof::write_first_base_at_exit(engine, None, now);
        }
    }

    fn detached_finished(&self) -> bool {
        self.detached_rewrite
            .as_ref()
            .is_some_and(|(t, _)| t.thread.is_finished())
    }

    /// BGREWRITEAOF with the AOF off: a base and a manifest on a thread (see
    /// [`crate::aof::rewrite_detached`]).
    fn start_detached_rewrite(&mut self, engine: &mut Engine, now: Now) {
        let s = &mut engine.core.aof.status;
        s.rewrite_requested = false;
        s.rewrite_scheduled = false;
        if self.detached_rewrite.is_some() {
            return;
        }
        match crate::aof::rewrite_detached(engine, now) {
            Ok(t) => {
                engine.aof_rewrite_started(now);
                self.detached_rewrite = Some((t, Instant::now()));
            }
            Err(e) => {
                warn!("Can't rewrite append only file in background: {e}");
                engine.core.aof.status.last_bgrewrite_ok = false;
            }
        }
    }

    /// Reports the end of a detached rewrite to the engine.
    fn finish_detached_rewrite(&mut self, engine: &mut Engine) {
        let Some((t, started)) = self.detached_rewrite.take() else {
            return;
        };
        let result = t
            .thread
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the rewrite thread panicked")));
        engine.writer_finished(kayvee_engine::save_progress::Writer::Aof, result.is_ok());
        let s = &mut engine.core.aof.status;
        s.rewrite_started_ms = None;
        s.last_rewrite_time_s = started.elapsed().as_secs() as i64;
        match result {
            Ok(_) => {
                tracing::info!("Background AOF rewrite finished successfully");
                s.last_bgrewrite_ok = true;
                s.rewrites += 1;
                s.consecutive_failures = 0;
            }
            Err(e) => {
                crate::aof::log_rewrite_failure(&e);
                s.last_bgrewrite_ok = false;
                s.consecutive_failures += 1;
            }
        }
    }
}

/// CONFIG SET appendonly yes inside EXEC: Redis's notice, logged once. The loop calls this right
/// after a connection's commands, before their replies go out (as Redis logs it during the
/// EXEC), and again when the log is turned on.
pub fn note_aof_scheduled(engine: &mut Engine) {
    if core::mem::take(&mut engine.core.aof.status.enabled_in_exec) {
        warn!(
            "AOF was enabled during a transaction. An AOF background was scheduled to start \
             when possible."
        );
    }
}
