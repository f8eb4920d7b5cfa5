//! What a run produced: one [`PlayerReport`] per player, in seat order, and the run-wide
//! counts (trace digest, datagrams, host events).

use phalanx::{
    error::JoinRefusal,
    proto::{CommandSeq, SpectatorId, Ticket},
    stats::ClientStats,
    EndReason, Event, PlayerId, Turn,
};

use crate::Step;

/// What a run produced.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct SimReport {
    /// One report per client machine, and with
    /// [`SimConfig::host_plays`](crate::SimConfig::host_plays) one for the host's own player
    /// ([`PlayerReport::host`]): those that joined in seat order ([`PlayerId`] order), then
    /// those that never did, in the order they were started.
    pub players: Vec<PlayerReport>,
    /// One report per spectator machine (`s0`, `s1`...), in order ([`SimConfig::spectators`]):
    /// `player` is `None`, `spectator` its slot.
    ///
    /// [`SimConfig::spectators`]: crate::SimConfig::spectators
    pub spectators: Vec<PlayerReport>,
    /// Host events, as text, with their simulated time.
    pub host_events: Vec<(u64, String)>,
    /// The same host events typed, with their simulated time (without the timeline's host
    /// steps, which `host_events` also lists): who timed out, misbehaved or was removed, and
    /// when the host waited.
    pub events: Vec<(u64, Event)>,
    /// A digest of every datagram's (time, source, destination, size, copies delivered).
    pub trace_digest: u64,
    /// Datagrams handed to the network.
    pub datagrams: u64,
    /// Copies of those datagrams the fault layer let through (duplicates count twice).
    pub copies: u64,
    /// Simulated milliseconds the run took.
    pub sim_ms: u64,
    /// Desync reports as each player met them: `(player, check turn, diverged players)`.
    pub desyncs: Vec<(PlayerId, u32, Vec<PlayerId>)>,
    /// Joins of the hostile flood that were refused (or failed), of `flood_joins`.
    pub flood_refused: u32,
    /// Timeline steps that named a seat nobody had taken by their time: they did nothing.
    pub steps_skipped: Vec<Step>,
    /// After a [`Step::EndGame`]: when the host's `end` call returned, and the last turn.
    pub game_ended: Option<(u64, Turn)>,
    /// After a [`Step::ShutdownHost`]: when the host's shutdown began.
    pub host_shutdown_ms: Option<u64>,
    /// With a relay as host ([`SimConfig::relay_matches`](crate::SimConfig::relay_matches)):
    /// each crowd bot's account of its match, eight a crowd match.
    pub crowd: Vec<CrowdReport>,
}

/// How one bot of a relay's crowd fared.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CrowdReport {
    /// It joined its match.
    pub joined: bool,
    /// Turns it executed.
    pub turns: u64,
    /// Its match ended for it as finished.
    pub finished: bool,
}

