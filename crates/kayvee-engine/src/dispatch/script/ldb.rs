//! The Lua debugger (LDB: `SCRIPT DEBUG YES|SYNC`, then EVAL), as Redis 7.0 runs it for
//! `redis-cli --ldb`. The script runs with a line hook; at each stop (the first line, a step,
//! a breakpoint, `redis.breakpoint()`, a script running past the time limit) the debugger's
//! log lines go to the client as an array of status replies, and the client's next command
//! is read and run, until one lets the script go on (`step`, `continue`) or stops it
//! (`abort`). The session's I/O is the shell's ([`ScriptWait::debug_send`] and
//! [`ScriptWait::debug_receive`], which wait on the running connection as Redis's synchronous
//! session blocks on its socket); everything said here is decided here. After the script,
//! `<endsession>`, the EVAL's reply, and the connection closes (the dispatcher's
//! `Outcome::Close`).
//!
//! `YES` in Redis forks and debugs in the child, so the data is left as it was; here the
//! databases are snapshotted (one pointer copy each) and put back after the session, and
//! nothing the script does is propagated (see docs/decisions.md).

use super::Run;
use crate::argv::ArgvBuf;
use crate::client::LuaDebug;
use crate::cmd::double::format_g17;
use crate::db::Db;
use crate::reply::{Reply, ReplySink};
use crate::script;
use crate::script_wait::DebugInput;
use crate::time::Now;
use alloc::string::String;
use alloc::vec::Vec;
use kayvee_lua::{HookEvent, Lua, Raise, Type};

/// Most breakpoints at once.
const BREAKPOINTS_MAX: usize = 64;
/// Log entries (replies, values) longer than this are cut, until `maxlen` says otherwise.
const MAXLEN_DEFAULT: usize = 256;
/// Nesting of tables shown in a value.
const DEPTH_MAX: usize = 10;

/// `help`'s text.
const HELP: &[&str] = &[
    "Redis Lua debugger help:",
    "[h]elp               Show this help.",
    "[s]tep               Run current line and stop again.",
    "[n]ext               Alias for step.",
    "[c]ontinue           Run till next breakpoint.",
    "[l]ist               List source code around current line.",
    "[l]ist [line]        List source code around [line].",
    "                     line = 0 means: current position.",
    "[l]ist [line] [ctx]  In this form [ctx] specifies how many lines",
    "                     to show before/after [line].",
    "[w]hole              List all source code. Alias for 'list 1 1000000'.",
    "[p]rint              Show all the local variables.",
    "[p]rint <var>        Show the value of the specified variable.",
    "                     Can also show global vars KEYS and ARGV.",
    "[b]reak              Show all breakpoints.",
    "[b]reak <line>       Add a breakpoint to the specified line.",
    "[b]reak -<line>      Remove breakpoint from the specified line.",
    "[b]reak 0            Remove all breakpoints.",
    "[t]race              Show a backtrace.",
    "[e]val <code>        Execute some Lua code (in a different callframe).",
    "[r]edis <cmd>        Execute a Redis command.",
    "[m]axlen [len]       Trim logged Redis replies and Lua var dumps to len.",
    "                     Specifying zero as <len> means unlimited.",
    "[a]bort              Stop the execution of the script. In sync",
    "                     mode dataset changes will be retained.",
    "",
    "Debugger functions you can call from Lua scripts:",
    "redis.debug()        Produce logs in the debugger console.",
    "redis.breakpoint()   Stop execution like if there was a breakpoint in the",
    "                     next line of code.",
];

/// A debugging session's state.
pub(super) struct Ldb {
    /// YES: the data is put back afterwards (the databases as they were).
    rollback: Option<Vec<Db>>,
    /// The script's source, by line.
    lines: Vec<Vec<u8>>,
    /// The line the script is at.
    current: i32,
    /// Stop at the next line.
    pub step: bool,
    /// `redis.breakpoint()` was called: stop at the next line.
    luabp: bool,
    breakpoints: Vec<i32>,
    /// Log entries longer than this are cut (0: never).
    maxlen: usize,
    /// The hint about `maxlen` was given (or the client used `maxlen`).
    maxlen_hint_sent: bool,
    /// What goes to the client at the next stop.
    logs: Vec<Vec<u8>>,
    /// The client is gone: the script runs on without stopping.
    gone: bool,
    /// The time-limit clock: since the start or the last stop.
    since: Now,
}

