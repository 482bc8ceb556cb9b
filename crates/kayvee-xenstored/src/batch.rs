//! Many sends in one system call: a small io_uring used synchronously. The daemon queues the
//! replies of a loop pass (socket sends, or notification writes) and [`Batch::run`] submits
//! them all and waits for every completion in one `io_uring_enter`.
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

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};

use std::os::fd::AsRawFd;

/// Set in the environment (any value), no [`Batch`] is made: the daemon makes one system
/// call per operation, as on a kernel without io_uring.
pub const NO_IO_URING: &str = "KAYVEE_XENSTORED_NO_IO_URING";

const IORING_OP_READ: u8 = 22;
const IORING_OP_WRITE: u8 = 23;
const IORING_OP_SEND: u8 = 26;
const IORING_OP_RECV: u8 = 27;
const IORING_OFF_SQ_RING: i64 = 0;
const IORING_OFF_CQ_RING: i64 = 0x800_0000;
const IORING_OFF_SQES: i64 = 0x1000_0000;
const IORING_ENTER_GETEVENTS: u32 = 1;
const IORING_FEAT_SINGLE_MMAP: u32 = 1;
const IORING_FEAT_NODROP: u32 = 1 << 1;

/// A submission queue entry (the kernel's `struct io_uring_sqe`, 64 bytes).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Sqe {
    opcode: u8,
    flags: u8,
    ioprio: u16,
    fd: i32,
    off: u64,
    addr: u64,
    len: u32,
    op_flags: u32,
    user_data: u64,
    buf_index: u16,
    personality: u16,
    splice_fd_in: i32,
    addr3: u64,
    pad: u64,
}

/// A completion queue entry (`struct io_uring_cqe`, 16 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
struct Cqe {
    user_data: u64,
    res: i32,
    flags: u32,
}

/// `struct io_sqring_offsets`.
#[repr(C)]
#[derive(Default)]
struct SqOffsets {
    head: u32,
    tail: u32,
    ring_mask: u32,
    ring_entries: u32,
    flags: u32,
    dropped: u32,
    array: u32,
    resv1: u32,
    user_addr: u64,
}

/// `struct io_cqring_offsets`.
#[repr(C)]
#[derive(Default)]
struct CqOffsets {
    head: u32,
    tail: u32,
    ring_mask: u32,
    ring_entries: u32,
    overflow: u32,
    cqes: u32,
    flags: u32,
    resv1: u32,
    user_addr: u64,
}

/// `struct io_uring_params`.
#[repr(C)]
#[derive(Default)]
struct Params {
    sq_entries: u32,
    cq_entries: u32,
    flags: u32,
    sq_thread_cpu: u32,
    sq_thread_idle: u32,
    features: u32,
    wq_fd: u32,
    resv: [u32; 3],
    sq_off: SqOffsets,
    cq_off: CqOffsets,
}

/// A mapped region of the ring, unmapped on drop.
struct Map {
    ptr: *mut u8,
    len: usize,
}

impl Map {
    fn new(fd: RawFd, len: usize, off: i64) -> io::Result<Map> {
        // SAFETY: maps a region of our io_uring descriptor; checked.
        let ptr = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                off,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Map {
            ptr: ptr.cast(),
            len,
        })
    }

    /// The `u32` at byte offset `off` as an atomic (ring heads and tails).
    fn atomic(&self, off: u32) -> &AtomicU32 {
        // SAFETY: the kernel's offsets point at aligned u32s inside the mapping, which lives
        // as long as `self`.
        unsafe { &*self.ptr.add(off as usize).cast::<AtomicU32>() }
    }

    /// The `u32` at byte offset `off`, read once.
    fn word(&self, off: u32) -> u32 {
        self.atomic(off).load(Ordering::Relaxed)
    }
}

