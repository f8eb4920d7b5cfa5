//! One player's game: the shared battle plus a bot that gives orders at AoE's measured pace,
//! as phalanx-sim drives it (a [`SimGame`]) and as the real-socket client drives it. Player 0's
//! game can also keep what it saw in an [`Observer`]: every bundle (for the replay file), a few
//! pictures of the battlefield (for the report) and the last turn it executed (for the
//! progress bar).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use phalanx::proto::{CommandCodec, DefaultCodec};
use phalanx::replay::ReplayRecord;
use phalanx::{PlayerId, Turn, TypedRecord, TypedTurn};
use phalanx_sim::SimGame;

pub use crate::bot::Bot;
use crate::world::{Order, World};

/// What every player's game is built from besides the seed.
#[derive(Clone, Debug)]
pub struct Setup {
    /// Players in the match.
    pub players: usize,
    /// Archers in total (split evenly between the armies).
    pub units: usize,
    /// Bots give no orders from this turn on, so every order is executed before the end.
    pub quiet_from: u32,
    /// `(player, turn)`: that player's game flips one bit of its state right after executing
    /// that turn (`--inject-desync`).
    pub desync: Option<(u8, u32)>,
    /// Where player 0's game reports what it saw, if anywhere.
    pub observer: Option<Arc<Observer>>,
}

impl Setup {
    /// A setup for `players` and `units`, quiet for the last 3 s of `turns`, nothing injected,
    /// nobody observing.
    pub fn new(players: usize, units: usize, turns: u32) -> Setup {
        Setup { players, units, quiet_from: turns.saturating_sub(30), desync: None, observer: None }
    }
}

/// The battlefield at one turn: every living archer's `(army, x, y)`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// The turn just executed.
    pub turn: u32,
    /// Living archers.
    pub units: Vec<(u8, i32, i32)>,
}

/// What the observing game saw.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    /// The first turn it executed.
    pub first_turn: u32,
    /// Every turn's records, as a replay keeps them, from `first_turn` on.
    pub turns: Vec<Vec<ReplayRecord>>,
    /// Pictures of the battlefield, every `snapshot_every` turns and at the last turn.
    pub snapshots: Vec<Snapshot>,
}

/// Shared between the observing game and the program that runs it.
#[derive(Debug, Default)]
pub struct Observer {
    /// The last turn player 0 executed, plus one (0: none yet).
    pub progress: AtomicU32,
    snapshot_every: u32,
    last_turn: u32,
    observed: Mutex<Observed>,
}

impl Observer {
    /// An observer that takes a picture every `snapshot_every` turns and at `last_turn`.
    pub fn new(snapshot_every: u32, last_turn: u32) -> Observer {
        Observer { snapshot_every: snapshot_every.max(1), last_turn, ..Observer::default() }
    }

    /// What was observed so far.
    pub fn observed(&self) -> Observed {
        self.observed.lock().expect("not poisoned").clone()
    }

    fn see(&self, turn: &TypedTurn<Order>, world: &World) {
        self.progress.store(turn.turn.0 + 1, Ordering::Relaxed);
        let mut observed = self.observed.lock().expect("not poisoned");
        if observed.turns.is_empty() {
            observed.first_turn = turn.turn.0;
        }
        observed.turns.push(turn.records.iter().filter_map(replay_record).collect());
        if turn.turn.0.is_multiple_of(self.snapshot_every) || turn.turn.0 == self.last_turn {
            observed
                .snapshots
                .push(Snapshot { turn: turn.turn.0, units: world.living().collect() });
        }
    }
}

/// A decoded record back in replay form (the codec is deterministic, so the payload is the
/// bytes that were sealed). A command that did not decode cannot be re-encoded: the demo's
/// bots never send one.
fn replay_record(record: &TypedRecord<Order>) -> Option<ReplayRecord> {
    match record {
        TypedRecord::Command { player, seq, command: Ok(order) } => Some(ReplayRecord::Command {
            player: player.0,
            seq: seq.0,
            payload: DefaultCodec::encode(order).ok()?,
        }),
        TypedRecord::Command { command: Err(_), .. } => None,
        TypedRecord::Joined(player) => Some(ReplayRecord::Joined(player.0)),
        TypedRecord::Left(player) => Some(ReplayRecord::Left(player.0)),
    }
}

/// One player: the shared battle plus its [`Bot`].
#[derive(Debug)]
pub struct Archers {
    world: World,
    bot: Bot,
    desync_at: Option<u32>,
    observer: Option<Arc<Observer>>,
}

impl Archers {
    /// The battle as this player sees it.
    pub fn world(&self) -> &World {
        &self.world
    }
}

impl SimGame for Archers {
    type Command = Order;
    type Setup = Setup;

    fn new(player: PlayerId, seed: u64, setup: &Setup) -> Self {
        Archers {
            world: World::new(setup.players, setup.units, seed),
            bot: Bot::new(player, setup.players, seed, setup.quiet_from),
            desync_at: setup.desync.filter(|&(p, _)| p == player.0).map(|(_, turn)| turn),
            observer: setup.observer.clone().filter(|_| player.0 == 0),
        }
    }

    fn execute(&mut self, turn: &TypedTurn<Order>) {
        self.world.execute(turn);
        if turn.predicted {
            // Speculation (`--speculate`): rolled back when the confirmed turn comes, so
            // neither the injected desync nor the replay and report see it.
            return;
        }
        if self.desync_at == Some(turn.turn.0) {
            self.world.flip_one_bit();
        }
        if let Some(observer) = &self.observer {
            observer.see(turn, &self.world);
        }
    }

    fn state_hash(&self) -> u64 {
        self.world.state_hash()
    }

    fn save(&self) -> Option<Vec<u8>> {
        Some(self.world.save())
    }

    fn restore(&mut self, state: &[u8]) -> bool {
        match World::load(state) {
            Some(world) => {
                self.world = world;
                true
            }
            None => false,
        }
    }

    fn commands(&mut self, turn: Turn) -> Vec<Order> {
        self.bot.orders(turn, &self.world)
    }
}
