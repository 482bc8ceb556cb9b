//! One client connection's bytes between its smoltcp TCP socket and the connection driver
//! (`kayvee-session`), which does everything else the Linux server does for a connection:
//! decoding with the configured limits, running commands, delivering pub/sub messages and
//! wakeups, output limits, timeouts.

use crate::println;
use crate::shell::Shell;
use crate::store::Store;
use crate::time::Clock;
use kayvee_engine::{Handle, Now};
use kayvee_session::{Answer, Driver, Flushed, Request};
use smoltcp::iface::SocketHandle;
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
/// everything before it is taken) ends the connection after its replies. The bytes go into
/// the connection's own query buffer (`Driver::read_buffer`, as kayvee-server reads): the
/// network is not borrowed while the driver runs the commands, so a long script's hook can
/// serve the other connections (see `shell::Shell`).
pub fn read(shell: &Shell<'_, '_, '_>, socket: SocketHandle, driver: &mut Driver, h: Handle) {
    loop {
        let n = {
            let mut net = shell.net.borrow_mut();
            let sock = net.sockets.get_mut::<tcp::Socket>(socket);
            if !(sock.can_recv() && driver.wants_input(h)) {
                // An outgoing connection (the link to a primary) may not receive yet while it
                // connects.
                let connecting =
                    matches!(sock.state(), tcp::State::SynSent | tcp::State::SynReceived);
                if !connecting && !sock.may_recv() && !sock.can_recv() {
                    driver.receive_eof(h);
                }
                return;
            }
            let Some(room) = driver.read_buffer(h) else {
                return;
            };
            sock.recv_slice(room).unwrap_or(0)
        };
        if n == 0 {
            return;
        }
        driver.received(h, n, shell);
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

/// Answers what a command asked of the shell. SAVE, BGSAVE and SHUTDOWN's save go to the
/// disk when there is one (`store`), else a save fails at once; there is no ACL file nor
/// config file. `None`: stop the machine now (SHUTDOWN, after its save).
pub fn answer(
    driver: &mut Driver,
    request: Request,
    clock: &Clock,
    store: &mut Option<Store>,
) -> Option<Answer> {
    let engine = driver.engine_mut();
    let now = kayvee_session::Clock::now(clock);
    Some(match request {
        Request::Shutdown(flags) => {
            let Some(store) = store else {
                return None;
            };
            let save = flags.save.unwrap_or(!engine.core.config.save.is_empty());
            if !save || store.save(engine, clock) {
                return None;
            }
            if flags.force {
                println!("kayvee: error trying to save the DB, exit anyway");
                return None;
            }
            println!("kayvee: error trying to save the DB, can't exit");
            engine.shutdown_failed();
            Answer::Error("ERR Errors trying to SHUTDOWN. Check logs.".into())
        }
        Request::Crash => panic!("DEBUG SEGFAULT: a crash on purpose"),
        Request::LoadAof => match store {
            Some(store) => match store.reload(engine, clock) {
                Ok(()) => Answer::Ok,
                Err(e) => Answer::Error(e),
            },
            None => Answer::Error(
                "ERR the unikernel has no disk to load an append only file from".into(),
            ),
        },
        Request::LoadRdb { .. } => {
            Answer::Error("ERR DEBUG RELOAD NOSAVE is not supported by the unikernel".into())
        }
        Request::Save { background } => match store {
            // FLUSHALL's save (with save points): the running background save is finished
            // first rather than stopped (its log half is already the live one), then the
            // empty dataset is saved over it.
            Some(store) if !background && engine.take_bgsave_abort() => {
                match store.save(engine, clock) {
                    true => Answer::Ok,
                    false => Answer::Error("ERR".into()),
                }
            }
            Some(store) if background => {
                engine.save_started(true, now);
                store.start_background(engine, clock, crate::store::Kind::Save);
                Answer::Nothing
            }
            Some(store) => match store.save(engine, clock) {
                true => Answer::Ok,
                false => Answer::Error("ERR".into()),
            },
            // Without a disk a save fails at once (SAVE answers the error; BGSAVE's start was
            // already answered, and INFO reports the failure).
            None => {
                engine.save_started(background, now);
                engine.save_finished(false, background, now);
                match background {
                    true => Answer::Nothing,
                    false => Answer::Error("ERR".into()),
                }
            }
        },
        Request::AclFile { .. } => {
            Answer::Error("ERR the unikernel has no file system for the ACL file".into())
        }
        // No outgoing connections yet: MIGRATE answers as Redis does for an unreachable
        // target.
        Request::Migrate(_) => Answer::Migrate {
            replies: alloc::vec::Vec::new(),
            error: Some(kayvee_engine::outcome::LinkError::Connect),
        },
        // The image listens on its one configured port for good.
        Request::Rebind { .. } => {
            engine.rollback_config_set();
            Answer::Error(
                "ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen \
                 on this port"
                    .into(),
            )
        }
        Request::RewriteConfig => match engine.rewrite_config() {
            Err(e) => Answer::Error(alloc::format!("{e}")),
            Ok(_) => Answer::Error("ERR the unikernel has no file system to rewrite to".into()),
        },
    })
}
