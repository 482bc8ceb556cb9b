//! The CLIENT container command: ID, SETNAME, GETNAME, SETINFO, LIST, INFO, KILL, UNBLOCK, REPLY,
//! GETREDIR, TRACKINGINFO, HELP, with Redis 7.0.15's replies, errors and `CLIENT LIST` line
//! format (checked against the real server).
//!
//! `CLIENT SETINFO` is a Redis 7.2 subcommand kept here because client libraries send it on
//! connect; its texts follow 7.2. Kayvee has no pub/sub or replication clients yet, so every
//! client is of type `normal`.

use crate::argv::Argv;
use crate::client::{Client, ReplyMode, Transport};
use crate::cmd::spec::CommandSpec;
use crate::command::{acl, flags};
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::util::{parse_i64, sanitize};
use crate::{Core, Cx, Handle, Outcome};
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;
use kayvee_pds::SmallBytes;

/// Flags most CLIENT subcommands carry.
const SUB_FLAGS: u32 = flags::NOSCRIPT | flags::LOADING | flags::STALE;
/// ACL categories most CLIENT subcommands carry.
const SUB_ACL: u32 = acl::SLOW | acl::CONNECTION;
/// ... and the administrative ones (LIST, KILL).
const ADMIN_ACL: u32 = acl::ADMIN | acl::SLOW | acl::DANGEROUS | acl::CONNECTION;

/// A CLIENT subcommand spec with the shared defaults.
const SUB: CommandSpec = CommandSpec {
    arity: 2,
    flags: SUB_FLAGS,
    acl: SUB_ACL,
    group: "connection",
    ..CommandSpec::DEFAULT
};

/// The subcommands, in the order `COMMAND INFO client` lists them in Redis 7.0.15.
const SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "info",
        summary: "Returns information about the current client connection.",
        since: "6.2.0",
        tips: &["nondeterministic_output"],
        handler: info,
        ..SUB
    },
    CommandSpec {
        name: "kill",
        arity: -3,
        flags: flags::ADMIN | SUB_FLAGS,
        acl: ADMIN_ACL,
        summary: "Kill the connection of a client",
        since: "2.4.0",
        complexity: "O(N) where N is the number of client connections",
        handler: kill,
        ..SUB
    },
    CommandSpec {
        name: "help",
        flags: flags::LOADING | flags::STALE,
        summary: "Show helpful text about the different subcommands",
        since: "5.0.0",
        handler: help,
        ..SUB
    },
    CommandSpec {
        name: "list",
        arity: -2,
        flags: flags::ADMIN | SUB_FLAGS,
        acl: ADMIN_ACL,
        summary: "Get the list of client connections",
        since: "2.4.0",
        complexity: "O(N) where N is the number of client connections",
        tips: &["nondeterministic_output"],
        handler: list,
        ..SUB
    },
    CommandSpec {
        name: "unblock",
        arity: -3,
        flags: flags::ADMIN | SUB_FLAGS,
        acl: ADMIN_ACL,
        summary: "Unblock a client blocked in a blocking command from a different connection",
        since: "5.0.0",
        complexity: "O(log N) where N is the number of client connections",
        handler: unblock,
        ..SUB
    },
    CommandSpec {
        name: "getredir",
        summary: "Get tracking notifications redirection client ID if any",
        since: "6.0.0",
        handler: getredir,
        ..SUB
    },
    CommandSpec {
        name: "trackinginfo",
        summary: "Return information about server assisted client side caching for the current \
                  connection",
        since: "6.2.0",
        handler: trackinginfo,
        ..SUB
    },
    CommandSpec {
        name: "getname",
        summary: "Get the current connection name",
        since: "2.6.9",
        handler: getname,
        ..SUB
    },
    CommandSpec {
        name: "reply",
        arity: 3,
        summary: "Instruct the server whether to reply to commands",
        since: "3.2.0",
        handler: reply,
        ..SUB
    },
    CommandSpec {
        name: "id",
        summary: "Returns the client ID for the current connection",
        since: "5.0.0",
        handler: id,
        ..SUB
    },
    CommandSpec {
        name: "setname",
        arity: 3,
        summary: "Set the current connection name",
        since: "2.6.9",
        handler: setname,
        ..SUB
    },
    CommandSpec {
        name: "setinfo",
        arity: 4,
        summary: "Set client or connection specific info",
        since: "7.2.0",
        tips: &["request_policy:all_nodes", "response_policy:all_succeeded"],
        handler: setinfo,
        ..SUB
    },
    CommandSpec {
        name: "tracking",
        arity: -3,
        summary: "Enable or disable server assisted client side caching support",
        since: "6.0.0",
        complexity: "O(1). Some options may introduce additional complexity.",
        handler: tracking,
        ..SUB
    },
    CommandSpec {
        name: "caching",
        arity: 3,
        summary: "Instruct the server about tracking or not keys in the next request",
        since: "6.0.0",
        handler: caching,
        ..SUB
    },
    CommandSpec {
        name: "pause",
        arity: -3,
        flags: flags::ADMIN | SUB_FLAGS,
        acl: ADMIN_ACL,
        summary: "Stop processing commands from clients for some time",
        since: "2.9.50",
        handler: pause,
        ..SUB
    },
    CommandSpec {
        name: "unpause",
        flags: flags::ADMIN | SUB_FLAGS,
        acl: ADMIN_ACL,
        summary: "Resume processing of clients that were paused",
        since: "6.2.0",
        complexity: "O(N) Where N is the number of paused clients",
        handler: unpause,
        ..SUB
    },
    CommandSpec {
        name: "no-evict",
        arity: 3,
        flags: flags::ADMIN | SUB_FLAGS,
        acl: ADMIN_ACL,
        summary: "Set client eviction mode for the current connection",
        since: "7.0.0",
        handler: no_evict,
        ..SUB
    },
];

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "client",
    arity: -2,
    acl: acl::SLOW,
    summary: "A container for client connection commands",
    since: "2.4.0",
    group: "connection",
    complexity: "Depends on subcommand.",
    subcommands: SUBCOMMANDS,
    ..CommandSpec::DEFAULT
}];

