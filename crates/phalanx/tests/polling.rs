//! The polling [`Session`] from plain threads, as a 60 Hz frame loop would use it: one loop
//! function drives every role — a host that plays, a dedicated host that observes, a client —
//! with no async in the game's code. Every session executes the same turns, and the host's
//! `end` ends every one of them. Bounded in time.

use std::time::{Duration, Instant};

mod common;

use phalanx::{
    ClientOptions, EndReason, HostControl, HostOptions, Session, SessionConfig, TypedRecord,
};

#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
struct Order(u32);

fn config() -> SessionConfig {
    let mut session = SessionConfig::default();
    session.turns.length_ms = 20;
    session
}

/// The game loop every role runs: take every due turn, submit an order every few turns (when
/// the session has a player), end the game at `end_at` (a host), sleep a frame; stop when the
/// session is over. Returns every executed turn, rendered, and the last turn `end` named.
fn frame_loop(
    session: &mut Session<Order>,
    end_at: Option<(u32, &HostControl)>,
) -> (Vec<String>, Option<u32>) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let (mut turns, mut last) = (Vec::new(), None);
    let mut timed_frames = 0;
    while !session.is_over() && Instant::now() < deadline {
        // What a renderer reads every frame: how far it is to the next turn. Turns are 20 ms
        // here, behind a playout buffer of at most 80 ms.
        if let Some(until) = session.until_next_turn() {
            assert!(until <= Duration::from_millis(120), "next turn in {until:?}");
            timed_frames += 1;
        }
        while let Some(turn) = session.try_next_turn() {
            assert_eq!(turn.length_ms, 20, "the turn carries its length");
            if session.player().is_some() && turn.turn.0 % 3 == 0 {
                session.submit(&Order(turn.turn.0)).expect("within budget");
            }
            if let Some((_, control)) = end_at.filter(|&(at, _)| at == turn.turn.0) {
                last = Some(control.end(9).expect("a host ends the game").0);
            }
            turns.push(format!("{:?}", turn.records));
        }
        while let Some(event) = session.try_event() {
            if let phalanx::Event::Desync(report) = event {
                panic!("desync {report:?}");
            }
        }
        std::thread::sleep(Duration::from_millis(16));
    }
    assert!(timed_frames > 10, "the time to the next turn is known while the game runs");
    (turns, last)
}

/// Runs a host (playing or observing) and two clients, each in its own thread with its own
/// session runtime; returns each one's turns and how its session ended.
/// The last turn, and each session's turns and end: the host's first, then the clients'.
type Game = (u32, Vec<(Vec<String>, Option<EndReason>)>);

fn game(host_plays: bool) -> Game {
    let transport = common::host_transport(common::transport());
    let mut options = HostOptions::new(transport, "127.0.0.1:0".parse().unwrap(), vec![1, 2]);
    options.session = config();
    options.local_player = host_plays;
    options.observe_turns = !host_plays;
    let (mut host, control): (Session<Order>, _) = Session::host(options, None).expect("binds");
    let addr = control.local_addr();
    let clients: Vec<Session<Order>> = [1, 2]
        .into_iter()
        .map(|token| {
            let mut options = ClientOptions::new(token, control.pin());
            options.session = config();
            Session::connect(addr, options, None).expect("joins")
        })
        .collect();
    control.start().expect("starts");
    let threads: Vec<_> = clients
        .into_iter()
        .map(|mut client| {
            std::thread::spawn(move || {
                let (turns, _) = frame_loop(&mut client, None);
                let ended = client.ended();
                client.shutdown();
                (turns, ended)
            })
        })
        .collect();
    let (turns, last) = frame_loop(&mut host, Some((40, &control)));
    let mut results = vec![(turns, host.ended())];
    results.extend(threads.into_iter().map(|thread| thread.join().expect("no panic")));
    host.shutdown();
    (last.expect("the host reached turn 40"), results)
}

fn check((last, results): &Game) {
    let (reference, _) = &results[0];
    assert!(*last > 40, "the end goes into a turn not sealed yet");
    assert_eq!(reference.len(), *last as usize + 1, "every turn up to the last, then over");
    assert!(reference.iter().any(|turn| turn.contains("Command")), "orders flowed");
    for (turns, ended) in &results[1..] {
        assert_eq!(turns, reference, "every role executes the same turns");
        assert_eq!(*ended, Some(EndReason::Finished { code: 9 }));
    }
}

