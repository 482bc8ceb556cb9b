//! What the loop lends the driver's calls that may run a script: the network (interface,
//! device, sockets, pool) and the clock, as a `kayvee_session::Clock` whose `serve_busy`,
//! `write_wait` and `read_wait` run network rounds of their own (a long script's hook, a Lua
//! debugging session).

use crate::net::NetDevice;
use crate::pool::{Pool, LISTENERS_MIN};
use crate::time::Clock;
use crate::{exit, println};
use core::cell::RefCell;
use kayvee_engine::Handle;
use smoltcp::iface::{Interface, PollIngressSingleResult, SocketHandle, SocketSet};
use smoltcp::socket::tcp;
use smoltcp::time::Instant;

/// Frames taken in before the connections are serviced again.
pub const INGRESS_BUDGET: usize = 512;

/// Receive buffers posted to the NIC per loop round until the ring is full (the boot posts a
/// few only: see `net::RX_POSTED_AT_BOOT`).
pub const RX_POSTED_PER_ROUND: usize = 16;
/// The network, as the loop lends it to the driver's calls that may run a script.
pub struct Net<'n, 's> {
    pub iface: &'n mut Interface,
    pub dev: &'n mut NetDevice,
    pub sockets: &'n mut SocketSet<'s>,
    pub pool: &'n mut Pool,
}

/// The clock the driver gets, with the network a long script's hook serves: past
/// `busy-reply-threshold` the hook polls the NIC and hands the other connections' bytes to the
/// driver's busy rules (`-BUSY`, SCRIPT KILL...), writing their replies out at once, as Redis's
/// `processEventsWhileBlocked`; a debugging session (SCRIPT DEBUG) waits on its connection
/// here. Never borrowed across a driver call: reads go into the connections' own buffers.
pub struct Shell<'a, 'n, 's> {
    pub clock: &'a Clock,
    pub net: RefCell<Net<'n, 's>>,
}

impl Shell<'_, '_, '_> {
    /// One round of the network without the loop: frames in and out, receive buffers posted.
    fn pump(net: &mut Net<'_, '_>, clock: &Clock) {
        let ts = Instant::from_micros(clock.uptime_us() as i64);
        for _ in 0..INGRESS_BUDGET {
            if net
                .iface
                .poll_ingress_single(ts, &mut *net.dev, &mut *net.sockets)
                == PollIngressSingleResult::None
            {
                break;
            }
        }
        net.dev.post_more_rx(RX_POSTED_PER_ROUND);
        while net.iface.poll_egress(ts, &mut *net.dev, &mut *net.sockets)
            != smoltcp::iface::PollResult::None
        {}
        net.dev.kick();
    }

    /// The socket of client `h`, if it is connected.
    fn socket_of(net: &Net<'_, '_>, h: Handle) -> Option<SocketHandle> {
        let s = *net.pool.slot_of.get(h.0)?;
        let slot = &net.pool.slots[s];
        (slot.client == Some(h)).then_some(slot.socket)
    }
}

/// How long a debugging session's write waits for a slow reader (Redis's send timeout).
const DEBUG_WRITE_US: u64 = 5_000_000;

impl kayvee_session::Clock for Shell<'_, '_, '_> {
    #[inline]
    fn now(&self) -> kayvee_engine::Now {
        self.clock.now()
    }

    fn sleep_us(&self, us: u64) {
        self.clock.sleep_us(us);
    }

    fn serve_busy(&self, running: Handle, io: &mut dyn kayvee_session::BusyIo) {
        let Ok(mut net) = self.net.try_borrow_mut() else {
            return;
        };
        Self::pump(&mut net, self.clock);
        let Net { sockets, pool, .. } = &mut *net;
        // New connections are taken too, as Redis's `processEventsWhileBlocked` accepts:
        // a new client can send SCRIPT KILL.
        let grown = pool.listening.len() + 1;
        pool.refill(sockets, grown.min(LISTENERS_MIN));
        for i in 0..pool.active.len() {
            let s = pool.active[i];
            let sock = sockets.get_mut::<tcp::Socket>(pool.slots[s].socket);
            let slot = &pool.slots[s];
            if slot.client.is_none() && !slot.retired && sock.may_recv() {
                let info = crate::pool::conn_info(sock, s);
                pool.attach(s, sock, crate::pool::admit(|| io.connect(info)));
            }
            let slot = &pool.slots[s];
            let Some(h) = slot.client.filter(|&h| h != running) else {
                continue;
            };
            while sock.can_recv() {
                let got = sock.recv(|data| {
                    io.input(h, data);
                    (data.len(), data.len())
                });
                if !matches!(got, Ok(n) if n > 0) {
                    break;
                }
            }
            if !sock.may_recv() && !sock.can_recv() {
                io.closed(h);
            }
            if io.shutdown() {
                println!(
                    "kayvee: SHUTDOWN NOSAVE while a script runs: stopping now, without saving"
                );
                exit::success()
            }
            let out = io.output(h);
            if !out.is_empty() && sock.can_send() {
                if let Ok(n) = sock.send_slice(out) {
                    io.written(h, n);
                }
            }
        }
        Self::pump(&mut net, self.clock);
    }

    fn write_wait(&self, h: Handle, mut data: &[u8]) -> bool {
        let Ok(mut net) = self.net.try_borrow_mut() else {
            return false;
        };
        let Some(socket) = Self::socket_of(&net, h) else {
            return false;
        };
        let deadline = self.clock.uptime_us() + DEBUG_WRITE_US;
        loop {
            let sock = net.sockets.get_mut::<tcp::Socket>(socket);
            if !sock.may_send() {
                return false;
            }
            if let Ok(n) = sock.send_slice(data) {
                data = &data[n..];
            }
            Self::pump(&mut net, self.clock);
            if data.is_empty() {
                return true;
            }
            if self.clock.uptime_us() > deadline {
                return false;
            }
        }
    }

    fn read_wait(&self, h: Handle, buf: &mut [u8]) -> usize {
        let Ok(mut net) = self.net.try_borrow_mut() else {
            return 0;
        };
        let Some(socket) = Self::socket_of(&net, h) else {
            return 0;
        };
        loop {
            let sock = net.sockets.get_mut::<tcp::Socket>(socket);
            if sock.can_recv() {
                return sock.recv_slice(buf).unwrap_or(0);
            }
            if !sock.may_recv() {
                return 0;
            }
            Self::pump(&mut net, self.clock);
        }
    }
}
