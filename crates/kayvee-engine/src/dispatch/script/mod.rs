//! EVAL, EVALSHA, EVAL_RO and EVALSHA_RO: a script's run, as Redis 7.0. The script is the
//! cached Lua function (see [`crate::script`]); `redis.call` and `redis.pcall` run their
//! command through [`Dispatch::run`], the path of a client's command after its admission
//! (statistics, SLOWLOG's and commandstats' counts, the key event drain, keyspace
//! notifications, WATCH, tracking, propagation: a script's writes reach the AOF as the
//! commands it ran, in MULTI/EXEC when more than one), with the checks Redis makes for
//! scripts (unknown command, arity, `noscript`, writes from read-only scripts, ACL).
//!
//! Replies cross as Redis 7.0 converts them ([`convert`]): a command's reply becomes a Lua
//! value in the protocol the script chose (`redis.setresp`), the script's return value becomes
//! the client's reply.

mod convert;
mod ldb;

use super::{Dispatch, NOREPLICAS};
use crate::aof::{TO_AOF, TO_REPL};
use crate::argv::{Argv, ArgvBuf};
use crate::client::{ConnInfo, Handle, LuaDebug};
use crate::command::{flags, CommandId, CommandTable};
use crate::error::{CmdResult, Error};
use crate::monitor;
use crate::outcome::Outcome;
use crate::reply::{Protocol, Reply, ReplySink, ReplyTree};
use crate::script::{self, host, sha1, Flags, Sha};
use crate::script_wait::{Answered, Busy, BusyAnswer};
use crate::time::Now;
use crate::util::parse_i64;
use alloc::string::String;
use kayvee_lua::{Host, Lua, Raise, Type};

/// The error EVALSHA gives for a script not in the cache.
const NOSCRIPT: &str = "NOSCRIPT No matching script. Please use EVAL.";
/// The error of a `_RO` command on a script that may write.
const WRITE_FLAG_RO: &str = "ERR Can not execute a script with write flag using *_ro command.";

/// Pushes a table of `items`.
fn push_array<'a>(lua: &mut Lua, items: impl Iterator<Item = &'a [u8]>) {
    lua.new_table(0, 0);
    for (i, item) in items.enumerate() {
        lua.push_bytes(item);
        lua.raw_seti(-2, i as i32 + 1);
    }
}

/// The EVAL commands, which dispatch runs itself.
const EVALS: [&str; 6] = [
    "eval",
    "evalsha",
    "eval_ro",
    "evalsha_ro",
    "fcall",
    "fcall_ro",
];

/// Per command id of `commands`: whether it is one of [`EVALS`].
pub(super) fn eval_table(commands: &CommandTable) -> alloc::vec::Vec<bool> {
    let mut table = alloc::vec![false; commands.all().len()];
    for id in EVALS.iter().filter_map(|n| commands.lookup(n.as_bytes())) {
        table[usize::from(id.0)] = true;
    }
    table
}

