//! The suite's `src/redis-server` for kayvee-server: `cargo xtask` runs this as the hidden task
//! `redis-suite-server <kayvee-server> <redis-server arguments...>`. It exec()s kayvee-server in
//! its own process, so the pid the suite holds is the server's.
//!
//! Kayvee takes every directive of the suite's configuration files, so they are passed on
//! unchanged: a directive Kayvee lacks and a test sets on purpose makes the server refuse to
//! start, and that test fails visibly.
//!
//! The suite's `wait_server_started` looks for the ` PID: ` line of Redis's logo
//! (`always-show-logo yes`): kayvee-server prints its own logo, with that line, once its port is
//! bound, as Redis does.

use std::os::unix::process::CommandExt;
use std::process::Command;

/// Runs the wrapper: `args` = [kayvee-server path, redis-server arguments...]. Only returns on
/// error (exec replaces the process).
pub fn exec(args: &[String]) -> Result<(), String> {
    let (bin, rest) = args
        .split_first()
        .ok_or("redis-suite-server: no server path")?;
    let is_run = !matches!(
        rest.first().map(String::as_str),
        Some("-v" | "--version" | "-h" | "--help")
    );
    if is_run {
        // A configuration kayvee-server refuses: the suite waits for the logo's PID line before
        // it looks at a dead server, so the refusal is printed with a PID line of the wrapper's
        // (the suite then reports "Can't start the Redis server" with this output at once).
        let check = Command::new(bin)
            .args(rest)
            .env("KAYVEE_CHECK_CONFIG", "1")
            .output()
            .map_err(|e| format!("cannot run {bin}: {e}"))?;
        if !check.status.success() {
            print!("{}", String::from_utf8_lossy(&check.stdout));
            println!("{}", String::from_utf8_lossy(&check.stderr).trim_end());
            println!(
                "redis-suite wrapper: the server refused its configuration, PID: {}",
                std::process::id()
            );
            std::process::exit(1);
        }
        // A busy port is reported here, in Redis's words, before the server starts (the suite
        // then retries with another port).
        let text = rest.first().and_then(|f| std::fs::read_to_string(f).ok());
        if let Some(port) = port_of(text.as_deref().unwrap_or(""), rest) {
            if let Err(e) = std::net::TcpListener::bind(("127.0.0.1", port)) {
                if e.kind() == std::io::ErrorKind::AddrInUse {
                    println!("Failed listening on port {port} (tcp), aborting.");
                    std::process::exit(1);
                }
            }
        }
    }
    let mut server = Command::new(bin);
    if let Some(name) = std::env::var_os("KAYVEE_SUITE_ARGV0") {
        // The suite's `src/redis-server`, as `{title}` of the process title shows it.
        server.arg0(name).env_remove("KAYVEE_SUITE_ARGV0");
    }
    let err = server.args(rest).exec();
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
    fn port_from_file_then_options() {
        let args: Vec<String> = ["c", "--port", "7"].iter().map(|s| s.to_string()).collect();
        assert_eq!(port_of("port 5\nbind x\n", &args), Some(7));
        assert_eq!(port_of("port 5\n", &[]), Some(5));
        assert_eq!(port_of("port 0\n", &[]), None);
    }
}
