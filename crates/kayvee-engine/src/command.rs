//! Commands as data: the metadata of every command (name, arity, flags, key positions and key
//! specs, ACL categories, docs), the ids that name them, and [`CommandTable`], their index by
//! lower-case name. The one table drives dispatch, arity checks, ACL, client tracking's key
//! finding and `COMMAND` output.
//!
//! This module knows no handler: a command's code is named in the group tables
//! ([`crate::cmd::spec::CommandSpec`], one per group module), which are joined at engine start
//! into this table and, beside it, the handlers by [`CommandId`] ([`crate::cmd::spec::Commands`]).
//! So every layer of the engine can read the table, and only the layer above the handlers'
//! context ([`crate::cx`]) knows the handlers.

use crate::argv::Argv;
use alloc::string::String;
use alloc::vec::Vec;

pub use crate::keyspec::{
    BeginSearch, FindKeys, FoundKey, InvalidKeyArgs, KeyFlags, KeySpec, KeysFn,
};

/// Command flags, as `COMMAND INFO` names them.
pub mod flags {
    /// May modify the keyspace.
    pub const WRITE: u32 = 1 << 0;
    /// Only reads.
    pub const READONLY: u32 = 1 << 1;
    /// May grow memory (refused under OOM).
    pub const DENYOOM: u32 = 1 << 2;
    /// Administrative.
    pub const ADMIN: u32 = 1 << 3;
    /// Pub/sub related.
    pub const PUBSUB: u32 = 1 << 4;
    /// Not allowed in scripts.
    pub const NOSCRIPT: u32 = 1 << 5;
    /// May block the client.
    pub const BLOCKING: u32 = 1 << 6;
    /// Allowed while loading.
    pub const LOADING: u32 = 1 << 7;
    /// Allowed on a stale replica.
    pub const STALE: u32 = 1 << 8;
    /// Not shown by MONITOR.
    pub const SKIP_MONITOR: u32 = 1 << 9;
    /// Not logged by SLOWLOG.
    pub const SKIP_SLOWLOG: u32 = 1 << 10;
    /// O(1) or O(log N).
    pub const FAST: u32 = 1 << 11;
    /// Allowed before AUTH.
    pub const NO_AUTH: u32 = 1 << 12;
    /// May replicate.
    pub const MAY_REPLICATE: u32 = 1 << 13;
    /// Keys are found by parsing arguments.
    pub const MOVABLEKEYS: u32 = 1 << 14;
    /// Not allowed inside MULTI.
    pub const NO_MULTI: u32 = 1 << 15;
    /// Allowed while a script is busy.
    pub const ALLOW_BUSY: u32 = 1 << 16;
    /// May run with no key.
    pub const NO_MANDATORY_KEYS: u32 = 1 << 17;
    /// Refused while a replica loads asynchronously.
    pub const NO_ASYNC_LOADING: u32 = 1 << 18;

