//! The ACL rule language (`ACL SETUSER`, `user` lines, the ACL file) and its canonical
//! description (`ACL LIST`, `ACL GETUSER`), as redis-server 7.0.15 parses and prints it.
//!
//! Command rules are kept as a bitmap, so the printed rules are rebuilt from it the way 7.0
//! does: start from `+@all` or `-@all`, repeatedly add the category that best matches the
//! remaining differences, then fix single commands. Redis walks its command dictionary in a
//! hash order seeded at random per process; Kayvee walks the command table, so the single
//! commands may come in another order (the set is the same).

use super::{hex, KeyPattern, Selector, User};
use crate::command::{acl as cat, CommandId, CommandTable};
use alloc::string::String;
use alloc::vec::Vec;

/// Why a rule was refused; `Display` is Redis's text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleError {
    /// Syntax error
    Syntax,
    /// Unknown command or category name in ACL
    UnknownCommand,
    /// A key pattern after `allkeys`.
    KeyAfterAll,
    /// A channel pattern after `allchannels`.
    ChannelAfterAll,
    /// Removing a password the user does not have.
    NoSuchPassword,
    /// A `#`/`!` hash that is not 64 lower-case hex digits.
    BadHash,
    /// `+cmd|sub|arg`.
    SubcommandFirstArg,
    /// A user defined twice in a config or ACL file.
    Duplicate,
}

impl core::fmt::Display for RuleError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            RuleError::Syntax => "Syntax error",
            RuleError::UnknownCommand => "Unknown command or category name in ACL",
            RuleError::KeyAfterAll => {
                "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and \
                 does not have any effect. Try 'resetkeys' to start with an empty list of patterns"
            }
            RuleError::ChannelAfterAll => {
                "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid \
                 and does not have any effect. Try 'resetchannels' to start with an empty list \
                 of channels"
            }
            RuleError::NoSuchPassword => {
                "The password you are trying to remove from the user does not exist"
            }
            RuleError::BadHash => {
                "The password hash must be exactly 64 characters and contain only lowercase \
                 hexadecimal characters"
            }
            RuleError::SubcommandFirstArg => "Allowing first-arg of a subcommand is not supported",
            RuleError::Duplicate => {
                "Duplicate user found. A user can only be defined once in config files"
            }
        })
    }
}

/// Merges the `(`...`)` selector arguments that spread over several words back into one
/// rule each, as Redis does before applying them. `Err` carries the start of an unmatched one.
pub fn merge_selectors(ops: &[&[u8]]) -> Result<Vec<Vec<u8>>, Vec<u8>> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut open: Option<Vec<u8>> = None;
    for op in ops {
        if let Some(acc) = open.as_mut() {
            acc.push(b' ');
            acc.extend_from_slice(op);
        } else if op.first() == Some(&b'(') {
            open = Some(op.to_vec());
        } else {
            out.push(op.to_vec());
            continue;
        }
        if op.last() == Some(&b')') {
            out.extend(open.take());
        }
    }
    match open {
        Some(acc) => Err(acc),
        None => Ok(out),
    }
}

/// Applies one user rule (a flag, a password rule, a selector or a selector rule).
pub fn apply_user(u: &mut User, op: &[u8], table: &CommandTable) -> Result<(), RuleError> {
    apply_user_with(u, op, table, false)
}

/// [`apply_user`], `reset` giving every channel when `all_channels` (`acl-pubsub-default
/// allchannels`).
pub fn apply_user_with(
    u: &mut User,
    op: &[u8],
    table: &CommandTable,
    all_channels: bool,
) -> Result<(), RuleError> {
    let word = |w: &str| op.eq_ignore_ascii_case(w.as_bytes());
    let n = table.all().len();
    if word("on") {
        u.enabled = true;
    } else if word("off") {
        u.enabled = false;
    } else if word("skip-sanitize-payload") {
        u.sanitize = Some(false);
    } else if word("sanitize-payload") {
        u.sanitize = Some(true);
    } else if word("nopass") {
        u.nopass = true;
        u.passwords.clear();
    } else if word("resetpass") {
        u.nopass = false;
        u.passwords.clear();
    } else if word("clearselectors") {
        u.selectors.clear();
    } else if word("reset") {
        let name = core::mem::take(&mut u.name);
        *u = User::new(&name, n);
        u.sanitize = Some(true);
        u.root.all_channels = all_channels;
    } else if op.len() >= 2 && op[0] == b'(' && op[op.len() - 1] == b')' {
        let mut s = Selector::new(n);
        for rule in op[1..op.len() - 1]
            .split(|&b| b == b' ')
            .filter(|r| !r.is_empty())
        {
            apply_selector(&mut s, rule, table)?;
        }
        u.selectors.push(s);
    } else {
        return apply_password_or_selector(u, op, table);
    }
    Ok(())
}

