//! A run, as named steps: build the network, start the host, the players, the join flood and
//! the director (the timeline), then step simulated time — crashing the host on schedule —
//! until every player is done, and fold the report.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use phalanx::quic::{Fingerprint, HostIdentity};
use phalanx::session::Update;
use phalanx::{Event, Host, HostOptions, PlayerId};

use crate::director::{director_node, flood_node};
use crate::listen::ListenGame;
use crate::player::player_node;
use crate::spectator::{spectator_node, spectator_token};
use crate::trace::Trace;
use crate::{PlayerReport, Rng, SimConfig, SimError, SimGame, SimReport, SimSocket, Step};

/// The host's UDP port.
pub(crate) const HOST_PORT: u16 = 4_433;

/// What every node of a run shares.
#[derive(Clone)]
pub(crate) struct Run {
    pub(crate) config: SimConfig,
    /// The report so far; `players` is indexed by machine until [`Run::finish`] (the host's
    /// own player, when it plays, after the clients: at `config.players`).
    pub(crate) report: Arc<Mutex<SimReport>>,
    pub(crate) trace: Arc<Mutex<Trace>>,
    /// Seat → the machine that last took it, filled as each client joins: how timeline steps
    /// naming a [`PlayerId`] find their machine.
    pub(crate) seats: Arc<Mutex<BTreeMap<PlayerId, usize>>>,
    /// The host certificate's fingerprint, which clients pin over QUIC.
    pub(crate) fingerprint: Fingerprint,
    /// The host's static key, which clients pin over UDP.
    pub(crate) udp_key: phalanx::udp::HostPublicKey,
    /// The NATs of a mesh run with any ([`SimConfig::nats`]); each machine adds its own.
    pub(crate) nats: Option<Arc<Mutex<crate::nat::NatWorld>>>,
}

impl Run {
    fn new(config: SimConfig, identity: &HostIdentity) -> Run {
        let host = hosts_a_player(&config);
        let players = (0..config.players + usize::from(host)).map(|machine| PlayerReport {
            machine,
            host: machine == config.players,
            ..PlayerReport::default()
        });
        let spectators = (0..config.spectators.len())
            .map(|machine| PlayerReport { machine, ..PlayerReport::default() });
        let report = SimReport {
            players: players.collect(),
            spectators: spectators.collect(),
            ..SimReport::default()
        };
        let nats = config.nats.iter().any(Option::is_some).then(Arc::default);
        Run {
            nats,
            config,
            report: Arc::new(Mutex::new(report)),
            trace: Arc::new(Mutex::new(Trace::new())),
            seats: Arc::new(Mutex::new(BTreeMap::new())),
            fingerprint: identity.fingerprint(),
            udp_key: identity.udp_public_key(),
        }
    }

    /// A client's options for `token` on `socket`, its transport seeded by `stream`: the
    /// run's transport and session, pinning the host as it expects.
    pub(crate) fn client_options(
        &self,
        token: u64,
        socket: Arc<SimSocket>,
        stream: u64,
    ) -> phalanx::ClientOptions {
        let seed = Some(quic_seed(self.config.seed, stream));
        let transport: phalanx::ClientTransport = match self.config.transport {
            phalanx::Transport::Udp => {
                let mut udp = phalanx::udp::ClientConfig::new(self.udp_key);
                udp.socket = Some(Arc::new(phalanx::udp::QuinnSocket(socket)));
                udp.seed = seed;
                udp.into()
            }
            _ => {
                let pin = phalanx::quic::HostVerification::Pinned(self.fingerprint);
                let mut quic = phalanx::quic::ClientConfig::new(pin);
                quic.socket = Some(socket);
                quic.seed = seed;
                quic.into()
            }
        };
        let mut options = phalanx::ClientOptions::new(token, transport);
        options.session = self.config.session.clone();
        options
    }

    /// Updates the run-wide report.
    pub(crate) fn with_report(&self, update: impl FnOnce(&mut SimReport)) {
        update(&mut self.report.lock().expect("not poisoned"));
    }

    /// Updates machine `p{machine}`'s report.
    pub(crate) fn with_player(&self, machine: usize, update: impl FnOnce(&mut PlayerReport)) {
        self.with_report(|report| update(&mut report.players[machine]));
    }

    /// Updates spectator machine `s{index}`'s report.
    pub(crate) fn with_spectator(&self, index: usize, update: impl FnOnce(&mut PlayerReport)) {
        self.with_report(|report| update(&mut report.spectators[index]));
    }

