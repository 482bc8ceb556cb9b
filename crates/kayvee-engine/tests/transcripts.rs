//! Transcript tests at the engine boundary: every `tests/transcripts/*.txt` file is a script of
//! commands and the replies they must produce, run against a fresh engine behind the connection
//! driver every shell uses (`kayvee-session`): each command goes in as RESP bytes, and each
//! client's replies are parsed back from the bytes it got, so delivery (wakeups, messages) and
//! closing follow the shells' order.
//!
//! Format (one directive per line):
//! - `> ARG ARG ...` runs a command. Arguments split on spaces; `"..."` quotes an argument
//!   (with `\"`, `\\`, `\n`, `\r`, `\t`, `\xHH` escapes).
//! - `< LINE` is one line of the expected reply, rendered in pre-order: `+OK`, `-ERR ...`,
//!   `:5`, `$bulk` (non-printable bytes as `\xHH`), `(nil)`, `(nil-array)`, `*N` / `%N` /
//!   `~N` / `>N` followed by their elements, `,1.5` doubles, `#t`/`#f`, `=txt:...`, `(123` big
//!   numbers. Every `>` must be followed by exactly the lines its reply renders to.
//!   Replies render as the wire shows them in the protocol the reply was encoded for: in RESP2
//!   a map is a flat `*2N` array, a set or push an array, a verbatim string a bulk `$text`,
//!   a boolean `:1`/`:0`, a big number a bulk string; in RESP3 every null is `(nil)`.
//! - `<* PATTERN` matches one reply line by glob (`*`, `?`), for values that vary (ids, times).
//! - `@time MS` sets the clock to unix ms; `@advance MS` moves it on (start: 1_700_000_000_000).
//! - `@config LINE` applies a config-file line to the engine's configuration (for immutable
//!   parameters such as `enable-debug-command`).
//! - `@client NAME` switches to (and creates on first use) another client connection.
//! - `@cron` runs the engine's background cycle (active expiry, blocked clients' timeouts).
//! - `@disconnect NAME` closes client NAME's connection (what the shell does after QUIT).
//! - `@expire` runs only the blocked clients' timeouts (`Engine::expire_blocked`).
//! - `@woken NAME` checks the replies a blocked client NAME got when it was served or timed
//!   out, and the pub/sub messages it received (the `<` lines that follow); every such reply must be checked before the next
//!   command's lines or the end of the file. A command that blocks shows no `<` line.
//! - `@set KEY VALUE` stores a string in the current client's database through the `Db` API
//!   (what `SET KEY VALUE` does on the real server, whose `+OK` is not shown), for groups
//!   tested before the string commands exist.
//! - `#` starts a comment; blank lines are ignored.
//!
//! Files named `scripting*.txt` run only with the engine's `scripting` feature.

use kayvee_engine::{util::glob_match, ConnInfo, Engine, Handle, Now, Reply, Transport, Value};
use kayvee_session::{Clock, Driver, Flushed};
use std::cell::Cell;
use std::collections::HashMap;
use std::fmt::Write;

/// The runner's clock: moved by `@time` and `@advance` (and DEBUG SLEEP), still otherwise, so
/// every command takes 0 us.
struct StillClock(Cell<u64>);

impl Clock for StillClock {
    fn now(&self) -> Now {
        Now::from_ms(self.0.get())
    }
    fn sleep_us(&self, us: u64) {
        self.0.set(self.0.get() + us / 1000);
    }
}

/// The engine behind the connection driver every shell uses (kayvee-session), fed bytes as a
/// socket would; replies are parsed back from the bytes each connection got.
struct Runner {
    driver: Driver,
    clock: StillClock,
    clients: HashMap<String, Handle>,
    current: Handle,
    /// Replies woken clients got, not yet checked by `@woken`.
    woken: HashMap<Handle, Vec<String>>,
}