/// Why the REPL returned without letting the script go on normally.
enum Stop {
    /// The client is gone.
    Gone,
    /// An error to raise (pushed).
    Raise,
}

impl Ldb {
    /// A session for script `body` in `mode` (not `Off`); `dbs` are the databases now.
    pub(super) fn new(mode: LuaDebug, body: &[u8], dbs: &[Db], now: Now) -> Ldb {
        let mut body = body;
        while let [rest @ .., b'\n' | b'\r'] = body {
            body = rest;
        }
        Ldb {
            rollback: (mode == LuaDebug::Rollback).then(|| dbs.to_vec()),
            lines: body.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect(),
            current: -1,
            step: true,
            luabp: false,
            breakpoints: Vec::new(),
            maxlen: MAXLEN_DEFAULT,
            maxlen_hint_sent: false,
            logs: Vec::new(),
            gone: false,
            since: now,
        }
    }

    /// YES: nothing the script does is propagated.
    pub(super) fn rolls_back(&self) -> bool {
        self.rollback.is_some()
    }

    /// The databases to put back (YES).
    pub(super) fn take_rollback(&mut self) -> Option<Vec<Db>> {
        self.rollback.take()
    }

    pub(super) fn log(&mut self, line: impl Into<Vec<u8>>) {
        self.logs.push(line.into());
    }

    /// Logs `entry` cut at `maxlen` (with a hint the first time).
    fn log_max(&mut self, mut entry: Vec<u8>) {
        let mut trimmed = false;
        if self.maxlen != 0 && entry.len() > self.maxlen {
            entry.truncate(self.maxlen);
            entry.extend_from_slice(b" ...");
            trimmed = true;
        }
        self.log(entry);
        if trimmed && !self.maxlen_hint_sent {
            self.maxlen_hint_sent = true;
            self.log("<hint> The above reply was trimmed. Use 'maxlen 0' to disable trimming.");
        }
    }

    /// Logs source line `n` with its marks (current line, breakpoint).
    fn log_source_line(&mut self, n: i32) {
        let text: &[u8] = match usize::try_from(n - 1).ok().and_then(|i| self.lines.get(i)) {
            Some(line) => line,
            None => b"<out of range source code line>",
        };
        let prefix = match (n == self.current, self.breakpoints.contains(&n)) {
            (true, true) => "->#",
            (true, false) => "-> ",
            (false, true) => "  #",
            (false, false) => "   ",
        };
        let mut entry = alloc::format!("{prefix}{n:<3} ").into_bytes();
        entry.extend_from_slice(text);
        self.log(entry);
    }

    /// The lines within `context` of `around` (every line when `around` is 0).
    fn list(&mut self, around: i32, context: i32) {
        for n in 1..=self.lines.len() as i32 {
            if around != 0 && (around - n).abs() > context {
                continue;
            }
            self.log_source_line(n);
        }
    }

    /// `break [line|-line|0 ...]`.
    fn breakpoint(&mut self, args: &[Vec<u8>]) {
        if args.is_empty() {
            if self.breakpoints.is_empty() {
                self.log("No breakpoints set. Use 'b <line>' to add one.");
            } else {
                self.log(alloc::format!(
                    "{} breakpoints set:",
                    self.breakpoints.len()
                ));
                for n in self.breakpoints.clone() {
                    self.log_source_line(n);
                }
            }
            return;
        }
        for arg in args {
            let Some(n) = crate::util::parse_i64(arg) else {
                let mut entry = b"Invalid argument:'".to_vec();
                entry.extend_from_slice(arg);
                entry.push(b'\'');
                self.log(entry);
                continue;
            };
            if n == 0 {
                self.breakpoints.clear();
                self.log("All breakpoints removed.");
            } else if n > 0 {
                if self.breakpoints.len() == BREAKPOINTS_MAX {
                    self.log("Too many breakpoints set.");
                } else if n <= self.lines.len() as i64 && !self.breakpoints.contains(&(n as i32)) {
                    self.breakpoints.push(n as i32);
                    self.list(n as i32, 1);
                } else {
                    self.log("Wrong line number.");
                }
            } else {
                let line = n.unsigned_abs();
                match self.breakpoints.iter().position(|&b| b as u64 == line) {
                    Some(i) => {
                        self.breakpoints.remove(i);
                        self.log("Breakpoint removed.");
                    }
                    None => self.log("No breakpoint in the specified line."),
                }
            }
        }
    }

