//! Players who came back and spectators, in a simulated match: the `rejoins` and
//! `spectators` lists of the `--json` line, and their lines in the summary.

use phalanx::PlayerId;
use phalanx_sim::{PlayerReport, SimReport};
use serde::Serialize;

/// A player whose process crashed and came back through a snapshot (`--rejoin-at`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Rejoin {
    /// The player.
    pub(crate) player: u8,
    /// The turn whose bundle carried its `Left` record (the host timed the dead process out).
    pub(crate) left_turn: Option<u32>,
    /// The turn whose bundle carried its `Joined` record: every game plays with it again
    /// from there.
    pub(crate) back_turn: Option<u32>,
    /// The snapshot it restored: its turn and size (`None`: it replayed from turn 0).
    pub(crate) snapshot_turn: Option<u32>,
    /// See `snapshot_turn`.
    pub(crate) snapshot_bytes: Option<usize>,
    /// Simulated ms from the new process's start to its game executing `back_turn`: the
    /// connection, the snapshot's transfer, the catch-up and the playout wait.
    pub(crate) catch_up_ms: Option<u64>,
    /// Its hashes, from the snapshot on, equal everyone's.
    pub(crate) hashes_agree: bool,
}

/// A spectator (`--spectators`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Spectator {
    /// Its slot.
    pub(crate) spectator: Option<u8>,
    /// Turns it watched.
    pub(crate) turns: usize,
    /// The most turns it was behind the players: ⌈(when it executed a turn − when the first
    /// player did) / turn length⌉, over every turn it executed.
    pub(crate) lag_turns_max: Option<u64>,
    /// Its hash after every turn it watched equals the players'.
    pub(crate) hashes_agree: bool,
}

/// Every player whose process restarted during the match.
pub(crate) fn rejoins(report: &SimReport) -> Vec<Rejoin> {
    report.players.iter().filter(|p| p.incarnations > 1).map(|p| rejoin(report, p)).collect()
}

/// Whether `player` left and came back (its `Joined` after its `Left`): not a removal.
pub(crate) fn came_back(report: &SimReport, player: PlayerId) -> bool {
    matches!(left_and_back(report, player), (Some(left), Some(back)) if back > left)
}

/// The first turn whose bundle carried `player`'s `Left` record, and the last that carried its
/// `Joined` record after turn 0, as the other players executed them.
fn left_and_back(report: &SimReport, player: PlayerId) -> (Option<u32>, Option<u32>) {
    let others = || report.players.iter().filter(move |p| p.player != Some(player));
    let of_player =
        move |&(who, turn): &(PlayerId, phalanx::Turn)| (who == player).then_some(turn.0);
    let left = others().flat_map(|p| &p.left_turns).filter_map(of_player).min();
    let back = others().flat_map(|p| &p.joined_turns).filter_map(of_player).max();
    (left, back)
}

fn rejoin(report: &SimReport, back: &PlayerReport) -> Rejoin {
    let player = back.player.unwrap_or(PlayerId(0));
    let (left_turn, back_turn) = left_and_back(report, player);
    let playing_ms = back_turn
        .and_then(|turn| turn.checked_sub(back.first_turn))
        .and_then(|index| back.executed_at_ms.get(index as usize).copied());
    Rejoin {
        player: player.0,
        left_turn,
        back_turn,
        snapshot_turn: back.restored.map(|(turn, _)| turn.0),
        snapshot_bytes: back.restored.map(|(_, bytes)| bytes),
        catch_up_ms: playing_ms.zip(back.restarted_ms).map(|(at, start)| at.saturating_sub(start)),
        hashes_agree: agrees(report, back),
    }
}

/// Whether `watcher`'s hashes equal every player's over the turns it executed.
fn agrees(report: &SimReport, watcher: &PlayerReport) -> bool {
    let first = watcher.first_turn as usize;
    (first..watcher.turns_played()).all(|turn| {
        let theirs = watcher.hash_at(turn);
        report
            .players
            .iter()
            .filter(|p| p.player != watcher.player || watcher.player.is_none())
            .filter_map(|p| p.hash_at(turn))
            .all(|hash| Some(hash) == theirs)
    }) && !watcher.hashes.is_empty()
}

/// Every spectator.
pub(crate) fn spectators(report: &SimReport, turn_ms: u64) -> Vec<Spectator> {
    report.spectators.iter().map(|s| spectator(report, s, turn_ms)).collect()
}

fn spectator(report: &SimReport, watcher: &PlayerReport, turn_ms: u64) -> Spectator {
    let first = watcher.first_turn as usize;
    let lag_turns_max = watcher
        .executed_at_ms
        .iter()
        .enumerate()
        .filter_map(|(index, &at)| {
            let turn = first + index;
            let players = report.players.iter().filter_map(|p| {
                p.executed_at_ms.get(turn.checked_sub(p.first_turn as usize)?).copied()
            });
            let earliest = players.min()?;
            Some(at.saturating_sub(earliest).div_ceil(turn_ms.max(1)))
        })
        .max();
    Spectator {
        spectator: watcher.spectator.map(|id| id.0),
        turns: watcher.hashes.len(),
        lag_turns_max,
        hashes_agree: agrees(report, watcher),
    }
}

impl Rejoin {
    /// Its line in the summary.
    pub(crate) fn line(&self) -> (String, String) {
        let label = format!("player {} came back", self.player);
        let from = match (self.snapshot_turn, self.snapshot_bytes) {
            (Some(turn), Some(bytes)) => format!("from the snapshot of turn {turn} ({bytes} B)"),
            _ => "replaying from turn 0".to_owned(),
        };
        let value = format!(
            "left at turn {}, back at turn {} {from}, playing {} after its restart; hashes {}",
            self.left_turn.map_or("?".into(), |t| t.to_string()),
            self.back_turn.map_or("?".into(), |t| t.to_string()),
            self.catch_up_ms.map_or("?".into(), |ms| format!("{ms} ms")),
            if self.hashes_agree { "agree" } else { "DIFFER" },
        );
        (label, value)
    }
}

impl Spectator {
    /// Its line in the summary.
    pub(crate) fn line(&self) -> (String, String) {
        let label = format!("spectator {}", self.spectator.map_or("?".into(), |s| s.to_string()));
        let value = format!(
            "watched {} turns, at most {} turns behind the players; hashes {}",
            self.turns,
            self.lag_turns_max.map_or("?".into(), |t| t.to_string()),
            if self.hashes_agree { "agree" } else { "DIFFER" },
        );
        (label, value)
    }
}