/// Checks a client name (or SETINFO value): printable ASCII without spaces, as Redis demands
/// so that `CLIENT LIST` stays parseable. Empty is allowed (it clears the name).
pub fn validate_name(name: &[u8]) -> Result<(), Error> {
    if name.iter().all(|&b| (b'!'..=b'~').contains(&b)) {
        Ok(())
    } else {
        Err(Error::msg(
            "ERR Client names cannot contain spaces, newlines or special characters.",
        ))
    }
}

/// CLIENT ID
fn id(cx: &mut Cx<'_>, _args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    out.int(cx.client().id as i64);
    Ok(())
}

/// CLIENT SETNAME name (empty clears it)
fn setname(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let name = args.get(2);
    validate_name(name)?;
    cx.client().name = (!name.is_empty()).then(|| SmallBytes::from_slice(name));
    out.ok();
    Ok(())
}

/// CLIENT GETNAME: the name, or null.
fn getname(cx: &mut Cx<'_>, _args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    match &cx.client().name {
        Some(n) => out.bulk(n),
        None => out.null(),
    }
    Ok(())
}

/// CLIENT SETINFO LIB-NAME|LIB-VER value (Redis 7.2; error texts as 7.2 words them).
fn setinfo(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (attr, value) = (args.get(2), args.get(3));
    let is_name = attr.eq_ignore_ascii_case(b"lib-name");
    if !is_name && !attr.eq_ignore_ascii_case(b"lib-ver") {
        let attr = sanitize(attr, 128);
        return Err(Error::msg(alloc::format!(
            "ERR Unrecognized option '{attr}'"
        )));
    }
    if validate_name(value).is_err() {
        let attr = sanitize(attr, 128);
        return Err(Error::msg(alloc::format!(
            "ERR {attr} cannot contain spaces, newlines or special characters."
        )));
    }
    let value = (!value.is_empty()).then(|| SmallBytes::from_slice(value));
    let client = cx.client();
    if is_name {
        client.lib_name = value;
    } else {
        client.lib_ver = value;
    }
    out.ok();
    Ok(())
}

