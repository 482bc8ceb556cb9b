//! SLOWLOG (GET, LEN, RESET, HELP) and the log itself: commands slower than
//! `slowlog-log-slower-than` microseconds (measured by the shell, see
//! [`crate::Engine::command_timed`]), newest first, at most `slowlog-max-len` entries, each
//! with Redis 7.0's argument truncation (32 arguments, 128 bytes each).

use super::config_cmd::help_reply;
use crate::argv::Argv;
use crate::command::{acl, flags, CommandSpec};
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::Cx;
use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::vec::Vec;
use kayvee_pds::SmallBytes;

/// Arguments an entry keeps (Redis's `SLOWLOG_ENTRY_MAX_ARGC`); the last one left becomes
/// `... (N more arguments)`.
pub const ENTRY_ARGC_MAX: usize = 32;
/// Bytes an argument keeps (`SLOWLOG_ENTRY_MAX_STRING`) before `... (N more bytes)`.
pub const ENTRY_STRING_MAX: usize = 128;

/// One logged command.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Increasing id (never reset by SLOWLOG RESET).
    pub id: u64,
    /// Unix seconds when it was logged.
    pub time_s: i64,
    /// Its duration.
    pub usec: u64,
    /// Its arguments, truncated.
    pub args: Vec<SmallBytes>,
    /// The client's `ip:port`.
    pub addr: String,
    /// The client's name (empty when none).
    pub name: SmallBytes,
}

/// The slow log.
#[derive(Clone, Debug, Default)]
pub struct SlowLog {
    /// Newest first.
    pub entries: VecDeque<Entry>,
    /// The id the next entry gets.
    pub next_id: u64,
}

impl SlowLog {
    /// Whether a command that took `usec` belongs in the log with threshold `slower_than`
    /// (negative = off).
    pub fn wants(slower_than: i64, usec: u64) -> bool {
        slower_than >= 0 && usec >= slower_than as u64
    }

    /// Logs a command, dropping the oldest entries beyond `len_max`.
    pub fn push(&mut self, mut entry: Entry, len_max: usize) {
        entry.id = self.next_id;
        self.next_id += 1;
        self.entries.push_front(entry);
        self.entries.truncate(len_max);
    }
}

/// The arguments as an entry keeps them: at most [`ENTRY_ARGC_MAX`], each at most
/// [`ENTRY_STRING_MAX`] bytes, with Redis's notes for what was cut.
pub fn truncated_args(argv: &Argv<'_>) -> Vec<SmallBytes> {
    let argc = argv.len();
    let kept = if argc > ENTRY_ARGC_MAX {
        ENTRY_ARGC_MAX - 1
    } else {
        argc
    };
    let mut args: Vec<SmallBytes> = argv.iter().take(kept).map(truncated_arg).collect();
    if kept < argc {
        let note = alloc::format!("... ({} more arguments)", argc - kept);
        args.push(SmallBytes::from_slice(note.as_bytes()));
    }
    args
}

/// One argument, cut at [`ENTRY_STRING_MAX`] bytes with `... (N more bytes)` appended.
fn truncated_arg(arg: &[u8]) -> SmallBytes {
    if arg.len() <= ENTRY_STRING_MAX {
        return SmallBytes::from_slice(arg);
    }
    let mut s = arg[..ENTRY_STRING_MAX].to_vec();
    let more = arg.len() - ENTRY_STRING_MAX;
    s.extend_from_slice(alloc::format!("... ({more} more bytes)").as_bytes());
    SmallBytes::from_vec(s)
}

const ADMIN_SUB: u32 = flags::ADMIN | flags::LOADING | flags::STALE;
const ADMIN_ACL: u32 = acl::ADMIN | acl::SLOW | acl::DANGEROUS;

/// SLOWLOG's subcommands.
const SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "reset",
        arity: 2,
        flags: ADMIN_SUB,
        acl: ADMIN_ACL,
        summary: "Clear all entries from the slow log",
        since: "2.2.12",
        group: "server",
        complexity: "O(N) where N is the number of entries in the slowlog",
        tips: &["request_policy:all_nodes", "response_policy:all_succeeded"],
        handler: slowlog_reset,
        ..CommandSpec::DEFAULT
    },
    CommandSpec::help_sub("6.2.0", "server", slowlog_help),
    CommandSpec {
        name: "get",
        arity: -2,
        flags: ADMIN_SUB,
        acl: ADMIN_ACL,
        summary: "Get the slow log's entries",
        since: "2.2.12",
        group: "server",
        complexity: "O(N) where N is the number of entries returned",
        tips: &["request_policy:all_nodes", "nondeterministic_output"],
        handler: slowlog_get,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "len",
        arity: 2,
        flags: ADMIN_SUB,
        acl: ADMIN_ACL,
        summary: "Get the slow log's length",
        since: "2.2.12",
        group: "server",
        tips: &[
            "request_policy:all_nodes",
            "response_policy:agg_sum",
            "nondeterministic_output",
        ],
        handler: slowlog_len,
        ..CommandSpec::DEFAULT
    },
];

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "slowlog",
    arity: -2,
    acl: acl::SLOW,
    summary: "A container for slow log commands",
    since: "2.2.12",
    group: "server",
    complexity: "Depends on subcommand.",
    subcommands: SUBCOMMANDS,
    ..CommandSpec::DEFAULT
}];

