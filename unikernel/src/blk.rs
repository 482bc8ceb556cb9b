//! The disk: a virtio-blk device on virtio-mmio (QEMU microvm, Firecracker) or PCI (q35),
//! found the way the NIC is (`net::probe_mmio`, `net::probe_pci`), driven through
//! virtio-drivers' `VirtIOBlk` with synchronous requests (the loop waits for each; a
//! background save writes one run between loop passes). EVENT_IDX is hidden (`batched::plain`:
//! virtio-drivers 0.13's notification test stalled the queue). `VIRTIO_BLK_F_FLUSH` is negotiated
//! when offered: a flush then waits for the host's write-back cache (`cache=writeback`).

use crate::batched::{self, Batched};
use crate::cmdline::MmioDevice;
use crate::net::{self, AnyTransport, IdentityHal};
use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use virtio_drivers::device::blk::{BlkReq, BlkResp, VirtIOBlk};
use virtio_drivers::transport::{DeviceType, Transport};

/// `VIRTIO_BLK_F_FLUSH` (virtio 1.2, 5.2.3).
const F_FLUSH: u64 = 1 << 9;
/// Largest request: reads and writes longer than this are split.
const REQUEST_BYTES_MAX: usize = 256 * 1024;
/// Asynchronous writes in flight at most: virtio-drivers' block queue has 16 descriptors and a
/// write takes 3 (no indirect descriptors).
const IN_FLIGHT_MAX: usize = 4;

/// A write submitted and not yet completed: what the device reads until it is done.
struct InFlight {
    token: u16,
    req: Box<BlkReq>,
    buf: Vec<u8>,
    resp: Box<BlkResp>,
}

/// A virtio-blk disk.
pub struct Disk {
    dev: VirtIOBlk<IdentityHal, Batched<AnyTransport>>,
    /// Where it was found, for the log.
    pub at: String,
    /// The device offered a flush (a write-back cache to drain).
    pub flush_offered: bool,
    /// Asynchronous writes submitted, not yet reaped.
    in_flight: Vec<InFlight>,
    /// The first asynchronous write that failed since [`Disk::take_failure`].
    failed: Option<IoError>,
}

/// A failed request (the device's status, for the console).
#[derive(Debug)]
pub struct IoError(pub virtio_drivers::Error);

impl Disk {
    /// The first virtio-blk device (the command line's `virtio_mmio.device=` blocks, else
    /// microvm's window, else PCI bus 0); `None` when there is none.
    pub fn probe(named: &[MmioDevice]) -> Result<Option<Disk>, String> {
        let (at, mut transport) = match net::probe_mmio(named, DeviceType::Block) {
            Some((addr, t)) => (alloc::format!("virtio-mmio {addr:#x}"), t),
            None if !named.is_empty() => return Ok(None),
            None => match net::probe_pci(DeviceType::Block) {
                Ok(found) => found,
                Err(_) => return Ok(None),
            },
        };
        let flush_offered = transport.read_device_features() & F_FLUSH != 0;
        let dev = VirtIOBlk::new(batched::plain(transport))
            .map_err(|e| alloc::format!("virtio-blk at {at}: initialisation failed: {e:?}"))?;
        Ok(Some(Disk {
            dev,
            at,
            flush_offered,
            in_flight: Vec::with_capacity(IN_FLIGHT_MAX),
            failed: None,
        }))
    }

    /// Size in 512-byte sectors.
    pub fn sectors(&self) -> u64 {
        self.dev.capacity()
    }

    /// Whether the device refuses writes.
    pub fn readonly(&self) -> bool {
        self.dev.readonly()
    }

    /// Reads whole sectors from `sector` into `buf` (a multiple of 512 bytes).
    pub fn read(&mut self, sector: u64, buf: &mut [u8]) -> Result<(), IoError> {
        self.drain();
        for (i, part) in buf.chunks_mut(REQUEST_BYTES_MAX).enumerate() {
            let at = sector + (i * REQUEST_BYTES_MAX / kayvee_disk::SECTOR) as u64;
            self.dev.read_blocks(at as usize, part).map_err(IoError)?;
        }
        Ok(())
    }

    /// Writes whole sectors from `sector` (`buf` a multiple of 512 bytes).
    pub fn write(&mut self, sector: u64, buf: &[u8]) -> Result<(), IoError> {
        self.drain();
        for (i, part) in buf.chunks(REQUEST_BYTES_MAX).enumerate() {
            let at = sector + (i * REQUEST_BYTES_MAX / kayvee_disk::SECTOR) as u64;
            self.dev.write_blocks(at as usize, part).map_err(IoError)?;
        }
        Ok(())
    }

    /// Waits until everything written is on stable storage (a no-op without the feature:
    /// the device then writes through).
    pub fn flush(&mut self) -> Result<(), IoError> {
        self.drain();
        self.dev.flush().map_err(IoError)
    }

    /// Writes whole sectors from `sector` without waiting (`buf` a non-empty multiple of 512
    /// bytes, kept until the device is done with it); when [`IN_FLIGHT_MAX`] writes are in
    /// flight, first waits for the oldest. A failure shows in [`Disk::take_failure`].
    pub fn submit(&mut self, sector: u64, buf: Vec<u8>) {
        if buf.len() > REQUEST_BYTES_MAX {
            for (i, part) in buf.chunks(REQUEST_BYTES_MAX).enumerate() {
                let at = sector + (i * REQUEST_BYTES_MAX / kayvee_disk::SECTOR) as u64;
                self.submit(at, part.to_vec());
            }
            return;
        }
        while self.in_flight.len() >= IN_FLIGHT_MAX {
            self.reap();
            core::hint::spin_loop();
        }
        let mut w = InFlight {
            token: 0,
            req: Box::new(BlkReq::default()),
            buf,
            resp: Box::new(BlkResp::default()),
        };
        // SAFETY: the request, the buffer and the response live on the heap, owned by the
        // entry kept in `in_flight` until `reap` completes it with the same three.
        match unsafe {
            self.dev
                .write_blocks_nb(sector as usize, &mut w.req, &w.buf, &mut w.resp)
        } {
            Ok(token) => {
                w.token = token;
                self.in_flight.push(w);
            }
            Err(e) => {
                self.failed.get_or_insert(IoError(e));
            }
        }
    }

    /// Completes the asynchronous writes the device has finished (their buffers are freed);
    /// returns how many are still in flight.
    pub fn reap(&mut self) -> usize {
        while let Some(token) = self.dev.peek_used() {
            let Some(i) = self.in_flight.iter().position(|w| w.token == token) else {
                break; // not ours: a synchronous request pops it
            };
            let mut w = self.in_flight.swap_remove(i);
            // SAFETY: the same request, buffer and response `submit` passed with this token.
            let done = unsafe {
                self.dev
                    .complete_write_blocks(token, &w.req, &w.buf, &mut w.resp)
            };
            if let Err(e) = done {
                self.failed.get_or_insert(IoError(e));
            }
        }
        self.in_flight.len()
    }

    /// Waits until every asynchronous write has completed.
    pub fn drain(&mut self) {
        while self.reap() > 0 {
            core::hint::spin_loop();
        }
    }

    /// The first asynchronous write that failed since the last call.
    pub fn take_failure(&mut self) -> Option<IoError> {
        self.failed.take()
    }
}
