//! The Kayvee engine: a sans-IO state machine holding the databases and running commands.
//!
//! Arguments and the current time come in ([`Engine::execute`]); replies go out through a
//! [`ReplySink`] and requests to the shell come back as an [`Outcome`]. The engine reads no clock,
//! opens no socket or file and draws no randomness of its own: the shell passes time in, and the
//! seed at construction. The same engine runs in the Linux server and in the unikernel.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod acl;
pub mod aof;
pub mod argv;
pub mod blocking;
pub mod client;
pub mod cmd;
pub mod command;
pub mod config;
pub mod db;
pub mod error;
pub mod events;
pub mod evict;
pub mod keyspec;
pub mod monitor;
pub mod notify;
pub mod pause;
pub mod persist;
pub mod pubsub;
pub mod reply;
pub mod stats;
pub mod tracking;
pub mod txn;
pub mod util;
pub mod value;
pub mod xenstore;

use alloc::string::String;
use alloc::vec::Vec;

pub use argv::{Argv, ArgvBuf};
pub use client::{Client, ClientTable, ConnInfo, Handle, Transport};
pub use command::{CommandId, CommandSpec, CommandTable};
pub use config::Config;
pub use db::{Db, DbSnapshot};
pub use error::{CmdResult, Error};
pub use reply::{Discard, Protocol, Reply, ReplySink, ReplyTree};
pub use value::{Entry, Value};

/// The current time, passed into every engine call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Now {
    /// Unix time in microseconds.
    pub unix_us: u64,
}

impl Now {
    /// From unix milliseconds.
    pub fn from_ms(ms: u64) -> Self {
        Now { unix_us: ms * 1000 }
    }
    /// Unix time in milliseconds.
    #[inline]
    pub fn ms(self) -> u64 {
        self.unix_us / 1000
    }
}

/// What the shell must do after a command.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Outcome {
    /// Nothing special.
    #[default]
    Continue,
    /// Close this connection once its pending replies are written (QUIT).
    Close,
    /// Some clients were marked `killed` (CLIENT KILL): close them (this one included, maybe).
    KillClients,
    /// Stop the server (SHUTDOWN); `save` is the SAVE/NOSAVE choice if one was given.
    Shutdown {
        /// `Some(true)` = SAVE, `Some(false)` = NOSAVE, `None` = per configuration.
        save: Option<bool>,
    },
    /// Block the whole server for this many microseconds (DEBUG SLEEP), then continue.
    Sleep(u64),
    /// Write the configuration back to its file (CONFIG REWRITE): the shell calls
    /// [`Engine::rewrite_config`], writes the file and sends the reply itself.
    RewriteConfig,
    /// The client blocked (BLPOP and co. found nothing): it got no reply yet. The shell runs
    /// none of its further commands until [`Engine::take_wakeups`] hands it its reply (see
    /// [`blocking`]).
    Blocked,
    /// Write an RDB snapshot (SAVE, BGSAVE, a save point): the shell takes
    /// [`Engine::snapshot`] now, writes it (on a thread when `background`) and reports with
    /// [`Engine::save_finished`]. For SAVE (`background` false) the shell sends the reply
    /// itself, `+OK` or `-ERR`, once the file is written.
    Save {
        /// BGSAVE (the reply was sent) or SAVE (the shell replies after writing).
        background: bool,
    },
    /// ACL LOAD (`save` false) or ACL SAVE: the shell reads the file named by
    /// [`Engine::acl_file`] and passes its text to [`Engine::acl_load`], or writes
    /// [`Engine::acl_save_text`] to it, then sends the reply itself (`+OK` or the error).
    AclFile {
        /// ACL SAVE (true) or ACL LOAD.
        save: bool,
    },
}

