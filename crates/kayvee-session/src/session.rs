//! One connection's state in the driver: its input buffer and decoder, its output buffer, and
//! how it is closing.
//!
//! Input: each connection has its own query buffer, as in Redis 7.0 (`input[start..end]`
//! pending). The shell reads into it ([`Session::read_space`]: at least 16 KiB of room, or
//! the rest of an announced big argument); it grows for a command that does not fit (at
//! least doubling, but never past the size of a command whose big argument was announced,
//! so such a command ends in a buffer of exactly its size, as Redis's query buffer for one),
//! shrinks in the cron after a peak passes, and is freed by the cron when the client idles
//! with nothing pending, as Redis frees idle query buffers.
//! Output: replies are encoded straight into `out`; `out[sent..]` is not written yet. The
//! capacity `out` keeps when empty is the client's reply buffer (`rbs`): 16 KiB at first,
//! resized by the cron after the most it held at once (`rbp`), between 1 KiB and 16 KiB, as
//! Redis 7.0 resizes its per-client reply buffer; output beyond it is what Redis keeps in
//! its reply list.

use alloc::boxed::Box;
use alloc::vec::Vec;
use kayvee_engine::client::IoStats;
use kayvee_engine::Handle;
use kayvee_resp::{Decoder, Limits};

/// First size of an input buffer (Redis's `PROTO_IOBUF_LEN`).
pub const INPUT_INITIAL: usize = 16 * 1024;

/// Output above this many pending bytes stops the running of more commands (and the shell's
/// reading) until it drains, unless client eviction (`maxmemory-clients`) bounds the
/// clients' memory instead, as in Redis.
pub const OUTPUT_PAUSE: usize = 1024 * 1024;

/// A bulk argument at least this long is a "big argument" (Redis's `PROTO_MBULK_BIG_ARG`):
/// the input buffer is sized for exactly its command, and `qbuf` shows only its payload.
const BIG_ARG: usize = 32 * 1024;

/// An input buffer above this size that the recent traffic uses less than half of is shrunk
/// by the cron (Redis's `PROTO_RESIZE_THRESHOLD`).
const INPUT_RESIZE_THRESHOLD: usize = 32 * 1024;

/// An empty output buffer with more capacity than this is released by the cron.
const OUTPUT_KEEP: usize = 64 * 1024;
/// Redis's fixed per-client reply buffer (`PROTO_REPLY_CHUNK_BYTES`), and the size of its
/// reply blocks: how `CLIENT LIST` splits pending output into `obl`, `oll` and `omem`. Also
/// the largest (and first) size of a client's reply buffer.
pub const REPLY_BUFFER: usize = 16 * 1024;
/// The smallest size the cron shrinks a reply buffer to (Redis's `PROTO_REPLY_MIN_BYTES`).
const REPLY_BUFFER_MIN: usize = 1024;

/// What the cron did to a client's reply buffer (INFO's `reply_buffer_shrinks`/`_expands`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resized {
    Kept,
    Shrunk,
    Expanded,
}

/// How a connection ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Closing {
    /// Open.
    No,
    /// Close once the pending output is written (QUIT, a protocol error, the peer's EOF).
    AfterReply,
    /// Close without writing (output limit, idle timeout, query buffer limit, CLIENT KILL of
    /// another client).
    Now,
}

