//! A small event-driven network for the sans-IO session's tests: a host (dedicated, with or
//! without a game of its own), its players and its spectators, each link with a latency (and
//! for spectators a seeded loss), and a tiny deterministic game that can save and restore.

#![allow(dead_code, unreachable_pub)] // each test binary uses its own part

use std::collections::BTreeMap;

use bytes::Bytes;
use phalanx_proto::{
    Client, Host, HostEvent, Joined, PlayerId, Record, SessionConfig, SpectatorId, SplitMix64,
    Turn, TurnBundle, UploadError,
};

/// One-way latency of a player's link.
pub const LATENCY_MS: u64 = 20;

/// A tiny deterministic game: its state is a hash chain over every record executed.
#[derive(Clone, Debug)]
pub struct Game {
    pub state: u64,
    /// Every check turn's hash, as reported.
    pub checks: BTreeMap<u32, u64>,
    /// When it executed each turn (ms).
    pub executed_at: Vec<(u32, u64)>,
    /// Adds this to its state after this turn: a desync.
    pub diverge_at: Option<(u32, u64)>,
    /// Entities' fields (three per entity: x, y, hp), stepped from the chain every turn and
    /// part of the hash; none unless a test sets them.
    pub fields: Vec<u32>,
    /// Flips these bits of this field after this turn: a desync in one field.
    pub corrupt_at: Option<(u32, usize, u32)>,
}

/// The names of an entity's fields in [`Game::fields`].
pub const FIELD_NAMES: [&str; 3] = ["x", "y", "hp"];

