//! ROLE: `master offset [[ip port offset] ...]`, or `slave host port state offset`.

use crate::argv::Argv;
use crate::error::CmdResult;
use crate::repl::{replica_ip, ReplicaState};
use crate::reply::ReplySink;
use crate::Cx;
use alloc::vec::Vec;

/// ROLE.
pub fn role(cx: &mut Cx<'_>, _args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let repl = &cx.core.repl;
    if let Some(p) = &repl.primary {
        out.array(5);
        out.bulk(b"slave");
        out.bulk(p.host.as_bytes());
        out.int(i64::from(p.port));
        out.bulk(p.state.role_word().as_bytes());
        let offset = if p.state == crate::repl::LinkState::Connected {
            repl.offset as i64
        } else {
            -1
        };
        out.int(offset);
        return Ok(());
    }
    out.array(3);
    out.bulk(b"master");
    out.int(repl.offset as i64);
    let online: Vec<_> = repl
        .replicas
        .iter()
        .filter(|r| r.state == ReplicaState::Online)
        .collect();
    out.array(online.len());
    for r in online {
        let ip = match cx.clients.get(r.handle) {
            Some(c) => replica_ip(&r.announced, &c.conn.transport),
            None => alloc::string::String::new(),
        };
        out.array(3);
        out.bulk(ip.as_bytes());
        out.bulk(alloc::format!("{}", r.announced.port).as_bytes());
        out.bulk(alloc::format!("{}", r.ack_offset).as_bytes());
    }
    Ok(())
}
