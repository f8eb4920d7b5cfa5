//! Sync checks: every `sync.interval_turns` turns each player reports a 64-bit hash of its
//! game state after executing the check turn; the host compares them and, when they differ,
//! puts a [`DesyncReport`] naming the turn, every hash and the diverging players into the next
//! sealed bundle, so every peer learns of it on the same turn.
//!
//! Detection bound: a divergence that first shows in the state at turn `T0` is reported for
//! the first check turn `Tc ≥ T0` (a multiple of the interval). The report rides in a bundle
//! no later than turn `Tc + turns.window_turns`: it is sealed as soon as every player still in the
//! game has reported `Tc`, and the host stops waiting for missing reports when it seals turn
//! `Tc + turns.window_turns` (a player that never reports is then listed without a hash, as not
//! diverged — the window already bounds how far behind a player can be).

use std::collections::BTreeMap;

use crate::bundle::DesyncReport;
use crate::config::DesyncReference;
use crate::types::{PlayerId, Turn};

/// Reports collected for check turns that are not decided yet.
#[derive(Debug, Default)]
pub(crate) struct SyncChecks {
    /// check turn → (player, hash), at most one per player.
    pending: BTreeMap<Turn, Vec<(PlayerId, u64)>>,
    /// Check turns decided so far are all below this.
    decided_below: Turn,
    /// Reports accepted for turns not yet decided; bounded by the window.
    pub(crate) reports: u64,
}

/// Whether `turn` is a check turn.
pub(crate) fn is_check_turn(turn: Turn, interval: u32) -> bool {
    interval != 0 && turn.0.is_multiple_of(interval)
}

impl SyncChecks {
    /// Records `player`'s hash for check turn `turn`. `sealed_below` is the first unsealed turn:
    /// a report for a turn not yet sealed, or already decided, is refused (`false`).
    pub(crate) fn report(
        &mut self,
        player: PlayerId,
        turn: Turn,
        hash: u64,
        interval: u32,
        sealed_below: Turn,
    ) -> bool {
        if !is_check_turn(turn, interval) || turn >= sealed_below || turn < self.decided_below {
            return false;
        }
        let reports = self.pending.entry(turn).or_default();
        match reports.iter_mut().find(|(who, _)| *who == player) {
            // A repeat (the client resends until acknowledged) must agree with the first.
            Some((_, first)) => *first == hash,
            None => {
                reports.push((player, hash));
                self.reports += 1;
                true
            }
        }
    }

    /// Whether check turn `turn`'s verdict was given.
    pub(crate) fn is_decided(&self, turn: Turn) -> bool {
        turn < self.decided_below
    }

    /// Whether `player` has reported check turn `turn` (or it is decided).
    #[cfg(test)]
    pub(crate) fn has_report(&self, player: PlayerId, turn: Turn) -> bool {
        turn < self.decided_below
            || self.pending.get(&turn).is_some_and(|r| r.iter().any(|(who, _)| *who == player))
    }

    /// Decides every pending check turn that every player in `players` has reported, or that
    /// is `window` turns old at `sealing`, oldest first.
    pub(crate) fn decide(
        &mut self,
        players: &[PlayerId],
        sealing: Turn,
        window: u32,
        reference: DesyncReference,
        host_player: Option<PlayerId>,
    ) -> Vec<Decided> {
        let mut found = Vec::new();
        while let Some((&turn, reports)) = self.pending.first_key_value() {
            let complete = players.iter().all(|p| reports.iter().any(|(who, _)| who == p));
            if !complete && sealing.since(turn) < window {
                break;
            }
            let mut hashes = self.pending.remove(&turn).unwrap_or_default();
            hashes.sort_unstable();
            self.decided_below = turn.next();
            let reference_hash = reference_hash(&hashes, reference, host_player);
            let diverged: Vec<PlayerId> = hashes
                .iter()
                .filter(|&&(_, hash)| Some(hash) != reference_hash)
                .map(|&(who, _)| who)
                .collect();
            let desync = (!diverged.is_empty()).then_some(DesyncReport { turn, hashes, diverged });
            found.push(Decided { turn, reference: reference_hash, desync });
        }
        found
    }
}

/// A decided check turn.
#[derive(Debug)]
pub(crate) struct Decided {
    pub(crate) turn: Turn,
    /// The hash taken as right (none if nobody reported).
    pub(crate) reference: Option<u64>,
    /// Set when some hash differs from the reference.
    pub(crate) desync: Option<DesyncReport>,
}

