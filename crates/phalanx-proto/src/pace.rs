//! Speed control, the Age of Empires way: the host picks the pace — turn length and command
//! delay — from what the network and the slowest machine need, raises it fast, lowers it
//! slowly and in small steps, and announces every change as a control record so every peer
//! switches on the same turn.
//!
//! The rule. A client executing turn `t` stamps commands for `t + d`. A command submitted `u`
//! ms into that turn reaches the host `RTT + u` after the host sealed `t`; if that is before
//! the host seals `t + d` it executes there (latency `d·L − u`), otherwise the host puts it
//! in the next turn it seals (latency `⌈(RTT + u)/L⌉·L − u`, never lost). So the latency is
//! `max(d·L, ⌈(RTT + u)/L⌉·L) − u`: the network alone sets a floor between `RTT` and
//! `RTT + L`, and a delay above `1 + ⌊RTT/L⌋` only adds to it. The host therefore stamps at
//! `d = 1 + ⌊need/L⌋` with `need` the worst client's smoothed RTT (plus `turns.pace_margin_ms`):
//! latency stays within `RTT + L` and as steady as the turn grid allows, and few commands
//! miss their stamped turn. For a given need the latency is smallest with the shortest turn,
//! so `L` stays at its floor (`turns.length_ms`), raised only when a machine reports that a
//! turn takes longer to simulate, or when `d` would exceed `turns.command_delay_turns_max`.

use crate::config::SessionConfig;

/// The pace in force: how long a turn lasts and how far ahead commands are stamped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pace {
    /// Turn length.
    pub turn_length_ms: u32,
    /// Command delay in turns.
    pub command_delay_turns: u32,
}

/// The host's pace controller.
#[derive(Clone, Debug)]
pub(crate) struct PaceControl {
    pub(crate) current: Pace,
    /// Consecutive turns a lower pace has been wanted.
    lower_for_turns: u32,
    floor_ms: u32,
    ceiling_ms: u32,
    delay_max: u32,
    margin_ms: u32,
    tolerance_ms: u32,
    settle_turns: u32,
    adaptive: bool,
}

impl PaceControl {
    pub(crate) fn new(config: &SessionConfig) -> Self {
        PaceControl {
            current: Pace {
                turn_length_ms: config.turns.length_ms,
                command_delay_turns: config.turns.command_delay_turns,
            },
            lower_for_turns: 0,
            floor_ms: config.turns.length_ms,
            ceiling_ms: config.turns.length_ms_max,
            delay_max: config.turns.command_delay_turns_max,
            margin_ms: config.turns.pace_margin_ms,
            tolerance_ms: config.turns.pace_tolerance_ms,
            settle_turns: config.turns.pace_settle_turns,
            adaptive: config.turns.adaptive_pace,
        }
    }

    /// The pace the measurements call for: `need_ms` is the worst smoothed round trip,
    /// `cost_ms` the slowest reported time to simulate a turn.
    pub(crate) fn target(&self, need_ms: u64, cost_ms: u32) -> Pace {
        let need = need_ms + u64::from(self.margin_ms);
        // A machine must simulate a turn well within the turn.
        let cpu_floor = u64::from(cost_ms) * 5 / 4;
        let mut length = u64::from(self.floor_ms).max(cpu_floor).min(u64::from(self.ceiling_ms));
        let mut delay = 1 + need / length.max(1);
        if delay > u64::from(self.delay_max) {
            delay = u64::from(self.delay_max);
            let needed_length = need.div_ceil(delay.saturating_sub(1).max(1));
            length = length.max(needed_length).min(u64::from(self.ceiling_ms));
        }
        Pace { turn_length_ms: length as u32, command_delay_turns: delay.max(1) as u32 }
    }

