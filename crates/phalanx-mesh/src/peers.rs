//! Peer-to-peer matches on the in-memory network: N [`phalanx_proto::mesh::Peer`]s, every
//! directed pair with its own faults, crashes, leaves and cuts between pairs, on a virtual
//! clock from one seed.
//!
//! Each peer plays the reference [`Game`] (a hash chain of the bundles it executed), and a
//! bot gives an order as a turn executes with a set chance, as the archers demo's bots do.
//!
//! ```
//! use phalanx_mesh::peers::{PeerNet, PeerNetConfig};
//!
//! let mut config = PeerNetConfig::new(7, 4);
//! config.end_ms = 6_000;
//! let mut net = PeerNet::new(config).unwrap();
//! net.run().unwrap();
//! net.check_agreement().unwrap();
//! net.check_exactly_once().unwrap();
//! assert!(net.games[0].digests.len() > 40);
//! ```

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use phalanx_proto::mesh::{Peer, PeerConfig, PeerEnd, PeerError, PeerEvent};
use phalanx_proto::{CommandSeq, PlayerId, SessionConfig, Turn};

use crate::{corrupt, encode_payload, BurstState, Game, LinkFaults, Rng};

/// Bytes a datagram costs on the wire besides phalanx's payload: IPv4 and UDP headers (28)
/// and the raw-UDP channel's own (19).
pub const WIRE_OVERHEAD_BYTES: u64 = 47;

/// A cut between two peers (both ways) for a time window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PairCut {
    /// One peer (index).
    pub a: usize,
    /// The other.
    pub b: usize,
    /// From (virtual ms).
    pub from_ms: u64,
    /// Until.
    pub until_ms: u64,
}

/// A peer-to-peer scenario.
#[derive(Clone, Debug)]
pub struct PeerNetConfig {
    /// The seed of every random draw.
    pub seed: u64,
    /// Players (peer `i` plays `PlayerId(i)`).
    pub players: usize,
    /// The session config every peer shares.
    pub session: SessionConfig,
    /// The mesh settings every peer shares.
    pub peer: PeerConfig,
    /// Faults on every directed pair.
    pub faults: LinkFaults,
    /// Cuts between pairs.
    pub cuts: Vec<PairCut>,
    /// Peers cut off from everyone for a while (an outage shorter than the idle timeout
    /// stalls the match but drops nobody): `(peer, from_ms, until_ms)`.
    pub outages: Vec<(usize, u64, u64)>,
    /// The chance (‰) that a peer's bot orders as each turn executes.
    pub order_permille: u32,
    /// Command payload size (at least 5).
    pub command_bytes: usize,
    /// No orders after this.
    pub submit_until_ms: u64,
    /// Peers that crash (stop, say nothing more): `(peer, at_ms)`.
    pub crashes: Vec<(usize, u64)>,
    /// Peers that leave: `(peer, at_ms)`.
    pub leaves: Vec<(usize, u64)>,
    /// The master ends the game at this time (whoever is master then).
    pub end_game_ms: Option<u64>,
    /// The run ends here.
    pub end_ms: u64,
    /// Timer wake-ups are late by up to this much (uniform, per wake-up).
    pub wake_lateness_ms: u64,
    /// A bound on loop iterations: exceeding it is a livelock, reported as an error.
    pub steps_max: u64,
    /// Peers whose game reports this turn cost (ms) after every turn: `(peer, cost)`.
    pub slow: Vec<(usize, u32)>,
    /// Keep every datagram this peer sends, for a test to replay ([`PeerNet::sent_log`]).
    pub record_from: Option<usize>,
}

impl PeerNetConfig {
    /// `players` peers, 50 ms one way, 100 ms turns, a bot order in 1 turn of 20, 10 s.
    pub fn new(seed: u64, players: usize) -> Self {
        let mut session = SessionConfig::default();
        session.link.idle_timeout_ms = 2_000;
        PeerNetConfig {
            seed,
            players,
            session,
            peer: PeerConfig::default(),
            faults: LinkFaults { latency_ms: 50, ..LinkFaults::default() },
            cuts: Vec::new(),
            outages: Vec::new(),
            order_permille: 50,
            command_bytes: 12,
            submit_until_ms: u64::MAX,
            crashes: Vec::new(),
            leaves: Vec::new(),
            end_game_ms: None,
            end_ms: 10_000,
            wake_lateness_ms: 0,
            steps_max: 20_000_000,
            record_from: None,
            slow: Vec::new(),
        }
    }
}

