//! The group tables' row type and the handlers by id: [`CommandSpec`] is one command as a group
//! module declares it (its metadata, its handler, its subcommands and, for a blocking command,
//! how a waiter is served), and [`Commands`] joins the groups at engine start into the
//! metadata table ([`crate::command::CommandTable`], which every layer reads) and, beside it,
//! each command's row by [`CommandId`], for dispatch to call the handler.
//!
//! It sits above [`crate::cx`], since a handler takes a [`Cx`]; nothing below it names a
//! handler.

use crate::argv::Argv;
use crate::command::{acl, flags, CommandId, CommandInfo, CommandTable, KeySpec, KeysFn};
use crate::cx::Cx;
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use alloc::vec::Vec;

/// A command handler. It validates everything before writing any reply; on `Err` it has
/// written nothing and the dispatcher sends the error.
pub type Handler = fn(&mut Cx<'_>, &Argv<'_>, &mut dyn ReplySink) -> CmdResult;

/// Serves a client blocked by this command from the ready `key`, re-reading the command's
/// arguments (see [`crate::blocking`]). `Ok(true)`: served, its reply was written;
/// `Ok(false)`: nothing to take from `key` (wrong type, empty), it keeps waiting and wrote
/// nothing; `Err`: it is unblocked with that error reply.
pub type ServeFn = fn(&mut Cx<'_>, &[u8], &Argv<'_>, &mut dyn ReplySink) -> Result<bool, Error>;

/// One command (or one subcommand of a container command such as `CLIENT`) as its group
/// table declares it. The fields but the handler, the serve function and the subcommands are
/// the metadata the table keeps ([`CommandInfo`], whose fields these document).
#[derive(Clone, Copy)]
pub struct CommandSpec {
    /// [`CommandInfo::name`].
    pub name: &'static str,
    /// [`CommandInfo::arity`].
    pub arity: i32,
    /// [`CommandInfo::flags`].
    pub flags: u32,
    /// [`CommandInfo::first_key`].
    pub first_key: i32,
    /// [`CommandInfo::last_key`].
    pub last_key: i32,
    /// [`CommandInfo::key_step`].
    pub key_step: i32,
    /// [`CommandInfo::acl`].
    pub acl: u32,
    /// [`CommandInfo::summary`].
    pub summary: &'static str,
    /// [`CommandInfo::since`].
    pub since: &'static str,
    /// [`CommandInfo::group`].
    pub group: &'static str,
    /// [`CommandInfo::complexity`].
    pub complexity: &'static str,
    /// [`CommandInfo::tips`].
    pub tips: &'static [&'static str],
    /// The handler (containers: the handler used when no subcommand matches, usually an error).
    pub handler: Handler,
    /// A blocking command's serve function: how a client it blocked is served when one of its
    /// keys is ready.
    pub serve: Option<ServeFn>,
    /// Subcommands (`CLIENT LIST`...), empty for plain commands.
    pub subcommands: &'static [CommandSpec],
    /// [`CommandInfo::key_flags`].
    pub key_flags: &'static [&'static str],
    /// [`CommandInfo::key_specs`].
    pub key_specs: &'static [KeySpec],
    /// [`CommandInfo::get_keys`].
    pub get_keys: Option<KeysFn>,
}

fn unimplemented_handler(_: &mut Cx<'_>, _: &Argv<'_>, _: &mut dyn ReplySink) -> CmdResult {
    Err(Error::msg("ERR command not implemented"))
}

impl CommandSpec {
    /// Defaults for struct-update syntax in the group tables.
    pub const DEFAULT: CommandSpec = CommandSpec {
        name: "",
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
        handler: unimplemented_handler,
        serve: None,
        subcommands: &[],
        key_flags: &[],
        key_specs: &[],
        get_keys: None,
    };

    /// The common row of the type groups: a command of `group` whose one key is its first
    /// argument.
    #[allow(clippy::too_many_arguments)]
    pub const fn first_key(
        group: &'static str,
        name: &'static str,
        arity: i32,
        flags: u32,
        acl: u32,
        summary: &'static str,
        since: &'static str,
        complexity: &'static str,
        handler: Handler,
    ) -> Self {
        CommandSpec {
            name,
            arity,
            flags,
            first_key: 1,
            last_key: 1,
            key_step: 1,
            acl,
            summary,
            since,
            group,
            complexity,
            handler,
            ..CommandSpec::DEFAULT
        }
    }

