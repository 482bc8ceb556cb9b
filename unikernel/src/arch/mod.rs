//! x86-64 specifics: the PVH boot stub, CPU exception handlers, C memory functions, port I/O.

#[cfg(not(feature = "ring3"))]
pub mod apic;
pub mod boot;
#[cfg(not(feature = "ring3"))]
pub mod guard;
pub mod idt;
#[cfg(not(feature = "ring3"))]
pub mod ioapic;
pub mod mem;
pub mod port;
