//! The game side of a simulation: the trait a game implements, and a reference game.

use phalanx::{PlayerId, Turn, TypedTurn};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// A deterministic game, as the simulator drives it: one instance per player.
pub trait SimGame: Send + 'static {
    /// The game's command type.
    type Command: Serialize + DeserializeOwned + Send + Clone + std::fmt::Debug + 'static;
    /// What every player's game is built from besides the seed (map, unit counts...).
    type Setup: Clone + Send + 'static;
    /// The game for `player`, from the setup and the scenario seed.
    fn new(player: PlayerId, seed: u64, setup: &Self::Setup) -> Self;
    /// Executes one turn.
    fn execute(&mut self, turn: &TypedTurn<Self::Command>);
    /// The state hash (reported at check turns, recorded every turn).
    fn state_hash(&self) -> u64;
    /// Commands the player issues after executing `turn` (return an empty list most turns).
    fn commands(&mut self, turn: Turn) -> Vec<Self::Command>;
    /// The game's state, serialized, for a snapshot when the session asks
    /// (`SessionConfig::catch_up.snapshot_interval_turns`). `None` (the default): this game takes no
    /// snapshots, and a returning player replays the game from turn 0.
    fn save(&self) -> Option<Vec<u8>> {
        None
    }
    /// Replaces the game's state with one [`save`](Self::save) gave (a returning player's,
    /// before the turns after the snapshot). `false`: the bytes are not a state of this game.
    fn restore(&mut self, state: &[u8]) -> bool {
        let _ = state;
        false
    }
}

/// A tiny reference game for smoke-testing a network setup: its state is a hash chain over
/// every record it executed and the turn numbers, and each player issues one command every
/// `setup` turns (0: never). Equal states mean identical bundles in identical order.
#[derive(Clone, Debug)]
pub struct ChainGame {
    player: PlayerId,
    state: u64,
    every: u32,
}

impl SimGame for ChainGame {
    type Command = (u8, u32);
    type Setup = u32;

    fn new(player: PlayerId, seed: u64, every: &u32) -> Self {
        ChainGame { player, state: seed, every: *every }
    }

    fn execute(&mut self, turn: &TypedTurn<(u8, u32)>) {
        for record in &turn.records {
            let word = match record {
                phalanx::TypedRecord::Command { player, command: Ok((p, n)), .. } => {
                    u64::from(player.0) << 40 | u64::from(*p) << 32 | u64::from(*n)
                }
                phalanx::TypedRecord::Command { command: Err(_), .. } => 1,
                phalanx::TypedRecord::Joined(p) => 2 << 8 | u64::from(p.0),
                phalanx::TypedRecord::Left(p) => 3 << 8 | u64::from(p.0),
            };
            self.state = (self.state ^ word).wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.state = (self.state ^ u64::from(turn.turn.0)).wrapping_mul(0x0000_0100_0000_01b3);
    }

    fn state_hash(&self) -> u64 {
        self.state
    }

    fn save(&self) -> Option<Vec<u8>> {
        Some(self.state.to_le_bytes().to_vec())
    }

    fn restore(&mut self, state: &[u8]) -> bool {
        let Ok(bytes) = <[u8; 8]>::try_from(state) else { return false };
        self.state = u64::from_le_bytes(bytes);
        true
    }

    fn commands(&mut self, turn: Turn) -> Vec<(u8, u32)> {
        if self.every != 0 && (turn.0 + u32::from(self.player.0)).is_multiple_of(self.every) {
            vec![(self.player.0, turn.0)]
        } else {
            Vec::new()
        }
    }
}
