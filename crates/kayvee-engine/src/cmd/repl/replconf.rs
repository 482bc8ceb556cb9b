//! REPLCONF option value ...: what a replica announces before its PSYNC (`listening-port`,
//! `ip-address`, `capa`), its acknowledgements (`ack`, no reply), and the primary's `getack`.

use crate::argv::Argv;
use crate::error::{CmdResult, Error};
use crate::repl::ReplicaState;
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::Cx;
use alloc::string::String;

/// REPLCONF.
pub fn replconf(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Err(Error::Syntax);
    }
    let mut i = 1;
    while i < args.len() {
        let (opt, val) = (args.get(i), args.get(i + 1));
        match opt.to_ascii_lowercase().as_slice() {
            b"listening-port" => {
                let port = parse_i64(val).ok_or(Error::NotInteger)?;
                cx.core.repl.announced_mut(cx.me).port = port as u16;
            }
            b"ip-address" => {
                let ip = String::from_utf8_lossy(val).into_owned();
                cx.core.repl.announced_mut(cx.me).ip = Some(ip);
            }
            b"capa" => {
                let a = cx.core.repl.announced_mut(cx.me);
                if val.eq_ignore_ascii_case(b"eof") {
                    a.capa_eof = true;
                } else if val.eq_ignore_ascii_case(b"psync2") {
                    a.capa_psync2 = true;
                }
            }
            b"ack" => return ack(cx, args),
            b"getack" => return Ok(()),
            b"rdb-only" => {}
            b"rdb-filter-only" => {
                let functions_only = if val.is_empty() {
                    false
                } else if val.eq_ignore_ascii_case(b"functions") {
                    true
                } else {
                    let text = alloc::format!(
                        "ERR Unsupported rdb-filter-only option: {}",
                        String::from_utf8_lossy(val)
                    );
                    return Err(Error::msg(text));
                };
                cx.core.repl.announced_mut(cx.me).functions_only = functions_only;
            }
            _ => {
                let text = alloc::format!(
                    "ERR Unrecognized REPLCONF option: {}",
                    String::from_utf8_lossy(opt)
                );
                return Err(Error::msg(text));
            }
        }
        i += 2;
    }
    out.ok();
    Ok(())
}

/// REPLCONF ACK offset [FACK offset]: a replica's acknowledgement; no reply.
fn ack(cx: &mut Cx<'_>, args: &Argv<'_>) -> CmdResult {
    let Some(offset) = parse_i64(args.get(2)).and_then(|o| u64::try_from(o).ok()) else {
        return Ok(());
    };
    let now_ms = cx.now_ms();
    if let Some(r) = cx.core.repl.replica_mut(cx.me) {
        r.ack_offset = r.ack_offset.max(offset);
        r.ack_ms = now_ms;
        // After a diskless RDB the first ACK says it was loaded: the stream may follow.
        if r.state == ReplicaState::Streaming {
            r.state = ReplicaState::Online;
        }
    }
    if !cx.core.repl.waiters.is_empty() {
        for (h, n) in cx.core.repl.take_done_waiters(now_ms) {
            cx.core
                .blocking
                .push_wakeup(h, alloc::vec![crate::reply::Reply::Int(n)]);
        }
    }
    Ok(())
}
