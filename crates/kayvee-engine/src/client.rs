//! Connected clients as the engine sees them: identity, selected database, protocol, auth and
//! the fields `CLIENT LIST` reports. The shell registers a client on accept and removes it on
//! close; it fills [`IoStats`] so `CLIENT LIST` can show buffer sizes.
//!
//! A feature's own per-client state (subscriptions, MULTI, tracking...) is not here: each
//! feature keeps it in a [`PerClient`] table keyed by the handle and drops it in its own
//! `remove(h)`, which `Engine::disconnect` calls.

use crate::reply::Protocol;
use alloc::string::String;
use alloc::vec::Vec;
use kayvee_pds::SmallBytes;

/// The shell's handle for a client: a slot in the client table (reused after close).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Handle(pub usize);

/// `CLIENT REPLY` mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ReplyMode {
    /// Replies are sent.
    #[default]
    On,
    /// No reply is sent until `CLIENT REPLY ON`.
    Off,
    /// The next command's reply is dropped.
    Skip,
    /// Internal: the command being run is the one whose reply is skipped.
    SkipThis,
}

/// How the client is connected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transport {
    /// TCP: peer and local `ip:port`.
    Tcp {
        /// Peer address.
        addr: String,
        /// Local address.
        laddr: String,
    },
    /// A Unix socket at this path.
    Unix {
        /// The socket path.
        path: String,
    },
}

/// What the shell tells the engine about a new connection.
#[derive(Clone, Debug)]
pub struct ConnInfo {
    /// Transport and addresses.
    pub transport: Transport,
    /// The file descriptor (or another small number the shell uses), for `CLIENT LIST fd=`.
    pub fd: i64,
}

/// Buffer sizes the shell reports for `CLIENT LIST` (qbuf, obl, omem...).
#[derive(Clone, Copy, Debug, Default)]
pub struct IoStats {
    /// Bytes in the query buffer.
    pub qbuf: usize,
    /// Free bytes in the query buffer allocation.
    pub qbuf_free: usize,
    /// The reply buffer's size (`rbs=`).
    pub rbs: usize,
    /// The most the reply buffer held at once lately (`rbp=`).
    pub rbp: usize,
    /// Bytes waiting in the output buffer, up to the size of Redis's fixed reply buffer.
    pub obl: usize,
    /// Redis's reply blocks the rest would take (`oll=`).
    pub oll: usize,
    /// Bytes waiting beyond the fixed reply buffer (`omem=`: Redis's reply list memory).
    pub omem: usize,
    /// Total memory of the client's buffers.
    pub tot_mem: usize,
}

/// One connected client.
#[derive(Clone, Debug)]
pub struct Client {
    /// The `CLIENT ID` (unique, increasing, never reused).
    pub id: u64,
    /// Connection info from the shell.
    pub conn: ConnInfo,
    /// `CLIENT SETNAME`.
    pub name: Option<SmallBytes>,
    /// `CLIENT SETINFO LIB-NAME`.
    pub lib_name: Option<SmallBytes>,
    /// `CLIENT SETINFO LIB-VER`.
    pub lib_ver: Option<SmallBytes>,
    /// Selected database.
    pub db: usize,
    /// Negotiated protocol.
    pub protocol: Protocol,
    /// Whether the client passed AUTH (or no password is required).
    pub authenticated: bool,
    /// The user it authenticated as.
    pub user: SmallBytes,
    /// `CLIENT REPLY` mode.
    pub reply_mode: ReplyMode,
    /// When the connection was accepted (unix ms).
    pub created_ms: u64,
    /// When the last command ran (unix ms).
    pub last_interaction_ms: u64,
    /// Name of the last command run (lower case, `CLIENT LIST cmd=`).
    pub last_cmd: &'static str,
    /// The last command run, for its full name (`client|list`) in `CLIENT LIST cmd=`.
    pub last_cmd_id: Option<crate::command::CommandId>,
    /// Set by `CLIENT KILL`: the shell closes the connection.
    pub killed: bool,
    /// Buffer sizes, refreshed by the shell.
    pub io: IoStats,
    /// `CLIENT NO-EVICT on`: exempt from client eviction, `flags=e` in CLIENT LIST.
    pub no_evict: bool,
    /// `SCRIPT DEBUG`: its next EVAL runs in the Lua debugger.
    pub lua_debug: LuaDebug,
}