/// `>pass`, `<pass`, `#hash`, `!hash`, else a rule of the root selector.
fn apply_password_or_selector(
    u: &mut User,
    op: &[u8],
    table: &CommandTable,
) -> Result<(), RuleError> {
    let (add, hash) = match op.first() {
        Some(b'>') => (true, super::sha256(&op[1..])),
        Some(b'<') => (false, super::sha256(&op[1..])),
        Some(b'#') => (true, parse_hash(&op[1..])?),
        Some(b'!') => (false, parse_hash(&op[1..])?),
        _ => return apply_selector(&mut u.root, op, table),
    };
    if add {
        u.nopass = false;
        if !u.passwords.contains(&hash) {
            u.passwords.push(hash);
        }
    } else {
        let pos = u.passwords.iter().position(|p| *p == hash);
        u.passwords.remove(pos.ok_or(RuleError::NoSuchPassword)?);
    }
    Ok(())
}

/// A password hash: 64 lower-case hex digits.
fn parse_hash(h: &[u8]) -> Result<[u8; 32], RuleError> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    if h.len() != 64 {
        return Err(RuleError::BadHash);
    }
    let mut out = [0u8; 32];
    for (i, pair) in h.chunks(2).enumerate() {
        let hi = digit(pair[0]).ok_or(RuleError::BadHash)?;
        let lo = digit(pair[1]).ok_or(RuleError::BadHash)?;
        out[i] = hi << 4 | lo;
    }
    Ok(out)
}

/// Applies one selector rule: keys, channels or commands.
pub fn apply_selector(s: &mut Selector, op: &[u8], table: &CommandTable) -> Result<(), RuleError> {
    let word = |w: &str| op.eq_ignore_ascii_case(w.as_bytes());
    if word("allkeys") || op == b"~*" {
        s.all_keys = true;
        s.keys.clear();
    } else if word("resetkeys") {
        s.all_keys = false;
        s.keys.clear();
    } else if word("allchannels") || op == b"&*" {
        s.all_channels = true;
        s.channels.clear();
    } else if word("resetchannels") {
        s.all_channels = false;
        s.channels.clear();
    } else if word("allcommands") || word("+@all") {
        s.set_all(true);
    } else if word("nocommands") || word("-@all") {
        s.set_all(false);
    } else {
        match op.first() {
            // Patterns with spaces could not be written back to an ACL file.
            Some(b'~') | Some(b'%') | Some(b'&') if op.contains(&b' ') => {
                return Err(RuleError::Syntax)
            }
            Some(b'~') | Some(b'%') => add_key_pattern(s, op)?,
            Some(b'&') => add_channel(s, &op[1..])?,
            Some(b'+') | Some(b'-') => command_rule(s, op, table)?,
            _ => return Err(RuleError::Syntax),
        }
    }
    Ok(())
}

/// `~pattern` or `%R~`, `%W~`, `%RW~pattern`.
fn add_key_pattern(s: &mut Selector, op: &[u8]) -> Result<(), RuleError> {
    if s.all_keys {
        return Err(RuleError::KeyAfterAll);
    }
    let (read, write, pattern) = if op[0] == b'~' {
        (true, true, &op[1..])
    } else {
        // Without a `~` the pattern is empty (`%RW` matches no key), as Redis 7.0 accepts it.
        let tilde = op.iter().position(|&b| b == b'~');
        let (mut read, mut write) = (false, false);
        for &c in &op[1..tilde.unwrap_or(op.len())] {
            match c.to_ascii_uppercase() {
                b'R' if !read => read = true,
                b'W' if !write => write = true,
                _ => return Err(RuleError::Syntax),
            }
        }
        if !read && !write {
            return Err(RuleError::Syntax);
        }
        (read, write, tilde.map_or(&[][..], |t| &op[t + 1..]))
    };
    match s.keys.iter_mut().find(|p| p.pattern == pattern) {
        Some(p) => {
            p.read |= read;
            p.write |= write;
        }
        None => s.keys.push(KeyPattern {
            pattern: pattern.to_vec(),
            read,
            write,
        }),
    }
    Ok(())
}

