//! The engine's API: `Engine`, what the shell calls (connect, execute, cron, saves, loading,
//! propagation) and what it takes back (wakeups, messages, snapshots). Running one command is
//! [`crate::dispatch`]'s work.

use crate::argv::Argv;
use crate::client::{ClientTable, ConnInfo, Handle, Transport};
use crate::cmd::spec::Commands;
use crate::command::{CommandId, CommandTable};
use crate::config::Config;
use crate::cx::Core;
use crate::db::{Db, DbSnapshot};
use crate::dispatch::{self, Dispatch};
use crate::error::Error;
use crate::host::HostInfo;
use crate::outcome::Outcome;
use crate::reply::{Protocol, Reply, ReplySink};
use crate::rng::Rng;
use crate::save_progress::{Writer, WriterProgress};
use crate::shutdown::{ShutdownFlags, ShutdownSignal};
use crate::stats::Stats;
use crate::time::Now;
use crate::{acl, blocking, cmd, drain, evict, expire, persist, repl};
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;

/// Mixed into the seed for the replication ID's draw (so it differs from the run ID).
const REPLID_SEED: u64 = 0x7265_706c_6964_0001;

/// An O(1) snapshot of every database: what persistence, transactions and replication build on.
#[derive(Clone)]
pub struct Snapshot {
    /// One snapshot per database, by index.
    pub dbs: Vec<DbSnapshot>,
    /// When it was taken (unix ms).
    pub taken_ms: u64,
    /// The function libraries' code (FUNCTION LOAD's text, header included), by library name.
    pub functions: Vec<Vec<u8>>,
}

/// The engine.
pub struct Engine {
    /// Databases, configuration, counters.
    pub core: Core,
    /// Connected clients.
    pub clients: ClientTable,
    /// The command table and the handlers.
    commands: Commands,
    /// What dispatch remembers between commands.
    dispatch: dispatch::State,
}

impl Engine {
    /// A new engine. `seed` keys the hash functions and the random source (the shell draws it
    /// from the OS); `now` is the start time.
    pub fn new(config: Config, seed: u64, now: Now) -> Self {
        let mut commands = Commands::new(cmd::GROUPS);
        // The renames name commands by their own names: all are found before any is made.
        let renames: Vec<_> = (config.rename_commands.iter())
            .filter_map(|(old, new)| Some((commands.table.lookup(old.as_bytes())?, new)))
            .collect();
        for (id, new) in renames {
            // A name the table keeps for the engine's life (renames are few and made once, at
            // startup).
            let new: &'static str = alloc::boxed::Box::leak(new.clone().into_boxed_str());
            commands.table.rename(id, new);
        }
        let acl = acl::Acl::new(&commands.table, config.requirepass.as_deref());
        let mut core = Core {
            dbs: (0..config.databases).map(|_| Db::new(seed)).collect(),
            stats: Stats {
                commands: alloc::vec![Default::default(); commands.table.all().len()],
                reset_ms: now.ms(),
                ..Default::default()
            },
            config,
            host: HostInfo::default(),
            run_id: String::new(),
            start_ms: now.ms(),
            seed,
            rng: Rng::new(seed),
            used_memory_peak: 0,
            shutting_down: false,
            shutdown_signal: None,
            shutdown_wait: None,
            shutdown_waiters: alloc::vec::Vec::new(),
            blocking: Default::default(),
            txn: Default::default(),
            watches: Default::default(),
            pubsub: Default::default(),
            persist: persist::Persistence::new(now.ms()),
            save_progress: Default::default(),
            evict: Default::default(),
            slowlog: Default::default(),
            acl,
            aof: Default::default(),
            tracking: Default::default(),
            pause: Default::default(),
            monitors: Default::default(),
            debug: Default::default(),
            latency: Default::default(),
            migrate: Default::default(),
            config_before_set: None,
            repl: crate::repl::Replication::new(&mut Rng::new(seed ^ REPLID_SEED)),
            script_running: false,
            in_exec: false,
            rewrite_answered: false,
            replay_client: None,
            #[cfg(feature = "scripting")]
            scripts: Default::default(),
        };
        evict::sync(&mut core.evict, &mut core.dbs, &core.config, seed);
        #[cfg(feature = "scripting")]
        {
            core.scripts.deprecated_api = core.config.bool_param("lua-enable-deprecated-api");
        }
        core.run_id = (0..40)
            .map(|_| char::from(b"0123456789abcdef"[(core.rng.next_u64() % 16) as usize]))
            .collect();
        if let Some((host, port)) = core.config.replicaof.clone() {
            core.repl.primary = Some(repl::Primary::new(host, port));
        }
        let dispatch = dispatch::State::new(&commands.table);
        drain::sync(&mut core);
        Engine {
            core,
            clients: ClientTable::default(),
            commands,
            dispatch,
        }
    }

    /// Registers a new connection; returns its handle.
    pub fn connect(&mut self, conn: ConnInfo, now: Now) -> Handle {
        self.core.stats.total_connections_received += 1;
        let authenticated = !self.core.acl.auth_required();
        self.clients.add(conn, now.ms(), authenticated)
    }

