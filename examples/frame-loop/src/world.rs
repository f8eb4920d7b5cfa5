//! The example's game: four units per player walking to where their owner orders them, in
//! integers, so every machine computes the same positions.

use phalanx::{Turn, TypedRecord, TypedTurn};

/// An order: send one of the player's units to a point.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Order {
    unit: u16,
    x: i32,
    y: i32,
}

#[derive(Clone, Copy, Debug)]
struct Unit {
    owner: u8,
    at: (i32, i32),
    /// Where it was before the last turn: what the renderer interpolates from.
    was: (i32, i32),
    to: (i32, i32),
}

/// Every unit, in id order.
pub(crate) struct World {
    units: Vec<Unit>,
}

/// Units per player.
const UNITS: u16 = 4;
/// Distance a unit walks per turn, per axis.
const STEP: i32 = 8;

impl World {
    pub(crate) fn new(players: u8) -> World {
        let units = (0..u16::from(players) * UNITS)
            .map(|id| {
                let at = (i32::from(id) * 40, i32::from(id % UNITS) * 40);
                Unit { owner: (id / UNITS) as u8, at, was: at, to: at }
            })
            .collect();
        World { units }
    }

    /// Executes one turn: the orders in their sealed order (a player moves only its own
    /// units), then every unit walks.
    pub(crate) fn execute(&mut self, turn: &TypedTurn<Order>) {
        for record in &turn.records {
            if let TypedRecord::Command { player, command: Ok(order), .. } = record {
                let unit = self.units.get_mut(usize::from(order.unit));
                if let Some(unit) = unit.filter(|unit| unit.owner == player.0) {
                    unit.to = (order.x, order.y);
                }
            }
        }
        for unit in &mut self.units {
            unit.was = unit.at;
            unit.at.0 += (unit.to.0 - unit.at.0).clamp(-STEP, STEP);
            unit.at.1 += (unit.to.1 - unit.at.1).clamp(-STEP, STEP);
        }
    }

    /// FNV-1a over every unit's position and target.
    pub(crate) fn hash(&self) -> u64 {
        self.units.iter().fold(0xcbf2_9ce4_8422_2325, |hash, unit| {
            [unit.at.0, unit.at.1, unit.to.0, unit.to.1].iter().fold(hash, |hash, value| {
                value.to_le_bytes().iter().fold(hash, |hash, &byte| {
                    (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
                })
            })
        })
    }

    /// Where to draw every unit at `alpha` (0..=1) of the way from the last turn to the next.
    pub(crate) fn interpolate(&self, alpha: f32) -> Vec<(f32, f32)> {
        let lerp = |from: i32, to: i32| from as f32 + (to - from) as f32 * alpha;
        self.units.iter().map(|u| (lerp(u.was.0, u.at.0), lerp(u.was.1, u.at.1))).collect()
    }

    /// A bot's order for `player` after `turn`, about every second: one of its units to a
    /// point that depends only on the turn (deterministic, for a reproducible example).
    pub(crate) fn bot_order(&self, player: u8, turn: Turn) -> Option<Order> {
        if turn.0 % 10 != u32::from(player) % 10 {
            return None;
        }
        let unit = u16::from(player) * UNITS + (turn.0 / 10 % u32::from(UNITS)) as u16;
        let spin = turn.0.wrapping_mul(2_654_435_761) ^ u32::from(player);
        Some(Order { unit, x: (spin % 400) as i32, y: (spin / 400 % 400) as i32 })
    }
}
