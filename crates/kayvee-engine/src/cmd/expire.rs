//! Expiry commands (EXPIRE family, TTL family, PERSIST) and the active expiry cycle.

use crate::command::CommandSpec;
use crate::{Core, Now};

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[];

/// Keys sampled per database per pass, as Redis's `ACTIVE_EXPIRE_CYCLE_KEYS_PER_LOOP`.
const SAMPLES_PER_PASS: usize = 20;
/// Passes per database per cycle at most (bounds the work of one cron tick).
const PASSES_MAX: usize = 16;

/// Deletes expired keys by sampling, repeating on a database while over a quarter of the sample
/// had expired (Redis's adaptive cycle).
pub fn active_expire_cycle(core: &mut Core, now: Now) {
    for i in 0..core.dbs.len() {
        for _ in 0..PASSES_MAX {
            let rng = &mut core.rng;
            let (sampled, expired) =
                core.dbs[i].active_expire(now.ms(), SAMPLES_PER_PASS, &mut || rng.next_u64());
            if sampled == 0 || expired * 4 <= sampled {
                break;
            }
        }
    }
}
