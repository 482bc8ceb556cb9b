//! Guests on shared rings, inside the event loop: INTRODUCE maps a guest's page and binds its
//! event channel, each event on that channel moves bytes between the ring and the guest's
//! [`Session`] (the same session type the Unix socket uses), `VIRQ_DOM_EXC` makes the daemon
//! ask Xen which domains died, and RELEASE or death lets the page and channel go.

use std::collections::HashSet;

/// The guests' lookups (several per ring event) with a fast hasher: keys are the daemon's
/// own ids, ports and domids.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::FixedState>;
use std::io;

use kayvee_xenstore::{ConnId, DomainChange, XsError};

use super::Server;
use crate::session::{deliver_events, Session};
use crate::xen::host::{DomainState, XenHost};
use crate::xen::page::Page;
use crate::xen::ring::{RingError, ServerRing, RING_SIZE};

/// Pending output of a guest past which its watch events are dropped: 64 KiB (its replies
/// are already bounded by the outstanding quota).
pub const GUEST_EVENT_LIMIT: usize = 64 * 1024;

/// Rounds of [`Server::ring_pump`] per event (each moves at most one ring of bytes each way):
/// a guest that keeps its ring full yields to the others and is served again in the next
/// loop pass.
const PUMP_ROUNDS: usize = 64;

/// One introduced guest's ring.
pub(super) struct RingConn {
    domid: u32,
    /// Our local event-channel port.
    port: u32,
    ring: ServerRing,
    /// The connection was dropped for a ring or protocol error (the error field is set);
    /// only a reconnection request revives it.
    failed: bool,
    /// A notification is queued for the end of this loop pass.
    notify_queued: bool,
}

/// The daemon's guests and its Xen host.
pub(super) struct Guests {
    pub(super) host: Box<dyn XenHost>,
    /// The local port bound to `VIRQ_DOM_EXC`.
    virq: u32,
    /// Ring connections by connection id.
    rings: HashMap<ConnId, RingConn>,
    by_port: HashMap<u32, ConnId>,
    by_domain: HashMap<u32, ConnId>,
    /// Domains whose shutdown was already announced with `@releaseDomain`.
    shut_down: HashSet<u32>,
    /// Pages mapped and ports bound for an INTRODUCE the store is about to record.
    prepared: HashMap<u32, (Page, u32)>,
    /// Rings left with work after [`PUMP_ROUNDS`], to pump again in the next loop pass.
    pub(super) again: Vec<ConnId>,
    /// Guests to notify before the loop waits again: one event per guest per pass, however
    /// often its ring moved, sent after every ready guest was served (a guest woken in the
    /// middle of the pass would mostly take the CPU from the daemon, on a busy machine).
    notify: Vec<ConnId>,
    /// Scratch: the ports of `notify`.
    ports: Vec<u32>,
}

impl Guests {
    /// Bind `VIRQ_DOM_EXC` on `host`.
    pub(super) fn new(mut host: Box<dyn XenHost>) -> io::Result<Self> {
        let virq = host.bind_virq_dom_exc()?;
        Ok(Guests {
            host,
            virq,
            rings: HashMap::default(),
            by_port: HashMap::default(),
            by_domain: HashMap::default(),
            shut_down: HashSet::new(),
            prepared: HashMap::default(),
            again: Vec::new(),
            notify: Vec::new(),
            ports: Vec::new(),
        })
    }

    /// Before the store sees INTRODUCE of a new domain: map its page and bind its channel
    /// (EINVAL when either fails, as cxenstored). A known domain is rebound afterwards.
    pub(super) fn prepare(&mut self, domid: u32, gfn: u64, remote: u32) -> Result<(), XsError> {
        if domid == 0 || self.by_domain.contains_key(&domid) {
            return Ok(());
        }
        let page = self
            .host
            .map_ring(domid, gfn)
            .map_err(|_| XsError::Einval)?;
        let port = self
            .host
            .bind_interdomain(domid, remote)
            .map_err(|_| XsError::Einval)?;
        if let Some((_, old)) = self.prepared.insert(domid, (page, port)) {
            self.host.unbind(old);
        }
        Ok(())
    }

    /// True when `id` is a ring connection.
    pub(super) fn is_ring(&self, id: ConnId) -> bool {
        self.rings.contains_key(&id)
    }

