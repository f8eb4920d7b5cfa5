//! Desync forensics in the demo: each JSON `desyncs` entry's first divergent turn and the
//! differing parts (from the host's `DesyncPinned` and `DesyncDiagnosed` events), the bundle
//! written to disk, and `archers diff BUNDLE`.

use std::path::Path;
use std::process::ExitCode;

use archers::inspect::{self, Difference};
use phalanx::{desync::DesyncBundle, Event};
use phalanx_sim::SimReport;
use serde::Serialize;

use super::json::{self, Desync};
use super::DiffArgs;

/// A bundle file: these bytes, then the bundle in postcard.
const MAGIC: &[u8; 15] = b"archers-desync\n";

/// Fills in each report's first divergent turn and differing parts from the host's events.
pub(crate) fn annotate(desyncs: &mut [Desync], report: &SimReport) {
    for (_, event) in &report.events {
        match event {
            Event::DesyncPinned { check_turn, first_turn, .. } => {
                if let Some(desync) = desyncs.iter_mut().find(|d| d.turn == check_turn.0) {
                    desync.first_turn = Some(first_turn.0);
                }
            }
            Event::DesyncDiagnosed(bundle) => {
                let check = bundle.check_turn.0;
                if let Some(desync) = desyncs.iter_mut().find(|d| d.turn == check) {
                    let differences = inspect::differences(bundle).unwrap_or_default();
                    desync.diff = Some(differences.into_iter().map(|d| d.name).collect());
                }
            }
            _ => {}
        }
    }
}

/// The first desync bundle the host reported, if any.
pub(crate) fn first_bundle(report: &SimReport) -> Option<&DesyncBundle> {
    report.events.iter().find_map(|(_, event)| match event {
        Event::DesyncDiagnosed(bundle) => Some(bundle.as_ref()),
        _ => None,
    })
}

/// Writes `bundle` to `path` (creating its folder).
pub(crate) fn write(path: &Path, bundle: &DesyncBundle) -> Result<usize, String> {
    let mut bytes = MAGIC.to_vec();
    let body = postcard::to_allocvec(bundle).map_err(|e| format!("cannot encode: {e}"))?;
    bytes.extend_from_slice(&body);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        let _ = std::fs::create_dir_all(dir);
    }
    std::fs::write(path, &bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(bytes.len())
}

/// Reads a bundle [`write`] wrote.
pub(crate) fn read(path: &Path) -> Result<DesyncBundle, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let body = bytes
        .strip_prefix(MAGIC.as_slice())
        .ok_or_else(|| format!("{} is not an archers desync bundle", path.display()))?;
    let bundle: DesyncBundle = postcard::from_bytes(body)
        .map_err(|e| format!("{}: not a readable bundle: {e}", path.display()))?;
    if bundle.format_version != phalanx::desync::DESYNC_BUNDLE_FORMAT_VERSION {
        return Err(format!(
            "{}: bundle format {} (this build reads {})",
            path.display(),
            bundle.format_version,
            phalanx::desync::DESYNC_BUNDLE_FORMAT_VERSION
        ));
    }
    Ok(bundle)
}

/// The `archers diff --json` line.
#[derive(Debug, Serialize)]
struct DiffSummary {
    check_turn: u32,
    first_turn: u32,
    reference: u8,
    diverged: u8,
    differences: Vec<DifferenceJson>,
}

#[derive(Debug, Serialize)]
struct DifferenceJson {
    name: String,
    reference: Option<String>,
    diverged: Option<String>,
}

/// `archers diff BUNDLE`: prints the parts that differ, side by side.
pub(crate) fn run(args: &DiffArgs) -> ExitCode {
    let result = read(&args.file)
        .and_then(|bundle| Ok((inspect::differences(&bundle).map_err(|e| e.to_string())?, bundle)));
    let (differences, bundle) = match result {
        Ok(found) => found,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    let (reference, diverged) = (bundle.reference.player, bundle.diverged.player);
    println!(
        "desync at check turn {}: first divergent turn {}, {reference} (reference) against \
         {diverged}; {} part(s) differ",
        bundle.check_turn.0,
        bundle.first_turn.0,
        differences.len()
    );
    for Difference { name, reference, diverged } in &differences {
        let show = |value: &Option<String>| value.clone().unwrap_or_else(|| "(absent)".into());
        println!("  {name:<24}{:>20}  {:<20}", show(reference), show(diverged));
    }
    if args.json {
        json::print_line(&DiffSummary {
            check_turn: bundle.check_turn.0,
            first_turn: bundle.first_turn.0,
            reference: reference.0,
            diverged: diverged.0,
            differences: differences
                .into_iter()
                .map(|d| DifferenceJson {
                    name: d.name,
                    reference: d.reference,
                    diverged: d.diverged,
                })
                .collect(),
        });
    }
    ExitCode::SUCCESS
}
