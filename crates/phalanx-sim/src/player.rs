//! A player's machine `p{machine}`: join (retrying as a real client would), play the game turn
//! by turn, crash and restart when the timeline says so, and report.
//!
//! Each process of the machine draws from its own random streams: `machine + 1 + 100 ×
//! (attempt + 10 × incarnation)` for its socket and quinn, `50_000 + machine + 1` for a hostile
//! player's bad datagrams.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use phalanx::proto::Ticket;
use phalanx::{error::JoinRefusal, Client, Event, PlayerId, TypedRecord, TypedTurn};

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::run::{node_seed, now_ms, Run, HOST_PORT};
use crate::sampler::Sampler;
use crate::speculating::Speculator;
use crate::trace::flows;
use crate::{Hostile, Rng, SimGame, SimSocket, Step};

/// How one process's game ended.
enum Played<C> {
    /// It played its last turn, or its session ended: it leaves politely.
    Finished(Client<C>),
    /// The timeline made it leave: it closes at once.
    Left(Client<C>),
    /// The timeline crashed it; a new process starts this much later (`None`: never).
    Crashed { restart_after_ms: Option<u64> },
}

/// Starts machine `p{machine}` in the simulation.
pub(crate) fn player_node<G: SimGame>(
    sim: &mut turmoil::Sim<'_>,
    run: &Run,
    machine: usize,
    setup: G::Setup,
) {
    let run = run.clone();
    sim.client(format!("p{machine}"), async move { machine_life::<G>(run, machine, setup).await });
}

/// Every process machine `p{machine}` runs, one after the other.
async fn machine_life<G: SimGame>(run: Run, machine: usize, setup: G::Setup) -> turmoil::Result {
    let mut incarnation = 0u64;
    if let Some(&(_, at_ms)) = run.config.join_late.iter().find(|&&(late, _)| late == machine) {
        tokio::time::sleep(Duration::from_millis(at_ms)).await;
    }
    loop {
        run.with_player(machine, |report| report.incarnations += 1);
        let Some((client, socket)) = join::<G>(&run, machine, incarnation).await? else {
            return Ok(());
        };
        let Some(player) = client.player() else {
            // A player's token seats a player: anything else is the host's mistake.
            run.with_player(machine, |report| report.join_error = Some("no seat".into()));
            return Ok(());
        };
        run.seats.lock().expect("not poisoned").insert(player, machine);
        run.with_player(machine, |report| report.player = Some(player));
        if let Some((_, mode)) = run.config.hostile.filter(|&(hostile, _)| hostile == player) {
            misbehave(&run, machine, &client, mode);
        }
        match play::<G>(&run, machine, (player, client, socket), &setup, incarnation).await {
            Played::Finished(client) => {
                leave(&run, machine, client, true).await;
                return Ok(());
            }
            Played::Left(client) => {
                leave(&run, machine, client, false).await;
                return Ok(());
            }
            Played::Crashed { restart_after_ms: None } => return Ok(()),
            Played::Crashed { restart_after_ms: Some(after_ms) } => {
                tokio::time::sleep(Duration::from_millis(after_ms)).await;
                turmoil::repair("host", format!("p{machine}").as_str());
                run.with_player(machine, |report| {
                    report.restarted_ms = Some(now_ms());
                    report.hashes.clear();
                    report.first_turn = 0;
                    report.restored = None;
                    report.executed_at_ms.clear();
                    report.left_seen.clear();
                    report.left_turns.clear();
                    report.joined_turns.clear();
                    report.commands.clear();
                    report.executed = 0;
                });
                incarnation += 1;
            }
        }
    }
}

/// Joins with the machine's token, three attempts (a restarted process: up to ten while its
/// seat is still held). `None`: it could not, and the report says why.
async fn join<G: SimGame>(
    run: &Run,
    machine: usize,
    incarnation: u64,
) -> turmoil::Result<Option<(Client<G::Command>, Arc<SimSocket>)>> {
    let addr = SocketAddr::from((turmoil::lookup("host"), HOST_PORT));
    let mut attempt = 0u64;
    loop {
        let stream = machine as u64 + 1 + 100 * (attempt + 10 * incarnation);
        let port = 5_000 + (attempt + 10 * incarnation) as u16;
        let bind = SocketAddr::from((IpAddr::from([0, 0, 0, 0]), port));
        let seed = node_seed(run.config.seed, stream);
        let name = format!("p{machine}");
        let socket =
            SimSocket::bind(&name, bind, run.config.faults, seed, run.trace.clone()).await?;
        let token = 100 + machine as u64;
        let options = run.client_options(token, socket.clone(), stream);
        match Client::connect(addr, options).await {
            Ok(client) => return Ok(Some((client, socket))),
            // A restarted process may find its seat still held: the host has not timed the
            // dead connection out yet (it is given the join grace if it crashed before being
            // heard). Like a real client, wait and retry.
            Err(error)
                if incarnation > 0
                    && attempt < 9
                    && error.refusal() == Some(JoinRefusal::TokenUsed) =>
            {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(1_500)).await;
            }
            Err(error) if attempt == 2 || error.refusal().is_some() => {
                run.with_player(machine, |report| {
                    report.refusal = error.refusal();
                    report.join_error = Some(error.to_string());
                });
                return Ok(None);
            }
            Err(_) => attempt += 1,
        }
    }
}