/// CLIENT REPLY ON|OFF|SKIP: OFF and SKIP answer nothing; ON answers `+OK` even when it is
/// itself the skipped command (the dispatcher replays held replies when replies come back on).
fn reply(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let mode = args.get(2);
    let client = cx.client();
    if mode.eq_ignore_ascii_case(b"on") {
        client.reply_mode = ReplyMode::On;
        out.ok();
    } else if mode.eq_ignore_ascii_case(b"off") {
        client.reply_mode = ReplyMode::Off;
    } else if mode.eq_ignore_ascii_case(b"skip") {
        // Under OFF, skipping the next reply changes nothing.
        if client.reply_mode != ReplyMode::Off {
            client.reply_mode = ReplyMode::Skip;
        }
    } else {
        return Err(Error::Syntax);
    }
    Ok(())
}

/// CLIENT GETREDIR: the REDIRECT target's id, 0 when tracking without one, -1 when off.
fn getredir(cx: &mut Cx<'_>, _args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    out.int(crate::tracking::redirect_id(cx.core.tracking.of(cx.me)));
    Ok(())
}

/// CLIENT TRACKINGINFO: flags, redirect and prefixes of the caller's tracking.
fn trackinginfo(cx: &mut Cx<'_>, _args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    crate::tracking::info(cx.core.tracking.of(cx.me), out);
    Ok(())
}

/// CLIENT TRACKING on|off [REDIRECT id] [PREFIX p]... [BCAST] [OPTIN] [OPTOUT] [NOLOOP].
fn tracking(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    crate::drain::tracking_command(cx.core, cx.clients, cx.me, args)?;
    out.ok();
    Ok(())
}

/// CLIENT CACHING yes|no: whether the next command's keys are tracked (OPTIN / OPTOUT).
fn caching(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    crate::tracking::caching(&mut cx.core.tracking, cx.me, args.get(2))?;
    out.ok();
    Ok(())
}

/// The client types `TYPE` filters on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ClientType {
    Normal,
    Replica,
    Master,
    Pubsub,
}

/// Parses a `TYPE` value (`slave` is the old name of `replica`).
fn parse_type(t: &[u8]) -> Result<ClientType, Error> {
    let t_lower = t.to_ascii_lowercase();
    Ok(match t_lower.as_slice() {
        b"normal" => ClientType::Normal,
        b"replica" | b"slave" => ClientType::Replica,
        b"master" => ClientType::Master,
        b"pubsub" => ClientType::Pubsub,
        _ => {
            let t = sanitize(t, 128);
            return Err(Error::msg(alloc::format!("ERR Unknown client type '{t}'")));
        }
    })
}

/// A client's type, in Redis's precedence: its primary's link, a replica, a subscriber.
fn client_type(core: &Core, h: Handle) -> ClientType {
    if core.repl.link() == Some(h) {
        ClientType::Master
    } else if core.repl.is_replica(h) {
        ClientType::Replica
    } else if core.pubsub.subscribed(h) {
        ClientType::Pubsub
    } else {
        ClientType::Normal
    }
}

/// The peer address as `CLIENT LIST addr=` shows it (`ip:port`, or `path:0` for Unix sockets).
/// The peer address as CLIENT LIST and SLOWLOG show it (`ip:port`, `path:0`).
pub fn peer_addr(c: &Client) -> String {
    addr(c)
}

fn addr(c: &Client) -> String {
    match &c.conn.transport {
        Transport::Tcp { addr, .. } => addr.clone(),
        Transport::Unix { path } => alloc::format!("{path}:0"),
    }
}

/// The local address (`laddr=`).
fn laddr(c: &Client) -> String {
    match &c.conn.transport {
        Transport::Tcp { laddr, .. } => laddr.clone(),
        Transport::Unix { path } => alloc::format!("{path}:0"),
    }
}

