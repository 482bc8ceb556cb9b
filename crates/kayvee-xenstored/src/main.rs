//! `kayvee-xenstored`: parse xenstored's options, daemonise unless `--no-fork`, serve.

use std::process::{Command, ExitCode, Stdio};

use anyhow::Context;
use kayvee_xenstored::options::{parse, socket_path, USAGE};
use kayvee_xenstored::server::Server;

/// Fork without `unsafe`: re-run ourselves with `--no-fork` in a new session and wait until
/// the socket accepts connections, so callers can use it as soon as we exit (as xenstored).
fn daemonize(args: &[String], socket: &std::path::Path) -> anyhow::Result<()> {
    let exe = std::env::current_exe()?;
    let mut child = Command::new("setsid")
        .arg(exe)
        .arg("--no-fork")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .context("starting the daemon")?;
    for _ in 0..100 {
        if std::os::unix::net::UnixStream::connect(socket).is_ok() {
            return Ok(());
        }
        if let Some(status) = child.try_wait()? {
            anyhow::bail!("daemon exited early: {status}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    anyhow::bail!("daemon did not open {}", socket.display())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let socket = socket_path(
        std::env::var("XENSTORED_PATH").ok(),
        std::env::var("XENSTORED_RUNDIR").ok(),
    );
    let opts = match parse(&args, socket) {
        Ok(Some(o)) => o,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("kayvee-xenstored: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let result = match opts.no_fork {
        false => daemonize(&args, &opts.socket),
        true => serve(&opts),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kayvee-xenstored: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The server: with `--test-xen`, guests of the test Xen; with the `xen` feature and Xen's
/// libraries usable, guests' rings too; else the Unix socket alone.
fn server(opts: &kayvee_xenstored::options::Options) -> std::io::Result<Server> {
    if let Some(dir) = &opts.test_xen {
        let host = kayvee_xenstored::xen::testxen::DirXen::new(dir).host()?;
        return Server::with_xen(opts, Box::new(host));
    }
    #[cfg(feature = "xen")]
    match kayvee_xenstored::xen::libxen::LibXen::open() {
        Ok(xen) => return Server::with_xen(opts, Box::new(xen)),
        Err(e) => eprintln!("kayvee-xenstored: no Xen ({e}); serving the Unix socket only"),
    }
    Server::new(opts)
}

/// Bind, write the pid file, serve.
fn serve(opts: &kayvee_xenstored::options::Options) -> anyhow::Result<()> {
    let mut server = server(opts).with_context(|| format!("binding {}", opts.socket.display()))?;
    if let Some(p) = &opts.pid_file {
        std::fs::write(p, format!("{}\n", std::process::id())).context("writing the pid file")?;
    }
    server.run().context("event loop")
}
