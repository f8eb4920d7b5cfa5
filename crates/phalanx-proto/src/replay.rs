//! Replays: the session parameters, the game's seed and every sealed bundle are a complete
//! record of a lockstep game. The host records one ([`Host::start_recording`]) — including a
//! game that ends in a desync — with the reference state hash of every decided check turn, and
//! [`verify_replay`] re-runs a game from it and compares those hashes: a sync test.
//!
//! The format is serde, versioned by [`REPLAY_FORMAT_VERSION`]; postcard is a good encoding.
//!
//! [`Host::start_recording`]: crate::Host::start_recording

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::bundle::{DesyncReport, EndCause, PauseBy, Record, TurnBundle};
use crate::pace::Pace;
use crate::types::{CommandSeq, PlayerId, Turn};

/// The replay format version this build writes and reads.
pub const REPLAY_FORMAT_VERSION: u16 = 1;

/// A recorded game.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replay {
    /// [`REPLAY_FORMAT_VERSION`] when written.
    pub format_version: u16,
    /// The protocol version of the session.
    pub protocol_version: u8,
    /// The game-data hash of the session.
    pub game_data_hash: u64,
    /// The game's own seed (whatever seeds its deterministic RNG), as given to the recorder.
    pub seed: u64,
    /// Seats in the session.
    pub players_max: u8,
    /// The pace the session started at (turn length ms, command delay turns).
    pub first_pace: (u32, u32),
    /// The bundles from turn `first_turn`, in order.
    pub first_turn: u32,
    /// One entry per turn.
    pub turns: Vec<Vec<ReplayRecord>>,
    /// The reference state hash of every decided check turn: `(turn, hash)`.
    pub checks: Vec<(u32, u64)>,
    /// Recording stopped at its turn limit before the game ended.
    pub truncated: bool,
}

/// A bundle record in replay form (plain data for serde).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)] // mirrors `Record`, variant by variant
pub enum ReplayRecord {
    Command {
        player: u8,
        seq: u32,
        payload: Vec<u8>,
    },
    Joined(u8),
    Left(u8),
    Pace {
        turn_length_ms: u32,
        command_delay_turns: u32,
    },
    Desync {
        turn: u32,
        hashes: Vec<(u8, u64)>,
        diverged: Vec<u8>,
    },
    Paused(Option<u8>),
    Resumed(Option<u8>),
    EndedByDesync,
    /// Appended after the first format: older replays read unchanged.
    Finished(u32),
}

fn by_to(by: PauseBy) -> Option<u8> {
    match by {
        PauseBy::Player(player) => Some(player.0),
        PauseBy::Host => None,
    }
}

fn by_from(by: Option<u8>) -> PauseBy {
    by.map_or(PauseBy::Host, |player| PauseBy::Player(PlayerId(player)))
}

impl From<&Record> for ReplayRecord {
    fn from(record: &Record) -> Self {
        match record {
            Record::Command { player, seq, payload } => {
                ReplayRecord::Command { player: player.0, seq: seq.0, payload: payload.to_vec() }
            }
            Record::Joined(player) => ReplayRecord::Joined(player.0),
            Record::Left(player) => ReplayRecord::Left(player.0),
            Record::Pace(pace) => ReplayRecord::Pace {
                turn_length_ms: pace.turn_length_ms,
                command_delay_turns: pace.command_delay_turns,
            },
            Record::Desync(report) => ReplayRecord::Desync {
                turn: report.turn.0,
                hashes: report.hashes.iter().map(|&(p, h)| (p.0, h)).collect(),
                diverged: report.diverged.iter().map(|p| p.0).collect(),
            },
            Record::Paused(by) => ReplayRecord::Paused(by_to(*by)),
            Record::Resumed(by) => ReplayRecord::Resumed(by_to(*by)),
            Record::Ended(EndCause::Desync) => ReplayRecord::EndedByDesync,
            Record::Ended(EndCause::Finished { code }) => ReplayRecord::Finished(*code),
        }
    }
}

impl From<&ReplayRecord> for Record {
    fn from(record: &ReplayRecord) -> Self {
        match record {
            ReplayRecord::Command { player, seq, payload } => Record::Command {
                player: PlayerId(*player),
                seq: CommandSeq(*seq),
                payload: Bytes::copy_from_slice(payload),
            },
            ReplayRecord::Joined(player) => Record::Joined(PlayerId(*player)),
            ReplayRecord::Left(player) => Record::Left(PlayerId(*player)),
            ReplayRecord::Pace { turn_length_ms, command_delay_turns } => Record::Pace(Pace {
                turn_length_ms: *turn_length_ms,
                command_delay_turns: *command_delay_turns,
            }),
            ReplayRecord::Desync { turn, hashes, diverged } => Record::Desync(DesyncReport {
                turn: Turn(*turn),
                hashes: hashes.iter().map(|&(p, h)| (PlayerId(p), h)).collect(),
                diverged: diverged.iter().map(|&p| PlayerId(p)).collect(),
            }),
            ReplayRecord::Paused(by) => Record::Paused(by_from(*by)),
            ReplayRecord::Resumed(by) => Record::Resumed(by_from(*by)),
            ReplayRecord::EndedByDesync => Record::Ended(EndCause::Desync),
            ReplayRecord::Finished(code) => Record::Ended(EndCause::Finished { code: *code }),
        }
    }
}

