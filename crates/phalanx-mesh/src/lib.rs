//! An in-memory, seeded, single-threaded network that drives one phalanx-proto [`Host`] and N
//! [`Client`]s on a virtual clock — layer L1 of the fault matrix.
//!
//! Every random draw comes from one seed (SplitMix64), every loop is bounded, and nothing
//! reads a real clock, so a seed is a complete description of a run: rerun it and you get the
//! same trace digest. Per link and direction it can add latency and jitter (reordering),
//! independent and Gilbert–Elliott burst loss, duplication and corruption; partitions cut a
//! client off one way or both for a time window; after `heal_at_ms` the network is clean (the
//! liveness phase). Each player runs a tiny reference game whose state is a hash chain of the
//! bundles it executed, and whose commands encode `(player, seq)` so a misattributed command
//! is caught.
//!
//! ```
//! use phalanx_mesh::{Mesh, MeshConfig};
//!
//! let mut config = MeshConfig::new(42, 3);
//! config.end_ms = 10_000;
//! config.submit_until_ms = 8_000; // leave time for the last commands to execute
//! let mut mesh = Mesh::new(config).unwrap();
//! mesh.run().unwrap();
//! mesh.check_agreement().unwrap();
//! mesh.check_exactly_once().unwrap();
//! assert!(mesh.games[0].digests.len() > 40);
//! ```

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use phalanx_proto::{
    Client, ClientEvent, CommandSeq, DesyncReport, EndReason, Host, HostEvent, PlayerId, Record,
    SessionConfig, SubmitError, Turn, TurnBundle,
};

pub use phalanx_testkit::{ensure, for_each_seed, seeded_test, seeds, Burst, LinkFaults, Rng};

use phalanx_testkit::BurstState;

pub mod peers;

/// Which way a partition cuts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Client to host only.
    Up,
    /// Host to client only.
    Down,
    /// Both ways.
    Both,
}

/// A client cut off from the host for a time window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Partition {
    /// The client index.
    pub client: usize,
    /// Start of the cut (virtual ms).
    pub from_ms: u64,
    /// End of the cut.
    pub until_ms: u64,
    /// Which way.
    pub direction: Direction,
}

/// A mesh scenario.
#[derive(Clone, Debug)]
pub struct MeshConfig {
    /// The seed of every random draw.
    pub seed: u64,
    /// Remote clients.
    pub clients: usize,
    /// Whether the host also plays (a listen server).
    pub host_plays: bool,
    /// The host's session config (clients use it for their local settings too).
    pub session: SessionConfig,
    /// Faults per client: `(up, down)`.
    pub links: Vec<(LinkFaults, LinkFaults)>,
    /// Partitions.
    pub partitions: Vec<Partition>,
    /// Each player submits a command every `min..=max` ms (uniform).
    pub command_interval_ms: (u64, u64),
    /// Clients that never submit (for example, a connection a test uses to inject input).
    pub passive: Vec<usize>,
    /// Commands per submission (a burst).
    pub commands_per_submit: u32,
    /// Command payload size (at least 5: player and sequence are encoded in it).
    pub command_bytes: usize,
    /// No submissions after this time (the quiesce phase).
    pub submit_until_ms: u64,
    /// Loss, duplication, corruption and partitions stop here; latency and jitter remain.
    pub heal_at_ms: u64,
    /// The run ends here.
    pub end_ms: u64,
    /// A bound on loop iterations: exceeding it is a livelock, reported as an error.
    pub steps_max: u64,
    /// Extra one-way latency on every link during a time window: `(from_ms, until_ms, extra_ms)`.
    pub spikes: Vec<(u64, u64, u64)>,
    /// Flip one bit of one game's state right after it executes a turn: `(game, turn)`.
    pub desync_at: Option<(usize, u32)>,
    /// A game that reports false state hashes.
    pub liar: Option<usize>,
    /// Games that execute at most one turn per this many ms (a slow machine), and report
    /// that as their turn cost: `(game, ms per turn)`.
    pub slow: Vec<(usize, u64)>,
    /// Games that execute nothing during a window (a CPU stall): `(game, from_ms, until_ms)`.
    pub frozen: Vec<(usize, u64, u64)>,
    /// Lag switches: every datagram client `client` sends to the host during a window is
    /// held and released at its end, then delayed as the link delays any:
    /// `(client, from_ms, until_ms)`.
    pub lag_switches: Vec<(usize, u64, u64)>,
    /// Per-client local clocks: `(offset_ms, rate_permille_delta)` — the client sees
    /// `10 h + offset + now × (1000 + delta) / 1000`. Missing entries: no skew.
    pub clocks: Vec<(i64, i64)>,
    /// Pause (`true`) or resume requests: `(at_ms, client, pause)`.
    pub pause_requests: Vec<(u64, usize, bool)>,
    /// Have the host record a replay.
    pub record_replay: bool,
    /// Timer wake-ups are late by up to this much (uniform, drawn per wake-up), as an OS
    /// timer or a frame loop is: a session asking to be woken at `t` is woken at `t` plus the
    /// lateness, and reads that time as `now`. 0 (the default): exact virtual time.
    pub wake_lateness_ms: u64,
}