impl Dispatch<'_> {
    /// Whether `id` is one of the EVAL commands, which dispatch runs itself.
    #[inline]
    pub(super) fn is_eval(&self, id: CommandId) -> bool {
        self.state
            .evals
            .get(usize::from(id.0))
            .copied()
            .unwrap_or(false)
    }

    /// Whether EVAL-family command `argv` may write (what CLIENT PAUSE WRITE holds): not the
    /// `_RO` forms, nor a script or function flagged `no-writes`.
    pub(super) fn script_may_write(&self, id: CommandId, argv: &Argv<'_>) -> bool {
        self.script_flags(id, argv)
            .is_some_and(|flags| flags.is_none_or(|f| !f.no_writes))
    }

    /// Whether EVAL-family command `argv` is a write by its script's flags (Redis's
    /// `evalGetCommandFlags`): a `#!lua` script or a function that is not `no-writes`.
    pub(super) fn script_declares_write(&self, id: CommandId, argv: &Argv<'_>) -> bool {
        self.script_flags(id, argv)
            .is_some_and(|flags| flags.is_some_and(|f| !f.no_writes))
    }

    /// The flags EVAL-family command `argv` runs under: `None` for the `_RO` forms (which
    /// never write), `Some(None)` for a script without a shebang (or one not known),
    /// `Some(Some(flags))` for a `#!lua` script or a function.
    fn script_flags(&self, id: CommandId, argv: &Argv<'_>) -> Option<Option<Flags>> {
        match self.spec(id).name {
            "eval_ro" | "evalsha_ro" | "fcall_ro" => None,
            _ => Some(self.declared_flags(id, argv)),
        }
    }

    /// The flags EVAL-family command `argv`'s script declares: its `#!lua` header's, or its
    /// function's; `None` without a header (or for a script or function not known).
    fn declared_flags(&self, id: CommandId, argv: &Argv<'_>) -> Option<Flags> {
        let scripts = &self.core.scripts;
        match self.spec(id).name {
            "eval" | "eval_ro" => script::shebang(argv.get(1)).ok().flatten(),
            "evalsha" | "evalsha_ro" => <Sha>::try_from(argv.get(1).to_ascii_lowercase())
                .ok()
                .and_then(|sha| scripts.shebang.get(&sha).copied()),
            _ => scripts
                .functions
                .get(&argv.get(1).to_ascii_lowercase())
                .map(|f| f.flags),
        }
    }

    /// Whether EVAL-family command `argv` may run on a stale replica (Redis's
    /// `evalGetCommandFlags` keeps the `stale` flag): a script with flags only if `allow-stale`;
    /// one without runs, to fail at its start (see [`Self::call_script`]).
    pub(super) fn script_allows_stale(&self, id: CommandId, argv: &Argv<'_>) -> bool {
        self.declared_flags(id, argv).is_none_or(|f| f.allow_stale)
    }

    /// Runs EVAL-family command `id` for client `h`.
    pub(super) fn eval(
        &mut self,
        h: Handle,
        id: CommandId,
        argv: &Argv<'_>,
        now: Now,
        out: &mut dyn ReplySink,
    ) -> CmdResult {
        let name = self.spec(id).name;
        if name.starts_with("fcall") {
            return self.fcall(h, name == "fcall_ro", argv, now, out);
        }
        let debug = self.clients.get(h).map_or(LuaDebug::Off, |c| c.lua_debug);
        let debug = match self.wait.is_some() {
            true => debug,
            false => LuaDebug::Off,
        };
        if debug == LuaDebug::Off {
            return self.eval_script(h, name, argv, now, out, debug);
        }
        if name.starts_with("evalsha") {
            return Err(Error::msg(
                "ERR Please use EVAL instead of EVALSHA for debugging",
            ));
        }
        // The session starts before the checks, as Redis's: whatever ends the EVAL, the
        // client gets `<endsession>` and the connection closes after the reply.
        let result = self.eval_script(h, name, argv, now, out, debug);
        if !self.state.script_close {
            if let Some(wait) = self.wait.as_mut() {
                wait.debug_send(&mut |out: &mut dyn ReplySink| {
                    out.array(1);
                    out.simple("<endsession>");
                });
            }
            self.state.script_close = true;
        }
        result
    }

    /// EVAL and its forms once the debugging question is settled.
    fn eval_script(
        &mut self,
        h: Handle,
        name: &str,
        argv: &Argv<'_>,
        now: Now,
        out: &mut dyn ReplySink,
        debug: LuaDebug,
    ) -> CmdResult {
        let numkeys = parse_i64(argv.get(2)).ok_or(Error::NotInteger)?;
        if numkeys > (argv.len() - 3) as i64 {
            return Err(Error::msg(
                "ERR Number of keys can't be greater than number of args",
            ));
        }
        if numkeys < 0 {
            return Err(Error::msg("ERR Number of keys can't be negative"));
        }
        let sha = self.script_sha(name.starts_with("evalsha"), argv.get(1))?;
        let flags = self.core.scripts.shebang.get(&sha).copied();
        let ro_command = name.ends_with("_ro");
        if ro_command && flags.is_some_and(|f| !f.no_writes) {
            return Err(Error::msg(WRITE_FLAG_RO));
        }
        // A script without a header is checked command by command (its writes past
        // `maxmemory` fail); with one, at its start unless `no-writes` or `allow-oom`.
        let header = flags.is_some();
        let mut flags = flags.unwrap_or_default();
        flags.no_writes |= ro_command;
        let mut lua = self.core.scripts.take_vm();
        script::push_script(&mut lua, &sha);
        let split = 3 + numkeys as usize;
        script::set_global_array(&mut lua, b"KEYS", (3..split).map(|i| argv.get(i)));
        script::set_global_array(&mut lua, b"ARGV", (split..argv.len()).map(|i| argv.get(i)));
        let ldb = (debug != LuaDebug::Off)
            .then(|| ldb::Ldb::new(debug, argv.get(1), &self.core.dbs, now));
        self.call_script(lua, h, argv, now, out, 0, (flags, header), &sha, ldb)
    }

    /// FCALL / FCALL_RO: runs a library's function with KEYS and ARGV as its arguments.
    fn fcall(
        &mut self,
        h: Handle,
        ro_command: bool,
        argv: &Argv<'_>,
        now: Now,
        out: &mut dyn ReplySink,
    ) -> CmdResult {
        let fname = argv.get(1);
        let key = fname.to_ascii_lowercase();
        let Some(function) = self.core.scripts.functions.get(&key) else {
            return Err(Error::msg("ERR Function not found"));
        };
        let (flags, shown) = (function.flags, function.name.clone());
        let numkeys =
            parse_i64(argv.get(2)).ok_or(Error::msg("ERR Bad number of keys provided"))?;
        if numkeys < 0 {
            return Err(Error::msg("ERR Number of keys can't be negative"));
        }
        if numkeys > (argv.len() - 3) as i64 {
            return Err(Error::msg(
                "ERR Number of keys can't be greater than number of args",
            ));
        }
        if ro_command && !flags.no_writes {
            return Err(Error::msg(WRITE_FLAG_RO));
        }
        let mut lua = self.core.scripts.take_vm();
        script::push_function(&mut lua, fname);
        let split = 3 + numkeys as usize;
        push_array(&mut lua, (3..split).map(|i| argv.get(i)));
        push_array(&mut lua, (split..argv.len()).map(|i| argv.get(i)));
        self.call_script(lua, h, argv, now, out, 2, (flags, true), &shown, None)
    }

    /// Calls the script or function below its `nargs` arguments on `lua`'s stack, then puts
    /// the VM back; `name` is what errors call it (the SHA-1 or the function's name). A script
    /// with flags (a `#!lua` header, a function) that may write is refused at its start past
    /// `maxmemory` unless `allow-oom`; one without is checked at each write it makes.
    #[allow(clippy::too_many_arguments)]
    fn call_script(
        &mut self,
        mut lua: Lua,
        h: Handle,
        argv: &Argv<'_>,
        now: Now,
        out: &mut dyn ReplySink,
        nargs: i32,
        (flags, header): (Flags, bool),
        name: &[u8],
        ldb: Option<ldb::Ldb>,
    ) -> CmdResult {
        if header
            && !flags.no_writes
            && !flags.allow_oom
            && self.core.config.maxmemory != 0
            && self.over_memory(now)
        {
            self.core.scripts.put_vm(lua);
            return Err(Error::msg(crate::evict::OOM));
        }
        // On a stale replica only a script flagged `allow-stale` runs (one with other flags
        // was refused before it ran).
        if !(header && flags.allow_stale) && self.stale() {
            self.core.scripts.put_vm(lua);
            return Err(Error::msg(super::MASTERDOWN));
        }
        // A script with flags that may write needs the good replicas at its start.
        if header && !flags.no_writes && self.lacks_good_replicas(now) {
            self.core.scripts.put_vm(lua);
            return Err(Error::msg(NOREPLICAS));
        }
        if self.core.monitors.active() {
            let (monitors, outbox) = (&mut self.core.monitors, &mut self.core.pubsub.outbox);
            monitor::feed_as(monitors, outbox, self.clients, h, argv, now, None);
        }
        let client = self.clients.get(h).expect("checked by execute");
        let (db, last_cmd, last_cmd_id) = (client.db, client.last_cmd, client.last_cmd_id);
        let state_last = self.state.last_cmd;
        self.core.script_running = true;
        let numkeys = parse_i64(argv.get(2)).unwrap_or(0).max(0) as usize;
        self.core.tracking.script_keys = Some(
            (3..(3 + numkeys).min(argv.len()))
                .map(|i| crate::db::Key::from_slice(argv.get(i)))
                .collect(),
        );
        let waiting = self.wait.is_some();
        if ldb.is_some() {
            lua.set_line_hook(HOOK_EVERY);
        } else if waiting {
            lua.set_hook(HOOK_EVERY);
        }
        if ldb.as_ref().is_some_and(ldb::Ldb::rolls_back) {
            self.core.aof.skip = TO_AOF | TO_REPL;
        }
        // The command's time is frozen at 0 in an AOF replay: the busy clock starts now.
        let started = match self.wait.as_mut() {
            Some(wait) if now.unix_us == 0 => wait.now(),
            _ => now,
        };
        let mut run = Run {
            d: self,
            h,
            now,
            started,
            resp3: false,
            read_only: flags.no_writes,
            allow_oom: flags.allow_oom,
            args: ArgvBuf::new(),
            busy: Busy {
                running: h,
                // FCALL passes KEYS and ARGV as arguments; EVAL as globals.
                eval: nargs == 0,
                wrote: false,
                killed: false,
            },
            timed_out: false,
            name,
            command: argv,
            busy_now: started,
            ldb,
        };
        let result = lua.call(&mut run, nargs, 1);
        lua.set_hook(0);
        if run.ldb.is_some() {
            run.ldb_end();
            run.d.state.script_close = true;
            if let Some(dbs) = run.ldb.as_mut().and_then(ldb::Ldb::take_rollback) {
                run.d.core.dbs.iter().for_each(crate::db::Db::replacing);
                run.d.core.dbs = dbs;
            }
        }
        let resp3 = run.resp3;
        self.core.aof.skip = 0;
        self.core.script_running = false;
        self.core.tracking.script_keys = None;
        // Errors the script's commands returned were counted when they failed: their reply
        // only makes the script's command a failed call (see `State::script_failed`).
        let reply = match result {
            Ok(()) => {
                let stats = &mut self.core.stats;
                self.state.script_failed += convert::write_value(&mut lua, -1, out, resp3, stats);
                Ok(())
            }
            Err(_) => match convert::failure(&mut lua, name) {
                (e, false) => Err(e),
                (e, true) => {
                    match e {
                        Error::Bytes(text) => out.error_bytes(&text),
                        e => out.error(&alloc::format!("{e}")),
                    }
                    self.state.script_failed += 1;
                    Ok(())
                }
            },
        };
        lua.set_top(0);
        self.core.scripts.put_vm(lua);
        self.state.last_cmd = state_last;
        if let Some(c) = self.clients.get_mut(h) {
            (c.db, c.last_cmd, c.last_cmd_id) = (db, last_cmd, last_cmd_id);
        }
        reply
    }

    /// Why a script's write command is refused where the server stands (Redis's
    /// `scriptVerifyWriteCommandAllow`): the disk (a failed background save or AOF write:
    /// MISCONF, on a primary), a read-only replica, too few good replicas (only before the
    /// script's first write: a script that wrote goes on, whole).
    fn script_write_refusal(&self, h: Handle, now: Now, wrote: bool) -> Option<String> {
        let repl = &self.core.repl;
        if repl.primary.is_none() && self.core.replay_client != Some(h) {
            if let Some(e) = super::disk_error(self.core) {
                return Some(alloc::format!("{e}"));
            }
        }
        if repl.primary.is_some()
            && !repl.is_master_client(h)
            && self.core.replay_client != Some(h)
            && self.core.config.bool_param("replica-read-only")
        {
            return Some("READONLY You can't write against a read only replica.".into());
        }
        let cfg = &self.core.config;
        let (min, lag) = (cfg.min_replicas_to_write, cfg.min_replicas_max_lag);
        if repl.primary.is_none()
            && !wrote
            && min > 0
            && lag > 0
            && (repl.good_replicas(lag as u64, now.ms()) as i64) < min
        {
            return Some("NOREPLICAS Not enough good replicas to write.".into());
        }
        None
    }

    /// Whether memory is over `maxmemory` after trying to evict.
    fn over_memory(&mut self, now: Now) -> bool {
        crate::drain::evict(self.core, now) == crate::evict::Evicted::Fail
    }

    /// The name of the script to run: EVALSHA's argument (lowercased; it must be cached), or
    /// EVAL's body's digest, compiled and cached if new.
    fn script_sha(&mut self, by_sha: bool, arg: &[u8]) -> Result<Sha, Error> {
        if by_sha {
            let sha: Sha = arg
                .to_ascii_lowercase()
                .try_into()
                .map_err(|_| Error::msg(NOSCRIPT))?;
            if !self.core.scripts.bodies.contains_key(&sha) {
                return Err(Error::msg(NOSCRIPT));
            }
            return Ok(sha);
        }
        let sha = sha1::hex(arg);
        self.core
            .scripts
            .compile(&sha, arg)
            .map_err(|text| Error::Bytes(convert::one_line(text)))?;
        Ok(sha)
    }
}

