//! The pool of smoltcp TCP sockets the server listens and serves on: smoltcp's TCP socket
//! serves one connection, so the loop keeps a few listening and reuses closed ones.

use crate::arrival::Arrivals;
use crate::heap;
use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;
use core::task::Waker;
use kayvee_engine::{ConnInfo, Handle, Transport};
use smoltcp::iface::{SocketHandle, SocketSet};
use smoltcp::socket::tcp;

/// Sockets kept listening for new connections once the pool has grown (one new socket a loop
/// round: each costs 48 KiB of buffers to allocate and clear, which the boot need not wait for).
pub const LISTENERS_MIN: usize = 32;
/// Sockets listening at the least: after every received frame (a SYN takes a listener) the
/// pool is topped up to this many at once.
pub const LISTENERS_LOW: usize = 8;
/// Heap left free when the pool grows (see `Pool::grow`).
pub const GROW_RESERVE: usize = 512 * 1024;
/// Receive buffer per TCP socket.
pub const SOCK_RX_BYTES: usize = 16 * 1024;
/// Send buffer per TCP socket.
pub const SOCK_TX_BYTES: usize = 32 * 1024;
/// What a connection's session allocates beside its socket: its query buffer and its reply
/// buffer (16 KiB each, `kayvee_session`).
pub const SESSION_BYTES: usize = kayvee_session::INPUT_INITIAL + kayvee_session::REPLY_BUFFER;
/// A TCP socket of the pool and the client connected on it, if any.
pub struct Slot {
    pub socket: SocketHandle,
    pub client: Option<Handle>,
    /// The server closed this connection (QUIT, CLIENT KILL, protocol error, peer gone): the
    /// client is disconnected from the engine already while the socket finishes its TCP close;
    /// no new connection may attach to it until it listens again.
    pub retired: bool,
    /// Records this slot in [`Pool::arrivals`] when its socket receives (registered with the
    /// socket while a client is attached; see `arrival`).
    pub waker: Waker,
}

/// The socket pool.
pub struct Pool {
    pub port: u16,
    pub slots: Vec<Slot>,
    /// Slots whose socket is listening.
    pub listening: Vec<usize>,
    /// Slots with a connection, or one being set up or torn down.
    pub active: Vec<usize>,
    /// Slots whose socket is closed, ready to listen again.
    pub free: Vec<usize>,
    /// Upper bound on sockets (maxclients + the listeners).
    pub sockets_max: usize,
    /// The pool slot of each client, by its handle's slot.
    pub slot_of: Vec<usize>,
    /// The local port of the next outgoing connection (the link to a primary).
    pub next_local_port: u16,
    /// The slots whose connections received, in the order they did (see `arrival`).
    pub arrivals: Arc<Arrivals>,
}

impl Pool {
    /// Moves listeners that got a SYN to `active`, then tops the listeners up: closed sockets
    /// are reused up to [`LISTENERS_MIN`], new ones are made only up to `target`.
    pub fn refill(&mut self, sockets: &mut SocketSet<'_>, target: usize) {
        let mut i = 0;
        while i < self.listening.len() {
            let s = self.listening[i];
            if sockets
                .get::<tcp::Socket>(self.slots[s].socket)
                .is_listening()
            {
                i += 1;
            } else {
                self.active.push(self.listening.swap_remove(i));
            }
        }
        while self.listening.len() < LISTENERS_MIN {
            let s = match self.free.pop() {
                Some(s) => s,
                None if self.listening.len() < target => match self.grow(sockets) {
                    Some(s) => s,
                    None => break,
                },
                None => break,
            };
            let sock = sockets.get_mut::<tcp::Socket>(self.slots[s].socket);
            if sock.listen(self.port).is_ok() {
                self.listening.push(s);
            }
        }
    }

