//! The codec against itself and against hostile bytes (fault-matrix row 17 and 19 at layer F).
//!
//! What this proves: every message round-trips; no strict prefix of any valid message and no
//! valid message with bytes appended decodes; random bytes never panic; huge count and length
//! fields are refused before allocation; varints are canonical at every boundary.
//! Seeded: `PHALANX_SEED`, `PHALANX_CASES` (default 1000); failures print the rerun command.

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};

use super::*;
use crate::bundle::{DesyncReport, EndCause, PauseBy, Record};
use crate::pace::Pace;
use crate::types::{CommandSeq, Joined, PlayerId, SpectatorId, Turn};
use crate::PROTOCOL_VERSION;
use bytes::Bytes;

pub(super) fn run_seeded<S: Strategy>(
    test_name: &str,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) {
    let seed: u64 = std::env::var("PHALANX_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(17);
    let cases: u32 =
        std::env::var("PHALANX_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut config = Config::with_cases(cases);
    config.failure_persistence = None;
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes));
    if let Err(failure) = runner.run(&strategy, test) {
        panic!(
            "{test_name} failed with seed {seed}: {failure}\nrerun: PHALANX_SEED={seed} \
             PHALANX_CASES={cases} cargo test -p phalanx-proto --lib -- {test_name}"
        );
    }
}

pub(super) fn limits() -> Limits {
    Limits::new(&SessionConfig::default())
}

fn ack() -> impl Strategy<Value = Option<AckFrame>> {
    prop::option::of(
        (any::<u64>(), any::<u64>(), any::<u32>())
            .prop_map(|(largest, missing, delay_ms)| AckFrame { largest, missing, delay_ms }),
    )
}

fn payload() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..=72)
}

/// An Up datagram's fields: pn, ack, turn_ack, first_seq, extras, commands (turn, payload).
type UpSpec = (u64, Option<AckFrame>, u32, u32, UpExtras, Vec<(u32, Vec<u8>)>);

fn up_extras() -> impl Strategy<Value = UpExtras> {
    let pause =
        prop::option::of((any::<u8>(), any::<bool>()).prop_map(|(seq, pause)| {
            (seq, if pause { PauseKind::Pause } else { PauseKind::Resume })
        }));
    (
        prop::option::of((any::<u32>(), any::<u64>())),
        prop::option::of(any::<u32>()),
        pause,
        prop::option::of(any::<u32>()),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(hash, cost_ms, pause, playout_ms, probe, gap)| UpExtras {
            hash_report: hash.map(|(turn, hash)| (Turn(turn), hash)),
            cost_ms,
            pause,
            playout_ms,
            probe,
            gap,
        })
}

fn down_extras() -> impl Strategy<Value = DownExtras> {
    (
        prop::option::of(any::<u32>()),
        any::<u64>(),
        any::<bool>(),
        prop::option::of(any::<u32>()),
        prop::option::of(any::<u32>()),
        prop::option::of((any::<u32>(), any::<u64>())),
    )
        .prop_map(|(ack, waiting, probe, wanted, inspect, refused)| DownExtras {
            hash_ack: ack.map(Turn),
            waiting,
            probe,
            snapshot_wanted: wanted.map(Turn),
            inspect: inspect.map(Turn),
            refused: refused.map(|(seq, before)| (CommandSeq(seq), before)),
        })
}

fn up_message() -> impl Strategy<Value = UpSpec> {
    (
        any::<u64>(),
        ack(),
        any::<u32>(),
        0..u32::MAX - 64,
        up_extras(),
        prop::collection::vec((any::<u32>(), payload()), 0..12),
    )
}

fn encode_up(message: &UpSpec) -> Vec<u8> {
    let (pn, ack, turn_ack, first_seq, extras, commands) = message;
    let mut out = Vec::new();
    let next_exec = Turn(*turn_ack / 2);
    put_up_header(&mut out, *pn, *ack, Turn(*turn_ack), next_exec, CommandSeq(*first_seq), extras);
    put_varint(&mut out, commands.len() as u64);
    for (turn, payload) in commands {
        let command = UpCommand { turn: Turn(*turn), payload };
        let before = out.len();
        put_up_command(&mut out, command);
        assert_eq!(out.len() - before, up_command_len(command));
    }
    out
}