/// A connection.
pub(crate) struct Session {
    /// The engine's handle.
    pub handle: Handle,
    /// The request decoder (keeps its argument spans between commands).
    pub decoder: Decoder,
    /// The read area; `input[in_start..in_end]` is pending.
    pub input: Vec<u8>,
    /// Bytes the pending command needs from its start, when a big argument's header said so
    /// (0: not known): the input buffer grows no further than that.
    pub want: usize,
    pub in_start: usize,
    pub in_end: usize,
    /// The input buffer's length while a batch borrows it (0 otherwise): `CLIENT LIST`
    /// during the batch shows its free room.
    pub in_lent: usize,
    /// The most input pending at once since the last cron (Redis's `querybuf_peak`).
    pub in_peak: usize,
    /// Encoded replies; `out[out_sent..]` is not written yet.
    pub out: Vec<u8>,
    pub out_sent: usize,
    /// The reply buffer's size (Redis's `buf_usable_size`, `rbs`): the capacity `out` is
    /// given when it is empty.
    pub reply_buf: usize,
    /// The most output pending at once, up to `reply_buf`, since the last peak reset
    /// (Redis's `buf_peak`, `rbp`).
    pub out_peak: usize,
    /// When (unix ms) the peak last started again.
    pub out_peak_reset_ms: u64,
    /// The busy poll's last epoch in which this connection sent data (see
    /// [`crate::busy::BusyPoll::note_read`]).
    pub active_epoch: u32,
    pub closing: Closing,
    /// A [`crate::Request`] of this connection waits for the shell: its further commands wait.
    pub awaiting: bool,
    /// The awaited request was answered already (CONFIG REWRITE inside EXEC): the shell's
    /// answer is dropped.
    pub answered: bool,
    /// The shell was told to stop reading (output above [`OUTPUT_PAUSE`]).
    pub read_paused: bool,
    /// Since when (unix ms) the pause has held with no output taken by the peer (None: not
    /// noted yet; the cron notes it and lifts a pause that makes no progress).
    pub paused_quiet_since_ms: Option<u64>,
    /// The pause is off until the output drains: the peer stopped reading while paused (it
    /// may be blocked writing its own pipeline to us, waiting for nothing), so its commands
    /// run on and its output grows, as Redis's does.
    pub pause_lifted: bool,
    /// The cron lifted the pause: the next flush tells the shell to read again.
    pub read_again: bool,
    /// Whether the cron saw no traffic since its last run (for releasing buffers).
    pub idle_since_cron: bool,
    /// Bytes read in the loop pass numbered `.0` (see [`crate::Driver::read_share_spent`]).
    pub read_in_pass: (u64, usize),
    /// Since when (unix ms) the pending output has been above the soft output limit.
    pub soft_since_ms: Option<u64>,
    /// The pending output holds a reply Redis builds with its length written last (KEYS):
    /// until it drains, all of it counts against the output limits, not only what passes
    /// the static reply buffer (Redis puts such a reply, and what follows it, in its reply
    /// list).
    pub out_counted_whole: bool,
    /// In the driver's dirty list.
    pub dirty: bool,
    /// A replica's full sync under way (see [`crate::replicas`]).
    pub sync: Option<crate::replicas::Sync>,
    /// This connection is the link to this server's primary (see [`crate::upstream`]).
    pub upstream: Option<Upstream>,
    /// The memory this connection counts for client eviction (its `tot-mem` when last
    /// measured; 0 for a replica, the primary's link, or a closing connection).
    pub counted_mem: usize,
    /// What the engine held for the client when it was last measured
    /// ([`kayvee_engine::Engine::client_state_memory`]).
    pub state_mem: usize,
}

impl Session {
    /// A new connection with empty buffers (allocated on first use).
    pub fn new(handle: Handle, limits: Limits) -> Self {
        Session {
            handle,
            decoder: Decoder::new(limits),
            input: Vec::new(),
            want: 0,
            in_start: 0,
            in_end: 0,
            in_lent: 0,
            in_peak: 0,
            out: Vec::new(),
            out_sent: 0,
            reply_buf: REPLY_BUFFER,
            out_peak: 0,
            out_peak_reset_ms: 0,
            active_epoch: 0,
            closing: Closing::No,
            awaiting: false,
            answered: false,
            read_paused: false,
            paused_quiet_since_ms: None,
            pause_lifted: false,
            read_again: false,
            idle_since_cron: false,
            read_in_pass: (0, 0),
            soft_since_ms: None,
            out_counted_whole: false,
            dirty: false,
            sync: None,
            upstream: None,
            counted_mem: 0,
            state_mem: 0,
        }
    }

