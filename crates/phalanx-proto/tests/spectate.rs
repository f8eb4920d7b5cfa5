//! Spectators in the sans-IO session, on the small event-driven network of `common`: they
//! watch every turn and agree, joining before the game or mid-game from a snapshot, over
//! links far worse than the players'; the players' game is exactly what it would be without
//! them; a broadcast delay holds them back; one that stops listening is dropped; what one
//! submits is refused and counted.

mod common;

use common::Net;
use phalanx_proto::testing::up_datagram_with_commands;
use phalanx_proto::{HostEvent, SessionConfig, SpectatorGone, SpectatorId, SubmitError, Turn};

fn config() -> SessionConfig {
    let mut config = SessionConfig::default();
    config.catch_up.snapshot_interval_turns = 100;
    config
}

/// The players' execution times and check hashes, after a minute of three players with
/// `spectators` spectators on 300 ms, 10 % loss links: half from the start, half from 30 s.
fn minute_with(spectators: usize) -> (Vec<Vec<(u32, u64)>>, Net) {
    let mut net = Net::build(config(), 3, false, 0, spectators);
    net.spectator_link = (300, 100);
    for index in 0..spectators / 2 {
        net.join_spectator(index);
    }
    net.run_until(30_000);
    for index in spectators / 2..spectators {
        net.join_spectator(index);
    }
    net.run_until(60_000);
    let players = net.players.iter().flatten().map(|p| p.game.executed_at.clone()).collect();
    (players, net)
}

#[test]
fn spectators_on_bad_links_agree_and_change_nothing_for_the_players() {
    let (alone, _) = minute_with(0);
    let (watched, net) = minute_with(10);
    // Deterministic: with the same inputs the players' turns execute at the same moments,
    // spectators or not. Nothing a spectator does reaches the players' game.
    assert_eq!(alone, watched, "the players' game is unchanged by spectators");
    assert_eq!(net.desyncs(), 0);
    net.assert_agreement();
    let sealed = net.host.next_seal();
    let stats = net.host.stats();
    assert_eq!(stats.spectators, 10);
    for (index, spectator) in net.spectators.iter().enumerate() {
        let spectator = spectator.as_ref().expect("still watching");
        let last = spectator.game.executed_at.last().expect("it watched").0;
        // 300 ms one way and 10 % loss: a few turns behind at most.
        assert!(sealed.0 - last <= 20, "spectator {index} at {last}, sealed {sealed}");
        let link = net.host.spectator_stats(SpectatorId(index as u8)).unwrap().link;
        assert!(link.bytes_sent > 0);
        if index >= 5 {
            // Joined at 30 s: from a snapshot, not from turn 0.
            let (replayed, _) = spectator.caught_up.expect("caught up");
            assert!(replayed <= 100 + 16, "spectator {index} replayed {replayed} turns");
        }
    }
    #[allow(clippy::print_stderr, reason = "the figure docs/measurements/session.md quotes")]
    {
        let bytes: u64 = (0..10)
            .filter_map(|i| net.host.spectator_stats(SpectatorId(i)))
            .map(|s| s.link.bytes_sent)
            .sum();
        let kept = stats.spectator_turns_bytes;
        eprintln!("host bytes sent per spectator-minute: {} B; turns kept {kept} B", bytes / 10);
    }
}

#[test]
fn a_spectator_cannot_submit_and_its_commands_are_refused_and_counted() {
    let mut net = Net::build(config(), 2, false, 0, 2);
    net.join_spectator(0);
    net.run_until(3_000);
    let spectator = net.spectators[0].as_mut().unwrap();
    assert_eq!(spectator.client.player(), None);
    assert_eq!(spectator.client.spectator(), Some(SpectatorId(0)));
    assert_eq!(spectator.client.submit(net.now, b"attack"), Err(SubmitError::NoPlayer));
    // A hostile spectator sends commands anyway: refused, counted, and past the misbehaviour
    // limit it is dropped. The players' turns never carry them.
    let now = net.now;
    let max = u64::from(net.config.link.misbehaviour_max);
    for pn in 1_000..1_000 + max + 1 {
        let datagram = up_datagram_with_commands(pn, Turn(40), &[b"attack", b"again"]);
        net.host.handle_spectator_datagram(now, SpectatorId(0), &datagram);
    }
    assert_eq!(net.host.stats().spectator_commands_refused, 2 * (max + 1));
    net.run_until(6_000);
    assert!(net
        .events
        .contains(&HostEvent::SpectatorLeft(SpectatorId(0), SpectatorGone::Misbehaved)));
    net.assert_agreement();
}

