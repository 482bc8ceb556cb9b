//! RESP2/RESP3 codec (placeholder, replaced by the real decoder and encoder).
#![no_std]
#![forbid(unsafe_code)]
extern crate alloc;