    /// Bytes received but not yet consumed.
    #[inline]
    pub fn pending_input(&self) -> usize {
        self.in_end - self.in_start
    }

    /// Bytes of output not yet written.
    #[inline]
    pub fn out_pending(&self) -> usize {
        self.out.len() - self.out_sent
    }

    /// Whether commands may run now (the engine's blocking aside), with output above
    /// `pause` bytes holding them.
    #[inline]
    pub fn runnable(&self, pause: usize) -> bool {
        self.closing == Closing::No && !self.awaiting && self.out_pending() <= pause
    }

    /// Notes what the decoder knows of the pending command's size (after it stopped for more
    /// bytes): a big argument's header gives the whole command's length.
    pub fn note_wanted(&mut self) {
        self.want = match self.decoder.pending_bulk() {
            Some((start, len)) if len >= BIG_ARG => start.saturating_add(len).saturating_add(2),
            _ => 0,
        };
    }

    /// Appends received bytes behind the pending ones: the consumed front is reclaimed first,
    /// and the buffer at least doubles when it grows, but not past the pending command's
    /// known size, which it takes once more than half of the command is in (it grows with
    /// what arrives: an announced length alone allocates nothing, and the command ends in a
    /// buffer of exactly its size however its bytes were split).
    pub fn append(&mut self, data: &[u8]) {
        self.make_room(data.len());
        let need = self.in_end + data.len();
        self.input[self.in_end..need].copy_from_slice(data);
        self.in_end = need;
        self.in_peak = self.in_peak.max(self.in_end - self.in_start);
    }

    /// The room the next read goes into, behind the pending bytes: the rest of an announced
    /// big argument (Redis reads exactly that), else at least [`INPUT_INITIAL`] bytes (Redis's
    /// `PROTO_IOBUF_LEN`); the buffer grows as [`Session::append`] grows it. The shell says
    /// how much it read with [`Session::filled`].
    pub fn read_space(&mut self) -> &mut [u8] {
        let pending = self.pending_input();
        let room = match self.want {
            want if want > pending => want - pending,
            _ => INPUT_INITIAL,
        };
        self.make_room(room);
        &mut self.input[self.in_end..]
    }

    /// `n` bytes were read into [`Session::read_space`]'s room.
    pub fn filled(&mut self, n: usize) {
        debug_assert!(self.in_end + n <= self.input.len());
        self.in_end += n;
        self.in_peak = self.in_peak.max(self.in_end - self.in_start);
    }

    /// Makes room for `n` more bytes behind the pending ones (see [`Session::append`]).
    #[inline]
    fn make_room(&mut self, n: usize) {
        if self.in_end + n <= self.input.len() {
            return;
        }
        self.grow(n);
    }

    #[inline(never)]
    fn grow(&mut self, n: usize) {
        if self.in_start > 0 && self.in_end + n > self.input.len() {
            self.input.copy_within(self.in_start..self.in_end, 0);
            self.in_end -= self.in_start;
            self.in_start = 0;
        }
        let need = self.in_end + n;
        if need > self.input.len() {
            let doubled = need.max(self.input.len() * 2).max(INPUT_INITIAL);
            let len = match self.want {
                // Past half of the command: its whole size, which the doubling never passes.
                want if self.in_start == 0 && want >= need && need * 2 > want => want,
                want if self.in_start == 0 && want >= need => doubled.min(want),
                _ => doubled,
            };
            if self.input.is_empty() {
                // A fresh buffer comes zeroed from the allocator (no separate fill).
                self.input = alloc::vec![0; len];
            } else {
                self.input.reserve_exact(len - self.input.len());
                self.input.resize(len, 0);
            }
        }
    }