fn mix(state: u64, word: u64) -> u64 {
    let mut z = state ^ word.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Game {
    pub fn new() -> Game {
        Game {
            state: 7,
            checks: BTreeMap::new(),
            executed_at: Vec::new(),
            diverge_at: None,
            fields: Vec::new(),
            corrupt_at: None,
        }
    }

    /// A game with `entities` entities of three fields each.
    pub fn with_fields(entities: usize) -> Game {
        Game { fields: vec![0; 3 * entities], ..Game::new() }
    }

    /// The state hash: the chain, and the fields if there are any.
    pub fn hash(&self) -> u64 {
        self.fields.iter().fold(self.state, |hash, &field| mix(hash, field.into()))
    }

    /// The inspection hook: named sub-hashes of a state `save` wrote (`None`: not one).
    pub fn inspect(state: &[u8]) -> Option<Vec<(String, u64)>> {
        let (chain, fields) = state.split_first_chunk::<8>()?;
        if fields.len() % 12 != 0 {
            return None;
        }
        let mut parts = vec![("chain".to_owned(), u64::from_le_bytes(*chain))];
        for (index, field) in fields.chunks_exact(4).enumerate() {
            let value = u32::from_le_bytes(field.try_into().ok()?);
            let name = format!("entity {} {}", index / 3, FIELD_NAMES[index % 3]);
            parts.push((name, value.into()));
        }
        Some(parts)
    }

    pub fn execute(&mut self, bundle: &TurnBundle) {
        self.state = mix(self.state, bundle.turn.0.into());
        for record in &bundle.records {
            let word = match record {
                Record::Command { player, seq, payload } => {
                    u64::from(player.0) << 48 | u64::from(seq.0) << 16 | payload.len() as u64
                }
                Record::Joined(player) => 1 << 60 | u64::from(player.0),
                Record::Left(player) => 2 << 60 | u64::from(player.0),
                _ => 3 << 60,
            };
            self.state = mix(self.state, word);
        }
        if let Some((turn, delta)) = self.diverge_at {
            if turn == bundle.turn.0 {
                self.state = self.state.wrapping_add(delta);
            }
        }
        for (index, field) in self.fields.iter_mut().enumerate() {
            *field = field.wrapping_add(mix(self.state, index as u64) as u32 >> 20);
        }
        if let Some((turn, index, bits)) = self.corrupt_at {
            if turn == bundle.turn.0 {
                self.fields[index] ^= bits;
            }
        }
    }

    pub fn save(&self) -> Vec<u8> {
        let mut bytes = self.state.to_le_bytes().to_vec();
        for field in &self.fields {
            bytes.extend_from_slice(&field.to_le_bytes());
        }
        bytes
    }

    pub fn restore(state: &[u8]) -> Game {
        let (chain, fields) = state.split_first_chunk::<8>().expect("8 bytes at least");
        let fields = fields.chunks_exact(4).map(|f| u32::from_le_bytes(f.try_into().unwrap()));
        Game { state: u64::from_le_bytes(*chain), fields: fields.collect(), ..Game::new() }
    }
}

/// A player's or a spectator's end.
pub struct Peer {
    pub client: Client,
    pub game: Game,
    /// Gives snapshots when asked.
    pub gives: bool,
    /// Turns executed through a rejoin's catch-up, and the reply's size.
    pub caught_up: Option<(usize, usize)>,
    /// Deaf: nothing reaches it (a spectator that stopped reading).
    pub deaf: bool,
}

enum Delivery {
    ToHost(Joined, Vec<u8>),
    ToPlayer(usize, Vec<u8>),
    ToSpectator(usize, Vec<u8>),
    Upload(PlayerId, Vec<u8>),
}

/// A dedicated host (no game of its own unless `host_game`), its players and spectators.
pub struct Net {
    pub now: u64,
    pub config: SessionConfig,
    pub host: Host,
    pub host_game: Option<Game>,
    pub players: Vec<Option<Peer>>,
    pub spectators: Vec<Option<Peer>>,
    /// Spectators' links: one-way latency and loss (‰).
    pub spectator_link: (u64, u32),
    /// Games report their state hash after every turn (else only after check turns).
    pub report_every_turn: bool,
    /// Players' games keep their state after every turn (`Client::keep_state`).
    pub keep_states: bool,
    rng: SplitMix64,
    queue: BTreeMap<(u64, u64), Delivery>,
    sent: u64,
    pub events: Vec<HostEvent>,
    pub uploads: Vec<(PlayerId, Result<(), UploadError>)>,
}

pub fn tokens(players: usize) -> Vec<u64> {
    (0..players as u64).map(|i| 100 + i).collect()
}

pub fn spectator_tokens(spectators: usize) -> Vec<u64> {
    (0..spectators as u64).map(|i| 900 + i).collect()
}

impl Net {
    pub fn new(config: SessionConfig, players: usize, host_game: bool) -> Net {
        Net::with_late(config, players, host_game, 0)
    }

    /// A net whose last `late` players have not joined when the game starts.
    pub fn with_late(config: SessionConfig, players: usize, host_game: bool, late: usize) -> Net {
        Net::build(config, players, host_game, late, 0)
    }

    /// A started net with room for `spectators` spectators (none joined yet: see
    /// [`join_spectator`](Self::join_spectator)); the first `players - late` players joined
    /// before the start.
    pub fn build(
        config: SessionConfig,
        players: usize,
        host_game: bool,
        late: usize,
        spectators: usize,
    ) -> Net {
        let mut host = Host::new(config.clone(), &tokens(players)).unwrap();
        if host_game {
            host.observe_turns().unwrap();
        }
        host.allow_spectators(&spectator_tokens(spectators)).unwrap();
        let mut net = Net {
            now: 0,
            config,
            host,
            host_game: host_game.then(Game::new),
            players: (0..players).map(|_| None).collect(),
            spectators: (0..spectators).map(|_| None).collect(),
            spectator_link: (LATENCY_MS, 0),
            report_every_turn: true,
            keep_states: false,
            rng: SplitMix64::new(7),
            queue: BTreeMap::new(),
            sent: 0,
            events: Vec::new(),
            uploads: Vec::new(),
        };
        for index in 0..players - late {
            net.join(index);
        }
        net.host.start(0);
        net
    }

    /// Joins (or rejoins) player `index` with its token; the reply arrives at once. Returns
    /// the reply's size.
    pub fn join(&mut self, index: usize) -> usize {
        let token = tokens(self.players.len())[index];
        let (joined, peer, len) = self.connect(token);
        assert_eq!(joined, Joined::Player(PlayerId(index as u8)), "join of player {index}");
        self.players[index] = Some(peer);
        len
    }

    /// Joins spectator `index` with its token. Returns the reply's size.
    pub fn join_spectator(&mut self, index: usize) -> usize {
        let token = spectator_tokens(self.spectators.len())[index];
        let (joined, peer, len) = self.connect(token);
        assert_eq!(joined, Joined::Spectator(SpectatorId(index as u8)), "spectator {index}");
        self.spectators[index] = Some(peer);
        len
    }

    fn connect(&mut self, token: u64) -> (Joined, Peer, usize) {
        let (mut client, request) = Client::new(self.config.clone(), token).unwrap();
        let response = self.host.handle_join(self.now, &request);
        let joined = response.result.expect("seated");
        let reply = response.reply.unwrap();
        assert_eq!(client.handle_join_reply(self.now, &reply).unwrap(), joined);
        let mut game = Game::new();
        let mut caught_up = None;
        if client.is_catching_up() {
            if let Some(snapshot) = client.take_restore() {
                game = Game::restore(&snapshot.state);
                assert_eq!(game.hash(), snapshot.hash, "the restored state hashes as verified");
            }
            let mut turns = 0;
            while client.is_catching_up() {
                let bundle = client.next_turn(self.now).expect("catch-up turns are at hand");
                game.execute(&bundle);
                client.report_state_hash(bundle.turn, game.hash());
                turns += 1;
            }
            caught_up = Some((turns, reply.len()));
        }
        let peer = Peer { client, game, gives: true, caught_up, deaf: false };
        (joined, peer, reply.len())
    }

    fn send(&mut self, at: u64, delivery: Delivery) {
        self.sent += 1;
        self.queue.insert((at, self.sent), delivery);
    }

    /// Sends over a spectator's link: its latency, and its loss.
    fn send_spectator(&mut self, delivery: Delivery) {
        let (latency, loss) = self.spectator_link;
        if !self.rng.chance(loss) {
            self.send(self.now + latency, delivery);
        }
    }

    /// Runs until `until_ms`.
    pub fn run_until(&mut self, until_ms: u64) {
        self.run_checking(until_ms, |_| {});
    }

    /// Runs until `until_ms`, calling `check` after every step.
    pub fn run_checking(&mut self, until_ms: u64, mut check: impl FnMut(&Net)) {
        while self.now <= until_ms {
            self.step();
            check(self);
            let next = self.next_wake().unwrap_or(until_ms + 1).max(self.now + 1);
            self.now = next.min(until_ms + 1);
        }
    }

    fn next_wake(&self) -> Option<u64> {
        let queued = self.queue.keys().next().map(|&(at, _)| at);
        let peers = self.players.iter().chain(&self.spectators).flatten();
        let clients = peers.filter_map(|p| p.client.poll_timeout());
        clients.chain(self.host.poll_timeout()).chain(queued).min()
    }

    fn step(&mut self) {
        let now = self.now;
        while let Some(entry) = self.queue.first_entry() {
            if entry.key().0 > now {
                break;
            }
            match entry.remove() {
                Delivery::ToHost(Joined::Player(player), bytes) => {
                    self.host.handle_datagram(now, player, &bytes);
                }
                Delivery::ToHost(Joined::Spectator(id), bytes) => {
                    self.host.handle_spectator_datagram(now, id, &bytes);
                }
                Delivery::ToPlayer(index, bytes) => {
                    if let Some(peer) = self.players[index].as_mut() {
                        peer.client.handle_datagram(now, &bytes);
                    }
                }
                Delivery::ToSpectator(index, bytes) => {
                    if let Some(peer) = self.spectators[index].as_mut().filter(|p| !p.deaf) {
                        peer.client.handle_datagram(now, &bytes);
                    }
                }
                Delivery::Upload(player, bytes) => {
                    let result = self.host.handle_upload(player, &bytes);
                    self.uploads.push((player, result));
                }
            }
        }
        self.host.handle_timeout(now);
        self.host_plays();
        let mut buf = Vec::new();
        while let Some(to) = self.host.poll_transmit(now, &mut buf) {
            self.send(now + LATENCY_MS, Delivery::ToPlayer(to.0 as usize, buf.clone()));
        }
        while let Some(to) = self.host.poll_transmit_spectators(now, &mut buf) {
            self.send_spectator(Delivery::ToSpectator(to.0 as usize, buf.clone()));
        }
        self.events.extend(std::iter::from_fn(|| self.host.poll_event()));
        for index in 0..self.players.len() {
            self.play(index);
        }
        for index in 0..self.spectators.len() {
            self.watch(index);
        }
    }

    fn host_plays(&mut self) {
        let Some(game) = self.host_game.as_mut() else { return };
        while let Some(bundle) = self.host.next_turn() {
            game.execute(&bundle);
            if self.host.wants_snapshot(bundle.turn) {
                let state = Bytes::from(game.save());
                self.host.offer_snapshot(bundle.turn, game.hash(), state).unwrap();
            }
        }
    }

    /// A peer's game loop: executes due turns, reports hashes, gives snapshots, and (a
    /// player) submits now and then. Returns what it sends.
    fn run_peer(
        peer: &mut Peer,
        now: u64,
        (interval, every_turn, keep_states): (u32, bool, bool),
        submit: Option<u32>,
    ) -> Vec<Vec<u8>> {
        peer.client.handle_timeout(now);
        while let Some(bundle) = peer.client.next_turn(now) {
            peer.game.execute(&bundle);
            let turn = bundle.turn;
            peer.game.executed_at.push((turn.0, now));
            let hash = peer.game.hash();
            if turn.0 % interval == 0 {
                peer.game.checks.insert(turn.0, hash);
            }
            if every_turn || turn.0 % interval == 0 {
                peer.client.report_state_hash(turn, hash);
            }
            if keep_states {
                peer.client.keep_state(turn, peer.game.save()).unwrap();
            }
            if submit.is_some_and(|index| turn.0 % 7 == index) {
                let _ = peer.client.submit(now, &turn.0.to_le_bytes());
            }
            if peer.client.wants_snapshot(turn) && peer.gives {
                let state = peer.game.save();
                peer.client.offer_snapshot(turn, hash, &state).unwrap();
            }
        }
        let mut out = Vec::new();
        let mut buf = Vec::new();
        while peer.client.poll_transmit(now, &mut buf) {
            out.push(buf.clone());
        }
        out
    }

    fn play(&mut self, index: usize) {
        let (now, interval) = (self.now, self.config.sync.interval_turns);
        let Some(peer) = self.players[index].as_mut() else { return };
        let habits = (interval, self.report_every_turn, self.keep_states);
        let out = Net::run_peer(peer, now, habits, Some(index as u32));
        let id = PlayerId(index as u8);
        let uploads: Vec<Vec<u8>> = std::iter::from_fn(|| peer.client.poll_upload()).collect();
        for bytes in uploads {
            // A reliable stream: later than a datagram, as a bulk transfer would be.
            self.send(now + 3 * LATENCY_MS, Delivery::Upload(id, bytes));
        }
        for bytes in out {
            self.send(now + LATENCY_MS, Delivery::ToHost(Joined::Player(id), bytes));
        }
    }

    fn watch(&mut self, index: usize) {
        let (now, interval) = (self.now, self.config.sync.interval_turns);
        let Some(peer) = self.spectators[index].as_mut() else { return };
        let out = Net::run_peer(peer, now, (interval, self.report_every_turn, false), None);
        let id = Joined::Spectator(SpectatorId(index as u8));
        for bytes in out {
            self.send_spectator(Delivery::ToHost(id, bytes));
        }
    }

    pub fn crash(&mut self, index: usize) {
        self.players[index] = None;
    }

    pub fn stored(&self) -> Vec<(Turn, Option<PlayerId>)> {
        let stored = self.events.iter().filter_map(|event| match event {
            HostEvent::SnapshotStored { turn, from, .. } => Some((*turn, *from)),
            _ => None,
        });
        stored.collect()
    }

    pub fn desyncs(&self) -> usize {
        self.events.iter().filter(|event| matches!(event, HostEvent::Desync(_))).count()
    }

    /// Every check turn two games (players' and spectators') both executed has one hash.
    pub fn assert_agreement(&self) {
        let peers = self.players.iter().chain(&self.spectators).flatten();
        let games: Vec<&Game> = peers.map(|p| &p.game).collect();
        for pair in games.windows(2) {
            let common =
                pair[0].checks.iter().filter(|(turn, _)| pair[1].checks.contains_key(turn));
            let mut compared = 0;
            for (turn, hash) in common {
                assert_eq!(pair[1].checks[turn], *hash, "check turn {turn}");
                compared += 1;
            }
            assert!(compared > 0, "some check turns in common");
        }
    }
}
