//! A client's side of desync forensics: the game's recent states, held when a desync is
//! reported, and uploaded for the first divergent turn when the host asks (see
//! [`DesyncBundle`](crate::DesyncBundle)).

use std::collections::VecDeque;

use crate::bundle::{Record, TurnBundle};
use crate::desync::{forensics_keep, keep_last, keep_state};
use crate::snapshot::SnapshotError;
use crate::types::Turn;
use crate::wire::{encode_state_upload, StateUpload};

use super::Client;

/// The game's recent states and the turns that led to them.
#[derive(Debug, Default)]
pub(super) struct Kept {
    /// The game's state after each of the latest turns it handed over, oldest first.
    states: VecDeque<(Turn, Vec<u8>)>,
    /// The records of the latest executed turns, kept once the game keeps states.
    turns: VecDeque<(Turn, Vec<Record>)>,
    /// Copied out when a desync we reported was executed, until the host asks or a later
    /// desync replaces it.
    held: Option<Held>,
    /// The turn whose state went up last: asked again (the request repeats in every
    /// datagram until the upload is in), it is not sent again.
    sent: Option<Turn>,
}

/// What a client holds of one desync: the turns from the check turn before to the desync's.
#[derive(Debug)]
struct Held {
    first: Turn,
    check: Turn,
    hashes: Vec<(Turn, u64)>,
    states: Vec<(Turn, Vec<u8>)>,
    turns: Vec<(Turn, Vec<Record>)>,
}

impl Client {
    /// Entries kept of each of the game's latest turns (hashes, states, records).
    pub(super) fn forensics_keep(&self) -> usize {
        forensics_keep(&self.config)
    }

    /// Keeps the game's serialized state after `turn`, which it just executed, for a desync's
    /// forensics: call it after every turn, with [`report_state_hash`](Self::report_state_hash)
    /// for every turn, if the game can afford to serialize its state that often. On a desync
    /// the host asks a diverged player and a reference player for their states after the
    /// first divergent turn, and reports both ([`DesyncBundle`](crate::DesyncBundle)).
    ///
    /// The client keeps the latest `sync.interval_turns + 2 × turns.window_turns` states. Errors:
    /// `TooLarge` past `catch_up.snapshot_bytes_max`; `NotWanted` for a turn not executed yet or not
    /// after the last one kept. Nothing is kept then.
    pub fn keep_state(&mut self, turn: Turn, state: Vec<u8>) -> Result<(), SnapshotError> {
        let next_exec = Some(self.next_exec);
        keep_state(&mut self.kept.states, &self.config, (turn, next_exec), state)
    }

    /// A turn was handed to the game: keep its records while the game keeps its states.
    pub(super) fn keep_turn_records(&mut self, bundle: &TurnBundle) {
        if self.kept.states.is_empty() {
            return;
        }
        let keep = self.forensics_keep();
        keep_last(&mut self.kept.turns, keep, (bundle.turn, bundle.records.clone()));
    }

    /// A desync we reported was executed and we sent `hashes`, our run of turn hashes up to
    /// its check turn: hold what we have of those turns.
    pub(super) fn hold_states(&mut self, check: Turn, hashes: Vec<(Turn, u64)>) {
        let Some(&(first, _)) = hashes.first() else { return };
        let within = |turn: Turn| turn >= first && turn <= check;
        let kept = &self.kept;
        let held = Held {
            first,
            check,
            states: kept.states.iter().filter(|(t, _)| within(*t)).cloned().collect(),
            turns: kept.turns.iter().filter(|(t, _)| within(*t)).cloned().collect(),
            hashes,
        };
        self.kept.held = Some(held);
    }

    /// The host asks for our state after `turn` (in a datagram's extras): upload it once,
    /// with the turns before it; without a state (the game kept none), say so.
    pub(super) fn on_inspect(&mut self, turn: Turn) {
        if self.kept.sent == Some(turn) {
            return;
        }
        let Some(held) = self.kept.held.as_ref().filter(|h| h.first <= turn && turn <= h.check)
        else {
            return;
        };
        let Some(&(_, hash)) = held.hashes.iter().find(|&&(t, _)| t == turn) else { return };
        let state = held.states.iter().find(|(t, _)| *t == turn).map(|(_, s)| s.clone());
        let turns = held.turns.iter().filter(|(t, _)| *t <= turn).cloned().collect();
        let upload = StateUpload { check: held.check, turn, hash, turns, state };
        self.kept.sent = Some(turn);
        self.push_upload(encode_state_upload(&upload));
    }
}