/// One `CLIENT LIST` line (with its trailing `\n`), fields in Redis 7.0.15's order.
/// `argv_mem` is the size of the command being run (only the caller has one).
pub(crate) fn client_line(cx: &Cx<'_>, h: Handle, c: &Client, argv_mem: usize, s: &mut String) {
    let now = cx.now_ms();
    let io = &c.io;
    let name = c.name.as_ref().map(|n| n.as_bytes()).unwrap_or_default();
    let tcp = matches!(c.conn.transport, Transport::Tcp { .. });
    let flags = client_flags(cx.core, h, c, tcp);
    let subs = cx.core.pubsub.of(h);
    let txn = cx.core.txn.of(h);
    let count = |set: fn(&crate::pubsub::ClientSubs) -> usize| subs.map_or(0, set);
    let cmd = match c.last_cmd_id {
        Some(id) => cx.commands.get(id).full_name.as_str(),
        None => "NULL",
    };
    let _ = writeln!(
        s,
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={flags} db={} \
         sub={} psub={} ssub={} multi={} qbuf={} qbuf-free={} argv-mem={argv_mem} multi-mem={} \
         rbs={} rbp={} obl={} oll={} omem={} tot-mem={} events=r cmd={cmd} user={} redir={} \
         resp={}",
        c.id,
        addr(c),
        laddr(c),
        c.conn.fd,
        String::from_utf8_lossy(name),
        now.saturating_sub(c.created_ms) / 1000,
        now.saturating_sub(c.last_interaction_ms) / 1000,
        c.db,
        count(|s| s.channels.len()),
        count(|s| s.patterns.len()),
        count(|s| s.shard.len()),
        match txn {
            Some(t) if t.multi => t.queue.len() as i64,
            _ => -1,
        },
        io.qbuf,
        io.qbuf_free,
        txn.map_or(0, |t| t.queued_bytes),
        io.rbs,
        io.rbp,
        io.obl,
        io.oll,
        io.omem,
        io.tot_mem,
        String::from_utf8_lossy(&c.user),
        crate::tracking::redirect_id(cx.core.tracking.of(h)),
        c.protocol.number(),
    );
}

/// The `flags=` letters in Redis's order: P (subscriber), x (in MULTI), b (blocked), t
/// (tracking), R (its redirect target is gone), B (BCAST), d (a watched key was modified), U
/// (Unix socket); `N` when none applies.
/// The features keep their own per-client state: each is asked about `h`.
fn client_flags(core: &Core, h: Handle, c: &Client, tcp: bool) -> String {
    let mut f = String::new();
    let t = core.tracking.of(h);
    let txn = core.txn.of(h);
    for (on, letter) in [
        (core.repl.is_replica(h), 'S'),
        (core.repl.link() == Some(h), 'M'),
        (core.monitors.is_monitor(h), 'O'),
        (core.pubsub.subscribed(h), 'P'),
        (txn.is_some_and(|t| t.multi), 'x'),
        (core.blocking.is_blocked(h) || core.pause.holds(h), 'b'),
        (t.is_some(), 't'),
        (t.is_some_and(|t| t.broken_redirect), 'R'),
        (t.is_some_and(|t| t.bcast), 'B'),
        (txn.is_some_and(|t| t.dirty), 'd'),
        (!tcp, 'U'),
        (c.no_evict, 'e'),
    ] {
        if on {
            f.push(letter);
        }
    }
    if f.is_empty() {
        f.push('N');
    }
    f
}

/// Bytes of the arguments of the running command (`argv-mem=`).
fn argv_mem(args: &Argv<'_>) -> usize {
    args.iter().map(<[u8]>::len).sum()
}

/// Writes the lines of `handles` (in that order) as one verbatim/bulk reply.
fn reply_lines(cx: &Cx<'_>, handles: &[Handle], args: &Argv<'_>, out: &mut dyn ReplySink) {
    let mut s = String::new();
    for &h in handles {
        if let Some(c) = cx.clients.get(h) {
            let mem = if h == cx.me { argv_mem(args) } else { 0 };
            client_line(cx, h, c, mem, &mut s);
        }
    }
    out.verbatim("txt", s.as_bytes());
}