#[test]
fn a_listen_server_and_its_clients_share_one_loop() {
    let results = game(true);
    check(&results);
    let host_turns = &results.1[0].0;
    // The host's own player submitted too.
    assert!(host_turns.iter().any(|t| t.contains("player: PlayerId(0)")), "{host_turns:?}");
}

#[test]
fn a_dedicated_host_and_its_clients_share_one_loop() {
    check(&game(false));
}

/// The host's controls are a handle of their own: a lobby thread holds a clone, reads the
/// address and pin, pauses and resumes while the frame loop runs; after the host shut down
/// every control says the session is closed.
#[test]
fn the_host_controls_work_from_another_thread_and_close_with_the_host() {
    let transport = common::host_transport(common::transport());
    let mut options = HostOptions::new(transport, "127.0.0.1:0".parse().unwrap(), vec![1]);
    options.session = config();
    let (host, control): (Session<Order>, _) = Session::host(options, None).expect("binds");
    let addr = control.local_addr();
    let mut options = ClientOptions::new(1, control.pin());
    options.session = config();
    let client: Session<Order> = Session::connect(addr, options, None).expect("joins");
    // The pin a lobby hands out names the host's transport and reads back from its text.
    assert_eq!(control.pin().transport(), common::transport());
    assert_eq!(control.pin().to_string().parse(), Ok(control.pin()));
    let lobby = control.clone();
    let thread = std::thread::spawn(move || {
        lobby.start().expect("starts");
        lobby.pause().expect("pauses");
        lobby.resume().expect("resumes");
        lobby.stats().expect("stats").0.turns_sealed
    });
    thread.join().expect("the lobby thread");
    assert_eq!(control.admission_stats().joins_accepted, 1);
    let _ = TypedRecord::<Order>::Left; // the record type games match on is public
    client.shutdown();
    host.shutdown();
    assert_eq!(control.end(0), Err(phalanx::SessionError::Closed));
    assert_eq!(control.start(), Err(phalanx::SessionError::Closed));
}

/// Orders come from an input thread through a `Submitter` while the frame loop only executes
/// turns: every order executes, once, on every peer.
#[test]
fn orders_can_come_from_another_thread() {
    let transport = common::host_transport(common::transport());
    let mut options = HostOptions::new(transport, "127.0.0.1:0".parse().unwrap(), vec![1]);
    options.session = config();
    options.observe_turns = true;
    let (mut host, control): (Session<Order>, _) = Session::host(options, None).expect("binds");
    let addr = control.local_addr();
    let mut options = ClientOptions::new(1, control.pin());
    options.session = config();
    let mut client: Session<Order> = Session::connect(addr, options, None).expect("joins");
    let submitter = client.submitter();
    control.start().expect("starts");
    let input = std::thread::spawn(move || {
        (0..10u32)
            .map(|order| {
                std::thread::sleep(Duration::from_millis(30));
                submitter.submit_blocking(&Order(1_000 + order)).expect("accepted").seq
            })
            .collect::<Vec<_>>()
    });
    let player = std::thread::spawn(move || {
        let (turns, _) = frame_loop_without_orders(&mut client);
        client.shutdown();
        turns
    });
    let sent = input.join().expect("no panic");
    let (observed, _) = frame_loop(&mut host, Some((40, &control)));
    let played = player.join().expect("no panic");
    host.shutdown();
    assert_eq!(sent.len(), 10);
    assert_eq!(played, observed, "the host's game executes what the player executes");
    for order in 1_000..1_010 {
        let executed = observed.iter().filter(|turn| turn.contains(&format!("Order({order})")));
        assert_eq!(executed.count(), 1, "order {order} executes once");
    }
}

/// A frame loop that only executes (its orders come from elsewhere).
fn frame_loop_without_orders(session: &mut Session<Order>) -> (Vec<String>, ()) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut turns = Vec::new();
    while !session.is_over() && Instant::now() < deadline {
        while let Some(turn) = session.try_next_turn() {
            turns.push(format!("{:?}", turn.records));
        }
        std::thread::sleep(Duration::from_millis(16));
    }
    (turns, ())
}
