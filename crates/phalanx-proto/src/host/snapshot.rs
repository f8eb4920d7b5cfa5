//! The host's snapshots and rejoin log: who is asked for a snapshot, how one is verified
//! against the sync check, and what a returning player is sent (see `crate::snapshot`).

use std::collections::VecDeque;

use bytes::Bytes;

use crate::snapshot::{is_snapshot_turn, Snapshot, SnapshotError, SnapshotRejection};
use crate::sync::is_check_turn;
use crate::types::{PlayerId, Turn};
use crate::wire::decode_snapshot_upload;

use super::{Host, HostEvent, Seat};

/// Decided reference hashes of snapshot turns remembered, for snapshots that arrive after
/// their turn's verdict (an upload takes longer than the hash reports).
const REFERENCES_KEPT: usize = 4;

/// Snapshots held, asked for, and the encoded turns a rejoin needs besides them.
#[derive(Debug, Default)]
pub(super) struct Snapshots {
    /// The latest snapshots whose hash matched their turn's reference, oldest first: one, or
    /// with a spectators' broadcast delay enough to start a spectator that far back.
    verified: VecDeque<Snapshot>,
    /// A snapshot waiting for its turn's verdict, and who gave it (`None`: the host's game).
    pending: Option<(Snapshot, Option<PlayerId>)>,
    /// `(turn, reference)` of the latest decided snapshot turns, oldest first.
    references: VecDeque<(Turn, Option<u64>)>,
    /// The snapshot asked of a remote player: its turn and the player.
    request: Option<(Turn, PlayerId)>,
    /// The seat the next request starts looking from, so a bad giver is not asked twice
    /// in a row.
    next_giver: usize,
    /// Encoded sealed turns from `log_base`, for rejoins.
    log: TurnLog,
    log_base: Turn,
    log_bytes: usize,
    /// Rejoin is off, or the log outgrew its limit with snapshots off.
    log_off: bool,
    /// [`Host::request_snapshot`] was called: the next check turn sealed is a snapshot turn.
    on_request: bool,
    /// The snapshot turn chosen on request, besides the interval's.
    extra: Option<Turn>,
}

impl Snapshots {
    pub(super) fn new(rejoin_off: bool) -> Self {
        Snapshots { log_off: rejoin_off, ..Snapshots::default() }
    }

    /// The latest turn held or awaiting its verdict.
    fn latest(&self) -> Option<Turn> {
        let pending = self.pending.as_ref().map(|(snapshot, _)| snapshot.turn);
        self.verified.back().map(|snapshot| snapshot.turn).max(pending)
    }

    /// The snapshot turn `player` is asked for, if any.
    pub(super) fn wanted_from(&self, player: PlayerId) -> Option<Turn> {
        self.request.filter(|&(_, giver)| giver == player).map(|(turn, _)| turn)
    }

    fn held_bytes(&self) -> usize {
        let pending = self.pending.as_ref().map_or(0, |(snapshot, _)| snapshot.state.len());
        self.verified.iter().map(|snapshot| snapshot.state.len()).sum::<usize>() + pending
    }

    /// Drops the logged turns a verified snapshot at `turn` makes unnecessary.
    fn trim_log_to(&mut self, turn: Turn) {
        while self.log_base <= turn {
            if !self.pop_log_front() {
                self.log_base = turn.next();
                return;
            }
        }
    }

    /// Forgets the oldest logged turn; `false` when the log is empty.
    fn pop_log_front(&mut self) -> bool {
        let Some(len) = self.log.pop_front() else { return false };
        self.log_bytes -= len;
        self.log_base = self.log_base.next();
        true
    }
}

/// Encoded turns back to back in one buffer, oldest first: a turn costs its bytes and a
/// 4-byte length, not an allocation of its own (a relay holds thousands of these logs).
#[derive(Debug, Default)]
pub(super) struct TurnLog {
    bytes: Vec<u8>,
    /// Where the oldest turn starts in `bytes` (what is before it was popped).
    start: usize,
    lens: VecDeque<u32>,
}

impl TurnLog {
    fn is_empty(&self) -> bool {
        self.lens.is_empty()
    }

