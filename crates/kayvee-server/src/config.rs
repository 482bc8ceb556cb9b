//! The command line and configuration loading, in redis-server's conventions:
//! `kayvee-server [/path/to/kayvee.conf] [--name value...]... [-]`.
//!
//! Every `--name value...` option is a config-file directive (`--save 900 1 300 10` is the line
//! `save 900 1 300 10`), and the names are the config table's, so a generic argument parser
//! (clap) does not fit: it would need to know every directive and its arity, which the engine's
//! config table owns. The arguments are split by hand here and the table validates them. As in
//! Redis the file is applied first, then standard input (`-`), then the options.

use kayvee_engine::Config;
use std::io::Read;

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    /// `-v` / `--version`.
    Version,
    /// `-h` / `--help`.
    Help,
    /// Run the server.
    Run(Startup),
}

/// Where the configuration comes from.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Startup {
    /// The config file (first argument when it does not start with `-`).
    pub file: Option<String>,
    /// `-`: also read directives from standard input.
    pub stdin: bool,
    /// `--name value...` options, in order.
    pub options: Vec<Directive>,
}

/// One `--name value...` option.
#[derive(Debug, PartialEq, Eq)]
pub struct Directive {
    /// The directive name, without `--`.
    pub name: String,
    /// Its values.
    pub values: Vec<String>,
}

/// A command line or configuration the server cannot start with.
#[derive(Debug, thiserror::Error)]
pub enum ConfigLoadError {
    /// An argument that is neither an option nor a value of one.
    #[error("Invalid argument '{0}': options are written --name value")]
    StrayArgument(String),
    /// The config file could not be read.
    #[error("Fatal error, can't open config file '{path}': {source}")]
    OpenFile {
        /// The path given.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Standard input could not be read.
    #[error("Fatal error, can't read the configuration from standard input: {0}")]
    Stdin(std::io::Error),
    /// The config table rejected a file line.
    #[error("\n*** FATAL CONFIG FILE ERROR (Kayvee {version}) ***\n{message}")]
    File {
        /// The server version.
        version: &'static str,
        /// The table's message (it names the line).
        message: String,
    },
    /// The config table rejected a command-line option.
    #[error("\n*** FATAL CONFIG FILE ERROR (Kayvee {version}) ***\nReading the command line option --{name}\n>>> '{line}'\n{message}")]
    Option {
        /// The server version.
        version: &'static str,
        /// The option name.
        name: String,
        /// The option as a config line (`port "abc"`).
        line: String,
        /// The table's message.
        message: String,
    },
}

/// The server's version string.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Splits the arguments (program name excluded) the way redis-server does.
pub fn parse_args(args: &[String]) -> Result<Command, ConfigLoadError> {
    match args.first().map(String::as_str) {
        Some("-v" | "--version") => return Ok(Command::Version),
        Some("-h" | "--help") => return Ok(Command::Help),
        _ => {}
    }
    let mut startup = Startup::default();
    let mut rest = args;
    if let Some(first) = args.first() {
        if !first.starts_with('-') {
            startup.file = Some(first.clone());
            rest = &args[1..];
        }
    }
    for arg in rest {
        if let Some(name) = arg.strip_prefix("--") {
            startup.options.push(Directive {
                name: name.to_ascii_lowercase(),
                values: Vec::new(),
            });
        } else if arg == "-" {
            startup.stdin = true;
        } else if let Some(d) = startup.options.last_mut() {
            d.values.push(arg.clone());
        } else {
            return Err(ConfigLoadError::StrayArgument(arg.clone()));
        }
    }
    // Redis reads a bare `--save` as `save ""` (no snapshots).
    for d in &mut startup.options {
        if d.name == "save" && d.values.is_empty() {
            d.values.push(String::new());
        }
    }
    Ok(Command::Run(startup))
}

/// Redis 7's default save points. The engine's own default is none (a host without storage,
/// like the unikernel, must not schedule saves); this server has a file system, so it starts
/// with Redis's, and the first `save` directive replaces them.
pub const DEFAULT_SAVE: &str = "3600 1 300 100 60 10000";

/// Builds the configuration: defaults, then the file, then stdin, then the options.
pub fn load(startup: &Startup) -> Result<Config, ConfigLoadError> {
    let mut config = Config {
        save: DEFAULT_SAVE.into(),
        ..Config::default()
    };
    if let Some(path) = &startup.file {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigLoadError::OpenFile {
            path: path.clone(),
            source,
        })?;
        apply_text(&mut config, &text)?;
        config.config_file = Some(absolute(path));
    }
    if startup.stdin {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(ConfigLoadError::Stdin)?;
        // CONFIG REWRITE rewrites the file's text, not what came on stdin.
        let file_text = config.config_file_text.take();
        apply_text(&mut config, &text)?;
        config.config_file_text = file_text;
    }
    for d in &startup.options {
        apply_option(&mut config, d)?;
    }
    Ok(config)
}

/// Applies config-file text through the table.
fn apply_text(config: &mut Config, text: &str) -> Result<(), ConfigLoadError> {
    config.apply_file(text).map_err(|e| ConfigLoadError::File {
        version: VERSION,
        message: e.to_string(),
    })
}

