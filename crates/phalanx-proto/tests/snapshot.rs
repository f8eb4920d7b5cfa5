//! Snapshots in the sans-IO session, on a small event-driven network (fixed latency, no
//! loss): who is asked for one, how it is verified against the sync checks, what a returning
//! player gets, and that it then agrees with everyone — at turn 6,000 and at turn 36,000.
//! (Over real QUIC under faults: `sim-tests/tests/snapshots.rs`.)

mod common;

use bytes::Bytes;
use common::{tokens, Net};
use phalanx_proto::{
    Client, HostEvent, PlayerId, SessionConfig, SnapshotError, SnapshotRejection, Turn,
};

fn config(interval: u32) -> SessionConfig {
    let mut config = SessionConfig::default();
    config.catch_up.snapshot_interval_turns = interval;
    config
}

#[test]
fn a_blind_host_asks_each_player_in_turn_and_keeps_what_matches() {
    let mut net = Net::new(config(100), 3, false);
    net.run_until(120_000); // about 1,200 turns
    let stored = net.stored();
    assert!(stored.len() >= 10, "{stored:?}");
    // Every snapshot turn, in order; the givers rotate.
    for (index, &(turn, from)) in stored.iter().enumerate() {
        assert_eq!(turn, Turn(100 * (index as u32 + 1)));
        assert_eq!(from, Some(PlayerId((index % 3) as u8)));
    }
    let stats = net.host.stats();
    assert_eq!(stats.snapshots_rejected, 0);
    assert_eq!(stats.snapshots_refused, 0);
    assert_eq!(stats.snapshot_bytes, 8);
    // The log holds only the turns after the verified snapshot (at most an interval plus the
    // turns sealed while it was verified), not the game from turn 0.
    let verified = net.host.snapshot().expect("a verified snapshot").turn;
    assert!(net.host.next_seal().since(verified) <= 100 + 16);
    assert!(stats.rejoin_log_bytes < 400 * 16, "{}", stats.rejoin_log_bytes);
    assert_eq!(net.desyncs(), 0);
}

/// Plays `turns` turns, crashes player 2, brings it back 5 s later and plays a minute more.
fn rejoin_at(turns: u32) {
    let mut net = Net::new(config(600), 3, false);
    let crash_ms = u64::from(turns) * 100;
    net.run_until(crash_ms);
    net.crash(2);
    net.run_until(crash_ms + 5_000);
    assert!(net.events.contains(&HostEvent::PlayerTimedOut(PlayerId(2))));
    let reply_bytes = net.join(2);
    let (replayed, _) = net.players[2].as_ref().unwrap().caught_up.unwrap();
    #[allow(clippy::print_stderr, reason = "the figures docs/measurements/session.md quotes")]
    {
        let log = net.host.stats().rejoin_log_bytes;
        eprintln!(
            "rejoin at turn {turns}: reply {reply_bytes} B, {replayed} turns replayed, log {log} B"
        );
    }
    // Restored from the latest snapshot: at most an interval plus the outage is replayed.
    assert!(replayed <= 600 + 60 + 16, "replayed {replayed} turns");
    assert!(reply_bytes < 32 << 10, "reply of {reply_bytes} bytes");
    net.run_until(crash_ms + 65_000);
    assert_eq!(net.desyncs(), 0, "the returning player agrees at every check");
    net.assert_agreement();
    let back = net.players[2].as_ref().unwrap();
    assert!(back.game.checks.len() >= 55, "it plays on: {} checks", back.game.checks.len());
}

#[test]
fn a_rejoin_after_ten_minutes_restores_a_snapshot_and_agrees() {
    rejoin_at(6_000);
}

#[test]
fn a_rejoin_after_an_hour_restores_a_snapshot_and_agrees() {
    rejoin_at(36_000);
}

#[test]
fn a_snapshot_that_does_not_match_is_rejected_and_the_last_good_one_stays() {
    let mut net = Net::new(config(100), 3, false);
    // Player 1 gives turn 200's snapshot (the rotation: 0 gives 100, 1 gives 200, 2 gives
    // 300); its game diverges at turn 150, so its hash is not the majority's.
    net.players[1].as_mut().unwrap().game.diverge_at = Some((150, 1));
    net.run_until(32_000);
    let rejected: Vec<_> = net
        .events
        .iter()
        .filter_map(|event| match event {
            HostEvent::SnapshotRejected { turn, from, reason } => Some((*turn, *from, *reason)),
            _ => None,
        })
        .collect();
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    let (turn, from, reason) = rejected[0];
    assert_eq!((turn, from), (Turn(200), Some(PlayerId(1))));
    assert!(matches!(reason, SnapshotRejection::HashMismatch { .. }));
    // Turn 100's stayed in use until turn 300's (from player 2) matched.
    let stored: Vec<Turn> = net.stored().iter().map(|&(turn, _)| turn).collect();
    assert_eq!(stored[..2], [Turn(100), Turn(300)]);
    assert_eq!(net.host.stats().snapshots_rejected, 1);
}

