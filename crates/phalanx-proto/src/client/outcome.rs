//! What a client tells its driver and game: how the session ended, the events on the way, and
//! why a join failed.

use crate::bundle::{DesyncReport, PauseBy};
use crate::config::ConfigError;
use crate::pace::Pace;
use crate::types::{CommandSeq, PlayerId, Turn};
use crate::wire::{DecodeError, JoinRefusal};

#[cfg(doc)]
use super::Client;

/// How a client's session ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EndReason {
    /// Nothing arrived from the host for `link.idle_timeout_ms`.
    HostLost,
    /// The host sent more than `link.misbehaviour_max` malformed or impossible datagrams.
    HostMisbehaved,
    /// This player's `Left` record was executed: the host removed us.
    Removed,
    /// The host ended the session after a desync (`DesyncPolicy::End`).
    Desync,
    /// The host ended the game ([`Host::end`](crate::Host::end)); every turn up to the last
    /// was executed. The code is the game's own.
    Finished {
        /// The game's reason, as the host gave it.
        code: u32,
    },
    /// The host closed the connection on purpose (it shut down): reported by the driver
    /// through [`Client::on_host_closed`].
    HostClosed,
    /// We left ([`Client::leave`]).
    Left,
    /// A peer-to-peer match: we could not reach a majority of the match (or half of it
    /// without its lowest player), and the other side plays on without us.
    LostMajority,
}

impl EndReason {
    /// The reason in lower case, one word (`finished`, `host_closed`, `host_lost`...), as
    /// reports and JSON print it.
    pub fn name(&self) -> &'static str {
        match self {
            EndReason::HostLost => "host_lost",
            EndReason::HostMisbehaved => "host_misbehaved",
            EndReason::Removed => "removed",
            EndReason::Desync => "desync",
            EndReason::Finished { .. } => "finished",
            EndReason::HostClosed => "host_closed",
            EndReason::Left => "left",
            EndReason::LostMajority => "lost_majority",
        }
    }
}

/// Something the client's driver or game should know. Drained with [`Client::poll_event`]
/// (over QUIC: `phalanx::Client::try_event`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientEvent {
    /// One of our commands reached the host after its stamped turn was sealed and executes
    /// at a later turn. Nothing was lost.
    CommandLate {
        /// The command.
        seq: CommandSeq,
        /// The turn it was stamped for.
        stamped: Turn,
        /// The turn it executes at.
        executed: Turn,
    },
    /// The host will never seal one of our commands: the game's rule refused it
    /// ([`Host::set_command_rule`](crate::Host::set_command_rule)), or the open turns had no
    /// room for it. No game executes it. Raised once per command, when the host's notice
    /// arrives (it repeats it until we acknowledge a datagram that carried it; a notice names
    /// the newest refusal and the 64 commands before it, so in a burst of more refusals than
    /// that before one arrives, the oldest go untold).
    CommandRefused {
        /// Our player.
        player: PlayerId,
        /// The command.
        seq: CommandSeq,
    },
    /// The session is over for this client; see the reason.
    Ended(EndReason),
    /// A check turn's state hashes differ (the report names every hash and who diverged).
    /// Raised when the bundle carrying it is executed: on the same turn on every peer.
    Desync(DesyncReport),
    /// The host is waiting for these players (their acknowledgements are a window behind).
    Waiting(Vec<PlayerId>),
    /// The stall announced by `Waiting` is over.
    StallEnded,
    /// The pace changed from the next turn on (raised when the bundle is executed).
    PaceChanged(Pace),
    /// The game pauses after this turn.
    Paused(PauseBy),
    /// The game resumed.
    Resumed(PauseBy),
}

/// Why a join did not complete on the client side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientJoinError {
    /// The host refused: the refusal names the cause (versions, game data, token, seats).
    Refused(JoinRefusal),
    /// The reply did not decode (a [`DecodeError::Version`] names the host's version).
    Malformed(DecodeError),
    /// The host's session parameters are not a valid config.
    BadParameters(ConfigError),
    /// A reply was already handled.
    AlreadyJoined,
}

impl std::fmt::Display for ClientJoinError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientJoinError::Refused(refusal) => write!(f, "join refused: {refusal}"),
            ClientJoinError::Malformed(error) => write!(f, "malformed join reply: {error}"),
            ClientJoinError::BadParameters(error) => write!(f, "host sent bad parameters: {error}"),
            ClientJoinError::AlreadyJoined => write!(f, "already joined"),
        }
    }
}

impl std::error::Error for ClientJoinError {}
