//! A session's life on real loopback sockets, through the public API only: the host's controls
//! (pause, resume, recording, end) and the three ways a session ends for a client — the host
//! ends the game (`Finished`), the host shuts down (`HostClosed`, at once), and another
//! player leaves (the others execute its `Left` record). Every test is bounded in time.

mod common;

use std::time::{Duration, Instant};

use phalanx::{
    error::EndError,
    proto::{DefaultCodec, PauseBy},
    replay::{verify_replay, ReplayGame, TurnBundle},
    Client, ClientOptions, EndReason, Event, Host, HostOptions, PlayerId, SessionConfig,
    SessionError, TypedRecord, TypedTurn,
};

#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
struct Order(u32);

fn session() -> SessionConfig {
    let mut session = SessionConfig::default();
    session.turns.length_ms = 20;
    session
}

async fn host(tokens: Vec<u64>) -> Host<Order> {
    let identity = common::host_transport(common::transport());
    let mut options = HostOptions::new(identity, "127.0.0.1:0".parse().unwrap(), tokens);
    options.session = session();
    Host::bind(options).await.unwrap()
}

async fn join(host: &Host<Order>, token: u64) -> Client<Order> {
    let mut options = ClientOptions::new(token, host.pin());
    options.session = session();
    Client::connect(host.local_addr().unwrap(), options).await.expect("joins")
}

