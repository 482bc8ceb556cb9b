//! LATENCY LATEST, HISTORY, RESET and GRAPH: the monitor's events.

use crate::argv::Argv;
use crate::error::{CmdResult, Error};
use crate::latency::Series;
use crate::reply::ReplySink;
use crate::Cx;
use alloc::string::String;
use core::fmt::Write;

/// LATENCY LATEST: for each event, its name, the time and latency of its last sample, and
/// its worst latency.
pub(super) fn latest(cx: &mut Cx<'_>, _: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let events = &cx.core.latency.events;
    out.array(events.len());
    for (name, series) in events {
        let (time, ms) = series.samples.back().copied().unwrap_or_default();
        out.array(4);
        out.bulk(name.as_bytes());
        out.int(time as i64);
        out.int(ms as i64);
        out.int(series.max as i64);
    }
    Ok(())
}

/// LATENCY HISTORY event: its samples, oldest first (none for an unknown event).
pub(super) fn history(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let name = String::from_utf8_lossy(args.get(2));
    let Some(series) = cx.core.latency.events.get(name.as_ref()) else {
        out.array(0);
        return Ok(());
    };
    out.array(series.samples.len());
    for &(time, ms) in &series.samples {
        out.array(2);
        out.int(time as i64);
        out.int(ms as i64);
    }
    Ok(())
}

/// LATENCY RESET [event...]: forgets every event, or the named ones; answers how many went.
pub(super) fn reset(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let events = &mut cx.core.latency.events;
    let removed = if args.len() == 2 {
        let n = events.len();
        events.clear();
        n
    } else {
        args.iter()
            .skip(2)
            .filter(|a| events.remove(String::from_utf8_lossy(a).as_ref()).is_some())
            .count()
    };
    out.int(removed as i64);
    Ok(())
}

/// Height of the graph's bars, in rows.
const GRAPH_ROWS: u64 = 4;

/// LATENCY GRAPH event: the samples as a bar chart, one column a sample, oldest on the left,
/// with the age of each sample written vertically below it (as Redis's graph shows).
pub(super) fn graph(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let name = String::from_utf8_lossy(args.get(2)).into_owned();
    let series = cx
        .core
        .latency
        .events
        .get(&name)
        .filter(|s| !s.samples.is_empty())
        .ok_or_else(|| {
            let shown = crate::util::sanitize(args.get(2), 128);
            Error::msg(alloc::format!(
                "ERR No samples available for event '{shown}'"
            ))
        })?;
    let text = render_graph(&name, series, cx.now.ms() / 1000);
    out.verbatim("txt", text.as_bytes());
    Ok(())
}

/// The graph's text.
fn render_graph(name: &str, series: &Series, now_s: u64) -> String {
    let high = series.samples.iter().map(|s| s.1).max().unwrap_or(0);
    let low = series.samples.iter().map(|s| s.1).min().unwrap_or(0);
    let mut t = String::new();
    let _ = writeln!(
        t,
        "{name} - high {high} ms, low {low} ms (all time high {} ms)",
        series.max
    );
    t.push_str(&"-".repeat(80));
    t.push('\n');
    for row in (1..=GRAPH_ROWS).rev() {
        for &(_, ms) in &series.samples {
            // A sample fills the rows up to its share of the highest.
            let filled = if high == 0 {
                0
            } else {
                (ms * GRAPH_ROWS).div_ceil(high)
            };
            t.push(if filled >= row { '#' } else { ' ' });
        }
        t.push('\n');
    }
    // The age of each sample ("12s", "3m"...), written top to bottom.
    let ages: alloc::vec::Vec<String> = series
        .samples
        .iter()
        .map(|&(time, _)| {
            let age = now_s.saturating_sub(time);
            match age {
                a if a < 60 => alloc::format!("{a}s"),
                a if a < 3600 => alloc::format!("{}m", a / 60),
                a => alloc::format!("{}h", a / 3600),
            }
        })
        .collect();
    let depth = ages.iter().map(String::len).max().unwrap_or(0);
    for i in 0..depth {
        for a in &ages {
            t.push(char::from(*a.as_bytes().get(i).unwrap_or(&b' ')));
        }
        t.push('\n');
    }
    t
}