impl Runner {
    fn new() -> Self {
        let now_ms = 1_700_000_000_000;
        let engine = Engine::new(Default::default(), 42, Now::from_ms(now_ms));
        let mut driver = Driver::new(engine);
        let current = driver.connect(conn(1), Now::from_ms(now_ms)).unwrap();
        let mut clients = HashMap::new();
        clients.insert("default".to_string(), current);
        Runner {
            driver,
            clock: StillClock(Cell::new(now_ms)),
            clients,
            current,
            woken: HashMap::new(),
        }
    }

    fn engine(&mut self) -> &mut Engine {
        self.driver.engine_mut()
    }

    fn now_ms(&self) -> u64 {
        self.clock.0.get()
    }

    /// Sends one command as a multibulk request; returns the reply lines the current client
    /// got, and keeps what the others got for `@woken`.
    fn run(&mut self, args: &[Vec<u8>]) -> Vec<String> {
        let mut bytes = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            bytes.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            bytes.extend_from_slice(a);
            bytes.extend_from_slice(b"\r\n");
        }
        let h = self.current;
        if self.driver.wants_input(h) {
            self.driver.receive(h, &bytes, &self.clock);
        }
        let mut mine = self.collect_output();
        mine.remove(&h).unwrap_or_default()
    }

    /// Takes every connection's output, rendered; the current client's is returned, the
    /// others' go to `woken`.
    fn collect_output(&mut self) -> HashMap<Handle, Vec<String>> {
        let mut dirty = Vec::new();
        self.driver.take_dirty(&mut dirty);
        let mut got = HashMap::new();
        for h in dirty {
            let mut bytes = Vec::new();
            let flushed = self.driver.flush(h, &self.clock, |b: &[u8]| {
                bytes.extend_from_slice(b);
                Ok::<usize, ()>(b.len())
            });
            let lines = render_bytes(&bytes);
            if h == self.current {
                got.insert(h, lines);
            } else {
                self.woken.entry(h).or_default().extend(lines);
            }
            if flushed == Ok(Flushed::Close) {
                // QUIT, CLIENT KILL: the shell closes the socket; the name stays for the file.
                self.driver.close(h);
            }
        }
        got
    }

    /// Moves the output every client got (wakeups, messages) into `woken`.
    fn collect_wakeups(&mut self) {
        let current = self.collect_output();
        for (h, lines) in current {
            self.woken.entry(h).or_default().extend(lines);
        }
    }

    /// The unchecked wakeup replies, as an error text.
    fn unchecked_wakeups(&self) -> Result<(), String> {
        match self.woken.iter().find(|(_, l)| !l.is_empty()) {
            Some((h, l)) => Err(format!("unchecked wakeup replies of {h:?}: {l:?}")),
            None => Ok(()),
        }
    }

    fn set(&mut self, args: &[Vec<u8>]) -> Result<(), String> {
        let [key, value] = args else {
            return Err(format!(
                "@set wants KEY VALUE, got {} arguments",
                args.len()
            ));
        };
        let current = self.current;
        let now_ms = self.now_ms();
        let engine = self.engine();
        let db = engine.clients.get(current).map_or(0, |c| c.db);
        let value = Value::Str(kayvee_pds::SmallBytes::from_slice(value));
        engine.core.dbs[db].set(key, value, now_ms, false);
        Ok(())
    }

    fn switch(&mut self, name: &str) {
        let n = self.clients.len() as i64 + 1;
        let now = Now::from_ms(self.now_ms());
        let driver = &mut self.driver;
        self.current = *self
            .clients
            .entry(name.to_string())
            .or_insert_with(|| driver.connect(conn(n), now).unwrap());
    }
}

fn conn(n: i64) -> ConnInfo {
    ConnInfo {
        transport: Transport::Tcp {
            addr: format!("127.0.0.1:{}", 40000 + n),
            laddr: "127.0.0.1:6379".into(),
        },
        fd: 7 + n,
    }
}

