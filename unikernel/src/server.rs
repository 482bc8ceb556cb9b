//! The server loop: one polled event loop driving the NIC, smoltcp and every connection, with
//! the engine's cron at `hz`.
//!
//! Idle: on virtio-mmio (microvm, Firecracker) the loop keeps polling for `busy-poll-us`
//! ([`BUSY_POLL_US`] by default) after the last frame, send or command, then halts until the
//! NIC's interrupt or its next deadline (engine cron, a blocked client's timeout, smoltcp's
//! timers, the clock's refinement; at most [`HALT_MAX_US`]). The device's used-buffer
//! interrupts are suppressed except around that halt. Without the interrupt (q35's PCI NIC,
//! `idle=tick`) it halts in [`IDLE_TICK_US`] timer ticks after [`IDLE_AFTER_US`] without a
//! frame; `idle=poll` and the ring-3 mode never halt. INFO server counts
//! `kayvee_nic_interrupts` and `kayvee_idle_halts`.
//!
//! Listening sockets form a dynamic pool: smoltcp's TCP socket serves one connection, so the
//! loop keeps at least [`LISTENERS_MIN`] sockets listening, topping the pool up after every
//! received frame (a burst of SYNs must find listeners), and reuses sockets once closed.

use crate::cmdline::{Args, Idle};
use crate::conn;
use crate::net::{self, NetDevice};
use crate::pool::{conn_info, push_decimal, Pool, LISTENERS_LOW, LISTENERS_MIN};
use crate::shell::{Net, Shell, INGRESS_BUDGET, RX_POSTED_PER_ROUND};
use crate::store::Store;
use crate::time::Clock;
use crate::{exit, heap, println};

/// The first local port of outgoing connections (IANA's dynamic range).
const EPHEMERAL_FIRST: u16 = 49_152;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::RefCell;
use kayvee_engine::{ConnInfo, Engine, Handle, Transport};
use kayvee_session::{Clock as _, Driver, Flushed, Notice};
use smoltcp::iface::{
    Config as IfaceConfig, Interface, PollIngressSingleResult, SocketHandle, SocketSet,
};
use smoltcp::socket::{dhcpv4, tcp};
use smoltcp::time::Instant;
use smoltcp::wire::{EthernetAddress, IpAddress, IpCidr, Ipv4Address};
use virtio_drivers::transport::DeviceType;

