//! The Xenstore shared ring (`struct xenstore_domain_interface` of xs_wire.h; the rules of
//! Xen's docs/misc/xenstore-ring.txt): two 1 KiB byte queues with free-running 32-bit
//! indexes, the server feature bitmap, the connection state (reconnection) and the error
//! indicator. Sans-IO: these functions move bytes between a [`Page`] and buffers and say
//! whether the other end must be notified; event channels are the caller's.
//!
//! Memory ordering (xenstore-ring.txt "updates must be ordered carefully"): a consumer loads
//! the producer index with Acquire before reading the bytes it covers, and publishes its
//! consumer index with Release after reading them (so the producer never overwrites bytes
//! still being read); a producer loads the consumer index with Acquire before writing into
//! the space it frees, and publishes the producer index with Release after writing.

use std::sync::atomic::{fence, Ordering};

use super::page::Page;

/// Bytes in each queue.
pub const RING_SIZE: u32 = 1024;
/// Offset of the request queue (guest to server).
pub const REQ: usize = 0;
/// Offset of the response queue (server to guest).
pub const RSP: usize = 1024;
/// Offset of `req_cons`.
pub const REQ_CONS: usize = 2048;
/// Offset of `req_prod`.
pub const REQ_PROD: usize = 2052;
/// Offset of `rsp_cons`.
pub const RSP_CONS: usize = 2056;
/// Offset of `rsp_prod`.
pub const RSP_PROD: usize = 2060;
/// Offset of `server_features`.
pub const SERVER_FEATURES: usize = 2064;
/// Offset of `connection`.
pub const CONNECTION: usize = 2068;
/// Offset of `error`.
pub const ERROR: usize = 2072;

/// `XENSTORE_SERVER_FEATURE_RECONNECTION`.
pub const FEATURE_RECONNECTION: u32 = 1;
/// `XENSTORE_SERVER_FEATURE_ERROR`.
pub const FEATURE_ERROR: u32 = 2;
/// The features this server offers.
pub const SERVER_FEATURES_OFFERED: u32 = FEATURE_RECONNECTION | FEATURE_ERROR;

/// `XENSTORE_CONNECTED`.
pub const CONNECTED: u32 = 0;
/// `XENSTORE_RECONNECT`.
pub const RECONNECT: u32 = 1;

/// Values of the error indicator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum RingError {
    /// `XENSTORE_ERROR_COMM`: communication problem (event channel not functional).
    Comm = 1,
    /// `XENSTORE_ERROR_RINGIDX`: a producer or consumer index is inconsistent.
    RingIdx = 2,
    /// `XENSTORE_ERROR_PROTO`: protocol violation (a payload over 4096 bytes).
    Proto = 3,
}

/// One byte queue of the page: where its data and its two indexes live.
#[derive(Clone, Copy, Debug)]
pub struct Queue {
    data: usize,
    cons: usize,
    prod: usize,
}

/// The request queue (the guest produces, the server consumes).
pub const REQUESTS: Queue = Queue {
    data: REQ,
    cons: REQ_CONS,
    prod: REQ_PROD,
};

/// The response queue (the server produces, the guest consumes).
pub const RESPONSES: Queue = Queue {
    data: RSP,
    cons: RSP_CONS,
    prod: RSP_PROD,
};

/// Take up to `max` bytes from queue `q` into `out`; the number taken (0: empty). Err when
/// the indexes claim more than [`RING_SIZE`] bytes of data.
pub fn consume(page: &Page, q: Queue, out: &mut Vec<u8>, max: usize) -> Result<usize, RingError> {
    let cons = page.load(q.cons, Ordering::Relaxed);
    let prod = page.load(q.prod, Ordering::Acquire);
    let avail = prod.wrapping_sub(cons);
    if avail > RING_SIZE {
        return Err(RingError::RingIdx);
    }
    let n = (avail as usize).min(max);
    if n == 0 {
        // Nothing to take: the index stays as it is, so there is nothing to publish.
        return Ok(0);
    }
    let start = (cons % RING_SIZE) as usize;
    let first = n.min(RING_SIZE as usize - start);
    let at = out.len();
    out.resize(at + n, 0);
    page.read(q.data + start, &mut out[at..at + first]);
    page.read(q.data, &mut out[at + first..]);
    page.store(q.cons, cons.wrapping_add(n as u32), Ordering::Release);
    // The index store before any later load of the producer's index: a producer that only
    // notifies when it sees the queue drained (as Linux's xenbus) must not be missed.
    fence(Ordering::SeqCst);
    Ok(n)
}

