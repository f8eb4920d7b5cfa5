//! Deterministic network-fault simulation for phalanx games: a host and N clients running
//! **real quinn and tokio** under [turmoil]'s simulated network and clock, with a seeded fault
//! layer (loss, Gilbert–Elliott bursts, duplication, jitter/reordering, an MTU cap) and a
//! timeline of partitions and heals. Games plug in through [`SimGame`]; a run returns a
//! [`SimReport`] with every player's per-turn state hashes and a digest of the packet trace.
//!
//! Same seed, same report: turmoil is seeded, quinn's randomness and connection ids are seeded
//! ([`phalanx::HostOptions::quic_seed`]), certificates are Ed25519 (fixed-size signatures, so
//! packet sizes never vary), and every fault draw comes from the seed. TLS still draws fresh
//! key material, so the *bytes* differ between runs; the trace digest therefore covers each
//! datagram's time, endpoints, size and fate — everything the network sees but the ciphertext.
//!
//! ```no_run
//! use phalanx_sim::{run, SimConfig, SimGame};
//! # use phalanx::{PlayerId, Turn, TypedTurn};
//! # struct MyGame;
//! # impl SimGame for MyGame {
//! #     type Command = u32;
//! #     type Setup = ();
//! #     fn new(_: PlayerId, _: u64, _: &()) -> Self { MyGame }
//! #     fn execute(&mut self, _: &TypedTurn<u32>) {}
//! #     fn state_hash(&self) -> u64 { 0 }
//! #     fn commands(&mut self, _: Turn) -> Vec<u32> { Vec::new() }
//! # }
//! let report = run::<MyGame>(SimConfig::new(42, 4)).expect("the simulation ran");
//! report.check_agreement().expect("every player reached the same states");
//! println!("rerun with seed 42; trace digest {:#x}", report.trace_digest);
//! ```
#![forbid(unsafe_code)]

mod socket;

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use phalanx::{
    Client, ClientOptions, EndReason, Host, HostIdentity, HostOptions, HostVerification,
    JoinRefusal, PlayerId, SessionConfig, Turn, TypedTurn,
};
use serde::de::DeserializeOwned;
use serde::Serialize;

pub use socket::SimSocket;

/// The fault model, shared with phalanx-mesh (re-exported from phalanx-testkit). Here a
/// node's [`LinkFaults`] apply to everything it sends, on top of [`SimConfig::latency_ms`].
pub use phalanx_testkit::{Burst, LinkFaults, Rng};

/// A timeline step, on simulated time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Step {
    /// Cut player `index` off from the host, both ways, at `at_ms`.
    Partition {
        /// When.
        at_ms: u64,
        /// Which player (client index).
        player: usize,
    },
    /// Reconnect player `index` to the host at `at_ms`.
    Repair {
        /// When.
        at_ms: u64,
        /// Which player.
        player: usize,
    },
    /// Cut only the player → host direction at `at_ms` (a half-open connection: the player
    /// still hears the host). Undone by `Repair`.
    PartitionUp {
        /// When.
        at_ms: u64,
        /// Which player.
        player: usize,
    },
    /// Crash the host's process at `at_ms` (nothing runs there afterwards).
    CrashHost {
        /// When.
        at_ms: u64,
    },
    /// Crash player `player`'s process at the first turn it executes at or after `at_ms`:
    /// it stops sending without a word, and its game state is lost. With `restart_after_ms`,
    /// a new process starts that much later, joins again with the same token, replays the
    /// rejoin's turns from a fresh game and plays on; its hashes in the report are the new
    /// process's, from turn 0. While the host still holds the seat for the dead connection
    /// (`TokenUsed`) the new process retries every 1.5 s, up to 9 times, as a real client
    /// would; any other refusal is final and lands in [`SimReport::refusals`].
    CrashClient {
        /// When.
        at_ms: u64,
        /// Which player.
        player: usize,
        /// Restart this long after the crash (`None`: never).
        restart_after_ms: Option<u64>,
    },
}