/// The lines of SLOWLOG HELP between its header and HELP, as Redis 7.0.15 sends them.
const HELP: &[&str] = &[
    "GET [<count>]",
    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
    "    Entries are made of:",
    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
    "    client name",
    "LEN",
    "    Return the length of the slowlog.",
    "RESET",
    "    Reset the slowlog.",
];

/// SLOWLOG HELP.
fn slowlog_help(_cx: &mut Cx<'_>, _args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    help_reply(out, "SLOWLOG", HELP);
    Ok(())
}

/// SLOWLOG RESET.
fn slowlog_reset(cx: &mut Cx<'_>, _args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    cx.core.slowlog.entries.clear();
    out.ok();
    Ok(())
}

/// SLOWLOG LEN.
fn slowlog_len(cx: &mut Cx<'_>, _args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    out.int(cx.core.slowlog.entries.len() as i64);
    Ok(())
}

/// SLOWLOG GET [count]: the newest `count` entries (10 by default, -1 for all).
fn slowlog_get(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if args.len() > 3 {
        let sub = crate::util::sanitize(args.get(1), 128);
        return Err(Error::msg(alloc::format!(
            "ERR unknown subcommand or wrong number of arguments for '{sub}'. Try SLOWLOG HELP."
        )));
    }
    let count = match args.len() {
        3 => match parse_i64(args.get(2)) {
            Some(-1) => usize::MAX,
            Some(n) if n >= 0 => n as usize,
            _ => {
                return Err(Error::msg(
                    "ERR count should be greater than or equal to -1",
                ))
            }
        },
        _ => 10,
    };
    let log = &cx.core.slowlog.entries;
    out.array(count.min(log.len()));
    for e in log.iter().take(count) {
        out.array(6);
        out.int(e.id as i64);
        out.int(e.time_s);
        out.int(e.usec as i64);
        out.array(e.args.len());
        e.args.iter().for_each(|a| out.bulk(a));
        out.bulk(e.addr.as_bytes());
        out.bulk(&e.name);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::argv::ArgvBuf;
    use alloc::vec;

    fn argv(args: &[Vec<u8>]) -> Vec<SmallBytes> {
        let refs: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
        let buf = ArgvBuf::from_args(refs);
        truncated_args(&buf.argv())
    }

    #[test]
    fn arguments_are_cut_as_redis_cuts_them() {
        let many: Vec<Vec<u8>> = (0..41)
            .map(|i| alloc::format!("k{i}").into_bytes())
            .collect();
        let got = argv(&many);
        assert_eq!(got.len(), 32);
        assert_eq!(&got[30][..], b"k30");
        assert_eq!(&got[31][..], b"... (10 more arguments)");
        assert_eq!(argv(&many[..32]).len(), 32);
        assert_eq!(&argv(&many[..33])[31][..], b"... (2 more arguments)");
        let long = argv(&[b"set".to_vec(), vec![b'x'; 128], vec![b'y'; 129]]);
        assert_eq!(long[1].len(), 128);
        let mut want = vec![b'y'; 128];
        want.extend_from_slice(b"... (1 more bytes)");
        assert_eq!(&long[2][..], &want[..]);
    }

    #[test]
    fn log_is_bounded_and_newest_first() {
        let mut log = SlowLog::default();
        for usec in 0..5 {
            let e = Entry {
                id: 0,
                time_s: 1,
                usec,
                args: Vec::new(),
                addr: String::new(),
                name: SmallBytes::new(),
            };
            log.push(e, 3);
        }
        let ids: Vec<u64> = log.entries.iter().map(|e| e.id).collect();
        assert_eq!(ids, [4, 3, 2]);
        assert!(SlowLog::wants(0, 0));
        assert!(!SlowLog::wants(-1, 1 << 40));
        assert!(!SlowLog::wants(10, 9));
    }
}