    /// Keeps `rest` (an incomplete command run from the shell's buffer) as the pending input.
    /// Only called with nothing pending.
    pub fn stash(&mut self, rest: &[u8]) {
        debug_assert_eq!(self.pending_input(), 0);
        self.in_start = 0;
        self.in_end = 0;
        if !rest.is_empty() {
            self.note_wanted();
            self.append(rest);
        }
    }

    /// Marks `n` pending input bytes as used (rewinding to the start when none is left).
    #[inline]
    pub fn consume(&mut self, n: usize) {
        self.in_start += n;
        debug_assert!(self.in_start <= self.in_end);
        if self.in_start == self.in_end {
            self.in_start = 0;
            self.in_end = 0;
            self.want = 0;
        }
    }

    /// Marks `n` output bytes as written; the written front is dropped when all is written,
    /// or when it is most of a large buffer (a reader that keeps up only partly: the buffer's
    /// memory follows the pending bytes, not everything ever queued).
    #[inline]
    pub fn written(&mut self, n: usize) {
        self.out_sent = (self.out_sent + n).min(self.out.len());
        if self.out_sent == self.out.len() {
            self.out.clear();
            self.out_sent = 0;
            self.out_counted_whole = false;
        } else if self.out_sent >= OUTPUT_KEEP && self.out_sent * 2 >= self.out.len() {
            self.out.drain(..self.out_sent);
            self.out_sent = 0;
        }
    }

    /// Buffer sizes for `CLIENT LIST`, in Redis's terms: the query buffer holds the pending
    /// input (the running command's included; of a big argument still arriving, only its
    /// payload, as Redis keeps it); pending output fills Redis's fixed 16 KiB reply buffer
    /// first (`obl`), the rest goes in 16 KiB blocks (`oll`, `omem`). `tot-mem` is the
    /// buffers' allocations, the session and `state_mem` (what the engine holds for the
    /// client: [`kayvee_engine::Engine::client_state_memory`]). While a batch runs the driver
    /// sets `qbuf` itself (the batch may run from the shell's buffer).
    pub fn io_stats(&self, state_mem: usize) -> IoStats {
        let pending = self.out_pending();
        let beyond = pending.saturating_sub(REPLY_BUFFER);
        let qbuf = match self.decoder.pending_bulk() {
            Some((start, len)) if len >= BIG_ARG => self.pending_input().saturating_sub(start),
            _ => self.pending_input(),
        };
        IoStats {
            qbuf,
            qbuf_free: self
                .input
                .len()
                .max(self.in_lent)
                .saturating_sub(self.in_end),
            rbs: self.out.capacity().min(self.reply_buf),
            rbp: self.out_peak,
            obl: pending.min(REPLY_BUFFER),
            oll: beyond.div_ceil(REPLY_BUFFER),
            omem: beyond,
            // The input buffer may be lent to the running batch.
            tot_mem: self.input.capacity().max(self.in_lent)
                + self.out.capacity()
                + core::mem::size_of::<Self>()
                + state_mem,
        }
    }

    /// Notes the output pending now in the reply buffer's peak.
    #[inline]
    pub fn note_out_peak(&mut self) {
        let held = self.out_pending().min(self.reply_buf);
        if held > self.out_peak {
            self.out_peak = held;
        }
    }

    /// Gives an output buffer that has none its reply buffer (before a batch's replies).
    #[inline]
    pub fn ready_output(&mut self) {
        if self.out.capacity() == 0 {
            self.out.reserve_exact(self.reply_buf);
        }
    }

