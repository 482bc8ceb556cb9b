//! Project tooling beyond cargo: `cargo xtask ci` (what CI runs) and `cargo xtask bench`
//! (the side-by-side benchmark against redis-server). Uses std, and `kayvee-disk` for the
//! unikernel's disk images.

mod circles;
mod redis_suite;
mod testrun;
mod unikernel;
mod vmcompare;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// What `cargo xtask help` prints.
const USAGE: &str = "\
usage: cargo xtask <task>

tasks:
  ci               fmt check, clippy -D warnings, build, all tests with
                   KAYVEE_REQUIRE_REDIS=1 KAYVEE_REQUIRE_XENSTORE=1, module circles
  circles          fail when a crate's modules import each other in a circle not listed in
                   xtask/circles-known.txt (the rule: xtask/src/circles/mod.rs)
  bench [--quick]  redis-server vs kayvee-server with redis-benchmark (bench/compare.py);
                   further options are passed to the script (see bench/README.md)
  image            build the unikernel image (unikernel/README.md); print its path and size
  run [--port N] [--accel tcg|kvm] [--machine microvm|q35] [--disk FILE] [key=value...]
                   boot the unikernel under QEMU (microvm: virtio-mmio; q35: virtio-net-pci),
                   127.0.0.1:N (6379) -> guest; --disk: its data on FILE (virtio-blk,
                   disk=required); Ctrl-C stops
  disk create FILE [SIZE] | disk import FILE RDB | disk export FILE RDB [--aof AOF]
                   the unikernel's disk image: a formatted blank one (64M), an RDB file put in
                   as the newest snapshot, the newest valid snapshot taken out as an RDB file
  bench-boot [--runs N] [--mem M] [--machine-opts ,k=v] [--dhcp] [--image PATH] [--floor]
             [--phases] [--qemu ARG]... [key=value...]
                   boot the unikernel N times (20) under TCG microvm; min/median ms from QEMU
                   start to the first console line, to \"ready\" and to the first PONG;
                   --floor also boots a null PVH image each round (QEMU's own floor),
                   --phases prints every boot's guest phases, --qemu appends a QEMU argument
  bench-mem [--mem M] [--image PATH] [key=value...]
                   the least guest RAM (-m, from 32M down) in which the unikernel boots, holds
                   10,000 small keys (redis-cli --pipe) and answers
  bench-net [--image PATH] [--redis-port N] [key=value...]
                   redis-benchmark SET/GET, 8 clients, -P 1 and -P 16: the unikernel under TCG
                   through the port forward, then redis-server on the host
  bench-disk [--quick] [--linux] [--keys N] [--requests N] [--mem M] [--disk-size S] [--image PATH]
                   the unikernel with a virtio-blk disk under TCG: SET -c 8 -P 16 with the log
                   off and appendfsync no/everysec/always; a BGSAVE of N keys (1,000,000): its
                   time, SET throughput and used_memory during it (--quick: a smoke run);
                   --linux: every row also on kayvee-server in vm-compare's Linux guest (ext4
                   on the same virtio-blk disk setup, both sides on microvm with acpi=on, or
                   --machine q35), side by side with ratios
  uk-test          boot the unikernel under TCG: PONG probe, redis-cli/benchmark, SHUTDOWN, a q35
                   (PCI) boot, then the end-to-end suites that need no file system against it
                   (KAYVEE_TARGET=unikernel) and Redis's own suite's core units in external mode
                   (redis-suite --unikernel --gate); --robustness: only the fault, stack-overflow and
                   heap-exhaustion checks; --replication: only the replication
                   check (the image as redis-server's replica and primary); --disk: only the disk checks (save, reboot, redis-server's
                   RDB imported, redis-check-rdb on the export, SIGKILL crash cycles with
                   appendfsync always: every acknowledged write must survive, a full disk's
                   MISCONF rules, the export of a log); --disk --only save,import,kill,crash,
                   full,full-log,export-log,refusals: those groups only
  redis-suite [--server kayvee|redis|both] [--unikernel] [--single UNIT]... [--gate] [--save] ...
                   Redis 7.0.15's own test suite in normal mode (docs/redis-suite.md); --gate is
                   the CI gate against tests/redis-suite/expected-failures.txt; --unikernel: its
                   external mode against the image under QEMU TCG
  vm-compare [--quick] [--accel tcg|kvm] [--report]
                   the unikernel vs redis-server and kayvee-server in a Debian Linux guest, same
                   QEMU machine, redis-benchmark from the host (bench/vm-compare/README.md);
                   --report prints and writes the last run's results again
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("ci") => ci(),
        Some("circles") => circles::check(&root()),
        Some("bench") => bench(&args[1..]),
        Some("image") => unikernel::image(),
        Some("run") => unikernel::run(&args[1..]),
        Some("disk") => unikernel::disk::disk(&args[1..]),
        Some("uk-test") if args.iter().any(|a| a == "--disk") => {
            let only: Vec<String> = args
                .iter()
                .skip_while(|a| *a != "--only")
                .nth(1)
                .map(|v| v.split(',').map(String::from).collect())
                .unwrap_or_default();
            unikernel::uk_test_disk(&only)
        }
        Some("uk-test") if args.iter().any(|a| a == "--replication") => {
            unikernel::uk_test_replication()
        }
        Some("uk-test") if args.iter().any(|a| a == "--robustness") => {
            unikernel::uk_test_robustness()
        }
        // Then Redis's own test suite in its external mode against the image, a guest per core
        // unit (about a minute), judged by tests/redis-suite/expected-failures-unikernel.txt.
        Some("uk-test") => unikernel::uk_test()
            .and_then(|()| redis_suite::main(&["--unikernel".to_string(), "--gate".to_string()])),
        Some("bench-boot") => unikernel::bench_boot(&args[1..]),
        Some("bench-mem") => unikernel::bench_mem(&args[1..]),
        Some("bench-net") => unikernel::bench_net(&args[1..]),
        Some("bench-disk") => unikernel::bench_disk(&args[1..], || {
            let (kernel, initramfs) = vmcompare::disk_guest()?;
            Ok(unikernel::LinuxGuest { kernel, initramfs })
        }),
        Some("vm-compare") => vmcompare::main(&args[1..]),
        Some("redis-suite") => redis_suite::main(&args[1..]),
        // The suite's src/redis-server for kayvee-server (written by redis-suite).
        Some("redis-suite-server") => redis_suite::wrapper::exec(&args[1..]),
        Some("help" | "-h" | "--help") | None => {
            print!("{USAGE}");
            Ok(())
        }
        Some(other) => Err(format!("unknown task '{other}'\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("xtask: {why}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root (xtask lives in `<root>/xtask`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask has a parent")
        .to_path_buf()
}

/// Cargo's target directory (`CARGO_TARGET_DIR` or `<root>/target`).
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), PathBuf::from)
}