/// Put as much of `bytes` as fits into queue `q`; the number written. Err when the indexes
/// claim more than [`RING_SIZE`] bytes in flight.
pub fn produce(page: &Page, q: Queue, bytes: &[u8]) -> Result<usize, RingError> {
    let cons = page.load(q.cons, Ordering::Acquire);
    let prod = page.load(q.prod, Ordering::Relaxed);
    let used = prod.wrapping_sub(cons);
    if used > RING_SIZE {
        return Err(RingError::RingIdx);
    }
    let n = bytes.len().min((RING_SIZE - used) as usize);
    let start = (prod % RING_SIZE) as usize;
    let first = n.min(RING_SIZE as usize - start);
    page.write(q.data + start, &bytes[..first]);
    page.write(q.data, &bytes[first..n]);
    page.store(q.prod, prod.wrapping_add(n as u32), Ordering::Release);
    fence(Ordering::SeqCst);
    Ok(n)
}

/// Bytes waiting in queue `q` (None when the indexes are inconsistent).
pub fn pending(page: &Page, q: Queue) -> Option<u32> {
    let cons = page.load(q.cons, Ordering::Acquire);
    let prod = page.load(q.prod, Ordering::Acquire);
    let n = prod.wrapping_sub(cons);
    (n <= RING_SIZE).then_some(n)
}

/// The server's view of one guest's ring page.
#[derive(Debug)]
pub struct ServerRing {
    page: Page,
    /// The features offered on this page (SET_FEATURE may have restricted them).
    features: u32,
}

impl ServerRing {
    /// Take over a freshly mapped page: advertise `features` before consuming or producing
    /// anything (xenstore-ring.txt requires that order for RECONNECTION). A guest that asked
    /// for a reconnection before it was introduced (connection = 1: it came up before the
    /// daemon, or Xen built it so) gets it now: queues emptied, connection = 0; the caller
    /// notifies. Anything else already in the request queue is served as it stands.
    pub fn new(page: Page, features: u32) -> Self {
        page.store(SERVER_FEATURES, features, Ordering::SeqCst);
        let ring = ServerRing { page, features };
        if ring.page.load(CONNECTION, Ordering::Acquire) == RECONNECT {
            ring.reset();
        }
        ring
    }

    /// The features offered on this page.
    pub fn features(&self) -> u32 {
        self.features
    }

    /// The page (for guests' test clients in the same process and for tests).
    pub fn page(&self) -> &Page {
        &self.page
    }

    /// Requests bytes into `out`, at most `max`.
    pub fn read(&self, out: &mut Vec<u8>, max: usize) -> Result<usize, RingError> {
        consume(&self.page, REQUESTS, out, max)
    }

    /// Reply bytes out; how many fitted.
    pub fn write(&self, bytes: &[u8]) -> Result<usize, RingError> {
        produce(&self.page, RESPONSES, bytes)
    }

    /// True when the guest asked for a reconnection (connection = 1) and RECONNECTION is
    /// offered on this page (without it the field means nothing and is left alone).
    pub fn reconnect_requested(&self) -> bool {
        self.features & FEATURE_RECONNECTION != 0
            && self.page.load(CONNECTION, Ordering::Acquire) == RECONNECT
    }

    /// Finish a reconnection: both queues empty, no error, then connection = 0 (the caller
    /// has dropped the session's partial packets, requests, watches and transactions, and
    /// notifies the guest afterwards).
    pub fn reset(&self) {
        for off in [REQ_CONS, REQ_PROD, RSP_CONS, RSP_PROD, ERROR] {
            self.page.store(off, 0, Ordering::Relaxed);
        }
        self.page.store(CONNECTION, CONNECTED, Ordering::SeqCst);
    }

    /// Report why the server stopped talking to this guest, when ERROR is offered on this
    /// page (without it the guest just hears nothing more).
    pub fn fail(&self, why: RingError) {
        if self.features & FEATURE_ERROR != 0 {
            self.page.store(ERROR, why as u32, Ordering::SeqCst);
        }
    }