    fn push_back(&mut self, encoded: &[u8]) {
        // Popped bytes are reclaimed once they are half the buffer: amortized O(1) a byte.
        if self.start > 0 && self.start >= self.bytes.len() / 2 {
            self.bytes.drain(..self.start);
            self.start = 0;
        }
        self.bytes.extend_from_slice(encoded);
        self.lens.push_back(encoded.len() as u32);
    }

    /// Forgets the oldest turn; its length, or `None` when empty.
    fn pop_front(&mut self) -> Option<usize> {
        let len = self.lens.pop_front()? as usize;
        self.start += len;
        if self.lens.is_empty() {
            self.bytes.clear();
            self.start = 0;
        }
        Some(len)
    }

    /// The turns after the first `skip`, oldest first.
    fn iter_from(&self, skip: usize) -> impl Iterator<Item = &[u8]> + Clone {
        let offset: usize = self.lens.iter().take(skip).map(|&len| len as usize).sum();
        let mut at = self.start + offset;
        self.lens.iter().skip(skip).map(move |&len| {
            let turn = &self.bytes[at..at + len as usize];
            at += len as usize;
            turn
        })
    }
}

impl Host {
    /// Whether the host's own game (its player's, or an observing dedicated host's) should
    /// offer a snapshot of its state after executing `turn`, through
    /// [`offer_snapshot`](Self::offer_snapshot). Call it after each turn the game executes.
    pub fn wants_snapshot(&self, turn: Turn) -> bool {
        self.has_game()
            && self.is_snapshot_turn(turn)
            && turn < self.next_seal
            && self.snapshots.latest().is_none_or(|latest| turn > latest)
    }

    /// The host's own game's state after `turn`, and its state hash there. Kept once the
    /// hash matches the sync check's reference ([`HostEvent::SnapshotStored`]), else
    /// rejected ([`HostEvent::SnapshotRejected`]).
    pub fn offer_snapshot(
        &mut self,
        turn: Turn,
        hash: u64,
        state: Bytes,
    ) -> Result<(), SnapshotError> {
        self.check_offer(turn, state.len())?;
        if !self.wants_snapshot(turn) {
            return Err(SnapshotError::NotWanted { turn });
        }
        self.take_snapshot(Snapshot { turn, hash, state }, None);
        Ok(())
    }

    /// A snapshot upload from `player`'s reliable stream (all its bytes; read at most
    /// [`SessionConfig::snapshot_upload_bytes_max`](crate::SessionConfig::snapshot_upload_bytes_max)).
    /// Only the snapshot asked of that player is taken; anything else is refused, counted in
    /// [`HostStats::snapshots_refused`](crate::HostStats::snapshots_refused), and held
    /// nowhere. Returns the snapshot's turn.
    pub fn handle_snapshot(
        &mut self,
        player: PlayerId,
        bytes: &[u8],
    ) -> Result<Turn, SnapshotError> {
        let result = self.read_upload(player, bytes);
        if result.is_err() {
            self.stats.snapshots_refused += 1;
        }
        result
    }

    fn read_upload(&mut self, player: PlayerId, bytes: &[u8]) -> Result<Turn, SnapshotError> {
        let (turn, hash, state) =
            decode_snapshot_upload(bytes).map_err(SnapshotError::Malformed)?;
        self.check_offer(turn, state.len())?;
        if self.snapshots.request != Some((turn, player)) {
            return Err(SnapshotError::NotWanted { turn });
        }
        self.snapshots.request = None;
        let state = Bytes::copy_from_slice(state);
        self.take_snapshot(Snapshot { turn, hash, state }, Some(player));
        Ok(turn)
    }

    /// Asks for a snapshot of the state after the next check turn sealed, besides those of
    /// `catch_up.snapshot_interval_turns` (which may be 0): before letting a player join late, say,
    /// so that it starts from a recent state. Its giver and verification are as for any
    /// other. Refused with [`SnapshotError::Off`] when sync checks are off (nothing could
    /// verify it).
    pub fn request_snapshot(&mut self) -> Result<(), SnapshotError> {
        if self.config.sync.interval_turns == 0 {
            return Err(SnapshotError::Off);
        }
        self.snapshots.on_request = true;
        Ok(())
    }

    /// Whether `turn` is one the session takes a snapshot of: the interval's, or the one
    /// chosen on request.
    fn is_snapshot_turn(&self, turn: Turn) -> bool {
        is_snapshot_turn(&self.config, turn) || self.snapshots.extra == Some(turn)
    }