/// Runs `cargo args...` in the workspace root with `envs`, failing on a non-zero exit.
/// The cargo that runs xtask (`CARGO`), else the one on the PATH.
fn cargo_bin() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string())
}

fn cargo(args: &[&str], envs: &[(&str, &str)]) -> Result<(), String> {
    let cargo = cargo_bin();
    eprintln!("xtask: cargo {}", args.join(" "));
    let status = Command::new(cargo)
        .current_dir(root())
        .args(args)
        .envs(envs.iter().copied())
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    match status.success() {
        true => Ok(()),
        false => Err(format!("cargo {} failed ({status})", args.join(" "))),
    }
}

/// What CI runs: formatting, lints, build, every test with the Redis tools required
/// (so a machine without redis-server fails instead of silently skipping the differential test),
/// then the module circles check.
fn ci() -> Result<(), String> {
    cargo(&["fmt", "--all", "--", "--check"], &[])?;
    cargo(
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
        &[],
    )?;
    cargo(&["build", "--workspace", "--all-targets"], &[])?;
    testrun::run(&[
        ("KAYVEE_REQUIRE_REDIS", "1"),
        ("KAYVEE_REQUIRE_XENSTORE", "1"),
    ])?;
    // Last, so a module cycle is reported after everything else had its say.
    circles::check(&root())
}

/// Builds the release server and runs `bench/compare.py` with `args` (e.g. `--quick`).
fn bench(args: &[String]) -> Result<(), String> {
    cargo(&["build", "--release", "-p", "kayvee-server"], &[])?;
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), PathBuf::from);
    let bin = target.join("release").join("kayvee-server");
    let script = root().join("bench").join("compare.py");
    let status = Command::new("python3")
        .arg(&script)
        .arg("--kayvee-bin")
        .arg(&bin)
        .args(args)
        .status()
        .map_err(|e| format!("cannot run python3 {}: {e}", script.display()))?;
    match status.success() {
        true => Ok(()),
        false => Err(format!("bench/compare.py failed ({status})")),
    }
}
