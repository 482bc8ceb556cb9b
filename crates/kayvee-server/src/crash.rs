//! Crash reports: when the process dies of a fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
//! SIGABRT) or the loop panics, a bug report goes to the log before it dies, as Redis writes
//! its own ("crashed by signal: N"), so an operator (and Redis's `integration/logging` unit)
//! finds why the server went away.
//!
//! The signal handler may only call async-signal-safe functions: it formats into a buffer on
//! its stack and writes it with `write(2)` to a descriptor kept from start-up (a duplicate of
//! the log file's, or standard output), then lets the signal take its default action
//! (`SA_RESETHAND` and a re-raise), so the exit status and any core dump stay the signal's.

use std::sync::atomic::{AtomicI32, Ordering};

/// Where reports go: a descriptor owned by this module for the process's life.
static LOG_FD: AtomicI32 = AtomicI32::new(libc::STDOUT_FILENO);

/// The signals that mean the process is about to die of a bug.
const FATAL: [libc::c_int; 5] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGABRT,
];

/// Installs the handlers and the panic hook; reports go to `log_fd` (duplicated, so the
/// caller may close its own), or standard output when `None`.
pub fn install(log_fd: Option<i32>) {
    if let Some(fd) = log_fd {
        // SAFETY: dup has no memory-safety preconditions; a failure (-1) is checked.
        let dup = unsafe { libc::dup(fd) };
        if dup >= 0 {
            LOG_FD.store(dup, Ordering::Relaxed);
        }
    }
    for sig in FATAL {
        // SAFETY: `sigaction` is plain old data (all-zero is valid); the handler has the
        // `SA_SIGINFO` signature and only calls async-signal-safe functions.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_fatal_signal as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_RESETHAND | libc::SA_NODEFER;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        tracing::error!(
            "=== KAYVEE BUG REPORT START === Kayvee {} panicked: {info}",
            crate::config::VERSION
        );
        default_hook(info);
    }));
}

/// DEBUG SEGFAULT: dies of SIGSEGV as a crashing server would (the handler writes the report).
pub fn crash_now() -> ! {
    tracing::warn!("DEBUG SEGFAULT: crashing on purpose");
    // SAFETY: raise has no memory-safety preconditions; SIGSEGV's handler (or the default
    // action) ends the process.
    unsafe {
        libc::raise(libc::SIGSEGV);
    }
    std::process::abort()
}

/// The fatal-signal handler: writes the report, then dies of the same signal.
extern "C" fn on_fatal_signal(
    sig: libc::c_int,
    info: *mut libc::siginfo_t,
    _ctx: *mut libc::c_void,
) {
    let mut buf = Report::new();
    buf.push(b"\n\n=== KAYVEE BUG REPORT START: Cut & paste starting from here ===\n");
    // SAFETY: getpid is async-signal-safe.
    buf.num(i64::from(unsafe { libc::getpid() }));
    buf.push(b":M # Kayvee ");
    buf.push(crate::config::VERSION.as_bytes());
    buf.push(b" crashed by signal: ");
    buf.num(i64::from(sig));
    if !info.is_null() {
        buf.push(b", si_code: ");
        // SAFETY: the kernel passes a valid siginfo with SA_SIGINFO.
        buf.num(i64::from(unsafe { (*info).si_code }));
    }
    buf.push(b"\n=== KAYVEE BUG REPORT END. Make sure to include from START to END. ===\n\n");
    let fd = LOG_FD.load(Ordering::Relaxed);
    // SAFETY: write and raise are async-signal-safe; the buffer outlives the call. The handler
    // was reset to the default action (SA_RESETHAND), so the raise ends the process.
    unsafe {
        libc::write(fd, buf.bytes.as_ptr().cast(), buf.len);
        libc::raise(sig);
    }
}

/// A fixed buffer on the stack (no allocation inside a signal handler).
struct Report {
    bytes: [u8; 512],
    len: usize,
}

impl Report {
    fn new() -> Self {
        Report {
            bytes: [0; 512],
            len: 0,
        }
    }

    fn push(&mut self, s: &[u8]) {
        let n = s.len().min(self.bytes.len() - self.len);
        self.bytes[self.len..self.len + n].copy_from_slice(&s[..n]);
        self.len += n;
    }

    fn num(&mut self, v: i64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        let mut n = v.unsigned_abs();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        if v < 0 {
            self.push(b"-");
        }
        self.push(&digits[i..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_formats_numbers_and_truncates() {
        let mut r = Report::new();
        r.num(0);
        r.push(b" ");
        r.num(-42);
        r.push(b" ");
        r.num(i64::MIN);
        assert_eq!(&r.bytes[..r.len], b"0 -42 -9223372036854775808");
        r.push(&[b'x'; 1000]);
        assert_eq!(r.len, 512);
    }
}