/// One player's part of a [`SimReport`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PlayerReport {
    /// The seat the host gave it (`None`: it never joined, or it is a spectator).
    pub player: Option<PlayerId>,
    /// A spectator's slot.
    pub spectator: Option<SpectatorId>,
    /// The simulated machine it ran on, `p{machine}`: the order clients were started in. The
    /// host's own player ([`host`](Self::host)) runs on `host`; its `machine` is the index
    /// after the clients' (`SimConfig::players`).
    pub machine: usize,
    /// The host's own player ([`SimConfig::host_plays`](crate::SimConfig::host_plays)): its
    /// game ran in the host's process. It has no client, so the client's figures (stats,
    /// samples, wire counts, `stats_at_ms`) stay empty; its
    /// [`latency_ms`](Self::latency_ms) is taken from its
    /// [`command_latencies`](Self::command_latencies) when sampling.
    pub host: bool,
    /// The state hash after every executed turn, in turn order from
    /// [`first_turn`](Self::first_turn) (after a restart: the new process's).
    pub hashes: Vec<u64>,
    /// The turn of `hashes[0]`: 0, or after a restart that restored a snapshot, the turn
    /// after the snapshot's.
    pub first_turn: u32,
    /// After a restart that restored a snapshot: its turn and size in bytes.
    pub restored: Option<(Turn, usize)>,
    /// How its session ended, if before its last turn.
    pub ended: Option<EndReason>,
    /// With [`SimConfig::speculate`](crate::SimConfig::speculate): what speculation cost its
    /// game and how soon its orders showed.
    pub speculation: Option<SpeculationReport>,
    /// Mesh runs: the peers its links to went through the rendezvous, as they could not
    /// punch through the NATs (read when its game loop ended).
    pub relayed: Vec<PlayerId>,
    /// Commands it submitted and the session accepted.
    pub submitted: u64,
    /// Commands (of anyone) it executed.
    pub executed: u64,
    /// Why it could not join, if it could not.
    pub join_error: Option<String>,
    /// The host's typed refusal, when a join was refused (after a crash: a refused rejoin).
    pub refusal: Option<JoinRefusal>,
    /// Submits the session refused (over budget, too large), which queued nothing.
    pub submit_refused: u64,
    /// Most of its commands awaiting the host's acknowledgement at once.
    pub unacked_high_water: usize,
    /// Simulated time at which its game loop ended: its last turn executed, or its session
    /// over (`None`: it never joined).
    pub finished_ms: Option<u64>,
    /// Processes started (1, or 2 after a [`Step::CrashClient`] restart).
    pub incarnations: u32,
    /// Its client's command latency (submit → execute) p50, p95 and max, ms (the host's own
    /// player: over all its [`command_latencies`](Self::command_latencies)).
    pub latency_ms: Option<(u32, u32, u32)>,
    /// Simulated ms at which its client's stats (`latency_ms`, `stall_ms`, `playout_ms`,
    /// `app_bytes`, `unacked_high_water`) were read: when its game loop ended, or, when its
    /// session was already over by then (a removed player), the last
    /// [`Sample`] before — the figures are measured up to that moment. `None`: never read
    /// (its session ended before the first sample, or sampling was off), and those figures
    /// are zeros that measured nothing.
    pub stats_at_ms: Option<u64>,
    /// Bytes it sent (`.0`) and the host sent it (`.1`), as QUIC datagram payloads (UDP/IP
    /// headers not included), counting every datagram handed to the network.
    pub wire_bytes: (u64, u64),
    /// Datagrams it sent and the host sent it.
    pub wire_datagrams: (u64, u64),
    /// phalanx's own bytes (before QUIC) sent and received by its client.
    pub app_bytes: (u64, u64),
    /// Time its game waited for turns beyond their length (client stats).
    pub stall_ms: u64,
    /// Its client's playout buffer at the end (client stats).
    pub playout_ms: u32,
    /// Every `Left` record its game executed: whose, and the simulated ms it executed it.
    pub left_seen: Vec<(PlayerId, u64)>,
    /// The same `Left` records with the turn that carried each: the turn at which that player
    /// left, the same on every game that executed it.
    pub left_turns: Vec<(PlayerId, Turn)>,
    /// Every `Joined` record its game executed after turn 0, with its turn: a player coming
    /// back (or joining late) at that turn.
    pub joined_turns: Vec<(PlayerId, Turn)>,
    /// After a [`Step::CrashClient`](crate::Step::CrashClient) restart: simulated ms at which
    /// the new process started (before it connected).
    pub restarted_ms: Option<u64>,
    /// When [`SimConfig::samples_every_ms`](crate::SimConfig::samples_every_ms) is set: its
    /// counters over time.
    pub samples: Vec<Sample>,
    /// When sampling: `(simulated ms when it executed, submit → execute ms)` of each of its
    /// own commands, in execution order.
    pub command_latencies: Vec<(u64, u32)>,
    /// The tickets of the commands it submitted (of every process it ran), in order.
    pub tickets: Vec<Ticket>,
    /// Every command its game executed (its last process's game): whose, which, and at which
    /// turn, in execution order.
    pub commands: Vec<(PlayerId, CommandSeq, Turn)>,
    /// Simulated ms at which its game executed each turn, in turn order (its last process's
    /// game): what [`PlayerReport::time_in_gaps`] measures.
    pub executed_at_ms: Vec<u64>,
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
    /// [`PlayerReport::wire_bytes`].
    pub wire_bytes: (u64, u64),
    /// Datagrams the player sent and the host sent it.
    pub wire_datagrams: (u64, u64),
    /// phalanx's own bytes sent and received by the player's client.
    pub app_bytes: (u64, u64),
    /// phalanx's own datagrams the player's client sent and received (the rest of
    /// `wire_datagrams` are the transport's own packets — QUIC's ACK-only packets, handshakes,
    /// the UDP transport's reliable-message segments — and, downstream, datagrams lost on the
    /// way).
    pub app_datagrams: (u64, u64),
    /// Time its game waited for turns beyond their length.
    pub stall_ms: u64,
    /// The pace in force: turn length.
    pub turn_length_ms: u32,
    /// The pace in force: command delay.
    pub command_delay_turns: u32,
    /// The client's playout buffer (`ClientStats::playout_ms`).
    pub playout_ms: u32,
}

impl SimReport {
    /// The report of the player in seat `player` (`None`: nobody took it).
    pub fn player(&self, player: PlayerId) -> Option<&PlayerReport> {
        self.players.iter().find(|report| report.player == Some(player))
    }

