//! Layer L2 with a phalanx-relay as the host: the scenario's match shares the relay with other
//! matches played by bots, as on a deployed relay, under loss, jitter and a partition. The
//! scenario's players agree, the partitioned one heals, and every bot of every other match joins,
//! plays its match to the end and finishes. (`PHALANX_HOST=relay` runs the whole fault matrix
//! this way.)

use phalanx::PlayerId;
use phalanx_sim::{run_with, ChainGame, LinkFaults, SimConfig, Step};
use phalanx_testkit::{for_each_seed, seeded_test};

#[test]
fn a_match_on_a_busy_relay_plays_through_loss_and_a_partition() {
    for_each_seed(
        seeded_test!("a_match_on_a_busy_relay_plays_through_loss_and_a_partition"),
        12,
        |seed| {
            let mut config = SimConfig::new(seed, 4);
            config.transport = phalanx::Transport::Udp;
            config.relay_matches = Some(4);
            config.faults = LinkFaults::default();
            config.faults.loss_permille = 20;
            config.faults.jitter_ms = 10;
            config.timeline = vec![
                Step::Partition { at_ms: 4_000, player: PlayerId(1) },
                Step::Repair { at_ms: 5_500, player: PlayerId(1) },
            ];
            let report = run_with::<ChainGame>(config, 4).map_err(|e| e.to_string())?;
            report.check_agreement()?;
            let turns: Vec<usize> = report.players.iter().map(|p| p.hashes.len()).collect();
            if turns.iter().any(|&t| t != 100) {
                return Err(format!("the scenario's players executed {turns:?} turns"));
            }
            if report.crowd.len() != 32 {
                return Err(format!("{} crowd bots reported", report.crowd.len()));
            }
            let unfinished: Vec<usize> = (0..report.crowd.len())
                .filter(|&i| {
                    let bot = report.crowd[i];
                    !(bot.joined && bot.finished && bot.turns >= 100)
                })
                .collect();
            if !unfinished.is_empty() {
                let bots: Vec<_> = unfinished.iter().map(|&i| report.crowd[i]).collect();
                return Err(format!("crowd bots {unfinished:?} did not play to the end: {bots:?}"));
            }
            Ok(())
        },
    );
}
