//! The I/O APIC route of the NIC's interrupt (virtio-mmio on QEMU microvm and Firecracker):
//! one redirection entry, edge-triggered, fixed delivery to the boot CPU's LAPIC, on
//! [`NIC_VECTOR`], unmasked. The device's interrupts reach the CPU only inside the loop's
//! `sti; hlt` (interrupts are off otherwise, and the loop keeps the device's used-buffer
//! notifications suppressed while it polls), so they do nothing but end a halt.
//!
//! Which pin: a `virtio_mmio.device=SIZE@BASE:IRQ` on the command line names a GSI (Linux's
//! numbering: GSIs 0-23 on the first I/O APIC at 0xfec00000, 24 up on a second one). Without
//! one, QEMU microvm's slot `n` of the window at 0xfeb00000 is wired (QEMU 7.2, checked by
//! experiment with each setting) to pin `n` of its second I/O APIC at 0xfec10000 when that
//! exists (`ioapic2`, on by default with ACPI: GSI `24 + n`, the NIC in slot 23), else to
//! GSI `16 + n` of the first with ACPI on (`ioapic2=off`), else to GSI `5 + n` (`acpi=off`,
//! as the xtask boots: the NIC in slot 7, GSI 12). ACPI shows as an RSDP in the BIOS area.

use super::idt::NIC_VECTOR;

/// The first I/O APIC (GSIs 0-23).
const IOAPIC1: usize = 0xfec0_0000;
/// QEMU microvm's second I/O APIC (GSIs 24-47), present unless `ioapic2=off`.
const IOAPIC2: usize = 0xfec1_0000;
/// Pins per I/O APIC (QEMU's and KVM's models).
const PINS: u32 = 24;
/// GSI of microvm's virtio-mmio slot 0 with one I/O APIC and ACPI off.
const MICROVM_FIRST_GSI: u32 = 5;
/// GSI of microvm's virtio-mmio slot 0 with one I/O APIC and ACPI on.
const MICROVM_FIRST_GSI_ACPI: u32 = 16;
/// The LAPIC ID register (bits 24-31 of the xAPIC register at 0x20).
const LAPIC_ID: usize = 0xfee0_0020;

/// Reads I/O APIC register `reg` (IOREGSEL at +0, IOWIN at +0x10).
fn read(base: usize, reg: u32) -> u32 {
    // SAFETY: both I/O APIC windows lie in the identity-mapped uncached range; IOREGSEL and
    // IOWIN are 32-bit registers, accessed as such; nothing else uses them.
    unsafe {
        core::ptr::write_volatile(base as *mut u32, reg);
        core::ptr::read_volatile((base + 0x10) as *const u32)
    }
}

/// Writes I/O APIC register `reg`.
fn write(base: usize, reg: u32, v: u32) {
    // SAFETY: as in `read`.
    unsafe {
        core::ptr::write_volatile(base as *mut u32, reg);
        core::ptr::write_volatile((base + 0x10) as *mut u32, v);
    }
}

/// Whether an I/O APIC answers at `base`: its version register holds version 0x11-0x20 and
/// the number of redirection entries less one (an absent device reads as 0 or all ones).
fn present(base: usize) -> bool {
    let v = read(base, 1);
    (0x11..=0x20).contains(&(v & 0xff)) && (v >> 16) & 0xff > 0 && v != u32::MAX
}

/// The GSI of the NIC at `base`: the command line's `irq` when given, else QEMU microvm's
/// wiring of its window slot (`None` for a block outside the window without an IRQ).
pub fn microvm_gsi(base: usize, irq: Option<u32>) -> Option<u32> {
    if let Some(irq) = irq {
        return Some(irq);
    }
    let slot = base.checked_sub(0xfeb0_0000)? / 0x200;
    let slot = u32::try_from(slot).ok().filter(|&s| s < 32)?;
    if present(IOAPIC2) {
        Some(PINS + slot)
    } else if acpi_rsdp() {
        Some(MICROVM_FIRST_GSI_ACPI + slot)
    } else {
        Some(MICROVM_FIRST_GSI + slot)
    }
}

/// Whether an ACPI RSDP lies in the BIOS area (0xe0000-0xfffff, 16-byte aligned: the
/// signature "RSD PTR " and a zero checksum over its first 20 bytes). QEMU microvm's
/// firmware puts one there when ACPI is on.
fn acpi_rsdp() -> bool {
    (0xe_0000..0x10_0000).step_by(16).any(|at: usize| {
        // SAFETY: the first MiB is identity mapped (cached RAM or firmware ROM), readable;
        // 20 bytes from a 16-aligned address below 1 MiB stay below it.
        let bytes = unsafe { core::slice::from_raw_parts(at as *const u8, 20) };
        &bytes[..8] == b"RSD PTR " && bytes.iter().fold(0u8, |a, b| a.wrapping_add(*b)) == 0
    })
}

/// Routes `gsi` to [`NIC_VECTOR`] on the boot CPU (edge, active high, fixed, physical
/// destination), unmasked. Returns the (I/O APIC base, pin) used, or `None` when no I/O APIC
/// has that pin.
pub fn route(gsi: u32) -> Option<(usize, u32)> {
    let (base, pin) = if gsi < PINS {
        (IOAPIC1, gsi)
    } else {
        (IOAPIC2, gsi - PINS)
    };
    if pin >= PINS || !present(base) || pin > (read(base, 1) >> 16) & 0xff {
        return None;
    }
    // SAFETY: the LAPIC block is identity mapped uncached; the ID register is read-only here.
    let apic_id = unsafe { core::ptr::read_volatile(LAPIC_ID as *const u32) } >> 24;
    write(base, 0x11 + 2 * pin, apic_id << 24);
    write(base, 0x10 + 2 * pin, u32::from(NIC_VECTOR));
    Some((base, pin))
}