/// Why a run could not go on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerNetError {
    /// A peer could not be made.
    Peer(PeerError),
    /// The loop ran past `steps_max`: a livelock.
    Livelock(u64),
}

impl std::fmt::Display for PeerNetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PeerNetError::Peer(error) => write!(f, "{error}"),
            PeerNetError::Livelock(at) => write!(f, "livelock at {at} ms"),
        }
    }
}

impl std::error::Error for PeerNetError {}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct InFlight {
    at_ms: u64,
    seq: u64,
    from: usize,
    to: usize,
    bytes: Vec<u8>,
}

/// The running network.
#[derive(Debug)]
pub struct PeerNet {
    /// Virtual time.
    pub now_ms: u64,
    /// The peers, by index (peer `i` plays `PlayerId(i)`).
    pub peers: Vec<Peer>,
    /// One game per peer.
    pub games: Vec<Game>,
    /// Whether each peer crashed.
    pub crashed: Vec<bool>,
    /// Every peer event: `(time, peer, event)`.
    pub events: Vec<(u64, usize, PeerEvent)>,
    /// Bytes each peer sent and received, with the wire overhead.
    pub wire_bytes: Vec<(u64, u64)>,
    /// Datagrams the fault layer dropped.
    pub dropped: u64,
    /// A digest of every delivery: equal runs have equal digests.
    pub trace_digest: u64,
    /// With `record_from`: every datagram that peer sent, `(to, bytes)`.
    pub sent_log: Vec<(usize, Vec<u8>)>,
    config: PeerNetConfig,
    rng: Rng,
    bot_rng: Rng,
    queue: BinaryHeap<Reverse<InFlight>>,
    next_seq: u64,
    steps: u64,
    ended_game: bool,
    wakes: Vec<Option<(u64, u64)>>,
    /// Burst-loss state per directed pair: `[from][to]`.
    bursts: Vec<Vec<BurstState>>,
    /// Which peers were woken in this step.
    woken: Vec<bool>,
}

impl PeerNet {
    /// Every peer, its turn 0 due at time 0.
    pub fn new(config: PeerNetConfig) -> Result<PeerNet, PeerNetError> {
        let roster: Vec<PlayerId> = (0..config.players as u8).map(PlayerId).collect();
        let mut peers = Vec::with_capacity(config.players);
        let mut games = Vec::with_capacity(config.players);
        for &me in &roster {
            let peer = Peer::new(config.session.clone(), config.peer.clone(), &roster, me, 0)
                .map_err(PeerNetError::Peer)?;
            peers.push(peer);
            games.push(Game::new(me, u64::MAX, config.session.turns.length_ms));
        }
        Ok(PeerNet {
            now_ms: 0,
            crashed: vec![false; config.players],
            events: Vec::new(),
            wire_bytes: vec![(0, 0); config.players],
            dropped: 0,
            trace_digest: 0xcbf2_9ce4_8422_2325,
            sent_log: Vec::new(),
            rng: Rng::new(config.seed),
            bot_rng: Rng::new(config.seed ^ 0x6A09_E667_F3BC_C908),
            queue: BinaryHeap::new(),
            next_seq: 0,
            steps: 0,
            ended_game: false,
            wakes: vec![None; config.players],
            bursts: vec![vec![BurstState::default(); config.players]; config.players],
            woken: vec![false; config.players],
            peers,
            games,
            config,
        })
    }

    /// The scenario.
    pub fn config(&self) -> &PeerNetConfig {
        &self.config
    }

    /// Runs to `end_ms`.
    pub fn run(&mut self) -> Result<(), PeerNetError> {
        let end = self.config.end_ms;
        self.run_until(end)
    }

    /// Runs to `until_ms`, jumping from one event to the next.
    pub fn run_until(&mut self, until_ms: u64) -> Result<(), PeerNetError> {
        while self.now_ms <= until_ms {
            self.steps += 1;
            if self.steps > self.config.steps_max {
                return Err(PeerNetError::Livelock(self.now_ms));
            }
            self.step();
            let Some(next) = self.next_event_ms() else { break };
            self.now_ms = next.max(self.now_ms + 1);
        }
        Ok(())
    }

