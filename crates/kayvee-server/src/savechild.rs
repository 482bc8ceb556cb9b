//! The save-writer child: background saves (BGSAVE, save points, the AOF rewrite's base) write
//! their file from a child process, as Redis's forked child does, so tools and tests that look
//! for the save's child (`pgrep -P <server>`, `kill -9`, `temp-<pid>.rdb`, the child's
//! `oom_score_adj`) find one.
//!
//! Nothing is forked: the snapshot is O(1) in the server and a thread of the server still
//! serialises it. The child is this same binary started again (`/proc/self/exe`, spawned
//! without copying the server's memory) with [`MODE_ARG`] first; `main` hands it to [`run`]
//! before anything else. It creates `temp-<its pid>.rdb` (or `temp-rewriteaof-bg-<its
//! pid>.aof`) in the directory it is given, copies its stdin (a pipe from the serialising
//! thread) into it, fsyncs it and exits 0 at the end of the input.
//!
//! The thread owns the child's life: it writes into the pipe ([`Spool`]), closes it, waits for
//! the exit and, on success only, renames the file over its final name and fsyncs the directory
//! ([`write_with`]), so a save is complete only after fsync and rename, as before. A child that
//! dies (SIGKILL, a full disk) breaks the pipe: the thread's next write fails with EPIPE, a
//! pause (`rdb-key-save-delay`) wakes at once (it polls the pipe), the thread reaps the child
//! and removes its temporary file, and the loop hears [`Died`]. The loop only ever kills the
//! child ([`ChildRef::kill`]: SHUTDOWN, FLUSHALL, the AOF turned off); a reaped child is never
//! signalled, so a recycled pid is safe.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitCode, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The first argument of a save-writer child.
pub const MODE_ARG: &str = "--save-writer";

/// The longest a pause sleeps before it looks at the stop flag again.
const PAUSE_SLICE: Duration = Duration::from_millis(20);

/// The pipe's size asked for (the default 64 KiB costs a wakeup of the child per 64 KiB).
const PIPE_BYTES: libc::c_int = 1 << 20;

/// What a child writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An RDB file (BGSAVE, save points).
    Rdb,
    /// The AOF rewrite's new base.
    AofRewrite,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Rdb => "rdb",
            Kind::AofRewrite => "aof",
        }
    }

    fn parse(word: &str) -> Option<Kind> {
        [Kind::Rdb, Kind::AofRewrite]
            .into_iter()
            .find(|k| k.word() == word)
    }

    /// The child's process name (`{title}` of `proc-title-template`), after Redis's
    /// `redis-rdb-bgsave` and `redis-aof-rewrite`.
    pub fn title(self) -> &'static str {
        match self {
            Kind::Rdb => "kayvee-rdb-bgsave",
            Kind::AofRewrite => "kayvee-aof-rewrite",
        }
    }

    /// The temporary file of the child with this pid, named as Redis's child names it.
    pub fn temp_name(self, pid: u32) -> String {
        match self {
            Kind::Rdb => format!("temp-{pid}.rdb"),
            Kind::AofRewrite => format!("temp-rewriteaof-bg-{pid}.aof"),
        }
    }
}

/// How the child is to present itself: its title (None: `set-proc-title no`) and the
/// `oom_score_adj` it writes (None: `oom-score-adj no`).
#[derive(Default)]
pub struct Setup {
    pub title: Option<String>,
    pub oom_score: Option<i64>,
}

/// The loop's hold on a running child, to kill it; the thread that writes to it reaps it.
#[derive(Clone)]
pub struct ChildRef(Arc<Mutex<Child>>);

impl ChildRef {
    fn lock(&self) -> std::sync::MutexGuard<'_, Child> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sends SIGKILL, unless the child was reaped already (std then sends nothing).
    pub fn kill(&self) {
        let _ = self.lock().kill();
    }

    /// The child's pid.
    pub fn id(&self) -> u32 {
        self.lock().id()
    }

