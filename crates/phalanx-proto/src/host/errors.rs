//! What the host's operations return when they do nothing: one error type an operation.

use crate::types::PlayerId;
use crate::wire::{DecodeError, JoinRefusal};

/// Why [`Host::end`](crate::Host::end) did nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EndError {
    /// The game has not started: there is no turn to end it in (close the lobby instead).
    NotStarted,
    /// The session is already ending or ended.
    AlreadyEnded,
}

impl std::fmt::Display for EndError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EndError::NotStarted => write!(f, "the game has not started"),
            EndError::AlreadyEnded => write!(f, "the session is already ending or ended"),
        }
    }
}

impl std::error::Error for EndError {}

/// Why [`Host::observe_turns`](crate::Host::observe_turns) was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ObserveError {
    /// Only before the game starts.
    GameStarted,
    /// The host plays: its player takes the turns.
    HostPlays,
}

impl std::fmt::Display for ObserveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ObserveError::GameStarted => write!(f, "the game has started"),
            ObserveError::HostPlays => write!(f, "the host plays: its player takes the turns"),
        }
    }
}

impl std::error::Error for ObserveError {}

/// Whether a player removed by [`Host::remove`](crate::Host::remove) may take its seat back with its token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Readmit {
    /// The seat stays open for `catch_up.rejoin_window_ms`, as after a timeout: the player may come
    /// back with its token (a connection closed on purpose, or a kick that forgives).
    Allow,
    /// A ban: the token is revoked, and every later join with it is refused with
    /// [`JoinRefusal::TokenRevoked`](crate::JoinRefusal::TokenRevoked) for the rest of the
    /// session.
    Never,
}

/// Why [`Host::remove`](crate::Host::remove) did nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RemoveError {
    /// No remote player sits in that seat (never joined, already gone, or the host's own).
    NotSeated(PlayerId),
}

impl std::fmt::Display for RemoveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RemoveError::NotSeated(player) => write!(f, "no remote player in seat {player}"),
        }
    }
}

impl std::error::Error for RemoveError {}

/// Why a join did not succeed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum JoinError {
    /// Refused; the reply bytes tell the client why.
    Refused(JoinRefusal),
    /// The request did not decode; the reply is a [`JoinRefusal::Malformed`].
    Malformed(DecodeError),
}

impl std::fmt::Display for JoinError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JoinError::Refused(refusal) => write!(f, "join refused: {refusal}"),
            JoinError::Malformed(error) => write!(f, "malformed join request: {error}"),
        }
    }
}

impl std::error::Error for JoinError {}
