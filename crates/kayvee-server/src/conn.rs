//! One client connection: its socket, its reused input buffer (read into, decoded in place,
//! compacted only when the end is reached), its output buffer (written with one `write` per
//! batch) and its decoder.
//!
//! A connection with nothing pending reads into the server's shared buffer and keeps only an
//! incomplete tail; its own input buffer is a `Vec<u8>` whose whole length is the read area:
//! `input[start..end]` is received but not yet consumed. It is allocated for the first tail, doubles when a command does
//! not fit (up to the query buffer limit) and is freed by the cron when the client idles with
//! nothing pending, as Redis frees idle query buffers.

use crate::net::Stream;
use kayvee_engine::client::IoStats;
use kayvee_engine::config::OutputLimit;
use kayvee_engine::Handle;
use kayvee_resp::Decoder;
use std::io::{self, Read, Write};
use std::time::Instant;

/// First size of an input buffer (Redis's `PROTO_IOBUF_LEN`).
pub const INPUT_INITIAL: usize = 16 * 1024;

/// Output above this many pending bytes stops the reading of more commands until it drains.
pub const OUTPUT_PAUSE: usize = 1024 * 1024;

/// An empty output buffer with more capacity than this is released by the cron.
const OUTPUT_KEEP: usize = 64 * 1024;

/// How a [`Conn::fill`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FillEnd {
    /// The socket has nothing more for now (a short read or `WouldBlock`).
    Drained,
    /// The buffer is full and may not grow: decode before reading more.
    Full,
    /// The peer closed its side.
    Eof,
}

/// A client connection.
pub struct Conn {
    /// The socket.
    pub stream: Stream,
    /// The engine's handle (also the connection's slot and poll token).
    pub handle: Handle,
    /// The request decoder (keeps its argument spans between commands).
    pub decoder: Decoder,
    /// The read area; `input[in_start..in_end]` is pending.
    pub input: Vec<u8>,
    /// Start of the pending input.
    pub in_start: usize,
    /// End of the received input.
    pub in_end: usize,
    /// Encoded replies; `out[out_sent..]` is not written yet.
    pub out: Vec<u8>,
    /// Bytes of `out` already written.
    pub out_sent: usize,
    /// Close once the output is written (QUIT, protocol error, EOF, CLIENT KILL of itself).
    pub closing: bool,
    /// Reading stopped because the output is over [`OUTPUT_PAUSE`].
    pub read_paused: bool,
    /// Whether the cron saw no traffic since its last run (for releasing buffers).
    pub idle_since_cron: bool,
    /// Since when the pending output has been above the soft `client-output-buffer-limit`.
    pub soft_since: Option<std::time::Instant>,
    /// Queued in the server's dirty list: has output to write at the end of the loop pass.
    pub dirty: bool,
}

impl Conn {
    /// A new connection with empty buffers (allocated on first use).
    pub fn new(stream: Stream, handle: Handle, decoder: Decoder) -> Self {
        Conn {
            stream,
            handle,
            decoder,
            input: Vec::new(),
            in_start: 0,
            in_end: 0,
            out: Vec::new(),
            out_sent: 0,
            closing: false,
            read_paused: false,
            idle_since_cron: false,
            soft_since: None,
            dirty: false,
        }
    }

