//! Replays: what [`HostControl::replay`](crate::HostControl::replay) records, and how a game
//! re-simulates one and checks every recorded state hash ([`verify_replay`]). A replay's turns
//! are raw bundles; [`TypedTurn::decode`](crate::TypedTurn::decode) turns one into the game's
//! typed turn, as a live session hands it out.

pub use phalanx_proto::{
    verify_replay, Replay, ReplayError, ReplayGame, ReplayRecord, ReplayVerified, TurnBundle,
    REPLAY_FORMAT_VERSION,
};