    /// Adds a new socket to the pool (bounded by `sockets_max` and by the heap: a new socket
    /// must leave [`GROW_RESERVE`] free, so a flood of connections in a small VM is refused
    /// at the TCP level, as `maxclients` would, instead of exhausting the allocator).
    pub fn grow(&mut self, sockets: &mut SocketSet<'_>) -> Option<usize> {
        if self.slots.len() >= self.sockets_max
            || heap::free_bytes()
                < (SOCK_RX_BYTES + SOCK_TX_BYTES + SESSION_BYTES + GROW_RESERVE) as u64
        {
            return None;
        }
        let rx = tcp::SocketBuffer::new(vec![0u8; SOCK_RX_BYTES]);
        let tx = tcp::SocketBuffer::new(vec![0u8; SOCK_TX_BYTES]);
        let mut sock = tcp::Socket::new(rx, tx);
        sock.set_nagle_enabled(false);
        let socket = sockets.add(sock);
        let waker = self.arrivals.waker(self.slots.len());
        self.slots.push(Slot {
            socket,
            client: None,
            retired: false,
            waker,
        });
        Some(self.slots.len() - 1)
    }
}

/// Admits a new connection (`connect`: the driver's admission) only while the heap can take
/// its session's buffers and keep [`GROW_RESERVE`] free: the listeners' sockets were made while
/// there was room, but a flood of connections on them at a nearly full heap would otherwise
/// exhaust the allocator, and the image has no fork to survive that.
pub fn admit(
    connect: impl FnOnce() -> Result<Handle, &'static str>,
) -> Result<Handle, &'static str> {
    if heap::free_bytes() < (SESSION_BYTES + GROW_RESERVE) as u64 {
        return Err(kayvee_engine::cx::MAX_CLIENTS_REACHED);
    }
    connect()
}

impl Pool {
    /// The driver's answer to the new connection on slot `s` (socket `sock`): its client
    /// attached to the slot, or the refusal sent and the socket closed for good.
    pub fn attach(&mut self, s: usize, sock: &mut tcp::Socket<'_>, admitted: Result<Handle, &str>) {
        match admitted {
            Ok(h) => {
                if self.slot_of.len() <= h.0 {
                    self.slot_of.resize(h.0 + 1, usize::MAX);
                }
                self.slot_of[h.0] = s;
                self.slots[s].client = Some(h);
            }
            Err(refusal) => {
                let _ = sock.send_slice(refusal.as_bytes());
                sock.close();
                self.slots[s].retired = true;
            }
        }
    }
}

/// What CLIENT LIST shows of the connection on pool slot `slot` (a made-up descriptor).
pub(crate) fn conn_info(sock: &tcp::Socket<'_>, slot: usize) -> ConnInfo {
    let show = |e: Option<smoltcp::wire::IpEndpoint>| e.map(endpoint_text).unwrap_or_default();
    ConnInfo {
        transport: Transport::Tcp {
            addr: show(sock.remote_endpoint()),
            laddr: show(sock.local_endpoint()),
        },
        fd: slot as i64 + 8,
    }
}

/// "a.b.c.d:port", as Redis shows a TCP peer (see [`push_decimal`]).
fn endpoint_text(e: smoltcp::wire::IpEndpoint) -> alloc::string::String {
    let mut out = alloc::string::String::with_capacity(21);
    let smoltcp::wire::IpAddress::Ipv4(a) = e.addr;
    for (i, octet) in a.octets().into_iter().enumerate() {
        if i > 0 {
            out.push('.');
        }
        push_decimal(&mut out, octet.into());
    }
    out.push(':');
    push_decimal(&mut out, e.port.into());
    out
}

/// Appends `n` in decimal. By hand rather than through `core::fmt`, whose code under TCG is a
/// long first translation on the way to the first answer (the ready line, each connection's
/// address for CLIENT LIST).
pub(crate) fn push_decimal(out: &mut alloc::string::String, n: u32) {
    let mut digits = [0u8; 10];
    let (mut n, mut len) = (n, 0);
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &d in digits[..len].iter().rev() {
        out.push(char::from(d));
    }
}