#[test]
fn uploads_nobody_asked_for_are_refused_and_counted() {
    let mut net = Net::new(config(100), 2, false);
    net.run_until(15_000);
    let upload = |turn: u32, len: usize| {
        let mut bytes = vec![phalanx_proto::PROTOCOL_VERSION, 5];
        // The turn as a varint (all turns here are below 2^14).
        if turn < 0x80 {
            bytes.push(turn as u8);
        } else {
            bytes.extend_from_slice(&[(turn & 0x7f) as u8 | 0x80, (turn >> 7) as u8]);
        }
        bytes.extend_from_slice(&0u64.to_le_bytes());
        bytes.extend(std::iter::repeat_n(0, len));
        bytes
    };
    let before = net.host.stats().snapshots_refused;
    // Not a requested turn, a stale one, garbage, and one over the size limit.
    assert_eq!(
        net.host.handle_snapshot(PlayerId(0), &upload(130, 8)),
        Err(SnapshotError::NotWanted { turn: Turn(130) })
    );
    assert!(matches!(
        net.host.handle_snapshot(PlayerId(0), &upload(100, 8)),
        Err(SnapshotError::Stale { .. })
    ));
    assert!(matches!(
        net.host.handle_snapshot(PlayerId(1), b"junk"),
        Err(SnapshotError::Malformed(_))
    ));
    let max = net.config.catch_up.snapshot_bytes_max as usize;
    assert!(matches!(
        net.host.handle_snapshot(PlayerId(1), &upload(1_000, max + 1)),
        Err(SnapshotError::TooLarge { .. })
    ));
    assert_eq!(net.host.stats().snapshots_refused, before + 4);
    // A player that never gives one costs nothing but the rejoin log's reach.
    net.players[0].as_mut().unwrap().gives = false;
    net.players[1].as_mut().unwrap().gives = false;
    net.run_until(40_000);
    assert_eq!(net.desyncs(), 0);
}

#[test]
fn a_host_with_its_own_game_gives_the_snapshots_itself() {
    let mut net = Net::new(config(100), 2, true);
    net.run_until(30_000);
    let stored = net.stored();
    assert!(stored.len() >= 2);
    assert!(stored.iter().all(|&(_, from)| from.is_none()), "{stored:?}");
    // Nobody else is asked, and the host's game is not asked twice.
    assert!(net.uploads.is_empty());
    let last = stored.last().unwrap().0;
    assert!(!net.host.wants_snapshot(last));
    assert_eq!(
        net.host.offer_snapshot(last, 0, Bytes::new()),
        Err(SnapshotError::Stale { turn: last, latest: last })
    );
    net.crash(1);
    net.run_until(40_000);
    net.join(1);
    let (replayed, _) = net.players[1].as_ref().unwrap().caught_up.unwrap();
    assert!(replayed <= 100 + 60, "replayed {replayed}");
    net.run_until(60_000);
    assert_eq!(net.desyncs(), 0);
    net.assert_agreement();
}

#[test]
fn without_snapshots_a_rejoin_replays_from_turn_zero() {
    let mut net = Net::new(config(0), 2, false);
    net.run_until(20_000);
    net.crash(1);
    net.run_until(25_000);
    net.join(1);
    let (replayed, _) = net.players[1].as_ref().unwrap().caught_up.unwrap();
    assert!(replayed >= 200, "replayed {replayed}");
    assert_eq!(net.host.stats().snapshots_stored, 0);
    assert_eq!(net.host.offer_snapshot(Turn(100), 0, Bytes::new()), Err(SnapshotError::Off));
    net.run_until(40_000);
    assert_eq!(net.desyncs(), 0);
    net.assert_agreement();
}

#[test]
fn a_late_joiner_restores_a_snapshot_and_agrees_at_its_first_check() {
    let mut config = config(100);
    config.catch_up.late_join = true;
    let mut net = Net::with_late(config, 3, false, 1);
    net.run_until(45_000);
    let reply_bytes = net.join(2);
    let (replayed, _) = net.players[2].as_ref().unwrap().caught_up.unwrap();
    assert!(replayed <= 100 + 16, "replayed {replayed}");
    assert!(reply_bytes < 4 << 10, "reply of {reply_bytes} bytes");
    net.run_until(60_000);
    assert_eq!(net.desyncs(), 0, "the late joiner agrees from its first check");
    net.assert_agreement();
    assert!(net.events.contains(&HostEvent::PlayerJoined(PlayerId(2))));
    // Without late join, a running game refuses a new seat.
    let mut closed = Net::with_late(SessionConfig::default(), 2, false, 1);
    closed.run_until(5_000);
    let (_, request) = Client::new(SessionConfig::default(), tokens(2)[1]).unwrap();
    let response = closed.host.handle_join(closed.now, &request);
    assert_eq!(
        response.result,
        Err(phalanx_proto::JoinError::Refused(phalanx_proto::JoinRefusal::GameStarted))
    );
}

#[test]
fn a_snapshot_on_request_comes_at_the_next_check_turn() {
    // No interval: snapshots only when asked, as an operator would before a late join.
    let mut net = Net::new(config(0), 2, false);
    net.run_until(20_000);
    assert!(net.stored().is_empty());
    let asked_at = net.host.next_seal();
    net.host.request_snapshot().unwrap();
    net.run_until(23_000);
    let stored = net.stored();
    assert_eq!(stored.len(), 1, "{stored:?}");
    let (turn, from) = stored[0];
    assert_eq!(turn.0 % 10, 0, "a check turn");
    assert!(turn >= asked_at && turn.since(asked_at) < 10, "the next one: {turn} after {asked_at}");
    assert!(from.is_some(), "a blind host asks a player");
    // A rejoin now restores it instead of replaying the game.
    net.crash(1);
    net.run_until(28_000);
    net.join(1);
    let (replayed, _) = net.players[1].as_ref().unwrap().caught_up.unwrap();
    assert!(replayed < 100, "replayed {replayed}");
    net.run_until(35_000);
    assert_eq!(net.desyncs(), 0);
    net.assert_agreement();
    // Without sync checks nothing could verify one.
    let mut unchecked = SessionConfig::default();
    unchecked.sync.interval_turns = 0;
    let mut host = phalanx_proto::Host::new(unchecked, &[1]).unwrap();
    assert_eq!(host.request_snapshot(), Err(SnapshotError::Off));
}
