//! The replication backlog: the last `repl-backlog-size` bytes of the replication stream, with
//! the offset of the first byte it holds, so a replica that lost its link and asks for an
//! offset still held continues (`+CONTINUE`) instead of syncing the whole dataset again.
//!
//! It is also the stream kept for replicas whose full sync runs (Redis 7.0's shared
//! replication buffer): while a replica waits for its RDB, the bytes from its stream start on
//! are *pinned* and the front is not trimmed past them, so the backlog outgrows its size, a
//! replica that reconnects meanwhile may continue from further back, and the memory is given
//! back as soon as no syncing replica needs it.

use alloc::collections::VecDeque;
use alloc::vec::Vec;

/// Bytes per block: the front is trimmed a whole block at a time, as Redis frees its
/// replication buffer's 16 KiB blocks (`PROTO_REPLY_CHUNK_BYTES`).
const BLOCK: usize = 16 * 1024;

/// The stream's last bytes, in blocks.
#[derive(Clone, Debug, Default)]
pub struct Backlog {
    /// The bytes held, oldest block first, each at most [`BLOCK`] bytes.
    blocks: VecDeque<Vec<u8>>,
    /// Capacity in bytes (`repl-backlog-size`).
    size: usize,
    /// Bytes held (`repl_backlog_histlen`).
    histlen: usize,
    /// Stream offset of the first byte held (`repl_backlog_first_byte_offset`); the stream's
    /// offsets start at 1.
    pub first_byte_offset: u64,
    /// The earliest stream offset a syncing replica still needs (None: none syncs).
    pin: Option<u64>,
}

impl Backlog {
    /// An empty backlog of `size` bytes whose next byte has stream offset `next_offset`.
    pub fn new(size: usize, next_offset: u64) -> Self {
        Backlog {
            blocks: VecDeque::new(),
            size: size.max(1),
            histlen: 0,
            first_byte_offset: next_offset,
            pin: None,
        }
    }

    /// Capacity in bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Bytes held (past the capacity while a syncing replica pins older ones).
    pub fn histlen(&self) -> usize {
        self.histlen
    }

    /// Bytes its blocks take (each block's capacity).
    pub fn allocated(&self) -> usize {
        self.blocks.iter().map(Vec::capacity).sum()
    }

    /// The stream offset one past the last byte held.
    pub fn end_offset(&self) -> u64 {
        self.first_byte_offset + self.histlen as u64
    }

    /// Appends stream bytes, dropping the oldest blocks past the capacity that no syncing
    /// replica needs.
    pub fn feed(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let mut rest = bytes;
        if let Some(last) = self.blocks.back_mut() {
            let room = BLOCK.saturating_sub(last.len()).min(rest.len());
            last.extend_from_slice(&rest[..room]);
            rest = &rest[room..];
        }
        for part in rest.chunks(BLOCK) {
            let mut block = Vec::with_capacity(BLOCK);
            block.extend_from_slice(part);
            self.blocks.push_back(block);
        }
        self.histlen += bytes.len();
        self.trim();
    }

    /// Drops whole blocks from the front while what stays holds at least the capacity and
    /// no syncing replica needs them.
    fn trim(&mut self) {
        while let Some(front) = self.blocks.front() {
            let len = front.len();
            let needed = self
                .pin
                .is_some_and(|p| p < self.first_byte_offset + len as u64);
            if self.histlen - len < self.size || needed || self.blocks.len() == 1 {
                break;
            }
            self.blocks.pop_front();
            self.histlen -= len;
            self.first_byte_offset += len as u64;
        }
    }

    /// Keeps the bytes from stream offset `pin` on (the earliest start of a syncing replica's
    /// stream), or lets them go (None).
    pub fn set_pin(&mut self, pin: Option<u64>) {
        self.pin = pin;
        self.trim();
    }

