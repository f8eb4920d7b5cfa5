//! Fair play against a listen server and against cheating clients, on virtual time.
//!
//! - A listen host's own player in `Fairness::Fair` waits as long as its clients (p95 within
//!   10 %); in `Fairness::Fast` it waits about a turn.
//! - A lag-switching client (its datagrams held 0.5–2 s, then released) and a client whose
//!   clock runs fast gain no turn, see no order before committing their own, and hold the
//!   others up no longer than the hold itself.
//! - The game's command rule (`Host::set_command_rule`): refused commands are counted, never
//!   sealed, never desync anyone, and their sender is told of each once; a client whose
//!   commands are all refused is removed.
#![allow(clippy::print_stderr)]

use std::collections::BTreeSet;

use phalanx_mesh::{
    ensure, for_each_seed, seeded_test, Direction, LinkFaults, Mesh, MeshConfig, Rng,
};
use phalanx_proto::{ClientEvent, CommandSeq, Fairness, HostEvent, PlayerId, SubmitError};

const SEEDS: u64 = 24;

/// The 95th percentile of `latencies` (ms; nearest rank, the crate's `percentile`).
fn p95(mut latencies: Vec<u64>) -> Result<u64, String> {
    latencies.sort_unstable();
    phalanx_mesh::peers::percentile(&latencies, 95).ok_or_else(|| "no latency measured".into())
}

/// A listen server and seven clients at 150 ms one way (140 ms ± 20 ms of jitter, wake-ups up
/// to 2 ms late), every player giving an order every 0.4–0.8 s for a minute: the host
/// player's and the clients' p95 submit → execute latency.
fn listen_server(seed: u64, fairness: Fairness) -> Result<(u64, u64), String> {
    let faults = LinkFaults { latency_ms: 140, jitter_ms: 20, ..LinkFaults::default() };
    let mut config = MeshConfig::new(seed, 7).with_faults(faults);
    config.host_plays = true;
    config.wake_lateness_ms = 2;
    config.command_interval_ms = (400, 800);
    config.submit_until_ms = 55_000;
    config.heal_at_ms = 55_000;
    config.end_ms = 60_000;
    config.session.turns.fairness = fairness;
    let mesh = Mesh::run_checked(config)?;
    let host = mesh.host_game().ok_or("the host plays")?;
    let host_p95 = p95(host.latencies_ms.iter().map(|&(_, ms)| ms).collect())?;
    let clients = mesh
        .games
        .iter()
        .filter(|game| game.player != host.player)
        .flat_map(|game| game.latencies_ms.iter().map(|&(_, ms)| ms));
    let clients_p95 = p95(clients.collect())?;
    eprintln!("seed {seed}, {fairness:?}: host p95 {host_p95} ms, clients p95 {clients_p95} ms");
    Ok((host_p95, clients_p95))
}

/// `Fair`: the host player's p95 within 10 % of the clients' on every seed.
#[test]
fn a_fair_listen_host_waits_as_its_clients_do() {
    for_each_seed(seeded_test!("fair_listen_host"), SEEDS, |seed| {
        let (host, clients) = listen_server(seed, Fairness::Fair)?;
        ensure(host.abs_diff(clients) * 10 <= clients, || {
            format!("Fair: host p95 {host} ms, clients' {clients} ms: more than 10 % apart")
        })
    });
}

/// `Fast` (the default): the host player's commands go into the next sealed turn, p95 under
/// half the clients'.
#[test]
fn a_fast_listen_host_is_served_first() {
    for_each_seed(seeded_test!("fast_listen_host"), SEEDS, |seed| {
        let (host, clients) = listen_server(seed, Fairness::Fast)?;
        ensure(host * 2 < clients, || {
            format!("Fast: host p95 {host} ms is not under half the clients' {clients} ms")
        })
    });
}

/// The test's rule for clients' commands, by the `(player, seq)` a payload names: player 1
/// has every fifth command refused, and `outlaw` every one.
fn admitted(payload: &[u8], outlaw: Option<PlayerId>) -> bool {
    let (Some(&player), Some(seq)) = (payload.first(), payload.get(1..5)) else {
        return false;
    };
    let seq = u32::from_le_bytes(seq.try_into().expect("four bytes"));
    match PlayerId(player) {
        player if Some(player) == outlaw => false,
        PlayerId(1) => seq % 5 != 3,
        _ => true,
    }
}

