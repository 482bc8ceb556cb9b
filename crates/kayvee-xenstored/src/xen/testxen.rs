//! A Xen stand-in for tests. In one process ([`TestXen`]): each guest's ring page is a memfd
//! both sides map shared, each event channel a pair of eventfds (one per direction). Across
//! processes ([`DirXen`], the daemon's `--test-xen DIR`): a directory per domain holding its
//! page as a file both sides map shared, its channel as two FIFOs and its state as text.
//! Either way the daemon's event-channel device is an epoll set over what it bound, so it
//! polls like `xenevtchn_fd`; [`TestHost`] is the daemon's [`XenHost`] on either; guests are
//! [`super::guest::Guest`]s.

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::host::{DomainState, XenHost};
use super::page::{map_fd, Page, PAGE_SIZE};
use crate::batch::Batch;

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

/// Clear an eventfd (one read of its counter) or a FIFO (one read of up to 512 pending
/// signals); true when it was raised.
pub fn clear(fd: &OwnedFd) -> bool {
    let mut v = [0u8; 512];
    // SAFETY: reads at most 512 bytes into a live buffer.
    let n = unsafe { libc::read(fd.as_raw_fd(), v.as_mut_ptr().cast(), v.len()) };
    n > 0
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
        TestHost::new(Backend::Mem(self.clone()))
    }
}

/// The cross-process test hypervisor: domain `d` is the directory `DIR/d` with `page` (the
/// ring page, 4096 bytes), `to-xenstored` and `to-guest` (FIFOs: one byte per notification)
/// and `state` (`alive` or `shutdown`; no directory: dead); `DIR/virq` is the FIFO of
/// `VIRQ_DOM_EXC`.
#[derive(Clone, Debug)]
pub struct DirXen {
    dir: PathBuf,
}

/// Open a FIFO (made if missing) read-write and non-blocking: never waits for the other end,
/// never sees end-of-file.
fn fifo(path: &Path) -> io::Result<Arc<OwnedFd>> {
    if !path.exists() {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| io::ErrorKind::InvalidInput)?;
        // SAFETY: a NUL-terminated path; checked.
        if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::AlreadyExists {
                return Err(e);
            }
        }
    }
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    Ok(Arc::new(OwnedFd::from(f)))
}

impl DirXen {
    /// A hypervisor whose domains live under `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        DirXen { dir: dir.into() }
    }

    /// The directory of domain `domid`.
    fn dom(&self, domid: u32) -> PathBuf {
        self.dir.join(domid.to_string())
    }

    /// Create domain `domid` (a zeroed page, its FIFOs, state `alive`); the guest's side.
    pub fn create_domain(&self, domid: u32) -> io::Result<GuestSide> {
        let d = self.dom(domid);
        fs::create_dir_all(&d)?;
        let page = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(d.join("page"))?;
        page.set_len(PAGE_SIZE as u64)?;
        fs::write(d.join("state"), "alive")?;
        Ok(GuestSide {
            page: map_fd(page.as_fd())?,
            inbound: fifo(&d.join("to-guest"))?,
            outbound: fifo(&d.join("to-xenstored"))?,
        })
    }

    /// Change a domain's state (dead: its directory goes) and raise `VIRQ_DOM_EXC`.
    pub fn set_state(&self, domid: u32, state: DomainState) -> io::Result<()> {
        match state {
            DomainState::Dead => fs::remove_dir_all(self.dom(domid))?,
            DomainState::Shutdown => fs::write(self.dom(domid).join("state"), "shutdown")?,
            DomainState::Alive => fs::write(self.dom(domid).join("state"), "alive")?,
        }
        signal(&*fifo(&self.dir.join("virq"))?)
    }

    /// A daemon-side host on this hypervisor.
    pub fn host(&self) -> io::Result<TestHost> {
        fs::create_dir_all(&self.dir)?;
        TestHost::new(Backend::Dir(self.clone()))
    }
}

/// Where a [`TestHost`] finds domains.
enum Backend {
    Mem(TestXen),
    Dir(DirXen),
}

