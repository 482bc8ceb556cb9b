//! Facts about the host and the process for INFO (`HostInfo`), the file-descriptor limit the
//! server needs for `maxclients`, and the random seed. Linux only: `/proc`, `uname(2)`,
//! `getrusage(2)`, `getrlimit(2)`/`setrlimit(2)`.

use kayvee_engine::geohash::Trig;
use kayvee_engine::HostInfo;
use std::io::Read;

/// File descriptors Redis keeps in reserve beyond `maxclients` (listeners, log, persistence).
pub const RESERVED_FDS: u64 = 32;

/// The static host facts, filled once at startup.
pub fn initial(tcp_port: u16) -> HostInfo {
    let mut host = HostInfo {
        os: os_line(),
        arch_bits: usize::BITS,
        process_id: u64::from(std::process::id()),
        multiplexing_api: "epoll".into(),
        executable: std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        tcp_port,
        total_system_memory: total_system_memory(),
        storage: true,
        // The C library's, as Redis's geo distances use.
        trig: Trig {
            sin: f64::sin,
            cos: f64::cos,
            asin: f64::asin,
        },
        ..HostInfo::default()
    };
    refresh(&mut host);
    host
}

/// Refreshes the changing facts (memory, CPU): the cron calls it `hz` times a second.
pub fn refresh(host: &mut HostInfo) {
    host.used_memory = crate::alloc::allocated_bytes() as u64;
    host.used_memory_rss = rss_bytes().unwrap_or(host.used_memory_rss);
    let (sys, user) = cpu_seconds();
    host.used_cpu_sys = sys;
    host.used_cpu_user = user;
}

/// `Linux 6.1.0-18-amd64 x86_64`, as Redis's `os:` field (sysname, release, machine).
fn os_line() -> String {
    // SAFETY: `utsname` is plain old data (arrays of `c_char`); all-zero is a valid value.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable `utsname`; `uname` only writes into it.
    if unsafe { libc::uname(&mut u) } != 0 {
        return "Linux".into();
    }
    let field = |f: &[libc::c_char]| -> String {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    format!(
        "{} {} {}",
        field(&u.sysname),
        field(&u.release),
        field(&u.machine)
    )
}

/// The page size, for `/proc/self/statm`'s page counts.
fn page_size() -> u64 {
    // SAFETY: `sysconf` has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as u64
    } else {
        4096
    }
}

/// Resident set size in bytes: `/proc/self/statm`'s second field times the page size.
fn rss_bytes() -> Option<u64> {
    let mut text = String::new();
    std::fs::File::open("/proc/self/statm")
        .ok()?
        .read_to_string(&mut text)
        .ok()?;
    parse_statm_rss_pages(&text).map(|pages| pages * page_size())
}

/// The resident page count in a `statm` line (`size resident shared text lib data dt`).
fn parse_statm_rss_pages(text: &str) -> Option<u64> {
    text.split_ascii_whitespace().nth(1)?.parse().ok()
}

/// Total memory of the machine in bytes (`MemTotal` in `/proc/meminfo`).
fn total_system_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| parse_meminfo_total(&t))
        .unwrap_or(0)
}

/// `MemTotal:   24576000 kB` -> bytes.
fn parse_meminfo_total(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_ascii_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// CPU seconds consumed by the process: (system, user).
fn cpu_seconds() -> (f64, f64) {
    // SAFETY: `rusage` is plain old data; all-zero is a valid value.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `r` is a valid, writable `rusage`; `getrusage` only writes into it.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut r) } != 0 {
        return (0.0, 0.0);
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(r.ru_stime), secs(r.ru_utime))
}

/// What happened to the descriptor limit at startup.
#[derive(Debug, PartialEq, Eq)]
pub enum FdLimit {
    /// The soft limit allows `maxclients` (maybe after raising it).
    Enough,
    /// The limit stays at `limit`; `maxclients` must drop to `maxclients`.
    Reduced {
        /// The soft limit in force.
        limit: u64,
        /// The largest `maxclients` it allows.
        maxclients: u64,
        /// Why it could not be raised (OS error), if raising was tried.
        error: Option<String>,
    },
}

/// Raises `RLIMIT_NOFILE`'s soft limit to `maxclients + RESERVED_FDS` (capped by the hard
/// limit), as Redis does at startup, and says whether `maxclients` fits.
pub fn raise_fd_limit(maxclients: u64) -> FdLimit {
    let needed = maxclients + RESERVED_FDS;
    let Some((soft, hard)) = get_nofile() else {
        return FdLimit::Enough;
    };
    if soft >= needed {
        return FdLimit::Enough;
    }
    let target = needed.min(hard);
    let error = match set_nofile(target, hard) {
        Ok(()) if target >= needed => return FdLimit::Enough,
        Ok(()) => None,
        Err(e) => Some(e.to_string()),
    };
    let limit = get_nofile().map_or(soft, |(s, _)| s);
    FdLimit::Reduced {
        limit,
        maxclients: limit.saturating_sub(RESERVED_FDS).max(1),
        error,
    }
}

/// `RLIMIT_NOFILE` as (soft, hard); `RLIM_INFINITY` reads as `u64::MAX`.
fn get_nofile() -> Option<(u64, u64)> {
    // SAFETY: `rlimit` is plain old data; all-zero is a valid value.
    let mut r: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: `r` is a valid, writable `rlimit`.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return None;
    }
    Some((r.rlim_cur as u64, r.rlim_max as u64))
}

/// Sets `RLIMIT_NOFILE`.
fn set_nofile(soft: u64, hard: u64) -> std::io::Result<()> {
    let r = libc::rlimit {
        rlim_cur: soft as libc::rlim_t,
        rlim_max: hard as libc::rlim_t,
    };
    // SAFETY: `r` is a valid `rlimit` that `setrlimit` only reads.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// 64 random bits from the kernel, for the engine's hash seed and random source.
pub fn random_seed() -> u64 {
    let mut b = [0u8; 8];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_ok()
    {
        return u64::from_le_bytes(b);
    }
    // No /dev/urandom: std's per-process random hasher keys are the fallback.
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statm_second_field_is_resident_pages() {
        assert_eq!(
            parse_statm_rss_pages("5000 1234 300 10 0 900 0\n"),
            Some(1234)
        );
        assert_eq!(parse_statm_rss_pages("5000"), None);
    }

    #[test]
    fn meminfo_total_in_bytes() {
        let t = "MemTotal:       24576000 kB\nMemFree:  1 kB\n";
        assert_eq!(parse_meminfo_total(t), Some(24576000 * 1024));
        assert_eq!(parse_meminfo_total("MemFree: 1 kB\n"), None);
    }

    #[test]
    fn live_facts_are_plausible() {
        let h = initial(6380);
        assert!(h.os.starts_with("Linux "), "{}", h.os);
        assert_eq!(h.arch_bits, 64);
        assert_eq!(h.process_id, u64::from(std::process::id()));
        assert!(h.used_memory_rss > 0);
        assert!(h.total_system_memory > h.used_memory_rss);
        assert_eq!(h.tcp_port, 6380);
    }

    #[test]
    fn a_limit_already_high_enough_is_enough() {
        let (soft, _) = get_nofile().unwrap();
        assert_eq!(
            raise_fd_limit(soft.saturating_sub(RESERVED_FDS + 1)),
            FdLimit::Enough
        );
    }

    #[test]
    fn seeds_differ() {
        assert_ne!(random_seed(), random_seed());
    }
}
