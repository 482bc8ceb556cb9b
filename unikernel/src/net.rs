//! The network device: virtio-net over virtio-mmio (QEMU microvm, Firecracker), driven through
//! virtio-drivers' raw API and exposed to smoltcp as a `phy::Device`.
//!
//! Frames are sent asynchronously: a transmit posts the buffer and returns; finished buffers
//! are reclaimed on later calls (virtio-drivers' `VirtIONet::send` would spin for every frame).
//! Receive buffers are posted up front and reposted as soon as smoltcp has consumed them.

use crate::batched::{self, Batched, Notifier};
use crate::cmdline::MmioDevice;
use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;
use core::alloc::Layout;
use core::cell::RefCell;
use core::ptr::NonNull;
use smoltcp::phy::{self, Checksum, DeviceCapabilities, Medium};
use smoltcp::time::Instant;
use smoltcp::wire::{
    ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetFrame, EthernetProtocol,
    EthernetRepr, Ipv4Address,
};
use virtio_drivers::device::net::VirtIONetRaw;
use virtio_drivers::transport::mmio::{MmioTransport, VirtIOHeader};
use virtio_drivers::transport::pci::bus::{BarInfo, Cam, Command, MmioCam, PciRoot};
use virtio_drivers::transport::pci::{virtio_device_type, PciTransport};
use virtio_drivers::transport::{DeviceType, SomeTransport};
use virtio_drivers::{BufferDirection, Hal, PhysAddr, PAGE_SIZE};

/// Descriptors per virtqueue (QEMU's virtio-net default ring size).
const QUEUE_SIZE: usize = 256;
/// Receive buffers posted at initialisation; the loop posts the rest of the ring a few at a
/// time (each is 2 KiB to allocate and clear: the boot need not wait for 256 of them).
pub const RX_POSTED_AT_BOOT: usize = 32;
/// Bytes per packet buffer: virtio-net header + a 1514-byte Ethernet frame, rounded up.
const BUF_BYTES: usize = 2048;
/// Largest Ethernet frame (MTU 1500 + header).
const FRAME_MAX: usize = 1514;
/// QEMU microvm's virtio-mmio window: slot i at `MMIO_BASE + i * MMIO_SLOT_BYTES`.
const MMIO_BASE: usize = 0xfeb0_0000;
/// Size of one virtio-mmio slot.
const MMIO_SLOT_BYTES: usize = 0x200;
/// Number of slots in the window.
const MMIO_SLOTS: usize = 32;
/// virtio-net feature: the device completes partial transmit checksums (virtio 1.2, 5.1.3).
const F_CSUM: u64 = 1 << 0;
/// virtio-net feature: the driver accepts received frames with partial or pre-validated
/// checksums.
const F_GUEST_CSUM: u64 = 1 << 1;
/// `virtio_net_hdr.flags`: the checksum from `csum_start` on is partial (the device, or for
/// received frames the host that sent them, completes it).
const HDR_F_NEEDS_CSUM: u8 = 1;
/// `virtio_net_hdr.flags` on receive: the host validated the checksum.
const HDR_F_DATA_VALID: u8 = 2;
/// "virt" little-endian: the virtio-mmio magic.
const MMIO_MAGIC: u32 = 0x7472_6976;

/// DMA for virtio-drivers with the identity mapping the boot stub sets up: physical address ==
/// virtual address, memory from the heap.
pub struct IdentityHal;

// SAFETY: `dma_alloc` returns zeroed, page-aligned heap memory owned by the caller until
// `dma_dealloc`; addresses are identity mapped, so the physical address the device uses is the
// pointer itself; `share` hands out the buffer's own address (no bounce buffer).
unsafe impl Hal for IdentityHal {
    fn dma_alloc(pages: usize, _dir: BufferDirection) -> (PhysAddr, NonNull<u8>) {
        let layout = Layout::from_size_align(pages * PAGE_SIZE, PAGE_SIZE).expect("DMA layout");
        // SAFETY: the layout has a non-zero size (virtio-drivers never asks for 0 pages).
        let p = unsafe { alloc::alloc::alloc_zeroed(layout) };
        let p = NonNull::new(p).unwrap_or_else(|| crate::exit::fail("out of memory for DMA"));
        (p.as_ptr() as PhysAddr, p)
    }

