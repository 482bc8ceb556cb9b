//! [`XenHost`] on Xen's own libraries, as cxenstored uses them: libxenevtchn (the event
//! channel device), libxengnttab (mapping grant `GNTTAB_RESERVED_XENSTORE`), libxenforeignmemory
//! (a foreign map of the ring's frame when the grant cannot be mapped) and libxenctrl
//! (`xc_domain_getinfo` after `VIRQ_DOM_EXC`). The libraries are loaded with `dlopen` when the
//! daemon starts (Debian: libxenevtchn1, libxengnttab1, libxenforeignmemory1,
//! libxenctrl4.17), so the binary builds without them and runs without Xen.
//!
//! Compile-tested only: the project's machines run no hypervisor. The struct layout read from
//! `xc_dominfo_t` (domid at 0, the `dying:1, crashed:1, shutdown:1` bitfield word at 8) is
//! Xen 4.17's.

use std::ffi::{c_int, c_uint, c_void, CStr};
use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;

use super::host::{DomainState, XenHost, GNTTAB_RESERVED_XENSTORE, VIRQ_DOM_EXC};
use super::page::Page;

type Handle = *mut c_void;

/// The library entry points used, resolved by name.
struct Api {
    evtchn_fd: unsafe extern "C" fn(Handle) -> c_int,
    bind_interdomain: unsafe extern "C" fn(Handle, u32, u32) -> c_int,
    bind_virq: unsafe extern "C" fn(Handle, c_uint) -> c_int,
    unbind: unsafe extern "C" fn(Handle, u32) -> c_int,
    notify: unsafe extern "C" fn(Handle, u32) -> c_int,
    pending: unsafe extern "C" fn(Handle) -> c_int,
    unmask: unsafe extern "C" fn(Handle, u32) -> c_int,
    map_grant_ref: unsafe extern "C" fn(Handle, u32, u32, c_int) -> *mut c_void,
    gnttab_unmap: unsafe extern "C" fn(Handle, *mut c_void, u32) -> c_int,
    foreign_map:
        unsafe extern "C" fn(Handle, u32, c_int, usize, *const u64, *mut c_int) -> *mut c_void,
    foreign_unmap: unsafe extern "C" fn(Handle, *mut c_void, usize) -> c_int,
    getinfo: unsafe extern "C" fn(Handle, u32, c_uint, *mut u8) -> c_int,
}

/// Open handles of the four libraries.
pub struct LibXen {
    api: Api,
    evtchn: Handle,
    gnttab: Handle,
    fmem: Handle,
    xc: Handle,
}

// SAFETY: the handles are used from the one thread that owns the LibXen at a time; the
// libraries' handles may move between threads (cxenstored's are process-global).
unsafe impl Send for LibXen {}

/// `dlopen` a library by soname.
fn open_lib(name: &CStr) -> io::Result<*mut c_void> {
    // SAFETY: a NUL-terminated name; the result is checked.
    let h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW) };
    if h.is_null() {
        return Err(io::Error::other(format!("dlopen {name:?} failed")));
    }
    Ok(h)
}