    /// The checks every offer passes: snapshots on, not too large, not stale.
    fn check_offer(&self, turn: Turn, len: usize) -> Result<(), SnapshotError> {
        if self.config.catch_up.snapshot_interval_turns == 0 && self.snapshots.extra.is_none() {
            return Err(SnapshotError::Off);
        }
        let max = self.config.catch_up.snapshot_bytes_max;
        if len > max as usize {
            return Err(SnapshotError::TooLarge { len, max });
        }
        match self.snapshots.latest() {
            Some(latest) if turn <= latest => Err(SnapshotError::Stale { turn, latest }),
            _ => Ok(()),
        }
    }

    /// The latest verified snapshot: what a returning player is sent.
    pub fn snapshot(&self) -> Option<&Snapshot> {
        self.snapshots.verified.back()
    }

    /// Whether the host runs the game itself.
    fn has_game(&self) -> bool {
        self.observer.is_some() || self.local_player().is_some()
    }

    /// Verifies at once if the turn's verdict is known, else holds it until it is.
    fn take_snapshot(&mut self, snapshot: Snapshot, from: Option<PlayerId>) {
        let decided = self.snapshots.references.iter().find(|&&(turn, _)| turn == snapshot.turn);
        match decided {
            Some(&(_, reference)) => self.verify_snapshot(snapshot, from, reference),
            None if self.sync.is_decided(snapshot.turn) => {
                self.verify_snapshot(snapshot, from, None)
            }
            None => self.snapshots.pending = Some((snapshot, from)),
        }
        self.stats.snapshot_bytes = self.snapshots.held_bytes();
    }

    fn verify_snapshot(
        &mut self,
        snapshot: Snapshot,
        from: Option<PlayerId>,
        reference: Option<u64>,
    ) {
        let turn = snapshot.turn;
        let rejection = match reference {
            Some(reference) if reference == snapshot.hash => None,
            Some(reference) => {
                Some(SnapshotRejection::HashMismatch { snapshot: snapshot.hash, reference })
            }
            None => Some(SnapshotRejection::Unverifiable),
        };
        if let Some(reason) = rejection {
            self.stats.snapshots_rejected += 1;
            self.push_event(HostEvent::SnapshotRejected { turn, from, reason });
            return;
        }
        let bytes = snapshot.state.len();
        // Enough verified snapshots to start a spectator a broadcast delay back.
        let interval = self.config.catch_up.snapshot_interval_turns.max(1);
        let keep = 1 + self.config.catch_up.spectator_delay_turns.div_ceil(interval) as usize;
        let snapshots = &mut self.snapshots;
        snapshots.verified.push_back(snapshot);
        while snapshots.verified.len() > keep {
            snapshots.verified.pop_front();
        }
        if let Some(oldest) = snapshots.verified.front().map(|snapshot| snapshot.turn) {
            snapshots.trim_log_to(oldest);
        }
        self.stats.snapshots_stored += 1;
        self.stats.rejoin_log_bytes = self.snapshots.log_bytes;
        self.push_event(HostEvent::SnapshotStored { turn, from, bytes });
    }

    /// A check turn was decided with `reference` (sealing, before the turn's records).
    pub(super) fn snapshot_decided(&mut self, turn: Turn, reference: Option<u64>) {
        if !self.is_snapshot_turn(turn) {
            return;
        }
        let snapshots = &mut self.snapshots;
        if snapshots.references.len() == REFERENCES_KEPT {
            snapshots.references.pop_front();
        }
        snapshots.references.push_back((turn, reference));
        if snapshots.pending.as_ref().is_some_and(|(snapshot, _)| snapshot.turn == turn) {
            if let Some((snapshot, from)) = snapshots.pending.take() {
                self.verify_snapshot(snapshot, from, reference);
            }
        }
        self.stats.snapshot_bytes = self.snapshots.held_bytes();
    }

