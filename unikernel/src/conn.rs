//! One client connection: bytes from its TCP socket go through the RESP decoder into the
//! engine; replies are encoded into an output buffer that drains into the socket as it has
//! room. The same steps as the Linux server's connection handling.

use crate::time::Clock;
use alloc::vec::Vec;
use kayvee_engine::{Engine, Handle, Now, Outcome, ReplySink};
use kayvee_resp::{Decoder, Limits, RespWriter};
use smoltcp::socket::tcp;

/// Stop reading from a client while this many reply bytes wait for it (backpressure).
const OUT_HIGH_BYTES: usize = 256 * 1024;

/// What the server loop must do after a connection ran its commands.
#[derive(Debug, PartialEq, Eq)]
pub enum Event {
    /// Nothing.
    None,
    /// CLIENT KILL marked clients: close every marked connection.
    KillClients,
    /// SHUTDOWN.
    Shutdown,
}

/// A connection attached to a socket.
pub struct Conn {
    /// The engine's handle for this client.
    pub client: Handle,
    decoder: Decoder,
    input: Vec<u8>,
    output: Vec<u8>,
    output_sent: usize,
    /// Close once the pending output is written (QUIT, protocol error, CLIENT KILL).
    pub closing: bool,
}

impl Conn {
    /// A new connection for a registered client.
    pub fn new(client: Handle) -> Self {
        Conn {
            client,
            decoder: Decoder::new(Limits::default()),
            input: Vec::new(),
            output: Vec::new(),
            output_sent: 0,
            closing: false,
        }
    }

    /// True once the connection is closing and its last reply is in the socket.
    pub fn finished(&self) -> bool {
        self.closing && self.pending() == 0
    }

    /// Bytes of replies not yet handed to the socket.
    fn pending(&self) -> usize {
        self.output.len() - self.output_sent
    }

    /// Reads what the socket has, runs every complete command, writes what fits.
    pub fn service(
        &mut self,
        sock: &mut tcp::Socket<'_>,
        engine: &mut Engine,
        clock: &Clock,
    ) -> Event {
        let mut event = Event::None;
        while !self.closing {
            match self.run_commands(engine, clock) {
                Event::None => {}
                Event::Shutdown => return Event::Shutdown,
                e => event = e,
            }
            if self.pending() >= OUT_HIGH_BYTES || !sock.can_recv() {
                break;
            }
            let input = &mut self.input;
            let got = sock
                .recv(|data| {
                    input.extend_from_slice(data);
                    (data.len(), data.len())
                })
                .unwrap_or(0);
            // INFO's total_net_input_bytes and instantaneous_input_kbps.
            engine.core.stats.total_net_input_bytes += got as u64;
        }
        let sent = self.flush(sock);
        engine.core.stats.total_net_output_bytes += sent as u64;
        if self.closing && self.pending() == 0 {
            sock.close();
        }
        event
    }

    /// Decodes and executes every complete command in the input buffer.
    fn run_commands(&mut self, engine: &mut Engine, clock: &Clock) -> Event {
        let mut used = 0;
        let mut event = Event::None;
        while !self.closing && self.pending() < OUT_HIGH_BYTES && !engine.is_blocked(self.client) {
            let authenticated = engine
                .clients
                .get(self.client)
                .is_none_or(|c| c.authenticated);
            let now = Now {
                unix_us: clock.unix_us(),
            };
            let protocol = engine.protocol(self.client);
            let frame = match self.decoder.decode(&self.input[used..], authenticated) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(e) => {
                    // Redis's exact bytes (or none, for the query buffer limit), then close.
                    e.write_reply(&mut self.output);
                    self.closing = true;
                    break;
                }
            };
            let mut out = RespWriter::new(&mut self.output, protocol);
            used += frame.consumed;
            match engine.execute(self.client, &frame.argv, now, &mut out) {
                Outcome::Continue => {}
                Outcome::Close => self.closing = true,
                Outcome::KillClients => event = Event::KillClients,
                Outcome::Shutdown { .. } => return Event::Shutdown,
                // No reply yet: it comes through `Engine::take_wakeups` (see `deliver`), and
                // the loop condition holds the commands pipelined behind it.
                Outcome::Blocked => {}
                Outcome::Sleep(us) => clock.spin_us(us),
                // No file system: a save fails at once (SAVE answers the error; BGSAVE's
                // start was already answered, and INFO reports the failure).
                Outcome::Save { background } => {
                    engine.save_started(background, now);
                    engine.save_finished(false, background, now);
                    if !background {
                        out.error("ERR");
                    }
                }
                Outcome::AclFile { .. } => {
                    out.error("ERR the unikernel has no file system for the ACL file")
                }
                Outcome::RewriteConfig => match engine.rewrite_config() {
                    Err(e) => out.error(&alloc::format!("{e}")),
                    Ok(_) => out.error("ERR the unikernel has no file system to rewrite to"),
                },
            }
        }
        self.input.drain(..used);
        event
    }

    /// Appends replies owed to this (formerly blocked) client; its buffered commands run on
    /// the next service.
    pub fn deliver(&mut self, replies: &[kayvee_engine::Reply], protocol: kayvee_engine::Protocol) {
        let mut out = RespWriter::new(&mut self.output, protocol);
        replies.iter().for_each(|r| r.write_to(&mut out));
    }

    /// Hands as much pending output to the socket as it takes; returns the bytes handed over.
    fn flush(&mut self, sock: &mut tcp::Socket<'_>) -> usize {
        let mut sent = 0;
        while self.pending() > 0 && sock.can_send() {
            match sock.send_slice(&self.output[self.output_sent..]) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    self.output_sent += n;
                    sent += n;
                }
            }
        }
        if self.pending() == 0 {
            self.output.clear();
            self.output_sent = 0;
        }
        sent
    }
}
