//! The sans-IO deterministic-lockstep session: turns, commands, reliable datagrams.
//!
//! phalanx-proto is the Age of Empires turn pipeline ("1500 Archers on a 28.8", GDC 2001) as a
//! pure state machine in the shape of quinn-proto: it is handed bytes and the time, and hands
//! back bytes to send, the time to wake, turns to execute and events. It reads no clock, opens
//! no socket, spawns nothing and draws no random numbers, so the same core runs over QUIC, raw
//! UDP, turmoil or an in-memory network, and a test can run thousands of seeded games.
//!
//! # The model
//!
//! - Time is cut into communication turns ([`Turn`], default 100 ms). A command submitted
//!   while the game executes turn `t` is stamped for `t + turns.command_delay_turns` (default 2).
//! - A [`Host`] collects commands, and at each turn's deadline *seals* the turn: a
//!   [`TurnBundle`] of control records, then every command for the turn in `(player, seq)`
//!   order. A command that arrives after its turn was sealed goes into the next open turn —
//!   never lost — and its sender gets [`ClientEvent::CommandLate`].
//! - Every peer executes every sealed bundle in turn order, exactly once ([`Client::next_turn`],
//!   [`Host::next_turn`] for a listen server's own player).
//! - Datagrams carry everything: each one repeats what the peer has not acknowledged
//!   (commands upstream, bundles downstream) as far as it fits, so a lost datagram is usually
//!   repaired by the next one; a retransmit timer (RTO = SRTT + 4·RTTVAR, backed off) covers
//!   quiet periods, an ack-delay timer sends standalone acks, keep-alives and an idle timeout
//!   detect dead peers. Each connection's timers live in its own
//!   [`phalanx_wheel::HashedWheel`].
//! - The host never seals more than `turns.window_turns` turns past the oldest turn a player has
//!   not acknowledged (a slow player makes everyone wait instead of desyncing), and no peer
//!   buffers anything beyond that window: memory is bounded by the config.
//! - Joins travel on a reliable stream ([`Host::handle_join`]); the player id is bound to the
//!   connection there and never read from a later message.
//!
//! Two time domains never mix: `now_ms` arguments are local milliseconds (any monotonic
//! origin); [`Turn`]s are logical and identical on every peer.
//!
//! # Robustness
//!
//! Bytes from a peer never panic and never allocate more than their own length: the decoder
//! is total (every prefix, trailing bytes, huge lengths are rejected), every count is checked
//! against an explicit maximum and the bytes remaining. Dropped input is counted by cause in
//! [`DropCounters`]; a peer that sends more than `link.misbehaviour_max` bad datagrams is removed.
//!
//! # Layout
//!
//! - `link.rs`: one end of a connection, shared by both sides — packet numbers, acks, RTT and
//!   loss, the intake of arriving datagrams (malformed, duplicate, impossible ack: dropped,
//!   counted, offences past the limit disconnect), when a packet is due, send bookkeeping,
//!   and the connection's six timers in its own small `HashedWheel`. `recovery.rs` holds its
//!   ack ranges, sent log and RTT estimator.
//! - `host/`: the host, one concern a file (joins, intake, sealing, transmit, its own player,
//!   snapshots, spectators, desync forensics);
//!   `client/`: the client's state and game side, and its network side.
//! - `wire/`: the wire format (datagrams, bundle records, join messages) and its total decoder.
//! - `mesh/`: the peer-to-peer match ([`mesh::Peer`]), a peer per player and no host.
//! - `budget.rs`, `events.rs`, `pace.rs`, `sync.rs`, `replay.rs`, `typed.rs`: a player's per-turn
//!   budget, the bounded event queue, speed control, sync checks, replays, typed commands.
#![forbid(unsafe_code)]

mod budget;
mod bundle;
mod client;
mod config;
mod desync;
mod events;
mod host;
mod join_code;
mod link;
pub mod mesh;
mod pace;
#[cfg(test)]
mod quiet_tests;
mod recovery;
mod replay;
mod rng;
mod snapshot;
pub mod speculate;
mod stats;
mod sync;
pub mod testing;
mod typed;
mod types;
mod window;
mod wire;

