//! The command line and configuration loading, in redis-server's conventions:
//! `kayvee-server [/path/to/kayvee.conf] [--name value...]... [-]`.
//!
//! Every `--name value...` option is a config-file directive (`--save 900 1 300 10` is the line
//! `save 900 1 300 10`), and the names are the config table's, so a generic argument parser
//! (clap) does not fit: it would need to know every directive and its arity, which the engine's
//! config table owns. The arguments are split by hand here and the table validates them. As in
//! Redis the file is applied first, then standard input (`-`), then the options.

use kayvee_engine::config::syntax::split_args;
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
    /// The config line it came from (`port "abc"`), for errors.
    pub line: String,
}

/// A command line or configuration the server cannot start with.
#[derive(Debug, thiserror::Error)]
pub enum ConfigLoadError {
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
    #[error("\n*** FATAL CONFIG FILE ERROR (Kayvee {version}) ***\nReading the command line options\n>>> '{line}'\n{message}")]
    Option {
        /// The server version.
        version: &'static str,
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
    let (text, stdin) = options_text(rest);
    startup.stdin = stdin;
    for line in text.split('\n') {
        let line = line.trim_matches([' ', '\t', '\r']);
        if line.is_empty() {
            continue;
        }
        let words = split_args(line.as_bytes()).map_err(|_| ConfigLoadError::Option {
            version: VERSION,
            line: line.into(),
            message: "Unbalanced quotes in configuration line".into(),
        })?;
        let mut words = words
            .into_iter()
            .map(|w| String::from_utf8_lossy(&w).into_owned());
        let Some(name) = words.next() else {
            continue;
        };
        startup.options.push(Directive {
            name: name.to_ascii_lowercase(),
            values: words.collect(),
            line: line.into(),
        });
    }
    Ok(Command::Run(startup))
}

/// The options as the config text Redis 7.0's `main` builds from them: `--name` starts a line;
/// the arguments after it are its values, quoted (so a value may start with `--` when it
/// follows a bare name: `--port --loglevel verbose` is `port "--loglevel" "verbose"`); a name
/// given with its value in one argument (`"--maxmemory 700mb"`) is taken as written; a bare
/// `--save` followed by another option or last is `save ""`. Also whether a `-` asked for
/// standard input (first or last).
fn options_text(args: &[String]) -> (String, bool) {
    let mut text = String::new();
    let mut stdin = false;
    let mut had_value = true;
    for (j, arg) in args.iter().enumerate() {
        let last = j + 1 == args.len();
        if arg == "-" && (j == 0 || last) {
            stdin = true;
        } else if had_value && arg.starts_with("--") {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&arg[2..]);
            text.push(' ');
            let alone = split_args(arg.as_bytes()).map_or(1, |w| w.len()) == 1;
            had_value = !alone;
            let next_is_option = args.get(j + 1).is_some_and(|a| a.starts_with("--"));
            if alone && arg.eq_ignore_ascii_case("--save") && (next_is_option || last) {
                text.push_str("\"\"");
                had_value = !last;
            }
        } else {
            text.push_str(&quoted(arg));
            text.push(' ');
            had_value = true;
        }
    }
    (text, stdin)
}

/// `arg` quoted as Redis's `sdscatrepr` does, so that splitting the line gives it back.
fn quoted(arg: &str) -> String {
    let mut out = String::from("\"");
    for &b in arg.as_bytes() {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            b if b.is_ascii_graphic() || b == b' ' => out.push(b as char),
            b => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('"');
    out
}

/// Redis 7's default save points. The engine's own default is none (a host without storage,
/// like the unikernel, must not schedule saves); this server has a file system, so it starts
/// with Redis's, and the first `save` directive replaces them.
pub const DEFAULT_SAVE: &str = "3600 1 300 100 60 10000";

/// Builds the configuration: defaults, then the file, then stdin, then the options.
pub fn load(startup: &Startup) -> Result<Config, ConfigLoadError> {
    let mut config = Config {
        save: DEFAULT_SAVE.into(),
        save_default: DEFAULT_SAVE.into(),
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
            line: d.line.clone(),
            message: e.to_string(),
        })
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
        assert_eq!(st.options.len(), 2);
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

    /// Redis 7.0's reading of option values (unit/introspection's command-line tests).
    #[test]
    fn options_become_config_lines_as_redis_builds_them() {
        let lines = |a: &[&str]| {
            run(a)
                .options
                .into_iter()
                .map(|d| d.line)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            lines(&["--port", "--loglevel", "verbose"]),
            ["port \"--loglevel\" \"verbose\""]
        );
        assert_eq!(
            lines(&["--port", "6379", "6380"]),
            ["port \"6379\" \"6380\""]
        );
        assert_eq!(
            lines(&["--port", "--bla", "--loglevel", "verbose"]),
            ["port \"--bla\"", "loglevel \"verbose\""]
        );
        assert_eq!(
            lines(&["--maxmemory 700mb", "--maxmemory-policy 'volatile-lru'"]),
            ["maxmemory 700mb", "maxmemory-policy 'volatile-lru'"]
        );
        assert_eq!(
            lines(&["k.conf", "loglevel", "verbose"]),
            ["\"loglevel\" \"verbose\""]
        );
        assert_eq!(
            lines(&["--save", "--loglevel", "verbose"]),
            ["save \"\"", "loglevel \"verbose\""]
        );
        assert_eq!(
            lines(&["--loglevel", "verbose", "--save"]),
            ["loglevel \"verbose\"", "save \"\""]
        );
        let st = run(&[
            "--proc-title-template",
            "--save",
            "--save",
            "",
            "--loglevel",
            "verbose",
        ]);
        assert_eq!(st.options[0].values, ["--save"]);
        assert_eq!(st.options[1].values, [""]);
        let e = load(&run(&["-x"])).unwrap_err().to_string();
        assert!(e.contains(">>> '\"-x\"'"), "{e}");
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
