//! Snapshots in the sans-IO session, on a small event-driven network (fixed latency, no
//! loss): who is asked for one, how it is verified against the sync checks, what a returning
//! player gets, and that it then agrees with everyone — at turn 6,000 and at turn 36,000.
//! (Over real QUIC under faults: `sim-tests/tests/snapshots.rs`.)

use std::collections::BTreeMap;

use bytes::Bytes;
use phalanx_proto::{
    Client, Host, HostEvent, PlayerId, Record, SessionConfig, SnapshotError, SnapshotRejection,
    Turn, TurnBundle,
};

const LATENCY_MS: u64 = 20;

/// A tiny deterministic game: its state is a hash chain over every record executed.
#[derive(Clone, Debug)]
struct Game {
    state: u64,
    /// Every check turn's hash, as reported.
    checks: BTreeMap<u32, u64>,
    /// Adds this to its state after this turn: a desync.
    diverge_at: Option<(u32, u64)>,
}

fn mix(state: u64, word: u64) -> u64 {
    let mut z = state ^ word.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Game {
    fn new() -> Game {
        Game { state: 7, checks: BTreeMap::new(), diverge_at: None }
    }

    fn execute(&mut self, bundle: &TurnBundle) {
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
    }

    fn save(&self) -> Vec<u8> {
        self.state.to_le_bytes().to_vec()
    }

    fn restore(state: &[u8]) -> Game {
        let state = u64::from_le_bytes(state.try_into().expect("8 bytes"));
        Game { state, ..Game::new() }
    }
}

struct Player {
    client: Client,
    game: Game,
    /// Gives snapshots when asked.
    gives: bool,
    /// Turns executed through a rejoin's catch-up, and the reply's size.
    caught_up: Option<(usize, usize)>,
}

enum Delivery {
    ToHost(PlayerId, Vec<u8>),
    ToClient(usize, Vec<u8>),
    Upload(PlayerId, Vec<u8>),
}

/// A dedicated host (no game of its own unless `host_game`) and its players.
struct Net {
    now: u64,
    config: SessionConfig,
    host: Host,
    host_game: Option<Game>,
    players: Vec<Option<Player>>,
    queue: BTreeMap<(u64, u64), Delivery>,
    sent: u64,
    events: Vec<HostEvent>,
    uploads: Vec<(PlayerId, Result<Turn, SnapshotError>)>,
}

fn tokens(players: usize) -> Vec<u64> {
    (0..players as u64).map(|i| 100 + i).collect()
}

impl Net {
    fn new(config: SessionConfig, players: usize, host_game: bool) -> Net {
        Net::with_late(config, players, host_game, 0)
    }

    /// A net whose last `late` players have not joined when the game starts.
    fn with_late(config: SessionConfig, players: usize, host_game: bool, late: usize) -> Net {
        let mut host = Host::new(config.clone(), &tokens(players)).unwrap();
        if host_game {
            host.observe_turns().unwrap();
        }
        let mut net = Net {
            now: 0,
            config,
            host,
            host_game: host_game.then(Game::new),
            players: (0..players).map(|_| None).collect(),
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

    /// Joins (or rejoins) player `index` with its token; the reply arrives at once.
    fn join(&mut self, index: usize) -> usize {
        let token = tokens(self.players.len())[index];
        let (mut client, request) = Client::new(self.config.clone(), token).unwrap();
        let response = self.host.handle_join(self.now, &request);
        assert_eq!(response.result, Ok(PlayerId(index as u8)), "join of player {index}");
        let reply = response.reply.unwrap();
        client.handle_join_reply(self.now, &reply).unwrap();
        let mut game = Game::new();
        let mut caught_up = None;
        if client.is_catching_up() {
            if let Some(snapshot) = client.take_restore() {
                game = Game::restore(&snapshot.state);
                assert_eq!(game.state, snapshot.hash, "the restored state hashes as verified");
            }
            let mut turns = 0;
            while client.is_catching_up() {
                let bundle = client.next_turn(self.now).expect("catch-up turns are at hand");
                game.execute(&bundle);
                client.report_state_hash(bundle.turn, game.state);
                turns += 1;
            }
            caught_up = Some((turns, reply.len()));
        }
        self.players[index] = Some(Player { client, game, gives: true, caught_up });
        reply.len()
    }

    fn send(&mut self, at: u64, delivery: Delivery) {
        self.sent += 1;
        self.queue.insert((at, self.sent), delivery);
    }

    /// Runs until `until_ms`, calling `on_turn(net, player index, turn)` after every turn a
    /// player's game executes.
    fn run_until(&mut self, until_ms: u64) {
        while self.now <= until_ms {
            self.step();
            let next = self.next_wake().unwrap_or(until_ms + 1).max(self.now + 1);
            self.now = next.min(until_ms + 1);
        }
    }

    fn next_wake(&self) -> Option<u64> {
        let queued = self.queue.keys().next().map(|&(at, _)| at);
        let clients = self.players.iter().flatten().filter_map(|p| p.client.poll_timeout());
        clients.chain(self.host.poll_timeout()).chain(queued).min()
    }

    fn step(&mut self) {
        let now = self.now;
        while let Some(entry) = self.queue.first_entry() {
            if entry.key().0 > now {
                break;
            }
            match entry.remove() {
                Delivery::ToHost(player, bytes) => self.host.handle_datagram(now, player, &bytes),
                Delivery::ToClient(index, bytes) => {
                    if let Some(player) = self.players[index].as_mut() {
                        player.client.handle_datagram(now, &bytes);
                    }
                }
                Delivery::Upload(player, bytes) => {
                    let result = self.host.handle_snapshot(player, &bytes);
                    self.uploads.push((player, result));
                }
            }
        }
        self.host.handle_timeout(now);
        self.host_plays();
        let mut buf = Vec::new();
        while let Some(to) = self.host.poll_transmit(now, &mut buf) {
            self.send(now + LATENCY_MS, Delivery::ToClient(to.0 as usize, buf.clone()));
        }
        self.events.extend(std::iter::from_fn(|| self.host.poll_event()));
        for index in 0..self.players.len() {
            self.play(index);
        }
    }

    fn host_plays(&mut self) {
        let Some(game) = self.host_game.as_mut() else { return };
        while let Some(bundle) = self.host.next_turn() {
            game.execute(&bundle);
            if self.host.wants_snapshot(bundle.turn) {
                let state = Bytes::from(game.save());
                self.host.offer_snapshot(bundle.turn, game.state, state).unwrap();
            }
        }
    }

    fn play(&mut self, index: usize) {
        let now = self.now;
        let Some(player) = self.players[index].as_mut() else { return };
        player.client.handle_timeout(now);
        while let Some(bundle) = player.client.next_turn(now) {
            player.game.execute(&bundle);
            let turn = bundle.turn;
            if turn.0 % self.config.sync_interval_turns == 0 {
                player.game.checks.insert(turn.0, player.game.state);
            }
            player.client.report_state_hash(turn, player.game.state);
            if turn.0 % 7 == index as u32 {
                let _ = player.client.submit(now, &turn.0.to_le_bytes());
            }
            if player.client.wants_snapshot(turn) && player.gives {
                let state = player.game.save();
                player.client.offer_snapshot(turn, player.game.state, &state).unwrap();
            }
        }
        let upload = player.client.poll_snapshot_upload();
        let mut out = Vec::new();
        let mut buf = Vec::new();
        while player.client.poll_transmit(now, &mut buf) {
            out.push(buf.clone());
        }
        let id = PlayerId(index as u8);
        if let Some(bytes) = upload {
            // A reliable stream: later than a datagram, as a bulk transfer would be.
            self.send(now + 3 * LATENCY_MS, Delivery::Upload(id, bytes));
        }
        for bytes in out {
            self.send(now + LATENCY_MS, Delivery::ToHost(id, bytes));
        }
    }

    fn crash(&mut self, index: usize) {
        self.players[index] = None;
    }

    fn stored(&self) -> Vec<(Turn, Option<PlayerId>)> {
        let stored = self.events.iter().filter_map(|event| match event {
            HostEvent::SnapshotStored { turn, from, .. } => Some((*turn, *from)),
            _ => None,
        });
        stored.collect()
    }

    fn desyncs(&self) -> usize {
        self.events.iter().filter(|event| matches!(event, HostEvent::Desync(_))).count()
    }

    /// Every check turn two players both executed has the same hash.
    fn assert_agreement(&self) {
        let games: Vec<&Game> = self.players.iter().flatten().map(|p| &p.game).collect();
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

fn config(interval: u32) -> SessionConfig {
    let mut config = SessionConfig::default();
    config.snapshot_interval_turns = interval;
    config
}

#[test]
fn a_blind_host_asks_each_player_in_turn_and_keeps_what_matches() {
    let mut net = Net::new(config(100), 3, false);
    net.run_until(120_000); // about 1,200 turns
    let stored = net.stored();
    assert!(stored.len() >= 10, "{stored:?}");
    // Every snapshot turn, in order; the givers rotate.
    for (index, &(turn, from)) in stored.iter().enumerate() {
        assert_eq!(turn, Turn(100 * (index as u32 + 1)));
        assert_eq!(from, Some(PlayerId((index % 3) as u8)));
    }
    let stats = net.host.stats();
    assert_eq!(stats.snapshots_rejected, 0);
    assert_eq!(stats.snapshots_refused, 0);
    assert_eq!(stats.snapshot_bytes, 8);
    // The log holds only the turns after the verified snapshot (at most an interval plus the
    // turns sealed while it was verified), not the game from turn 0.
    let verified = net.host.snapshot().expect("a verified snapshot").turn;
    assert!(net.host.next_seal().since(verified) <= 100 + 16);
    assert!(stats.rejoin_log_bytes < 400 * 16, "{}", stats.rejoin_log_bytes);
    assert_eq!(net.desyncs(), 0);
}

/// Plays `turns` turns, crashes player 2, brings it back 5 s later and plays a minute more.
fn rejoin_at(turns: u32) {
    let mut net = Net::new(config(600), 3, false);
    let crash_ms = u64::from(turns) * 100;
    net.run_until(crash_ms);
    net.crash(2);
    net.run_until(crash_ms + 5_000);
    assert!(net.events.contains(&HostEvent::PlayerTimedOut(PlayerId(2))));
    let reply_bytes = net.join(2);
    let (replayed, _) = net.players[2].as_ref().unwrap().caught_up.unwrap();
    #[allow(clippy::print_stderr, reason = "the figures the README quotes")]
    {
        let log = net.host.stats().rejoin_log_bytes;
        eprintln!(
            "rejoin at turn {turns}: reply {reply_bytes} B, {replayed} turns replayed, log {log} B"
        );
    }
    // Restored from the latest snapshot: at most an interval plus the outage is replayed.
    assert!(replayed <= 600 + 60 + 16, "replayed {replayed} turns");
    assert!(reply_bytes < 32 << 10, "reply of {reply_bytes} bytes");
    net.run_until(crash_ms + 65_000);
    assert_eq!(net.desyncs(), 0, "the returning player agrees at every check");
    net.assert_agreement();
    let back = net.players[2].as_ref().unwrap();
    assert!(back.game.checks.len() >= 55, "it plays on: {} checks", back.game.checks.len());
}

#[test]
fn a_rejoin_after_ten_minutes_restores_a_snapshot_and_agrees() {
    rejoin_at(6_000);
}

#[test]
fn a_rejoin_after_an_hour_restores_a_snapshot_and_agrees() {
    rejoin_at(36_000);
}

#[test]
fn a_snapshot_that_does_not_match_is_rejected_and_the_last_good_one_stays() {
    let mut net = Net::new(config(100), 3, false);
    // Player 1 gives turn 200's snapshot (the rotation: 0 gives 100, 1 gives 200, 2 gives
    // 300); its game diverges at turn 150, so its hash is not the majority's.
    net.players[1].as_mut().unwrap().game.diverge_at = Some((150, 1));
    net.run_until(32_000);
    let rejected: Vec<_> = net
        .events
        .iter()
        .filter_map(|event| match event {
            HostEvent::SnapshotRejected { turn, from, reason } => Some((*turn, *from, *reason)),
            _ => None,
        })
        .collect();
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    let (turn, from, reason) = rejected[0];
    assert_eq!((turn, from), (Turn(200), Some(PlayerId(1))));
    assert!(matches!(reason, SnapshotRejection::HashMismatch { .. }));
    // Turn 100's stayed in use until turn 300's (from player 2) matched.
    let stored: Vec<Turn> = net.stored().iter().map(|&(turn, _)| turn).collect();
    assert_eq!(stored[..2], [Turn(100), Turn(300)]);
    assert_eq!(net.host.stats().snapshots_rejected, 1);
}

#[test]
fn uploads_nobody_asked_for_are_refused_and_counted() {
    let mut net = Net::new(config(100), 2, false);
    net.run_until(15_000);
    let upload = |turn: u32, len: usize| {
        let mut bytes = vec![phalanx_proto::PROTOCOL_VERSION, 5];
        // The turn as a varint (all turns here are below 2^14).
        if turn < 0x80 {
            bytes.push(turn as u8);
        } else {
            bytes.extend_from_slice(&[(turn & 0x7f) as u8 | 0x80, (turn >> 7) as u8]);
        }
        bytes.extend_from_slice(&0u64.to_le_bytes());
        bytes.extend(std::iter::repeat_n(0, len));
        bytes
    };
    let before = net.host.stats().snapshots_refused;
    // Not a requested turn, a stale one, garbage, and one over the size limit.
    assert_eq!(
        net.host.handle_snapshot(PlayerId(0), &upload(130, 8)),
        Err(SnapshotError::NotWanted { turn: Turn(130) })
    );
    assert!(matches!(
        net.host.handle_snapshot(PlayerId(0), &upload(100, 8)),
        Err(SnapshotError::Stale { .. })
    ));
    assert!(matches!(
        net.host.handle_snapshot(PlayerId(1), b"junk"),
        Err(SnapshotError::Malformed(_))
    ));
    let max = net.config.snapshot_bytes_max as usize;
    assert!(matches!(
        net.host.handle_snapshot(PlayerId(1), &upload(1_000, max + 1)),
        Err(SnapshotError::TooLarge { .. })
    ));
    assert_eq!(net.host.stats().snapshots_refused, before + 4);
    // A player that never gives one costs nothing but the rejoin log's reach.
    net.players[0].as_mut().unwrap().gives = false;
    net.players[1].as_mut().unwrap().gives = false;
    net.run_until(40_000);
    assert_eq!(net.desyncs(), 0);
}

#[test]
fn a_host_with_its_own_game_gives_the_snapshots_itself() {
    let mut net = Net::new(config(100), 2, true);
    net.run_until(30_000);
    let stored = net.stored();
    assert!(stored.len() >= 2);
    assert!(stored.iter().all(|&(_, from)| from.is_none()), "{stored:?}");
    // Nobody else is asked, and the host's game is not asked twice.
    assert!(net.uploads.is_empty());
    let last = stored.last().unwrap().0;
    assert!(!net.host.wants_snapshot(last));
    assert_eq!(
        net.host.offer_snapshot(last, 0, Bytes::new()),
        Err(SnapshotError::Stale { turn: last, latest: last })
    );
    net.crash(1);
    net.run_until(40_000);
    net.join(1);
    let (replayed, _) = net.players[1].as_ref().unwrap().caught_up.unwrap();
    assert!(replayed <= 100 + 60, "replayed {replayed}");
    net.run_until(60_000);
    assert_eq!(net.desyncs(), 0);
    net.assert_agreement();
}

#[test]
fn without_snapshots_a_rejoin_replays_from_turn_zero() {
    let mut net = Net::new(config(0), 2, false);
    net.run_until(20_000);
    net.crash(1);
    net.run_until(25_000);
    net.join(1);
    let (replayed, _) = net.players[1].as_ref().unwrap().caught_up.unwrap();
    assert!(replayed >= 200, "replayed {replayed}");
    assert_eq!(net.host.stats().snapshots_stored, 0);
    assert_eq!(net.host.offer_snapshot(Turn(100), 0, Bytes::new()), Err(SnapshotError::Off));
    net.run_until(40_000);
    assert_eq!(net.desyncs(), 0);
    net.assert_agreement();
}

#[test]
fn a_late_joiner_restores_a_snapshot_and_agrees_at_its_first_check() {
    let mut config = config(100);
    config.late_join = true;
    let mut net = Net::with_late(config, 3, false, 1);
    net.run_until(45_000);
    let reply_bytes = net.join(2);
    let (replayed, _) = net.players[2].as_ref().unwrap().caught_up.unwrap();
    assert!(replayed <= 100 + 16, "replayed {replayed}");
    assert!(reply_bytes < 4 << 10, "reply of {reply_bytes} bytes");
    net.run_until(60_000);
    assert_eq!(net.desyncs(), 0, "the late joiner agrees from its first check");
    net.assert_agreement();
    assert!(net.events.contains(&HostEvent::PlayerJoined(PlayerId(2))));
    // Without late join, a running game refuses a new seat.
    let mut closed = Net::with_late(SessionConfig::default(), 2, false, 1);
    closed.run_until(5_000);
    let (_, request) = Client::new(SessionConfig::default(), tokens(2)[1]).unwrap();
    let response = closed.host.handle_join(closed.now, &request);
    assert_eq!(
        response.result,
        Err(phalanx_proto::JoinError::Refused(phalanx_proto::JoinRefusal::GameStarted))
    );
}
