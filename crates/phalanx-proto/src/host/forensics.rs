//! Desync forensics, first step: pinning the first divergent turn. A check turn's hashes say
//! *that* states differ, somewhere in the `sync.interval_turns` before it. Every player that
//! executes the `Desync` record sends the host its state hash after each of those turns (it
//! keeps the latest few, see `Client::report_state_hash`), on a stream of its own; once the
//! host holds them from a diverged player and from one that agreed with the reference, the
//! first turn where they differ is the first divergent turn ([`HostEvent::DesyncPinned`]).
//! Then the host asks that diverged player and the reference for their states after that turn
//! (in their datagrams' extras); players whose games keep their states upload them, and with
//! both in the host reports a [`DesyncBundle`] ([`HostEvent::DesyncDiagnosed`]).
//!
//! A listen server's own player takes part like any other: the host keeps its turn hashes (and,
//! when its game keeps them, its states and turns) itself, so a divergence of the host's own
//! game is pinned and diagnosed too.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::bundle::{Record, TurnBundle};
use crate::desync::{
    forensics_keep, keep_last, keep_state, DesyncBundle, PeerState, DESYNC_BUNDLE_FORMAT_VERSION,
};
use crate::replay::ReplayRecord;
use crate::snapshot::SnapshotError;
use crate::types::{PlayerId, Turn};
use crate::wire::{
    decode_hashes_upload, decode_state_upload, upload_kind, DecodeError, StateUpload, KIND_HASHES,
    KIND_STATE,
};

use super::{Host, HostEvent};

/// Desyncs whose first divergent turn is still being looked for, at most.
const OPEN_MAX: usize = 4;
/// Turns after its check turn that a desync's states are asked for, at most (a player that
/// keeps no states answers at once; one that left never does).
const INSPECT_TURNS_MAX: u32 = 600;

/// One desync being pinned.
#[derive(Debug)]
struct Open {
    check: Turn,
    diverged: Vec<PlayerId>,
    /// Players whose hash was the reference.
    agreed: Vec<PlayerId>,
    /// Each player's turn hashes: the first turn listed, then one hash a turn.
    lists: Vec<(PlayerId, Turn, Vec<u64>)>,
    /// Pinned already: later uploads for it are taken and dropped.
    pinned: bool,
    /// Once pinned: the states asked for, until both are in.
    inspect: Option<Inspect>,
}

/// The states a pinned desync asks for: the reference's and a diverged player's, after the
/// first divergent turn.
#[derive(Debug)]
struct Inspect {
    turn: Turn,
    reference: PlayerId,
    diverged: PlayerId,
    got: Vec<PeerState>,
}

impl Inspect {
    /// Whether `player`'s state is asked for and not in yet.
    fn awaits(&self, player: PlayerId) -> bool {
        (player == self.reference || player == self.diverged)
            && !self.got.iter().any(|peer| peer.player == player)
    }
}

/// Desyncs being pinned, oldest first.
#[derive(Debug, Default)]
pub(super) struct Forensics {
    open: VecDeque<Open>,
    /// The latest check turn that was a desync: the checks after it that still differ are the
    /// same divergence, not new ones to pin.
    last_desync: Option<Turn>,
    /// The host's own player's latest turns, as a client keeps its own.
    own: Own,
    /// Copied out of `own` when a desync that involves the host's player is decided: `(check,
    /// what of it we hold)`, until a later desync replaces it.
    own_held: Option<(Turn, Own)>,
}

/// The host's own player's latest turn hashes, states and turns, oldest first.
#[derive(Debug, Default)]
struct Own {
    hashes: VecDeque<(Turn, u64)>,
    states: VecDeque<(Turn, Vec<u8>)>,
    /// Kept once the game keeps states.
    turns: VecDeque<(Turn, Vec<Record>)>,
}

/// Why an upload was not taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum UploadError {
    /// A snapshot upload that was refused.
    Snapshot(SnapshotError),
    /// Turn hashes nobody asked for (no open desync at that check turn, or not this
    /// player's), or that did not decode.
    Hashes(Option<DecodeError>),
    /// A desync's state upload nobody asked for, or that did not decode.
    State(Option<DecodeError>),
    /// Not an upload of this protocol.
    Unknown,
}