/// Resolve `name` in `lib` as a function pointer of type `F`.
///
/// # Safety
/// `F` must be the C signature of the symbol.
unsafe fn sym<F: Copy>(lib: *mut c_void, name: &CStr) -> io::Result<F> {
    // SAFETY: a live library handle and a NUL-terminated name.
    let p = unsafe { libc::dlsym(lib, name.as_ptr()) };
    if p.is_null() {
        return Err(io::Error::other(format!("dlsym {name:?} failed")));
    }
    assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: the caller names the symbol's real signature; sizes checked above.
    Ok(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
}

/// A handle from an `*_open` call, or the error.
fn handle(h: Handle, what: &str) -> io::Result<Handle> {
    match h.is_null() {
        true => Err(io::Error::other(format!(
            "{what}: {}",
            io::Error::last_os_error()
        ))),
        false => Ok(h),
    }
}

/// A port from a call returning a port or -1.
fn port(r: c_int) -> io::Result<u32> {
    match r < 0 {
        true => Err(io::Error::last_os_error()),
        false => Ok(r as u32),
    }
}

impl LibXen {
    /// Load the libraries and open their handles.
    pub fn open() -> io::Result<Self> {
        let ev = open_lib(c"libxenevtchn.so.1")?;
        let gt = open_lib(c"libxengnttab.so.1")?;
        let fm = open_lib(c"libxenforeignmemory.so.1")?;
        let xc = open_lib(c"libxenctrl.so.4.17")?;
        // SAFETY: each signature is the one in Xen 4.17's public headers.
        let api = unsafe {
            Api {
                evtchn_fd: sym(ev, c"xenevtchn_fd")?,
                bind_interdomain: sym(ev, c"xenevtchn_bind_interdomain")?,
                bind_virq: sym(ev, c"xenevtchn_bind_virq")?,
                unbind: sym(ev, c"xenevtchn_unbind")?,
                notify: sym(ev, c"xenevtchn_notify")?,
                pending: sym(ev, c"xenevtchn_pending")?,
                unmask: sym(ev, c"xenevtchn_unmask")?,
                map_grant_ref: sym(gt, c"xengnttab_map_grant_ref")?,
                gnttab_unmap: sym(gt, c"xengnttab_unmap")?,
                foreign_map: sym(fm, c"xenforeignmemory_map")?,
                foreign_unmap: sym(fm, c"xenforeignmemory_unmap")?,
                getinfo: sym(xc, c"xc_domain_getinfo")?,
            }
        };
        type Open = unsafe extern "C" fn(*mut c_void, c_uint) -> Handle;
        type XcOpen = unsafe extern "C" fn(*mut c_void, *mut c_void, c_uint) -> Handle;
        // SAFETY: the open functions' 4.17 signatures; null loggers are allowed.
        unsafe {
            let ev_open: Open = sym(ev, c"xenevtchn_open")?;
            let gt_open: Open = sym(gt, c"xengnttab_open")?;
            let fm_open: Open = sym(fm, c"xenforeignmemory_open")?;
            let xc_open: XcOpen = sym(xc, c"xc_interface_open")?;
            let xen = LibXen {
                api,
                evtchn: handle(ev_open(std::ptr::null_mut(), 0), "xenevtchn_open")?,
                gnttab: handle(gt_open(std::ptr::null_mut(), 0), "xengnttab_open")?,
                fmem: handle(fm_open(std::ptr::null_mut(), 0), "xenforeignmemory_open")?,
                xc: handle(
                    xc_open(std::ptr::null_mut(), std::ptr::null_mut(), 0),
                    "xc_interface_open",
                )?,
            };
            // The loop drains `pending` until the device would block, so it must not block.
            let fd = xen.fd();
            let flags = libc::fcntl(fd, libc::F_GETFL);
            if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(xen)
        }
    }

    /// Map the grant of the ring page; None when the grant cannot be mapped.
    fn map_grant(&mut self, domid: u32) -> Option<Page> {
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        // SAFETY: a live handle; the result is checked.
        let p =
            unsafe { (self.api.map_grant_ref)(self.gnttab, domid, GNTTAB_RESERVED_XENSTORE, prot) };
        let base = NonNull::new(p.cast::<u8>())?;
        let (unmap, gnttab) = (self.api.gnttab_unmap, self.gnttab as usize);
        let release = Box::new(move |b: NonNull<u8>| {
            // SAFETY: unmapping the one page this grant map returned.
            unsafe { unmap(gnttab as Handle, b.as_ptr().cast(), 1) };
        });
        // SAFETY: a mapped page, valid until the unmap above runs.
        Some(unsafe { Page::from_raw(base, release) })
    }

    /// Map guest frame `gfn` of `domid` (privileged foreign mapping).
    fn map_foreign(&mut self, domid: u32, gfn: u64) -> io::Result<Page> {
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        let mut err: c_int = 0;
        // SAFETY: one frame number and one error slot, both live for the call.
        let p = unsafe { (self.api.foreign_map)(self.fmem, domid, prot, 1, &gfn, &mut err) };
        let base = NonNull::new(p.cast::<u8>()).ok_or_else(io::Error::last_os_error)?;
        if err != 0 {
            return Err(io::Error::from_raw_os_error(-err));
        }
        let (unmap, fmem) = (self.api.foreign_unmap, self.fmem as usize);
        let release = Box::new(move |b: NonNull<u8>| {
            // SAFETY: unmapping the one page this foreign map returned.
            unsafe { unmap(fmem as Handle, b.as_ptr().cast(), 1) };
        });
        // SAFETY: a mapped page, valid until the unmap above runs.
        Ok(unsafe { Page::from_raw(base, release) })
    }
}

impl XenHost for LibXen {
    fn fd(&self) -> RawFd {
        // SAFETY: a live handle.
        unsafe { (self.api.evtchn_fd)(self.evtchn) }
    }

    fn bind_interdomain(&mut self, domid: u32, remote_port: u32) -> io::Result<u32> {
        // SAFETY: a live handle.
        port(unsafe { (self.api.bind_interdomain)(self.evtchn, domid, remote_port) })
    }

    fn bind_virq_dom_exc(&mut self) -> io::Result<u32> {
        // SAFETY: a live handle.
        port(unsafe { (self.api.bind_virq)(self.evtchn, VIRQ_DOM_EXC) })
    }

    fn unbind(&mut self, p: u32) {
        // SAFETY: a live handle.
        unsafe { (self.api.unbind)(self.evtchn, p) };
    }

    fn notify(&mut self, p: u32) -> io::Result<()> {
        // SAFETY: a live handle.
        port(unsafe { (self.api.notify)(self.evtchn, p) }).map(drop)
    }

    fn pending(&mut self) -> io::Result<Option<u32>> {
        // SAFETY: a live handle (the device fd is non-blocking: -1 with EAGAIN when idle).
        match port(unsafe { (self.api.pending)(self.evtchn) }) {
            Ok(p) => Ok(Some(p)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn unmask(&mut self, p: u32) -> io::Result<()> {
        // SAFETY: a live handle.
        port(unsafe { (self.api.unmask)(self.evtchn, p) }).map(drop)
    }

    fn map_ring(&mut self, domid: u32, gfn: u64) -> io::Result<Page> {
        match self.map_grant(domid) {
            Some(p) => Ok(p),
            None => self.map_foreign(domid, gfn),
        }
    }

    /// Dom0's ring as cxenstored finds it: the page at `/proc/xen/xsd_kva` (mapped shared),
    /// the port number in `/proc/xen/xsd_port`.
    fn dom0_ring(&mut self) -> io::Result<Option<(Page, u32)>> {
        let kva = std::path::Path::new("/proc/xen/xsd_kva");
        if !kva.exists() {
            return Ok(None);
        }
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(kva)?;
        let page = super::page::map_fd(std::os::fd::AsFd::as_fd(&f))?;
        let text = std::fs::read_to_string("/proc/xen/xsd_port")?;
        let remote: u32 = text
            .trim()
            .parse()
            .map_err(|_| io::ErrorKind::InvalidData)?;
        Ok(Some((page, self.bind_interdomain(0, remote)?)))
    }

    fn domain_state(&mut self, domid: u32) -> io::Result<DomainState> {
        // xc_dominfo_t is under 512 bytes in 4.17; a zeroed 1 KiB buffer holds it.
        let mut info = [0u8; 1024];
        // SAFETY: a live handle and a buffer larger than one xc_dominfo_t.
        let n = unsafe { (self.api.getinfo)(self.xc, domid, 1, info.as_mut_ptr()) };
        let id = u32::from_ne_bytes(info[0..4].try_into().expect("4 bytes"));
        if n != 1 || id != domid {
            return Ok(DomainState::Dead);
        }
        let flags = u32::from_ne_bytes(info[8..12].try_into().expect("4 bytes"));
        let (dying, crashed, shutdown) = (flags & 1 != 0, flags & 2 != 0, flags & 4 != 0);
        Ok(match (dying, crashed || shutdown) {
            (true, _) => DomainState::Dead,
            (false, true) => DomainState::Shutdown,
            (false, false) => DomainState::Alive,
        })
    }
}
