//! One client session, independent of its byte transport (Unix socket today, a Xen shared
//! ring later): bytes in, decoded requests run on the store, reply bytes out.

use std::collections::VecDeque;
use std::ops::Index;

use kayvee_xenstore::Now;
use kayvee_xenstore::{ConnId, Op, Reply, Xenstored, XsError};
use kayvee_xswire::{encode_event, encode_reply, parse_request, DecodeError, Decoder, MsgType};

/// Protocol state of one connection.
#[derive(Debug, Default)]
pub struct Session {
    decoder: Decoder,
    /// Bytes waiting to be sent.
    pub out: Vec<u8>,
    /// End offsets in `out` of the replies not yet sent (outstanding requests).
    replies: VecDeque<usize>,
    /// Requests are waiting in the decoder because the store said not to read
    /// (outstanding or memory quota); run them again once output drains.
    pub held: bool,
    /// For a guest: the output size from which further watch events are dropped, so a guest
    /// that never reads its ring cannot grow the daemon's memory (its replies are bounded by
    /// the outstanding quota already). `None`: unbounded (dom0's socket clients).
    pub event_limit: Option<usize>,
    /// Watch events dropped at `event_limit`.
    pub dropped_events: u64,
}

/// The sessions of a daemon in a slab indexed by connection id (the id is the slot, so the
/// event loop finds a session without hashing), and the list of sessions whose output went
/// from empty to pending since the shell last flushed (so it writes only those, not every
/// connection per loop pass).
#[derive(Debug, Default)]
pub struct Sessions {
    slots: Vec<Option<Session>>,
    /// Connections with output to send, each once.
    dirty: Vec<ConnId>,
}

impl Sessions {
    /// An empty table.
    pub fn new() -> Self {
        Sessions::default()
    }

    /// The lowest free id (never 0: that is the listener's token).
    pub fn free_id(&self) -> ConnId {
        let free = self.slots.iter().skip(1).position(Option::is_none);
        free.map_or(self.slots.len().max(1), |i| i + 1) as ConnId
    }

    /// Put a session at `id`.
    pub fn insert(&mut self, id: ConnId, s: Session) {
        let i = id as usize;
        if self.slots.len() <= i {
            self.slots.resize_with(i + 1, || None);
        }
        self.slots[i] = Some(s);
    }

    /// Drop the session at `id`.
    pub fn remove(&mut self, id: ConnId) -> Option<Session> {
        self.slots.get_mut(id as usize)?.take()
    }

    /// The session at `id`.
    pub fn get(&self, id: &ConnId) -> Option<&Session> {
        self.slots.get(*id as usize)?.as_ref()
    }

    /// The session at `id`, mutably.
    pub fn get_mut(&mut self, id: &ConnId) -> Option<&mut Session> {
        self.slots.get_mut(*id as usize)?.as_mut()
    }

    /// Take the connections that got output since the last call.
    pub fn take_dirty(&mut self, into: &mut Vec<ConnId>) {
        into.clear();
        std::mem::swap(into, &mut self.dirty);
    }

    /// Note that `id` has output waiting (the transport flushes it on writability).
    pub fn mark_dirty(&mut self, id: ConnId) {
        self.dirty.push(id);
    }
}

impl Index<&ConnId> for Sessions {
    type Output = Session;

    /// The session at `id`; panics when there is none.
    fn index(&self, id: &ConnId) -> &Session {
        self.get(id).expect("session exists")
    }
}

/// A check the shell runs on each request before the store sees it; an error becomes the
/// request's reply. INTRODUCE uses it: the guest's page is mapped and its channel bound
/// first, so a domain that cannot be reached gets EINVAL, as cxenstored answers.
pub type Admit<'a> = &'a mut dyn FnMut(ConnId, &Op, &Xenstored) -> Result<(), XsError>;

/// Admit every request (a shell without guests).
pub fn admit_all(_: ConnId, _: &Op, _: &Xenstored) -> Result<(), XsError> {
    Ok(())
}

/// A line for the trace file.
pub type TraceLine = String;

impl Session {
    /// A fresh session.
    pub fn new() -> Self {
        Session::default()
    }

    /// A fresh session for a guest's ring: watch events stop queueing at `event_limit` bytes
    /// of pending output.
    pub fn guest(event_limit: usize) -> Self {
        Session {
            event_limit: Some(event_limit),
            ..Session::default()
        }
    }