    /// Waits for the child to end and reaps it. The wait itself does not reap (`WNOWAIT`) and
    /// holds no lock, so [`ChildRef::kill`] meanwhile still signals the right process.
    fn reap(&self) -> io::Result<ExitStatus> {
        let pid = self.id() as libc::id_t;
        loop {
            // SAFETY: `info` is a plain struct the kernel fills; the pid is our unreaped child.
            let rc = unsafe {
                let mut info: libc::siginfo_t = std::mem::zeroed();
                libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOWAIT)
            };
            if rc == 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                break;
            }
        }
        self.lock().wait()
    }
}

/// A child that did not end with exit code 0.
#[derive(Debug)]
pub struct Died(pub ExitStatus);

impl std::fmt::Display for Died {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the save-writer child ended: {}", self.0)
    }
}

impl std::error::Error for Died {}

/// The signal that killed the child, if `e` says a child was killed.
pub fn killed_by(e: &io::Error) -> Option<i32> {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<Died>())
        .and_then(|d| d.0.signal())
}

/// Where a save's bytes go, with the pause after each key (`rdb-key-save-delay`).
pub trait Sink: Write {
    /// Sleeps `us` microseconds, or fails at once when the save is to stop.
    fn pause(&mut self, us: u64) -> io::Result<()>;
}

impl Sink for Spool {
    fn pause(&mut self, us: u64) -> io::Result<()> {
        Spool::pause(self, us)
    }
}

/// Where a save's bytes go: a child's pipe, or a file of this process (SAVE, and when no child
/// can be started). Writes fail once `stop` is set.
pub struct Spool {
    out: Out,
    stop: Arc<AtomicBool>,
    temp: PathBuf,
}

enum Out {
    File(io::BufWriter<File>),
    Child { pipe: ChildStdin, child: ChildRef },
}

impl Spool {
    /// Writes into the file `temp` (created now) from this process.
    pub fn direct(temp: PathBuf, stop: Arc<AtomicBool>) -> io::Result<Spool> {
        let file = File::create(&temp)?;
        Ok(Spool {
            out: Out::File(io::BufWriter::with_capacity(128 * 1024, file)),
            stop,
            temp,
        })
    }

    /// Starts a child writing a `kind` file in `dir`; returns the spool and the loop's hold
    /// on the child. The child exists when this returns (std waits for its exec).
    pub fn child(
        kind: Kind,
        dir: &Path,
        stop: Arc<AtomicBool>,
        setup: &Setup,
    ) -> io::Result<(Spool, ChildRef)> {
        let mut child = Command::new("/proc/self/exe")
            .arg0(kind.title())
            .arg(MODE_ARG)
            .arg(kind.word())
            .arg(dir)
            .arg(setup.oom_score.map_or("-".into(), |s| s.to_string()))
            .arg(setup.title.as_deref().unwrap_or(""))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?;
        let pipe = child.stdin.take().expect("stdin is piped");
        // SAFETY: a plain fcntl on a descriptor we own; failure only keeps the default size.
        unsafe {
            libc::fcntl(pipe.as_raw_fd(), libc::F_SETPIPE_SZ, PIPE_BYTES);
        }
        let temp = dir.join(kind.temp_name(child.id()));
        let child = ChildRef(Arc::new(Mutex::new(child)));
        let spool = Spool {
            out: Out::Child {
                pipe,
                child: child.clone(),
            },
            stop,
            temp,
        };
        Ok((spool, child))
    }

