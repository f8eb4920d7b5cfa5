//! Players removed before the end of a simulated match: who, at which turn, why (the host's
//! event), what their own figures were up to then, and how long the players that stayed
//! waited for the removal. A removed player is not a disagreement: its hashes are compared
//! with the others' over the turns it executed.

use phalanx::{Event, PlayerId};
use phalanx_sim::{PlayerReport, SimReport};
use serde::Serialize;

/// One removed player, as the `removed` list of the `--json` line gives it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Removed {
    /// The player.
    pub(crate) player: u8,
    /// The turn whose bundle carried its `Left` record: the same on every game that executed
    /// it (the first turn the others played without it).
    pub(crate) turn: u32,
    /// Why the host removed it: `timed_out` (silent past the idle timeout), `misbehaved`, or
    /// `removed` (kicked, or it left on purpose).
    pub(crate) cause: &'static str,
    /// How its own session ended (`host_lost`, `removed`...), as it saw it.
    pub(crate) ended: Option<&'static str>,
    /// Turns it executed before it was removed.
    pub(crate) turns_executed: usize,
    /// Its state hash after each of those turns equals that of every player who stayed.
    pub(crate) hashes_agree: bool,
    /// Its command latency (submit → execute), measured up to `measured_until_ms`; `None`
    /// (null) when never measured.
    pub(crate) latency_ms_p50: Option<u32>,
    /// See `latency_ms_p50`.
    pub(crate) latency_ms_p95: Option<u32>,
    /// See `latency_ms_p50`.
    pub(crate) latency_ms_max: Option<u32>,
    /// Time its game waited for turns beyond their length, up to `measured_until_ms`.
    pub(crate) stall_ms: Option<u64>,
    /// Simulated ms up to which its figures were measured (its last stats reading).
    pub(crate) measured_until_ms: Option<u64>,
    /// Commands it submitted that the players who stayed never executed (submitted while it
    /// was cut off, they never reached the host).
    pub(crate) commands_lost: u64,
    /// Simulated ms at which the host removed it.
    pub(crate) removed_at_ms: Option<u64>,
    /// How long the players who stayed waited across the removal: the longest of their gaps
    /// between the last turn each executed before the host removed the player and the next.
    pub(crate) survivors_waited_ms: Option<u64>,
    /// The turn that ended that wait (text only).
    #[serde(skip)]
    waited_for_turn: Option<u32>,
    /// Simulated ms from its last executed turn until its own session ended (text only).
    #[serde(skip)]
    own_wait_ms: Option<u64>,
}

/// The host's reason for a removal event, in the JSON's words.
fn cause(event: &Event) -> Option<(PlayerId, &'static str)> {
    match event {
        Event::PlayerTimedOut(player) => Some((*player, "timed_out")),
        Event::PlayerMisbehaved(player) => Some((*player, "misbehaved")),
        Event::PlayerRemoved(player) => Some((*player, "removed")),
        _ => None,
    }
}

/// Every player whose `Left` record some game executed during the match, in seat order.
/// (Players that leave after the last turn, as every player does, are not in the list: no
/// game executes their `Left`.)
pub(crate) fn removed(report: &SimReport) -> Vec<Removed> {
    let mut left: Vec<(PlayerId, u32)> = report
        .players
        .iter()
        .flat_map(|p| p.left_turns.iter().map(|&(player, turn)| (player, turn.0)))
        .collect();
    left.sort_unstable();
    left.dedup_by_key(|(player, _)| *player);
    // One that came back is a rejoin, not a removal (see `catch_up`).
    left.retain(|&(player, _)| !super::catch_up::came_back(report, player));
    let gone: Vec<PlayerId> = left.iter().map(|&(player, _)| player).collect();
    let stayed: Vec<&PlayerReport> =
        report.players.iter().filter(|p| p.player.is_some_and(|id| !gone.contains(&id))).collect();
    left.into_iter()
        .filter_map(|(player, turn)| {
            Some(removed_one(report, &stayed, report.player(player)?, turn))
        })
        .collect()
}

/// The removal of `gone`, whose `Left` record was in `turn`; `stayed`: the players who were
/// not removed.
fn removed_one(
    report: &SimReport,
    stayed: &[&PlayerReport],
    gone: &PlayerReport,
    turn: u32,
) -> Removed {
    let player = gone.player.unwrap_or(PlayerId(0));
    // The host's first removal event naming it (as `turn` is its first `Left`).
    let event = report
        .events
        .iter()
        .filter_map(|(at, event)| cause(event).map(|(who, why)| (*at, who, why)))
        .find(|&(_, who, _)| who == player);
    let ended = gone.ended.map(|reason| reason.name());
    let measured = gone.stats_at_ms.is_some();
    let latency = gone.latency_ms.filter(|_| measured);
    let removed_at_ms = event.map(|(at, _, _)| at);
    let waited =
        removed_at_ms.and_then(|at| stayed.iter().filter_map(|p| wait_across(p, at)).max());
    Removed {
        player: player.0,
        turn,
        cause: event.map_or_else(|| ended.unwrap_or("left"), |(_, _, why)| why),
        ended,
        turns_executed: gone.hashes.len(),
        hashes_agree: stayed.iter().all(|p| {
            (0..gone.turns_played())
                .all(|turn| p.hash_at(turn).is_none_or(|hash| Some(hash) == gone.hash_at(turn)))
        }),
        latency_ms_p50: latency.map(|l| l.0),
        latency_ms_p95: latency.map(|l| l.1),
        latency_ms_max: latency.map(|l| l.2),
        stall_ms: measured.then_some(gone.stall_ms),
        measured_until_ms: gone.stats_at_ms,
        commands_lost: lost(gone, stayed.first().copied()),
        removed_at_ms,
        survivors_waited_ms: waited.map(|(ms, _)| ms),
        waited_for_turn: waited.map(|(_, turn)| turn),
        own_wait_ms: gone
            .finished_ms
            .zip(gone.executed_at_ms.last())
            .map(|(end, &last)| end.saturating_sub(last)),
    }
}