    /// `maxlen [len]`.
    fn maxlen(&mut self, args: &[Vec<u8>]) {
        if let Some(arg) = args.first() {
            let mut len = atoi(arg);
            self.maxlen_hint_sent = true;
            if len != 0 && len <= 60 {
                len = 60;
            }
            self.maxlen = len.max(0) as usize;
        }
        match self.maxlen {
            0 => self.log("<value> replies are unlimited."),
            n => self.log(alloc::format!(
                "<value> replies are truncated at {n} bytes."
            )),
        }
    }
}

/// C's `atoi`: leading blanks, a sign, digits; 0 when none.
fn atoi(s: &[u8]) -> i64 {
    let s = s.trim_ascii_start();
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut n: i64 = 0;
    for &d in digits.iter().take_while(|d| d.is_ascii_digit()) {
        n = n.wrapping_mul(10).wrapping_add(i64::from(d - b'0'));
    }
    if neg {
        n.wrapping_neg()
    } else {
        n
    }
}

/// Appends `bytes` quoted as Redis's `sdscatrepr` writes them.
pub(super) fn repr(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'"');
    for &b in bytes {
        match b {
            b'\\' | b'"' => out.extend_from_slice(&[b'\\', b]),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            7 => out.extend_from_slice(b"\\a"),
            8 => out.extend_from_slice(b"\\b"),
            b if b.is_ascii_graphic() || b == b' ' => out.push(b),
            b => out.extend_from_slice(alloc::format!("\\x{b:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

/// `%g` as C's printf writes a double (6 significant digits).
fn format_g(x: f64) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.into();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let sci = alloc::format!("{x:.5e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let strip = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').into()
        } else {
            s.into()
        }
    };
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        alloc::format!("{}e{sign}{:02}", strip(mantissa), exp.abs())
    } else {
        strip(&alloc::format!("{x:.*}", (5 - exp) as usize))
    }
}

/// Appends the value at `idx` as the debugger shows Lua values.
pub(super) fn cat_value(out: &mut Vec<u8>, lua: &mut Lua, idx: i32, depth: usize) {
    let idx = lua.absolute(idx);
    match lua.type_of(idx) {
        Type::String => repr(out, lua.to_bytes(idx).unwrap_or_default()),
        Type::Boolean => out.extend_from_slice(if lua.to_bool(idx) { b"true" } else { b"false" }),
        Type::Number => {
            out.extend_from_slice(format_g(lua.to_number(idx).unwrap_or(0.0)).as_bytes())
        }
        Type::Nil => out.extend_from_slice(b"nil"),
        Type::Table if depth >= DEPTH_MAX => {
            out.extend_from_slice(b"<max recursion level reached! Nested table?>")
        }
        Type::Table => {
            lua.check_stack(4);
            let (mut as_array, mut as_map) = (Vec::new(), Vec::new());
            let mut array = true;
            let mut expected = 1.0;
            lua.push_nil();
            while lua.next(idx) {
                if array && (lua.type_of(-2) != Type::Number || lua.to_number(-2) != Some(expected))
                {
                    array = false;
                }
                cat_value(&mut as_array, lua, -1, depth + 1);
                as_array.extend_from_slice(b"; ");
                as_map.push(b'[');
                cat_value(&mut as_map, lua, -2, depth + 1);
                as_map.extend_from_slice(b"]=");
                cat_value(&mut as_map, lua, -1, depth + 1);
                as_map.extend_from_slice(b"; ");
                lua.pop(1);
                expected += 1.0;
            }
            let body = if array { &mut as_array } else { &mut as_map };
            body.truncate(body.len().saturating_sub(2));
            out.push(b'{');
            out.extend_from_slice(body);
            out.push(b'}');
        }
        t => {
            let name = match t {
                Type::Function => "function",
                Type::Userdata => "userdata",
                Type::Thread => "thread",
                Type::LightUserdata => "light-userdata",
                _ => "unknown",
            };
            out.extend_from_slice(
                alloc::format!("\"{name}@{:p}\"", lua.to_pointer(idx)).as_bytes(),
            );
        }
    }
}

/// A reply as the debugger shows it (`<reply> ...`), in the protocol the script uses.
pub(super) fn cat_reply(out: &mut Vec<u8>, reply: &Reply, resp3: bool) {
    let list = |out: &mut Vec<u8>, open: &[u8], items: &[Reply], close: u8| {
        out.extend_from_slice(open);
        for (i, r) in items.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            cat_reply(out, r, resp3);
        }
        out.push(close);
    };
    match reply {
        Reply::Simple(s) => repr(out, alloc::format!("+{s}").as_bytes()),
        Reply::Error(s) => repr(out, alloc::format!("-{s}").as_bytes()),
        Reply::Int(n) => out.extend_from_slice(alloc::format!("{n}").as_bytes()),
        Reply::Bulk(b) => repr(out, b),
        Reply::Null | Reply::NullArray if resp3 => out.extend_from_slice(b"(null)"),
        Reply::Null | Reply::NullArray => out.extend_from_slice(b"NULL"),
        Reply::Array(items) | Reply::Push(items) => list(out, b"[", items, b']'),
        Reply::Set(items) if resp3 => list(out, b"~(", items, b')'),
        Reply::Set(items) => list(out, b"[", items, b']'),
        Reply::Map(pairs) if resp3 => {
            out.push(b'{');
            for (i, (k, v)) in pairs.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                cat_reply(out, k, resp3);
                out.extend_from_slice(b" => ");
                cat_reply(out, v, resp3);
            }
            out.push(b'}');
        }
        Reply::Map(pairs) => {
            out.push(b'[');
            for (i, (k, v)) in pairs.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                cat_reply(out, k, resp3);
                out.push(b',');
                cat_reply(out, v, resp3);
            }
            out.push(b']');
        }
        Reply::Double(d) => {
            let mut text = Vec::new();
            format_g17(*d, &mut text);
            if resp3 {
                out.extend_from_slice(b"(double) ");
                out.extend_from_slice(&text);
            } else {
                repr(out, &text);
            }
        }
        Reply::Boolean(b) if resp3 => out.extend_from_slice(if *b { b"#true" } else { b"#false" }),
        Reply::Boolean(b) => out.extend_from_slice(if *b { b"1" } else { b"0" }),
        Reply::Verbatim(_, text) => repr(out, text),
        Reply::BigNumber(digits) if resp3 => out.extend_from_slice(digits.as_bytes()),
        Reply::BigNumber(digits) => repr(out, digits.as_bytes()),
    }
}