/// Four clients and a playing host on a lossy, jittery network; the host's rule refuses some
/// of player 1's commands, every seventh submit of its own player and, with `outlaw`, every
/// command of that client.
fn ruled_mesh(seed: u64, outlaw: Option<PlayerId>) -> Result<Mesh, String> {
    let faults =
        LinkFaults { latency_ms: 40, jitter_ms: 20, loss_permille: 50, ..LinkFaults::default() };
    let mut config = MeshConfig::new(seed, 4).with_faults(faults);
    config.host_plays = true;
    config.command_interval_ms = (200, 600);
    config.wake_lateness_ms = 2;
    config.cut(2, 8_000, 9_500, Direction::Both);
    let mut mesh = Mesh::new(config).map_err(|error| error.to_string())?;
    let host_player = mesh.host_game().ok_or("the host plays")?.player;
    let mut own_submits = 0u64;
    mesh.host.set_command_rule(move |player, payload| {
        if player == host_player {
            own_submits += 1;
            return !own_submits.is_multiple_of(7);
        }
        admitted(payload, outlaw)
    });
    mesh.run().map_err(|error| error.to_string())?;
    mesh.check_agreement()?;
    mesh.check_no_false_drops()?;
    Ok(mesh)
}

/// Every game still playing executed exactly the admitted commands of every player still in,
/// each once, and none of the refused ones (the host's own player has tickets for admitted
/// ones only); returns how many of the clients' were refused.
fn only_admitted_executed(mesh: &Mesh, outlaw: Option<PlayerId>) -> Result<u64, String> {
    let host_player = mesh.host_game().ok_or("the host plays")?.player;
    let mut refused = 0;
    for game in mesh.games.iter().filter(|game| game.ended.is_none()) {
        let executed: BTreeSet<(PlayerId, CommandSeq)> =
            game.executed.iter().map(|&(player, seq, _)| (player, seq)).collect();
        ensure(executed.len() == game.executed.len(), || {
            format!("{:?} ran one twice", game.player)
        })?;
        refused = 0;
        for submitter in mesh.games.iter().filter(|submitter| !mesh.left(submitter.player)) {
            for &seq in submitter.submitted.keys() {
                let payload = phalanx_mesh::encode_payload(submitter.player, seq, 12);
                let admitted = submitter.player == host_player || admitted(&payload, outlaw);
                refused += u64::from(!admitted);
                let ran = executed.contains(&(submitter.player, seq));
                ensure(ran == admitted, || {
                    format!(
                        "{:?} {} seq {}: admitted {admitted}, executed {ran}",
                        game.player, submitter.player, seq.0
                    )
                })?;
            }
        }
    }
    Ok(refused)
}

/// Refused commands are counted, never sealed, and never desync anyone: every game agrees
/// turn by turn and executes exactly the admitted commands; the host's own refused submits
/// are `SubmitError::Refused`.
#[test]
fn refused_commands_are_counted_never_sealed() {
    for_each_seed(seeded_test!("command_rule"), SEEDS, |seed| {
        let mesh = ruled_mesh(seed, None)?;
        let refused_clients = only_admitted_executed(&mesh, None)?;
        let host = mesh.host_game().ok_or("the host plays")?;
        let own_refusals = host.refused.iter().filter(|&&error| error == SubmitError::Refused);
        let own_refusals = own_refusals.count() as u64;
        let counted = mesh.host.stats().commands_refused;
        let player_1 = mesh.host.peer_stats(PlayerId(1)).ok_or("player 1 is seated")?;
        eprintln!(
            "seed {seed}: {refused_clients} client commands refused ({} of player 1), \
             {own_refusals} of the host's own; host counted {counted}",
            player_1.drops.refused
        );
        ensure(refused_clients > 0 && own_refusals > 0, || "the rule refused nothing".into())?;
        let own_admitted = host.submitted.len() as u64;
        ensure(own_refusals * 6 <= own_admitted && own_admitted <= own_refusals * 6 + 6, || {
            format!("the host's player: {own_admitted} admitted, {own_refusals} refused")
        })?;
        let events = mesh.host_events.iter().filter(|(_, event)| {
            matches!(event, HostEvent::CommandRefused { player: PlayerId(1), .. })
        });
        let events = events.count() as u64;
        ensure(events == refused_clients, || {
            format!("{events} CommandRefused events for {refused_clients} refusals")
        })?;
        ensure(player_1.drops.refused == refused_clients, || {
            format!("player 1's refusals counted {}, not {refused_clients}", player_1.drops.refused)
        })?;
        the_refused_client_is_told(&mesh)?;
        ensure(counted == refused_clients + own_refusals, || {
            format!("host counted {counted}, not {refused_clients} + {own_refusals}")
        })?;
        ensure(
            !mesh
                .host_events
                .iter()
                .any(|(_, event)| matches!(event, HostEvent::PlayerMisbehaved(_))),
            || "a player was removed for fewer refusals than the limit".into(),
        )
    });
}

