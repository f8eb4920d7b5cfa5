//! Layer L2: real quinn + tokio under turmoil, seeded. Each test states the promise it checks;
//! a failure names the seed (`PHALANX_SEED` reruns one, `PHALANX_SEEDS` sets the count).

use phalanx::{PlayerId, Turn, TypedRecord, TypedTurn};
use phalanx_sim::{run, LinkFaults, SimConfig, SimGame, Step};

/// A small deterministic game: a hash chain over every command executed, issuing a command
/// every few turns.
struct Chain {
    player: PlayerId,
    state: u64,
}

impl SimGame for Chain {
    type Command = (u8, u32);

    fn new(player: PlayerId, seed: u64) -> Self {
        Chain { player, state: seed }
    }

    fn execute(&mut self, turn: &TypedTurn<(u8, u32)>) {
        for record in &turn.records {
            let word = match record {
                TypedRecord::Command { player, command: Ok((p, n)), .. } => {
                    u64::from(player.0) << 40 | u64::from(*p) << 32 | u64::from(*n)
                }
                TypedRecord::Command { command: Err(_), .. } => 1,
                TypedRecord::Joined(p) => 2 << 8 | u64::from(p.0),
                TypedRecord::Left(p) => 3 << 8 | u64::from(p.0),
            };
            self.state = (self.state ^ word).wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.state = (self.state ^ u64::from(turn.turn.0)).wrapping_mul(0x0000_0100_0000_01b3);
    }

    fn state_hash(&self) -> u64 {
        self.state
    }

    fn commands(&mut self, turn: Turn) -> Vec<(u8, u32)> {
        if (turn.0 + u32::from(self.player.0)).is_multiple_of(4) {
            vec![(self.player.0, turn.0)]
        } else {
            Vec::new()
        }
    }
}

fn seeds(name: &str, default: u64) -> Vec<u64> {
    if let Some(seed) = std::env::var("PHALANX_SEED").ok().and_then(|v| v.parse().ok()) {
        return vec![seed];
    }
    let count = std::env::var("PHALANX_SEEDS").ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let base = name.bytes().fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    (0..count).map(|i| (base % 1_000_000) * 1_000 + i).collect()
}

fn for_each_seed(name: &str, count: u64, check: impl Fn(u64) -> Result<(), String>) {
    for seed in seeds(name, count) {
        if let Err(failure) = check(seed) {
            panic!(
                "{name} failed for seed {seed}: {failure}\n\
                 rerun: PHALANX_SEED={seed} cargo test -p phalanx-sim --test sim -- {name} --exact"
            );
        }
    }
}

/// A clean network: every player executes the same 100 turns with the same states, and every
/// command submitted is executed by everyone.
#[test]
fn clean_network_agrees() {
    for_each_seed("clean_network_agrees", 3, |seed| {
        let report = run::<Chain>(SimConfig::new(seed, 4)).map_err(|e| e.to_string())?;
        report.check_agreement()?;
        let turns: Vec<usize> = report.hashes.iter().map(Vec::len).collect();
        if turns.iter().any(|&t| t != 100) {
            return Err(format!("turns executed {turns:?}"));
        }
        let submitted: u64 = report.submitted.iter().sum();
        if report.executed.iter().any(|&e| e < submitted.saturating_sub(8)) || submitted < 80 {
            return Err(format!("submitted {submitted}, executed {:?}", report.executed));
        }
        Ok(())
    });
}

/// Determinism: the same seed twice gives the same trace digest and states; another seed gives
/// another trace.
#[test]
fn same_seed_same_trace() {
    for_each_seed("same_seed_same_trace", 2, |seed| {
        let mut config = SimConfig::new(seed, 3);
        config.faults = LinkFaults::default();
        config.faults.loss_permille = 30;
        config.faults.jitter_ms = 15;
        config.turns = 60;
        let a = run::<Chain>(config.clone()).map_err(|e| e.to_string())?;
        let b = run::<Chain>(config.clone()).map_err(|e| e.to_string())?;
        config.seed += 1;
        let c = run::<Chain>(config).map_err(|e| e.to_string())?;
        if a.trace_digest != b.trace_digest || a.hashes != b.hashes {
            return Err(format!(
                "same seed, different runs: {:#x} vs {:#x}",
                a.trace_digest, b.trace_digest
            ));
        }
        if a.trace_digest == c.trace_digest {
            return Err("different seeds, same trace".into());
        }
        a.check_agreement()
    });
}

/// Row 1 at L2: 5 % loss each way on every link — agreement holds and every player finishes.
#[test]
fn loss_five_percent_agrees() {
    for_each_seed("loss_five_percent_agrees", 3, |seed| {
        let mut config = SimConfig::new(seed, 4);
        config.faults.loss_permille = 50;
        config.latency_ms = 50;
        let report = run::<Chain>(config).map_err(|e| e.to_string())?;
        report.check_agreement()?;
        let turns: Vec<usize> = report.hashes.iter().map(Vec::len).collect();
        if turns.iter().any(|&t| t != 100) {
            return Err(format!("turns executed {turns:?}"));
        }
        Ok(())
    });
}

/// Row 7 at L2: a player cut off longer than the idle timeout is removed; the others play on
/// and agree; the cut-off player's session ends with a typed outcome.
#[test]
fn long_partition_removes_the_player() {
    for_each_seed("long_partition_removes_the_player", 2, |seed| {
        let mut config = SimConfig::new(seed, 3);
        config.turns = 120;
        config.timeline = vec![
            Step::Partition { at_ms: 3_000, player: 1 },
            Step::Repair { at_ms: 9_000, player: 1 },
        ];
        let report = run::<Chain>(config).map_err(|e| e.to_string())?;
        report.check_agreement()?;
        if report.hashes[0].len() != 120 || report.hashes[2].len() != 120 {
            return Err(format!(
                "the others did not finish: {:?}",
                report.hashes.iter().map(Vec::len).collect::<Vec<_>>()
            ));
        }
        if report.ended[1].is_none() {
            return Err("the cut-off player has no end reason".into());
        }
        if !report.host_events.iter().any(|(_, e)| e.contains("PlayerTimedOut")) {
            return Err(format!("no timeout event: {:?}", report.host_events));
        }
        Ok(())
    });
}
