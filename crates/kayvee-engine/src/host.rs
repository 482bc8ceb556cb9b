//! Facts about the host that only the shell knows (OS, memory, CPU time) and INFO reports.

use alloc::string::String;
use alloc::vec::Vec;

/// Facts about the host that INFO reports; the shell fills them in and refreshes them.
#[derive(Clone, Debug, Default)]
pub struct HostInfo {
    /// Operating system line (`Linux 6.1.0 x86_64`, or `Kayvee unikernel`).
    pub os: String,
    /// 64 or 32.
    pub arch_bits: u32,
    /// Process id (0 in the unikernel).
    pub process_id: u64,
    /// Event loop kind (`epoll`).
    pub multiplexing_api: String,
    /// Path of the executable.
    pub executable: String,
    /// The TCP port actually listened on.
    pub tcp_port: u16,
    /// Bytes allocated by the engine and shell (the allocator's count).
    pub used_memory: u64,
    /// Resident set size.
    pub used_memory_rss: u64,
    /// Total memory of the machine.
    pub total_system_memory: u64,
    /// CPU seconds (system) consumed by the process.
    pub used_cpu_sys: f64,
    /// CPU seconds (user) consumed by the process.
    pub used_cpu_user: f64,
    /// Whether the shell can write snapshots (a file system or a disk). Without it SAVE and
    /// BGSAVE answer [`crate::cmd::persist::NO_STORAGE`] instead of pretending.
    pub storage: bool,
    /// The shell's own counters (Kayvee-only `name:value` lines at the end of INFO's Server
    /// section, e.g. the unikernel's NIC interrupts); empty by default, so nothing is added.
    pub counters: Vec<(&'static str, u64)>,
    /// The trigonometric functions of the geo commands: the C library's where the shell links
    /// it (the Linux server: Redis's distances bit for bit), else the `libm` crate's.
    pub trig: crate::geohash::Trig,
}
