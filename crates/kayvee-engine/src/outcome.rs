//! What a command asks of the shell once it has run (close, block, save, shut down...).

use alloc::string::String;
use alloc::vec::Vec;

/// What the shell must do after a command. `Copy`, so that passing one along costs no drop
/// call on every command: what a rare outcome carries waits in the engine for the shell to
/// take ([`crate::Engine::take_migrate_job`], [`crate::Engine::previous_listen`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Outcome {
    /// Nothing special.
    #[default]
    Continue,
    /// The reply is one Redis builds with its length written after its elements (KEYS,
    /// SMEMBERS, SINTER, score and lex ranges, XRANGE, LPOS COUNT, LCS IDX): the
    /// connection layer counts all of it against the client's output limits, where it counts
    /// only what passes the 16 KiB static reply buffer of other replies, as Redis does.
    DeferredReply,
    /// Close this connection once its pending replies are written (QUIT).
    Close,
    /// Some clients were marked `killed` (CLIENT KILL): close them (this one included, maybe).
    KillClients,
    /// Stop the server (SHUTDOWN) with its SAVE/NOSAVE choice and FORCE.
    Shutdown(crate::shutdown::ShutdownFlags),
    /// Block the whole server for this many microseconds (DEBUG SLEEP), then continue.
    Sleep(u64),
    /// Write the configuration back to its file (CONFIG REWRITE): the shell calls
    /// [`crate::Engine::rewrite_config`], writes the file and sends the reply itself.
    RewriteConfig,
    /// The client blocked (BLPOP and co. found nothing): it got no reply yet. The shell runs
    /// none of its further commands until [`crate::Engine::take_wakeups`] hands it its reply (see
    /// [`crate::blocking`]).
    Blocked,
    /// Write an RDB snapshot (SAVE, BGSAVE, a save point): the shell takes
    /// [`crate::Engine::snapshot`] now, writes it (on a thread when `background`) and reports with
    /// [`crate::Engine::save_finished`]. For SAVE (`background` false) the shell sends the reply
    /// itself, `+OK` or `-ERR`, once the file is written.
    Save {
        /// BGSAVE (the reply was sent) or SAVE (the shell replies after writing).
        background: bool,
    },
    /// ACL LOAD (`save` false) or ACL SAVE: the shell reads the file named by
    /// [`crate::Engine::acl_file`] and passes its text to [`crate::Engine::acl_load`], or writes
    /// [`crate::Engine::acl_save_text`] to it, then sends the reply itself (`+OK` or the error).
    AclFile {
        /// ACL SAVE (true) or ACL LOAD.
        save: bool,
    },
    /// DEBUG LOADAOF: the shell writes out the AOF, empties the dataset and loads it again from
    /// the AOF files, then sends the reply itself (`+OK`).
    LoadAof,
    /// DEBUG RELOAD NOSAVE: the shell loads the RDB file on disk (`dir/dbfilename`) as it is
    /// in place of the dataset ([`crate::Engine::load_dbs`]), then sends the reply itself
    /// (`+OK`, or Redis's load error with the dataset left as it was).
    LoadRdb {
        /// The dataset is emptied first (not NOFLUSH).
        flush: bool,
        /// MERGE: loaded keys and libraries replace existing ones (else they are an error).
        merge: bool,
    },
    /// The client became a replica (PSYNC, SYNC): the connection layer sends it the backlog
    /// from `continue_from`, or a full sync (an RDB of [`crate::Engine::snapshot`] taken now,
    /// framed as `$EOF:<mark>` when `eof`, else as `$<len>`), then the replication stream.
    Replicate {
        /// `+CONTINUE`: the first stream offset the replica needs.
        continue_from: Option<u64>,
        /// The replica takes the diskless `$EOF:` framing.
        eof: bool,
    },
    /// CONFIG SET changed `port` or `bind`: the shell listens on the configured addresses
    /// in place of the previous ones and sends the reply itself (`+OK`, or Redis's error with
    /// the previous values put back in the configuration and the old listeners kept).
    /// The previous values: [`crate::Engine::previous_listen`].
    Rebind,
    /// MIGRATE: take the job ([`crate::Engine::take_migrate_job`]), connect to the target (or
    /// reuse the cached link), send the job's bytes and read its replies, then hand them to
    /// [`crate::Engine::migrate_finished`], which replies.
    Migrate,
    /// Crash the server on purpose (DEBUG SEGFAULT), as a bug would: the shell leaves its
    /// crash report and dies. No reply.
    Crash,
}

/// What the shell carries out for MIGRATE: connect to `host:port` (or reuse the cached link
/// named `name`), send `payload`, read `replies` replies; each step within `timeout_ms`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigrateJob {
    /// `host:port` as the client wrote them: the link's name in the cache.
    pub name: String,
    /// The target's host.
    pub host: String,
    /// The target's port (`atoi` of the argument, as Redis: garbage is 0 and fails to connect).
    pub port: u16,
    /// Per-step timeout (connect, each write, each read).
    pub timeout_ms: u64,
    /// The commands to send, encoded as RESP.
    pub payload: Vec<u8>,
    /// How many replies to read.
    pub replies: usize,
}

/// Why the shell could not complete a job (Redis closes the link and answers `IOERR`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkError {
    /// Could not connect in time.
    Connect,
    /// Writing failed or timed out.
    Write,
    /// Reading failed or timed out.
    Read,
}
