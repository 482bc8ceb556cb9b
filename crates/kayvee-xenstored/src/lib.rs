//! kayvee-xenstored: the Linux shell around the Xenstore store (`kayvee-xenstore`). Options as
//! Xen's xenstored takes them ([`options`]), a byte-transport-independent protocol session
//! per connection ([`session`]), and a mio event loop on the Unix socket and, with a
//! [`xen::host::XenHost`], guests' shared rings ([`server`]).

pub mod batch;
pub mod options;
pub mod server;
pub mod session;
pub mod syslog;
pub mod xen;
