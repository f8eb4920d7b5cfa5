//! Desync forensics, first step: a divergence injected at a random turn into a random
//! player's game is pinned to that exact turn, from the players' per-turn hashes since the
//! check turn before, over 200 cases. The game goes on as the policy says (here: warn).

mod common;

use common::Net;
use phalanx_proto::{HostEvent, PlayerId, SessionConfig, SplitMix64, Turn};

#[test]
fn a_divergence_is_pinned_to_its_exact_first_turn() {
    let mut rng = SplitMix64::new(15);
    for case in 0..200 {
        let player = rng.below(3) as u8;
        let turn = 25 + rng.below(120) as u32;
        let mut net = Net::new(SessionConfig::default(), 3, false);
        net.players[usize::from(player)].as_mut().unwrap().game.diverge_at = Some((turn, 1));
        net.run_until(u64::from(turn) * 100 + 6_000);
        let check = turn.div_ceil(10) * 10;
        let pinned: Vec<_> = net
            .events
            .iter()
            .filter_map(|event| match event {
                HostEvent::DesyncPinned { check_turn, first_turn, players, exact } => {
                    Some((*check_turn, *first_turn, players.clone(), *exact))
                }
                _ => None,
            })
            .collect();
        let expected = (Turn(check), Turn(turn), vec![PlayerId(player)], true);
        assert_eq!(
            pinned.first(),
            Some(&expected),
            "case {case}: player {player} diverged after turn {turn}; events {pinned:?}"
        );
        // Warn: the game went on.
        assert!(net.host.next_seal().0 > check + 30, "case {case}");
        assert_eq!(net.host.stats().hashes_refused, 0, "case {case}");
    }
}

#[test]
fn without_per_turn_hashes_nothing_is_pinned_and_nothing_is_sent() {
    // A game that reports only check turns: the client holds no run of turn hashes.
    let mut net = Net::new(SessionConfig::default(), 3, false);
    net.report_every_turn = false;
    net.players[1].as_mut().unwrap().game.diverge_at = Some((44, 1));
    net.run_until(15_000);
    assert!(net.desyncs() > 0);
    assert!(!net.events.iter().any(|e| matches!(e, HostEvent::DesyncPinned { .. })));
    assert!(net.uploads.is_empty());
}
