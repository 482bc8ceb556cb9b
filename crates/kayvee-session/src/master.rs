//! Replies on a replication link, which never carries one. On a replica, the master client's
//! replies are not sent, but an error one of the primary's commands got here means the replica
//! diverged, and Redis logs it ("== CRITICAL =="). On a primary, a reply one of its replicas'
//! commands made is dropped and the replica disconnected, with Redis's log lines.

use alloc::string::String;
use alloc::vec::Vec;
use kayvee_engine::reply::{Protocol, ReplySink};
use kayvee_engine::Engine;

/// The master client's reply sink: replies go nowhere, but the first error is kept, since
/// a replica whose primary's command fails has diverged and says so in its log.
pub(crate) struct MasterSink {
    protocol: Protocol,
    /// The first error the command answered.
    pub error: Option<String>,
}

impl MasterSink {
    pub fn new(protocol: Protocol) -> Self {
        MasterSink {
            protocol,
            error: None,
        }
    }
}

impl ReplySink for MasterSink {
    fn protocol(&self) -> Protocol {
        self.protocol
    }
    fn set_protocol(&mut self, p: Protocol) {
        self.protocol = p;
    }
    fn simple(&mut self, _: &str) {}
    fn error(&mut self, s: &str) {
        if self.error.is_none() {
            self.error = Some(String::from(s));
        }
    }
    fn int(&mut self, _: i64) {}
    fn bulk(&mut self, _: &[u8]) {}
    fn bulk_parts(&mut self, _: &[u8], _: &[u8]) {}
    fn null(&mut self) {}
    fn null_array(&mut self) {}
    fn array(&mut self, _: usize) {}
    fn map(&mut self, _: usize) {}
    fn set(&mut self, _: usize) {}
    fn push(&mut self, _: usize) {}
    fn double(&mut self, _: f64) {}
    fn boolean(&mut self, _: bool) {}
    fn verbatim(&mut self, _: &str, _: &[u8]) {}
    fn big_number(&mut self, _: &str) {}
    fn attribute(&mut self, _: usize) {}
}

/// Redis's log line for an error the primary's command got here (the reply itself is never
/// sent): the error and the command's name (`<unknown>` for one this server does not know).
pub(crate) fn error_to_master(engine: &Engine, error: &str, name: &[u8]) -> String {
    let error = error.strip_prefix('-').unwrap_or(error);
    let error = error.get(..4096).unwrap_or(error);
    let command = match engine.command_table().lookup(name) {
        Some(_) => String::from_utf8_lossy(&name.to_ascii_lowercase()).into_owned(),
        None => String::from("<unknown>"),
    };
    alloc::format!(
        "== CRITICAL == This replica is sending an error to its master: '{error}' after processing the command '{command}'"
    )
}

/// The log lines for a reply a replica of this server made (dropped, the replica then
/// disconnected), as Redis 7.0 words them: an error first gets the CRITICAL line of an error
/// sent to a replica, then every reply the line that the replica made one.
pub(crate) fn reply_to_replica(
    engine: &Engine,
    reply: &[u8],
    argv: &kayvee_engine::Argv<'_>,
    id: u64,
) -> Vec<String> {
    let table = engine.command_table();
    let command = match table.lookup(argv.get(0)) {
        Some(id) => {
            let sub = (argv.len() > 1)
                .then(|| table.lookup_sub(id, argv.get(1)))
                .flatten();
            String::from(table.get(sub.unwrap_or(id)).full_name.as_str())
        }
        None => String::from("<unknown>"),
    };
    let mut lines = Vec::new();
    if let Some(error) = reply.strip_prefix(b"-") {
        let error = error.split(|&b| b == b'\r').next().unwrap_or_default();
        lines.push(alloc::format!(
            "== CRITICAL == This master is sending an error to its replica: '{}' after processing the command '{command}'",
            String::from_utf8_lossy(error)
        ));
    }
    lines.push(alloc::format!(
        "Replica generated a reply to command '{command}', disconnecting it: id={id}"
    ));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use kayvee_engine::{ArgvBuf, Config, Now};

    fn lines(reply: &[u8], command: &str) -> Vec<String> {
        let engine = Engine::new(Config::default(), 1, Now::from_ms(1_000));
        let argv = ArgvBuf::from_line(command);
        reply_to_replica(&engine, reply, &argv.argv(), 7)
    }

    #[test]
    fn a_replicas_reply_is_logged_with_the_commands_full_name() {
        assert_eq!(
            lines(b"+PONG\r\n", "ping"),
            ["Replica generated a reply to command 'ping', disconnecting it: id=7"]
        );
        assert_eq!(
            lines(b"*2\r\n$1\r\na\r\n$1\r\nb\r\n", "XINFO help"),
            ["Replica generated a reply to command 'xinfo|help', disconnecting it: id=7"]
        );
        assert_eq!(
            lines(b"+OK\r\n", "nosuchcommand x"),
            ["Replica generated a reply to command '<unknown>', disconnecting it: id=7"]
        );
    }

    #[test]
    fn an_error_to_a_replica_gets_the_critical_line_first() {
        let got = lines(
            b"-ERR Replica can't interact with the keyspace\r\n",
            "get foo",
        );
        assert_eq!(
            got,
            [
                "== CRITICAL == This master is sending an error to its replica: 'ERR Replica can't interact with the keyspace' after processing the command 'get'",
                "Replica generated a reply to command 'get', disconnecting it: id=7",
            ]
        );
    }
}
