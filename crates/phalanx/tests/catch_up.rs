//! Catching up over real QUIC on loopback, as a game uses it: frame loops on plain threads
//! with the polling `Session`, a dedicated host that runs no game, players that serialize
//! their state when a turn says `wants_snapshot`. A player whose process dies (its socket
//! goes dead: no goodbye) comes back with the same token; a new player joins late; spectators
//! watch from the start and from mid-game. Each one's first turn carries the verified snapshot
//! to restore, and from there it agrees with everyone.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use phalanx::{
    error::JoinRefusal, ClientOptions, ClientTransport, ConnectError, Event, HostControl,
    HostOptions, Session, SessionConfig, TypedRecord, TypedTurn,
};

#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
struct Order(u32);

const LAST_TURN: u32 = 260;
const CRASH_TURN: u32 = 90;

fn config() -> SessionConfig {
    let mut session = SessionConfig::default();
    session.turns.length_ms = 20;
    session.link.idle_timeout_ms = 1_000;
    session.catch_up.rejoin_window_ms = 30_000;
    session.catch_up.snapshot_interval_turns = 20;
    session
}

/// The game: a hash chain over every record; its state is its hash.
#[derive(Default)]
struct Game {
    state: u64,
    checks: BTreeMap<u32, u64>,
    /// The snapshot this process started from: its turn.
    restored: Option<u32>,
    /// The turns it executed as a rejoin's catch-up (past turns, `TypedTurn::catching_up`),
    /// and the first it executed live.
    caught_up: Vec<u32>,
    first_live: Option<u32>,
}