    /// Before the store sees GET_FEATURE or SET_FEATURE of a domain it has not introduced:
    /// ENOENT unless Xen knows the domain (as xenstored asks the hypervisor).
    pub(super) fn check_exists(&mut self, domid: u32) -> Result<(), XsError> {
        match self.host.domain_state(domid) {
            Ok(DomainState::Alive | DomainState::Shutdown) => Ok(()),
            _ => Err(XsError::Enoent),
        }
    }
}

impl Server {
    /// The event-channel device is readable: serve every pending port.
    pub(super) fn xen_events(&mut self) {
        loop {
            let Some(g) = self.xen.as_mut() else { return };
            let port = match g.host.pending() {
                Ok(Some(p)) => p,
                Ok(None) => return,
                Err(e) => {
                    self.log(format_args!("event channel: {e}"));
                    return;
                }
            };
            let _ = g.host.unmask(port);
            if port == g.virq {
                self.domains_changed();
            } else if let Some(&id) = g.by_port.get(&port) {
                self.ring_event(id);
            }
        }
    }

    /// Pump the rings that were left with work; true when some are waiting (the loop then
    /// polls without blocking).
    pub(super) fn rings_again(&mut self) -> bool {
        let Some(g) = self.xen.as_mut() else {
            return false;
        };
        let again = std::mem::take(&mut g.again);
        for id in again {
            self.flush_ring(id);
        }
        self.xen.as_ref().is_some_and(|g| !g.again.is_empty())
    }

    /// A guest notified: handle a reconnection request, else move bytes both ways until
    /// neither moves.
    fn ring_event(&mut self, id: ConnId) {
        let Some(rc) = self.xen.as_ref().and_then(|g| g.rings.get(&id)) else {
            return;
        };
        if rc.ring.reconnect_requested() {
            self.ring_reset(id);
            return;
        }
        if rc.failed {
            return;
        }
        self.ring_pump(id);
    }

    /// Read requests while the session may read, then write the output they made (and any
    /// left from before); repeat while either moved bytes. Notify the guest once if anything
    /// moved. (Reading first answers a request in the round that took it: one look at each
    /// queue fewer per request than writing first.)
    fn ring_pump(&mut self, id: ConnId) {
        let mut moved = false;
        for round in 0.. {
            if round == PUMP_ROUNDS {
                if let Some(g) = self.xen.as_mut() {
                    g.again.push(id);
                }
                break;
            }
            let Some(read) = self.ring_read(id) else {
                return;
            };
            let Some(wrote) = self.ring_write(id) else {
                return;
            };
            moved |= wrote || read;
            if !wrote && !read {
                break;
            }
        }
        if moved {
            self.ring_notify(id);
            // This guest's replies are in its ring: free the versions its commits let go of
            // now, while the allocator can hand the memory straight back to the next guest's
            // requests (freed in bulk at the end of a pass, they overflow its caches).
            self.xs.sweep();
        }
    }

    /// Notify the guest of `id` before the loop next waits.
    fn ring_notify(&mut self, id: ConnId) {
        let Some(g) = self.xen.as_mut() else { return };
        if let Some(rc) = g.rings.get_mut(&id) {
            if !rc.notify_queued {
                rc.notify_queued = true;
                g.notify.push(id);
            }
        }
    }

    /// Send the notifications this loop pass queued (to guests still connected), all in one
    /// call to the host (which may make them in one system call).
    pub(super) fn send_notifications(&mut self) {
        let Some(g) = self.xen.as_mut() else { return };
        if g.notify.is_empty() {
            return;
        }
        // Drained in place: the lists keep their room from one pass to the next.
        g.ports.clear();
        for id in g.notify.drain(..) {
            if let Some(rc) = g.rings.get_mut(&id) {
                rc.notify_queued = false;
                g.ports.push(rc.port);
            }
        }
        g.host.notify_all(&g.ports);
    }

    /// Put the session's output into the response queue; Some(true) when bytes went in,
    /// None when the connection failed.
    fn ring_write(&mut self, id: ConnId) -> Option<bool> {
        let g = self.xen.as_ref()?;
        let rc = g.rings.get(&id)?;
        let s = self.sessions.get_mut(&id)?;
        if s.out.is_empty() {
            return Some(false);
        }
        match rc.ring.write(&s.out) {
            Ok(0) => Some(false),
            Ok(n) => {
                s.sent(n);
                Some(true)
            }
            Err(e) => {
                self.ring_fail(id, e);
                None
            }
        }
    }

