//! LATENCY DOCTOR: a report in words on the monitor's events, with advice.

use crate::argv::Argv;
use crate::error::CmdResult;
use crate::reply::ReplySink;
use crate::Cx;
use alloc::string::String;
use core::fmt::Write;

pub(super) fn doctor(cx: &mut Cx<'_>, _: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let core = &cx.core;
    let mut t = String::new();
    if core.latency.events.is_empty() {
        // Redis's two answers when there is nothing to report.
        t.push_str(if core.config.latency_monitor_threshold == 0 {
            "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis \
             instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in \
             order to enable it. If we weren't in a deep space mission I'd suggest to take a \
             look at https://redis.io/topics/latency-monitor.\n"
        } else {
            "Dave, no latency spike was observed during the lifetime of this Redis instance, \
             not in the slightest bit. I honestly think you ought to sit down calmly, take a \
             stress pill, and think things over.\n"
        });
        out.verbatim("txt", t.as_bytes());
        return Ok(());
    }
    t.push_str(
        "Dave, I have observed latency spikes in this Redis instance. You don't mind talking \
         about it, do you Dave?\n\n",
    );
    for (i, (name, s)) in core.latency.events.iter().enumerate() {
        let n = s.samples.len() as u64;
        let sum: u64 = s.samples.iter().map(|x| x.1).sum();
        let avg = sum / n.max(1);
        let dev = s.samples.iter().map(|x| x.1.abs_diff(avg)).sum::<u64>() / n.max(1);
        let period = match (s.samples.front(), s.samples.back()) {
            (Some(first), Some(last)) if n > 1 => (last.0 - first.0) as f64 / (n - 1) as f64,
            _ => 0.0,
        };
        let _ = writeln!(
            t,
            "{}. {name}: {n} latency spikes (average {avg}ms, mean deviation {dev}ms, period \
             {period:.2} sec). Worst all time event {}ms.",
            i + 1,
            s.max
        );
    }
    t.push_str("\nI have a few advices for you:\n\n");
    let threshold = core.config.latency_monitor_threshold;
    let slowlog = core.config.slowlog_log_slower_than;
    if slowlog < 0 || slowlog as u64 / 1000 > threshold {
        let _ = writeln!(
            t,
            "- The slowlog threshold is higher than the latency monitor threshold ({threshold} \
             ms): lower `slowlog-log-slower-than` to see which commands are slow in SLOWLOG GET."
        );
    }
    let slow_commands = core.latency.events.contains_key("command")
        || core.latency.events.contains_key("fast-command");
    if slow_commands {
        t.push_str(
            "- Commands took longer than the threshold: check SLOWLOG GET for commands that \
             work on many elements (KEYS, SMEMBERS, LRANGE over a long list, SORT...) and \
             split the work, or use the SCAN family.\n",
        );
    }
    t.push_str(
        "- Kayvee writes snapshots without fork(): no fork latency to look for. If the host \
         is a virtual machine, measure its intrinsic latency with redis-cli --intrinsic-latency.\n",
    );
    out.verbatim("txt", t.as_bytes());
    Ok(())
}
