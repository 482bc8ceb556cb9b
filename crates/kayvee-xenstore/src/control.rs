//! CONTROL (xenstore-control): help, check, log, logfile, print, quota, quota-soft, memreport,
//! following cxenstored 4.17's command set and texts where Kayvee has the matching feature.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use crate::error::XsError;
use crate::op::Reply;
use crate::perms::parse_u32;
use crate::store::Quota;
use crate::xenstored::Xenstored;

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
const HELP: &str = "check\t\nlog\ton|off\nlogfile\t<file>\nmemreport\t\nprint\t<string>\n\
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
fn quota_report(q: &Quota) -> String {
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
fn quota_soft_report(q: &Quota) -> String {
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
fn control_quota_value(raw: &[u8]) -> Result<u32, XsError> {
    let digits = raw.iter().take_while(|b| b.is_ascii_digit()).count();
    match parse_u32(&raw[..digits]) {
        Some(v) if v > 0 => Ok(v),
        _ => Err(XsError::Einval),
    }
}

/// Run a CONTROL command (dom0 only; the caller checked).
pub fn control(xs: &mut Xenstored, args: &[Vec<u8>]) -> Result<Reply, XsError> {
    let (cmd, rest) = args.split_first().ok_or(XsError::Einval)?;
    match (cmd.as_slice(), rest) {
        (b"help", []) => Ok(Reply::Text(String::from(HELP))),
        (b"check", []) => {
            xs.store().check_invariants();
            Ok(Reply::Text(String::from("OK")))
        }
        (b"log", [on]) if on == b"on" || on == b"off" => {
            xs.logging = on == b"on";
            Ok(Reply::Text(String::from("OK")))
        }
        (b"print", [_]) => Ok(Reply::Text(String::from("OK"))),
        (b"quota", []) => Ok(Reply::Text(quota_report(&xs.config.quota))),
        (b"quota", [set, name, v]) if set == b"set" => {
            let v = format!("{}", control_quota_value(v)?);
            quota_set(&mut xs.config.quota, name, v.as_bytes())?;
            Ok(Reply::Text(String::from("OK")))
        }
        (b"quota-soft", []) => Ok(Reply::Text(quota_soft_report(&xs.config.quota))),
        (b"quota-soft", [set, name, v]) if set == b"set" && name == b"memory" => {
            xs.config.quota.memory_soft = control_quota_value(v)?;
            Ok(Reply::Text(String::from("OK")))
        }
        (b"logfile", [file]) => {
            // The shell owns files: it reopens its trace file at this name (an empty or
            // unopenable name closes tracing; the reply is OK either way, as cxenstored).
            xs.logfile = Some(file.clone());
            Ok(Reply::Text(String::from("OK")))
        }
        (b"quota", [d]) => domain_quota_report(xs, d),
        (b"memreport", []) => Ok(Reply::Text(memreport(xs))),
        _ => Err(XsError::Einval),
    }
}

/// `quota <domid>`: what a domain uses against its limits.
fn domain_quota_report(xs: &Xenstored, d: &[u8]) -> Result<Reply, XsError> {
    let d = parse_u32(d).ok_or(XsError::Einval)?;
    if !xs.domains.exists(d) {
        return Err(XsError::Enoent);
    }
    let nodes = xs.store().owners.get(&d).copied().unwrap_or(0) as u64;
    let (watches, txns, outstanding) = xs.domain_usage(d);
    let rows = [
        ("nodes", nodes),
        ("watches", watches as u64),
        ("transactions", txns as u64),
        ("outstanding", outstanding as u64),
        ("memory", xs.memory_of(d)),
    ];
    let mut s = format!("Domain {d}:\n");
    for (name, v) in rows {
        s.push_str(&format!("{name:<16}: {v:>8}\n"));
    }
    Ok(Reply::Text(s))
}

/// `memreport`: node count, connections, watches, transactions and commit statistics.
fn memreport(xs: &Xenstored) -> String {
    let (conns, watches, txns) = xs.counts();
    let nodes = xs.store().root.count();
    let s = xs.stats;
    format!(
        "nodes: {nodes}\nconnections: {conns}\nwatches: {watches}\ntransactions: {txns}\n\
         commits: swap {} graft {} replay {} eagain {}\n",
        s.swaps, s.grafts, s.replays, s.conflicts
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