impl std::fmt::Display for UploadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UploadError::Snapshot(error) => error.fmt(f),
            UploadError::Hashes(Some(error)) => write!(f, "malformed turn hashes: {error}"),
            UploadError::Hashes(None) => write!(f, "turn hashes nobody asked for"),
            UploadError::State(Some(error)) => write!(f, "malformed desync state: {error}"),
            UploadError::State(None) => write!(f, "a desync state nobody asked for"),
            UploadError::Unknown => write!(f, "not an upload"),
        }
    }
}

impl std::error::Error for UploadError {}

impl Host {
    /// An upload from `player`'s reliable stream (all its bytes; read at most
    /// [`SessionConfig::snapshot_upload_bytes_max`](crate::SessionConfig::snapshot_upload_bytes_max)):
    /// a snapshot ([`handle_snapshot`](Self::handle_snapshot)), or the turn hashes or the
    /// state a desync asked for. What is refused is counted and held nowhere.
    pub fn handle_upload(&mut self, player: PlayerId, bytes: &[u8]) -> Result<(), UploadError> {
        match upload_kind(bytes) {
            Some(KIND_STATE) => {
                let result = self.take_state(player, bytes);
                if result.is_err() {
                    self.stats.hashes_refused += 1;
                }
                result
            }
            Some(KIND_HASHES) => {
                let result = self.take_turn_hashes(player, bytes);
                if result.is_err() {
                    self.stats.hashes_refused += 1;
                }
                result
            }
            Some(_) => {
                self.handle_snapshot(player, bytes).map(|_| ()).map_err(UploadError::Snapshot)
            }
            None => {
                self.stats.snapshots_refused += 1;
                Err(UploadError::Unknown)
            }
        }
    }

    fn take_turn_hashes(&mut self, player: PlayerId, bytes: &[u8]) -> Result<(), UploadError> {
        let max = (self.config.sync.interval_turns + 2 * self.config.turns.window_turns) as usize;
        let (check, first, hashes) =
            decode_hashes_upload(bytes, max).map_err(|e| UploadError::Hashes(Some(e)))?;
        let open = self.forensics.open.iter_mut().find(|open| open.check == check);
        let Some(open) = open.filter(|open| {
            (open.diverged.contains(&player) || open.agreed.contains(&player))
                && !open.lists.iter().any(|(who, _, _)| *who == player)
        }) else {
            return Err(UploadError::Hashes(None));
        };
        if open.pinned {
            // A late one, for a divergence already pinned.
            return Ok(());
        }
        open.lists.push((player, first, hashes));
        self.try_pin(check);
        Ok(())
    }

    /// A check turn was decided with a desync: look for its first divergent turn.
    pub(super) fn forensics_open(
        &mut self,
        check: Turn,
        hashes: &[(PlayerId, u64)],
        diverged: &[PlayerId],
    ) {
        let interval = self.config.sync.interval_turns.max(1);
        let continued =
            self.forensics.last_desync.is_some_and(|last| check.since(last) <= interval);
        self.forensics.last_desync = Some(check);
        // Still diverged since the check before: the same divergence, pinned from that one;
        // but its players' uploads are expected, so take them quietly.
        let agreed = hashes.iter().map(|&(who, _)| who).filter(|who| !diverged.contains(who));
        let open = Open {
            check,
            diverged: diverged.to_vec(),
            agreed: agreed.collect(),
            lists: Vec::new(),
            pinned: continued,
            inspect: None,
        };
        if self.forensics.open.len() == OPEN_MAX {
            self.forensics.open.pop_front();
        }
        self.forensics.open.push_back(open);
        if let Some(own) = self.local_player().filter(|who| hashes.iter().any(|(p, _)| p == who)) {
            self.hold_own(check, own);
        }
    }

    /// The host's own player's hash after `turn` (every turn, for a desync's forensics).
    pub(super) fn keep_own_hash(&mut self, turn: Turn, hash: u64) {
        let keep = forensics_keep(&self.config);
        let own = &mut self.forensics.own;
        if own.hashes.back().is_none_or(|&(last, _)| last < turn) {
            keep_last(&mut own.hashes, keep, (turn, hash));
        }
    }

    /// A turn was handed to the host's own game: keep its records while the game keeps its
    /// states.
    pub(super) fn keep_own_turn(&mut self, bundle: &TurnBundle) {
        let keep = forensics_keep(&self.config);
        let own = &mut self.forensics.own;
        if !own.states.is_empty() {
            keep_last(&mut own.turns, keep, (bundle.turn, bundle.records.clone()));
        }
    }