/// Print driver and pool counters every 2 s (debugging aid).
const DEBUG_STATS: bool = false;
/// Without the NIC's interrupt (q35's PCI NIC, `idle=tick`), the loop halts (`hlt` until
/// the next idle tick) once no frame has arrived for this long; busy clients never see it,
/// and an idle guest stops burning a host core under TCG. Also how long after the last frame
/// the held-back boot log is printed.
const IDLE_AFTER_US: u64 = 10_000;
/// How long the loop polls after "ready" before its first idle halt, unless a command was
/// answered before.
const BOOT_SPELL_US: u64 = 10_000;
/// The idle tick without the NIC's interrupt: the most a frame arriving at an idle guest
/// waits before it is looked at.
#[cfg_attr(feature = "ring3", allow(dead_code))]
const IDLE_TICK_US: u32 = 500;
/// The unikernel's default `busy-poll-us` (the engine's is 50): with the NIC's interrupt
/// wired, the loop keeps polling this long after the last frame received, frame sent or
/// command run before it halts. Waking a halted guest costs far more than the Linux shell's
/// epoll wakeup: under TCG here, redis-benchmark -c 1 -P 1 through the port forward (about
/// 90 us a round trip) gave, median of 5 interleaved rounds, SET/GET 5.0k/4.7k requests/s
/// with 50 us (a halt on nearly every request), 9.2k/11.6k with 100 us (one round in five
/// collapsed to 1.6k/3.6k), 11.7k/11.4k with 200 us, 10.4k/10.9k with 300 us, and 8.7k/10.6k
/// for the former 10 ms spin. An idle guest pays nothing for it.
pub const BUSY_POLL_US: u32 = 200;
/// The longest halt with the NIC's interrupt wired (the LAPIC timer still bounds it; the
/// engine cron at `hz` >= 1 comes sooner anyway).
#[cfg_attr(feature = "ring3", allow(dead_code))]
const HALT_MAX_US: u64 = 1_000_000;
/// A background save runs after each pass's replies went out, in chunks (a few KiB of the RDB
/// file each, `store::CHUNK_BYTES`). It is owed this share of the loop's time (1/`SAVE_SHARE`):
/// while it has had less, its chunks run when no frame waits, or even with frames waiting once
/// it is owed `SAVE_CREDIT_MAX_US`, up to `SAVE_SLICE_US` a pass. Beyond its share it fills the time the loop would idle (`SAVE_IDLE_US`); a request that lands then
/// waits one chunk at most. Redis's forked child takes another core; the image has one.
const SAVE_SHARE: u64 = 5;
/// The save's share (1/`SAVE_SHARE_BEHIND`) while its undo log is over its budget
/// (`Store::save_behind`): a fast writer keeps more old values the longer the save runs.
const SAVE_SHARE_BEHIND: u64 = 3;
/// The loop counts as idle, and a background save fills its time beyond its share, once no
/// frame has come in and nothing was served for this long: not in the gaps between a
/// pipelining client's batches, where a chunk would delay the next batch.
const SAVE_IDLE_US: u64 = 500;
/// The longest run of a background save's chunks in one pass.
const SAVE_SLICE_US: u64 = 1_000;
/// The save's time owed by the share is kept at most this (it does not pile up while the loop
/// idles); owed less, it waits for a pass with no frame pending (the gaps between a
/// pipelining client's batches), owed this much it runs at once...
const SAVE_CREDIT_MAX_US: i64 = 4_000;
/// ... and its debt at most this: a run of chunks longer than it was owed is paid back by
/// chunks it does not run (idle time it fills is not counted).
const SAVE_CREDIT_MIN_US: i64 = -1_000_000;
/// Brings up the network and serves clients until SHUTDOWN.
pub fn run(engine: Engine, clock: &Clock, args: &Args, mut store: Option<Store>) -> ! {
    let mut driver = Driver::new(engine);
    let (addr, transport) = match net::probe_mmio(&args.virtio_mmio, DeviceType::Network) {
        Some((addr, t)) => (NicAt::Mmio(addr, !args.virtio_mmio.is_empty()), t),
        None if !args.virtio_mmio.is_empty() => {
            println!("kayvee: no virtio-net among the command line's virtio_mmio.device= blocks");
            exit::fail("no network device")
        }
        None => match net::probe_pci(DeviceType::Network) {
            Ok((at, t)) => (NicAt::Pci(at), t),
            Err(why) => {
                println!("kayvee: no virtio-net in the virtio-mmio window (microvm), and virtio-net: {why}");
                exit::fail("no network device")
            }
        },
    };
    crate::boottime::stamp("nic-probe");
    let mut dev = NetDevice::new(transport).unwrap_or_else(|e| {
        println!("kayvee: virtio-net init failed: {e:?}");
        exit::fail("network device")
    });
    crate::boottime::stamp("virtio-net");
    let mac = EthernetAddress(dev.mac());
    let features = dev.features();
    let mmio_base = match addr {
        NicAt::Mmio(base, _) => Some(base),
        NicAt::Pci(_) => None,
    };
    crate::println_later!("kayvee: virtio-net at {addr}, MAC {mac}, features {features:#x}");
    let now = Instant::from_micros(clock.uptime_us() as i64);
    let mut iface = Interface::new(IfaceConfig::new(mac.into()), &mut dev, now);
    let mut sockets = SocketSet::new(vec![]);
    crate::boottime::stamp("interface");
    let dhcp = configure_ip(&mut iface, &mut sockets, args);
    let gateway = match dhcp {
        Some(h) => wait_for_lease(&mut iface, &mut dev, &mut sockets, h, clock),
        None => args.gw,
    };
    if let (Some(IpCidr::Ipv4(cidr)), Some(gw)) = (iface.ip_addrs().first(), gateway) {
        dev.announce(cidr.address(), gw);
    }
    if let Some((ip, port)) = args.ntp {
        crate::sntp::sync(&mut iface, &mut dev, &mut sockets, (ip, port), clock);
    }
    let port = driver.engine().core.config.port;
    let mut pool = Pool {
        port,
        slots: Vec::new(),
        listening: Vec::new(),
        active: Vec::new(),
        free: Vec::new(),
        sockets_max: driver.engine().core.config.maxclients as usize + LISTENERS_MIN,
        slot_of: Vec::new(),
        next_local_port: EPHEMERAL_FIRST + (clock.uptime_us() % 1000) as u16,
        arrivals: Default::default(),
    };
    pool.refill(&mut sockets, LISTENERS_LOW);
    crate::boottime::stamp("listeners");
    ready_line(port);
    let tsc_hz = clock.tsc_hz();
    crate::serial::later(alloc::boxed::Box::new(move || {
        crate::boottime::report(tsc_hz)
    }));
    // The first cron round waits one period: its code is not on the way to the first answer.
    let hz = u64::from(driver.engine().core.config.hz.max(1));
    driver.defer_cron(clock.now().unix_us + 1_000_000 / hz);
    let mut next_stats_us = 0u64;
    let mut last_us = clock.uptime_us();
    let mut last_rx_us = last_us;
    // Frames, commands or sends seen at this uptime (the busy-poll spell counts from it).
    let mut last_busy_us = last_us;
    let (mut commands, mut sent) = (0u64, 0u64);
    // The loop time a background save is owed (`SAVE_SHARE`), and when it was counted.
    let (mut save_credit_us, mut save_counted_us) = (0i64, 0u64);
    let (mut received, mut answered) = (false, false);
    #[cfg(not(feature = "ring3"))]
    if args.idle != Idle::Poll {
        crate::arch::apic::init_idle_timer();
    }
    // Wired at the first idle halt: the I/O APIC probing is not on the way to the first answer.
    let mut nic_irq: Option<bool> = None;
    let mut halts = 0u64;
    // The slots to serve first in a pass, in the order their input arrived (`read_connections`).
    let mut arrived = Vec::new();
    driver.engine_mut().core.host.counters =
        vec![("kayvee_nic_interrupts", 0), ("kayvee_idle_halts", 0)];
    loop {
        let start_us = clock.uptime_us();
        if start_us - last_us > 200_000 {
            println!(
                "kayvee: warning: one loop round took {} ms",
                (start_us - last_us) / 1000
            );
        }
        last_us = start_us;
        clock.maybe_refine();
        let ts = Instant::from_micros(start_us as i64);
        let mut took_frames = false;
        for _ in 0..INGRESS_BUDGET {
            if iface.poll_ingress_single(ts, &mut dev, &mut sockets)
                == PollIngressSingleResult::None
            {
                break;
            }
            took_frames = true;
            last_rx_us = start_us;
            if !received {
                // The boot report's phase from "ready" to the first frame taken in.
                received = true;
                crate::boottime::stamp("first-frame");
            }
            pool.refill(&mut sockets, LISTENERS_LOW);
        }
        // A loop round is the driver's pass (a paced full sync takes quiet time only in a
        // round after the one it last ran in).
        driver.after_wait(clock.now(), took_frames);
        let grown = pool.listening.len() + 1;
        pool.refill(&mut sockets, grown.min(LISTENERS_MIN));
        dev.post_more_rx(RX_POSTED_PER_ROUND);
        if let Some(h) = dhcp {
            let _ = poll_dhcp(&mut iface, &mut sockets, h);
        }
        let host = &mut driver.engine_mut().core.host;
        host.used_memory = heap::used_bytes();
        if let [(_, irqs), (_, halted)] = host.counters.as_mut_slice() {
            *irqs = crate::arch::idt::NIC_IRQS.load(core::sync::atomic::Ordering::Relaxed);
            *halted = halts;
        }
        {
            // The network, lent to a script that runs long (see `Shell`).
            let shell = Shell {
                clock,
                net: RefCell::new(Net {
                    iface: &mut iface,
                    dev: &mut dev,
                    sockets: &mut sockets,
                    pool: &mut pool,
                }),
            };
            connect_primary(&shell, &mut driver);
            read_connections(&shell, &mut driver, &mut arrived);
            carry_out_requests(&mut driver, &shell, &mut store);
            for notice in driver.take_notices() {
                // The replica link's steps and warnings, in Redis's words; the rest is per client and
                // quiet.
                if let Notice::Replication(text) | Notice::Warning(text) = notice {
                    println!("kayvee: {text}");
                }
            }
            if let Some(store) = store.as_mut() {
                store.after_pass(driver.engine_mut(), clock);
            }
            if clock.now().unix_us >= driver.poll_at() && driver.poll(&shell).cron {
                if let Some(store) = store.as_mut() {
                    store.cron(driver.engine_mut(), clock);
                }
            }
            write_connections(&shell, &mut driver, &mut store);
        }
        while iface.poll_egress(ts, &mut dev, &mut sockets) != smoltcp::iface::PollResult::None {}
        dev.kick();
        // A background save's chunks, once the pass's replies are out (see `SAVE_SHARE`).
        let saving = store.as_ref().is_some_and(Store::busy);
        if let Some(store) = store.as_mut().filter(|s| s.busy()) {
            let t0 = clock.uptime_us();
            let share = match store.save_behind() {
                true => SAVE_SHARE_BEHIND,
                false => SAVE_SHARE,
            };
            let passed = t0
                .saturating_sub(save_counted_us)
                .min(SAVE_SLICE_US * share);
            save_credit_us += (passed / (share - 1)) as i64;
            let mut owed_us = 0;
            let t = loop {
                let t = clock.uptime_us();
                // What it is owed, it takes while no frame waits (the gaps between a
                // client's batches), or at once when it is owed the most it may be.
                let due = save_credit_us - owed_us;
                let owed = due > 0 && (due >= SAVE_CREDIT_MAX_US || !dev.rx_pending());
                // No frame this pass and no work for a while before it, and none waiting.
                let idle = last_rx_us != start_us
                    && t.saturating_sub(last_busy_us) >= SAVE_IDLE_US
                    && !dev.rx_pending();
                if !store.busy() || t - t0 >= SAVE_SLICE_US || !(owed || idle) {
                    break t;
                }
                store.step(driver.engine_mut(), clock);
                if owed {
                    owed_us += (clock.uptime_us() - t) as i64;
                }
            };
            save_credit_us =
                (save_credit_us - owed_us).clamp(SAVE_CREDIT_MIN_US, SAVE_CREDIT_MAX_US);
            save_counted_us = t;
        }
        let up = clock.uptime_us();
        if DEBUG_STATS && up >= next_stats_us {
            let (rx, tx, dropped, frames, kicks) = dev.stats();
            println!("kayvee: stats rx_posted={rx} tx_inflight={tx} tx_dropped={dropped} tx_frames={frames} kicks={kicks} sockets={} listening={} active={} free={}", pool.slots.len(), pool.listening.len(), pool.active.len(), pool.free.len());
            let mut states: Vec<(tcp::State, usize)> = Vec::new();
            for slot in &pool.slots {
                let st = sockets.get::<tcp::Socket>(slot.socket).state();
                match states.iter_mut().find(|(s, _)| *s == st) {
                    Some((_, n)) => *n += 1,
                    None => states.push((st, 1)),
                }
            }
            println!("kayvee: states {states:?}");
            for &a in &pool.active {
                let sk = sockets.get::<tcp::Socket>(pool.slots[a].socket);
                println!(
                    "  active slot {a}: {} conn={} recvq={} sendq={} remote={:?}",
                    sk.state(),
                    pool.slots[a].client.is_some(),
                    sk.recv_queue(),
                    sk.send_queue(),
                    sk.remote_endpoint()
                );
            }
            next_stats_us = up + 2_000_000;
        }
        let engine = driver.engine();
        if !answered && engine.core.stats.total_commands_processed > 0 {
            // The boot report's last phase: "ready" to the first reply handed to smoltcp.
            answered = true;
            crate::boottime::stamp("first-answer");
        }
        if engine.core.stats.total_commands_processed > 0 || up - last_rx_us > IDLE_AFTER_US {
            // The held-back boot log, once the first command is answered or the loop is idle.
            crate::serial::release();
        }
        let (c, t) = (engine.core.stats.total_commands_processed, dev.tx_frames());
        if last_rx_us == start_us || c != commands || t != sent {
            (last_busy_us, commands, sent) = (up, c, t);
        }
        if !saving && args.idle == Idle::Halt && nic_irq != Some(false) {
            // Until the first answer (or BOOT_SPELL_US) the loop keeps polling: a freshly
            // booted server expects its first client, and halting for it would add a wakeup.
            let spell = match answered {
                true => u64::from(engine.core.config.busy_poll_us),
                false => u64::from(engine.core.config.busy_poll_us).max(BOOT_SPELL_US),
            };
            if up - last_busy_us >= spell
                && *nic_irq.get_or_insert_with(|| wire_nic_interrupt(mmio_base, args))
            {
                let wake = next_wake_us(up, &driver, clock, &mut iface, &sockets);
                if wake > up && halt_until_interrupt(&mut dev, wake - up) {
                    halts += 1;
                    last_us = clock.uptime_us();
                }
            }
        }
        if !saving
            && nic_irq != Some(true)
            && args.idle != Idle::Poll
            && up - last_rx_us > IDLE_AFTER_US
        {
            idle_wait();
            halts += 1;
            last_us = clock.uptime_us();
        }
    }
}