impl MeshConfig {
    /// A clean network of `clients` clients with 20 ms latency, commands every 1.5–2 s
    /// (AoE's measured rate), 30 s of play with the last 5 s quiet.
    pub fn new(seed: u64, clients: usize) -> Self {
        let link = LinkFaults { latency_ms: 20, ..LinkFaults::default() };
        MeshConfig {
            seed,
            clients,
            host_plays: false,
            session: SessionConfig::default(),
            links: vec![(link, link); clients],
            partitions: Vec::new(),
            command_interval_ms: (1_500, 2_000),
            passive: Vec::new(),
            commands_per_submit: 1,
            command_bytes: 12,
            submit_until_ms: 25_000,
            heal_at_ms: 25_000,
            end_ms: 30_000,
            steps_max: 10_000_000,
            spikes: Vec::new(),
            desync_at: None,
            liar: None,
            slow: Vec::new(),
            frozen: Vec::new(),
            lag_switches: Vec::new(),
            clocks: Vec::new(),
            pause_requests: Vec::new(),
            record_replay: false,
            wake_lateness_ms: 0,
        }
    }

    /// The same faults on every client's link, both directions.
    pub fn with_faults(mut self, faults: LinkFaults) -> Self {
        self.links = vec![(faults, faults); self.clients];
        self
    }

    /// Cuts client `client` off from the host, `direction` only, from `from_ms` until
    /// `until_ms` (`u64::MAX`: for good).
    pub fn cut(&mut self, client: usize, from_ms: u64, until_ms: u64, direction: Direction) {
        self.partitions.push(Partition { client, from_ms, until_ms, direction });
    }
}

/// A player's reference game: a hash chain of everything it executed.
#[derive(Clone, Debug)]
pub struct Game {
    /// The player.
    pub player: PlayerId,
    /// The chained state hash.
    pub state: u64,
    /// `digests[t]`: digest of the bundle executed at turn `t`.
    pub digests: Vec<u64>,
    /// When each turn was executed (virtual ms).
    pub executed_at_ms: Vec<u64>,
    /// The turn length in force when each turn was executed (it changes with `Pace` records,
    /// from the turn after the one carrying them).
    pub turn_length_ms: Vec<u32>,
    current_turn_length_ms: u32,
    /// Every `(player, seq)` executed, in order, with its turn.
    pub executed: Vec<(PlayerId, CommandSeq, Turn)>,
    /// Our submitted commands: seq → (stamped turn, submit time).
    pub submitted: BTreeMap<CommandSeq, (Turn, u64)>,
    /// Submit → execute latency of our own commands: `(submitted at, latency)`, virtual ms.
    pub latencies_ms: Vec<(u64, u64)>,
    /// Submissions refused, by error.
    pub refused: Vec<SubmitError>,
    /// Commands whose payload did not match the player and sequence they were attributed to.
    pub misattributed: u64,
    /// Turns at which each player was seen to join or leave.
    pub membership: Vec<(Turn, Record)>,
    /// How the session ended for this game, if it did.
    pub ended: Option<EndReason>,
    next_submit_ms: u64,
}

impl Game {
    fn new(player: PlayerId, first_submit_ms: u64, turn_length_ms: u32) -> Self {
        Game {
            player,
            state: 0xcbf2_9ce4_8422_2325,
            digests: Vec::new(),
            executed_at_ms: Vec::new(),
            turn_length_ms: Vec::new(),
            current_turn_length_ms: turn_length_ms,
            executed: Vec::new(),
            submitted: BTreeMap::new(),
            latencies_ms: Vec::new(),
            refused: Vec::new(),
            misattributed: 0,
            membership: Vec::new(),
            ended: None,
            next_submit_ms: first_submit_ms,
        }
    }

    fn execute(&mut self, now_ms: u64, bundle: &TurnBundle) {
        let digest = bundle.digest();
        self.state = fnv(self.state, &digest.to_le_bytes());
        self.digests.push(digest);
        self.executed_at_ms.push(now_ms);
        self.turn_length_ms.push(self.current_turn_length_ms);
        for record in &bundle.records {
            match record {
                Record::Command { player, seq, payload } => {
                    if decode_payload(payload) != Some((*player, *seq)) {
                        self.misattributed += 1;
                    }
                    self.executed.push((*player, *seq, bundle.turn));
                    if *player == self.player {
                        if let Some(&(_, at)) = self.submitted.get(seq) {
                            self.latencies_ms.push((at, now_ms - at));
                        }
                    }
                }
                Record::Pace(pace) => self.current_turn_length_ms = pace.turn_length_ms,
                other => self.membership.push((bundle.turn, other.clone())),
            }
        }
    }
}

/// The payload of the reference game's commands: the player and sequence, then filler.
pub fn encode_payload(player: PlayerId, seq: CommandSeq, len: usize) -> Vec<u8> {
    let mut payload = Vec::with_capacity(len.max(5));
    payload.push(player.0);
    payload.extend_from_slice(&seq.0.to_le_bytes());
    payload.resize(len.max(5), 0xA5);
    payload
}