pub use bundle::{DesyncReport, EndCause, PauseBy, Record, TurnBundle};
pub use client::{Client, ClientEvent, ClientJoinError, EndReason};
pub use config::{
    BudgetConfig, CatchUpConfig, CommandOrder, ConfigError, DesyncPolicy, DesyncReference,
    Fairness, LinkConfig, PlayoutConfig, SessionConfig, SyncConfig, TurnConfig,
};
pub use desync::{DesyncBundle, DiffError, PeerState, DESYNC_BUNDLE_FORMAT_VERSION};
pub use host::{
    EndError, Host, HostEvent, JoinError, JoinResponse, ObserveError, Readmit, RemoveError,
    SpectatorGone, UploadError,
};
pub use join_code::{JoinCode, JoinCodeError};
pub use pace::Pace;
pub use replay::{
    verify_replay, Replay, ReplayError, ReplayGame, ReplayRecord, ReplayVerified,
    REPLAY_FORMAT_VERSION,
};
pub use rng::SplitMix64;
pub use snapshot::{Snapshot, SnapshotError, SnapshotRejection};
pub use stats::{ClientStats, DropCounters, HostStats, LinkStats, PeerStats};
#[cfg(feature = "bincode")]
pub use typed::Bincode;
#[cfg(any(feature = "postcard", feature = "bincode"))]
pub use typed::DefaultCodec;
#[cfg(feature = "postcard")]
pub use typed::Postcard;
pub use typed::{CodecError, CommandCodec, TypedClient, TypedRecord, TypedSubmitError, TypedTurn};
pub use types::{CommandSeq, Joined, PlayerId, SpectatorId, Ticket, Turn};
pub use wire::{
    decode_join_reply, encode_join_reply, DecodeError, JoinAccept, JoinRefusal, JoinReply,
    JoinRequest, Rejoin,
};

/// Close code (QUIC's application error code, or the raw-UDP close's code): the host closes a
/// connection it removed or refused.
pub const CLOSE_REMOVED: u32 = 1;
/// Close code: the host shuts down. A client that does not hold the turn that ends the game
/// ends `HostClosed` at once ([`Client::on_host_closed`]).
pub const CLOSE_SHUTDOWN: u32 = 2;
/// Close code: a client leaves on purpose; the host removes the player at its next sealed turn
/// (any other close is a lost connection, timed out by the host).
pub const CLOSE_LEFT: u32 = 3;

/// The protocol version this build speaks: the first byte of every message.
pub const PROTOCOL_VERSION: u8 = 7;

/// Why a command was not accepted. Nothing was queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SubmitError {
    /// The command is larger than `budget.command_bytes_max`: split it (or send it as bulk data).
    TooLarge {
        /// Its size.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Our player already has `budget.commands_per_turn_max` commands or `budget.turn_bytes_per_player_max`
    /// bytes in the stamped turn: submit again next turn.
    OverBudget {
        /// The stamped turn.
        turn: Turn,
    },
    /// The session is not running (not joined yet, or ended).
    NotRunning,
    /// This end has no player to submit for (a dedicated host, or a spectator).
    NoPlayer,
    /// The host's command rule refused it
    /// ([`Host::set_command_rule`](crate::Host::set_command_rule)).
    Refused,
}

impl std::fmt::Display for SubmitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SubmitError::TooLarge { len, max } => {
                write!(f, "command of {len} bytes exceeds budget.command_bytes_max = {max}")
            }
            SubmitError::OverBudget { turn } => write!(f, "{turn} is over this player's budget"),
            SubmitError::NotRunning => write!(f, "session is not running"),
            SubmitError::NoPlayer => {
                write!(f, "no player to submit for (a dedicated host or a spectator)")
            }
            SubmitError::Refused => write!(f, "the host's command rule refused the command"),
        }
    }
}

impl std::error::Error for SubmitError {}