/// `&pattern`.
fn add_channel(s: &mut Selector, pattern: &[u8]) -> Result<(), RuleError> {
    if s.all_channels {
        return Err(RuleError::ChannelAfterAll);
    }
    if !s.channels.iter().any(|c| c == pattern) {
        s.channels.push(pattern.to_vec());
    }
    Ok(())
}

/// `+cmd`, `-cmd`, `+cmd|sub`, `+cmd|firstarg`, `+@cat`, `-@cat`.
fn command_rule(s: &mut Selector, op: &[u8], table: &CommandTable) -> Result<(), RuleError> {
    let allow = op[0] == b'+';
    let name = &op[1..];
    if let Some(category) = name.strip_prefix(b"@") {
        let flag = category_flag(category).ok_or(RuleError::UnknownCommand)?;
        set_category(s, table, flag, allow);
        return Ok(());
    }
    let (base, rest) = match name.iter().position(|&b| b == b'|') {
        Some(i) => (&name[..i], Some(&name[i + 1..])),
        None => (name, None),
    };
    let id = table.lookup(base).ok_or(RuleError::UnknownCommand)?;
    let Some(rest) = rest else {
        change_perm(s, table, id, allow);
        return Ok(());
    };
    if table.get(id).spec.subcommands != 0 {
        if rest.contains(&b'|') {
            return Err(RuleError::SubcommandFirstArg);
        }
        let sub = table
            .lookup_sub(id, rest)
            .ok_or(RuleError::UnknownCommand)?;
        change_perm(s, table, sub, allow);
        return Ok(());
    }
    if !allow || rest.contains(&b'|') || rest.is_empty() {
        return Err(RuleError::UnknownCommand);
    }
    if !s.bit(id.0) {
        let args = s.first_args.entry(id.0).or_default();
        let arg = rest.to_ascii_lowercase();
        if !args.contains(&arg) {
            args.push(arg);
        }
    }
    Ok(())
}

/// A category's flag by name (any case).
pub fn category_flag(name: &[u8]) -> Option<u32> {
    cat::NAMES
        .iter()
        .find(|(_, n)| n.as_bytes().eq_ignore_ascii_case(name))
        .map(|(f, _)| *f)
}

/// Allows or forbids a command, its subcommands with it, and drops its first arguments.
pub fn change_perm(s: &mut Selector, table: &CommandTable, id: CommandId, allow: bool) {
    s.set_bit(id.0, allow);
    s.first_args.remove(&id.0);
    for i in 0..table.get(id).spec.subcommands {
        s.set_bit(id.0 + 1 + i as u16, allow);
    }
}

/// `+@cat` / `-@cat`: every entry with the category (a container brings its subcommands).
fn set_category(s: &mut Selector, table: &CommandTable, flag: u32, allow: bool) {
    for (i, reg) in table.all().iter().enumerate() {
        if reg.spec.acl & flag != 0 {
            change_perm(s, table, CommandId(i as u16), allow);
        }
    }
}

/// How many entries of a category are allowed (`on`) and not (`off`).
fn count_category(s: &Selector, table: &CommandTable, flag: u32) -> (usize, usize) {
    let (mut on, mut off) = (0, 0);
    for (i, reg) in table.all().iter().enumerate() {
        if reg.spec.acl & flag != 0 {
            if s.bit(i as u16) {
                on += 1;
            } else {
                off += 1;
            }
        }
    }
    (on, off)
}

/// The command rules of a selector as Redis 7.0 prints them (`-@all +@hash +set -hget`).
pub fn describe_commands(s: &Selector, table: &CommandTable) -> String {
    let additive = !s.all_commands;
    let mut fake = Selector::new(table.all().len());
    fake.set_all(!additive);
    let mut rules = String::from(if additive { "-@all " } else { "+@all " });
    let mut temp = s.clone();
    let mut applied = [false; 32];
    loop {
        let mut best = None;
        let (mut min_diff, mut max_same) = (usize::MAX, 0);
        for (j, (flag, _)) in cat::NAMES.iter().enumerate() {
            if applied[j] {
                continue;
            }
            let (on, off) = count_category(&temp, table, *flag);
            let (diff, same) = if additive { (off, on) } else { (on, off) };
            if same > diff && (diff < min_diff || (diff == min_diff && same > max_same)) {
                best = Some(j);
                min_diff = diff;
                max_same = same;
            }
        }
        let Some(j) = best else { break };
        let (flag, name) = cat::NAMES[j];
        set_category(&mut fake, table, flag, additive);
        set_category(&mut temp, table, flag, !additive);
        rules.push(if additive { '+' } else { '-' });
        rules.push('@');
        rules.push_str(name);
        rules.push(' ');
        applied[j] = true;
    }
    single_commands(s, &mut fake, table, &mut rules);
    rules.pop();
    rules
}

