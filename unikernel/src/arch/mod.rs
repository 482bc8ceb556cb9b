//! x86-64 specifics: the PVH boot stub, CPU exception handlers, C memory functions, port I/O.

pub mod boot;
pub mod idt;
pub mod mem;
pub mod port;
