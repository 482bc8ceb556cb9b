//! Client-side caching (`CLIENT TRACKING`), Redis 7.0 semantics: the tracking table (key to the
//! ids of the clients that read it), BCAST prefixes, and the invalidation messages.
//!
//! How it works (checked against redis-server 7.0.15):
//! - Default mode: after a read-only command of a tracking client, the command's keys (by key
//!   spec) are remembered for it (OPTIN: only after `CLIENT CACHING yes`; OPTOUT: unless
//!   `CLIENT CACHING no`). When a key is modified the key leaves the table and each client that
//!   read it gets one invalidation (`NOLOOP`: not for its own writes).
//! - BCAST: every modified key that starts with one of the client's prefixes (the empty prefix
//!   matches all) is collected per prefix, and after the command each prefix sends one message
//!   with its keys, sorted.
//! - FLUSHDB / FLUSHALL: every tracking client gets a null invalidation; the table is emptied.
//! - Delivery: a RESP3 receiver gets a push `>2 invalidate [keys]`; a RESP2 receiver (only a
//!   `REDIRECT` target in subscribed mode) gets a pub/sub message on `__redis__:invalidate` whose
//!   payload is the array of keys (null after a flush). Messages for the client running the
//!   command follow its reply (Redis 7.0 holds them until the reply is written); others go to the
//!   outbox the shell drains ([`crate::Engine::take_messages`]), through a [`Delivery`] the
//!   caller hands in with the test whether a receiver is in subscribed mode.
//!
//! Writes are seen through the key event stream ([`crate::events`],
//! [`Tracking::on_key_event`]): while any client tracks, every written, expired, evicted or
//! deleted key is noted, and [`after_run`] / [`after_command`] turn the notes into
//! invalidations. Known deviation: an in-place write that changes nothing (SADD of a present
//! member) still invalidates, where Redis does not.
//!
//! Turning tracking on or off changes what the keyspace records: [`command`] and [`disable`]
//! say so, and their caller re-syncs it (`crate::drain`).

use crate::argv::Argv;
use crate::client::{ClientTable, Handle, PerClient};
use crate::command::{flags, Registered};
use crate::db::Key;
use crate::error::Error;
use crate::events::KeyEvent;
use crate::outbox::Outbox;
use crate::reply::{Protocol, Reply, ReplySink};
use alloc::boxed::Box;
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::rc::Rc;
use alloc::vec::Vec;

/// The channel RESP2 clients subscribe to for redirected invalidations.
pub const INVALIDATE_CHANNEL: &[u8] = b"__redis__:invalidate";

/// One client's tracking state (kept in [`Tracking`] by handle, `None` when tracking is off).
#[derive(Clone, Debug, Default)]
pub struct ClientTracking {
    /// BCAST mode.
    pub bcast: bool,
    /// OPTIN mode.
    pub optin: bool,
    /// OPTOUT mode.
    pub optout: bool,
    /// NOLOOP: no invalidation for the client's own writes.
    pub noloop: bool,
    /// REDIRECT target client id (0 = none).
    pub redirect: u64,
    /// The redirect target was gone when an invalidation was due.
    pub broken_redirect: bool,
    /// `CLIENT CACHING yes|no` for the next command.
    pub caching: Option<bool>,
    /// BCAST prefixes, sorted.
    pub prefixes: BTreeSet<Key>,
}

/// A BCAST prefix: its clients and the keys modified since the last broadcast (with the handle
/// of the client that modified each, for NOLOOP).
#[derive(Debug, Default)]
struct Prefix {
    clients: BTreeSet<Handle>,
    pending: BTreeMap<Key, Option<Handle>>,
}

/// Where invalidations for other clients go: the outbox, and which clients are in subscribed
/// mode (a RESP2 receiver gets an invalidation only then, as a pub/sub message).
pub struct Delivery<'a, S: Fn(Handle) -> bool> {
    /// The messages owed to clients.
    pub outbox: &'a mut Outbox,
    /// Whether a client is in subscribed mode.
    pub subscribed: S,
}

