//! Rejoin in the sans-IO session: who may take a seat back, and what the returning client is
//! given. (Over real QUIC with a crashed process: `sim-tests/tests/rejoin.rs`.)

use phalanx_proto::{
    Client, ClientJoinError, Host, HostEvent, JoinError, JoinRefusal, PlayerId, Record,
    SessionConfig, Turn,
};

const TOKENS: [u64; 2] = [11, 22];

/// A started host with two remote players who then fall silent: both time out at 3 s.
fn host_with_timed_out_players(config: SessionConfig) -> Host {
    let mut host = Host::new(config, &TOKENS).unwrap();
    for token in TOKENS {
        let (_, request) = Client::new(SessionConfig::default(), token).unwrap();
        assert!(host.handle_join(0, &request).result.is_ok());
    }
    host.start(0);
    host.start_recording(0, 10_000);
    for now in (0..=4_000).step_by(50) {
        host.handle_timeout(now);
    }
    let timed_out = std::iter::from_fn(|| host.poll_event())
        .filter(|event| matches!(event, HostEvent::PlayerTimedOut(_)))
        .count();
    assert_eq!(timed_out, 2);
    host
}

fn join(host: &mut Host, now_ms: u64, token: u64) -> (Client, Result<PlayerId, JoinError>) {
    let (mut client, request) = Client::new(SessionConfig::default(), token).unwrap();
    let response = host.handle_join(now_ms, &request);
    let reply = response.reply.expect("a reply");
    let joined = client.handle_join_reply(now_ms, &reply);
    match (&response.result, &joined) {
        (Ok(seat), Ok(player)) => assert_eq!(seat, player),
        (Err(JoinError::Refused(refusal)), Err(ClientJoinError::Refused(seen))) => {
            assert_eq!(refusal, seen)
        }
        other => panic!("host and client disagree: {other:?}"),
    }
    (client, response.result)
}

#[test]
fn a_returning_player_gets_every_sealed_turn_then_plays_live() {
    let mut host = host_with_timed_out_players(SessionConfig::default());
    let (mut client, result) = join(&mut host, 5_000, 22);
    assert_eq!(result, Ok(PlayerId(1)));
    assert!(std::iter::from_fn(|| host.poll_event())
        .any(|event| event == HostEvent::PlayerRejoined(PlayerId(1))));
    assert!(client.is_catching_up());
    let live = host.next_seal();
    let replay = host.replay().unwrap().clone();
    let mut turns = Vec::new();
    while client.is_catching_up() {
        turns.push(client.next_turn(5_000).unwrap());
    }
    assert_eq!(turns.len() as u32, live.0);
    for (index, bundle) in turns.iter().enumerate() {
        assert_eq!(bundle.turn, Turn(index as u32));
        assert_eq!(bundle.records.len(), replay.turns[index].len(), "turn {index}");
    }
    // Turn 0 seated both players; a later turn recorded their departure.
    assert_eq!(turns[0].records, vec![Record::Joined(PlayerId(0)), Record::Joined(PlayerId(1))]);
    assert!(turns.iter().any(|b| b.records.contains(&Record::Left(PlayerId(1)))));
    // Live play resumes at the next sealed turn, which announces the return; the session did
    // not end the returning client even though its earlier departure was replayed.
    assert_eq!(client.next_exec(), live);
    assert_eq!(client.ended(), None);
    // The same token cannot take the seat a second time while it is held.
    let (_, again) = join(&mut host, 5_000, 22);
    assert_eq!(again, Err(JoinError::Refused(JoinRefusal::TokenUsed)));
}

#[test]
fn after_the_window_the_seat_is_closed() {
    let mut config = SessionConfig::default();
    config.rejoin_window_ms = 1_000;
    let mut host = host_with_timed_out_players(config);
    // Timed out at about 3 s: 3.9 s is within the window, 4.1 s + is not.
    let (_, late) = join(&mut host, 4_200, 11);
    assert_eq!(late, Err(JoinError::Refused(JoinRefusal::RejoinExpired)));
    let (_, in_time) = join(&mut host, 3_900, 22);
    assert_eq!(in_time, Ok(PlayerId(1)));
}

#[test]
fn rejoin_off_or_log_full_is_unavailable() {
    let mut off = SessionConfig::default();
    off.rejoin_window_ms = 0;
    let mut host = host_with_timed_out_players(off);
    assert_eq!(
        join(&mut host, 5_000, 11).1,
        Err(JoinError::Refused(JoinRefusal::RejoinUnavailable))
    );

    let mut tiny = SessionConfig::default();
    tiny.rejoin_log_bytes_max = 8;
    let mut host = host_with_timed_out_players(tiny);
    assert_eq!(host.stats().rejoin_log_bytes, 0);
    assert_eq!(
        join(&mut host, 5_000, 11).1,
        Err(JoinError::Refused(JoinRefusal::RejoinUnavailable))
    );
}

#[test]
fn a_rejoin_reply_that_lies_about_its_turns_is_refused_by_the_client() {
    let mut host = host_with_timed_out_players(SessionConfig::default());
    let (_, request) = Client::new(SessionConfig::default(), 11).unwrap();
    let reply = host.handle_join(5_000, &request).reply.unwrap();
    // Cut anywhere, or a byte too many: never accepted, never a panic.
    for cut in 0..reply.len() {
        let (mut client, _) = Client::new(SessionConfig::default(), 11).unwrap();
        assert!(client.handle_join_reply(5_000, &reply[..cut]).is_err(), "cut at {cut}");
    }
    let mut longer = reply.clone();
    longer.push(0);
    let (mut client, _) = Client::new(SessionConfig::default(), 11).unwrap();
    assert!(client.handle_join_reply(5_000, &longer).is_err());
}