/// Renders the replies in `bytes` as the wire shows them.
fn render_bytes(mut bytes: &[u8]) -> Vec<String> {
    let mut lines = Vec::new();
    while !bytes.is_empty() {
        let Ok(Some((reply, used))) = kayvee_resp::parse_reply(bytes) else {
            lines.push(format!("(unparsable: {})", escape(bytes)));
            break;
        };
        render(&reply, &mut lines);
        bytes = &bytes[used..];
    }
    lines
}

fn escape(b: &[u8]) -> String {
    let mut s = String::new();
    for &c in b {
        if (0x20..0x7f).contains(&c) && c != b'\\' {
            s.push(c as char);
        } else if c == b'\\' {
            s.push_str("\\\\");
        } else {
            write!(s, "\\x{c:02x}").unwrap();
        }
    }
    s
}

/// A double as the codec sends it (`%.17g`, as Redis 7.0).
fn g17(d: f64) -> String {
    let mut b = Vec::new();
    kayvee_engine::cmd::double::format_g17(d, &mut b);
    String::from_utf8(b).expect("ascii")
}

fn render(r: &Reply, out: &mut Vec<String>) {
    match r {
        Reply::Simple(s) => out.push(format!("+{s}")),
        Reply::Error(s) => out.push(format!("-{s}")),
        Reply::Int(v) => out.push(format!(":{v}")),
        Reply::Bulk(b) => out.push(format!("${}", escape(b))),
        Reply::Null => out.push("(nil)".into()),
        Reply::NullArray => out.push("(nil-array)".into()),
        Reply::Array(items) | Reply::Set(items) | Reply::Push(items) => {
            let c = match r {
                Reply::Array(_) => '*',
                Reply::Set(_) => '~',
                _ => '>',
            };
            out.push(format!("{c}{}", items.len()));
            items.iter().for_each(|i| render(i, out));
        }
        Reply::Map(pairs) => {
            out.push(format!("%{}", pairs.len()));
            for (k, v) in pairs {
                render(k, out);
                render(v, out);
            }
        }
        Reply::Double(d) => out.push(format!(",{}", g17(*d))),
        Reply::Boolean(b) => out.push(if *b { "#t" } else { "#f" }.into()),
        Reply::Verbatim(f, t) => out.push(format!("={f}:{}", escape(t))),
        Reply::BigNumber(d) => out.push(format!("({d}")),
    }
}

/// Splits a command line into arguments, honouring double quotes and escapes.
fn split_args(line: &str) -> Vec<Vec<u8>> {
    let mut args = Vec::new();
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && b[i] == b' ' {
            i += 1;
        }
        if i >= b.len() {
            break;
        }
        let mut arg = Vec::new();
        if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' && i + 1 < b.len() {
                    i += 1;
                    match b[i] {
                        b'n' => arg.push(b'\n'),
                        b'r' => arg.push(b'\r'),
                        b't' => arg.push(b'\t'),
                        b'x' => {
                            let h = std::str::from_utf8(&b[i + 1..i + 3]).unwrap();
                            arg.push(u8::from_str_radix(h, 16).unwrap());
                            i += 2;
                        }
                        c => arg.push(c),
                    }
                } else {
                    arg.push(b[i]);
                }
                i += 1;
            }
            i += 1;
        } else {
            while i < b.len() && b[i] != b' ' {
                arg.push(b[i]);
                i += 1;
            }
        }
        args.push(arg);
    }
    args
}