/// The server's tracking state, kept in `Core`.
#[derive(Debug, Default)]
pub struct Tracking {
    /// Key to the ids of the clients that may cache it.
    table: BTreeMap<Key, BTreeSet<u64>>,
    /// Sum of the id sets' sizes (`tracking_total_items`).
    items: usize,
    prefixes: BTreeMap<Key, Prefix>,
    /// Tracking clients: id to handle.
    clients: BTreeMap<u64, Handle>,
    /// Invalidations owed to the running client, written after its reply.
    pending_self: Vec<Reply>,
    /// Each client's `CLIENT TRACKING` mode, `None` when off.
    per: PerClient<Option<Box<ClientTracking>>>,
    /// Keys modified since the last invalidation pass (from the key event stream).
    written: Vec<Key>,
    /// A database was flushed since the last invalidation pass.
    flushed: bool,
    /// While a script runs: the keys its EVAL or FCALL declared. A read-only command the
    /// script calls makes the caller track these (not the keys of that command), as Redis 7.0.
    pub script_keys: Option<Vec<Key>>,
}

impl Tracking {
    /// Tracking's consumer of the key event stream (see [`crate::events`]): notes the keys to
    /// invalidate after the command.
    pub fn on_key_event(&mut self, event: &KeyEvent) {
        if !self.active() {
            return;
        }
        match event {
            KeyEvent::Modified(k)
            | KeyEvent::Opened(k, _)
            | KeyEvent::Expired(k)
            | KeyEvent::Evicted(k) => self.written.push(k.clone()),
            KeyEvent::Flushed(_) => self.flushed = true,
            KeyEvent::Created(_) | KeyEvent::Missed(_) => {}
        }
    }

    /// The tracking mode of `h`, `None` when off.
    #[inline]
    pub fn of(&self, h: Handle) -> Option<&ClientTracking> {
        self.per.get(h)?.as_deref()
    }

    /// Memory `h`'s tracking mode holds, for client eviction: a slot per BCAST prefix.
    #[inline]
    pub fn memory(&self, h: Handle) -> usize {
        self.of(h)
            .map_or(0, |t| t.prefixes.len() * core::mem::size_of::<Key>())
    }

    /// The tracking mode of `h`, mutable.
    #[inline]
    pub fn of_mut(&mut self, h: Handle) -> Option<&mut ClientTracking> {
        self.per.entry(h).as_deref_mut()
    }

    /// Whether any client tracks or the table still holds keys (then writes are noted): as in
    /// Redis, a write or a flush removes a key's entry even after its readers turned tracking
    /// off, so a client that turns it on again is not sent invalidations for old reads.
    #[inline]
    pub fn active(&self) -> bool {
        !self.clients.is_empty() || !self.table.is_empty()
    }
    /// `tracking_clients`.
    pub fn client_count(&self) -> usize {
        self.clients.len()
    }
    /// `tracking_total_keys`.
    pub fn key_count(&self) -> usize {
        self.table.len()
    }
    /// `tracking_total_items`.
    pub fn item_count(&self) -> usize {
        self.items
    }
    /// `tracking_total_prefixes`.
    pub fn prefix_count(&self) -> usize {
        self.prefixes.len()
    }
}

/// Parsed `CLIENT TRACKING` options.
#[derive(Default)]
struct Options {
    on: bool,
    redirect: Option<u64>,
    bcast: bool,
    optin: bool,
    optout: bool,
    noloop: bool,
    prefixes: Vec<Key>,
}

