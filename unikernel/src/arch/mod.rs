//! x86-64 specifics: the PVH boot stub, the interrupt descriptor table and its entry stubs,
//! the stack guard, the local and I/O APICs, C memory functions. It prints nothing and never
//! stops the VM itself: what a CPU exception does is [`crate::fault`]'s; port I/O is
//! [`crate::port`], below the console and this module.

#[cfg(not(feature = "ring3"))]
pub mod apic;
pub mod boot;
#[cfg(not(feature = "ring3"))]
pub mod guard;
pub mod idt;
#[cfg(not(feature = "ring3"))]
pub mod ioapic;
pub mod mem;