impl Step {
    fn at_ms(&self) -> u64 {
        match *self {
            Step::Partition { at_ms, .. }
            | Step::PartitionUp { at_ms, .. }
            | Step::Repair { at_ms, .. }
            | Step::CrashHost { at_ms }
            | Step::CrashClient { at_ms, .. } => at_ms,
        }
    }
}

/// A scenario.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SimConfig {
    /// The seed of everything.
    pub seed: u64,
    /// Remote players.
    pub players: usize,
    /// The session config (host and clients).
    pub session: SessionConfig,
    /// One-way latency of every link.
    pub latency_ms: u64,
    /// Faults on everything every node sends.
    pub faults: LinkFaults,
    /// Partitions and repairs.
    pub timeline: Vec<Step>,
    /// Turns every player plays before leaving.
    pub turns: u32,
    /// Simulated time limit: past it the run fails (a livelock or a stall that never ends).
    pub limit_ms: u64,
    /// Flip one bit of one player's game state right after it executes a turn:
    /// `(player, turn)` (fault-matrix row 14).
    pub desync_at: Option<(usize, u32)>,
    /// A hostile node tries this many joins with bad tokens while the game runs (row 22).
    pub flood_joins: u32,
    /// The last player is hostile in this way after it has joined (rows 17 and 19).
    pub hostile: Option<Hostile>,
    /// Sample every player's counters every this many simulated milliseconds into
    /// [`SimReport::samples`], and time each of its commands into
    /// [`SimReport::command_latencies`] (0: off, the default).
    pub samples_every_ms: u64,
}

/// How a hostile (authenticated) player misbehaves: from 3 s on, 20 extra datagrams a second
/// on its own connection, besides playing normally.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Hostile {
    /// Random bytes (never a valid message: the version byte is wrong) — row 17.
    Garbage,
    /// Well-formed client datagrams claiming to hold turn `u32::MAX` — row 19.
    SpoofedTurns,
}

impl SimConfig {
    /// `players` clients, 20 ms one way, no faults, 100 turns.
    pub fn new(seed: u64, players: usize) -> SimConfig {
        SimConfig {
            seed,
            players,
            session: SessionConfig::default(),
            latency_ms: 20,
            faults: LinkFaults::default(),
            timeline: Vec::new(),
            turns: 100,
            limit_ms: 120_000,
            desync_at: None,
            flood_joins: 0,
            hostile: None,
            samples_every_ms: 0,
        }
    }
}

/// A deterministic game, as the simulator drives it: one instance per player.
pub trait SimGame: Send + 'static {
    /// The game's command type.
    type Command: Serialize + DeserializeOwned + Send + Clone + std::fmt::Debug + 'static;
    /// What every player's game is built from besides the seed (map, unit counts...).
    type Setup: Clone + Send + 'static;
    /// The game for `player`, from the setup and the scenario seed.
    fn new(player: PlayerId, seed: u64, setup: &Self::Setup) -> Self;
    /// Executes one turn.
    fn execute(&mut self, turn: &TypedTurn<Self::Command>);
    /// The state hash (reported at check turns, recorded every turn).
    fn state_hash(&self) -> u64;
    /// Commands the player issues after executing `turn` (return an empty list most turns).
    fn commands(&mut self, turn: Turn) -> Vec<Self::Command>;
}

/// A tiny reference game for smoke-testing a network setup: its state is a hash chain over
/// every record it executed and the turn numbers, and each player issues one command every
/// `setup` turns (0: never). Equal states mean identical bundles in identical order.
#[derive(Clone, Debug)]
pub struct ChainGame {
    player: PlayerId,
    state: u64,
    every: u32,
}

impl SimGame for ChainGame {
    type Command = (u8, u32);
    type Setup = u32;

    fn new(player: PlayerId, seed: u64, every: &u32) -> Self {
        ChainGame { player, state: seed, every: *every }
    }

