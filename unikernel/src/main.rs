//! Kayvee as a unikernel: a PVH-bootable image running the Kayvee engine and RESP codec over
//! virtio-net and smoltcp, with no operating system under it.
//!
//! Boot order: the stub in `arch::boot` enters [`kmain`] in long mode; we bring up the serial
//! console, read the PVH start info (command line, memory map), claim the heap, calibrate the
//! clock, apply the command line to the configuration and run the network server loop.
#![no_std]
#![no_main]

extern crate alloc;

mod arch;
mod arrival;
mod batched;
mod blk;
mod boottime;
mod cmdline;
mod conn;
mod exit;
mod fault;
mod heap;
mod net;
mod pool;
mod port;
mod pvh;
mod serial;
mod server;
mod shell;
mod sntp;
mod store;
mod time;

use alloc::string::String;
use kayvee_engine::{Config, Engine, Now};

/// Redis 7's default save points, the unikernel's when it has a disk.
const DEFAULT_SAVE: &str = "3600 1 300 100 60 10000";

/// Entered from the boot stub with the physical address of the PVH start info.
#[no_mangle]
pub extern "C" fn kmain(start_info: u64) -> ! {
    boottime::stamp("paging+long-mode");
    #[cfg(not(feature = "ring3"))]
    arch::guard::install();
    serial::init();
    println!("kayvee unikernel {} booting", env!("CARGO_PKG_VERSION"));
    // The rest of the boot log waits until the first command is answered (see serial::hold).
    serial::hold();
    boottime::stamp("serial");
    // SAFETY: `start_info` is the `ebx` the PVH loader passed, forwarded by the boot stub.
    let boot = match unsafe { pvh::BootInfo::read(start_info) } {
        Ok(b) => b,
        Err(e) => exit::fail(e),
    };
    let heap_bytes = heap::init(boot.ram());
    if heap_bytes == 0 {
        exit::fail("no usable RAM above the image in the PVH memory map");
    }
    boottime::stamp("start-info+heap");
    let line = String::from(boot.cmdline());
    println_later!("kayvee: heap {} KiB, cmdline \"{line}\"", heap_bytes / 1024);
    boottime::stamp("log");
    let args = cmdline::parse(boot.cmdline()).unwrap_or_else(|e| bad_cmdline(&e));
    boottime::stamp("cmdline");
    if let Some(fault) = args.debug_fault {
        raise(fault);
    }
    if !args.ignored.is_empty() {
        let ignored = args.ignored.join(" ");
        println_later!("kayvee: ignoring Linux kernel parameters: {ignored}");
    }
    let mut config = build_config(&args.config);
    if !args
        .config
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("maxmemory"))
    {
        config.maxmemory = heap::default_maxmemory(heap_bytes);
    }
    boottime::stamp("config");
    let (unix_base_us, wall) = time::wall_clock_base(args.time_us);
    let source = wall.describe();
    let clock = time::Clock::new(unix_base_us);
    boottime::stamp("tsc-calibration");
    let (tsc_hz, tsc_source, ring) = (clock.tsc_hz(), clock.source(), port::cpl());
    println_later!(
        "kayvee: TSC {} MHz ({}), wall clock from {source}; ring {ring}",
        tsc_hz / 1_000_000,
        match tsc_source {
            time::TscSource::HypervisorLeaf => "CPUID 0x40000010",
            time::TscSource::Cpuid15 => "CPUID 0x15",
            time::TscSource::Pit => "PIT, refined while running",
            time::TscSource::Guess => "a guess: no PIT, no CPUID leaf",
        }
    );
    boottime::stamp("log");
    // What the Lua VM writes to stdout/stderr (only a panic message outside any protected
    // call: scripts have no `print`) reaches the console.
    kayvee_lua::libc::set_output(serial::write_bytes);
    let seed = port::rdtsc() ^ unix_base_us.rotate_left(17) ^ 0x6b61_7976_6565;
    let mut engine = Engine::new(
        config,
        seed,
        Now {
            unix_us: clock.unix_us(),
        },
    );
    fill_host_info(&mut engine, heap_bytes);
    // DUMP/RESTORE, FUNCTION DUMP/RESTORE: the RDB value codec, as kayvee-server installs it.
    engine.set_codec(&kayvee_rdb::CODEC);
    // `redis.log` reaches the console, with Redis's level marks (. - * #).
    engine.set_script_log(|level, message| {
        let mark = [".", "-", "*", "#"][usize::from(level.min(3))];
        println!("{mark} {}", String::from_utf8_lossy(message));
    });
    // The memory limit reads talc's count at command time.
    engine.set_memory_probe(heap::used_bytes);
    // DUMP, RESTORE, MIGRATE's payloads and DEBUG RELOAD's round trip use the RDB value codec.
    engine.set_codec(&kayvee_rdb::CODEC);
    boottime::stamp("engine");
    let store = store::Store::open(&args, &mut engine, &clock);
    if store.is_none() {
        println_later!("kayvee: persistence: off (no disk)");
    } else if !args
        .config
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("save"))
    {
        // With a disk, Redis 7's save points, as kayvee-server (the engine's default is none).
        engine.core.config.save = DEFAULT_SAVE.into();
    }
    boottime::stamp("disk");
    server::run(engine, &clock, &args, store)
}

