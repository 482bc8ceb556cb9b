//! x86-64 specifics: the PVH boot stub, C memory functions, port I/O.

pub mod boot;
pub mod mem;
pub mod port;