    /// The report as it stands at `sim_ms`, players in seat order.
    fn finish(&self, sim_ms: u64) -> SimReport {
        let mut report = self.report.lock().expect("not poisoned").clone();
        let trace = self.trace.lock().expect("not poisoned");
        report.trace_digest = trace.digest;
        report.datagrams = trace.datagrams;
        report.copies = trace.copies;
        report.sim_ms = sim_ms;
        report.sort_by_seat();
        report
    }
}

/// Simulated milliseconds since the run started (inside a node).
pub(crate) fn now_ms() -> u64 {
    turmoil::elapsed().as_millis() as u64
}

/// The seed of random stream `stream` of a run (0: the host; see the nodes for the others).
pub(crate) fn node_seed(seed: u64, stream: u64) -> u64 {
    let mut rng = Rng::new(seed ^ stream.wrapping_mul(0xA24B_AED4_963E_E407));
    rng.next_u64()
}

/// quinn's seed for stream `stream` (connection ids, packet-number skips...).
pub(crate) fn quic_seed(seed: u64, stream: u64) -> [u8; 32] {
    let mut rng = Rng::new(node_seed(seed, stream));
    let mut bytes = [0u8; 32];
    for chunk in bytes.chunks_mut(8) {
        chunk.copy_from_slice(&rng.next_u64().to_le_bytes());
    }
    bytes
}

/// Runs a scenario: a host and `players` clients playing `G` for `turns` turns.
pub fn run<G: SimGame<Setup = ()>>(config: SimConfig) -> Result<SimReport, SimError> {
    run_with::<G>(config, ())
}

/// [`run`] for a game that needs a setup.
pub fn run_with<G: SimGame>(config: SimConfig, setup: G::Setup) -> Result<SimReport, SimError> {
    let identity = HostIdentity::generate_self_signed("phalanx-sim").map_err(SimError::Identity)?;
    let mut sim = turmoil::Builder::new()
        .rng_seed(config.seed)
        .simulation_duration(Duration::from_millis(config.limit_ms))
        .tick_duration(Duration::from_millis(1))
        .min_message_latency(Duration::from_millis(config.latency_ms))
        .max_message_latency(Duration::from_millis(config.latency_ms))
        .udp_capacity(4_096)
        .build();
    let run = Run::new(config, &identity);
    if let crate::Topology::Mesh(peer) = &run.config.topology {
        if run.nats.is_some() {
            crate::mesh::rendezvous_node(&mut sim, &run);
        }
        for machine in 0..run.config.players {
            crate::mesh::mesh_node::<G>(&mut sim, &run, machine, peer.clone(), setup.clone());
        }
        return step_to_the_end(sim, &run);
    }
    if run.config.relay_matches.is_some() {
        relay_node(&mut sim, &run, &identity)?;
    } else {
        host_node::<G>(&mut sim, &run, &identity, setup.clone());
    }
    for machine in 0..run.config.players {
        player_node::<G>(&mut sim, &run, machine, setup.clone());
    }
    for index in 0..run.config.spectators.len() {
        spectator_node::<G>(&mut sim, &run, index, setup.clone());
    }
    if run.config.flood_joins > 0 {
        flood_node::<G>(&mut sim, &run);
    }
    director_node(&mut sim, &run);
    step_to_the_end(sim, &run)
}

/// The host machine as a relay ([`SimConfig::relay_matches`]), and the crowd's machine.
#[cfg(feature = "relay")]
fn relay_node(
    sim: &mut turmoil::Sim<'_>,
    run: &Run,
    identity: &HostIdentity,
) -> Result<(), SimError> {
    let (node, key) = (run.clone(), identity.udp_key().to_bytes());
    sim.host("host", move || {
        let node = node.clone();
        async move { crate::relay::relay_host(node, phalanx::udp::HostKey::from_bytes(key)).await }
    });
    crate::relay::crowd_node(sim, run);
    Ok(())
}

/// Without the `relay` feature there is no relay to run.
#[cfg(not(feature = "relay"))]
fn relay_node(_: &mut turmoil::Sim<'_>, _: &Run, _: &HostIdentity) -> Result<(), SimError> {
    Err(SimError::Relay)
}

