//! The replica's side of the link to its primary, as a byte-level sans-IO state machine: the
//! handshake (`PING`, `AUTH`, `REPLCONF listening-port`, `REPLCONF capa eof capa psync2`,
//! `PSYNC`), the primary's answer (`+FULLRESYNC <replid> <offset>` or `+CONTINUE [<replid>]`),
//! and the RDB transfer in either framing (`$<len>` or `$EOF:<40-byte mark>`, with the newline
//! keep-alives a primary sends while it prepares). Bytes from the socket go in
//! ([`Link::receive`]); bytes to send come out in the caller's buffer, and the end of the
//! handshake comes out as a [`Synced`] with the stream bytes that followed it, which the
//! driver then runs as the master client's commands, once the payload has loaded a slice a
//! loop pass ([`Load`] holds that state). No socket, clock or engine here: the
//! driver wires it (docs/decisions.md, "Replication").

use alloc::string::String;
use alloc::vec::Vec;

/// Longest reply line accepted during the handshake (a `-ERR` text, `+FULLRESYNC`...).
const LINE_MAX: usize = 4096;

/// The replica's credentials and announcements for the handshake.
#[derive(Clone, Debug, Default)]
pub struct LinkConfig {
    /// `masteruser` (None: AUTH with the password alone).
    pub user: Option<String>,
    /// `masterauth` (None: no AUTH).
    pub password: Option<String>,
    /// `REPLCONF listening-port`.
    pub listening_port: u16,
    /// `REPLCONF ip-address` (`replica-announce-ip`; None: not sent, the primary reports the
    /// connection's address).
    pub announce_ip: Option<String>,
    /// The ID and offset to continue from (`None`: `PSYNC ? -1`).
    pub cached: Option<(String, u64)>,
    /// A FAILOVER's link: PSYNC ends with `FAILOVER` (the target becomes a primary first).
    pub failover: bool,
}

/// Where the handshake is.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Stage {
    Ping,
    Auth,
    Port,
    Ip,
    Capa,
    Psync,
    /// `+FULLRESYNC` came: the payload's header is next.
    BulkHeader,
    /// The disk form: this many payload bytes are still to come.
    Disk(usize),
    /// The diskless form: the payload ends with this mark.
    Eof([u8; 40]),
    Done,
}

/// How the handshake ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Synced {
    /// A full sync: load `rdb`, then follow `replid` from `offset`.
    Full {
        /// The primary's replication ID.
        replid: String,
        /// Its offset at the snapshot.
        offset: u64,
        /// The RDB payload.
        rdb: Vec<u8>,
        /// Stream bytes that came after the payload.
        rest: Vec<u8>,
    },
    /// A partial resync: keep the data; the primary's ID is now `replid` if it sent one.
    Continue {
        /// `+CONTINUE <replid>` (PSYNC2), or None.
        replid: Option<String>,
        /// Stream bytes that came after the line.
        rest: Vec<u8>,
    },
}

/// Why the link failed (the driver closes it and retries, as Redis does).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkError {
    /// The primary answered an error (its text).
    Refused(String),
    /// An answer that makes no sense at this point.
    Protocol(String),
}

/// The link (see the module doc).
#[derive(Clone, Debug)]
pub struct Link {
    config: LinkConfig,
    stage: Stage,
    /// Bytes received and not consumed yet.
    input: Vec<u8>,
    /// `+FULLRESYNC`'s ID and offset, until the payload is in.
    full: Option<(String, u64)>,
    /// The payload read so far.
    payload: Vec<u8>,
}

impl Link {
    /// A new link; its first bytes (`PING`) go into `out`.
    pub fn start(config: LinkConfig, out: &mut Vec<u8>) -> Self {
        encode(out, &["PING"]);
        Link {
            config,
            stage: Stage::Ping,
            input: Vec::new(),
            full: None,
            payload: Vec::new(),
        }
    }

    /// Payload bytes read so far, and the payload's size when known (INFO's sync progress).
    pub fn transfer(&self) -> (u64, Option<u64>) {
        let read = self.payload.len() as u64;
        match self.stage {
            Stage::Disk(left) => (read, Some(read + left as u64)),
            _ => (read, None),
        }
    }

    /// While the payload comes (its header read): the `+FULLRESYNC` replication ID and the
    /// payload's size (None: the `$EOF:` form).
    pub fn payload(&self) -> Option<(&str, Option<u64>)> {
        let (id, _) = self.full.as_ref()?;
        match self.stage {
            Stage::Disk(left) => Some((id, Some((self.payload.len() + left) as u64))),
            Stage::Eof(_) => Some((id, None)),
            _ => None,
        }
    }