/// The game: a hash chain over every order and membership change, in execution order.
fn fold(state: u64, turn: &TypedTurn<Order>) -> u64 {
    turn.records.iter().fold(state, |state, record| {
        let value = match record {
            TypedRecord::Command { player, command: Ok(Order(order)), .. } => {
                u64::from(*order) << 8 | u64::from(player.0)
            }
            TypedRecord::Joined(player) => 1 << 40 | u64::from(player.0),
            TypedRecord::Left(player) => 2 << 40 | u64::from(player.0),
            _ => 3 << 40,
        };
        (state ^ value).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The same game, re-run from a replay's bundles.
struct Chain(u64);

impl ReplayGame for Chain {
    fn execute(&mut self, bundle: &TurnBundle) {
        self.0 = fold(self.0, &TypedTurn::decode::<DefaultCodec>(bundle.clone()));
    }
    fn state_hash(&self) -> u64 {
        self.0
    }
}

/// What a client saw: the last turn it executed, the events it got, who it saw leave, and how
/// its session ended.
#[derive(Debug)]
struct Seen {
    last_turn: Option<u32>,
    events: Vec<Event>,
    left: Vec<PlayerId>,
    ended: Option<EndReason>,
    ended_at: Instant,
}

/// Plays until `next_turn` returns `None` (or `stop_after` turns, then leaves), submitting an
/// order every few turns.
fn play(mut client: Client<Order>, stop_after: Option<u32>) -> tokio::task::JoinHandle<Seen> {
    tokio::spawn(async move {
        let mut seen = Seen {
            last_turn: None,
            events: Vec::new(),
            left: Vec::new(),
            ended: None,
            ended_at: Instant::now(),
        };
        let mut state = 0;
        while let Some(turn) = client.next_turn().await {
            state = fold(state, &turn);
            if turn.turn.0 % session().sync.interval_turns == 0 {
                let _ = client.report_state_hash(turn.turn, state).await;
            }
            seen.last_turn = Some(turn.turn.0);
            for record in &turn.records {
                if let TypedRecord::Left(player) = record {
                    seen.left.push(*player);
                }
            }
            while let Some(event) = client.try_event() {
                seen.events.push(event);
            }
            if stop_after.is_some_and(|turns| turn.turn.0 + 1 >= turns) {
                client.shutdown().await;
                seen.ended_at = Instant::now();
                return seen;
            }
            if turn.turn.0 % 3 == 0 {
                let _ = client.submit(&Order(turn.turn.0)).await;
            }
        }
        while let Some(event) = client.try_event() {
            seen.events.push(event);
        }
        seen.ended = client.ended();
        seen.ended_at = Instant::now();
        client.shutdown().await;
        seen
    })
}

/// The host pauses, resumes, records and ends the game: every client gets the pause on the
/// same footing, executes up to the last turn `end` returned and ends `Finished` with the
/// host's code; the replay holds every sealed turn; ending twice, or before the start, is a
/// typed error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_ends_the_game_for_everyone() {
    let test = async {
        let host = host(vec![1, 2]).await;
        let early = host.end(1).await;
        let clients = vec![join(&host, 1).await, join(&host, 2).await];
        host.start().await.unwrap();
        host.start_recording(42, 10_000).await.unwrap();
        let tasks: Vec<_> = clients.into_iter().map(|client| play(client, None)).collect();
        tokio::time::sleep(Duration::from_millis(300)).await;
        host.pause().await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        host.resume().await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let last = host.end(7).await.expect("ends");
        let again = host.end(8).await;
        let mut seen = Vec::new();
        for task in tasks {
            seen.push(task.await.unwrap());
        }
        let replay = host.replay().await;
        host.shutdown().await;
        (early, last, again, seen, replay)
    };
    let (early, last, again, seen, replay) =
        tokio::time::timeout(Duration::from_secs(30), test).await.expect("bounded");
    assert!(matches!(early, Err(SessionError::End(EndError::NotStarted))), "{early:?}");
    assert!(matches!(again, Err(SessionError::End(EndError::AlreadyEnded))), "{again:?}");
    for client in &seen {
        assert_eq!(client.ended, Some(EndReason::Finished { code: 7 }), "{client:?}");
        assert_eq!(client.last_turn, Some(last.0), "executes up to the last turn");
        assert!(client.events.contains(&Event::Paused(PauseBy::Host)), "{client:?}");
        assert!(client.events.contains(&Event::Resumed(PauseBy::Host)), "{client:?}");
    }
    let replay = replay.expect("the driver answered").expect("recording");
    assert_eq!(replay.seed, 42);
    assert_eq!(replay.first_turn + replay.turns.len() as u32, last.0 + 1, "every sealed turn");
    assert!(!replay.truncated);
    // Recording started at turn 0 here, so the game re-runs from its initial state.
    assert_eq!(replay.first_turn, 0);
    let verified = verify_replay(&replay, &mut Chain(0)).expect("the replay verifies");
    assert_eq!(verified.turns, last.0 + 1);
    assert!(verified.checks_matched >= 3, "{verified:?}");
}

/// The host shuts down mid-game: every client ends `HostClosed` at once, not after the 3 s
/// idle timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_shutdown_ends_every_client_at_once() {
    let test = async {
        let host = host(vec![1, 2]).await;
        let clients = vec![join(&host, 1).await, join(&host, 2).await];
        host.start().await.unwrap();
        let tasks: Vec<_> = clients.into_iter().map(|client| play(client, None)).collect();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let closed_at = Instant::now();
        host.shutdown().await;
        let mut seen = Vec::new();
        for task in tasks {
            seen.push(task.await.unwrap());
        }
        (closed_at, seen)
    };
    let (closed_at, seen) =
        tokio::time::timeout(Duration::from_secs(30), test).await.expect("bounded");
    for client in &seen {
        assert_eq!(client.ended, Some(EndReason::HostClosed), "{client:?}");
        let after = client.ended_at.saturating_duration_since(closed_at);
        assert!(after < Duration::from_millis(1_000), "ended {after:?} after the close");
    }
}

/// A client leaves: the host removes it at its next sealed turn, and the others execute its
/// `Left` record long before an idle timeout would have fired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaving_player_is_seen_leaving_at_once() {
    let test = async {
        let host = host(vec![1, 2]).await;
        let leaver = join(&host, 1).await;
        let stayer = join(&host, 2).await;
        let (leaver_id, stayer_id) = (leaver.player().unwrap(), stayer.player().unwrap());
        host.start().await.unwrap();
        let leaving = play(leaver, Some(20));
        let staying = play(stayer, None);
        let left = leaving.await.unwrap();
        // Give the stayer well under an idle timeout (3 s) to see it.
        tokio::time::sleep(Duration::from_millis(500)).await;
        host.end(0).await.expect("ends");
        let stayed = staying.await.unwrap();
        host.shutdown().await;
        (leaver_id, stayer_id, left, stayed)
    };
    let (leaver_id, stayer_id, left, stayed) =
        tokio::time::timeout(Duration::from_secs(30), test).await.expect("bounded");
    assert_ne!(leaver_id, stayer_id);
    assert!(left.last_turn.is_some());
    assert_eq!(stayed.left, vec![leaver_id], "{stayed:?}");
    assert_eq!(stayed.ended, Some(EndReason::Finished { code: 0 }));
}