/// The final pass: single commands whose bit still differs, and allowed first arguments.
fn single_commands(s: &Selector, fake: &mut Selector, table: &CommandTable, rules: &mut String) {
    for (i, reg) in table.all().iter().enumerate() {
        let id = i as u16;
        let bit = s.bit(id);
        if bit != fake.bit(id) {
            rules.push(if bit { '+' } else { '-' });
            rules.push_str(&reg.full_name);
            rules.push(' ');
            change_perm(fake, table, CommandId(id), bit);
        }
        if let Some(args) = s.first_args.get(&id).filter(|_| !bit) {
            for a in args {
                rules.push('+');
                rules.push_str(&reg.full_name);
                rules.push('|');
                rules.push_str(&String::from_utf8_lossy(a));
                rules.push(' ');
            }
        }
    }
}

/// The key patterns as `ACL GETUSER` shows them (`~k* %R~r*`, `~*` for allkeys).
pub fn describe_keys(s: &Selector) -> String {
    if s.all_keys {
        return "~*".into();
    }
    let parts: Vec<String> = s.keys.iter().map(pattern_text).collect();
    parts.join(" ")
}

/// One key pattern (`~p`, `%R~p`, `%W~p`).
fn pattern_text(p: &KeyPattern) -> String {
    let prefix = match (p.read, p.write) {
        (true, true) => "~",
        (true, false) => "%R~",
        _ => "%W~",
    };
    alloc::format!("{prefix}{}", String::from_utf8_lossy(&p.pattern))
}

/// The channel patterns as `ACL GETUSER` shows them (`&a &b`, `&*`).
pub fn describe_channels(s: &Selector) -> String {
    if s.all_channels {
        return "&*".into();
    }
    let parts: Vec<String> = s
        .channels
        .iter()
        .map(|c| alloc::format!("&{}", String::from_utf8_lossy(c)))
        .collect();
    parts.join(" ")
}

/// A whole selector as `ACL LIST` prints it: keys, channels (`resetchannels` first unless
/// all), commands.
pub fn describe_selector(s: &Selector, table: &CommandTable) -> String {
    let mut out = String::new();
    let keys = describe_keys(s);
    if !keys.is_empty() {
        out.push_str(&keys);
        out.push(' ');
    }
    if !s.all_channels {
        out.push_str("resetchannels ");
    }
    let channels = describe_channels(s);
    if !channels.is_empty() {
        out.push_str(&channels);
        out.push(' ');
    }
    out.push_str(&describe_commands(s, table));
    out
}

/// The user's flags in Redis's order (`on`/`off`, `nopass`, sanitize flags).
pub fn user_flags(u: &User) -> Vec<&'static str> {
    let mut f = alloc::vec![if u.enabled { "on" } else { "off" }];
    if u.nopass {
        f.push("nopass");
    }
    match u.sanitize {
        Some(false) => f.push("skip-sanitize-payload"),
        Some(true) => f.push("sanitize-payload"),
        None => {}
    }
    f
}