    /// The held bytes from stream offset `offset` on (`offset` may be one past the last byte:
    /// nothing to send), or None when the backlog no longer (or never) held it.
    pub fn from_offset(&self, offset: u64) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        self.read_from(offset, usize::MAX, &mut out)?;
        Some(out)
    }

    /// Appends to `out` at most `max` held bytes from stream offset `offset` on; how many
    /// (0: `offset` is one past the last byte), or None when the backlog no longer (or never)
    /// held it. A replica whose full sync ended catches up with the stream kept for it this
    /// way, a piece at a time as it reads, instead of a second copy of all of it at once.
    pub fn read_from(&self, offset: u64, max: usize, out: &mut Vec<u8>) -> Option<usize> {
        if offset < self.first_byte_offset || offset > self.end_offset() {
            return None;
        }
        let mut skip = (offset - self.first_byte_offset) as usize;
        let mut left = max;
        for block in &self.blocks {
            if left == 0 {
                break;
            }
            if skip >= block.len() {
                skip -= block.len();
                continue;
            }
            let part = &block[skip..block.len().min(skip.saturating_add(left))];
            out.extend_from_slice(part);
            left -= part.len();
            skip = 0;
        }
        Some(max - left)
    }

    /// Changes the capacity: the oldest blocks past it go (but what a syncing replica needs).
    pub fn resize(&mut self, size: usize) {
        self.size = size.max(1);
        self.trim();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_bytes_with_their_offsets() {
        let mut b = Backlog::new(BLOCK, 1);
        b.feed(b"ab");
        assert_eq!(b.from_offset(1).unwrap(), b"ab");
        assert_eq!(b.from_offset(3).unwrap(), b"");
        assert_eq!(b.from_offset(4), None);
        // Three more blocks' worth: the front block goes once the rest hold the capacity.
        let fill = alloc::vec![b'x'; BLOCK * 3];
        b.feed(&fill);
        assert_eq!(b.histlen(), BLOCK + 2, "one block and the partial last one");
        assert_eq!(b.first_byte_offset, 1 + 2 * BLOCK as u64);
        assert_eq!(b.end_offset(), 3 + 3 * BLOCK as u64);
        assert_eq!(b.from_offset(1), None);
        assert_eq!(b.from_offset(b.end_offset() - 2).unwrap(), b"xx");
        // A smaller capacity still keeps at least that many bytes: here the last two blocks.
        b.resize(10);
        assert_eq!(b.histlen(), BLOCK + 2);
        b.resize(BLOCK * 8);
        assert_eq!(
            b.histlen(),
            BLOCK + 2,
            "what was dropped does not come back"
        );
    }

    #[test]
    fn a_pin_keeps_the_stream_a_syncing_replica_needs_past_the_capacity() {
        let mut b = Backlog::new(BLOCK, 1);
        b.feed(b"0123");
        b.set_pin(Some(3));
        let fill = alloc::vec![b'y'; BLOCK * 4];
        b.feed(&fill);
        assert_eq!(b.first_byte_offset, 1, "the pinned block stays");
        assert_eq!(b.histlen(), 4 + 4 * BLOCK);
        let since = b.from_offset(3).unwrap();
        assert_eq!(&since[..2], b"23");
        assert_eq!(since.len(), 2 + 4 * BLOCK);
        // Released: back to the capacity (plus the partial last block).
        b.set_pin(None);
        assert!(b.histlen() < 2 * BLOCK, "{}", b.histlen());
        assert_eq!(b.end_offset(), 5 + 4 * BLOCK as u64);
    }

    #[test]
    fn reads_a_bounded_piece_across_blocks() {
        let mut b = Backlog::new(4 * BLOCK, 1);
        let stream: Vec<u8> = (0..2 * BLOCK + 10).map(|i| i as u8).collect();
        b.feed(&stream);
        let mut out = Vec::new();
        assert_eq!(b.read_from(BLOCK as u64 - 4, 100, &mut out), Some(100));
        assert_eq!(out, &stream[BLOCK - 5..BLOCK + 95]);
        out.clear();
        assert_eq!(b.read_from(b.end_offset() - 3, 100, &mut out), Some(3));
        assert_eq!(b.read_from(b.end_offset(), 100, &mut out), Some(0));
        assert_eq!(b.read_from(b.end_offset() + 1, 100, &mut out), None);
    }
}