    /// The report of the host's own player, when the host played
    /// ([`SimConfig::host_plays`](crate::SimConfig::host_plays)).
    pub fn host_player(&self) -> Option<&PlayerReport> {
        self.players.iter().find(|report| report.host)
    }

    /// Every player that executed turn `t` holds the same state hash after it.
    pub fn check_agreement(&self) -> Result<(), String> {
        let longest = self.players.iter().map(|p| p.turns_played()).max().unwrap_or(0);
        for turn in 0..longest {
            let mut seen = self.players.iter().filter_map(|p| Some((p.name(), p.hash_at(turn)?)));
            if let Some((first, hash)) = seen.next() {
                if let Some((other, differs)) = seen.find(|&(_, h)| h != hash) {
                    return Err(format!(
                        "turn {turn}: {first} has {hash:#x}, {other} {differs:#x}"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Every spectator's hash after every turn it executed equals the players' after it (and
    /// every spectator watched something).
    pub fn check_spectators_agree(&self) -> Result<(), String> {
        for spectator in &self.spectators {
            if spectator.hashes.is_empty() {
                return Err(format!(
                    "{} watched nothing ({:?})",
                    spectator.name(),
                    spectator.join_error
                ));
            }
            for turn in spectator.first_turn as usize..spectator.turns_played() {
                let theirs = spectator.hash_at(turn);
                let ours = self.players.iter().find_map(|player| player.hash_at(turn));
                if ours.is_some() && theirs != ours {
                    return Err(format!(
                        "turn {turn}: {} has {theirs:x?}, players {ours:x?}",
                        spectator.name()
                    ));
                }
            }
        }
        Ok(())
    }

    /// Every player executed all `turns` turns and its session did not end early (nobody was
    /// dropped, timed out or removed).
    pub fn check_everyone_played(&self, turns: usize) -> Result<(), String> {
        for player in &self.players {
            if player.hashes.len() != turns || player.ended.is_some() {
                return Err(format!(
                    "{} played {} of {turns} turns and ended {:?}",
                    player.name(),
                    player.hashes.len(),
                    player.ended
                ));
            }
        }
        Ok(())
    }

    /// S2, exactly once: no game executed a command twice or one never submitted, and every
    /// game that played on executed every submitted command. A command stamped for turn `t`
    /// is owed by every game that executed turn `t + settle_turns` (a command that reached
    /// the host late executes at a later turn: `settle_turns` bounds how much later a scenario
    /// allows, for example the longest cut in turns plus `turns.window_turns`).
    pub fn check_exactly_once(&self, settle_turns: u32) -> Result<(), String> {
        let submitted: std::collections::BTreeSet<(PlayerId, CommandSeq)> = self
            .players
            .iter()
            .filter_map(|p| Some((p.player?, &p.tickets)))
            .flat_map(|(player, tickets)| tickets.iter().map(move |t| (player, t.seq)))
            .collect();
        for game in &self.players {
            let mut seen = std::collections::BTreeSet::new();
            for &(player, seq, turn) in &game.commands {
                if !seen.insert((player, seq)) {
                    return Err(format!("{} executed {player}'s {seq:?} twice", game.name()));
                }
                if !submitted.contains(&(player, seq)) {
                    return Err(format!(
                        "{} executed {player}'s {seq:?} at {turn}, never submitted",
                        game.name()
                    ));
                }
            }
            let played = game.turns_played() as u32;
            for owner in &self.players {
                let Some(player) = owner.player else { continue };
                // A game restored from a snapshot holds what came before in its state.
                let missing = owner.tickets.iter().find(|ticket| {
                    ticket.turn.0.saturating_add(settle_turns) < played
                        && ticket.turn.0 >= game.first_turn
                        && !seen.contains(&(player, ticket.seq))
                });
                if let Some(ticket) = missing {
                    return Err(format!(
                        "{} played {played} turns but never executed {player}'s {ticket:?}",
                        game.name()
                    ));
                }
            }
        }
        Ok(())
    }

    /// Orders `players` by seat, unjoined machines last (at the end of a run).
    pub(crate) fn sort_by_seat(&mut self) {
        self.players.sort_by_key(|report| (report.player.is_none(), report.player, report.machine));
    }
}

impl PlayerReport {
    /// Keeps its client's `stats`, read at simulated ms `at_ms`.
    pub(crate) fn record_stats(&mut self, at_ms: u64, stats: &ClientStats) {
        self.stats_at_ms = Some(at_ms);
        self.unacked_high_water = stats.commands_unacked_high_water;
        self.app_bytes = (stats.link.bytes_sent, stats.link.bytes_received);
        self.stall_ms = stats.stall_ms;
        self.playout_ms = stats.playout_ms;
        self.latency_ms =
            latencies(stats.latency_ms_p50, stats.latency_ms_p95, stats.latency_ms_max);
    }

    /// The turns up to the last one its game executed: `first_turn + hashes.len()`.
    pub fn turns_played(&self) -> usize {
        self.first_turn as usize + self.hashes.len()
    }

    /// Its state hash after `turn`, if its last process's game executed that turn.
    pub fn hash_at(&self, turn: usize) -> Option<u64> {
        self.hashes.get(turn.checked_sub(self.first_turn as usize)?).copied()
    }

    /// `player 2 (p3)`, `player 0 (host)`, or `p3 (never joined)`: how messages name it.
    pub fn name(&self) -> String {
        match (self.player, self.spectator) {
            (Some(player), _) if self.host => format!("player {} (host)", player.0),
            (Some(player), _) => format!("player {} (p{})", player.0, self.machine),
            (None, Some(spectator)) => format!("spectator {} (s{})", spectator.0, self.machine),
            (None, None) if self.host => "the host's player (never seated)".into(),
            (None, None) => format!("p{} (never joined)", self.machine),
        }
    }

    /// How smoothly its game ran: `(ms spent in gaps between consecutive executed turns longer
    /// than longer_than_ms, ms from its first executed turn to its last)`. With
    /// `longer_than_ms` at 1.5 turns, the first over the second is the share of game time in
    /// visible hitches.
    pub fn time_in_gaps(&self, longer_than_ms: u64) -> (u64, u64) {
        let in_gaps = self
            .executed_at_ms
            .windows(2)
            .map(|pair| pair[1].saturating_sub(pair[0]))
            .filter(|&gap| gap > longer_than_ms)
            .sum();
        let span = match (self.executed_at_ms.first(), self.executed_at_ms.last()) {
            (Some(first), Some(last)) => last - first,
            _ => 0,
        };
        (in_gaps, span)
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
    Identity(phalanx::error::IdentityError),
    /// [`SimConfig::relay_matches`](crate::SimConfig::relay_matches) asks for a relay, and
    /// phalanx-sim was built without its `relay` feature.
    Relay,
}

impl std::fmt::Display for SimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SimError::Turmoil { error, partial } => {
                write!(f, "simulation failed: {error} (")?;
                for player in &partial.players {
                    write!(
                        f,
                        "{}: {} turns, ended {:?}, join error {:?}; ",
                        player.name(),
                        player.hashes.len(),
                        player.ended,
                        player.join_error
                    )?;
                }
                write!(f, "host events {:?})", partial.host_events)
            }
            SimError::Identity(error) => error.fmt(f),
            SimError::Relay => f.write_str(
                "the scenario asks for a relay as host: build phalanx-sim with its `relay` feature",
            ),
        }
    }
}

impl std::error::Error for SimError {}

/// A session's command latency p50, p95 and max, once it has all three.
pub(crate) fn latencies(
    p50: Option<u32>,
    p95: Option<u32>,
    max: Option<u32>,
) -> Option<(u32, u32, u32)> {
    Some((p50?, p95?, max?))
}

/// What speculation did for one player ([`SimConfig::speculate`](crate::SimConfig::speculate)).
///
/// The player renders at [`FRAME_US`]: each confirmed turn that comes, and the orders its game
/// gives then, make one frame of speculation work (confirm, then predict ahead), timed on the
/// wall clock; the frame that shows an order is drawn at the first frame boundary of the
/// simulated clock after that work is done. The times are the machine's, so they differ
/// from run to run; the counts do not.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SpeculationReport {
    /// The counts (its last process's).
    pub stats: phalanx::speculate::SpeculationStats,
    /// Wall-clock microseconds of each frame's speculation work: restoring the confirmed
    /// state, executing and saving the confirmed turn, and running the predicted turns again.
    pub frame_us: Vec<u32>,
    /// For each order of its game: microseconds from the order to the rendered frame that
    /// shows it in the predicted state (the work, then the wait for the next frame).
    pub visible_us: Vec<u32>,
    /// How long the rendered (predicted) state stood behind the schedule, µs: 60 Hz frames,
    /// drawn while the next confirmed turn was late, in which it showed an earlier turn than
    /// the one due (with [`SimConfig::late_seals`](crate::SimConfig::late_seals) it runs on
    /// through that many late turns).
    pub rendered_stall_us: u64,
}

/// The frame period of a speculating player's renderer: 60 Hz.
pub const FRAME_US: u64 = 16_667;
