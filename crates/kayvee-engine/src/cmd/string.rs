//! string commands.

use crate::command::CommandSpec;

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[];
