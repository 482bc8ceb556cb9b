//! A Xen stand-in for tests, in one process: each guest's ring page is a memfd both sides map
//! shared, each event channel a pair of eventfds (one per direction), and the daemon's
//! event-channel device an epoll set over the eventfds it bound, so it polls like
//! `xenevtchn_fd`. [`TestXen`] plays the hypervisor (domains, their pages, ports and
//! `VIRQ_DOM_EXC`); [`TestHost`] is the daemon's [`XenHost`] on it; guests are
//! [`super::guest::Guest`]s.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex};

use super::host::{DomainState, XenHost};
use super::page::{map_fd, Page, PAGE_SIZE};

/// The guest frame number every test guest reports for its ring page.
pub const TEST_GFN: u64 = 0xfeffc;

/// The port each test guest allocates for Xenstore (ports are per domain).
pub const TEST_PORT: u32 = 1;

/// A fresh non-blocking eventfd.
pub fn eventfd() -> io::Result<Arc<OwnedFd>> {
    // SAFETY: plain system call; the result is checked.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor nobody else owns.
    Ok(Arc::new(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// Raise an eventfd.
pub fn signal(fd: &OwnedFd) -> io::Result<()> {
    let one = 1u64.to_ne_bytes();
    // SAFETY: writes 8 bytes from a live buffer.
    let n = unsafe { libc::write(fd.as_raw_fd(), one.as_ptr().cast(), 8) };
    if n == 8 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    match e.kind() {
        // Counter saturated: the event is pending anyway.
        io::ErrorKind::WouldBlock => Ok(()),
        _ => Err(e),
    }
}

/// Clear an eventfd; true when it was raised.
pub fn clear(fd: &OwnedFd) -> bool {
    let mut v = [0u8; 8];
    // SAFETY: reads 8 bytes into a live buffer.
    let n = unsafe { libc::read(fd.as_raw_fd(), v.as_mut_ptr().cast(), 8) };
    n == 8
}

/// One test domain.
struct Dom {
    page: OwnedFd,
    /// Raised by the daemon (guest's inbound events).
    to_guest: Arc<OwnedFd>,
    /// Raised by the guest (daemon's inbound events).
    to_daemon: Arc<OwnedFd>,
    state: DomainState,
}

/// The test hypervisor: domains and the daemons' `VIRQ_DOM_EXC` lines.
#[derive(Clone, Default)]
pub struct TestXen {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Default)]
struct Inner {
    domains: HashMap<u32, Dom>,
    dom_exc: Vec<Arc<OwnedFd>>,
}

/// What a guest holds of its own domain.
pub struct GuestSide {
    /// Its ring page, mapped.
    pub page: Page,
    /// Raised by the daemon.
    pub inbound: Arc<OwnedFd>,
    /// Raise to notify the daemon.
    pub outbound: Arc<OwnedFd>,
}

impl TestXen {
    /// A hypervisor with no guests.
    pub fn new() -> Self {
        TestXen::default()
    }

    /// Create domain `domid` with a zeroed ring page and an unbound Xenstore port.
    pub fn create_domain(&self, domid: u32) -> io::Result<GuestSide> {
        let name = c"xs-ring-guest";
        // SAFETY: plain system call with a NUL-terminated name; checked.
        let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a new descriptor nobody else owns.
        let page = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: sizing our own memfd.
        if unsafe { libc::ftruncate(page.as_raw_fd(), PAGE_SIZE as libc::off_t) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let mapped = map_fd(page.as_fd())?;
        let (to_guest, to_daemon) = (eventfd()?, eventfd()?);
        let side = GuestSide {
            page: mapped,
            inbound: to_guest.clone(),
            outbound: to_daemon.clone(),
        };
        let dom = Dom {
            page,
            to_guest,
            to_daemon,
            state: DomainState::Alive,
        };
        self.inner.lock().unwrap().domains.insert(domid, dom);
        Ok(side)
    }

    /// Change a domain's state and raise `VIRQ_DOM_EXC` (a dead domain is also forgotten).
    pub fn set_state(&self, domid: u32, state: DomainState) {
        let mut inner = self.inner.lock().unwrap();
        match state {
            DomainState::Dead => {
                inner.domains.remove(&domid);
            }
            s => {
                if let Some(d) = inner.domains.get_mut(&domid) {
                    d.state = s;
                }
            }
        }
        for fd in &inner.dom_exc {
            let _ = signal(fd);
        }
    }

    /// A daemon-side host on this hypervisor.
    pub fn host(&self) -> io::Result<TestHost> {
        // SAFETY: plain system call; checked.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(TestHost {
            xen: self.clone(),
            // SAFETY: a new descriptor nobody else owns.
            epoll: unsafe { OwnedFd::from_raw_fd(ep) },
            ports: HashMap::new(),
            next_port: 1,
        })
    }
}

/// A bound local port of the daemon: the eventfd it waits on and the one it raises.
struct Bound {
    inbound: Arc<OwnedFd>,
    outbound: Option<Arc<OwnedFd>>,
}

/// The daemon's [`XenHost`] on a [`TestXen`].
pub struct TestHost {
    xen: TestXen,
    epoll: OwnedFd,
    ports: HashMap<u32, Bound>,
    next_port: u32,
}

impl TestHost {
    /// Add a port whose events arrive on `inbound`.
    fn add(&mut self, inbound: Arc<OwnedFd>, outbound: Option<Arc<OwnedFd>>) -> io::Result<u32> {
        let port = self.next_port;
        self.next_port += 1;
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: u64::from(port),
        };
        // SAFETY: registering a live descriptor with a live event struct.
        let r = unsafe {
            libc::epoll_ctl(
                self.epoll.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                inbound.as_raw_fd(),
                &mut ev,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        self.ports.insert(port, Bound { inbound, outbound });
        Ok(port)
    }
}

impl XenHost for TestHost {
    fn fd(&self) -> RawFd {
        self.epoll.as_raw_fd()
    }

    fn bind_interdomain(&mut self, domid: u32, remote_port: u32) -> io::Result<u32> {
        let (inbound, outbound) = {
            let inner = self.xen.inner.lock().unwrap();
            let d = inner.domains.get(&domid).ok_or(io::ErrorKind::NotFound)?;
            if remote_port != TEST_PORT {
                return Err(io::ErrorKind::InvalidInput.into());
            }
            (d.to_daemon.clone(), d.to_guest.clone())
        };
        self.add(inbound, Some(outbound))
    }

    fn bind_virq_dom_exc(&mut self) -> io::Result<u32> {
        let fd = eventfd()?;
        self.xen.inner.lock().unwrap().dom_exc.push(fd.clone());
        self.add(fd, None)
    }

    fn unbind(&mut self, port: u32) {
        if let Some(b) = self.ports.remove(&port) {
            // SAFETY: removing a descriptor we registered; a null event is allowed.
            unsafe {
                libc::epoll_ctl(
                    self.epoll.as_raw_fd(),
                    libc::EPOLL_CTL_DEL,
                    b.inbound.as_raw_fd(),
                    std::ptr::null_mut(),
                );
            }
        }
    }

    fn notify(&mut self, port: u32) -> io::Result<()> {
        match self.ports.get(&port).and_then(|b| b.outbound.as_ref()) {
            Some(fd) => signal(fd),
            None => Err(io::ErrorKind::NotFound.into()),
        }
    }

    fn pending(&mut self) -> io::Result<Option<u32>> {
        loop {
            let mut ev = libc::epoll_event { events: 0, u64: 0 };
            // SAFETY: waits without blocking for one event into a live struct.
            let n = unsafe { libc::epoll_wait(self.epoll.as_raw_fd(), &mut ev, 1, 0) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if n == 0 {
                return Ok(None);
            }
            let port = ev.u64 as u32;
            if let Some(b) = self.ports.get(&port) {
                clear(&b.inbound);
            }
            return Ok(Some(port));
        }
    }

    fn unmask(&mut self, _port: u32) -> io::Result<()> {
        // A cleared eventfd is quiet until raised again: nothing to unmask.
        Ok(())
    }

    fn map_ring(&mut self, domid: u32, gfn: u64) -> io::Result<Page> {
        let inner = self.xen.inner.lock().unwrap();
        let d = inner.domains.get(&domid).ok_or(io::ErrorKind::NotFound)?;
        if gfn != TEST_GFN {
            return Err(io::ErrorKind::InvalidInput.into());
        }
        map_fd(d.page.as_fd())
    }

    fn domain_state(&mut self, domid: u32) -> io::Result<DomainState> {
        let inner = self.xen.inner.lock().unwrap();
        Ok(inner
            .domains
            .get(&domid)
            .map_or(DomainState::Dead, |d| d.state))
    }
}
