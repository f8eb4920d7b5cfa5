//! What the game executes: a sealed turn's bundle of records in canonical order.

use bytes::Bytes;

use crate::pace::Pace;
use crate::types::{CommandSeq, PlayerId, Turn};
use crate::wire::encode_bundle;

/// One entry of a turn bundle.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Record {
    /// A player's command, executed this turn.
    Command {
        /// Who issued it (bound to their connection by the host, never taken from the wire).
        player: PlayerId,
        /// Its sequence number for that player.
        seq: CommandSeq,
        /// The command's bytes (the typed layer decodes them).
        payload: Bytes,
    },
    /// `player` joins the game this turn.
    Joined(PlayerId),
    /// `player` leaves the game this turn (quit, timed out, misbehaved or disconnected).
    Left(PlayerId),
    /// From the next turn on, the session runs at this pace (speed control). Games whose
    /// simulation depends on the turn length switch here, on every peer at once.
    Pace(Pace),
    /// The state hashes reported for a check turn differ.
    Desync(DesyncReport),
    /// The game pauses after this turn: no turn is sealed until it resumes.
    Paused(PauseBy),
    /// The game resumed: turns flow again from this one.
    Resumed(PauseBy),
    /// The session ends after this turn.
    Ended(EndCause),
}

/// What the host found when it compared the state hashes of a check turn.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DesyncReport {
    /// The check turn whose hashes differ.
    pub turn: Turn,
    /// Every reported hash, by player (ascending).
    pub hashes: Vec<(PlayerId, u64)>,
    /// The players whose hash differs from the reference (the host's, or the majority's).
    pub diverged: Vec<PlayerId>,
}

/// Who paused or resumed the game.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PauseBy {
    /// A player asked for it (and had pauses left).
    Player(PlayerId),
    /// The host did (its operator, or the desync policy).
    Host,
}

/// Why the host ended the session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EndCause {
    /// A desync, under `DesyncPolicy::End`.
    Desync,
    /// The host ended the game ([`Host::end`](crate::Host::end)); the code is the game's own
    /// (who won, a rematch, ...), carried to every peer.
    Finished {
        /// The game's reason.
        code: u32,
    },
}

/// A sealed turn: every record for `turn`, control records first (in the order the host made
/// them), then commands in `(player, seq)` order. Identical on every peer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TurnBundle {
    /// The turn to execute.
    pub turn: Turn,
    /// Its records, in canonical order.
    pub records: Vec<Record>,
    /// How long this turn lasts: the pace in force for it (a `Pace` record in it applies from
    /// the next turn). A renderer interpolates between turns over this long. Not part of the
    /// wire format or the digest: each peer knows it from the pace records it executed.
    pub length_ms: u32,
}

impl TurnBundle {
    /// Whether this is the game's last turn: it carries the end (`Record::Ended`).
    pub fn is_last(&self) -> bool {
        self.records.iter().any(|record| matches!(record, Record::Ended(_)))
    }

    /// A 64-bit FNV-1a digest of the turn number and the bundle's canonical encoding: equal
    /// on every peer that executes this turn (the agreement check of the fault matrix, S1).
    pub fn digest(&self) -> u64 {
        let mut encoded = Vec::with_capacity(64);
        encode_bundle(&mut encoded, &self.records);
        let mut hash = fnv1a(FNV_OFFSET, &self.turn.0.to_le_bytes());
        hash = fnv1a(hash, &encoded);
        hash
    }

    /// The commands in this bundle, in execution order.
    pub fn commands(&self) -> impl Iterator<Item = (PlayerId, CommandSeq, &Bytes)> + '_ {
        self.records.iter().filter_map(|record| match record {
            Record::Command { player, seq, payload } => Some((*player, *seq, payload)),
            _ => None,
        })
    }
}

/// FNV-1a's 64-bit offset basis: where a digest starts.
pub(crate) const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a, 64-bit: tiny, deterministic, and good enough for agreement checks (not security).
pub(crate) fn fnv1a(mut hash: u64, bytes: &[u8]) -> u64 {
    for &byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}