/// The uptime (us) by which the loop must run again: the driver's (the engine cron, a blocked
/// client's or CLIENT PAUSE's deadline), smoltcp's next timer (TCP retransmit, delayed ACK,
/// DHCP), the clock's next refinement; at most [`HALT_MAX_US`] ahead.
fn next_wake_us(
    up: u64,
    driver: &Driver,
    clock: &Clock,
    iface: &mut Interface,
    sockets: &SocketSet<'_>,
) -> u64 {
    let due_in = driver.poll_at().saturating_sub(clock.unix_us());
    let mut at = up + due_in.min(HALT_MAX_US);
    if let Some(t) = iface.poll_at(Instant::from_micros(up as i64), sockets) {
        at = at.min(t.total_micros().max(0) as u64);
    }
    if let Some(r) = clock.next_refine_us() {
        at = at.min(r);
    }
    at
}

/// Routes the NIC's interrupt (virtio-mmio only) to end idle halts; false when it cannot be
/// (PCI: the INTx routing is not done, the loop keeps the timer tick; ring 3: no `hlt`).
fn wire_nic_interrupt(mmio_base: Option<usize>, args: &Args) -> bool {
    #[cfg(not(feature = "ring3"))]
    if let Some(base) = mmio_base {
        use crate::arch::{idt, ioapic};
        let irq = args.virtio_mmio.iter().find(|d| d.base as usize == base);
        let Some(gsi) = ioapic::microvm_gsi(base, irq.map(|d| d.irq)) else {
            println!("kayvee: no interrupt known for the NIC at {base:#x}: idle halts tick");
            return false;
        };
        let Some((ioapic, pin)) = ioapic::route(gsi) else {
            println!("kayvee: no I/O APIC pin for the NIC's GSI {gsi}: idle halts tick");
            return false;
        };
        idt::NIC_ISR_ADDR.store(base as u64 + 0x60, core::sync::atomic::Ordering::Relaxed);
        crate::println_later!(
            "kayvee: NIC interrupt: GSI {gsi} (I/O APIC {ioapic:#x} pin {pin}), vector {}",
            idt::NIC_VECTOR
        );
        return true;
    }
    let _ = (mmio_base, args);
    false
}