/// CLIENT INFO: the caller's own `CLIENT LIST` line.
fn info(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let me = cx.me;
    reply_lines(cx, &[me], args, out);
    Ok(())
}

/// CLIENT LIST [TYPE type | ID id ...]: clients by id, or in the order the ids were given.
fn list(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    // Killed clients are gone as far as users can tell, though the shell has yet to close them.
    let mut all: Vec<(u64, Handle, ClientType)> = cx
        .clients
        .iter()
        .filter(|(_, c)| !c.killed)
        .map(|(h, c)| (c.id, h, client_type(cx.core, h)))
        .collect();
    all.sort_unstable_by_key(|e| e.0);
    let handles: Vec<Handle> = if args.len() == 2 {
        all.iter().map(|e| e.1).collect()
    } else if args.len() == 4 && args.get(2).eq_ignore_ascii_case(b"type") {
        let t = parse_type(args.get(3))?;
        all.iter().filter(|e| e.2 == t).map(|e| e.1).collect()
    } else if args.len() > 3 && args.get(2).eq_ignore_ascii_case(b"id") {
        let mut ids = Vec::with_capacity(args.len() - 3);
        for a in args.iter().skip(3) {
            ids.push(parse_i64(a).ok_or(Error::msg("ERR Invalid client ID"))?);
        }
        ids.iter()
            .filter_map(|&id| all.iter().find(|e| e.0 as i64 == id).map(|e| e.1))
            .collect()
    } else {
        return Err(Error::Syntax);
    };
    reply_lines(cx, &handles, args, out);
    Ok(())
}

/// The filters of `CLIENT KILL <filter> <value> ...`; every given filter must match.
#[derive(Default)]
struct KillFilter<'a> {
    id: Option<u64>,
    addr: Option<&'a [u8]>,
    laddr: Option<&'a [u8]>,
    user: Option<&'a [u8]>,
    kind: Option<ClientType>,
    skip_me: bool,
}

impl KillFilter<'_> {
    /// Whether client `c` (handle `h`; `me` runs the command) is to be killed.
    fn matches(&self, core: &Core, h: Handle, me: Handle, c: &Client) -> bool {
        !(self.skip_me && h == me)
            && self.id.is_none_or(|id| c.id == id)
            && self.addr.is_none_or(|a| addr(c).as_bytes() == a)
            && self.laddr.is_none_or(|a| laddr(c).as_bytes() == a)
            && self.user.is_none_or(|u| c.user.as_bytes() == u)
            && self.kind.is_none_or(|k| client_type(core, h) == k)
    }
}

/// Parses the new-style filters, with Redis's error texts, failing on the first bad pair.
fn parse_kill_filter<'a>(args: &'a Argv<'_>) -> Result<KillFilter<'a>, Error> {
    let mut f = KillFilter {
        skip_me: true,
        ..KillFilter::default()
    };
    let mut i = 2;
    while i < args.len() {
        if i + 1 >= args.len() {
            return Err(Error::Syntax);
        }
        let (opt, val) = (args.get(i).to_ascii_lowercase(), args.get(i + 1));
        match opt.as_slice() {
            b"id" => match parse_i64(val) {
                Some(id) if id > 0 => f.id = Some(id as u64),
                _ => return Err(Error::msg("ERR client-id should be greater than 0")),
            },
            b"type" => f.kind = Some(parse_type(val)?),
            b"addr" => f.addr = Some(val),
            b"laddr" => f.laddr = Some(val),
            b"user" => {
                if val != b"default" {
                    let u = sanitize(val, 128);
                    return Err(Error::msg(alloc::format!("ERR No such user '{u}'")));
                }
                f.user = Some(val);
            }
            b"skipme" if val.eq_ignore_ascii_case(b"yes") => f.skip_me = true,
            b"skipme" if val.eq_ignore_ascii_case(b"no") => f.skip_me = false,
            _ => return Err(Error::Syntax),
        }
        i += 2;
    }
    Ok(f)
}

