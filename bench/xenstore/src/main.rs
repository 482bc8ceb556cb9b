//! `xs-bench`: a Xenstore load generator reproducing the OXenstored paper's experiments over
//! the Unix socket (any daemon: kayvee-xenstored, cxenstored, oxenstored).
//!
//! * `7.1`: N clients x M transactions, each reading one shared path and writing its own
//!   (pre-created) path; `7.1-create`: the own nodes are created inside the first transaction.
//! * `7.3`: N guests running long transactions in a loop: write X/foo, sleep, write X/bar.
//!
//! A transaction that gets EAGAIN is retried from the start (as libxenstore users do); its
//! latency runs from the first START to the successful END. Prints one summary line.
//!
//! `--transport ring` runs kayvee-xenstored in this process on the test Xen (guest pages in
//! memfds, event channels as eventfds) and each client is a guest talking through its ring;
//! `--transport inproc` runs the same in-process daemon with the clients on its Unix socket,
//! for a like-for-like comparison. `--transport dir-ring --xen-dir DIR` makes the clients
//! guests of the cross-process test Xen of a `kayvee-xenstored --test-xen DIR` at `--socket`.
//! The default, `socket`, drives an external daemon at `--socket`. The in-process transports
//! print the daemon thread's CPU per 1000 transactions; with `--daemon-pid PID` the others
//! print that process's.

mod inproc;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use kayvee_xswire::{encode, Header, HEADER_LEN};

/// Settings from the command line.
#[derive(Clone, Debug)]
struct Args {
    socket: String,
    workload: String,
    clients: usize,
    txs: usize,
    sleep_ms: u64,
    label: String,
    /// `socket` (an external daemon), `ring`, `inproc` or `dir-ring` (see the module doc).
    transport: String,
    /// The test Xen's directory for `dir-ring` (the daemon's `--test-xen`).
    xen_dir: String,
    /// The daemon's pid, to report its CPU per 1000 transactions (socket and dir-ring).
    daemon_pid: Option<i32>,
}

/// A connection that runs one request at a time: (reply type, payload).
trait Call {
    fn call(&mut self, ty: u32, tx: u32, payload: &[u8]) -> (u32, Vec<u8>);

    /// A call that must succeed.
    fn ok(&mut self, ty: u32, tx: u32, payload: &[u8]) -> Vec<u8> {
        let (t, p) = self.call(ty, tx, payload);
        assert_ne!(
            t,
            16,
            "request {ty} failed: {}",
            String::from_utf8_lossy(&p)
        );
        p
    }
}

/// A blocking client on one connection.
struct Client {
    sock: UnixStream,
    buf: Vec<u8>,
}

impl Client {
    fn connect(path: &str) -> std::io::Result<Self> {
        Ok(Client {
            sock: UnixStream::connect(path)?,
            buf: Vec::with_capacity(256),
        })
    }
}

impl Call for Client {
    /// Send one request and wait for its reply (skipping watch events): (type, payload).
    fn call(&mut self, ty: u32, tx: u32, payload: &[u8]) -> (u32, Vec<u8>) {
        self.buf.clear();
        encode(&mut self.buf, ty, 0, tx, payload);
        self.sock.write_all(&self.buf).expect("send");
        loop {
            let mut h = [0u8; HEADER_LEN];
            self.sock.read_exact(&mut h).expect("reply header");
            let h = Header::read(&h);
            let mut p = vec![0u8; h.len as usize];
            self.sock.read_exact(&mut p).expect("reply payload");
            if h.ty != 15 {
                return (h.ty, p);
            }
        }
    }
}

/// `path\0value`.
fn wr(path: &str, value: &str) -> Vec<u8> {
    let mut v = path.as_bytes().to_vec();
    v.push(0);
    v.extend_from_slice(value.as_bytes());
    v
}

/// `path\0`.
fn p0(path: &str) -> Vec<u8> {
    let mut v = path.as_bytes().to_vec();
    v.push(0);
    v
}

/// Run one transaction until it commits; (latency, EAGAIN count).
fn transaction<C: Call>(c: &mut C, body: &mut dyn FnMut(&mut C, u32)) -> (Duration, u64) {
    let t0 = Instant::now();
    let mut eagain = 0;
    loop {
        let tid = c.ok(6, 0, b"\0");
        let tid: u32 = std::str::from_utf8(&tid[..tid.len() - 1])
            .unwrap()
            .parse()
            .unwrap();
        body(c, tid);
        let (t, p) = c.call(7, tid, b"T\0");
        if t != 16 {
            return (t0.elapsed(), eagain);
        }
        assert_eq!(p, b"EAGAIN\0", "commit failed");
        eagain += 1;
    }
}

/// One client's run on its own socket connection: latencies and EAGAINs.
fn client(args: &Args, i: usize) -> (Vec<Duration>, u64) {
    let mut c = Client::connect(&args.socket).expect("connect");
    run(args, &mut c, &format!("/bench/c{i}"))
}