    /// Turn `turn` was just sealed as `encoded`: log it for rejoins, and when it is a
    /// snapshot turn and the host has no game of its own, ask a remote player for one.
    pub(super) fn snapshot_after_seal(&mut self, turn: Turn, encoded: &Bytes) {
        self.log_for_rejoin(turn, encoded);
        if self.snapshots.on_request && is_check_turn(turn, self.config.sync.interval_turns) {
            self.snapshots.on_request = false;
            self.snapshots.extra = Some(turn);
        }
        if !self.is_snapshot_turn(turn) || self.has_game() {
            return;
        }
        let seats = self.seats.len();
        let start = self.snapshots.next_giver;
        let giver = (0..seats).map(|offset| (start + offset) % seats).find(
            |&index| matches!(&self.seats[index], Seat::Remote(peer) if peer.link.heard_from()),
        );
        if let Some(index) = giver {
            self.snapshots.request = Some((turn, PlayerId(index as u8)));
            self.snapshots.next_giver = index + 1;
        }
    }

    /// Keeps a sealed turn's encoding for rejoins. Past `catch_up.rejoin_log_bytes_max` the oldest
    /// turns go (a verified snapshot later makes rejoin possible again); with snapshots off
    /// the log is dropped and rejoin is off for the rest of the game.
    fn log_for_rejoin(&mut self, turn: Turn, encoded: &Bytes) {
        let snapshots_on = self.config.catch_up.snapshot_interval_turns != 0;
        let log = &mut self.snapshots;
        if log.log_off {
            return;
        }
        if log.log.is_empty() {
            log.log_base = turn;
        }
        log.log.push_back(encoded);
        log.log_bytes += encoded.len();
        let max = self.config.catch_up.rejoin_log_bytes_max as usize;
        if log.log_bytes > max && !snapshots_on {
            log.log_off = true;
            log.log = TurnLog::default();
            log.log_bytes = 0;
        }
        while log.log_bytes > max && log.pop_log_front() {}
        self.stats.rejoin_log_bytes = log.log_bytes;
    }

    /// What a returning player is sent: the verified snapshot (if any) and the logged turns
    /// after it up to the last sealed one; `None` when they are not all held.
    pub(super) fn rejoin_material(
        &self,
    ) -> Option<(Option<&Snapshot>, impl Iterator<Item = &[u8]> + Clone)> {
        let (snapshot, skip) = self.spectate_material(self.next_seal)?;
        Some((snapshot, self.log_from(skip)))
    }

    /// What a game starting at `start` needs: the latest verified snapshot before it (if any)
    /// and how many logged turns to skip to the one after it; `None` when the turns from
    /// there are not all held.
    pub(super) fn spectate_material(&self, start: Turn) -> Option<(Option<&Snapshot>, usize)> {
        let snapshots = &self.snapshots;
        if snapshots.log_off {
            return None;
        }
        let snapshot = snapshots.verified.iter().rev().find(|snapshot| snapshot.turn < start);
        let from = snapshot.map_or(Turn::ZERO, |snapshot| snapshot.turn.next());
        // Nothing logged yet: the log starts at the next sealed turn.
        let base = if snapshots.log.is_empty() { self.next_seal } else { snapshots.log_base };
        (from >= base).then(|| (snapshot, from.since(base) as usize))
    }

    /// The logged turns after the first `skip`.
    pub(super) fn log_from(&self, skip: usize) -> impl Iterator<Item = &[u8]> + Clone {
        self.snapshots.log.iter_from(skip)
    }
}

#[cfg(test)]
mod tests {
    use super::TurnLog;

    #[test]
    fn a_turn_log_hands_back_what_it_holds_across_pops_and_compactions() {
        let mut log = TurnLog::default();
        let mut model: std::collections::VecDeque<Vec<u8>> = Default::default();
        for turn in 0..200u32 {
            let encoded: Vec<u8> = (0..(turn % 7) as u8).map(|b| b ^ turn as u8).collect();
            log.push_back(&encoded);
            model.push_back(encoded);
            if turn % 3 == 0 {
                assert_eq!(log.pop_front(), model.pop_front().map(|t| t.len()));
            }
            for skip in [0, 1, model.len() / 2, model.len()] {
                let held: Vec<&[u8]> = log.iter_from(skip).collect();
                let want: Vec<&[u8]> = model.iter().skip(skip).map(Vec::as_slice).collect();
                assert_eq!(held, want, "turn {turn}, skip {skip}");
            }
        }
        while model.pop_front().is_some() {
            assert!(log.pop_front().is_some());
        }
        assert_eq!(log.pop_front(), None);
        assert!(log.is_empty() && log.bytes.is_empty());
    }
}
