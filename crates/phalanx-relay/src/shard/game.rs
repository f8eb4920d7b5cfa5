//! One match as a shard keeps it: its sans-IO host, who sits where, and its limits.

use std::collections::BTreeMap;

use phalanx_proto::Joined;
use phalanx_wheel::TimerHandle;

use super::slab::Key;
use crate::api::{MatchId, MatchInfo, MatchState, StartPolicy};
use crate::metrics::Lateness;

pub(crate) struct Game {
    pub(crate) id: MatchId,
    pub(crate) host: phalanx_proto::Host,
    /// Each seated player's and spectator's connection.
    pub(crate) seats: BTreeMap<Joined, Key>,
    /// Every token of the match, players' and spectators': freed with it.
    pub(crate) tokens: Vec<u64>,
    pub(crate) players: u8,
    pub(crate) start: StartPolicy,
    pub(crate) turns_max: Option<u32>,
    pub(crate) created_ms: u64,
    /// A match nobody joined by then expires.
    pub(crate) expires_ms: Option<u64>,
    /// A started match with no player connected since then ends at `empty_since + grace`.
    pub(crate) empty_since: Option<u64>,
    /// An ended match is freed by then even if a player never acknowledged the last turn.
    pub(crate) free_by_ms: Option<u64>,
    pub(crate) lateness: Lateness,
    pub(crate) timer: Option<(TimerHandle, u64)>,
}

impl Game {
    pub(crate) fn players_connected(&self) -> impl Iterator<Item = u8> + '_ {
        self.seats.keys().filter_map(|joined| joined.player()).map(|player| player.0)
    }

    pub(crate) fn state(&self) -> MatchState {
        if self.host.is_ended() {
            MatchState::Ending
        } else if !self.host.is_started() {
            MatchState::Lobby
        } else if self.host.is_paused() {
            MatchState::Paused
        } else {
            MatchState::Running
        }
    }

    pub(crate) fn info(&self, now: u64) -> MatchInfo {
        MatchInfo {
            id: self.id,
            state: self.state(),
            players: self.players,
            connected: self.players_connected().collect(),
            spectators: self.seats.keys().filter(|joined| joined.player().is_none()).count(),
            turn: self.host.next_seal().0.into(),
            commands: self.host.stats().commands_sealed,
            age_ms: now.saturating_sub(self.created_ms),
            seal_lateness_p99_ms: self.lateness.quantile(0.99),
            seal_lateness_max_ms: self.lateness.max_ms(),
            seal_lateness: self.lateness,
        }
    }

    /// When this match next needs its timer: its host's, and its own deadlines.
    pub(crate) fn poll_timeout(&self, empty_grace_ms: u64) -> Option<u64> {
        let empty = self.empty_since.map(|since| since + empty_grace_ms);
        [self.host.poll_timeout(), self.expires_ms, empty, self.free_by_ms]
            .into_iter()
            .flatten()
            .min()
    }
}