/// A script's run: what its host functions reach.
struct Run<'r, 'e> {
    d: &'r mut Dispatch<'e>,
    h: Handle,
    now: Now,
    /// `redis.setresp(3)` was called.
    resp3: bool,
    /// EVAL_RO / EVALSHA_RO / `no-writes`: no write commands.
    read_only: bool,
    /// `allow-oom`: writes past `maxmemory` are let through.
    allow_oom: bool,
    /// The arguments of the `redis.call` being run (kept: one allocation for the whole run).
    args: ArgvBuf,
    /// The script as other clients' commands see it (written, killed).
    busy: Busy,
    /// It has run past `busy-reply-threshold`.
    timed_out: bool,
    /// The script's name in errors (the SHA-1, or the function's name).
    name: &'r [u8],
    /// The command that runs it (FUNCTION STATS shows it).
    command: &'r Argv<'r>,
    /// The time at the last hook.
    busy_now: Now,
    /// When the script started, on the busy clock (`busy-reply-threshold`, FUNCTION STATS).
    started: Now,
    /// A debugging session (SCRIPT DEBUG YES|SYNC).
    ldb: Option<ldb::Ldb>,
}

/// Lua instructions between two calls of the count hook (Redis's figure).
const HOOK_EVERY: i32 = 100_000;