/// Halts until the NIC interrupts or `us` pass: the device's used-buffer interrupts are
/// enabled, the receive ring looked at once more (a frame that landed before the device saw
/// the flag raised no interrupt: it must not wait for the timer), then `sti; hlt` (an
/// interrupt raised after the check is pending at `sti` and ends the `hlt`), and interrupts
/// are suppressed again. Returns whether it halted.
fn halt_until_interrupt(dev: &mut NetDevice, us: u64) -> bool {
    dev.set_interrupts(true);
    let halt = !dev.rx_pending();
    #[cfg(not(feature = "ring3"))]
    if halt {
        crate::arch::apic::halt_for(us.min(HALT_MAX_US) as u32);
    }
    let _ = us;
    dev.set_interrupts(false);
    halt
}

/// Where the NIC was found, for the boot log (formatted only when the log is printed).
enum NicAt {
    /// A virtio-mmio block at this address; true when the command line named it.
    Mmio(usize, bool),
    /// A PCI function, as `net::probe_pci` describes it.
    Pci(alloc::string::String),
}

impl core::fmt::Display for NicAt {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            NicAt::Mmio(addr, false) => write!(f, "virtio-mmio {addr:#x}"),
            NicAt::Mmio(addr, true) => {
                write!(f, "virtio-mmio {addr:#x} (from the command line)")
            }
            NicAt::Pci(at) => f.write_str(at),
        }
    }
}

