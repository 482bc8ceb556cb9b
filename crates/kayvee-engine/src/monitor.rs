//! MONITOR, Redis 7.0 semantics (checked against redis-server 7.0.15): after each command runs
//! (not when it is refused), every monitor gets `+<secs>.<usec> [<db> <addr>] "arg" ...` with
//! the arguments as sent, quoted and escaped as Redis's `sdscatrepr`. Administrative commands
//! (CONFIG, CLIENT LIST...) and those flagged skip-monitor are not shown; AUTH's arguments and
//! HELLO's AUTH pair read `(redacted)`. Commands inside MULTI show when EXEC runs them, before
//! `EXEC` itself. A monitor's own commands follow their reply; keyspace commands are refused to
//! it (`Replica can't interact with the keyspace`, as Redis treats monitors as replicas).
//! QUIT, RESET and disconnecting end it.

use crate::argv::Argv;
use crate::client::{ClientTable, Handle, Transport};
use crate::command::{flags, CommandInfo};
use crate::config::syntax::repr_into;
use crate::error::Error;
use crate::outbox::Outbox;
use crate::reply::Reply;
use crate::time::Now;
use alloc::rc::Rc;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;

/// The monitors, and the lines owed to the running client (sent after its reply).
#[derive(Debug, Default)]
pub struct Monitors {
    /// Monitoring clients, in the order they started.
    clients: Vec<Handle>,
    /// Lines for the running client itself.
    pending_self: Vec<Reply>,
}

impl Monitors {
    /// Whether anyone monitors (checked after every command).
    #[inline]
    pub fn active(&self) -> bool {
        !self.clients.is_empty()
    }

    /// Whether `h` monitors (`CLIENT LIST flags=O`; a monitor may run few commands).
    #[inline]
    pub fn is_monitor(&self, h: Handle) -> bool {
        self.active() && self.clients.contains(&h)
    }

    /// MONITOR: `h` starts monitoring; false when it already was.
    pub fn add(&mut self, h: Handle) -> bool {
        if self.is_monitor(h) {
            return false;
        }
        self.clients.push(h);
        true
    }

    /// Stops `h` monitoring (RESET, disconnect).
    pub fn remove(&mut self, h: Handle) {
        self.clients.retain(|x| *x != h);
    }

    /// Takes the lines owed to the running client.
    pub fn take_self(&mut self) -> Vec<Reply> {
        core::mem::take(&mut self.pending_self)
    }
}

/// The error a monitor gets for a keyspace command.
pub fn keyspace_error() -> Error {
    Error::msg("ERR Replica can't interact with the keyspace")
}

/// Whether a monitor may not run this command (it reads, writes or may replicate).
pub fn refused(spec: &CommandInfo) -> bool {
    spec.has(flags::WRITE) || spec.has(flags::READONLY) || spec.has(flags::MAY_REPLICATE)
}

/// Feeds a command that ran (`db`: the client's database after it) to the monitors: the
/// running client's own line waits for its reply, the others go to `outbox`.
pub fn feed(
    monitors: &mut Monitors,
    outbox: &mut Outbox,
    clients: &ClientTable,
    me: Handle,
    spec: &CommandInfo,
    args: &Argv<'_>,
    now: Now,
) {
    if spec.has(flags::ADMIN) || spec.has(flags::SKIP_MONITOR) {
        return;
    }
    feed_as(monitors, outbox, clients, me, args, now, None);
}

/// Feeds a command whatever its flags (EVAL's own line), as client `me` or, with `source`
/// (`lua` for a script's commands), as `[db source]`.
pub fn feed_as(
    monitors: &mut Monitors,
    outbox: &mut Outbox,
    clients: &ClientTable,
    me: Handle,
    args: &Argv<'_>,
    now: Now,
    source: Option<&str>,
) {
    let Some(c) = clients.get(me) else {
        return;
    };
    let line = Reply::Simple(line(now, c.db, &c.conn.transport, source, args));
    let msg = Rc::new(line);
    for &m in &monitors.clients {
        if m == me && source.is_none() {
            monitors.pending_self.push((*msg).clone());
        } else {
            outbox.push(m, Rc::clone(&msg));
        }
    }
}

/// One monitor line (without the leading `+`).
fn line(
    now: Now,
    db: usize,
    transport: &Transport,
    source: Option<&str>,
    args: &Argv<'_>,
) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "{}.{:06} [{db} ",
        now.unix_us / 1_000_000,
        now.unix_us % 1_000_000
    );
    match transport {
        _ if source.is_some() => s.push_str(source.unwrap_or_default()),
        Transport::Tcp { addr, .. } => s.push_str(addr),
        Transport::Unix { path } => {
            s.push_str("unix:");
            s.push_str(path);
        }
    }
    s.push(']');
    let redacted = redacted_from(args);
    for (i, a) in args.iter().enumerate() {
        s.push(' ');
        if redacted.contains(&i) {
            s.push_str("\"(redacted)\"");
        } else {
            repr_into(a, &mut s);
        }
    }
    s
}

/// The argument indexes Redis 7.0 hides: all of AUTH's, the pair after HELLO's AUTH, and
/// MIGRATE's AUTH / AUTH2 credentials (as SLOWLOG hides them).
fn redacted_from(args: &Argv<'_>) -> Vec<usize> {
    let name = args.get(0).to_ascii_lowercase();
    match name.as_slice() {
        b"auth" => (1..args.len()).collect(),
        b"hello" => (2..args.len())
            .find(|&i| args.get(i).eq_ignore_ascii_case(b"auth"))
            .map(|i| (i + 1..(i + 3).min(args.len())).collect())
            .unwrap_or_default(),
        b"migrate" => crate::slowlog::redacted(args),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::argv::ArgvBuf;

    #[test]
    fn lines_quote_like_sdscatrepr_and_redact_credentials() {
        let mut s = String::new();
        repr_into(b"\"a\\b\n\x01\xff", &mut s);
        assert_eq!(s, r#""\"a\\b\n\x01\xff""#);
        let tcp = Transport::Tcp {
            addr: "127.0.0.1:5".into(),
            laddr: "x".into(),
        };
        let a = ArgvBuf::from_args(["HELLO", "2", "AUTH", "u", "p", "SETNAME", "n"]);
        let now = Now {
            unix_us: 1_700_000_000_000_042,
        };
        assert_eq!(
            line(now, 3, &tcp, None, &a.argv()),
            r#"1700000000.000042 [3 127.0.0.1:5] "HELLO" "2" "AUTH" "(redacted)" "(redacted)" "SETNAME" "n""#
        );
        let a = ArgvBuf::from_args(["auth", "pw"]);
        let unix = Transport::Unix { path: "/s".into() };
        assert!(
            line(now, 0, &unix, None, &a.argv()).ends_with(r#"[0 unix:/s] "auth" "(redacted)""#)
        );
    }
}