    unsafe fn dma_dealloc(_paddr: PhysAddr, vaddr: NonNull<u8>, pages: usize) -> i32 {
        let layout = Layout::from_size_align(pages * PAGE_SIZE, PAGE_SIZE).expect("DMA layout");
        // SAFETY: the caller passes back what `dma_alloc` returned for the same page count.
        unsafe { alloc::alloc::dealloc(vaddr.as_ptr(), layout) };
        0
    }

    unsafe fn mmio_phys_to_virt(paddr: PhysAddr, _size: usize) -> NonNull<u8> {
        NonNull::new(paddr as *mut u8).expect("MMIO address is not null")
    }

    unsafe fn share(buffer: NonNull<[u8]>, _dir: BufferDirection) -> PhysAddr {
        buffer.as_ptr() as *mut u8 as PhysAddr
    }

    unsafe fn unshare(_paddr: PhysAddr, _buffer: NonNull<[u8]>, _dir: BufferDirection) {}
}

/// The device transport: virtio-mmio or PCI.
pub type AnyTransport = SomeTransport<'static>;

type Raw = VirtIONetRaw<IdentityHal, Batched<AnyTransport>, QUEUE_SIZE>;

/// Highest address a virtio-mmio register block may end at: the boot stub maps 4 GiB.
const MAPPED_END: u64 = 1 << 32;

/// Finds the first virtio device of `kind` among the command line's `virtio_mmio.device=`
/// blocks (Firecracker names its devices so) or, when there are none, in QEMU microvm's
/// window. Used for the NIC and the disk (`crate::blk`).
pub fn probe_mmio(named: &[MmioDevice], kind: DeviceType) -> Option<(usize, AnyTransport)> {
    if !named.is_empty() {
        return named.iter().find_map(|d| {
            if d.base >= 0xb000_0000 && d.base + d.size <= MAPPED_END {
                mmio_device_at(d.base as usize, d.size as usize, kind)
            } else {
                if kind == DeviceType::Network {
                    crate::println!("kayvee: virtio-mmio block at {:#x} lies outside the uncached MMIO mapping (0xb0000000-4 GiB): skipped", d.base);
                }
                None
            }
        });
    }
    (0..MMIO_SLOTS)
        .find_map(|slot| mmio_device_at(MMIO_BASE + slot * MMIO_SLOT_BYTES, MMIO_SLOT_BYTES, kind))
}

/// The virtio transport of a `kind` device at `addr` (a register block of `size` bytes), if
/// that is one.
fn mmio_device_at(addr: usize, size: usize, kind: DeviceType) -> Option<(usize, AnyTransport)> {
    // SAFETY: callers pass blocks inside the identity-mapped, uncached MMIO range (checked
    // above, or QEMU microvm's fixed window); every block starts with the 32-bit magic
    // register, readable without side effects.
    let magic = unsafe { core::ptr::read_volatile(addr as *const u32) };
    // SAFETY: as above; the DeviceID register (offset 8) is read-only.
    let id = unsafe { core::ptr::read_volatile((addr + 8) as *const u32) };
    // Checked before a transport exists: dropping virtio-drivers' transport resets the
    // device, which would stop the disk when the NIC's probe passes its block.
    if magic != MMIO_MAGIC || DeviceType::try_from(id) != Ok(kind) {
        return None;
    }
    let header = NonNull::new(addr as *mut VirtIOHeader)?;
    // SAFETY: a virtio-mmio register block (magic and kind checked) of `size` bytes, used by
    // this transport only, for the life of the program.
    let t = unsafe { MmioTransport::new(header, size) }.ok()?;
    Some((addr, t.into()))
}

/// QEMU q35's PCIe ECAM base (256 MiB, buses 0-255; identity mapped uncached).
const PCI_ECAM_BASE: usize = 0xb000_0000;