impl Game {
    fn execute(&mut self, turn: &TypedTurn<Order>) {
        if let Some(snapshot) = &turn.restore {
            let bytes: [u8; 8] = snapshot.state[..].try_into().expect("8 bytes");
            self.state = u64::from_le_bytes(bytes);
            assert_eq!(self.state, snapshot.hash, "the restored state hashes as verified");
            assert_eq!(snapshot.turn.0 + 1, turn.turn.0, "it is the state before this turn");
            self.restored = Some(snapshot.turn.0);
        }
        for record in &turn.records {
            let word = match record {
                TypedRecord::Command { player, command: Ok(Order(n)), .. } => {
                    u64::from(player.0) << 32 | u64::from(*n)
                }
                TypedRecord::Command { .. } => 1,
                TypedRecord::Joined(player) => 2 << 40 | u64::from(player.0),
                TypedRecord::Left(player) => 3 << 40 | u64::from(player.0),
            };
            self.state = (self.state ^ word).wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.state = (self.state ^ u64::from(turn.turn.0)).wrapping_mul(0x0000_0100_0000_01b3);
    }
}

/// A frame loop until the game executed `until` (or the session is over, or 20 s pass).
fn play(session: &mut Session<Order>, game: &mut Game, until: u32) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !session.is_over() && Instant::now() < deadline {
        while let Some(turn) = session.try_next_turn() {
            game.execute(&turn);
            let number = turn.turn.0;
            assert_eq!(session.is_catching_up(), turn.catching_up, "turn {number}");
            if turn.catching_up {
                game.caught_up.push(number);
            } else {
                game.first_live.get_or_insert(number);
            }
            if number % 10 == 0 {
                game.checks.insert(number, game.state);
                session.report_state_hash(turn.turn, game.state).expect("running");
            }
            if turn.wants_snapshot {
                let state = game.state.to_le_bytes().to_vec();
                session.offer_snapshot(turn.turn, game.state, state).expect("wanted");
            }
            // A player gives no orders while its game replays past turns.
            if number % 5 == 0 && !turn.catching_up {
                let _ = session.submit(&Order(number));
            }
            if number >= until {
                return;
            }
        }
        while session.try_event().is_some() {}
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn options(token: u64, pin: &ClientTransport) -> ClientOptions {
    let mut options = ClientOptions::new(token, pin.clone());
    options.session = config();
    options
}

#[test]
fn a_crashed_player_comes_back_through_a_snapshot_and_agrees() {
    let (host, control, pin) = host(vec![1, 2, 3], |_| {});
    let addr = control.local_addr();
    // The player that crashes runs on a runtime of the test's, over a socket that can die.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (socket, dead) = {
        let _entered = runtime.enter();
        common::Killable::bind()
    };
    let mut doomed = options(3, &pin);
    doomed.transport = socket.client_transport(pin.clone());
    let mut sessions: Vec<Session<Order>> = [1, 2]
        .into_iter()
        .map(|token| Session::connect(addr, options(token, &pin), None).expect("joins"))
        .collect();
    sessions.push(Session::connect(addr, doomed, Some(runtime.handle().clone())).expect("joins"));
    control.start().expect("starts");

    let mut threads = Vec::new();
    for (index, mut session) in sessions.into_iter().enumerate() {
        let (dead, pin) = (dead.clone(), pin.clone());
        threads.push(std::thread::spawn(move || {
            let mut game = Game::default();
            if index < 2 {
                play(&mut session, &mut game, LAST_TURN);
                session.shutdown();
                return game;
            }
            play(&mut session, &mut game, CRASH_TURN);
            dead.store(true, Ordering::Relaxed);
            drop(session);
            let (mut session, received) = rejoin(addr, &pin);
            // The reply's progress was reported: at least the snapshot's 8 bytes and the
            // turns after it.
            assert!(received > 8, "join progress: {received} bytes");
            let mut game = Game::default();
            play(&mut session, &mut game, LAST_TURN);
            session.shutdown();
            game
        }));
    }
    let games: Vec<Game> = threads.into_iter().map(|t| t.join().expect("no panic")).collect();
    let events = host_events(host);

    let back = &games[2];
    let restored = back.restored.expect("the new process restored a snapshot");
    assert!((40..=CRASH_TURN + 60).contains(&restored), "restored turn {restored}");
    // The returning game replayed the turns after its snapshot as catch-up, then played live;
    // the others never caught up.
    let first_live = back.first_live.expect("it played live");
    let expected: Vec<u32> = (restored + 1..first_live).collect();
    assert!(!expected.is_empty(), "live play resumed at {first_live}, after {restored}");
    assert_eq!(back.caught_up, expected, "catch-up turns");
    assert!(games[..2].iter().all(|game| game.caught_up.is_empty()));
    assert!(events.iter().any(|e| matches!(e, Event::SnapshotStored { .. })), "{events:?}");
    assert!(events.contains(&Event::PlayerRejoined(phalanx::PlayerId(2))), "{events:?}");
    assert!(!events.iter().any(|e| matches!(e, Event::Desync(_))), "{events:?}");
    // Every check turn two games both executed has one hash; the new process has many.
    let after: Vec<u32> = back.checks.keys().copied().filter(|&t| t > restored).collect();
    assert!(after.len() >= 10, "checks after the restore: {after:?}");
    for turn in after {
        assert_eq!(back.checks[&turn], games[0].checks[&turn], "check turn {turn}");
        assert_eq!(games[1].checks[&turn], games[0].checks[&turn], "check turn {turn}");
    }
}

/// Joins again with the crashed process's token, as a restarted client would: while the
/// host still holds the seat for the dead connection the token is refused, so retry. Returns
/// the session and the most reply bytes its join progress reported.
fn rejoin(addr: std::net::SocketAddr, pin: &ClientTransport) -> (Session<Order>, usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let received = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = received.clone();
        let mut options = options(3, pin);
        options.join_progress = Some(phalanx::session::JoinProgress::new(move |bytes| {
            seen.fetch_max(bytes, Ordering::Relaxed);
        }));
        match Session::connect(addr, options, None) {
            Ok(session) => return (session, received.load(Ordering::Relaxed)),
            Err(ConnectError::Join(phalanx::error::ClientJoinError::Refused(
                JoinRefusal::TokenUsed,
            ))) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(error) => panic!("rejoin failed: {error}"),
        }
    }
}