#[derive(Clone, Debug)]
enum RecordSpec {
    Command(u8, u32, Vec<u8>),
    Joined(u8),
    Left(u8),
    Pace(u32, u32),
    /// turn, (player, hash) with ascending distinct players, diverged mask
    Desync(u32, Vec<(u8, u64)>, u64),
    Paused(Option<u8>),
    Resumed(Option<u8>),
    Ended,
    Finished(u32),
}

fn record() -> impl Strategy<Value = RecordSpec> {
    let desync =
        (any::<u32>(), prop::collection::btree_map(0..8u8, any::<u64>(), 0..8), any::<u8>())
            .prop_map(|(turn, hashes, mask)| {
                let hashes: Vec<(u8, u64)> = hashes.into_iter().collect();
                let listed = hashes.iter().fold(0u64, |m, (p, _)| m | 1 << p);
                RecordSpec::Desync(turn, hashes, u64::from(mask) & listed)
            });
    prop_oneof![
        6 => (0..8u8, any::<u32>(), payload()).prop_map(|(p, s, b)| RecordSpec::Command(p, s, b)),
        1 => (0..8u8).prop_map(RecordSpec::Joined),
        1 => (0..8u8).prop_map(RecordSpec::Left),
        1 => (any::<u32>(), any::<u32>()).prop_map(|(l, d)| RecordSpec::Pace(l, d)),
        1 => desync,
        1 => prop::option::of(0..8u8).prop_map(RecordSpec::Paused),
        1 => prop::option::of(0..8u8).prop_map(RecordSpec::Resumed),
        1 => Just(RecordSpec::Ended),
        1 => any::<u32>().prop_map(RecordSpec::Finished),
    ]
}

fn wire_records(specs: &[RecordSpec]) -> Vec<Record> {
    specs
        .iter()
        .map(|spec| match spec {
            RecordSpec::Command(player, seq, payload) => Record::Command {
                player: PlayerId(*player),
                seq: CommandSeq(*seq),
                payload: Bytes::copy_from_slice(payload),
            },
            RecordSpec::Joined(player) => Record::Joined(PlayerId(*player)),
            RecordSpec::Left(player) => Record::Left(PlayerId(*player)),
            RecordSpec::Pace(length, delay) => {
                Record::Pace(Pace { turn_length_ms: *length, command_delay_turns: *delay })
            }
            RecordSpec::Desync(turn, hashes, mask) => {
                let hashes: Vec<(PlayerId, u64)> =
                    hashes.iter().map(|&(p, h)| (PlayerId(p), h)).collect();
                let diverged =
                    hashes.iter().map(|&(p, _)| p).filter(|p| mask & (1 << p.0) != 0).collect();
                Record::Desync(DesyncReport { turn: Turn(*turn), hashes, diverged })
            }
            RecordSpec::Paused(by) => Record::Paused(pause_by(*by)),
            RecordSpec::Resumed(by) => Record::Resumed(pause_by(*by)),
            RecordSpec::Ended => Record::Ended(EndCause::Desync),
            RecordSpec::Finished(code) => Record::Ended(EndCause::Finished { code: *code }),
        })
        .collect()
}

fn pause_by(by: Option<u8>) -> PauseBy {
    by.map_or(PauseBy::Host, |p| PauseBy::Player(PlayerId(p)))
}

type DownSpec = (u64, Option<AckFrame>, u32, DownExtras, u32, Vec<Vec<RecordSpec>>);

fn down_message() -> impl Strategy<Value = DownSpec> {
    (
        any::<u64>(),
        ack(),
        any::<u32>(),
        down_extras(),
        0..u32::MAX - 64,
        prop::collection::vec(prop::collection::vec(record(), 0..6), 0..5),
    )
}

fn encode_down(message: &DownSpec) -> Vec<u8> {
    let (pn, ack, cmd_ack, extras, first_turn, bundles) = message;
    let mut out = Vec::new();
    let cmd_ack = CommandSeq(*cmd_ack);
    put_down_header(&mut out, *pn, *ack, cmd_ack, extras, Turn(*first_turn), bundles.len());
    for bundle in bundles {
        encode_bundle(&mut out, &wire_records(bundle));
    }
    out
}