/// Facts about the host that INFO reports; the shell fills them in and refreshes them.
#[derive(Clone, Debug, Default)]
pub struct HostInfo {
    /// Operating system line (`Linux 6.1.0 x86_64`, or `Kayvee unikernel`).
    pub os: String,
    /// 64 or 32.
    pub arch_bits: u32,
    /// Process id (0 in the unikernel).
    pub process_id: u64,
    /// Event loop kind (`epoll`).
    pub multiplexing_api: String,
    /// Path of the executable.
    pub executable: String,
    /// The TCP port actually listened on.
    pub tcp_port: u16,
    /// Bytes allocated by the engine and shell (the allocator's count).
    pub used_memory: u64,
    /// Resident set size.
    pub used_memory_rss: u64,
    /// Total memory of the machine.
    pub total_system_memory: u64,
    /// CPU seconds (system) consumed by the process.
    pub used_cpu_sys: f64,
    /// CPU seconds (user) consumed by the process.
    pub used_cpu_user: f64,
    /// Whether the shell can write snapshots (a file system or a disk). Without it SAVE and
    /// BGSAVE answer [`cmd::persist::NO_STORAGE`] instead of pretending.
    pub storage: bool,
    /// The shell's own counters (Kayvee-only `name:value` lines at the end of INFO's Server
    /// section, e.g. the unikernel's NIC interrupts); empty by default, so nothing is added.
    pub counters: Vec<(&'static str, u64)>,
}

/// Everything but the client table (split so handlers can borrow both).
pub struct Core {
    /// The numbered databases.
    pub dbs: Vec<Db>,
    /// Configuration.
    pub config: Config,
    /// Counters.
    pub stats: Stats,
    /// The command table.
    pub commands: CommandTable,
    /// Host facts for INFO.
    pub host: HostInfo,
    /// 40 hex chars, random per start.
    pub run_id: String,
    /// When the engine started (unix ms).
    pub start_ms: u64,
    /// The hash seed the databases use.
    pub seed: u64,
    /// The engine's random source, seeded by the shell.
    pub rng: Rng,
    /// Peak of `host.used_memory`.
    pub used_memory_peak: u64,
    /// Set while a SHUTDOWN is under way.
    pub shutting_down: bool,
    /// Clients blocked on keys, ready keys and the replies owed to woken clients.
    pub blocking: blocking::Blocking,
    /// WATCHed keys and the modifications noted for them (see [`txn`]).
    pub watches: txn::Watches,
    /// Channel and pattern subscriptions, and messages owed to subscribers (see [`pubsub`]).
    pub pubsub: pubsub::PubSub,
    /// Save state (last save, running BGSAVE, INFO persistence) and the DUMP codec.
    pub persist: persist::Persistence,
    /// The memory limit: probe and eviction pool (see [`evict`]).
    pub evict: evict::Evictor,
    /// SLOWLOG's entries.
    pub slowlog: cmd::slowlog::SlowLog,
    /// Users, their permissions and the denial log (see [`acl`]).
    pub acl: acl::Acl,
    /// Command propagation for the append-only file (see [`aof`]).
    pub aof: aof::Propagation,
    /// Client-side caching: the tracking table and BCAST prefixes (see [`tracking`]).
    pub tracking: tracking::Tracking,
    /// CLIENT PAUSE: the pause in force and the commands it holds (see [`pause`]).
    pub pause: pause::Pause,
    /// MONITOR clients (see [`monitor`]).
    pub monitors: monitor::Monitors,
}

pub use stats::Stats;

/// A deterministic pseudo-random source (splitmix64): the same seed gives the same run.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// Seeded.
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x5851_F42D_4C95_7F2D)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// The context a command handler runs in.
pub struct Cx<'a> {
    /// Databases, config, stats.
    pub core: &'a mut Core,
    /// All clients (this one included).
    pub clients: &'a mut ClientTable,
    /// The client running the command.
    pub me: Handle,
    /// Its selected database (copied in at dispatch; SELECT updates both).
    pub db_index: usize,
    /// The current time.
    pub now: Now,
    /// What the shell must do after this command.
    pub outcome: Outcome,
    /// The command being run.
    pub cmd: CommandId,
}

impl<'a> Cx<'a> {
    /// The client running the command.
    #[inline]
    pub fn client(&mut self) -> &mut Client {
        self.clients
            .get_mut(self.me)
            .expect("running client is registered")
    }

    /// The selected database.
    #[inline]
    pub fn db(&mut self) -> &mut Db {
        &mut self.core.dbs[self.db_index]
    }

    /// Current unix time in ms.
    #[inline]
    pub fn now_ms(&self) -> u64 {
        self.now.ms()
    }

    /// Whether propagated commands are recorded (the AOF is on): a handler whose propagated
    /// form costs work to build (a formatted time) asks first.
    #[inline]
    pub fn propagating(&self) -> bool {
        self.core.aof.enabled
    }

    /// The write changed the dataset and propagates as `args`, in the running command's
    /// database (Redis's `alsoPropagate`): the deterministic form of a relative or random
    /// effect. May be called more than once; a write that changed nothing does not call it.
    #[inline]
    pub fn propagate(&mut self, args: &[&[u8]]) {
        if self.core.aof.enabled {
            self.core.aof.push(self.db_index, args);
        }
    }