impl Run<'_, '_> {
    /// The line hook of a debugging session.
    pub(super) fn ldb_hook(&mut self, lua: &mut Lua) -> Result<i32, Raise> {
        let (line, chunk, count) = match lua.hook_event() {
            HookEvent::Line { line, chunk } => (line, chunk, false),
            HookEvent::Count { line, chunk } => (line, chunk, true),
        };
        let Some(ldb) = self.ldb.as_mut() else {
            return Ok(0);
        };
        ldb.current = line;
        if chunk != b"user_script" {
            return Ok(0);
        }
        let bp = ldb.luabp || ldb.breakpoints.contains(&line);
        let mut timeout = false;
        if count && !ldb.step && !bp {
            let limit_ms = match self.d.core.config.int_param("busy-reply-threshold") {
                ms if ms > 0 => ms as u64,
                _ => 5000,
            };
            let now = self.d.wait.as_mut().map_or(self.now, |w| w.now());
            let ldb = self.ldb.as_mut().expect("checked");
            if now.unix_us.saturating_sub(ldb.since.unix_us) < limit_ms * 1000 {
                return Ok(0);
            }
            timeout = true;
            ldb.step = true;
        }
        let ldb = self.ldb.as_mut().expect("checked");
        if !ldb.step && !bp {
            return Ok(0);
        }
        let reason = match (bp, ldb.luabp, timeout) {
            (true, true, _) => "redis.breakpoint() called",
            (true, false, _) => "break point",
            (false, _, true) => "timeout reached, infinite loop?",
            _ => "step over",
        };
        ldb.step = false;
        ldb.luabp = false;
        ldb.log(alloc::format!(
            "* Stopped at {line}, stop reason = {reason}"
        ));
        ldb.log_source_line(line);
        match self.ldb_repl(lua) {
            Ok(()) => {}
            Err(Stop::Raise) => return Err(Raise),
            Err(Stop::Gone) if timeout => {
                return super::raise(
                    lua,
                    "ERR timeout during Lua debugging with client closing connection",
                )
            }
            Err(Stop::Gone) => {}
        }
        let now = self.d.wait.as_mut().map_or(self.now, |w| w.now());
        if let Some(ldb) = self.ldb.as_mut() {
            ldb.since = now;
        }
        Ok(0)
    }