    fn alive(&self, index: usize) -> bool {
        !self.crashed[index] && !self.peers[index].is_closed(self.now_ms)
    }

    fn step(&mut self) {
        let now = self.now_ms;
        for &(index, at) in &self.config.crashes {
            if at <= now {
                self.crashed[index] = true;
            }
        }
        while self.queue.peek().is_some_and(|Reverse(flight)| flight.at_ms <= now) {
            let Some(Reverse(flight)) = self.queue.pop() else { break };
            self.deliver(flight);
        }
        for index in 0..self.peers.len() {
            if !self.alive(index) {
                continue;
            }
            self.woken[index] = false;
            if let Some((_, wake)) = self.wakes[index] {
                if wake <= now {
                    self.wakes[index] = None;
                    self.woken[index] = true;
                    self.peers[index].handle_timeout(now);
                }
            }
            if let Some(&(_, at)) =
                self.config.leaves.iter().find(|(i, at)| *i == index && *at <= now)
            {
                if at <= now
                    && self.peers[index].player().is_some()
                    && self.peers[index].ended().is_none()
                {
                    self.peers[index].leave(now);
                }
            }
        }
        self.end_game_if_due();
        // A driver handles the time, sends, and sleeps until the next deadline, whether or
        // not the game takes a turn meanwhile: that deadline must be ahead.
        self.transmit();
        for index in (0..self.peers.len()).filter(|&i| self.woken[i] && self.alive(i)) {
            let next = self.peers[index].poll_timeout();
            assert!(
                next.is_none_or(|d| d > now),
                "peer {index} handled {now} ms and asks to be woken at {next:?}: a driver would spin"
            );
        }
        self.execute();
        self.transmit();
        self.collect_events();
        self.refresh_wakes();
    }

    fn end_game_if_due(&mut self) {
        let Some(at) = self.config.end_game_ms else { return };
        if self.ended_game || self.now_ms < at {
            return;
        }
        for index in 0..self.peers.len() {
            if self.alive(index) && self.peers[index].end(1).is_ok() {
                self.ended_game = true;
                return;
            }
        }
    }

    fn refresh_wakes(&mut self) {
        for index in 0..self.peers.len() {
            let deadline = if self.alive(index) { self.peers[index].poll_timeout() } else { None };
            self.wakes[index] = match (deadline, self.wakes[index]) {
                (None, _) => None,
                (Some(d), Some((asked, wake))) if asked == d => Some((asked, wake)),
                (Some(d), _) => {
                    let late = self.rng.below(self.config.wake_lateness_ms + 1);
                    Some((d, d.max(self.now_ms) + late))
                }
            };
        }
    }

    fn next_event_ms(&self) -> Option<u64> {
        let flights = self.queue.peek().map(|Reverse(flight)| flight.at_ms);
        let wakes = self.wakes.iter().flatten().map(|&(_, wake)| wake);
        let scheduled = self
            .config
            .crashes
            .iter()
            .chain(&self.config.leaves)
            .map(|&(_, at)| at)
            .chain(self.config.outages.iter().flat_map(|&(_, from, until)| [from, until]))
            .chain(self.config.end_game_ms)
            .filter(|&at| at > self.now_ms);
        flights.into_iter().chain(wakes).chain(scheduled).min()
    }

    fn deliver(&mut self, flight: InFlight) {
        self.trace_digest = crate::fnv(self.trace_digest, &flight.at_ms.to_le_bytes());
        self.trace_digest = crate::fnv(self.trace_digest, &[flight.from as u8, flight.to as u8]);
        self.trace_digest = crate::fnv(self.trace_digest, &flight.bytes);
        if !self.alive(flight.to) {
            return;
        }
        self.wire_bytes[flight.to].1 += flight.bytes.len() as u64 + WIRE_OVERHEAD_BYTES;
        let from = PlayerId(flight.from as u8);
        self.peers[flight.to].handle_datagram(self.now_ms, from, &flight.bytes);
    }

    fn execute(&mut self) {
        let now = self.now_ms;
        for index in 0..self.peers.len() {
            if !self.alive(index) {
                continue;
            }
            while let Some(bundle) = self.peers[index].next_turn(now) {
                self.games[index].execute(now, &bundle);
                // The peer keeps the check turns' hashes only.
                let state = self.games[index].state;
                self.peers[index].report_state_hash(bundle.turn, state);
                if let Some(&(_, cost)) = self.config.slow.iter().find(|(p, _)| *p == index) {
                    self.peers[index].report_turn_cost(cost);
                }
                self.bot_order(index);
            }
        }
    }

