//! The demo binary end to end: a short match through the simulated bad network reaches the
//! same state on every player, executes every order, and the same seed gives the same final
//! state and packet-trace digest while another seed does not; a recorded replay re-simulates
//! with every turn's hash matching, and a tampered one fails naming a turn; an injected
//! one-bit desync is reported at the first check turn at or after it, naming exactly that
//! player, pinned to exactly its turn with exactly the flipped unit's hit points named, and
//! the bundle it writes reads back in `archers diff`. With `--speculate` the match, its trace
//! and its replay are byte for byte those without, and the speculation figures are reported.
//! Bounded by the simulation's own time limit.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use archers::replay::ReplayFile;
use archers::world::Order;
use phalanx::proto::{CommandCodec, DefaultCodec};
use phalanx::replay::ReplayRecord;
use serde_json::{json, Value};

mod common;

fn archers(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_archers")).args(args).output().expect("the demo runs")
}

/// A short match; returns its JSON summary.
fn run(seed: u64, extra: &[&str]) -> Value {
    let seed = seed.to_string();
    let mut args = vec!["--minutes", "0.4", "--units", "600", "--partition", "0", "--json"];
    args.extend(["--no-report", "--seed", &seed]);
    args.extend(extra);
    let output = archers(&args);
    assert!(
        output.status.success(),
        "exit {:?}: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).expect("utf-8");
    common::json(stdout.lines().last().expect("a JSON line"))
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("archers-demo-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

#[test]
fn demo_is_deterministic_and_agrees() {
    let first = run(7, &[]);
    let again = run(7, &[]);
    let other = run(8, &[]);
    assert_eq!(first["hashes_agree"], true, "{first}");
    assert_eq!(first["desyncs"], json!([]), "{first}");
    assert_eq!(first["removed"], json!([]), "nobody was cut off: {first}");
    assert_eq!(first["commands_submitted"], first["commands_executed"], "{first}");
    assert!(first["commands_submitted"].as_u64().unwrap() > 20, "{first}");
    assert_eq!(first["final_state_hash"], again["final_state_hash"]);
    assert_eq!(first["trace_digest"], again["trace_digest"]);
    assert_ne!(first["trace_digest"], other["trace_digest"]);
    assert_ne!(first["final_state_hash"], other["final_state_hash"]);
}

#[test]
fn injected_desync_is_reported_at_the_next_check_naming_the_player() {
    let interval = phalanx::SessionConfig::default().sync.interval_turns;
    // Not a check turn itself: the report must come at the next one.
    let at = 3 * interval + interval / 2 - 2;
    let expected = at.div_ceil(interval) * interval;
    let dir = scratch("desync");
    let bundle = dir.join("desync.bundle");
    let json = run(
        11,
        &[
            "--inject-desync",
            &at.to_string(),
            "--desync-player",
            "2",
            "--desync-bundle",
            bundle.to_str().unwrap(),
        ],
    );
    assert_eq!(json["hashes_agree"], false, "{json}");
    let first = &json["desyncs"][0];
    let diff = first["diff"].as_array().expect("a diff").clone();
    assert_eq!(diff.len(), 1, "one part differs: {first}");
    let part = diff[0].as_str().unwrap().to_owned();
    assert!(part.starts_with("unit ") && part.ends_with(" hp"), "{part}");
    let expected_json =
        json!({ "turn": expected, "players": [2], "first_turn": at, "diff": [part.clone()] });
    assert_eq!(*first, expected_json, "the first report in {json}");

    // The bundle reads back, and shows the two values: one bit apart.
    let output = archers(&["diff", bundle.to_str().unwrap(), "--json"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    let shown = common::json(stdout.lines().last().unwrap());
    assert_eq!(
        (shown["first_turn"].as_u64(), shown["diverged"].as_u64()),
        (Some(at.into()), Some(2))
    );
    let difference = &shown["differences"][0];
    assert_eq!(difference["name"], part.as_str(), "{shown}");
    let hp = |side: &str| difference[side].as_str().unwrap().parse::<i32>().unwrap();
    assert_eq!(hp("reference") ^ hp("diverged"), 1, "{shown}");
    // A file that is not a bundle is refused with a message, not a panic.
    std::fs::write(&bundle, b"not a bundle").unwrap();
    let output = archers(&["diff", bundle.to_str().unwrap()]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("not an archers desync bundle"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `archers verify` as a ladder runs it on the files a match left: the record and its replay.
fn verify(record: &Path, replay: &Path, key: &str) -> Output {
    let (record, replay) = (record.to_str().unwrap(), replay.to_str().unwrap());
    archers(&["verify", record, "--replay", replay, "--key", key, "--json"])
}

#[test]
fn a_signed_record_verifies_with_its_replay_and_a_changed_one_does_not() {
    let dir = scratch("signed");
    let play = |seed: &str, replay: &Path| {
        let replay = replay.to_str().unwrap();
        let args = ["--minutes", "0.2", "--units", "300", "--partition", "0", "--no-report"];
        let output = archers(&[&args[..], &["--seed", seed, "--replay-out", replay]].concat());
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).expect("utf-8")
    };
    let replay = dir.join("match.replay");
    let stdout = play("4", &replay);
    let key = stdout.split("--key ").nth(1).and_then(|rest| rest.get(..64)).expect("the key");
    let record = dir.join("match.replay.signed");

    let output = verify(&record, &replay, key);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    let last = common::json(stdout.lines().last().unwrap());
    let turns =
        ReplayFile::from_bytes(&std::fs::read(&replay).unwrap()).unwrap().replay.turns.len();
    assert_eq!(
        (last["verified"].as_bool(), last["turns"].as_u64()),
        (Some(true), Some(turns as u64))
    );
    assert_eq!(last["match_id"], 4, "{last}");

    let refused = |record: &Path, replay: &Path, key: &str, words: &str| {
        let output = verify(record, replay, key);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "verified: {words}");
        assert!(stderr.contains(words), "{stderr} (expected: {words})");
    };
    // One flipped bit in the middle of the record.
    let mut bytes = std::fs::read(&record).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x10;
    let flipped = dir.join("flipped.signed");
    std::fs::write(&flipped, bytes).unwrap();
    let output = verify(&flipped, &replay, key);
    assert!(!output.status.success(), "a flipped byte verified");
    // Another match's replay, another key.
    let other = dir.join("other.replay");
    play("5", &other);
    refused(&record, &other, key, "not the one the record signs");
    refused(&record, &replay, &"ab".repeat(32), "not by the host's key");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn replay_verifies_and_a_tampered_one_fails() {
    let dir = scratch("replay");
    let path = dir.join("match.replay");
    let json = run(5, &["--replay-out", path.to_str().unwrap()]);
    let turns = json["turns"].as_u64().expect("turns");

    let output = archers(&["replay", path.to_str().unwrap(), "--json"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    let last = common::json(stdout.lines().last().unwrap());
    assert_eq!(last["verified"], true, "{last}");
    assert_eq!(last["turns"], turns, "{last}");
    // Every turn's hash was compared, and the last is the match's final state.
    assert_eq!(last["hashes_matched"], turns, "{last}");
    assert_eq!(last["final_state_hash"], json["final_state_hash"]);

    // Move one order's target: the re-simulation must diverge at exactly that turn.
    let bytes = std::fs::read(&path).unwrap();
    let mut file = ReplayFile::from_bytes(&bytes).unwrap();
    let first_turn = file.replay.first_turn;
    let (index, record) = file
        .replay
        .turns
        .iter_mut()
        .enumerate()
        .flat_map(|(i, records)| records.iter_mut().map(move |r| (i, r)))
        .find(|(_, r)| {
            let ReplayRecord::Command { payload, .. } = r else { return false };
            matches!(DefaultCodec::decode(payload), Ok(Order::Move { .. }))
        })
        .expect("the bots gave a move order");
    let ReplayRecord::Command { payload, .. } = record else { unreachable!() };
    let Ok(Order::Move { first, count, x, y }) = DefaultCodec::decode::<Order>(payload) else {
        unreachable!()
    };
    let moved = Order::Move { first, count, x: 4095 - x, y: 4095 - y };
    *payload = DefaultCodec::encode(&moved).unwrap();
    let tampered = dir.join("tampered.replay");
    std::fs::write(&tampered, file.to_bytes()).unwrap();
    let output = archers(&["replay", tampered.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "a tampered replay verified");
    // A changed order diverges at its turn or later (units far from both targets step the
    // same way until they get near), never earlier.
    let tampered_turn = first_turn + index as u32;
    let named: u32 = stderr
        .split("state hash at turn ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a turn in {stderr}"));
    assert!(named >= tampered_turn && u64::from(named) < turns, "{named} vs {tampered_turn}");

    // A recorded hash changed: named at its turn.
    let mut file = ReplayFile::from_bytes(&bytes).unwrap();
    let k = file.replay.checks.len() / 2;
    file.replay.checks[k].1 ^= 1 << 17;
    std::fs::write(&tampered, file.to_bytes()).unwrap();
    let output = archers(&["replay", tampered.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains(&format!("at turn {} is", file.replay.checks[k].0)), "{stderr}");

    // A truncated file is refused as unreadable, not mis-verified.
    std::fs::write(&tampered, &bytes[..bytes.len() / 2]).unwrap();
    let output = archers(&["replay", tampered.to_str().unwrap()]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("not a readable archers replay"), "{stderr}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_readme_desync_example_names_turn_100_and_unit_0_hp() {
    // The README's numbers: `archers --inject-desync 100 --json` (its default match, here
    // shortened) pins turn 100 and names the first living archer's hit points.
    let dir = scratch("readme-desync");
    let bundle = dir.join("desync.bundle");
    let args = ["--inject-desync", "100", "--minutes", "0.4", "--no-report", "--json"];
    let mut args: Vec<&str> = args.to_vec();
    args.extend(["--desync-bundle", bundle.to_str().unwrap()]);
    let output = archers(&args);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    let json = common::json(stdout.lines().last().unwrap());
    let first = &json["desyncs"][0];
    assert_eq!(first["turn"], 100, "{first}");
    assert_eq!(first["first_turn"], 100, "{first}");
    assert_eq!(first["diff"], json!(["unit 0 hp"]), "{first}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--topology mesh`: the same match with no host, every player sending its orders straight
/// to every other: the same agreement, every order executed, and one turn of latency for the
/// bots' orders (given as a turn executes) on most of them.
#[test]
fn the_mesh_plays_the_same_match_without_a_host() {
    let mesh = run(7, &["--topology", "mesh"]);
    assert_eq!(mesh["hashes_agree"], true, "{mesh}");
    assert_eq!(mesh["desyncs"], json!([]), "{mesh}");
    assert_eq!(mesh["removed"], json!([]), "{mesh}");
    assert_eq!(mesh["commands_submitted"], mesh["commands_executed"], "{mesh}");
    assert!(mesh["commands_submitted"].as_u64().unwrap() > 20, "{mesh}");
    assert_eq!(mesh["latency_ms_p50"], 150, "{mesh}");
}

/// `--topology mesh-modem`: the mesh with the modem's profile agrees and executes every
/// order, within a 28.8 kbit/s modem (up and down together, UDP/IP headers counted).
#[test]
fn the_modem_mesh_fits_a_modem() {
    let mesh = run(7, &["--topology", "mesh-modem"]);
    assert_eq!(mesh["hashes_agree"], true, "{mesh}");
    assert_eq!(mesh["removed"], json!([]), "{mesh}");
    assert_eq!(mesh["commands_submitted"], mesh["commands_executed"], "{mesh}");
    let up = mesh["wire_kbps_up_per_player"].as_f64().unwrap();
    let down = mesh["wire_kbps_down_per_player"].as_f64().unwrap();
    assert!(up + down <= 28.8, "{up:.1} + {down:.1} kbit/s: {mesh}");
}

/// `--topology mesh --nats`: the players behind NATs, the kinds in turn, meet through a
/// rendezvous; the match agrees and executes every order, and exactly the pairs that cannot
/// punch through (a symmetric NAT against a symmetric or port-restricted one) are relayed.
#[test]
fn the_mesh_plays_through_nats() {
    let mesh = run(7, &["--topology", "mesh", "--nats"]);
    assert_eq!(mesh["hashes_agree"], true, "{mesh}");
    assert_eq!(mesh["removed"], json!([]), "{mesh}");
    assert_eq!(mesh["commands_submitted"], mesh["commands_executed"], "{mesh}");
    // Players 0-7 behind full cone, address-restricted, port-restricted, symmetric, ...
    let relayed = json!([[2, 3], [2, 7], [3, 6], [3, 7], [6, 7]]);
    assert_eq!(mesh["relayed_pairs"], relayed, "{mesh}");
}

/// The latency measured fairly: with player 3 cut off for 2 s, the orders caught in the cut
/// (given while it was cut off or catching up) are reported apart, and no player's own p95
/// carries them: every player's is below the worst-player figure that does.
#[test]
fn orders_caught_in_a_cut_are_reported_apart() {
    let seed = "7";
    let args = ["--minutes", "0.5", "--units", "600", "--json", "--no-report", "--seed", seed];
    let output = archers(&args);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    let json = common::json(stdout.lines().last().unwrap());
    let worst = json["latency_ms_p95"].as_u64().unwrap();
    let by_player = json["latency_ms_p95_by_player"].as_array().unwrap();
    assert_eq!(by_player.len(), 8, "{json}");
    assert!(by_player.iter().all(|p95| p95.as_u64().unwrap() < worst), "{json}");
    assert!(json["cut_orders"].as_u64().unwrap() > 0, "{json}");
    assert_eq!(json["cut_orders_latency_ms_p95"].as_u64(), Some(worst), "{json}");
}

#[test]
fn speculation_shows_orders_ahead_and_changes_nothing_confirmed() {
    let dir = scratch("speculate");
    let (plain_path, speculated_path) = (dir.join("plain.replay"), dir.join("speculated.replay"));
    let plain = run(9, &["--replay-out", plain_path.to_str().unwrap()]);
    let speculated = run(9, &["--speculate", "--replay-out", speculated_path.to_str().unwrap()]);
    for field in
        ["final_state_hash", "trace_digest", "commands_executed", "latency_ms_p95_by_player"]
    {
        assert_eq!(plain[field], speculated[field], "{field}: {plain} vs {speculated}");
    }
    let (plain_bytes, speculated_bytes) =
        (std::fs::read(&plain_path).unwrap(), std::fs::read(&speculated_path).unwrap());
    assert!(plain_bytes == speculated_bytes, "the replays differ");
    assert_eq!(plain["speculation"], Value::Null, "{plain}");
    let figures = &speculated["speculation"];
    let number = |name: &str| figures[name].as_f64().unwrap_or_else(|| panic!("{name}: {figures}"));
    // Other players' orders are predicted as nothing: every turn with one rolls back.
    assert!(number("rollbacks_per_minute") > 0.0, "{figures}");
    assert!(number("resimulated_turns_per_minute") >= number("rollbacks_per_minute"), "{figures}");
    // Shown in the first 60 Hz frame drawn after the frame's work.
    assert!(number("visible_ms_p95") <= 16.667 + number("frame_ms_p99") + 0.001, "{figures}");
    assert!(number("frame_ms_p50") > 0.0 && number("frame_ms_p50") <= number("frame_ms_p99"));
}

/// `--late-seals 13` through the demo's 2 s cut: the same match, trace and replay as plain
/// speculation; the rendered state stands behind the schedule less (the cut player's 1.3 s of
/// it run on as predicted).
#[test]
fn late_seals_run_the_rendered_state_through_the_cut() {
    let dir = scratch("late-seals");
    let cut = |late: &str, replay: &std::path::Path| {
        let args = ["--minutes", "0.4", "--units", "600", "--json", "--no-report", "--seed", "4"];
        let mut args = args.to_vec();
        args.extend([
            "--speculate",
            "--late-seals",
            late,
            "--replay-out",
            replay.to_str().unwrap(),
        ]);
        let output = archers(&args);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let stdout = String::from_utf8(output.stdout).expect("utf-8");
        common::json(stdout.lines().last().expect("a JSON line"))
    };
    let (plain_path, late_path) = (dir.join("plain.replay"), dir.join("late.replay"));
    let (plain, late) = (cut("0", &plain_path), cut("13", &late_path));
    for field in ["final_state_hash", "trace_digest", "commands_executed", "stall_ms"] {
        assert_eq!(plain[field], late[field], "{field}: {plain} vs {late}");
    }
    assert!(std::fs::read(&plain_path).unwrap() == std::fs::read(&late_path).unwrap());
    let stood = |json: &Value| json["speculation"]["rendered_stall_ms"].as_u64().unwrap();
    assert!(stood(&plain) >= 1_000, "the cut shows without late seals: {plain}");
    assert!(stood(&late) < stood(&plain), "{} ms with, {} ms without", stood(&late), stood(&plain));
}

#[test]
fn speculation_over_a_mesh_is_refused_with_the_reason() {
    let output = archers(&["--topology", "mesh", "--speculate", "--minutes", "0.1", "--no-report"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--speculate needs the host topology"), "{stderr}");
}
