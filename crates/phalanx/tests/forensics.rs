//! Desync forensics over real sockets on loopback (QUIC, or `PHALANX_TRANSPORT`), as a game uses it: three players in frame
//! loops report their state hash after every turn; one player's state diverges after turn
//! 57. The host pins the first divergent turn exactly (`Event::DesyncPinned`) from the
//! turn hashes the players send when the desync is announced, and the game goes on (warn).
//! The players keep their state after every turn, so the host then gets both states after
//! that turn (`Event::DesyncDiagnosed`), and the game's inspection hook names the field
//! that differs. A listen server's own game is a player like the others: when it is the one
//! that diverges, over QUIC and raw UDP, the host pins and diagnoses it all the same.

mod common;

use std::time::{Duration, Instant};

use phalanx::{
    error::SnapshotError, ClientOptions, Event, HostOptions, Session, SessionConfig, SessionError,
    Turn, TypedRecord,
};

#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
struct Order(u32);

const DIVERGE_AFTER: u32 = 57;
const LAST_TURN: u32 = 120;

fn config() -> SessionConfig {
    let mut session = SessionConfig::default();
    session.turns.length_ms = 20;
    session
}

/// Plays to `LAST_TURN`, reporting every turn's hash and keeping every turn's state;
/// `diverges`: one bit of its `hp` flips after `DIVERGE_AFTER`. Returns the events it saw.
fn play(session: Session<Order>, diverges: bool) -> Vec<Event> {
    play_to(session, diverges, LAST_TURN)
}

/// As [`play`], to `last`.
fn play_to(mut session: Session<Order>, diverges: bool, last: u32) -> Vec<Event> {
    let mut events = Vec::new();
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
            if turn.turn.0 >= last {
                events.extend(std::iter::from_fn(|| session.try_event()));
                session.shutdown();
                return events;
            }
        }
        events.extend(std::iter::from_fn(|| session.try_event()));
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("did not reach turn {last}");
}

#[test]
fn the_first_divergent_turn_is_pinned_exactly() {
    let transport = common::host_transport(common::transport());
    let mut options = HostOptions::new(transport, "127.0.0.1:0".parse().unwrap(), vec![1, 2, 3]);
    options.session = config();
    let (mut host, control): (Session<Order>, _) = Session::host(options, None).expect("binds");
    let addr = control.local_addr();
    let sessions: Vec<Session<Order>> = [1, 2, 3]
        .into_iter()
        .map(|token| {
            let mut options = ClientOptions::new(token, control.pin());
            options.session = config();
            Session::connect(addr, options, None).expect("joins")
        })
        .collect();
    let diverging = sessions[1].player().expect("a player");
    control.start().expect("starts");
    let threads: Vec<_> = sessions
        .into_iter()
        .enumerate()
        .map(|(index, session)| std::thread::spawn(move || play(session, index == 1)))
        .collect();
    threads.into_iter().for_each(|t| drop(t.join().expect("no panic")));
    // The uploads ride streams of their own: give the last ones a moment.
    std::thread::sleep(Duration::from_millis(300));
    let (mut pinned, mut diagnosed) = (Vec::new(), Vec::new());
    while let Some(event) = host.try_event() {
        match event {
            Event::DesyncPinned { check_turn, first_turn, players, exact } => {
                pinned.push((check_turn, first_turn, players, exact));
            }
            Event::DesyncDiagnosed(bundle) => diagnosed.push(bundle),
            _ => {}
        }
    }
    // A dedicated host has no game of its own to keep states of.
    let refused = host.keep_state(Turn(1), vec![]);
    assert_eq!(refused, Err(SessionError::Snapshot(SnapshotError::NotWanted { turn: Turn(1) })));
    host.shutdown();
    assert_eq!(pinned, vec![(Turn(60), Turn(DIVERGE_AFTER), vec![diverging], true)]);
    assert_eq!(diagnosed.len(), 1, "one bundle");
    let bundle = &diagnosed[0];
    assert_eq!((bundle.first_turn, bundle.diverged.player), (Turn(DIVERGE_AFTER), diverging));
    assert_eq!(bundle.diff(common::inspect), Ok(vec!["hp".to_owned()]));
}

/// A listen server whose own game diverges, with two clients that agree: the host keeps its
/// own turn hashes and states as a client does, pins the first divergent turn naming its own
/// player and diagnoses the field, over both transports.
#[test]
fn a_listen_servers_own_divergence_is_pinned_and_diagnosed() {
    for transport in common::transports() {
        let mut options = HostOptions::new(
            common::host_transport(transport),
            "127.0.0.1:0".parse().unwrap(),
            vec![1, 2],
        );
        options.session = config();
        options.local_player = true;
        let (host, control): (Session<Order>, _) = Session::host(options, None).expect("binds");
        let addr = control.local_addr();
        let own = host.player().expect("the host plays");
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
            .map(|session| std::thread::spawn(move || play(session, false)))
            .collect();
        // The host plays on past the clients' last turn, so that it never leaves before them.
        let events = play_to(host, true, LAST_TURN + 50);
        threads.into_iter().for_each(|t| drop(t.join().expect("no panic")));
        let (mut pinned, mut diagnosed) = (Vec::new(), Vec::new());
        for event in events {
            match event {
                Event::DesyncPinned { check_turn, first_turn, players, exact } => {
                    pinned.push((check_turn, first_turn, players, exact));
                }
                Event::DesyncDiagnosed(bundle) => diagnosed.push(bundle),
                _ => {}
            }
        }
        assert_eq!(pinned, vec![(Turn(60), Turn(DIVERGE_AFTER), vec![own], true)], "{transport:?}");
        assert_eq!(diagnosed.len(), 1, "{transport:?}: one bundle");
        let bundle = &diagnosed[0];
        assert_eq!((bundle.first_turn, bundle.diverged.player), (Turn(DIVERGE_AFTER), own));
        assert_eq!(bundle.diff(common::inspect), Ok(vec!["hp".to_owned()]), "{transport:?}");
    }
}
