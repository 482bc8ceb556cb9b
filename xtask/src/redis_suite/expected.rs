//! The gate's expected failures (`tests/redis-suite/expected-failures.txt`): which failing
//! tests and aborting units are known, grouped by the missing feature, each with its reason.
//!
//! Format: `## group` headings; entries `unit | test name | reason`. The test name `*` covers
//! every failure of the unit and its abort (a unit of a missing feature); `(aborted)` covers
//! only the unit's abort. `#` starts a comment line. The file may only shrink: an entry that no
//! longer fails is reported so it gets removed.

use super::UnitResult;
use std::collections::BTreeSet;

/// Test name of an entry that covers a whole unit.
pub const WHOLE_UNIT: &str = "*";
/// Test name of an entry that covers a unit's abort.
pub const ABORTED: &str = "(aborted)";

/// One entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// `unit/type/list`.
    pub unit: String,
    /// The test name, [`WHOLE_UNIT`] or [`ABORTED`].
    pub test: String,
    /// The group heading it stands under.
    pub group: String,
}

/// Parses the file; errors name the line.
pub fn parse(text: &str) -> Result<Vec<Entry>, String> {
    let mut group = String::new();
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if let Some(g) = line.strip_prefix("## ") {
            group = g.trim().to_string();
            continue;
        }
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let (unit, rest) = line
            .split_once(" | ")
            .ok_or(format!("line {}: expected 'unit | test | reason'", n + 1))?;
        let (test, reason) = rest
            .rsplit_once(" | ")
            .ok_or(format!("line {}: expected 'unit | test | reason'", n + 1))?;
        if group.is_empty() || reason.trim().is_empty() {
            return Err(format!(
                "line {}: an entry needs a group and a reason",
                n + 1
            ));
        }
        out.push(Entry {
            unit: unit.trim().to_string(),
            test: test.trim().to_string(),
            group: group.clone(),
        });
    }
    Ok(out)
}

/// What the gate found: failures nobody expected, and entries that did not fail.
#[derive(Debug, Default)]
pub struct Verdict {
    /// `unit | test` of failures (or aborts) not in the file.
    pub unexpected: Vec<String>,
    /// Entries of units that ran whose test passed or did not fail (prune them).
    pub stale: Vec<String>,
}

/// Compares the results of the units that ran with the entries.
pub fn judge(entries: &[Entry], results: &[UnitResult]) -> Verdict {
    let mut v = Verdict::default();
    for r in results {
        let mine: Vec<&Entry> = entries.iter().filter(|e| e.unit == r.unit).collect();
        let whole = mine.iter().any(|e| e.test == WHOLE_UNIT);
        let listed: BTreeSet<&str> = mine.iter().map(|e| e.test.as_str()).collect();
        let failed: BTreeSet<&str> = r.failed.iter().map(String::as_str).collect();
        for t in &failed {
            if !whole && !listed.contains(t) {
                v.unexpected.push(format!("{} | {t}", r.unit));
            }
        }
        if r.aborted.is_some() && !whole && !listed.contains(ABORTED) {
            let why = r.aborted.as_deref().unwrap_or("");
            v.unexpected.push(format!("{} | {ABORTED} ({why})", r.unit));
        }
        for e in &mine {
            let still = match e.test.as_str() {
                WHOLE_UNIT => r.aborted.is_some() || !failed.is_empty(),
                ABORTED => r.aborted.is_some(),
                t => {
                    failed.contains(t) || (r.aborted.is_some() && !r.passed.iter().any(|p| p == t))
                }
            };
            if !still {
                v.stale.push(format!("{} | {}", e.unit, e.test));
            }
        }
    }
    v
}

/// The missing feature a failure belongs to, from its unit, test name and message; "not yet
/// compatible" for the rest.
pub fn group_of(unit: &str, test: &str, why: &str) -> &'static str {
    let text = [unit, test, why].join(" ").to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| text.contains(w));
    if has(&[
        "scripting",
        "functions",
        "eval",
        "function ",
        "fcall",
        "script",
        " lua",
    ]) {
        "scripting"
    } else if has(&["stream", "xadd", "xread", "xgroup", "xclaim"]) {
        "streams"
    } else if has(&["geo"]) {
        "geo"
    } else if has(&["hyperloglog", "pfadd", "pfcount", "pfmerge"]) {
        "HyperLogLog"
    } else if has(&["bitfield"]) {
        "BITFIELD"
    } else if has(&["cluster"]) {
        "cluster"
    } else if has(&["module"]) {
        "modules"
    } else if has(&[
        "replica",
        "replication",
        "repl-",
        "block-repl",
        "psync",
        "slaveof",
        "failover",
        "unit/wait",
    ]) {
        "replication"
    } else {
        "not yet compatible"
    }
}

/// Every failure and abort of `results` as entries under their groups' headings.
pub fn entries_for(results: &[UnitResult]) -> String {
    let mut rows: Vec<(&'static str, String)> = Vec::new();
    for r in results {
        for (i, t) in r.failed.iter().enumerate() {
            let why = r.failed_why.get(i).map_or("", String::as_str);
            let why = if why.is_empty() { "fails" } else { why };
            let why = why.replace(" | ", " / ");
            rows.push((
                group_of(&r.unit, t, &why),
                format!("{} | {t} | {why}", r.unit),
            ));
        }
        if let Some(why) = &r.aborted {
            let line = format!("{} | {ABORTED} | {}", r.unit, why.replace(" | ", " / "));
            rows.push((group_of(&r.unit, "", why), line));
        }
    }
    let mut out = String::new();
    let groups = [
        "scripting",
        "streams",
        "geo",
        "HyperLogLog",
        "BITFIELD",
        "replication",
        "cluster",
        "modules",
        "not yet compatible",
    ];
    for g in groups {
        let mine: Vec<&String> = rows
            .iter()
            .filter(|(k, _)| *k == g)
            .map(|(_, l)| l)
            .collect();
        if !mine.is_empty() {
            out.push_str(&format!("\n## {g}\n"));
            mine.iter().for_each(|l| out.push_str(&format!("{l}\n")));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(unit: &str, passed: &[&str], failed: &[&str], aborted: bool) -> UnitResult {
        UnitResult {
            unit: unit.to_string(),
            passed: passed.iter().map(|s| s.to_string()).collect(),
            failed: failed.iter().map(|s| s.to_string()).collect(),
            failed_why: Vec::new(),
            aborted: aborted.then(|| "exception".to_string()),
            secs: 0,
        }
    }

    #[test]
    fn parse_groups_and_entries() {
        let e = parse("# c\n## scripting\nunit/scripting | * | no EVAL\n\n## geo\nunit/geo | GEOADD a | b | no GEO\n")
            .unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(e[1].test, "GEOADD a | b");
        assert_eq!(e[1].group, "geo");
        assert!(parse("unit/x | t | r\n").is_err(), "entry before any group");
        assert!(parse("## g\nunit/x | t\n").is_err(), "no reason");
    }

    #[test]
    fn judge_finds_unexpected_and_stale() {
        let e = parse(
            "## g\nunit/a | t1 | r\nunit/a | t2 | r\nunit/b | * | r\nunit/c | (aborted) | r\n",
        )
        .unwrap();
        let results = [
            result("unit/a", &["t2"], &["t1", "t3"], false),
            result("unit/b", &[], &["x"], true),
            result("unit/c", &["y"], &[], false),
        ];
        let v = judge(&e, &results);
        assert_eq!(v.unexpected, ["unit/a | t3"]);
        assert_eq!(v.stale, ["unit/a | t2", "unit/c | (aborted)"]);
    }
}
