//! Connection commands: PING, ECHO, QUIT, RESET, HELLO, AUTH, with Redis 7.0.15's replies and
//! error texts (checked against the real server). SELECT is not part of this module.
//!
//! Authentication checks the ACL users (see [`crate::acl`]); `requirepass` is the `default`
//! user's password. A failed attempt is logged in `ACL LOG`.

use crate::argv::Argv;
use crate::client::ReplyMode;
use crate::cmd::spec::CommandSpec;
use crate::command::{acl, flags};
use crate::error::{CmdResult, Error};
use crate::reply::{Protocol, ReplySink};
use crate::{Core, Cx, Outcome};
use kayvee_pds::SmallBytes;

/// Flags Redis gives the commands a client needs before and around authentication.
const HANDSHAKE_FLAGS: u32 = flags::NOSCRIPT
    | flags::LOADING
    | flags::STALE
    | flags::FAST
    | flags::NO_AUTH
    | flags::ALLOW_BUSY;

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "ping",
        arity: -1,
        flags: flags::FAST,
        acl: acl::FAST | acl::CONNECTION,
        summary: "Ping the server",
        group: "connection",
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        handler: ping,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "echo",
        arity: 2,
        flags: flags::LOADING | flags::STALE | flags::FAST,
        acl: acl::FAST | acl::CONNECTION,
        summary: "Echo the given string",
        group: "connection",
        handler: echo,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "quit",
        arity: -1,
        flags: HANDSHAKE_FLAGS,
        acl: acl::FAST | acl::CONNECTION,
        summary: "Close the connection",
        group: "connection",
        handler: quit,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "reset",
        arity: 1,
        flags: HANDSHAKE_FLAGS,
        acl: acl::FAST | acl::CONNECTION,
        summary: "Reset the connection",
        since: "6.2.0",
        group: "connection",
        handler: reset,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hello",
        arity: -1,
        flags: HANDSHAKE_FLAGS,
        acl: acl::FAST | acl::CONNECTION,
        summary: "Handshake with Redis",
        since: "6.0.0",
        group: "connection",
        handler: hello,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "auth",
        arity: -2,
        flags: HANDSHAKE_FLAGS,
        acl: acl::FAST | acl::CONNECTION,
        summary: "Authenticate to the server",
        group: "connection",
        complexity: "O(N) where N is the number of passwords defined for the user",
        handler: auth,
        ..CommandSpec::DEFAULT
    },
];

/// The version HELLO and INFO report: the Redis release whose behaviour Kayvee reproduces.
pub const REDIS_VERSION: &str = "7.0.15";

/// `WRONGPASS`, for AUTH and HELLO AUTH.
const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// PING [message]. A RESP2 client in subscribed mode gets `["pong", message or ""]`.
fn ping(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if args.len() > 2 {
        return Err(Error::WrongArity("ping".into()));
    }
    if out.protocol() == Protocol::Resp2 && cx.core.pubsub.subscribed(cx.me) {
        out.array(2);
        out.bulk(b"pong");
        out.bulk(args.try_get(1).unwrap_or_default());
        return Ok(());
    }
    match args.len() {
        1 => out.pong(),
        2 => out.bulk(args.get(1)),
        _ => return Err(Error::WrongArity("ping".into())),
    }
    Ok(())
}

/// ECHO message
fn echo(_cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    out.bulk(args.get(1));
    Ok(())
}

/// QUIT: `+OK`, then the shell closes the connection once the reply is written.
fn quit(cx: &mut Cx<'_>, _args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    out.ok();
    cx.outcome = Outcome::Close;
    Ok(())
}

/// RESET: back to a fresh connection's state (db 0, RESP2, no name, replies on, and not
/// authenticated when a password is required), then `+RESET`.
fn reset(cx: &mut Cx<'_>, _args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let need_auth = cx.core.acl.auth_required();
    crate::drain::discard(cx.core, cx.me);
    cx.core.pubsub.remove(cx.me);
    crate::drain::tracking_off(cx.core, cx.clients, cx.me);
    cx.core.monitors.remove(cx.me);
    cx.db_index = 0;
    let client = cx.client();
    client.db = 0;
    client.protocol = Protocol::Resp2;
    client.name = None;
    // A RESET whose own reply is being skipped stays unanswered (as in Redis); the mode goes
    // back to On after it either way.
    if client.reply_mode != ReplyMode::SkipThis {
        client.reply_mode = ReplyMode::On;
    }
    client.authenticated = !need_auth;
    client.user = SmallBytes::from_slice(b"default");
    out.set_protocol(Protocol::Resp2);
    out.simple("RESET");
    Ok(())
}

/// Whether `user`/`pass` are valid credentials: an enabled user with that password (or
/// `nopass`).
pub fn credentials_ok(core: &Core, user: &[u8], pass: &[u8]) -> bool {
    core.acl.authenticate(user, pass)
}

