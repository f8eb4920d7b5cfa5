//! A player's machine in a peer-to-peer run ([`Topology::Mesh`](crate::Topology::Mesh)): a
//! `phalanx::mesh::MeshSession` on the simulated socket, the game turn by turn, and the
//! timeline's steps for this player — a crash, a leave, a partition from every other
//! machine, the end of the game when it is the master.
//!
//! Machine `p{i}` plays `PlayerId(i)`; its roster key is drawn from the seed (stream
//! `7_000 + i`), its links' randomness from stream `300 + i`, its socket's from `i + 1`.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use phalanx::mesh::{MeshEnd, MeshMember, MeshOptions, MeshSession, RendezvousServer};
use phalanx::proto::mesh::{PeerConfig, PeerEvent};
use phalanx::udp::HostKey;
use phalanx::PlayerId;

use crate::player::record_records;
use crate::report::latencies;
use crate::run::{node_seed, now_ms, quic_seed, Run};
use crate::trace::flows_all;
use crate::{SimGame, SimSocket, Step};

/// Every machine's UDP port in a mesh run.
const MESH_PORT: u16 = 5_000;

/// The rendezvous machine's name, in a run with NATs.
const RENDEZVOUS: &str = "rendezvous";

/// Machine `i`'s roster key.
fn mesh_key(seed: u64, machine: usize) -> HostKey {
    HostKey::from_bytes(quic_seed(seed, 7_000 + machine as u64))
}

/// Starts machine `p{machine}` as a mesh peer.
pub(crate) fn mesh_node<G: SimGame>(
    sim: &mut turmoil::Sim<'_>,
    run: &Run,
    machine: usize,
    peer: PeerConfig,
    setup: G::Setup,
) {
    let run = run.clone();
    sim.client(
        format!("p{machine}"),
        async move { mesh_life::<G>(run, machine, peer, setup).await },
    );
}

/// The rendezvous of a run with NATs: a public machine the peers meet through, relaying the
/// pairs that cannot punch (see `SimConfig::nats`). Its socket has the run's faults, its
/// randomness stream `7_999`.
pub(crate) fn rendezvous_node(sim: &mut turmoil::Sim<'_>, run: &Run) {
    let run = run.clone();
    sim.host(RENDEZVOUS, move || {
        let run = run.clone();
        async move {
            let bind = SocketAddr::from((IpAddr::from([0, 0, 0, 0]), MESH_PORT));
            let seed = node_seed(run.config.seed, 7_999);
            let trace = run.trace.clone();
            let socket = SimSocket::bind(RENDEZVOUS, bind, run.config.faults, seed, trace).await?;
            if let Some(nats) = &run.nats {
                socket.through(nats.clone());
            }
            let _server = RendezvousServer::on(Arc::new(phalanx::udp::QuinnSocket(socket)))?;
            std::future::pending::<()>().await;
            Ok(())
        }
    });
}

/// What the timeline asks of this machine, in time order.
fn my_steps(run: &Run, me: PlayerId) -> Vec<Step> {
    let mut steps: Vec<Step> = run
        .config
        .timeline
        .iter()
        .copied()
        .filter(|step| match *step {
            Step::Partition { player, .. }
            | Step::Repair { player, .. }
            | Step::CrashClient { player, .. }
            | Step::Leave { player, .. } => player == me,
            Step::EndGame { .. } => true,
            _ => false,
        })
        .collect();
    steps.sort_by_key(Step::at_ms);
    steps
}

async fn mesh_life<G: SimGame>(
    run: Run,
    machine: usize,
    peer: PeerConfig,
    setup: G::Setup,
) -> turmoil::Result {
    let me = PlayerId(machine as u8);
    let name = format!("p{machine}");
    let bind = SocketAddr::from((IpAddr::from([0, 0, 0, 0]), MESH_PORT));
    let seed = node_seed(run.config.seed, machine as u64 + 1);
    let socket = SimSocket::bind(&name, bind, run.config.faults, seed, run.trace.clone()).await?;
    if let Some(nats) = &run.nats {
        if let Some(&Some(kind)) = run.config.nats.get(machine) {
            nats.lock().expect("not poisoned").add(machine, turmoil::lookup(name.as_str()), kind);
        }
        socket.through(nats.clone());
    }
    // Behind NATs, the rendezvous tells every member the others' addresses.
    let addrs = |i: usize| match run.nats {
        Some(_) => Vec::new(),
        None => vec![SocketAddr::from((turmoil::lookup(format!("p{i}")), MESH_PORT))],
    };
    let roster = (0..run.config.players)
        .map(|i| MeshMember {
            player: PlayerId(i as u8),
            key: mesh_key(run.config.seed, i).public(),
            addrs: addrs(i),
        })
        .collect();
    let mut options =
        MeshOptions::new(me, mesh_key(run.config.seed, machine), roster, run.config.seed, bind);
    if run.nats.is_some() {
        options.rendezvous = Some(SocketAddr::from((turmoil::lookup(RENDEZVOUS), MESH_PORT)));
    }
    options.session = run.config.session.clone();
    options.peer = peer;
    options.socket = Some(Arc::new(phalanx::udp::QuinnSocket(socket.clone())));
    options.seed = Some(quic_seed(run.config.seed, 300 + machine as u64));
    let session: MeshSession<G::Command> =
        MeshSession::start(options, Some(tokio::runtime::Handle::current()))
            .map_err(|e| e.to_string())?;
    run.seats.lock().expect("not poisoned").insert(me, machine);
    run.with_player(machine, |report| {
        report.player = Some(me);
        report.incarnations = 1;
    });
    let crashed = play::<G>(&run, machine, session, &socket, &setup).await;
    if !crashed {
        report_flows(&run, machine);
    }
    Ok(())
}

