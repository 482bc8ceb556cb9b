//! Access control lists as Redis 7.0 has them: users (on/off, passwords as SHA-256, `nopass`),
//! each with a root selector and optional extra selectors (allowed commands as one bit per
//! command-table entry plus allowed first arguments, key patterns with read/write flags,
//! channel patterns). The rule language is in [`rules`], the denial log in [`log`], the
//! `aclfile` format in [`file`]. Behaviour learned from redis-server 7.0.15 by experiment.
//!
//! The `default` user always exists. `requirepass` is an alias of its password, as in Redis:
//! setting it resets the default user's passwords to that one (empty: `nopass`).

pub mod file;
pub mod log;
pub mod rules;

use crate::argv::Argv;
use crate::command::{flags, CommandId, CommandTable};
use crate::util::glob_match;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use sha2::{Digest, Sha256};

/// A key pattern with the access it grants (`~p` = both, `%R~p`, `%W~p`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPattern {
    /// The glob.
    pub pattern: Vec<u8>,
    /// Grants reads.
    pub read: bool,
    /// Grants writes.
    pub write: bool,
}

/// What a selector allows: commands, keys and channels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector {
    /// One bit per command-table entry (subcommands have their own).
    allowed: Vec<u64>,
    /// Set by `+@all`/`allcommands`: commands added later would be allowed too.
    pub all_commands: bool,
    /// Allowed first arguments (`+select|0`) of commands not allowed as a whole, lower case.
    pub first_args: BTreeMap<u16, Vec<Vec<u8>>>,
    /// Key patterns, in the order added.
    pub keys: Vec<KeyPattern>,
    /// `allkeys` / `~*`.
    pub all_keys: bool,
    /// Channel patterns, in the order added.
    pub channels: Vec<Vec<u8>>,
    /// `allchannels` / `&*`.
    pub all_channels: bool,
}

impl Selector {
    /// A selector allowing nothing, for a table of `n` entries.
    pub fn new(n: usize) -> Self {
        Selector {
            allowed: alloc::vec![0; n.div_ceil(64)],
            all_commands: false,
            first_args: BTreeMap::new(),
            keys: Vec::new(),
            all_keys: false,
            channels: Vec::new(),
            all_channels: false,
        }
    }

    /// Whether command-table entry `id` is allowed as a whole.
    #[inline]
    pub fn bit(&self, id: u16) -> bool {
        self.allowed[usize::from(id) / 64] & (1 << (id % 64)) != 0
    }

    /// Allows or forbids entry `id` alone.
    pub fn set_bit(&mut self, id: u16, on: bool) {
        let word = &mut self.allowed[usize::from(id) / 64];
        if on {
            *word |= 1 << (id % 64);
        } else {
            *word &= !(1 << (id % 64));
        }
    }

    /// Sets every bit (`+@all`) or clears them all (`-@all`).
    fn set_all(&mut self, on: bool) {
        self.allowed
            .iter_mut()
            .for_each(|w| *w = if on { !0 } else { 0 });
        self.all_commands = on;
        self.first_args.clear();
    }

    /// Whether it lets anything through unchecked (the fast path for `default`).
    fn unrestricted(&self) -> bool {
        self.all_commands
            && self.all_keys
            && self.all_channels
            && self.allowed.iter().all(|w| *w == !0)
    }
}

/// A user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    /// Its name.
    pub name: Vec<u8>,
    /// `on` / `off`.
    pub enabled: bool,
    /// Any password is accepted.
    pub nopass: bool,
    /// `sanitize-payload` (Some(true)) / `skip-sanitize-payload` (Some(false)).
    pub sanitize: Option<bool>,
    /// SHA-256 of each password, in the order added.
    pub passwords: Vec<[u8; 32]>,
    /// The root selector (the user's own rules).
    pub root: Selector,
    /// Extra selectors `(...)`: a command is allowed when any selector allows it.
    pub selectors: Vec<Selector>,
}

impl User {
    /// A new user as `ACL SETUSER` creates it: off, no password, nothing allowed.
    pub fn new(name: &[u8], n: usize) -> Self {
        User {
            name: name.to_vec(),
            enabled: false,
            nopass: false,
            sanitize: None,
            passwords: Vec::new(),
            root: Selector::new(n),
            selectors: Vec::new(),
        }
    }

    /// Whether `pass` opens this user (it must also be on).
    pub fn password_ok(&self, pass: &[u8]) -> bool {
        self.enabled && (self.nopass || self.passwords.contains(&sha256(pass)))
    }
}

/// SHA-256 of `data`.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    s
}

