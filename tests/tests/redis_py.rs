//! redis-py (Debian's python3-redis 4.3.4) against kayvee-server: runs
//! `tests/py/test_redis_py.py <port>` (transactional pipelines, WATCH retry loops, the PubSub
//! object, ACL denial paths, CLIENT LIST, INFO, CONFIG) and fails on a non-zero exit. Skipped,
//! with a printed reason, only when no python3 can import `redis` and `KAYVEE_REQUIRE_REDIS`
//! is unset.

use kayvee_tests::{redis_required, workspace_root, Server};
use std::process::{Command, Stdio};

/// A python3 that can import redis: Debian's first (the package installs there), then PATH's.
fn python_with_redis() -> Option<&'static str> {
    ["/usr/bin/python3", "python3"].into_iter().find(|py| {
        Command::new(py)
            .args(["-c", "import redis"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

#[test]
fn redis_py_suite_passes() {
    let Some(python) = python_with_redis() else {
        assert!(
            !redis_required(),
            "python3-redis is missing (apt-get install python3-redis)"
        );
        eprintln!("skipped: no python3 with the redis module (apt-get install python3-redis)");
        return;
    };
    let Some(server) = Server::kayvee(&[]) else {
        return;
    };
    let script = workspace_root().join("tests/py/test_redis_py.py");
    let out = Command::new(python)
        .arg(&script)
        .arg(server.port().to_string())
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "redis-py suite failed ({}):\n{stdout}\n{stderr}\nserver log:\n{}",
        out.status,
        server.log_tail()
    );
    assert!(stdout.contains("all tests passed"), "{stdout}");
}
