//! Rows 18 and 21 at L2, over real QUIC: a player whose commands claim to be another player's,
//! and a player whose game tries to submit 10×, 100× and 1000× the per-turn budget.
//!
//! At this layer a client can only reach the host through its own authenticated connection,
//! and the wire format has no player field in a client's datagram: the seat comes from the
//! connection. What is checked here is what a game sees. Floods of crafted datagrams that
//! bypass the client's own budget check are row 21 at L1 (`phalanx-mesh/tests/hostile.rs`);
//! a reused join token is refused over real sockets in `crates/phalanx/tests/loopback.rs`.

use std::collections::BTreeMap;
use std::sync::Mutex;

use phalanx::{PlayerId, Turn, TypedRecord, TypedTurn};
use phalanx_sim::{run_with, SimConfig, SimGame, SimReport};
use phalanx_testkit::{for_each_seed, seeded_test};

const TURNS: u32 = 120;
const PLAYERS: usize = 4;
/// The attacker's seat.
const ATTACKER: u8 = 3;

/// What player 0's game saw, per run (keyed by seed and factor): commands executed under each
/// seat, and commands whose payload claimed a seat other than the one they executed under.
static SEEN: Mutex<BTreeMap<(u64, u32), Seen>> = Mutex::new(BTreeMap::new());

/// Commands executed per seat, and how many claimed another seat than their own.
type Seen = ([u64; PLAYERS], u64);

/// Honest players give one order every 4 turns naming themselves; the attacker, from turn
/// 20 to 100, tries `factor` × the per-turn budget every turn, every order claiming to be
/// player 0's. The state hash chains every record's seat and claimed player.
struct Impostor {
    me: PlayerId,
    seed: u64,
    factor: u32,
    state: u64,
    seen: [u64; PLAYERS],
    claimed_wrongly: u64,
}

impl SimGame for Impostor {
    type Command = (u8, u32);
    /// The flood factor (0: the attacker behaves).
    type Setup = u32;

    fn new(me: PlayerId, seed: u64, factor: &u32) -> Self {
        Impostor { me, seed, factor: *factor, state: seed, seen: [0; PLAYERS], claimed_wrongly: 0 }
    }

    fn execute(&mut self, turn: &TypedTurn<(u8, u32)>) {
        for record in &turn.records {
            let word = match record {
                TypedRecord::Command { player, command: Ok((claimed, n)), .. } => {
                    self.seen[usize::from(player.0)] += 1;
                    if *claimed != player.0 {
                        self.claimed_wrongly += 1;
                    }
                    u64::from(player.0) << 40 | u64::from(*claimed) << 32 | u64::from(*n)
                }
                TypedRecord::Command { command: Err(_), .. } => 1,
                TypedRecord::Joined(p) => 2 << 8 | u64::from(p.0),
                TypedRecord::Left(p) => 3 << 8 | u64::from(p.0),
            };
            self.state = (self.state ^ word).wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.state = (self.state ^ u64::from(turn.turn.0)).wrapping_mul(0x0000_0100_0000_01b3);
        if self.me.0 == 0 {
            let mut seen = SEEN.lock().expect("not poisoned");
            seen.insert((self.seed, self.factor), (self.seen, self.claimed_wrongly));
        }
    }

    fn state_hash(&self) -> u64 {
        self.state
    }

    fn commands(&mut self, turn: Turn) -> Vec<(u8, u32)> {
        if self.me.0 == ATTACKER {
            if self.factor == 0 || !(20..100).contains(&turn.0) {
                return Vec::new();
            }
            // The default budget is 4 commands a turn.
            return (0..4 * self.factor).map(|n| (0, n)).collect();
        }
        if (turn.0 + u32::from(self.me.0)).is_multiple_of(4) {
            vec![(self.me.0, turn.0)]
        } else {
            Vec::new()
        }
    }
}

fn run(seed: u64, factor: u32) -> Result<SimReport, String> {
    let mut config = SimConfig::new(seed, PLAYERS);
    config.turns = TURNS;
    config.faults.loss_permille = 10;
    let report = run_with::<Impostor>(config, factor).map_err(|e| e.to_string())?;
    report.check_agreement()?;
    let turns: Vec<usize> = report.players.iter().map(|p| p.hashes.len()).collect();
    if turns.iter().any(|&t| t != TURNS as usize) {
        return Err(format!("factor {factor}: turns executed {turns:?}"));
    }
    Ok(report)
}

/// Row 18: orders claiming player 0 execute under the attacker's seat, never player 0's:
/// player 0's seat executes exactly what player 0 submitted, the attacker's exactly what the
/// attacker's session accepted. Row 21: the excess is refused at submit with a typed error
/// and queues nothing (unacknowledged commands stay within a window of budgets), and the
/// honest players finish within 5 % of the time they take without the flood.
#[test]
fn impostor_and_flood_change_nothing_for_the_others() {
    for_each_seed(seeded_test!("impostor_and_flood_change_nothing_for_the_others"), 3, |seed| {
        let baseline = run(seed, 0)?;
        let window_budget = 16 * 4;
        for factor in [1u32, 10, 100, 1_000] {
            let report = run(seed, factor)?;
            let (seen, claimed_wrongly) = SEEN
                .lock()
                .expect("not poisoned")
                .get(&(seed, factor))
                .copied()
                .ok_or("no game")?;
            let seat = |seat: u8| {
                report.player(PlayerId(seat)).ok_or_else(|| format!("nobody took seat {seat}"))
            };
            let (victim, attacker) = (seat(0)?, seat(ATTACKER)?);
            let a = usize::from(ATTACKER);
            if seen[0] != victim.submitted || seen[a] != attacker.submitted {
                return Err(format!(
                    "factor {factor}: executed per seat {seen:?}, submitted {:?}",
                    report.players.iter().map(|p| (p.player, p.submitted)).collect::<Vec<_>>()
                ));
            }
            if claimed_wrongly != attacker.submitted || claimed_wrongly == 0 {
                return Err(format!(
                    "factor {factor}: {claimed_wrongly} impostor orders executed, attacker submitted {}",
                    attacker.submitted
                ));
            }
            let tried = 80 * 4 * u64::from(factor);
            if attacker.submitted + attacker.submit_refused != tried
                || (factor > 1 && attacker.submit_refused < tried / 2)
            {
                return Err(format!(
                    "factor {factor}: tried {tried}, accepted {}, refused {}",
                    attacker.submitted, attacker.submit_refused
                ));
            }
            if attacker.unacked_high_water > window_budget {
                return Err(format!(
                    "factor {factor}: {} commands queued unacknowledged",
                    attacker.unacked_high_water
                ));
            }
            for honest in 0..ATTACKER {
                let with = seat(honest)?.finished_ms.ok_or("never finished")?;
                let without = baseline
                    .player(PlayerId(honest))
                    .and_then(|p| p.finished_ms)
                    .ok_or("never finished")?;
                if with * 100 > without * 105 {
                    return Err(format!(
                        "factor {factor}: player {honest} took {with} ms, {without} without the flood"
                    ));
                }
            }
        }
        Ok(())
    });
}
