//! Disk-based full syncs (`repl-diskless-sync no`, and replicas without `capa eof`), for a
//! shell that has files ([`Driver::enable_file_syncs`]): the sync is a background save, as
//! Redis's is. The driver takes the snapshot at the PSYNC and counts the save as started
//! (INFO `rdb_bgsave_in_progress`); the shell writes it to the RDB file as BGSAVE does
//! ([`Driver::take_replica_save`]) and, when it ends, opens the file for the driver
//! ([`Driver::replica_save_finished`]), which sends it as `$<len>` and its bytes to every
//! replica that waited for it, a piece at a time while the loop serves. A replica that asks
//! while that save runs shares it (its `+FULLRESYNC` names the save's offset). When the last
//! waiting replica leaves and no `save` point is set, the save is stopped, as Redis kills its
//! child; with save points it goes on and writes the file. docs/decisions.md ("Replication")
//! has the design.

use crate::driver::{Driver, Notice};
use crate::replicas::{ReplicaSave, SharedFile, Sync, SyncFile};
use crate::session::Closing;
use alloc::boxed::Box;
use alloc::rc::Rc;
use core::cell::RefCell;
use kayvee_engine::{Handle, Now, Snapshot};

impl Driver {
    /// The shell can write a background save's file and read it back: full syncs of
    /// `repl-diskless-sync no` (and of replicas without `capa eof`) go through the file.
    pub fn enable_file_syncs(&mut self) {
        self.file_syncs = true;
    }

    /// The snapshot of a background save for replicas, if one is to start: the shell writes it
    /// to the RDB file as a BGSAVE (the engine already counts it started) and reports its end
    /// with [`Driver::replica_save_finished`].
    pub fn take_replica_save(&mut self) -> Option<Snapshot> {
        self.replica_save.as_mut()?.snapshot.take()
    }

    /// The background save for replicas ended: `file` is what it wrote, opened (`None`: it
    /// failed or was stopped). Each replica that waited gets the file; without it they are
    /// dropped, as Redis drops them when its child fails.
    pub fn replica_save_finished(
        &mut self,
        file: Option<Box<dyn SyncFile>>,
        clock: &dyn crate::driver::Clock,
    ) {
        self.replica_save = None;
        let shared: Option<SharedFile> = file.map(|f| Rc::new(RefCell::new(f)));
        for slot in 0..self.sessions.len() {
            let Some(s) = self.sessions[slot].as_mut() else {
                continue;
            };
            let Some(sync) = s.sync.as_mut().filter(|y| y.awaits_file()) else {
                continue;
            };
            match &shared {
                Some(f) => {
                    sync.file_saved(f.clone());
                    self.pump_sync(slot, clock);
                }
                None => {
                    s.closing = Closing::Now;
                    self.mark_dirty(slot);
                    self.notice(Notice::Warning(
                        "SYNC failed. BGSAVE child returned an error".into(),
                    ));
                }
            }
        }
    }

    /// Whether a full sync for replica `h` goes through a background save's file: the shell
    /// has files, and `repl-diskless-sync no` or the replica lacks `capa eof`. Never for a
    /// filtered RDB (`rdb-filter-only functions`): the file is the server's own `dump.rdb`,
    /// which must hold the whole dataset; Redis sends such an RDB to the socket.
    pub(crate) fn sync_through_file(&mut self, h: Handle, eof: bool) -> bool {
        self.file_syncs
            && (!eof || !self.engine.core.config.bool_param("repl-diskless-sync"))
            && !self.engine.core.repl.announced_mut(h).functions_only
    }

    /// Replica `h` (in `slot`) needs a full sync through a file: it shares the background
    /// save for replicas that runs, or one starts now from a snapshot taken here, at the
    /// offset its `+FULLRESYNC` named. Returns false when neither can be (another background
    /// save runs, or one for replicas already ended): the caller streams it from the loop.
    pub(crate) fn start_file_sync(&mut self, slot: usize, h: Handle, now: Now) -> bool {
        let stream_start = match &self.replica_save {
            Some(save) => {
                let start = save.stream_start;
                // It shares the running save: no fork of its own (the PSYNC counted one).
                self.engine.core.stats.total_forks -= 1;
                if let Some(r) = self.engine.core.repl.replica_mut(h) {
                    r.stream_start = start;
                }
                let replid = self.engine.core.repl.replid.clone();
                let s = self.sessions[slot].as_mut().expect("a live session");
                let line = crate::replicas::take_fullresync(&mut s.out, s.out_sent);
                if !line.is_empty() {
                    let again = alloc::format!("+FULLRESYNC {replid} {}\r\n", start - 1);
                    s.out.extend_from_slice(again.as_bytes());
                }
                start
            }
            None => {
                let p = &self.engine.core.persist;
                if p.bgsave_in_progress() || p.loading.is_some() {
                    return false;
                }
                let snapshot = self.engine.snapshot(now);
                let start = self
                    .engine
                    .core
                    .repl
                    .replica_mut(h)
                    .map_or(0, |r| r.stream_start);
                self.engine.replica_save_started(now);
                self.replica_save = Some(ReplicaSave {
                    stream_start: start,
                    snapshot: Some(snapshot),
                });
                start
            }
        };
        let s = self.sessions[slot].as_mut().expect("a live session");
        s.sync = Some(Sync::from_file(stream_start));
        true
    }

    /// A replica that waited for the save for replicas left: when none waits any more and no
    /// `save` point is set, the save is stopped (the shell hears it through the engine, as
    /// FLUSHALL's stop), as Redis kills a child no replica waits for; with save points it goes
    /// on as a BGSAVE.
    pub(crate) fn file_sync_left(&mut self) {
        if self.replica_save.is_none() {
            return;
        }
        let waiting = self
            .sessions
            .iter()
            .flatten()
            .any(|s| s.sync.as_ref().is_some_and(Sync::awaits_file));
        if waiting {
            return;
        }
        let save = self.replica_save.take().expect("checked above");
        if !self.engine.core.config.save_points().is_empty() {
            return;
        }
        if save.snapshot.is_some() {
            // The shell never started it: it ends where it began.
            let started_ms = self.engine.core.persist.bgsave_started_ms.unwrap_or(0);
            self.engine.save_aborted(Now::from_ms(started_ms));
        } else {
            self.engine.core.persist.abort_bgsave = Some("no replica waits for it");
        }
    }
}
