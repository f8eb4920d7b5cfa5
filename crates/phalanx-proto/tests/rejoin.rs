//! Rejoin in the sans-IO session: who may take a seat back, and what the returning client is
//! given. (Over real QUIC with a crashed process: `sim-tests/tests/rejoin.rs`.)

use phalanx_proto::{
    Client, ClientJoinError, ConfigError, Host, HostEvent, JoinError, JoinRefusal, PlayerId,
    Readmit, Record, RemoveError, ReplayRecord, SessionConfig, Turn, TurnBundle,
};

const TOKENS: [u64; 2] = [11, 22];

/// A started host with two remote players who are never heard from: both time out when the
/// join grace (10 s) ends.
fn host_with_timed_out_players(config: SessionConfig) -> Host {
    let mut host = Host::new(config, &TOKENS).unwrap();
    for token in TOKENS {
        let (_, request) = Client::new(SessionConfig::default(), token).unwrap();
        assert!(host.handle_join(0, &request).result.is_ok());
    }
    host.start(0);
    host.start_recording(0, 10_000);
    for now in (0..=10_500).step_by(50) {
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
    (client, response.result.map(|joined| joined.player().expect("a player")))
}

#[test]
fn a_returning_player_gets_every_sealed_turn_then_plays_live() {
    let mut host = host_with_timed_out_players(SessionConfig::default());
    let (mut client, result) = join(&mut host, 11_000, 22);
    assert_eq!(result, Ok(PlayerId(1)));
    assert!(std::iter::from_fn(|| host.poll_event())
        .any(|event| event == HostEvent::PlayerRejoined(PlayerId(1))));
    assert!(client.is_catching_up());
    let live = host.next_seal();
    let replay = host.replay().unwrap().clone();
    let mut turns = Vec::new();
    while client.is_catching_up() {
        turns.push(client.next_turn(11_000).unwrap());
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
    // Once the returning client has been heard, its token cannot take the seat again.
    client.handle_timeout(11_600);
    let mut buf = Vec::new();
    assert!(client.poll_transmit(11_600, &mut buf));
    host.handle_datagram(11_600, PlayerId(1), &buf);
    let (_, again) = join(&mut host, 11_700, 22);
    assert_eq!(again, Err(JoinError::Refused(JoinRefusal::TokenUsed)));
}

#[test]
fn after_the_window_the_seat_is_closed() {
    let mut config = SessionConfig::default();
    config.catch_up.rejoin_window_ms = 1_000;
    let mut host = host_with_timed_out_players(config);
    // Timed out at 10 s: 10.9 s is within the window, 11.2 s is not.
    let (_, late) = join(&mut host, 11_200, 11);
    assert_eq!(late, Err(JoinError::Refused(JoinRefusal::RejoinExpired)));
    let (_, in_time) = join(&mut host, 10_900, 22);
    assert_eq!(in_time, Ok(PlayerId(1)));
}

#[test]
fn rejoin_off_or_log_full_is_unavailable() {
    let mut off = SessionConfig::default();
    off.catch_up.rejoin_window_ms = 0;
    let mut host = host_with_timed_out_players(off);
    assert_eq!(
        join(&mut host, 11_000, 11).1,
        Err(JoinError::Refused(JoinRefusal::RejoinUnavailable))
    );

    let mut tiny = SessionConfig::default();
    tiny.catch_up.rejoin_log_bytes_max = 8;
    let mut host = host_with_timed_out_players(tiny);
    assert_eq!(host.stats().rejoin_log_bytes, 0);
    assert_eq!(
        join(&mut host, 11_000, 11).1,
        Err(JoinError::Refused(JoinRefusal::RejoinUnavailable))
    );
}

#[test]
fn a_rejoin_reply_that_lies_about_its_turns_is_refused_by_the_client() {
    let mut host = host_with_timed_out_players(SessionConfig::default());
    let (_, request) = Client::new(SessionConfig::default(), 11).unwrap();
    let reply = host.handle_join(11_000, &request).reply.unwrap();
    // Cut anywhere, or a byte too many: never accepted, never a panic.
    for cut in 0..reply.len() {
        let (mut client, _) = Client::new(SessionConfig::default(), 11).unwrap();
        assert!(client.handle_join_reply(11_000, &reply[..cut]).is_err(), "cut at {cut}");
    }
    let mut longer = reply.clone();
    longer.push(0);
    let (mut client, _) = Client::new(SessionConfig::default(), 11).unwrap();
    assert!(client.handle_join_reply(11_000, &longer).is_err());
}

/// A seated player the host has not heard from yet is not held to the idle timeout (its join
/// reply may still be crossing a lossy link), only to the join grace; once heard, the idle
/// timeout applies.
#[test]
fn a_new_player_has_the_join_grace_then_the_idle_timeout() {
    let config = SessionConfig::default();
    let mut host = Host::new(config.clone(), &TOKENS).unwrap();
    let (mut client, request) = Client::new(config.clone(), 11).unwrap();
    let reply = host.handle_join(0, &request).reply.unwrap();
    let timed_out = |host: &mut Host, until: u64, from: u64| {
        for now in (from..=until).step_by(10) {
            host.handle_timeout(now);
        }
        std::iter::from_fn(|| host.poll_event())
            .any(|event| matches!(event, HostEvent::PlayerTimedOut(_)))
    };
    // Silent well past the idle timeout: still seated.
    assert!(!timed_out(&mut host, 9_000, 0));
    // The reply arrives at 9 s; the client's first datagram reaches the host.
    client.handle_join_reply(9_000, &reply).unwrap();
    client.handle_timeout(9_600);
    let mut buf = Vec::new();
    assert!(client.poll_transmit(9_600, &mut buf), "a keep-alive is due");
    host.handle_datagram(9_600, PlayerId(0), &buf);
    assert!(!timed_out(&mut host, 12_000, 9_000));
    // Then silence: the idle timeout (3 s) from the last datagram.
    assert!(timed_out(&mut host, 12_700, 12_000));
}

/// Once the driver reports the reply delivered, a player that stays silent is held to the idle
/// timeout from that moment, not to the rest of the join grace.
#[test]
fn a_delivered_reply_starts_the_idle_timeout() {
    let mut host = Host::new(SessionConfig::default(), &TOKENS).unwrap();
    let (_, request) = Client::new(SessionConfig::default(), 11).unwrap();
    assert!(host.handle_join(0, &request).result.is_ok());
    host.handle_join_delivered(1_000, PlayerId(0));
    let mut at = None;
    for now in (0..=10_000).step_by(10) {
        host.handle_timeout(now);
        if std::iter::from_fn(|| host.poll_event())
            .any(|event| matches!(event, HostEvent::PlayerTimedOut(_)))
        {
            at = Some(now);
            break;
        }
    }
    assert_eq!(at, Some(4_000));
}

/// A join whose token's seat is held by a connection never heard from (typically the same
/// client's earlier attempt, whose reply was lost) takes the seat over instead of being refused:
/// before the game, as a plain join; after the start, with every sealed turn.
#[test]
fn an_unheard_seat_is_taken_over_by_a_new_connection_with_its_token() {
    let mut host = Host::new(SessionConfig::default(), &TOKENS).unwrap();
    let (_, first) = join(&mut host, 0, 11);
    assert_eq!(first, Ok(PlayerId(0)));
    let (lobby, again) = join(&mut host, 500, 11);
    assert_eq!(again, Ok(PlayerId(0)));
    assert!(!lobby.is_catching_up());
    host.start(1_000);
    for now in (1_000..=2_000).step_by(50) {
        host.handle_timeout(now);
    }
    let sealed = host.next_seal();
    assert!(sealed > Turn::ZERO);
    let (started, late) = join(&mut host, 2_000, 11);
    assert_eq!(late, Ok(PlayerId(0)));
    assert!(started.is_catching_up());
    assert_eq!(started.next_exec(), Turn::ZERO);
    let rejoined = std::iter::from_fn(|| host.poll_event())
        .filter(|event| *event == HostEvent::PlayerRejoined(PlayerId(0)))
        .count();
    assert_eq!(rejoined, 2);
}

/// A started host with both players joined and nothing sealed yet, recording.
fn started_host(config: SessionConfig) -> (Host, Vec<Client>) {
    let mut host = Host::new(config, &TOKENS).unwrap();
    let clients = TOKENS.iter().map(|&token| join(&mut host, 0, token).0).collect();
    host.start(0);
    host.start_recording(0, 10_000);
    (host, clients)
}

/// Runs the host and `client` (player 1) until `until_ms`, player 1's datagrams both ways,
/// the client executing every turn it is given; returns the turns it executed.
fn run_player_one(
    host: &mut Host,
    client: &mut Client,
    from_ms: u64,
    until_ms: u64,
) -> Vec<TurnBundle> {
    let mut executed = Vec::new();
    let mut buf = Vec::new();
    for now in (from_ms..=until_ms).step_by(5) {
        host.handle_timeout(now);
        client.handle_timeout(now);
        while let Some(to) = host.poll_transmit(now, &mut buf) {
            if to == PlayerId(1) {
                client.handle_datagram(now, &buf);
            }
        }
        while client.poll_transmit(now, &mut buf) {
            host.handle_datagram(now, PlayerId(1), &buf);
        }
        executed.extend(std::iter::from_fn(|| client.next_turn(now)));
    }
    executed
}

/// A player removed (a kick that allows a return, or its connection closed on purpose) who
/// is back before the turn carrying its `Left` is sealed stays seated: that turn carries
/// neither a `Left` nor a second `Joined` for it, and the returning client plays on instead of
/// ending on its own departure.
#[test]
fn a_player_back_before_its_left_is_sealed_never_leaves() {
    let (mut host, _clients) = started_host(SessionConfig::default());
    host.remove(0, PlayerId(1), Readmit::Allow).unwrap();
    let (mut client, result) = join(&mut host, 2, 22);
    assert_eq!(result, Ok(PlayerId(1)));
    let executed = run_player_one(&mut host, &mut client, 2, 400);
    assert!(executed.len() >= 2, "the returning client played on: {executed:?}");
    assert_eq!(client.ended(), None);
    let replay = host.replay().unwrap();
    for (turn, records) in replay.turns.iter().enumerate() {
        let membership: Vec<_> = records
            .iter()
            .filter(|record| matches!(record, ReplayRecord::Left(_) | ReplayRecord::Joined(_)))
            .collect();
        let expected = if turn == 0 {
            vec![&ReplayRecord::Joined(0), &ReplayRecord::Joined(1)]
        } else {
            Vec::new()
        };
        assert_eq!(membership, expected, "turn {turn}");
    }
}

/// Once the `Left` is sealed the return is an ordinary rejoin: a later turn announces it.
#[test]
fn a_player_back_after_its_left_was_sealed_is_announced_again() {
    let (mut host, mut clients) = started_host(SessionConfig::default());
    let mut client = clients.pop().unwrap();
    run_player_one(&mut host, &mut client, 0, 150);
    host.remove(150, PlayerId(1), Readmit::Allow).unwrap();
    for now in 150..=400 {
        host.handle_timeout(now);
    }
    let (mut back, result) = join(&mut host, 400, 22);
    assert_eq!(result, Ok(PlayerId(1)));
    while back.is_catching_up() {
        back.next_turn(400).unwrap();
    }
    run_player_one(&mut host, &mut back, 400, 700);
    assert_eq!(back.ended(), None);
    let turns = &host.replay().unwrap().turns;
    let left = turns.iter().position(|records| records.contains(&ReplayRecord::Left(1)));
    let joined = turns.iter().rposition(|records| records.contains(&ReplayRecord::Joined(1)));
    assert!(left.is_some() && joined > left, "left at {left:?}, back at {joined:?}");
}

/// A kick with `Readmit::Never` revokes the token; with `Readmit::Allow` the same kick lets
/// the player back.
#[test]
fn a_ban_revokes_the_token_and_a_forgiving_kick_does_not() {
    let (mut host, _clients) = started_host(SessionConfig::default());
    host.remove(0, PlayerId(1), Readmit::Never).unwrap();
    let (_, banned) = join(&mut host, 5, 22);
    assert_eq!(banned, Err(JoinError::Refused(JoinRefusal::TokenRevoked)));
    // Later too, and it is the host's player 0 who may still be kicked and come back.
    let (_, still) = join(&mut host, 30_000, 22);
    assert_eq!(still, Err(JoinError::Refused(JoinRefusal::TokenRevoked)));
    assert_eq!(
        host.remove(30_000, PlayerId(1), Readmit::Allow),
        Err(RemoveError::NotSeated(PlayerId(1)))
    );
    host.remove(30_000, PlayerId(0), Readmit::Allow).unwrap();
    let (_, back) = join(&mut host, 30_005, 11);
    assert_eq!(back, Ok(PlayerId(0)));
}

/// The heartbeat is a setting both ends must share: a client with another one is refused,
/// both values named.
#[test]
fn a_client_with_another_heartbeat_is_refused() {
    let mut host = Host::new(SessionConfig::default(), &TOKENS).unwrap();
    let mut quiet = SessionConfig::default();
    quiet.link.heartbeat_ms = 500;
    let (_, request) = Client::new(quiet.clone(), 11).unwrap();
    let response = host.handle_join(0, &request);
    let refusal = JoinRefusal::HeartbeatMismatch { host: 0, client: 500 };
    assert_eq!(response.result, Err(JoinError::Refused(refusal)));
    let (mut client, _) = Client::new(quiet.clone(), 11).unwrap();
    let seen = client.handle_join_reply(0, &response.reply.unwrap());
    assert_eq!(seen, Err(ClientJoinError::Refused(refusal)));
}

/// Settings that could never work are refused when the host is made, not discovered in play.
#[test]
fn duplicate_tokens_and_late_join_without_rejoin_are_config_errors() {
    let config = SessionConfig::default();
    assert_eq!(
        Host::new(config.clone(), &[1, 2, 1]).err(),
        Some(ConfigError::DuplicateToken { token: 1 })
    );
    let mut host = Host::new(config.clone(), &[1, 2]).unwrap();
    assert_eq!(host.allow_spectators(&[7, 7]), Err(ConfigError::DuplicateToken { token: 7 }));
    assert_eq!(host.allow_spectators(&[7, 2]), Err(ConfigError::DuplicateToken { token: 2 }));
    assert_eq!(host.allow_spectators(&[7, 8]), Ok(()));
    let mut late = config;
    late.catch_up.late_join = true;
    late.catch_up.rejoin_window_ms = 0;
    assert_eq!(
        late.validate(),
        Err(ConfigError::Needs {
            field: "catch_up.late_join",
            needs: "catch_up.rejoin_window_ms > 0"
        })
    );
}

/// A returning player's game is told which turns are past: every turn of the catch-up carries
/// `catching_up`, the first live one does not, and the one that ends the game is marked `last`.
#[test]
fn catch_up_turns_are_marked_and_so_is_the_last_turn() {
    use phalanx_proto::TypedClient;
    let mut host = host_with_timed_out_players(SessionConfig::default());
    let (client, result) = join(&mut host, 11_000, 22);
    assert_eq!(result, Ok(PlayerId(1)));
    let live = host.next_seal();
    let mut client: TypedClient<u32, Codec> = TypedClient::new(client);
    let mut past = Vec::new();
    while client.inner().is_catching_up() {
        let turn = client.next_turn(11_000).expect("a past turn");
        assert!(turn.catching_up && !turn.last, "turn {:?}", turn.turn);
        past.push(turn.turn);
    }
    assert_eq!(past, (0..live.0).map(Turn).collect::<Vec<_>>());
    // The live turns: the host ends the game; the turn that carries the end is the last.
    let last = host.end(11_000, 5).unwrap();
    let seen: Vec<(Turn, bool)> = run_player_one(&mut host, client.inner(), 11_000, 14_000)
        .into_iter()
        .map(|bundle| {
            let turn = phalanx_proto::TypedTurn::<u32>::decode::<Codec>(bundle);
            (turn.turn, turn.last)
        })
        .collect();
    assert_eq!(seen.last(), Some(&(last, true)), "{seen:?}");
    assert!(seen[..seen.len() - 1].iter().all(|&(_, last)| !last));
}

/// postcard, as the default codec is, for builds of the crate without a codec feature.
struct Codec;

impl phalanx_proto::CommandCodec for Codec {
    fn encode<C: serde::Serialize>(command: &C) -> Result<Vec<u8>, phalanx_proto::CodecError> {
        postcard::to_allocvec(command).map_err(|e| phalanx_proto::CodecError::new(e.to_string()))
    }
    fn decode<C: serde::de::DeserializeOwned>(
        bytes: &[u8],
    ) -> Result<C, phalanx_proto::CodecError> {
        postcard::from_bytes(bytes).map_err(|e| phalanx_proto::CodecError::new(e.to_string()))
    }
}