/// Marks the matching clients killed and returns how many; the shell closes them.
fn kill_matching(cx: &mut Cx<'_>, f: &KillFilter<'_>) -> usize {
    let me = cx.me;
    let mut n = 0;
    for (h, c) in cx.clients.iter_mut() {
        if !c.killed && f.matches(cx.core, h, me, c) {
            c.killed = true;
            n += 1;
        }
    }
    if n > 0 {
        cx.outcome = Outcome::KillClients;
    }
    n
}

/// CLIENT KILL addr:port (old form: `+OK` or `No such client`) or
/// CLIENT KILL <filter> <value> ... (new form: the number of clients killed).
fn kill(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if args.len() == 3 {
        let f = KillFilter {
            addr: Some(args.get(2)),
            ..KillFilter::default()
        };
        if kill_matching(cx, &f) == 0 {
            return Err(Error::msg("ERR No such client"));
        }
        out.ok();
        return Ok(());
    }
    let f = parse_kill_filter(args)?;
    let n = kill_matching(cx, &f);
    out.int(n as i64);
    Ok(())
}

/// CLIENT UNBLOCK id [TIMEOUT|ERROR]: wakes a client blocked in a blocking command (not one
/// held by CLIENT PAUSE) with its timeout reply or Redis's `-UNBLOCKED` error; 1 if it was
/// blocked, else 0. Redis checks the reason before the id.
fn unblock(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if args.len() > 4 {
        let sub = sanitize(args.get(1), 128);
        return Err(Error::msg(alloc::format!(
            "ERR unknown subcommand or wrong number of arguments for '{sub}'. Try CLIENT HELP."
        )));
    }
    let as_error = match args.len() {
        3 => false,
        _ => match args.get(3) {
            r if r.eq_ignore_ascii_case(b"timeout") => false,
            r if r.eq_ignore_ascii_case(b"error") => true,
            _ => {
                return Err(Error::msg(
                    "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR",
                ))
            }
        },
    };
    let id = parse_i64(args.get(2)).ok_or(Error::NotInteger)?;
    let target = cx
        .clients
        .iter()
        .find(|(_, c)| !c.killed && i64::try_from(c.id) == Ok(id))
        .map(|(h, _)| h);
    let done = target.is_some_and(|h| {
        crate::blocking::unblock_on_request(
            &mut cx.core.blocking,
            cx.clients,
            &mut cx.core.stats,
            h,
            as_error,
        )
    });
    out.int(i64::from(done));
    Ok(())
}

/// Redis 7.0.15's CLIENT HELP entries (between the header and HELP's own).
const HELP: &[&str] = &[
    "CACHING (YES|NO)",
    "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
    "GETREDIR",
    "    Return the client ID we are redirecting to when tracking is enabled.",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are:",
    "    * ADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made from the specified address",
    "    * LADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made to specified local address",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Kill connections by type.",
    "    * USER <username>",
    "      Kill connections authenticated by <username>.",
    "    * SKIPME (YES|NO)",
    "      Skip killing current connection (default: yes).",
    "LIST [options ...]",
    "    Return information about client connections. Options:",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Return clients of specified type.",
    "UNPAUSE",
    "    Stop the current client pause, resuming traffic.",
    "PAUSE <timeout> [WRITE|ALL]",
    "    Suspend all, or just write, clients for <timeout> milliseconds.",
    "REPLY (ON|OFF|SKIP)",
    "    Control the replies sent to the current connection.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
    "    Unblock the specified blocked client.",
    "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
    "         [OPTIN] [OPTOUT] [NOLOOP]",
    "    Control server assisted client side caching.",
    "TRACKINGINFO",
    "    Report tracking status for the current connection.",
    "NO-EVICT (ON|OFF)",
    "    Protect current client connection from eviction.",
];