impl Replay {
    /// The bundles, in order, each exactly once: what a live client's `next_turn` returned.
    pub fn bundles(&self) -> impl Iterator<Item = TurnBundle> + '_ {
        let mut length_ms = self.first_pace.0;
        self.turns.iter().enumerate().map(move |(index, records)| {
            let records: Vec<Record> = records.iter().map(Record::from).collect();
            let bundle = TurnBundle {
                turn: Turn(self.first_turn.saturating_add(index as u32)),
                records,
                length_ms,
            };
            // A pace change applies from the next turn.
            for record in &bundle.records {
                if let Record::Pace(pace) = record {
                    length_ms = pace.turn_length_ms;
                }
            }
            bundle
        })
    }
}

/// Records sealed bundles on the host, up to a turn limit.
#[derive(Debug)]
pub(crate) struct Recorder {
    pub(crate) replay: Replay,
    turns_max: usize,
}

impl Recorder {
    pub(crate) fn new(replay: Replay, turns_max: usize) -> Self {
        Recorder { replay, turns_max }
    }

    pub(crate) fn record(&mut self, bundle: &TurnBundle) {
        if self.replay.turns.len() >= self.turns_max {
            self.replay.truncated = true;
            return;
        }
        self.replay.turns.push(bundle.records.iter().map(ReplayRecord::from).collect());
    }

    pub(crate) fn check(&mut self, turn: Turn, hash: u64) {
        if self.replay.checks.len() < self.turns_max {
            self.replay.checks.push((turn.0, hash));
        }
    }
}

/// A deterministic game that can be re-run from a replay.
pub trait ReplayGame {
    /// Executes one turn's bundle, exactly as the live game did.
    fn execute(&mut self, bundle: &TurnBundle);
    /// The 64-bit state hash the live game reported for sync checks.
    fn state_hash(&self) -> u64;
}

/// A replay re-ran without a mismatch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplayVerified {
    /// Turns executed.
    pub turns: u32,
    /// Check turns whose state hash matched.
    pub checks_matched: u32,
}

/// Why a replay did not verify.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReplayError {
    /// Written by an incompatible format version.
    Version {
        /// In the replay.
        found: u16,
        /// What this build reads.
        expected: u16,
    },
    /// The re-run game's state hash differs from the recorded one at a check turn: the game is
    /// not deterministic (or the replay belongs to other game data).
    Mismatch {
        /// The check turn.
        turn: Turn,
        /// The recorded reference hash.
        expected: u64,
        /// The re-run game's hash.
        actual: u64,
    },
}

impl std::fmt::Display for ReplayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReplayError::Version { found, expected } => {
                write!(f, "replay format {found}, this build reads {expected}")
            }
            ReplayError::Mismatch { turn, expected, actual } => write!(
                f,
                "state hash at {turn} is {actual:#018x}, the recording says {expected:#018x}"
            ),
        }
    }
}

impl std::error::Error for ReplayError {}

/// Re-runs `game` through every bundle of `replay` and compares its state hash with the
/// recorded reference at every check turn.
pub fn verify_replay<G: ReplayGame>(
    replay: &Replay,
    game: &mut G,
) -> Result<ReplayVerified, ReplayError> {
    if replay.format_version != REPLAY_FORMAT_VERSION {
        return Err(ReplayError::Version {
            found: replay.format_version,
            expected: REPLAY_FORMAT_VERSION,
        });
    }
    let mut checks = replay.checks.iter().peekable();
    let mut verified = ReplayVerified { turns: 0, checks_matched: 0 };
    for bundle in replay.bundles() {
        game.execute(&bundle);
        verified.turns += 1;
        while let Some(&&(turn, expected)) = checks.peek() {
            if turn > bundle.turn.0 {
                break;
            }
            checks.next();
            if turn == bundle.turn.0 {
                let actual = game.state_hash();
                if actual != expected {
                    return Err(ReplayError::Mismatch { turn: Turn(turn), expected, actual });
                }
                verified.checks_matched += 1;
            }
        }
    }
    Ok(verified)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundles_carry_the_turn_length_in_force() {
        let pace = ReplayRecord::Pace { turn_length_ms: 125, command_delay_turns: 2 };
        let replay = Replay {
            format_version: REPLAY_FORMAT_VERSION,
            protocol_version: crate::PROTOCOL_VERSION,
            game_data_hash: 0,
            seed: 0,
            players_max: 2,
            first_pace: (100, 2),
            first_turn: 7,
            turns: vec![vec![], vec![pace], vec![], vec![]],
            checks: Vec::new(),
            truncated: false,
        };
        let lengths: Vec<(u32, u32)> =
            replay.bundles().map(|bundle| (bundle.turn.0, bundle.length_ms)).collect();
        // The pace record in turn 8 applies from turn 9.
        assert_eq!(lengths, [(7, 100), (8, 100), (9, 125), (10, 125)]);
    }
}