    /// Names in `COMMAND INFO` order.
    pub const NAMES: &[(u32, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOSCRIPT, "noscript"),
        (BLOCKING, "blocking"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (SKIP_MONITOR, "skip_monitor"),
        (SKIP_SLOWLOG, "skip_slowlog"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (MAY_REPLICATE, "may_replicate"),
        (NO_MANDATORY_KEYS, "no_mandatory_keys"),
        (NO_ASYNC_LOADING, "no_async_loading"),
        (NO_MULTI, "no_multi"),
        (MOVABLEKEYS, "movablekeys"),
        (ALLOW_BUSY, "allow_busy"),
    ];
}

/// ACL categories, as `COMMAND INFO` and `ACL CAT` name them (without the `@`).
pub mod acl {
    #![allow(missing_docs)]
    pub const KEYSPACE: u32 = 1 << 0;
    pub const READ: u32 = 1 << 1;
    pub const WRITE: u32 = 1 << 2;
    pub const SET: u32 = 1 << 3;
    pub const SORTEDSET: u32 = 1 << 4;
    pub const LIST: u32 = 1 << 5;
    pub const HASH: u32 = 1 << 6;
    pub const STRING: u32 = 1 << 7;
    pub const BITMAP: u32 = 1 << 8;
    pub const HYPERLOGLOG: u32 = 1 << 9;
    pub const GEO: u32 = 1 << 10;
    pub const STREAM: u32 = 1 << 11;
    pub const PUBSUB: u32 = 1 << 12;
    pub const ADMIN: u32 = 1 << 13;
    pub const FAST: u32 = 1 << 14;
    pub const SLOW: u32 = 1 << 15;
    pub const BLOCKING: u32 = 1 << 16;
    pub const DANGEROUS: u32 = 1 << 17;
    pub const CONNECTION: u32 = 1 << 18;
    pub const TRANSACTION: u32 = 1 << 19;
    pub const SCRIPTING: u32 = 1 << 20;

    /// Names in bit order.
    pub const NAMES: &[(u32, &str)] = &[
        (KEYSPACE, "keyspace"),
        (READ, "read"),
        (WRITE, "write"),
        (SET, "set"),
        (SORTEDSET, "sortedset"),
        (LIST, "list"),
        (HASH, "hash"),
        (STRING, "string"),
        (BITMAP, "bitmap"),
        (HYPERLOGLOG, "hyperloglog"),
        (GEO, "geo"),
        (STREAM, "stream"),
        (PUBSUB, "pubsub"),
        (ADMIN, "admin"),
        (FAST, "fast"),
        (SLOW, "slow"),
        (BLOCKING, "blocking"),
        (DANGEROUS, "dangerous"),
        (CONNECTION, "connection"),
        (TRANSACTION, "transaction"),
        (SCRIPTING, "scripting"),
    ];
}

/// One command's metadata (or one subcommand's, of a container command such as `CLIENT`), as
/// the table keeps it: a copy of its group table's row without the handler.
pub struct CommandInfo {
    /// Lower-case name (`get`; a subcommand's own name, `list` for `client|list`).
    pub name: &'static str,
    /// Redis arity: `n` = exactly n arguments with the name; `-n` = at least n.
    pub arity: i32,
    /// [`flags`] bits.
    pub flags: u32,
    /// First key position (0 = no keys).
    pub first_key: i32,
    /// Last key position (negative counts from the end: -1 = last argument).
    pub last_key: i32,
    /// Step between keys.
    pub key_step: i32,
    /// [`acl`] bits.
    pub acl: u32,
    /// `COMMAND DOCS` summary.
    pub summary: &'static str,
    /// `COMMAND DOCS` since.
    pub since: &'static str,
    /// `COMMAND DOCS` group (`string`, `generic`, `connection`, `server`...).
    pub group: &'static str,
    /// `COMMAND DOCS` complexity.
    pub complexity: &'static str,
    /// `COMMAND INFO` tips (`nondeterministic_output`, `request_policy:all_shards`...).
    pub tips: &'static [&'static str],
    /// Number of subcommands (`CLIENT LIST`...), 0 for plain commands; their ids follow the
    /// container's.
    pub subcommands: usize,
    /// Key-spec flags `COMMAND INFO` shows (`RO`, `access`; `RW`, `update`; `OW`; `RM`,
    /// `delete`...). Empty: derived from the command flags (see [`CommandInfo::key_spec_flags`]).
    pub key_flags: &'static [&'static str],
    /// Key specifications as Redis 7.0 describes them. Empty: one range spec derived from
    /// first/last/step and [`CommandInfo::key_spec_flags`] (see [`CommandInfo::specs`]).
    pub key_specs: &'static [KeySpec],
    /// The command's own key finder for `COMMAND GETKEYS`, when its specs cannot find all its
    /// keys (`unknown` specs) or its key flags depend on the arguments (`variable_flags`).
    pub get_keys: Option<KeysFn>,
}

impl CommandInfo {
    /// Whether `argc` arguments (name included) satisfy the arity.
    #[inline]
    pub fn arity_ok(&self, argc: usize) -> bool {
        if self.arity >= 0 {
            argc == self.arity as usize
        } else {
            argc >= (-self.arity) as usize
        }
    }

    /// Whether the command has a flag.
    #[inline]
    pub fn has(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }

    /// The key-spec flags: `key_flags` when given, else `RO access` for read-only commands,
    /// `RW update` for writing ones and `RW access update` for the rest.
    pub fn key_spec_flags(&self) -> &'static [&'static str] {
        if !self.key_flags.is_empty() {
            self.key_flags
        } else if self.has(flags::READONLY) {
            &["RO", "access"]
        } else if self.has(flags::WRITE) {
            &["RW", "update"]
        } else {
            &["RW", "access", "update"]
        }
    }

    /// The key specs: `key_specs`, or the one range spec derived from the legacy first/last/step
    /// fields (none for commands without keys).
    pub fn specs(&self) -> Vec<KeySpec> {
        if !self.key_specs.is_empty() {
            return self.key_specs.to_vec();
        }
        if self.first_key <= 0 {
            return Vec::new();
        }
        let lastkey = if self.last_key < 0 {
            self.last_key
        } else {
            self.last_key - self.first_key
        };
        alloc::vec![KeySpec::range(
            self.key_spec_flags(),
            self.first_key,
            lastkey,
            self.key_step
        )]
    }

    /// The keys in `args` (a full command line for this command) with their flags, as `COMMAND
    /// GETKEYS` finds them: the command's own finder, else its specs. `Err(InvalidKeyArgs)`: the arguments
    /// cannot hold the keys the specs announce.
    pub fn find_keys(&self, args: &Argv<'_>) -> Result<Vec<FoundKey>, InvalidKeyArgs> {
        match self.get_keys {
            Some(f) => f(args),
            None => crate::keyspec::find_keys(&self.specs(), args),
        }
    }

    /// The key argument positions for these arguments (legacy first/last/step rule).
    pub fn key_positions(&self, argc: usize) -> impl Iterator<Item = usize> {
        let (first, step) = (self.first_key, self.key_step.max(1));
        let last = if self.last_key < 0 {
            argc as i32 + self.last_key
        } else {
            self.last_key.min(argc as i32 - 1)
        };
        let (start, end) = if first > 0 && last >= first {
            (first, last + 1)
        } else {
            (0, 0)
        };
        (start..end).step_by(step as usize).map(|i| i as usize)
    }
}