    fn execute(&mut self, turn: &TypedTurn<(u8, u32)>) {
        for record in &turn.records {
            let word = match record {
                phalanx::TypedRecord::Command { player, command: Ok((p, n)), .. } => {
                    u64::from(player.0) << 40 | u64::from(*p) << 32 | u64::from(*n)
                }
                phalanx::TypedRecord::Command { command: Err(_), .. } => 1,
                phalanx::TypedRecord::Joined(p) => 2 << 8 | u64::from(p.0),
                phalanx::TypedRecord::Left(p) => 3 << 8 | u64::from(p.0),
            };
            self.state = (self.state ^ word).wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.state = (self.state ^ u64::from(turn.turn.0)).wrapping_mul(0x0000_0100_0000_01b3);
    }

    fn state_hash(&self) -> u64 {
        self.state
    }

    fn commands(&mut self, turn: Turn) -> Vec<(u8, u32)> {
        if self.every != 0 && (turn.0 + u32::from(self.player.0)).is_multiple_of(self.every) {
            vec![(self.player.0, turn.0)]
        } else {
            Vec::new()
        }
    }
}

/// What a run produced.
#[derive(Clone, Debug, Default)]
pub struct SimReport {
    /// Per player: the state hash after every executed turn, in turn order.
    pub hashes: Vec<Vec<u64>>,
    /// Per player: how its session ended, if before its last turn.
    pub ended: Vec<Option<EndReason>>,
    /// Per player: commands it submitted, and commands (of anyone) it executed.
    pub submitted: Vec<u64>,
    /// See `submitted`.
    pub executed: Vec<u64>,
    /// Per player: join errors, if it could not join.
    pub join_errors: Vec<Option<String>>,
    /// Per player: the host's typed refusal, when a join was refused (after a crash: a
    /// refused rejoin).
    pub refusals: Vec<Option<JoinRefusal>>,
    /// Per player: submits the session refused (over budget, too large), which queued
    /// nothing.
    pub submit_refused: Vec<u64>,
    /// Per player: most of its commands awaiting the host's acknowledgement at once.
    pub unacked_high_water: Vec<usize>,
    /// Per player: simulated time at which its game loop ended: its last turn executed, or
    /// its session over (`None`: it never joined).
    pub finished_ms: Vec<Option<u64>>,
    /// Per player: processes started (1, or 2 after a [`Step::CrashClient`] restart).
    pub incarnations: Vec<u32>,
    /// Host events, as text, with their simulated time.
    pub host_events: Vec<(u64, String)>,
    /// A digest of every datagram's (time, source, destination, size, copies delivered).
    pub trace_digest: u64,
    /// Datagrams handed to the network, and how many copies of them the fault layer let
    /// through.
    pub datagrams: u64,
    /// See `datagrams`.
    pub copies: u64,
    /// Simulated milliseconds the run took.
    pub sim_ms: u64,
    /// Desync reports as each player met them: `(player, check turn, diverged players)`.
    pub desyncs: Vec<(usize, u32, Vec<u8>)>,
    /// Joins of the hostile flood that were refused (or failed), of `flood_joins`.
    pub flood_refused: u32,
    /// Per player: its client's command latency (submit → execute) p50, p95 and max, ms.
    pub latency_ms: Vec<Option<(u32, u32, u32)>>,
    /// Per player: bytes it sent (`.0`) and the host sent it (`.1`), as QUIC datagram payloads
    /// (UDP/IP headers not included), counting every datagram handed to the network.
    pub wire_bytes: Vec<(u64, u64)>,
    /// Per player: datagrams it sent and the host sent it.
    pub wire_datagrams: Vec<(u64, u64)>,
    /// Per player: phalanx's own bytes (before QUIC) sent and received by its client.
    pub app_bytes: Vec<(u64, u64)>,
    /// Per player: time its game waited for turns beyond their length (client stats).
    pub stall_ms: Vec<u64>,
    /// Per player, when [`SimConfig::samples_every_ms`] is set: its counters over time.
    pub samples: Vec<Vec<Sample>>,
    /// Per player, when sampling: `(simulated ms when it executed, submit → execute ms)` of
    /// each of its own commands, in execution order.
    pub command_latencies: Vec<Vec<(u64, u32)>>,
}

/// One player's counters at one moment of simulated time (all cumulative since it joined,
/// except the pace).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Sample {
    /// Simulated milliseconds since the run started.
    pub at_ms: u64,
    /// The last turn the player executed.
    pub turn: u32,
    /// Bytes the player sent and the host sent it (QUIC datagram payloads), as in
    /// [`SimReport::wire_bytes`].
    pub wire_bytes: (u64, u64),
    /// Datagrams the player sent and the host sent it.
    pub wire_datagrams: (u64, u64),
    /// phalanx's own bytes sent and received by the player's client.
    pub app_bytes: (u64, u64),
    /// Time its game waited for turns beyond their length.
    pub stall_ms: u64,
    /// The pace in force: turn length.
    pub turn_length_ms: u32,
    /// The pace in force: command delay.
    pub command_delay_turns: u32,
}