/// Finds the first virtio PCI function of `kind` on bus 0 behind the ECAM at
/// [`PCI_ECAM_BASE`] (q35): enables memory decoding and bus mastering and returns its
/// transport, with the function's `bus:dev.fn` for the log. BARs are taken as the firmware
/// (SeaBIOS) assigned them.
pub fn probe_pci(kind: DeviceType) -> Result<(alloc::string::String, AnyTransport), &'static str> {
    // SAFETY: the ECAM window is identity mapped uncached by the boot stub and used only
    // through this root while probing; each device found is handed to one transport.
    let cam = unsafe { MmioCam::new(PCI_ECAM_BASE as *mut u8, Cam::Ecam) };
    let mut root = PciRoot::new(cam);
    let found = root
        .enumerate_bus(0)
        .find(|(_, info)| virtio_device_type(info) == Some(kind));
    let Some((df, _)) = found else {
        return Err("none on PCI bus 0 (ECAM at 0xb0000000)");
    };
    let bars = root.bars(df).map_err(|_| "cannot read its PCI BARs")?;
    for bar in bars.iter().flatten() {
        if let BarInfo::Memory { address, size, .. } = bar {
            if *size > 0 && address + size > 1 << 32 {
                return Err("a PCI BAR lies above 4 GiB, which the image does not map");
            }
        }
    }
    let (_, command) = root.get_status_command(df);
    root.set_command(df, command | Command::MEMORY_SPACE | Command::BUS_MASTER);
    let t = PciTransport::new::<IdentityHal, _>(&mut root, df)
        .map_err(|_| "the PCI function is not a usable virtio 1.0 device")?;
    Ok((alloc::format!("PCI {df}"), t.into()))
}

/// Driver state shared by the device and the tokens it lends smoltcp.
struct Inner {
    raw: Raw,
    /// Receive buffers posted to the device, by descriptor token.
    rx_posted: Vec<Option<Box<[u8]>>>,
    /// Receive buffers made so far (posted or lent to smoltcp), up to `QUEUE_SIZE`.
    rx_buffers: usize,
    /// Transmit buffers in flight (and their used length), by descriptor token.
    tx_posted: Vec<Option<(Box<[u8]>, usize)>>,
    /// Transmit buffers ready for reuse.
    tx_free: Vec<Box<[u8]>>,
    /// Frames dropped because the transmit ring was full.
    pub tx_dropped: u64,
    /// Frames sent (for the notifications-per-frame figure).
    tx_frames: u64,
    /// The device completes TCP checksums of frames we send (`VIRTIO_NET_F_CSUM`).
    tx_csum: bool,
    /// Received frames may carry partial or validated checksums (`VIRTIO_NET_F_GUEST_CSUM`):
    /// smoltcp's verification is off and the driver checks the frames the host did not.
    rx_csum: bool,
    /// Received frames dropped for a bad TCP/UDP checksum (checked by the driver).
    rx_bad_csum: u64,
}

impl Inner {
    /// Posts a receive buffer.
    fn post_rx(&mut self, mut buf: Box<[u8]>) {
        // SAFETY: the buffer is kept in `rx_posted` (not touched) until the device returns it
        // through `receive_complete` with the same token.
        match unsafe { self.raw.receive_begin(&mut buf) } {
            Ok(token) => {
                self.rx_posted[usize::from(token)] = Some(buf);
            }
            Err(e) => crate::println!("kayvee: net: cannot post receive buffer: {e:?}"),
        }
    }

    /// Takes back every transmit buffer the device has finished with.
    fn reclaim_tx(&mut self) {
        while let Some(token) = self.raw.poll_transmit() {
            let Some((buf, len)) = self.rx_take_tx(token) else {
                break;
            };
            // SAFETY: the same buffer (and length) that `transmit_begin` got for this token.
            let _ = unsafe { self.raw.transmit_complete(token, &buf[..len]) };
            self.tx_free.push(buf);
        }
    }

    fn rx_take_tx(&mut self, token: u16) -> Option<(Box<[u8]>, usize)> {
        self.tx_posted.get_mut(usize::from(token))?.take()
    }