#[test]
fn up_round_trips() {
    run_seeded("up_round_trips", up_message(), |message| {
        let bytes = encode_up(&message);
        let up = decode_up(&bytes, &limits()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let (pn, ack, turn_ack, first_seq, extras, commands) = &message;
        prop_assert_eq!(up.pn, *pn);
        prop_assert_eq!(&up.extras, extras);
        prop_assert_eq!(up.ack, *ack);
        prop_assert_eq!(up.turn_ack, Turn(*turn_ack));
        prop_assert_eq!(up.next_exec, Turn(*turn_ack / 2));
        prop_assert_eq!(up.first_seq, CommandSeq(*first_seq));
        let got: Vec<(u32, Vec<u8>)> =
            up.commands.iter().map(|c| (c.turn.0, c.payload.to_vec())).collect();
        prop_assert_eq!(&got, commands);
        Ok(())
    });
}

#[test]
fn down_round_trips() {
    run_seeded("down_round_trips", down_message(), |message| {
        let bytes = encode_down(&message);
        let down =
            decode_down(&bytes, &limits()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(down.pn, message.0);
        prop_assert_eq!(down.ack, message.1);
        prop_assert_eq!(down.cmd_ack, CommandSeq(message.2));
        prop_assert_eq!(down.extras, message.3);
        prop_assert_eq!(down.first_turn, Turn(message.4));
        prop_assert_eq!(down.bundles.len(), message.5.len());
        for (got, want) in down.bundles.iter().zip(&message.5) {
            prop_assert_eq!(got, &wire_records(want));
        }
        Ok(())
    });
}

/// Every strict prefix and every extension of a valid message is rejected, never panics.
#[test]
fn every_prefix_and_extension_is_rejected() {
    run_seeded(
        "every_prefix_and_extension_is_rejected",
        (up_message(), down_message(), prop::collection::vec(any::<u8>(), 1..4)),
        |(up, down, extra)| {
            for bytes in [encode_up(&up), encode_down(&down)] {
                for cut in 0..bytes.len() {
                    prop_assert!(decode_up(&bytes[..cut], &limits()).is_err());
                    prop_assert!(decode_down(&bytes[..cut], &limits()).is_err());
                }
                let mut longer = bytes.clone();
                longer.extend_from_slice(&extra);
                prop_assert!(decode_up(&longer, &limits()).is_err());
                prop_assert!(decode_down(&longer, &limits()).is_err());
            }
            Ok(())
        },
    );
}

/// Random bytes, and random bytes behind a valid header, never panic any decoder.
#[test]
fn random_bytes_never_panic() {
    run_seeded(
        "random_bytes_never_panic",
        (0..5u8, prop::collection::vec(any::<u8>(), 0..300)),
        |(kind, tail)| {
            let mut bytes = vec![PROTOCOL_VERSION, kind];
            bytes.extend_from_slice(&tail);
            for input in [&tail[..], &bytes[..]] {
                let _ = decode_up(input, &limits());
                let _ = decode_down(input, &limits());
                let _ = JoinRequest::decode(input);
                let _ = decode_join_reply(input);
            }
            Ok(())
        },
    );
}

/// A desync's state upload reads back as written; every truncation, an extra byte, and a
/// state over the limit are refused; random bytes behind its header never panic.
#[test]
fn state_uploads_round_trip_and_refuse_the_malformed() {
    run_seeded(
        "state_uploads_round_trip_and_refuse_the_malformed",
        (
            0..1000u32,
            prop::collection::vec(prop::collection::vec(record(), 0..4), 0..5),
            prop::option::of(prop::collection::vec(any::<u8>(), 0..64)),
            prop::collection::vec(any::<u8>(), 0..100),
        ),
        |(check, turns, state, noise)| {
            let first = check.saturating_sub(turns.len() as u32);
            let turns: Vec<(Turn, Vec<Record>)> = turns
                .into_iter()
                .enumerate()
                .map(|(i, records)| (Turn(first + i as u32 + 1), wire_records(&records)))
                .collect();
            let turn = turns.last().map_or(Turn(check), |(t, _)| *t);
            let upload =
                StateUpload { check: Turn(check.max(turn.0)), turn, hash: 7, turns, state };
            let bytes = encode_state_upload(&upload);
            let decoded = decode_state_upload(&bytes, &limits(), 8, 64);
            prop_assert_eq!(decoded.as_ref(), Ok(&upload));
            for cut in 0..bytes.len() {
                prop_assert!(decode_state_upload(&bytes[..cut], &limits(), 8, 64).is_err());
            }
            let mut longer = bytes.clone();
            longer.push(0);
            prop_assert!(decode_state_upload(&longer, &limits(), 8, 64).is_err());
            if let Some(len) = upload.state.as_ref().map(Vec::len).filter(|&len| len > 0) {
                prop_assert!(decode_state_upload(&bytes, &limits(), 8, len - 1).is_err());
            }
            prop_assert!(
                upload.turns.is_empty() || decode_state_upload(&bytes, &limits(), 0, 64).is_err()
            );
            let mut garbage = vec![PROTOCOL_VERSION, KIND_STATE];
            garbage.extend_from_slice(&noise);
            let _ = decode_state_upload(&garbage, &limits(), 8, 64);
            Ok(())
        },
    );
}

/// Huge counts and lengths are refused up front: by their maximum, or by the bytes left.
#[test]
fn huge_length_fields_are_refused_before_allocation() {
    let limits = limits();
    // An Up claiming u64::MAX commands.
    let mut bytes = Vec::new();
    put_up_header(&mut bytes, 0, None, Turn(0), Turn(0), CommandSeq(0), &UpExtras::default());
    put_varint(&mut bytes, u64::MAX);
    assert!(matches!(
        decode_up(&bytes, &limits),
        Err(DecodeError::TooLarge { field: "commands", .. })
    ));
    // Within the maximum, but more than the bytes that follow could hold.
    let mut bytes = Vec::new();
    put_up_header(&mut bytes, 0, None, Turn(0), Turn(0), CommandSeq(0), &UpExtras::default());
    put_varint(&mut bytes, 60);
    assert_eq!(decode_up(&bytes, &limits), Err(DecodeError::Truncated));
    // A command length over command_bytes_max.
    let mut bytes = Vec::new();
    put_up_header(&mut bytes, 0, None, Turn(0), Turn(0), CommandSeq(0), &UpExtras::default());
    put_varint(&mut bytes, 1);
    put_varint(&mut bytes, 5);
    put_varint(&mut bytes, 73);
    bytes.extend_from_slice(&[0; 73]);
    assert!(matches!(
        decode_up(&bytes, &limits),
        Err(DecodeError::TooLarge { field: "command length", value: 73, max: 72 })
    ));
    // A Down whose turns would run past u32::MAX.
    let mut bytes = Vec::new();
    put_down_header(&mut bytes, 0, None, CommandSeq(0), &DownExtras::default(), Turn(u32::MAX), 2);
    encode_bundle(&mut bytes, &[]);
    encode_bundle(&mut bytes, &[]);
    assert_eq!(decode_down(&bytes, &limits), Err(DecodeError::Invalid("turn range")));
    // A player id outside the session.
    let mut bytes = Vec::new();
    put_down_header(&mut bytes, 0, None, CommandSeq(0), &DownExtras::default(), Turn(0), 1);
    encode_bundle(&mut bytes, &[Record::Joined(PlayerId(8))]);
    assert!(matches!(
        decode_down(&bytes, &limits),
        Err(DecodeError::TooLarge { field: "player", .. })
    ));
}

#[test]
fn wrong_version_and_kind_are_named() {
    assert_eq!(decode_up(&[9, 1], &limits()), Err(DecodeError::Version { found: 9 }));
    assert_eq!(decode_up(&[PROTOCOL_VERSION, 2], &limits()), Err(DecodeError::UnknownKind(2)));
    assert_eq!(decode_down(&[], &limits()), Err(DecodeError::Truncated));
}

/// Varints at every 7-bit boundary round-trip; over-long and overflowing ones are refused.
#[test]
fn varints_are_canonical_at_every_boundary() {
    let mut values = vec![0u64, 1, u64::MAX, u64::MAX - 1];
    for bits in (7..64).step_by(7) {
        let power = 1u64 << bits;
        values.extend([power - 1, power, power + 1]);
    }
    for value in values {
        let mut bytes = Vec::new();
        put_varint(&mut bytes, value);
        assert_eq!(bytes.len(), varint_len(value), "{value}");
        let mut reader = Reader::new(&bytes);
        assert_eq!(reader.varint(), Ok(value));
        assert!(reader.finish().is_ok());
    }
    // Zero written in two bytes.
    assert_eq!(Reader::new(&[0x80, 0x00]).varint(), Err(DecodeError::BadVarint));
    // Eleven bytes, and a tenth byte above 1 (bit 64 and beyond).
    assert_eq!(Reader::new(&[0xff; 11]).varint(), Err(DecodeError::BadVarint));
    let mut overflow = vec![0xff; 9];
    overflow.push(0x02);
    assert_eq!(Reader::new(&overflow).varint(), Err(DecodeError::BadVarint));
    // u32 fields refuse values above u32::MAX.
    let mut bytes = Vec::new();
    put_varint(&mut bytes, u64::from(u32::MAX) + 1);
    assert_eq!(Reader::new(&bytes).varint_u32(), Err(DecodeError::BadVarint));
}

/// A join acceptance with the default session's pipeline settings.
fn accept(rejoin: Option<Rejoin>) -> JoinAccept {
    JoinAccept {
        joined: Joined::Player(PlayerId(3)),
        turn_length_ms: 200,
        command_delay_turns: 2,
        turns_ahead_max: 16,
        players_max: 8,
        commands_per_turn_max: 4,
        turn_bytes_per_player_max: 72,
        command_bytes_max: 72,
        sync_interval_turns: 10,
        rejoin,
    }
}

#[test]
fn join_messages_round_trip() {
    let request = JoinRequest {
        protocol_version: PROTOCOL_VERSION,
        game_data_hash: 7,
        token: 9,
        heartbeat_ms: 500,
    };
    assert_eq!(JoinRequest::decode(&request.encode()), Ok(request));
    let spectator = JoinAccept { joined: Joined::Spectator(SpectatorId(5)), ..accept(None) };
    let replies = [
        Ok(accept(None)),
        Ok(spectator),
        Err(JoinRefusal::VersionMismatch { host: 1, client: 2 }),
        Err(JoinRefusal::GameDataMismatch { host: 1, client: u64::MAX }),
        Err(JoinRefusal::BadToken),
        Err(JoinRefusal::TokenUsed),
        Err(JoinRefusal::SessionFull),
        Err(JoinRefusal::GameStarted),
        Err(JoinRefusal::RejoinExpired),
        Err(JoinRefusal::RejoinUnavailable),
        Err(JoinRefusal::Malformed),
        Err(JoinRefusal::TooLarge { max: 1_024 }),
        Err(JoinRefusal::TokenRevoked),
        Err(JoinRefusal::HeartbeatMismatch { host: 500, client: 0 }),
    ];
    for reply in replies {
        let bytes = encode_join_reply(&reply);
        assert_eq!(decode_join_reply(&bytes), Ok(reply));
        for cut in 0..bytes.len() {
            assert!(decode_join_reply(&bytes[..cut]).is_err());
        }
    }
    // A request from another version is still read far enough to name the version.
    let other = PROTOCOL_VERSION + 1;
    assert_eq!(JoinRequest::decode(&[other]).map(|r| r.protocol_version), Ok(other));
}

/// Each bundle's records encoded, as the host's rejoin log holds them.
fn encode_log(bundles: &[Vec<Record>]) -> Vec<Bytes> {
    let encode = |records: &Vec<Record>| {
        let mut out = Vec::new();
        encode_bundle(&mut out, records);
        Bytes::from(out)
    };
    bundles.iter().map(encode).collect()
}

#[test]
fn rejoin_reply_carries_its_turns() {
    let config = SessionConfig::default();
    let limits = Limits::new(&config);
    let bundles = [
        vec![Record::Joined(PlayerId(0)), Record::Joined(PlayerId(1))],
        vec![],
        vec![Record::Command {
            player: PlayerId(1),
            seq: CommandSeq(0),
            payload: Bytes::from_static(b"go"),
        }],
        vec![Record::Left(PlayerId(1))],
    ];
    let log = encode_log(&bundles);
    let accept = accept(Some(Rejoin { turns: 4, next_seq: CommandSeq(1), snapshot: None }));
    let bytes = encode_join_reply_with_log(&Ok(accept), &[], log.iter().map(|t| &t[..]));
    let (reply, parts) = decode_join_reply_parts(&bytes).unwrap();
    assert_eq!(reply, Ok(accept));
    assert!(parts.state.is_empty());
    let tail = parts.log;
    assert_eq!(decode_rejoin_log(tail, 4, &limits).unwrap(), bundles);
    // Too few or too many turns for the bytes, or a cut anywhere, is refused.
    assert!(decode_rejoin_log(tail, 3, &limits).is_err());
    assert!(decode_rejoin_log(tail, 5, &limits).is_err());
    assert!(decode_rejoin_log(tail, u32::MAX, &limits).is_err());
    for cut in 0..bytes.len() {
        let parsed = decode_join_reply_parts(&bytes[..cut]);
        assert!(parsed.map_or(true, |(_, parts)| decode_rejoin_log(parts.log, 4, &limits).is_err()));
    }
}

#[test]
fn rejoin_reply_carries_a_snapshot_and_the_turns_after_it() {
    let limits = Limits::new(&SessionConfig::default());
    let bundles = [vec![Record::Left(PlayerId(1))], vec![Record::Joined(PlayerId(1))]];
    let log = encode_log(&bundles);
    // Snapshot after turn 20; turns 21 and 22 follow; live play at 23.
    let rejoin = Rejoin { turns: 23, next_seq: CommandSeq(5), snapshot: Some((Turn(20), 77)) };
    assert_eq!(rejoin.first_turn(), 21);
    let state = b"the whole world".to_vec();
    let bytes =
        encode_join_reply_with_log(&Ok(accept(Some(rejoin))), &state, log.iter().map(|t| &t[..]));
    let (reply, parts) = decode_join_reply_parts(&bytes).unwrap();
    assert_eq!(reply, Ok(accept(Some(rejoin))));
    assert_eq!(parts.state, &state[..]);
    assert_eq!(decode_rejoin_log(parts.log, 2, &limits).unwrap(), bundles);
    for cut in 0..bytes.len() {
        let parsed = decode_join_reply_parts(&bytes[..cut]);
        assert!(parsed.map_or(true, |(_, parts)| decode_rejoin_log(parts.log, 2, &limits).is_err()));
    }
    // A snapshot newer than live play is refused.
    let bad = Rejoin { turns: 20, next_seq: CommandSeq(5), snapshot: Some((Turn(20), 77)) };
    let bytes =
        encode_join_reply_with_log(&Ok(accept(Some(bad))), &state, log[..0].iter().map(|t| &t[..]));
    assert_eq!(
        decode_join_reply_parts(&bytes).map(|(reply, _)| reply),
        Err(DecodeError::Invalid("rejoin snapshot turn"))
    );
}

#[test]
fn snapshot_uploads_round_trip_and_refuse_garbage() {
    let bytes = encode_snapshot_upload(Turn(600), 0xfeed, b"state");
    assert_eq!(decode_snapshot_upload(&bytes), Ok((Turn(600), 0xfeed, &b"state"[..])));
    assert!(bytes.len() <= SNAPSHOT_UPLOAD_HEADER_MAX + 5);
    // The state may be empty; a cut header is not a snapshot.
    let empty = encode_snapshot_upload(Turn(0), 1, b"");
    assert_eq!(decode_snapshot_upload(&empty), Ok((Turn(0), 1, &b""[..])));
    for cut in 0..empty.len() {
        assert!(decode_snapshot_upload(&empty[..cut]).is_err());
    }
    let mut other = bytes.clone();
    other[1] = 4;
    assert_eq!(decode_snapshot_upload(&other), Err(DecodeError::UnknownKind(4)));
}
