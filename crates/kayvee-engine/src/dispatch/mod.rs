//! Running one command: lookup and arity, authentication, ACL, the memory limit, the client's
//! mode (MULTI, subscribed, MONITOR, CLIENT PAUSE), the call itself (the handler from the
//! table's row, [`crate::cmd::spec::Commands`]) with its statistics, and the work after it
//! (the key event drain, serving blocked clients with their command's serve function, WATCH,
//! tracking, MONITOR, notifications). EXEC runs here too: it runs other commands.

use crate::argv::Argv;
use crate::client::{self, ClientTable, Handle};
use crate::cmd::spec::Commands;
use crate::command::{self, CommandId, CommandInfo, CommandTable};
use crate::cx::{Core, Cx};
use crate::db::Expiry;
use crate::error::{CmdResult, Error};
use crate::outcome::Outcome;
use crate::reply::{Protocol, ReplySink, ReplyTree};
use crate::stats::send_error;
use crate::time::Now;
use crate::{acl, cmd, drain, evict, monitor, pause, persist, pubsub, txn, util};
use alloc::vec::Vec;

/// The refusal of a write while `min-replicas-to-write` is not met.
pub(crate) const NOREPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";
/// The refusal of a command a stale replica does not serve.
const MASTERDOWN: &str =
    "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";

#[cfg(feature = "scripting")]
mod script;
mod timing;

/// What dispatch remembers between commands (kept in the engine).
pub struct State {
    /// The command the last `execute` ran, if any (for the shell's timing).
    pub last_cmd: Option<CommandId>,
    /// EXEC's id: dispatch runs it itself (it runs other commands).
    exec_id: Option<CommandId>,
    /// What the DEBUG SLEEPs of the EXEC that just ran slept on the shell's clock (blocked
    /// clients are served as of after them).
    exec_slept_us: u64,
    /// A command of another client runs while a script is busy (MULTI, WATCH...): nothing
    /// is evicted for it, as Redis skips eviction inside a long command.
    serving_busy: bool,
    /// The client whose plain commands take the common path ([`Dispatch::execute`]): set by
    /// [`Dispatch::begin_batch`] when [`Dispatch::usual`] holds for it, cleared by every
    /// command that takes the full path (which may change what `usual` reads).
    usual: Option<Handle>,
    /// Per command id: one of the EVAL/FCALL commands, which dispatch runs itself (a table,
    /// so the test costs one load per command).
    #[cfg(feature = "scripting")]
    evals: Vec<bool>,
    /// What the DEBUG SLEEPs of the script that just ran add up to: the server sleeps after
    /// it (the script saw its time frozen at its start anyway, as in Redis).
    #[cfg(feature = "scripting")]
    script_sleep_us: u64,
    /// The script that just ran was a debugging session: its connection closes after the
    /// reply, as Redis ends one.
    #[cfg(feature = "scripting")]
    script_close: bool,
    /// What the script that just ran adds to its command's `failed_calls` beyond its own
    /// error: errors of its commands it replied with (counted as errors when they happened;
    /// see `script::convert::write_value`).
    #[cfg(feature = "scripting")]
    script_failed: u64,
}

impl State {
    /// For the command table `commands`.
    pub fn new(commands: &CommandTable) -> Self {
        State {
            last_cmd: None,
            exec_id: commands.lookup(b"exec"),
            exec_slept_us: 0,
            serving_busy: false,
            usual: None,
            #[cfg(feature = "scripting")]
            evals: script::eval_table(commands),
            #[cfg(feature = "scripting")]
            script_sleep_us: 0,
            #[cfg(feature = "scripting")]
            script_close: false,
            #[cfg(feature = "scripting")]
            script_failed: 0,
        }
    }
}

/// The engine's parts one command needs, borrowed for its run.
pub struct Dispatch<'e> {
    /// Databases, configuration, counters and the features' tables.
    pub core: &'e mut Core,
    /// All clients.
    pub clients: &'e mut ClientTable,
    /// The command table and the handlers.
    pub commands: &'e Commands,
    /// What dispatch remembers between commands.
    pub state: &'e mut State,
    /// The shell's side of a long script, if it serves other clients meanwhile.
    pub wait: Option<&'e mut dyn crate::ScriptWait>,
}