/// Parses `CLIENT TRACKING on|off [options]`, checking REDIRECT targets as it goes (Redis's order).
fn parse(clients: &ClientTable, args: &Argv<'_>) -> Result<Options, Error> {
    let mut o = Options::default();
    let mode = args.get(2).to_ascii_lowercase();
    o.on = match mode.as_slice() {
        b"on" => true,
        b"off" => false,
        _ => return Err(Error::Syntax),
    };
    let mut i = 3;
    while i < args.len() {
        let opt = args.get(i).to_ascii_lowercase();
        let more = i + 1 < args.len();
        match opt.as_slice() {
            b"redirect" if more => {
                i += 1;
                let id = crate::util::parse_i64(args.get(i)).ok_or(Error::NotInteger)?;
                if !clients.iter().any(|(_, c)| c.id as i64 == id) {
                    return Err(Error::msg(
                        "ERR The client ID you want redirect to does not exist",
                    ));
                }
                o.redirect = Some(id as u64);
            }
            b"bcast" => o.bcast = true,
            b"optin" => o.optin = true,
            b"optout" => o.optout = true,
            b"noloop" => o.noloop = true,
            b"prefix" if more => {
                i += 1;
                o.prefixes.push(Key::from_slice(args.get(i)));
            }
            _ => return Err(Error::Syntax),
        }
        i += 1;
    }
    Ok(o)
}

/// The overlap error for prefix `p` against `q` (`existing`: the client's own, else provided).
fn overlap_error(p: &[u8], q: &[u8], existing: bool) -> Error {
    let p = alloc::string::String::from_utf8_lossy(p);
    let q = alloc::string::String::from_utf8_lossy(q);
    let which = if existing {
        "an existing"
    } else {
        "another provided"
    };
    Error::msg(alloc::format!(
        "ERR Prefix '{p}' overlaps with {which} prefix '{q}'. Prefixes for a single client must \
         not overlap."
    ))
}

