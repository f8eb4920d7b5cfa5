//! Matches through a relay on real loopback sockets, with phalanx's own clients, as a game
//! would use them: the relay's ticket gives the address, the pin and the tokens.

use std::time::Duration;

use phalanx::{Client, ClientOptions, EndReason, Event, Pin, SessionConfig, TypedRecord};
use phalanx_relay::{CommandRule, MatchSpec, MatchState, Relay, RelayConfig};

fn relay() -> Relay {
    let mut config = RelayConfig::default();
    config.udp = "127.0.0.1:0".parse().unwrap();
    Relay::start(config).expect("the relay starts")
}

fn session() -> SessionConfig {
    let mut session = SessionConfig::default();
    session.turns.length_ms = 50;
    session.game_data_hash = 0xA5C3;
    session
}

/// What a player saw: what it executed ((turn, player, command) in order), how its session
/// ended, and how many of its commands it was told were refused.
type Outcome = (Vec<(u32, u8, u32)>, Option<EndReason>, usize);

/// Plays until the match ends.
async fn play(mut client: Client<u32>, player_value: u32) -> Outcome {
    let (mut seen, mut told) = (Vec::new(), 0);
    while let Some(turn) = client.next_turn().await {
        while let Some(event) = client.try_event() {
            if let Event::CommandRefused { player, .. } = event {
                assert_eq!(Some(player), client.player(), "told of our own commands only");
                told += 1;
            }
        }
        for record in &turn.records {
            if let TypedRecord::Command { player, command: Ok(command), .. } = record {
                seen.push((turn.turn.0, player.0, *command));
            }
        }
        if turn.turn.0 % 5 == 0 && turn.turn.0 < 30 {
            let _ = client.submit(&(player_value * 1000 + turn.turn.0)).await;
        }
    }
    (seen, client.ended(), told)
}