    fn check_stop(&self) -> io::Result<()> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(io::Error::other("stopped"));
        }
        Ok(())
    }

    /// Sleeps `us` microseconds (`rdb-key-save-delay`), in slices that end early when the
    /// save is stopped or the child is gone (the pipe reports an error once no reader is left).
    pub fn pause(&mut self, us: u64) -> io::Result<()> {
        self.check_stop()?;
        if us == 0 {
            return Ok(());
        }
        let end = Instant::now() + Duration::from_micros(us);
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            let slice = left.min(PAUSE_SLICE);
            match &self.out {
                Out::Child { pipe, .. } if slice >= Duration::from_millis(1) => {
                    let mut fds = libc::pollfd {
                        fd: pipe.as_raw_fd(),
                        events: 0,
                        revents: 0,
                    };
                    // SAFETY: one valid pollfd on a descriptor we own.
                    unsafe { libc::poll(&mut fds, 1, slice.as_millis() as libc::c_int) };
                    if fds.revents & (libc::POLLERR | libc::POLLHUP) != 0 {
                        return Err(io::ErrorKind::BrokenPipe.into());
                    }
                }
                _ => std::thread::sleep(slice),
            }
            self.check_stop()?;
        }
    }

    /// The output is all written: fsyncs the file (here, or the child does and exits 0).
    fn finish(self) -> io::Result<()> {
        match self.out {
            Out::File(w) => w
                .into_inner()
                .map_err(io::IntoInnerError::into_error)?
                .sync_all(),
            Out::Child { pipe, child } => {
                drop(pipe);
                let status = child.reap()?;
                if status.success() {
                    Ok(())
                } else {
                    Err(io::Error::other(Died(status)))
                }
            }
        }
    }

    /// The save failed with `e`: the child (if any) is reaped, killed first unless it is gone
    /// already (then its end is the error to report).
    fn abandon(self, e: io::Error) -> io::Error {
        match self.out {
            Out::File(_) => e,
            Out::Child { pipe, child } => {
                drop(pipe);
                if e.kind() != io::ErrorKind::BrokenPipe {
                    child.kill();
                }
                match child.reap() {
                    Ok(status) if e.kind() == io::ErrorKind::BrokenPipe && !status.success() => {
                        io::Error::other(Died(status))
                    }
                    _ => e,
                }
            }
        }
    }
}

impl Write for Spool {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.check_stop()?;
        match &mut self.out {
            Out::File(w) => w.write(buf),
            Out::Child { pipe, .. } => pipe.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.out {
            Out::File(w) => w.flush(),
            Out::Child { pipe, .. } => pipe.flush(),
        }
    }
}

/// Runs `body` into `spool`, then completes the save crash-safely: the temporary file fsynced,
/// renamed over `path`, the directory fsynced. Returns the file's size. On any failure the
/// temporary file is removed and `path` is left as it was.
pub fn write_with(
    mut spool: Spool,
    path: &Path,
    body: impl FnOnce(&mut Spool) -> io::Result<()>,
) -> io::Result<u64> {
    let temp = spool.temp.clone();
    let result = match body(&mut spool) {
        Err(e) => Err(spool.abandon(e)),
        Ok(()) => spool.finish().and_then(|()| {
            let size = std::fs::metadata(&temp)?.len();
            std::fs::rename(&temp, path)?;
            let dir = match path.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            File::open(dir)?.sync_all()?;
            Ok(size)
        }),
    };
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

/// The child's side: `<kind> <dir> <oom score or -> <title or empty>` after [`MODE_ARG`].
pub fn run(args: &[String], title: &mut crate::proctitle::ProcTitle) -> ExitCode {
    let [kind, dir, oom, shown] = args else {
        eprintln!("{MODE_ARG}: expected <kind> <dir> <oom score> <title>");
        return ExitCode::FAILURE;
    };
    let Some(kind) = Kind::parse(kind) else {
        eprintln!("{MODE_ARG}: unknown kind {kind}");
        return ExitCode::FAILURE;
    };
    if !shown.is_empty() {
        title.set(shown);
    }
    if let Ok(score) = oom.parse::<i64>() {
        crate::oom::write_score(score);
    }
    let temp = Path::new(dir).join(kind.temp_name(std::process::id()));
    let copied = (|| {
        let mut file = File::create(&temp)?;
        io::copy(&mut io::stdin().lock(), &mut file)?;
        file.sync_all()
    })();
    match copied {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}: writing {}: {e}", kind.title(), temp.display());
            ExitCode::FAILURE
        }
    }
}