    /// Called once per sealed turn with the current measurements; returns the new pace when
    /// it changes. Rises at once — when the need exceeds what the pace covers by more than
    /// `turns.pace_tolerance_ms` — by one delay step or a quarter of the turn length per turn;
    /// falls only after the lower target held for `settle_turns`, by one step.
    pub(crate) fn on_turn(&mut self, need_ms: u64, cost_ms: u32) -> Option<Pace> {
        if !self.adaptive {
            return None;
        }
        let target = self.target(need_ms, cost_ms);
        let tolerated = self.target(need_ms.saturating_sub(self.tolerance_ms.into()), cost_ms);
        let current = self.current;
        let mut next = current;
        let raise_delay = tolerated.command_delay_turns > current.command_delay_turns;
        let raise_length = tolerated.turn_length_ms > current.turn_length_ms;
        if raise_delay || raise_length {
            self.lower_for_turns = 0;
            if raise_delay {
                next.command_delay_turns += 1;
            }
            if raise_length {
                let step = (current.turn_length_ms / 4).max(1);
                next.turn_length_ms = (current.turn_length_ms + step).min(tolerated.turn_length_ms);
            }
        } else if target.command_delay_turns < current.command_delay_turns
            || target.turn_length_ms < current.turn_length_ms
        {
            self.lower_for_turns += 1;
            if self.lower_for_turns >= self.settle_turns {
                self.lower_for_turns = 0;
                if target.command_delay_turns < current.command_delay_turns {
                    next.command_delay_turns -= 1;
                } else {
                    let step = (current.turn_length_ms / 10).max(1);
                    next.turn_length_ms =
                        current.turn_length_ms.saturating_sub(step).max(target.turn_length_ms);
                }
            }
        } else {
            self.lower_for_turns = 0;
        }
        (next != current).then(|| {
            self.current = next;
            next
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn control() -> PaceControl {
        PaceControl::new(&SessionConfig::default())
    }

    #[test]
    fn target_covers_the_round_trip_with_the_shortest_turn() {
        let control = control();
        let floor = SessionConfig::default().turns.length_ms;
        let margin = u64::from(SessionConfig::default().turns.pace_margin_ms);
        for need in [0u64, 10, 50, 99, 100, 150, 300, 600] {
            let pace = control.target(need, 0);
            let (delay, length) =
                (u64::from(pace.command_delay_turns), u64::from(pace.turn_length_ms));
            // The largest delay that adds nothing to the network's own floor.
            assert!((delay - 1) * length <= need + margin, "need {need}: {pace:?}");
            assert!(delay * length > need + margin, "need {need}: {pace:?}");
            assert_eq!(pace.turn_length_ms, floor, "need {need}: the turn stays at its floor");
        }
    }

    #[test]
    fn the_turn_grows_when_the_delay_is_capped_or_the_cpu_is_slow() {
        let control = control();
        let config = SessionConfig::default();
        let pace = control.target(20_000, 0);
        assert_eq!(pace.command_delay_turns, config.turns.command_delay_turns_max);
        assert!(pace.turn_length_ms > config.turns.length_ms);
        let slow = control.target(0, 400);
        assert_eq!(slow.turn_length_ms, 500);
    }

    #[test]
    fn a_tolerance_lets_the_need_brush_the_limit() {
        let mut config = SessionConfig::default();
        config.turns.pace_tolerance_ms = 20;
        let mut control = PaceControl::new(&config);
        // 2 turns of 100 ms cover a need below 200 ms; 215 is within the tolerance.
        for _ in 0..100 {
            assert_eq!(control.on_turn(215, 0), None);
        }
        // Past it: one step up at once.
        let raised = control.on_turn(221, 0).expect("raised");
        assert_eq!(raised.command_delay_turns, 3);
        // Back within the tolerance (above 200): no lowering, however long.
        for _ in 0..100 {
            assert_eq!(control.on_turn(210, 0), None);
        }
        // Below 200 for the settling time: one step down.
        let settle = config.turns.pace_settle_turns;
        for _ in 0..settle - 1 {
            assert_eq!(control.on_turn(150, 0), None);
        }
        assert_eq!(control.on_turn(150, 0).map(|p| p.command_delay_turns), Some(2));
    }

    #[test]
    fn rises_fast_and_settles_slowly_in_single_steps() {
        let mut control = control();
        let start = control.current;
        // The network worsens: one step per turn until the target is met.
        let mut changes = 0;
        while control.on_turn(400, 0).is_some() {
            changes += 1;
            assert!(changes < 20);
        }
        let high = control.current;
        assert!(high.command_delay_turns > start.command_delay_turns);
        assert_eq!(changes, high.command_delay_turns - start.command_delay_turns);
        // It improves: nothing for settle_turns − 1 turns, then one step down.
        let settle = SessionConfig::default().turns.pace_settle_turns;
        for _ in 0..settle - 1 {
            assert_eq!(control.on_turn(20, 0), None);
        }
        let lower = control.on_turn(20, 0).expect("one step after settling");
        assert_eq!(lower.command_delay_turns, high.command_delay_turns - 1);
        // A blip back up resets the settling.
        assert_eq!(
            control.on_turn(400, 0).map(|p| p.command_delay_turns),
            Some(high.command_delay_turns)
        );
    }
}