/// CLIENT NO-EVICT ON|OFF: exempts the connection from client eviction (`maxmemory-clients`,
/// which the connection layer carries out; `flags=e`). Key eviction is not concerned.
fn no_evict(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let on = match args.get(2) {
        a if a.eq_ignore_ascii_case(b"on") => true,
        a if a.eq_ignore_ascii_case(b"off") => false,
        _ => return Err(Error::Syntax),
    };
    cx.client().no_evict = on;
    out.ok();
    Ok(())
}

/// CLIENT HELP
fn help(_cx: &mut Cx<'_>, _args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    crate::reply::help_reply(out, "CLIENT", HELP);
    Ok(())
}

/// CLIENT PAUSE timeout [WRITE|ALL] (see [`crate::pause`]).
fn pause(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let now = cx.now_ms();
    crate::pause::pause_command(&mut cx.core.pause, now, args, out)
}

/// CLIENT UNPAUSE: lifts the pause; the held commands run on the shell's next turn.
fn unpause(cx: &mut Cx<'_>, _args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    crate::pause::unpause_command(&mut cx.core.pause, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    use crate::{ArgvBuf, ConnInfo, Engine, Now, Reply, ReplyTree};

    /// An engine with three TCP clients (ids 1..=3, peer ports 5001..=5003) and one on a
    /// Unix socket (id 4), created at t = 1000 ms.
    fn engine() -> (Engine, Vec<Handle>) {
        let mut e = Engine::new(crate::Config::default(), 1, Now::from_ms(1000));
        let mut hs = Vec::new();
        for n in 1..=3 {
            let transport = Transport::Tcp {
                addr: alloc::format!("10.0.0.1:500{n}"),
                laddr: "10.0.0.2:6379".into(),
            };
            hs.push(e.connect(ConnInfo { transport, fd: n }, Now::from_ms(1000)));
        }
        let transport = Transport::Unix { path: "/s".into() };
        hs.push(e.connect(ConnInfo { transport, fd: 9 }, Now::from_ms(1000)));
        (e, hs)
    }

    fn run(e: &mut Engine, h: Handle, ms: u64, args: &[&str]) -> (Vec<Reply>, Outcome) {
        let args: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        let argv = ArgvBuf::from_args(&args);
        let mut t = ReplyTree::new(e.protocol(h));
        let o = e.execute(h, &argv.argv(), Now::from_ms(ms), &mut t);
        (t.take(), o)
    }

    fn text(r: &[Reply]) -> String {
        match r {
            [Reply::Verbatim(_, t)] => String::from_utf8(t.clone()).unwrap(),
            other => panic!("not a verbatim reply: {other:?}"),
        }
    }

    fn killed(e: &Engine, hs: &[Handle]) -> Vec<bool> {
        hs.iter()
            .map(|&h| e.clients.get(h).unwrap().killed)
            .collect()
    }

    #[test]
    fn list_lines_carry_identity_age_idle_and_last_command() {
        let (mut e, hs) = engine();
        run(&mut e, hs[1], 3000, &["PING"]);
        let (r, _) = run(
            &mut e,
            hs[0],
            5500,
            &["CLIENT", "LIST", "ID", "2", "4", "2"],
        );
        let lines: Vec<String> = text(&r).lines().map(String::from).collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("id=2 addr=10.0.0.1:5002 laddr=10.0.0.2:6379 fd=2 name= "));
        assert!(lines[0].contains(" age=4 idle=2 flags=N "));
        assert!(lines[0].contains(" argv-mem=0 ") && lines[0].contains(" cmd=ping "));
        assert!(lines[1].starts_with("id=4 addr=/s:0 laddr=/s:0 fd=9 "));
        assert!(lines[1].contains(" flags=U ") && lines[1].contains(" cmd=NULL "));
        assert_eq!(lines[0], lines[2]);
        let (r, _) = run(&mut e, hs[0], 5500, &["CLIENT", "INFO"]);
        assert!(text(&r).contains(" idle=0 flags=N db=0 "));
        assert!(text(&r).contains(" argv-mem=10 "));
        assert!(text(&r).ends_with(" cmd=client|info user=default redir=-1 resp=2\n"));
    }

    #[test]
    fn kill_old_form_matches_the_address_and_may_kill_the_caller() {
        let (mut e, hs) = engine();
        let (r, o) = run(&mut e, hs[0], 2000, &["CLIENT", "KILL", "10.0.0.1:5001"]);
        assert_eq!(r, [Reply::Simple("OK".into())]);
        assert_eq!(o, Outcome::KillClients);
        assert_eq!(killed(&e, &hs), [true, false, false, false]);
        let (r, o) = run(&mut e, hs[1], 2000, &["CLIENT", "KILL", "10.0.0.1:5001"]);
        assert_eq!(r, [Reply::Error("ERR No such client".into())]);
        assert_eq!(o, Outcome::Continue);
    }

    #[test]
    fn kill_filters_combine_and_skip_the_caller_by_default() {
        let (mut e, hs) = engine();
        let (r, _) = run(
            &mut e,
            hs[0],
            2000,
            &["CLIENT", "KILL", "LADDR", "10.0.0.2:6379"],
        );
        assert_eq!(r, [Reply::Int(2)]);
        assert_eq!(killed(&e, &hs), [false, true, true, false]);
        let (r, _) = run(
            &mut e,
            hs[0],
            2000,
            &["CLIENT", "KILL", "ID", "4", "ADDR", "x"],
        );
        assert_eq!(r, [Reply::Int(0)]);
        let (r, _) = run(
            &mut e,
            hs[0],
            2000,
            &["CLIENT", "KILL", "ADDR", "/s:0", "ID", "4"],
        );
        assert_eq!(r, [Reply::Int(1)]);
        let (r, o) = run(&mut e, hs[0], 2000, &["CLIENT", "KILL", "ID", "1"]);
        assert_eq!((r, o), (alloc::vec![Reply::Int(0)], Outcome::Continue));
        let (r, o) = run(
            &mut e,
            hs[0],
            2000,
            &["client", "kill", "id", "1", "skipme", "NO"],
        );
        assert_eq!((r, o), (alloc::vec![Reply::Int(1)], Outcome::KillClients));
        assert_eq!(killed(&e, &hs), [true, true, true, true]);
    }

    #[test]
    fn list_by_type_hides_killed_clients() {
        let (mut e, hs) = engine();
        run(&mut e, hs[0], 2000, &["CLIENT", "KILL", "ID", "3"]);
        let (r, _) = run(&mut e, hs[0], 2000, &["CLIENT", "LIST", "TYPE", "normal"]);
        let list = text(&r);
        let ids: Vec<&str> = list.lines().map(|l| l.split(' ').next().unwrap()).collect();
        assert_eq!(ids, ["id=1", "id=2", "id=4"]);
    }

    #[test]
    fn names_must_be_printable_without_spaces() {
        assert!(validate_name(b"").is_ok());
        assert!(validate_name(b"a~!z").is_ok());
        assert!(validate_name(b"a b").is_err());
        assert!(validate_name(b"a\x01").is_err());
        assert!(validate_name(b"\xc3\xa9").is_err());
    }

    #[test]
    fn client_types_parse_case_insensitively() {
        assert!(parse_type(b"NORMAL") == Ok(ClientType::Normal));
        assert!(parse_type(b"slave") == Ok(ClientType::Replica));
        assert_eq!(
            parse_type(b"foo").err().unwrap().to_string(),
            "ERR Unknown client type 'foo'"
        );
    }

    #[test]
    fn help_lists_every_subcommand_but_the_72_setinfo() {
        // HELP's own entry is added by `help_reply`.
        for sub in SUBCOMMANDS
            .iter()
            .filter(|s| s.name != "setinfo" && s.name != "help")
        {
            let entry = sub.name.to_ascii_uppercase();
            assert!(
                HELP.iter()
                    .any(|l| l == &entry || l.starts_with(&alloc::format!("{entry} "))),
                "{entry}"
            );
        }
        // Every entry line is followed by an indented description.
        for (i, l) in HELP.iter().enumerate() {
            if !l.starts_with(' ') {
                assert!(HELP[i + 1].starts_with(' '), "{l}");
            }
        }
    }
}
