//! The polling session: phalanx for a game loop that is not async; and what sessions of every
//! kind share beyond the crate root (admission limits, the join's progress, turn updates, the
//! close codes).
//!
//! A [`Session`] is any role — a host that plays, a dedicated host that observes every turn,
//! a client — behind one set of calls a frame loop makes every frame: [`Session::try_next_turn`]
//! (the next turn if it is due, never waiting), [`Session::try_event`], [`Session::submit`].
//! It runs the same drivers as the async [`Host`] and [`Client`], on a tokio runtime it owns
//! (one worker thread, started by the constructor) or on one it is given.
//!
//! A host's session comes with a [`HostControl`]: the host's controls (start, end, kick,
//! pause, recording, its address and pin) on a cloneable handle that a lobby or an operator
//! thread holds while the frame loop owns the session.
//!
//! Calls that need the driver's answer (`submit`, `stats`...) wait for it: a channel round trip
//! to a task that does nothing slow, tens of microseconds. They must not be made from inside an
//! async task of the same runtime (tokio refuses to block there): a game that is async already
//! uses [`Host`] and [`Client`] directly.

use std::net::SocketAddr;

pub use crate::admission::Admission;
pub use crate::client::{JoinProgress, RawDatagramSender};
pub use crate::conn::{CLOSE_LEFT, CLOSE_REMOVED, CLOSE_SHUTDOWN};
pub use crate::driver::{Submitter, Update};

use phalanx_proto::{
    ClientStats, CommandCodec, DefaultCodec, EndReason, HostStats, PeerStats, PlayerId, Ticket,
    Turn, TypedTurn,
};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::{
    Client, ClientOptions, ConnectError, Event, Host, HostControl, HostError, HostOptions,
    SessionError,
};

/// Why `try_next_turn` returned no turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NoTurn {
    /// The next turn has not arrived, or its time on the playout schedule has not come.
    NotYet,
    /// The session is over and every turn was taken: none will come.
    Over,
}

/// Where a session's tasks run (a mesh session's too).
#[derive(Debug)]
pub(crate) enum Runtime {
    /// Ours: dropped with the session.
    Owned(tokio::runtime::Runtime),
    /// The game's.
    Given(tokio::runtime::Handle),
}

impl Runtime {
    pub(crate) fn new(given: Option<tokio::runtime::Handle>) -> std::io::Result<Runtime> {
        match given {
            Some(handle) => Ok(Runtime::Given(handle)),
            None => tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("phalanx")
                .enable_io()
                .enable_time()
                .build()
                .map(Runtime::Owned),
        }
    }

    pub(crate) fn handle(&self) -> &tokio::runtime::Handle {
        match self {
            Runtime::Owned(runtime) => runtime.handle(),
            Runtime::Given(handle) => handle,
        }
    }

    fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.handle().block_on(future)
    }
}

/// The role behind a session.
enum Role<C, K: CommandCodec> {
    Host(Host<C, K>),
    Client(Client<C, K>),
}

/// A session's counters: the host's (with every connected player's) or a client's.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionStats {
    /// A host's counters and every connected player's.
    Host(HostStats, Vec<(PlayerId, PeerStats)>),
    /// A client's counters.
    Client(ClientStats),
}

/// A lockstep session driven by polling, for any role. See the module docs.
///
/// ```no_run
/// # #[cfg(feature = "quic")]
/// # fn example() -> Result<(), Box<dyn std::error::Error>> {
/// use phalanx::quic::HostVerification;
/// use phalanx::{ClientOptions, Session};
/// # let fingerprint: phalanx::quic::Fingerprint = todo!();
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Order(u32);
///
/// let options = ClientOptions::new(7, HostVerification::Pinned(fingerprint));
/// let mut session: Session<Order> = Session::connect("192.0.2.1:4433".parse()?, options, None)?;
/// loop {
///     // A frame: take every turn that is due (usually none or one), then input and render.
///     while let Some(turn) = session.try_next_turn() {
///         // Execute `turn` in the deterministic simulation.
///         # let _ = turn;
///     }
///     while let Some(event) = session.try_event() {
///         // Show waiting notices, desyncs, the end...
///         # let _ = event;
///     }
///     if session.is_over() {
///         break; // `session.ended()` says why.
///     }
///     session.submit(&Order(1))?;
///     # break;
/// }
/// # Ok(()) }
/// ```
pub struct Session<C, K: CommandCodec = DefaultCodec> {
    // Dropped before the runtime its tasks run on.
    role: Role<C, K>,
    runtime: Runtime,
    over: bool,
}

