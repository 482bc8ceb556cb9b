//! The driver's side of a long script (see `kayvee_engine::script_wait`): while one session's
//! command runs a script past `busy-reply-threshold`, the shell reads the other connections
//! through [`Clock::serve_busy`] and hands their bytes to a [`BusyIo`]; their complete commands
//! are answered by the engine's [`BusyAnswer`] (`-BUSY`, SCRIPT KILL, FUNCTION KILL, SHUTDOWN
//! NOSAVE, the connection commands) into their sessions' output, which the shell writes out at once.

use crate::clock::{BusyIo, Clock};
use crate::session::{Closing, Session};
use alloc::boxed::Box;
use alloc::vec::Vec;
use kayvee_engine::reply::{Protocol, ReplySink};
use kayvee_engine::script_wait::{BusyAnswer, DebugInput};
use kayvee_engine::{Answered, ArgvBuf, ConnInfo, Handle, Now, ScriptWait};
use kayvee_resp::{Decoder, Limits, RespWriter};

/// The sessions other than the running one, lent to a script's hook.
pub(crate) struct Waiter<'a> {
    pub clock: &'a dyn Clock,
    /// The sessions before the running one's slot.
    pub before: &'a mut [Option<Session>],
    /// The sessions after it.
    pub after: &'a mut [Option<Session>],
    /// The running connection's debugging session (SCRIPT DEBUG), if its command may start
    /// one.
    pub debug: Option<Box<DebugLink>>,
    /// What the run leaves for after it (kept in the driver, empty between runs).
    pub left: &'a mut Left,
    /// The decoder limits a new connection's session starts with.
    pub limits: Limits,
}

/// What a long run that served the other connections leaves for the driver to do after it.
#[derive(Default)]
pub(crate) struct Left {
    /// Connections whose peer closed meanwhile.
    pub gone: Vec<Handle>,
    /// What the link to this server's primary sent meanwhile (its RDB or its stream), kept
    /// as it came: the driver takes it in after the run, as Redis leaves its master's input
    /// for after a busy script.
    pub held: Vec<(Handle, Vec<u8>)>,
    /// Connections accepted meanwhile whose slots lie past the lent ones.
    pub joined: Vec<Session>,
    /// Every connection accepted meanwhile (the driver counts them after the run).
    pub admitted: Vec<Handle>,
}

impl Left {
    /// Nothing to do.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.gone.is_empty()
            && self.held.is_empty()
            && self.joined.is_empty()
            && self.admitted.is_empty()
    }
}

/// The running connection's side of a Lua debugging session: its output goes out at once and
/// its input is read as the debugger asks for it, both waiting on the shell (Redis's
/// synchronous session blocks on the client's socket the same way).
pub(crate) struct DebugLink {
    pub handle: Handle,
    pub protocol: Protocol,
    /// The connection's output still unwritten when the command started: it goes first.
    pub prior: Vec<u8>,
    /// Bytes read and not yet decoded.
    input: Vec<u8>,
    decoder: Decoder,
}

impl DebugLink {
    pub fn new(handle: Handle, protocol: Protocol, prior: Vec<u8>, limits: Limits) -> Self {
        DebugLink {
            handle,
            protocol,
            prior,
            input: Vec::new(),
            decoder: Decoder::new(limits),
        }
    }
}

impl ScriptWait for Waiter<'_> {
    fn now(&mut self) -> Now {
        self.clock.now()
    }

    fn sleep_us(&mut self, us: u64) {
        self.clock.sleep_us(us);
    }

    fn serve(&mut self, busy: &mut dyn BusyAnswer) {
        let clock = self.clock;
        let running = busy.running();
        let mut io = Serving {
            waiter: self,
            busy,
            running,
            shutdown: false,
        };
        clock.serve_busy(running, &mut io);
    }

    fn debug_send(&mut self, write: &mut dyn FnMut(&mut dyn ReplySink)) -> bool {
        let Some(link) = self.debug.as_mut() else {
            return false;
        };
        let mut bytes = core::mem::take(&mut link.prior);
        write(&mut RespWriter::new(&mut bytes, link.protocol));
        self.clock.write_wait(link.handle, &bytes)
    }

    fn debug_receive(&mut self) -> DebugInput {
        let Some(link) = self.debug.as_mut() else {
            return DebugInput::Gone;
        };
        let mut buf = [0u8; 1024];
        loop {
            // Redis's debugger reads arrays only (no inline commands).
            if link.input.first().is_some_and(|&b| b != b'*') {
                link.input.clear();
                return DebugInput::Error("ERR protocol error".into());
            }
            let decoded = match link.decoder.decode(&link.input, true) {
                Ok(Some(frame)) => Some((ArgvBuf::from_args(frame.argv.iter()), frame.consumed)),
                Ok(None) => None,
                Err(_) => {
                    link.input.clear();
                    return DebugInput::Error("ERR protocol error".into());
                }
            };
            if let Some((args, used)) = decoded {
                link.input.drain(..used);
                return DebugInput::Command(args);
            }
            let n = self.clock.read_wait(link.handle, &mut buf);
            if n == 0 {
                return DebugInput::Gone;
            }
            link.input.extend_from_slice(&buf[..n]);
            if link.input.len() > kayvee_engine::script_wait::DEBUG_INPUT_MAX {
                link.input.clear();
                return DebugInput::Error("ERR max client buffer reached".into());
            }
        }
    }
}

