//! Desync forensics over real QUIC on loopback, as a game uses it: three players in frame
//! loops report their state hash after every turn; one player's state diverges after turn
//! 57. The host pins the first divergent turn exactly (`HostEvent::DesyncPinned`) from the
//! turn hashes the players send when the desync is announced, and the game goes on (warn).
//! The players keep their state after every turn, so the host then gets both states after
//! that turn (`HostEvent::DesyncDiagnosed`), and the game's inspection hook names the field
//! that differs.

mod common;

use std::time::{Duration, Instant};

use phalanx::{
    ClientOptions, HostEvent, HostIdentity, HostOptions, HostVerification, Session, SessionConfig,
    SessionError, SessionEvent, Turn, TypedRecord,
};

#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
struct Order(u32);

const DIVERGE_AFTER: u32 = 57;
const LAST_TURN: u32 = 120;

fn config() -> SessionConfig {
    let mut session = SessionConfig::default();
    session.turn_length_ms = 20;
    session
}

/// Plays to `LAST_TURN`, reporting every turn's hash and keeping every turn's state;
/// `diverges`: one bit of its `hp` flips after `DIVERGE_AFTER`.
fn play(mut session: Session<Order>, diverges: bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut state = 7u64;
    let mut hp = 100u32;
    while !session.is_over() && Instant::now() < deadline {
        while let Some(turn) = session.try_next_turn() {
            for record in &turn.records {
                if let TypedRecord::Command { player, command: Ok(Order(n)), .. } = record {
                    state = (state ^ (u64::from(player.0) << 32 | u64::from(*n))).wrapping_mul(31);
                }
            }
            state = (state ^ u64::from(turn.turn.0)).wrapping_mul(0x0000_0100_0000_01b3);
            if diverges && turn.turn.0 == DIVERGE_AFTER {
                hp ^= 1;
            }
            let hash = (state ^ u64::from(hp)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            session.report_state_hash(turn.turn, hash).expect("running");
            let saved = common::save_state(state, hp);
            session.keep_state(turn.turn, saved).expect("kept");
            if turn.turn.0 % 4 == 0 {
                let _ = session.submit(&Order(turn.turn.0));
            }
            if turn.turn.0 >= LAST_TURN {
                session.shutdown();
                return;
            }
        }
        while session.try_event().is_some() {}
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("did not reach turn {LAST_TURN}");
}

#[test]
fn the_first_divergent_turn_is_pinned_exactly() {
    let identity = HostIdentity::generate_self_signed("forensics").unwrap();
    let fingerprint = identity.fingerprint();
    let mut options = HostOptions::new(identity, "127.0.0.1:0".parse().unwrap(), vec![1, 2, 3]);
    options.session = config();
    let mut host: Session<Order> = Session::host(options, None).expect("binds");
    let addr = host.as_host().unwrap().local_addr().unwrap();
    let sessions: Vec<Session<Order>> = [1, 2, 3]
        .into_iter()
        .map(|token| {
            let mut options = ClientOptions::new(token, HostVerification::Pinned(fingerprint));
            options.session = config();
            Session::connect(addr, options, None).expect("joins")
        })
        .collect();
    let diverging = sessions[1].player().expect("a player");
    host.start().expect("starts");
    let threads: Vec<_> = sessions
        .into_iter()
        .enumerate()
        .map(|(index, session)| std::thread::spawn(move || play(session, index == 1)))
        .collect();
    threads.into_iter().for_each(|t| t.join().expect("no panic"));
    // The uploads ride streams of their own: give the last ones a moment.
    std::thread::sleep(Duration::from_millis(300));
    let (mut pinned, mut diagnosed) = (Vec::new(), Vec::new());
    while let Some(SessionEvent::Host(event)) = host.try_event() {
        match event {
            HostEvent::DesyncPinned { check_turn, first_turn, players, exact } => {
                pinned.push((check_turn, first_turn, players, exact));
            }
            HostEvent::DesyncDiagnosed(bundle) => diagnosed.push(bundle),
            _ => {}
        }
    }
    assert!(matches!(host.keep_state(Turn(1), vec![]), Err(SessionError::NotClient)));
    host.shutdown();
    assert_eq!(pinned, vec![(Turn(60), Turn(DIVERGE_AFTER), vec![diverging], true)]);
    assert_eq!(diagnosed.len(), 1, "one bundle");
    let bundle = &diagnosed[0];
    assert_eq!((bundle.first_turn, bundle.diverged.player), (Turn(DIVERGE_AFTER), diverging));
    assert_eq!(bundle.diff(common::inspect), Ok(vec!["hp".to_owned()]));
}