    /// Sends the pending log lines to the client (an array of status replies).
    pub(super) fn ldb_send(&mut self) {
        let Some(ldb) = self.ldb.as_mut() else {
            return;
        };
        let logs = core::mem::take(&mut ldb.logs);
        if ldb.gone || logs.is_empty() {
            return;
        }
        let Some(wait) = self.d.wait.as_mut() else {
            return;
        };
        let sent = wait.debug_send(&mut |out: &mut dyn ReplySink| {
            out.array(logs.len());
            for line in &logs {
                out.simple(&String::from_utf8_lossy(line));
            }
        });
        if !sent {
            ldb.gone = true;
        }
    }

    /// Reads and runs the client's debugger commands until one lets the script go on.
    fn ldb_repl(&mut self, lua: &mut Lua) -> Result<(), Stop> {
        loop {
            self.ldb_send();
            let ldb = self.ldb.as_mut().expect("debugging");
            let input = match ldb.gone {
                true => DebugInput::Gone,
                false => match self.d.wait.as_mut() {
                    Some(wait) => wait.debug_receive(),
                    None => DebugInput::Gone,
                },
            };
            let args: Vec<Vec<u8>> = match input {
                DebugInput::Command(args) => args.argv().iter().map(<[u8]>::to_vec).collect(),
                DebugInput::Gone => {
                    let ldb = self.ldb.as_mut().expect("debugging");
                    ldb.gone = true;
                    ldb.step = false;
                    ldb.breakpoints.clear();
                    return Err(Stop::Gone);
                }
                DebugInput::Error(text) => {
                    let _ = super::raise(lua, &text);
                    return Err(Stop::Raise);
                }
            };
            let Some(name) = args.first().map(|a| a.to_ascii_lowercase()) else {
                continue;
            };
            let rest = &args[1..];
            let ldb = self.ldb.as_mut().expect("debugging");
            match name.as_slice() {
                b"h" | b"help" => {
                    for line in HELP {
                        ldb.log(*line);
                    }
                }
                b"s" | b"step" | b"n" | b"next" => {
                    ldb.step = true;
                    return Ok(());
                }
                b"c" | b"continue" => return Ok(()),
                b"t" | b"trace" => trace(ldb, lua),
                b"m" | b"maxlen" => ldb.maxlen(rest),
                b"b" | b"break" => ldb.breakpoint(rest),
                b"e" | b"eval" => self.ldb_eval(lua, rest),
                b"a" | b"abort" => {
                    let _ = super::raise(lua, "ERR script aborted for user request");
                    return Err(Stop::Raise);
                }
                b"r" | b"redis" if !rest.is_empty() => self.ldb_redis(rest),
                b"p" | b"print" => match rest {
                    [var] => print_var(ldb, lua, var),
                    _ => print_all(ldb, lua),
                },
                b"l" | b"list" => {
                    let mut around = ldb.current;
                    let mut context = 5;
                    if let Some(n) = rest.first().map(|a| atoi(a)).filter(|&n| n > 0) {
                        around = n as i32;
                    }
                    if let Some(c) = rest.get(1) {
                        context = atoi(c) as i32;
                    }
                    ldb.list(around, context);
                }
                b"w" | b"whole" => ldb.list(1, 1_000_000),
                _ => ldb.log(
                    "<error> Unknown Redis Lua debugger command or wrong number of arguments.",
                ),
            }
        }
    }