/// The host machine: a phalanx host that starts the game when every player has joined (and,
/// with [`SimConfig::host_plays`], plays).
fn host_node<G: SimGame>(
    sim: &mut turmoil::Sim<'_>,
    run: &Run,
    identity: &HostIdentity,
    setup: G::Setup,
) {
    let (run, cert, key) = (run.clone(), identity.cert_der().to_vec(), identity.key_der().to_vec());
    sim.host("host", move || {
        let (run, cert, key, setup) = (run.clone(), cert.clone(), key.clone(), setup.clone());
        async move { host::<G>(run, HostIdentity::from_der(cert, key), setup).await }
    });
}

/// Whether the run's host has a player of its own: [`SimConfig::host_plays`], on a
/// `phalanx::Host` (not a relay, not a mesh).
pub(crate) fn hosts_a_player(config: &SimConfig) -> bool {
    config.host_plays
        && config.relay_matches.is_none()
        && matches!(config.topology, crate::Topology::Star)
}

async fn host<G: SimGame>(run: Run, identity: HostIdentity, setup: G::Setup) -> turmoil::Result {
    let config = &run.config;
    let bind = SocketAddr::from((IpAddr::from([0, 0, 0, 0]), HOST_PORT));
    let socket = host_socket(&run).await?;
    let tokens = (0..config.players as u64).map(|machine| 100 + machine).collect();
    let transport = host_transport(config, identity, socket);
    let mut options = HostOptions::new(transport, bind, tokens);
    options.session = config.session.clone();
    options.spectator_tokens = (0..config.spectators.len()).map(spectator_token).collect();
    options.local_player = hosts_a_player(config);
    let mut host: Host<G::Command> = Host::bind(options).await.map_err(|e| e.to_string())?;
    let mut game = ListenGame::<G>::new(&run, &host, &setup);
    let (mut joined, mut started, mut events_open) = (0, false, true);
    let mut steps = host_steps(config);
    loop {
        while let Some(step) = steps.next_if(|step| now_ms() >= step.at_ms()) {
            let what = match step {
                Step::EndGame { code, .. } => {
                    let ended = host.end(code).await;
                    if let Ok(last) = ended {
                        run.with_report(|report| report.game_ended = Some((now_ms(), last)));
                    }
                    format!("end({code}): {ended:?}")
                }
                _ => {
                    run.with_report(|report| report.host_shutdown_ms = Some(now_ms()));
                    host.shutdown().await;
                    run.with_report(|report| {
                        report.host_events.push((now_ms(), "shutdown".into()))
                    });
                    // Nothing runs here any more; the players end on their own.
                    loop {
                        tokio::time::sleep(Duration::from_secs(3_600)).await;
                    }
                }
            };
            run.with_report(|report| report.host_events.push((now_ms(), what)));
        }
        if !started && start_due(config, joined) {
            host.start().await.map_err(|e| e.to_string())?;
            started = true;
        }
        // Wait for the next turn of the host's game, event, timeline step or the join
        // deadline: no polling.
        let sleep = until(host_wake_ms(&mut steps, started));
        tokio::select! {
            biased;
            update = next_update(&mut host, game.is_some()), if events_open => match update {
                Some(Update::Turn(turn)) => {
                    let playing = match game.as_mut() {
                        Some(game) => game.play(&run, &host, &turn).await,
                        None => false,
                    };
                    if !playing {
                        game = None;
                    }
                }
                Some(Update::Event(event)) => joined += host_event(&run, &host, event),
                // The host's game is over with the session: only events from now on.
                None if game.is_some() => {
                    if let Some(game) = game.take() {
                        game.finish(&run, &host);
                    }
                }
                None => events_open = false,
            },
            () = tokio::time::sleep(sleep) => {}
        }
    }
}

/// What the host waits for: while its own game plays, the next turn or event (turns first);
/// otherwise the next event. `None`: no more of those.
async fn next_update<C: serde::Serialize + serde::de::DeserializeOwned>(
    host: &mut Host<C>,
    playing: bool,
) -> Option<Update<C>> {
    if playing {
        host.next_update().await
    } else {
        host.next_event().await.map(Update::Event)
    }
}

/// Records a host event in the report (a desync as the host's own player met it, when it
/// plays); 1 when a player joined.
fn host_event<C: serde::Serialize + serde::de::DeserializeOwned>(
    run: &Run,
    host: &Host<C>,
    event: Event,
) -> usize {
    let joined = usize::from(matches!(event, Event::PlayerJoined(_)));
    let desync = match (&event, host.local_player()) {
        (Event::Desync(desync), Some(me)) => Some((me, desync.turn.0, desync.diverged.clone())),
        _ => None,
    };
    let line = (now_ms(), format!("{event:?}"));
    run.with_report(|report| {
        report.host_events.push(line);
        report.events.push((now_ms(), event));
        report.desyncs.extend(desync);
    });
    joined
}

