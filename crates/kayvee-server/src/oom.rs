//! `oom-score-adj` and `oom-score-adj-values` (Linux): the process's `/proc/self/oom_score_adj`
//! follows the configuration and the server's role, as Redis's `setOOMScoreAdj` sets it.
//!
//! While `oom-score-adj` is on, the score is the value of the server's class (primary, replica;
//! the third is the save-writer child's, which it writes itself: [`child_score`]), added to
//! the score the process had when the setting was turned on (`yes` / `relative`) or alone
//! (`absolute`), within -1000..=1000. Turning it off puts that first score back; while it is
//! off the file is never touched. The loop checks after every read it hands the driver and
//! every pass (one map lookup while the setting is off), so a CONFIG SET or REPLICAOF is in
//! force before its reply goes out.

use kayvee_engine::config::table::Val;
use kayvee_engine::Engine;
use std::sync::atomic::{AtomicI64, Ordering};
use tracing::warn;

/// The score a save-writer child is to write (`i64::MIN`: none, the setting is off).
static CHILD_SCORE: AtomicI64 = AtomicI64::new(i64::MIN);

/// The `oom_score_adj` of a background child now (the third class), if the setting is on.
pub fn child_score() -> Option<i64> {
    Some(CHILD_SCORE.load(Ordering::Relaxed)).filter(|&s| s != i64::MIN)
}

/// The file the kernel reads the score from.
const PATH: &str = "/proc/self/oom_score_adj";

/// What was written to the score file, and what it held before.
#[derive(Default)]
pub struct OomScore {
    /// The score before Kayvee changed it (read when the setting was turned on).
    base: Option<i64>,
    /// The score last written while the setting is on.
    applied: Option<i64>,
}

impl OomScore {
    /// Writes the score the configuration and role call for, if it changed.
    #[inline]
    pub fn sync(&mut self, engine: &Engine) {
        // No parameter of `extra` set and no score applied (the common case, after every
        // read): the setting is off and nothing is to restore.
        if engine.core.config.extra.is_empty() && self.applied.is_none() {
            self.base = None;
            return;
        }
        self.sync_set(engine);
    }

    /// [`OomScore::sync`] once some parameter of `extra` is set.
    #[inline(never)]
    fn sync_set(&mut self, engine: &Engine) {
        let config = &engine.core.config.extra;
        let mode = match config.get("oom-score-adj") {
            Some(Val::Str(m)) if m != b"no" => m.as_slice(),
            _ => return self.restore(),
        };
        let values = match config.get("oom-score-adj-values") {
            Some(Val::Str(v)) => parse_values(v),
            _ => [0, 200, 800],
        };
        let class = usize::from(engine.core.repl.primary.is_some());
        let Some(base) = self.base.or_else(read_score) else {
            return;
        };
        self.base = Some(base);
        let relative = if mode == b"absolute" { 0 } else { base };
        let wanted = (values[class] + relative).clamp(-1000, 1000);
        CHILD_SCORE.store((values[2] + relative).clamp(-1000, 1000), Ordering::Relaxed);
        if self.applied != Some(wanted) {
            write_score(wanted);
            self.applied = Some(wanted);
        }
    }

    /// The setting is off: the score from before goes back, once.
    fn restore(&mut self) {
        CHILD_SCORE.store(i64::MIN, Ordering::Relaxed);
        if let (Some(base), Some(_)) = (self.base, self.applied) {
            write_score(base);
        }
        (self.base, self.applied) = (None, None);
    }
}

/// `oom-score-adj-values`' three numbers (checked when set).
fn parse_values(text: &[u8]) -> [i64; 3] {
    let mut out = [0, 200, 800];
    let words = text.split(|&b| b == b' ').filter(|w| !w.is_empty());
    for (slot, w) in out.iter_mut().zip(words) {
        *slot = std::str::from_utf8(w)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(*slot);
    }
    out
}

fn read_score() -> Option<i64> {
    match std::fs::read_to_string(PATH) {
        Ok(text) => text.trim().parse().ok(),
        Err(e) => {
            warn!("Unable to read oom_score_adj: {e}");
            None
        }
    }
}

/// Writes this process's score.
pub fn write_score(score: i64) {
    if let Err(e) = std::fs::write(PATH, format!("{score}\n")) {
        warn!("Unable to write oom_score_adj: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_as_set() {
        assert_eq!(parse_values(b"10 -20 30"), [10, -20, 30]);
        assert_eq!(parse_values(b""), [0, 200, 800]);
    }
}