/// The workload on one connection whose own subtree is `own`.
fn run<C: Call>(args: &Args, c: &mut C, own: &str) -> (Vec<Duration>, u64) {
    if args.workload == "7.1" {
        c.ok(11, 0, &wr(&format!("{own}/state"), "0"));
    }
    let (mut lat, mut eagain) = (Vec::with_capacity(args.txs), 0);
    for n in 0..args.txs {
        let v = n.to_string();
        let (d, e) = match args.workload.as_str() {
            "7.3" => transaction(c, &mut |c, tid| {
                c.ok(11, tid, &wr(&format!("{own}/foo"), &v));
                std::thread::sleep(Duration::from_millis(args.sleep_ms));
                c.ok(11, tid, &wr(&format!("{own}/bar"), &v));
            }),
            _ => transaction(c, &mut |c, tid| {
                c.ok(2, tid, &p0("/bench/shared"));
                c.ok(11, tid, &wr(&format!("{own}/state"), &v));
            }),
        };
        lat.push(d);
        eagain += e;
    }
    (lat, eagain)
}

/// Microseconds.
fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn parse_args() -> Args {
    let mut a = Args {
        socket: std::env::var("XENSTORED_PATH").unwrap_or("/var/run/xenstored/socket".into()),
        workload: "7.1".into(),
        clients: 128,
        txs: 500,
        sleep_ms: 10,
        label: "daemon".into(),
        transport: "socket".into(),
        xen_dir: "/tmp/xs-ring-xen".into(),
        daemon_pid: None,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let v = pair.get(1).cloned().unwrap_or_default();
        match pair[0].as_str() {
            "--socket" => a.socket = v,
            "--workload" => a.workload = v,
            "--clients" => a.clients = v.parse().expect("--clients N"),
            "--txs" => a.txs = v.parse().expect("--txs N"),
            "--sleep-ms" => a.sleep_ms = v.parse().expect("--sleep-ms N"),
            "--label" => a.label = v,
            "--transport" => a.transport = v,
            "--xen-dir" => a.xen_dir = v,
            "--daemon-pid" => a.daemon_pid = Some(v.parse().expect("--daemon-pid PID")),
            o => panic!("unknown option {o}; see src/main.rs"),
        }
    }
    a
}

fn main() {
    let args = parse_args();
    if args.transport != "socket" {
        return inproc::main(&args);
    }
    let mut setup = Client::connect(&args.socket).expect("connect");
    setup.ok(13, 0, &p0("/bench"));
    setup.ok(11, 0, &wr("/bench/shared", "s"));
    let cpu0 = args.daemon_pid.map(inproc::process_cpu_ms);
    let start = Instant::now();
    let handles: Vec<_> = (0..args.clients)
        .map(|i| {
            let a = args.clone();
            std::thread::spawn(move || client(&a, i))
        })
        .collect();
    let results: Vec<(Vec<Duration>, u64)> =
        handles.into_iter().map(|h| h.join().unwrap()).collect();
    let wall = start.elapsed();
    report(&args, &results, wall);
    if let (Some(pid), Some(cpu0)) = (args.daemon_pid, cpu0) {
        let txs: usize = results.iter().map(|(l, _)| l.len()).sum();
        let cpu = inproc::process_cpu_ms(pid) - cpu0;
        println!(
            "{:<28} cpu_ms/ktx daemon={:.1}",
            args.label,
            cpu * 1000.0 / txs as f64
        );
    }
}

/// Print tx/s, EAGAINs and latency min/avg/p99/max (all transactions) and the spread of the
/// per-client averages and maxima.
pub(crate) fn report(args: &Args, results: &[(Vec<Duration>, u64)], wall: Duration) {
    let mut all: Vec<Duration> = results
        .iter()
        .flat_map(|(l, _)| l.iter().copied())
        .collect();
    all.sort();
    let n = all.len();
    let eagain: u64 = results.iter().map(|(_, e)| e).sum();
    let avg = all.iter().sum::<Duration>() / n as u32;
    let p99 = all[(n * 99 / 100).min(n - 1)];
    let client_avg: Vec<f64> = results
        .iter()
        .map(|(l, _)| us(l.iter().sum::<Duration>() / l.len() as u32))
        .collect();
    let worst_avg = client_avg.iter().cloned().fold(0.0, f64::max);
    let best_avg = client_avg.iter().cloned().fold(f64::MAX, f64::min);
    println!(
        "{:<28} workload={:<10} clients={} txs={} tx/s={:.0} eagain={} lat_us min={:.0} avg={:.0} p99={:.0} max={:.0} client_avg_us {:.0}..{:.0}",
        args.label,
        args.workload,
        args.clients,
        args.txs,
        n as f64 / wall.as_secs_f64(),
        eagain,
        us(all[0]),
        us(avg),
        us(p99),
        us(all[n - 1]),
        best_avg,
        worst_avg
    );
}