impl Host for Run<'_, '_> {
    fn call(&mut self, lua: &mut Lua, id: i32) -> Result<i32, Raise> {
        match id {
            -1 if self.ldb.is_some() && !self.busy.killed => self.ldb_hook(lua),
            -1 => self.hook(lua),
            host::BREAKPOINT => self.ldb_breakpoint(lua),
            host::DEBUG => self.ldb_debug(lua),
            host::CALL => self.redis_call(lua, false),
            host::PCALL => self.redis_call(lua, true),
            host::SHA1HEX => sha1hex(lua),
            host::LOG => log(lua, &self.d.core.config.loglevel, self.d.core.scripts.log),
            host::SETRESP => self.setresp(lua),
            host::SET_REPL => self.set_repl(lua),
            host::RANDOM => self.random(lua),
            host::RANDOMSEED => self.randomseed(lua),
            host::ACL_CHECK_CMD => self.acl_check_cmd(lua),
            host::REGISTER_FUNCTION => raise(
                lua,
                "ERR redis.register_function can only be called on FUNCTION LOAD command",
            ),
            id if id >= script::structlib::FIRST => script::structlib::call(lua, id),
            id if id >= script::cmsgpack::FIRST => script::cmsgpack::call(lua, id),
            id if id >= script::cjson::FIRST => {
                script::cjson::call(lua, id, &mut self.d.core.scripts.cjson)
            }
            id if id >= script::bit::FIRST => script::bit::call(lua, id),
            _ => raise(lua, "ERR no such host function"),
        }
    }
}

