//! DEBUG POPULATE count [prefix] [size]: creates string keys `prefix:N` holding `value:N`
//! (cut or zero-padded to `size` bytes when given), skipping names that exist. Not propagated,
//! as in Redis.

use crate::argv::Argv;
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::value::Value;
use crate::Cx;
use kayvee_pds::SmallBytes;

/// A non-negative integer argument, with Redis's error otherwise.
fn non_negative(arg: &[u8]) -> Result<usize, Error> {
    parse_i64(arg)
        .and_then(|v| usize::try_from(v).ok())
        .ok_or_else(|| Error::msg("ERR value is out of range, must be positive"))
}

pub(super) fn populate(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let count = non_negative(args.get(2))?;
    let prefix: &[u8] = if args.len() > 3 { args.get(3) } else { b"key" };
    let size = if args.len() > 4 {
        non_negative(args.get(4))?
    } else {
        0
    };
    let now = cx.now_ms();
    let db = cx.db();
    let mut key = alloc::vec::Vec::with_capacity(prefix.len() + 21);
    for i in 0..count {
        key.clear();
        key.extend_from_slice(prefix);
        key.extend_from_slice(alloc::format!(":{i}").as_bytes());
        if db.contains(&key, now) {
            continue;
        }
        let mut value = alloc::format!("value:{i}").into_bytes();
        if size > 0 {
            value.resize(size, 0);
        }
        db.set(&key, Value::Str(SmallBytes::from_vec(value)), now, false);
    }
    out.ok();
    Ok(())
}