impl Backend {
    /// The daemon's (inbound, outbound) channel ends for `domid`'s Xenstore port.
    fn channel(&self, domid: u32) -> io::Result<(Arc<OwnedFd>, Arc<OwnedFd>)> {
        match self {
            Backend::Mem(x) => {
                let inner = x.inner.lock().unwrap();
                let d = inner.domains.get(&domid).ok_or(io::ErrorKind::NotFound)?;
                Ok((d.to_daemon.clone(), d.to_guest.clone()))
            }
            Backend::Dir(x) => {
                let d = x.dom(domid);
                if !d.exists() {
                    return Err(io::ErrorKind::NotFound.into());
                }
                Ok((fifo(&d.join("to-xenstored"))?, fifo(&d.join("to-guest"))?))
            }
        }
    }

    /// The channel raised on `VIRQ_DOM_EXC`.
    fn virq(&self) -> io::Result<Arc<OwnedFd>> {
        match self {
            Backend::Mem(x) => {
                let fd = eventfd()?;
                x.inner.lock().unwrap().dom_exc.push(fd.clone());
                Ok(fd)
            }
            Backend::Dir(x) => fifo(&x.dir.join("virq")),
        }
    }

    /// Map `domid`'s ring page.
    fn map(&self, domid: u32) -> io::Result<Page> {
        match self {
            Backend::Mem(x) => {
                let inner = x.inner.lock().unwrap();
                let d = inner.domains.get(&domid).ok_or(io::ErrorKind::NotFound)?;
                map_fd(d.page.as_fd())
            }
            Backend::Dir(x) => {
                let f = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(x.dom(domid).join("page"))?;
                map_fd(f.as_fd())
            }
        }
    }

    /// What the hypervisor says of `domid`.
    fn state(&self, domid: u32) -> DomainState {
        match self {
            Backend::Mem(x) => {
                let inner = x.inner.lock().unwrap();
                inner
                    .domains
                    .get(&domid)
                    .map_or(DomainState::Dead, |d| d.state)
            }
            Backend::Dir(x) => match fs::read_to_string(x.dom(domid).join("state")) {
                Ok(s) if s.trim() == "shutdown" => DomainState::Shutdown,
                Ok(_) => DomainState::Alive,
                Err(_) => DomainState::Dead,
            },
        }
    }
}

/// A bound local port of the daemon: the eventfd it waits on and the one it raises.
struct Bound {
    inbound: Arc<OwnedFd>,
    outbound: Option<Arc<OwnedFd>>,
}

/// The daemon's [`XenHost`] on a [`TestXen`] or a [`DirXen`].
pub struct TestHost {
    xen: Backend,
    epoll: OwnedFd,
    /// Bound ports (looked up at every notification: a fast hasher).
    ports: HashMap<u32, Bound, foldhash::fast::FixedState>,
    next_port: u32,
    /// Ports one `epoll_wait` found pending and [`XenHost::pending`] has yet to hand out
    /// (as one read of /dev/xen/evtchn returns several).
    ready: Vec<u32>,
    /// Clears and notifications of several ports in one system call, where the kernel has
    /// io_uring (else one read or write each).
    batch: Option<Batch>,
    /// Where the batched clears read to (their bytes are dropped).
    sink: Box<[u8; 512]>,
}

/// The value a notification writes (8 bytes, as an eventfd takes).
static ONE: [u8; 8] = 1u64.to_ne_bytes();

/// Pending ports taken from the epoll set at once.
const READY_BATCH: usize = 64;