/// Why a command was refused, ordered as Redis ranks them when selectors disagree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum DenyKind {
    /// The command (or subcommand) is not allowed.
    Command,
    /// A key argument matches no pattern with the access the command needs.
    Key,
    /// A channel argument matches no channel pattern.
    Channel,
}

/// A refusal: its kind and the argument index it concerns (0 for the command).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Denied {
    /// What was refused.
    pub kind: DenyKind,
    /// The offending argument.
    pub index: usize,
}

impl Denied {
    /// The `-NOPERM` error a refused command gets; `name` is the command's full name.
    pub fn error_text(&self, name: &str) -> String {
        match self.kind {
            DenyKind::Command => {
                alloc::format!("NOPERM this user has no permissions to run the '{name}' command")
            }
            DenyKind::Key => {
                "NOPERM this user has no permissions to access one of the keys used as arguments"
                    .into()
            }
            DenyKind::Channel => "NOPERM this user has no permissions to access one of the \
                                  channels used as arguments"
                .into(),
        }
    }
}

/// The users and the denial log.
#[derive(Clone, Debug)]
pub struct Acl {
    /// Users by name (sorted, as `ACL LIST` and `ACL USERS` show them).
    pub users: BTreeMap<Vec<u8>, User>,
    /// The denial log (`ACL LOG`).
    pub log: log::AclLog,
    /// Whether `default` is on with `nopass` (no AUTH needed): cached for dispatch.
    default_open: bool,
    /// Whether `default` is on, nopass and unrestricted: dispatch skips its checks.
    default_unrestricted: bool,
    /// Number of command-table entries (bitmap size).
    n_commands: usize,
}

/// The default user's name.
pub const DEFAULT_USER: &[u8] = b"default";

impl Acl {
    /// The initial state: `default` on, nopass, everything allowed; `requirepass` applied.
    pub fn new(table: &CommandTable, requirepass: Option<&[u8]>) -> Self {
        let n = table.all().len();
        let mut acl = Acl {
            users: BTreeMap::new(),
            log: Default::default(),
            default_open: true,
            default_unrestricted: true,
            n_commands: n,
        };
        acl.users.insert(DEFAULT_USER.to_vec(), default_user(n));
        acl.set_requirepass(requirepass);
        acl
    }

    /// Size of the command bitmap.
    pub fn n_commands(&self) -> usize {
        self.n_commands
    }

    /// `requirepass` changed: the default user's passwords become that one (or `nopass`).
    pub fn set_requirepass(&mut self, pass: Option<&[u8]>) {
        if let Some(u) = self.users.get_mut(DEFAULT_USER) {
            u.passwords.clear();
            match pass {
                Some(p) => {
                    u.nopass = false;
                    u.passwords.push(sha256(p));
                }
                None => u.nopass = true,
            }
        }
        self.refresh();
    }

    /// Recomputes the cached facts about `default` after users changed.
    pub fn refresh(&mut self) {
        let d = self.users.get(DEFAULT_USER);
        self.default_open = d.is_some_and(|u| u.enabled && u.nopass);
        self.default_unrestricted = d.is_some_and(|u| u.enabled && u.root.unrestricted());
    }

    /// Whether clients must AUTH before running commands (the default user is off or has a
    /// password), as Redis's `authRequired`.
    #[inline]
    pub fn auth_required(&self) -> bool {
        !self.default_open
    }

    /// The user `name` if `pass` opens it.
    pub fn authenticate(&self, name: &[u8], pass: &[u8]) -> bool {
        self.users.get(name).is_some_and(|u| u.password_ok(pass))
    }

    /// Whether `user` may read every key, as Redis's check of the key `*` for access (SORT's
    /// BY and GET patterns need it): some selector has `allkeys` or a readable pattern that
    /// matches `*`.
    pub fn reads_all_keys(&self, user: &[u8]) -> bool {
        if user == DEFAULT_USER && self.default_unrestricted {
            return true;
        }
        let Some(u) = self.users.get(user) else {
            return false;
        };
        core::iter::once(&u.root)
            .chain(&u.selectors)
            .any(|s| s.all_keys || key_allowed(s, b"*", &["access"]))
    }

    /// Whether `user` is the `default` user with every permission: [`Acl::check`] allows it
    /// everything.
    #[inline]
    pub fn unrestricted(&self, user: &[u8]) -> bool {
        self.default_unrestricted && user == DEFAULT_USER
    }

    /// Checks whether `user` may run `argv` (resolved to `id`); `None` when allowed.
    #[inline]
    pub fn check(
        &self,
        user: &[u8],
        table: &CommandTable,
        id: CommandId,
        argv: &Argv<'_>,
    ) -> Option<Denied> {
        if self.unrestricted(user) {
            return None;
        }
        self.check_restricted(user, table, id, argv)
    }