/// The rules after `user <name>` in `ACL LIST` and the ACL file.
pub fn describe_user(u: &User, table: &CommandTable) -> String {
    let mut out = user_flags(u).join(" ");
    for p in &u.passwords {
        out.push_str(" #");
        out.push_str(&hex(p));
    }
    out.push(' ');
    out.push_str(&describe_selector(&u.root, table));
    for s in &u.selectors {
        out.push_str(" (");
        out.push_str(&describe_selector(s, table));
        out.push(')');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::collections::BTreeSet;

    fn user(rules: &str) -> (User, CommandTable) {
        let table = crate::cmd::spec::Commands::new(crate::cmd::GROUPS).table;
        let mut u = User::new(b"t", table.all().len());
        for r in rules.split(' ') {
            apply_user(&mut u, r.as_bytes(), &table).unwrap();
        }
        (u, table)
    }

    /// The command rules redis-server 7.0.15 printed after `ACL SETUSER t reset <rules>`.
    #[test]
    fn command_rules_print_as_redis_does() {
        for (rules, want) in [
            ("+get +set", "-@all +get +set"),
            ("+set +get -get", "-@all +set"),
            ("+@hash +set -hget", "-@all +@hash +set -hget"),
            ("-hget +@hash", "-@all +@hash"),
            ("+@all -get +get", "+@all"),
            ("+@read +@write", "-@all +@write +@read"),
            ("+@write +@read", "-@all +@write +@read"),
            ("+@read -@write", "-@all +@read"),
            ("+get|x +get", "-@all +get"),
            ("+get +get|x", "-@all +get"),
            ("+config|get +config", "-@all +config"),
            ("+config -config|set", "-@all +config -config|set"),
            ("+@all -config|set", "+@all -config|set"),
            ("+@all -@hash +hget", "+@all -@hash +hget"),
            ("+@all -@admin +@admin", "+@all"),
            ("-@all +@keyspace -del -@string", "-@all +@keyspace -del"),
            ("+@string +@all", "+@all"),
            ("+hget +@hash", "-@all +@hash"),
            ("+get -@read +@string", "-@all +@string"),
            ("-@all +config|get +config|get", "-@all +config|get"),
            ("+select|0 +get|x", "-@all +get|x +select|0"),
            ("+client +client|kill", "-@all +client"),
        ] {
            let (u, table) = user(&alloc::format!("reset {rules}"));
            let got = describe_commands(&u.root, &table);
            let sorted = |s: &str| s.split(' ').map(String::from).collect::<BTreeSet<_>>();
            assert_eq!(sorted(&got), sorted(want), "{rules}: {got}");
            assert_eq!(got.split(' ').next(), want.split(' ').next(), "{rules}");
        }
    }

    #[test]
    fn user_description_matches_acl_list() {
        let (u, table) = user("on >p1 ~k* +get +set -get +@hash -hget &ch* %R~r* %W~w*");
        assert_eq!(
            describe_user(&u, &table),
            "on #f64551fcd6f07823cb87971cfb91446425da18286b3ab1ef935e0cbd7a69f68a ~k* %R~r* \
             %W~w* resetchannels &ch* -@all +@hash +set -hget"
        );
        let (u, table) = user("~q %W~q %RW~* ~a");
        assert_eq!(
            describe_user(&u, &table),
            "off ~q ~* ~a resetchannels -@all"
        );
    }

    #[test]
    fn bad_rules_give_redis_errors() {
        let table = crate::cmd::spec::Commands::new(crate::cmd::GROUPS).table;
        let mut u = User::new(b"x", table.all().len());
        for (op, e) in [
            ("foo", RuleError::Syntax),
            ("+nosuch", RuleError::UnknownCommand),
            ("+get|x|y", RuleError::UnknownCommand),
            ("-get|x", RuleError::UnknownCommand),
            ("+@nosuch", RuleError::UnknownCommand),
            ("%X~a", RuleError::Syntax),
            ("%~a", RuleError::Syntax),
            ("#abc", RuleError::BadHash),
            ("<nope", RuleError::NoSuchPassword),
            ("+config|get|x", RuleError::SubcommandFirstArg),
            ("+config|nosub", RuleError::UnknownCommand),
            ("~a b", RuleError::Syntax),
            ("&a b", RuleError::Syntax),
        ] {
            assert_eq!(apply_user(&mut u, op.as_bytes(), &table), Err(e), "{op}");
        }
        apply_user(&mut u, b"allkeys", &table).unwrap();
        assert_eq!(
            apply_user(&mut u, b"~a", &table),
            Err(RuleError::KeyAfterAll)
        );
    }

    #[test]
    fn selectors_merge_across_words() {
        let ops: [&[u8]; 4] = [b"on", b"(~a", b"+get)", b"(+set)"];
        let merged = merge_selectors(&ops).unwrap();
        assert_eq!(merged, [&b"on"[..], b"(~a +get)", b"(+set)"]);
        assert_eq!(merge_selectors(&[b"(+get"]), Err(b"(+get".to_vec()));
    }
}
