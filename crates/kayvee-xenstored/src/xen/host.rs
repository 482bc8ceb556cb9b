//! What the daemon asks of Xen, as cxenstored asks libxenevtchn, libxengnttab /
//! libxenforeignmemory and libxenctrl: one pollable event-channel device, a guest's ring page
//! mapped, and whether a domain still lives.

use std::io;
use std::os::fd::RawFd;

use super::page::Page;

/// `VIRQ_DOM_EXC`: the virtual interrupt Xen raises when a domain shuts down or dies.
pub const VIRQ_DOM_EXC: u32 = 3;

/// `GNTTAB_RESERVED_XENSTORE`: the grant reference of a guest's Xenstore ring page.
pub const GNTTAB_RESERVED_XENSTORE: u32 = 1;

/// What Xen says of a domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DomainState {
    /// Running (or paused, blocked): keep serving it.
    Alive,
    /// Shut down (crashed, powered off, suspended) but not yet destroyed.
    Shutdown,
    /// Dying, or no longer known to Xen: its connection and state go.
    Dead,
}

/// Event channels, page mapping and domain information.
pub trait XenHost: Send {
    /// A file descriptor that is readable while some bound port is pending.
    fn fd(&self) -> RawFd;

    /// Bind a local port to `remote_port` of domain `domid`; the local port.
    fn bind_interdomain(&mut self, domid: u32, remote_port: u32) -> io::Result<u32>;

    /// Bind a local port to `VIRQ_DOM_EXC`.
    fn bind_virq_dom_exc(&mut self) -> io::Result<u32>;

    /// Release a local port.
    fn unbind(&mut self, port: u32);

    /// Signal the other end of a local port.
    fn notify(&mut self, port: u32) -> io::Result<()>;

    /// Signal the other ends of several local ports (a loop pass's notifications); by
    /// default one [`XenHost::notify`] each, errors ignored.
    fn notify_all(&mut self, ports: &[u32]) {
        for &port in ports {
            let _ = self.notify(port);
        }
    }

    /// The next pending local port, without blocking (`None` when none is). The port stays
    /// masked until [`XenHost::unmask`].
    fn pending(&mut self) -> io::Result<Option<u32>>;

    /// Let a port raise events again.
    fn unmask(&mut self, port: u32) -> io::Result<()>;

    /// Map the Xenstore ring page of `domid` (its grant `GNTTAB_RESERVED_XENSTORE`, else a
    /// foreign map of guest frame `gfn`).
    fn map_ring(&mut self, domid: u32, gfn: u64) -> io::Result<Page>;

    /// Whether `domid` still lives.
    fn domain_state(&mut self, domid: u32) -> io::Result<DomainState>;

    /// Dom0's own ring, when the daemon runs beside a dom0 kernel whose xenbus driver (its
    /// backends) talks through one: the page mapped and a local port bound to it. `None`
    /// when there is none.
    fn dom0_ring(&mut self) -> io::Result<Option<(Page, u32)>> {
        Ok(None)
    }
}