    /// Sends `len` bytes that `fill` writes, without waiting for the device.
    fn send<R>(&mut self, len: usize, fill: impl FnOnce(&mut [u8]) -> R) -> R {
        self.reclaim_tx();
        let mut buf = self
            .tx_free
            .pop()
            .unwrap_or_else(|| vec![0u8; BUF_BYTES].into_boxed_slice());
        let hdr = self
            .raw
            .fill_buffer_header(&mut buf)
            .expect("buffer holds a header");
        let r = fill(&mut buf[hdr..hdr + len]);
        if self.tx_csum {
            let (header, frame) = buf.split_at_mut(hdr);
            offload_tcp_checksum(header, &mut frame[..len]);
        }
        // SAFETY: the buffer stays in `tx_posted`, untouched, until `reclaim_tx` completes it.
        match unsafe { self.raw.transmit_begin(&buf[..hdr + len]) } {
            Ok(token) => {
                self.tx_posted[usize::from(token)] = Some((buf, hdr + len));
                self.tx_frames += 1;
            }
            Err(_) => {
                self.tx_dropped += 1;
                self.tx_free.push(buf);
            }
        }
        r
    }
}

/// The NIC as smoltcp sees it.
pub struct NetDevice {
    inner: RefCell<Inner>,
    mac: [u8; 6],
    /// Notifies the device once per batch.
    notifier: Notifier<AnyTransport>,
    /// Notifications sent.
    kicks: u64,
}

impl NetDevice {
    /// Initialises the device and posts its receive buffers.
    pub fn new(transport: AnyTransport) -> Result<Self, virtio_drivers::Error> {
        let (batched, notifier) = batched::wrap(transport, F_CSUM | F_GUEST_CSUM);
        let raw = Raw::new(batched)?;
        let mac = raw.mac_address();
        let features = notifier.negotiated();
        let mut inner = Inner {
            raw,
            rx_posted: (0..QUEUE_SIZE).map(|_| None).collect(),
            rx_buffers: RX_POSTED_AT_BOOT,
            tx_posted: (0..QUEUE_SIZE).map(|_| None).collect(),
            tx_free: Vec::new(),
            tx_dropped: 0,
            tx_frames: 0,
            tx_csum: features & F_CSUM != 0,
            rx_csum: features & F_GUEST_CSUM != 0,
            rx_bad_csum: 0,
        };
        // Used-buffer interrupts stay off while the loop polls (see `set_interrupts`).
        inner.raw.disable_interrupts();
        crate::boottime::stamp("virtio-init");
        for _ in 0..RX_POSTED_AT_BOOT {
            inner.post_rx(vec![0u8; BUF_BYTES].into_boxed_slice());
        }
        let mut dev = NetDevice {
            inner: RefCell::new(inner),
            mac,
            notifier,
            kicks: 0,
        };
        dev.kick();
        Ok(dev)
    }

    /// Posts up to `n` more new receive buffers until the whole ring has one each.
    pub fn post_more_rx(&mut self, n: usize) {
        let inner = self.inner.get_mut();
        for _ in 0..n.min(QUEUE_SIZE - inner.rx_buffers) {
            inner.post_rx(vec![0u8; BUF_BYTES].into_boxed_slice());
            inner.rx_buffers += 1;
        }
    }

    /// Notifies the device once for each queue that got buffers since the last call: one VM
    /// exit per batch of frames (a loop round), not one per frame. See `batched`.
    pub fn kick(&mut self) {
        self.kicks += u64::from(self.notifier.flush());
    }

