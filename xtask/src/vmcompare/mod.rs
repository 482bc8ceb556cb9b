//! `cargo xtask vm-compare [--quick] [--accel tcg|kvm]`: the Kayvee unikernel against Redis
//! and kayvee-server in a Debian Linux guest, on the same QEMU machine (q35, one vCPU, 256 MiB,
//! virtio-net-pci on a tap device), measured with redis-benchmark from the host
//! (bench/vm-compare/README.md).
//!
//! Two halves: this one installs and builds everything, creates a network namespace with
//! `tap0` (10.0.3.1/24), re-runs the xtask inside it (`vm-compare --inner`, see `run.rs`),
//! removes the namespace, then prints and writes the results (`report.rs`) and the chart.

mod guest;
mod report;
mod run;

use report::Measurements;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Upper bound of the measuring half (full run; the quick one gets a fifth).
const INNER_LIMIT: Duration = Duration::from_secs(75 * 60);

/// Parsed options.
struct Options {
    /// SET and GET at -P 16 only.
    quick: bool,
    /// `--accel`, if given.
    accel: Option<String>,
    /// `--report`: only print and write the results of the last run again.
    report_only: bool,
    /// `--inner`: the measuring half, with its inputs.
    inner: Option<run::Inputs>,
}

/// Parses `vm-compare`'s arguments.
fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        quick: false,
        accel: None,
        report_only: false,
        inner: None,
    };
    let (mut kernel, mut initrd, mut image, mut out) = (None, None, None, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--quick" => o.quick = true,
            "--accel" => o.accel = Some(val()?),
            "--kernel" => kernel = Some(PathBuf::from(val()?)),
            "--initrd" => initrd = Some(PathBuf::from(val()?)),
            "--image" => image = Some(PathBuf::from(val()?)),
            "--out" => out = Some(PathBuf::from(val()?)),
            "--inner" => {}
            "--report" => o.report_only = true,
            other => return Err(format!("vm-compare: unknown option '{other}'")),
        }
    }
    if args.iter().any(|a| a == "--inner") {
        let missing = || "--inner needs --kernel --initrd --image --out".to_string();
        o.inner = Some(run::Inputs {
            kernel: kernel.ok_or_else(missing)?,
            initramfs: initrd.ok_or_else(missing)?,
            image: image.ok_or_else(missing)?,
            accel: o.accel.clone().unwrap_or_else(|| "tcg".into()),
            quick: o.quick,
            out: out.ok_or_else(missing)?,
        });
    }
    Ok(o)
}

/// Entry point of the task.
pub fn main(args: &[String]) -> Result<(), String> {
    let o = parse(args)?;
    if let Some(inp) = &o.inner {
        return run::inner(inp);
    }
    let t0 = Instant::now();
    let out = super::root()
        .join("target/vm-compare")
        .join(if o.quick { "quick" } else { "full" });
    std::fs::create_dir_all(&out).map_err(|e| e.to_string())?;
    if o.report_only {
        let text =
            std::fs::read_to_string(out.join("measurements.csv")).map_err(|e| e.to_string())?;
        let m = Measurements::parse(&text);
        write_results(&m, &out, o.quick)?;
        println!("{}", report::last_line(&m));
        return Ok(());
    }
    ensure_host_tools()?;
    let kayvee = build_static_server()?;
    let guest = guest::build(&super::root().join("target/vm-compare"), &kayvee)?;
    let (image, _) = super::unikernel::build()?;
    let accel = super::unikernel::accel(o.accel.as_deref()).to_string();
    let inp = run::Inputs {
        kernel: guest.kernel,
        initramfs: guest.initramfs,
        image,
        accel,
        quick: o.quick,
        out: out.clone(),
    };
    let limit = if o.quick {
        INNER_LIMIT / 5
    } else {
        INNER_LIMIT
    };
    let measured = in_namespace(&inp, limit);
    let text = std::fs::read_to_string(out.join("measurements.csv")).unwrap_or_default();
    let m = Measurements::parse(&text);
    write_results(&m, &out, o.quick)?;
    measured?;
    eprintln!("vm-compare: done in {:.0} s", t0.elapsed().as_secs_f64());
    println!("{}", report::last_line(&m));
    Ok(())
}