    /// Whether the RDB transfer is under way.
    pub fn transferring(&self) -> bool {
        matches!(
            self.stage,
            Stage::BulkHeader | Stage::Disk(_) | Stage::Eof(_)
        )
    }

    /// Bytes from the primary. What to send back is appended to `out`; `Some` once the
    /// handshake is over (the link then carries the stream, outside this machine).
    pub fn receive(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<Option<Synced>, LinkError> {
        self.input.extend_from_slice(data);
        loop {
            let before = (self.stage.clone(), self.input.len());
            if let Some(done) = self.step(out)? {
                return Ok(Some(done));
            }
            if (self.stage.clone(), self.input.len()) == before {
                return Ok(None);
            }
        }
    }

    /// One step on the buffered input; leaves the stage and input unchanged when it needs
    /// more bytes.
    fn step(&mut self, out: &mut Vec<u8>) -> Result<Option<Synced>, LinkError> {
        match self.stage.clone() {
            Stage::Disk(left) => {
                let n = left.min(self.input.len());
                self.payload.extend(self.input.drain(..n));
                self.stage = Stage::Disk(left - n);
                if left == n {
                    return Ok(Some(self.finish_full()));
                }
                Ok(None)
            }
            Stage::Eof(mark) => {
                self.payload.append(&mut self.input);
                if self.payload.len() >= 40 && self.payload.ends_with(&mark) {
                    self.payload.truncate(self.payload.len() - 40);
                    return Ok(Some(self.finish_full()));
                }
                Ok(None)
            }
            Stage::BulkHeader => {
                // Newlines are the primary's keep-alives while it prepares the payload.
                self.skip_keepalives();
                let Some(line) = self.line()? else {
                    return Ok(None);
                };
                self.payload_header(&line)?;
                Ok(None)
            }
            Stage::Done => Ok(None),
            _ => {
                // A primary may send keep-alives before it answers PSYNC, too.
                if self.stage == Stage::Psync {
                    self.skip_keepalives();
                }
                let Some(line) = self.line()? else {
                    return Ok(None);
                };
                self.answer(&line, out)
            }
        }
    }

    /// The answer to the handshake command the stage sent, and the next command.
    fn answer(&mut self, line: &str, out: &mut Vec<u8>) -> Result<Option<Synced>, LinkError> {
        let error = line.starts_with('-');
        match self.stage {
            // -NOAUTH to PING is fine: AUTH comes next.
            Stage::Ping if error && !line.starts_with("-NOAUTH") => {
                return Err(LinkError::Refused(String::from(&line[1..])));
            }
            Stage::Ping => self.send_auth_or_port(out),
            Stage::Auth if error => {
                let text = alloc::format!("Unable to AUTH to MASTER: {line}");
                return Err(LinkError::Refused(text));
            }
            Stage::Port if error => {
                return Err(LinkError::Refused(String::from(&line[1..])));
            }
            Stage::Auth => self.send_port(out),
            Stage::Port if self.config.announce_ip.is_some() => {
                let ip = self.config.announce_ip.clone().unwrap_or_default();
                encode(out, &["REPLCONF", "ip-address", &ip]);
                self.stage = Stage::Ip;
            }
            // A primary that does not know REPLCONF or capa is still served.
            Stage::Port | Stage::Ip => {
                encode(out, &["REPLCONF", "capa", "eof", "capa", "psync2"]);
                self.stage = Stage::Capa;
            }
            Stage::Capa => {
                let (id, offset) = match &self.config.cached {
                    Some((id, o)) => (id.clone(), alloc::format!("{}", o + 1)),
                    None => (String::from("?"), String::from("-1")),
                };
                if self.config.failover {
                    encode(out, &["PSYNC", &id, &offset, "FAILOVER"]);
                } else {
                    encode(out, &["PSYNC", &id, &offset]);
                }
                self.stage = Stage::Psync;
            }
            Stage::Psync => return self.psync_answer(line),
            _ => {}
        }
        Ok(None)
    }

    fn send_auth_or_port(&mut self, out: &mut Vec<u8>) {
        match (&self.config.user, &self.config.password) {
            (Some(u), Some(p)) => encode(out, &["AUTH", u, p]),
            (None, Some(p)) => encode(out, &["AUTH", p]),
            _ => return self.send_port(out),
        }
        self.stage = Stage::Auth;
    }

    fn send_port(&mut self, out: &mut Vec<u8>) {
        let port = alloc::format!("{}", self.config.listening_port);
        encode(out, &["REPLCONF", "listening-port", &port]);
        self.stage = Stage::Port;
    }

    /// `+FULLRESYNC <replid> <offset>`, `+CONTINUE [<replid>]`, or an error.
    fn psync_answer(&mut self, line: &str) -> Result<Option<Synced>, LinkError> {
        let mut words = line.split(' ');
        match words.next() {
            Some("+FULLRESYNC") => {
                let id = words.next().filter(|w| w.len() == 40);
                let offset = words.next().and_then(|w| w.parse::<u64>().ok());
                let (Some(id), Some(offset)) = (id, offset) else {
                    return Err(LinkError::Protocol(String::from(line)));
                };
                self.full = Some((String::from(id), offset));
                self.stage = Stage::BulkHeader;
                Ok(None)
            }
            Some("+CONTINUE") => {
                self.stage = Stage::Done;
                let replid = words.next().filter(|w| w.len() == 40).map(String::from);
                let rest = core::mem::take(&mut self.input);
                Ok(Some(Synced::Continue { replid, rest }))
            }
            _ if line.starts_with('-') => Err(LinkError::Refused(String::from(&line[1..]))),
            _ => Err(LinkError::Protocol(String::from(line))),
        }
    }

    /// `$<len>` or `$EOF:<mark>`.
    fn payload_header(&mut self, line: &str) -> Result<(), LinkError> {
        let bad = || LinkError::Protocol(String::from(line));
        let Some(rest) = line.strip_prefix('$') else {
            if let Some(text) = line.strip_prefix('-') {
                return Err(LinkError::Refused(String::from(text)));
            }
            return Err(bad());
        };
        if let Some(mark) = rest.strip_prefix("EOF:") {
            let mark: [u8; 40] = mark.as_bytes().try_into().map_err(|_| bad())?;
            self.stage = Stage::Eof(mark);
        } else {
            let len = rest.parse::<usize>().map_err(|_| bad())?;
            self.stage = Stage::Disk(len);
        }
        Ok(())
    }

    fn finish_full(&mut self) -> Synced {
        self.stage = Stage::Done;
        let (replid, offset) = self.full.take().unwrap_or_default();
        Synced::Full {
            replid,
            offset,
            rdb: core::mem::take(&mut self.payload),
            rest: core::mem::take(&mut self.input),
        }
    }

    /// Drops the newline keep-alives at the front of the input.
    fn skip_keepalives(&mut self) {
        let skip = self.input.iter().take_while(|&&b| b == b'\n').count();
        self.input.drain(..skip);
    }

    /// The next `\r\n`-terminated line, consumed (without its terminator).
    fn line(&mut self) -> Result<Option<String>, LinkError> {
        let Some(end) = self.input.windows(2).position(|w| w == b"\r\n") else {
            if self.input.len() > LINE_MAX {
                return Err(LinkError::Protocol(String::from("reply line too long")));
            }
            return Ok(None);
        };
        let line = String::from_utf8_lossy(&self.input[..end]).into_owned();
        self.input.drain(..end + 2);
        Ok(Some(line))
    }
}

/// Appends `args` as a RESP command.
fn encode(out: &mut Vec<u8>, args: &[&str]) {
    out.extend_from_slice(alloc::format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(alloc::format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
}

/// A full sync's payload, received whole and loading a slice a loop pass: the replica keeps
/// answering (`-LOADING`, or the old data under `repl-diskless-load swapdb`), as Redis does
/// while it loads.
pub(crate) struct Load {
    pub(crate) load: kayvee_rdb::StepLoad<Vec<u8>>,
    /// The primary's replication ID and offset at the snapshot.
    pub(crate) replid: String,
    pub(crate) offset: u64,
    /// The stream that came after the payload, run once it is loaded.
    pub(crate) rest: Vec<u8>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0123456789012345678901234567890123456789";

    fn sent(out: &mut Vec<u8>) -> String {
        String::from_utf8(core::mem::take(out)).unwrap()
    }

    #[test]
    fn handshake_then_disk_payload_with_keepalives_then_stream() {
        let mut out = Vec::new();
        let config = LinkConfig {
            password: Some("pw".into()),
            listening_port: 6380,
            ..LinkConfig::default()
        };
        let mut link = Link::start(config, &mut out);
        assert_eq!(sent(&mut out), "*1\r\n$4\r\nPING\r\n");
        assert_eq!(
            link.receive(b"-NOAUTH Authentication required.\r\n", &mut out),
            Ok(None)
        );
        assert_eq!(sent(&mut out), "*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n");
        assert_eq!(link.receive(b"+OK\r\n", &mut out), Ok(None));
        assert!(sent(&mut out).contains("listening-port\r\n$4\r\n6380"));
        assert_eq!(link.receive(b"+OK\r", &mut out), Ok(None));
        assert_eq!(link.receive(b"\n", &mut out), Ok(None));
        assert!(sent(&mut out).contains("capa\r\n$3\r\neof\r\n$4\r\ncapa\r\n$6\r\npsync2"));
        assert_eq!(link.receive(b"+OK\r\n", &mut out), Ok(None));
        assert_eq!(
            sent(&mut out),
            "*3\r\n$5\r\nPSYNC\r\n$1\r\n?\r\n$2\r\n-1\r\n"
        );
        let line = alloc::format!("\n\n+FULLRESYNC {ID} 42\r\n\n\n$5\r\nab");
        assert_eq!(link.receive(line.as_bytes(), &mut out), Ok(None));
        assert!(link.transferring());
        assert_eq!(link.transfer(), (2, Some(5)));
        assert_eq!(link.payload(), Some((ID, Some(5))));
        let done = link.receive(b"cde*1\r\n$4\r\nPING\r\n", &mut out).unwrap();
        assert_eq!(
            done,
            Some(Synced::Full {
                replid: ID.into(),
                offset: 42,
                rdb: b"abcde".to_vec(),
                rest: b"*1\r\n$4\r\nPING\r\n".to_vec(),
            })
        );
        assert!(out.is_empty());
    }

    #[test]
    fn announces_its_address_when_configured() {
        let mut out = Vec::new();
        let config = LinkConfig {
            announce_ip: Some("10.1.2.3".into()),
            ..LinkConfig::default()
        };
        let mut link = Link::start(config, &mut out);
        link.receive(b"+PONG\r\n", &mut out).unwrap();
        out.clear();
        link.receive(b"+OK\r\n", &mut out).unwrap();
        assert_eq!(
            sent(&mut out),
            "*3\r\n$8\r\nREPLCONF\r\n$10\r\nip-address\r\n$8\r\n10.1.2.3\r\n"
        );
        link.receive(b"+OK\r\n", &mut out).unwrap();
        assert!(sent(&mut out).contains("capa"));
    }

    #[test]
    fn diskless_payload_ends_at_its_mark() {
        let mut out = Vec::new();
        let mut link = Link::start(LinkConfig::default(), &mut out);
        for reply in ["+PONG\r\n", "+OK\r\n", "+OK\r\n"] {
            assert_eq!(link.receive(reply.as_bytes(), &mut out), Ok(None));
        }
        let mark = "m".repeat(40);
        let head = alloc::format!("+FULLRESYNC {ID} 7\r\n$EOF:{mark}\r\nRDB");
        assert_eq!(link.payload(), None);
        assert_eq!(link.receive(head.as_bytes(), &mut out), Ok(None));
        assert_eq!(link.payload(), Some((ID, None)));
        let done = link.receive(alloc::format!("DATA{mark}").as_bytes(), &mut out);
        let Ok(Some(Synced::Full { rdb, offset, .. })) = done else {
            panic!("{done:?}");
        };
        assert_eq!((rdb.as_slice(), offset), (&b"RDBDATA"[..], 7));
    }

    #[test]
    fn continue_with_a_cached_id_and_errors() {
        let mut out = Vec::new();
        let config = LinkConfig {
            cached: Some((ID.into(), 99)),
            ..LinkConfig::default()
        };
        let mut link = Link::start(config, &mut out);
        for reply in ["+PONG\r\n", "+OK\r\n"] {
            link.receive(reply.as_bytes(), &mut out).unwrap();
        }
        out.clear();
        link.receive(b"+OK\r\n", &mut out).unwrap();
        assert!(sent(&mut out).ends_with(&alloc::format!("${}\r\n{ID}\r\n$3\r\n100\r\n", 40)));
        let new_id = "9".repeat(40);
        let done = link.receive(
            alloc::format!("+CONTINUE {new_id}\r\nX").as_bytes(),
            &mut out,
        );
        assert_eq!(
            done,
            Ok(Some(Synced::Continue {
                replid: Some(new_id),
                rest: b"X".to_vec()
            }))
        );
        let mut link = Link::start(LinkConfig::default(), &mut out);
        assert_eq!(
            link.receive(b"-ERR nope\r\n", &mut out),
            Err(LinkError::Refused("ERR nope".into()))
        );
    }
}
