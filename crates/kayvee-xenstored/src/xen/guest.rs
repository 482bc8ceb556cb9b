//! A guest-side Xenstore client that talks through its ring page as a guest kernel's xenbus
//! driver does: write request bytes into the request queue as space allows, publish
//! `req_prod`, notify when the server had drained the queue (else it is still reading and
//! will see the bytes); read the response queue, publish `rsp_cons`, notify when the queue
//! was full (the server may be waiting for room); use the reconnection feature when the
//! server offers it. For tests and the ring benchmark.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kayvee_xswire::{encode, Header, HEADER_LEN};

use super::page::Page;
use super::ring::{self, consume, produce, REQUESTS, RESPONSES};
use super::testxen::{clear, signal, GuestSide};

/// How long a guest waits for the daemon before giving up.
pub const WAIT: Duration = Duration::from_secs(20);

/// One message read from the response queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Msg {
    /// Its header.
    pub header: Header,
    /// Its payload.
    pub payload: Vec<u8>,
}

/// A guest's Xenstore connection.
pub struct Guest {
    page: Page,
    inbound: Arc<OwnedFd>,
    outbound: Arc<OwnedFd>,
    /// Response bytes read and not yet parsed.
    buf: Vec<u8>,
    /// Watch events read while waiting for a reply.
    pub events: VecDeque<Msg>,
    req_id: u32,
    /// How long to wait for the daemon ([`WAIT`] unless [`Guest::patience`] changed it).
    wait: Duration,
}

impl Guest {
    /// A client on its domain's page and event channel.
    pub fn new(side: GuestSide) -> Self {
        Guest {
            page: side.page,
            inbound: side.inbound,
            outbound: side.outbound,
            buf: Vec::new(),
            events: VecDeque::new(),
            req_id: 0,
            wait: WAIT,
        }
    }

    /// Wait at most `wait` for the daemon (tests of a daemon that stopped answering).
    pub fn patience(&mut self, wait: Duration) {
        self.wait = wait;
    }

    /// The ring page (tests corrupt it on purpose).
    pub fn page(&self) -> &Page {
        &self.page
    }

    /// Notify the daemon.
    pub fn kick(&self) {
        signal(&self.outbound).expect("eventfd");
    }