/// Identifies a command or subcommand in the table (index into [`CommandTable::all`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CommandId(pub u16);

/// One table entry: the command's metadata, its parent (for subcommands) and its full name
/// (`client|list`).
pub struct Registered {
    /// The metadata.
    pub spec: CommandInfo,
    /// The container command, for subcommands.
    pub parent: Option<CommandId>,
    /// `get`, or `client|list`.
    pub full_name: alloc::string::String,
}

/// All commands, indexed.
pub struct CommandTable {
    all: Vec<Registered>,
    /// Top-level commands in table order (sorted only when listed: see
    /// [`CommandTable::top_level`]).
    by_name: Vec<(&'static str, CommandId)>,
    /// Open-addressing hash index over `by_name` (slot = position in `by_name`, or
    /// [`EMPTY_SLOT`]): an O(1) lookup on every command dispatched.
    slots: Vec<u16>,
    /// Length of the longest top-level name: longer names cannot match.
    max_len: usize,
}

/// A free slot of [`CommandTable::slots`].
const EMPTY_SLOT: u16 = u16::MAX;

/// A hash of a name's length and its first, middle and last bytes, each with its 0x20 bit set
/// so that upper- and lower-case spellings hash alike (a fixed cost whatever the length; other
/// names may collide, the probe compares exactly). `name` is not empty.
#[inline]
fn name_hash(name: &[u8]) -> u32 {
    let n = name.len();
    let key = u32::from(name[0] | 0x20)
        | u32::from(name[n / 2] | 0x20) << 8
        | u32::from(name[n - 1] | 0x20) << 16
        | (n as u32) << 24;
    key.wrapping_mul(0x9e37_79b1) >> 16
}

impl CommandTable {
    /// An empty table with room for `entries` commands and subcommands. The table is built at
    /// every start, so building does little: no sorting (the listings sort when asked) and no
    /// formatting machinery (an emulated guest, such as the unikernel under QEMU TCG, pays for
    /// every new code path it runs).
    pub fn with_capacity(entries: usize) -> Self {
        CommandTable {
            all: Vec::with_capacity(entries),
            by_name: Vec::new(),
            slots: Vec::new(),
            max_len: 0,
        }
    }

    /// Adds a top-level command; its subcommands follow it ([`CommandTable::add_subcommand`]).
    /// Lookups by name find it once [`CommandTable::index`] ran.
    pub fn add(&mut self, spec: CommandInfo) -> CommandId {
        let id = CommandId(self.all.len() as u16);
        self.by_name.push((spec.name, id));
        self.all.push(Registered {
            full_name: spec.name.into(),
            spec,
            parent: None,
        });
        id
    }

    /// Adds a subcommand of `parent`, the command added last.
    pub fn add_subcommand(&mut self, parent: CommandId, spec: CommandInfo) -> CommandId {
        let id = CommandId(self.all.len() as u16);
        let parent_name = self.get(parent).spec.name;
        let mut full_name = String::with_capacity(parent_name.len() + 1 + spec.name.len());
        full_name.push_str(parent_name);
        full_name.push('|');
        full_name.push_str(spec.name);
        self.all.push(Registered {
            spec,
            parent: Some(parent),
            full_name,
        });
        id
    }

    /// Builds the name index over the commands added.
    pub fn index(&mut self) {
        self.max_len = self.by_name.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
        // At most 1/4 full, so probe chains stay short.
        let size = (self.by_name.len() * 4).next_power_of_two().max(16);
        let mut slots = alloc::vec![EMPTY_SLOT; size];
        for (pos, (name, _)) in self.by_name.iter().enumerate() {
            let mut i = name_hash(name.as_bytes()) as usize & (size - 1);
            while slots[i] != EMPTY_SLOT {
                i = (i + 1) & (size - 1);
            }
            slots[i] = pos as u16;
        }
        self.slots = slots;
    }

