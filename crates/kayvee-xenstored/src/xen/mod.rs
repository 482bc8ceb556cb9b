//! Serving Xen guests: the shared ring ([`ring`]) on a mapped [`page`], and [`host::XenHost`],
//! what the daemon needs from Xen (event channels, mapping a guest's ring page, domain
//! state), with a test implementation ([`testxen`]: pages in memfds, event channels as
//! eventfds) and, with the `xen` feature, one on Xen's own libraries (`libxen`).

pub mod guest;
pub mod host;
#[cfg(feature = "xen")]
pub mod libxen;
pub mod page;
pub mod ring;
pub mod testxen;