    fn bot_order(&mut self, index: usize) {
        if self.now_ms >= self.config.submit_until_ms
            || !self.bot_rng.chance(self.config.order_permille)
        {
            return;
        }
        let game = &self.games[index];
        let seq = CommandSeq(game.submitted.len() as u32);
        let payload = encode_payload(game.player, seq, self.config.command_bytes);
        match self.peers[index].submit(self.now_ms, &payload) {
            Ok(ticket) => {
                self.games[index].submitted.insert(ticket.seq, (ticket.turn, self.now_ms));
            }
            Err(error) => self.games[index].refused.push(error),
        }
    }

    fn transmit(&mut self) {
        let now = self.now_ms;
        let mut buf = Vec::new();
        for index in 0..self.peers.len() {
            if !self.alive(index) {
                continue;
            }
            let mut guard = 0;
            while let Some(to) = self.peers[index].poll_transmit(now, &mut buf) {
                guard += 1;
                assert!(guard < 10_000, "peer {index}'s transmit loop does not end");
                self.send(index, usize::from(to.0), buf.clone());
            }
        }
    }

    fn send(&mut self, from: usize, to: usize, mut bytes: Vec<u8>) {
        let limit = usize::from(self.config.session.link.datagram_bytes_max);
        assert!(bytes.len() <= limit, "a {}-byte datagram exceeds {limit}", bytes.len());
        self.wire_bytes[from].0 += bytes.len() as u64 + WIRE_OVERHEAD_BYTES;
        if self.config.record_from == Some(from) {
            self.sent_log.push((to, bytes.clone()));
        }
        let now = self.now_ms;
        let cut =
            self.config.cuts.iter().any(|cut| {
                ((cut.a, cut.b) == (from, to) || (cut.a, cut.b) == (to, from))
                    && (cut.from_ms..cut.until_ms).contains(&now)
            }) || self.config.outages.iter().any(|&(peer, start, end)| {
                (peer == from || peer == to) && (start..end).contains(&now)
            });
        let faults = self.config.faults;
        let active = faults.active_at(now);
        let mut lost = cut || (active && self.rng.chance(faults.loss_permille));
        if let (Some(burst), true) = (faults.burst, active) {
            lost |= self.bursts[from][to].lose(&burst, &mut self.rng);
        }
        if lost {
            self.dropped += 1;
            return;
        }
        if active && self.rng.chance(faults.corrupt_permille) {
            corrupt(&mut self.rng, &mut bytes);
        }
        if active && self.rng.chance(faults.duplicate_permille) {
            let delay = faults.latency_ms
                + self.rng.below(faults.jitter_ms + 1)
                + self.rng.below(faults.replay_delay_ms + 1);
            self.enqueue(from, to, bytes.clone(), delay);
        }
        let delay = faults.latency_ms + self.rng.below(faults.jitter_ms + 1);
        self.enqueue(from, to, bytes, delay);
    }

    fn enqueue(&mut self, from: usize, to: usize, bytes: Vec<u8>, delay_ms: u64) {
        let flight =
            InFlight { at_ms: self.now_ms + delay_ms, seq: self.next_seq, from, to, bytes };
        self.next_seq += 1;
        self.queue.push(Reverse(flight));
    }

    /// Delivers `bytes` to peer `to` as if from peer `from`, now (a hostile peer's input).
    pub fn inject(&mut self, from: usize, to: usize, bytes: Vec<u8>) {
        self.enqueue(from, to, bytes, 0);
    }

    fn collect_events(&mut self) {
        for index in 0..self.peers.len() {
            while let Some(event) = self.peers[index].poll_event() {
                self.events.push((self.now_ms, index, event));
            }
        }
    }

    /// Peers that neither crashed nor left.
    pub fn survivors(&self) -> Vec<usize> {
        (0..self.peers.len())
            .filter(|&i| !self.crashed[i] && !self.config.leaves.iter().any(|(p, _)| *p == i))
            .collect()
    }

