//! What the game executes: a sealed turn's bundle of records in canonical order.

use bytes::Bytes;

use crate::types::{CommandSeq, PlayerId, Turn};
use crate::wire::{encode_bundle, WireRecord};

/// One entry of a turn bundle.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
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
    /// `player` leaves the game this turn (quit, timed out or disconnected).
    Left(PlayerId),
}

impl Record {
    pub(crate) fn to_wire(&self) -> WireRecord<'_> {
        match self {
            Record::Command {
                player,
                seq,
                payload,
            } => WireRecord::Command {
                player: *player,
                seq: *seq,
                payload,
            },
            Record::Joined(player) => WireRecord::Joined(*player),
            Record::Left(player) => WireRecord::Left(*player),
        }
    }

    pub(crate) fn from_wire(record: &WireRecord<'_>) -> Record {
        match *record {
            WireRecord::Command {
                player,
                seq,
                payload,
            } => Record::Command {
                player,
                seq,
                payload: Bytes::copy_from_slice(payload),
            },
            WireRecord::Joined(player) => Record::Joined(player),
            WireRecord::Left(player) => Record::Left(player),
        }
    }
}

/// A sealed turn: every record for `turn`, control records first (in the order the host made
/// them), then commands in `(player, seq)` order. Identical on every peer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TurnBundle {
    /// The turn to execute.
    pub turn: Turn,
    /// Its records, in canonical order.
    pub records: Vec<Record>,
}

impl TurnBundle {
    /// A 64-bit FNV-1a digest of the turn number and the bundle's canonical encoding: equal
    /// on every peer that executes this turn (the agreement check of the fault matrix, S1).
    pub fn digest(&self) -> u64 {
        let mut encoded = Vec::with_capacity(64);
        let wire: Vec<WireRecord<'_>> = self.records.iter().map(Record::to_wire).collect();
        encode_bundle(&mut encoded, &wire);
        let mut hash = fnv1a(0xcbf2_9ce4_8422_2325, &self.turn.0.to_le_bytes());
        hash = fnv1a(hash, &encoded);
        hash
    }

    /// The commands in this bundle, in execution order.
    pub fn commands(&self) -> impl Iterator<Item = (PlayerId, CommandSeq, &Bytes)> + '_ {
        self.records.iter().filter_map(|record| match record {
            Record::Command {
                player,
                seq,
                payload,
            } => Some((*player, *seq, payload)),
            _ => None,
        })
    }
}

/// FNV-1a, 64-bit: tiny, deterministic, and good enough for agreement checks (not security).
pub(crate) fn fnv1a(mut hash: u64, bytes: &[u8]) -> u64 {
    for &byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}