fn decode_payload(payload: &[u8]) -> Option<(PlayerId, CommandSeq)> {
    let seq = payload.get(1..5)?;
    Some((PlayerId(*payload.first()?), CommandSeq(u32::from_le_bytes(seq.try_into().ok()?))))
}

fn fnv(mut hash: u64, bytes: &[u8]) -> u64 {
    for &byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// Every client clock reads at least this much: offsets of ±1 h stay positive.
const CLOCK_BASE_MS: i64 = 36_000_000;

/// Client `client`'s local clock at virtual time `now`.
fn to_local(config: &MeshConfig, client: usize, now: u64) -> u64 {
    let (offset, delta) = config.clocks.get(client).copied().unwrap_or((0, 0));
    (CLOCK_BASE_MS + offset + now as i64 * (1000 + delta) / 1000).max(0) as u64
}

/// The first virtual time at which client `client`'s clock reads at least `local`.
fn to_global(config: &MeshConfig, client: usize, local: u64) -> u64 {
    let (offset, delta) = config.clocks.get(client).copied().unwrap_or((0, 0));
    let since = local as i64 - CLOCK_BASE_MS - offset;
    if since <= 0 {
        0
    } else {
        let rate = 1000 + delta;
        ((since * 1000 + rate - 1) / rate) as u64
    }
}

/// A lie a dishonest game tells about its state at a turn: consistent, and never the truth.
fn lie(state: u64) -> u64 {
    state.rotate_left(7) ^ 0x5eed_5eed_5eed_5eed | 1
}

/// Where a datagram goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Dest {
    /// To the host, from client `i`'s connection.
    Host(usize),
    /// To client `i`.
    Client(usize),
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct InFlight {
    at_ms: u64,
    seq: u64,
    dest: Dest,
    bytes: Vec<u8>,
    /// Both copies of a duplicated datagram share an id: only the first to arrive is news.
    twin: Option<u64>,
}

/// What went wrong in a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MeshError {
    /// The session config was refused.
    Config(phalanx_proto::ConfigError),
    /// A join failed.
    Join(String),
    /// The loop ran `steps_max` iterations: something spins without progress.
    Livelock {
        /// Virtual time when it was stopped.
        now_ms: u64,
    },
}

impl std::fmt::Display for MeshError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MeshError::Config(error) => write!(f, "config: {error}"),
            MeshError::Join(error) => write!(f, "join: {error}"),
            MeshError::Livelock { now_ms } => write!(f, "livelock at {now_ms} ms"),
        }
    }
}

impl std::error::Error for MeshError {}

/// The network and its sessions.
pub struct Mesh {
    /// Virtual time.
    pub now_ms: u64,
    /// The host.
    pub host: Host,
    /// The clients, by index.
    pub clients: Vec<Client>,
    /// One game per client (same index), then the host's own game if it plays.
    pub games: Vec<Game>,
    /// Host events seen, with their time.
    pub host_events: Vec<(u64, HostEvent)>,
    /// Desync reports as each game met them: `(game, turn being executed, report)`.
    pub desyncs_seen: Vec<(usize, Turn, DesyncReport)>,
    /// `Waiting` notices as each client got them: `(time, client, players)`.
    pub waiting_seen: Vec<(u64, usize, Vec<PlayerId>)>,
    next_exec_ms: Vec<u64>,
    last_pause_check_ms: u64,
    /// Client events seen: `(time, client, event)`.
    pub client_events: Vec<(u64, usize, ClientEvent)>,
    /// Datagrams dropped by the fault layer.
    pub dropped: u64,
    /// Datagrams duplicated by the fault layer.
    pub duplicated: u64,
    /// Datagrams corrupted by the fault layer.
    pub corrupted: u64,
    /// A digest of every delivery (time, destination, bytes): equal runs have equal digests.
    pub trace_digest: u64,
    /// Bytes delivered upstream (client → host) and downstream, application payload only.
    pub bytes_up: u64,
    /// See `bytes_up`.
    pub bytes_down: u64,
    /// For every idle-timeout decision — the host timing a player out, or a client ending with
    /// `HostLost` — `(client, silence_ms)`: how long that side had really received nothing new
    /// from the other when it decided (the second copy of a duplicated datagram is not news). A correct idle timer never decides below its timeout.
    pub timeout_silences: Vec<(usize, u64)>,
    /// Per client and direction (`[up, down]`), the longest time between deliveries so far,
    /// not counting the silence still running (see [`Mesh::longest_silence_ms`]).
    longest_silence_ms: Vec<[u64; 2]>,
    last_delivery_ms: Vec<[u64; 2]>,
    /// Duplicated datagrams one copy of which has arrived (bounded by those in flight).
    twins_delivered: BTreeSet<u64>,
    config: MeshConfig,
    rng: Rng,
    game_rng: Rng,
    queue: BinaryHeap<Reverse<InFlight>>,
    next_seq: u64,
    burst: Vec<[BurstState; 2]>,
    player_client: BTreeMap<PlayerId, usize>,
    steps: u64,
    /// With `wake_lateness_ms`: per session (the host, then each client), the deadline it
    /// asked for and the (global) time the mesh wakes it.
    wakes: Vec<Option<(u64, u64)>>,
}

