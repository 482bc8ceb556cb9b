//! `kayvee-server`: the Linux shell around the Kayvee engine. Command line and startup only:
//! configuration (`config`), logging (`log`), the descriptor limit and host facts (`host`),
//! then the event loop (`server`) until SHUTDOWN or SIGTERM/SIGINT.
//!
//! SIGPIPE needs no handler: Rust's runtime sets it to ignored before `main`, so a write to a
//! closed socket returns EPIPE instead of killing the server.

mod acl;
mod alloc;
mod aof;
mod clock;
mod config;
mod crash;
mod durability;
mod host;
mod log;
mod migrate;
mod net;
mod oom;
mod persist;
mod proctitle;
mod requests;
mod savechild;
mod server;
mod signals;

use anyhow::Context;
use kayvee_engine::{Config, Engine, Now};
use std::process::ExitCode;
use tracing::{info, warn};

/// Every allocation is counted, for INFO's `used_memory`.
#[global_allocator]
static GLOBAL: alloc::Counting = alloc::Counting;

fn main() -> ExitCode {
    // Before any thread: the title's memory is the arguments' and the environment's.
    let mut title = proctitle::ProcTitle::take_over();
    let args: Vec<String> = std::env::args().skip(1).collect();
    // A background save's writer, started by a server (see `savechild`).
    if args.first().map(String::as_str) == Some(savechild::MODE_ARG) {
        return savechild::run(&args[1..], &mut title);
    }
    let startup = match config::parse_args(&args) {
        Ok(config::Command::Version) => {
            println!("{}", config::version_line());
            return ExitCode::SUCCESS;
        }
        Ok(config::Command::Help) => {
            eprint!("{}", config::usage());
            return ExitCode::SUCCESS;
        }
        Ok(config::Command::Run(startup)) => startup,
        Err(e) => return fatal(&e),
    };
    let config = match config::load(&startup) {
        Ok(c) => c,
        Err(e) => return fatal(&e),
    };
    // `KAYVEE_CHECK_CONFIG=1`: only check the command line and the config file (Redis's test
    // suite wrapper asks first, so a refused directive fails the test at once).
    if std::env::var_os("KAYVEE_CHECK_CONFIG").is_some() {
        return ExitCode::SUCCESS;
    }
    match run(config, title) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("{e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Prints a startup error the way redis-server does (on stderr) and gives exit code 1.
fn fatal(e: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("{e}");
    ExitCode::FAILURE
}

/// Starts logging, sizes the descriptor limit, binds, and runs the loop to the end.
fn run(mut config: Config, title: proctitle::ProcTitle) -> anyhow::Result<()> {
    let log_fd = log::init(&config.loglevel, &config.logfile)?;
    crash::install(log_fd);
    warn!("oO0OoO0OoO0Oo Kayvee is starting oO0OoO0OoO0Oo");
    warn!(
        "Kayvee version={}, bits={}, pid={}, just started",
        config::VERSION,
        usize::BITS,
        std::process::id()
    );
    warn!("Configuration loaded");
    adjust_maxclients(&mut config);
    let pidfile = config.pidfile.clone();
    let port = config.port;
    let now = Now {
        unix_us: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_micros() as u64,
    };
    let mut engine = Engine::new(config, host::random_seed(), now);
    engine.core.host = host::initial(port);
    engine.set_codec(&kayvee_rdb::CODEC);
    engine.set_script_log(log::script_line);
    // The memory limit and INFO read the counting allocator at command time.
    engine.set_memory_probe(|| alloc::allocated_bytes() as u64);
    acl::load_at_startup(&mut engine)?;
    let show_logo = engine.core.config.always_show_logo
        // SAFETY: isatty only reads the descriptor's state.
        || unsafe { libc::isatty(libc::STDOUT_FILENO) } == 1;
    // Listening starts before the data loads, as in Redis: a client that connects meanwhile
    // waits in the listen backlog (AOF) or is answered LOADING (RDB) instead of being refused.
    let mut server = server::Server::bind(engine).context("Failed listening")?;
    // As Redis, the logo (or the one line standing for it) comes once the port is bound, so
    // whoever waits for it (Redis's test suite waits for its ` PID: ` line) may connect.
    if show_logo {
        print_logo(port);
    } else {
        info!("Running mode=standalone, port={port}.");
    }
    // With the AOF on, the data comes from it (loaded here, before the loop accepts anyone)
    // and the RDB file is not read, as in Redis.
    let (aof, load) = if server.engine_mut().core.config.appendonly {
        let (aof, _) = aof::Aof::open(server.engine_mut(), now, true)?;
        (Some(aof), None)
    } else {
        (None, persist::StartupLoad::start(server.engine_mut(), now)?)
    };
    server.files.loading = load;
    server.set_title(title);
    server.files.aof = aof;
    if !pidfile.is_empty() {
        write_pidfile(&pidfile);
    }
    warn!("Server initialized");
    for l in server.listening() {
        info!("Ready to accept connections {l}");
    }
    let result = server.run();
    if !pidfile.is_empty() {
        let _ = std::fs::remove_file(&pidfile);
    }
    result?;
    warn!("Kayvee is now ready to exit, bye bye...");
    Ok(())
}

/// Raises the descriptor limit for `maxclients`, or lowers `maxclients` to what the limit
/// allows, with Redis's warnings.
fn adjust_maxclients(config: &mut Config) {
    let wanted = config.maxclients;
    if let host::FdLimit::Reduced {
        limit,
        maxclients,
        error,
    } = host::raise_fd_limit(wanted)
    {
        let needed = wanted + host::RESERVED_FDS;
        warn!("You requested maxclients of {wanted} requiring at least {needed} max file descriptors.");
        if let Some(err) = error {
            warn!("Server can't set maximum open files to {needed} because of OS error: {err}.");
        }
        warn!(
            "Current maximum open files is {limit}. maxclients has been reduced to {maxclients} \
             to compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'."
        );
        config.maxclients = maxclients;
    }
}

/// The start-up banner (`always-show-logo`, or standard output on a terminal), with the lines
/// tools parse out of Redis's: the version, the mode, the port and the pid.
fn print_logo(port: u16) {
    use std::io::Write;
    let banner = format!(
        "\n\
         \x20 _  __\n\
         \x20| |/ /__ _ _  ___ _____ ___     Kayvee {version} {bits} bit\n\
         \x20| ' </ _` | || \\ V / -_) -_)\n\
         \x20|_|\\_\\__,_|\\_, |\\_/\\___\\___|    Running in standalone mode\n\
         \x20          |__/                 Port: {port}\n\
         \x20                               PID: {pid}\n\n",
        version = config::VERSION,
        bits = usize::BITS,
        pid = std::process::id(),
    );
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(banner.as_bytes());
    let _ = out.flush();
}

/// Writes the process id to `path` (a failure is logged, not fatal, as in Redis).
fn write_pidfile(path: &str) {
    if let Err(e) = std::fs::write(path, format!("{}\n", std::process::id())) {
        warn!("Failed to write PID file '{path}': {e}");
    }
}
