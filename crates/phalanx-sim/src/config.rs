//! A scenario: the players, the network's faults, and the timeline of partitions and crashes.
//!
//! Players are named as the reports name them, by [`PlayerId`]: the seat the host gave each
//! client, in the order their joins arrived (which is not the order the clients were started
//! on a lossy network). A timeline step is resolved at its time to the simulated machine that
//! then holds the seat.

use phalanx::{PlayerId, SessionConfig};

use crate::LinkFaults;

/// A timeline step, on simulated time, naming players by seat.
///
/// A step naming a seat that no client has taken by the step's time does nothing and is
/// listed in [`SimReport::steps_skipped`](crate::SimReport::steps_skipped). A seat that was
/// taken stays bound to the machine that last took it (a crashed and restarted player's
/// process comes back on the same machine).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Step {
    /// Cut `player` off from the host, both ways, at `at_ms`.
    Partition {
        /// When.
        at_ms: u64,
        /// Whose machine.
        player: PlayerId,
    },
    /// Reconnect `player` to the host at `at_ms`.
    Repair {
        /// When.
        at_ms: u64,
        /// Whose machine.
        player: PlayerId,
    },
    /// Hold every datagram between `player` and the host, both ways, from `at_ms` for
    /// `for_ms`, then deliver them all at once: a lag spike (a Wi-Fi link that stops and
    /// catches up, a stalled router queue), which nothing is lost in.
    Hold {
        /// When.
        at_ms: u64,
        /// Whose machine.
        player: PlayerId,
        /// How long.
        for_ms: u64,
    },
    /// Cut only the player → host direction at `at_ms` (a half-open connection: the player
    /// still hears the host). Undone by `Repair`.
    PartitionUp {
        /// When.
        at_ms: u64,
        /// Whose machine.
        player: PlayerId,
    },
    /// Crash the host's process at `at_ms` (nothing runs there afterwards).
    CrashHost {
        /// When.
        at_ms: u64,
    },
    /// Crash `player`'s process at the first turn it executes at or after `at_ms`: it stops
    /// sending without a word, and its game state is lost. With `restart_after_ms`, a new
    /// process starts that much later, joins again with the same token, replays the rejoin's
    /// turns from a fresh game and plays on; its hashes in the report are the new process's,
    /// from turn 0. While the host still holds the seat for the dead connection (`TokenUsed`)
    /// the new process retries every 1.5 s, up to 9 times, as a real client would; any other
    /// refusal is final and lands in [`PlayerReport::refusal`](crate::PlayerReport::refusal).
    CrashClient {
        /// When.
        at_ms: u64,
        /// Whose process.
        player: PlayerId,
        /// Restart this long after the crash (`None`: never).
        restart_after_ms: Option<u64>,
    },
    /// The host ends the game at `at_ms` with the game's `code` (`Host::end`): every player
    /// executes up to the last turn and ends with `EndReason::Finished`.
    EndGame {
        /// When.
        at_ms: u64,
        /// The game's reason.
        code: u32,
    },
    /// The host shuts down at `at_ms` (`Host::shutdown`): every player ends with
    /// `EndReason::HostClosed`.
    ShutdownHost {
        /// When.
        at_ms: u64,
    },
    /// `player` leaves at the first turn it executes at or after `at_ms` (`Client::shutdown`):
    /// the others see its `Left` record.
    Leave {
        /// When.
        at_ms: u64,
        /// Who.
        player: PlayerId,
    },
}

impl Step {
    /// When the step happens, in simulated milliseconds.
    pub fn at_ms(&self) -> u64 {
        match *self {
            Step::Partition { at_ms, .. }
            | Step::Hold { at_ms, .. }
            | Step::PartitionUp { at_ms, .. }
            | Step::Repair { at_ms, .. }
            | Step::CrashHost { at_ms }
            | Step::CrashClient { at_ms, .. }
            | Step::EndGame { at_ms, .. }
            | Step::ShutdownHost { at_ms }
            | Step::Leave { at_ms, .. } => at_ms,
        }
    }
}

