//! Desync forensics: what differs, not just when.
//!
//! A check turn's hashes say *that* states differ. The host then pins the first divergent
//! turn from the players' per-turn hashes ([`HostEvent::DesyncPinned`]) and, when their games
//! keep their recent states ([`Client::keep_state`]), asks a diverged player and a reference
//! player for their state after that turn. With both in it reports a [`DesyncBundle`]
//! ([`HostEvent::DesyncDiagnosed`]): both states, the commands of the turns before, the
//! session's parameters and versions. The game names the differing parts with its own
//! inspection hook — a function from its serialized state to named sub-hashes (per entity,
//! per component or field, as it chooses) — through [`DesyncBundle::diff`], on the host or
//! later in a tool that reads the bundle from disk.
//!
//! The bundle is serde, versioned by [`DESYNC_BUNDLE_FORMAT_VERSION`]; postcard is a good
//! encoding (the demo's `archers diff BUNDLE` reads one).
//!
//! Memory: a client keeps the game's hash of each of its latest
//! `sync.interval_turns + 2 × turns.window_turns` turns (8 bytes each) and, only if the game
//! hands them over, its states of those turns (each at most `catch_up.snapshot_bytes_max`); the host
//! holds at most four desyncs being pinned, each with two states.
//!
//! [`HostEvent::DesyncPinned`]: crate::HostEvent::DesyncPinned
//! [`HostEvent::DesyncDiagnosed`]: crate::HostEvent::DesyncDiagnosed
//! [`Client::keep_state`]: crate::Client::keep_state

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::config::SessionConfig;
use crate::replay::ReplayRecord;
use crate::snapshot::SnapshotError;
use crate::types::{PlayerId, Turn};

/// Entries a game's end keeps of its latest turns for a desync's forensics (hashes, states,
/// records): a client's, and a listen server's own player's on the host.
pub(crate) fn forensics_keep(config: &SessionConfig) -> usize {
    ((config.sync.interval_turns + 2 * config.turns.window_turns) as usize).max(1)
}

/// Pushes `item` onto `queue`, keeping at most `keep` items (the oldest goes first).
pub(crate) fn keep_last<T>(queue: &mut VecDeque<T>, keep: usize, item: T) {
    if queue.len() >= keep {
        queue.pop_front();
    }
    queue.push_back(item);
}

/// Keeps a game's serialized `state` after `turn` in `states`: refused `TooLarge` past
/// `catch_up.snapshot_bytes_max`, and `NotWanted` unless the turn was executed (before `next_exec`)
/// and comes after the last one kept. Nothing is kept on an error.
pub(crate) fn keep_state(
    states: &mut VecDeque<(Turn, Vec<u8>)>,
    config: &SessionConfig,
    (turn, next_exec): (Turn, Option<Turn>),
    state: Vec<u8>,
) -> Result<(), SnapshotError> {
    let max = config.catch_up.snapshot_bytes_max;
    if state.len() > max as usize {
        return Err(SnapshotError::TooLarge { len: state.len(), max });
    }
    let executed = next_exec.is_some_and(|next| turn < next);
    let newer = states.back().is_none_or(|&(last, _)| last < turn);
    if !executed || !newer {
        return Err(SnapshotError::NotWanted { turn });
    }
    keep_last(states, forensics_keep(config), (turn, state));
    Ok(())
}

/// The desync bundle format version this build writes and reads.
pub const DESYNC_BUNDLE_FORMAT_VERSION: u16 = 1;

/// Everything known about one desync at its first divergent turn: a reference player's state
/// and a diverged player's, side by side. See the module docs.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DesyncBundle {
    /// [`DESYNC_BUNDLE_FORMAT_VERSION`] when written.
    pub format_version: u16,
    /// The protocol version of the session.
    pub protocol_version: u8,
    /// The version of phalanx-proto that wrote it.
    pub library_version: String,
    /// The game-data hash of the session (the game's build and data, as the host set it).
    pub game_data_hash: u64,
    /// The session's parameters, as `SessionConfig`'s `{:#?}` prints them.
    pub config: String,
    /// The check turn whose hashes differed.
    pub check_turn: Turn,
    /// The first turn after which the diverged player's state differed from the reference.
    pub first_turn: Turn,
    /// A player whose state agreed with the reference at the check turn.
    pub reference: PeerState,
    /// A player whose state diverged first.
    pub diverged: PeerState,
}