    /// [`Acl::check`] for a user other than an unrestricted `default` (out of line: the test
    /// before it runs for every command).
    #[inline(never)]
    fn check_restricted(
        &self,
        user: &[u8],
        table: &CommandTable,
        id: CommandId,
        argv: &Argv<'_>,
    ) -> Option<Denied> {
        let reg = table.get(id);
        if reg.spec.has(flags::NO_AUTH) {
            return None;
        }
        let Some(u) = self.users.get(user) else {
            return Some(Denied {
                kind: DenyKind::Command,
                index: 0,
            });
        };
        check_user(u, table, id, argv)
    }
}

/// Checks every selector of `u`; the most relevant refusal when none allows the command.
pub fn check_user(
    u: &User,
    table: &CommandTable,
    id: CommandId,
    argv: &Argv<'_>,
) -> Option<Denied> {
    let mut worst = Denied {
        kind: DenyKind::Command,
        index: 0,
    };
    for s in core::iter::once(&u.root).chain(&u.selectors) {
        match check_selector(s, table, id, argv) {
            None => return None,
            Some(d) => {
                if d.kind > worst.kind || (d.kind == worst.kind && d.index > worst.index) {
                    worst = d;
                }
            }
        }
    }
    Some(worst)
}

/// One selector's verdict: command, then keys, then channels.
fn check_selector(
    s: &Selector,
    table: &CommandTable,
    id: CommandId,
    argv: &Argv<'_>,
) -> Option<Denied> {
    if !command_allowed(s, id, argv) {
        return Some(Denied {
            kind: DenyKind::Command,
            index: 0,
        });
    }
    let spec = &table.get(id).spec;
    if !s.all_keys {
        if let Ok(keys) = spec.find_keys(argv) {
            // Shard channels are `not_key` specs: checked as channels, not keys.
            for k in keys.iter().filter(|k| !k.flags.contains(&"not_key")) {
                if !key_allowed(s, argv.get(k.index), k.flags) {
                    return Some(Denied {
                        kind: DenyKind::Key,
                        index: k.index,
                    });
                }
            }
        }
    }
    if !s.all_channels {
        for (index, pattern) in channel_args(table.get(id).full_name.as_str(), argv) {
            if !channel_allowed(s, argv.get(index), pattern) {
                return Some(Denied {
                    kind: DenyKind::Channel,
                    index,
                });
            }
        }
    }
    None
}

/// The command bit, or an allowed first argument.
fn command_allowed(s: &Selector, id: CommandId, argv: &Argv<'_>) -> bool {
    if s.bit(id.0) {
        return true;
    }
    let Some(args) = s.first_args.get(&id.0) else {
        return false;
    };
    argv.len() > 1 && args.iter().any(|a| a.eq_ignore_ascii_case(argv.get(1)))
}

/// Whether some pattern grants the access the key-spec `flags` ask for (`access` needs
/// read; `insert`, `update`, `delete` need write).
fn key_allowed(s: &Selector, key: &[u8], flags: &[&str]) -> bool {
    let read = flags.contains(&"access");
    let write = flags
        .iter()
        .any(|f| matches!(*f, "insert" | "update" | "delete"));
    s.keys
        .iter()
        .any(|p| (p.read || !read) && (p.write || !write) && glob_match(&p.pattern, key, false))
}

/// The channel arguments of the pub/sub commands ACL checks, with whether each is a pattern.
fn channel_args(name: &str, argv: &Argv<'_>) -> Vec<(usize, bool)> {
    match name {
        "publish" | "spublish" if argv.len() > 1 => alloc::vec![(1, false)],
        "subscribe" | "ssubscribe" => (1..argv.len()).map(|i| (i, false)).collect(),
        "psubscribe" => (1..argv.len()).map(|i| (i, true)).collect(),
        _ => Vec::new(),
    }
}

/// A channel matches a pattern as a glob; a subscribed pattern must equal an allowed one.
fn channel_allowed(s: &Selector, channel: &[u8], is_pattern: bool) -> bool {
    s.channels.iter().any(|p| {
        if is_pattern {
            p.as_slice() == channel
        } else {
            glob_match(p, channel, false)
        }
    })
}