// SAFETY: the mapping belongs to the ring, which one owner uses at a time (`&mut` for every
// change); moving it to another thread moves that ownership.
unsafe impl Send for Map {}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `new` mapped.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// One queued operation's buffer, kept by the caller until [`Batch::run`] returns.
pub struct Done {
    /// What the caller tagged the operation with.
    pub tag: u64,
    /// The system call's result: bytes moved, or `-errno`.
    pub res: i32,
}

/// A synchronous io_uring: queue sends and writes, run them in one system call.
pub struct Batch {
    fd: OwnedFd,
    sq: Map,
    /// The completion ring when the kernel maps it separately (no single mmap).
    cq: Option<Map>,
    sqes: Map,
    sq_off: SqOffsets,
    cq_off: CqOffsets,
    entries: u32,
    /// Operations queued and not yet run.
    queued: u32,
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
        let mut p = Params::default();
        // SAFETY: io_uring_setup with a live, zeroed params struct of the kernel's layout.
        let fd = unsafe { libc::syscall(libc::SYS_io_uring_setup, entries, &mut p as *mut Params) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a new descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
        // Without NODROP a completion could be lost when the queue is full; ours never is
        // (at most `entries` operations per run), but refuse old kernels anyway.
        if p.features & IORING_FEAT_NODROP == 0 {
            return Err(io::ErrorKind::Unsupported.into());
        }
        let raw = fd.as_raw_fd();
        let sq_len = p.sq_off.array as usize + p.sq_entries as usize * 4;
        let cq_len = p.cq_off.cqes as usize + p.cq_entries as usize * std::mem::size_of::<Cqe>();
        let (sq, cq) = if p.features & IORING_FEAT_SINGLE_MMAP != 0 {
            (Map::new(raw, sq_len.max(cq_len), IORING_OFF_SQ_RING)?, None)
        } else {
            (
                Map::new(raw, sq_len, IORING_OFF_SQ_RING)?,
                Some(Map::new(raw, cq_len, IORING_OFF_CQ_RING)?),
            )
        };
        let sqes = Map::new(
            raw,
            p.sq_entries as usize * std::mem::size_of::<Sqe>(),
            IORING_OFF_SQES,
        )?;
        // Slot i of the submission array always names entry i.
        for i in 0..p.sq_entries {
            sq.atomic(p.sq_off.array + 4 * i)
                .store(i, Ordering::Relaxed);
        }
        Ok(Batch {
            fd,
            sq,
            cq,
            sqes,
            entries: p.sq_entries.min(p.cq_entries),
            sq_off: p.sq_off,
            cq_off: p.cq_off,
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
        self.queued as usize
    }

    /// Nothing queued.
    pub fn is_empty(&self) -> bool {
        self.queued == 0
    }

    /// Queue one entry; the caller checked [`Batch::is_full`].
    fn push(&mut self, sqe: Sqe) {
        assert!(!self.is_full(), "batch full");
        let mask = self.sq.word(self.sq_off.ring_mask);
        let tail = self.sq.atomic(self.sq_off.tail).load(Ordering::Relaxed);
        let slot = (tail.wrapping_add(self.queued) & mask) as usize;
        // SAFETY: `slot` is below the ring's entry count, inside the SQE mapping; the kernel
        // reads it only after the tail is published in `run`.
        unsafe { self.sqes.ptr.cast::<Sqe>().add(slot).write(sqe) };
        self.queued += 1;
    }

    /// Queue a non-blocking `send` of `len` bytes at `buf` on socket `fd`.
    ///
    /// # Safety
    /// `buf..buf+len` must stay valid and unchanged until [`Batch::run`] returns.
    pub unsafe fn send(&mut self, fd: RawFd, buf: *const u8, len: usize, tag: u64) {
        self.push(Sqe {
            opcode: IORING_OP_SEND,
            fd,
            addr: buf as u64,
            len: len as u32,
            op_flags: (libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) as u32,
            user_data: tag,
            ..Sqe::default()
        });
    }

    /// Queue a non-blocking `recv` of up to `len` bytes into `buf` from socket `fd`, with
    /// `flags` (`MSG_PEEK`) besides `MSG_DONTWAIT`.
    ///
    /// # Safety
    /// `buf..buf+len` must stay valid, and unused by anything else, until [`Batch::run`]
    /// returns.
    pub unsafe fn recv(&mut self, fd: RawFd, buf: *mut u8, len: usize, flags: i32, tag: u64) {
        self.push(Sqe {
            opcode: IORING_OP_RECV,
            fd,
            addr: buf as u64,
            len: len as u32,
            op_flags: (flags | libc::MSG_DONTWAIT) as u32,
            user_data: tag,
            ..Sqe::default()
        });
    }

    /// Queue a `write` of `len` bytes at `buf` to `fd` (a non-blocking descriptor).
    ///
    /// # Safety
    /// `buf..buf+len` must stay valid and unchanged until [`Batch::run`] returns.
    pub unsafe fn write(&mut self, fd: RawFd, buf: *const u8, len: usize, tag: u64) {
        self.push(Sqe {
            opcode: IORING_OP_WRITE,
            fd,
            // The current file position (a pipe or FIFO has none).
            off: u64::MAX,
            addr: buf as u64,
            len: len as u32,
            user_data: tag,
            ..Sqe::default()
        });
    }

    /// Queue a `read` of up to `len` bytes into `buf` from `fd` (a non-blocking descriptor).
    ///
    /// # Safety
    /// `buf..buf+len` must stay valid, and unused by anything else, until [`Batch::run`]
    /// returns.
    pub unsafe fn read(&mut self, fd: RawFd, buf: *mut u8, len: usize, tag: u64) {
        self.push(Sqe {
            opcode: IORING_OP_READ,
            fd,
            off: u64::MAX,
            addr: buf as u64,
            len: len as u32,
            user_data: tag,
            ..Sqe::default()
        });
    }

    /// Submit everything queued and wait for all of it; the completions, in the order the
    /// kernel finished them.
    pub fn run(&mut self) -> io::Result<&[Done]> {
        self.done.clear();
        let n = self.queued;
        if n == 0 {
            return Ok(&self.done);
        }
        let tail = self.sq.atomic(self.sq_off.tail);
        tail.store(
            tail.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Release,
        );
        self.queued = 0;
        let mut submitted = 0;
        while self.done.len() < n as usize {
            let to_submit = n - submitted;
            let want = n - self.done.len() as u32;
            // SAFETY: io_uring_enter on our ring with no signal mask.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_io_uring_enter,
                    self.fd.as_raw_fd(),
                    to_submit,
                    want,
                    IORING_ENTER_GETEVENTS,
                    ptr::null::<libc::sigset_t>(),
                    0usize,
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                // Entries the kernel has not taken would be submitted by the next run with
                // stale buffers: this ring cannot be used again.
                if submitted < n {
                    return Err(e);
                }
            } else {
                submitted += r as u32;
            }
            self.reap();
        }
        Ok(&self.done)
    }

    /// Move the completions from the ring to `done`.
    fn reap(&mut self) {
        let cq = self.cq.as_ref().unwrap_or(&self.sq);
        let mask = cq.word(self.cq_off.ring_mask);
        let head_at = cq.atomic(self.cq_off.head);
        let mut head = head_at.load(Ordering::Relaxed);
        let tail = cq.atomic(self.cq_off.tail).load(Ordering::Acquire);
        while head != tail {
            let i = (head & mask) as usize;
            // SAFETY: entry `i` of the completion array, published by the tail read above.
            let cqe = unsafe {
                cq.ptr
                    .add(self.cq_off.cqes as usize)
                    .cast::<Cqe>()
                    .add(i)
                    .read()
            };
            self.done.push(Done {
                tag: cqe.user_data,
                res: cqe.res,
            });
            head = head.wrapping_add(1);
        }
        head_at.store(head, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
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
