//! The shell's services the driver calls: the clock, DEBUG SLEEP, and serving the other
//! connections while a script runs long (see [`crate::wait`]).

use kayvee_engine::{ConnInfo, Handle, Now};

/// The shell's clock. Readings never go backwards; the wall time is what `TIME` and expiry see.
pub trait Clock {
    /// The current time.
    fn now(&self) -> Now;
    /// Blocks the whole server for `us` microseconds (DEBUG SLEEP, as in Redis).
    fn sleep_us(&self, us: u64);
    /// While connection `running` runs a script past `busy-reply-threshold`: reads, without
    /// blocking, what every other connection sent into [`BusyIo::input`], writes what
    /// [`BusyIo::output`] then holds, and stops the server at once (no save) when
    /// [`BusyIo::shutdown`] says so; a connection whose peer is gone is reported to
    /// [`BusyIo::closed`]; new connections are accepted and handed to [`BusyIo::connect`]
    /// (so that SCRIPT KILL reaches a runaway script from a new client). A shell that does
    /// not serve during scripts leaves it empty.
    fn serve_busy(&self, running: Handle, io: &mut dyn BusyIo) {
        let _ = (running, io);
    }
    /// A Lua debugging session on connection `h` (SCRIPT DEBUG): writes `data` to it whole,
    /// waiting as long as that takes. False when the connection is gone, or the shell has no
    /// debugging sessions (the default): the script then runs on without stopping.
    fn write_wait(&self, h: Handle, data: &[u8]) -> bool {
        let _ = (h, data);
        false
    }
    /// A Lua debugging session: reads what connection `h` sends into `buf`, waiting until
    /// something arrives. 0: the connection is gone.
    fn read_wait(&self, h: Handle, buf: &mut [u8]) -> usize {
        let _ = (h, buf);
        0
    }
}

/// What the shell's [`Clock::serve_busy`] calls while a script runs.
pub trait BusyIo {
    /// Bytes connection `h` sent: its complete commands are answered now, the rest waits.
    fn input(&mut self, h: Handle, data: &[u8]);
    /// The output connection `h` has pending, to write now.
    fn output(&self, h: Handle) -> &[u8];
    /// `n` bytes of that output were written.
    fn written(&mut self, h: Handle, n: usize);
    /// A SHUTDOWN NOSAVE arrived: the shell stops the server now, without saving.
    fn shutdown(&self) -> bool;
    /// Connection `h`'s peer closed it (a read found the end): it closes once the script
    /// ends.
    fn closed(&mut self, h: Handle);
    /// A connection the shell accepted meanwhile: its handle (the shell serves it from now
    /// on, as the others), or the bytes to send it before closing it.
    fn connect(&mut self, info: ConnInfo) -> Result<Handle, &'static str>;
}