/// Writes "kayvee: ready: listening on TCP port N" straight to the console (the host times
/// it), with the number converted by hand: no formatting code on the way to the first answer.
fn ready_line(port: u16) {
    let mut line = alloc::string::String::from("kayvee: ready: listening on TCP port ");
    push_decimal(&mut line, port.into());
    line.push('\n');
    crate::serial::write_through(line.as_bytes());
}

/// Halts until the next idle tick; the ring-3 mode spins instead (`hlt` is privileged there).
fn idle_wait() {
    #[cfg(not(feature = "ring3"))]
    crate::arch::apic::halt_for(IDLE_TICK_US);
    #[cfg(feature = "ring3")]
    core::hint::spin_loop();
}

/// Static address from `ip=`/`gw=`, or a DHCP socket whose handle is returned.
fn configure_ip(
    iface: &mut Interface,
    sockets: &mut SocketSet<'_>,
    args: &Args,
) -> Option<SocketHandle> {
    let Some(cidr) = args.ip.map(crate::cmdline::ipv4_cidr) else {
        println!("kayvee: no ip= given: waiting for a DHCP lease");
        return Some(sockets.add(dhcpv4::Socket::new()));
    };
    iface.update_ip_addrs(|a| {
        let _ = a.push(IpCidr::Ipv4(cidr));
    });
    if let Some(gw) = args.gw {
        let _ = iface.routes_mut().add_default_ipv4_route(gw);
    }
    let gw = args.gw;
    crate::println_later!("kayvee: address {cidr}, gateway {gw:?}");
    None
}

