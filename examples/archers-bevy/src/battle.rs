//! The game, as every app runs it (the window and the headless bots alike): the battle is a
//! resource, a turn's orders run in [`ExecuteCommands`], its ticks in [`SimulationTick`], the
//! state hash is the battle's, and a bot submits its player's orders.

use std::hash::{Hash, Hasher};

use archers::game::Bot;
use archers::world::{Order, World as Battlefield, TICKS_PER_TURN};
use bevy::prelude::*;
use phalanx::Session;
use phalanx_bevy::{
    CurrentTurn, ExecuteCommands, LockstepAppExt, PhalanxPlugin, SimulationTick, StateHash, Submit,
};

/// What every app builds the same battle from.
#[derive(Clone, Copy, Debug)]
pub struct Match {
    /// Players (armies).
    pub players: usize,
    /// Archers in all.
    pub units: usize,
    /// The battle's seed.
    pub seed: u64,
    /// `(player, turn)`: that player's app flips one bit of its battle after that turn, to
    /// show a desync being caught.
    pub desync: Option<(u8, u32)>,
}

/// This app flips one bit of its battle after this turn.
#[derive(Resource)]
struct FlipAfter(u32);

/// The battle: one resource, hashed through its own state hash (units and arrows in flight).
#[derive(Resource)]
pub struct Battle(pub Battlefield);

impl Hash for Battle {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.0.state_hash());
    }
}

/// Our player's bot (absent on a dedicated host: nobody to play for).
#[derive(Resource)]
struct OurBot(Bot);

/// The lockstep plugin and the battle for one app driving `session`; `speculate`: its
/// player's orders show at once (`PhalanxPlugin::speculate`: the battle it draws runs ahead
/// of the confirmed turns on them).
pub fn add_battle(app: &mut App, session: Session<Order>, game: Match, speculate: bool) {
    let player = session.player();
    let bot = player.map(|player| Bot::new(player, game.players, game.seed, u32::MAX));
    let mut plugin = PhalanxPlugin::new(session).with_ticks_per_turn(TICKS_PER_TURN as u32);
    plugin.speculate = speculate;
    app.add_plugins(plugin)
        .insert_resource(Battle(Battlefield::new(game.players, game.units, game.seed)))
        .hash_resource::<Battle>()
        .snapshots(save, restore)
        .add_systems(ExecuteCommands, orders)
        .add_systems(SimulationTick, tick)
        .add_systems(Update, play);
    if let Some(bot) = bot {
        app.insert_resource(OurBot(bot));
    }
    let ours = |(flipper, turn): (u8, u32)| (Some(flipper) == player.map(|p| p.0)).then_some(turn);
    if let Some(turn) = game.desync.and_then(ours) {
        app.insert_resource(FlipAfter(turn));
    }
}

fn orders(turn: Res<CurrentTurn<Order>>, mut battle: ResMut<Battle>) {
    for (player, order) in turn.commands() {
        battle.0.order(player, *order);
    }
}

fn tick(turn: Res<CurrentTurn<Order>>, flip: Option<Res<FlipAfter>>, mut battle: ResMut<Battle>) {
    battle.0.tick();
    let last_tick = turn.tick + 1 == turn.ticks && !turn.predicted;
    if last_tick && flip.is_some_and(|flip| flip.0 == turn.turn.0) {
        battle.0.flip_one_bit();
    }
}

/// After each executed turn, the bot looks at the battle and may give orders.
fn play(
    hash: Res<StateHash>,
    battle: Res<Battle>,
    bot: Option<ResMut<OurBot>>,
    mut seen: Local<Option<phalanx::Turn>>,
    mut submit: MessageWriter<Submit<Order>>,
) {
    let (Some(mut bot), Some(turn)) = (bot, hash.turn) else { return };
    if *seen == Some(turn) {
        return;
    }
    *seen = Some(turn);
    for order in bot.0.orders(turn, &battle.0) {
        submit.write(Submit(order));
    }
}

fn save(world: &mut World) -> Vec<u8> {
    world.resource::<Battle>().0.save()
}

fn restore(world: &mut World, bytes: &[u8]) -> bool {
    match Battlefield::load(bytes) {
        Some(battle) => {
            world.insert_resource(Battle(battle));
            true
        }
        None => false,
    }
}
