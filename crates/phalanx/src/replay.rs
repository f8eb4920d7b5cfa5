//! Replays: what [`HostControl::replay`](crate::HostControl::replay) records, and how a game
//! re-simulates one and checks every recorded state hash ([`verify_replay`]). A replay's turns
//! are raw bundles; [`TypedTurn::decode`](crate::TypedTurn::decode) turns one into the game's
//! typed turn, as a live session hands it out.
//!
//! A host can also sign how a match went ([`MatchRecord`], signed by a [`MatchSigner`] into a
//! [`SignedMatch`]), bound to its replay by the replay's digest: anyone with the host's
//! [`MatchKey`] verifies both ([`SignedMatch::verify_replay`]).

pub use crate::signed::{
    replay_digest, MatchKey, MatchRecord, MatchSigner, RosterSeat, SignedMatch, SignerError,
    VerifyError, ROSTER_KEY_BYTES_MAX, SIGNED_FORMAT_VERSION,
};
pub use phalanx_proto::{
    verify_replay, Replay, ReplayError, ReplayGame, ReplayRecord, ReplayVerified, TurnBundle,
    REPLAY_FORMAT_VERSION,
};
