//! Getting Redis 7.0.15's test suite: Debian's `redis` source package, downloaded with a private
//! apt configuration (its own deb-src sources list and package lists under
//! `target/redis-suite/apt/`) so the machine's apt configuration and state are left alone, then
//! unpacked with `dpkg-source -x` (Debian's patches applied: they match Debian's redis-server).
//!
//! The mirror comes from the machine's own apt sources (`/etc/apt/sources.list` and
//! `/etc/apt/sources.list.d/*.{list,sources}`): the entries for this Debian release (suites
//! named after `VERSION_CODENAME`), turned into deb-src entries. No host name is written here.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The upstream version the suite must be.
pub const REDIS_VERSION: &str = "7.0.15";

/// Returns the unpacked source tree (`<cache>/redis-7.0.15`), fetching it on first use.
pub fn source_tree(cache: &Path) -> Result<PathBuf, String> {
    let tree = cache.join(format!("redis-{REDIS_VERSION}"));
    if tree.join("runtest").is_file() && tree.join("tests/test_helper.tcl").is_file() {
        return Ok(tree);
    }
    let download = cache.join("download");
    std::fs::create_dir_all(&download).map_err(|e| format!("{}: {e}", download.display()))?;
    let dsc = match find_dsc(&download) {
        Some(dsc) => dsc,
        None => {
            apt_download(cache, &download)?;
            find_dsc(&download).ok_or("apt-get source left no redis_*.dsc")?
        }
    };
    unpack(&dsc, &tree)?;
    Ok(tree)
}

/// The downloaded `redis_7.0.15-*.dsc`, if any.
fn find_dsc(dir: &Path) -> Option<PathBuf> {
    let prefix = format!("redis_{REDIS_VERSION}-");
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.starts_with(&prefix) && name.ends_with(".dsc")
        })
}

/// `apt-get update` and `apt-get source --download-only redis` with the private configuration.
fn apt_download(cache: &Path, download: &Path) -> Result<(), String> {
    let apt = cache.join("apt");
    let lists = apt.join("lists");
    std::fs::create_dir_all(lists.join("partial")).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(apt.join("cache/archives/partial")).map_err(|e| e.to_string())?;
    let sources = apt.join("redis-suite.sources");
    let text = deb_src_entries()?;
    std::fs::write(&sources, text).map_err(|e| format!("{}: {e}", sources.display()))?;
    let options = [
        format!("Dir::Etc::SourceList={}", sources.display()),
        "Dir::Etc::SourceParts=/dev/null".to_string(),
        format!("Dir::State::Lists={}", lists.display()),
        // apt's own caches too, so the machine's /var/cache/apt is not rewritten.
        format!("Dir::Cache={}", apt.join("cache").display()),
        // The private lists need no lock shared with the machine's apt.
        "Debug::NoLocking=1".to_string(),
    ];
    let apt_get = |args: &[&str]| -> Result<(), String> {
        let mut cmd = Command::new("apt-get");
        cmd.current_dir(download);
        for o in &options {
            cmd.args(["-o", o]);
        }
        cmd.args(args);
        eprintln!("xtask: apt-get (private sources) {}", args.join(" "));
        let status = cmd
            .status()
            .map_err(|e| format!("cannot run apt-get: {e}"))?;
        match status.success() {
            true => Ok(()),
            false => Err(format!("apt-get {} failed ({status})", args.join(" "))),
        }
    };
    apt_get(&["-qq", "update"])?;
    apt_get(&["-q", "source", "--download-only", "redis"])
}

/// Unpacks the source package into `tree` (through a temporary directory, so a half-unpacked
/// tree is never taken for a good one).
fn unpack(dsc: &Path, tree: &Path) -> Result<(), String> {
    let tmp = tree.with_extension("unpacking");
    let _ = std::fs::remove_dir_all(&tmp);
    let _ = std::fs::remove_dir_all(tree);
    eprintln!("xtask: dpkg-source -x {}", dsc.display());
    let status = Command::new("dpkg-source")
        .arg("-x")
        .arg(dsc)
        .arg(&tmp)
        .status()
        .map_err(|e| format!("cannot run dpkg-source (install dpkg-dev): {e}"))?;
    if !status.success() {
        return Err(format!(
            "dpkg-source -x {} failed ({status})",
            dsc.display()
        ));
    }
    std::fs::rename(&tmp, tree).map_err(|e| e.to_string())
}