    /// Feed received bytes and run every whole request. Replies go to this session's `out`;
    /// watch events to the sessions they are for. `Err` means the connection must be closed.
    pub fn received(
        conn: ConnId,
        bytes: &[u8],
        xs: &mut Xenstored,
        sessions: &mut Sessions,
        now: Now,
        trace: &mut Option<Vec<TraceLine>>,
        admit: Admit<'_>,
    ) -> Result<(), DecodeError> {
        let me = sessions.get_mut(&conn).expect("session exists");
        me.decoder.push(bytes);
        loop {
            let me = sessions.get_mut(&conn).expect("session exists");
            // Flow control is asked when a request is waiting (not once more after the last
            // one): the transport then reads more, at most one buffer, which is held here.
            if me.decoder.pending() == 0 {
                me.held = false;
                return Ok(());
            }
            me.held = !xs.may_read(conn, me.replies.len());
            if me.held {
                return Ok(());
            }
            let Some((header, payload)) = me.decoder.next_frame()? else {
                return Ok(());
            };
            let op = parse_request(header.ty, payload);
            let traced_in = trace.as_ref().map(|_| {
                let ty = MsgType::from_u32(header.ty).map_or("XS_UNKNOWN", MsgType::name);
                let payload = String::from_utf8_lossy(payload).replace('\0', "|");
                format!("IN  {conn} {ty} tx{} \"{payload}\"", header.tx_id)
            });
            let is_watch = matches!(op, Op::Watch(..));
            let reply = match admit(conn, &op, xs) {
                Ok(()) => xs.handle_owned(conn, header.tx_id, op, now),
                Err(e) => Reply::Error(e),
            };
            if let (Some(t), Some(line)) = (trace.as_mut(), traced_in) {
                t.push(line);
                t.push(format!("OUT {conn} {reply:?}"));
            }
            // cxenstored sends the events a request fires before its reply, except WATCH's
            // immediate event, which follows the OK.
            if is_watch {
                reply_to(sessions, conn, &header, &reply);
                deliver_events(xs, sessions);
            } else {
                deliver_events(xs, sessions);
                reply_to(sessions, conn, &header, &reply);
            }
        }
    }
}

impl Session {
    /// Queue a reply and remember where it ends (it is outstanding until sent).
    fn reply(&mut self, header: &kayvee_xswire::Header, reply: &kayvee_xenstore::Reply) {
        encode_reply(&mut self.out, header, reply);
        self.replies.push_back(self.out.len());
    }

    /// The transport sent the first `n` bytes of `out`: drop them and the replies they
    /// completed.
    pub fn sent(&mut self, n: usize) {
        self.out.drain(..n);
        while self.replies.front().is_some_and(|&end| end <= n) {
            self.replies.pop_front();
        }
        for end in self.replies.iter_mut() {
            *end -= n;
        }
    }

    /// Replies queued and not yet sent.
    pub fn outstanding(&self) -> usize {
        self.replies.len()
    }
}

/// Queue a reply for `conn`, marking it dirty when its output was empty.
fn reply_to(
    sessions: &mut Sessions,
    conn: ConnId,
    header: &kayvee_xswire::Header,
    reply: &kayvee_xenstore::Reply,
) {
    let me = sessions.get_mut(&conn).expect("session exists");
    let was_empty = me.out.is_empty();
    me.reply(header, reply);
    if was_empty {
        sessions.mark_dirty(conn);
    }
}