impl Mesh {
    /// Builds the session: the host, every client joined (over a reliable path, as a QUIC
    /// stream would be), and the game started at time 0.
    pub fn new(config: MeshConfig) -> Result<Mesh, MeshError> {
        let tokens: Vec<u64> = (0..config.clients as u64).map(|i| 1_000 + i).collect();
        let mut host = Host::new(config.session.clone(), &tokens).map_err(MeshError::Config)?;
        let mut game_rng = Rng::new(config.seed ^ 0x6A09_E667_F3BC_C908);
        let first_submit = |rng: &mut Rng| {
            config.command_interval_ms.0 + rng.below(config.command_interval_ms.1 + 1)
        };
        let mut clients = Vec::with_capacity(config.clients);
        let mut games = Vec::with_capacity(config.clients + 1);
        let mut player_client = BTreeMap::new();
        let host_player = if config.host_plays {
            Some(host.add_local_player().map_err(|e| MeshError::Join(e.to_string()))?)
        } else {
            None
        };
        for (index, &token) in tokens.iter().enumerate() {
            let (mut client, request) =
                Client::new(config.session.clone(), token).map_err(MeshError::Config)?;
            let response = host.handle_join(0, &request);
            let reply = response.reply.ok_or_else(|| MeshError::Join("no reply".into()))?;
            let player = client
                .handle_join_reply(to_local(&config, index, 0), &reply)
                .map_err(|e| MeshError::Join(e.to_string()))?
                .player()
                .ok_or_else(|| MeshError::Join("seated as a spectator".into()))?;
            if let Some(&(_, ms)) = config.slow.iter().find(|(game, _)| *game == index) {
                client.report_turn_cost(ms as u32);
            }
            player_client.insert(player, index);
            games.push(Game::new(
                player,
                first_submit(&mut game_rng),
                config.session.turns.length_ms,
            ));
            clients.push(client);
        }
        if let Some(player) = host_player {
            games.push(Game::new(
                player,
                first_submit(&mut game_rng),
                config.session.turns.length_ms,
            ));
        }
        host.start(0);
        if config.record_replay {
            host.start_recording(config.seed, 1_000_000);
        }
        Ok(Mesh {
            now_ms: 0,
            host,
            clients,
            games,
            host_events: Vec::new(),
            desyncs_seen: Vec::new(),
            waiting_seen: Vec::new(),
            next_exec_ms: vec![0; config.clients + 1],
            last_pause_check_ms: 0,
            client_events: Vec::new(),
            dropped: 0,
            duplicated: 0,
            corrupted: 0,
            trace_digest: 0xcbf2_9ce4_8422_2325,
            bytes_up: 0,
            bytes_down: 0,
            timeout_silences: Vec::new(),
            longest_silence_ms: vec![[0; 2]; config.clients],
            last_delivery_ms: vec![[0; 2]; config.clients],
            twins_delivered: BTreeSet::new(),
            rng: Rng::new(config.seed),
            game_rng,
            queue: BinaryHeap::new(),
            next_seq: 0,
            burst: vec![[BurstState::default(); 2]; config.clients],
            player_client,
            steps: 0,
            wakes: vec![None; config.clients + 1],
            config,
        })
    }

    /// The host's own game, when it plays (`MeshConfig::host_plays`).
    pub fn host_game(&self) -> Option<&Game> {
        self.games.get(self.clients.len())
    }

    /// The scenario.
    pub fn config(&self) -> &MeshConfig {
        &self.config
    }

    /// Runs to `end_ms`.
    pub fn run(&mut self) -> Result<(), MeshError> {
        self.run_until(self.config.end_ms)
    }

    /// Builds and runs a scenario to its end, then checks what every scenario must hold:
    /// S1 ([`check_agreement`](Self::check_agreement)), S2
    /// ([`check_exactly_once`](Self::check_exactly_once)) and no false drops
    /// ([`check_no_false_drops`](Self::check_no_false_drops)).
    pub fn run_checked(config: MeshConfig) -> Result<Mesh, String> {
        let mut mesh = Mesh::new(config).map_err(|e| e.to_string())?;
        mesh.run().map_err(|e| e.to_string())?;
        mesh.check_agreement()?;
        mesh.check_exactly_once()?;
        mesh.check_no_false_drops()?;
        Ok(mesh)
    }

    /// Runs until virtual time `until_ms`.
    pub fn run_until(&mut self, until_ms: u64) -> Result<(), MeshError> {
        loop {
            self.refresh_wakes();
            let next = self.next_event_ms();
            match next {
                Some(at) if at <= until_ms => self.now_ms = self.now_ms.max(at),
                _ => {
                    self.now_ms = self.now_ms.max(until_ms);
                    return Ok(());
                }
            }
            self.steps += 1;
            if self.steps > self.config.steps_max {
                return Err(MeshError::Livelock { now_ms: self.now_ms });
            }
            self.step();
        }
    }