    /// The write changed the dataset and propagates as the client sent it (after anything
    /// the handler passed to [`Cx::propagate`]).
    #[inline]
    pub fn propagate_verbatim(&mut self) {
        if self.core.aof.enabled {
            self.core.aof.verbatim = true;
        }
    }
}

/// An O(1) snapshot of every database: what persistence, transactions and replication build on.
#[derive(Clone)]
pub struct Snapshot {
    /// One snapshot per database, by index.
    pub dbs: Vec<DbSnapshot>,
    /// When it was taken (unix ms).
    pub taken_ms: u64,
}

/// The engine.
pub struct Engine {
    /// Databases, configuration, counters.
    pub core: Core,
    /// Connected clients.
    pub clients: ClientTable,
    last_cmd: Option<CommandId>,
    /// EXEC's id: dispatch runs it itself (it runs other commands).
    exec_id: Option<CommandId>,
}

impl Engine {
    /// A new engine. `seed` keys the hash functions and the random source (the shell draws it
    /// from the OS); `now` is the start time.
    pub fn new(config: Config, seed: u64, now: Now) -> Self {
        let commands = CommandTable::new(cmd::GROUPS);
        let acl = acl::Acl::new(&commands, config.requirepass.as_deref());
        let mut core = Core {
            dbs: (0..config.databases).map(|_| Db::new(seed)).collect(),
            stats: Stats {
                commands: alloc::vec![Default::default(); commands.all().len()],
                reset_ms: now.ms(),
                ..Default::default()
            },
            config,
            commands,
            host: HostInfo::default(),
            run_id: String::new(),
            start_ms: now.ms(),
            seed,
            rng: Rng::new(seed),
            used_memory_peak: 0,
            shutting_down: false,
            blocking: Default::default(),
            watches: Default::default(),
            pubsub: Default::default(),
            persist: persist::Persistence::new(now.ms()),
            evict: Default::default(),
            slowlog: Default::default(),
            acl,
            aof: Default::default(),
            tracking: Default::default(),
            pause: Default::default(),
            monitors: Default::default(),
        };
        evict::sync(&mut core);
        core.run_id = (0..40)
            .map(|_| char::from(b"0123456789abcdef"[(core.rng.next_u64() % 16) as usize]))
            .collect();
        let exec_id = core.commands.lookup(b"exec");
        events::sync(&mut core);
        Engine {
            core,
            clients: ClientTable::default(),
            last_cmd: None,
            exec_id,
        }
    }

    /// Registers a new connection; returns its handle.
    pub fn connect(&mut self, conn: ConnInfo, now: Now) -> Handle {
        self.core.stats.total_connections_received += 1;
        let authenticated = !self.core.acl.auth_required();
        self.clients.add(conn, now.ms(), authenticated)
    }

