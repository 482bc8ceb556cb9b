//! Command-line options, as Xen's xenstored (tools/xenstore/xenstored_core.c) spells them
//! where they apply to a socket-only daemon, plus `--conflict-policy`.

use std::path::PathBuf;

use kayvee_xenstore::control::quota_set;
use kayvee_xenstore::{ConflictPolicy, XsConfig};

/// Parsed options.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Engine settings.
    pub config: XsConfig,
    /// Stay in the foreground.
    pub no_fork: bool,
    /// Write the daemon's pid here.
    pub pid_file: Option<PathBuf>,
    /// Log every request and reply here.
    pub trace_file: Option<PathBuf>,
    /// Log connections and errors to stderr.
    pub verbose: bool,
    /// The listening socket.
    pub socket: PathBuf,
    /// Serve guests of the cross-process test Xen under this directory (`--test-xen`).
    pub test_xen: Option<PathBuf>,
}

/// The usage text.
pub const USAGE: &str = "Usage: kayvee-xenstored [options]
  -F, --pid-file <file>      write the daemon's pid to <file>
  -N, --no-fork              stay in the foreground
  -D, --no-domain-init       start with an empty tree (no /tool/xenstored, /local)
  -T, --trace-file <file>    trace requests and replies to <file>
  -E, --entry-nb <nb>        nodes per domain (default 1000)
  -S, --entry-size <size>    largest node value (default 2048)
  -W, --watch-nb <nb>        watches per domain (default 128)
  -t, --transaction <nb>     transactions per domain (default 10)
  -A, --perm-nb <nb>         permissions per node (default 5)
  -M, --path-max <chars>     longest path (default 2048)
  -Q, --quota <what>=<nb>    set a quota: nodes, watches, transactions, outstanding,
                             transaction-nodes, memory, node-size, path-max, permissions
  -q, --quota-soft memory=<nb>  soft memory quota (only reported when crossed)
      --test-xen <dir>       serve guests of the test Xen whose domains live under <dir>
                             (pages as files, event channels as FIFOs; for tests and benchmarks)
  -V, --verbose              log to stderr
      --conflict-policy <p>  coalesce (default), per-node, abort-on-any-commit
  -h, --help                 this text
Socket: $XENSTORED_PATH, else $XENSTORED_RUNDIR/socket, else /var/run/xenstored/socket.";

/// The socket path from the environment, as libxenstore and cxenstored choose it.
pub fn socket_path(path: Option<String>, rundir: Option<String>) -> PathBuf {
    match (path, rundir) {
        (Some(p), _) if !p.is_empty() => PathBuf::from(p),
        (_, Some(d)) if !d.is_empty() => PathBuf::from(d).join("socket"),
        _ => PathBuf::from("/var/run/xenstored/socket"),
    }
}

/// Set a numeric quota from an option value.
fn set(o: &mut Options, name: &str, value: &str) -> Result<(), String> {
    quota_set(&mut o.config.quota, name.as_bytes(), value.as_bytes())
        .map_err(|_| format!("bad value for {name}: {value}"))
}

/// Parse arguments (without the program name). `Ok(None)` means help was asked for.
pub fn parse(args: &[String], socket: PathBuf) -> Result<Option<Options>, String> {
    let mut o = Options {
        socket,
        ..Options::default()
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or(format!("{flag} needs a value"))
        };
        match flag {
            "-h" | "--help" => return Ok(None),
            "-N" | "--no-fork" => o.no_fork = true,
            "-D" | "--no-domain-init" => o.config.no_domain_init = true,
            "-V" | "--verbose" => o.verbose = true,
            "-F" | "--pid-file" => o.pid_file = Some(PathBuf::from(value()?)),
            "-T" | "--trace-file" => o.trace_file = Some(PathBuf::from(value()?)),
            "--test-xen" => o.test_xen = Some(PathBuf::from(value()?)),
            "-E" | "--entry-nb" => set(&mut o, "nodes", &value()?)?,
            "-S" | "--entry-size" => set(&mut o, "node-size", &value()?)?,
            "-W" | "--watch-nb" => set(&mut o, "watches", &value()?)?,
            "-t" | "--transaction" => set(&mut o, "transactions", &value()?)?,
            "-A" | "--perm-nb" => set(&mut o, "permissions", &value()?)?,
            "-M" | "--path-max" => set(&mut o, "path-max", &value()?)?,
            "-Q" | "--quota" => {
                let v = value()?;
                let (name, n) = v
                    .split_once('=')
                    .ok_or(format!("--quota needs what=nb: {v}"))?;
                set(&mut o, name, n)?;
            }
            "-q" | "--quota-soft" => {
                let v = value()?;
                let n = v
                    .strip_prefix("memory=")
                    .ok_or(format!("--quota-soft takes memory=nb: {v}"))?;
                o.config.quota.memory_soft = n.parse().map_err(|_| format!("bad value {n}"))?;
            }
            "--conflict-policy" => {
                let v = value()?;
                o.config.policy = ConflictPolicy::parse(&v).ok_or(format!("unknown policy {v}"))?;
            }
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(Some(o))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn options_as_xenstored() {
        let o = parse(
            &args(
                "-N --entry-nb 5 -W 3 --quota node-size=99 --conflict-policy=per-node -D \
                -Q transaction-nodes=9 -Q memory=4096 -q memory=2048",
            ),
            PathBuf::new(),
        )
        .unwrap()
        .unwrap();
        assert!(o.no_fork && o.config.no_domain_init);
        assert_eq!(
            (
                o.config.quota.nodes,
                o.config.quota.watches,
                o.config.quota.node_size
            ),
            (5, 3, 99)
        );
        assert_eq!(o.config.policy, ConflictPolicy::PerNode);
        let q = o.config.quota;
        assert_eq!(
            (q.transaction_nodes, q.memory, q.memory_soft),
            (9, 4096, 2048)
        );
        assert!(parse(&args("-q nodes=5"), PathBuf::new()).is_err());
        assert!(parse(&args("--bogus"), PathBuf::new()).is_err());
        assert!(parse(&args("--entry-nb x"), PathBuf::new()).is_err());
        assert!(parse(&args("--help"), PathBuf::new()).unwrap().is_none());
    }

    #[test]
    fn socket_from_environment() {
        assert_eq!(
            socket_path(Some("/x/s".into()), Some("/r".into())),
            PathBuf::from("/x/s")
        );
        assert_eq!(
            socket_path(None, Some("/r".into())),
            PathBuf::from("/r/socket")
        );
        assert_eq!(
            socket_path(None, None),
            PathBuf::from("/var/run/xenstored/socket")
        );
    }
}
