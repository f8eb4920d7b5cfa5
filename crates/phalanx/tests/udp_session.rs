//! Sessions over the raw-UDP transport (`phalanx::udp`), as a game uses them: a host and
//! three clients pinning the host's UDP key play in frame loops over loopback; every client
//! executes the same turns with the same commands; a desync's forensics travel over the
//! transport's reliable messages (hashes, then both states); the host's end ends everyone;
//! a wrong key fails with a typed error.

#![cfg(feature = "udp")]

mod common;

use std::time::{Duration, Instant};

use phalanx::udp::{HostConfig, HostPublicKey, UdpConnectError};
use phalanx::{
    ClientOptions, ConnectError, EndReason, Event, HostControl, HostOptions, Session,
    SessionConfig, TypedRecord,
};

#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
struct Order(u32);

const DIVERGE_AFTER: u32 = 57;
const END_AT: u32 = 120;

fn config() -> SessionConfig {
    let mut session = SessionConfig::default();
    session.turns.length_ms = 20;
    session
}

fn client_options(token: u64, key: HostPublicKey) -> ClientOptions {
    let mut options = ClientOptions::new(token, key);
    options.session = config();
    options
}

/// A host over UDP and its three joined clients.
fn start() -> (Session<Order>, HostControl, Vec<Session<Order>>) {
    let host = HostConfig::generate();
    let key = host.public_key();
    let mut options = HostOptions::new(host, "127.0.0.1:0".parse().unwrap(), vec![1, 2, 3]);
    options.session = config();
    options.observe_turns = true; // a dedicated host that runs the game too, to end it
    let (host, control): (Session<Order>, _) = Session::host(options, None).expect("binds");
    let addr = control.local_addr();
    let clients = [1, 2, 3]
        .into_iter()
        .map(|token| {
            Session::connect(addr, client_options(token, key), None).expect("joins over UDP")
        })
        .collect();
    control.start().expect("starts");
    (host, control, clients)
}

/// A client's frame loop: every turn's commands rendered, its state hash reported and state
/// kept (`diverges`: one bit flips after `DIVERGE_AFTER`), an order every 4 turns; until the
/// session is over.
fn play(mut session: Session<Order>, diverges: bool) -> (Vec<String>, Option<EndReason>) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let (mut state, mut hp, mut executed) = (7u64, 100u32, Vec::new());
    while !session.is_over() && Instant::now() < deadline {
        while let Some(turn) = session.try_next_turn() {
            for record in &turn.records {
                if let TypedRecord::Command { player, command: Ok(Order(n)), .. } = record {
                    executed.push(format!("{} {} {n}", turn.turn.0, player.0));
                    state = (state ^ (u64::from(player.0) << 32 | u64::from(*n))).wrapping_mul(31);
                }
            }
            if diverges && turn.turn.0 == DIVERGE_AFTER {
                hp ^= 1;
            }
            let hash = (state ^ u64::from(hp)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let _ = session.report_state_hash(turn.turn, hash);
            let saved = common::save_state(state, hp);
            let _ = session.keep_state(turn.turn, saved);
            if turn.turn.0 % 4 == 0 {
                let _ = session.submit(&Order(turn.turn.0));
            }
        }
        while session.try_event().is_some() {}
        std::thread::sleep(Duration::from_millis(5));
    }
    (executed, session.ended())
}

#[test]
fn three_clients_play_over_udp_and_a_desync_is_diagnosed() {
    let (mut host, control, clients) = start();
    let diverging = clients[1].player().expect("a player");
    let threads: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(index, session)| std::thread::spawn(move || play(session, index == 1)))
        .collect();
    let (mut pinned, mut diagnosed, mut ended_at) = (Vec::new(), Vec::new(), None);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !host.is_over() && Instant::now() < deadline {
        while let Some(turn) = host.try_next_turn() {
            if turn.turn.0 == END_AT && ended_at.is_none() {
                ended_at = Some(control.end(0).expect("the host ends it"));
            }
        }
        while let Some(event) = host.try_event() {
            match event {
                Event::DesyncPinned { first_turn, players, .. } => {
                    pinned.push((first_turn.0, players));
                }
                Event::DesyncDiagnosed(bundle) => diagnosed.push(bundle),
                _ => {}
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let results: Vec<_> = threads.into_iter().map(|t| t.join().expect("no panic")).collect();
    for (index, (executed, ended)) in results.iter().enumerate() {
        assert_eq!(*ended, Some(EndReason::Finished { code: 0 }), "client {index}");
        assert_eq!(executed, &results[0].0, "client {index} executed the same commands");
    }
    assert!(results[0].0.len() > 60, "orders flowed: {}", results[0].0.len());
    assert_eq!(pinned, vec![(DIVERGE_AFTER, vec![diverging])]);
    let bundle = diagnosed.first().expect("both states came over the reliable messages");
    assert_eq!(bundle.diff(common::inspect), Ok(vec!["hp".to_owned()]));
    host.shutdown();
}

#[test]
fn a_wrong_key_fails_with_a_typed_error_and_takes_no_seat() {
    let host = HostConfig::generate();
    let right = host.public_key();
    let options = HostOptions::new(host, "127.0.0.1:0".parse().unwrap(), vec![1, 2]);
    let (_host, control): (Session<Order>, _) = Session::host(options, None).expect("binds");
    assert_eq!(control.pin(), phalanx::Pin::UdpKey(right));
    let addr = control.local_addr();
    let other = HostConfig::generate().public_key();
    let error =
        Session::<Order>::connect(addr, client_options(1, other), None).err().expect("refused");
    match error {
        ConnectError::Udp(UdpConnectError::WrongHostKey { pinned, host }) => {
            assert_eq!((pinned, host), (other, right));
        }
        other => panic!("expected WrongHostKey, got {other}"),
    }
    // The right key still joins: the failed attempt took no seat.
    let joined = Session::<Order>::connect(addr, client_options(1, right), None);
    assert!(joined.is_ok());
}
