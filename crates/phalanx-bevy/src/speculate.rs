//! Speculation in the plugin ([`PhalanxPlugin::speculate`](crate::PhalanxPlugin::speculate)):
//! `phalanx::speculate` over the Bevy world, saved and restored with the game's registered
//! snapshots, turns executed through the same schedules.
//!
//! Each confirmed turn goes back to the confirmed state, executes and is saved
//! ([`confirm`]); after the confirmed turns of a frame (in `PreUpdate`) and after its orders
//! are submitted (in `PostUpdate`), the game runs ahead through the newest pending order
//! ([`run_ahead`]), and with late seals through the turns due since a late one. With no order
//! pending and no turn late the world holds the confirmed state.

use std::marker::PhantomData;

use bevy::ecs::prelude::*;
use bevy::ecs::schedule::ScheduleLabel;
use phalanx::proto::CommandSeq;
use phalanx::speculate::{Rollback, Speculation, SpeculationStats};
use phalanx::{Turn, TypedTurn};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::{run_schedules, Lockstep, Registry, RestoreFn, SaveFn};

/// The schedule run after the plugin ran the game ahead of the confirmed turns (once per run
/// ahead, with the predicted state in the world): for systems that update what the player
/// sees from it.
#[derive(ScheduleLabel, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Predicted;

/// Where speculation stands ([`PhalanxPlugin::speculate`](crate::PhalanxPlugin::speculate)).
#[derive(Resource, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Prediction {
    /// The last confirmed turn (the state [`StateHash`](crate::StateHash) hashed).
    pub confirmed: Option<Turn>,
    /// The last turn the world's predicted state executed (`None`: the world holds the
    /// confirmed state).
    pub predicted_through: Option<Turn>,
    /// What speculation cost so far, and the orders not yet confirmed.
    pub stats: SpeculationStats,
}

/// The speculation a [`Lockstep`] keeps.
pub(crate) type Speculating<C> = Speculation<C, Vec<u8>>;

/// The Bevy world as speculation sees it.
struct Game<'w, C> {
    world: &'w mut World,
    save: SaveFn,
    restore: RestoreFn,
    ticks: u32,
    _command: PhantomData<fn() -> C>,
}

impl<C: Clone + Send + Sync + 'static> Rollback<C> for Game<'_, C> {
    type Saved = Vec<u8>;

    fn save(&mut self) -> Vec<u8> {
        (self.save)(self.world)
    }

    fn restore(&mut self, saved: &Vec<u8>) {
        // The bytes are the game's own save: a restore that fails shows in the hash checks.
        let _ = (self.restore)(self.world, saved);
    }

    fn execute(&mut self, turn: &TypedTurn<C>) {
        run_schedules(self.world, turn.turn, turn.records.clone(), self.ticks, turn.predicted);
    }
}

/// The world as a game speculation can save and restore (`None`: no snapshots registered).
fn game<C>(world: &mut World, ticks: u32) -> Option<Game<'_, C>> {
    let registry = world.resource::<Registry>();
    let (save, restore) = (registry.save?, registry.restore?);
    Some(Game { world, save, restore, ticks, _command: PhantomData })
}

/// Speculating, executes confirmed `turn` on the confirmed state and saves it (speculation
/// starts here if it had not); `false`: not speculating, the caller executes it.
pub(crate) fn confirm<C>(world: &mut World, lockstep: &mut Lockstep<C>, turn: &TypedTurn<C>) -> bool
where
    C: Serialize + DeserializeOwned + Clone + Send + Sync + 'static,
{
    if !lockstep.speculate {
        return false;
    }
    let Some(me) = lockstep.session.player() else { return false };
    let Some(mut game) = game::<C>(world, lockstep.ticks) else { return false };
    let speculation = lockstep.speculation.get_or_insert_with(|| Speculation::new(me, &mut game));
    speculation.confirm(&mut game, turn);
    true
}

/// Speculating: runs the game ahead through the newest pending order, then [`Predicted`]
/// if it ran any turn, and updates [`Prediction`].
pub(crate) fn run_ahead<C>(world: &mut World, lockstep: &mut Lockstep<C>)
where
    C: Serialize + DeserializeOwned + Clone + Send + Sync + 'static,
{
    let Some(speculation) = lockstep.speculation.as_mut() else { return };
    let before = speculation.stats().predicted_turns;
    // Late seals: while the next confirmed turn is late, on through the turns due since.
    let late = lockstep.session.overdue().filter(|_| lockstep.late_seals > 0);
    if speculation.stats().pending_orders > 0 || late.is_some() {
        let length_ms = world.resource::<crate::TurnProgress>().length_ms;
        if let Some(mut game) = game::<C>(world, lockstep.ticks) {
            let overdue_ms = late.map_or(0, |late| late.as_millis().min(u128::from(u64::MAX)));
            let through =
                speculation.horizon_late(overdue_ms as u64, length_ms, lockstep.late_seals);
            speculation.predict(&mut game, through);
        }
    }
    let stats = speculation.stats();
    *world.resource_mut::<Prediction>() = Prediction {
        confirmed: speculation.next_confirmed().0.checked_sub(1).map(Turn),
        predicted_through: speculation.predicted_through(),
        stats,
    };
    if stats.predicted_turns > before {
        let _ = world.try_run_schedule(Predicted);
    }
}

/// The host will never seal our order `seq`: the world stops showing it at once.
pub(crate) fn refused<C>(world: &mut World, lockstep: &mut Lockstep<C>, seq: CommandSeq)
where
    C: Serialize + DeserializeOwned + Clone + Send + Sync + 'static,
{
    let Some(speculation) = lockstep.speculation.as_mut() else { return };
    if let Some(mut game) = game::<C>(world, lockstep.ticks) {
        speculation.refused(&mut game, seq);
    }
}

/// `PostUpdate`, after the frame's orders were submitted: they show now.
pub(crate) fn predict<C>(world: &mut World)
where
    C: Serialize + DeserializeOwned + Clone + Send + Sync + 'static,
{
    let Some(mut lockstep) = world.remove_resource::<Lockstep<C>>() else { return };
    run_ahead(world, &mut lockstep);
    world.insert_resource(lockstep);
}