    /// `eval <code>`: runs `return <code>` (or `<code>` when that does not compile) in the
    /// scripts' environment and logs its value or its error.
    fn ldb_eval(&mut self, lua: &mut Lua, args: &[Vec<u8>]) {
        let code = args.join(&b' ');
        let with_return = [&b"return "[..], &code[..]].concat();
        let loaded = script::load_in_env(lua, &with_return, c"@ldb_eval")
            .or_else(|_| script::load_in_env(lua, &code, c"@ldb_eval"));
        let ldb = self.ldb.as_mut().expect("debugging");
        if let Err(msg) = loaded {
            let mut entry = b"<error> ".to_vec();
            entry.extend_from_slice(&msg);
            ldb.log(entry);
            return;
        }
        let result = lua.call(self, 0, 1);
        let ldb = self.ldb.as_mut().expect("debugging");
        match result {
            Ok(()) => {
                let mut entry = b"<retval> ".to_vec();
                cat_value(&mut entry, lua, -1, 0);
                ldb.log_max(entry);
            }
            Err(_) => {
                let mut entry = b"<error> ".to_vec();
                if lua.type_of(-1) == Type::Table {
                    lua.raw_get_field(-1, b"message");
                    lua.remove(-2);
                }
                if lua.type_of(-1) == Type::Table {
                    lua.raw_get_field(-1, b"err");
                    lua.remove(-2);
                }
                entry.extend_from_slice(lua.to_bytes(-1).unwrap_or_default());
                ldb.log(entry);
            }
        }
        lua.pop(1);
    }

    /// `redis <command...>`: runs it as `redis.call` would, logging the command and its reply.
    fn ldb_redis(&mut self, args: &[Vec<u8>]) {
        let step = core::mem::replace(&mut self.ldb.as_mut().expect("debugging").step, true);
        let mut argv = ArgvBuf::new();
        for a in args {
            argv.push(a);
        }
        let _ = self.ldb_run(&argv);
        self.ldb.as_mut().expect("debugging").step = step;
    }

    /// Runs a script's command, logging it and its reply while stepping.
    pub(super) fn ldb_run(&mut self, args: &ArgvBuf) -> Result<Reply, String> {
        let logging = self.ldb.as_ref().is_some_and(|l| l.step);
        if logging {
            let argv = args.argv();
            let mut entry = b"<redis>".to_vec();
            for (i, a) in argv.iter().enumerate() {
                if i == 10 {
                    entry.extend_from_slice(
                        alloc::format!(" ... ({} more)", argv.len() - i - 1).as_bytes(),
                    );
                    break;
                }
                entry.push(b' ');
                entry.extend_from_slice(a);
            }
            self.ldb.as_mut().expect("debugging").log(entry);
        }
        let result = self.run_command(args);
        if logging {
            let resp3 = self.resp3;
            let ldb = self.ldb.as_mut().expect("debugging");
            match &result {
                Ok(reply) => {
                    if let Reply::Error(text) = reply {
                        ldb.log(alloc::format!("<error> -{text}"));
                    }
                    let mut entry = b"<reply> ".to_vec();
                    cat_reply(&mut entry, reply, resp3);
                    ldb.log_max(entry);
                }
                // Refused before running: the message without its error code.
                Err(text) => {
                    let text = text.strip_prefix("ERR ").unwrap_or(text);
                    ldb.log(alloc::format!("<error> {text}"));
                }
            }
        }
        result
    }

