//! MIGRATE's links to target instances: the blocking exchange the engine's job asks for
//! (connect, write the bytes, read the replies, each step within the job's timeout), and the
//! sockets cached by `host:port` for the links the engine still lists.
//!
//! Blocking is Redis's own behaviour: MIGRATE stops the server for the exchange (its
//! `syncWrite`/`syncReadLine`), bounded by the command's timeout.

use kayvee_engine::outcome::{LinkError, MigrateJob};
use kayvee_engine::{Engine, Reply};
use kayvee_session::Answer;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Bytes read at a time from a target.
const READ_CHUNK: usize = 16 * 1024;

/// The cached links' sockets, by `host:port`.
#[derive(Default)]
pub struct Links {
    sockets: HashMap<String, TcpStream>,
}

impl Links {
    /// Carries out one MIGRATE job, retrying once on a fresh connection when a cached link
    /// fails before any reply (it may have been closed by the target meanwhile), as Redis.
    pub fn exchange(&mut self, job: &MigrateJob) -> Answer {
        let cached = self.sockets.contains_key(&job.name);
        let (replies, error) = self.attempt(job);
        let retry = cached && replies.is_empty() && error.is_some_and(|(_, timeout)| !timeout);
        let (replies, error) = if retry {
            self.attempt(job)
        } else {
            (replies, error)
        };
        Answer::Migrate {
            replies,
            error: error.map(|(e, _)| e),
        }
    }

    /// One try: the replies read, and the failure (with whether it was a timeout).
    fn attempt(&mut self, job: &MigrateJob) -> (Vec<Reply>, Option<(LinkError, bool)>) {
        let timeout = Duration::from_millis(job.timeout_ms.max(1));
        let mut stream = match self.sockets.remove(&job.name) {
            Some(s) => s,
            None => match connect(&job.host, job.port, timeout) {
                Ok(s) => s,
                Err(e) => return (Vec::new(), Some(e)),
            },
        };
        if let Err(e) = stream.write_all(&job.payload) {
            return (Vec::new(), Some((LinkError::Write, timed_out(&e))));
        }
        let mut replies = Vec::with_capacity(job.replies);
        let mut buf = Vec::new();
        while replies.len() < job.replies {
            match kayvee_resp::parse_reply(&buf) {
                Ok(Some((reply, used))) => {
                    buf.drain(..used);
                    replies.push(reply);
                    continue;
                }
                Ok(None) => {}
                Err(_) => return (replies, Some((LinkError::Read, false))),
            }
            let at = buf.len();
            buf.resize(at + READ_CHUNK, 0);
            match stream.read(&mut buf[at..]) {
                Ok(0) => return (replies, Some((LinkError::Read, false))),
                Ok(n) => buf.truncate(at + n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => buf.truncate(at),
                Err(e) => return (replies, Some((LinkError::Read, timed_out(&e)))),
            }
        }
        self.sockets.insert(job.name.clone(), stream);
        (replies, None)
    }

    /// Closes the sockets of links the engine no longer lists (idle too long, failed).
    pub fn prune(&mut self, engine: &Engine) {
        if self.sockets.is_empty() {
            return;
        }
        let kept: Vec<&str> = engine.migrate_links().collect();
        self.sockets.retain(|name, _| kept.contains(&name.as_str()));
    }
}

/// A blocking connection with the job's timeout on every step. A refused connection shows as a
/// write error, as in Redis (whose connect does not wait for the handshake).
fn connect(host: &str, port: u16, timeout: Duration) -> Result<TcpStream, (LinkError, bool)> {
    let addrs = (host, port)
        .to_socket_addrs()
        .map_err(|_| (LinkError::Connect, false))?;
    let mut last = (LinkError::Connect, false);
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                let set = s
                    .set_read_timeout(Some(timeout))
                    .and_then(|()| s.set_write_timeout(Some(timeout)));
                return set.map(|()| s).map_err(|_| (LinkError::Connect, false));
            }
            Err(e) if timed_out(&e) => last = (LinkError::Connect, true),
            Err(_) => last = (LinkError::Write, false),
        }
    }
    Err(last)
}

/// Whether an I/O error is a timeout (Redis retries no timed-out exchange).
fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
    )
}
