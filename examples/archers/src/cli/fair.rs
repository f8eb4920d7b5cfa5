//! The command latency measured fairly: each player's own figure, with the orders caught in a
//! cut apart — given while their player was cut off or catching up after it (executing the
//! turns it missed faster than they are due), or given before and executed after the cut
//! began — so that one player's cut does not set a whole run's figure.

use phalanx::PlayerId;
use phalanx_sim::{SimConfig, SimReport, Step};
use serde::Serialize;

/// The `--json` fields (flattened into the summary).
#[derive(Debug, Default, Serialize)]
pub(crate) struct Fair {
    /// Each player's 95th-percentile latency (ms) over its orders not caught in a cut, by
    /// player (null: none measured).
    pub(crate) latency_ms_p95_by_player: Vec<Option<u32>>,
    /// Orders caught in a cut, every player's.
    pub(crate) cut_orders: usize,
    /// Their 95th-percentile latency (ms; null: none).
    pub(crate) cut_orders_latency_ms_p95: Option<u32>,
}

impl Fair {
    /// The summary's line: each player's p95, then the orders caught in a cut.
    pub(crate) fn words(&self) -> String {
        let players: Vec<String> = self
            .latency_ms_p95_by_player
            .iter()
            .enumerate()
            .map(|(player, p95)| match p95 {
                Some(ms) => format!("{player}: {ms}"),
                None => format!("{player}: -"),
            })
            .collect();
        let cut = match (self.cut_orders, self.cut_orders_latency_ms_p95) {
            (0, _) | (_, None) => "no order caught in a cut".to_owned(),
            (1, Some(p95)) => format!("1 order caught in a cut apart: {p95} ms"),
            (count, Some(p95)) => format!("{count} orders caught in a cut apart: p95 {p95} ms"),
        };
        format!("p95 ms {}; {cut}", players.join(", "))
    }
}

/// The 95th percentile (nearest rank) of `values`, sorted in place; `None` if empty.
fn p95(values: &mut [u32]) -> Option<u32> {
    percentile(values, 95)
}

/// The `pct`th percentile (nearest rank) of `values`, sorted in place; `None` if empty.
pub(crate) fn percentile(values: &mut [u32], pct: usize) -> Option<u32> {
    values.sort_unstable();
    let rank = (values.len() * pct).div_ceil(100);
    values.get(rank.checked_sub(1)?).copied()
}

/// When a player cut off until `to` has caught up: the first turn it executed at least half a
/// turn after the one before, both after `to` (the turns it missed come all at once).
fn caught_up(executed_at_ms: &[u64], to: u64, turn_ms: u64) -> u64 {
    executed_at_ms
        .windows(2)
        .find(|pair| pair[0] >= to && pair[1] - pair[0] >= turn_ms / 2)
        .map_or(u64::MAX, |pair| pair[1])
}

/// Each player's cuts in the timeline: `(from, to)` ms, `to` open when never repaired.
fn cuts(config: &SimConfig, player: PlayerId) -> Vec<(u64, u64)> {
    let mut cuts = Vec::new();
    for step in &config.timeline {
        match *step {
            Step::Partition { at_ms, player: who } if who == player => cuts.push((at_ms, u64::MAX)),
            Step::Repair { at_ms, player: who } if who == player => {
                if let Some(cut) = cuts.last_mut().filter(|cut| cut.1 == u64::MAX) {
                    cut.1 = at_ms;
                }
            }
            _ => {}
        }
    }
    cuts
}

/// Splits every player's measured command latencies (`PlayerReport::command_latencies`, so
/// the run must sample) into its own orders and those caught in one of its cuts.
pub(crate) fn measure(config: &SimConfig, report: &SimReport) -> Fair {
    let mut players: Vec<_> = report.players.iter().filter_map(|p| Some((p.player?, p))).collect();
    players.sort_by_key(|(player, _)| *player);
    let mut fair = Fair::default();
    let mut caught = Vec::new();
    for (player, report) in players {
        let turn_ms = u64::from(config.session.turns.length_ms);
        let cuts: Vec<(u64, u64)> = cuts(config, player)
            .into_iter()
            .map(|(from, to)| (from, caught_up(&report.executed_at_ms, to, turn_ms).max(to)))
            .collect();
        let mut own = Vec::new();
        for &(executed_at, latency) in &report.command_latencies {
            let given_at = executed_at.saturating_sub(u64::from(latency));
            if cuts.iter().any(|&(from, to)| given_at < to && executed_at >= from) {
                caught.push(latency);
            } else {
                own.push(latency);
            }
        }
        fair.latency_ms_p95_by_player.push(p95(&mut own));
    }
    fair.cut_orders = caught.len();
    fair.cut_orders_latency_ms_p95 = p95(&mut caught);
    fair
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nearest rank: of 20 values the 19th, of 1 the only one, of none nothing.
    #[test]
    fn p95_is_the_nearest_rank() {
        let mut twenty: Vec<u32> = (1..=20).rev().collect();
        assert_eq!(p95(&mut twenty), Some(19));
        assert_eq!(p95(&mut [7]), Some(7));
        assert_eq!(p95(&mut []), None);
    }
}
