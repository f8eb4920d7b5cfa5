//! Desync forensics at L2 (real quinn under turmoil, 1 % loss, 10 ms jitter): a random
//! player's state diverges after a random turn (its reported hash changes from there); the
//! host pins that exact turn as the first divergent one, naming that player, and the game
//! goes on (warn).

use phalanx::{Event, PlayerId, Turn};
use phalanx_sim::{run_with, ChainGame, Rng, SimConfig};
use phalanx_testkit::{for_each_seed, seeded_test};

#[test]
fn the_first_divergent_turn_is_pinned_exactly() {
    for_each_seed(seeded_test!("the_first_divergent_turn_is_pinned_exactly"), 24, |seed| {
        let mut rng = Rng::new(seed);
        let player = PlayerId(rng.below(3) as u8);
        let turn = 30 + rng.below(70) as u32;
        let mut config = SimConfig::new(seed, 3);
        config.turns = 160;
        config.faults.loss_permille = 10;
        config.faults.jitter_ms = 10;
        config.desync_at = Some((player, turn));
        let report = run_with::<ChainGame>(config, 4).map_err(|e| e.to_string())?;
        let pinned: Vec<_> = report
            .events
            .iter()
            .filter_map(|(_, event)| match event {
                Event::DesyncPinned { check_turn, first_turn, players, exact } => {
                    Some((*check_turn, *first_turn, players.clone(), *exact))
                }
                _ => None,
            })
            .collect();
        let expected = (Turn(turn.div_ceil(10) * 10), Turn(turn), vec![player], true);
        if pinned != vec![expected.clone()] {
            return Err(format!(
                "{player} diverged after turn {turn}: expected {expected:?}, got {pinned:?}"
            ));
        }
        let played: Vec<usize> = report.players.iter().map(|p| p.turns_played()).collect();
        if played.iter().any(|&t| t != 160) {
            return Err(format!("the game did not go on: {played:?}"));
        }
        Ok(())
    });
}
