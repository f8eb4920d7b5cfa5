//! The replay file: the match's setup plus a phalanx [`Replay`] — every bundle the players
//! executed and the agreed state hash after **every** turn (not only the check turns) — in
//! postcard. `archers replay FILE` re-simulates the battle from it and compares every hash.

use phalanx::replay::{verify_replay, Replay, ReplayGame, TurnBundle};
use phalanx::TypedTurn;
use serde::{Deserialize, Serialize};

use crate::world::{Order, World};

/// The first bytes of every replay file.
pub const MAGIC: [u8; 8] = *b"ARCHERS1";

/// A recorded match.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayFile {
    /// [`MAGIC`].
    pub magic: [u8; 8],
    /// Players (armies) in the match.
    pub players: u8,
    /// Archers in total.
    pub units: u32,
    /// The bundles and per-turn hashes; `replay.seed` is the match's seed.
    pub replay: Replay,
}

/// Why a replay file could not be read or did not verify.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReplayFileError {
    /// Not a replay file of this demo, or damaged.
    Corrupt(String),
    /// The re-simulation disagreed with the recording.
    Verify(phalanx::error::ReplayError),
}

impl std::fmt::Display for ReplayFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReplayFileError::Corrupt(why) => write!(f, "not a readable archers replay: {why}"),
            ReplayFileError::Verify(error) => write!(f, "replay does not verify: {error}"),
        }
    }
}

impl std::error::Error for ReplayFileError {}

impl ReplayFile {
    /// The file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        // Every field is plain data: encoding into a Vec cannot fail.
        postcard::to_allocvec(self).unwrap_or_default()
    }

    /// Reads a file's bytes (trailing bytes are an error).
    pub fn from_bytes(bytes: &[u8]) -> Result<ReplayFile, ReplayFileError> {
        if !bytes.starts_with(&MAGIC) {
            return Err(ReplayFileError::Corrupt("it does not start with ARCHERS1".into()));
        }
        let (file, rest): (ReplayFile, _) = postcard::take_from_bytes(bytes)
            .map_err(|e| ReplayFileError::Corrupt(e.to_string()))?;
        if !rest.is_empty() {
            return Err(ReplayFileError::Corrupt(format!("{} trailing bytes", rest.len())));
        }
        if file.players < 2 || file.units < u32::from(file.players) {
            return Err(ReplayFileError::Corrupt(format!(
                "{} players, {} archers",
                file.players, file.units
            )));
        }
        Ok(file)
    }

    /// Re-simulates the match from its bundles and compares the state hash after every
    /// recorded turn. Returns the turns executed and hashes compared.
    pub fn verify(&self) -> Result<phalanx::replay::ReplayVerified, ReplayFileError> {
        let mut game = ReplayWorld(World::new(
            usize::from(self.players),
            self.units as usize,
            self.replay.seed,
        ));
        verify_replay(&self.replay, &mut game).map_err(ReplayFileError::Verify)
    }
}

/// The battle as a replay drives it.
struct ReplayWorld(World);

impl ReplayGame for ReplayWorld {
    fn execute(&mut self, bundle: &TurnBundle) {
        let turn: TypedTurn<Order> =
            TypedTurn::decode::<phalanx::proto::DefaultCodec>(bundle.clone());
        self.0.execute(&turn);
    }

    fn state_hash(&self) -> u64 {
        self.0.state_hash()
    }
}
