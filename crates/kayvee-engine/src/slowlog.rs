//! The slow log: commands slower than `slowlog-log-slower-than` microseconds (measured by the
//! shell, see [`crate::Engine::command_timed`]), newest first, at most `slowlog-max-len`
//! entries, each with Redis 7.0's argument truncation (32 arguments, 128 bytes each). The
//! SLOWLOG command is [`crate::cmd::slowlog`].

use crate::argv::Argv;
use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::vec::Vec;
use kayvee_pds::SmallBytes;

/// Arguments an entry keeps (Redis's `SLOWLOG_ENTRY_MAX_ARGC`); the last one left becomes
/// `... (N more arguments)`.
pub const ENTRY_ARGC_MAX: usize = 32;
/// Bytes an argument keeps (`SLOWLOG_ENTRY_MAX_STRING`) before `... (N more bytes)`.
pub const ENTRY_STRING_MAX: usize = 128;

/// One logged command.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Increasing id (never reset by SLOWLOG RESET).
    pub id: u64,
    /// Unix seconds when it was logged.
    pub time_s: i64,
    /// Its duration.
    pub usec: u64,
    /// Its arguments, truncated.
    pub args: Vec<SmallBytes>,
    /// The client's `ip:port`.
    pub addr: String,
    /// The client's name (empty when none).
    pub name: SmallBytes,
}

/// The slow log.
#[derive(Clone, Debug, Default)]
pub struct SlowLog {
    /// Newest first.
    pub entries: VecDeque<Entry>,
    /// The id the next entry gets.
    pub next_id: u64,
}

impl SlowLog {
    /// Whether a command that took `usec` belongs in the log with threshold `slower_than`
    /// (negative = off).
    pub fn wants(slower_than: i64, usec: u64) -> bool {
        slower_than >= 0 && usec >= slower_than as u64
    }

    /// Logs a command, dropping the oldest entries beyond `len_max`.
    pub fn push(&mut self, mut entry: Entry, len_max: usize) {
        entry.id = self.next_id;
        self.next_id += 1;
        self.entries.push_front(entry);
        self.entries.truncate(len_max);
    }
}

/// The arguments as an entry keeps them: at most [`ENTRY_ARGC_MAX`], each at most
/// [`ENTRY_STRING_MAX`] bytes, with Redis's notes for what was cut.
pub fn truncated_args(argv: &Argv<'_>) -> Vec<SmallBytes> {
    let argc = argv.len();
    let kept = if argc > ENTRY_ARGC_MAX {
        ENTRY_ARGC_MAX - 1
    } else {
        argc
    };
    let hidden = redacted(argv);
    let mut args: Vec<SmallBytes> = argv
        .iter()
        .take(kept)
        .enumerate()
        .map(|(i, a)| {
            if hidden.contains(&i) {
                SmallBytes::from_slice(b"(redacted)")
            } else {
                truncated_arg(a)
            }
        })
        .collect();
    if kept < argc {
        let note = alloc::format!("... ({} more arguments)", argc - kept);
        args.push(SmallBytes::from_slice(note.as_bytes()));
    }
    args
}

/// Parameters whose values CONFIG SET does not show (Redis's sensitive configs).
const SENSITIVE_PARAMS: &[&str] = &[
    "masterauth",
    "masteruser",
    "requirepass",
    "tls-key-file-pass",
    "tls-client-key-file-pass",
];