/// Collects a player's [`Sample`]s and command latencies for the report (a no-op unless
/// sampling is on).
struct Sampler {
    index: usize,
    every_ms: u64,
    next_ms: u64,
    /// Our commands not yet executed: sequence number → simulated ms at submit.
    open: std::collections::BTreeMap<u32, u64>,
}

impl Sampler {
    fn new(index: usize, every_ms: u64) -> Sampler {
        Sampler { index, every_ms, next_ms: 0, open: std::collections::BTreeMap::new() }
    }

    fn submitted(&mut self, ticket: &phalanx::Ticket) {
        if self.every_ms > 0 {
            self.open.insert(ticket.seq.0, turmoil::elapsed().as_millis() as u64);
        }
    }

    fn executed<C>(&mut self, me: PlayerId, turn: &TypedTurn<C>, report: &Mutex<SimReport>) {
        if self.every_ms == 0 {
            return;
        }
        let now = turmoil::elapsed().as_millis() as u64;
        for record in &turn.records {
            if let phalanx::TypedRecord::Command { player, seq, .. } = record {
                if let Some(at) = (*player == me).then(|| self.open.remove(&seq.0)).flatten() {
                    let latency = now.saturating_sub(at).min(u64::from(u32::MAX)) as u32;
                    let mut report = report.lock().expect("not poisoned");
                    report.command_latencies[self.index].push((now, latency));
                }
            }
        }
    }

    async fn sample<C: Serialize + DeserializeOwned>(
        &mut self,
        client: &Client<C>,
        turn: Turn,
        report: &Mutex<SimReport>,
        trace: &Mutex<Trace>,
    ) {
        let now = turmoil::elapsed().as_millis() as u64;
        if self.every_ms == 0 || now < self.next_ms {
            return;
        }
        self.next_ms = (now / self.every_ms + 1) * self.every_ms;
        let Ok(stats) = client.stats().await else { return };
        let (up, down) = flows(trace, self.index);
        let sample = Sample {
            at_ms: now,
            turn: turn.0,
            wire_bytes: (up.1, down.1),
            wire_datagrams: (up.0, down.0),
            app_bytes: (stats.link.bytes_sent, stats.link.bytes_received),
            stall_ms: stats.stall_ms,
            turn_length_ms: stats.turn_length_ms,
            command_delay_turns: stats.command_delay_turns,
        };
        report.lock().expect("not poisoned").samples[self.index].push(sample);
    }
}

/// Player `index`'s flows so far: `(datagrams, bytes)` it sent, and the host sent it.
fn flows(trace: &Mutex<Trace>, index: usize) -> ((u64, u64), (u64, u64)) {
    let mine = turmoil::lookup(format!("p{index}"));
    let host = turmoil::lookup("host");
    let trace = trace.lock().expect("not poisoned");
    let up = trace.flows.get(&(mine, host)).copied().unwrap_or_default();
    let down = trace.flows.get(&(host, mine)).copied().unwrap_or_default();
    (up, down)
}

