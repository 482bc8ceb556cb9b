//! One client session, independent of its byte transport (Unix socket today, a Xen shared
//! ring later): bytes in, decoded requests run on the engine, reply bytes out.

use std::collections::HashMap;

use kayvee_engine::xenstore::{ConnId, Op, Xenstored};
use kayvee_engine::Now;
use kayvee_xswire::{encode_event, encode_reply, parse_request, DecodeError, Decoder, MsgType};

/// Protocol state of one connection.
#[derive(Debug, Default)]
pub struct Session {
    decoder: Decoder,
    /// Bytes waiting to be sent.
    pub out: Vec<u8>,
}

/// A line for the trace file.
pub type TraceLine = String;

impl Session {
    /// A fresh session.
    pub fn new() -> Self {
        Session::default()
    }

    /// Feed received bytes and run every whole request. Replies go to this session's `out`;
    /// watch events to the sessions they are for. `Err` means the connection must be closed.
    pub fn received(
        conn: ConnId,
        bytes: &[u8],
        xs: &mut Xenstored,
        sessions: &mut HashMap<ConnId, Session>,
        now: Now,
        trace: &mut Option<Vec<TraceLine>>,
    ) -> Result<(), DecodeError> {
        let me = sessions.get_mut(&conn).expect("session exists");
        me.decoder.push(bytes);
        loop {
            let me = sessions.get_mut(&conn).expect("session exists");
            let Some(msg) = me.decoder.next_message()? else {
                return Ok(());
            };
            let op = parse_request(msg.header.ty, &msg.payload);
            let reply = xs.handle(conn, msg.header.tx_id, &op, now);
            if let Some(t) = trace.as_mut() {
                let ty = MsgType::from_u32(msg.header.ty).map_or("XS_UNKNOWN", MsgType::name);
                let payload = String::from_utf8_lossy(&msg.payload).replace('\0', "|");
                t.push(format!(
                    "IN  {conn} {ty} tx{} \"{payload}\"",
                    msg.header.tx_id
                ));
                t.push(format!("OUT {conn} {reply:?}"));
            }
            // cxenstored sends the events a request fires before its reply, except WATCH's
            // immediate event, which follows the OK.
            if matches!(op, Op::Watch(..)) {
                encode_reply(&mut me.out, &msg.header, &reply);
                deliver_events(xs, sessions);
            } else {
                deliver_events(xs, sessions);
                let me = sessions.get_mut(&conn).expect("session exists");
                encode_reply(&mut me.out, &msg.header, &reply);
            }
        }
    }
}

/// Move queued watch events into their sessions' output.
pub fn deliver_events(xs: &mut Xenstored, sessions: &mut HashMap<ConnId, Session>) {
    for ev in xs.take_events() {
        if let Some(s) = sessions.get_mut(&ev.conn) {
            encode_event(&mut s.out, &ev.path, &ev.token);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kayvee_engine::xenstore::XsConfig;
    use kayvee_xswire::{encode, Header};

    #[test]
    fn watch_reply_then_event_then_oversize_closes() {
        let mut xs = Xenstored::new(XsConfig::default());
        let mut sessions = HashMap::new();
        xs.connect(1, 0);
        sessions.insert(1, Session::new());
        let mut wire = Vec::new();
        encode(&mut wire, 4, 9, 0, b"/w\0tok\0");
        Session::received(1, &wire, &mut xs, &mut sessions, Now::default(), &mut None).unwrap();
        let out = &sessions[&1].out;
        assert_eq!(
            &out[..16],
            &Header {
                ty: 4,
                req_id: 9,
                tx_id: 0,
                len: 3
            }
            .bytes()
        );
        assert_eq!(&out[16..19], b"OK\0");
        assert_eq!(
            &out[19..35],
            &Header {
                ty: 15,
                req_id: 0,
                tx_id: 0,
                len: 7
            }
            .bytes()
        );
        let mut big = Vec::new();
        encode(&mut big, 11, 0, 0, &[b'a'; 4097]);
        let r = Session::received(1, &big, &mut xs, &mut sessions, Now::default(), &mut None);
        assert!(r.is_err());
    }
}