/// Player 1's session told its game of exactly its refused commands, each once and nobody
/// else's, through the loss (the host repeats its notice until a datagram that carried it is
/// acknowledged); the other clients were told of nothing.
fn the_refused_client_is_told(mesh: &Mesh) -> Result<(), String> {
    let player_1 = mesh.games.iter().find(|game| game.player == PlayerId(1)).ok_or("player 1")?;
    let refused: Vec<CommandSeq> = player_1
        .submitted
        .keys()
        .copied()
        .filter(|&seq| !admitted(&phalanx_mesh::encode_payload(PlayerId(1), seq, 12), None))
        .collect();
    let mut told = Vec::new();
    for (_, index, event) in &mesh.client_events {
        if let ClientEvent::CommandRefused { player, seq } = event {
            let game = &mesh.games[*index];
            ensure(game.player == PlayerId(1) && *player == PlayerId(1), || {
                format!("{:?} told of {player:?}'s command {}", game.player, seq.0)
            })?;
            told.push(*seq);
        }
    }
    ensure(told == refused, || format!("player 1 told of {told:?}, refused {refused:?}"))?;
    let counted = mesh.clients.iter().map(|client| client.stats().commands_refused).sum::<u64>();
    ensure(counted == refused.len() as u64, || format!("clients counted {counted}"))
}

/// A client whose every command is refused is removed as misbehaving once past
/// `link.misbehaviour_max`; the others play on, agree, and never execute its commands.
#[test]
fn a_client_refused_again_and_again_is_removed() {
    for_each_seed(seeded_test!("command_rule_outlaw"), SEEDS, |seed| {
        let outlaw = PlayerId(3);
        let mesh = ruled_mesh(seed, Some(outlaw))?;
        let removed = mesh
            .host_events
            .iter()
            .find_map(|(at, event)| (*event == HostEvent::PlayerMisbehaved(outlaw)).then_some(*at));
        let removed = removed.ok_or("the outlaw was never removed")?;
        ensure(mesh.left(outlaw), || "no game saw the outlaw leave".into())?;
        let executed_by_outlaw =
            mesh.games.iter().flat_map(|game| &game.executed).filter(|&&(p, _, _)| p == outlaw);
        ensure(executed_by_outlaw.count() == 0, || "a game executed the outlaw's command".into())?;
        only_admitted_executed(&mesh, Some(outlaw))?;
        eprintln!("seed {seed}: the outlaw removed at {removed} ms");
        Ok(())
    });
}

/// The cheater's commands against what it had seen: each executed no earlier than the turn its
/// ticket named (no turn gained), and after every turn the cheater had executed before it
/// submitted (no order seen early: a command given in reaction to a turn lands after it).
/// Returns how many of its commands went into a later turn than stamped.
fn no_turn_gained(mesh: &Mesh, cheater: usize) -> Result<usize, String> {
    let game = &mesh.games[cheater];
    let mut late = 0;
    for &(player, seq, turn) in &game.executed {
        if player != game.player {
            continue;
        }
        let &(stamped, submitted_ms) = game.submitted.get(&seq).ok_or("executed, never given")?;
        ensure(turn >= stamped, || format!("seq {} ran at {turn}, stamped {stamped}", seq.0))?;
        late += usize::from(turn > stamped);
        // Turns are executed in order from turn 0: `executed_at_ms[t]` is turn t's time.
        let seen = game.executed_at_ms.iter().take_while(|&&at| at <= submitted_ms).count();
        ensure(turn.0 as usize >= seen, || {
            format!("seq {} submitted after turn {} ran, executed at {turn}", seq.0, seen - 1)
        })?;
    }
    Ok(late)
}

