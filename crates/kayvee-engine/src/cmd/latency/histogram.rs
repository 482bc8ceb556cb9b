//! LATENCY HISTOGRAM [command...]: each command's latency distribution, as a map of the
//! command's full name to `calls` and `histogram_usec` (bucket µs to the cumulative count).
//! Without arguments every command with a histogram; a container command stands for its
//! subcommands; unknown names are skipped.

use crate::argv::Argv;
use crate::command::CommandId;
use crate::error::CmdResult;
use crate::reply::ReplySink;
use crate::Cx;
use alloc::vec::Vec;

/// The commands an argument names: the command, or a container's subcommands, or `a|b`.
fn named(cx: &Cx<'_>, arg: &[u8]) -> Vec<CommandId> {
    let table = cx.commands;
    let mut parts = arg.splitn(2, |&b| b == b'|');
    let Some(id) = parts.next().and_then(|n| table.lookup(n)) else {
        return Vec::new();
    };
    if let Some(sub) = parts.next() {
        return table.lookup_sub(id, sub).into_iter().collect();
    }
    let subs = table.get(id).spec.subcommands;
    if subs == 0 {
        alloc::vec![id]
    } else {
        (1..=subs).map(|i| CommandId(id.0 + i as u16)).collect()
    }
}

pub(super) fn histogram(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let hists = &cx.core.latency.histograms;
    let ids: Vec<u16> = if args.len() == 2 {
        hists.iter().map(|(id, _)| id).collect()
    } else {
        args.iter()
            .skip(2)
            .flat_map(|a| named(cx, a))
            .map(|id| id.0)
            .filter(|&id| hists.get(id).is_some())
            .collect()
    };
    out.map(ids.len());
    for id in ids {
        let Some(h) = hists.get(id) else { continue };
        out.bulk(cx.commands.get(CommandId(id)).full_name.as_bytes());
        out.map(2);
        out.bulk(b"calls");
        out.int(h.total as i64);
        out.bulk(b"histogram_usec");
        let buckets = h.cumulative();
        out.map(buckets.len());
        for (usec, count) in buckets {
            out.int(usec as i64);
            out.int(count as i64);
        }
    }
    Ok(())
}