/// A scenario.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SimConfig {
    /// The seed of everything.
    pub seed: u64,
    /// Remote players: client machines `p0`, `p1`... started at once.
    pub players: usize,
    /// The session config (host and clients).
    pub session: SessionConfig,
    /// One-way latency of every link.
    pub latency_ms: u64,
    /// Faults on everything every node sends.
    pub faults: LinkFaults,
    /// Partitions, repairs and crashes.
    pub timeline: Vec<Step>,
    /// Turns every player plays before leaving.
    pub turns: u32,
    /// Simulated time limit: past it the run fails (a livelock or a stall that never ends).
    pub limit_ms: u64,
    /// From turn `turn` on, `player` reports its state hash with its lowest bit flipped, as a
    /// game whose state diverged at that turn would: `(player, turn)` (fault-matrix row 14).
    /// The game state itself is untouched (the check compares reported hashes).
    pub desync_at: Option<(PlayerId, u32)>,
    /// Players keep their game's state after every turn ([`SimGame::save`](crate::SimGame::save),
    /// `Client::keep_state`), so that a desync's forensics gets both states at the first
    /// divergent turn (`Event::DesyncDiagnosed` in [`SimReport::events`](crate::SimReport::events)).
    /// Off by default: a save every turn costs the game's time.
    pub keep_states: bool,
    /// Host runs: each player's game speculates (`phalanx::speculate`, through
    /// [`SimGame::save`](crate::SimGame::save) and `restore`): after each confirmed turn and
    /// its orders, it predicts ahead through its newest order; the next confirmed turn rolls
    /// it back. Hashes, snapshots and kept states are the confirmed state's, so a run must
    /// agree turn for turn with the same seed without it.
    /// [`PlayerReport::speculation`](crate::PlayerReport::speculation) has the counts. Off
    /// by default.
    pub speculate: bool,
    /// With [`speculate`](Self::speculate): late seals. While the next confirmed turn is
    /// late, the game wakes every 60 Hz frame and predicts on through the turns due since, at
    /// most this many past it (`Speculation::horizon_late`), so the rendered state moves on;
    /// [`SpeculationReport::rendered_stall_us`](crate::SpeculationReport::rendered_stall_us)
    /// says how long it still stood behind the schedule. 0 (the default): off.
    pub late_seals: u32,
    /// A hostile node tries this many joins with bad tokens while the game runs (row 22).
    pub flood_joins: u32,
    /// The player in this seat is hostile in this way after it has joined (rows 17 and 19).
    pub hostile: Option<(PlayerId, Hostile)>,
    /// Sample every player's counters every this many simulated milliseconds into
    /// [`PlayerReport::samples`](crate::PlayerReport::samples), and time each of its commands
    /// into [`PlayerReport::command_latencies`](crate::PlayerReport::command_latencies)
    /// (0: off, the default).
    pub samples_every_ms: u64,
    /// Spectators `s0`, `s1`...: each joins at its time (simulated ms) with a spectator token,
    /// watches to the last turn and is reported in
    /// [`SimReport::spectators`](crate::SimReport::spectators). Joining after the start, it
    /// starts from a snapshot (set `session.catch_up.snapshot_interval_turns`).
    pub spectators: Vec<u64>,
    /// The spectators' links to the host: one-way latency (ms, in place of `latency_ms`) and
    /// loss (‰, both ways, on top of `faults`).
    pub spectator_link: (u64, u32),
    /// Machines that join late: `(machine, at_ms)` — machine `p{machine}` waits until then to
    /// join, and the host starts once the others are in. Set `session.catch_up.late_join` (and
    /// `catch_up.snapshot_interval_turns`, to start them from a snapshot).
    pub join_late: Vec<(usize, u64)>,
    /// Spectator `s0` is hostile: from 3 s on, besides watching, it sends 100 datagrams a
    /// second carrying commands (which the host must refuse, count, and past
    /// `link.misbehaviour_max` drop it for).
    pub hostile_spectator: bool,
    /// The transport under the session: QUIC (the default) or raw UDP with Noise
    /// ([`phalanx::Transport::Udp`]); the faults apply alike, on the simulated socket.
    pub transport: phalanx::Transport,
    /// `Some(n)`: the host is a phalanx-relay (cargo feature `relay`) holding the scenario's
    /// match and `n` more, each played by eight bots from a machine of their own (reported in
    /// [`SimReport::crowd`](crate::SimReport::crowd)), to the scenario's length. Raw UDP only.
    /// Default `None` (a `phalanx::Host`), or `Some(3)` with `PHALANX_HOST=relay`, which also
    /// sets the transport to raw UDP.
    pub relay_matches: Option<usize>,
    /// Who talks to whom: a host and its clients (the default), or a peer-to-peer mesh with no
    /// host ([`Topology::Mesh`]). `PHALANX_TOPOLOGY=mesh` picks the mesh with its default
    /// settings.
    pub topology: Topology,
    /// Mesh runs: the NAT in front of each machine (`nats[i]` for `p{i}`; `None`, or no
    /// entry: a public address). Any NAT puts a rendezvous in the run, a public machine of
    /// its own (`rendezvous`, a `phalanx::mesh::RendezvousServer`) through which the peers
    /// meet (the roster then lists no addresses) and which relays the pairs that cannot punch
    /// through. [`PlayerReport::relayed`](crate::PlayerReport::relayed) says which did. How
    /// the NATs are modelled: `crates/phalanx-sim/src/nat.rs`. Default: none.
    pub nats: Vec<Option<phalanx_testkit::NatKind>>,
    /// The host also plays (a listen server, `HostOptions::local_player`): its process runs
    /// the game as a client machine does — executes every sealed turn in order, reports its
    /// state hash, gives the game's orders after each turn, times them when sampling — and is
    /// reported in [`SimReport::players`](crate::SimReport::players), flagged
    /// [`PlayerReport::host`](crate::PlayerReport::host). Its player takes a seat (the first
    /// free one: seat 0), so `session.turns.players_max` must be at least `players + 1`, or
    /// the host does not bind and the run fails. `session.turns.fairness` says when its
    /// orders execute. A host run only (ignored with a relay or a mesh). The timeline's steps
    /// for players do nothing to it: a partition naming its seat is skipped, a crash or a
    /// leave never happens. Default: no (a dedicated host).
    pub host_plays: bool,
}

