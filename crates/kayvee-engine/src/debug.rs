//! What DEBUG's switches change (`DEBUG SET-ACTIVE-EXPIRE`, `PAUSE-CRON`...): state read by the
//! cron and by the commands they affect. The subcommands themselves are in `cmd/debug/`.

/// The switches, at their defaults until a DEBUG subcommand changes them.
#[derive(Clone, Debug)]
pub struct Switches {
    /// Active expiry runs in the cron (`DEBUG SET-ACTIVE-EXPIRE 0` stops it; lazy expiry on
    /// access goes on).
    pub active_expire: bool,
    /// The cron is paused (`DEBUG PAUSE-CRON 1`): no active expiry, eviction or metrics.
    pub cron_paused: bool,
    /// `DEBUG QUICKLIST-PACKED-THRESHOLD`: kept and accepted; Kayvee's lists have no plain
    /// nodes, so it changes nothing.
    pub quicklist_packed_threshold: u64,
    /// `DEBUG SET-SKIP-CHECKSUM-VALIDATION`: kept; RESTORE still checks the checksum.
    pub skip_checksum_validation: bool,
    /// `DEBUG SET-DISABLE-DENY-SCRIPTS 1`: scripts may call `noscript` commands (a test hook).
    pub disable_deny_scripts: bool,
    /// `DEBUG CONFIG-REWRITE-FORCE-ALL` asked for the rewrite under way: every parameter is
    /// written, defaults included.
    pub rewrite_force_all: bool,
    /// `DEBUG AOF-FLUSH-SLEEP <us>`: the shell sleeps this long before each AOF write (0: no
    /// sleep), to widen the window between a command and its durability in tests.
    pub aof_flush_sleep_us: u64,
    /// `DEBUG REPLYBUFFER PEAK-RESET-TIME`: how often (ms) a client's reply buffer peak starts
    /// again from what is pending (None: never), which lets an idle client's buffer shrink.
    pub reply_buffer_peak_reset_ms: Option<u64>,
    /// `DEBUG REPLYBUFFER RESIZING 0` stops the cron's reply buffer resizing.
    pub reply_buffer_resizing: bool,
}

/// Redis's default reply buffer peak reset time (`REPLY_BUFFER_DEFAULT_PEAK_RESET_TIME`).
pub const REPLY_PEAK_RESET_DEFAULT_MS: u64 = 5000;

/// Redis's default `quicklist-packed-threshold`: 1 GB.
pub const PACKED_THRESHOLD_DEFAULT: u64 = 1 << 30;

impl Default for Switches {
    fn default() -> Self {
        Switches {
            active_expire: true,
            cron_paused: false,
            quicklist_packed_threshold: PACKED_THRESHOLD_DEFAULT,
            skip_checksum_validation: false,
            disable_deny_scripts: false,
            rewrite_force_all: false,
            aof_flush_sleep_us: 0,
            reply_buffer_peak_reset_ms: Some(REPLY_PEAK_RESET_DEFAULT_MS),
            reply_buffer_resizing: true,
        }
    }
}
