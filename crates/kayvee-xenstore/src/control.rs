//! CONTROL (xenstore-control): help, check, log, logfile, print, quota, quota-soft, memreport,
//! following cxenstored 4.17's command set and texts where Kayvee has the matching feature.
//!
//! This module parses the command ([`parse`]) and words the reports from the figures it is
//! given; the daemon ([`crate::xenstored`]) runs the command on its state. It knows nothing of
//! the daemon.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use crate::error::XsError;
use crate::perms::parse_u32;
use crate::store::Quota;

/// Quota names accepted by GET/SET_QUOTA and `CONTROL quota set`.
pub const QUOTA_NAMES: [&str; 9] = [
    "nodes",
    "watches",
    "transactions",
    "outstanding",
    "transaction-nodes",
    "memory",
    "node-size",
    "path-max",
    "permissions",
];

/// The `help` text: one line per command, tab between name and arguments.
pub const HELP: &str = "check\t\nlog\ton|off\nlogfile\t<file>\nmemreport\t\nprint\t<string>\n\
quota\t[set <name> <val>|<domid>]\nquota-soft\t[set <name> <val>]\nhelp\t\n";

/// The value of a named quota.
pub fn quota_get(q: &Quota, name: &[u8]) -> Option<u32> {
    Some(match name {
        b"nodes" => q.nodes,
        b"watches" => q.watches,
        b"transactions" => q.transactions,
        b"outstanding" => q.outstanding,
        b"transaction-nodes" => q.transaction_nodes,
        b"memory" => q.memory,
        b"node-size" => q.node_size,
        b"path-max" => q.path_max,
        b"permissions" => q.permissions,
        _ => return None,
    })
}

/// Set a named quota from a decimal string.
pub fn quota_set(q: &mut Quota, name: &[u8], value: &[u8]) -> Result<(), XsError> {
    let v = parse_u32(value).ok_or(XsError::Einval)?;
    let slot = match name {
        b"nodes" => &mut q.nodes,
        b"watches" => &mut q.watches,
        b"transactions" => &mut q.transactions,
        b"outstanding" => &mut q.outstanding,
        b"transaction-nodes" => &mut q.transaction_nodes,
        b"memory" => &mut q.memory,
        b"node-size" => &mut q.node_size,
        b"path-max" => &mut q.path_max,
        b"permissions" => &mut q.permissions,
        _ => return Err(XsError::Einval),
    };
    *slot = v;
    Ok(())
}

/// The `quota` report, laid out as cxenstored's.
pub fn quota_report(q: &Quota) -> String {
    let rows: [(&str, u32, &str); 9] = [
        ("nodes", q.nodes, "Nodes per domain"),
        ("watches", q.watches, "Watches per domain"),
        ("transactions", q.transactions, "Transactions per domain"),
        (
            "outstanding",
            q.outstanding,
            "Outstanding requests per domain",
        ),
        (
            "transaction-nodes",
            q.transaction_nodes,
            "Max. number of accessed nodes per transaction",
        ),
        (
            "memory",
            q.memory,
            "Total Xenstore memory per domain (error level)",
        ),
        ("node-size", q.node_size, "Max. size of a node"),
        ("path-max", q.path_max, "Max. length of a node path"),
        (
            "permissions",
            q.permissions,
            "Max. number of permissions per node",
        ),
    ];
    quota_rows(&rows)
}

/// The `quota-soft` report: the soft memory quota only, as cxenstored.
pub fn quota_soft_report(q: &Quota) -> String {
    let what = "Total Xenstore memory per domain (warning level)";
    quota_rows(&[("memory", q.memory_soft, what)])
}

/// "Quota settings:" then one aligned row per quota.
fn quota_rows(rows: &[(&str, u32, &str)]) -> String {
    let mut s = String::from("Quota settings:\n");
    for (name, v, what) in rows {
        s.push_str(&format!("{name:<17}: {v:>8} {what}\n"));
    }
    s
}

/// A quota value as `CONTROL quota set` takes it: atoi-like (leading digits, trailing junk
/// ignored) and at least 1 (cxenstored 4.17: `5x` is 5; `0`, `-1`, `x` are EINVAL).
pub fn control_quota_value(raw: &[u8]) -> Result<u32, XsError> {
    let digits = raw.iter().take_while(|b| b.is_ascii_digit()).count();
    match parse_u32(&raw[..digits]) {
        Some(v) if v > 0 => Ok(v),
        _ => Err(XsError::Einval),
    }
}

