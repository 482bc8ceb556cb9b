//! Logging: `tracing` events written in Redis's log line format
//! (`pid:M 21 Nov 2026 12:50:10.420 * message`) to the `logfile` or standard output, filtered by
//! `loglevel`.
//!
//! Redis's levels map onto `tracing`'s: `debug` = TRACE (`.`), `verbose` = DEBUG (`-`),
//! `notice` = INFO (`*`), `warning` = WARN and ERROR (`#`). So `tracing::warn!` is what Redis
//! logs with `#`, `tracing::info!` what it logs with `*`.

use std::fmt;
use std::fs::OpenOptions;
use std::sync::Mutex;
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::writer::BoxMakeWriter;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// A bad `loglevel` or an unopenable `logfile`.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// Can't open the log file 'PATH': OS error
    #[error("Can't open the log file '{path}': {source}")]
    Open {
        /// The `logfile` setting.
        path: String,
        /// Why it failed.
        source: std::io::Error,
    },
}

/// The `tracing` level filter for a Redis `loglevel` (unknown names mean `notice`; the config
/// table has already rejected them).
pub fn level_filter(loglevel: &str) -> LevelFilter {
    match loglevel {
        "debug" => LevelFilter::TRACE,
        "verbose" => LevelFilter::DEBUG,
        "warning" => LevelFilter::WARN,
        "nothing" => LevelFilter::OFF,
        _ => LevelFilter::INFO,
    }
}

/// Installs the global subscriber: lines to `logfile` (appended) or stdout when it is empty.
/// Returns the log file's descriptor (`None` for stdout), for the crash reporter.
pub fn init(loglevel: &str, logfile: &str) -> Result<Option<i32>, LogError> {
    let mut fd = None;
    let writer = if logfile.is_empty() {
        BoxMakeWriter::new(std::io::stdout)
    } else {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(logfile)
            .map_err(|source| LogError::Open {
                path: logfile.into(),
                source,
            })?;
        fd = Some(std::os::fd::AsRawFd::as_raw_fd(&file));
        BoxMakeWriter::new(Mutex::new(file))
    };
    tracing_subscriber::fmt()
        .with_max_level(level_filter(loglevel))
        .with_writer(writer)
        .event_format(RedisFormat {
            pid: std::process::id(),
        })
        .init();
    Ok(fd)
}

/// `redis.log`'s lines (the engine's script log): Redis's levels 0 debug, 1 verbose, 2 notice,
/// 3 warning, as this log's (`.`, `-`, `*`, `#`).
pub fn script_line(level: u8, message: &[u8]) {
    let text = String::from_utf8_lossy(message);
    match level {
        0 => tracing::trace!("{text}"),
        1 => tracing::debug!("{text}"),
        2 => tracing::info!("{text}"),
        _ => tracing::warn!("{text}"),
    }
}

/// Formats events as Redis log lines.
struct RedisFormat {
    pid: u32,
}

impl<S, N> FormatEvent<S, N> for RedisFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mark = level_mark(*event.metadata().level());
        write!(writer, "{}:M {} {} ", self.pid, timestamp(), mark)?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

/// Redis's level character.
fn level_mark(level: Level) -> char {
    match level {
        Level::TRACE => '.',
        Level::DEBUG => '-',
        Level::INFO => '*',
        _ => '#',
    }
}

/// Local time as `21 Nov 2026 12:50:10.420`.
fn timestamp() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs() as libc::time_t;
    // SAFETY: `tm` is plain old data; all-zero is a valid value.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid for the call; `localtime_r` is the thread-safe variant
    // and writes only into `tm`.
    if unsafe { libc::localtime_r(&secs, &mut tm) }.is_null() {
        return format!("{}", now.as_secs());
    }
    format_tm(&tm, now.subsec_millis())
}

/// Formats a broken-down time the way Redis's log does.
fn format_tm(tm: &libc::tm, ms: u32) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS[tm.tm_mon.clamp(0, 11) as usize];
    format!(
        "{:02} {} {} {:02}:{:02}:{:02}.{:03}",
        tm.tm_mday,
        month,
        tm.tm_year + 1900,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        ms
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_levels_map_to_tracing_levels() {
        assert_eq!(level_filter("debug"), LevelFilter::TRACE);
        assert_eq!(level_filter("verbose"), LevelFilter::DEBUG);
        assert_eq!(level_filter("notice"), LevelFilter::INFO);
        assert_eq!(level_filter("warning"), LevelFilter::WARN);
        assert_eq!(level_filter("nothing"), LevelFilter::OFF);
        assert_eq!(level_mark(Level::WARN), '#');
        assert_eq!(level_mark(Level::INFO), '*');
        assert_eq!(level_mark(Level::DEBUG), '-');
        assert_eq!(level_mark(Level::TRACE), '.');
    }

    #[test]
    fn time_reads_like_redis() {
        // SAFETY: all-zero `tm` is valid; fields set below.
        let mut tm: libc::tm = unsafe { std::mem::zeroed() };
        tm.tm_mday = 1;
        tm.tm_mon = 10;
        tm.tm_year = 126;
        tm.tm_hour = 2;
        tm.tm_min = 5;
        tm.tm_sec = 9;
        assert_eq!(format_tm(&tm, 42), "01 Nov 2026 02:05:09.042");
    }
}