impl BusyAnswer for Run<'_, '_> {
    fn running(&self) -> Handle {
        self.h
    }

    fn protocol(&self, h: Handle) -> Protocol {
        self.d
            .clients
            .get(h)
            .map_or(Protocol::Resp2, |c| c.protocol)
    }

    /// Another client's command while the script is busy, as Redis 7.0's `processCommand`
    /// answers it: an unknown command, a wrong arity and a missing AUTH get their usual
    /// errors; SCRIPT KILL, FUNCTION KILL and SHUTDOWN are [`Busy::answer`]'s; the other
    /// `allow-busy` commands (MULTI, DISCARD, WATCH, UNWATCH, AUTH, HELLO, RESET, QUIT...)
    /// run as usual; the rest is refused with `-BUSY` as a rejected call, which fails the
    /// client's transaction (EXEC itself discards it: `-EXECABORT`).
    fn answer(&mut self, h: Handle, argv: &Argv<'_>, out: &mut dyn ReplySink) -> Answered {
        let stats = argv.len() == 2
            && argv.get(0).eq_ignore_ascii_case(b"function")
            && argv.get(1).eq_ignore_ascii_case(b"stats");
        if stats && !self.busy.eval {
            self.running_stats(out);
            return Answered::Replied;
        }
        let id = match self.d.resolve(argv) {
            Ok(id) => id,
            Err((id, e)) => {
                self.d.reject(h, id, &e, out);
                return Answered::Replied;
            }
        };
        let spec = self.d.spec(id);
        let name = self.d.commands.table.get(id).full_name.as_str();
        // A kill inside MULTI is queued, as any `allow-busy` command.
        let kill = matches!(name, "script|kill" | "function|kill") && !self.d.core.txn.in_multi(h);
        // A script of an AOF being loaded (DEBUG LOADAOF): the load's refusal comes first,
        // as Redis checks loading before a busy script (SCRIPT KILL too).
        let loading = self.d.core.replay_client.is_some() || self.d.core.persist.loading.is_some();
        if loading && !spec.has(flags::LOADING) && h != self.h {
            self.d
                .reject(h, Some(id), &Error::msg(crate::persist::LOADING), out);
            return Answered::Replied;
        }
        if kill || name == "shutdown" || h == self.h {
            return self.busy.answer(argv, out);
        }
        let authenticated = self.d.clients.get(h).is_some_and(|c| c.authenticated);
        if !authenticated && self.d.core.acl.auth_required() && !spec.has(flags::NO_AUTH) {
            self.d.reject(h, Some(id), &Error::NoAuth, out);
        } else if spec.has(flags::ALLOW_BUSY) {
            // Not the script's: no eviction while it runs (see `State::serving_busy`).
            self.d.core.script_running = false;
            self.d.state.serving_busy = true;
            self.d.dispatch(h, argv, self.now, out);
            self.d.state.serving_busy = false;
            self.d.core.script_running = true;
        } else {
            let busy = Error::msg(self.busy.busy_error());
            self.d.reject(h, Some(id), &busy, out);
        }
        Answered::Replied
    }

    fn connect(&mut self, conn: ConnInfo, now: Now) -> Result<Handle, &'static str> {
        self.d.core.admit(self.d.clients, conn, now)
    }

    fn gone(&mut self, h: Handle) {
        if h != self.h && self.d.core.repl.is_replica(h) {
            self.d.core.repl.remove(h);
        }
    }
}