    /// Redis 7.0's reply buffer resizing, run by the cron: a buffer whose peak stayed under
    /// half of it shrinks to the peak (at least 1 KiB); one that filled doubles (up to
    /// 16 KiB). The peak starts again from what is pending every `reset_ms` (None: never).
    /// An empty output buffer then takes the reply buffer's size.
    pub fn resize_reply_buffer(
        &mut self,
        now_ms: u64,
        reset_ms: Option<u64>,
        resizing: bool,
    ) -> Resized {
        if !resizing {
            return Resized::Kept;
        }
        let (shrink_to, expand_to) = (self.reply_buf / 2, self.reply_buf * 2);
        let resized = if shrink_to >= REPLY_BUFFER_MIN && self.out_peak < shrink_to {
            self.reply_buf = REPLY_BUFFER_MIN.max(self.out_peak + 1);
            Resized::Shrunk
        } else if expand_to < 2 * REPLY_BUFFER && self.out_peak == self.reply_buf {
            self.reply_buf = REPLY_BUFFER.min(expand_to);
            Resized::Expanded
        } else {
            Resized::Kept
        };
        if reset_ms.is_some_and(|ms| now_ms.saturating_sub(self.out_peak_reset_ms) >= ms) {
            self.out_peak = self.out_pending().min(self.reply_buf);
            self.out_peak_reset_ms = now_ms;
        }
        resized
    }

    /// Releases the input buffer of a client idle since the last cron with nothing pending
    /// (10,000 idle clients should not keep 16 KiB each), shrinks a busy client's input
    /// buffer that one big command grew (see [`Session::shrink_input`]), and gives an empty
    /// output buffer the reply buffer's size.
    pub fn release_idle_buffers(&mut self) {
        if self.idle_since_cron && self.pending_input() == 0 && !self.input.is_empty() {
            self.input = Vec::new();
            self.in_start = 0;
            self.in_end = 0;
        }
        self.shrink_input();
        let cap = self.out.capacity();
        if self.out_pending() == 0 && cap != 0 && cap != self.reply_buf {
            self.out = Vec::with_capacity(self.reply_buf);
            self.out_sent = 0;
        }
        self.idle_since_cron = true;
    }
}

impl Session {
    /// Redis's resize of a busy client's query buffer: one above
    /// [`INPUT_RESIZE_THRESHOLD`] wasting more than 4 KiB and twice the most the client had
    /// pending since the last cron shrinks to what is pending (at least that peak, and the
    /// whole of a command whose size is known). The peak starts again from what is pending.
    fn shrink_input(&mut self) {
        let (size, pending) = (self.input.len(), self.pending_input());
        if size > INPUT_RESIZE_THRESHOLD && size - pending > 4096 && size / 2 > self.in_peak {
            let keep = pending.max(self.in_peak).max(self.want);
            self.input.copy_within(self.in_start..self.in_end, 0);
            (self.in_start, self.in_end) = (0, pending);
            if keep == 0 {
                self.input = Vec::new();
            } else {
                self.input.truncate(keep);
                self.input.shrink_to_fit();
            }
        }
        self.in_peak = pending;
    }
}

/// A session's role as the link to the primary.
pub(crate) enum Upstream {
    /// The handshake and the RDB transfer.
    Handshake(Box<crate::link::Link>),
    /// The payload is in: it loads a slice a loop pass ([`crate::link::Load`]).
    Loading(Box<crate::link::Load>),
    /// The stream: the session's commands are the master client's.
    Stream {
        /// When the last `REPLCONF ACK` went out (unix ms).
        last_ack_ms: u64,
        /// The bytes of a command CLIENT PAUSE holds: they count in the offset once it runs.
        held: Vec<u8>,
    },
}