    /// Sends an ARP request for `target` from `addr`: the network (QEMU's slirp in particular)
    /// learns our MAC at boot, so the first connection forwarded to us needs no ARP round
    /// trip first (slirp queues a frame for an unresolved guest and resolves lazily).
    pub fn announce(&mut self, addr: Ipv4Address, target: Ipv4Address) {
        let arp = ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Request,
            source_hardware_addr: EthernetAddress(self.mac),
            source_protocol_addr: addr,
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: target,
        };
        let eth = EthernetRepr {
            src_addr: EthernetAddress(self.mac),
            dst_addr: EthernetAddress::BROADCAST,
            ethertype: EthernetProtocol::Arp,
        };
        let len = eth.buffer_len() + arp.buffer_len();
        self.inner.get_mut().send(len, |buf| {
            let mut frame = EthernetFrame::new_unchecked(buf);
            eth.emit(&mut frame);
            arp.emit(&mut ArpPacket::new_unchecked(frame.payload_mut()));
        });
        self.kick();
    }

    /// (receive buffers posted, transmits in flight, frames dropped (full transmit ring or a
    /// bad checksum), frames sent, notifications sent).
    pub fn stats(&self) -> (usize, usize, u64, u64, u64) {
        let inner = self.inner.borrow();
        let posted = inner.rx_posted.iter().filter(|b| b.is_some()).count();
        let inflight = inner.tx_posted.iter().filter(|b| b.is_some()).count();
        (
            posted,
            inflight,
            inner.tx_dropped,
            inner.tx_frames,
            self.kicks,
        )
    }

    /// Asks the device for used-buffer interrupts (`true`, just before the loop halts) or
    /// suppresses them (`false`, while it polls): the rings' `VRING_AVAIL_F_NO_INTERRUPT`
    /// flag, which the device honours because EVENT_IDX is not negotiated (see `batched`).
    /// After enabling, the caller must look at [`rx_pending`](Self::rx_pending) again before
    /// halting: a frame that landed before the device saw the flag raised no interrupt.
    pub fn set_interrupts(&mut self, on: bool) {
        let raw = &mut self.inner.get_mut().raw;
        if on {
            raw.enable_interrupts();
            // The flag store must be visible to the device before the used ring is read.
            core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
        } else {
            raw.disable_interrupts();
        }
    }

    /// Whether a received frame waits in the used ring.
    pub fn rx_pending(&self) -> bool {
        self.inner.borrow().raw.poll_receive().is_some()
    }

    /// Frames sent so far.
    pub fn tx_frames(&self) -> u64 {
        self.inner.borrow().tx_frames
    }

    /// The feature bits negotiated with the device.
    pub fn features(&self) -> u64 {
        self.notifier.negotiated()
    }

    /// The device's MAC address.
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }
}

/// A received frame lent to smoltcp; its buffer is reposted after use.
pub struct RxToken<'a> {
    inner: &'a RefCell<Inner>,
    /// Always `Some` until consumed or dropped (then reposted either way).
    buf: Option<Box<[u8]>>,
    start: usize,
    len: usize,
}

/// Permission to send one frame.
pub struct TxToken<'a> {
    inner: &'a RefCell<Inner>,
}

impl phy::RxToken for RxToken<'_> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(mut self, f: F) -> R {
        let buf = self
            .buf
            .take()
            .expect("token holds its buffer until consumed");
        let r = f(&buf[self.start..self.start + self.len]);
        self.inner.borrow_mut().post_rx(buf);
        r
    }
}

impl Drop for RxToken<'_> {
    /// A token smoltcp drops unused still gives its buffer back to the device.
    fn drop(&mut self) {
        if let Some(buf) = self.buf.take() {
            self.inner.borrow_mut().post_rx(buf);
        }
    }
}

impl phy::TxToken for TxToken<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        self.inner.borrow_mut().send(len.min(FRAME_MAX), f)
    }
}

impl phy::Device for NetDevice {
    type RxToken<'a> = RxToken<'a>;
    type TxToken<'a> = TxToken<'a>;

    fn receive(&mut self, _now: Instant) -> Option<(RxToken<'_>, TxToken<'_>)> {
        let inner = self.inner.get_mut();
        let token = inner.raw.poll_receive()?;
        let mut buf = inner.rx_posted[usize::from(token)].take()?;
        // SAFETY: `buf` is the buffer posted with this token.
        let (start, len) = match unsafe { inner.raw.receive_complete(token, &mut buf) } {
            Ok(v) => v,
            Err(_) => {
                inner.post_rx(buf);
                return None;
            }
        };
        let trusted = buf[0] & (HDR_F_NEEDS_CSUM | HDR_F_DATA_VALID) != 0;
        if inner.rx_csum && !trusted && !transport_checksum_ok(&buf[start..start + len]) {
            inner.rx_bad_csum += 1;
            inner.post_rx(buf);
            return None;
        }
        let rx = RxToken {
            inner: &self.inner,
            buf: Some(buf),
            start,
            len,
        };
        Some((rx, TxToken { inner: &self.inner }))
    }