impl Run<'_, '_> {
    /// FUNCTION STATS while a function runs past the threshold: its name, command and time.
    fn running_stats(&self, out: &mut dyn ReplySink) {
        out.map(2);
        out.bulk_str("running_script");
        out.map(3);
        out.bulk_str("name");
        out.bulk(self.name);
        out.bulk_str("command");
        out.array(self.command.len());
        for i in 0..self.command.len() {
            out.bulk(self.command.get(i));
        }
        out.bulk_str("duration_ms");
        let elapsed_us = self.busy_now.unix_us.saturating_sub(self.started.unix_us);
        out.int((elapsed_us / 1000) as i64);
        out.bulk_str("engines");
        out.map(1);
        out.bulk_str("LUA");
        out.map(2);
        out.bulk_str("libraries_count");
        out.int(self.d.core.scripts.libraries.len() as i64);
        out.bulk_str("functions_count");
        out.int(self.d.core.scripts.functions.len() as i64);
    }
}

/// Raises `{err = text}` (how Redis's library functions fail).
fn raise(lua: &mut Lua, text: &str) -> Result<i32, Raise> {
    convert::push_error_table(lua, text.as_bytes());
    Err(Raise)
}

impl Run<'_, '_> {
    /// The count hook: past `busy-reply-threshold`, the shell serves the other clients (see
    /// [`crate::script_wait`]); a kill raises Redis's error, from then on at every instruction.
    fn hook(&mut self, lua: &mut Lua) -> Result<i32, Raise> {
        if self.busy.killed {
            return raise(lua, crate::script_wait::KILLED);
        }
        let threshold_ms = self.d.core.config.int_param("busy-reply-threshold");
        let Some(wait) = self.d.wait.take() else {
            return Ok(0);
        };
        self.busy_now = wait.now();
        if !self.timed_out {
            let elapsed_us = self.busy_now.unix_us.saturating_sub(self.started.unix_us);
            if threshold_ms <= 0 || elapsed_us < threshold_ms as u64 * 1000 {
                self.d.wait = Some(wait);
                return Ok(0);
            }
            self.timed_out = true;
            self.log_slow(elapsed_us / 1000);
        }
        wait.serve(self);
        self.d.wait = Some(wait);
        if self.busy.killed {
            lua.set_hook(1);
            return raise(lua, crate::script_wait::KILLED);
        }
        Ok(0)
    }

    /// Redis's warning when a script passes `busy-reply-threshold` (once per run).
    fn log_slow(&self, elapsed_ms: u64) {
        let Some(sink) = self.d.core.scripts.log else {
            return;
        };
        let kill = if self.busy.eval {
            "SCRIPT KILL"
        } else {
            "FUNCTION KILL"
        };
        let mut line = alloc::format!(
            "Slow script detected: still in execution after {elapsed_ms} milliseconds. You can \
             try killing the script using the {kill} command. Script name is: "
        )
        .into_bytes();
        line.extend_from_slice(self.name);
        line.push(b'.');
        sink(3, &line);
    }

    /// `redis.call` / `redis.pcall`: an error is raised (call) or returned (pcall) as
    /// `{err = text}`.
    fn redis_call(&mut self, lua: &mut Lua, protected: bool) -> Result<i32, Raise> {
        let mut args = core::mem::take(&mut self.args);
        let run = |this: &mut Self, args: &ArgvBuf| match this.ldb.is_some() {
            true => this.ldb_run(args),
            false => this.run_command(args),
        };
        // An error of the call's arguments is the script's own (counted if it replies with
        // it); the command's refusal or failure was counted as it happened.
        let reply = match script_argv(lua, &mut args) {
            Ok(()) => run(self, &args).unwrap_or_else(Reply::Error),
            Err(text) => {
                self.args = args;
                lua.set_top(0);
                convert::push_error_table(lua, text.as_bytes());
                return if protected { Ok(1) } else { Err(Raise) };
            }
        };
        self.args = args;
        lua.set_top(0);
        if let Reply::Error(text) = &reply {
            convert::push_command_error(lua, text.as_bytes());
            return if protected { Ok(1) } else { Err(Raise) };
        }
        convert::push_reply(lua, &reply, self.resp3);
        Ok(1)
    }

    /// Checks and runs one command for the script; its reply, in the script's protocol. A
    /// refusal is counted as Redis 7.0's `scriptCall` counts it: an error reply, and a rejected
    /// call of the command when there is one.
    fn run_command(&mut self, args: &ArgvBuf) -> Result<Reply, String> {
        let argv = args.argv();
        let cmd = match self.d.resolve(&argv) {
            Ok(id) => id,
            Err((id, Error::WrongArity(_))) => {
                return Err(self.refused(
                    id,
                    "ERR Wrong number of args calling Redis command from script".into(),
                ))
            }
            Err(_) => {
                let text = "ERR Unknown Redis command called from script".into();
                return Err(self.refused(None, text));
            }
        };
        self.check_command(cmd, &argv)
            .map_err(|text| self.refused(Some(cmd), text))?;
        self.call_command(cmd, &argv)
    }