    /// Keeps the host's own game's serialized state after `turn`, which it just executed, for
    /// desync forensics, as [`Client::keep_state`](crate::Client::keep_state) does for a
    /// client's: call it after every turn, with [`report_state_hash`](Self::report_state_hash)
    /// for every turn. On a desync where the host's player diverged, or is the reference, the
    /// host diagnoses with its own state. The latest `sync.interval_turns + 2 ×
    /// turns.window_turns` are kept. Errors: `TooLarge` past `catch_up.snapshot_bytes_max`; `NotWanted`
    /// without a player of the host's own, or for a turn it has not executed or not after the
    /// last one kept. Nothing is kept then.
    pub fn keep_state(&mut self, turn: Turn, state: Vec<u8>) -> Result<(), SnapshotError> {
        let next_exec = self.local_next_exec();
        keep_state(&mut self.forensics.own.states, &self.config, (turn, next_exec), state)
    }

    /// A desync at `check` involves the host's own player: its turns from the check before
    /// are held for the forensics, and its hashes go in as a player's upload would.
    fn hold_own(&mut self, check: Turn, player: PlayerId) {
        let interval = self.config.sync.interval_turns.max(1);
        let first = Turn(check.0.saturating_sub(2 * interval - 1));
        let within = |turn: Turn| turn >= first && turn <= check;
        let own = &self.forensics.own;
        let hashes: Vec<(Turn, u64)> =
            own.hashes.iter().filter(|(t, _)| within(*t)).copied().collect();
        let held = Own {
            states: own.states.iter().filter(|(t, _)| within(*t)).cloned().collect(),
            turns: own.turns.iter().filter(|(t, _)| within(*t)).cloned().collect(),
            hashes: hashes.iter().copied().collect(),
        };
        self.forensics.own_held = Some((check, held));
        // Only a gapless run of hashes ending at the check turn compares turn by turn.
        let Some(&(start, _)) = hashes.first() else { return };
        let gapless = hashes.iter().enumerate().all(|(i, &(t, _))| t.0 == start.0 + i as u32);
        if !gapless || hashes.last().map(|&(t, _)| t) != Some(check) {
            return;
        }
        let Some(open) = self.forensics.open.iter_mut().find(|open| open.check == check) else {
            return;
        };
        if !open.pinned {
            open.lists.push((player, start, hashes.iter().map(|&(_, h)| h).collect()));
            self.try_pin(check);
        }
    }

    /// The host's own player's state after `turn` for check turn `check`'s forensics, as a
    /// player would upload it.
    fn own_state(&self, check: Turn, turn: Turn, player: PlayerId) -> Option<PeerState> {
        let (held_check, held) = self.forensics.own_held.as_ref()?;
        if *held_check != check {
            return None;
        }
        let &(_, hash) = held.hashes.iter().find(|&&(t, _)| t == turn)?;
        let state = held.states.iter().find(|(t, _)| *t == turn).map(|(_, s)| s.clone());
        // At most `sync.interval_turns` of them, as a player's upload.
        let upto: Vec<_> = held.turns.iter().filter(|(t, _)| *t <= turn).collect();
        let skip = upto.len().saturating_sub(self.config.sync.interval_turns.max(1) as usize);
        let turns = upto[skip..]
            .iter()
            .map(|(t, records)| (*t, records.iter().map(ReplayRecord::from).collect()))
            .collect();
        Some(PeerState { player, hash, state, turns })
    }