/// `SCRIPT DEBUG`'s mode for a client's EVALs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LuaDebug {
    /// No debugger (`NO`).
    #[default]
    Off,
    /// `YES`: the script's changes to the data are rolled back when the session ends.
    Rollback,
    /// `SYNC`: the changes stay.
    Sync,
}

/// The table of connected clients.
#[derive(Clone, Debug, Default)]
pub struct ClientTable {
    slots: Vec<Option<Client>>,
    free: Vec<usize>,
    next_id: u64,
    len: usize,
}

impl ClientTable {
    /// Registers a client; `authenticated` is false when a password is required.
    pub fn add(&mut self, conn: ConnInfo, now_ms: u64, authenticated: bool) -> Handle {
        self.next_id += 1;
        let client = Client {
            id: self.next_id,
            conn,
            name: None,
            lib_name: None,
            lib_ver: None,
            db: 0,
            protocol: Protocol::Resp2,
            authenticated,
            user: SmallBytes::from_slice(b"default"),
            reply_mode: ReplyMode::On,
            created_ms: now_ms,
            last_interaction_ms: now_ms,
            last_cmd: "NULL",
            last_cmd_id: None,
            killed: false,
            io: IoStats::default(),
            no_evict: false,
            lua_debug: LuaDebug::Off,
        };
        self.len += 1;
        match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some(client);
                Handle(i)
            }
            None => {
                self.slots.push(Some(client));
                Handle(self.slots.len() - 1)
            }
        }
    }

    /// Unregisters a client.
    pub fn remove(&mut self, h: Handle) -> Option<Client> {
        let c = self.slots.get_mut(h.0)?.take()?;
        self.free.push(h.0);
        self.len -= 1;
        Some(c)
    }

    /// A client by handle.
    #[inline]
    pub fn get(&self, h: Handle) -> Option<&Client> {
        self.slots.get(h.0)?.as_ref()
    }

    /// A client by handle, mutable.
    #[inline]
    pub fn get_mut(&mut self, h: Handle) -> Option<&mut Client> {
        self.slots.get_mut(h.0)?.as_mut()
    }

    /// Number of connected clients.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no client is connected.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// All clients, in handle order.
    pub fn iter(&self) -> impl Iterator<Item = (Handle, &Client)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.as_ref().map(|c| (Handle(i), c)))
    }

    /// All clients, mutable.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (Handle, &mut Client)> {
        self.slots
            .iter_mut()
            .enumerate()
            .filter_map(|(i, c)| c.as_mut().map(|c| (Handle(i), c)))
    }
}

/// A feature's state for each client, indexed by handle slot (O(1), no hashing: this is read
/// on every command). A slot holds `T::default()` for a client the feature knows nothing
/// about; the feature resets it in its `remove(h)` so a reused handle starts clean.
#[derive(Clone, Debug)]
pub struct PerClient<T> {
    slots: Vec<T>,
}

impl<T> Default for PerClient<T> {
    fn default() -> Self {
        PerClient { slots: Vec::new() }
    }
}

impl<T: Default> PerClient<T> {
    /// The state of `h`, if the feature ever stored one.
    #[inline]
    pub fn get(&self, h: Handle) -> Option<&T> {
        self.slots.get(h.0)
    }

    /// The state of `h`, created (default) when missing.
    pub fn entry(&mut self, h: Handle) -> &mut T {
        if self.slots.len() <= h.0 {
            self.slots.resize_with(h.0 + 1, T::default);
        }
        &mut self.slots[h.0]
    }

    /// Takes the state of `h`, leaving the default.
    pub fn take(&mut self, h: Handle) -> T {
        self.slots
            .get_mut(h.0)
            .map(core::mem::take)
            .unwrap_or_default()
    }
}