    fn submitting(&self, game: &Game) -> bool {
        game.ended.is_none() && self.now_ms < self.config.submit_until_ms
    }

    /// Each session's timer deadline, in global time: the host's, then each client's.
    fn deadlines(&self) -> impl Iterator<Item = Option<u64>> + '_ {
        let clients = self.clients.iter().enumerate().map(|(index, client)| {
            client.poll_timeout().map(|local| to_global(&self.config, index, local))
        });
        std::iter::once(self.host.poll_timeout()).chain(clients)
    }

    /// With `wake_lateness_ms`, draws when each session whose deadline changed is woken.
    fn refresh_wakes(&mut self) {
        let lateness = self.config.wake_lateness_ms;
        if lateness == 0 {
            return;
        }
        let deadlines: Vec<Option<u64>> = self.deadlines().collect();
        for (session, deadline) in deadlines.into_iter().enumerate() {
            self.wakes[session] = match (deadline, self.wakes[session]) {
                (Some(deadline), Some((asked, wake))) if asked == deadline => Some((asked, wake)),
                (Some(deadline), _) => Some((deadline, deadline + self.rng.below(lateness + 1))),
                (None, _) => None,
            };
        }
    }

    /// Whether session `session` (0: the host, then each client) is due at global `now`.
    fn is_woken(&self, session: usize, now: u64) -> bool {
        if self.config.wake_lateness_ms == 0 {
            return match session {
                0 => self.host.poll_timeout().is_some_and(|at| at <= now),
                _ => {
                    let local = to_local(&self.config, session - 1, now);
                    self.clients[session - 1].poll_timeout().is_some_and(|at| at <= local)
                }
            };
        }
        self.wakes[session].is_some_and(|(_, wake)| wake <= now)
    }

    fn next_event_ms(&self) -> Option<u64> {
        let deliveries = self.queue.peek().map(|Reverse(flight)| flight.at_ms);
        // The sessions' timers: when each asked to be woken, or with `wake_lateness_ms` when
        // the mesh will wake it.
        let timers = if self.config.wake_lateness_ms == 0 {
            self.deadlines().flatten().min()
        } else {
            self.wakes.iter().flatten().map(|&(_, wake)| wake).min()
        };
        let slow = self
            .config
            .slow
            .iter()
            .map(|&(game, _)| self.next_exec_ms[game])
            .filter(|&at| at > self.now_ms);
        let thaws =
            self.config.frozen.iter().map(|&(_, _, until)| until).filter(|&at| at > self.now_ms);
        let pauses = self
            .config
            .pause_requests
            .iter()
            .map(|&(at, _, _)| at)
            .filter(|&at| at > self.last_pause_check_ms || self.now_ms == 0 && at == 0);
        let submits = self
            .games
            .iter()
            .enumerate()
            .filter(|(index, game)| game.ended.is_none() && !self.config.passive.contains(index))
            .map(|(_, game)| game)
            .map(|game| game.next_submit_ms)
            .filter(|&at| at < self.config.submit_until_ms);
        deliveries
            .into_iter()
            .chain(timers)
            .chain(submits)
            .chain(slow)
            .chain(thaws)
            .chain(pauses)
            .min()
    }

    fn step(&mut self) {
        let now = self.now_ms;
        while self.queue.peek().is_some_and(|Reverse(flight)| flight.at_ms <= now) {
            let Some(Reverse(flight)) = self.queue.pop() else {
                break;
            };
            self.deliver(flight);
        }
        if self.is_woken(0, now) {
            self.host.handle_timeout(now);
        }
        for index in 0..self.clients.len() {
            if self.is_woken(index + 1, now) {
                let local = to_local(&self.config, index, now);
                self.clients[index].handle_timeout(local);
            }
        }
        for &(at, client, pause) in &self.config.pause_requests {
            if at > self.last_pause_check_ms && at <= now || now == 0 && at == 0 {
                if pause {
                    self.clients[client].request_pause();
                } else {
                    self.clients[client].request_resume();
                }
            }
        }
        self.last_pause_check_ms = now;
        self.submit_due();
        self.transmit();
        self.execute();
        self.collect_events();
    }

    fn deliver(&mut self, flight: InFlight) {
        self.trace_digest = fnv(self.trace_digest, &flight.at_ms.to_le_bytes());
        let dest_tag = match flight.dest {
            Dest::Host(index) => index as u64,
            Dest::Client(index) => (1 << 32) | index as u64,
        };
        self.trace_digest = fnv(self.trace_digest, &dest_tag.to_le_bytes());
        self.trace_digest = fnv(self.trace_digest, &flight.bytes);
        match flight.dest {
            Dest::Host(index) => {
                self.bytes_up += flight.bytes.len() as u64;
                if self.is_news(flight.twin) {
                    self.note_delivery(index, 0);
                }
                let player = self.games[index].player;
                self.host.handle_datagram(self.now_ms, player, &flight.bytes);
            }
            Dest::Client(index) => {
                self.bytes_down += flight.bytes.len() as u64;
                if self.is_news(flight.twin) {
                    self.note_delivery(index, 1);
                }
                let local = to_local(&self.config, index, self.now_ms);
                self.clients[index].handle_datagram(local, &flight.bytes);
            }
        }
    }

    /// Whether a delivery is news: not the second copy of a duplicated datagram (a duplicate
    /// or replay proves nothing about the sender, and sessions rightly ignore it).
    fn is_news(&mut self, twin: Option<u64>) -> bool {
        match twin {
            Some(id) if !self.twins_delivered.insert(id) => {
                self.twins_delivered.remove(&id);
                false
            }
            _ => true,
        }
    }

    fn note_delivery(&mut self, client: usize, direction: usize) {
        let silence = self.now_ms - self.last_delivery_ms[client][direction];
        let longest = &mut self.longest_silence_ms[client][direction];
        *longest = (*longest).max(silence);
        self.last_delivery_ms[client][direction] = self.now_ms;
    }

    /// The longest time client `client` went without a delivery in either direction,
    /// including the silence running now: what an idle timeout reacts to.
    pub fn longest_silence_ms(&self, client: usize) -> u64 {
        (0..2)
            .map(|direction| {
                let running = self.now_ms - self.last_delivery_ms[client][direction];
                self.longest_silence_ms[client][direction].max(running)
            })
            .max()
            .unwrap_or(0)
    }

    fn submit_due(&mut self) {
        let now = self.now_ms;
        for index in 0..self.games.len() {
            if !self.submitting(&self.games[index])
                || self.games[index].next_submit_ms > now
                || self.config.passive.contains(&index)
            {
                continue;
            }
            for _ in 0..self.config.commands_per_submit {
                let game = &self.games[index];
                let seq = CommandSeq(game.submitted.len() as u32);
                let payload = encode_payload(game.player, seq, self.config.command_bytes);
                let result = if index < self.clients.len() {
                    self.clients[index].submit(to_local(&self.config, index, now), &payload)
                } else {
                    self.host.submit(&payload)
                };
                let game = &mut self.games[index];
                match result {
                    Ok(ticket) => {
                        debug_assert_eq!(ticket.seq, seq);
                        game.submitted.insert(ticket.seq, (ticket.turn, now));
                    }
                    Err(error) => game.refused.push(error),
                }
            }
            let (min, max) = self.config.command_interval_ms;
            let interval = min + self.game_rng.below(max.saturating_sub(min) + 1);
            self.games[index].next_submit_ms = now + interval.max(1);
        }
    }

    fn transmit(&mut self) {
        let now = self.now_ms;
        let mut buf = Vec::with_capacity(usize::from(self.config.session.link.datagram_bytes_max));
        let mut guard = 0;
        while let Some(player) = self.host.poll_transmit(now, &mut buf) {
            guard += 1;
            assert!(guard < 100_000, "host transmit loop does not end");
            if let Some(&client) = self.player_client.get(&player) {
                self.send(Dest::Client(client), buf.clone());
            }
        }
        for index in 0..self.clients.len() {
            let mut guard = 0;
            let local = to_local(&self.config, index, now);
            while self.clients[index].poll_transmit(local, &mut buf) {
                guard += 1;
                assert!(guard < 100_000, "client transmit loop does not end");
                self.send(Dest::Host(index), buf.clone());
            }
        }
    }

    /// Puts a datagram on the wire through the fault layer.
    fn send(&mut self, dest: Dest, mut bytes: Vec<u8>) {
        let limit = usize::from(self.config.session.link.datagram_bytes_max);
        assert!(
            bytes.len() <= limit,
            "a {}-byte datagram exceeds the {limit}-byte limit",
            bytes.len()
        );
        let (client, direction) = match dest {
            Dest::Host(index) => (index, 0),
            Dest::Client(index) => (index, 1),
        };
        let faults =
            if direction == 0 { self.config.links[client].0 } else { self.config.links[client].1 };
        let faulty = self.now_ms < self.config.heal_at_ms && faults.active_at(self.now_ms);
        let mut twin = None;
        if faulty {
            if faults.over_mtu(bytes.len()) {
                self.dropped += 1;
                return;
            }
            let cut = self.config.partitions.iter().any(|partition| {
                partition.client == client
                    && (partition.from_ms..partition.until_ms).contains(&self.now_ms)
                    && match partition.direction {
                        Direction::Both => true,
                        Direction::Up => direction == 0,
                        Direction::Down => direction == 1,
                    }
            });
            let mut lost = cut || self.rng.chance(faults.loss_permille);
            if let Some(burst) = faults.burst {
                lost |= self.burst[client][direction].lose(&burst, &mut self.rng);
            }
            if lost {
                self.dropped += 1;
                return;
            }
            if self.rng.chance(faults.corrupt_permille) {
                self.corrupted += 1;
                corrupt(&mut self.rng, &mut bytes);
            }
            if self.rng.chance(faults.duplicate_permille) {
                self.duplicated += 1;
                let extra = self.rng.below(faults.latency_ms + faults.jitter_ms + 1)
                    + self.rng.below(faults.replay_delay_ms + 1);
                let delay = faults.latency_ms + self.rng.below(faults.jitter_ms + 1) + extra;
                twin = Some(self.next_seq);
                self.enqueue(dest, bytes.clone(), delay, twin);
            }
        }
        let spike: u64 = self
            .config
            .spikes
            .iter()
            .filter(|&&(from, until, _)| (from..until).contains(&self.now_ms))
            .map(|&(_, _, extra)| extra)
            .sum();
        let held = self
            .config
            .lag_switches
            .iter()
            .filter(|&&(held, from, until)| {
                direction == 0 && held == client && (from..until).contains(&self.now_ms)
            })
            .map(|&(_, _, until)| until - self.now_ms)
            .max()
            .unwrap_or(0);
        let delay = faults.latency_ms + spike + self.rng.below(faults.jitter_ms + 1);
        self.enqueue(dest, bytes, held + delay, twin);
    }

    fn enqueue(&mut self, dest: Dest, bytes: Vec<u8>, delay_ms: u64, twin: Option<u64>) {
        let at_ms = self.now_ms + delay_ms;
        let flight = InFlight { at_ms, seq: self.next_seq, dest, bytes, twin };
        self.next_seq += 1;
        self.queue.push(Reverse(flight));
    }

    /// Delivers `bytes` to the host as if from client `client`'s connection, now.
    pub fn inject_to_host(&mut self, client: usize, bytes: Vec<u8>) {
        self.enqueue(Dest::Host(client), bytes, 0, None);
    }

    /// Delivers `bytes` to client `client` as if from the host, now.
    pub fn inject_to_client(&mut self, client: usize, bytes: Vec<u8>) {
        self.enqueue(Dest::Client(client), bytes, 0, None);
    }

    fn execute(&mut self) {
        let now = self.now_ms;
        for index in 0..self.games.len() {
            let is_host = index == self.clients.len();
            let slow = self.config.slow.iter().find(|(game, _)| *game == index).map(|&(_, ms)| ms);
            if slow.is_some() && now < self.next_exec_ms[index] {
                continue;
            }
            let frozen = self
                .config
                .frozen
                .iter()
                .any(|&(game, from, until)| game == index && (from..until).contains(&now));
            if frozen {
                continue;
            }
            let mut guard = 0;
            loop {
                let bundle = if is_host {
                    self.host.next_turn()
                } else {
                    let local = to_local(&self.config, index, now);
                    self.clients[index].next_turn(local)
                };
                let Some(bundle) = bundle else { break };
                guard += 1;
                assert!(guard < 100_000, "next_turn loop does not end");
                let game = &mut self.games[index];
                game.execute(now, &bundle);
                if self.config.desync_at == Some((index, bundle.turn.0)) {
                    game.state ^= 1;
                }
                let hash =
                    if self.config.liar == Some(index) { lie(game.state) } else { game.state };
                if is_host {
                    self.host.report_state_hash(bundle.turn, hash);
                } else {
                    self.clients[index].report_state_hash(bundle.turn, hash);
                    self.drain_client_events(index, Some(bundle.turn));
                }
                if let Some(ms) = slow {
                    self.next_exec_ms[index] = now + ms;
                    break;
                }
            }
        }
    }

    fn drain_client_events(&mut self, index: usize, turn: Option<Turn>) {
        while let Some(event) = self.clients[index].poll_event() {
            match &event {
                ClientEvent::Ended(reason) => {
                    self.games[index].ended = Some(*reason);
                    if *reason == EndReason::HostLost {
                        let silence = self.now_ms - self.last_delivery_ms[index][1];
                        self.timeout_silences.push((index, silence));
                    }
                }
                ClientEvent::Desync(report) => {
                    let turn = turn.unwrap_or(Turn(u32::MAX));
                    self.desyncs_seen.push((index, turn, report.clone()));
                }
                ClientEvent::Waiting(players) => {
                    self.waiting_seen.push((self.now_ms, index, players.clone()));
                }
                _ => {}
            }
            self.client_events.push((self.now_ms, index, event));
        }
    }

    fn collect_events(&mut self) {
        while let Some(event) = self.host.poll_event() {
            if let HostEvent::PlayerTimedOut(player) = event {
                if let Some(&client) = self.player_client.get(&player) {
                    let silence = self.now_ms - self.last_delivery_ms[client][0];
                    self.timeout_silences.push((client, silence));
                }
            }
            self.host_events.push((self.now_ms, event));
        }
        for index in 0..self.clients.len() {
            self.drain_client_events(index, None);
        }
    }

    /// S1: every game that executed turn `t` executed the same bundle (equal digests).
    pub fn check_agreement(&self) -> Result<(), String> {
        let longest = self.games.iter().map(|game| game.digests.len()).max().unwrap_or(0);
        for turn in 0..longest {
            let mut reference: Option<(usize, u64)> = None;
            for (index, game) in self.games.iter().enumerate() {
                let Some(&digest) = game.digests.get(turn) else {
                    continue;
                };
                match reference {
                    None => reference = Some((index, digest)),
                    Some((first, expected)) if expected != digest => {
                        return Err(format!(
                            "turn {turn}: game {first} executed {expected:#x}, game {index} {digest:#x}"
                        ));
                    }
                    Some(_) => {}
                }
            }
        }
        Ok(())
    }

    /// No false drops: no idle timeout (the host timing a player out, a client ending with
    /// `HostLost`) fired before its side had really received nothing for the whole
    /// `link.idle_timeout_ms`.
    pub fn check_no_false_drops(&self) -> Result<(), String> {
        self.check_no_false_drops_except(&[])
    }

    /// [`check_no_false_drops`](Self::check_no_false_drops) for every client but `exempt`: a
    /// test that injects datagrams in a client's name reuses that client's packet numbers, so
    /// the client's own later datagrams arrive as duplicates and its link fails on purpose.
    pub fn check_no_false_drops_except(&self, exempt: &[usize]) -> Result<(), String> {
        let idle = u64::from(self.config.session.link.idle_timeout_ms);
        let timeouts = self.timeout_silences.iter().filter(|(client, _)| !exempt.contains(client));
        match timeouts.clone().find(|&&(_, silence)| silence < idle) {
            Some((client, silence)) => {
                Err(format!("client {client} timed out after a silence of only {silence} ms"))
            }
            None => Ok(()),
        }
    }

    /// S2: no game executed any `(player, seq)` twice or misattributed; every command a
    /// player submitted (was given a ticket for) was executed, for that player, by every game
    /// still in the session, unless its player left before it could be sealed.
    pub fn check_exactly_once(&self) -> Result<(), String> {
        for (index, game) in self.games.iter().enumerate() {
            if game.misattributed > 0 {
                return Err(format!("game {index}: {} misattributed commands", game.misattributed));
            }
            let mut seen = BTreeMap::new();
            for &(player, seq, turn) in &game.executed {
                if let Some(first) = seen.insert((player, seq), turn) {
                    return Err(format!(
                        "game {index}: {player} seq {} executed at {first} and {turn}",
                        seq.0
                    ));
                }
            }
            if game.ended.is_some() {
                continue;
            }
            for submitter in &self.games {
                if self.left(submitter.player) {
                    continue;
                }
                for seq in submitter.submitted.keys() {
                    if !seen.contains_key(&(submitter.player, *seq)) {
                        return Err(format!(
                            "game {index} never executed {} seq {}",
                            submitter.player, seq.0
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether any game saw `player` leave.
    pub fn left(&self, player: PlayerId) -> bool {
        self.games
            .iter()
            .any(|game| game.membership.iter().any(|(_, record)| *record == Record::Left(player)))
    }

    /// Turns executed by the slowest game still in the session.
    pub fn turns_executed_min(&self) -> usize {
        self.games
            .iter()
            .filter(|game| game.ended.is_none())
            .map(|g| g.digests.len())
            .min()
            .unwrap_or(0)
    }

    /// Submit → execution latencies of every game, sorted.
    pub fn latencies_ms(&self) -> Vec<u64> {
        self.latencies_after_ms(0)
    }

    /// Latencies of commands submitted at or after `from_ms`, sorted.
    pub fn latencies_after_ms(&self, from_ms: u64) -> Vec<u64> {
        let mut all: Vec<u64> = self
            .games
            .iter()
            .flat_map(|game| game.latencies_ms.iter())
            .filter(|&&(at, _)| at >= from_ms)
            .map(|&(_, latency)| latency)
            .collect();
        all.sort_unstable();
        all
    }

    /// Stalls: every gap between consecutive executed turns (of games still playing) longer
    /// than 1.5 × the turn length in force, as `(game, turn index, gap ms, turn length ms)`.
    pub fn stalls(&self) -> Vec<(usize, usize, u64, u32)> {
        let mut stalls = Vec::new();
        for (index, game) in self.games.iter().enumerate().filter(|(_, g)| g.ended.is_none()) {
            for turn in 1..game.executed_at_ms.len() {
                let gap = game.executed_at_ms[turn] - game.executed_at_ms[turn - 1];
                let length = game.turn_length_ms[turn];
                if gap * 2 > u64::from(length) * 3 {
                    stalls.push((index, turn, gap, length));
                }
            }
        }
        stalls
    }
}

/// Makes a valid datagram malformed, one of three ways; every result must be rejected.
fn corrupt(rng: &mut Rng, bytes: &mut Vec<u8>) {
    match rng.below(3) {
        0 => {
            // A strict prefix: counts and lengths precede what they count, so no prefix of a
            // valid message is valid.
            let len = rng.below(bytes.len() as u64) as usize;
            bytes.truncate(len);
        }
        1 => {
            let extra = 1 + rng.below(8) as usize;
            bytes.extend((0..extra).map(|_| rng.next_u64() as u8));
        }
        _ => {
            let len = 1 + rng.below(64) as usize;
            *bytes = (0..len).map(|_| rng.next_u64() as u8).collect();
            // Any version but ours.
            bytes[0] = 2 + (bytes[0] % 250);
        }
    }
}