/// How long the boot waits for a DHCP lease before giving up.
const DHCP_WAIT_US: u64 = 10_000_000;

/// Runs the network until the DHCP socket holds a lease; stops the boot with a clear
/// message after [`DHCP_WAIT_US`] without one (never a server without an address). Returns
/// the lease's router.
fn wait_for_lease(
    iface: &mut Interface,
    dev: &mut NetDevice,
    sockets: &mut SocketSet<'_>,
    h: SocketHandle,
    clock: &Clock,
) -> Option<Ipv4Address> {
    crate::serial::release(); // the wait can be long: show the log so far
    let deadline = clock.uptime_us() + DHCP_WAIT_US;
    loop {
        if clock.uptime_us() > deadline {
            println!(
                "kayvee: no DHCP lease within {} s: is there a DHCP server on this network? \
                 Give a static address with ip=ADDR/PREFIX gw=ADDR",
                DHCP_WAIT_US / 1_000_000
            );
            exit::fail("no network address");
        }
        let now = Instant::from_micros(clock.uptime_us() as i64);
        iface.poll(now, dev, sockets);
        dev.kick();
        if let Some(router) = poll_dhcp(iface, sockets, h) {
            return router;
        }
    }
}

/// Applies DHCP leases as they come and go; on a new lease, returns its router.
fn poll_dhcp(
    iface: &mut Interface,
    sockets: &mut SocketSet<'_>,
    h: SocketHandle,
) -> Option<Option<Ipv4Address>> {
    match sockets.get_mut::<dhcpv4::Socket>(h).poll() {
        None => None,
        Some(dhcpv4::Event::Configured(cfg)) => {
            println!(
                "kayvee: DHCP lease: address {}, router {}, DNS {:?}, from server {}",
                cfg.address,
                cfg.router.map_or("none".into(), |r| alloc::format!("{r}")),
                cfg.dns_servers.as_slice(),
                cfg.server.address,
            );
            iface.update_ip_addrs(|a| {
                a.clear();
                let _ = a.push(IpCidr::Ipv4(cfg.address));
            });
            if let Some(r) = cfg.router {
                let _ = iface.routes_mut().add_default_ipv4_route(r);
            } else {
                iface.routes_mut().remove_default_ipv4_route();
            }
            Some(cfg.router)
        }
        Some(dhcpv4::Event::Deconfigured) if iface.ip_addrs().is_empty() => None, // not leased yet
        Some(dhcpv4::Event::Deconfigured) => {
            println!("kayvee: DHCP lease lost");
            iface.update_ip_addrs(|a| a.clear());
            iface.routes_mut().remove_default_ipv4_route();
            None
        }
    }
}

