//! One client connection's bytes between its smoltcp TCP socket and the connection driver
//! (`kayvee-session`), which does everything else the Linux server does for a connection:
//! decoding with the configured limits, running commands, delivering pub/sub messages and
//! wakeups, output limits, timeouts.

use crate::time::Clock;
use kayvee_engine::{Handle, Now};
use kayvee_session::{Answer, Driver, Flushed, Request};
use smoltcp::socket::tcp;

impl kayvee_session::Clock for Clock {
    #[inline]
    fn now(&self) -> Now {
        Now {
            unix_us: self.unix_us(),
        }
    }

    fn sleep_us(&self, us: u64) {
        // DEBUG SLEEP blocks the whole server, as in Redis: nothing else runs meanwhile.
        self.spin_us(us);
    }
}

/// Hands what the socket received to the driver while it wants input; the peer's FIN (once
/// everything before it is taken) ends the connection after its replies.
pub fn read(sock: &mut tcp::Socket<'_>, driver: &mut Driver, h: Handle, clock: &Clock) {
    while sock.can_recv() && driver.wants_input(h) {
        let got = sock.recv(|data| {
            driver.receive(h, data, clock);
            (data.len(), data.len())
        });
        if !matches!(got, Ok(n) if n > 0) {
            break;
        }
    }
    if !sock.may_recv() && !sock.can_recv() {
        driver.receive_eof(h);
    }
}

/// Hands as much of the connection's output to the socket as it takes; the driver says
/// whether the connection closes.
pub fn write(sock: &mut tcp::Socket<'_>, driver: &mut Driver, h: Handle, clock: &Clock) -> Flushed {
    let flushed = driver.flush(h, clock, |bytes| {
        if !sock.can_send() {
            return Ok(0);
        }
        sock.send_slice(bytes)
    });
    flushed.unwrap_or(Flushed::Close)
}

/// Answers what a command asked of the shell: there is no file system (nothing to save, no
/// ACL file, no config file to rewrite). SHUTDOWN is the caller's: `None`.
pub fn answer(driver: &mut Driver, request: Request, now: Now) -> Option<Answer> {
    let engine = driver.engine_mut();
    Some(match request {
        Request::Shutdown { .. } => return None,
        Request::Crash => panic!("DEBUG SEGFAULT: a crash on purpose"),
        Request::LoadAof => {
            Answer::Error("ERR the unikernel has no file system to load an AOF from".into())
        }
        // A save fails at once (SAVE answers the error; BGSAVE's start was already answered,
        // and INFO reports the failure).
        Request::Save { background } => {
            engine.save_started(background, now);
            engine.save_finished(false, background, now);
            match background {
                true => Answer::Nothing,
                false => Answer::Error("ERR".into()),
            }
        }
        Request::AclFile { .. } => {
            Answer::Error("ERR the unikernel has no file system for the ACL file".into())
        }
        Request::RewriteConfig => match engine.rewrite_config() {
            Err(e) => Answer::Error(alloc::format!("{e}")),
            Ok(_) => Answer::Error("ERR the unikernel has no file system to rewrite to".into()),
        },
    })
}