    /// Admits a new connection as the shell's accept does (and a busy script's serving, see
    /// `script_wait`): its handle, or the bytes to send before closing it when `maxclients`
    /// is reached or protected mode refuses it.
    pub fn admit(&mut self, conn: ConnInfo, now: Now) -> Result<Handle, &'static str> {
        self.core.admit(&mut self.clients, conn, now)
    }

    /// Unregisters a connection.
    pub fn disconnect(&mut self, h: Handle) {
        self.core.blocking.remove(h);
        drain::forget_client(&mut self.core, &self.clients, h);
        self.core.pause.remove(h);
        self.core.monitors.remove(h);
        self.core.pubsub.remove(h);
        self.primary_link_lost(h);
        self.core.repl.remove(h);
        cmd::server::forget_shutdown_waiter(&mut self.core, h);
        self.core.migrate.remove(h);
        self.clients.remove(h);
    }

    /// The protocol a client negotiated (the shell's encoder starts each reply with it).
    pub fn protocol(&self, h: Handle) -> Protocol {
        self.clients.get(h).map(|c| c.protocol).unwrap_or_default()
    }

    /// An O(1) snapshot of all databases.
    pub fn snapshot(&self, now: Now) -> Snapshot {
        Snapshot {
            dbs: self.core.dbs.iter().map(Db::snapshot).collect(),
            taken_ms: now.ms(),
            functions: self.function_codes(),
        }
    }

    /// Installs a background save's hook on every database (each with its index now, the
    /// save's), or removes it with None. Call it when the save starts, before any other
    /// command runs. See [`crate::save_hook`].
    pub fn set_save_hook(&mut self, to: Option<alloc::sync::Arc<dyn crate::save_hook::SaveHook>>) {
        for (db, d) in self.core.dbs.iter_mut().enumerate() {
            d.set_save_hook(db, to.clone());
        }
    }

    /// The command table.
    pub fn command_table(&self) -> &CommandTable {
        &self.commands.table
    }

    /// The command the last `execute` ran, if any (for the shell's timing).
    pub fn last_command(&self) -> Option<CommandId> {
        self.dispatch.last_cmd
    }

    /// Adds measured time to a command's statistics.
    pub fn record_usec(&mut self, id: CommandId, usec: u64) {
        self.core.stats.commands[id.0 as usize].usec += usec;
    }

    /// The shell measured the command it just ran for client `h` (`argv`, as the client sent
    /// it) at `usec`: adds the time to the command's statistics and logs it in SLOWLOG when
    /// it is slow enough (commands flagged `skip_slowlog`, such as EXEC and AUTH, never are;
    /// a command that blocked is logged once it is served). See `dispatch::timing`.
    #[inline]
    pub fn command_timed(&mut self, h: Handle, argv: &Argv<'_>, usec: u64, now: Now) {
        let Some(id) = self.dispatch.last_cmd else {
            return;
        };
        self.dispatcher().command_timed(h, id, argv, usec, now);
    }

    /// Installs the shell's reading of the bytes the process has allocated (its global
    /// allocator's count): the memory limit and INFO read it at command time.
    pub fn set_memory_probe(&mut self, probe: fn() -> u64) {
        self.core.evict.probe = Some(probe);
        self.core.evict.startup_bytes = probe();
    }

    /// Runs one command for client `h`, writing its reply to `out`.
    pub fn execute(
        &mut self,
        h: Handle,
        argv: &Argv<'_>,
        now: Now,
        out: &mut dyn ReplySink,
    ) -> Outcome {
        self.dispatcher().execute(h, argv, now, out)
    }

    /// A run of client `h`'s commands starts (the shell calls it before each): see
    /// [`Dispatch::begin_batch`]. Without it every command takes the full path.
    pub fn begin_batch(&mut self, h: Handle) {
        self.dispatcher().begin_batch(h);
    }

    /// [`Self::execute`], with `wait` serving the other connections should a script the
    /// command runs pass `busy-reply-threshold` (see [`crate::script_wait`]).
    pub fn execute_waiting(
        &mut self,
        h: Handle,
        argv: &Argv<'_>,
        now: Now,
        out: &mut dyn ReplySink,
        wait: &mut dyn crate::ScriptWait,
    ) -> Outcome {
        Dispatch {
            core: &mut self.core,
            clients: &mut self.clients,
            commands: &self.commands,
            state: &mut self.dispatch,
            wait: Some(wait),
        }
        .execute(h, argv, now, out)
    }

    /// MIGRATE's second half for client `h` (its command left [`Outcome::Migrate`]): the
    /// replies the shell read from the target, in order, and the link's failure if it cut
    /// them short. Writes the client's reply to `out`.
    pub fn migrate_finished(
        &mut self,
        h: Handle,
        replies: &[Reply],
        error: Option<crate::outcome::LinkError>,
        now: Now,
        out: &mut dyn ReplySink,
    ) {
        self.dispatcher()
            .finish_migrate(h, replies, error, now, out);
    }

    /// The shell could not listen on the `port` or `bind` a CONFIG SET gave
    /// ([`Outcome::Rebind`]): every parameter of that call gets its previous value back.
    pub fn rollback_config_set(&mut self) {
        cmd::config_cmd::rollback(&mut self.core);
    }

    /// What the shell listened on before the CONFIG SET that answered [`Outcome::Rebind`]:
    /// the port and the `bind` addresses.
    pub fn previous_listen(&self) -> Option<(u16, Vec<String>)> {
        let c = self.core.config_before_set.as_deref()?;
        Some((c.port, c.bind.clone()))
    }

    /// The job of the MIGRATE that answered [`Outcome::Migrate`], taken.
    pub fn take_migrate_job(&mut self) -> Option<crate::outcome::MigrateJob> {
        self.core.migrate.job.take()
    }

    /// The shell listens where a CONFIG SET said: its previous values are dropped.
    pub fn config_set_done(&mut self) {
        self.core.config_before_set = None;
    }

    /// The names (`host:port`) of MIGRATE's cached links: the shell keeps a connection for
    /// each, and closes any other it holds.
    pub fn migrate_links(&self) -> impl Iterator<Item = &str> {
        self.core.migrate.names()
    }

    /// The parts of the engine dispatch works on, borrowed.
    fn dispatcher(&mut self) -> Dispatch<'_> {
        Dispatch {
            core: &mut self.core,
            clients: &mut self.clients,
            commands: &self.commands,
            state: &mut self.dispatch,
            wait: None,
        }
    }

    /// The bytes to send (then close) when protected mode refuses a new connection, checked
    /// by the shell on accept before [`Engine::connect`] (see [`acl::Acl::protected_mode_denies`]).
    pub fn protected_mode_refusal(&self, t: &Transport) -> Option<&'static str> {
        self.core.protected_mode_refusal(t)
    }

    /// The configured ACL file (`aclfile`), if any: ACL LOAD and SAVE read and write it.
    pub fn acl_file(&self) -> Option<String> {
        let f = &self.core.config.aclfile;
        (!f.is_empty()).then(|| f.clone())
    }

    /// Replaces every user with those of an ACL file's `text` (ACL LOAD, and startup with
    /// `aclfile`). On error (Redis's text, without `ERR `) nothing changes. Clients of
    /// users other than `default` are disconnected, as Redis 7.0 does; the shell closes the
    /// clients marked `killed` when this returns `Ok(true)`.
    pub fn acl_load(&mut self, text: &str) -> Result<bool, String> {
        let path = self.core.config.aclfile.clone();
        let users = acl::file::parse(text, &path, &self.commands.table)?;
        self.core.acl.users = users;
        self.core.acl.refresh();
        let mut killed = false;
        for (_, c) in self.clients.iter_mut() {
            if c.user.as_bytes() != acl::DEFAULT_USER {
                c.killed = true;
                killed = true;
            }
        }
        Ok(killed)
    }

    /// The text ACL SAVE writes to [`Engine::acl_file`].
    pub fn acl_save_text(&self) -> String {
        acl::file::render(&self.core.acl.users, &self.commands.table)
    }

    /// Applies the `user` lines of the config file at startup; Redis's error text when one is
    /// invalid or when an `aclfile` is configured too.
    pub fn acl_apply_config_users(&mut self) -> Result<(), String> {
        let lines = self.core.config.users.clone();
        if lines.is_empty() {
            return Ok(());
        }
        if !self.core.config.aclfile.is_empty() {
            return Err(acl::file::BOTH_CONFIGURED.into());
        }
        let mut seen: Vec<&[u8]> = Vec::new();
        for line in &lines {
            let words: Vec<&[u8]> = line
                .split(' ')
                .filter(|w| !w.is_empty())
                .map(str::as_bytes)
                .collect();
            let Some((name, rules)) = words.split_first() else {
                continue;
            };
            let declaration_error = |e: &dyn core::fmt::Display| {
                alloc::format!(
                    "Error in user declaration '{}': {e}",
                    String::from_utf8_lossy(name)
                )
            };
            if seen.contains(name) {
                return Err(declaration_error(&acl::rules::RuleError::Duplicate));
            }
            seen.push(name);
            let u = acl::file::user_from_rules(name, rules, &self.commands.table)
                .map_err(|e| declaration_error(&e))?;
            self.core.acl.users.insert(name.to_vec(), u);
        }
        self.core.acl.refresh();
        Ok(())
    }

    /// CONFIG REWRITE's work after the command asked for it ([`Outcome::RewriteConfig`]): the
    /// config file's path and its new text, for the shell to write (then the shell replies
    /// `+OK`, or the error). The new text becomes the base of the next rewrite. Errs with
    /// Redis's text when the server was started without a config file.
    pub fn rewrite_config(&mut self) -> Result<(String, String), Error> {
        let force_all = core::mem::take(&mut self.core.debug.rewrite_force_all);
        let config = &mut self.core.config;
        let path = config
            .config_file
            .clone()
            .ok_or_else(cmd::config_cmd::no_config_file)?;
        let original = config.config_file_text.as_deref().unwrap_or("");
        let content = config.rewrite_with(original, force_all);
        config.config_file_text = Some(content.clone());
        Ok((path, content))
    }

    /// Whether the [`Outcome::RewriteConfig`] just returned was already answered (CONFIG
    /// REWRITE inside MULTI answers `+OK` in EXEC's array, as the other commands of the
    /// transaction): the shell writes the file and its answer is dropped (a failure is only
    /// logged). Reading it clears it.
    pub fn take_rewrite_answered(&mut self) -> bool {
        core::mem::take(&mut self.core.rewrite_answered)
    }

    /// The shell received a shutdown signal. As in Redis, the signal only asks for the
    /// shutdown: the cron starts it ([`Engine::take_asked_shutdown`]), so `DEBUG PAUSE-CRON 1`
    /// holds it back and SHUTDOWN ABORT can cancel it meanwhile.
    pub fn ask_shutdown(&mut self, signal: ShutdownSignal) {
        self.core.shutdown_signal = Some(signal);
    }

    /// Whether a signal's shutdown waits for the cron, or a shutdown waits for replicas.
    pub fn shutdown_asked(&self) -> bool {
        self.core.shutdown_signal.is_some() || self.core.shutdown_wait.is_some()
    }

    /// The cron's turn in the shutdown sequence (see [`crate::shutdown`]): `None` when there is
    /// nothing to start yet (or the cron is paused), else the flags of the shutdown to carry
    /// out now, with no connection to answer. A signal's shutdown takes them from
    /// `shutdown-on-sigterm` / `shutdown-on-sigint` (`save`, `nosave`, or neither for the
    /// save points' choice, never a save during the startup load; `force`; `now` skips the
    /// wait for replicas); a wait for replicas ends when they caught up or `shutdown-timeout`
    /// passed.
    pub fn take_due_shutdown(&mut self, now: Now) -> Option<ShutdownFlags> {
        if self.core.debug.cron_paused {
            return None;
        }
        let now_ms = now.ms();
        if self.core.shutdown_wait.is_some() {
            return cmd::server::shutdown_wait_done(&mut self.core, now_ms);
        }
        let signal = self.core.shutdown_signal.take()?;
        let name = match signal {
            ShutdownSignal::Term => "shutdown-on-sigterm",
            ShutdownSignal::Int => "shutdown-on-sigint",
        };
        let flags = self.core.config.str_param(name);
        let (mut chosen, mut now_flag) = (ShutdownFlags::default(), false);
        for word in flags.split(|&b| b == b' ') {
            match word {
                b"save" => chosen.save = Some(true),
                b"nosave" => chosen.save = Some(false),
                b"now" => now_flag = true,
                b"force" => chosen.force = true,
                _ => {}
            }
        }
        if self.core.persist.loading.is_some() {
            chosen.save = Some(false);
        }
        if cmd::server::wait_for_replicas(&mut self.core, chosen, now_flag, None, now_ms) {
            return None;
        }
        self.core.shutting_down = true;
        Some(chosen)
    }

    /// The shutdown the shell was asked for did not happen (its save failed, or the first AOF
    /// rewrite runs): the server goes on, and the clients that waited in SHUTDOWN get
    /// `-ERR Errors trying to SHUTDOWN`.
    pub fn shutdown_failed(&mut self) {
        cmd::server::shutdown_failed(&mut self.core);
    }

    /// The background cycle the shell runs `hz` times a second: active expiry, the timeouts
    /// of blocked clients, a FAILOVER's steps. Returns whether clients were marked killed
    /// (a FAILOVER's switch drops the replicas): the shell closes them.
    pub fn cron(&mut self, now: Now) -> bool {
        self.cron_timed(now, &mut || now)
    }

    /// [`Engine::cron`], timing its parts on the shell's `clock` for the latency monitor
    /// (an `expire-cycle` event when the active expiry took `latency-monitor-threshold`).
    pub fn cron_timed(&mut self, now: Now, clock: &mut dyn FnMut() -> Now) -> bool {
        let paused = self.core.debug.cron_paused;
        if !paused {
            self.core.stats.sample_metrics(now.ms());
        }
        self.core.save_progress.refresh(now.ms());
        drain::sync(&mut self.core);
        // Nothing expires actively during CLIENT PAUSE, as in Redis 7.0.
        // Nor is anything evicted, as in Redis 7.0. A replica does neither: its primary's
        // DELs do it (`replica-ignore-maxmemory`, on by default, for eviction).
        let replica = self.core.repl.primary.is_some();
        if !paused && !self.core.pause.active(now.ms()) && !replica {
            if self.core.debug.active_expire {
                let start = clock();
                expire::active_expire_cycle(&mut self.core.dbs, now);
                let ms = clock().unix_us.saturating_sub(start.unix_us) / 1000;
                let threshold = self.core.config.latency_monitor_threshold;
                self.core.latency.add_sample_if_needed(
                    threshold,
                    "expire-cycle",
                    ms,
                    now.ms() / 1000,
                );
            }
            drain::evict(&mut self.core, now);
        } else if replica && !paused && self.core.debug.active_expire {
            self.expire_own_ttls(now);
        }
        drain::drain(&mut self.core);
        drain::settle(&mut self.core);
        // A FAILOVER waits for a replica to reach the offset: no PING moves it meanwhile.
        if self.core.repl.failover.is_none() {
            drain::ping_replicas(&mut self.core, now);
        }
        let ttl_s = self.core.config.int_param("repl-backlog-ttl").max(0) as u64;
        self.core
            .repl
            .backlog_cron(now.ms(), ttl_s, &mut self.core.rng);
        self.core.migrate.expire(now.ms());
        if self.core.tracking.active() {
            drain::after_command(&mut self.core, &self.clients, None, None);
        }
        self.expire_blocked(now);
        self.core.repl.failover.is_some()
            && cmd::repl::failover::cron(&mut self.core, &mut self.clients, now.ms())
    }

    /// A writable replica expires the keys its own clients gave a TTL (Redis's
    /// `expireSlaveKeys`); the others wait for the primary's `DEL`.
    fn expire_own_ttls(&mut self, now: Now) {
        if self.core.repl.own_ttls.is_empty() {
            return;
        }
        let dbs = &self.core.dbs;
        let due = self
            .core
            .repl
            .expire_own_ttls(now.ms(), |db, key| dbs.get(db)?.expire_at(key));
        for (db, key) in due {
            self.core.dbs[db].expire_own(&key, now.ms());
        }
    }

    /// Answers (with their timeout reply) and unblocks the blocked clients whose timeout has
    /// passed; the replies come out of [`Engine::take_wakeups`]. The shell calls this on every
    /// loop turn, so timeouts are as precise as its poll, see [`Engine::next_block_deadline`].
    pub fn expire_blocked(&mut self, now: Now) {
        blocking::expire(&mut self.core.blocking, &self.clients, now);
        if !self.core.repl.waiters.is_empty() {
            for (h, n) in self.core.repl.take_done_waiters(now.ms()) {
                self.core
                    .blocking
                    .push_wakeup(h, alloc::vec![Reply::Int(n)]);
            }
        }
        if self.core.pause.deadline().is_some() {
            self.dispatcher().run_postponed(now);
        }
    }

    /// The earliest unix ms at which a blocked client times out (it times out once the clock
    /// is past it): the shell's poll should wake by then.
    pub fn next_block_deadline(&self) -> Option<u64> {
        let pause = self.core.pause.deadline();
        let at = match (self.core.blocking.next_deadline(), pause) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        match (at, self.core.repl.next_wait_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Replies owed to clients other than the one that ran the last command: blocked clients
    /// that were served or timed out, in wake order. The shell encodes each client's replies
    /// in that client's protocol ([`Engine::protocol`]) and then resumes running its buffered
    /// commands (it is no longer blocked).
    pub fn take_wakeups(&mut self) -> Vec<(Handle, Vec<Reply>)> {
        self.core.blocking.take_wakeups()
    }

    /// Pub/sub messages owed to clients other than the one that ran the last command, in
    /// publish order; the shell encodes each in its receiver's protocol ([`Engine::protocol`]).
    pub fn take_messages(&mut self) -> Vec<(Handle, alloc::rc::Rc<Reply>)> {
        self.core.pubsub.take_messages()
    }

    /// Whether client `h` has a pub/sub subscription (its output buffer falls under the
    /// `pubsub` class of `client-output-buffer-limit`).
    pub fn is_subscriber(&self, h: Handle) -> bool {
        self.core.pubsub.subscribed(h)
    }

    /// Memory client `h` holds in the engine beyond its connection's buffers, for `tot-mem`
    /// and client eviction: its MULTI queue, watched keys, subscriptions and tracking
    /// prefixes (each feature counts its own).
    #[inline]
    pub fn client_state_memory(&self, h: Handle) -> usize {
        let core = &self.core;
        core.txn.memory(h) + core.pubsub.memory(h) + core.tracking.memory(h)
    }

    /// Whether client eviction may close client `h`: not a replica, not the link to this
    /// server's primary, not exempted by `CLIENT NO-EVICT on` (Redis's rule).
    pub fn evictable(&self, h: Handle) -> bool {
        !self.core.repl.is_replica(h)
            && self.core.repl.link() != Some(h)
            && !self.clients.get(h).is_some_and(|c| c.no_evict)
    }

    /// Installs the codec DUMP and RESTORE use (the shell passes `kayvee-rdb`'s).
    pub fn set_codec(&mut self, codec: &'static dyn persist::ValueCodec) {
        self.core.persist.codec = Some(codec);
    }

    /// Notes that a save starts now (SAVE, BGSAVE, a save point, SHUTDOWN): counts it and
    /// remembers the dirty counter a success will subtract.
    pub fn save_started(&mut self, background: bool, now: Now) {
        let p = &mut self.core.persist;
        p.saves += 1;
        p.dirty_at_start = self.core.stats.dirty;
        if background {
            self.core.stats.total_forks += 1;
            p.bgsave_started_ms = Some(now.ms());
            p.last_bgsave_try_ms = now.ms();
            self.note_child_tables();
        }
    }

    /// A disk-based full sync's background save starts now, of a snapshot taken now: as
    /// [`Self::save_started`] for a BGSAVE, its fork already counted by the PSYNC that asked.
    pub fn replica_save_started(&mut self, now: Now) {
        self.save_started(true, now);
        self.core.stats.total_forks -= 1;
    }

    /// Notes that an AOF rewrite starts now (INFO's `aof_rewrite_in_progress`, and counted).
    pub fn aof_rewrite_started(&mut self, now: Now) {
        self.core.stats.total_forks += 1;
        self.core.aof.status.rewrite_started_ms = Some(now.ms());
        self.note_child_tables();
    }

    /// A background save or rewrite starts: the table sizes Redis's dicts have now stay while
    /// it runs (DEBUG HTSTATS), unless one already ran.
    fn note_child_tables(&mut self) {
        if self.core.persist.bgsave_in_progress()
            && self.core.aof.status.rewrite_started_ms.is_some()
        {
            return;
        }
        let sizes = self
            .core
            .dbs
            .iter()
            .map(|db| [db.len() as u64, db.expires_len() as u64].map(crate::cmd::debug::table_size))
            .collect();
        self.core.persist.child_tables = sizes;
    }

    /// A background save ([`Writer::Rdb`]) or an AOF rewrite ([`Writer::Aof`]) starts writing
    /// `snapshot`: INFO's `current_save_keys_*`, `current_fork_perc` and `current_cow_*` follow
    /// it (see [`crate::save_progress`]). Returns what the writing thread publishes (the keys
    /// it wrote, how far it let go of the snapshot). The end is [`Self::save_finished`] or
    /// [`Self::save_aborted`] for a save, [`Self::writer_finished`] for a rewrite.
    pub fn writer_started(&mut self, writer: Writer, snapshot: &Snapshot) -> Arc<WriterProgress> {
        let progress = self.core.save_progress.start(writer, &snapshot.dbs);
        drain::sync(&mut self.core);
        progress
    }

    /// `writer` ended (`ok`: it succeeded): its peak copy-on-write figure becomes
    /// `rdb_last_cow_size` or `aof_last_cow_size`, and the keyspace stops recording for it.
    pub fn writer_finished(&mut self, writer: Writer, ok: bool) {
        if !self.core.save_progress.listening() {
            return;
        }
        // The events of the last command are the save's too.
        drain::drain(&mut self.core);
        self.core.save_progress.end(writer, ok);
        drain::sync(&mut self.core);
    }

    /// The shell reports the end of a save: on success the changes made before it started
    /// no longer count as unsaved and LASTSAVE moves; a failed background save turns on
    /// MISCONF (with `stop-writes-on-bgsave-error` and save points).
    pub fn save_finished(&mut self, ok: bool, background: bool, now: Now) {
        let p = &mut self.core.persist;
        if let Some(start) = p.bgsave_started_ms.take().filter(|_| background) {
            p.last_bgsave_time_s = (now.ms().saturating_sub(start) / 1000) as i64;
        }
        if ok {
            self.core.stats.dirty = self.core.stats.dirty.saturating_sub(p.dirty_at_start);
            p.last_save_ms = now.ms();
            p.last_bgsave_failed = false;
        } else if background {
            p.last_bgsave_failed = true;
        }
        if background {
            self.writer_finished(Writer::Rdb, ok);
        }
    }

    /// Whether FLUSHALL (or replicas that left) asked for the running background save to stop;
    /// reading clears it. The shell stops its save and reports it with [`Self::save_aborted`].
    pub fn take_bgsave_abort(&mut self) -> bool {
        self.take_bgsave_abort_reason().is_some()
    }

    /// [`Self::take_bgsave_abort`] with the reason, for the log.
    pub fn take_bgsave_abort_reason(&mut self) -> Option<&'static str> {
        self.core.persist.abort_bgsave.take()
    }

    /// The shell stopped the running background save at FLUSHALL's request: it is over, neither
    /// a success (the changes stay unsaved) nor a failure (no MISCONF), as Redis's killed child.
    pub fn save_aborted(&mut self, now: Now) {
        let p = &mut self.core.persist;
        if let Some(start) = p.bgsave_started_ms.take() {
            p.last_bgsave_time_s = (now.ms().saturating_sub(start) / 1000) as i64;
        }
        self.writer_finished(Writer::Rdb, false);
    }

    /// Whether a background save should start now (a BGSAVE SCHEDULE waiting, or a `save`
    /// point reached); if so it is marked started and the shell must run it like BGSAVE's
    /// [`Outcome::Save`]. The shell asks in its cron.
    pub fn take_due_save(&mut self, now: Now) -> bool {
        let p = &self.core.persist;
        if p.bgsave_in_progress() || p.loading.is_some() {
            return false;
        }
        let due = p.bgsave_scheduled
            || persist::save_point_due(
                &self.core.config.save_points(),
                p,
                self.core.stats.dirty,
                now.ms(),
            );
        if due {
            self.core.persist.bgsave_scheduled = false;
            self.save_started(true, now);
        }
        due
    }

    /// Where `redis.log` writes: `log(level, message)` with Redis's levels (0 debug, 1
    /// verbose, 2 notice, 3 warning), called for the messages at or above `loglevel`. Without
    /// it (or without scripting) they go nowhere. RESTORE's integrity-check reports go there
    /// too (with or without scripting).
    pub fn set_script_log(&mut self, log: fn(u8, &[u8])) {
        self.core.persist.log = Some(log);
        #[cfg(feature = "scripting")]
        {
            self.core.scripts.log = Some(log);
        }
        #[cfg(not(feature = "scripting"))]
        let _ = log;
    }

    /// The function libraries' code, by library name (an RDB's function records).
    pub fn function_codes(&self) -> Vec<Vec<u8>> {
        #[cfg(feature = "scripting")]
        return self.core.scripts.library_codes();
        #[cfg(not(feature = "scripting"))]
        Vec::new()
    }

    /// Loads the function libraries an RDB file held (after [`Self::load_dbs`]), in addition to
    /// the loaded ones: `replace` replaces a library of the same name (DEBUG RELOAD MERGE),
    /// else that is an error. On an error (that, or a library that does not load) the
    /// libraries are as they were. Without scripting, the records are dropped.
    pub fn load_functions(&mut self, codes: &[Vec<u8>], replace: bool) -> Result<(), String> {
        #[cfg(feature = "scripting")]
        {
            let policy = match replace {
                true => crate::script::Restore::Replace,
                false => crate::script::Restore::Append,
            };
            self.core.scripts.restore_libraries(codes, policy)
        }
        #[cfg(not(feature = "scripting"))]
        {
            let _ = (codes, replace);
            Ok(())
        }
    }

    /// Drops every function library (a load that does not merge replaces them).
    pub fn flush_functions(&mut self) {
        #[cfg(feature = "scripting")]
        self.core.scripts.flush_functions();
    }

    /// Adds loaded databases' keys to the dataset (DEBUG RELOAD NOSAVE NOFLUSH): `replace`
    /// (MERGE) replaces the keys that exist, else one that exists fails the merge (false) and
    /// nothing changes.
    pub fn merge_dbs(&mut self, dbs: Vec<Db>, replace: bool) -> bool {
        if !replace {
            for (current, loaded) in self.core.dbs.iter().zip(&dbs) {
                if loaded
                    .keys
                    .iter()
                    .any(|(k, _)| current.keys.contains_key(&k[..]))
                {
                    return false;
                }
            }
        }
        for (current, loaded) in self.core.dbs.iter_mut().zip(dbs) {
            for (k, entry) in loaded.keys.iter() {
                current.insert_entry(k, entry.clone(), loaded.expire_at(k));
            }
        }
        drain::sync(&mut self.core);
        let core = &mut self.core;
        evict::sync(&mut core.evict, &mut core.dbs, &core.config, core.seed);
        true
    }

    /// Replaces the databases with loaded ones (startup loading): the last save is the load,
    /// and the loading state, if any, ends.
    pub fn load_dbs(&mut self, dbs: Vec<Db>, loaded: u64, expired: u64, now: Now) {
        for (slot, db) in self.core.dbs.iter_mut().zip(dbs) {
            slot.replacing();
            *slot = db;
        }
        self.core.save_progress.dbs_replaced();
        drain::sync(&mut self.core);
        let core = &mut self.core;
        evict::sync(&mut core.evict, &mut core.dbs, &core.config, core.seed);
        let p = &mut self.core.persist;
        p.last_save_ms = now.ms();
        p.last_load_keys_loaded = loaded;
        p.last_load_keys_expired = expired;
        p.loading = None;
    }

    /// Starts a reload from the shell's files (DEBUG LOADAOF): propagation off, so the
    /// replayed commands are not written again, and the dataset and the function libraries
    /// emptied. Returns whether propagation was on, for [`end_reload`](Self::end_reload).
    pub fn begin_reload(&mut self, now: Now) -> bool {
        let propagating = self.core.aof.aof_on();
        self.set_propagation(false);
        let seed = self.core.seed;
        let empty = (0..self.core.dbs.len()).map(|_| Db::new(seed)).collect();
        self.load_dbs(empty, 0, 0, now);
        self.flush_functions();
        propagating
    }

    /// Ends a reload [`begin_reload`](Self::begin_reload) started: propagation as it was,
    /// nothing counted as changed since the load.
    pub fn end_reload(&mut self, propagating: bool) {
        self.set_propagation(propagating);
        self.core.stats.dirty = 0;
    }

    /// Starts the loading state, for a shell that loads the dataset while it accepts clients:
    /// until [`load_dbs`](Self::load_dbs) or [`end_loading`](Self::end_loading), commands
    /// without the `loading` flag answer `-LOADING`, and INFO shows the progress.
    pub fn begin_loading(&mut self, total_bytes: u64, now: Now) {
        self.core.persist.loading = Some(persist::Loading {
            start_ms: now.ms(),
            total_bytes,
            ..Default::default()
        });
    }

    /// Progress of the load: bytes read, keys loaded so far, the file's `used-mem`.
    pub fn loading_progress(&mut self, loaded_bytes: u64, keys_loaded: u64, rdb_used_mem: u64) {
        let p = &mut self.core.persist;
        if let Some(l) = &mut p.loading {
            l.loaded_bytes = loaded_bytes;
            l.rdb_used_mem = rdb_used_mem;
            p.last_load_keys_loaded = keys_loaded;
        }
    }

    /// Ends the loading state without data (a load that found nothing to load).
    pub fn end_loading(&mut self) {
        self.core.persist.loading = None;
    }

    /// Whether the startup load is under way.
    pub fn is_loading(&self) -> bool {
        self.core.persist.loading.is_some()
    }

    /// Turns command propagation on or off (the shell's `appendonly`): with it on, every
    /// write leaves the commands that reproduce it in a buffer for [`Engine::drain_propagated`]
    /// (see [`crate::aof`]). Off, no work at all is done for it.
    pub fn set_propagation(&mut self, on: bool) {
        drain::set_propagation(&mut self.core, on);
    }

    /// Appends the propagated commands (RESP, the AOF record format) to `into` and forgets them.
    pub fn drain_propagated(&mut self, into: &mut Vec<u8>) {
        self.core.aof.drain_into(into);
    }

    /// Whether propagated commands wait in the buffer.
    pub fn has_propagated(&self) -> bool {
        self.core.aof.has_output()
    }

    /// The propagated stream starts a new file: its next command is preceded by a SELECT.
    pub fn reset_propagation_db(&mut self) {
        self.core.aof.reset_db();
    }

    /// Moves the replication stream's new bytes (every write since the last call, with its
    /// SELECTs, PINGs, GETACKs) into the backlog and the offset, then into `into` (which must
    /// be empty) for the connection layer to hand to the replicas; returns the stream offset
    /// of the first byte (a replica whose stream starts later skips what comes before).
    pub fn take_replication(&mut self, into: &mut Vec<u8>) -> u64 {
        drain::feed_replication(&mut self.core);
        self.core.repl.take_outgoing(into)
    }

    /// Whether anything waits for the shell's delivery after a command: pub/sub messages,
    /// woken clients' replies or replication output (one test per command on the fast path).
    #[inline]
    pub fn has_deliveries(&self) -> bool {
        self.core.pubsub.has_messages()
            || self.core.blocking.has_wakeups()
            || self.has_replication()
    }

    /// Whether replication stream bytes wait for [`Engine::take_replication`].
    pub fn has_replication(&self) -> bool {
        self.core.aof.has_repl_output() || self.core.repl.has_outgoing()
    }

    // ---- The link to this server's primary (the connection layer drives it) ----

    /// The primary to connect to now, if one is due (REPLICAOF, or a second after the last
    /// attempt): the shell opens a connection and hands it to the connection layer.
    pub fn primary_due(&mut self, now: Now) -> Option<(String, u16)> {
        // Not before the startup load is done: it may hold the ID and offset to continue.
        if self.core.persist.loading.is_some() {
            return None;
        }
        let p = self.core.repl.primary.as_mut()?;
        if p.down_since_ms == repl::DOWN_UNNOTED {
            p.down_since_ms = now.ms();
        }
        self.core.repl.due_connect(now.ms())
    }

    /// The connection to the primary is open as client `h`; the handshake starts.
    pub fn primary_link_opened(&mut self, h: Handle, now: Now) {
        if let Some(p) = self.core.repl.primary.as_mut() {
            p.link = Some(h);
            p.state = repl::LinkState::Connecting;
            p.last_io_ms = now.ms();
        }
    }

    /// The connection `h` to the primary ended (its end of file, or its close): the link is
    /// down at once, for every command that runs before the session's close.
    pub fn primary_link_lost(&mut self, h: Handle) {
        if self.core.repl.link() != Some(h) {
            return;
        }
        // The master client's database outlives its connection: a partial resync goes on
        // from where the stream was, with no SELECT (Redis's cached master keeps its db).
        if self.core.repl.is_master_client(h) {
            if let (Some(c), Some(p)) = (self.clients.get(h), self.core.repl.primary.as_mut()) {
                p.stream_db = c.db;
            }
        }
        // A payload cut short: the old data is still in place.
        self.primary_load_ends();
        self.core.repl.link_lost(h);
    }

    /// The connection attempt failed: the next one comes a second after it.
    pub fn primary_link_failed(&mut self) {
        if let Some(p) = self.core.repl.primary.as_mut() {
            p.state = repl::LinkState::Connect;
        }
    }

    /// What the handshake announces: `masteruser`, `masterauth`, the listening port, and the
    /// replication ID and offset to continue from.
    pub fn primary_handshake(&self) -> repl::Handshake {
        let cfg = &self.core.config;
        let text = |name| {
            let v = cfg.str_param(name);
            (!v.is_empty()).then(|| String::from_utf8_lossy(&v).into_owned())
        };
        let announced = cfg.int_param("replica-announce-port");
        let port = if announced > 0 {
            announced
        } else {
            i64::from(cfg.port)
        };
        repl::Handshake {
            user: text("masteruser"),
            password: text("masterauth"),
            listening_port: u16::try_from(port).unwrap_or(0),
            announce_ip: text("replica-announce-ip"),
            replid: self.core.repl.replid.clone(),
            offset: self.core.repl.offset,
            failover: self.core.repl.primary.as_ref().is_some_and(|p| p.failover),
        }
    }

    /// Bytes came from the primary (INFO `master_last_io_seconds_ago`); `transfer` is the
    /// RDB transfer's progress while it runs (bytes read, size when known).
    pub fn primary_io(&mut self, now: Now, transfer: Option<(u64, Option<u64>)>) {
        if let Some(p) = self.core.repl.primary.as_mut() {
            p.last_io_ms = now.ms();
            if p.state == repl::LinkState::Connecting {
                // The primary answered: the handshake runs.
                p.state = repl::LinkState::Handshake;
            }
            if let Some((read, size)) = transfer {
                p.state = repl::LinkState::Transfer;
                p.transfer_read = read;
                p.transfer_size = size.map_or(-1, |s| s as i64);
                if let Some(l) = self
                    .core
                    .persist
                    .loading
                    .as_mut()
                    .filter(|l| l.from_primary)
                {
                    l.loaded_bytes = read;
                }
            }
        }
    }

    /// The primary's full-sync payload starts (after `+FULLRESYNC <replid>`): how this
    /// replica takes it ([`repl::load_mode`] of `repl-diskless-load`), with its window. Under
    /// [`repl::LoadMode::Loading`] clients get `-LOADING` (unless a command may run during a
    /// load) until the payload is in, as Redis loading from the socket; under
    /// [`repl::LoadMode::AsyncLoading`] the old data stays readable and only `no-async-loading`
    /// commands are refused. Either way the old databases stay in place until the payload
    /// replaces them whole ([`Engine::primary_full_sync`]), so a transfer cut short leaves them
    /// as they were (`swapdb`'s backup for free; `on-empty-db` had none).
    pub fn primary_payload_begins(
        &mut self,
        replid: &str,
        size: Option<u64>,
        now: Now,
    ) -> repl::LoadMode {
        let setting = self.core.config.str_param("repl-diskless-load");
        let empty = self.core.dbs.iter().all(Db::is_empty);
        let mode = repl::load_mode(&setting, empty, replid == self.core.repl.replid);
        match mode {
            repl::LoadMode::Loading => {
                self.core.persist.loading = Some(persist::Loading {
                    start_ms: now.ms(),
                    total_bytes: size.unwrap_or(0),
                    from_primary: true,
                    ..Default::default()
                });
            }
            repl::LoadMode::AsyncLoading => self.core.persist.async_loading = true,
            repl::LoadMode::Disk => {}
        }
        mode
    }

    /// The primary's payload is in and its load starts: a payload received "to disk"
    /// ([`repl::LoadMode::Disk`]) opens the `-LOADING` window now, as Redis loads its file
    /// (a window already open stays as it is).
    pub fn primary_load_begins(&mut self, total_bytes: u64, now: Now) {
        if self.primary_loading() {
            return;
        }
        self.core.persist.loading = Some(persist::Loading {
            start_ms: now.ms(),
            total_bytes,
            from_primary: true,
            ..Default::default()
        });
    }

    /// Whether a load of the primary's payload is under way (either window).
    pub fn primary_loading(&self) -> bool {
        let p = &self.core.persist;
        p.async_loading || p.loading.as_ref().is_some_and(|l| l.from_primary)
    }

    /// The load of the primary's payload ends (loaded, or the link lost): its window closes.
    fn primary_load_ends(&mut self) {
        let p = &mut self.core.persist;
        p.async_loading = false;
        if p.loading.as_ref().is_some_and(|l| l.from_primary) {
            p.loading = None;
        }
    }

    /// A full sync's payload is loaded into `dbs`: they replace the dataset, the history is
    /// the primary's from `offset`, and this server's own replicas are disconnected (they
    /// must sync again). Returns whether clients were marked for closing.
    pub fn primary_full_sync(
        &mut self,
        dbs: Vec<Db>,
        replid: String,
        offset: u64,
        now: Now,
    ) -> bool {
        let loaded = dbs.iter().map(|d| d.len() as u64).sum();
        self.load_dbs(dbs, loaded, 0, now);
        self.primary_load_ends();
        self.core.repl.own_ttls.clear();
        let size =
            usize::try_from(self.core.config.int_param("repl-backlog-size")).unwrap_or(1 << 20);
        self.core.repl.synced_full(replid, offset, size);
        self.core.aof.reset_repl_db();
        self.primary_connected(now);
        self.kill_replicas()
    }

    /// A partial resync was accepted; with a new primary ID this server's own replicas are
    /// disconnected to learn it. Returns whether clients were marked for closing.
    pub fn primary_continue(&mut self, replid: Option<String>, now: Now) -> bool {
        let changed = replid
            .as_ref()
            .is_some_and(|id| *id != self.core.repl.replid);
        let size =
            usize::try_from(self.core.config.int_param("repl-backlog-size")).unwrap_or(1 << 20);
        self.core.repl.synced_continue(replid, size);
        let db = self.core.repl.primary.as_ref().map_or(0, |p| p.stream_db);
        if let Some(c) = self.core.repl.link().and_then(|h| self.clients.get_mut(h)) {
            c.db = db;
        }
        self.primary_connected(now);
        changed && self.kill_replicas()
    }

    /// The link carries the stream: its client is the master client from now on.
    fn primary_connected(&mut self, now: Now) {
        cmd::repl::failover::finished(&mut self.core);
        if let Some(p) = self.core.repl.primary.as_mut() {
            p.state = repl::LinkState::Connected;
            p.last_io_ms = now.ms();
            p.down_since_ms = 0;
            if let Some(c) = p.link.and_then(|h| self.clients.get_mut(h)) {
                c.authenticated = true;
            }
        }
    }

    /// The master client ran a command: its bytes advance the offset and go, as they came,
    /// to the backlog and this server's own replicas.
    pub fn primary_applied(&mut self, bytes: &[u8]) {
        self.core.repl.feed(bytes);
    }

    /// Marks this server's replicas for closing; whether there were any.
    fn kill_replicas(&mut self) -> bool {
        let mut any = false;
        for r in &self.core.repl.replicas {
            if let Some(c) = self.clients.get_mut(r.handle) {
                c.killed = true;
                any = true;
            }
        }
        any
    }

    /// The link to the primary failed in its handshake: a FAILOVER's target refused it, so
    /// the FAILOVER aborts and this server is a primary again. Returns whether clients were
    /// marked killed.
    pub fn primary_refused(&mut self) -> bool {
        cmd::repl::failover::rejected(&mut self.core, &mut self.clients)
    }

    /// Where the replication stream is, for an RDB's AUX fields (Redis's
    /// `rdbPopulateSaveInfo`): a primary with a backlog, or a replica whose link is up;
    /// `(stream db, replication ID, offset)`.
    pub fn repl_save_info(&self) -> Option<(usize, String, u64)> {
        let repl = &self.core.repl;
        let db = match &repl.primary {
            None if repl.backlog.is_some() => self.core.aof.repl_db(),
            None => return None,
            Some(_) => self.clients.get(repl.link()?)?.db,
        };
        if repl.primary.is_some() && !repl.is_master_client(repl.link()?) {
            return None;
        }
        Some((db, repl.replid.clone(), repl.offset))
    }

    /// The replication ID and offset an RDB loaded at startup recorded: a replica continues
    /// its primary's stream from there (in database `stream_db`); a primary takes them as its
    /// history, then draws a new ID (the old one becomes the secondary ID) with a fresh
    /// backlog, so its replicas continue with `+CONTINUE` after its restart, as Redis 7.0.
    ///
    /// `expired` are the keys the load dropped because they had expired: a primary puts
    /// their `DEL` in its new backlog (its replicas still hold them).
    pub fn restore_replication(
        &mut self,
        stream_db: usize,
        replid: String,
        offset: u64,
        expired: &[(usize, Vec<u8>)],
    ) {
        let repl = &mut self.core.repl;
        repl.replid = replid;
        repl.offset = offset;
        repl.replid2 = String::from(repl::NO_REPLID);
        repl.second_offset = -1;
        if let Some(p) = repl.primary.as_mut() {
            p.stream_db = stream_db;
            return;
        }
        repl.shift_replid(&mut self.core.rng);
        drain::start_replication(&mut self.core);
        for (db, key) in expired {
            self.core.aof.feed_repl_del(*db, key);
        }
        drain::feed_replication(&mut self.core);
    }

    /// Lines for the log from replication (a FAILOVER's steps), oldest first.
    pub fn take_repl_notes(&mut self) -> Vec<String> {
        core::mem::take(&mut self.core.repl.notes)
    }

    /// Whether client `h` is blocked (waiting for a key or its timeout).
    pub fn is_blocked(&self, h: Handle) -> bool {
        self.core.blocking.is_blocked(h)
            || self.core.pause.holds(h)
            || self.core.repl.is_waiting(h)
            || cmd::server::shutdown_waiting(&self.core, h)
    }
}
