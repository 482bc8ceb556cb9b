//! Long-running scripts (`busy-reply-threshold`, alias `lua-time-limit`): how the rest of the
//! server is served while one script runs, without the engine doing I/O.
//!
//! A script runs inside one command, so the engine cannot return to the shell's loop until it
//! ends. Instead the shell lends the engine a [`ScriptWait`] for the command
//! ([`crate::Engine::execute_waiting`]). While a script runs, a count hook calls back every
//! 100,000 Lua instructions: it reads the clock through [`ScriptWait::now`], and once the
//! script has run `busy-reply-threshold` milliseconds it calls [`ScriptWait::serve`] at each
//! hook. The shell then accepts new connections ([`BusyAnswer::connect`]: a new client can
//! send SCRIPT KILL), reads what the other connections sent (never blocking), decodes their
//! commands and hands each to [`BusyAnswer::answer`], which writes Redis 7.0's reply: `-BUSY`
//! (a rejected call, failing the client's transaction; EXEC gets `-EXECABORT`) for everything
//! but SCRIPT KILL, FUNCTION KILL, SHUTDOWN NOSAVE and the `allow-busy` commands that run as
//! usual meanwhile (MULTI, DISCARD, WATCH, UNWATCH, AUTH, HELLO, RESET, QUIT); the shell writes
//! the replies out at once. A kill stops the script at its next hook with Redis's error (raised at every
//! instruction from then on, so `pcall` cannot hold it); SHUTDOWN NOSAVE is the shell's to
//! carry out (it exits). The shell stays "bytes in, bytes out": every decision is here.
//!
//! The same lent clock times the commands an EXEC runs and the blocked commands served after
//! a command, one by one, and carries out a DEBUG SLEEP inside EXEC where it runs
//! ([`ScriptWait::sleep_us`]; see `dispatch::timing`).

use crate::argv::{Argv, ArgvBuf};
use crate::client::{ConnInfo, Handle};
use crate::reply::{Protocol, ReplySink};
use crate::time::Now;

/// The shell's side of a long script (see the module doc).
pub trait ScriptWait {
    /// The current time.
    fn now(&mut self) -> Now;
    /// Blocks the whole server for `us` microseconds: a DEBUG SLEEP inside EXEC, carried out
    /// where it runs so that the commands of the transaction are timed one by one.
    fn sleep_us(&mut self, us: u64);
    /// Serves the other connections once, without blocking: each complete command one of them
    /// sent goes to [`Busy::answer`], the replies are written out. A SHUTDOWN NOSAVE
    /// ([`Answered::Shutdown`]) is carried out by the shell.
    fn serve(&mut self, busy: &mut dyn BusyAnswer);
    /// A debugging session (SCRIPT DEBUG): sends what `write` writes to the running client
    /// now, waiting until it is written. False: the client is gone (or the shell cannot).
    fn debug_send(&mut self, write: &mut dyn FnMut(&mut dyn ReplySink)) -> bool {
        let _ = write;
        false
    }
    /// A debugging session: waits for the running client's next command.
    fn debug_receive(&mut self) -> DebugInput {
        DebugInput::Gone
    }
}

/// What a debugging session's client sent ([`ScriptWait::debug_receive`]).
#[derive(Debug)]
pub enum DebugInput {
    /// A command.
    Command(ArgvBuf),
    /// The connection is gone: the script goes on without stopping.
    Gone,
    /// Bytes that are no command (the error's text): the script fails with it.
    Error(alloc::string::String),
}

/// The engine's side while a script runs long: answers the other clients' commands.
pub trait BusyAnswer {
    /// The client running the script (its own further commands wait).
    fn running(&self) -> Handle;
    /// The protocol client `h`'s replies are encoded in.
    fn protocol(&self, h: Handle) -> Protocol;
    /// Answers client `h`'s command `argv`, writing the reply to `out`.
    fn answer(&mut self, h: Handle, argv: &Argv<'_>, out: &mut dyn ReplySink) -> Answered;
    /// A connection the shell accepted while the script runs: admitted as any other (its
    /// handle), or refused with the bytes to send before closing it (`maxclients`,
    /// protected mode). Redis accepts during a busy script too, so a new client can send
    /// SCRIPT KILL.
    fn connect(&mut self, conn: ConnInfo, now: Now) -> Result<Handle, &'static str>;
    /// Client `h`'s peer closed the connection: what the script can see of it (a replica
    /// gone from INFO and the good-replica count) changes now; the rest of the close waits
    /// for the script's end.
    fn gone(&mut self, h: Handle) {
        let _ = h;
    }
}

/// A debugging client's unread input is capped at this: past it, the buffer is dropped and
/// the script fails.
pub const DEBUG_INPUT_MAX: usize = 1 << 20;

/// Redis's reply to commands during an EVAL past the threshold.
pub const BUSY_EVAL: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
/// The same during an FCALL.
pub const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";
/// SCRIPT KILL / FUNCTION KILL of a script that wrote.
pub const UNKILLABLE: &str = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.";
/// The error a killed script ends with.
pub const KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";

/// What [`Busy::answer`] did with a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answered {
    /// The reply is written.
    Replied,
    /// SHUTDOWN NOSAVE: no reply; the shell stops the server now, without saving.
    Shutdown,
}

/// The running script, as other clients' commands see it.
#[derive(Debug)]
pub struct Busy {
    /// The client running the script (its own further commands wait).
    pub running: Handle,
    /// An EVAL (true) or an FCALL.
    pub eval: bool,
    /// The script has called a write command (it cannot be killed).
    pub wrote: bool,
    /// SCRIPT KILL or FUNCTION KILL was accepted.
    pub killed: bool,
}

impl Busy {
    /// Answers another client's command `argv`, writing the reply to `out`.
    pub fn answer(&mut self, argv: &Argv<'_>, out: &mut dyn ReplySink) -> Answered {
        let name = argv.get(0).to_ascii_lowercase();
        let sub = argv.try_get(1).map(<[u8]>::to_ascii_lowercase);
        match (name.as_slice(), sub.as_deref(), argv.len()) {
            (b"script", Some(b"kill"), 2) => self.kill(true, out),
            (b"function", Some(b"kill"), 2) => self.kill(false, out),
            (b"shutdown", _, _)
                if (1..argv.len()).any(|i| argv.get(i).eq_ignore_ascii_case(b"nosave")) =>
            {
                return Answered::Shutdown
            }
            _ => out.error(self.busy_error()),
        }
        Answered::Replied
    }

    /// The `-BUSY` text other clients' commands get.
    pub fn busy_error(&self) -> &'static str {
        if self.eval {
            BUSY_EVAL
        } else {
            BUSY_FUNCTION
        }
    }

    /// SCRIPT KILL (`by_script`) or FUNCTION KILL, as Redis 7.0 checks them.
    fn kill(&mut self, by_script: bool, out: &mut dyn ReplySink) {
        if self.wrote {
            out.error(UNKILLABLE);
        } else if by_script != self.eval {
            out.error(self.busy_error());
        } else {
            self.killed = true;
            out.ok();
        }
    }
}