    /// Take request bytes from the ring and run them, unless the session is held by flow
    /// control (then they stay in the ring: the guest's backpressure). Some(true) when bytes
    /// were taken, None when the connection failed.
    fn ring_read(&mut self, id: ConnId) -> Option<bool> {
        let held = self.sessions.get(&id)?.held;
        if held {
            // Output may have drained since: let the session look again.
            if !self.feed(id, &[]) {
                self.ring_fail(id, RingError::Proto);
                return None;
            }
            if self.sessions.get(&id)?.held {
                return Some(false);
            }
        }
        let mut buf = std::mem::take(&mut self.rbuf);
        buf.clear();
        let rc = self.xen.as_ref()?.rings.get(&id)?;
        let r = rc.ring.read(&mut buf, RING_SIZE as usize);
        let out = match r {
            Ok(0) => Some(false),
            Ok(_) if !self.feed(id, &buf) => {
                self.ring_fail(id, RingError::Proto);
                None
            }
            Ok(_) => Some(true),
            Err(e) => {
                self.ring_fail(id, e);
                None
            }
        };
        self.rbuf = buf;
        out
    }

    /// Stop talking to a guest: set its error field, drop its session's state (watches,
    /// transactions, queued bytes) and notify it. The slot stays reserved for a reconnection.
    fn ring_fail(&mut self, id: ConnId, why: RingError) {
        let Some(rc) = self.xen.as_mut().and_then(|g| g.rings.get_mut(&id)) else {
            return;
        };
        rc.failed = true;
        rc.ring.fail(why);
        let domid = rc.domid;
        self.xs.disconnect(id);
        self.sessions.insert(id, Session::guest(GUEST_EVENT_LIMIT));
        self.ring_notify(id);
        self.log(format_args!(
            "domain {domid} connection {id}: {why:?}, dropped"
        ));
    }

    /// The guest asked for a reconnection: a fresh session and store connection, empty
    /// queues, connection state 0, then notify.
    fn ring_reset(&mut self, id: ConnId) {
        let Some(rc) = self.xen.as_mut().and_then(|g| g.rings.get_mut(&id)) else {
            return;
        };
        rc.failed = false;
        rc.ring.reset();
        let domid = rc.domid;
        self.xs.disconnect(id);
        self.xs.connect(id, domid);
        let session = match domid {
            0 => Session::new(),
            _ => Session::guest(GUEST_EVENT_LIMIT),
        };
        self.sessions.insert(id, session);
        self.ring_notify(id);
        self.log(format_args!("domain {domid} connection {id}: reconnected"));
    }

    /// Flush a ring connection's output (called where a socket would be flushed).
    pub(super) fn flush_ring(&mut self, id: ConnId) {
        let failed = self
            .xen
            .as_ref()
            .and_then(|g| g.rings.get(&id))
            .is_none_or(|r| r.failed);
        if !failed {
            self.ring_pump(id);
        }
    }

    /// Act on INTRODUCE, RELEASE (or deaths) and RESUME the store just recorded.
    pub(super) fn domain_changes(&mut self) {
        let changes = self.xs.take_domain_changes();
        for c in changes {
            match c {
                DomainChange::Introduced { domid, gfn, port } => self.introduce(domid, gfn, port),
                DomainChange::Released { domid } => self.release(domid),
                DomainChange::Resumed { domid } => {
                    if let Some(g) = self.xen.as_mut() {
                        g.shut_down.remove(&domid);
                    }
                }
            }
        }
        // A mapping prepared for an INTRODUCE that the store then refused goes now.
        if let Some(g) = self.xen.as_mut().filter(|g| !g.prepared.is_empty()) {
            for (_, (_page, port)) in g.prepared.drain() {
                g.host.unbind(port);
            }
        }
    }