/// Move queued watch events into their sessions' output.
pub fn deliver_events(xs: &mut Xenstored, sessions: &mut Sessions) {
    for ev in xs.take_events() {
        if let Some(s) = sessions.get_mut(&ev.conn) {
            if s.event_limit.is_some_and(|max| s.out.len() >= max) {
                s.dropped_events += 1;
                continue;
            }
            let was_empty = s.out.is_empty();
            encode_event(&mut s.out, &ev.path, &ev.token);
            if was_empty {
                sessions.mark_dirty(ev.conn);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kayvee_xenstore::XsConfig;
    use kayvee_xswire::{encode, Header};

    #[test]
    fn watch_reply_then_event_then_oversize_closes() {
        let mut xs = Xenstored::new(XsConfig::default());
        let mut sessions = Sessions::new();
        xs.connect(1, 0);
        sessions.insert(1, Session::new());
        let mut wire = Vec::new();
        encode(&mut wire, 4, 9, 0, b"/w\0tok\0");
        Session::received(
            1,
            &wire,
            &mut xs,
            &mut sessions,
            Now::default(),
            &mut None,
            &mut admit_all,
        )
        .unwrap();
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
        let r = Session::received(
            1,
            &big,
            &mut xs,
            &mut sessions,
            Now::default(),
            &mut None,
            &mut admit_all,
        );
        assert!(r.is_err());
    }

    /// Replies in `out`, counted by their headers.
    fn replies_in(out: &[u8]) -> usize {
        let (mut n, mut at) = (0, 0);
        while at + 16 <= out.len() {
            let len = u32::from_le_bytes(out[at + 12..at + 16].try_into().unwrap()) as usize;
            at += 16 + len;
            n += 1;
        }
        n
    }

    #[test]
    fn a_guest_session_drops_watch_events_past_its_limit() {
        let mut xs = Xenstored::new(XsConfig::default());
        let mut sessions = Sessions::new();
        xs.connect(1, 0);
        xs.connect(2, 0);
        sessions.insert(1, Session::new());
        sessions.insert(2, Session::guest(100));
        let mut wire = Vec::new();
        encode(&mut wire, 4, 0, 0, b"/w\0tok\0");
        for id in [1, 2] {
            Session::received(
                id,
                &wire,
                &mut xs,
                &mut sessions,
                Now::default(),
                &mut None,
                &mut admit_all,
            )
            .unwrap();
        }
        let mut writes = Vec::new();
        for i in 0..20 {
            encode(&mut writes, 11, 0, 0, format!("/w/{i}\0v").as_bytes());
        }
        Session::received(
            1,
            &writes,
            &mut xs,
            &mut sessions,
            Now::default(),
            &mut None,
            &mut admit_all,
        )
        .unwrap();
        // Connection 1 (no limit) got every event; the guest stopped queueing past 100 bytes.
        assert_eq!(sessions[&1].dropped_events, 0);
        let guest = &sessions[&2];
        assert!(guest.out.len() < 100 + 40, "{}", guest.out.len());
        assert!(guest.dropped_events > 15, "{}", guest.dropped_events);
    }

    #[test]
    fn guest_at_outstanding_quota_is_held_until_replies_are_sent() {
        use kayvee_xenstore::Quota;
        let quota = Quota {
            outstanding: 2,
            ..Quota::default()
        };
        let mut xs = Xenstored::new(XsConfig {
            quota,
            ..XsConfig::default()
        });
        let mut sessions = Sessions::new();
        // (connection, domain): a guest and dom0, each sending three READs in one chunk.
        for (id, dom, want_first) in [(7, 3, 2), (1, 0, 3)] {
            xs.connect(id, dom);
            sessions.insert(id, Session::new());
            let mut wire = Vec::new();
            for i in 0..3 {
                encode(&mut wire, 2, i, 0, b"/nope\0");
            }
            Session::received(
                id,
                &wire,
                &mut xs,
                &mut sessions,
                Now::default(),
                &mut None,
                &mut admit_all,
            )
            .unwrap();
            let s = &sessions[&id];
            assert_eq!(replies_in(&s.out), want_first, "conn {id}");
            assert_eq!(s.outstanding(), want_first);
            assert_eq!(s.held, dom != 0);
        }
        // Sending part of the first reply completes nothing; sending it all frees one slot.
        let g = sessions.get_mut(&7).unwrap();
        g.sent(10);
        assert_eq!(g.outstanding(), 2);
        let first = 16 + b"ENOENT\0".len() - 10;
        g.sent(first);
        assert_eq!(g.outstanding(), 1);
        Session::received(
            7,
            &[],
            &mut xs,
            &mut sessions,
            Now::default(),
            &mut None,
            &mut admit_all,
        )
        .unwrap();
        // The third ran; nothing waits, so the transport may read on (not held yet).
        let g = &sessions[&7];
        assert_eq!((replies_in(&g.out), g.outstanding(), g.held), (2, 2, false));
        // A fourth request waits at the quota.
        let mut wire = Vec::new();
        encode(&mut wire, 2, 3, 0, b"/nope\0");
        Session::received(
            7,
            &wire,
            &mut xs,
            &mut sessions,
            Now::default(),
            &mut None,
            &mut admit_all,
        )
        .unwrap();
        let g = &sessions[&7];
        assert_eq!((replies_in(&g.out), g.outstanding(), g.held), (2, 2, true));
        let all = g.out.len();
        let g = sessions.get_mut(&7).unwrap();
        g.sent(all);
        Session::received(
            7,
            &[],
            &mut xs,
            &mut sessions,
            Now::default(),
            &mut None,
            &mut admit_all,
        )
        .unwrap();
        assert_eq!(sessions[&7].outstanding(), 1);
        assert!(!sessions[&7].held);
    }
}