/// A dedicated host with `observe_turns` runs the game too: its `next_turn` yields every sealed
/// turn, the same records the players execute, and returns `None` after the last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dedicated_host_sees_every_turn() {
    let test = async {
        let identity = common::host_transport(common::transport());
        let mut options = HostOptions::new(identity, "127.0.0.1:0".parse().unwrap(), vec![1, 2]);
        options.session = session();
        options.observe_turns = true;
        let mut host: Host<Order> = Host::bind(options).await.unwrap();
        let clients = vec![join(&host, 1).await, join(&host, 2).await];
        host.start().await.unwrap();
        let tasks: Vec<_> = clients
            .into_iter()
            .map(|mut client| {
                tokio::spawn(async move {
                    let mut seen = Vec::new();
                    while let Some(turn) = client.next_turn().await {
                        if turn.turn.0 % 4 == 0 {
                            let _ = client.submit(&Order(turn.turn.0)).await;
                        }
                        seen.push(format!("{turn:?}"));
                    }
                    client.shutdown().await;
                    seen
                })
            })
            .collect();
        let mut observed = Vec::new();
        let mut last = None;
        while let Some(turn) = host.next_turn().await {
            observed.push(format!("{turn:?}"));
            if turn.turn.0 == 30 {
                last = Some(host.end(3).await.expect("ends"));
            }
        }
        let mut played = Vec::new();
        for task in tasks {
            played.push(task.await.unwrap());
        }
        host.shutdown().await;
        (observed, last, played)
    };
    let (observed, last, played) =
        tokio::time::timeout(Duration::from_secs(30), test).await.expect("bounded");
    let last = last.expect("the host reached turn 30");
    assert_eq!(observed.len(), last.0 as usize + 1, "every sealed turn, then None");
    for seen in &played {
        assert_eq!(seen, &observed, "the host's game executes what the players execute");
    }
}

/// A loop on `next_update` ends with the game: after the last turn and the `Ended` event it
/// returns `None`, although the driver stays up (stats still answer).
#[tokio::test]
async fn a_next_update_loop_ends_with_the_game() {
    let test = async {
        let host = host(vec![1]).await;
        let mut client = join(&host, 1).await;
        host.start().await.unwrap();
        let (mut turns, mut ended, mut last) = (0u32, None, None);
        while let Some(update) = client.next_update().await {
            match update {
                phalanx::session::Update::Turn(turn) => {
                    turns += 1;
                    last = Some(turn.turn);
                    if turns == 10 {
                        host.end(0).await.unwrap();
                    }
                }
                phalanx::session::Update::Event(Event::Ended(reason)) => ended = Some(reason),
                phalanx::session::Update::Event(_) => {}
            }
        }
        let stats = client.stats().await;
        host.shutdown().await;
        (turns, last, ended, stats.is_ok())
    };
    let (turns, last, ended, stats) =
        tokio::time::timeout(Duration::from_secs(20), test).await.expect("the loop ended");
    assert!(turns > 10, "the turns up to the last: {turns}");
    assert_eq!(last.map(|turn| turn.0 + 1), Some(turns), "every turn, in order");
    assert_eq!(ended, Some(EndReason::Finished { code: 0 }));
    assert!(stats, "the driver still answers after the loop");
}
