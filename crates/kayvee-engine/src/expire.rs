//! Active expiry: the cycle the engine's cron runs to delete keys whose TTL passed without
//! anyone reading them (lazy expiry on access is each database's own, see [`crate::db`]).

use crate::db::Db;
use crate::time::Now;

/// Keys with a TTL checked per database per step, as Redis's
/// `ACTIVE_EXPIRE_CYCLE_KEYS_PER_LOOP`.
const KEYS_PER_STEP: usize = 20;
/// Steps per database per cycle at most (bounds the work of one cron tick).
const STEPS_MAX: usize = 16;

/// Deletes expired keys, walking each database's TTLs from where the last cycle stopped and
/// going on while over a quarter of a step's keys had expired (Redis's adaptive cycle).
pub fn active_expire_cycle(dbs: &mut [Db], now: Now) {
    for db in dbs.iter_mut() {
        for _ in 0..STEPS_MAX {
            let (checked, expired) = db.active_expire_step(now.ms(), KEYS_PER_STEP);
            if checked == 0 || expired * 4 <= checked {
                break;
            }
        }
    }
}