    /// The error indicator.
    pub fn error(&self) -> u32 {
        self.page.load(ERROR, Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_cross_the_wrap_and_indexes_run_free() {
        let page = Page::anonymous().unwrap();
        // Start just below 2^32 and 3 bytes before the end of the queue.
        let start = u32::MAX - 1;
        page.store(REQ_CONS, start, Ordering::Relaxed);
        page.store(REQ_PROD, start, Ordering::Relaxed);
        let msg: Vec<u8> = (0..=255).cycle().take(1000).collect();
        assert_eq!(produce(&page, REQUESTS, &msg).unwrap(), 1000);
        // Only 24 bytes of room are left.
        assert_eq!(produce(&page, REQUESTS, &msg).unwrap(), 24);
        let mut out = Vec::new();
        assert_eq!(consume(&page, REQUESTS, &mut out, 600).unwrap(), 600);
        assert_eq!(consume(&page, REQUESTS, &mut out, 4096).unwrap(), 424);
        assert_eq!(&out[..1000], &msg[..]);
        assert_eq!(&out[1000..], &msg[..24]);
        assert_eq!(
            page.load(REQ_CONS, Ordering::Relaxed),
            start.wrapping_add(1024)
        );
        assert_eq!(consume(&page, REQUESTS, &mut out, 4096).unwrap(), 0);
    }

    #[test]
    fn inconsistent_indexes_are_errors() {
        let page = Page::anonymous().unwrap();
        page.store(REQ_PROD, 5000, Ordering::Relaxed);
        let ring = ServerRing::new(page, SERVER_FEATURES_OFFERED);
        assert_eq!(ring.read(&mut Vec::new(), 4096), Err(RingError::RingIdx));
        ring.page().store(RSP_CONS, 7, Ordering::Relaxed);
        ring.page().store(RSP_PROD, 3, Ordering::Relaxed);
        assert_eq!(ring.write(b"x"), Err(RingError::RingIdx));
        ring.fail(RingError::RingIdx);
        assert_eq!(ring.error(), 2);
    }

    #[test]
    fn features_then_reconnect_resets() {
        let ring = ServerRing::new(Page::anonymous().unwrap(), SERVER_FEATURES_OFFERED);
        assert_eq!(ring.page().load(SERVER_FEATURES, Ordering::Relaxed), 3);
        produce(ring.page(), REQUESTS, b"partial").unwrap();
        ring.write(b"reply").unwrap();
        assert!(!ring.reconnect_requested());
        ring.page().store(CONNECTION, RECONNECT, Ordering::Relaxed);
        assert!(ring.reconnect_requested());
        ring.reset();
        assert!(!ring.reconnect_requested());
        assert_eq!(pending(ring.page(), REQUESTS), Some(0));
        assert_eq!(pending(ring.page(), RESPONSES), Some(0));
    }

    #[test]
    fn features_restrict_reconnection_and_the_error_field() {
        // ERROR only: a reconnection request is not honoured, errors are reported.
        let page = Page::anonymous().unwrap();
        page.store(SERVER_FEATURES, 0xff, Ordering::Relaxed);
        let ring = ServerRing::new(page, FEATURE_ERROR);
        assert_eq!(ring.page().load(SERVER_FEATURES, Ordering::Relaxed), 2);
        ring.page().store(CONNECTION, RECONNECT, Ordering::Relaxed);
        assert!(!ring.reconnect_requested());
        ring.fail(RingError::Proto);
        assert_eq!(ring.error(), 3);
        // RECONNECTION only: the error field stays 0.
        let ring = ServerRing::new(Page::anonymous().unwrap(), FEATURE_RECONNECTION);
        ring.fail(RingError::Proto);
        assert_eq!(ring.error(), 0);
        ring.page().store(CONNECTION, RECONNECT, Ordering::Relaxed);
        assert!(ring.reconnect_requested());
    }

    #[test]
    fn a_reconnection_asked_before_introduction_is_done_at_takeover() {
        let page = Page::anonymous().unwrap();
        produce(&page, REQUESTS, b"stale half request").unwrap();
        page.store(CONNECTION, RECONNECT, Ordering::Relaxed);
        page.store(ERROR, 3, Ordering::Relaxed);
        let ring = ServerRing::new(page, SERVER_FEATURES_OFFERED);
        assert_eq!(ring.page().load(CONNECTION, Ordering::Relaxed), CONNECTED);
        assert_eq!(pending(ring.page(), REQUESTS), Some(0));
        assert_eq!(ring.error(), 0);
        // A page without the request keeps its queued bytes.
        let page = Page::anonymous().unwrap();
        produce(&page, REQUESTS, b"early").unwrap();
        let ring = ServerRing::new(page, SERVER_FEATURES_OFFERED);
        assert_eq!(pending(ring.page(), REQUESTS), Some(5));
    }
}
