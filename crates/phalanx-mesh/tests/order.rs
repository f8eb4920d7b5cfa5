//! Who comes first within a turn (L1). Eight clients on links of random latency (10–150 ms one
//! way, 20 ms of jitter) order often enough that most turns hold orders from several players;
//! each such turn is a contest for one thing, won by the player whose order the turn holds
//! first. With `CommandOrder::Shuffled`, over at least 10,000 contests no seat wins more or
//! less than its fair share (a contest of k players owes each of them 1/k) by more than 2
//! points of all contests; with `CommandOrder::BySeat`, seat 0 wins every contest it is in, far
//! past its share — the measurement tells the two apart. The same holds peer to peer, where
//! the shuffle's key mixes the peers' shared salt with a digest of the turn's commands. Seeds:
//! `PHALANX_SEEDS=N` (default 1; each seed plays about 16,000 turns), `PHALANX_SEED=S` for one.

#![allow(clippy::print_stderr)] // each seed's figures

use std::collections::BTreeMap;

use phalanx_mesh::peers::{PeerNet, PeerNetConfig};
use phalanx_mesh::{ensure, for_each_seed, seeded_test, LinkFaults, Mesh, MeshConfig, Rng};
use phalanx_proto::{CommandOrder, PlayerId, Turn};

const CONTESTS_MIN: u64 = 10_000;

/// Per seat: contests won, and its fair share of them; and the number of contests.
fn contests(seed: u64, order: CommandOrder) -> Result<(Vec<(f64, f64)>, u64), String> {
    let mut random = Rng::new(seed);
    let mut config = MeshConfig::new(seed, 8);
    config.links = (0..8)
        .map(|_| {
            let link = LinkFaults {
                latency_ms: 10 + random.below(141),
                jitter_ms: 20,
                ..LinkFaults::default()
            };
            (link, link)
        })
        .collect();
    config.session.turns.length_ms = 20;
    config.session.turns.order = order;
    config.command_interval_ms = (20, 60);
    config.submit_until_ms = 600_000;
    config.heal_at_ms = 600_000;
    config.end_ms = 605_000;
    config.steps_max = 200_000_000;
    let mut mesh = Mesh::new(config).map_err(|e| format!("{e:?}"))?;
    mesh.run().map_err(|e| format!("{e:?}"))?;
    mesh.check_agreement()?;
    Ok(tally(mesh.games[0].executed.iter().map(|&(player, _, turn)| (player, turn))))
}

/// The same peer to peer: eight peers, 30 ms one way with 20 ms of jitter, 20 ms turns, each
/// peer ordering as one turn in three executes, for 300 s.
fn mesh_contests(seed: u64, order: CommandOrder) -> Result<(Vec<(f64, f64)>, u64), String> {
    let mut config = PeerNetConfig::new(seed, 8);
    config.faults = LinkFaults { latency_ms: 30, jitter_ms: 20, ..LinkFaults::default() };
    config.session.turns.length_ms = 20;
    config.session.turns.order = order;
    config.order_permille = 333;
    config.end_ms = 300_000;
    config.steps_max = 400_000_000;
    let mut net = PeerNet::new(config).map_err(|e| e.to_string())?;
    net.run().map_err(|e| e.to_string())?;
    net.check_agreement()?;
    Ok(tally(net.games[0].executed.iter().map(|&(player, _, turn)| (player, turn))))
}

/// Per seat: contests won and its fair share, from the commands one game executed in order;
/// and the number of contests (turns holding orders of two players or more).
fn tally(executed: impl Iterator<Item = (PlayerId, Turn)>) -> (Vec<(f64, f64)>, u64) {
    let mut turns: BTreeMap<u32, Vec<u8>> = BTreeMap::new();
    for (player, turn) in executed {
        let players = turns.entry(turn.0).or_default();
        if !players.contains(&player.0) {
            players.push(player.0);
        }
    }
    let mut seats = vec![(0.0, 0.0); 8];
    let mut total = 0;
    for players in turns.values().filter(|players| players.len() >= 2) {
        total += 1;
        seats[usize::from(players[0])].0 += 1.0;
        for &player in players {
            seats[usize::from(player)].1 += 1.0 / players.len() as f64;
        }
    }
    (seats, total)
}

/// Every seat within 2 points of its fair share of `total` contests; prints the figures.
fn fair_shares(seed: u64, seats: &[(f64, f64)], total: u64) -> Result<(), String> {
    ensure(total >= CONTESTS_MIN, || format!("only {total} contests"))?;
    for (seat, (won, share)) in seats.iter().enumerate() {
        let off = (won - share) / total as f64 * 100.0;
        ensure(off.abs() <= 2.0, || {
            format!("seat {seat} won {won} of {total}, fair {share:.0} ({off:+.2} points)")
        })?;
    }
    let (won, share) = seats[0];
    eprintln!(
        "seed {seed}: {total} contests; seat 0 won {won}, fair share {share:.0}; worst seat \
             {:+.2} points",
        seats
            .iter()
            .map(|(won, share)| (won - share) / total as f64 * 100.0)
            .fold(0.0f64, |worst, off| if off.abs() > worst.abs() { off } else { worst })
    );
    Ok(())
}

#[test]
fn shuffled_seats_win_contested_orders_in_fair_shares() {
    for_each_seed(seeded_test!("contested orders"), 1, |seed| {
        let (seats, total) = contests(seed, CommandOrder::Shuffled { salt: seed })?;
        fair_shares(seed, &seats, total)
    });
}

#[test]
fn by_seat_gives_seat_zero_every_contest_it_is_in() {
    let (seats, total) = contests(1, CommandOrder::BySeat).expect("the match ran");
    seat_zero_first(&seats, total);
}

/// Peer to peer, shuffled with a salt every peer knows (0 here): fair shares all the same.
#[test]
fn shuffled_peers_win_contested_orders_in_fair_shares() {
    for_each_seed(seeded_test!("contested orders, mesh"), 1, |seed| {
        let (seats, total) = mesh_contests(seed, CommandOrder::Shuffled { salt: 0 })?;
        fair_shares(seed, &seats, total)
    });
}

#[test]
fn peers_by_seat_give_seat_zero_every_contest_it_is_in() {
    let (seats, total) = mesh_contests(1, CommandOrder::BySeat).expect("the match ran");
    seat_zero_first(&seats, total);
}

/// Seat 0 won far more than its share: the measurement tells `BySeat` apart.
fn seat_zero_first(seats: &[(f64, f64)], total: u64) {
    let (won, share) = seats[0];
    let off = (won - share) / total as f64 * 100.0;
    assert!(off > 10.0, "seat 0 won {won} of {total}, fair {share:.0}: the test would not tell");
}
