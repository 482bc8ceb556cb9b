//! The ACL file (`aclfile`) and `user` lines of the config file: parsing with redis-server
//! 7.0.15's error texts, and the text `ACL SAVE` writes. The engine only sees text; the shell
//! reads and writes the file.

use super::rules::{apply_user, describe_user, merge_selectors};
use super::{default_user, User, DEFAULT_USER};
use crate::command::CommandTable;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;

/// Startup error when both `user` lines and an `aclfile` are configured.
pub const BOTH_CONFIGURED: &str = "Configuring Redis with users defined in redis.conf and at \
     the same setting an ACL file path is invalid. This setup is very likely to lead to \
     configuration errors and security holes, please define either an ACL file or declare \
     users directly in your redis.conf, but not both.";

/// Parses an ACL file's `text` (`path` names it in errors). All errors are collected, as
/// Redis reports them in one message; on error nothing is returned. A missing `default` user
/// is created as Redis starts it.
pub fn parse(
    text: &str,
    path: &str,
    table: &CommandTable,
) -> Result<BTreeMap<Vec<u8>, User>, String> {
    let mut users: BTreeMap<Vec<u8>, User> = BTreeMap::new();
    let mut errors = String::new();
    for (i, raw) in text.split('\n').enumerate() {
        let line = raw.trim_matches([' ', '\t', '\r', '\n']);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let n = i + 1;
        let words: Vec<&[u8]> = line
            .split(' ')
            .filter(|w| !w.is_empty())
            .map(str::as_bytes)
            .collect();
        if words.len() < 2 || words[0] != b"user" {
            errors.push_str(&alloc::format!(
                "{path}:{n} should start with user keyword followed by the username. "
            ));
            continue;
        }
        let name = words[1];
        if users.contains_key(name) {
            errors.push_str(&alloc::format!(
                "WARNING: Duplicate user '{}' found on line {n}. ",
                String::from_utf8_lossy(name)
            ));
            continue;
        }
        match user_from_rules(name, &words[2..], table) {
            Ok(u) => {
                users.insert(name.to_vec(), u);
            }
            Err(e) => errors.push_str(&alloc::format!("{path}:{n}: {e}. ")),
        }
    }
    if !errors.is_empty() {
        errors.push_str(
            "WARNING: ACL errors detected, no change to the previously active ACL rules was \
             performed",
        );
        return Err(errors);
    }
    users
        .entry(DEFAULT_USER.to_vec())
        .or_insert_with(|| default_user(table.all().len()));
    Ok(users)
}

/// A user built from `rules` applied to a new user, as a file line defines it. The error
/// is Redis's `Error in applying operation '<op>': <reason>`.
pub fn user_from_rules(name: &[u8], rules: &[&[u8]], table: &CommandTable) -> Result<User, String> {
    let mut u = User::new(name, table.all().len());
    let ops = merge_selectors(rules).map_err(|start| {
        alloc::format!(
            "Unmatched parenthesis in acl selector starting at '{}'",
            String::from_utf8_lossy(&start)
        )
    })?;
    for op in &ops {
        apply_user(&mut u, op, table).map_err(|e| {
            alloc::format!(
                "Error in applying operation '{}': {e}",
                String::from_utf8_lossy(op)
            )
        })?;
    }
    Ok(u)
}

/// The text `ACL SAVE` writes: one `user` line per user, sorted by name.
pub fn render(users: &BTreeMap<Vec<u8>, User>, table: &CommandTable) -> String {
    let mut out = String::new();
    for (name, u) in users {
        out.push_str("user ");
        out.push_str(&String::from_utf8_lossy(name));
        out.push(' ');
        out.push_str(&describe_user(u, table));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_collected_as_redis_words_them() {
        let table = crate::cmd::spec::Commands::new(crate::cmd::GROUPS).table;
        let text = "user alice on >pw ~a* +get\nfoo bar\nuser bob on +nosuch\nuser alice off\n";
        let e = parse(text, "/tmp/acl/bad.acl", &table).unwrap_err();
        assert_eq!(
            e,
            "/tmp/acl/bad.acl:2 should start with user keyword followed by the username. \
             /tmp/acl/bad.acl:3: Error in applying operation '+nosuch': Unknown command or \
             category name in ACL. WARNING: Duplicate user 'alice' found on line 4. WARNING: \
             ACL errors detected, no change to the previously active ACL rules was performed"
        );
    }

    #[test]
    fn load_then_render_round_trips() {
        let table = crate::cmd::spec::Commands::new(crate::cmd::GROUPS).table;
        let users = parse("user alice on >pw ~a* +get\n", "f", &table).unwrap();
        let text = render(&users, &table);
        assert_eq!(
            text,
            "user alice on #30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4 \
             ~a* resetchannels -@all +get\nuser default on nopass ~* &* +@all\n"
        );
        assert_eq!(parse(&text, "f", &table).unwrap(), users);
    }
}