/// The longest gap between two turns of any honest game (not `cheater`), ms.
fn honest_stall_ms(mesh: &Mesh, cheater: usize) -> u64 {
    let stalls = mesh.stalls().into_iter().filter(|&(game, ..)| game != cheater);
    stalls.map(|(_, _, gap, _)| gap).max().unwrap_or(0)
}

/// Four clients at 50 ms one way (±10 ms, 1 % loss) ordering every 0.2–0.6 s; client 1
/// cheats as `cheat` sets it up.
fn cheated(seed: u64, cheat: impl FnOnce(&mut MeshConfig, &mut Rng)) -> Result<Mesh, String> {
    let faults =
        LinkFaults { latency_ms: 50, jitter_ms: 10, loss_permille: 10, ..LinkFaults::default() };
    let mut config = MeshConfig::new(seed, 4).with_faults(faults);
    config.command_interval_ms = (200, 600);
    config.wake_lateness_ms = 2;
    config.end_ms = 40_000;
    config.submit_until_ms = 35_000;
    config.heal_at_ms = 35_000;
    cheat(&mut config, &mut Rng::new(seed));
    let mesh = Mesh::run_checked(config)?;
    mesh.check_agreement()?;
    mesh.check_exactly_once()?;
    Ok(mesh)
}

/// A lag switch: client 1 holds its datagrams for 0.5–2 s, five times in the match, then
/// releases them. Its commands held past their turn go into a later one (never back into a
/// sealed turn); it sees no order before committing its own; no honest game waits longer than
/// the longest hold.
#[test]
fn a_lag_switch_gains_no_turn() {
    for_each_seed(seeded_test!("lag_switch"), SEEDS, |seed| {
        let mut longest_hold = 0;
        let mesh = cheated(seed, |config, rng| {
            let mut at = 3_000;
            for _ in 0..5 {
                let hold = 500 + rng.below(1_501);
                longest_hold = longest_hold.max(hold);
                config.lag_switches.push((1, at, at + hold));
                at += hold + 2_000 + rng.below(3_000);
            }
        })?;
        let late = no_turn_gained(&mesh, 1)?;
        let stall = honest_stall_ms(&mesh, 1);
        eprintln!(
            "seed {seed}: holds up to {longest_hold} ms; {late} of the cheater's commands went \
             late; longest honest stall {stall} ms"
        );
        ensure(late > 0, || "no hold made a command late: the lag switch did nothing".into())?;
        ensure(stall <= longest_hold, || {
            format!("an honest game waited {stall} ms, longer than the {longest_hold} ms hold")
        })
    });
}

/// A fast clock: client 1's clock runs 25 % fast (and client 2's 10 %). Its schedule runs
/// ahead, but turns come only as the host seals them: it gains no turn, sees no order early,
/// and no honest game waits for it (no honest stall longer than a lost turn costs: two turns
/// and a round trip).
#[test]
fn a_fast_clock_gains_no_turn() {
    for_each_seed(seeded_test!("fast_clock"), SEEDS, |seed| {
        let mesh = cheated(seed, |config, _| {
            config.clocks = vec![(0, 0), (0, 250), (0, 100), (0, 0)];
        })?;
        no_turn_gained(&mesh, 1)?;
        no_turn_gained(&mesh, 2)?;
        let honest = mesh.stalls().into_iter().filter(|&(game, ..)| game == 0 || game == 3);
        let stall = honest.map(|(_, _, gap, _)| gap).max().unwrap_or(0);
        let turns = mesh.turns_executed_min();
        eprintln!("seed {seed}: every game ran {turns}+ turns; longest honest stall {stall} ms");
        ensure(stall <= 2 * 100 + 2 * 60, || format!("an honest game waited {stall} ms"))
    });
}