impl SimReport {
    /// Every player that executed turn `t` holds the same state hash after it.
    pub fn check_agreement(&self) -> Result<(), String> {
        let longest = self.hashes.iter().map(Vec::len).max().unwrap_or(0);
        for turn in 0..longest {
            let mut seen =
                self.hashes.iter().enumerate().filter_map(|(p, h)| h.get(turn).map(|x| (p, *x)));
            if let Some((first, hash)) = seen.next() {
                if let Some((other, differs)) = seen.find(|&(_, h)| h != hash) {
                    return Err(format!(
                        "turn {turn}: player {first} has {hash:#x}, player {other} {differs:#x}"
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The packet trace, folded as it happens.
#[derive(Debug)]
pub(crate) struct Trace {
    digest: u64,
    datagrams: u64,
    copies: u64,
    /// (source ip, destination ip) → (datagrams, bytes).
    flows: std::collections::BTreeMap<(IpAddr, IpAddr), (u64, u64)>,
}

impl Trace {
    fn new() -> Trace {
        Trace {
            digest: 0xcbf2_9ce4_8422_2325,
            datagrams: 0,
            copies: 0,
            flows: std::collections::BTreeMap::new(),
        }
    }

    pub(crate) fn record(&mut self, from: SocketAddr, to: SocketAddr, len: usize, copies: usize) {
        let at = turmoil::elapsed().as_millis() as u64;
        let text = format!("{at} {from} {to} {len} {copies};");
        for byte in text.bytes() {
            self.digest = (self.digest ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.datagrams += 1;
        self.copies += copies as u64;
        let flow = self.flows.entry((from.ip(), to.ip())).or_default();
        flow.0 += 1;
        flow.1 += len as u64;
    }
}

/// Why a run could not complete.
#[derive(Debug)]
#[non_exhaustive]
pub enum SimError {
    /// turmoil reported an error (a node failed, or the time limit passed). The report holds
    /// what happened up to then.
    Turmoil {
        /// turmoil's message.
        error: String,
        /// The partial report.
        partial: Box<SimReport>,
    },
    /// The host's identity could not be made.
    Identity(phalanx::IdentityError),
}

impl std::fmt::Display for SimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SimError::Turmoil { error, partial } => {
                let turns: Vec<usize> = partial.hashes.iter().map(Vec::len).collect();
                write!(
                    f,
                    "simulation failed: {error} (turns per player {turns:?}, ended {:?}, join \
                     errors {:?}, host events {:?})",
                    partial.ended, partial.join_errors, partial.host_events
                )
            }
            SimError::Identity(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for SimError {}

const HOST_PORT: u16 = 4_433;

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

fn node_seed(seed: u64, node: u64) -> u64 {
    let mut rng = Rng::new(seed ^ node.wrapping_mul(0xA24B_AED4_963E_E407));
    rng.next_u64()
}

fn quic_seed(seed: u64, node: u64) -> [u8; 32] {
    let mut rng = Rng::new(node_seed(seed, node));
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
    let fingerprint = identity.fingerprint();
    let (cert, key) = (identity.cert_der().to_vec(), identity.key_der().to_vec());
    let report = Arc::new(Mutex::new(SimReport {
        hashes: vec![Vec::new(); config.players],
        ended: vec![None; config.players],
        submitted: vec![0; config.players],
        executed: vec![0; config.players],
        join_errors: vec![None; config.players],
        refusals: vec![None; config.players],
        incarnations: vec![0; config.players],
        submit_refused: vec![0; config.players],
        unacked_high_water: vec![0; config.players],
        finished_ms: vec![None; config.players],
        latency_ms: vec![None; config.players],
        wire_bytes: vec![(0, 0); config.players],
        wire_datagrams: vec![(0, 0); config.players],
        app_bytes: vec![(0, 0); config.players],
        stall_ms: vec![0; config.players],
        samples: vec![Vec::new(); config.players],
        command_latencies: vec![Vec::new(); config.players],
        ..SimReport::default()
    }));
    let trace = Arc::new(Mutex::new(Trace::new()));
    let mut sim = turmoil::Builder::new()
        .rng_seed(config.seed)
        .simulation_duration(Duration::from_millis(config.limit_ms))
        .tick_duration(Duration::from_millis(1))
        .min_message_latency(Duration::from_millis(config.latency_ms))
        .max_message_latency(Duration::from_millis(config.latency_ms))
        .udp_capacity(4_096)
        .build();

    let tokens: Vec<u64> = (0..config.players as u64).map(|i| 100 + i).collect();
    {
        let (config, trace, report, tokens) =
            (config.clone(), trace.clone(), report.clone(), tokens.clone());
        sim.host("host", move || {
            let (config, trace, report, tokens) =
                (config.clone(), trace.clone(), report.clone(), tokens.clone());
            let (cert, key) = (cert.clone(), key.clone());
            async move {
                let bind = SocketAddr::from((IpAddr::from([0, 0, 0, 0]), HOST_PORT));
                let socket =
                    SimSocket::bind("host", bind, config.faults, node_seed(config.seed, 0), trace)
                        .await?;
                let mut options =
                    HostOptions::new(HostIdentity::from_der(cert, key), bind, tokens.clone());
                options.session = config.session.clone();
                options.socket = Some(socket);
                options.quic_seed = Some(quic_seed(config.seed, 0));
                options.reset_key = Some([7; 32]);
                let mut host: Host<G::Command> =
                    Host::bind(options).await.map_err(|e| e.to_string())?;
                let mut joined = 0;
                let mut started = false;
                loop {
                    while let Some(event) = host.try_event() {
                        if matches!(event, phalanx::HostEvent::PlayerJoined(_)) {
                            joined += 1;
                        }
                        let at = turmoil::elapsed().as_millis() as u64;
                        report
                            .lock()
                            .expect("not poisoned")
                            .host_events
                            .push((at, format!("{event:?}")));
                    }
                    // Start when everyone is in, or once joining has had 20 s (a player whose
                    // joins all failed is reported in `join_errors`, not waited for forever).
                    let late = turmoil::elapsed() >= Duration::from_secs(20);
                    if !started && (joined == config.players || late && joined > 0) {
                        host.start().await.map_err(|e| e.to_string())?;
                        started = true;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        });
    }

    for (index, &token) in tokens.iter().enumerate() {
        let (config, report, trace) = (config.clone(), report.clone(), trace.clone());
        let setup = setup.clone();
        sim.client(format!("p{index}"), async move {
            let host_ip = turmoil::lookup("host");
            let addr = SocketAddr::from((host_ip, HOST_PORT));
            let node = index as u64 + 1;
            let crash = config.timeline.iter().find_map(|step| match *step {
                Step::CrashClient { at_ms, player, restart_after_ms } if player == index => {
                    Some((at_ms, restart_after_ms))
                }
                _ => None,
            });
            // Each pass is one process of this player; a crash with a restart starts another.
            let mut incarnation = 0u64;
            'process: loop {
                report.lock().expect("not poisoned").incarnations[index] += 1;
                // A real game retries a failed join; so does the simulated player, three times.
                let mut attempt = 0u64;
                let mut client: Client<G::Command> = loop {
                    let port = 5_000 + (attempt + 10 * incarnation) as u16;
                    let bind = SocketAddr::from((IpAddr::from([0, 0, 0, 0]), port));
                    let seed = node_seed(config.seed, node + 100 * (attempt + 10 * incarnation));
                    let name = format!("p{index}");
                    let socket =
                        SimSocket::bind(&name, bind, config.faults, seed, trace.clone()).await?;
                    let mut options =
                        ClientOptions::new(token, HostVerification::Pinned(fingerprint));
                    options.session = config.session.clone();
                    options.socket = Some(socket);
                    options.quic_seed =
                        Some(quic_seed(config.seed, node + 100 * (attempt + 10 * incarnation)));
                    match Client::connect(addr, options).await {
                        Ok(client) => break client,
                        // A restarted process may find its seat still held: the host has not
                        // timed the dead connection out yet (it is given the join grace if it
                        // crashed before being heard). Like a real client, wait and retry.
                        Err(error)
                            if incarnation > 0
                                && attempt < 9
                                && error.refusal() == Some(JoinRefusal::TokenUsed) =>
                        {
                            attempt += 1;
                            tokio::time::sleep(Duration::from_millis(1_500)).await;
                        }
                        Err(error) if attempt == 2 || error.refusal().is_some() => {
                            let mut report = report.lock().expect("not poisoned");
                            report.refusals[index] = error.refusal();
                            report.join_errors[index] = Some(error.to_string());
                            return Ok(());
                        }
                        Err(_) => attempt += 1,
                    }
                };
                if let Some(mode) = config.hostile.filter(|_| index + 1 == config.players) {
                    // From 3 s on, 20 bad datagrams a second, whatever the game does.
                    let sender = client.dangerous_raw_datagram_sender();
                    let mut rng = Rng::new(node_seed(config.seed, 50_000 + node));
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
                let mut game = G::new(client.player(), config.seed, &setup);
                let interval = config.session.sync_interval_turns.max(1);
                let mut flipped = 0u64;
                let mut sampler = Sampler::new(index, config.samples_every_ms);
                let crash_now = |incarnation: u64| {
                    crash.filter(|&(at_ms, _)| {
                        incarnation == 0 && turmoil::elapsed().as_millis() as u64 >= at_ms
                    })
                };
                while let Some(turn) = client.next_turn().await {
                    if let Some((_, restart)) = crash_now(incarnation) {
                        // The process dies: nothing more leaves it (the partition stands in for
                        // a dead socket), and its game and session are gone.
                        let name = format!("p{index}");
                        turmoil::partition("host", name.as_str());
                        drop(client);
                        drop(game);
                        let Some(after) = restart else { return Ok(()) };
                        tokio::time::sleep(Duration::from_millis(after)).await;
                        turmoil::repair("host", name.as_str());
                        {
                            let mut report = report.lock().expect("not poisoned");
                            report.hashes[index].clear();
                            report.executed[index] = 0;
                        }
                        incarnation += 1;
                        continue 'process;
                    }
                    game.execute(&turn);
                    sampler.executed(client.player(), &turn, &report);
                    if config.desync_at == Some((index, turn.turn.0)) {
                        flipped = 1;
                    }
                    let hash = game.state_hash() ^ flipped;
                    while let Some(event) = client.try_event() {
                        if let phalanx::ClientEvent::Desync(desync) = event {
                            let diverged = desync.diverged.iter().map(|p| p.0).collect();
                            report.lock().expect("not poisoned").desyncs.push((
                                index,
                                desync.turn.0,
                                diverged,
                            ));
                        }
                    }
                    let executed = turn
                        .records
                        .iter()
                        .filter(|r| matches!(r, phalanx::TypedRecord::Command { .. }))
                        .count() as u64;
                    {
                        let mut report = report.lock().expect("not poisoned");
                        report.hashes[index].push(hash);
                        report.executed[index] += executed;
                    }
                    if turn.turn.0 % interval == 0 {
                        let _ = client.report_state_hash(turn.turn, hash).await;
                    }
                    sampler.sample(&client, turn.turn, &report, &trace).await;
                    if turn.turn.0 + 1 >= config.turns {
                        break;
                    }

                    for command in game.commands(turn.turn) {
                        let submitted = client.submit(&command).await;
                        if let Ok(ticket) = &submitted {
                            sampler.submitted(ticket);
                        }
                        let mut report = report.lock().expect("not poisoned");
                        match submitted {
                            Ok(_) => report.submitted[index] += 1,
                            Err(_) => report.submit_refused[index] += 1,
                        }
                    }
                }
                let stats = client.stats().await.ok();
                {
                    let mut report = report.lock().expect("not poisoned");
                    report.finished_ms[index] = Some(turmoil::elapsed().as_millis() as u64);
                    if let Some(stats) = &stats {
                        report.unacked_high_water[index] = stats.commands_unacked_high_water;
                    }
                    report.ended[index] = client.ended();
                    if let Some(stats) = &stats {
                        report.app_bytes[index] =
                            (stats.link.bytes_sent, stats.link.bytes_received);
                        report.stall_ms[index] = stats.stall_ms;
                    }
                    report.latency_ms[index] = stats.and_then(|s| {
                        Some((s.latency_ms_p50?, s.latency_ms_p95?, s.latency_ms_max?))
                    });
                    let (up, down) = flows(&trace, index);
                    report.wire_datagrams[index] = (up.0, down.0);
                    report.wire_bytes[index] = (up.1, down.1);
                }
                // Stay a little so the last acknowledgements reach the host.
                tokio::time::sleep(Duration::from_millis(500)).await;
                client.shutdown().await;
                return Ok(());
            }
        });
    }

    if config.flood_joins > 0 {
        let (config, report, trace) = (config.clone(), report.clone(), trace.clone());
        sim.client("flood", async move {
            let addr = SocketAddr::from((turmoil::lookup("host"), HOST_PORT));
            tokio::time::sleep(Duration::from_millis(1_000)).await;
            for attempt in 0..config.flood_joins {
                let bind = SocketAddr::from((
                    IpAddr::from([0, 0, 0, 0]),
                    6_000 + (attempt % 50_000) as u16,
                ));
                let seed = node_seed(config.seed, 10_000 + u64::from(attempt));
                let socket =
                    SimSocket::bind("flood", bind, LinkFaults::default(), seed, trace.clone())
                        .await?;
                let mut options = ClientOptions::new(
                    u64::MAX - u64::from(attempt),
                    HostVerification::Pinned(fingerprint),
                );
                options.session = config.session.clone();
                options.socket = Some(socket);
                options.quic_seed = Some(quic_seed(config.seed, 10_000 + u64::from(attempt)));
                match Client::<G::Command>::connect(addr, options).await {
                    Ok(client) => client.shutdown().await,
                    Err(_) => report.lock().expect("not poisoned").flood_refused += 1,
                }
            }
            Ok(())
        });
    }

    {
        let timeline: Vec<Step> = config
            .timeline
            .iter()
            .copied()
            .filter(|s| !matches!(s, Step::CrashHost { .. } | Step::CrashClient { .. }))
            .collect();
        sim.client("director", async move {
            let mut steps = timeline;
            steps.sort_by_key(Step::at_ms);
            for step in steps {
                let (at_ms, player) = match step {
                    Step::Partition { at_ms, player }
                    | Step::PartitionUp { at_ms, player }
                    | Step::Repair { at_ms, player } => (at_ms, player),
                    Step::CrashHost { .. } | Step::CrashClient { .. } => continue,
                };
                let now = turmoil::elapsed().as_millis() as u64;
                tokio::time::sleep(Duration::from_millis(at_ms.saturating_sub(now))).await;
                let node = format!("p{player}");
                match step {
                    Step::Partition { .. } => turmoil::partition("host", node.as_str()),
                    Step::PartitionUp { .. } => turmoil::partition_oneway(node.as_str(), "host"),
                    _ => turmoil::repair("host", node.as_str()),
                }
            }
            Ok(())
        });
    }

    // Step by hand so host crashes happen at their simulated time.
    let mut crashes: Vec<u64> = config
        .timeline
        .iter()
        .filter(|s| matches!(s, Step::CrashHost { .. }))
        .map(Step::at_ms)
        .collect();
    crashes.sort_unstable();
    let mut crashes = crashes.into_iter().peekable();
    let finish = |report: &Arc<Mutex<SimReport>>, sim_ms: u64| {
        let mut report = report.lock().expect("not poisoned").clone();
        let trace = trace.lock().expect("not poisoned");
        report.trace_digest = trace.digest;
        report.datagrams = trace.datagrams;
        report.copies = trace.copies;
        report.sim_ms = sim_ms;
        report
    };
    loop {
        let done = match sim.step() {
            Ok(done) => done,
            Err(error) => {
                let partial = Box::new(finish(&report, sim.elapsed().as_millis() as u64));
                return Err(SimError::Turmoil { error: error.to_string(), partial });
            }
        };
        if done {
            break;
        }
        if crashes.peek().is_some_and(|&at| sim.elapsed().as_millis() as u64 >= at) {
            crashes.next();
            sim.crash("host");
        }
    }
    Ok(finish(&report, sim.elapsed().as_millis() as u64))
}