/// Applies one command-line option through the table.
fn apply_option(config: &mut Config, d: &Directive) -> Result<(), ConfigLoadError> {
    let values: Vec<&str> = d.values.iter().map(String::as_str).collect();
    config
        .apply(&d.name, &values)
        .map_err(|e| ConfigLoadError::Option {
            version: VERSION,
            name: d.name.clone(),
            line: as_config_line(d),
            message: e.to_string(),
        })
}

/// `port "abc"`: an option shown as the config line it stands for, as Redis's error does.
fn as_config_line(d: &Directive) -> String {
    let mut line = d.name.clone();
    for v in &d.values {
        line.push_str(&format!(" \"{v}\""));
    }
    line
}

/// The file's absolute path (CONFIG REWRITE must find it after a `chdir`).
fn absolute(path: &str) -> String {
    std::path::absolute(path)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| path.into())
}

/// The `--help` text.
pub fn usage() -> String {
    let p = "kayvee-server";
    format!(
        "Usage: {p} [/path/to/kayvee.conf] [options] [-]\n\
         \x20      {p} - (read config from stdin)\n\
         \x20      {p} -v or --version\n\
         \x20      {p} -h or --help\n\n\
         Examples:\n\
         \x20      {p} (run the server with default conf)\n\
         \x20      echo 'maxmemory 128mb' | {p} -\n\
         \x20      {p} /etc/kayvee/6379.conf\n\
         \x20      {p} --port 7777\n\
         \x20      {p} /etc/mykayvee.conf --loglevel verbose -\n\
         \x20      {p} /etc/mykayvee.conf --loglevel verbose\n\n\
         Options are config-file directives: --port 6379 --bind 127.0.0.1 ::1 --unixsocket PATH\n\
         --requirepass X --databases 16 --maxclients 10000 --timeout 0 --tcp-keepalive 300\n\
         --loglevel notice --logfile \"\" ...\n"
    )
}

/// The `--version` line, shaped like redis-server's.
pub fn version_line() -> String {
    format!(
        "Kayvee server v={VERSION} sha=00000000:0 malloc=libc bits={}",
        usize::BITS
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|a| a.to_string()).collect()
    }

    fn run(s: &[&str]) -> Startup {
        match parse_args(&args(s)).unwrap() {
            Command::Run(st) => st,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn version_and_help_flags() {
        assert_eq!(parse_args(&args(&["-v"])).unwrap(), Command::Version);
        assert_eq!(parse_args(&args(&["--version"])).unwrap(), Command::Version);
        assert_eq!(parse_args(&args(&["-h"])).unwrap(), Command::Help);
        assert_eq!(parse_args(&args(&["--help"])).unwrap(), Command::Help);
    }

    #[test]
    fn file_then_options_with_several_values() {
        let st = run(&[
            "k.conf",
            "--port",
            "7000",
            "--bind",
            "127.0.0.1",
            "::1",
            "-",
        ]);
        assert_eq!(st.file.as_deref(), Some("k.conf"));
        assert!(st.stdin);
        assert_eq!(st.options.len(), 2);
        assert_eq!(st.options[0].name, "port");
        assert_eq!(st.options[0].values, ["7000"]);
        assert_eq!(st.options[1].values, ["127.0.0.1", "::1"]);
    }

    #[test]
    fn negative_numbers_are_values_and_names_fold_case() {
        let st = run(&["--SlowLog-Log-Slower-Than", "-1"]);
        assert_eq!(st.file, None);
        assert_eq!(st.options[0].name, "slowlog-log-slower-than");
        assert_eq!(st.options[0].values, ["-1"]);
    }

    #[test]
    fn bare_save_means_no_snapshots_and_empty_values_stay() {
        let st = run(&["--save", "--logfile", ""]);
        assert_eq!(st.options[0].values, [""]);
        assert_eq!(st.options[1].values, [""]);
    }

    #[test]
    fn save_points_default_to_redis_and_the_first_save_line_replaces_them() {
        let points = |a: &[&str]| load(&run(a)).unwrap().save_points();
        assert_eq!(points(&[]), [(3600, 1), (300, 100), (60, 10000)]);
        assert_eq!(points(&["--save", ""]), []);
        assert_eq!(points(&["--save", "10", "2"]), [(10, 2)]);
        assert_eq!(points(&["--save", "", "--save", "10", "2"]), [(10, 2)]);
    }

    #[test]
    fn option_without_values_is_kept_for_the_table_to_judge() {
        let st = run(&["--port"]);
        assert!(st.options[0].values.is_empty());
    }

    #[test]
    fn stray_value_is_an_error() {
        let e = parse_args(&args(&["-x"])).unwrap_err();
        assert!(matches!(e, ConfigLoadError::StrayArgument(ref a) if a == "-x"));
    }

    #[test]
    fn option_error_shows_the_line() {
        let d = Directive {
            name: "port".into(),
            values: vec!["abc".into()],
        };
        assert_eq!(as_config_line(&d), "port \"abc\"");
    }

    #[test]
    fn missing_file_is_reported_with_its_path() {
        let st = run(&["/nonexistent/kayvee.conf"]);
        let e = load(&st).unwrap_err().to_string();
        assert!(
            e.contains("can't open config file '/nonexistent/kayvee.conf'"),
            "{e}"
        );
    }
}