/// The players whose hash differs from the reference hash. `hashes` is sorted by player.
#[cfg(test)]
fn diverged(
    hashes: &[(PlayerId, u64)],
    reference: DesyncReference,
    host_player: Option<PlayerId>,
) -> Vec<PlayerId> {
    let reference_hash = reference_hash(hashes, reference, host_player);
    hashes.iter().filter(|&&(_, h)| Some(h) != reference_hash).map(|&(who, _)| who).collect()
}

/// The hash taken as right: the host's (when that is the rule and the host reported), else the
/// most common one. `hashes` is sorted by player.
fn reference_hash(
    hashes: &[(PlayerId, u64)],
    reference: DesyncReference,
    host_player: Option<PlayerId>,
) -> Option<u64> {
    let &(_, first) = hashes.first()?;
    if hashes.iter().all(|&(_, hash)| hash == first) {
        return Some(first);
    }
    let host_hash = match (reference, host_player) {
        (DesyncReference::Host, Some(host)) => {
            hashes.iter().find(|(who, _)| *who == host).map(|&(_, hash)| hash)
        }
        _ => None,
    };
    Some(host_hash.unwrap_or_else(|| {
        // The most common hash; among equally common ones, the one the lowest player holds
        // (hashes are sorted by player, and max_by_key keeps the last maximum, so scan from
        // the highest player down).
        hashes
            .iter()
            .rev()
            .map(|&(_, hash)| (hashes.iter().filter(|&&(_, h)| h == hash).count(), hash))
            .max_by_key(|&(count, _)| count)
            .map_or(first, |(_, hash)| hash)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(id: u8) -> PlayerId {
        PlayerId(id)
    }

    #[test]
    fn majority_names_the_minority() {
        let hashes = [(p(0), 7), (p(1), 7), (p(2), 9), (p(3), 7)];
        assert_eq!(diverged(&hashes, DesyncReference::Majority, None), [p(2)]);
        assert_eq!(diverged(&[(p(0), 1), (p(1), 1)], DesyncReference::Majority, None), []);
    }

    #[test]
    fn ties_go_to_the_lowest_player_and_host_reference_wins() {
        let hashes = [(p(0), 5), (p(1), 6), (p(2), 6), (p(3), 5)];
        assert_eq!(diverged(&hashes, DesyncReference::Majority, None), [p(1), p(2)]);
        assert_eq!(diverged(&hashes, DesyncReference::Host, Some(p(1))), [p(0), p(3)]);
        // Host reference without a host player falls back to the majority.
        assert_eq!(diverged(&hashes, DesyncReference::Host, None), [p(1), p(2)]);
    }

    #[test]
    fn decides_when_complete_or_out_of_window() {
        let mut checks = SyncChecks::default();
        let players = [p(0), p(1)];
        assert!(checks.report(p(0), Turn(10), 1, 10, Turn(12)));
        assert!(!checks.report(p(0), Turn(11), 1, 10, Turn(12)), "not a check turn");
        assert!(!checks.report(p(0), Turn(20), 1, 10, Turn(12)), "not sealed yet");
        assert!(checks.report(p(0), Turn(10), 1, 10, Turn(12)), "an identical repeat");
        assert!(!checks.report(p(0), Turn(10), 2, 10, Turn(12)), "a changed repeat");
        assert!(checks.decide(&players, Turn(12), 16, DesyncReference::Majority, None).is_empty());
        assert!(checks.report(p(1), Turn(10), 2, 10, Turn(12)));
        let found = checks.decide(&players, Turn(12), 16, DesyncReference::Majority, None);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].turn, Turn(10));
        assert_eq!(found[0].reference, Some(1), "a tie goes to the lowest player");
        assert_eq!(found[0].desync.as_ref().map(|d| d.diverged.clone()), Some(vec![p(1)]));
        assert!(!checks.report(p(1), Turn(10), 2, 10, Turn(30)), "already decided");
        // A check turn nobody completes is decided once it is a window old.
        assert!(checks.report(p(0), Turn(20), 3, 10, Turn(21)));
        assert!(checks.decide(&players, Turn(35), 16, DesyncReference::Majority, None).is_empty());
        assert!(!checks.has_report(p(1), Turn(20)));
        let late = checks.decide(&players, Turn(36), 16, DesyncReference::Majority, None);
        assert_eq!(late.len(), 1);
        assert!(late[0].desync.is_none(), "a missing report is not a divergence");
        assert!(checks.pending.is_empty());
    }
}