    /// Reads what the socket has, up to a full buffer; returns the bytes read and how it ended.
    ///
    /// Edge-triggered epoll reports every arrival of data, so a short read (fewer bytes than
    /// asked) proves the socket was empty at that instant and any later data raises a new
    /// event: the read that would only return `WouldBlock` is skipped, saving a syscall per batch.
    pub fn fill(&mut self, query_max: usize) -> io::Result<(usize, FillEnd)> {
        let mut total = 0;
        loop {
            if self.in_end == self.input.len() && !self.make_room(query_max) {
                return Ok((total, FillEnd::Full));
            }
            let room = self.input.len() - self.in_end;
            match self.stream.read(&mut self.input[self.in_end..]) {
                Ok(0) => return Ok((total, FillEnd::Eof)),
                Ok(n) => {
                    self.in_end += n;
                    total += n;
                    self.idle_since_cron = false;
                    if n < room {
                        return Ok((total, FillEnd::Drained));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return Ok((total, FillEnd::Drained))
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// One read into `buf` (the server's shared buffer): `Full` when it filled `buf`, so more
    /// may be waiting.
    pub fn read_into(&mut self, buf: &mut [u8]) -> io::Result<(usize, FillEnd)> {
        loop {
            return match self.stream.read(buf) {
                Ok(0) => Ok((0, FillEnd::Eof)),
                Ok(n) => {
                    self.idle_since_cron = false;
                    let end = if n < buf.len() {
                        FillEnd::Drained
                    } else {
                        FillEnd::Full
                    };
                    Ok((n, end))
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok((0, FillEnd::Drained)),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => Err(e),
            };
        }
    }

    /// Keeps `rest` (an incomplete command read into the shared buffer) as the pending input.
    /// Only called with nothing pending.
    pub fn stash(&mut self, rest: &[u8]) {
        debug_assert_eq!(self.pending_input(), 0);
        if rest.is_empty() {
            return;
        }
        if self.input.len() < rest.len() {
            self.input = vec![0; rest.len().max(INPUT_INITIAL)];
        }
        self.input[..rest.len()].copy_from_slice(rest);
        self.in_start = 0;
        self.in_end = rest.len();
    }

    /// Makes room at the end of the input: moves the pending bytes to the front if some were
    /// consumed, else grows the buffer (doubling, up to `query_max`). False when it is full.
    fn make_room(&mut self, query_max: usize) -> bool {
        if self.in_start > 0 {
            self.input.copy_within(self.in_start..self.in_end, 0);
            self.in_end -= self.in_start;
            self.in_start = 0;
            return true;
        }
        let len = self.input.len();
        if len >= query_max {
            return false;
        }
        let new_len = (len * 2).max(INPUT_INITIAL).min(query_max);
        self.input.resize(new_len, 0);
        true
    }

    /// Marks `n` pending input bytes as used (rewinding to the start when none is left).
    #[inline]
    pub fn consume(&mut self, n: usize) {
        self.in_start += n;
        debug_assert!(self.in_start <= self.in_end);
        if self.in_start == self.in_end {
            self.in_start = 0;
            self.in_end = 0;
        }
    }

    /// Bytes received but not yet consumed.
    #[inline]
    pub fn pending_input(&self) -> usize {
        self.in_end - self.in_start
    }

    /// Whether the input buffer is at its limit with nothing consumed: the pending command can
    /// never complete.
    pub fn input_stuck(&self, query_max: usize) -> bool {
        self.in_start == 0 && self.in_end == self.input.len() && self.input.len() >= query_max
    }

    /// Bytes of output not yet written.
    #[inline]
    pub fn out_pending(&self) -> usize {
        self.out.len() - self.out_sent
    }

    /// Writes the pending output with ONE `write` call; returns the bytes written (0 when the
    /// socket would block). A short write leaves the rest for the next writable event.
    pub fn flush(&mut self) -> io::Result<usize> {
        if self.out_pending() == 0 {
            return Ok(0);
        }
        let n = loop {
            match self.stream.write(&self.out[self.out_sent..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(0),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        };
        self.out_sent += n;
        if self.out_sent == self.out.len() {
            self.out.clear();
            self.out_sent = 0;
        } else if self.out_sent >= OUTPUT_KEEP && self.out_sent * 2 >= self.out.len() {
            // A reader that keeps up only partly: drop the written front so the buffer's
            // memory follows the pending bytes, not everything ever queued.
            self.out.drain(..self.out_sent);
            self.out_sent = 0;
        }
        Ok(n)
    }

    /// Whether the pending output breaks `limit` at `now`: above the hard limit, or above the
    /// soft limit for longer than its seconds (the soft clock starts the first time it is
    /// seen above, and stops when the output falls back below).
    pub fn over_output_limit(&mut self, limit: OutputLimit, now: Instant) -> bool {
        let pending = self.out_pending() as u64;
        if limit.hard_bytes > 0 && pending >= limit.hard_bytes {
            return true;
        }
        if limit.soft_bytes == 0 || pending < limit.soft_bytes {
            self.soft_since = None;
            return false;
        }
        match self.soft_since {
            None => {
                self.soft_since = Some(now);
                false
            }
            Some(since) => now.duration_since(since) > std::time::Duration::from_secs(limit.soft_s),
        }
    }

    /// Buffer sizes for `CLIENT LIST`.
    pub fn io_stats(&self) -> IoStats {
        let qbuf_free = self.input.len() - self.in_end;
        IoStats {
            qbuf: self.pending_input(),
            qbuf_free,
            obl: self.out_pending(),
            omem: self.out.capacity(),
            tot_mem: self.input.capacity() + self.out.capacity() + std::mem::size_of::<Self>(),
        }
    }

    /// Releases buffers of a client that has been idle since the last cron with nothing
    /// pending (10,000 idle clients should not keep 16 KiB each).
    pub fn release_idle_buffers(&mut self) {
        if self.idle_since_cron && self.pending_input() == 0 && !self.input.is_empty() {
            self.input = Vec::new();
            self.in_start = 0;
            self.in_end = 0;
        }
        if self.out_pending() == 0 && self.out.capacity() > OUTPUT_KEEP {
            self.out = Vec::new();
            self.out_sent = 0;
        }
        self.idle_since_cron = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kayvee_resp::Limits;

    /// A connection over one end of a Unix socket pair, with the other end to play the peer.
    fn pair() -> (Conn, std::os::unix::net::UnixStream) {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let stream = Stream::Unix(mio::net::UnixStream::from_std(a));
        (
            Conn::new(stream, Handle(0), Decoder::new(Limits::default())),
            b,
        )
    }

    #[test]
    fn fill_reads_what_is_there_and_reports_drained() {
        let (mut c, mut peer) = pair();
        assert_eq!(c.fill(1 << 20).unwrap(), (0, FillEnd::Drained));
        peer.write_all(b"PING\r\n").unwrap();
        assert_eq!(c.fill(1 << 20).unwrap(), (6, FillEnd::Drained));
        assert_eq!(&c.input[c.in_start..c.in_end], b"PING\r\n");
        assert_eq!(c.input.len(), INPUT_INITIAL);
        c.consume(6);
        assert_eq!((c.in_start, c.in_end), (0, 0));
        drop(peer);
        assert_eq!(c.fill(1 << 20).unwrap(), (0, FillEnd::Eof));
    }

    #[test]
    fn input_grows_then_compacts_then_stops_at_the_limit() {
        let (mut c, mut peer) = pair();
        let limit = 4 * INPUT_INITIAL;
        peer.write_all(&vec![b'x'; INPUT_INITIAL + 10]).unwrap();
        let (n, _) = c.fill(limit).unwrap();
        assert_eq!(n, INPUT_INITIAL + 10);
        assert_eq!(c.input.len(), 2 * INPUT_INITIAL);
        c.consume(100);
        peer.write_all(&vec![b'y'; 3 * INPUT_INITIAL]).unwrap();
        let (_, end) = c.fill(limit).unwrap();
        // The consumed prefix was reclaimed before the buffer grew again.
        assert_eq!(c.in_start, 0);
        assert_eq!(end, FillEnd::Drained);
        assert_eq!(c.pending_input(), 4 * INPUT_INITIAL - 90);
        peer.write_all(&[b'z'; 200]).unwrap();
        let (n, end) = c.fill(limit).unwrap();
        assert_eq!((n, end), (90, FillEnd::Full));
        assert!(c.input_stuck(limit));
    }

    #[test]
    fn shared_buffer_reads_and_stashed_tails() {
        let (mut c, mut peer) = pair();
        let mut scratch = [0u8; 8];
        assert_eq!(c.read_into(&mut scratch).unwrap(), (0, FillEnd::Drained));
        peer.write_all(b"PING\r\nPI").unwrap();
        assert_eq!(c.read_into(&mut scratch).unwrap(), (8, FillEnd::Full));
        assert_eq!(c.input.len(), 0, "no own buffer yet");
        c.stash(&scratch[6..8]);
        assert_eq!(&c.input[c.in_start..c.in_end], b"PI");
        assert_eq!(c.read_into(&mut scratch).unwrap(), (0, FillEnd::Drained));
        peer.write_all(b"NG\r\n").unwrap();
        assert_eq!(c.fill(1 << 20).unwrap(), (4, FillEnd::Drained));
        assert_eq!(&c.input[c.in_start..c.in_end], b"PING\r\n");
        drop(peer);
        assert_eq!(c.read_into(&mut scratch).unwrap(), (0, FillEnd::Eof));
    }

    #[test]
    fn flush_writes_everything_and_resets_the_buffer() {
        let (mut c, mut peer) = pair();
        c.out.extend_from_slice(b"+PONG\r\n");
        assert_eq!(c.flush().unwrap(), 7);
        assert_eq!((c.out.len(), c.out_sent), (0, 0));
        let mut got = [0u8; 7];
        peer.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"+PONG\r\n");
    }

    #[test]
    fn flush_keeps_what_the_socket_refuses() {
        let (mut c, _peer) = pair();
        c.out = vec![b'a'; 8 << 20];
        let n = c.flush().unwrap();
        assert!(n > 0 && n < 8 << 20, "{n}");
        assert_eq!(c.out_pending(), (8 << 20) - n);
        assert_eq!(c.flush().unwrap(), 0, "a full socket would block");
    }

    #[test]
    fn idle_buffers_are_released_on_the_second_cron() {
        let (mut c, mut peer) = pair();
        peer.write_all(b"x").unwrap();
        c.fill(1 << 20).unwrap();
        c.consume(1);
        c.release_idle_buffers();
        assert_eq!(c.input.len(), INPUT_INITIAL, "active since the last cron");
        c.release_idle_buffers();
        assert!(c.input.is_empty());
        assert_eq!(c.io_stats().qbuf, 0);
    }
}