struct Serving<'w, 'a> {
    waiter: &'w mut Waiter<'a>,
    busy: &'w mut dyn BusyAnswer,
    running: Handle,
    shutdown: bool,
}

/// Session `h` among the lent ones (never the running one's slot) and those accepted
/// meanwhile.
fn lent<'s>(
    before: &'s mut [Option<Session>],
    after: &'s mut [Option<Session>],
    joined: &'s mut [Session],
    running: Handle,
    h: Handle,
) -> Option<&'s mut Session> {
    let slot = match h.0 {
        slot if slot < running.0 => before.get_mut(slot),
        slot if slot > running.0 => after.get_mut(slot - running.0 - 1),
        _ => None,
    };
    match slot.and_then(Option::as_mut).filter(|s| s.handle == h) {
        Some(s) => Some(s),
        None => joined.iter_mut().find(|s| s.handle == h),
    }
}

impl BusyIo for Serving<'_, '_> {
    fn input(&mut self, h: Handle, data: &[u8]) {
        let Serving {
            waiter,
            busy,
            running,
            shutdown,
        } = self;
        let Some(s) = lent(
            waiter.before,
            waiter.after,
            &mut waiter.left.joined,
            *running,
            h,
        ) else {
            return;
        };
        if s.upstream.is_some() {
            // The primary's bytes are neither commands to answer `-BUSY` to nor to run now.
            match waiter.left.held.last_mut() {
                Some((last, bytes)) if *last == h => bytes.extend_from_slice(data),
                _ => waiter.left.held.push((h, data.to_vec())),
            }
            return;
        }
        s.append(data);
        if !s.runnable(crate::session::OUTPUT_PAUSE) {
            return;
        }
        let input = core::mem::take(&mut s.input);
        let pending = &input[s.in_start..s.in_end];
        let mut used = 0;
        while used < pending.len() {
            match s.decoder.decode(&pending[used..], true) {
                Ok(Some(frame)) => {
                    used += frame.consumed;
                    let mut out = RespWriter::new(&mut s.out, busy.protocol(h));
                    if busy.answer(h, &frame.argv, &mut out) == Answered::Shutdown {
                        *shutdown = true;
                        break;
                    }
                }
                Ok(None) => break,
                Err(error) => {
                    error.write_reply(&mut s.out);
                    s.closing = Closing::AfterReply;
                    break;
                }
            }
        }
        s.input = input;
        s.consume(used);
    }

    fn output(&self, h: Handle) -> &[u8] {
        let running = self.running.0;
        let w = &*self.waiter;
        let s = match h.0 {
            slot if slot < running => w.before.get(slot),
            slot if slot > running => w.after.get(slot - running - 1),
            _ => None,
        };
        s.and_then(Option::as_ref)
            .filter(|s| s.handle == h)
            .or_else(|| w.left.joined.iter().find(|s| s.handle == h))
            .map_or(&[], |s| &s.out[s.out_sent..])
    }

    fn written(&mut self, h: Handle, n: usize) {
        let w = &mut *self.waiter;
        if let Some(s) = lent(w.before, w.after, &mut w.left.joined, self.running, h) {
            s.written(n);
        }
    }

    fn connect(&mut self, info: ConnInfo) -> Result<Handle, &'static str> {
        let now = self.waiter.clock.now();
        let h = self.busy.connect(info, now)?;
        let session = Session::new(h, self.waiter.limits);
        let w = &mut *self.waiter;
        let slot = match h.0 {
            slot if slot < self.running.0 => w.before.get_mut(slot),
            slot if slot > self.running.0 => w.after.get_mut(slot - self.running.0 - 1),
            _ => None,
        };
        match slot {
            Some(free @ None) => *free = Some(session),
            _ => w.left.joined.push(session),
        }
        w.left.admitted.push(h);
        Ok(h)
    }

    fn shutdown(&self) -> bool {
        self.shutdown
    }

    fn closed(&mut self, h: Handle) {
        let w = &mut *self.waiter;
        if lent(w.before, w.after, &mut w.left.joined, self.running, h).is_some()
            && !w.left.gone.contains(&h)
        {
            self.waiter.left.gone.push(h);
            self.busy.gone(h);
        }
    }
}
