//! The transports of `xs-bench` beside the plain socket: kayvee-xenstored's event loop in a
//! thread of this process on the test Xen, the clients either guests on their rings (`ring`)
//! or dom0 connections on its Unix socket (`inproc`); or a kayvee-xenstored process started
//! with `--test-xen DIR` and the clients guests of that directory's test Xen (`dir-ring`).
//! Also measures the daemon's CPU time (its thread, or `--daemon-pid`).

use std::sync::mpsc;
use std::time::{Duration, Instant};

use kayvee_xenstored::options::parse;
use kayvee_xenstored::server::Server;
use kayvee_xenstored::xen::guest::Guest;
use kayvee_xenstored::xen::testxen::{DirXen, GuestSide, TestXen, TEST_GFN, TEST_PORT};

use crate::{client, p0, report, run, wr, Args, Call, Client};

/// A guest's ring as a [`Call`] connection.
struct Ring(Guest);

impl Call for Ring {
    fn call(&mut self, ty: u32, tx: u32, payload: &[u8]) -> (u32, Vec<u8>) {
        let m = self.0.request(ty, tx, payload).expect("ring request");
        (m.header.ty, m.payload)
    }
}

/// CPU time (user + system) of thread `tid` of this process, in milliseconds.
fn thread_cpu_ms(tid: i32) -> f64 {
    cpu_ms(&format!("/proc/self/task/{tid}/stat"))
}

/// CPU time (user + system) of process `pid`, in milliseconds.
pub fn process_cpu_ms(pid: i32) -> f64 {
    cpu_ms(&format!("/proc/{pid}/stat"))
}

/// CPU time (user + system) from a /proc stat file, in milliseconds.
fn cpu_ms(path: &str) -> f64 {
    let stat = std::fs::read_to_string(path).expect("stat");
    // Fields after the command name's closing parenthesis: state is the 3rd field of the
    // line, utime the 14th and stime the 15th.
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    // SAFETY: a plain query.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    ticks * 1000.0 / hz
}

/// Start the daemon thread; (socket path, its thread id).
fn start_daemon(xen: &TestXen) -> (String, i32) {
    let dir = format!("/tmp/xs-ring-bench-{}", std::process::id());
    let socket = format!("{dir}/socket");
    let opts = parse(&["--no-fork".to_string()], socket.clone().into())
        .expect("options")
        .expect("options");
    let host = Box::new(xen.host().expect("test Xen"));
    let mut server = Server::with_xen(&opts, host).expect("daemon");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        // SAFETY: a plain query.
        tx.send(unsafe { libc::gettid() }).unwrap();
        server.run()
    });
    (socket, rx.recv().unwrap())
}

/// Run the workload in process (or, for `dir-ring`, against the daemon at `--socket`) and
/// print the summary line and the daemon's CPU.
pub fn main(args: &Args) {
    let mem = TestXen::new();
    let dir = DirXen::new(&args.xen_dir);
    let (socket, cpu): (String, Box<dyn Fn() -> f64>) = match args.transport.as_str() {
        "dir-ring" => {
            let pid = args.daemon_pid;
            let cpu = move || pid.map_or(0.0, process_cpu_ms);
            (args.socket.clone(), Box::new(cpu))
        }
        _ => {
            let (socket, tid) = start_daemon(&mem);
            (socket, Box::new(move || thread_cpu_ms(tid)))
        }
    };
    let mut d0 = Client::connect(&socket).expect("connect");
    // RM (13) of what a previous run left, as the socket setup does.
    d0.ok(13, 0, &p0("/bench"));
    d0.ok(11, 0, &wr("/bench/shared", "s"));
    d0.ok(14, 0, b"/bench/shared\0r0\0");
    let mut guests = Vec::new();
    if args.transport != "inproc" {
        for d in 1..=args.clients as u32 {
            let side: std::io::Result<GuestSide> = match args.transport.as_str() {
                "dir-ring" => dir.create_domain(d),
                _ => mem.create_domain(d),
            };
            let g = Guest::new(side.expect("domain"));
            let home = format!("/local/domain/{d}");
            d0.ok(12, 0, &p0(&home));
            d0.ok(14, 0, format!("{home}\0n{d}\0").as_bytes());
            d0.ok(8, 0, format!("{d}\0{TEST_GFN}\0{TEST_PORT}\0").as_bytes());
            guests.push((d, g));
        }
    }
    let args_run = Args {
        socket: socket.clone(),
        ..args.clone()
    };
    let cpu0 = cpu();
    let start = Instant::now();
    let handles: Vec<_> = match args.transport.as_str() {
        "ring" | "dir-ring" => guests
            .into_iter()
            .map(|(d, g)| {
                let a = args_run.clone();
                std::thread::spawn(move || {
                    run(&a, &mut Ring(g), &format!("/local/domain/{d}/bench"))
                })
            })
            .collect(),
        _ => (0..args.clients)
            .map(|i| {
                let a = args_run.clone();
                std::thread::spawn(move || client(&a, i))
            })
            .collect(),
    };
    let results: Vec<(Vec<Duration>, u64)> =
        handles.into_iter().map(|h| h.join().unwrap()).collect();
    let wall = start.elapsed();
    let cpu = cpu() - cpu0;
    report(&args_run, &results, wall);
    let txs: usize = results.iter().map(|(l, _)| l.len()).sum();
    println!(
        "{:<28} cpu_ms/ktx daemon={:.1}",
        args.label,
        cpu * 1000.0 / txs as f64
    );
    if args.transport != "dir-ring" {
        let _ = std::fs::remove_dir_all(std::path::Path::new(&socket).parent().unwrap());
    }
    // The daemon thread serves forever: end the process here.
    std::process::exit(0);
}