    fn transmit(&mut self, _now: Instant) -> Option<TxToken<'_>> {
        let inner = self.inner.get_mut();
        inner.reclaim_tx();
        if !inner.raw.can_send() {
            return None;
        }
        Some(TxToken { inner: &self.inner })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = FRAME_MAX;
        let inner = self.inner.borrow();
        let offloaded = match (inner.rx_csum, inner.tx_csum) {
            (false, false) => Checksum::Both,
            (false, true) => Checksum::Rx,
            (true, false) => Checksum::Tx,
            (true, true) => Checksum::None,
        };
        caps.checksum.tcp = offloaded;
        caps.checksum.udp = match offloaded {
            Checksum::Rx => Checksum::Both, // transmit offload is for TCP only
            Checksum::None => Checksum::Tx,
            other => other,
        };
        caps
    }
}

/// Ethernet header bytes.
const ETH_HDR: usize = 14;
/// IPv4 protocol numbers.
const IP_TCP: u8 = 6;
/// UDP.
const IP_UDP: u8 = 17;

/// The IPv4 header and transport segment of an Ethernet frame: (IP header, segment, protocol),
/// or `None` when the frame is not a whole, unfragmented IPv4 packet.
fn ipv4_segment(frame: &[u8]) -> Option<(&[u8], &[u8], u8)> {
    if frame.len() < ETH_HDR + 20 || frame[12..14] != [0x08, 0x00] {
        return None;
    }
    let ip = &frame[ETH_HDR..];
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let fragmented = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0;
    if ip[0] >> 4 != 4 || ihl < 20 || total < ihl || total > ip.len() || fragmented {
        return None;
    }
    Some((&ip[..ihl], &ip[ihl..total], ip[9]))
}

/// Adds `data` as big-endian 16-bit words to a one's-complement running sum.
fn sum16(mut acc: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for w in &mut chunks {
        acc += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u32::from(*last) << 8;
    }
    acc
}

/// Folds a running sum to 16 bits.
fn fold(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The IPv4 pseudo-header sum for a segment of `len` bytes of protocol `proto`.
fn pseudo_header_sum(ip: &[u8], proto: u8, len: usize) -> u32 {
    sum16(0, &ip[12..20]) + u32::from(proto) + len as u32
}

/// Marks an outgoing IPv4 TCP frame for checksum completion by the device: the checksum field
/// gets the pseudo-header sum and the virtio-net header says where to sum from and store.
fn offload_tcp_checksum(header: &mut [u8], frame: &mut [u8]) {
    let Some((ip, seg, proto)) = ipv4_segment(frame) else {
        return;
    };
    if proto != IP_TCP || seg.len() < 20 {
        return;
    }
    let csum_start = ETH_HDR + ip.len();
    let partial = fold(pseudo_header_sum(ip, proto, seg.len()));
    frame[csum_start + 16..csum_start + 18].copy_from_slice(&partial.to_be_bytes());
    header[0] = HDR_F_NEEDS_CSUM;
    header[6..8].copy_from_slice(&(csum_start as u16).to_le_bytes());
    header[8..10].copy_from_slice(&16u16.to_le_bytes());
}

/// Whether a received frame's TCP or UDP checksum is right (other frames: true; smoltcp still
/// checks IPv4 header checksums itself). Used for frames the host neither validated nor left
/// partial, when GUEST_CSUM turned smoltcp's own verification off.
fn transport_checksum_ok(frame: &[u8]) -> bool {
    let Some((ip, seg, proto)) = ipv4_segment(frame) else {
        return true;
    };
    match proto {
        IP_TCP if seg.len() < 20 => return false,
        IP_UDP if seg.len() < 8 => return false,
        IP_UDP if seg[6..8] == [0, 0] => return true, // sent without a checksum
        IP_TCP | IP_UDP => {}
        _ => return true,
    }
    fold(sum16(pseudo_header_sum(ip, proto, seg.len()), seg)) == 0xffff
}