/// The reply redis-server 7.0.15 sends a refused client in protected mode, before closing.
pub const PROTECTED_MODE_DENIED: &str = "-DENIED Redis is running in protected mode because \
    protected mode is enabled and no password is set for the default user. In this mode \
    connections are only accepted from the loopback interface. If you want to connect from \
    external computers to Redis you may adopt one of the following solutions: 1) Just disable \
    protected mode sending the command 'CONFIG SET protected-mode no' from the loopback \
    interface by connecting to Redis from the same host the server is running, however MAKE \
    SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to \
    make this change permanent. 2) Alternatively you can just disable the protected mode by \
    editing the Redis configuration file, and setting the protected mode option to 'no', and \
    then restarting the server. 3) If you started the server manually just for testing, \
    restart it with the '--protected-mode no' option. 4) Setup a an authentication password \
    for the default user. NOTE: You only need to do one of the above things in order for the \
    server to start accepting connections from the outside.\r\n";

/// Whether a peer address (`ip:port`, `[ip]:port`) is a loopback one: `127.*`, `::1`, or
/// `::ffff:127.*`.
pub fn is_loopback(addr: &str) -> bool {
    let ip = addr.rsplit_once(':').map_or(addr, |(ip, _)| ip);
    let ip = ip.trim_start_matches('[').trim_end_matches(']');
    let ip = ip.strip_prefix("::ffff:").unwrap_or(ip);
    ip.starts_with("127.") || ip == "::1"
}

/// Whether a connection is local as `enable-debug-command local` and
/// `enable-protected-configs local` mean it: a Unix socket or a loopback TCP peer.
pub fn is_local(t: &crate::Transport) -> bool {
    match t {
        crate::Transport::Tcp { addr, .. } => is_loopback(addr),
        crate::Transport::Unix { .. } => true,
    }
}

impl Acl {
    /// Protected mode as Redis 7.0 applies it on accept, whatever `bind` says: with
    /// `protected-mode yes` and a default user without password, a TCP client from a
    /// non-loopback address gets [`PROTECTED_MODE_DENIED`] and is closed. Unix sockets pass.
    pub fn protected_mode_denies(&self, protected_mode: bool, t: &crate::Transport) -> bool {
        let nopass = self.users.get(DEFAULT_USER).is_some_and(|u| u.nopass);
        match t {
            crate::Transport::Tcp { addr, .. } => protected_mode && nopass && !is_loopback(addr),
            crate::Transport::Unix { .. } => false,
        }
    }
}

/// `default` as Redis starts it: on, nopass, `~* &* +@all`.
fn default_user(n: usize) -> User {
    let mut u = User::new(DEFAULT_USER, n);
    u.enabled = true;
    u.nopass = true;
    u.root.set_all(true);
    u.root.all_keys = true;
    u.root.all_channels = true;
    u
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_and_hex_match_redis() {
        // `ACL SETUSER x >foo` then `ACL GETUSER x` on redis-server 7.0.15.
        assert_eq!(
            hex(&sha256(b"foo")),
            "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"
        );
    }

    #[test]
    fn protected_mode_refuses_only_remote_peers_without_password() {
        let table = crate::cmd::spec::Commands::new(crate::cmd::GROUPS).table;
        let mut acl = Acl::new(&table, None);
        let tcp = |a: &str| crate::Transport::Tcp {
            addr: a.into(),
            laddr: "0.0.0.0:6379".into(),
        };
        assert!(acl.protected_mode_denies(true, &tcp("192.0.2.2:5000")));
        assert!(acl.protected_mode_denies(true, &tcp("[fd00::2]:5000")));
        assert!(!acl.protected_mode_denies(false, &tcp("192.0.2.2:5000")));
        for local in ["127.0.0.1:5000", "127.1.2.3:1", "[::1]:5000", "::1:5000"] {
            assert!(!acl.protected_mode_denies(true, &tcp(local)), "{local}");
        }
        let unix = crate::Transport::Unix {
            path: "/tmp/s".into(),
        };
        assert!(!acl.protected_mode_denies(true, &unix));
        acl.set_requirepass(Some(b"pw"));
        assert!(!acl.protected_mode_denies(true, &tcp("192.0.2.2:5000")));
        assert!(PROTECTED_MODE_DENIED.ends_with("from the outside.\r\n"));
    }

    #[test]
    fn requirepass_toggles_auth_required() {
        let table = crate::cmd::spec::Commands::new(crate::cmd::GROUPS).table;
        let mut acl = Acl::new(&table, None);
        assert!(!acl.auth_required());
        acl.set_requirepass(Some(b"pw"));
        assert!(acl.auth_required());
        assert!(acl.authenticate(b"default", b"pw"));
        assert!(!acl.authenticate(b"default", b"px"));
        acl.set_requirepass(None);
        assert!(!acl.auth_required());
    }
}