    /// Counts refusal `text` of the script's command `cmd` (see [`Self::run_command`]).
    fn refused(&mut self, cmd: Option<CommandId>, text: String) -> String {
        let stats = &mut self.d.core.stats;
        if let Some(stat) = cmd.and_then(|id| stats.commands.get_mut(usize::from(id.0))) {
            stat.rejected_calls += 1;
        }
        stats.count_error(&text);
        text
    }

    /// The checks Redis makes of a script's command before it runs (Redis's `scriptCall`).
    fn check_command(&mut self, cmd: CommandId, argv: &Argv<'_>) -> Result<(), String> {
        let spec = self.d.spec(cmd);
        if spec.has(flags::NOSCRIPT) && !self.d.core.debug.disable_deny_scripts {
            return Err("ERR This Redis command is not allowed from script".into());
        }
        if !spec.has(flags::STALE) && self.d.stale() {
            return Err("ERR Can not execute the command on a stale replica".into());
        }
        // Writes and may-replicate commands (PUBLISH...), what CLIENT PAUSE WRITE holds.
        if self.read_only && crate::pause::held_by_write(spec) {
            return Err("ERR Write commands are not allowed from read-only scripts.".into());
        }
        // A script without flags is checked at its first write (none made yet: one that
        // changed the dataset is not failed halfway).
        if spec.has(flags::WRITE) && !self.busy.wrote && self.d.lacks_good_replicas(self.now) {
            return Err(NOREPLICAS.into());
        }
        if spec.has(flags::DENYOOM)
            && self.d.core.config.maxmemory != 0
            && !self.allow_oom
            && crate::drain::evict(self.d.core, self.now) == crate::evict::Evicted::Fail
        {
            return Err(crate::evict::OOM.into());
        }
        if let Some(e) = self.d.acl_denied(self.h, cmd, argv, self.now) {
            let text = alloc::format!("{e}");
            let why = text.strip_prefix("NOPERM ").unwrap_or(&text);
            return Err(alloc::format!(
                "ERR The user executing the script can't run this command or subcommand script: {why}"
            ));
        }
        if spec.has(flags::WRITE) {
            if let Some(e) = self
                .d
                .script_write_refusal(self.h, self.now, self.busy.wrote)
            {
                return Err(e);
            }
            self.busy.wrote = true;
        }
        Ok(())
    }

    /// Runs the script's checked command `cmd`; its reply, in the script's protocol.
    fn call_command(&mut self, cmd: CommandId, argv: &Argv<'_>) -> Result<Reply, String> {
        let protocol = if self.resp3 {
            Protocol::Resp3
        } else {
            Protocol::Resp2
        };
        let mut tree = ReplyTree::new(protocol);
        // DEBUG SLEEP: the server sleeps once the script is done (see `State::script_sleep_us`).
        if let Outcome::Sleep(us) = self.d.run::<false>(self.h, cmd, argv, self.now, &mut tree) {
            self.d.state.script_sleep_us = self.d.state.script_sleep_us.saturating_add(us);
        }
        Ok(tree.take().pop().unwrap_or(Reply::Null))
    }

    /// `redis.set_repl(flags)`: where the script's next calls propagate (`REPL_AOF` 1,
    /// `REPL_REPLICA` 2, `REPL_ALL` 3, `REPL_NONE` 0), until the script ends.
    fn set_repl(&mut self, lua: &mut Lua) -> Result<i32, Raise> {
        if lua.top() != 1 {
            return raise(lua, "ERR redis.set_repl() requires two arguments.");
        }
        match lua.to_number(1) {
            Some(f) if (0.0..=3.0).contains(&f) && f == libm::floor(f) => {
                self.d.core.aof.skip = !(f as u8) & (TO_AOF | TO_REPL);
                if self.ldb.as_ref().is_some_and(ldb::Ldb::rolls_back) {
                    self.d.core.aof.skip = TO_AOF | TO_REPL;
                }
                Ok(0)
            }
            _ => raise(
                lua,
                "ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
            ),
        }
    }

    /// `redis.setresp(2|3)`.
    fn setresp(&mut self, lua: &mut Lua) -> Result<i32, Raise> {
        if lua.top() != 1 {
            return raise(lua, "ERR redis.setresp() requires one argument.");
        }
        match lua.to_number(1) {
            Some(2.0) => self.resp3 = false,
            Some(3.0) => self.resp3 = true,
            _ => return raise(lua, "ERR RESP version must be 2 or 3."),
        }
        Ok(0)
    }