/// The machine's Debian entries for this release, as a deb822 deb-src sources file.
fn deb_src_entries() -> Result<String, String> {
    let codename = os_codename().ok_or("no VERSION_CODENAME in /etc/os-release")?;
    let mut entries = Vec::new();
    let mut files = vec![PathBuf::from("/etc/apt/sources.list")];
    if let Ok(dir) = std::fs::read_dir("/etc/apt/sources.list.d") {
        let mut more: Vec<PathBuf> = dir.flatten().map(|e| e.path()).collect();
        more.sort();
        files.extend(more);
    }
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        match file.extension().and_then(|e| e.to_str()) {
            Some("sources") => entries.extend(parse_deb822(&text, &codename)),
            Some("list") => entries.extend(parse_one_line(&text, &codename)),
            _ => {}
        }
    }
    if entries.is_empty() {
        return Err(format!("no apt source for Debian {codename} in /etc/apt"));
    }
    Ok(entries.join("\n"))
}

/// `VERSION_CODENAME` from /etc/os-release.
fn os_codename() -> Option<String> {
    let text = std::fs::read_to_string("/etc/os-release").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("VERSION_CODENAME="))
        .map(|v| v.trim_matches('"').to_string())
}

/// One deb-src stanza for `uri` with the suites of this release.
fn stanza(uri: &str, suites: &[&str], components: &str, signed_by: Option<&str>) -> String {
    let mut s = format!(
        "Types: deb-src\nURIs: {uri}\nSuites: {}\nComponents: {components}\n",
        suites.join(" ")
    );
    if let Some(k) = signed_by {
        s.push_str(&format!("Signed-By: {k}\n"));
    }
    s
}

/// Suites named after the release (`bookworm`, `bookworm-updates`, `bookworm-security`).
fn release_suites<'a>(suites: &[&'a str], codename: &str) -> Vec<&'a str> {
    suites
        .iter()
        .copied()
        .filter(|s| *s == codename || s.starts_with(&format!("{codename}-")))
        .collect()
}

/// The deb822 stanzas of type deb (enabled) for the release.
fn parse_deb822(text: &str, codename: &str) -> Vec<String> {
    let mut out = Vec::new();
    for block in text.split("\n\n") {
        let field = |name: &str| {
            block
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().to_string())
        };
        let types = field("Types:").unwrap_or_default();
        if !types.split_whitespace().any(|t| t == "deb")
            || field("Enabled:").as_deref() == Some("no")
        {
            continue;
        }
        let (Some(uris), Some(suites)) = (field("URIs:"), field("Suites:")) else {
            continue;
        };
        let suites: Vec<&str> = suites.split_whitespace().collect();
        let suites = release_suites(&suites, codename);
        let components = field("Components:").unwrap_or_else(|| "main".to_string());
        let signed_by = field("Signed-By:");
        for uri in uris.split_whitespace() {
            if !suites.is_empty() {
                out.push(stanza(uri, &suites, &components, signed_by.as_deref()));
            }
        }
    }
    out
}

/// One-line `deb [options] uri suite components...` entries for the release.
fn parse_one_line(text: &str, codename: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        let Some(rest) = line.strip_prefix("deb ") else {
            continue;
        };
        let mut words: Vec<&str> = rest.split_whitespace().collect();
        let mut signed_by = None;
        if words.first().is_some_and(|w| w.starts_with('[')) {
            while let Some(w) = words.first().copied() {
                words.remove(0);
                if let Some(k) = w.trim_start_matches('[').strip_prefix("signed-by=") {
                    signed_by = Some(k.trim_end_matches(']').to_string());
                }
                if w.ends_with(']') {
                    break;
                }
            }
        }
        if words.len() < 3 || release_suites(&[words[1]], codename).is_empty() {
            continue;
        }
        let components = words[2..].join(" ");
        out.push(stanza(
            words[0],
            &[words[1]],
            &components,
            signed_by.as_deref(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deb822_keeps_release_suites_only() {
        let text = "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n\
                    Components: main\nSigned-By: /k.gpg\n\nTypes: deb\nURIs: https://other.example\n\
                    Suites: nodistro\nComponents: main\n";
        let got = parse_deb822(text, "bookworm");
        assert_eq!(got.len(), 1);
        assert!(got[0].starts_with("Types: deb-src\nURIs: http://mirror.example/debian\n"));
        assert!(got[0].contains("Suites: bookworm bookworm-updates\n"));
        assert!(got[0].contains("Signed-By: /k.gpg\n"));
    }

    #[test]
    fn one_line_entries_with_options() {
        let text = "# comment\ndeb [arch=amd64 signed-by=/k.gpg] http://m.example/debian bookworm main contrib\n\
                    deb http://m.example/debian trixie main\n";
        let got = parse_one_line(text, "bookworm");
        assert_eq!(got.len(), 1);
        assert!(got[0].contains("Components: main contrib\n"));
        assert!(got[0].contains("Signed-By: /k.gpg\n"));
    }
}
