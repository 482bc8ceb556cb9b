//! The state command handlers work on: `Core` (databases, configuration, counters and every
//! feature's tables) and `Cx`, the context one command runs in (`Core`, the client table, the
//! command table, the running client, its database, the time, and the outcome it leaves for
//! the shell).
//!
//! This is the first module above the features (ARCHITECTURE.md, the engine's layers): it
//! holds their tables, and no feature names it. The features take only their own state and
//! the lower layers; what joins them (the key event drain, client tracking's delivery,
//! blocked-client serving) is in the modules above: [`crate::drain`], the commands
//! ([`crate::cmd`]), [`crate::dispatch`].

use crate::client::{Client, ClientTable, ConnInfo, Handle, Transport};
use crate::command::{CommandId, CommandTable};
use crate::config::Config;
use crate::db::Db;
use crate::host::HostInfo;
use crate::outcome::Outcome;
use crate::rng::Rng;
use crate::stats::Stats;
use crate::time::Now;
use crate::{acl, aof, blocking, evict, monitor, pause, persist, pubsub, slowlog, tracking};
use alloc::string::String;
use alloc::vec::Vec;

/// Everything but the client table (split so handlers can borrow both).
pub struct Core {
    /// The numbered databases.
    pub dbs: Vec<Db>,
    /// The shell's client replaying the append-only file (startup, DEBUG LOADAOF): obeyed as
    /// the primary's link is (no READONLY, MASTERDOWN, NOREPLICAS, MISCONF or OOM refusal), as
    /// Redis's AOF-loading client.
    pub replay_client: Option<Handle>,
    /// Configuration.
    pub config: Config,
    /// Counters.
    pub stats: Stats,
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
    /// A SIGTERM or SIGINT asked for a shutdown that the cron has not started yet (see
    /// [`crate::Engine::ask_shutdown`]); SHUTDOWN ABORT clears it.
    pub shutdown_signal: Option<crate::shutdown::ShutdownSignal>,
    /// A shutdown waiting for lagging replicas (`shutdown-timeout`).
    pub shutdown_wait: Option<crate::shutdown::ShutdownWait>,
    /// The clients that waited in SHUTDOWN for a shutdown under way: answered if it fails.
    pub shutdown_waiters: alloc::vec::Vec<crate::client::Handle>,
    /// Clients blocked on keys, ready keys and the replies owed to woken clients.
    pub blocking: blocking::Blocking,
    /// MULTI queues and WATCHed keys, by client (see [`crate::txn`]).
    pub txn: crate::txn::Transactions,
    /// WATCHed keys and the modifications noted for them (see [`crate::txn`]).
    pub watches: crate::txn::Watches,
    /// Channel and pattern subscriptions, and messages owed to subscribers (see [`pubsub`]).
    pub pubsub: pubsub::PubSub,
    /// Save state (last save, running BGSAVE, INFO persistence) and the DUMP codec.
    pub persist: persist::Persistence,
    /// The running background save's or AOF rewrite's progress and copy-on-write analogue,
    /// and the last figures (see [`crate::save_progress`]).
    pub save_progress: crate::save_progress::SaveProgress,
    /// The memory limit: probe and eviction pool (see [`evict`]).
    pub evict: evict::Evictor,
    /// SLOWLOG's entries.
    pub slowlog: slowlog::SlowLog,
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
    /// What DEBUG's switches changed (active expiry, cron pause...).
    pub debug: crate::debug::Switches,
    /// The latency monitor's events and the per-command latency histograms.
    pub latency: crate::latency::Latency,
    /// Replication: IDs, offsets, the backlog, replicas, the primary (see [`crate::repl`]).
    pub repl: crate::repl::Replication,
    /// MIGRATE's cached links and its halves waiting for the shell (see [`crate::migrate`]).
    pub migrate: crate::migrate::Links,
    /// The configuration before a CONFIG SET that changed `port` or `bind`, until the shell
    /// listened anew (see [`crate::cmd::config_cmd::rollback`]).
    pub config_before_set: Option<alloc::boxed::Box<Config>>,
    /// A script is running (its commands never block, MONITOR shows them as `lua`).
    pub script_running: bool,
    /// EXEC runs its queued commands (no eviction until it ends, as Redis evicts only
    /// before a top-level command).
    pub in_exec: bool,
    /// The command answered already what it asks of the shell (CONFIG REWRITE inside a
    /// transaction answered `+OK` in EXEC's array; FLUSHALL's save with save points): the
    /// shell carries the request out and its answer is not sent (see
    /// [`crate::Engine::take_rewrite_answered`]).
    pub rewrite_answered: bool,
    /// The Lua VM and the script cache (see [`crate::script`]).
    #[cfg(feature = "scripting")]
    pub scripts: crate::script::Scripts,
}

/// Redis's answer to a connection over `maxclients` (also what a shell sends when it has no
/// room for one more connection's buffers).
pub const MAX_CLIENTS_REACHED: &str = "-ERR max number of clients reached\r\n";

impl Core {
    /// Admits a new connection into `clients` (the shell's accept, and a busy script's
    /// serving: see `script_wait`): its handle, or the bytes to send before closing it when
    /// `maxclients` is reached or protected mode refuses it.
    pub fn admit(
        &mut self,
        clients: &mut ClientTable,
        conn: ConnInfo,
        now: Now,
    ) -> Result<Handle, &'static str> {
        if clients.len() as u64 >= self.config.maxclients {
            self.stats.rejected_connections += 1;
            return Err(MAX_CLIENTS_REACHED);
        }
        self.stats.total_connections_received += 1;
        if let Some(denied) = self.protected_mode_refusal(&conn.transport) {
            return Err(denied);
        }
        let authenticated = !self.acl.auth_required();
        Ok(clients.add(conn, now.ms(), authenticated))
    }

    /// Protected mode's refusal of a connection over `t`, if it refuses it.
    pub fn protected_mode_refusal(&self, t: &Transport) -> Option<&'static str> {
        let protected = self.config.protected_mode;
        self.acl
            .protected_mode_denies(protected, t)
            .then_some(acl::PROTECTED_MODE_DENIED)
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
    /// The command table (metadata; the handlers are [`crate::cmd::spec::Commands`]').
    pub commands: &'a CommandTable,
    /// The shell's side of a long run, when it lent one (FUNCTION LOAD reads its clock to
    /// time a library's code).
    pub wait: Option<&'a mut dyn crate::ScriptWait>,
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
        self.core.aof.changed = true;
        if self.core.aof.enabled {
            self.core.aof.push(self.db_index, args);
        }
    }

    /// The command goes to the replicas as the client sent it, and not to the AOF; it
    /// changes no data (PUBLISH: a replica's subscribers get the primary's messages, as
    /// Redis's `forceCommandPropagation(c, PROPAGATE_REPL)`).
    #[inline]
    pub fn propagate_to_replicas(&mut self) {
        // A replica passes its primary's stream on as it came, never its own clients'.
        if self.core.aof.enabled && self.core.repl.primary.is_none() {
            self.core.aof.verbatim_repl = true;
        }
    }

    /// The write changed the dataset and propagates as the client sent it (after anything
    /// the handler passed to [`Cx::propagate`]).
    #[inline]
    pub fn propagate_verbatim(&mut self) {
        self.core.aof.changed = true;
        if self.core.aof.enabled {
            self.core.aof.verbatim = true;
        }
    }
}