/// Creates a two-player match on `handle`'s relay, plays it with phalanx's clients until turn
/// 40, ends it with code 7 as an operator would, and returns what each player executed.
async fn play_a_match(handle: &phalanx_relay::RelayHandle) -> Vec<Outcome> {
    let mut spec = MatchSpec::new(2);
    spec.session = session();
    let ticket = handle.create_match(spec).await.expect("the match is created");
    assert_eq!(ticket.seats.len(), 2);
    let pin: Pin = ticket.pin.parse().expect("the ticket's pin parses");
    let mut players = Vec::new();
    for seat in &ticket.seats {
        let mut options = ClientOptions::new(seat.token, pin);
        options.session = session();
        let client: Client<u32> = Client::connect(ticket.address, options).await.expect("joins");
        players.push(tokio::spawn(play(client, u32::from(seat.player) + 1)));
    }
    let mut info = handle.inspect(ticket.id).await.unwrap();
    for _ in 0..200 {
        info = handle.inspect(ticket.id).await.unwrap();
        if info.turn >= 40 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(info.state, MatchState::Running);
    assert_eq!(info.connected, vec![0, 1]);
    handle.end_match(ticket.id, 7).await.unwrap();
    let mut outcomes = Vec::new();
    for player in players {
        outcomes
            .push(tokio::time::timeout(Duration::from_secs(10), player).await.unwrap().unwrap());
    }
    for (seen, ended, _) in &outcomes {
        assert_eq!(*ended, Some(EndReason::Finished { code: 7 }));
        assert_eq!(
            seen, &outcomes[0].0,
            "both players executed the same commands in the same turns"
        );
    }
    outcomes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_players_play_a_match_through_the_relay_and_finish() {
    let relay = relay();
    let handle = relay.handle();
    let outcomes = play_a_match(&handle).await;
    assert_eq!(outcomes[0].0.len(), 12, "each player's six commands: {:?}", outcomes[0].0);
    // The finished match is freed.
    for _ in 0..100 {
        if handle.metrics().await.matches == 0 {
            break;
        }

        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let metrics = handle.metrics().await;
    assert_eq!((metrics.matches, metrics.matches_finished, metrics.joins), (0, 1, 2));
    assert_eq!(metrics.drops.total(), 0, "{:?}", metrics.drops);
    assert!(metrics.seal_lateness.count() >= 40);
}

/// A relay embedded with a command rule (here: player 1's commands are refused, as a rule
/// refuses what its game's client never sends): both players execute player 0's commands
/// only, the relay counts the refusals, player 1 is told of each, and, under the misbehaviour
/// limit, stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_refuses_what_its_command_rule_refuses() {
    let mut config = RelayConfig::default();
    config.udp = "127.0.0.1:0".parse().unwrap();
    config.command_rule =
        Some(CommandRule::new(|_, player, payload| player.0 != 1 && payload.len() <= 8));
    let relay = Relay::start(config).expect("the relay starts");
    let handle = relay.handle();
    let outcomes = play_a_match(&handle).await;
    let seen = &outcomes[0].0;
    assert_eq!(seen.len(), 6, "player 0's six commands only: {seen:?}");
    assert!(seen.iter().all(|&(_, player, _)| player == 0), "{seen:?}");
    let metrics = handle.metrics().await;
    assert_eq!(metrics.commands_refused, 6, "player 1's six commands refused");
    assert_eq!((outcomes[0].2, outcomes[1].2), (0, 6), "player 1 is told of each");
    assert!(metrics.prometheus(None).contains("phalanx_relay_commands_refused_total 6"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quic_client_is_told_at_once_that_the_relay_speaks_raw_udp() {
    let relay = relay();
    let handle = relay.handle();
    let ticket = handle.create_match(MatchSpec::new(2)).await.unwrap();
    let pin: Pin = format!("quic:{}", "00".repeat(32)).parse().unwrap();
    let started = std::time::Instant::now();
    let options = ClientOptions::new(ticket.seats[0].token, pin);
    let result = Client::<u32>::connect(ticket.address, options).await;
    assert!(matches!(result, Err(phalanx::ConnectError::TransportMismatch)), "{:?}", result.err());
    assert!(started.elapsed() < Duration::from_secs(3), "told at once: {:?}", started.elapsed());
    assert!(handle.metrics().await.quic_clients_answered >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matches_spread_over_workers_each_on_its_own_port() {
    let mut config = RelayConfig::default();
    config.udp = "127.0.0.1:0".parse().unwrap();
    config.workers = 2;
    let relay = Relay::start(config).expect("the relay starts");
    let handle = relay.handle();
    let addresses = handle.addresses();
    assert_eq!(addresses.len(), 2);
    assert_ne!(addresses[0], addresses[1]);
    let mut tickets = Vec::new();
    for _ in 0..4 {
        let mut spec = MatchSpec::new(1);
        spec.session = session();
        tickets.push(handle.create_match(spec).await.unwrap());
    }
    // Each worker holds two, and every match is found where its ticket says.
    for worker in &addresses {
        assert_eq!(tickets.iter().filter(|t| t.address == *worker).count(), 2);
    }
    assert_eq!(handle.list().await.len(), 4);
    for ticket in &tickets {
        assert_eq!(handle.inspect(ticket.id).await.unwrap().id, ticket.id);
    }
    // A one-player match on the second worker plays and ends.
    let ticket = tickets.iter().find(|t| t.address == addresses[1]).unwrap();
    let mut options = ClientOptions::new(ticket.seats[0].token, ticket.pin.parse::<Pin>().unwrap());
    options.session = session();
    let client: Client<u32> = Client::connect(ticket.address, options).await.expect("joins");
    let player = tokio::spawn(play(client, 1));
    while handle.inspect(ticket.id).await.unwrap().turn < 10 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    handle.end_match(ticket.id, 1).await.unwrap();
    let (_, ended, _) =
        tokio::time::timeout(Duration::from_secs(10), player).await.unwrap().unwrap();
    assert_eq!(ended, Some(EndReason::Finished { code: 1 }));
}