/// A CONTROL command, parsed: its arguments checked as far as they can be without the store
/// (the daemon runs it, [`crate::xenstored::Xenstored`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command<'a> {
    /// `help`: [`HELP`].
    Help,
    /// `check`: the store's invariants.
    Check,
    /// `log on|off`.
    Log(bool),
    /// `print <string>`.
    Print,
    /// `quota`: [`quota_report`].
    Quota,
    /// `quota set <name> <val>`: the value as `CONTROL` reads it (see
    /// [`control_quota_value`]).
    QuotaSet(&'a [u8], u32),
    /// `quota-soft`: [`quota_soft_report`].
    QuotaSoft,
    /// `quota-soft set memory <val>`.
    QuotaSoftSet(u32),
    /// `logfile <file>`: the trace file the shell should switch to.
    Logfile(&'a [u8]),
    /// `quota <domid>`: [`domain_quota_report`].
    DomainQuota(u32),
    /// `memreport`: [`memreport`].
    MemReport,
}

/// Parses a CONTROL command's arguments.
pub fn parse(args: &[Vec<u8>]) -> Result<Command<'_>, XsError> {
    let (cmd, rest) = args.split_first().ok_or(XsError::Einval)?;
    Ok(match (cmd.as_slice(), rest) {
        (b"help", []) => Command::Help,
        (b"check", []) => Command::Check,
        (b"log", [on]) if on == b"on" || on == b"off" => Command::Log(on == b"on"),
        (b"print", [_]) => Command::Print,
        (b"quota", []) => Command::Quota,
        (b"quota", [set, name, v]) if set == b"set" => {
            Command::QuotaSet(name, control_quota_value(v)?)
        }
        (b"quota-soft", []) => Command::QuotaSoft,
        (b"quota-soft", [set, name, v]) if set == b"set" && name == b"memory" => {
            Command::QuotaSoftSet(control_quota_value(v)?)
        }
        (b"logfile", [file]) => Command::Logfile(file),
        (b"quota", [d]) => Command::DomainQuota(parse_u32(d).ok_or(XsError::Einval)?),
        (b"memreport", []) => Command::MemReport,
        _ => return Err(XsError::Einval),
    })
}

/// What a domain uses against its limits.
#[derive(Clone, Copy, Debug, Default)]
pub struct DomainUsage {
    /// Nodes it owns.
    pub nodes: u64,
    /// Watches of its connections.
    pub watches: usize,
    /// Open transactions of its connections.
    pub transactions: usize,
    /// Requests of its connections not answered yet.
    pub outstanding: usize,
    /// Bytes its nodes take.
    pub memory: u64,
}

/// `quota <domid>`: what domain `d` uses against its limits.
pub fn domain_quota_report(d: u32, u: &DomainUsage) -> String {
    let rows = [
        ("nodes", u.nodes),
        ("watches", u.watches as u64),
        ("transactions", u.transactions as u64),
        ("outstanding", u.outstanding as u64),
        ("memory", u.memory),
    ];
    let mut s = format!("Domain {d}:\n");
    for (name, v) in rows {
        s.push_str(&format!("{name:<16}: {v:>8}\n"));
    }
    s
}

/// `memreport`: node count, connections, watches, transactions (`counts`) and the commit
/// statistics (`commits`: swaps, grafts, replays, conflicts).
pub fn memreport(nodes: usize, counts: (usize, usize, usize), commits: [u64; 4]) -> String {
    let (conns, watches, txns) = counts;
    let [swaps, grafts, replays, conflicts] = commits;
    format!(
        "nodes: {nodes}\nconnections: {conns}\nwatches: {watches}\ntransactions: {txns}\n\
         commits: swap {swaps} graft {grafts} replay {replays} eagain {conflicts}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quota_report_matches_cxenstored_layout() {
        let r = quota_report(&Quota::default());
        assert!(r.starts_with("Quota settings:\nnodes            :     1000 Nodes per domain\n"));
        assert!(r.contains("permissions      :        5 Max. number of permissions per node\n"));
        let mut q = Quota::default();
        quota_set(&mut q, b"nodes", b"7").unwrap();
        assert_eq!(quota_get(&q, b"nodes"), Some(7));
        assert_eq!(quota_set(&mut q, b"bogus", b"7"), Err(XsError::Einval));
        assert_eq!(quota_set(&mut q, b"nodes", b"x"), Err(XsError::Einval));
    }
}