/// One player's side of a [`DesyncBundle`].
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerState {
    /// Whose.
    pub player: PlayerId,
    /// Its game's state hash after the first divergent turn.
    pub hash: u64,
    /// Its game's serialized state after the first divergent turn; `None` when its game did
    /// not keep that turn's state ([`Client::keep_state`](crate::Client::keep_state)).
    pub state: Option<Vec<u8>>,
    /// The turns it executed up to and including the first divergent one (at most
    /// `sync.interval_turns` of them, oldest first): `(turn, records)`.
    pub turns: Vec<(Turn, Vec<ReplayRecord>)>,
}

impl std::fmt::Debug for PeerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerState")
            .field("player", &self.player)
            .field("hash", &format_args!("{:016x}", self.hash))
            .field("state_bytes", &self.state.as_ref().map(Vec::len))
            .field("turns", &self.turns.len())
            .finish()
    }
}

impl std::fmt::Debug for DesyncBundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DesyncBundle")
            .field("check_turn", &self.check_turn)
            .field("first_turn", &self.first_turn)
            .field("reference", &self.reference)
            .field("diverged", &self.diverged)
            .finish_non_exhaustive()
    }
}

/// Why [`DesyncBundle::diff`] could not compare the two states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DiffError {
    /// This player's game did not keep its state of the first divergent turn.
    NoState(PlayerId),
    /// The inspection hook refused this player's state (it did not decode).
    NotInspected(PlayerId),
}

impl std::fmt::Display for DiffError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DiffError::NoState(player) => {
                write!(f, "{player}'s game kept no state of the first divergent turn")
            }
            DiffError::NotInspected(player) => {
                write!(f, "the inspection hook could not read {player}'s state")
            }
        }
    }
}

impl std::error::Error for DiffError {}

impl DesyncBundle {
    /// The names of the parts that differ between the two states, as the game's inspection
    /// hook names them: `inspect` turns a serialized state into named sub-hashes (`None`: not
    /// a state of this game). A name is listed when its hash differs or only one side has it;
    /// in the reference's order, then the diverged side's extra names.
    ///
    /// ```
    /// # use phalanx_proto::DesyncBundle;
    /// // A game whose state is two bytes, `hp` and `x`.
    /// fn inspect(state: &[u8]) -> Option<Vec<(String, u64)>> {
    ///     let [hp, x] = <[u8; 2]>::try_from(state).ok()?;
    ///     Some(vec![("hp".into(), hp.into()), ("x".into(), x.into())])
    /// }
    /// # fn check(bundle: &DesyncBundle) -> Result<(), phalanx_proto::DiffError> {
    /// let differing = bundle.diff(inspect)?; // for example ["hp"]
    /// # Ok(()) }
    /// ```
    pub fn diff<F>(&self, inspect: F) -> Result<Vec<String>, DiffError>
    where
        F: Fn(&[u8]) -> Option<Vec<(String, u64)>>,
    {
        let side = |peer: &PeerState| {
            let state = peer.state.as_deref().ok_or(DiffError::NoState(peer.player))?;
            inspect(state).ok_or(DiffError::NotInspected(peer.player))
        };
        let reference = side(&self.reference)?;
        let diverged = side(&self.diverged)?;
        let theirs: std::collections::BTreeMap<&str, u64> =
            diverged.iter().map(|(name, hash)| (name.as_str(), *hash)).collect();
        let ours: std::collections::BTreeMap<&str, u64> =
            reference.iter().map(|(name, hash)| (name.as_str(), *hash)).collect();
        let mut names: Vec<String> = reference
            .iter()
            .filter(|(name, hash)| theirs.get(name.as_str()) != Some(hash))
            .map(|(name, _)| name.clone())
            .collect();
        names.extend(
            diverged
                .iter()
                .filter(|(name, _)| !ours.contains_key(name.as_str()))
                .map(|(n, _)| n.clone()),
        );
        names.dedup();
        Ok(names)
    }
}