    /// Unregisters a connection.
    pub fn disconnect(&mut self, h: Handle) {
        self.core.blocking.remove(h);
        tracking::disable(&mut self.core, &mut self.clients, h);
        self.core.pause.remove(h);
        self.core.monitors.remove(h);
        txn::discard(&mut self.core, &mut self.clients, h);
        pubsub::unsubscribe_all(&mut self.core, &mut self.clients, h);
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
        }
    }

    /// The command the last `execute` ran, if any (for the shell's timing).
    pub fn last_command(&self) -> Option<CommandId> {
        self.last_cmd
    }

    /// Adds measured time to a command's statistics.
    pub fn record_usec(&mut self, id: CommandId, usec: u64) {
        self.core.stats.commands[id.0 as usize].usec += usec;
    }

    /// The shell measured the command it just ran for client `h` (`argv`, as the client sent
    /// it) at `usec`: adds the time to the command's statistics and logs it in SLOWLOG when
    /// it is slow enough (commands flagged `skip_slowlog`, such as EXEC and AUTH, never are).
    pub fn command_timed(&mut self, h: Handle, argv: &Argv<'_>, usec: u64, now: Now) {
        let Some(id) = self.last_cmd else {
            return;
        };
        self.record_usec(id, usec);
        let config = &self.core.config;
        if !cmd::slowlog::SlowLog::wants(config.slowlog_log_slower_than, usec)
            || self
                .core
                .commands
                .get(id)
                .spec
                .has(command::flags::SKIP_SLOWLOG)
        {
            return;
        }
        let (addr, name) = match self.clients.get(h) {
            Some(c) => (
                cmd::client::peer_addr(c),
                c.name.clone().unwrap_or_default(),
            ),
            None => (String::new(), Default::default()),
        };
        let entry = cmd::slowlog::Entry {
            id: 0,
            time_s: (now.ms() / 1000) as i64,
            usec,
            args: cmd::slowlog::truncated_args(argv),
            addr,
            name,
        };
        let len_max = usize::try_from(config.slowlog_max_len).unwrap_or(usize::MAX);
        self.core.slowlog.push(entry, len_max);
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
        self.last_cmd = None;
        if argv.is_empty() {
            return Outcome::Continue;
        }
        if let Some(id) = self.paused_for(h, argv, now) {
            self.core.pause.postpone(h, argv);
            let spec = self.core.commands.get(id).spec;
            if let Some(c) = self.clients.get_mut(h) {
                c.blocked = true;
                (c.last_cmd, c.last_cmd_id) = (spec.name, Some(id));
            }
            return Outcome::Blocked;
        }
        let Some(client) = self.clients.get_mut(h) else {
            return Outcome::Continue;
        };
        client.last_interaction_ms = now.ms();
        let skip = match client.reply_mode {
            client::ReplyMode::Off => true,
            client::ReplyMode::Skip => {
                client.reply_mode = client::ReplyMode::SkipThis;
                true
            }
            _ => false,
        };
        let protocol = client.protocol;
        let outcome = self.execute_top(h, argv, now, out, skip, protocol);
        events::drain(&mut self.core);
        if self.core.aof.enabled {
            self.core.aof.flush();
        }
        if self.core.blocking.has_ready() {
            blocking::serve_ready(&mut self.core, &mut self.clients, now);
            events::drain(&mut self.core);
        }
        txn::settle(&mut self.core, &mut self.clients);
        if self.core.tracking.active() {
            tracking::after_command(&mut self.core, &mut self.clients, Some(h), Some(out));
        }
        if self.core.monitors.active() {
            self.core
                .monitors
                .take_self()
                .iter()
                .for_each(|r| r.write_to(out));
        }
        outcome
    }

    /// `execute` without the serving of blocked clients afterwards.
    fn execute_top(
        &mut self,
        h: Handle,
        argv: &Argv<'_>,
        now: Now,
        out: &mut dyn ReplySink,
        skip: bool,
        protocol: Protocol,
    ) -> Outcome {
        if skip {
            // Held, not dropped: a command that turns replies back on (`CLIENT REPLY ON`,
            // RESET under OFF) still answers, as in Redis.
            let mut held = ReplyTree::new(protocol);
            let outcome = self.dispatch(h, argv, now, &mut held);
            let on = self.clients.get(h).map(|c| c.reply_mode) == Some(client::ReplyMode::On);
            if on {
                held.take().iter().for_each(|r| r.write_to(out));
            }
            self.end_skip(h);
            outcome
        } else {
            self.dispatch(h, argv, now, out)
        }
    }

    /// The command, when the pause in force covers this command of `h` (see [`pause`]):
    /// unknown commands and arity errors are answered at once, QUIT is never held.
    fn paused_for(&self, h: Handle, argv: &Argv<'_>, now: Now) -> Option<CommandId> {
        if !self.core.pause.active(now.ms()) {
            return None;
        }
        let id = self.resolve(argv).ok()?;
        let spec = self.core.commands.get(id).spec;
        if spec.name == "quit" {
            return None;
        }
        let replicates = pause::held_by_write;
        let mut write = replicates(spec);
        if Some(id) == self.exec_id {
            let queue = self
                .clients
                .get(h)
                .map(|c| &c.txn.queue[..])
                .unwrap_or_default();
            write |= queue.iter().any(|a| {
                let argv = a.argv();
                self.resolve(&argv)
                    .is_ok_and(|q| replicates(self.core.commands.get(q).spec))
            });
        }
        self.core.pause.covers(write).then_some(id)
    }

    /// Runs the commands a pause held once it is over; their replies go out as wakeups.
    fn run_postponed(&mut self, now: Now) {
        for (h, args) in self.core.pause.take_due(now.ms()) {
            let protocol = self.protocol(h);
            let mut tree = ReplyTree::new(protocol);
            if let Some(c) = self.clients.get_mut(h) {
                c.blocked = false;
            }
            self.execute(h, &args.argv(), now, &mut tree);
            self.core.blocking.push_wakeup(h, tree.take());
        }
    }

    fn end_skip(&mut self, h: Handle) {
        if let Some(c) = self.clients.get_mut(h) {
            if c.reply_mode == client::ReplyMode::SkipThis {
                c.reply_mode = client::ReplyMode::On;
            }
        }
    }

    /// Looks the command up, checks arity, auth and the client's mode (subscribed, MULTI), then
    /// runs it (or queues it inside MULTI) and counts it.
    fn dispatch(
        &mut self,
        h: Handle,
        argv: &Argv<'_>,
        now: Now,
        out: &mut dyn ReplySink,
    ) -> Outcome {
        let id = match self.resolve(argv) {
            Ok(id) => id,
            Err((id, e)) => return self.reject(h, id, &e, out),
        };
        let spec = self.core.commands.get(id).spec;
        let client = self.clients.get_mut(h).expect("checked by execute");
        // A client that connected while a password was required needs none once it is
        // removed (CONFIG SET requirepass ""), as in Redis.
        let auth_required = self.core.acl.auth_required();
        if !client.authenticated && auth_required && !spec.has(command::flags::NO_AUTH) {
            return self.reject(h, Some(id), &Error::NoAuth, out);
        }
        // A NO_MULTI command inside MULTI gets that error first, as in Redis.
        if !(client.in_multi && spec.has(command::flags::NO_MULTI)) {
            if let Some(e) = self.acl_denied(h, id, argv, now) {
                return self.reject(h, Some(id), &e, out);
            }
        }
        if self.core.config.maxmemory != 0 {
            if let Err(e) = self.admit_memory(h, spec, now) {
                return self.reject(h, Some(id), &e, out);
            }
        }
        if self.core.persist.loading.is_some() && !spec.has(command::flags::LOADING) {
            return self.reject(h, Some(id), &Error::msg(persist::LOADING), out);
        }
        if self.core.config.stop_writes_on_bgsave_error
            && self.core.persist.last_bgsave_failed
            && !self.core.config.save.is_empty()
            && (spec.has(command::flags::WRITE) || spec.name == "ping")
        {
            return self.reject(h, Some(id), &Error::msg(persist::MISCONF), out);
        }
        let client = self.clients.get(h).expect("checked by execute");
        if client.monitor && monitor::refused(spec) {
            return self.reject(h, Some(id), &monitor::keyspace_error(), out);
        }
        if client.protocol == Protocol::Resp2
            && client.subs.active()
            && !pubsub::allowed_when_subscribed(spec.name)
        {
            let name = &self.core.commands.get(id).full_name;
            return self.reject(h, Some(id), &pubsub::subscribed_context_error(name), out);
        }
        if client.in_multi {
            if spec.has(command::flags::NO_MULTI) {
                let e = Error::msg("ERR Command not allowed inside a transaction");
                return self.reject(h, Some(id), &e, out);
            }
            if !txn::runs_in_multi(spec.name) {
                txn::queue(&mut self.clients, h, argv);
                out.simple("QUEUED");
                return Outcome::Continue;
            }
        }
        if Some(id) == self.exec_id {
            return self.exec(h, id, argv, now, out);
        }
        self.run(h, id, argv, now, out)
    }

    /// The memory limit's admission, as Redis's `processCommand`: evict if over the limit;
    /// when that fails, refuse DENYOOM commands, any command queued inside MULTI (but EXEC,
    /// DISCARD, QUIT and RESET), and EXEC of a transaction holding a DENYOOM command.
    fn admit_memory(&mut self, h: Handle, spec: &CommandSpec, now: Now) -> Result<(), Error> {
        if evict::perform(&mut self.core, now) != evict::Evicted::Fail {
            return Ok(());
        }
        let client = self.clients.get(h).expect("checked by execute");
        let mut refuse = spec.has(command::flags::DENYOOM);
        if client.in_multi {
            refuse |= !matches!(spec.name, "exec" | "discard" | "quit" | "reset");
            if spec.name == "exec" {
                refuse |= client.txn.queue.iter().any(|args| {
                    let argv = args.argv();
                    self.resolve(&argv).is_ok_and(|id| {
                        self.core.commands.get(id).spec.has(command::flags::DENYOOM)
                    })
                });
            }
        }
        if refuse {
            return Err(Error::msg(evict::OOM));
        }
        Ok(())
    }

    /// Runs a resolved, admitted command and counts it.
    fn run(
        &mut self,
        h: Handle,
        id: CommandId,
        argv: &Argv<'_>,
        now: Now,
        out: &mut dyn ReplySink,
    ) -> Outcome {
        let spec = self.core.commands.get(id).spec;
        let client = self.clients.get_mut(h).expect("checked by execute");
        client.last_cmd = spec.name;
        client.last_cmd_id = Some(id);
        let db_index = client.db;
        self.last_cmd = Some(id);
        let mut cx = Cx {
            core: &mut self.core,
            clients: &mut self.clients,
            me: h,
            db_index,
            now,
            outcome: Outcome::Continue,
            cmd: id,
        };
        let result = (spec.handler)(&mut cx, argv, out);
        if cx.core.aof.enabled {
            cx.core.aof.end_command(db_index, argv);
        }
        events::drain(cx.core);
        let outcome = core::mem::take(&mut cx.outcome);
        if self.core.tracking.active() {
            tracking::after_run(&mut self.core, &mut self.clients, h, id, argv);
        }
        if self.core.monitors.active() {
            monitor::feed(&mut self.core, &self.clients, h, spec, argv, now);
        }
        let stat = &mut self.core.stats.commands[id.0 as usize];
        stat.calls += 1;
        self.core.stats.total_commands_processed += 1;
        match result {
            // An approximation of Redis's per-key `dirty` count: one per successful write
            // command. The persistence issue refines it where save points need precision.
            Ok(()) if spec.has(command::flags::WRITE) => self.core.stats.dirty += 1,
            Ok(()) => {}
            Err(e) => {
                stat.failed_calls += 1;
                send_error(&mut self.core.stats, &e, out);
            }
        }
        outcome
    }

    /// EXEC: `EXECABORT` after a queue-time error, null when a watched key was modified, else
    /// the queued commands run back to back (nothing else runs in between) and their replies
    /// form one array. Run-time errors are elements of the array and do not stop the rest.
    fn exec(
        &mut self,
        h: Handle,
        id: CommandId,
        exec_argv: &Argv<'_>,
        now: Now,
        out: &mut dyn ReplySink,
    ) -> Outcome {
        let client = self.clients.get_mut(h).expect("checked by execute");
        if !client.in_multi {
            let e = Error::msg("ERR EXEC without MULTI");
            self.core.stats.commands[id.0 as usize].failed_calls += 1;
            self.core.stats.commands[id.0 as usize].calls += 1;
            return self.reject(h, None, &e, out);
        }
        let errored = client.txn.errored;
        let dirty =
            client.txn.dirty || txn::watched_key_expired(&self.core, &self.clients, h, now.ms());
        let client = self.clients.get_mut(h).expect("checked by execute");
        let queue = core::mem::take(&mut client.txn.queue);
        txn::unwatch_all(&mut self.core, &mut self.clients, h);
        self.core.stats.commands[id.0 as usize].calls += 1;
        let mut outcome = Outcome::Continue;
        if errored {
            let e = Error::msg("EXECABORT Transaction discarded because of previous errors.");
            send_error(&mut self.core.stats, &e, out);
        } else if dirty {
            out.null_array();
        } else {
            out.array(queue.len());
            for args in &queue {
                let argv = args.argv();
                let step = match self.resolve(&argv) {
                    // Permissions may have changed since the command was queued.
                    Ok(cmd) => match self.acl_denied(h, cmd, &argv, now) {
                        Some(e) => {
                            send_error(&mut self.core.stats, &e, out);
                            Outcome::Continue
                        }
                        None => self.run(h, cmd, &argv, now, out),
                    },
                    Err((_, e)) => self.reject(h, None, &e, out),
                };
                txn::settle(&mut self.core, &mut self.clients);
                if step != Outcome::Continue {
                    outcome = step;
                }
            }
        }
        txn::discard(&mut self.core, &mut self.clients, h);
        self.last_cmd = Some(id);
        // CLIENT CACHING given before MULTI covered the whole transaction; it ends here.
        if let Some(t) = self
            .clients
            .get_mut(h)
            .and_then(|c| c.tracking.as_deref_mut())
        {
            t.caching = None;
        }
        if self.core.monitors.active() {
            let spec = self.core.commands.get(id).spec;
            monitor::feed(&mut self.core, &self.clients, h, spec, exec_argv, now);
        }
        outcome
    }

    /// Finds the command (and subcommand) and checks arity, producing Redis's error texts.
    fn resolve(&self, argv: &Argv<'_>) -> Result<CommandId, (Option<CommandId>, Error)> {
        let table = &self.core.commands;
        let Some(id) = table.lookup(argv.get(0)) else {
            return Err((None, unknown_command(argv)));
        };
        let spec = table.get(id).spec;
        if spec.subcommands.is_empty() || argv.len() < 2 {
            if !spec.arity_ok(argv.len()) {
                return Err((Some(id), Error::WrongArity(spec.name.into())));
            }
            return Ok(id);
        }
        let Some(sub) = table.lookup_sub(id, argv.get(1)) else {
            let name = util::sanitize(argv.get(1), 128);
            let parent = spec.name.to_ascii_uppercase();
            // Not counted as a rejected call of the container (as Redis 7.0 counts).
            return Err((
                None,
                Error::msg(alloc::format!(
                    "ERR unknown subcommand '{name}'. Try {parent} HELP."
                )),
            ));
        };
        let reg = table.get(sub);
        if !reg.spec.arity_ok(argv.len()) {
            return Err((Some(sub), Error::WrongArity(reg.full_name.clone())));
        }
        Ok(sub)
    }

    /// The `NOPERM` error when the client's user may not run `argv` (logged in `ACL LOG`).
    fn acl_denied(&mut self, h: Handle, id: CommandId, argv: &Argv<'_>, now: Now) -> Option<Error> {
        let client = self.clients.get(h)?;
        let denied = self
            .core
            .acl
            .check(&client.user, &self.core.commands, id, argv)?;
        let user = client.user.as_bytes().to_vec();
        let name = self.core.commands.get(id).full_name.clone();
        let client = self.clients.get_mut(h)?;
        // Redis notes the refused command as the client's last one (CLIENT LIST cmd=).
        client.last_cmd = self.core.commands.get(id).spec.name;
        client.last_cmd_id = Some(id);
        let (reason, object) = match denied.kind {
            acl::DenyKind::Command => ("command", name.as_bytes()),
            acl::DenyKind::Key => ("key", argv.get(denied.index)),
            acl::DenyKind::Channel => ("channel", argv.get(denied.index)),
        };
        let mut cx = Cx {
            core: &mut self.core,
            clients: &mut self.clients,
            me: h,
            db_index: 0,
            now,
            outcome: Outcome::Continue,
            cmd: id,
        };
        cmd::acl::log_denial(&mut cx, reason, object, &user);
        Some(Error::msg(denied.error_text(&name)))
    }

    /// The bytes to send (then close) when protected mode refuses a new connection, checked
    /// by the shell on accept before [`Engine::connect`] (see [`acl::Acl::protected_mode_denies`]).
    pub fn protected_mode_refusal(&self, t: &Transport) -> Option<&'static str> {
        let protected = self.core.config.protected_mode;
        self.core
            .acl
            .protected_mode_denies(protected, t)
            .then_some(acl::PROTECTED_MODE_DENIED)
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
        let users = acl::file::parse(text, &path, &self.core.commands)?;
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
        acl::file::render(&self.core.acl.users, &self.core.commands)
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
        for line in &lines {
            let words: Vec<&[u8]> = line
                .split(' ')
                .filter(|w| !w.is_empty())
                .map(str::as_bytes)
                .collect();
            let Some((name, rules)) = words.split_first() else {
                continue;
            };
            let u = acl::file::user_from_rules(name, rules, &self.core.commands).map_err(|e| {
                alloc::format!(
                    "Error in user declaration '{}': {e}",
                    String::from_utf8_lossy(name)
                )
            })?;
            self.core.acl.users.insert(name.to_vec(), u);
        }
        self.core.acl.refresh();
        Ok(())
    }

    /// Refuses a command before it runs, as Redis's `rejectCommand`: counts it, fails the
    /// transaction being queued, and for EXEC itself aborts the transaction.
    fn reject(
        &mut self,
        h: Handle,
        id: Option<CommandId>,
        e: &Error,
        out: &mut dyn ReplySink,
    ) -> Outcome {
        if let Some(id) = id {
            self.core.stats.commands[id.0 as usize].rejected_calls += 1;
        }
        txn::flag_error(&mut self.clients, h);
        if id.is_some() && id == self.exec_id {
            txn::discard(&mut self.core, &mut self.clients, h);
            let text = alloc::format!("{e}");
            let why = text.strip_prefix("ERR ").unwrap_or(&text);
            let e = Error::msg(alloc::format!(
                "EXECABORT Transaction discarded because of: {why}"
            ));
            send_error(&mut self.core.stats, &e, out);
        } else {
            send_error(&mut self.core.stats, e, out);
        }
        Outcome::Continue
    }

    /// CONFIG REWRITE's work after the command asked for it ([`Outcome::RewriteConfig`]): the
    /// config file's path and its new text, for the shell to write (then the shell replies
    /// `+OK`, or the error). The new text becomes the base of the next rewrite. Errs with
    /// Redis's text when the server was started without a config file.
    pub fn rewrite_config(&mut self) -> Result<(String, String), Error> {
        let config = &mut self.core.config;
        let path = config
            .config_file
            .clone()
            .ok_or_else(cmd::config_cmd::no_config_file)?;
        let content = config.rewrite(config.config_file_text.as_deref().unwrap_or(""));
        config.config_file_text = Some(content.clone());
        Ok((path, content))
    }

    /// The background cycle the shell runs `hz` times a second: active expiry, and the
    /// timeouts of blocked clients.
    pub fn cron(&mut self, now: Now) {
        self.core.stats.sample_metrics(now.ms());
        events::sync(&mut self.core);
        // Nothing expires actively during CLIENT PAUSE, as in Redis 7.0.
        // Nor is anything evicted, as in Redis 7.0.
        if !self.core.pause.active(now.ms()) {
            cmd::expire::active_expire_cycle(&mut self.core, now);
            evict::perform(&mut self.core, now);
        }
        events::drain(&mut self.core);
        txn::settle(&mut self.core, &mut self.clients);
        if self.core.tracking.active() {
            tracking::after_command(&mut self.core, &mut self.clients, None, None);
        }
        self.expire_blocked(now);
    }

    /// Answers (with their timeout reply) and unblocks the blocked clients whose timeout has
    /// passed; the replies come out of [`Engine::take_wakeups`]. The shell calls this on every
    /// loop turn, so timeouts are as precise as its poll, see [`Engine::next_block_deadline`].
    pub fn expire_blocked(&mut self, now: Now) {
        blocking::expire(&mut self.core, &mut self.clients, now);
        if self.core.pause.deadline().is_some() {
            self.run_postponed(now);
        }
    }

    /// The earliest unix ms at which a blocked client times out (it times out once the clock
    /// is past it): the shell's poll should wake by then.
    pub fn next_block_deadline(&self) -> Option<u64> {
        let pause = self.core.pause.deadline();
        match (self.core.blocking.next_deadline(), pause) {
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
        self.clients.get(h).is_some_and(|c| c.subs.active())
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
            p.bgsave_started_ms = Some(now.ms());
            p.last_bgsave_try_ms = now.ms();
        }
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

    /// Replaces the databases with loaded ones (startup loading): the last save is the load,
    /// and the loading state, if any, ends.
    pub fn load_dbs(&mut self, dbs: Vec<Db>, loaded: u64, expired: u64, now: Now) {
        for (slot, db) in self.core.dbs.iter_mut().zip(dbs) {
            *slot = db;
        }
        events::sync(&mut self.core);
        evict::sync(&mut self.core);
        let p = &mut self.core.persist;
        p.last_save_ms = now.ms();
        p.last_load_keys_loaded = loaded;
        p.last_load_keys_expired = expired;
        p.loading = None;
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
    /// (see [`aof`]). Off, no work at all is done for it.
    pub fn set_propagation(&mut self, on: bool) {
        aof::set_enabled(&mut self.core, on);
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

    /// Whether client `h` is blocked (waiting for a key or its timeout).
    pub fn is_blocked(&self, h: Handle) -> bool {
        self.core.blocking.is_blocked(h) || self.core.pause.holds(h)
    }
}

/// Counts an error reply and sends it (raw bytes for [`Error::Bytes`], text otherwise).
pub(crate) fn send_error(stats: &mut Stats, e: &Error, out: &mut dyn ReplySink) {
    match e {
        Error::Bytes(b) => {
            stats.count_error(&String::from_utf8_lossy(b));
            out.error_bytes(b);
        }
        e => {
            let text = alloc::format!("{e}");
            stats.count_error(&text);
            out.error(&text);
        }
    }
}

/// `ERR unknown command 'x', with args beginning with: 'a' 'b' ` exactly as Redis 7.0 words it.
/// Arguments are raw bytes as Redis prints them with `%.*s` (cut at a NUL, no re-encoding).
fn unknown_command(argv: &Argv<'_>) -> Error {
    let mut args = Vec::new();
    for a in argv.iter().skip(1) {
        if args.len() >= 128 {
            break;
        }
        let room = 128 - args.len();
        args.push(b'\'');
        args.extend_from_slice(util::c_str_prefix(a, room));
        args.extend_from_slice(b"' ");
    }
    let mut text = b"ERR unknown command '".to_vec();
    text.extend_from_slice(util::c_str_prefix(argv.get(0), 128));
    text.extend_from_slice(b"', with args beginning with: ");
    text.extend_from_slice(&args);
    Error::Bytes(text)
}