/// The gap between the two turns `player` executed around simulated ms `at` (the last before
/// it and the first at or after it), and the second of them. (Turns are counted from 0, so a
/// turn's index in `executed_at_ms` is its number.)
fn wait_across(player: &PlayerReport, at: u64) -> Option<(u64, u32)> {
    let after = player.executed_at_ms.iter().position(|&t| t >= at)?;
    let before = player.executed_at_ms.get(after.checked_sub(1)?)?;
    Some((player.executed_at_ms[after] - before, u32::try_from(after).ok()?))
}

/// The commands `gone` submitted that `stayed`, a player who stayed, never executed (0
/// when nobody stayed).
fn lost(gone: &PlayerReport, stayed: Option<&PlayerReport>) -> u64 {
    let (Some(player), Some(stayed)) = (gone.player, stayed) else { return 0 };
    let executed: std::collections::BTreeSet<_> = stayed
        .commands
        .iter()
        .filter(|(who, _, _)| *who == player)
        .map(|(_, seq, _)| *seq)
        .collect();
    gone.tickets.iter().filter(|ticket| !executed.contains(&ticket.seq)).count() as u64
}

/// `ms` as seconds with one decimal.
fn seconds(ms: u64) -> String {
    format!("{:.1} s", ms as f64 / 1e3)
}

/// `0:20.3`: simulated ms as minutes and seconds.
pub(crate) fn clock(ms: u64) -> String {
    format!("{}:{:04.1}", ms / 60_000, (ms % 60_000) as f64 / 1e3)
}

impl Removed {
    /// The cause in words; `link.idle_timeout_ms` is the session's.
    fn cause_words(&self, idle_timeout_ms: u32) -> String {
        match self.cause {
            "timed_out" => format!(
                "timed out: the host heard nothing from it for {}",
                seconds(u64::from(idle_timeout_ms))
            ),
            "misbehaved" => "misbehaved: too many malformed or impossible datagrams".into(),
            "removed" => "removed by the host, or it left".into(),
            other => other.to_owned(),
        }
    }

    /// The report's lines about this removal: `(label, value)`.
    pub(crate) fn lines(&self, idle_timeout_ms: u32) -> Vec<(String, String)> {
        let at =
            self.removed_at_ms.map_or(String::new(), |at| format!("; removed at {}", clock(at)));
        let mut lines = vec![(
            "removed".to_owned(),
            format!(
                "player {} at turn {} ({}{at})",
                self.player,
                self.turn,
                self.cause_words(idle_timeout_ms)
            ),
        )];
        if let (Some(waited), Some(turn)) = (self.survivors_waited_ms, self.waited_for_turn) {
            lines.push((
                "the others waited".to_owned(),
                format!("{} for turn {turn} (their longest wait), then played on", seconds(waited)),
            ));
        }
        let figures = match self.measured_until_ms {
            None => "latency and stall never measured".to_owned(),
            Some(until) => format!(
                "latency {}, stall {} ms (measured up to {})",
                match (self.latency_ms_p50, self.latency_ms_p95, self.latency_ms_max) {
                    (Some(p50), Some(p95), Some(max)) => {
                        format!("p50 {p50} ms, p95 {p95} ms, max {max} ms")
                    }
                    _ => "none measured".to_owned(),
                },
                self.stall_ms.unwrap_or_default(),
                clock(until)
            ),
        };
        let commands = match self.commands_lost {
            0 => "every command it submitted was executed".to_owned(),
            lost => format!("{lost} of its commands never executed"),
        };
        let own = match (self.own_wait_ms, self.ended) {
            (Some(wait), Some(ended)) => {
                format!("; it waited {} more before its session ended ({ended})", seconds(wait))
            }
            _ => String::new(),
        };
        let hashes = if self.hashes_agree { "equal to" } else { "DIFFERENT from" };
        lines.push((
            format!("player {} (removed)", self.player),
            format!(
                "{} turns, hashes {hashes} the others' over them; {figures}; {commands}{own}",
                self.turns_executed
            ),
        ));
        lines
    }
}