/// Checks credentials for AUTH / HELLO AUTH; a failure is logged (`reason auth`, the
/// command name as sent) and answered with `WRONGPASS`.
fn authenticate(cx: &mut Cx<'_>, command: &[u8], user: &[u8], pass: &[u8]) -> CmdResult {
    if credentials_ok(cx.core, user, pass) {
        let client = cx.client();
        client.authenticated = true;
        client.user = SmallBytes::from_slice(user);
        return Ok(());
    }
    crate::cmd::acl::log_denial(cx, "auth", command, user);
    Err(Error::msg(WRONGPASS))
}

/// AUTH [username] password
fn auth(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (user, pass) = match args.len() {
        2 => {
            let nopass = cx
                .core
                .acl
                .users
                .get(crate::acl::DEFAULT_USER)
                .is_some_and(|u| u.nopass);
            if nopass {
                return Err(Error::msg(
                    "ERR AUTH <password> called without any password configured for the \
                     default user. Are you sure your configuration is correct?",
                ));
            }
            (&b"default"[..], args.get(1))
        }
        3 => (args.get(1), args.get(2)),
        _ => return Err(Error::Syntax),
    };
    authenticate(cx, args.get(0), user, pass)?;
    out.ok();
    Ok(())
}

/// What `HELLO` asked for, once parsed.
#[derive(Default)]
struct HelloArgs<'a> {
    protocol: Option<Protocol>,
    auth: Option<(&'a [u8], &'a [u8])>,
    setname: Option<&'a [u8]>,
}

/// Parses `HELLO [protover [AUTH user pass] [SETNAME name]]` in Redis's order: the version
/// first, then the options left to right (a bad SETNAME name fails here, before AUTH).
fn parse_hello<'a>(args: &'a Argv<'_>) -> Result<HelloArgs<'a>, Error> {
    let mut h = HelloArgs::default();
    if args.len() < 2 {
        return Ok(h);
    }
    let ver = crate::util::parse_i64(args.get(1)).ok_or(Error::msg(
        "ERR Protocol version is not an integer or out of range",
    ))?;
    h.protocol = Some(match ver {
        2 => Protocol::Resp2,
        3 => Protocol::Resp3,
        _ => return Err(Error::msg("NOPROTO unsupported protocol version")),
    });
    let mut i = 2;
    while i < args.len() {
        let opt = args.get(i);
        let more = args.len() - i - 1;
        if opt.eq_ignore_ascii_case(b"AUTH") && more >= 2 {
            h.auth = Some((args.get(i + 1), args.get(i + 2)));
            i += 3;
        } else if opt.eq_ignore_ascii_case(b"SETNAME") && more >= 1 {
            let name = args.get(i + 1);
            super::client::validate_name(name)?;
            h.setname = Some(name);
            i += 2;
        } else {
            let opt = crate::util::sanitize(opt, 128);
            return Err(Error::msg(alloc::format!(
                "ERR Syntax error in HELLO option '{opt}'"
            )));
        }
    }
    Ok(h)
}

/// HELLO [protover [AUTH username password] [SETNAME clientname]]: switches protocol and
/// replies with the server's identity, as a map (RESP3) or a flat array (RESP2).
fn hello(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let h = parse_hello(args)?;
    if let Some((user, pass)) = h.auth {
        authenticate(cx, args.get(0), user, pass)?;
    }
    if !cx.client().authenticated {
        return Err(Error::msg(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the \
             HELLO AUTH <user> <pass> option can be used to authenticate the client and select \
             the RESP protocol version at the same time",
        ));
    }
    let client = cx.client();
    if let Some(name) = h.setname {
        client.name = (!name.is_empty()).then(|| SmallBytes::from_slice(name));
    }
    if let Some(p) = h.protocol {
        client.protocol = p;
        out.set_protocol(p);
    }
    let (id, proto) = (client.id, client.protocol);
    write_hello_map(out, id, proto);
    Ok(())
}