    /// A container command's HELP subcommand row as Redis 7.0 has it (arity 2, `loading`,
    /// `stale`, @slow, one summary); `since` and `group` vary by container.
    pub const fn help_sub(since: &'static str, group: &'static str, handler: Handler) -> Self {
        CommandSpec {
            name: "help",
            arity: 2,
            flags: flags::LOADING | flags::STALE,
            acl: acl::SLOW,
            summary: "Show helpful text about the different subcommands",
            since,
            group,
            handler,
            ..CommandSpec::DEFAULT
        }
    }

    /// The metadata the command table keeps.
    pub fn info(&self) -> CommandInfo {
        CommandInfo {
            name: self.name,
            arity: self.arity,
            flags: self.flags,
            first_key: self.first_key,
            last_key: self.last_key,
            key_step: self.key_step,
            acl: self.acl,
            summary: self.summary,
            since: self.since,
            group: self.group,
            complexity: self.complexity,
            tips: self.tips,
            subcommands: self.subcommands.len(),
            key_flags: self.key_flags,
            key_specs: self.key_specs,
            get_keys: self.get_keys,
        }
    }
}

/// The command table and, beside it, every command's row (handler, serve function) by id.
pub struct Commands {
    /// The metadata, indexed by name.
    pub table: CommandTable,
    /// Each command's row, by [`CommandId`].
    rows: Vec<&'static CommandSpec>,
}

impl Commands {
    /// Joins the group tables (see [`crate::cmd::GROUPS`]).
    pub fn new(groups: &[&'static [CommandSpec]]) -> Self {
        let entries: usize = groups
            .iter()
            .flat_map(|g| g.iter())
            .map(|s| 1 + s.subcommands.len())
            .sum();
        let mut table = CommandTable::with_capacity(entries);
        let mut rows = Vec::with_capacity(entries);
        for spec in groups.iter().flat_map(|g| g.iter()) {
            let id = table.add(spec.info());
            rows.push(spec);
            for sub in spec.subcommands {
                table.add_subcommand(id, sub.info());
                rows.push(sub);
            }
        }
        table.index();
        Commands { table, rows }
    }

    /// The handler of command `id`.
    #[inline]
    pub fn handler(&self, id: CommandId) -> Handler {
        self.rows[usize::from(id.0)].handler
    }

    /// The serve function of blocking command `id`.
    pub fn serve(&self, id: CommandId) -> Option<ServeFn> {
        self.rows[usize::from(id.0)].serve
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(_: &mut Cx<'_>, _: &Argv<'_>, _: &mut dyn ReplySink) -> CmdResult {
        Ok(())
    }

    const SUBS: &[CommandSpec] = &[
        CommandSpec {
            name: "list",
            handler: ok,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "kill",
            handler: ok,
            ..CommandSpec::DEFAULT
        },
    ];
    const GROUP: &[CommandSpec] = &[
        CommandSpec {
            name: "get",
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "client",
            subcommands: SUBS,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "set",
            ..CommandSpec::DEFAULT
        },
    ];

    #[test]
    fn rows_follow_the_table_ids() {
        let c = Commands::new(&[GROUP]);
        let client = c.table.lookup(b"client").expect("client");
        let kill = c.table.lookup_sub(client, b"kill").expect("kill");
        assert_eq!(c.table.get(kill).full_name, "client|kill");
        assert_eq!(c.table.get(client).spec.subcommands, 2);
        assert_eq!(c.handler(kill) as usize, ok as Handler as usize);
        assert!(c.serve(kill).is_none());
    }

    #[test]
    fn every_real_command_is_found_by_its_name() {
        let t = Commands::new(crate::cmd::GROUPS).table;
        let mut found = 0;
        for id in t.top_level() {
            let name = t.get(id).spec.name;
            assert_eq!(t.lookup(name.as_bytes()), Some(id), "{name}");
            assert_eq!(t.lookup(name.to_ascii_uppercase().as_bytes()), Some(id));
            found += 1;
        }
        assert_eq!(found, t.count());
        assert!(found > 50, "{found} commands");
    }

    #[test]
    fn top_level_lists_each_name_once_in_sorted_order() {
        let t = Commands::new(crate::cmd::GROUPS).table;
        let names: Vec<&str> = t.top_level().map(|id| t.get(id).spec.name).collect();
        assert_eq!(names.len(), t.count());
        assert!(
            names.windows(2).all(|w| w[0] < w[1]),
            "unsorted or duplicate"
        );
        let client = t.lookup(b"client").expect("client");
        let kill = t.lookup_sub(client, b"kill").expect("kill");
        assert_eq!(t.get(kill).full_name, "client|kill");
    }
}