#[test]
fn a_late_joiner_starts_from_a_snapshot_and_agrees() {
    let (host, control, pin) = host(vec![1, 2, 3], |options| {
        options.session.catch_up.late_join = true;
        // No interval: the host asks for one snapshot before the late player comes.
        options.session.catch_up.snapshot_interval_turns = 0;
    });
    let addr = control.local_addr();
    let sessions: Vec<Session<Order>> = [1, 2]
        .into_iter()
        .map(|token| Session::connect(addr, options(token, &pin), None).expect("joins"))
        .collect();
    control.start().expect("starts");
    let mut threads: Vec<_> = sessions
        .into_iter()
        .map(|mut session| {
            std::thread::spawn(move || {
                let mut game = Game::default();
                play(&mut session, &mut game, LAST_TURN);
                session.shutdown();
                game
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1_000));
    control.request_snapshot().expect("sync checks are on");
    threads.push(std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1_000));
        let mut session = Session::connect(addr, options(3, &pin), None).expect("joins late");
        let mut game = Game::default();
        play(&mut session, &mut game, LAST_TURN);
        session.shutdown();
        game
    }));
    let games: Vec<Game> = threads.into_iter().map(|t| t.join().expect("no panic")).collect();
    let events = host_events(host);
    let late = &games[2];
    let restored = late.restored.expect("the late joiner started from a snapshot");
    assert!(restored >= 20, "restored turn {restored}");
    assert!(!events.iter().any(|e| matches!(e, Event::Desync(_))), "{events:?}");
    let after: Vec<u32> = late.checks.keys().copied().filter(|&t| t > restored).collect();
    assert!(after.len() >= 5, "checks after the start: {after:?}");
    for turn in after {
        assert_eq!(late.checks[&turn], games[0].checks[&turn], "check turn {turn}");
    }
}

#[test]
fn spectators_watch_from_the_start_and_from_mid_game_and_agree() {
    let (host, control, pin) = host(vec![1, 2], |options| options.spectator_tokens = vec![71, 72]);
    let addr = control.local_addr();
    let connect = move |token| Session::connect(addr, options(token, &pin), None);
    let sessions: Vec<Session<Order>> =
        [1, 2, 71].into_iter().map(|token| connect(token).expect("joins")).collect();
    control.start().expect("starts");
    let mut threads: Vec<_> = sessions
        .into_iter()
        .map(|mut session| {
            std::thread::spawn(move || {
                let mut game = Game::default();
                if session.player().is_none() {
                    // A spectator has no player: its orders are refused, nothing is queued.
                    let refused = session.submit(&Order(1));
                    assert!(
                        matches!(refused, Err(phalanx::SessionError::Submit(_))),
                        "{refused:?}"
                    );
                }
                play(&mut session, &mut game, LAST_TURN);
                session.shutdown();
                game
            })
        })
        .collect();
    threads.push(std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(2_000));
        let mut session = connect(72).expect("watches mid-game");
        let mut game = Game::default();
        play(&mut session, &mut game, LAST_TURN);
        session.shutdown();
        game
    }));
    let games: Vec<Game> = threads.into_iter().map(|t| t.join().expect("no panic")).collect();
    let events = host_events(host);
    assert!(!events.iter().any(|e| matches!(e, Event::Desync(_))), "{events:?}");
    assert_eq!(games[2].restored, None, "the first spectator watched from turn 0");
    let restored = games[3].restored.expect("the second started from a snapshot");
    for (index, game) in games.iter().enumerate().skip(2) {
        let watched: Vec<u32> = game.checks.keys().copied().filter(|&t| t > restored).collect();
        assert!(watched.len() >= 5, "spectator {index} checks: {watched:?}");
        for turn in watched {
            assert_eq!(game.checks[&turn], games[0].checks[&turn], "check turn {turn}");
        }
    }
}

/// Every event the host queued, then shuts it down.
fn host_events(mut host: Session<Order>) -> Vec<Event> {
    let mut events = Vec::new();
    while let Some(event) = host.try_event() {
        events.push(event);
    }
    host.shutdown();
    events
}

/// A dedicated host on loopback for `tokens`, with the test's session and `adjust`ed options:
/// its session, its controls and the transport clients join with (its pin).
fn host(
    tokens: Vec<u64>,
    adjust: impl FnOnce(&mut HostOptions),
) -> (Session<Order>, HostControl, ClientTransport) {
    let transport = common::host_transport(common::transport());
    let mut options = HostOptions::new(transport, "127.0.0.1:0".parse().unwrap(), tokens);
    options.session = config();
    adjust(&mut options);
    let (host, control): (Session<Order>, _) = Session::host(options, None).expect("binds");
    let pin = control.pin().into();
    (host, control, pin)
}