    /// Wait until the daemon notifies or `deadline` passes; false on timeout.
    fn wait(&self, deadline: Instant) -> bool {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut pfd = libc::pollfd {
            fd: self.inbound.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = left.as_millis().clamp(1, 1000) as i32;
        // SAFETY: one live pollfd.
        unsafe { libc::poll(&mut pfd, 1, ms) };
        clear(&self.inbound);
        Instant::now() < deadline
    }

    /// Write all of `bytes` into the request queue, waiting for room.
    pub fn send(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        let deadline = Instant::now() + self.wait;
        while !bytes.is_empty() {
            self.check_error()?;
            let prod = self.page.load(ring::REQ_PROD, Ordering::Relaxed);
            let n = produce(&self.page, REQUESTS, bytes).map_err(ring_err)?;
            if n > 0 {
                bytes = &bytes[n..];
                // Linux's xb_write: notify only if the server had consumed everything.
                if self.page.load(ring::REQ_CONS, Ordering::SeqCst) == prod {
                    self.kick();
                }
            } else if !self.wait(deadline) {
                return Err(io::ErrorKind::TimedOut.into());
            }
        }
        Ok(())
    }

    /// The error indicator as an error, if the server set it.
    fn check_error(&self) -> io::Result<()> {
        match self.page.load(ring::ERROR, Ordering::Acquire) {
            0 => Ok(()),
            e => Err(io::Error::other(format!("ring error {e}"))),
        }
    }

    /// The next whole message from the response queue (replies and events alike).
    pub fn recv(&mut self) -> io::Result<Msg> {
        let deadline = Instant::now() + self.wait;
        loop {
            if let Some(m) = self.parse() {
                return Ok(m);
            }
            let n = self.take_responses(4096)?;
            if n > 0 {
                continue;
            }
            self.check_error()?;
            if !self.wait(deadline) {
                return Err(io::ErrorKind::TimedOut.into());
            }
        }
    }

    /// Read up to `max` response bytes into `buf`; notify when the queue was full before
    /// (Linux's xb_read: the server may be waiting for room).
    fn take_responses(&mut self, max: usize) -> io::Result<usize> {
        let cons = self.page.load(ring::RSP_CONS, Ordering::Relaxed);
        let n = consume(&self.page, RESPONSES, &mut self.buf, max).map_err(ring_err)?;
        let prod = self.page.load(ring::RSP_PROD, Ordering::SeqCst);
        if n > 0 && prod.wrapping_sub(cons) >= ring::RING_SIZE {
            self.kick();
        }
        Ok(n)
    }

    /// A whole message at the front of `buf`, taken off it.
    fn parse(&mut self) -> Option<Msg> {
        let head: &[u8; HEADER_LEN] = self.buf.get(..HEADER_LEN)?.try_into().ok()?;
        let header = Header::read(head);
        let end = HEADER_LEN + header.len as usize;
        let payload = self.buf.get(HEADER_LEN..end)?.to_vec();
        self.buf.drain(..end);
        Some(Msg { header, payload })
    }

    /// Send one request and wait for its reply, queueing watch events met meanwhile.
    pub fn request(&mut self, ty: u32, tx_id: u32, payload: &[u8]) -> io::Result<Msg> {
        self.req_id = self.req_id.wrapping_add(1);
        let mut wire = Vec::with_capacity(HEADER_LEN + payload.len());
        encode(&mut wire, ty, self.req_id, tx_id, payload);
        self.send(&wire)?;
        loop {
            let m = self.recv()?;
            if m.header.ty == kayvee_xswire::MsgType::WatchEvent as u32 {
                self.events.push_back(m);
                continue;
            }
            return Ok(m);
        }
    }

    /// The next watch event (queued or read now).
    pub fn event(&mut self) -> io::Result<Msg> {
        match self.events.pop_front() {
            Some(m) => Ok(m),
            None => self.recv(),
        }
    }

    /// Ask the server to reset the ring (connection = RECONNECT) and wait until it has.
    pub fn reconnect(&mut self) -> io::Result<()> {
        let features = self.page.load(ring::SERVER_FEATURES, Ordering::Acquire);
        if features & ring::FEATURE_RECONNECTION == 0 {
            return Err(io::ErrorKind::Unsupported.into());
        }
        self.page
            .store(ring::CONNECTION, ring::RECONNECT, Ordering::SeqCst);
        self.kick();
        let deadline = Instant::now() + self.wait;
        while self.page.load(ring::CONNECTION, Ordering::Acquire) != ring::CONNECTED {
            if !self.wait(deadline) {
                return Err(io::ErrorKind::TimedOut.into());
            }
        }
        self.buf.clear();
        self.events.clear();
        Ok(())
    }
}

impl Guest {
    /// Carry one Unix-socket client's byte stream over this ring until the client hangs up,
    /// then reconnect the ring (its watches and transactions go, as when a guest process
    /// closes the xenbus device): a socket path through which dom0 tools such as
    /// xenstore-utils act as this guest.
    pub fn proxy(&mut self, mut client: std::os::unix::net::UnixStream) -> io::Result<()> {
        use std::io::{Read, Write};
        client.set_nonblocking(true)?;
        let mut buf = vec![0u8; 4096];
        loop {
            let mut fds = [
                libc::pollfd {
                    fd: client.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: self.inbound.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: two live pollfds.
            unsafe { libc::poll(fds.as_mut_ptr(), 2, 100) };
            clear(&self.inbound);
            match client.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => self.send(&buf[..n])?,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => break,
            }
            self.buf.clear();
            if self.take_responses(usize::MAX)? > 0 {
                client.set_nonblocking(false)?;
                let sent = client.write_all(&self.buf);
                client.set_nonblocking(true)?;
                if sent.is_err() {
                    break;
                }
            }
        }
        self.buf.clear();
        self.reconnect()
    }
}

/// A ring fault as an I/O error.
fn ring_err(e: ring::RingError) -> io::Error {
    io::Error::other(format!("{e:?}"))
}