    /// `redis.breakpoint()`: true (a stop at the next line) in a debugging session.
    pub(super) fn ldb_breakpoint(&mut self, lua: &mut Lua) -> Result<i32, Raise> {
        let active = match self.ldb.as_mut() {
            Some(ldb) if !ldb.gone => {
                ldb.luabp = true;
                true
            }
            _ => false,
        };
        lua.push_bool(active);
        Ok(1)
    }

    /// `redis.debug(...)`: logs its arguments in a debugging session.
    pub(super) fn ldb_debug(&mut self, lua: &mut Lua) -> Result<i32, Raise> {
        let Some(ldb) = self.ldb.as_mut() else {
            return Ok(0);
        };
        let mut entry = alloc::format!("<debug> line {}: ", ldb.current).into_bytes();
        let n = lua.top();
        for i in 1..=n {
            cat_value(&mut entry, lua, i, 0);
            if i != n {
                entry.extend_from_slice(b", ");
            }
        }
        ldb.log_max(entry);
        Ok(0)
    }

    /// The end of the session: `<endsession>`.
    pub(super) fn ldb_end(&mut self) {
        if let Some(ldb) = self.ldb.as_mut() {
            ldb.log("<endsession>");
        }
        self.ldb_send();
    }
}

/// `print`: the running function's locals.
fn print_all(ldb: &mut Ldb, lua: &mut Lua) {
    let mut shown = 0;
    let mut n = 1;
    while let Some(name) = lua.push_local(0, n) {
        n += 1;
        if !name.windows(12).any(|w| w == b"(*temporary)") {
            let mut entry = b"<value> ".to_vec();
            entry.extend_from_slice(&name);
            entry.extend_from_slice(b" = ");
            cat_value(&mut entry, lua, -1, 0);
            ldb.log_max(entry);
            shown += 1;
        }
        lua.pop(1);
    }
    if shown == 0 {
        ldb.log("No local variables in the current context.");
    }
}

/// `print <var>`: a local of any function on the stack, or the global KEYS or ARGV.
fn print_var(ldb: &mut Ldb, lua: &mut Lua, var: &[u8]) {
    let mut level = 0;
    while lua.frame(level).is_some() {
        let mut n = 1;
        while let Some(name) = lua.push_local(level, n) {
            n += 1;
            if name == var {
                let mut entry = b"<value> ".to_vec();
                cat_value(&mut entry, lua, -1, 0);
                lua.pop(1);
                ldb.log_max(entry);
                return;
            }
            lua.pop(1);
        }
        level += 1;
    }
    if var == b"ARGV" || var == b"KEYS" {
        script::push_global(lua, var);
        let mut entry = b"<value> ".to_vec();
        cat_value(&mut entry, lua, -1, 0);
        lua.pop(1);
        ldb.log_max(entry);
    } else {
        ldb.log("No such variable.");
    }
}

/// `trace`: the functions on the stack that are the script's.
fn trace(ldb: &mut Ldb, lua: &mut Lua) {
    let mut level = 0;
    while let Some(frame) = lua.frame(level) {
        if frame.chunk.windows(11).any(|w| w == b"user_script") {
            let name = frame.name.as_deref().unwrap_or(b"top level");
            let mut entry = if level == 0 {
                b"In ".to_vec()
            } else {
                b"From ".to_vec()
            };
            entry.extend_from_slice(name);
            entry.push(b':');
            ldb.log(entry);
            ldb.log_source_line(frame.line);
        }
        level += 1;
    }
    if level == 1 {
        ldb.log("<error> Can't retrieve Lua stack.");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g_format_as_printf() {
        for (x, s) in [
            (1.0, "1"),
            (0.5, "0.5"),
            (123456.0, "123456"),
            (1234567.0, "1.23457e+06"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.23456789, "1.23457"),
            (-2.5, "-2.5"),
            (1e100, "1e+100"),
        ] {
            assert_eq!(format_g(x), s, "{x}");
        }
    }

    #[test]
    fn repr_escapes() {
        let mut out = Vec::new();
        repr(&mut out, b"a\"b\n\x01");
        assert_eq!(out, b"\"a\\\"b\\n\\x01\"");
    }
}
