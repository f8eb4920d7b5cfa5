//! `archers verify RECORD --replay FILE --key HEX`: checks a signed match record (the one a run
//! with `--replay-out` writes beside its replay) against the host's public key, and that the
//! replay is the one it signs; prints the record. Exits 1 with the reason when either fails.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use archers::replay::ReplayFile;
use phalanx::replay::{MatchRecord, RosterSeat, SignedMatch};
use serde::Serialize;

use super::VerifyArgs;

/// Where the signed record of the replay at `replay` goes: `replay` with `.signed` added.
pub(super) fn signed_path(replay: &Path) -> PathBuf {
    let mut path = replay.as_os_str().to_owned();
    path.push(".signed");
    PathBuf::from(path)
}

/// The record the demo signs for a finished match: its seed as the match id, each bot's name
/// as its roster key.
pub(super) fn record(file: &ReplayFile, seed: u64) -> MatchRecord {
    let roster = (0..file.players)
        .map(|player| RosterSeat { player, key: format!("archers bot {player}").into_bytes() })
        .collect();
    MatchRecord::of_replay(seed, roster, &file.replay, "finished", 0)
}

/// The `--json` line.
#[derive(Debug, Serialize)]
struct VerifySummary {
    verified: bool,
    /// The typed error's words when it did not verify.
    error: Option<String>,
    match_id: Option<u64>,
    turns: Option<u32>,
    final_state_hash: Option<String>,
    end_reason: Option<String>,
}

/// Success when both files read and the record verifies with the replay.
pub(crate) fn run(args: &VerifyArgs) -> ExitCode {
    let result = check(args);
    let summary = match &result {
        Ok(record) => {
            println!(
                "verified: match {} signed by {}; {} players, {} turns, ended {} (code {})",
                record.match_id,
                args.key,
                record.roster.len(),
                record.turns,
                record.end_reason,
                record.end_code
            );
            if let Some((turn, hash)) = record.final_state {
                println!("  last agreed state: turn {turn}, hash {hash:016x}");
            }
            VerifySummary {
                verified: true,
                error: None,
                match_id: Some(record.match_id),
                turns: Some(record.turns),
                final_state_hash: record.final_state.map(|(_, hash)| format!("{hash:016x}")),
                end_reason: Some(record.end_reason.clone()),
            }
        }
        Err(error) => {
            eprintln!("error: {error}");
            VerifySummary {
                verified: false,
                error: Some(error.clone()),
                match_id: None,
                turns: None,
                final_state_hash: None,
                end_reason: None,
            }
        }
    };
    if args.json {
        println!("{}", serde_json::to_string(&summary).unwrap_or_default());
    }
    if result.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn check(args: &VerifyArgs) -> Result<MatchRecord, String> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|error| format!("cannot read {}: {error}", path.display()))
    };
    let signed = SignedMatch::from_bytes(&read(&args.record)?)
        .map_err(|error| format!("{}: {error}", args.record.display()))?;
    let replay = ReplayFile::from_bytes(&read(&args.replay)?)
        .map_err(|error| format!("{}: {error}", args.replay.display()))?;
    signed
        .verify_replay(&args.key, &replay.replay)
        .cloned()
        .map_err(|error| format!("{}: {error}", args.record.display()))
}
