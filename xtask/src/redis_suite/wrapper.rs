//! The suite's `src/redis-server` for kayvee-server: `cargo xtask` runs this as the hidden task
//! `redis-suite-server <kayvee-server> <redis-server arguments...>`. It translates what
//! kayvee-server cannot take and exec()s kayvee-server in its own process, so the pid the suite
//! holds is the server's.
//!
//! Translation (docs/redis-suite.md lists it too):
//! - directives in [`DROPPED`] are removed from the config file and the command line. They have
//!   no counterpart in Kayvee and the suite's default configuration sets them;
//! - everything else is passed on unchanged, so a directive Kayvee lacks and a test sets on
//!   purpose makes the server refuse to start, and that test fails visibly.
//!
//! The suite's `wait_server_started` looks for the ` PID: ` line of Redis's logo
//! (`always-show-logo yes`): kayvee-server prints its own logo, with that line, once its port is
//! bound, as Redis does.

use std::os::unix::process::CommandExt;
use std::process::Command;

/// Directives the wrapper removes, with why each is harmless to drop.
pub const DROPPED: &[(&str, &str)] = &[
    (
        "activerehashing",
        "no incremental rehashing (tries never rehash)",
    ),
    ("enable-module-command", "no modules"),
    ("enable-protected-configs", "no protected configs"),
    ("latency-monitor-threshold", "no LATENCY monitor yet"),
    ("propagation-error-behavior", "no replication or scripting"),
    ("repl-diskless-sync-delay", "no replication"),
    ("slave-serve-stale-data", "no replication"),
    ("replica-serve-stale-data", "no replication"),
];

/// Whether `name` (lower case, no `--`) is dropped.
fn dropped(name: &str) -> bool {
    DROPPED.iter().any(|(d, _)| d.eq_ignore_ascii_case(name))
}

/// The config file's text without the dropped directives (each kept as a comment).
pub fn translate_file(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        if !name.starts_with('#') && dropped(name) {
            out.push_str("# dropped by the redis-suite wrapper: ");
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The command-line arguments without the dropped `--name value...` options.
pub fn translate_args(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut skipping = false;
    for arg in args {
        if let Some(name) = arg.strip_prefix("--") {
            skipping = dropped(name);
        }
        if !skipping {
            out.push(arg.clone());
        }
    }
    out
}

/// Runs the wrapper: `args` = [kayvee-server path, redis-server arguments...]. Only returns on
/// error (exec replaces the process).
pub fn exec(args: &[String]) -> Result<(), String> {
    let (bin, rest) = args
        .split_first()
        .ok_or("redis-suite-server: no server path")?;
    let mut rest = rest.to_vec();
    if let Some(file) = rest.first().filter(|a| !a.starts_with('-')).cloned() {
        if let Ok(text) = std::fs::read_to_string(&file) {
            let translated = format!("{file}.kayvee");
            std::fs::write(&translated, translate_file(&text))
                .map_err(|e| format!("{translated}: {e}"))?;
            rest[0] = translated;
        }
    }
    let rest = translate_args(&rest);
    let is_run = !matches!(
        rest.first().map(String::as_str),
        Some("-v" | "--version" | "-h" | "--help")
    );
    if is_run {
        // A busy port is reported here, in Redis's words, before the server starts (the suite
        // then retries with another port).
        let text = rest.first().and_then(|f| std::fs::read_to_string(f).ok());
        if let Some(port) = port_of(text.as_deref().unwrap_or(""), &rest) {
            if let Err(e) = std::net::TcpListener::bind(("127.0.0.1", port)) {
                if e.kind() == std::io::ErrorKind::AddrInUse {
                    println!("Failed listening on port {port} (tcp), aborting.");
                    std::process::exit(1);
                }
            }
        }
    }
    let err = Command::new(bin).args(&rest).exec();
    Err(format!("cannot exec {bin}: {err}"))
}

/// The TCP port the server will listen on: the last `port` of the file, then `--port`.
fn port_of(file: &str, args: &[String]) -> Option<u16> {
    let mut port = None;
    for line in file.lines() {
        let mut w = line.split_whitespace();
        if w.next() == Some("port") {
            port = w.next().and_then(|p| p.parse().ok());
        }
    }
    for pair in args.windows(2) {
        if pair[0] == "--port" {
            port = pair[1].parse().ok();
        }
    }
    port.filter(|&p| p != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_lines_dropped_as_comments() {
        let got = translate_file("port 1\nactiverehashing yes\n# enable-module-command yes\n");
        assert_eq!(
            got,
            "port 1\n# dropped by the redis-suite wrapper: activerehashing yes\n# enable-module-command yes\n"
        );
    }

    #[test]
    fn port_from_file_then_options() {
        let args: Vec<String> = ["c", "--port", "7"].iter().map(|s| s.to_string()).collect();
        assert_eq!(port_of("port 5\nbind x\n", &args), Some(7));
        assert_eq!(port_of("port 5\n", &[]), Some(5));
        assert_eq!(port_of("port 0\n", &[]), None);
    }

    #[test]
    fn options_dropped_with_their_values() {
        let args: Vec<String> = [
            "c.conf",
            "--activerehashing",
            "no",
            "--save",
            "",
            "--port",
            "7",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            translate_args(&args),
            ["c.conf", "--save", "", "--port", "7"]
        );
    }
}