/// Whether `argv` is `REPLCONF GETACK ...` (the primary asks for an ACK now).
pub(crate) fn is_getack(argv: &kayvee_engine::Argv<'_>) -> bool {
    argv.len() >= 2
        && argv.get(0).eq_ignore_ascii_case(b"replconf")
        && argv.get(1).eq_ignore_ascii_case(b"getack")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> Session {
        Session::new(Handle(0), Limits::default())
    }

    #[test]
    fn append_grows_and_reclaims_the_consumed_front() {
        let mut s = session();
        s.append(b"PING\r\n");
        assert_eq!(s.input.len(), INPUT_INITIAL);
        assert_eq!(&s.input[s.in_start..s.in_end], b"PING\r\n");
        s.consume(6);
        assert_eq!((s.in_start, s.in_end), (0, 0));
        s.append(&[b'x'; 100]);
        s.consume(60);
        s.append(&[b'y'; INPUT_INITIAL - 50]);
        // The consumed 60 bytes were reclaimed before the buffer had to grow.
        assert_eq!(s.in_start, 0);
        assert_eq!(s.input.len(), INPUT_INITIAL);
        assert_eq!(s.pending_input(), 40 + INPUT_INITIAL - 50);
        s.append(&[b'z'; 20]);
        assert_eq!(s.input.len(), 2 * INPUT_INITIAL);
        assert_eq!(s.input[s.in_end - 1], b'z');
    }

    #[test]
    fn reads_go_into_the_connections_own_query_buffer() {
        let mut s = session();
        let room = s.read_space();
        assert_eq!(room.len(), INPUT_INITIAL, "Redis's 16 KiB reading room");
        room[..14].copy_from_slice(b"*1\r\n$4\r\nPING\r\n");
        s.filled(14);
        assert_eq!(s.pending_input(), 14);
        s.consume(14);
        let io = s.io_stats(0);
        assert_eq!(
            (io.qbuf, io.qbuf + io.qbuf_free),
            (0, INPUT_INITIAL),
            "the buffer stays for the next read"
        );
        // A big argument announced: the next read's room is exactly its rest.
        let header = b"*2\r\n$3\r\nSET\r\n$100000\r\n";
        s.read_space()[..header.len()].copy_from_slice(header);
        s.filled(header.len());
        assert!(s
            .decoder
            .decode(&s.input[..s.in_end], true)
            .unwrap()
            .is_none());
        s.note_wanted();
        assert_eq!(s.read_space().len(), 100_002);
        assert_eq!(s.input.len(), header.len() + 100_002, "exactly the command");
    }

    #[test]
    fn the_reply_buffer_shrinks_after_its_peak_and_grows_when_it_fills() {
        let mut s = session();
        s.ready_output();
        assert_eq!(s.io_stats(0).rbs, REPLY_BUFFER, "16 KiB at first");
        s.out.extend_from_slice(b"+OK\r\n");
        s.note_out_peak();
        s.written(5);
        assert_eq!(s.out_peak, 5);
        // The peak stayed under half: the buffer shrinks to 1 KiB, and the empty output
        // takes that size.
        assert_eq!(s.resize_reply_buffer(100, Some(100), true), Resized::Shrunk);
        s.release_idle_buffers();
        assert_eq!(
            (s.reply_buf, s.out.capacity()),
            (REPLY_BUFFER_MIN, REPLY_BUFFER_MIN)
        );
        assert_eq!(s.out_peak, 0, "the peak started again from what is pending");
        // A reply larger than the buffer fills it: it doubles at each cron up to 16 KiB.
        let mut sizes = alloc::vec![];
        for now in 1..=6u64 {
            s.out.extend_from_slice(&[b'x'; 32 * 1024]);
            s.note_out_peak();
            assert_eq!(
                s.io_stats(0).rbs,
                s.reply_buf,
                "the rest is beyond the buffer"
            );
            s.written(32 * 1024);
            s.resize_reply_buffer(100 + now, None, true);
            sizes.push(s.reply_buf);
        }
        assert_eq!(sizes, [2048, 4096, 8192, 16384, 16384, 16384]);
        // Resizing off: nothing changes.
        s.out_peak = 0;
        assert_eq!(s.resize_reply_buffer(1_000, Some(0), false), Resized::Kept);
        assert_eq!(s.reply_buf, REPLY_BUFFER);
    }

    #[test]
    fn stash_keeps_only_the_tail() {
        let mut s = session();
        s.stash(b"");
        assert!(s.input.is_empty(), "no buffer for nothing");
        s.stash(b"*1\r\n$4\r\nPI");
        assert_eq!(&s.input[..s.in_end], b"*1\r\n$4\r\nPI");
    }

    #[test]
    fn written_output_is_dropped_and_large_fronts_are_reclaimed() {
        let mut s = session();
        s.out.extend_from_slice(b"+PONG\r\n");
        s.written(7);
        assert_eq!((s.out.len(), s.out_sent), (0, 0));
        s.out = alloc::vec![b'a'; 4 * OUTPUT_KEEP];
        s.written(OUTPUT_KEEP);
        assert_eq!(s.out_sent, OUTPUT_KEEP, "a quarter written: kept");
        s.written(OUTPUT_KEEP);
        assert_eq!((s.out.len(), s.out_sent), (2 * OUTPUT_KEEP, 0));
        assert_eq!(s.out_pending(), 2 * OUTPUT_KEEP);
    }

    #[test]
    fn idle_buffers_are_released_on_the_second_cron() {
        let mut s = session();
        s.append(b"x");
        s.consume(1);
        s.idle_since_cron = false;
        s.release_idle_buffers();
        assert_eq!(s.input.len(), INPUT_INITIAL, "active since the last cron");
        s.release_idle_buffers();
        assert!(s.input.is_empty());
        assert_eq!(s.io_stats(0).qbuf, 0);
    }

    #[test]
    fn a_busy_clients_big_input_buffer_shrinks_after_its_peak_passes() {
        let mut s = session();
        s.append(&alloc::vec![b'a'; 100 * 1024]);
        s.consume(100 * 1024);
        let size = s.input.len();
        s.release_idle_buffers();
        assert_eq!(
            s.input.len(),
            size,
            "the peak since the last cron is the big command"
        );
        s.idle_since_cron = false;
        s.append(b"*1\r\n");
        s.release_idle_buffers();
        assert_eq!(s.input.len(), 4, "shrunk to what is pending");
        assert_eq!(&s.input[..s.in_end], b"*1\r\n");
    }

    #[test]
    fn runnable_follows_closing_awaiting_and_the_output_mark() {
        let mut s = session();
        assert!(s.runnable(OUTPUT_PAUSE));
        s.out = alloc::vec![0; OUTPUT_PAUSE + 1];
        assert!(!s.runnable(OUTPUT_PAUSE));
        assert!(s.runnable(usize::MAX), "no mark under client eviction");
        s.written(OUTPUT_PAUSE + 1);
        s.awaiting = true;
        assert!(!s.runnable(OUTPUT_PAUSE));
        s.awaiting = false;
        s.closing = Closing::AfterReply;
        assert!(!s.runnable(OUTPUT_PAUSE));
    }

    #[test]
    fn a_big_argument_sizes_the_buffer_exactly_and_is_the_query_buffer() {
        let mut s = session();
        let header = b"*2\r\n$3\r\nSET\r\n$100000\r\n";
        let mut first = header.to_vec();
        first.extend_from_slice(&[b'v'; 1000]);
        assert!(s.decoder.decode(&first, true).unwrap().is_none());
        s.stash(&first);
        let whole = header.len() + 100_000 + 2;
        assert_eq!(s.want, whole);
        assert_eq!(
            s.input.capacity(),
            INPUT_INITIAL,
            "nothing allocated ahead of the data"
        );
        assert_eq!(
            s.io_stats(0).qbuf,
            1000,
            "only the payload, as Redis shows it"
        );
        s.append(&[b'v'; 20_000]);
        assert_eq!(s.input.capacity(), 2 * INPUT_INITIAL);
        s.append(&[b'v'; 30_000]);
        assert_eq!(s.input.capacity(), whole, "past half: the command's size");
        s.append(&[b'v'; 49_000]);
        assert_eq!(s.input.capacity(), whole);
        assert_eq!(s.io_stats(0).qbuf, 100_000);
    }
}