/// A host's pending timeline steps, next first.
pub(crate) type HostSteps = std::iter::Peekable<std::vec::IntoIter<Step>>;

/// The timeline steps a host acts on (the game's end, its shutdown), in time order.
pub(crate) fn host_steps(config: &SimConfig) -> HostSteps {
    let mut steps: Vec<Step> = config
        .timeline
        .iter()
        .copied()
        .filter(|step| matches!(step, Step::EndGame { .. } | Step::ShutdownHost { .. }))
        .collect();
    steps.sort_by_key(Step::at_ms);
    steps.into_iter().peekable()
}

/// Whether a host with `joined` players should start now: everyone due on time is in, or
/// joining has had [`JOIN_WAIT_MS`] and someone is (a player whose joins all failed is
/// reported in `join_error`, not waited for forever).
pub(crate) fn start_due(config: &SimConfig, joined: usize) -> bool {
    let on_time = config.players - config.join_late.len();
    joined >= on_time || now_ms() >= JOIN_WAIT_MS && joined > 0
}

/// When a host has something to do besides its network: its next timeline step, and the join
/// deadline while it has not started.
pub(crate) fn host_wake_ms(steps: &mut HostSteps, started: bool) -> u64 {
    let wake = steps.peek().map_or(u64::MAX, Step::at_ms);
    if started || now_ms() >= JOIN_WAIT_MS {
        wake
    } else {
        wake.min(JOIN_WAIT_MS)
    }
}

/// How long from now until `at_ms` (an hour at most).
pub(crate) fn until(at_ms: u64) -> Duration {
    Duration::from_millis(at_ms.saturating_sub(now_ms()).min(3_600_000))
}

/// The host's transport, as the run wants it: on the simulated `socket`, seeded from the run.
fn host_transport(
    config: &SimConfig,
    identity: HostIdentity,
    socket: Arc<SimSocket>,
) -> phalanx::HostTransport {
    let seed = Some(quic_seed(config.seed, 0));
    match config.transport {
        phalanx::Transport::Udp => {
            let mut udp = phalanx::udp::HostConfig::new(identity.udp_key());
            udp.socket = Some(Arc::new(phalanx::udp::QuinnSocket(socket)));
            udp.seed = seed;
            udp.into()
        }
        _ => {
            let mut quic = phalanx::quic::HostConfig::new(identity);
            quic.socket = Some(socket);
            quic.seed = seed;
            quic.reset_key = Some([7; 32]);
            quic.into()
        }
    }
}

/// The host's socket: the scenario's faults, and the spectators' extra loss on the way to
/// them.
pub(crate) async fn host_socket(run: &Run) -> std::io::Result<Arc<SimSocket>> {
    let config = &run.config;
    let bind = SocketAddr::from((IpAddr::from([0, 0, 0, 0]), HOST_PORT));
    let seed = node_seed(config.seed, 0);
    let socket = SimSocket::bind("host", bind, config.faults, seed, run.trace.clone()).await?;
    (0..config.spectators.len()).for_each(|index| {
        socket.add_loss_to(turmoil::lookup(format!("s{index}")), config.spectator_link.1)
    });
    Ok(socket)
}

/// How long the host waits for every player before starting with those who joined.
pub(crate) const JOIN_WAIT_MS: u64 = 20_000;

/// Steps simulated time by hand, so host crashes happen at their time, until every client is
/// done (or turmoil fails: the report then holds what happened up to then).
fn step_to_the_end(mut sim: turmoil::Sim<'_>, run: &Run) -> Result<SimReport, SimError> {
    let mut crashes: Vec<u64> = run
        .config
        .timeline
        .iter()
        .filter(|step| matches!(step, Step::CrashHost { .. }))
        .map(Step::at_ms)
        .collect();
    crashes.sort_unstable();
    let mut crashes = crashes.into_iter().peekable();
    loop {
        match sim.step() {
            Ok(true) => break,
            Ok(false) => {}
            Err(error) => {
                let partial = Box::new(run.finish(sim.elapsed().as_millis() as u64));
                return Err(SimError::Turmoil { error: error.to_string(), partial });
            }
        }
        if crashes.peek().is_some_and(|&at| sim.elapsed().as_millis() as u64 >= at) {
            crashes.next();
            sim.crash("host");
        }
    }
    Ok(run.finish(sim.elapsed().as_millis() as u64))
}