fn run_file(path: &std::path::Path) -> Result<usize, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let mut r = Runner::new();
    let mut pending: Vec<String> = Vec::new();
    let mut pending_cmd = String::new();
    let mut checked = 0;
    let flush = |pending: &mut Vec<String>, cmd: &str, lineno: usize| -> Result<(), String> {
        if !pending.is_empty() {
            return Err(format!(
                "line {lineno}: reply to `{cmd}` has unexpected extra lines: {pending:?}"
            ));
        }
        Ok(())
    };
    for (no, raw) in text.lines().enumerate() {
        let lineno = no + 1;
        let line = raw;
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(cmd) = line.strip_prefix("> ") {
            flush(&mut pending, &pending_cmd, lineno)?;
            r.unchecked_wakeups()
                .map_err(|e| format!("line {lineno}: {e}"))?;
            pending = r.run(&split_args(cmd));
            pending.reverse();
            pending_cmd = cmd.to_string();
            checked += 1;
        } else if let Some(pat) = line.strip_prefix("<* ") {
            let got = pending
                .pop()
                .ok_or(format!("line {lineno}: no reply line left"))?;
            if !glob_match(pat.as_bytes(), got.as_bytes(), false) {
                return Err(format!(
                    "line {lineno}: `{pending_cmd}`: got `{got}`, want pattern `{pat}`"
                ));
            }
        } else if let Some(want) =
            line.strip_prefix("< ")
                .or(if line == "<" { Some("") } else { None })
        {
            let got = pending.pop().ok_or(format!(
                "line {lineno}: `{pending_cmd}`: no reply line left, want `{want}`"
            ))?;
            if got != want {
                return Err(format!(
                    "line {lineno}: `{pending_cmd}`: got `{got}`, want `{want}`"
                ));
            }
        } else if let Some(ms) = line.strip_prefix("@time ") {
            let ms = ms
                .trim()
                .parse()
                .map_err(|_| format!("line {lineno}: bad @time"))?;
            r.clock.0.set(ms);
        } else if let Some(ms) = line.strip_prefix("@advance ") {
            let ms = ms
                .trim()
                .parse::<u64>()
                .map_err(|_| format!("line {lineno}: bad @advance"))?;
            r.clock.0.set(r.now_ms() + ms);
        } else if let Some(directive) = line.strip_prefix("@config ") {
            // A config-file line, for parameters CONFIG SET cannot change.
            let text = format!("{directive}\n");
            r.engine()
                .core
                .config
                .apply_file(&text)
                .map_err(|e| format!("line {lineno}: {e}"))?;
        } else if let Some(name) = line.strip_prefix("@client ") {
            flush(&mut pending, &pending_cmd, lineno)?;
            r.switch(name.trim());
        } else if let Some(rest) = line.strip_prefix("@set ") {
            r.set(&split_args(rest))
                .map_err(|e| format!("line {lineno}: {e}"))?;
        } else if line == "@cron" {
            r.driver.cron(&r.clock);
            r.collect_wakeups();
        } else if let Some(name) = line.strip_prefix("@disconnect ") {
            flush(&mut pending, &pending_cmd, lineno)?;
            let h = r
                .clients
                .remove(name.trim())
                .ok_or(format!("line {lineno}: no client {name}"))?;
            r.driver.close(h);
        } else if line == "@expire" {
            r.driver.expire_blocked(&r.clock);
            r.collect_wakeups();
        } else if let Some(name) = line.strip_prefix("@woken ") {
            flush(&mut pending, &pending_cmd, lineno)?;
            let h = *r
                .clients
                .get(name.trim())
                .ok_or(format!("line {lineno}: no client {name}"))?;
            pending = r.woken.remove(&h).unwrap_or_default();
            pending.reverse();
            pending_cmd = format!("(woken {name})");
        } else {
            return Err(format!("line {lineno}: unknown directive `{line}`"));
        }
    }
    flush(&mut pending, &pending_cmd, usize::MAX)?;
    r.unchecked_wakeups()?;
    Ok(checked)
}

#[test]
fn transcripts() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/transcripts");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        // The scripting transcripts need the engine's `scripting` feature (the Lua VM).
        .filter(|p| {
            cfg!(feature = "scripting")
                || !p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("scripting"))
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no transcript in {}", dir.display());
    let mut failures = Vec::new();
    let mut total = 0;
    for f in &files {
        match run_file(f) {
            Ok(n) => total += n,
            Err(e) => failures.push(format!("{}: {e}", f.file_name().unwrap().to_string_lossy())),
        }
    }
    assert!(
        failures.is_empty(),
        "transcript failures:\n{}",
        failures.join("\n")
    );
    assert!(total > 0);
}
