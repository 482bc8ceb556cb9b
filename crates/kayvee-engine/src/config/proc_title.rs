//! `proc-title-template`: the process title the shell shows (Linux: `ps`, `/proc/PID/cmdline`),
//! as Redis 7.0 builds it: text with `{variable}`s, `{{` and `}}` for literal braces, spaces
//! trimmed at both ends.

use super::Config;
use alloc::string::String;

/// Redis's default template.
pub const DEFAULT: &str = "{title} {listen-addr} {server-mode}";

/// Redis's reason for a template it refuses.
const INVALID: &str = "template format is invalid or contains unknown variables";

/// The values a template's variables stand for.
pub struct Vars<'a> {
    /// How the server was started (its `argv[0]`).
    pub title: &'a str,
    /// `host:port` (the first `bind` address, or `*`), else `unixsocket:PATH`.
    pub listen_addr: String,
    /// `[cluster]`, `[sentinel]` or nothing.
    pub server_mode: &'a str,
    /// The TCP port (0: none).
    pub port: u64,
    /// The TLS port (Kayvee has no TLS: 0).
    pub tls_port: u64,
    /// The Unix socket's path, if any.
    pub unixsocket: &'a str,
    /// The config file's absolute path, if any.
    pub config_file: &'a str,
}

impl<'a> Vars<'a> {
    /// The variables of a server with configuration `c`, started as `title`.
    pub fn of(c: &'a Config, title: &'a str) -> Self {
        let listen_addr = if c.port != 0 {
            let host = c.bind.first().map_or("*", String::as_str);
            alloc::format!("{host}:{}", c.port)
        } else {
            alloc::format!("unixsocket:{}", c.unixsocket)
        };
        Vars {
            title,
            listen_addr,
            server_mode: "",
            port: c.port.into(),
            tls_port: 0,
            unixsocket: &c.unixsocket,
            config_file: c.config_file.as_deref().unwrap_or(""),
        }
    }
}

/// The title `template` gives with `vars`; None for an unknown variable or unbalanced braces.
pub fn expand(template: &[u8], vars: &Vars<'_>) -> Option<String> {
    let text = core::str::from_utf8(template).ok()?;
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if rest.as_bytes()[i] == b'}' {
            // Only `}}`, a literal brace, may stand outside a variable.
            after.strip_prefix('}')?;
            out.push('}');
            rest = &after[1..];
            continue;
        }
        if let Some(more) = after.strip_prefix('{') {
            out.push('{');
            rest = more;
            continue;
        }
        let end = after.find('}')?;
        let name = &after[..end];
        match name {
            "title" => out.push_str(vars.title),
            "listen-addr" => out.push_str(&vars.listen_addr),
            "server-mode" => out.push_str(vars.server_mode),
            "port" => out.push_str(&alloc::format!("{}", vars.port)),
            "tls-port" => out.push_str(&alloc::format!("{}", vars.tls_port)),
            "unixsocket" => out.push_str(vars.unixsocket),
            "config-file" => out.push_str(vars.config_file),
            _ => return None,
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Some(String::from(out.trim_matches(' ')))
}

/// Whether Redis accepts `template`: known variables, balanced braces, and something left
/// with an empty title (the other variables as a server on a TCP port has them).
pub fn validate(template: &[u8]) -> Result<(), &'static str> {
    let vars = Vars {
        title: "",
        listen_addr: String::from("*:0"),
        server_mode: "",
        port: 0,
        tls_port: 0,
        unixsocket: "",
        config_file: "",
    };
    match expand(template, &vars) {
        Some(title) if !title.is_empty() => Ok(()),
        _ => Err(INVALID),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> Vars<'static> {
        Vars {
            title: "/usr/bin/kayvee-server",
            listen_addr: String::from("127.0.0.1:6379"),
            server_mode: "",
            port: 6379,
            tls_port: 0,
            unixsocket: "",
            config_file: "/etc/kayvee.conf",
        }
    }

    #[test]
    fn templates_expand_and_trim_as_redis() {
        let v = vars();
        assert_eq!(
            expand(DEFAULT.as_bytes(), &v).unwrap(),
            "/usr/bin/kayvee-server 127.0.0.1:6379"
        );
        assert_eq!(
            expand(
                b"TEST {title} {port} {tls-port} {unixsocket} {config-file}",
                &v
            )
            .unwrap(),
            "TEST /usr/bin/kayvee-server 6379 0  /etc/kayvee.conf"
        );
        assert_eq!(expand(b"{{x}} {port}", &v).unwrap(), "{x} 6379");
        for bad in [&b"{invalid-var}"[..], b"{title", b"title}", b"{}"] {
            assert_eq!(expand(bad, &v), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn validation_refuses_what_redis_refuses() {
        assert!(validate(b"abc").is_ok());
        assert!(validate(DEFAULT.as_bytes()).is_ok());
        assert!(validate(b"TEST {title} {listen-addr} {port} {config-file}").is_ok());
        for bad in [
            &b""[..],
            b"{title} {server-mode}",
            b"{invalid-var}",
            b"{title",
            b"   ",
        ] {
            assert_eq!(validate(bad), Err(INVALID));
        }
    }
}