/// The 7-field HELLO reply.
fn write_hello_map(out: &mut dyn ReplySink, id: u64, proto: Protocol) {
    out.map(7);
    out.bulk_str("server");
    out.bulk_str("redis");
    out.bulk_str("version");
    out.bulk_str(REDIS_VERSION);
    out.bulk_str("proto");
    out.int(proto.number());
    out.bulk_str("id");
    out.int(id as i64);
    out.bulk_str("mode");
    out.bulk_str("standalone");
    out.bulk_str("role");
    out.bulk_str("master");
    out.bulk_str("modules");
    out.array(0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ArgvBuf, Config, ConnInfo, Engine, Now, Reply, ReplyTree, Transport};
    use alloc::vec::Vec;

    fn engine(pass: Option<&str>) -> (Engine, crate::Handle) {
        let config = Config {
            requirepass: pass.map(|p| SmallBytes::from_slice(p.as_bytes())),
            ..Config::default()
        };
        let mut e = Engine::new(config, 1, Now::from_ms(1000));
        let conn = ConnInfo {
            transport: Transport::Unix { path: "/s".into() },
            fd: 3,
        };
        let h = e.connect(conn, Now::from_ms(1000));
        (e, h)
    }

    fn run(e: &mut Engine, h: crate::Handle, args: &[&str]) -> (Vec<Reply>, Outcome) {
        let args: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        let argv = ArgvBuf::from_args(&args);
        let mut t = ReplyTree::new(e.protocol(h));
        let o = e.execute(h, &argv.argv(), Now::from_ms(2000), &mut t);
        (t.take(), o)
    }

    #[test]
    fn quit_asks_the_shell_to_close() {
        let (mut e, h) = engine(None);
        let (r, o) = run(&mut e, h, &["QUIT"]);
        assert_eq!(r, [Reply::Simple("OK".into())]);
        assert_eq!(o, Outcome::Close);
    }

    #[test]
    fn hello_3_switches_the_reply_to_a_map() {
        let (mut e, h) = engine(None);
        let (r, _) = run(&mut e, h, &["HELLO", "3"]);
        assert!(matches!(&r[0], Reply::Map(m) if m.len() == 7));
        assert_eq!(e.protocol(h), Protocol::Resp3);
        run(&mut e, h, &["RESET"]);
        assert_eq!(e.protocol(h), Protocol::Resp2);
    }

    #[test]
    fn reset_drops_auth_only_when_a_password_is_required() {
        let (mut e, h) = engine(Some("pw"));
        assert_eq!(
            run(&mut e, h, &["AUTH", "pw"]).0,
            [Reply::Simple("OK".into())]
        );
        run(&mut e, h, &["RESET"]);
        assert!(!e.clients.get(h).unwrap().authenticated);
        let (mut e, h) = engine(None);
        run(&mut e, h, &["RESET"]);
        assert!(e.clients.get(h).unwrap().authenticated);
    }

    /// A short rendering of a reply for the table below.
    fn short(r: &[Reply]) -> alloc::string::String {
        match r {
            [Reply::Simple(s)] => alloc::format!("+{s}"),
            [Reply::Error(s)] => alloc::format!("-{s}"),
            [Reply::Int(_)] => ":".into(),
            [Reply::Array(a)] => alloc::format!("*{}", a.len()),
            [Reply::Map(m)] => alloc::format!("%{}", m.len()),
            other => alloc::format!("{other:?}"),
        }
    }

    /// With `requirepass secret`, as redis-server 7.0.15 answered the same sequence.
    #[test]
    fn requirepass_sequence_matches_redis() {
        const HELLO_NOAUTH: &str = "-NOAUTH HELLO must be called with the client already \
            authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to \
            authenticate the client and select the RESP protocol version at the same time";
        let table: &[(&[&str], &str)] = &[
            (&["PING"], "-NOAUTH Authentication required."),
            (&["ECHO", "a"], "-NOAUTH Authentication required."),
            (&["HELLO"], HELLO_NOAUTH),
            (&["HELLO", "3"], HELLO_NOAUTH),
            (&["HELLO", "2"], HELLO_NOAUTH),
            (&["HELLO", "4"], "-NOPROTO unsupported protocol version"),
            (
                &["HELLO", "abc"],
                "-ERR Protocol version is not an integer or out of range",
            ),
            (
                &["HELLO", "3", "foo"],
                "-ERR Syntax error in HELLO option 'foo'",
            ),
            (
                &["AUTH", "wrong"],
                "-WRONGPASS invalid username-password pair or user is disabled.",
            ),
            (
                &["AUTH", "default", "wrong"],
                "-WRONGPASS invalid username-password pair or user is disabled.",
            ),
            (
                &["AUTH", "foo", "secret"],
                "-WRONGPASS invalid username-password pair or user is disabled.",
            ),
            (&["AUTH", "a", "b", "c"], "-ERR syntax error"),
            (
                &["HELLO", "3", "AUTH", "default", "wrong"],
                "-WRONGPASS invalid username-password pair or user is disabled.",
            ),
            (&["HELLO", "3", "AUTH", "default", "secret"], "%7"),
            (
                &["AUTH", "wrong"],
                "-WRONGPASS invalid username-password pair or user is disabled.",
            ),
            (&["PING"], "+PONG"),
            (&["AUTH", "secret"], "+OK"),
            (&["AUTH", "default", "secret"], "+OK"),
            (&["RESET"], "+RESET"),
            (&["PING"], "-NOAUTH Authentication required."),
            (&["CLIENT", "ID"], "-NOAUTH Authentication required."),
            (&["AUTH", "secret"], "+OK"),
            (&["HELLO"], "%7"), // a flat array of 14 on the RESP2 wire
            (&["QUIT"], "+OK"),
        ];
        let (mut e, h) = engine(Some("secret"));
        for (args, want) in table {
            let (r, _) = run(&mut e, h, args);
            assert_eq!(short(&r), *want, "{args:?}");
        }
        assert_eq!(e.core.stats.errors.get("NOAUTH"), Some(&7));
    }

    #[test]
    fn credentials_need_the_default_user() {
        let (e, _) = engine(Some("pw"));
        assert!(credentials_ok(&e.core, b"default", b"pw"));
        assert!(!credentials_ok(&e.core, b"DEFAULT", b"pw"));
        assert!(!credentials_ok(&e.core, b"default", b"px"));
        let (e, _) = engine(None);
        assert!(credentials_ok(&e.core, b"default", b"anything"));
    }
}
