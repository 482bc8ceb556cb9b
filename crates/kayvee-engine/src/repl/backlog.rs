//! The replication backlog: the last `repl-backlog-size` bytes of the replication stream, with
//! the offset of the first byte it holds, so a replica that lost its link and asks for an
//! offset still held continues (`+CONTINUE`) instead of syncing the whole dataset again.

use alloc::vec::Vec;

/// A ring of the stream's last bytes.
#[derive(Clone, Debug, Default)]
pub struct Backlog {
    /// The ring (its length is the capacity once full).
    buf: Vec<u8>,
    /// Capacity in bytes (`repl-backlog-size`).
    size: usize,
    /// Where the next byte goes in `buf`.
    idx: usize,
    /// Bytes held (`repl_backlog_histlen`).
    histlen: usize,
    /// Stream offset of the first byte held (`repl_backlog_first_byte_offset`); the stream's
    /// offsets start at 1.
    pub first_byte_offset: u64,
}

impl Backlog {
    /// An empty backlog of `size` bytes whose next byte has stream offset `next_offset`.
    pub fn new(size: usize, next_offset: u64) -> Self {
        Backlog {
            buf: Vec::new(),
            size: size.max(1),
            idx: 0,
            histlen: 0,
            first_byte_offset: next_offset,
        }
    }

    /// Capacity in bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Bytes held.
    pub fn histlen(&self) -> usize {
        self.histlen
    }

    /// Appends stream bytes, dropping the oldest past the capacity.
    pub fn feed(&mut self, mut bytes: &[u8]) {
        if bytes.len() > self.size {
            let skip = bytes.len() - self.size;
            self.first_byte_offset += (self.histlen + skip) as u64;
            self.histlen = 0;
            bytes = &bytes[skip..];
        }
        for &b in bytes {
            if self.buf.len() < self.size {
                self.buf.push(b);
            } else {
                self.buf[self.idx] = b;
            }
            self.idx = (self.idx + 1) % self.size;
            if self.histlen == self.size {
                self.first_byte_offset += 1;
            } else {
                self.histlen += 1;
            }
        }
    }

    /// The held bytes from stream offset `offset` on (`offset` may be one past the last byte:
    /// nothing to send), or None when the backlog no longer (or never) held it.
    pub fn from_offset(&self, offset: u64) -> Option<Vec<u8>> {
        let end = self.first_byte_offset + self.histlen as u64;
        if offset < self.first_byte_offset || offset > end {
            return None;
        }
        let skip = (offset - self.first_byte_offset) as usize;
        let len = self.histlen - skip;
        let oldest = (self.idx + self.size - self.histlen) % self.size;
        let start = (oldest + skip) % self.size;
        let mut out = Vec::with_capacity(len);
        for i in 0..len {
            out.push(self.buf[(start + i) % self.size]);
        }
        Some(out)
    }

    /// Changes the capacity, keeping the newest bytes that fit.
    pub fn resize(&mut self, size: usize) {
        let end = self.first_byte_offset + self.histlen as u64;
        let held = self.from_offset(self.first_byte_offset).unwrap_or_default();
        *self = Backlog::new(size, end - held.len() as u64);
        self.feed(&held);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_bytes_with_their_offsets() {
        let mut b = Backlog::new(4, 1);
        b.feed(b"ab");
        assert_eq!(b.from_offset(1).unwrap(), b"ab");
        assert_eq!(b.from_offset(3).unwrap(), b"");
        assert_eq!(b.from_offset(4), None);
        b.feed(b"cdef");
        assert_eq!(b.first_byte_offset, 3);
        assert_eq!(b.histlen(), 4);
        assert_eq!(b.from_offset(3).unwrap(), b"cdef");
        assert_eq!(b.from_offset(5).unwrap(), b"ef");
        assert_eq!(b.from_offset(2), None);
        b.feed(b"0123456789");
        assert_eq!(b.first_byte_offset, 13);
        assert_eq!(b.from_offset(13).unwrap(), b"6789");
        b.resize(2);
        assert_eq!(b.from_offset(15).unwrap(), b"89");
        assert_eq!(b.first_byte_offset, 15);
    }
}