/// Whether one of two prefixes starts the other.
fn overlaps(a: &[u8], b: &[u8]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// Checks the ON options against each other and the client's current mode.
fn check_on(o: &Options, cur: Option<&ClientTracking>) -> Result<(), Error> {
    if !o.bcast && !o.prefixes.is_empty() {
        return Err(Error::msg(
            "ERR PREFIX option requires BCAST mode to be enabled",
        ));
    }
    if let Some(t) = cur {
        if t.bcast != o.bcast {
            return Err(Error::msg(
                "ERR You can't switch BCAST mode on/off before disabling tracking for this \
                 client, and then re-enabling it with a different mode.",
            ));
        }
    }
    if o.optin && o.optout {
        return Err(Error::msg(
            "ERR You can't specify both OPTIN mode and OPTOUT mode",
        ));
    }
    if let Some(t) = cur {
        if (o.optin && t.optout) || (o.optout && t.optin) {
            return Err(Error::msg(
                "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this \
                 client, and then re-enabling it with a different mode.",
            ));
        }
    }
    if o.bcast && (o.optin || o.optout) {
        return Err(Error::msg(
            "ERR OPTIN and OPTOUT are not compatible with BCAST",
        ));
    }
    check_prefixes(&o.prefixes, cur)
}

/// Prefixes of one client must not overlap: each new one against the client's, then the others.
fn check_prefixes(new: &[Key], cur: Option<&ClientTracking>) -> Result<(), Error> {
    for (i, p) in new.iter().enumerate() {
        for q in cur.into_iter().flat_map(|t| t.prefixes.iter()) {
            if overlaps(p, q) {
                return Err(overlap_error(p, q, true));
            }
        }
        for (j, q) in new.iter().enumerate() {
            if i != j && overlaps(p, q) {
                return Err(overlap_error(p, q, false));
            }
        }
    }
    Ok(())
}

/// CLIENT TRACKING: turns tracking on (adding options and prefixes to an existing mode) or off.
/// `Ok(true)`: what the keyspace records must be re-synced (tracking turned on, or the last
/// tracking client turned it off).
pub fn command(
    tr: &mut Tracking,
    clients: &ClientTable,
    me: Handle,
    args: &Argv<'_>,
) -> Result<bool, Error> {
    let o = parse(clients, args)?;
    if !o.on {
        return Ok(disable(tr, clients, me));
    }
    let cur = tr.of(me);
    check_on(&o, cur)?;
    Ok(enable(tr, clients, me, o))
}

/// Turns tracking on for `me` with options `o`; false if `me` is not connected. As in Redis,
/// each CLIENT TRACKING ON sets the mode anew (OPTIN, OPTOUT, NOLOOP and the redirect are the
/// command's own, an earlier REDIRECT is dropped when this one names none) while BCAST
/// prefixes add up (the empty prefix when the command names none).
fn enable(tr: &mut Tracking, clients: &ClientTable, me: Handle, o: Options) -> bool {
    let Some(id) = clients.get(me).map(|c| c.id) else {
        return false;
    };
    let t = tr.per.entry(me).get_or_insert_with(Box::default);
    t.bcast = o.bcast;
    t.optin = o.optin;
    t.optout = o.optout;
    t.noloop = o.noloop;
    t.redirect = o.redirect.unwrap_or(0);
    t.broken_redirect = false;
    let mut prefixes = o.prefixes;
    if o.bcast && prefixes.is_empty() {
        prefixes.push(Key::from_slice(b""));
    }
    t.prefixes.extend(prefixes.iter().cloned());
    for p in prefixes {
        let entry = tr.prefixes.entry(p).or_default();
        entry.clients.insert(me);
    }
    tr.clients.insert(id, me);
    true
}

/// Turns tracking off for `me` (CLIENT TRACKING off, RESET, disconnect). Its entries in the
/// table stay until the keys are invalidated, as in Redis (ids are never reused). True when
/// no client tracks any more (then writes need not be recorded for tracking).
pub fn disable(tr: &mut Tracking, clients: &ClientTable, me: Handle) -> bool {
    let Some(id) = clients.get(me).map(|c| c.id) else {
        return false;
    };
    let Some(t) = tr.per.take(me) else {
        return false;
    };
    for p in &t.prefixes {
        if let Some(entry) = tr.prefixes.get_mut(p) {
            entry.clients.remove(&me);
            if entry.clients.is_empty() {
                tr.prefixes.remove(p);
            }
        }
    }
    tr.clients.remove(&id);
    if !tr.active() {
        (tr.written, tr.flushed) = Default::default();
        return true;
    }
    false
}

/// CLIENT CACHING yes|no.
pub fn caching(tracking: &mut Tracking, me: Handle, arg: &[u8]) -> Result<(), Error> {
    let t = tracking.of_mut(me);
    let Some(t) = t.filter(|t| t.optin || t.optout) else {
        return Err(Error::msg(
            "ERR CLIENT CACHING can be called only when the client is in tracking mode with \
             OPTIN or OPTOUT mode enabled",
        ));
    };
    let yes = match arg.to_ascii_lowercase().as_slice() {
        b"yes" => true,
        b"no" => false,
        _ => return Err(Error::Syntax),
    };
    if yes && !t.optin {
        return Err(Error::msg(
            "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
        ));
    }
    if !yes && !t.optout {
        return Err(Error::msg(
            "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
        ));
    }
    t.caching = Some(yes);
    Ok(())
}

/// CLIENT TRACKINGINFO's reply.
pub fn info(t: Option<&ClientTracking>, out: &mut dyn ReplySink) {
    out.map(3);
    out.bulk_str("flags");
    let Some(t) = t else {
        out.set(1);
        out.bulk_str("off");
        out.bulk_str("redirect");
        out.int(-1);
        out.bulk_str("prefixes");
        out.array(0);
        return;
    };
    let caching_yes = t.caching == Some(true) && t.optin;
    let caching_no = t.caching == Some(false) && t.optout;
    let flags = [
        (true, "on"),
        (t.bcast, "bcast"),
        (t.optin, "optin"),
        (t.optout, "optout"),
        (caching_yes, "caching-yes"),
        (caching_no, "caching-no"),
        (t.noloop, "noloop"),
        (t.broken_redirect, "broken_redirect"),
    ];
    out.set(flags.iter().filter(|f| f.0).count());
    flags.iter().filter(|f| f.0).for_each(|f| out.bulk_str(f.1));
    out.bulk_str("redirect");
    out.int(t.redirect as i64);
    out.bulk_str("prefixes");
    out.array(t.prefixes.len());
    t.prefixes.iter().for_each(|p| out.bulk(p));
}

/// After each command run (EXEC's steps included): sends the invalidations for the keys it
/// wrote, remembers the keys a read-only command (`reg`, `args`) read, and clears a `CLIENT
/// CACHING` flag once a command other than CLIENT ran (outside MULTI: `in_multi`).
pub fn after_run<S: Fn(Handle) -> bool>(
    tr: &mut Tracking,
    clients: &ClientTable,
    d: &mut Delivery<'_, S>,
    me: Handle,
    reg: &Registered,
    in_multi: bool,
    args: &Argv<'_>,
) {
    invalidate_written(tr, clients, d, Some(me));
    let Some(id) = clients.get(me).map(|c| c.id) else {
        return;
    };
    let in_script = tr.script_keys.is_some();
    let Some(t) = tr.of_mut(me) else {
        return;
    };
    let caching = t.caching;
    if !reg.full_name.starts_with("client|") && !in_multi && !in_script {
        t.caching = None;
    }
    // The read-only script commands track only through the commands their script runs.
    let script_ro = matches!(
        reg.full_name.as_str(),
        "eval_ro" | "evalsha_ro" | "fcall_ro"
    );
    let wanted = !t.bcast
        && reg.spec.has(flags::READONLY)
        && !script_ro
        && (!t.optin || caching == Some(true))
        && (!t.optout || caching != Some(false));
    if !wanted {
        return;
    }
    let keys: Vec<Key> = match &tr.script_keys {
        Some(declared) => declared.clone(),
        None => match reg.spec.find_keys(args) {
            Ok(found) => found
                .iter()
                .map(|k| Key::from_slice(args.get(k.index)))
                .collect(),
            Err(_) => return,
        },
    };
    for key in keys {
        let set = tr.table.entry(key).or_default();
        if set.insert(id) {
            tr.items += 1;
        }
    }
}

/// After a top-level command (EXEC as a whole) or the cron: turns the databases' notes into
/// invalidations (`me` = the client whose command wrote, for NOLOOP), broadcasts BCAST
/// prefixes' keys, keeps the table within `max_keys` (`tracking-table-max-keys`, 0: no
/// limit), and writes the running client's own invalidations to `out`.
pub fn after_command<S: Fn(Handle) -> bool>(
    tr: &mut Tracking,
    clients: &ClientTable,
    d: &mut Delivery<'_, S>,
    max_keys: usize,
    me: Option<Handle>,
    out: Option<&mut dyn ReplySink>,
) {
    invalidate_written(tr, clients, d, me);
    broadcast(tr, clients, d, me);
    limit_table(tr, clients, d, max_keys, me);
    let pending = core::mem::take(&mut tr.pending_self);
    if let Some(out) = out {
        pending.iter().for_each(|r| r.write_to(out));
    }
}

/// Before client `me`'s command runs, after the memory limit evicted keys for it: the evicted
/// keys' invalidations go out at once, `me`'s own written to `out` ahead of the command's
/// reply, as in Redis (which evicts before it calls the command). An eviction is nobody's
/// write: NOLOOP spares no one.
pub fn after_eviction<S: Fn(Handle) -> bool>(
    tr: &mut Tracking,
    clients: &ClientTable,
    d: &mut Delivery<'_, S>,
    me: Handle,
    out: &mut dyn ReplySink,
) {
    for key in core::mem::take(&mut tr.written) {
        invalidate_key(tr, clients, d, &key, None, Some(me), true);
    }
    core::mem::take(&mut tr.pending_self)
        .iter()
        .for_each(|r| r.write_to(out));
}

/// Turns the databases' notes (written keys, flushes) into invalidations, as soon as the
/// command that wrote ends (each command of an EXEC too, so a key read later in the same
/// transaction stays tracked, as in Redis).
fn invalidate_written<S: Fn(Handle) -> bool>(
    tr: &mut Tracking,
    clients: &ClientTable,
    d: &mut Delivery<'_, S>,
    me: Option<Handle>,
) {
    let flushed = core::mem::take(&mut tr.flushed);
    let written = core::mem::take(&mut tr.written);
    if flushed {
        invalidate_all(tr, clients, d, me);
    }
    for key in written {
        invalidate_key(tr, clients, d, &key, me, me, true);
    }
}

/// A key was modified (`by_write`; else evicted from the table): its readers get an
/// invalidation and are forgotten; for a write, BCAST prefixes that match collect it and NOLOOP
/// spares the writer `me`. Invalidations for `running` (the client whose command runs) are
/// kept for its own reply stream.
fn invalidate_key<S: Fn(Handle) -> bool>(
    tr: &mut Tracking,
    clients: &ClientTable,
    d: &mut Delivery<'_, S>,
    key: &Key,
    me: Option<Handle>,
    running: Option<Handle>,
    by_write: bool,
) {
    for (p, entry) in tr.prefixes.iter_mut().filter(|_| by_write) {
        if key.starts_with(p) {
            entry.pending.insert(key.clone(), me);
        }
    }
    let Some(ids) = tr.table.remove(key) else {
        return;
    };
    tr.items -= ids.len();
    let handles: Vec<Handle> = ids
        .iter()
        .filter_map(|id| tr.clients.get(id).copied())
        .collect();
    for h in handles {
        let skip = tr
            .of(h)
            .is_none_or(|t| t.bcast || (by_write && t.noloop && Some(h) == me));
        if !skip {
            send(tr, clients, d, h, Some(alloc::vec![key.clone()]), running);
        }
    }
}

/// Keeps the table within `max_keys` (0: no limit): evicted keys are invalidated for their
/// readers as if they had been modified (Redis picks them at random; here the first in key
/// order).
fn limit_table<S: Fn(Handle) -> bool>(
    tr: &mut Tracking,
    clients: &ClientTable,
    d: &mut Delivery<'_, S>,
    max_keys: usize,
    me: Option<Handle>,
) {
    while max_keys > 0 && tr.table.len() > max_keys {
        let Some(key) = tr.table.keys().next().cloned() else {
            return;
        };
        invalidate_key(tr, clients, d, &key, me, me, false);
    }
}

/// FLUSHDB / FLUSHALL: a null invalidation to every tracking client; the table empties.
fn invalidate_all<S: Fn(Handle) -> bool>(
    tr: &mut Tracking,
    clients: &ClientTable,
    d: &mut Delivery<'_, S>,
    me: Option<Handle>,
) {
    let all: Vec<Handle> = tr.clients.values().copied().collect();
    for h in all {
        send(tr, clients, d, h, None, me);
    }
    tr.table.clear();
    tr.items = 0;
}

/// Sends each BCAST prefix's collected keys to its clients (NOLOOP clients without their own).
fn broadcast<S: Fn(Handle) -> bool>(
    tr: &mut Tracking,
    clients: &ClientTable,
    d: &mut Delivery<'_, S>,
    me: Option<Handle>,
) {
    let mut due = Vec::new();
    for entry in tr.prefixes.values_mut() {
        if entry.pending.is_empty() {
            continue;
        }
        let pending = core::mem::take(&mut entry.pending);
        for &h in &entry.clients {
            let noloop = tracking_of(&tr.per, h).is_some_and(|t| t.noloop);
            let keys: Vec<Key> = pending
                .iter()
                .filter(|(_, by)| !(noloop && **by == Some(h)))
                .map(|(k, _)| k.clone())
                .collect();
            if !keys.is_empty() {
                due.push((h, keys));
            }
        }
    }
    for (h, keys) in due {
        send(tr, clients, d, h, Some(keys), me);
    }
}

/// Delivers one invalidation for tracking client `h` (to it, or to its REDIRECT target).
fn send<S: Fn(Handle) -> bool>(
    tr: &mut Tracking,
    clients: &ClientTable,
    d: &mut Delivery<'_, S>,
    h: Handle,
    keys: Option<Vec<Key>>,
    me: Option<Handle>,
) {
    let Some(redirect) = tr.of(h).map(|t| t.redirect) else {
        return;
    };
    let receiver = match redirect {
        0 => h,
        id => match find_id(clients, id) {
            Some(rh) => rh,
            None => return redirect_broken(tr, clients, d, h, id, me),
        },
    };
    let Some(rc) = clients.get(receiver) else {
        return;
    };
    let payload = match keys {
        Some(keys) => Reply::Array(keys.iter().map(|k| Reply::Bulk(k.to_vec())).collect()),
        None => Reply::Null,
    };
    let msg = if rc.protocol == Protocol::Resp3 {
        Reply::Push(alloc::vec![Reply::Bulk(b"invalidate".to_vec()), payload])
    } else if (d.subscribed)(receiver) {
        Reply::Push(alloc::vec![
            Reply::Bulk(b"message".to_vec()),
            Reply::Bulk(INVALIDATE_CHANNEL.to_vec()),
            payload,
        ])
    } else {
        return;
    };
    if Some(receiver) == me {
        tr.pending_self.push(msg);
    } else {
        d.outbox.push(receiver, Rc::new(msg));
    }
}

/// The REDIRECT target of `h` is gone: flags it (`CLIENT LIST flags=R`) and, the first time,
/// tells a RESP3 client with a `tracking-redir-broken` push naming the lost id.
fn redirect_broken<S: Fn(Handle) -> bool>(
    tr: &mut Tracking,
    clients: &ClientTable,
    d: &mut Delivery<'_, S>,
    h: Handle,
    id: u64,
    me: Option<Handle>,
) {
    let Some(c) = clients.get(h) else {
        return;
    };
    let resp3 = c.protocol == Protocol::Resp3;
    let Some(t) = tr.of_mut(h).filter(|t| !t.broken_redirect) else {
        return;
    };
    t.broken_redirect = true;
    if !resp3 {
        return;
    }
    let msg = Reply::Push(alloc::vec![
        Reply::Bulk(b"tracking-redir-broken".to_vec()),
        Reply::Int(id as i64),
    ]);
    if Some(h) == me {
        tr.pending_self.push(msg);
    } else {
        d.outbox.push(h, Rc::new(msg));
    }
}

/// The tracking mode of `h` in `per` (for loops that hold other parts of [`Tracking`]).
fn tracking_of(per: &PerClient<Option<Box<ClientTracking>>>, h: Handle) -> Option<&ClientTracking> {
    per.get(h)?.as_deref()
}

/// The handle of the client with this id.
fn find_id(clients: &ClientTable, id: u64) -> Option<Handle> {
    clients.iter().find(|(_, c)| c.id == id).map(|(h, _)| h)
}

/// The redirect id `CLIENT GETREDIR` and `CLIENT LIST redir=` show: -1 when tracking is off.
pub fn redirect_id(t: Option<&ClientTracking>) -> i64 {
    t.map_or(-1, |t| t.redirect as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_overlap_when_one_starts_the_other() {
        assert!(overlaps(b"a", b"ab") && overlaps(b"ab", b"a") && overlaps(b"", b"x"));
        assert!(!overlaps(b"ab", b"ac"));
        let new = [Key::from_slice(b"foo"), Key::from_slice(b"foobar")];
        let e = alloc::format!("{}", check_prefixes(&new, None).unwrap_err());
        assert!(e.starts_with("ERR Prefix 'foo' overlaps with another provided prefix 'foobar'"));
        let mut cur = ClientTracking::default();
        cur.prefixes.insert(Key::from_slice(b"ab"));
        let e = check_prefixes(&[Key::from_slice(b"a")], Some(&cur)).unwrap_err();
        assert!(alloc::format!("{e}").contains("with an existing prefix 'ab'"));
    }
}
