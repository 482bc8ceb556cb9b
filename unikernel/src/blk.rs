//! The disk: a virtio-blk device on virtio-mmio (QEMU microvm, Firecracker) or PCI (q35),
//! found the way the NIC is (`net::probe_mmio`, `net::probe_pci`), driven through
//! virtio-drivers' `VirtIOBlk` with synchronous requests (the loop waits for each; a
//! background save writes one run between loop passes). EVENT_IDX is hidden (`batched::plain`:
//! virtio-drivers 0.13's notification test stalled the queue). `VIRTIO_BLK_F_FLUSH` is negotiated
//! when offered: a flush then waits for the host's write-back cache (`cache=writeback`).

use crate::batched::{self, Batched};
use crate::cmdline::MmioDevice;
use crate::net::{self, AnyTransport, IdentityHal};
use alloc::string::String;
use virtio_drivers::device::blk::VirtIOBlk;
use virtio_drivers::transport::{DeviceType, Transport};

/// `VIRTIO_BLK_F_FLUSH` (virtio 1.2, 5.2.3).
const F_FLUSH: u64 = 1 << 9;
/// Largest request: reads and writes longer than this are split.
const REQUEST_BYTES_MAX: usize = 256 * 1024;

/// A virtio-blk disk.
pub struct Disk {
    dev: VirtIOBlk<IdentityHal, Batched<AnyTransport>>,
    /// Where it was found, for the log.
    pub at: String,
    /// The device offered a flush (a write-back cache to drain).
    pub flush_offered: bool,
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
        for (i, part) in buf.chunks_mut(REQUEST_BYTES_MAX).enumerate() {
            let at = sector + (i * REQUEST_BYTES_MAX / kayvee_disk::SECTOR) as u64;
            self.dev.read_blocks(at as usize, part).map_err(IoError)?;
        }
        Ok(())
    }

    /// Writes whole sectors from `sector` (`buf` a multiple of 512 bytes).
    pub fn write(&mut self, sector: u64, buf: &[u8]) -> Result<(), IoError> {
        for (i, part) in buf.chunks(REQUEST_BYTES_MAX).enumerate() {
            let at = sector + (i * REQUEST_BYTES_MAX / kayvee_disk::SECTOR) as u64;
            self.dev.write_blocks(at as usize, part).map_err(IoError)?;
        }
        Ok(())
    }

    /// Waits until everything written is on stable storage (a no-op without the feature:
    /// the device then writes through).
    pub fn flush(&mut self) -> Result<(), IoError> {
        self.dev.flush().map_err(IoError)
    }
}