    /// `rename-command`: top-level command `id` answers to `new` from now on, or to no name
    /// when `new` is empty (its metadata keeps its own name, as Redis's). False when `id` has
    /// no name (already renamed to none, or a subcommand).
    pub fn rename(&mut self, id: CommandId, new: &'static str) -> bool {
        let Some(pos) = self.by_name.iter().position(|(_, i)| *i == id) else {
            return false;
        };
        if new.is_empty() {
            self.by_name.remove(pos);
        } else {
            self.by_name[pos].0 = new;
        }
        self.index();
        true
    }

    /// Finds a top-level command by name, case-insensitively, without allocating: one hash of
    /// the name and (usually) one probe of the index.
    #[inline]
    pub fn lookup(&self, name: &[u8]) -> Option<CommandId> {
        if name.is_empty() || name.len() > self.max_len {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = name_hash(name) as usize & mask;
        loop {
            let (n, id) = *self.by_name.get(usize::from(self.slots[i]))?;
            if n.len() == name.len() && eq_lower(n.as_bytes(), name) {
                return Some(id);
            }
            i = (i + 1) & mask;
        }
    }

    /// Finds a subcommand of `parent` by name, case-insensitively.
    pub fn lookup_sub(&self, parent: CommandId, name: &[u8]) -> Option<CommandId> {
        let subs = self.get(parent).spec.subcommands;
        let first = usize::from(parent.0) + 1;
        let pos = self.all[first..first + subs]
            .iter()
            .position(|r| r.spec.name.as_bytes().eq_ignore_ascii_case(name))?;
        Some(CommandId(parent.0 + 1 + pos as u16))
    }

    /// A registered command.
    #[inline]
    pub fn get(&self, id: CommandId) -> &Registered {
        &self.all[id.0 as usize]
    }

    /// Every command and subcommand, in table order.
    pub fn all(&self) -> &[Registered] {
        &self.all
    }

    /// Top-level commands, sorted by name (sorted here, on the rare listing, rather than at
    /// every start).
    pub fn top_level(&self) -> impl Iterator<Item = CommandId> + '_ {
        let mut sorted = self.by_name.clone();
        sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
        sorted.into_iter().map(|(_, id)| id)
    }

    /// Number of top-level commands (`COMMAND COUNT`).
    pub fn count(&self) -> usize {
        self.by_name.len()
    }
}

/// Whether `name` (any case) equals `lower` (lower case); the lengths are equal.
#[inline]
fn eq_lower(lower: &[u8], name: &[u8]) -> bool {
    lower
        .iter()
        .zip(name)
        .all(|(&l, &b)| l == b.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(name: &'static str, subcommands: usize) -> CommandInfo {
        CommandInfo {
            name,
            arity: 1,
            flags: 0,
            first_key: 0,
            last_key: 0,
            key_step: 0,
            acl: 0,
            summary: "",
            since: "1.0.0",
            group: "generic",
            complexity: "O(1)",
            tips: &[],
            subcommands,
            key_flags: &[],
            key_specs: &[],
            get_keys: None,
        }
    }

    #[test]
    fn renamed_commands_answer_to_their_new_name_only() {
        let mut t = CommandTable::with_capacity(3);
        let get = t.add(info("get", 0));
        let set = t.add(info("set", 0));
        t.index();
        assert!(t.rename(get, "fetch"));
        assert!(t.rename(set, ""));
        assert!(!t.rename(set, "x"), "no name left to change");
        assert_eq!(t.lookup(b"get"), None);
        assert_eq!(t.lookup(b"FETCH"), Some(get));
        assert_eq!(t.lookup(b"set"), None);
        assert_eq!(t.get(set).spec.name, "set", "the metadata keeps its name");
    }

    #[test]
    fn lookup_is_case_insensitive_and_exact() {
        let mut t = CommandTable::with_capacity(5);
        t.add(info("get", 0));
        let client = t.add(info("client", 2));
        t.add_subcommand(client, info("list", 0));
        t.add_subcommand(client, info("kill", 0));
        t.add(info("set", 0));
        t.index();
        let get = t.lookup(b"get").expect("get");
        assert_eq!(t.get(get).spec.name, "get");
        assert_eq!(t.lookup(b"GeT"), Some(get));
        let client = t.lookup(b"CLIENT").expect("client");
        assert_eq!(t.get(client).spec.name, "client");
        assert_eq!(t.get(t.lookup(b"Set").unwrap()).spec.name, "set");
        for absent in [
            &b""[..],
            b"ge",
            b"gett",
            b"g\xc5t",
            b"clientclientclientclientclientclient",
        ] {
            assert_eq!(t.lookup(absent), None, "{absent:?}");
        }
        let kill = t.lookup_sub(client, b"KILL").expect("kill");
        assert_eq!(t.get(kill).full_name, "client|kill");
        assert_eq!(t.get(kill).parent, Some(client));
        assert_eq!(t.lookup_sub(client, b"nope"), None);
        assert_eq!(t.count(), 3);
    }
}
