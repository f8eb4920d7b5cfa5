//! `--speculate`: how soon each player's own orders showed, what the re-simulation cost per
//! frame, and how often a confirmed turn rolled the predicted state back — each the worst
//! player's (phalanx-sim's `SpeculationReport`).

use phalanx_sim::SimReport;
use serde::Serialize;

use super::fair::percentile;

/// The `--json` field `speculation` (null without `--speculate`).
#[derive(Debug, Default, Serialize)]
pub(crate) struct Speculated {
    /// 95th percentile, ms, from an order to the rendered frame (60 Hz) that shows it in the
    /// predicted state.
    pub(crate) visible_ms_p95: f64,
    /// Median speculation work per frame, ms: the confirmed turn executed again on the
    /// confirmed state and saved, the predicted turns executed again.
    pub(crate) frame_ms_p50: f64,
    /// 99th percentile of the same.
    pub(crate) frame_ms_p99: f64,
    /// Confirmed turns that differed from the prediction (the predicted state was wrong and
    /// rolled back), per minute of play.
    pub(crate) rollbacks_per_minute: f64,
    /// Predicted turns thrown away and executed again, per minute of play.
    pub(crate) resimulated_turns_per_minute: f64,
    /// How long the rendered (predicted) state stood behind the schedule, ms: 60 Hz frames,
    /// drawn while a confirmed turn was late, that showed an earlier turn than the one due.
    pub(crate) rendered_stall_ms: u64,
}

impl Speculated {
    /// The figures of a run, over `minutes` of play; `None` when nobody speculated.
    pub(crate) fn measure(report: &SimReport, minutes: f64) -> Option<Speculated> {
        let mut worst: Option<Speculated> = None;
        for player in &report.players {
            let Some(speculation) = &player.speculation else { continue };
            let ms = |us: Option<u32>| f64::from(us.unwrap_or(0)) / 1e3;
            let mut visible = speculation.visible_us.clone();
            let mut frames = speculation.frame_us.clone();
            let per_minute = |count: u64| count as f64 / minutes.max(1e-9);
            let this = Speculated {
                visible_ms_p95: ms(percentile(&mut visible, 95)),
                frame_ms_p50: ms(percentile(&mut frames, 50)),
                frame_ms_p99: ms(percentile(&mut frames, 99)),
                rollbacks_per_minute: per_minute(speculation.stats.mispredictions),
                resimulated_turns_per_minute: per_minute(speculation.stats.resimulated_turns),
                rendered_stall_ms: speculation.rendered_stall_us / 1_000,
            };
            let worst = worst.get_or_insert_with(Speculated::default);
            worst.visible_ms_p95 = worst.visible_ms_p95.max(this.visible_ms_p95);
            worst.frame_ms_p50 = worst.frame_ms_p50.max(this.frame_ms_p50);
            worst.frame_ms_p99 = worst.frame_ms_p99.max(this.frame_ms_p99);
            worst.rollbacks_per_minute = worst.rollbacks_per_minute.max(this.rollbacks_per_minute);
            worst.resimulated_turns_per_minute =
                worst.resimulated_turns_per_minute.max(this.resimulated_turns_per_minute);
            worst.rendered_stall_ms = worst.rendered_stall_ms.max(this.rendered_stall_ms);
        }
        worst
    }

    /// The summary's lines.
    pub(crate) fn words(&self) -> [(String, String); 3] {
        [
            (
                "own orders shown".to_owned(),
                format!("p95 {:.1} ms after the order (60 Hz frames, worst player)", self.visible_ms_p95),
            ),
            (
                "speculation cost".to_owned(),
                format!(
                    "re-simulation p50 {:.2} ms, p99 {:.2} ms a frame; {:.1} rollbacks, {:.0} turns re-run a minute (worst player)",
                    self.frame_ms_p50,
                    self.frame_ms_p99,
                    self.rollbacks_per_minute,
                    self.resimulated_turns_per_minute
                ),
            ),
            (
                "rendered stall".to_owned(),
                format!(
                    "{:.2} s behind the schedule in all (60 Hz frames, worst player)",
                    self.rendered_stall_ms as f64 / 1e3
                ),
            ),
        ]
    }
}