/// Opens the connection to this server's primary when the driver names one (REPLICAOF, or a
/// retry a second after a failed attempt or a lost link): an outgoing TCP connection on a pool
/// socket, from then on a session like any other (its first bytes wait in the driver until the
/// socket is established, `read_slot` hands them over then). The image resolves no host
/// names: a primary is named by its IPv4 address (under QEMU's user network the host is the
/// gateway, 10.0.2.2).
fn connect_primary(shell: &Shell<'_, '_, '_>, driver: &mut Driver) {
    let now = shell.clock.now();
    let Some((host, port)) = driver.primary_due(now) else {
        return;
    };
    println!("kayvee: Connecting to MASTER {host}:{port}");
    let Ok(ip) = host.parse::<Ipv4Address>() else {
        driver.primary_unreachable(
            "the unikernel resolves no host names: name the primary by its IPv4 address",
        );
        return;
    };
    let mut net = shell.net.borrow_mut();
    let Net {
        iface,
        sockets,
        pool,
        ..
    } = &mut *net;
    let Some(s) = pool.free.pop().or_else(|| pool.grow(sockets)) else {
        driver.primary_unreachable("no socket left for the connection");
        return;
    };
    let local_port = pool.next_local_port;
    pool.next_local_port = match local_port {
        u16::MAX => EPHEMERAL_FIRST,
        p => p + 1,
    };
    let sock = sockets.get_mut::<tcp::Socket>(pool.slots[s].socket);
    if let Err(e) = sock.connect(iface.context(), (IpAddress::Ipv4(ip), port), local_port) {
        pool.free.push(s);
        driver.primary_unreachable(&alloc::format!("{e}"));
        return;
    }
    let laddr = match iface.ip_addrs().first() {
        Some(cidr) => alloc::format!("{}:{local_port}", cidr.address()),
        None => alloc::string::String::new(),
    };
    let info = ConnInfo {
        transport: Transport::Tcp {
            addr: alloc::format!("{ip}:{port}"),
            laddr,
        },
        fd: s as i64 + 8,
    };
    let h = driver.connect_primary(info, now);
    if pool.slot_of.len() <= h.0 {
        pool.slot_of.resize(h.0 + 1, usize::MAX);
    }
    pool.slot_of[h.0] = s;
    pool.slots[s].client = Some(h);
    pool.slots[s].retired = false;
    pool.active.push(s);
}

/// Reads every active connection into the driver (its commands run at once); attaches new
/// connections, detaches and recycles closed sockets. The connections that received since the
/// last pass go first, in the order their data arrived (`arrival`): a client that sent first
/// is served first, as under epoll, whatever pool slot each sits on. `arrived` is a buffer
/// kept between passes.
fn read_connections(shell: &Shell<'_, '_, '_>, driver: &mut Driver, arrived: &mut Vec<usize>) {
    shell.net.borrow().pool.arrivals.take(arrived);
    for &s in arrived.iter() {
        read_slot(shell, s, driver);
    }
    arrived.clear();
    let mut i = 0;
    loop {
        let Some(s) = shell.net.borrow().pool.active.get(i).copied() else {
            break;
        };
        read_slot(shell, s, driver);
        let mut net = shell.net.borrow_mut();
        let Net { sockets, pool, .. } = &mut *net;
        let slot = &mut pool.slots[s];
        let sock = sockets.get_mut::<tcp::Socket>(slot.socket);
        match sock.state() {
            tcp::State::Closed | tcp::State::TimeWait => {
                if let Some(h) = slot.client.take() {
                    driver.close(h); // the peer reset or the close completed
                }
                if sock.state() == tcp::State::Closed {
                    slot.retired = false;
                    let s = pool.active.swap_remove(i);
                    pool.free.push(s);
                    continue;
                }
            }
            tcp::State::Listen => {
                // A half-open connection was reset: the socket listens again.
                slot.retired = false;
                let s = pool.active.swap_remove(i);
                pool.listening.push(s);
                continue;
            }
            _ => {}
        }
        i += 1;
    }
}