/// Plays until the last turn or the end of the match; `true` if the timeline crashed it.
async fn play<G: SimGame>(
    run: &Run,
    machine: usize,
    mut session: MeshSession<G::Command>,
    socket: &Arc<SimSocket>,
    setup: &G::Setup,
) -> bool {
    let me = PlayerId(machine as u8);
    let mut steps = my_steps(run, me).into_iter().peekable();
    let mut game = G::new(me, run.config.seed, setup);
    let mut flipped = 0u64;
    let mut done = false;
    while !done && !session.is_over() {
        while let Some(step) = steps.next_if(|step| now_ms() >= step.at_ms()) {
            if act(run, machine, &session, socket, step) {
                drop(session);
                return true;
            }
        }
        while let Some(turn) = session.try_next_turn() {
            game.execute(&turn);
            if run.config.desync_at == Some((me, turn.turn.0)) {
                flipped = 1;
            }
            let hash = game.state_hash() ^ flipped;
            record_records(run, machine, &turn, hash);
            session.report_state_hash(turn.turn, hash);
            if turn.turn.0 + 1 >= run.config.turns {
                done = true;
                break;
            }
            submit(run, machine, &session, game.commands(turn.turn));
        }
        drain_events(run, me, &mut session);
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    finish(run, machine, session).await;
    false
}

/// Does one timeline step; `true` when it is this machine's crash.
fn act<C>(
    run: &Run,
    machine: usize,
    session: &MeshSession<C>,
    socket: &SimSocket,
    step: Step,
) -> bool
where
    C: serde::Serialize + serde::de::DeserializeOwned + Send + 'static,
{
    let name = format!("p{machine}");
    let others = (0..run.config.players).filter(|&i| i != machine).map(|i| format!("p{i}"));
    match step {
        Step::CrashClient { .. } => {
            // The process dies: nothing more leaves its socket, not a word to anyone.
            socket.kill();
            run.with_player(machine, |report| report.finished_ms = Some(now_ms()));
            return true;
        }
        Step::Leave { .. } => session.leave(),
        Step::EndGame { code, .. } if session.master() == Some(PlayerId(machine as u8)) => {
            if let Ok(last) = session.end(code) {
                run.with_report(|report| report.game_ended = Some((now_ms(), last)));
            }
        }
        Step::Partition { .. } => {
            others.for_each(|other| turmoil::partition(name.as_str(), other.as_str()))
        }
        Step::Repair { .. } => {
            others.for_each(|other| turmoil::repair(name.as_str(), other.as_str()))
        }
        _ => {}
    }
    false
}

fn submit<C>(run: &Run, machine: usize, session: &MeshSession<C>, commands: Vec<C>)
where
    C: serde::Serialize + serde::de::DeserializeOwned + Send + 'static,
{
    for command in commands {
        let submitted = session.submit(&command);
        run.with_player(machine, |report| match submitted {
            Ok(ticket) => {
                report.submitted += 1;
                report.tickets.push(ticket);
            }
            Err(_) => report.submit_refused += 1,
        });
    }
}

fn drain_events<C>(run: &Run, me: PlayerId, session: &mut MeshSession<C>)
where
    C: serde::Serialize + serde::de::DeserializeOwned + Send + 'static,
{
    while let Some(event) = session.try_event() {
        let line = (now_ms(), format!("{me:?} {event:?}"));
        if let PeerEvent::Desync(desync) = &event {
            let diverged = desync.diverged.clone();
            run.with_report(|report| report.desyncs.push((me, desync.turn.0, diverged)));
        }
        run.with_report(|report| report.host_events.push(line));
    }
}

/// Reports the counters, then stays a while answering the others (they may still need our
/// last contributions) before the process ends.
async fn finish<C>(run: &Run, machine: usize, session: MeshSession<C>)
where
    C: serde::Serialize + serde::de::DeserializeOwned + Send + 'static,
{
    let stats = session.stats();
    let ended = session.ended();
    let relayed: Vec<PlayerId> =
        session.links().iter().filter(|link| link.relayed).map(|l| PlayerId(l.player)).collect();
    if let Some(stats) = &stats {
        let rtts: Vec<String> = stats
            .pairs
            .iter()
            .map(|p| {
                format!("{}: {}", p.player.0, p.rtt_ms.map_or("-".into(), |r| format!("{r} ms")))
            })
            .collect();
        let line =
            (now_ms(), format!("p{machine} rtt {}; lead {} ms", rtts.join(", "), stats.lead_ms));
        run.with_report(|report| report.host_events.push(line));
    }
    run.with_player(machine, |report| {
        report.finished_ms = Some(now_ms());
        report.relayed = relayed;
        report.ended = match ended {
            Some(MeshEnd::Peer(end)) => Some(end.into()),
            _ => None,
        };
        if let Some(stats) = &stats {
            report.stats_at_ms = Some(now_ms());
            report.stall_ms = stats.stall_ms;
            report.latency_ms =
                latencies(stats.latency_ms_p50, stats.latency_ms_p95, stats.latency_ms_max);
            let sent = stats.pairs.iter().map(|p| p.bytes_sent).sum();
            let received = stats.pairs.iter().map(|p| p.bytes_received).sum();
            report.app_bytes = (sent, received);
        }
    });
    report_flows(run, machine);
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    drop(session);
}

fn report_flows(run: &Run, machine: usize) {
    let (sent, received) = flows_all(&run.trace, machine);
    run.with_player(machine, |report| {
        report.wire_datagrams = (sent.0, received.0);
        report.wire_bytes = (sent.1, received.1);
    });
}
