//! Many sends in one system call: a small io_uring (the `io-uring` crate) used
//! synchronously. The daemon queues the replies of a loop pass (socket sends, or notification
//! writes) and [`Batch::run`] submits them all and waits for every completion in one
//! `io_uring_enter`.
//!
//! Why: each send wakes a client, and the kernel switches to the woken client when the
//! sending system call returns (the daemon is preempted once per reply). Sent together, the
//! clients are woken inside one call and the daemon is switched out at most once per batch.
//!
//! Every operation is non-blocking (`MSG_DONTWAIT` on sockets, `O_NONBLOCK` descriptors for
//! writes), so the kernel finishes it inside the call (`EAGAIN` comes back as its result
//! instead of a wait); [`Batch::run`] still waits for all completions, so the buffers handed
//! in are never used after it returns. Where io_uring is missing (old kernel, seccomp),
//! [`Batch::new`] fails and the caller sends one call at a time (also when [`NO_IO_URING`] is
//! set in the environment).

use io_uring::{opcode, squeue, types, IoUring};
use std::io;
use std::os::fd::RawFd;

/// Set in the environment (any value), no [`Batch`] is made: the daemon makes one system
/// call per operation, as on a kernel without io_uring.
pub const NO_IO_URING: &str = "KAYVEE_XENSTORED_NO_IO_URING";

/// One queued operation's completion.
pub struct Done {
    /// What the caller tagged the operation with.
    pub tag: u64,
    /// The system call's result: bytes moved, or `-errno`.
    pub res: i32,
}

/// A synchronous io_uring: queue sends and writes, run them in one system call.
pub struct Batch {
    ring: IoUring,
    /// Operations the ring's submission queue holds.
    entries: usize,
    /// Operations queued and not yet run.
    queued: usize,
    /// Completions taken by the last [`Batch::run`].
    done: Vec<Done>,
}

impl Batch {
    /// A ring of `entries` slots (a power of two); `Err` when the kernel has no io_uring.
    pub fn new(entries: u32) -> io::Result<Batch> {
        // The path without io_uring, on demand (to test it where the kernel has io_uring).
        if std::env::var_os(NO_IO_URING).is_some() {
            return Err(io::ErrorKind::Unsupported.into());
        }
        let ring = IoUring::new(entries)?;
        // Without NODROP a completion could be lost when the queue is full; ours never is
        // (at most `entries` operations per run), but refuse old kernels anyway.
        if !ring.params().is_feature_nodrop() {
            return Err(io::ErrorKind::Unsupported.into());
        }
        let params = ring.params();
        let entries = params.sq_entries().min(params.cq_entries()) as usize;
        Ok(Batch {
            ring,
            entries,
            queued: 0,
            done: Vec::new(),
        })
    }

    /// Room for more operations before [`Batch::run`].
    pub fn is_full(&self) -> bool {
        self.queued == self.entries
    }

    /// Operations queued.
    pub fn len(&self) -> usize {
        self.queued
    }

    /// Nothing queued.
    pub fn is_empty(&self) -> bool {
        self.queued == 0
    }

    /// Queue one entry; the caller checked [`Batch::is_full`].
    ///
    /// # Safety
    /// The buffers `entry` names stay valid until [`Batch::run`] returns.
    unsafe fn push(&mut self, entry: squeue::Entry) {
        assert!(!self.is_full(), "batch full");
        // SAFETY: the caller keeps the entry's buffers; the queue has room (checked above,
        // `run` empties it).
        unsafe { self.ring.submission().push(&entry) }.expect("room checked above");
        self.queued += 1;
    }