impl<C, K> Session<C, K>
where
    C: Serialize + DeserializeOwned + Send + 'static,
    K: CommandCodec,
{
    /// A host (see [`HostOptions`]: `local_player` for a listen server, `observe_turns` for a
    /// dedicated host whose game takes every turn), and its controls — start, end, kick,
    /// pause, recording, its address and pin — for the lobby or an operator thread to hold
    /// ([`HostControl`]). `runtime`: the game's tokio runtime, or `None` to start one for the
    /// session.
    pub fn host(
        options: HostOptions,
        runtime: Option<tokio::runtime::Handle>,
    ) -> Result<(Self, HostControl), HostError> {
        let runtime = Runtime::new(runtime).map_err(HostError::Bind)?;
        let host = runtime.block_on(Host::bind(options))?;
        let control = host.control();
        Ok((Session { role: Role::Host(host), runtime, over: false }, control))
    }

    /// A client: connects and joins (waiting for the join's answer). `runtime` as for
    /// [`host`](Self::host).
    pub fn connect(
        addr: SocketAddr,
        options: ClientOptions,
        runtime: Option<tokio::runtime::Handle>,
    ) -> Result<Self, ConnectError> {
        let runtime = Runtime::new(runtime).map_err(ConnectError::Endpoint)?;
        let client = runtime.block_on(Client::connect(addr, options))?;
        Ok(Session { role: Role::Client(client), runtime, over: false })
    }

    /// Whether this session is a host's (a listen server or a dedicated host).
    pub fn is_host(&self) -> bool {
        matches!(self.role, Role::Host(_))
    }

    /// Our player: a client's, or a listen server's own (`None` for a dedicated host).
    pub fn player(&self) -> Option<PlayerId> {
        match &self.role {
            Role::Host(host) => host.local_player(),
            Role::Client(client) => client.player(),
        }
    }

    /// Submits a command for our player; the ticket says which turn it is stamped for.
    pub fn submit(&self, command: &C) -> Result<Ticket, SessionError> {
        match &self.role {
            Role::Host(host) => self.runtime.block_on(host.submit(command)),
            Role::Client(client) => self.runtime.block_on(client.submit(command)),
        }
    }

    /// A handle that submits for our player from another thread (its
    /// [`submit_blocking`](Submitter::submit_blocking)) or task, while this one takes the turns.
    pub fn submitter(&self) -> Submitter<C, K> {
        match &self.role {
            Role::Host(host) => host.submitter(),
            Role::Client(client) => client.submitter(),
        }
    }

    /// The next turn if it is due, without waiting; each turn once, in order. After the last
    /// turn of the session, [`is_over`](Self::is_over) turns true.
    pub fn try_next_turn(&mut self) -> Option<TypedTurn<C>> {
        let turn = match &mut self.role {
            Role::Host(host) => host.try_next_turn(),
            Role::Client(client) => client.try_next_turn(),
        };
        match turn {
            Ok(turn) => Some(turn),
            Err(NoTurn::Over) => {
                self.over = true;
                None
            }
            Err(_) => None,
        }
    }

    /// Whether the session is over and every turn was taken: no turn will come again.
    pub fn is_over(&self) -> bool {
        self.over
    }

    /// Whether the last turn taken was a past one, replayed to catch up after a rejoin or a
    /// late join ([`TypedTurn::catching_up`]): while it is, the player should give no orders
    /// (they would all be stamped for the first live turn, whose budget refuses the excess).
    /// A host never catches up.
    pub fn is_catching_up(&self) -> bool {
        match &self.role {
            Role::Client(client) => client.is_catching_up(),
            Role::Host(_) => false,
        }
    }

    /// How the session ended (`None` while it runs). A host's ends once it is
    /// [over](Self::is_over) after [`HostControl::end`] (or after the desync policy ended it),
    /// as `Finished` or `Desync`, as its clients' do.
    pub fn ended(&self) -> Option<EndReason> {
        match &self.role {
            Role::Client(client) => client.ended(),
            Role::Host(host) => host.ended().filter(|_| self.over),
        }
    }

    /// The next event, if one is waiting.
    pub fn try_event(&mut self) -> Option<Event> {
        match &mut self.role {
            Role::Host(host) => host.try_event(),
            Role::Client(client) => client.try_event(),
        }
    }

    /// How long until the next turn is due — for a renderer interpolating between turns
    /// (zero when due already; `None` before the first turn, paused, stalled or over).
    pub fn until_next_turn(&self) -> Option<std::time::Duration> {
        match &self.role {
            Role::Host(host) => host.until_next_turn(),
            Role::Client(client) => client.until_next_turn(),
        }
    }

    /// How long ago the next turn fell due, when it has and is not taken yet (see
    /// [`Client::overdue`](crate::Client::overdue)): what late seals predict through.
    pub fn overdue(&self) -> Option<std::time::Duration> {
        match &self.role {
            Role::Host(host) => host.overdue(),
            Role::Client(client) => client.overdue(),
        }
    }

    /// Events dropped because they were not taken with [`try_event`](Self::try_event).
    pub fn events_dropped(&self) -> u64 {
        match &self.role {
            Role::Host(host) => host.events_dropped(),
            Role::Client(client) => client.events_dropped(),
        }
    }

    /// Reports the game's state hash after executing check turn `turn`.
    pub fn report_state_hash(&self, turn: Turn, hash: u64) -> Result<(), SessionError> {
        match &self.role {
            Role::Host(host) => self.runtime.block_on(host.report_state_hash(turn, hash)),
            Role::Client(client) => self.runtime.block_on(client.report_state_hash(turn, hash)),
        }
    }

    /// Gives the session the game's state after `turn` (serialized) and its state hash there,
    /// when the turn said [`TypedTurn::wants_snapshot`](crate::TypedTurn::wants_snapshot):
    ///
    /// ```rust,ignore
    /// while let Some(turn) = session.try_next_turn() {
    ///     if let Some(snapshot) = &turn.restore { world = World::load(&snapshot.state)?; }
    ///     world.execute(&turn);
    ///     session.report_state_hash(turn.turn, world.hash())?;
    ///     if turn.wants_snapshot { session.offer_snapshot(turn.turn, world.hash(), world.save())?; }
    /// }
    /// ```
    ///
    /// A host keeps it once its hash matches every player's (the sync check); a client
    /// uploads it. A returning player then restores it instead of replaying the game.
    pub fn offer_snapshot(
        &self,
        turn: Turn,
        hash: u64,
        state: Vec<u8>,
    ) -> Result<(), SessionError> {
        match &self.role {
            Role::Host(host) => self.runtime.block_on(host.offer_snapshot(turn, hash, state)),
            Role::Client(client) => self.runtime.block_on(client.offer_snapshot(turn, hash, state)),
        }
    }

    /// Keeps the game's serialized state after `turn` for desync forensics (see
    /// [`Client::keep_state`] and [`Host::keep_state`]). Call it after every turn, beside
    /// [`report_state_hash`](Self::report_state_hash) for every turn:
    ///
    /// ```rust,ignore
    /// while let Some(turn) = session.try_next_turn() {
    ///     world.execute(&turn);
    ///     session.report_state_hash(turn.turn, world.hash())?;
    ///     session.keep_state(turn.turn, world.save())?;
    /// }
    /// ```
    ///
    /// A listen server's own game takes part like a client's; a dedicated host has no player
    /// whose state could be asked for ([`SessionError::Snapshot`]).
    pub fn keep_state(&self, turn: Turn, state: Vec<u8>) -> Result<(), SessionError> {
        match &self.role {
            Role::Host(host) => self.runtime.block_on(host.keep_state(turn, state)),
            Role::Client(client) => self.runtime.block_on(client.keep_state(turn, state)),
        }
    }

    /// Asks for a pause (`true`) or a resume (`false`): a host pauses or resumes at once
    /// (after the next sealed turn); a client asks the host, which grants it within the
    /// session's pause limits. Every peer gets `Event::Paused` / `Event::Resumed`.
    pub fn request_pause(&self, pause: bool) -> Result<(), SessionError> {
        match &self.role {
            Role::Host(host) if pause => self.runtime.block_on(host.pause()),
            Role::Host(host) => self.runtime.block_on(host.resume()),
            Role::Client(client) => self.runtime.block_on(client.request_pause(pause)),
        }
    }

    /// The session's counters.
    pub fn stats(&self) -> Result<SessionStats, SessionError> {
        match &self.role {
            Role::Host(host) => {
                let (stats, peers) = self.runtime.block_on(host.stats())?;
                Ok(SessionStats::Host(stats, peers))
            }
            Role::Client(client) => self.runtime.block_on(client.stats()).map(SessionStats::Client),
        }
    }

    /// Leaves (a client) or shuts down (a host), and stops the session's tasks.
    pub fn shutdown(self) {
        let Session { role, runtime, .. } = self;
        match role {
            Role::Host(host) => runtime.block_on(host.shutdown()),
            Role::Client(client) => runtime.block_on(client.shutdown()),
        }
    }
}