/// Runs `cmd`, failing with its stderr.
fn sh(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

/// Installs what the run needs from Debian when missing: QEMU, redis-server (its binary goes
/// into the guest), redis-tools (the client side) and matplotlib (the chart).
fn ensure_host_tools() -> Result<(), String> {
    let has = |bin: &str| Path::new(bin).exists();
    let mut pkgs = Vec::new();
    if !has("/usr/bin/qemu-system-x86_64") {
        pkgs.push("qemu-system-x86");
    }
    if !has("/usr/bin/redis-server") {
        pkgs.push("redis-server");
    }
    if !has("/usr/bin/redis-benchmark") {
        pkgs.push("redis-tools");
    }
    let mpl = Command::new("/usr/bin/python3")
        .args(["-c", "import matplotlib"])
        .output();
    if !mpl.is_ok_and(|o| o.status.success()) {
        pkgs.push("python3-matplotlib");
    }
    if pkgs.is_empty() {
        return Ok(());
    }
    eprintln!("vm-compare: apt-get install -y {}", pkgs.join(" "));
    sh(Command::new("apt-get").arg("update"))?;
    sh(Command::new("apt-get").args(["install", "-y"]).args(&pkgs))
}

/// The Linux guest with the disk modules (for `bench-disk --linux`): host tools, the static
/// kayvee-server, Debian's kernel and the disk variant of the initramfs.
pub fn disk_guest() -> Result<(PathBuf, PathBuf), String> {
    let kayvee = build_static_server()?;
    let g = guest::build_with_disk(&super::root().join("target/vm-compare"), &kayvee)?;
    Ok((g.kernel, g.initramfs))
}

/// Builds kayvee-server statically linked (glibc, `+crt-static`) for the initramfs.
fn build_static_server() -> Result<PathBuf, String> {
    let triple = "x86_64-unknown-linux-gnu";
    super::cargo(
        &[
            "build",
            "--release",
            "-p",
            "kayvee-server",
            "--target",
            triple,
        ],
        &[("RUSTFLAGS", "-C target-feature=+crt-static")],
    )?;
    Ok(super::root().join(format!("target/{triple}/release/kayvee-server")))
}

/// The network namespace, deleted (with anything still running in it) when dropped.
struct Namespace {
    /// Its name.
    name: String,
}

impl Namespace {
    /// Creates it with `tap0` at 10.0.3.1/24 and loopback up.
    fn create() -> Result<Namespace, String> {
        let ns = Namespace {
            name: format!("kvvmcmp{}", std::process::id()),
        };
        sh(Command::new("ip").args(["netns", "add", &ns.name]))?;
        for cmd in [
            "ip link set lo up",
            "ip tuntap add dev tap0 mode tap",
            "ip addr add 10.0.3.1/24 dev tap0",
            "ip link set tap0 up",
        ] {
            sh(Command::new("ip")
                .args(["netns", "exec", &ns.name])
                .args(cmd.split(' ')))?;
        }
        Ok(ns)
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        if let Ok(o) = Command::new("ip")
            .args(["netns", "pids", &self.name])
            .output()
        {
            for pid in String::from_utf8_lossy(&o.stdout).split_whitespace() {
                let _ = Command::new("kill").args(["-KILL", pid]).status();
            }
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// Re-runs this binary with `--inner` inside a fresh namespace, bounded by `limit`.
fn in_namespace(inp: &run::Inputs, limit: Duration) -> Result<(), String> {
    let ns = Namespace::create().map_err(|e| {
        format!("cannot create a network namespace with a tap device (root and /dev/net/tun needed): {e}")
    })?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &ns.name])
        .arg(exe)
        .args(["vm-compare", "--inner"]);
    cmd.args(["--accel", &inp.accel])
        .arg("--kernel")
        .arg(&inp.kernel);
    cmd.arg("--initrd")
        .arg(&inp.initramfs)
        .arg("--image")
        .arg(&inp.image);
    cmd.arg("--out").arg(&inp.out);
    if inp.quick {
        cmd.arg("--quick");
    }
    let mut child = cmd.spawn().map_err(|e| format!("ip netns exec: {e}"))?;
    let start = Instant::now();
    loop {
        if let Some(st) = child.try_wait().map_err(|e| e.to_string())? {
            return match st.success() {
                true => Ok(()),
                false => Err(format!("the measuring run failed ({st})")),
            };
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "the measuring run took longer than {limit:?}; stopped"
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Prints the tables and writes table.csv, table.txt and chart.png into `out`; a full run
/// is also copied to bench/vm-compare/results/.
fn write_results(m: &Measurements, out: &Path, quick: bool) -> Result<(), String> {
    let table = report::table_text(m);
    let summary = report::summary_text(m);
    println!("\nrequests per second (redis-benchmark -c 50; a = Redis in Linux, b = kayvee-server in Linux, c = unikernel)\n{table}");
    println!("boot = QEMU start to first PONG; memory after loading 100,000 keys (see bench/vm-compare/README.md)\n{summary}");
    let write = |name: &str, data: &str| {
        std::fs::write(out.join(name), data).map_err(|e| format!("{name}: {e}"))
    };
    write("table.csv", &report::table_csv(m))?;
    write("table.txt", &format!("{table}\n{summary}"))?;
    let chart = super::root().join("bench/vm-compare/chart.py");
    let st = Command::new("/usr/bin/python3")
        .arg(&chart)
        .arg(out.join("table.csv"))
        .arg(out.join("chart.png"))
        .status();
    if !st.is_ok_and(|s| s.success()) {
        eprintln!(
            "vm-compare: the chart could not be drawn ({})",
            chart.display()
        );
    }
    if !quick {
        let dest = super::root().join("bench/vm-compare/results");
        std::fs::create_dir_all(&dest).map_err(|e| e.to_string())?;
        for f in ["table.csv", "table.txt", "chart.png", "measurements.csv"] {
            let _ = std::fs::copy(out.join(f), dest.join(f));
        }
    }
    Ok(())
}
