//! `cargo test --workspace`, its test binaries a few at a time: cargo runs them one after the
//! other (and holds the build directory's lock meanwhile), while most of the long ones wait on
//! servers they start (replication, Sentinel, the differential test against redis-server),
//! not on the CPU. The binaries come from `cargo test --no-run --message-format=json`; each
//! runs as cargo would run it (in its package's directory, with `CARGO_MANIFEST_DIR`), its
//! output printed whole when it ends; the doctests are one more job, a cargo of their own.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Instant;

/// Test binaries (or the doctests) run at once: the CI machine has two cores, and the long
/// binaries mostly wait.
const JOBS: usize = 3;

/// Binaries that take a minute or more in a debug build, started first so the jobs end
/// together (a binary's name is its test target's).
const SLOW_FIRST: &[&str] = &["replication", "differential", "fuzz_smoke", "sentinel"];

/// One thing to run.
enum Job {
    /// A test binary: its target's name, its package's directory, the executable.
    Binary {
        name: String,
        dir: PathBuf,
        exe: PathBuf,
    },
    /// `cargo test --workspace --doc`.
    Doctests,
}

impl Job {
    fn label(&self) -> String {
        match self {
            Job::Binary { name, dir, .. } => format!(
                "{} ({})",
                name,
                dir.file_name().map_or("?".into(), |d| d.to_string_lossy())
            ),
            Job::Doctests => "doctests".to_string(),
        }
    }
}

/// Runs every test of the workspace with `envs`; fails naming the binaries that failed.
pub fn run(envs: &[(&str, &str)]) -> Result<(), String> {
    let mut jobs = binaries()?;
    jobs.sort_by_key(|j| {
        match j {
            Job::Binary { name, .. } => SLOW_FIRST.iter().position(|s| s == name),
            Job::Doctests => None,
        }
        .unwrap_or(SLOW_FIRST.len())
    });
    jobs.push(Job::Doctests);
    eprintln!(
        "xtask: {} test binaries and the doctests, {JOBS} at a time",
        jobs.len() - 1
    );
    let queue = Mutex::new(VecDeque::from(jobs));
    let failed = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..JOBS {
            scope.spawn(|| loop {
                // The queue's lock is let go before the job runs (a `while let` on the lock
                // would hold it for the loop's body: one job at a time).
                let next = queue.lock().unwrap().pop_front();
                let Some(job) = next else {
                    break;
                };
                let started = Instant::now();
                let (ok, output) = run_job(&job, envs);
                // One binary's output at a time, whole.
                let mut failed = failed.lock().unwrap();
                eprintln!(
                    "xtask: ---- {} ({} s{}) ----",
                    job.label(),
                    started.elapsed().as_secs(),
                    if ok { "" } else { ", FAILED" }
                );
                eprint!("{output}");
                if !ok {
                    failed.push(job.label());
                }
            });
        }
    });
    let failed = failed.into_inner().unwrap();
    match failed.is_empty() {
        true => Ok(()),
        false => Err(format!("tests failed: {}", failed.join(", "))),
    }
}

/// Runs one job; its success and its output (stdout, then stderr).
fn run_job(job: &Job, envs: &[(&str, &str)]) -> (bool, String) {
    let mut cmd = match job {
        Job::Binary { dir, exe, .. } => {
            let mut c = Command::new(exe);
            c.current_dir(dir).env("CARGO_MANIFEST_DIR", dir);
            c
        }
        Job::Doctests => {
            let mut c = Command::new(super::cargo_bin());
            c.current_dir(super::root())
                .args(["test", "--workspace", "--doc"]);
            c
        }
    };
    cmd.envs(envs.iter().copied()).stdin(Stdio::null());
    match cmd.output() {
        Ok(out) => {
            let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.push_str(&String::from_utf8_lossy(&out.stderr));
            (out.status.success(), text)
        }
        Err(e) => (false, format!("cannot run {}: {e}\n", job.label())),
    }
}

/// The workspace's test binaries, built (`cargo test --no-run`).
fn binaries() -> Result<Vec<Job>, String> {
    eprintln!("xtask: cargo test --workspace --no-run --message-format=json");
    let out = Command::new(super::cargo_bin())
        .current_dir(super::root())
        .args([
            "test",
            "--workspace",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !out.status.success() {
        return Err("cargo test --no-run failed".to_string());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let jobs: Vec<Job> = text.lines().filter_map(artifact).collect();
    match jobs.is_empty() {
        true => Err("cargo test --no-run named no test binaries".to_string()),
        false => Ok(jobs),
    }
}

/// A test binary from one line of cargo's JSON messages (a `compiler-artifact` of a target
/// built for tests, with an executable).
fn artifact(line: &str) -> Option<Job> {
    if !line.contains(r#""reason":"compiler-artifact""#) {
        return None;
    }
    // The profile's `test` (a target's own `test` only says whether it is tested by default).
    let profile = &line[line.find(r#""profile":{"#)?..];
    if !profile[..profile.find('}')?].contains(r#""test":true"#) {
        return None;
    }
    let exe = string_field(line, "executable")?;
    let manifest = PathBuf::from(string_field(line, "manifest_path")?);
    let target = &line[line.find(r#""target":{"#)?..];
    Some(Job::Binary {
        name: string_field(target, "name")?,
        dir: manifest.parent()?.to_path_buf(),
        exe: PathBuf::from(exe),
    })
}

/// The first `"field":"value"` string in `json` (cargo's paths and names hold no escapes
/// here; a value with one is not taken).
fn string_field(json: &str, field: &str) -> Option<String> {
    let key = format!("\"{field}\":\"");
    let start = json.find(&key)? + key.len();
    let len = json[start..].find('"')?;
    let value = &json[start..start + len];
    (!value.contains('\\')).then(|| value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_binaries_are_found_in_cargos_messages() {
        let line = r#"{"reason":"compiler-artifact","package_id":"path+file:///w/tests#kayvee-tests@0.1.0","manifest_path":"/w/tests/Cargo.toml","target":{"kind":["test"],"crate_types":["bin"],"name":"replication","src_path":"/w/tests/tests/replication.rs","edition":"2021","doc":false,"doctest":false,"test":true},"profile":{"opt_level":"0","debuginfo":2,"debug_assertions":true,"overflow_checks":true,"test":true},"features":[],"filenames":["/w/target/debug/deps/replication-1"],"executable":"/w/target/debug/deps/replication-1","fresh":true}"#;
        match artifact(line) {
            Some(Job::Binary { name, dir, exe }) => {
                assert_eq!(name, "replication");
                assert_eq!(dir, PathBuf::from("/w/tests"));
                assert_eq!(exe, PathBuf::from("/w/target/debug/deps/replication-1"));
            }
            _ => panic!("not found"),
        }
        // The server binary the integration tests need is built too, not for tests.
        let bin = line
            .replace(
                r#""overflow_checks":true,"test":true"#,
                r#""overflow_checks":true,"test":false"#,
            )
            .replace(r#""kind":["test"]"#, r#""kind":["bin"]"#);
        assert!(bin.contains(r#""doctest":false,"test":true"#));
        assert!(artifact(&bin).is_none());
        assert!(artifact(r#"{"reason":"build-script-executed"}"#).is_none());
    }
}