/// Attaches a new connection on pool slot `s`, then hands the driver what it received.
fn read_slot(shell: &Shell<'_, '_, '_>, s: usize, driver: &mut Driver) {
    let (h, socket) = {
        let mut net = shell.net.borrow_mut();
        let Net { sockets, pool, .. } = &mut *net;
        let slot = &mut pool.slots[s];
        let sock = sockets.get_mut::<tcp::Socket>(slot.socket);
        if slot.client.is_none() && sock.state() == tcp::State::CloseWait && !sock.can_recv() {
            sock.close(); // the peer connected and left without a word
        }
        if slot.client.is_none() && !slot.retired && sock.may_recv() {
            pool.attach(s, sock, register(driver, sock, s, shell.clock));
            if DEBUG_STATS {
                let sock = sockets.get::<tcp::Socket>(pool.slots[s].socket);
                println!("kayvee: conn slot {s} from {:?}", sock.remote_endpoint());
            }
        }
        let slot = &pool.slots[s];
        let Some(h) = slot.client else {
            return;
        };
        (h, slot.socket)
    };
    conn::read(shell, socket, driver, h);
    let mut net = shell.net.borrow_mut();
    let Net { sockets, pool, .. } = &mut *net;
    let sock = sockets.get_mut::<tcp::Socket>(socket);
    // What arrives from now on puts the slot in line (one wake per registration).
    sock.register_recv_waker(&pool.slots[s].waker);
    if sock.can_send() {
        driver.writable(h); // output the socket could not take before
    }
}

/// Carries out what commands asked of the shell (SHUTDOWN stops the machine).
fn carry_out_requests(driver: &mut Driver, shell: &Shell<'_, '_, '_>, store: &mut Option<Store>) {
    let clock = shell.clock;
    while let Some((h, request)) = driver.next_request() {
        match conn::answer(driver, request, clock, store) {
            Some(answer) => driver.complete(h, answer, shell),
            None if store.is_some() => {
                if let Some(store) = store.as_mut() {
                    store.close(driver.engine_mut(), clock);
                }
                println!("kayvee: SHUTDOWN requested: stopping");
                exit::success()
            }
            None => {
                println!(
                    "kayvee: SHUTDOWN requested: stopping (persistence: off, nothing to save)"
                );
                exit::success()
            }
        }
    }
}

/// Hands every connection's output to its socket; closes those the driver is done with (the
/// client is gone from the engine at once, whatever the peer does with its half).
fn write_connections(shell: &Shell<'_, '_, '_>, driver: &mut Driver, store: &mut Option<Store>) {
    let clock = shell.clock;
    let mut dirty = Vec::new();
    if let Some(store) = store.as_mut() {
        for h in store.take_released() {
            driver.writable(h);
        }
    }
    loop {
        // The pass's writes reach the log (flushed under `appendfsync always`) before any of
        // its replies is handed to a socket; on a full disk, replies the log cannot back wait.
        if let Some(store) = store.as_mut() {
            store.flush_log(driver.engine_mut(), clock);
        }
        if !driver.has_dirty() {
            break;
        }
        driver.take_dirty(&mut dirty);
        if let Some(store) = store.as_mut() {
            store.hold_replies(driver.engine(), &mut dirty);
        }
        for h in dirty.drain(..) {
            let mut net = shell.net.borrow_mut();
            let Net { sockets, pool, .. } = &mut *net;
            let Some(&s) = pool.slot_of.get(h.0) else {
                continue;
            };
            let slot = &mut pool.slots[s];
            if slot.client != Some(h) {
                continue;
            }
            let socket = slot.socket;
            let sock = sockets.get_mut::<tcp::Socket>(socket);
            match conn::write(sock, driver, h, clock) {
                Flushed::Open => {}
                Flushed::ReadAgain => {
                    drop(net);
                    conn::read(shell, socket, driver, h);
                }
                Flushed::Close => {
                    sock.close();
                    driver.close(h);
                    slot.client = None;
                    slot.retired = true;
                    if DEBUG_STATS {
                        println!("kayvee: retired slot {s} ({})", sock.state());
                    }
                }
            }
        }
        carry_out_requests(driver, shell, store);
    }
}

/// Registers a new connection with the driver, or gives the bytes it is refused with.
fn register(
    driver: &mut Driver,
    sock: &tcp::Socket<'_>,
    slot: usize,
    clock: &Clock,
) -> Result<Handle, &'static str> {
    crate::pool::admit(|| driver.connect(conn_info(sock, slot), clock.now()))
}