/// The argument indexes Redis 7.0 logs as `(redacted)`: ACL SETUSER's user and rules, the
/// values of sensitive parameters in CONFIG SET, MIGRATE's AUTH / AUTH2 credentials, HELLO's
/// AUTH pair.
pub(crate) fn redacted(argv: &Argv<'_>) -> Vec<usize> {
    let arg = |i: usize| argv.get(i).to_ascii_lowercase();
    let n = argv.len();
    match (arg(0).as_slice(), n > 1) {
        (b"acl", true) if arg(1) == b"setuser" => (2..n).collect(),
        (b"config", true) if arg(1) == b"set" => (2..n)
            .step_by(2)
            .filter(|&i| {
                let name = arg(i);
                SENSITIVE_PARAMS.iter().any(|p| p.as_bytes() == name)
            })
            .map(|i| i + 1)
            .filter(|&i| i < n)
            .collect(),
        (b"migrate", _) => {
            let mut out = Vec::new();
            for i in 6..n {
                match arg(i).as_slice() {
                    b"auth" => out.push(i + 1),
                    b"auth2" => out.extend([i + 1, i + 2]),
                    _ => {}
                }
            }
            out.retain(|&i| i < n);
            out
        }
        (b"hello", _) => (2..n)
            .find(|&i| arg(i) == b"auth")
            .map(|i| (i + 1..(i + 3).min(n)).collect())
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// One argument, cut at [`ENTRY_STRING_MAX`] bytes with `... (N more bytes)` appended.
fn truncated_arg(arg: &[u8]) -> SmallBytes {
    if arg.len() <= ENTRY_STRING_MAX {
        return SmallBytes::from_slice(arg);
    }
    let mut s = arg[..ENTRY_STRING_MAX].to_vec();
    let more = arg.len() - ENTRY_STRING_MAX;
    s.extend_from_slice(alloc::format!("... ({more} more bytes)").as_bytes());
    SmallBytes::from_vec(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::argv::ArgvBuf;
    use alloc::vec;

    fn argv(args: &[Vec<u8>]) -> Vec<SmallBytes> {
        let refs: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
        let buf = ArgvBuf::from_args(refs);
        truncated_args(&buf.argv())
    }

    #[test]
    fn credentials_are_redacted() {
        let shown = |line: &str| -> String {
            let args: Vec<Vec<u8>> = line.split(' ').map(|a| a.as_bytes().to_vec()).collect();
            let got = argv(&args);
            let words: Vec<String> = got
                .iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            words.join(" ")
        };
        assert_eq!(
            shown("acl setuser u +get +set"),
            "acl setuser (redacted) (redacted) (redacted)"
        );
        assert_eq!(
            shown("CONFIG SET hz 10 masterauth pw"),
            "CONFIG SET hz 10 masterauth (redacted)"
        );
        assert_eq!(
            shown("migrate h 1 k 0 5 AUTH2 u p"),
            "migrate h 1 k 0 5 AUTH2 (redacted) (redacted)"
        );
        assert_eq!(shown("acl list"), "acl list");
    }

    #[test]
    fn arguments_are_cut_as_redis_cuts_them() {
        let many: Vec<Vec<u8>> = (0..41)
            .map(|i| alloc::format!("k{i}").into_bytes())
            .collect();
        let got = argv(&many);
        assert_eq!(got.len(), 32);
        assert_eq!(&got[30][..], b"k30");
        assert_eq!(&got[31][..], b"... (10 more arguments)");
        assert_eq!(argv(&many[..32]).len(), 32);
        assert_eq!(&argv(&many[..33])[31][..], b"... (2 more arguments)");
        let long = argv(&[b"set".to_vec(), vec![b'x'; 128], vec![b'y'; 129]]);
        assert_eq!(long[1].len(), 128);
        let mut want = vec![b'y'; 128];
        want.extend_from_slice(b"... (1 more bytes)");
        assert_eq!(&long[2][..], &want[..]);
    }

    #[test]
    fn log_is_bounded_and_newest_first() {
        let mut log = SlowLog::default();
        for usec in 0..5 {
            let e = Entry {
                id: 0,
                time_s: 1,
                usec,
                args: Vec::new(),
                addr: String::new(),
                name: SmallBytes::new(),
            };
            log.push(e, 3);
        }
        let ids: Vec<u64> = log.entries.iter().map(|e| e.id).collect();
        assert_eq!(ids, [4, 3, 2]);
        assert!(SlowLog::wants(0, 0));
        assert!(!SlowLog::wants(-1, 1 << 40));
        assert!(!SlowLog::wants(10, 9));
    }
}
