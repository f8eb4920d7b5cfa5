//! `archers replay FILE`: re-simulates a recorded match and checks every turn's state hash.

use std::process::ExitCode;
use std::time::Instant;

use archers::replay::ReplayFile;
use serde::Serialize;

use super::json;
use super::ReplayArgs;

/// The `--json` line.
#[derive(Debug, Serialize)]
struct ReplaySummary {
    verified: bool,
    turns: u32,
    hashes_matched: u32,
    #[serde(serialize_with = "json::hex")]
    final_state_hash: u64,
}

/// Success when the file reads, re-simulates, and every recorded hash was reached and matched.
pub(crate) fn run(args: &ReplayArgs) -> ExitCode {
    let path = &args.file;
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) => {
            eprintln!("error: cannot read {}: {error}", path.display());
            return ExitCode::FAILURE;
        }
    };
    let started = Instant::now();
    let result = ReplayFile::from_bytes(&bytes).and_then(|file| Ok((file.verify()?, file)));
    let (verified, file) = match result {
        Ok(verified) => verified,
        Err(error) => {
            eprintln!("error: {}: {error}", path.display());
            return ExitCode::FAILURE;
        }
    };
    let last = file.replay.checks.last().map_or(0, |c| c.1);
    println!(
        "{}: {} players, {} archers, seed {}: re-simulated {} turns, {} of {} state hashes \
         match (final {last:#018x}) in {:.1} s",
        path.display(),
        file.players,
        file.units,
        file.replay.seed,
        verified.turns,
        verified.checks_matched,
        file.replay.checks.len(),
        started.elapsed().as_secs_f64()
    );
    if args.json {
        json::print_line(&ReplaySummary {
            verified: true,
            turns: verified.turns,
            hashes_matched: verified.checks_matched,
            final_state_hash: last,
        });
    }
    if verified.checks_matched as usize == file.replay.checks.len() {
        ExitCode::SUCCESS
    } else {
        eprintln!("error: some recorded hashes were never reached");
        ExitCode::FAILURE
    }
}