    /// Open the connection of an introduced domain on the page and port prepared for it (or
    /// mapped and bound now). A known domain gets its channel bound anew (cxenstored's way
    /// to recreate it). Failure forgets the domain.
    fn introduce(&mut self, domid: u32, gfn: u64, remote: u32) {
        let Some(g) = self.xen.as_mut() else { return };
        if let Some(&id) = g.by_domain.get(&domid) {
            let rc = g.rings.get_mut(&id).expect("ring of a known domain");
            match g.host.bind_interdomain(domid, remote) {
                Ok(port) => {
                    g.host.unbind(rc.port);
                    g.by_port.remove(&rc.port);
                    rc.port = port;
                    g.by_port.insert(port, id);
                }
                Err(e) => self.log(format_args!("domain {domid}: rebinding: {e}")),
            }
            return;
        }
        let mapped = match g.prepared.remove(&domid) {
            Some(ready) => Ok(ready),
            None => g.host.map_ring(domid, gfn).and_then(|page| {
                let port = g.host.bind_interdomain(domid, remote)?;
                Ok((page, port))
            }),
        };
        let (page, port) = match mapped {
            Ok(v) => v,
            Err(e) => {
                self.xs.domains.table.remove(&domid);
                self.log(format_args!("domain {domid}: cannot map or bind: {e}"));
                return;
            }
        };
        self.open_ring(domid, page, port);
    }

    /// A connection for `domid` on its mapped page and bound port; then serve what it may
    /// have written already and notify it.
    pub(super) fn open_ring(&mut self, domid: u32, page: Page, port: u32) {
        let Some(g) = self.xen.as_mut() else { return };
        let id = self.sessions.free_id();
        // Dom0 has every feature; a guest those it was introduced with (SET_FEATURE).
        let features = self
            .xs
            .domains
            .table
            .get(&domid)
            .map_or(self.xs.config.features, |d| d.features);
        let ring = ServerRing::new(page, features);
        let rc = RingConn {
            domid,
            port,
            ring,
            failed: false,
            notify_queued: false,
        };
        g.rings.insert(id, rc);
        g.by_port.insert(port, id);
        g.by_domain.insert(domid, id);
        // Dom0's ring is privileged like its socket; a guest's is bounded.
        let session = match domid {
            0 => Session::new(),
            _ => Session::guest(GUEST_EVENT_LIMIT),
        };
        self.sessions.insert(id, session);
        self.xs.connect(id, domid);
        self.log(format_args!("domain {domid} on a ring as connection {id}"));
        self.ring_pump(id);
        self.ring_notify(id);
    }

    /// Let a released or dead domain's page and channel go (the store already dropped its
    /// connection).
    fn release(&mut self, domid: u32) {
        let Some(g) = self.xen.as_mut() else { return };
        g.shut_down.remove(&domid);
        let Some(id) = g.by_domain.remove(&domid) else {
            return;
        };
        if let Some(rc) = g.rings.remove(&id) {
            g.by_port.remove(&rc.port);
            g.host.unbind(rc.port);
        }
        self.sessions.remove(id);
        self.log(format_args!("domain {domid} released"));
    }

    /// `VIRQ_DOM_EXC`: ask Xen about every introduced domain; a dead one goes (firing
    /// `@releaseDomain`), a newly shut-down one fires `@releaseDomain` once.
    fn domains_changed(&mut self) {
        let Some(g) = self.xen.as_mut() else { return };
        let mut doms: Vec<u32> = self.xs.domains.table.keys().copied().collect();
        doms.sort_unstable();
        let mut announce = false;
        for d in doms {
            match g.host.domain_state(d) {
                Ok(DomainState::Dead) => {
                    self.xs.domain_died(d);
                }
                Ok(DomainState::Shutdown) if g.shut_down.insert(d) => {
                    announce = true;
                }
                // Running again (resumed after a suspend): a later shutdown is news again.
                Ok(DomainState::Alive) => {
                    g.shut_down.remove(&d);
                }
                _ => {}
            }
        }
        // Features preset for a domain that died before its introduction go with it.
        let presets: Vec<u32> = self.xs.domains.preset_features.keys().copied().collect();
        for d in presets {
            if matches!(g.host.domain_state(d), Ok(DomainState::Dead)) {
                self.xs.forget_preset(d);
            }
        }
        if announce {
            self.xs.domain_shut_down();
        }
        self.domain_changes();
        deliver_events(&mut self.xs, &mut self.sessions);
    }

    /// True when `id` is a guest's ring connection.
    pub(super) fn is_ring(&self, id: ConnId) -> bool {
        self.xen.as_ref().is_some_and(|g| g.is_ring(id))
    }
}