/// Raises the CPU exception `debug-fault=` asks for (a test of `arch::idt` and `fault`).
fn raise(fault: cmdline::Fault) {
    println!("kayvee: debug-fault: raising {fault:?}");
    match fault {
        // SAFETY: none: these deliberately fault; the handler stops the VM.
        cmdline::Fault::Page => unsafe {
            core::ptr::read_volatile(0x1_0000_0000 as *const u64);
        },
        // SAFETY: as above.
        cmdline::Fault::InvalidOpcode => unsafe { core::arch::asm!("ud2") },
        // SAFETY: as above.
        cmdline::Fault::GeneralProtection => unsafe {
            core::ptr::read_volatile(0x8000_0000_0000_0000 as *const u64);
        },
        cmdline::Fault::StackOverflow => {
            core::hint::black_box(recurse(0));
        }
        cmdline::Fault::OutOfMemory => {
            let mut hold = alloc::vec::Vec::new();
            loop {
                hold.push(alloc::vec![1u8; 1 << 20]);
            }
        }
    }
}

/// Recurses with 512-byte frames until the stack runs out (`debug-fault=stack`).
#[inline(never)]
fn recurse(depth: u64) -> u64 {
    let frame = core::hint::black_box([depth; 64]);
    if core::hint::black_box(depth) == u64::MAX {
        return 0;
    }
    recurse(depth + 1).wrapping_add(frame[7])
}

/// Applies the Redis directives from the command line over the defaults (the unikernel's own
/// `busy-poll-us`, see [`server::BUSY_POLL_US`], and `protected-mode no`: the image has no
/// loopback interface, every client comes through the network, so Redis's default would
/// refuse them all; `protected-mode=yes` on the command line turns it back on); any bad one
/// stops the boot.
fn build_config(pairs: &[(String, String)]) -> Config {
    let mut config = Config {
        busy_poll_us: server::BUSY_POLL_US,
        protected_mode: false,
        ..Config::default()
    };
    for (name, value) in pairs {
        if let Err(e) = config.apply(name, &[value.as_str()]) {
            bad_cmdline(&alloc::format!("{name}={value}: {e}"));
        }
    }
    config
}

/// Prints a command-line error and stops with a failure status.
fn bad_cmdline(why: &str) -> ! {
    println!("kayvee: bad command line: {why}");
    exit::fail("refusing to start with a bad configuration")
}

/// What INFO reports about the "host".
fn fill_host_info(engine: &mut Engine, heap_bytes: u64) {
    let host = &mut engine.core.host;
    host.os = "Kayvee unikernel x86_64".into();
    host.arch_bits = 64;
    host.multiplexing_api = "polling".into();
    host.executable = "kayvee-unikernel".into();
    host.total_system_memory = heap_bytes;
    host.tcp_port = engine.core.config.port;
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    serial::abandon_later(); // formatting them might panic again
    println!("kayvee: PANIC: {info}");
    exit::fail("panic")
}