    /// Every turn executed by more than one peer has the same digest on each — except what a
    /// peer the others dropped executed after its last turn: cut off, it may run a turn or two
    /// on its own before it notices, and those turns never happened for the match.
    pub fn check_agreement(&self) -> Result<(), String> {
        let longest = self.games.iter().map(|g| g.digests.len()).max().unwrap_or(0);
        let lasts: Vec<Option<usize>> =
            (0..self.games.len()).map(|i| self.dropped_after(i)).collect();
        for turn in 0..longest {
            let mut seen: Option<(usize, u64)> = None;
            for (index, game) in self.games.iter().enumerate() {
                let Some(&digest) = game.digests.get(turn) else { continue };
                if lasts[index].is_some_and(|last| turn > last) {
                    continue;
                }
                match seen {
                    Some((first, expected)) if expected != digest => {
                        return Err(format!(
                            "turn {turn}: peer {first} executed {expected:#x}, peer {index} {digest:#x}"
                        ));
                    }
                    None => seen = Some((index, digest)),
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// The last turn of peer `index` in the match, if the others dropped it.
    pub fn dropped_after(&self, index: usize) -> Option<usize> {
        self.events.iter().find_map(|(_, _, event)| match event {
            PeerEvent::PeerGone { player, last } if usize::from(player.0) == index => {
                Some(last.map_or(0, |t| t.0 as usize + 1).saturating_sub(1))
            }
            _ => None,
        })
    }

    /// No command executes twice or misattributed, and every command a survivor gave
    /// executes at the turn its ticket named, once that turn is reached.
    pub fn check_exactly_once(&self) -> Result<(), String> {
        for (index, game) in self.games.iter().enumerate() {
            let mut seen = BTreeMap::new();
            for &(player, seq, turn) in &game.executed {
                if seen.insert((player, seq), turn).is_some() {
                    return Err(format!("peer {index} executed {player:?}/{seq:?} twice"));
                }
            }
            if game.misattributed > 0 {
                return Err(format!("peer {index}: {} misattributed commands", game.misattributed));
            }
            if !self.survivors().contains(&index) {
                continue;
            }
            let reached = Turn(game.digests.len() as u32);
            for (seq, (turn, _)) in &game.submitted {
                if *turn >= reached {
                    continue;
                }
                for (other, other_game) in self.games.iter().enumerate() {
                    if other_game.digests.len() as u32 <= turn.0 {
                        continue;
                    }
                    if seen_at(other_game, game.player, *seq) != Some(*turn) {
                        return Err(format!(
                            "peer {other} did not execute {:?}/{seq:?} at {turn:?}",
                            game.player
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// No survivor was dropped, and no survivor ended before the game did.
    pub fn check_no_false_drops(&self) -> Result<(), String> {
        for (at, index, event) in &self.events {
            match event {
                PeerEvent::PeerGone { player, .. }
                    if self.survivors().contains(&usize::from(player.0)) =>
                {
                    return Err(format!("peer {index} saw survivor {player:?} dropped at {at} ms"));
                }
                PeerEvent::Ended(end)
                    if self.survivors().contains(index)
                        && !matches!(end, PeerEnd::Finished { .. }) =>
                {
                    return Err(format!("survivor {index} ended {end:?} at {at} ms"));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Every survivor's own-command latencies, ms.
    pub fn latencies_ms(&self) -> Vec<u64> {
        let mut all: Vec<u64> = self
            .survivors()
            .iter()
            .flat_map(|&i| self.games[i].latencies_ms.iter().map(|&(_, l)| l))
            .collect();
        all.sort_unstable();
        all
    }

    /// Wire bandwidth per survivor, up + down, in kbit/s over the run.
    pub fn kbit_per_s(&self) -> Vec<f64> {
        let seconds = self.now_ms.max(1) as f64 / 1000.0;
        self.survivors()
            .iter()
            .map(|&i| (self.wire_bytes[i].0 + self.wire_bytes[i].1) as f64 * 8.0 / 1000.0 / seconds)
            .collect()
    }
}

fn seen_at(game: &Game, player: PlayerId, seq: CommandSeq) -> Option<Turn> {
    game.executed.iter().find(|(p, s, _)| *p == player && *s == seq).map(|&(_, _, t)| t)
}

/// The `p`-th percentile (0..=100) of sorted samples.
pub fn percentile(sorted: &[u64], p: usize) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (sorted.len() * p).div_ceil(100).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}