impl TestHost {
    /// A host with an empty epoll set.
    fn new(xen: Backend) -> io::Result<Self> {
        // SAFETY: plain system call; checked.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(TestHost {
            xen,
            // SAFETY: a new descriptor nobody else owns.
            epoll: unsafe { OwnedFd::from_raw_fd(ep) },
            ports: HashMap::default(),
            next_port: 1,
            ready: Vec::with_capacity(READY_BATCH),
            batch: Batch::new(READY_BATCH as u32).ok(),
            sink: Box::new([0; 512]),
        })
    }

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
        if remote_port != TEST_PORT {
            return Err(io::ErrorKind::InvalidInput.into());
        }
        let (inbound, outbound) = self.xen.channel(domid)?;
        self.add(inbound, Some(outbound))
    }

    fn bind_virq_dom_exc(&mut self) -> io::Result<u32> {
        let fd = self.xen.virq()?;
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

    fn notify_all(&mut self, ports: &[u32]) {
        let Some(batch) = self.batch.as_mut() else {
            for &port in ports {
                let _ = self.notify(port);
            }
            return;
        };
        for &port in ports {
            let Some(fd) = self.ports.get(&port).and_then(|b| b.outbound.as_ref()) else {
                continue;
            };
            if batch.is_full() {
                // A failed run leaves the rest undone: the guests would wait for good.
                if batch.run().is_err() {
                    self.batch = None;
                    return self.notify_all(ports);
                }
            }
            // SAFETY: ONE is static. A full FIFO or saturated eventfd (EAGAIN) means the
            // event is pending anyway, as `signal` takes it.
            unsafe { batch.write(fd.as_raw_fd(), ONE.as_ptr(), ONE.len(), u64::from(port)) };
        }
        if batch.run().is_err() {
            self.batch = None;
        }
    }

    fn pending(&mut self) -> io::Result<Option<u32>> {
        if self.ready.is_empty() {
            let mut evs = [libc::epoll_event { events: 0, u64: 0 }; READY_BATCH];
            let n = loop {
                // SAFETY: waits without blocking for events into a live array of that length.
                let n = unsafe {
                    libc::epoll_wait(
                        self.epoll.as_raw_fd(),
                        evs.as_mut_ptr(),
                        READY_BATCH as i32,
                        0,
                    )
                };
                if n >= 0 {
                    break n as usize;
                }
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            };
            // Handed out in the order epoll gave them.
            self.ready
                .extend(evs[..n].iter().rev().map(|ev| ev.u64 as u32));
            // Cleared all at once, before any is served (each is served after its clear, so
            // a notification raised meanwhile is either seen then or raises it again).
            if let Some(batch) = self.batch.as_mut() {
                for &port in &self.ready {
                    if let Some(b) = self.ports.get(&port) {
                        let sink = self.sink.as_mut_ptr();
                        // SAFETY: the sink lives in `self` past the run; its bytes are
                        // dropped, so reads landing in it together do no harm.
                        unsafe { batch.read(b.inbound.as_raw_fd(), sink, 512, u64::from(port)) };
                    }
                }
                if batch.run().is_err() {
                    self.batch = None;
                    for port in &self.ready {
                        if let Some(b) = self.ports.get(port) {
                            clear(&b.inbound);
                        }
                    }
                }
                return Ok(self.ready.pop());
            }
        } else if self.batch.is_some() {
            return Ok(self.ready.pop());
        }
        let Some(port) = self.ready.pop() else {
            return Ok(None);
        };
        // A port unbound since the batch was taken is still reported (the caller ignores
        // ports it does not know), as a real event channel may be.
        if let Some(b) = self.ports.get(&port) {
            clear(&b.inbound);
        }
        Ok(Some(port))
    }

    fn unmask(&mut self, _port: u32) -> io::Result<()> {
        // A cleared eventfd is quiet until raised again: nothing to unmask.
        Ok(())
    }

    fn map_ring(&mut self, domid: u32, gfn: u64) -> io::Result<Page> {
        if gfn != TEST_GFN {
            return Err(io::ErrorKind::InvalidInput.into());
        }
        self.xen.map(domid)
    }

    fn domain_state(&mut self, domid: u32) -> io::Result<DomainState> {
        Ok(self.xen.state(domid))
    }

    fn dom0_ring(&mut self) -> io::Result<Option<(Page, u32)>> {
        if self.xen.state(0) == DomainState::Dead {
            return Ok(None);
        }
        let page = self.xen.map(0)?;
        Ok(Some((page, self.bind_interdomain(0, TEST_PORT)?)))
    }
}