/// From 3 s on, 20 bad datagrams a second on the player's own connection, whatever the game
/// does.
fn misbehave<C: Serialize + DeserializeOwned>(
    run: &Run,
    machine: usize,
    client: &Client<C>,
    mode: Hostile,
) {
    let sender = client.dangerous_raw_datagram_sender();
    let mut rng = Rng::new(node_seed(run.config.seed, 50_000 + machine as u64 + 1));
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let mut pn = 1u64 << 40;
        loop {
            if sender.send(hostile_datagram(mode, &mut rng, pn)).is_err() {
                return;
            }
            pn += 1;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
}

/// One datagram of a hostile player.
fn hostile_datagram(mode: Hostile, rng: &mut Rng, pn: u64) -> Vec<u8> {
    match mode {
        Hostile::Garbage => {
            let len = 1 + rng.below(80) as usize;
            let mut bytes: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            bytes[0] = 2 + bytes[0] % 250;
            bytes
        }
        Hostile::SpoofedTurns => {
            phalanx_proto::testing::up_datagram_claiming(pn, phalanx_proto::Turn(u32::MAX))
        }
    }
}

/// Plays until the last turn, the session's end, or the crash the timeline sets for this
/// player's first process.
async fn play<G: SimGame>(
    run: &Run,
    machine: usize,
    (me, mut client, socket): (PlayerId, Client<G::Command>, Arc<SimSocket>),
    setup: &G::Setup,
    incarnation: u64,
) -> Played<G::Command> {
    let crash = run.config.timeline.iter().find_map(|step| match *step {
        Step::CrashClient { at_ms, player, restart_after_ms } if player == me => {
            Some((at_ms, restart_after_ms))
        }
        _ => None,
    });
    let leave_at = run.config.timeline.iter().find_map(|step| match *step {
        Step::Leave { at_ms, player } if player == me && incarnation == 0 => Some(at_ms),
        _ => None,
    });
    let mut game = G::new(me, run.config.seed, setup);
    let late_max = run.config.late_seals;
    let mut speculation = run.config.speculate.then(|| Speculator::new(me, &mut game, late_max));
    let mut flipped = 0u64;
    let mut sampler = Sampler::new(machine, run.config.samples_every_ms);
    loop {
        let turn = match speculation.as_mut() {
            Some(speculation) => speculation.next_turn(run, machine, &mut game, &mut client).await,
            None => client.next_turn().await,
        };
        let Some(turn) = turn else { break };
        if let Some((_, restart_after_ms)) =
            crash.filter(|&(at_ms, _)| incarnation == 0 && now_ms() >= at_ms)
        {
            // The process dies: nothing more leaves its socket, not even the close a dropped
            // QUIC endpoint would send (the partition also cuts what is already in flight),
            // and its game and session are gone.
            socket.kill();
            turmoil::partition("host", format!("p{machine}").as_str());
            drop(client);
            drop(game);
            return Played::Crashed { restart_after_ms };
        }
        if leave_at.is_some_and(|at_ms| now_ms() >= at_ms) {
            return Played::Left(client);
        }
        if let Some(snapshot) = &turn.restore {
            // A rejoin through a snapshot: the game continues from the verified state.
            if !game.restore(&snapshot.state) {
                run.with_player(machine, |r| {
                    r.join_error = Some("snapshot did not restore".into())
                });
                return Played::Left(client);
            }
            let restored = (snapshot.turn, snapshot.state.len());
            run.with_player(machine, |report| {
                report.first_turn = turn.turn.0;
                report.restored = Some(restored);
            });
        }
        match speculation.as_mut() {
            Some(speculation) => speculation.confirm(&mut game, &turn),
            None => game.execute(&turn),
        }
        sampler.executed(me, &turn, &run.report);
        if run.config.desync_at == Some((me, turn.turn.0)) {
            flipped = 1;
        }
        let hash = game.state_hash() ^ flipped;
        record_turn(run, machine, &mut client, &turn, hash, &mut speculation, &mut game);
        report_state(run, &mut client, &game, &turn, hash).await;
        sampler.sample(&client, turn.turn, &run.report, &run.trace).await;
        if turn.turn.0 + 1 >= run.config.turns {
            break;
        }
        let commands = game.commands(turn.turn);
        let tickets = submit(run, machine, &mut client, commands, &mut sampler).await;
        if let Some(speculation) = speculation.as_mut() {
            speculation.predict(run, machine, &mut game, tickets, client.overdue());
        }
    }
    Played::Finished(client)
}

/// Tells the session of the confirmed state after `turn`: its hash (every turn: check turns
/// for the sync check, the others for a desync's forensics, kept by the client; only check
/// turns go on the wire), the state itself when kept or asked for as a snapshot.
async fn report_state<G: SimGame>(
    run: &Run,
    client: &mut Client<G::Command>,
    game: &G,
    turn: &TypedTurn<G::Command>,
    hash: u64,
) {
    let _ = client.report_state_hash(turn.turn, hash).await;
    if run.config.keep_states {
        if let Some(state) = game.save() {
            let _ = client.keep_state(turn.turn, state).await;
        }
    }
    if turn.wants_snapshot {
        if let Some(state) = game.save() {
            // The reported hash: a desynced game's snapshot is rejected, as it should be.
            let _ = client.offer_snapshot(turn.turn, hash, state).await;
        }
    }
}

/// Records an executed turn: its hash, the commands in it, and the desyncs met so far; a
/// speculating player stops predicting its orders the host told it it will never seal.
fn record_turn<G: SimGame>(
    run: &Run,
    machine: usize,
    client: &mut Client<G::Command>,
    turn: &TypedTurn<G::Command>,
    hash: u64,
    speculation: &mut Option<Speculator<G>>,
    game: &mut G,
) {
    let me = client.player().unwrap_or(PlayerId(u8::MAX));
    while let Some(event) = client.try_event() {
        match event {
            Event::Desync(desync) => {
                let diverged = desync.diverged.clone();
                run.with_report(|report| report.desyncs.push((me, desync.turn.0, diverged)));
            }
            Event::CommandRefused { player, seq } if player == me => {
                if let Some(speculation) = speculation.as_mut() {
                    speculation.refused(game, seq);
                }
            }
            _ => {}
        }
    }
    record_records(run, machine, turn, hash);
}

/// Records an executed turn's hash, commands, joins and leaves in machine `machine`'s report.
pub(crate) fn record_records<C>(run: &Run, machine: usize, turn: &TypedTurn<C>, hash: u64) {
    let left: Vec<_> = turn
        .records
        .iter()
        .filter_map(|record| match record {
            TypedRecord::Left(player) => Some(*player),
            _ => None,
        })
        .collect();
    let joined: Vec<_> = turn
        .records
        .iter()
        .filter_map(|record| match record {
            TypedRecord::Joined(player) if turn.turn.0 > 0 => Some(*player),
            _ => None,
        })
        .collect();
    let commands: Vec<_> = turn
        .records
        .iter()
        .filter_map(|record| match record {
            TypedRecord::Command { player, seq, .. } => Some((*player, *seq, turn.turn)),
            _ => None,
        })
        .collect();
    run.with_player(machine, |report| {
        report.hashes.push(hash);
        report.executed_at_ms.push(now_ms());
        report.executed += commands.len() as u64;
        report.commands.extend(commands);
        report.left_seen.extend(left.iter().map(|&player| (player, now_ms())));
        report.left_turns.extend(left.iter().map(|&player| (player, turn.turn)));
        report.joined_turns.extend(joined.iter().map(|&player| (player, turn.turn)));
    });
}

/// Submits the game's commands, counting what the session accepted and refused; the accepted
/// ones with their tickets.
async fn submit<C: Serialize + DeserializeOwned>(
    run: &Run,
    machine: usize,
    client: &mut Client<C>,
    commands: Vec<C>,
    sampler: &mut Sampler,
) -> Vec<(Ticket, C)> {
    let mut accepted = Vec::new();
    for command in commands {
        let submitted = client.submit(&command).await;
        if let Ok(ticket) = &submitted {
            sampler.submitted(ticket);
            accepted.push((*ticket, command));
        }
        run.with_player(machine, |report| match submitted {
            Ok(ticket) => {
                report.submitted += 1;
                report.tickets.push(ticket);
            }
            Err(_) => report.submit_refused += 1,
        });
    }
    accepted
}

/// Reports the finished player's counters and leaves; `linger`: it stays a little first so
/// its last acknowledgements reach the host.
async fn leave<C: Serialize + DeserializeOwned>(
    run: &Run,
    machine: usize,
    client: Client<C>,
    linger: bool,
) {
    // After its session ended (a removed player) the client has no stats: the report keeps
    // those of the last sample.
    let stats = client.stats().await.ok();
    let (up, down) = flows(&run.trace, machine);
    run.with_player(machine, |report| {
        report.finished_ms = Some(now_ms());
        report.ended = client.ended();
        if let Some(stats) = &stats {
            report.record_stats(now_ms(), stats);
        }
        report.wire_datagrams = (up.0, down.0);
        report.wire_bytes = (up.1, down.1);
    });
    if linger {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    client.shutdown().await;
}
