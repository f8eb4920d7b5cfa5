//! Snapshots: the game's serialized state after a check turn, so that a returning player
//! restores it instead of replaying the game from turn 0.
//!
//! Every `catch_up.snapshot_interval_turns` (a multiple of `sync.interval_turns`) the host wants one.
//! A host that runs the game itself (a listen server's player, or a dedicated host with
//! [`Host::observe_turns`]) takes it from its own game; a dedicated host that does not asks
//! one remote player for it, a different one each time, in the datagrams that carry the turn
//! ([`Client::wants_snapshot`]), and the client uploads it on a reliable stream of its own
//! ([`Client::poll_upload`], [`Host::handle_upload`]).
//!
//! The host keeps a snapshot only once its state hash equals the reference hash the sync
//! check decided for that turn ([`HostEvent::SnapshotStored`]); one that differs, or whose
//! turn nobody reported, is rejected ([`HostEvent::SnapshotRejected`]) and the last good one
//! stays in use. The host holds at most two (the verified one and one awaiting its verdict)
//! and the encoded turns sealed after the verified one: memory is at most
//! `2 × catch_up.snapshot_bytes_max + catch_up.rejoin_log_bytes_max`. A rejoin then gets the verified snapshot
//! and the turns after it ([`Client::take_restore`]), so the game's length no longer limits
//! rejoin.
//!
//! [`Host::observe_turns`]: crate::Host::observe_turns
//! [`Host::handle_upload`]: crate::Host::handle_upload
//! [`HostEvent::SnapshotStored`]: crate::HostEvent::SnapshotStored
//! [`HostEvent::SnapshotRejected`]: crate::HostEvent::SnapshotRejected
//! [`Client::wants_snapshot`]: crate::Client::wants_snapshot
//! [`Client::poll_upload`]: crate::Client::poll_upload
//! [`Client::take_restore`]: crate::Client::take_restore

use bytes::Bytes;

use crate::config::SessionConfig;
use crate::types::Turn;
use crate::wire::{DecodeError, SNAPSHOT_UPLOAD_HEADER_MAX, STATE_UPLOAD_HEADER_MAX};

/// The game's state after executing `turn`, as the game serialized it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The check turn the state follows.
    pub turn: Turn,
    /// The game's state hash after `turn`: the one it reports for the sync check.
    pub hash: u64,
    /// The game's bytes (phalanx never reads them).
    pub state: Bytes,
}

/// Why a snapshot was not taken. Nothing is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SnapshotError {
    /// `catch_up.snapshot_interval_turns` is 0 and none was requested: the session takes no snapshots
    /// (or, for a request, sync checks are off: nothing could verify one).
    Off,
    /// Nobody asked this end for a snapshot of that turn (not a snapshot turn, not this end's
    /// turn to give one, or already given).
    NotWanted {
        /// The turn offered.
        turn: Turn,
    },
    /// The state is larger than `catch_up.snapshot_bytes_max`.
    TooLarge {
        /// Its size.
        len: usize,
        /// The limit.
        max: u32,
    },
    /// The host already holds a snapshot of this turn or a later one.
    Stale {
        /// The turn offered.
        turn: Turn,
        /// The latest turn held.
        latest: Turn,
    },
    /// The upload's bytes did not decode.
    Malformed(DecodeError),
}

impl std::fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SnapshotError::Off => {
                write!(f, "snapshots are off (catch_up.snapshot_interval_turns = 0)")
            }
            SnapshotError::NotWanted { turn } => write!(f, "no snapshot of {turn} was asked for"),
            SnapshotError::TooLarge { len, max } => {
                write!(f, "snapshot of {len} bytes exceeds catch_up.snapshot_bytes_max = {max}")
            }
            SnapshotError::Stale { turn, latest } => {
                write!(f, "a snapshot of {turn} is older than the one held, of {latest}")
            }
            SnapshotError::Malformed(error) => write!(f, "malformed snapshot upload: {error}"),
        }
    }
}

impl std::error::Error for SnapshotError {}

/// Why the host did not keep a snapshot it was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SnapshotRejection {
    /// Its hash is not the reference hash the sync check decided for its turn: the game that
    /// gave it had diverged (or serialized a different state from the one it hashed).
    HashMismatch {
        /// The snapshot's hash.
        snapshot: u64,
        /// The decided reference hash.
        reference: u64,
    },
    /// Nobody reported a hash for its turn, or the verdict is too old to remember: it cannot
    /// be verified.
    Unverifiable,
}

impl std::fmt::Display for SnapshotRejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SnapshotRejection::HashMismatch { snapshot, reference } => write!(
                f,
                "snapshot hash {snapshot:#018x} differs from the reference {reference:#018x}"
            ),
            SnapshotRejection::Unverifiable => write!(f, "no reference hash to verify it by"),
        }
    }
}

/// Whether `turn` is one the session takes a snapshot of.
pub(crate) fn is_snapshot_turn(config: &SessionConfig, turn: Turn) -> bool {
    let interval = config.catch_up.snapshot_interval_turns;
    interval != 0 && turn.0 != 0 && turn.0.is_multiple_of(interval)
}

impl SessionConfig {
    /// The most bytes a host's driver should read from an upload stream: a snapshot, or a
    /// desync's state with the turns before it (`sync.interval_turns` bundles at most).
    pub fn snapshot_upload_bytes_max(&self) -> usize {
        let turns = self.sync.interval_turns.max(1) as usize
            * (crate::wire::VARINT32_MAX + crate::wire::bundle_bytes_max(self));
        SNAPSHOT_UPLOAD_HEADER_MAX.max(STATE_UPLOAD_HEADER_MAX + turns)
            + self.catch_up.snapshot_bytes_max as usize
    }

    /// The most bytes a client's driver should read of a join reply: the fields, a snapshot
    /// and the turns after it.
    pub fn join_reply_bytes_max(&self) -> usize {
        crate::wire::JOIN_REPLY_FIELDS_MAX
            + self.catch_up.snapshot_bytes_max as usize
            + self.catch_up.rejoin_log_bytes_max as usize
    }
}