    /// Queue a non-blocking `send` of `len` bytes at `buf` on socket `fd`.
    ///
    /// # Safety
    /// `buf..buf+len` must stay valid and unchanged until [`Batch::run`] returns.
    pub unsafe fn send(&mut self, fd: RawFd, buf: *const u8, len: usize, tag: u64) {
        let entry = opcode::Send::new(types::Fd(fd), buf, len as u32)
            .flags(libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
            .build()
            .user_data(tag);
        // SAFETY: the caller's promise.
        unsafe { self.push(entry) };
    }

    /// Queue a non-blocking `recv` of up to `len` bytes into `buf` from socket `fd`, with
    /// `flags` (`MSG_PEEK`) besides `MSG_DONTWAIT`.
    ///
    /// # Safety
    /// `buf..buf+len` must stay valid, and unused by anything else, until [`Batch::run`]
    /// returns.
    pub unsafe fn recv(&mut self, fd: RawFd, buf: *mut u8, len: usize, flags: i32, tag: u64) {
        let entry = opcode::Recv::new(types::Fd(fd), buf, len as u32)
            .flags(flags | libc::MSG_DONTWAIT)
            .build()
            .user_data(tag);
        // SAFETY: the caller's promise.
        unsafe { self.push(entry) };
    }

    /// Queue a `write` of `len` bytes at `buf` to `fd` (a non-blocking descriptor).
    ///
    /// # Safety
    /// `buf..buf+len` must stay valid and unchanged until [`Batch::run`] returns.
    pub unsafe fn write(&mut self, fd: RawFd, buf: *const u8, len: usize, tag: u64) {
        // The current file position (a pipe or FIFO has none).
        let entry = opcode::Write::new(types::Fd(fd), buf, len as u32)
            .offset(u64::MAX)
            .build()
            .user_data(tag);
        // SAFETY: the caller's promise.
        unsafe { self.push(entry) };
    }

    /// Queue a `read` of up to `len` bytes into `buf` from `fd` (a non-blocking descriptor).
    ///
    /// # Safety
    /// `buf..buf+len` must stay valid, and unused by anything else, until [`Batch::run`]
    /// returns.
    pub unsafe fn read(&mut self, fd: RawFd, buf: *mut u8, len: usize, tag: u64) {
        let entry = opcode::Read::new(types::Fd(fd), buf, len as u32)
            .offset(u64::MAX)
            .build()
            .user_data(tag);
        // SAFETY: the caller's promise.
        unsafe { self.push(entry) };
    }

    /// Submit everything queued and wait for all of it; the completions, in the order the
    /// kernel finished them.
    pub fn run(&mut self) -> io::Result<&[Done]> {
        self.done.clear();
        let n = self.queued;
        self.queued = 0;
        while self.done.len() < n {
            match self.ring.submit_and_wait(n - self.done.len()) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // Entries the kernel has not taken would be submitted by the next run with
                // stale buffers: this ring cannot be used again.
                Err(e) if !self.ring.submission().is_empty() => return Err(e),
                Err(_) => {}
            }
            self.done.extend(self.ring.completion().map(|c| Done {
                tag: c.user_data(),
                res: c.result(),
            }));
        }
        Ok(&self.done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn sends_and_writes_run_in_one_call() {
        let Ok(mut b) = Batch::new(8) else {
            eprintln!("no io_uring here: nothing to test");
            return;
        };
        let (mut a1, a2) = UnixStream::pair().unwrap();
        let (mut p1, p2) = UnixStream::pair().unwrap();
        a2.set_nonblocking(true).unwrap();
        p2.set_nonblocking(true).unwrap();
        let x = b"hello".to_vec();
        let y = b"world!".to_vec();
        // SAFETY: the buffers outlive the run.
        unsafe {
            b.send(a2.as_raw_fd(), x.as_ptr(), x.len(), 1);
            b.write(p2.as_raw_fd(), y.as_ptr(), y.len(), 2);
        }
        assert_eq!(b.len(), 2);
        let mut done: Vec<(u64, i32)> = b.run().unwrap().iter().map(|d| (d.tag, d.res)).collect();
        done.sort();
        assert_eq!(done, vec![(1, 5), (2, 6)]);
        let mut got = [0u8; 16];
        assert_eq!(a1.read(&mut got).unwrap(), 5);
        assert_eq!(&got[..5], b"hello");
        assert_eq!(p1.read(&mut got).unwrap(), 6);
        // Many rounds reuse the ring's slots.
        for round in 0..40u64 {
            // SAFETY: as above.
            unsafe { b.send(a2.as_raw_fd(), x.as_ptr(), x.len(), round) };
            let d = b.run().unwrap();
            assert_eq!((d.len(), d[0].tag, d[0].res), (1, round, 5));
            assert_eq!(a1.read(&mut got).unwrap(), 5);
        }
    }

    #[test]
    fn a_full_socket_answers_eagain_instead_of_waiting() {
        let Ok(mut b) = Batch::new(4) else {
            return;
        };
        let (_keep, s) = UnixStream::pair().unwrap();
        s.set_nonblocking(true).unwrap();
        let big = vec![0u8; 1 << 20];
        let mut eagain = false;
        for _ in 0..64 {
            // SAFETY: `big` outlives the run.
            unsafe { b.send(s.as_raw_fd(), big.as_ptr(), big.len(), 7) };
            let d = b.run().unwrap();
            if d[0].res == -libc::EAGAIN {
                eagain = true;
                break;
            }
        }
        assert!(eagain);
    }
}