/// Who talks to whom in a run.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Topology {
    /// A host and its clients: every command goes up to the host and down to every player.
    Star,
    /// Every player sends its commands straight to every other over raw UDP with a Noise link
    /// per pair (`phalanx::mesh`), with these settings. Machine `p{i}` plays `PlayerId(i)`;
    /// the timeline's `Partition` cuts a player off from every other, `EndGame` is done by
    /// whoever is master then, and `CrashHost` / `ShutdownHost` do not apply.
    Mesh(phalanx::proto::mesh::PeerConfig),
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
    /// `players` clients, 20 ms one way, no faults, 100 turns, over QUIC — or over the
    /// transport `PHALANX_TRANSPORT` names (`quic` or `udp`), so that a whole suite of
    /// scenarios runs over either: `PHALANX_TRANSPORT=udp cargo test -p sim-tests`.
    pub fn new(seed: u64, players: usize) -> SimConfig {
        let relay = std::env::var("PHALANX_HOST").as_deref() == Ok("relay");
        let transport = match std::env::var("PHALANX_TRANSPORT").as_deref() {
            _ if relay => phalanx::Transport::Udp,
            Ok("udp") => phalanx::Transport::Udp,
            _ => phalanx::Transport::Quic,
        };
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
            keep_states: false,
            speculate: false,
            late_seals: 0,
            flood_joins: 0,
            hostile: None,
            samples_every_ms: 0,
            spectators: Vec::new(),
            spectator_link: (20, 0),
            join_late: Vec::new(),
            hostile_spectator: false,
            transport,
            relay_matches: relay.then_some(3),
            topology: match std::env::var("PHALANX_TOPOLOGY").as_deref() {
                Ok("mesh") => Topology::Mesh(phalanx::proto::mesh::PeerConfig::default()),
                _ => Topology::Star,
            },
            nats: Vec::new(),
            host_plays: false,
        }
    }
}