    /// `math.random([m [, n]])` on Redis's `lrand48` generator.
    fn random(&mut self, lua: &mut Lua) -> Result<i32, Raise> {
        let state = &mut self.d.core.scripts.rand48;
        let r = (script::lrand48(state) % 2_147_483_647) as f64 / 2_147_483_647.0;
        let (lo, hi) = match (lua.top(), lua.to_number(1), lua.to_number(2)) {
            (0, _, _) => {
                lua.push_number(r);
                return Ok(1);
            }
            (1, Some(m), _) => (1.0, libm::floor(m)),
            (2, Some(m), Some(n)) => (libm::floor(m), libm::floor(n)),
            (1 | 2, _, _) => {
                let n = if lua.to_number(1).is_none() { 1 } else { 2 };
                let text = alloc::format!("bad argument #{n} to 'random' (number expected)");
                return raise_string(lua, &text);
            }
            _ => return raise_string(lua, "wrong number of arguments"),
        };
        if lo > hi {
            let n = if lua.top() == 1 { 1 } else { 2 };
            return raise_string(
                lua,
                &alloc::format!("bad argument #{n} to 'random' (interval is empty)"),
            );
        }
        lua.push_number(libm::floor(r * (hi - lo + 1.0)) + lo);
        Ok(1)
    }

    /// `math.randomseed(n)`.
    fn randomseed(&mut self, lua: &mut Lua) -> Result<i32, Raise> {
        let Some(n) = lua.to_number(1) else {
            return raise_string(lua, "bad argument #1 to 'randomseed' (number expected)");
        };
        self.d.core.scripts.rand48 = script::srand48(n as i64 as i32);
        Ok(0)
    }

    /// `redis.acl_check_cmd(cmd, ...)`: whether the running user may run that command.
    fn acl_check_cmd(&mut self, lua: &mut Lua) -> Result<i32, Raise> {
        let mut args = ArgvBuf::new();
        if let Err(e) = script_argv(lua, &mut args) {
            return raise(lua, &e);
        }
        let argv = args.argv();
        let Ok(cmd) = self.d.resolve(&argv) else {
            return raise(lua, "ERR Invalid command passed to redis.acl_check_cmd()");
        };
        let Some(client) = self.d.clients.get(self.h) else {
            return raise(lua, "ERR no client");
        };
        let user = client.user.clone();
        let denied = self
            .d
            .core
            .acl
            .check(&user, &self.d.commands.table, cmd, &argv)
            .is_some();
        lua.set_top(0);
        lua.push_bool(!denied);
        Ok(1)
    }
}

/// Raises a plain string error (as Lua's own library functions do).
fn raise_string(lua: &mut Lua, text: &str) -> Result<i32, Raise> {
    Err(lua.error_here(text.as_bytes()))
}

/// The command `redis.call`'s arguments name: strings, or numbers (written as integers when
/// whole, else as Redis prints doubles).
fn script_argv(lua: &Lua, args: &mut ArgvBuf) -> Result<(), String> {
    args.clear();
    let n = lua.top();
    if n == 0 {
        return Err("ERR Please specify at least one argument for this redis lib call".into());
    }
    for i in 1..=n {
        match lua.type_of(i) {
            // Copied straight from the Lua string into the argument buffer.
            Type::String => args.push(lua.to_bytes(i).unwrap_or_default()),
            Type::Number => args.push(&convert::number_text(lua.to_number(i).unwrap_or(0.0))),
            _ => {
                return Err(
                    "ERR Lua redis lib command arguments must be strings or integers".into(),
                )
            }
        }
    }
    Ok(())
}

/// `redis.sha1hex(s)`.
fn sha1hex(lua: &mut Lua) -> Result<i32, Raise> {
    if lua.top() != 1 {
        return raise(lua, "ERR wrong number of arguments");
    }
    let data = lua.to_vec(1).unwrap_or_default();
    lua.push_bytes(&sha1::hex(&data));
    Ok(1)
}

/// `redis.log(level, message...)`, as Redis 7.0: the level is a number (or a numeric string)
/// truncated to an integer, 0 to 3; at or above `loglevel`, the arguments that are strings or
/// numbers are joined (each but the message's first argument after a space; other types are
/// skipped) and written to the shell's log.
fn log(lua: &mut Lua, loglevel: &str, sink: Option<fn(u8, &[u8])>) -> Result<i32, Raise> {
    if lua.top() < 2 {
        return raise(lua, "ERR redis.log() requires two arguments or more.");
    }
    let level = match lua.to_number(1) {
        Some(l) if !l.is_nan() && (0..=3).contains(&(l as i64)) => l as u8,
        Some(_) => return raise(lua, "ERR Invalid debug level."),
        None => return raise(lua, "ERR First argument must be a number (log level)."),
    };
    let verbosity = match loglevel {
        "debug" => 0,
        "verbose" => 1,
        "notice" => 2,
        "warning" => 3,
        _ => 4,
    };
    let Some(sink) = sink.filter(|_| level >= verbosity) else {
        return Ok(0);
    };
    let mut message = alloc::vec::Vec::new();
    for i in 2..=lua.top() {
        if matches!(lua.type_of(i), Type::String | Type::Number) {
            if i > 2 {
                message.push(b' ');
            }
            message.extend_from_slice(lua.to_bytes(i).unwrap_or_default());
        }
    }
    sink(level, &message);
    Ok(0)
}