impl<'e> Dispatch<'e> {
    /// The context command `cmd` runs in for client `me`, in database `db_index`.
    #[inline]
    fn cx(&mut self, me: Handle, db_index: usize, cmd: CommandId, now: Now) -> Cx<'_> {
        let commands: &'e Commands = self.commands;
        Cx {
            core: self.core,
            clients: self.clients,
            me,
            db_index,
            now,
            outcome: Outcome::Continue,
            cmd,
            commands: &commands.table,
            wait: match &mut self.wait {
                Some(w) => Some(&mut **w),
                None => None,
            },
        }
    }

    /// The metadata of command `id` (borrowed from the table, not from `self`).
    #[inline]
    fn spec(&self, id: CommandId) -> &'e CommandInfo {
        let commands: &'e Commands = self.commands;
        &commands.table.get(id).spec
    }

    /// Whether client `h`'s plain commands (see [`Dispatch::plain`]) may skip every check of
    /// a rare state: no pause, replication role, memory limit, loading, disk error,
    /// `min-replicas`, AOF, client tracking, monitor, transaction, subscription, reply mode,
    /// authentication or ACL restriction is in force, and the databases delete expired keys.
    /// Each check dispatch skips then would have passed; no plain command changes any of
    /// these (the commands that do are flagged `admin`, `noscript` or `pubsub`). The one
    /// place that says what the common path may skip.
    pub(crate) fn usual(&self, h: Handle) -> bool {
        let core = &*self.core;
        let cfg = &core.config;
        let Some(c) = self.clients.get(h) else {
            return false;
        };
        c.reply_mode == client::ReplyMode::On
            && (c.authenticated || !core.acl.auth_required())
            && core.acl.unrestricted(&c.user)
            && core.pause.none()
            && core.repl.primary.is_none()
            && core.replay_client.is_none()
            && !self.state.serving_busy
            && cfg.maxmemory == 0
            && core.persist.loading.is_none()
            && !core.persist.async_loading
            && !disk_trouble(core)
            && (cfg.min_replicas_to_write <= 0 || cfg.min_replicas_max_lag <= 0)
            && !core.aof.enabled
            && !core.tracking.active()
            && !core.monitors.active()
            && !core.txn.in_multi(h)
            && !core.pubsub.subscribed(h)
            && core.dbs.first().is_some_and(|d| d.expiry == Expiry::Delete)
    }

    /// A batch of client `h`'s commands starts: its plain commands take the common path
    /// while [`Dispatch::usual`] holds (read now, once for the batch). The shell calls it
    /// before each run of a connection's commands, after whatever changed meanwhile.
    pub fn begin_batch(&mut self, h: Handle) {
        self.state.usual = self.usual(h).then_some(h);
    }

    /// `argv`'s command when it is plain: found at once (no subcommands), called with its
    /// arity, and not one of the commands that change what [`Dispatch::usual`] reads
    /// (`admin`, `noscript`, `pubsub` or `no-multi`).
    #[inline(always)]
    fn plain(&self, argv: &Argv<'_>) -> Option<CommandId> {
        const UNUSUAL: u32 = command::flags::ADMIN
            | command::flags::NOSCRIPT
            | command::flags::PUBSUB
            | command::flags::NO_MULTI;
        let table = &self.commands.table;
        table.lookup(argv.get(0)).filter(|&id| {
            let spec = &table.get(id).spec;
            spec.subcommands == 0 && spec.flags & UNUSUAL == 0 && spec.arity_ok(argv.len())
        })
    }

    /// Runs one command for client `h`, writing its reply to `out`.
    pub fn execute(
        &mut self,
        h: Handle,
        argv: &Argv<'_>,
        now: Now,
        out: &mut dyn ReplySink,
    ) -> Outcome {
        self.state.last_cmd = None;
        self.state.exec_slept_us = 0;
        if argv.is_empty() {
            return Outcome::Continue;
        }
        if self.state.usual == Some(h) {
            if let Some(id) = self.plain(argv) {
                return self.execute_usual(h, id, argv, now, out);
            }
        }
        // The full path: whatever it runs may change what `usual` reads.
        self.state.usual = None;
        // One reading of the pause for both its uses (nothing between them changes it).
        let paused = self.core.pause.active(now.ms());
        if let Some(id) = paused.then(|| self.paused_for(h, argv, now)).flatten() {
            self.core.pause.postpone(h, argv);
            let spec = self.spec(id);
            if let Some(c) = self.clients.get_mut(h) {
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
        self.set_expiry(h, paused);
        let outcome = self.execute_top(h, argv, now, out, skip, protocol);
        self.after_execute::<false>(h, now, out, outcome)
    }

    /// [`Dispatch::execute`]'s common path: plain command `id` of client `h`, for whom
    /// [`Dispatch::usual`] holds (a debug build checks it), runs with none of the checks
    /// that would pass.
    #[inline(always)]
    fn execute_usual(
        &mut self,
        h: Handle,
        id: CommandId,
        argv: &Argv<'_>,
        now: Now,
        out: &mut dyn ReplySink,
    ) -> Outcome {
        debug_assert!(self.usual(h), "the common path's condition went stale");
        let Some(client) = self.clients.get_mut(h) else {
            return Outcome::Continue;
        };
        client.last_interaction_ms = now.ms();
        let outcome = self.run::<true>(h, id, argv, now, out);
        self.after_execute::<true>(h, now, out, outcome)
    }

    /// What follows every top-level command: key events, blocked clients served, tracking's
    /// invalidations and MONITOR's lines. `USUAL`: [`Dispatch::usual`] holds (no AOF,
    /// tracking or monitor).
    #[inline(always)]
    fn after_execute<const USUAL: bool>(
        &mut self,
        h: Handle,
        now: Now,
        out: &mut dyn ReplySink,
        outcome: Outcome,
    ) -> Outcome {
        drain::drain(self.core);
        // The Lua heap is not `used_memory` in Redis (see `Evictor::uncounted`).
        #[cfg(feature = "scripting")]
        {
            self.core.evict.uncounted = self.core.scripts.vm_bytes() as u64;
        }
        if !USUAL && self.core.aof.enabled {
            self.core.aof.flush();
        }
        if self.core.blocking.has_ready() {
            // Blocked clients are served after the command, as in Redis: after a DEBUG SLEEP
            // (in an EXEC) the shell is about to carry out, so a key that expires meanwhile
            // is expired for them (and its DEL propagated).
            let slept = core::mem::take(&mut self.state.exec_slept_us);
            let after = match outcome {
                Outcome::Sleep(us) => Now {
                    unix_us: now.unix_us + us,
                },
                _ => Now {
                    unix_us: now.unix_us + slept,
                },
            };
            // This command's invalidations first: each served client's follow its reply.
            if self.core.tracking.active() {
                drain::after_command(self.core, self.clients, Some(h), Some(out));
            }
            self.serve_ready(after);
            drain::drain(self.core);
        }
        drain::settle(self.core);
        if !USUAL && self.core.tracking.active() {
            drain::after_command(self.core, self.clients, Some(h), Some(out));
        }
        if !USUAL && self.core.monitors.active() {
            self.core
                .monitors
                .take_self()
                .iter()
                .for_each(|r| r.write_to(out));
        }
        outcome
    }

    /// Sets how the databases treat keys past their TTL for client `h`'s command (see
    /// [`crate::db::Expiry`]): a primary deletes them, a replica hides them from its clients
    /// and lets its primary's commands see them. During CLIENT PAUSE (WRITE or ALL) a primary
    /// hides them too, as Redis 7.0 does: nothing is deleted (or counted in `expired_keys`)
    /// until the pause ends. `paused`: whether a pause is in force now.
    fn set_expiry(&mut self, h: Handle, paused: bool) {
        let mode = match &self.core.repl.primary {
            None if paused => Expiry::Hide,
            None => Expiry::Delete,
            Some(_) if self.core.repl.is_master_client(h) => Expiry::Keep,
            Some(_) => Expiry::Hide,
        };
        if self.core.dbs.first().is_some_and(|d| d.expiry != mode) {
            self.core.dbs.iter_mut().for_each(|d| d.expiry = mode);
        }
    }

    /// `execute` without the serving of blocked clients afterwards.
    #[inline]
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
            self.execute_skipping(h, argv, now, out, protocol)
        } else {
            self.dispatch(h, argv, now, out)
        }
    }

    /// [`Dispatch::execute_top`] under CLIENT REPLY OFF or SKIP (out of line: rare).
    #[cold]
    #[inline(never)]
    fn execute_skipping(
        &mut self,
        h: Handle,
        argv: &Argv<'_>,
        now: Now,
        out: &mut dyn ReplySink,
        protocol: Protocol,
    ) -> Outcome {
        // Held, not dropped: a command that turns replies back on (`CLIENT REPLY ON`, RESET
        // under OFF) still answers, as in Redis.
        let mut held = ReplyTree::new(protocol);
        let outcome = self.dispatch(h, argv, now, &mut held);
        let on = self.clients.get(h).map(|c| c.reply_mode) == Some(client::ReplyMode::On);
        if on || self.pushes_anyway(argv) {
            held.take().iter().for_each(|r| r.write_to(out));
        }
        self.end_skip(h);
        outcome
    }

    /// Whether `argv`'s replies go out even under CLIENT REPLY OFF/SKIP: (un)subscribe
    /// confirmations, which Redis 7.0 pushes past the reply mode as it does messages.
    fn pushes_anyway(&self, argv: &Argv<'_>) -> bool {
        let Some(id) = self.commands.table.lookup(argv.get(0)) else {
            return false;
        };
        matches!(
            self.spec(id).name,
            "subscribe"
                | "unsubscribe"
                | "psubscribe"
                | "punsubscribe"
                | "ssubscribe"
                | "sunsubscribe"
        )
    }

    /// The command, when the pause in force covers this command of `h` (see [`crate::pause`]):
    /// unknown commands and arity errors are answered at once, QUIT is never held. Called
    /// only while a pause is in force.
    fn paused_for(&self, h: Handle, argv: &Argv<'_>, now: Now) -> Option<CommandId> {
        let id = self.resolve(argv).ok()?;
        let spec = self.spec(id);
        if spec.name == "quit" {
            return None;
        }
        let mut write = self.held_by_write(id, argv);
        if Some(id) == self.state.exec_id {
            let queue = self
                .core
                .txn
                .of(h)
                .map(|t| &t.queue[..])
                .unwrap_or_default();
            // A queued EVAL whose shebang says no-writes does not make the EXEC a write.
            write |= queue.iter().any(|a| {
                let argv = a.argv();
                self.resolve(&argv)
                    .is_ok_and(|q| self.held_by_write(q, &argv))
            });
        }
        self.core.pause.covers(write, now.ms()).then_some(id)
    }

    /// Whether a WRITE pause holds command `id` with `argv` (see [`pause::held_by_write`]); an
    /// EVAL is judged by its script's flags, as Redis judges it.
    fn held_by_write(&self, id: CommandId, argv: &Argv<'_>) -> bool {
        #[cfg(feature = "scripting")]
        if self.is_eval(id) {
            return self.script_may_write(id, argv);
        }
        let _ = argv;
        pause::held_by_write(self.spec(id))
    }

    /// MIGRATE's second half for client `h` (see [`cmd::migrate::finish`]), once the shell has
    /// the target's `replies`: the end of the command, with its key events, propagation and
    /// statistics (the call itself was counted when the first half ran).
    pub fn finish_migrate(
        &mut self,
        h: Handle,
        replies: &[crate::Reply],
        error: Option<crate::outcome::LinkError>,
        now: Now,
        out: &mut dyn ReplySink,
    ) {
        let (Some(id), Some(client)) =
            (self.commands.table.lookup(b"migrate"), self.clients.get(h))
        else {
            return;
        };
        let db_index = client.db;
        let mut cx = self.cx(h, db_index, id, now);
        let result = cmd::migrate::finish(&mut cx, replies, error, out);
        drain::drain(self.core);
        if self.core.aof.enabled {
            self.core.aof.flush();
        }
        if self.core.blocking.has_ready() {
            self.serve_ready(now);
            drain::drain(self.core);
        }
        drain::settle(self.core);
        if self.core.tracking.active() {
            drain::after_command(self.core, self.clients, Some(h), Some(out));
        }
        let changed = core::mem::take(&mut self.core.aof.changed);
        match result {
            Ok(()) if changed => self.core.stats.dirty += 1,
            Ok(()) => {}
            Err(e) => {
                self.core.stats.commands[id.0 as usize].failed_calls += 1;
                send_error(&mut self.core.stats, &e, out);
            }
        }
    }

    /// Runs the commands a pause held once it is over; their replies go out as wakeups.
    pub(crate) fn run_postponed(&mut self, now: Now) {
        for (h, args) in self.core.pause.take_due(now.ms()) {
            let protocol = self.protocol(h);
            let mut tree = ReplyTree::new(protocol);
            self.execute(h, &args.argv(), now, &mut tree);
            self.core.blocking.push_wakeup(h, tree.take());
        }
    }

    /// Serves the clients blocked on the keys that became ready, first come first served
    /// (see [`crate::blocking`], step 3). Runs after each top-level command.
    fn serve_ready(&mut self, now: Now) {
        while let Some((db, key)) = self.core.blocking.pop_ready() {
            for h in self.core.blocking.queue(db, &key) {
                let missing = !self.core.dbs[db].contains(&key, now.ms());
                if missing && !self.core.blocking.serves_missing(h) {
                    continue;
                }
                self.serve_one(now, h, db, &key);
            }
        }
    }

    /// Tries to serve waiter `h` from `key` with its command's serve function; unblocks it
    /// unless it keeps waiting.
    fn serve_one(&mut self, now: Now, h: Handle, db: usize, key: &[u8]) {
        let Some(protocol) = self
            .clients
            .get(h)
            .filter(|c| !c.killed)
            .map(|c| c.protocol)
        else {
            return;
        };
        let Some(w) = self.core.blocking.take_waiter(h) else {
            return;
        };
        let Some(serve) = self.commands.serve(w.cmd) else {
            return self.core.blocking.put_back(h, w);
        };
        let start = self.clock_now();
        let mut tree = ReplyTree::new(protocol);
        let mut cx = self.cx(h, db, w.cmd, now);
        let result = serve(&mut cx, key, &w.argv.argv(), &mut tree);
        match result {
            Ok(false) => return self.core.blocking.put_back(h, w),
            Ok(true) => {}
            Err(e) => {
                // The blocked call was counted when it blocked; it fails now.
                if let Some(stat) = self.core.stats.commands.get_mut(usize::from(w.cmd.0)) {
                    stat.failed_calls += 1;
                }
                send_error(&mut self.core.stats, &e, &mut tree)
            }
        }
        // The served command's invalidations, as for any command of `h`: its own after its
        // reply (Redis runs the served command as `h`'s).
        if self.core.tracking.active() {
            drain::drain(self.core);
            drain::after_command(self.core, self.clients, Some(h), Some(&mut tree));
        }
        let replies = tree.take();
        let end = self.clock_now();
        let reply_us = match (start, end) {
            (Some(start), Some(end)) => end.unix_us.saturating_sub(start.unix_us),
            _ => 0,
        };
        let times = (w.duration_us, reply_us);
        self.served_timed(h, w.cmd, &w.argv.argv(), times, end.unwrap_or(now));
        // The serve function propagated the pop it did (as its plain form): one call of its own.
        if self.core.aof.enabled {
            self.core.aof.flush();
        }
        self.core.blocking.put_back(h, w);
        self.core.blocking.unblock(h, replies);
    }

    fn end_skip(&mut self, h: Handle) {
        if let Some(c) = self.clients.get_mut(h) {
            if c.reply_mode == client::ReplyMode::SkipThis {
                c.reply_mode = client::ReplyMode::On;
            }
        }
    }

    /// Looks the command up, checks arity, auth and the client's mode (subscribed, MULTI), then
    /// runs it (or queues it inside MULTI) and counts it. Inlined in the common path of
    /// `execute` (one call less per command).
    #[inline(always)]
    fn dispatch(
        &mut self,
        h: Handle,
        argv: &Argv<'_>,
        now: Now,
        out: &mut dyn ReplySink,
    ) -> Outcome {
        // A command without subcommands called with its arity is resolved here (the common
        // case, with no call); the rest by `resolve`.
        let table = &self.commands.table;
        let quick = table.lookup(argv.get(0)).filter(|&id| {
            let spec = &table.get(id).spec;
            spec.subcommands == 0 && spec.arity_ok(argv.len())
        });
        let id = match quick.ok_or(()).or_else(|()| self.resolve(argv)) {
            Ok(id) => id,
            Err((id, e)) => return self.reject(h, id, &e, out),
        };
        let spec = self.spec(id);
        let client = self.clients.get_mut(h).expect("checked by execute");
        let (authenticated, protocol) = (client.authenticated, client.protocol);
        // The primary's commands on a replica are obeyed: no auth, ACL, memory, read-only
        // or persistence check applies to them (Redis's `obey_client`).
        let obey = self.core.repl.primary.is_some() && self.core.repl.is_master_client(h)
            || self.core.replay_client == Some(h);
        // A client that connected while a password was required needs none once it is
        // removed (CONFIG SET requirepass ""), as in Redis.
        let auth_required = self.core.acl.auth_required();
        if !authenticated && auth_required && !spec.has(command::flags::NO_AUTH) && !obey {
            return self.reject(h, Some(id), &Error::NoAuth, out);
        }
        // A NO_MULTI command inside MULTI gets that error first, as in Redis.
        let in_multi = self.core.txn.in_multi(h);
        if !(obey || in_multi && spec.has(command::flags::NO_MULTI)) {
            if let Some(e) = self.acl_denied(h, id, argv, now) {
                return self.reject(h, Some(id), &e, out);
            }
        }
        // The setting is looked up by name, so only where a limit is set (the master
        // client's every command on a replica used to pay for the lookup).
        let replica_ignores_maxmemory = || {
            self.core.repl.primary.is_some()
                && self.core.config.bool_param("replica-ignore-maxmemory")
        };
        if self.core.config.maxmemory != 0
            && !obey
            && !self.state.serving_busy
            && !replica_ignores_maxmemory()
        {
            let admitted = self.admit_memory(h, spec, now);
            if self.core.tracking.active() {
                drain::after_eviction(self.core, self.clients, h, out);
            }
            if let Err(e) = admitted {
                return self.reject(h, Some(id), &e, out);
            }
        }
        if self.core.persist.loading.is_some() && !spec.has(command::flags::LOADING) {
            return self.reject(h, Some(id), &Error::msg(persist::LOADING), out);
        }
        if self.core.persist.async_loading && spec.has(command::flags::NO_ASYNC_LOADING) {
            return self.reject(h, Some(id), &Error::msg(persist::LOADING), out);
        }
        if !obey && (spec.has(command::flags::WRITE) || spec.name == "ping") {
            if let Some(e) = disk_error(self.core) {
                return self.reject(h, Some(id), &e, out);
            }
        }
        if self.core.repl.primary.is_none()
            && !obey
            && self.too_few_replicas(h, id, spec, argv, now)
        {
            let e = Error::msg(NOREPLICAS);
            return self.reject(h, Some(id), &e, out);
        }
        if self.core.repl.primary.is_some() && !obey {
            if let Some(e) = self.replica_refusal(h, id, spec, argv) {
                return self.reject(h, Some(id), &e, out);
            }
        }
        // A replica of this server (after its SYNC or PSYNC) is treated as a monitor is.
        if (self.core.monitors.is_monitor(h) || self.core.repl.is_replica(h))
            && monitor::refused(spec)
        {
            return self.reject(h, Some(id), &monitor::keyspace_error(), out);
        }
        if protocol == Protocol::Resp2
            && self.core.pubsub.subscribed(h)
            && !pubsub::allowed_when_subscribed(spec.name)
        {
            let name = &self.commands.table.get(id).full_name;
            return self.reject(h, Some(id), &pubsub::subscribed_context_error(name), out);
        }
        if in_multi {
            if spec.has(command::flags::NO_MULTI) {
                let e = Error::msg("ERR Command not allowed inside a transaction");
                return self.reject(h, Some(id), &e, out);
            }
            if !txn::runs_in_multi(&self.commands.table.get(id).full_name) {
                txn::queue(&mut self.core.txn, h, argv);
                out.simple("QUEUED");
                return Outcome::Continue;
            }
        }
        if Some(id) == self.state.exec_id {
            self.core.in_exec = true;
            let outcome = self.exec(h, id, argv, now, out);
            self.core.in_exec = false;
            return outcome;
        }
        self.run::<false>(h, id, argv, now, out)
    }

    /// A replica's refusals of its own clients' commands, as Redis's `processCommand`: writes
    /// under `replica-read-only` (EXEC of a transaction holding one too), and, while the link
    /// is down with `replica-serve-stale-data no`, every command without the `stale` flag.
    fn replica_refusal(
        &self,
        h: Handle,
        id: CommandId,
        spec: &CommandInfo,
        argv: &Argv<'_>,
    ) -> Option<Error> {
        let cfg = &self.core.config;
        // Writes first: the setting is looked up by name, and a replica's clients mostly read.
        if self.is_write(h, id, spec, argv) && cfg.bool_param("replica-read-only") {
            return Some(Error::msg(
                "READONLY You can't write against a read only replica.",
            ));
        }
        if self.stale() && !self.allows_stale(id, spec, argv) {
            return Some(Error::msg(MASTERDOWN));
        }
        // EXEC is refused when a queued command would be (the replica may have gone stale
        // since they were queued).
        if Some(id) == self.state.exec_id && self.stale() {
            let queue = self
                .core
                .txn
                .of(h)
                .map(|t| &t.queue[..])
                .unwrap_or_default();
            let refused = queue.iter().any(|a| {
                let argv = a.argv();
                self.resolve(&argv)
                    .is_ok_and(|q| !self.allows_stale(q, self.spec(q), &argv))
            });
            if refused {
                return Some(Error::msg(MASTERDOWN));
            }
        }
        None
    }

    /// A replica whose link is down with `replica-serve-stale-data no`: it serves only the
    /// commands flagged `stale`.
    fn stale(&self) -> bool {
        let down = self
            .core
            .repl
            .primary
            .as_ref()
            .is_some_and(|p| p.state != crate::repl::LinkState::Connected);
        down && !self.core.config.bool_param("replica-serve-stale-data")
    }

    /// Whether command `id` with `argv` runs on a stale replica: flagged `stale` (an EVAL or
    /// FCALL as its script's flags say).
    fn allows_stale(&self, id: CommandId, spec: &CommandInfo, argv: &Argv<'_>) -> bool {
        #[cfg(feature = "scripting")]
        if self.is_eval(id) {
            return self.script_allows_stale(id, argv);
        }
        let _ = (id, argv);
        spec.has(command::flags::STALE)
    }

    /// Whether the command writes: a write command, or EXEC of a transaction holding one.
    /// An EVAL or FCALL counts as its script's flags say (Redis's `evalGetCommandFlags`): one
    /// with a `#!lua` header, or a function, that is not `no-writes` is a write; an EVAL without
    /// a header is not (its writes are checked one by one).
    fn is_write(&self, h: Handle, id: CommandId, spec: &CommandInfo, argv: &Argv<'_>) -> bool {
        self.is_write_command(id, spec, argv)
            || Some(id) == self.state.exec_id
                && self.core.txn.of(h).is_some_and(|t| {
                    t.queue.iter().any(|a| {
                        let argv = a.argv();
                        self.resolve(&argv)
                            .is_ok_and(|q| self.is_write_command(q, self.spec(q), &argv))
                    })
                })
    }

    /// Whether command `id` with `argv` writes (an EVAL-family one by its script's flags).
    fn is_write_command(&self, id: CommandId, spec: &CommandInfo, argv: &Argv<'_>) -> bool {
        #[cfg(feature = "scripting")]
        if self.is_eval(id) {
            return self.script_declares_write(id, argv);
        }
        let _ = (id, argv);
        spec.has(command::flags::WRITE)
    }

    /// `min-replicas-to-write` and `min-replicas-max-lag` (both non-zero): a primary with
    /// fewer online replicas whose last ACK is at most that many seconds old refuses writes
    /// (`-NOREPLICAS`), as Redis's `checkGoodReplicasStatus`.
    fn too_few_replicas(
        &self,
        h: Handle,
        id: CommandId,
        spec: &CommandInfo,
        argv: &Argv<'_>,
        now: Now,
    ) -> bool {
        self.lacks_good_replicas(now) && self.is_write(h, id, spec, argv)
    }

    /// Whether a primary has fewer good replicas than `min-replicas-to-write` asks (both it
    /// and `min-replicas-max-lag` non-zero), as Redis's `checkGoodReplicasStatus`.
    pub(crate) fn lacks_good_replicas(&self, now: Now) -> bool {
        let cfg = &self.core.config;
        let (min, lag) = (cfg.min_replicas_to_write, cfg.min_replicas_max_lag);
        if min <= 0 || lag <= 0 || self.core.repl.primary.is_some() {
            return false;
        }
        let good = self.core.repl.good_replicas(lag as u64, now.ms());
        (good as i64) < min
    }

    /// The memory limit's admission, as Redis's `processCommand`: evict if over the limit;
    /// when that fails, refuse DENYOOM commands, any command queued inside MULTI (but EXEC,
    /// DISCARD, QUIT and RESET), and EXEC of a transaction holding a DENYOOM command.
    fn admit_memory(&mut self, h: Handle, spec: &CommandInfo, now: Now) -> Result<(), Error> {
        if drain::evict(self.core, now) != evict::Evicted::Fail {
            return Ok(());
        }
        let mut refuse = spec.has(command::flags::DENYOOM);
        if let Some(t) = self.core.txn.of(h).filter(|t| t.multi) {
            refuse |= !matches!(spec.name, "exec" | "discard" | "quit" | "reset");
            if spec.name == "exec" {
                refuse |= t.queue.iter().any(|args| {
                    let argv = args.argv();
                    self.resolve(&argv)
                        .is_ok_and(|id| self.spec(id).has(command::flags::DENYOOM))
                });
            }
        }
        if refuse {
            return Err(Error::msg(evict::OOM));
        }
        Ok(())
    }

    /// Runs a resolved, admitted command and counts it (inlined where a command runs: one
    /// call less per command).
    /// `USUAL`: [`Dispatch::usual`] holds (no AOF, replication, tracking or monitor).
    #[inline(always)]
    fn run<const USUAL: bool>(
        &mut self,
        h: Handle,
        id: CommandId,
        argv: &Argv<'_>,
        now: Now,
        out: &mut dyn ReplySink,
    ) -> Outcome {
        let spec = self.spec(id);
        let client = self.clients.get_mut(h).expect("checked by execute");
        client.last_cmd = spec.name;
        client.last_cmd_id = Some(id);
        let db_index = client.db;
        self.state.last_cmd = Some(id);
        #[cfg(feature = "scripting")]
        if self.is_eval(id) {
            let result = self.eval(h, id, argv, now, out);
            let outcome = self.count(id, result, out);
            let failed = core::mem::take(&mut self.state.script_failed);
            self.core.stats.commands[id.0 as usize].failed_calls += failed;
            if core::mem::take(&mut self.state.script_close) {
                return Outcome::Close;
            }
            return match core::mem::take(&mut self.state.script_sleep_us) {
                0 => outcome,
                us => Outcome::Sleep(us),
            };
        }
        let handler = self.commands.handler(id);
        let mut cx = self.cx(h, db_index, id, now);
        let result = handler(&mut cx, argv, out);
        if !USUAL && cx.core.aof.enabled {
            cx.core.aof.end_command(db_index, argv);
        }
        drain::drain(cx.core);
        let outcome = core::mem::take(&mut cx.outcome);
        if USUAL {
            self.count(id, result, out);
            return outcome;
        }
        if self.core.repl.primary.is_some() && spec.has(command::flags::WRITE) {
            self.remember_replica_ttls(h, spec, argv, db_index);
        }
        if self.core.tracking.active() {
            drain::after_run(
                self.core,
                self.clients,
                h,
                self.commands.table.get(id),
                argv,
            );
        }
        if self.core.monitors.active() {
            let (monitors, outbox) = (&mut self.core.monitors, &mut self.core.pubsub.outbox);
            if self.core.script_running {
                if !spec.has(command::flags::ADMIN) && !spec.has(command::flags::SKIP_MONITOR) {
                    monitor::feed_as(monitors, outbox, self.clients, h, argv, now, Some("lua"));
                }
            } else {
                monitor::feed(monitors, outbox, self.clients, h, spec, argv, now);
            }
        }
        self.count(id, result, out);
        outcome
    }

    /// On a writable replica, the keys its own client's write left with a TTL (Redis's
    /// `rememberSlaveKeyWithExpire`): the replica expires them itself, since its primary,
    /// which never had them, sends no `DEL` for them.
    fn remember_replica_ttls(&mut self, h: Handle, spec: &CommandInfo, argv: &Argv<'_>, db: usize) {
        if self.core.repl.is_master_client(h) {
            return;
        }
        let Ok(keys) = spec.find_keys(argv) else {
            return;
        };
        for k in keys {
            let key = argv.get(k.index);
            if self.core.dbs[db].expire_at(key).is_some() {
                self.core.repl.remember_ttl(db, key);
            }
        }
    }

    /// Counts a command that ran (INFO commandstats, `dirty`) and sends its error, if any.
    #[inline(always)]
    fn count(&mut self, id: CommandId, result: CmdResult, out: &mut dyn ReplySink) -> Outcome {
        let stat = &mut self.core.stats.commands[id.0 as usize];
        stat.calls += 1;
        self.core.stats.total_commands_processed += 1;
        // An approximation of Redis's per-key `dirty` count: one per command that changed the
        // dataset (it asked to propagate: a write that changed nothing does not).
        let changed = core::mem::take(&mut self.core.aof.changed);
        match result {
            Ok(()) => self.core.stats.dirty += u64::from(changed),
            Err(e) => self.count_error(id, &e, out),
        }
        Outcome::Continue
    }

    /// A command that ran failed: counted, and its error sent (out of line: most succeed).
    #[cold]
    #[inline(never)]
    fn count_error(&mut self, id: CommandId, e: &Error, out: &mut dyn ReplySink) {
        self.core.stats.commands[id.0 as usize].failed_calls += 1;
        send_error(&mut self.core.stats, e, out);
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
        if !self.core.txn.in_multi(h) {
            let e = Error::msg("ERR EXEC without MULTI");
            self.core.stats.commands[id.0 as usize].failed_calls += 1;
            self.core.stats.commands[id.0 as usize].calls += 1;
            return self.reject(h, None, &e, out);
        }
        let t = self.core.txn.of(h).expect("in MULTI");
        let errored = t.errored;
        let dirty =
            t.dirty || txn::watched_key_expired(&self.core.txn, &self.core.dbs, h, now.ms());
        let queue = self.core.txn.take_queue(h);
        drain::unwatch_all(self.core, h);
        self.core.stats.commands[id.0 as usize].calls += 1;
        let mut outcome = Outcome::Continue;
        if errored {
            let e = Error::msg("EXECABORT Transaction discarded because of previous errors.");
            // EXEC ran and failed (Redis counts its error reply as a failed call).
            self.core.stats.commands[id.0 as usize].failed_calls += 1;
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
                        None => self.exec_step(h, cmd, &argv, now, out),
                    },
                    Err((_, e)) => self.reject(h, None, &e, out),
                };
                drain::settle(self.core);
                // A request for the shell (CONFIG REWRITE) outranks closing killed clients:
                // the shell closes them after any request too.
                // A deferred reply's mark gives way to any other outcome.
                let weak = |o: Outcome| matches!(o, Outcome::Continue | Outcome::DeferredReply);
                let minor = (step == Outcome::KillClients && !weak(outcome))
                    || (step == Outcome::DeferredReply && outcome != Outcome::Continue);
                if step != Outcome::Continue && !minor {
                    outcome = step;
                }
            }
        }
        drain::discard(self.core, h);
        self.state.last_cmd = Some(id);
        // CLIENT CACHING given before MULTI covered the whole transaction; it ends here.
        if let Some(t) = self.core.tracking.of_mut(h) {
            t.caching = None;
        }
        if self.core.monitors.active() {
            let spec = self.spec(id);
            let (monitors, outbox) = (&mut self.core.monitors, &mut self.core.pubsub.outbox);
            monitor::feed(monitors, outbox, self.clients, h, spec, exec_argv, now);
        }
        outcome
    }

    /// Finds the command (and subcommand) and checks arity, producing Redis's error texts.
    fn resolve(&self, argv: &Argv<'_>) -> Result<CommandId, (Option<CommandId>, Error)> {
        let table = &self.commands.table;
        let Some(id) = table.lookup(argv.get(0)) else {
            return Err((None, unknown_command(argv)));
        };
        let spec = &table.get(id).spec;
        if spec.subcommands == 0 || argv.len() < 2 {
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
    #[inline(always)]
    fn acl_denied(&mut self, h: Handle, id: CommandId, argv: &Argv<'_>, now: Now) -> Option<Error> {
        let client = self.clients.get(h)?;
        let denied = self
            .core
            .acl
            .check(&client.user, &self.commands.table, id, argv)?;
        self.acl_refusal(h, id, argv, now, denied)
    }

    /// [`Dispatch::acl_denied`]'s refusal, logged (out of line: the check runs for every
    /// command).
    #[cold]
    #[inline(never)]
    fn acl_refusal(
        &mut self,
        h: Handle,
        id: CommandId,
        argv: &Argv<'_>,
        now: Now,
        denied: acl::Denied,
    ) -> Option<Error> {
        let client = self.clients.get(h)?;
        let user = client.user.as_bytes().to_vec();
        let name = self.commands.table.get(id).full_name.clone();
        let last_cmd = self.spec(id).name;
        let client = self.clients.get_mut(h)?;
        // Redis notes the refused command as the client's last one (CLIENT LIST cmd=).
        client.last_cmd = last_cmd;
        client.last_cmd_id = Some(id);
        let (reason, object) = match denied.kind {
            acl::DenyKind::Command => ("command", name.as_bytes()),
            acl::DenyKind::Key => ("key", argv.get(denied.index)),
            acl::DenyKind::Channel => ("channel", argv.get(denied.index)),
        };
        let mut cx = self.cx(h, 0, id, now);
        cmd::acl::log_denial(&mut cx, reason, object, &user);
        Some(Error::msg(denied.error_text(&name)))
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
        txn::flag_error(&mut self.core.txn, h);
        if id.is_some() && id == self.state.exec_id {
            drain::discard(self.core, h);
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

    /// The protocol a client negotiated.
    fn protocol(&self, h: Handle) -> Protocol {
        self.clients.get(h).map(|c| c.protocol).unwrap_or_default()
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

/// Why writes are refused for the disk's sake, as Redis's `writeCommandsDeniedByDiskError`:
/// the last background save failed (with `stop-writes-on-bgsave-error` and save points), or
/// the AOF is on and its last write failed.
fn disk_error(core: &Core) -> Option<Error> {
    if bgsave_refuses(core) {
        return Some(Error::msg(persist::MISCONF));
    }
    let aof = &core.aof.status;
    (aof.on && !aof.last_write_ok).then(|| {
        Error::msg(alloc::format!(
            "MISCONF Errors writing to the AOF file: {}",
            aof.last_write_error
        ))
    })
}

/// Whether a failed background save refuses writes (`stop-writes-on-bgsave-error`).
#[inline]
fn bgsave_refuses(core: &Core) -> bool {
    core.config.stop_writes_on_bgsave_error
        && core.persist.last_bgsave_failed
        && !core.config.save.is_empty()
}

/// Whether [`disk_error`] has an error to give (without making it).
#[inline]
fn disk_trouble(core: &Core) -> bool {
    let aof = &core.aof.status;
    bgsave_refuses(core) || aof.on && !aof.last_write_ok
}
