//! LATENCY: the latency monitor's reports (LATEST, HISTORY, RESET, GRAPH in `events`, DOCTOR in
//! `doctor`) and the per-command histograms (HISTOGRAM in `histogram`). The state is
//! [`crate::latency`]; events are recorded when `latency-monitor-threshold` is set, histograms
//! while `latency-tracking` is on.

mod doctor;
mod events;
mod histogram;

use crate::argv::Argv;
use crate::cmd::spec::CommandSpec;
use crate::command::{acl, flags};
use crate::error::CmdResult;
use crate::reply::{help_reply, ReplySink};
use crate::Cx;

const ADMIN_FLAGS: u32 = flags::ADMIN | flags::NOSCRIPT | flags::LOADING | flags::STALE;
const ADMIN_ACL: u32 = acl::ADMIN | acl::SLOW | acl::DANGEROUS;
const REPORT_TIPS: &[&str] = &[
    "nondeterministic_output",
    "request_policy:all_nodes",
    "response_policy:special",
];

/// A reporting subcommand's spec.
const fn report(
    name: &'static str,
    arity: i32,
    summary: &'static str,
    handler: crate::cmd::spec::Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags: ADMIN_FLAGS,
        acl: ADMIN_ACL,
        summary,
        since: "2.8.13",
        group: "server",
        complexity: "O(1)",
        tips: REPORT_TIPS,
        handler,
        ..CommandSpec::DEFAULT
    }
}

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "latency",
    arity: -2,
    acl: acl::SLOW,
    summary: "A container for latency diagnostics commands",
    since: "2.8.13",
    group: "server",
    complexity: "Depends on subcommand.",
    subcommands: SUBCOMMANDS,
    ..CommandSpec::DEFAULT
}];

const SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec::help_sub("2.8.13", "server", help),
    report(
        "graph",
        3,
        "Return a latency graph for the event.",
        events::graph,
    ),
    report(
        "history",
        3,
        "Return timestamp-latency samples for the event.",
        events::history,
    ),
    CommandSpec {
        since: "7.0.0",
        complexity: "O(N) where N is the number of commands with latency information being \
                     retrieved.",
        ..report(
            "histogram",
            -2,
            "Return the cumulative distribution of latencies of a subset of commands or all.",
            histogram::histogram,
        )
    },
    report(
        "latest",
        2,
        "Return the latest latency samples for all events.",
        events::latest,
    ),
    CommandSpec {
        tips: &["request_policy:all_nodes", "response_policy:all_succeeded"],
        ..report(
            "reset",
            -2,
            "Reset latency data for one or more events.",
            events::reset,
        )
    },
    report(
        "doctor",
        2,
        "Return a human readable latency analysis report.",
        doctor::doctor,
    ),
];

/// LATENCY HELP.
fn help(_cx: &mut Cx<'_>, _args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    help_reply(
        out,
        "LATENCY",
        &[
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "    If no commands are specified then all histograms are replied.",
        ],
    );
    Ok(())
}