#[test]
fn a_broadcast_delay_holds_spectators_back() {
    let mut config = config();
    config.catch_up.spectator_delay_turns = 150;
    let mut net = Net::build(config, 3, false, 0, 2);
    net.join_spectator(0);
    let mut ahead = 0;
    let check = |net: &Net, ahead: &mut u32| {
        let sealed = net.host.next_seal().0;
        // Turn t may be sent once turn t + 150 is sealed: having executed t, a spectator's
        // next turn is t + 1, at most next_seal − 150.
        for spectator in net.spectators.iter().flatten() {
            let next = spectator.client.next_exec().0;
            if next > 0 {
                *ahead = (*ahead).max((next + 150).saturating_sub(sealed));
            }
        }
    };
    net.run_checking(40_000, |net| check(net, &mut ahead));
    // Mid-game: from a snapshot at least the delay old.
    net.join_spectator(1);
    net.run_checking(60_000, |net| check(net, &mut ahead));
    assert_eq!(ahead, 0, "a spectator never held a turn within the delay");
    let late = net.spectators[1].as_ref().unwrap();
    assert!(late.caught_up.is_some());
    let first = late.game.executed_at.first().expect("it watched").0;
    assert!(first > 200, "it started from a snapshot, at {first}");
    let last = late.game.executed_at.last().unwrap().0;
    assert!(net.host.next_seal().0 - last >= 150, "it watches the delay behind");
    net.assert_agreement();
}

#[test]
fn a_spectator_that_stops_listening_is_dropped_and_the_game_goes_on() {
    let mut config = config();
    config.catch_up.spectator_lag_turns_max = 50;
    let mut net = Net::build(config, 2, false, 0, 2);
    net.join_spectator(0);
    net.join_spectator(1);
    net.run_until(5_000);
    net.spectators[0].as_mut().unwrap().deaf = true;
    // The other stops listening for 2 s (20 turns: within the lag limit, and short of its own
    // idle timeout) and must catch up: the host resends what it missed a window at a time.
    net.spectators[1].as_mut().unwrap().deaf = true;
    let sealed_before = net.host.next_seal();
    net.run_until(7_000);
    net.spectators[1].as_mut().unwrap().deaf = false;
    net.run_until(20_000);
    let back = net.spectators[1].as_ref().unwrap().game.executed_at.last().unwrap().0;
    assert!(net.host.next_seal().0 - back <= 3, "caught up to {back}");
    assert!(net.events.contains(&HostEvent::SpectatorLeft(SpectatorId(0), SpectatorGone::Lagged)));
    assert_eq!(net.host.stats().spectators_lagged, 1);
    assert_eq!(net.host.stats().spectators, 1);
    // The players were never held up: every turn due in 15 s was sealed.
    assert!(net.host.next_seal().since(sealed_before) >= 145);
    // The turns kept for spectators stay bounded by the lag limit.
    assert!(net.host.stats().spectator_turns_bytes < 60 * 16);
}

#[test]
fn a_spectator_whose_state_differs_is_reported_once_and_the_game_goes_on() {
    let mut net = Net::build(config(), 2, false, 0, 2);
    net.join_spectator(0);
    net.join_spectator(1);
    net.spectators[1].as_mut().unwrap().game.diverge_at = Some((95, 1));
    net.run_until(30_000);
    let reported: Vec<_> = net
        .events
        .iter()
        .filter_map(|event| match event {
            HostEvent::SpectatorDesync { spectator, turn, hash, reference } => {
                Some((*spectator, *turn, hash != reference))
            }
            _ => None,
        })
        .collect();
    // At the first check turn after the divergence, once, naming only that spectator.
    assert_eq!(reported, vec![(SpectatorId(1), Turn(100), true)]);
    assert_eq!(net.host.stats().spectator_desyncs, 1);
    // It is not the players' desync: their game goes on and agrees.
    assert_eq!(net.desyncs(), 0);
    assert_eq!(net.host.stats().spectators, 2);
}
