//! The `tracing` events of a session (target `phalanx`): what the host and clients report
//! as it happens. phalanx installs no subscriber; the game does (the archers demo: a `fmt`
//! subscriber filtered by `RUST_LOG`). Admission events live in `admission.rs`.
//!
//! Levels: `error` for desyncs; `warn` for players timed out, misbehaving, commands refused
//! by the game's rule, or a client's
//! session ending other than by the host's `end`; `info` for joins, removals, pauses, ends and
//! stalls; `debug` for pace changes, stalls ending, late commands and snapshots kept; `warn`
//! also for snapshots rejected or refused.

use phalanx_proto::{ClientEvent, EndReason, HostEvent, PlayerId, UploadError};

/// Emits the event for a host's session event.
pub(crate) fn host_event(event: &HostEvent) {
    match event {
        HostEvent::PlayerJoined(player) => tracing::info!(player = player.0, "player seated"),
        HostEvent::PlayerRejoined(player) => tracing::info!(player = player.0, "player rejoined"),
        HostEvent::PlayerTimedOut(player) => {
            tracing::warn!(player = player.0, "player timed out: removed")
        }
        HostEvent::PlayerMisbehaved(player) => {
            tracing::warn!(player = player.0, "player misbehaved: disconnected")
        }
        HostEvent::PlayerRemoved(player) => tracing::info!(player = player.0, "player removed"),
        HostEvent::CommandRefused { player, seq } => {
            tracing::warn!(player = player.0, seq = seq.0, "command refused by the game's rule")
        }
        HostEvent::Desync(report) => {
            let diverged: Vec<u8> = report.diverged.iter().map(|p| p.0).collect();
            tracing::error!(turn = report.turn.0, ?diverged, "desync")
        }
        HostEvent::Waiting(players) => {
            let players: Vec<u8> = players.iter().map(|p| p.0).collect();
            tracing::info!(?players, "waiting for players")
        }
        HostEvent::StallEnded => tracing::debug!("stall ended"),
        HostEvent::PaceChanged(pace) => tracing::debug!(?pace, "pace changed"),
        HostEvent::Paused(by) => tracing::info!(?by, "paused"),
        HostEvent::Resumed(by) => tracing::info!(?by, "resumed"),
        HostEvent::Ended(cause) => tracing::info!(?cause, "game ended"),
        HostEvent::SnapshotStored { turn, from, bytes } => {
            let from = from.map(|p| p.0);
            tracing::debug!(turn = turn.0, ?from, bytes, "snapshot stored")
        }
        HostEvent::DesyncPinned { check_turn, first_turn, players, exact } => {
            let players: Vec<u8> = players.iter().map(|p| p.0).collect();
            let (check, first) = (check_turn.0, first_turn.0);
            tracing::error!(check, first, ?players, exact, "desync: first divergent turn")
        }
        HostEvent::DesyncDiagnosed(bundle) => {
            let (first, reference, diverged) =
                (bundle.first_turn.0, bundle.reference.player.0, bundle.diverged.player.0);
            tracing::error!(
                first,
                reference,
                diverged,
                "desync: both states at the first divergent turn"
            )
        }
        HostEvent::SpectatorDesync { spectator, turn, .. } => {
            tracing::warn!(spectator = spectator.0, turn = turn.0, "spectator's state differs")
        }
        HostEvent::SnapshotRejected { turn, from, reason } => {
            let from = from.map(|p| p.0);
            tracing::warn!(turn = turn.0, ?from, %reason, "snapshot rejected")
        }
        _ => tracing::debug!(?event, "host event"),
    }
}

/// Emits the event for a client's session event.
pub(crate) fn client_event(event: &ClientEvent) {
    match event {
        ClientEvent::Ended(reason @ EndReason::Finished { .. }) => {
            tracing::info!(reason = reason.name(), "session ended")
        }
        ClientEvent::Ended(reason) => tracing::warn!(reason = reason.name(), "session ended"),
        ClientEvent::Desync(report) => {
            let diverged: Vec<u8> = report.diverged.iter().map(|p| p.0).collect();
            tracing::error!(turn = report.turn.0, ?diverged, "desync")
        }
        ClientEvent::Waiting(players) => {
            let players: Vec<u8> = players.iter().map(|p| p.0).collect();
            tracing::info!(?players, "waiting for players")
        }
        ClientEvent::Paused(by) => tracing::info!(?by, "paused"),
        ClientEvent::Resumed(by) => tracing::info!(?by, "resumed"),
        ClientEvent::CommandRefused { seq, .. } => {
            tracing::info!(seq = seq.0, "our command refused by the host")
        }
        _ => tracing::debug!(?event, "client event"),
    }
}

/// Emits the event for an upload (a snapshot, a desync's turn hashes) the host read from a
/// player.
pub(crate) fn upload(player: PlayerId, result: &Result<(), UploadError>) {
    match result {
        Ok(()) => tracing::debug!(player = player.0, "upload read"),
        Err(error) => tracing::warn!(player = player.0, %error, "upload refused"),
    }
}