    /// Pins check turn `check`'s first divergent turn once a diverged player's hashes and an
    /// agreeing one's are both in.
    fn try_pin(&mut self, check: Turn) {
        let Some(index) = self.forensics.open.iter().position(|open| open.check == check) else {
            return;
        };
        let open = &self.forensics.open[index];
        if open.pinned {
            return;
        }
        let find =
            |side: &[PlayerId]| open.lists.iter().find(|(who, _, _)| side.contains(who)).cloned();
        let (Some(reference), Some(_)) = (find(&open.agreed), find(&open.diverged)) else {
            return;
        };
        let (ref_player, ref_first, ref_hashes) = reference;
        let hash_at = |first: Turn, hashes: &[u64], turn: Turn| {
            hashes.get(turn.0.checked_sub(first.0)? as usize).copied()
        };
        // The earliest turn where a diverged player's hash differs from the reference's,
        // where that comparison began, and whose it was.
        let mut found: Option<(Turn, Turn, PlayerId)> = None;
        let mut players = Vec::new();
        let diverged = open.lists.iter().filter(|(who, _, _)| open.diverged.contains(who));
        for (who, first, hashes) in diverged {
            let from = (*first).max(ref_first);
            let differs = (from.0..=check.0).map(Turn).find(|&turn| {
                hash_at(*first, hashes, turn) != hash_at(ref_first, &ref_hashes, turn)
            });
            if let Some(turn) = differs {
                players.push(*who);
                if found.is_none_or(|(known, _, _)| turn < known) {
                    found = Some((turn, from, *who));
                }
            }
        }
        let Some((first_turn, from, first_diverged)) = found else { return };
        // Exact when the turn before it was compared and agreed, or it is the first turn after
        // the previous check turn (which agreed, or this would be that one's desync).
        let interval = self.config.sync.interval_turns.max(1);
        let exact = first_turn > from || first_turn.0 + interval == check.0 + 1;
        players.sort_unstable();
        let open = &mut self.forensics.open[index];
        open.pinned = true;
        open.lists = Vec::new();
        open.inspect = Some(Inspect {
            turn: first_turn,
            reference: ref_player,
            diverged: first_diverged,
            got: Vec::new(),
        });
        self.push_event(HostEvent::DesyncPinned { check_turn: check, first_turn, players, exact });
        // The host's own player, when asked, answers here and now.
        let own = self.local_player().filter(|&p| p == ref_player || p == first_diverged);
        if let Some(peer) = own.and_then(|player| self.own_state(check, first_turn, player)) {
            self.inspect_got(index, peer);
        }
    }
}

impl Host {
    /// The turn whose state a desync's forensics asks `player` for, if any (sent in its
    /// datagrams' extras until the upload is in).
    pub(super) fn inspect_wanted(&self, player: PlayerId) -> Option<Turn> {
        self.forensics.open.iter().find_map(|open| {
            let inspect = open.inspect.as_ref()?;
            if self.next_seal.since(open.check) > INSPECT_TURNS_MAX {
                return None;
            }
            inspect.awaits(player).then_some(inspect.turn)
        })
    }

    fn take_state(&mut self, player: PlayerId, bytes: &[u8]) -> Result<(), UploadError> {
        let turns_max = self.config.sync.interval_turns.max(1) as usize;
        let state_max = self.config.catch_up.snapshot_bytes_max as usize;
        let upload = decode_state_upload(bytes, &self.limits, turns_max, state_max)
            .map_err(|e| UploadError::State(Some(e)))?;
        let StateUpload { check, turn, hash, turns, state } = upload;
        let index = self.forensics.open.iter().position(|open| {
            open.check == check
                && open.inspect.as_ref().is_some_and(|i| i.turn == turn && i.awaits(player))
        });
        let Some(index) = index else { return Err(UploadError::State(None)) };
        let turns = turns
            .iter()
            .map(|(turn, records)| (*turn, records.iter().map(ReplayRecord::from).collect()))
            .collect();
        self.inspect_got(index, PeerState { player, hash, state, turns });
        Ok(())
    }

    /// One of the two states desync `index` asked for is in; with both, the diagnosis.
    fn inspect_got(&mut self, index: usize, peer: PeerState) {
        let open = &mut self.forensics.open[index];
        let Some(inspect) = open.inspect.as_mut() else { return };
        inspect.got.push(peer);
        if inspect.got.len() < 2 {
            return;
        }
        let check = open.check;
        let Some(inspect) = open.inspect.take() else { return };
        let (mut reference, mut diverged) = (None, None);
        for peer in inspect.got {
            if peer.player == inspect.reference {
                reference = Some(peer);
            } else {
                diverged = Some(peer);
            }
        }
        let (Some(reference), Some(diverged)) = (reference, diverged) else { return };
        let bundle = DesyncBundle {
            format_version: DESYNC_BUNDLE_FORMAT_VERSION,
            protocol_version: crate::PROTOCOL_VERSION,
            library_version: env!("CARGO_PKG_VERSION").to_owned(),
            game_data_hash: self.config.game_data_hash,
            config: format!("{:#?}", self.config),
            check_turn: check,
            first_turn: inspect.turn,
            reference,
            diverged,
        };
        self.push_event(HostEvent::DesyncDiagnosed(Arc::new(bundle)));
    }
}
