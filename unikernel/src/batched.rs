//! A virtio transport wrapper that defers queue notifications: virtio-drivers' own
//! per-buffer `notify` calls only mark the queue, and [`Notifier::flush`] notifies each marked
//! queue once. A batch of frames then costs one notification (one VM exit) instead of one per
//! frame, and virtio-drivers 0.13's EVENT_IDX test, which is not wrap-safe (after 65,536
//! buffers it stops notifying and the queue stalls), no longer decides anything.
//!
//! It also adds device features virtio-drivers does not ask for (checksum offload), when the
//! device offers them, and hides EVENT_IDX (interrupt suppression needs the rings' flags).

use alloc::rc::Rc;
use core::cell::{Cell, RefCell};
use virtio_drivers::transport::{DeviceStatus, DeviceType, InterruptStatus, Transport};
use virtio_drivers::{PhysAddr, Result};
use zerocopy::{FromBytes, Immutable, IntoBytes};

/// `VIRTIO_F_RING_EVENT_IDX` (virtio 1.2, 6), never negotiated.
const F_RING_EVENT_IDX: u64 = 1 << 29;

/// The transport, shared by the wrapper (inside virtio-drivers' device) and the [`Notifier`].
struct Shared<T> {
    transport: RefCell<T>,
    /// Bit `q` set: queue `q` got buffers since the last flush.
    pending: Cell<u32>,
    /// Feature bits to add to virtio-drivers' choice when the device offers them.
    extra_features: u64,
    /// The features finally written to the device.
    negotiated: Cell<u64>,
    /// Notify at once instead of marking (the disk: each request is waited for).
    immediate: bool,
}

/// The transport virtio-drivers is given.
pub struct Batched<T>(Rc<Shared<T>>);

/// The handle that really notifies.
pub struct Notifier<T>(Rc<Shared<T>>);

/// Wraps `transport`; `extra_features` are negotiated too where the device offers them.
pub fn wrap<T: Transport>(transport: T, extra_features: u64) -> (Batched<T>, Notifier<T>) {
    let shared = Rc::new(Shared {
        transport: RefCell::new(transport),
        pending: Cell::new(0),
        extra_features,
        negotiated: Cell::new(0),
        immediate: false,
    });
    (Batched(shared.clone()), Notifier(shared))
}

/// Wraps `transport` only to hide EVENT_IDX: notifications go out at once (the disk, whose
/// requests are each waited for, and which must not meet virtio-drivers' EVENT_IDX test).
pub fn plain<T: Transport>(transport: T) -> Batched<T> {
    Batched(Rc::new(Shared {
        transport: RefCell::new(transport),
        pending: Cell::new(0),
        extra_features: 0,
        negotiated: Cell::new(0),
        immediate: true,
    }))
}

impl<T: Transport> Notifier<T> {
    /// Notifies every queue that got buffers since the last call; returns how many.
    pub fn flush(&self) -> u32 {
        let pending = self.0.pending.replace(0);
        if pending == 0 {
            return 0;
        }
        let mut t = self.0.transport.borrow_mut();
        for q in 0..32u16 {
            if pending & (1 << q) != 0 {
                t.notify(q);
            }
        }
        pending.count_ones()
    }

    /// The feature bits negotiated with the device.
    pub fn negotiated(&self) -> u64 {
        self.0.negotiated.get()
    }
}

impl<T: Transport> Transport for Batched<T> {
    fn device_type(&self) -> DeviceType {
        self.0.transport.borrow().device_type()
    }
    /// The device's features less EVENT_IDX: with it, virtio-drivers re-arms the used-buffer
    /// interrupt after every buffer it takes, so the loop could not suppress interrupts while
    /// it polls; without it the rings' flags do (see `NetDevice::set_interrupts`).
    fn read_device_features(&mut self) -> u64 {
        self.0.transport.borrow_mut().read_device_features() & !F_RING_EVENT_IDX
    }
    /// virtio-drivers' choice plus the extra features the device offers.
    fn write_driver_features(&mut self, driver_features: u64) {
        let mut t = self.0.transport.borrow_mut();
        let offered = t.read_device_features();
        let features = driver_features | (offered & self.0.extra_features);
        self.0.negotiated.set(features);
        t.write_driver_features(features);
    }
    fn max_queue_size(&mut self, queue: u16) -> u32 {
        self.0.transport.borrow_mut().max_queue_size(queue)
    }
    /// Only marks the queue: [`Notifier::flush`] notifies (unless made by [`plain`]).
    fn notify(&mut self, queue: u16) {
        if self.0.immediate {
            return self.0.transport.borrow_mut().notify(queue);
        }
        let p = self.0.pending.get();
        self.0.pending.set(p | (1 << (queue & 31)));
    }
    fn get_status(&self) -> DeviceStatus {
        self.0.transport.borrow().get_status()
    }
    fn set_status(&mut self, status: DeviceStatus) {
        self.0.transport.borrow_mut().set_status(status)
    }
    fn set_guest_page_size(&mut self, guest_page_size: u32) {
        self.0
            .transport
            .borrow_mut()
            .set_guest_page_size(guest_page_size)
    }
    fn requires_legacy_layout(&self) -> bool {
        self.0.transport.borrow().requires_legacy_layout()
    }
    fn queue_set(
        &mut self,
        queue: u16,
        size: u32,
        descriptors: PhysAddr,
        driver_area: PhysAddr,
        device_area: PhysAddr,
    ) {
        self.0
            .transport
            .borrow_mut()
            .queue_set(queue, size, descriptors, driver_area, device_area)
    }
    fn queue_unset(&mut self, queue: u16) {
        self.0.transport.borrow_mut().queue_unset(queue)
    }
    fn queue_used(&mut self, queue: u16) -> bool {
        self.0.transport.borrow_mut().queue_used(queue)
    }
    fn ack_interrupt(&mut self) -> InterruptStatus {
        self.0.transport.borrow_mut().ack_interrupt()
    }
    fn read_config_generation(&self) -> u32 {
        self.0.transport.borrow().read_config_generation()
    }
    fn read_config_space<V: FromBytes + IntoBytes>(&self, offset: usize) -> Result<V> {
        self.0.transport.borrow().read_config_space(offset)
    }
    fn write_config_space<V: IntoBytes + Immutable>(
        &mut self,
        offset: usize,
        value: V,
    ) -> Result<()> {
        self.0
            .transport
            .borrow_mut()
            .write_config_space(offset, value)
    }
}
