//! A crashed player's comeback and spectators, through the demo binary: with `--rejoin-at`
//! player 1's process dies mid-match and a new one rejoins through a snapshot; with
//! `--spectators` the spectators watch to the end. The run succeeds, the JSON line lists the
//! rejoin (left, back, the snapshot, how long until it played again) and each spectator, and
//! every hash agrees. Bounded by the simulation's own time limit.

use std::process::Command;

use serde_json::json;

mod common;

const RUN: [&str; 14] = [
    "--rejoin-at",
    "12",
    "--spectators",
    "2",
    "--partition",
    "0",
    "--minutes",
    "0.5",
    "--units",
    "300",
    "--no-report",
    "--json",
    "--seed",
    "3",
];

#[test]
fn a_crashed_player_rejoins_through_a_snapshot_and_spectators_agree() {
    let output = Command::new(env!("CARGO_BIN_EXE_archers")).args(RUN).output().expect("runs");
    let stdout = String::from_utf8(output.stdout).expect("utf-8");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "exit {:?}:\n{stdout}\n{stderr}", output.status);
    let json = common::json(stdout.lines().last().expect("a JSON line"));
    assert_eq!(json["hashes_agree"], true, "{json}");
    assert_eq!(json["removed"], json!([]), "a rejoin is not a removal: {json}");
    assert_eq!(json["unfinished"], json!([]), "{json}");
    let turns = common::turns_in(30_000);
    assert_eq!(json["turns"], turns, "{json}");

    let rejoins = json["rejoins"].as_array().expect("a rejoins list");
    assert_eq!(rejoins.len(), 1, "{json}");
    let back = &rejoins[0];
    assert_eq!(back["player"], 1, "{back}");
    assert_eq!(back["hashes_agree"], true, "{back}");
    let number = |field: &str| back[field].as_u64().unwrap_or_else(|| panic!("{field}: {back}"));
    // Crashed at 0:12 and back after its restart at 0:17, from a snapshot (one about every
    // 10 s, on a check turn) taken before the crash.
    let every = common::turns_in(10_000).div_ceil(10) * 10;
    assert!(number("left_turn") >= every && number("back_turn") > number("left_turn"), "{back}");
    assert_eq!(number("snapshot_turn") % every, 0, "{back}");
    assert!(number("snapshot_turn") < number("back_turn"), "{back}");
    assert!(number("snapshot_bytes") > 1_000, "the world's units and events: {back}");
    assert!(number("catch_up_ms") < 3_000, "playing again within 3 s: {back}");

    let spectators = json["spectators"].as_array().expect("a spectators list");
    assert_eq!(spectators.len(), 2, "{json}");
    for spectator in spectators {
        assert_eq!(spectator["hashes_agree"], true, "{spectator}");
        assert_eq!(spectator["turns"], turns, "{spectator}");
    }
    assert!(stdout.contains("player 1 came back"), "{stdout}");
}
