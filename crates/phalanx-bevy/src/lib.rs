//! phalanx for Bevy: a plugin that drives a phalanx [`Session`] (any role: a client, a listen
//! server, a dedicated host that observes the turns) from a Bevy app.
//!
//! - **Turns run in schedules you fill.** For each turn, in order and exactly once, the plugin
//!   puts its commands in [`CurrentTurn`], runs [`ExecuteCommands`] once (apply the orders),
//!   then [`SimulationTick`] [`PhalanxPlugin::ticks_per_turn`] times (advance the
//!   simulation). Everything in them must be deterministic: no `Time`, no hash-ordered
//!   iteration over entities, no floats whose results differ between machines.
//! - **Commands in, events out.** Systems write [`Submit`] messages; the plugin sends them.
//!   The session's lifecycle comes back as [`LockstepEvent`] messages (joined, left, waiting,
//!   desync, ended).
//! - **State hashes.** Components and resources registered with
//!   [`LockstepAppExt::hash_component`] / [`hash_resource`](LockstepAppExt::hash_resource) are
//!   hashed after every turn, entities in [`SimId`] order, and the hash is reported to the
//!   session (which compares them at check turns and pins a desync's first turn).
//! - **Rendering.** [`TurnProgress`] says how far the frame is between two turns, for
//!   interpolation.
//! - **Snapshots.** [`LockstepAppExt::snapshots`] registers how to save and restore the game,
//!   for late join and rejoin, and (with [`PhalanxPlugin::keep_states`]) desync forensics.
//! - **Speculation.** With [`PhalanxPlugin::speculate`] (and snapshots registered), the
//!   player's own orders show at once: the plugin runs the game ahead of the confirmed turns
//!   on them, through the same schedules ([`CurrentTurn::predicted`] set), and goes back to
//!   the confirmed state when the next confirmed turn comes (`phalanx::speculate`). Outside
//!   the plugin's systems the world holds the predicted state, which is what renders;
//!   [`Prediction`] says how far ahead it is, and [`Predicted`] runs after each run ahead.
//!   Hashes, snapshots and kept states are always the confirmed state's.
//!
//! ```no_run
//! use bevy::prelude::*;
//! use phalanx_bevy::{CurrentTurn, ExecuteCommands, LockstepAppExt, PhalanxPlugin, SimId, Submit};
//!
//! #[derive(serde::Serialize, serde::Deserialize, Clone)]
//! struct Order { unit: u64, hp: i32 }
//!
//! #[derive(Component, Hash)]
//! struct Hp(i32);
//!
//! fn apply(turn: Res<CurrentTurn<Order>>, mut units: Query<(&SimId, &mut Hp)>) {
//!     for (_, order) in turn.commands() {
//!         for (id, mut hp) in &mut units {
//!             if id.0 == order.unit { hp.0 = order.hp; }
//!         }
//!     }
//! }
//!
//! # fn session() -> phalanx::Session<Order> { todo!() }
//! App::new()
//!     .add_plugins((MinimalPlugins, PhalanxPlugin::<Order>::new(session())))
//!     .hash_component::<Hp>()
//!     .add_systems(ExecuteCommands, apply)
//!     .add_systems(Startup, |mut commands: Commands| { commands.spawn((SimId(1), Hp(10))); })
//!     .add_systems(Update, |mut submit: MessageWriter<Submit<Order>>| {
//!         submit.write(Submit(Order { unit: 1, hp: 9 }));
//!     })
//!     .run();
//! ```

use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use bevy::app::{App, Plugin, PreUpdate};
use bevy::ecs::prelude::*;
use bevy::ecs::schedule::ScheduleLabel;
use phalanx::{
    desync::{DesyncBundle, DesyncReport},
    proto::CommandSeq,
    EndReason, Event, PlayerId, Session, Turn, TypedRecord,
};
use serde::de::DeserializeOwned;
use serde::Serialize;

mod hash;
mod speculate;

pub use hash::{Fnv64, SimId};
pub use speculate::{Predicted, Prediction};

/// The schedule run once per turn, before its ticks: apply [`CurrentTurn`]'s commands.
#[derive(ScheduleLabel, Clone, Debug, PartialEq, Eq, Hash)]
pub struct ExecuteCommands;

/// The schedule run [`PhalanxPlugin::ticks_per_turn`] times per turn: advance the simulation
/// one fixed tick ([`CurrentTurn::tick`] says which).
#[derive(ScheduleLabel, Clone, Debug, PartialEq, Eq, Hash)]
pub struct SimulationTick;

/// The turn being executed, while [`ExecuteCommands`] and [`SimulationTick`] run.
#[derive(Resource, Debug)]
pub struct CurrentTurn<C: Send + Sync + 'static> {
    /// Its number.
    pub turn: Turn,
    /// Its records in canonical order (commands, joins, leaves).
    pub records: Vec<TypedRecord<C>>,
    /// The tick within the turn, `0..ticks`, during [`SimulationTick`].
    pub tick: u32,
    /// Ticks per turn.
    pub ticks: u32,
    /// A turn speculation predicted ([`PhalanxPlugin::speculate`]): it will be rolled back
    /// when the confirmed turn comes, so what cannot be taken back (sounds, statistics,
    /// messages) waits for a confirmed one.
    pub predicted: bool,
}

impl<C: Send + Sync + 'static> CurrentTurn<C> {
    /// Its commands that decoded, with their player, in canonical order (a command that did
    /// not decode is skipped: every peer skips it alike).
    pub fn commands(&self) -> impl Iterator<Item = (PlayerId, &C)> + '_ {
        self.records.iter().filter_map(|record| match record {
            TypedRecord::Command { player, command: Ok(command), .. } => Some((*player, command)),
            _ => None,
        })
    }
}

/// A command for our player: write it as a message; the plugin submits it after this frame's
/// systems ran (its turn is a few turns ahead, as the session decides).
#[derive(Message, Debug, Clone)]
pub struct Submit<C: Send + Sync + 'static>(pub C);

/// The session's lifecycle, as messages.
#[derive(Message, Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum LockstepEvent {
    /// A player's `Joined` record executed (at the start, or a late join or a rejoin).
    PlayerJoined(PlayerId),
    /// A player's `Left` record executed.
    PlayerLeft(PlayerId),
    /// The game waits for these players.
    Waiting(Vec<PlayerId>),
    /// The wait announced by `Waiting` is over.
    StallEnded,
    /// A check turn's state hashes differed.
    Desync(DesyncReport),
    /// A host only: the first divergent turn and both states there (see phalanx's desync
    /// forensics: name what differs with `DesyncBundle::diff`).
    DesyncDiagnosed(Arc<DesyncBundle>),
    /// An order that no game executes: a client's, refused by the host's rule (on the host),
    /// or one of ours the host will never seal (the game's rule refused it, or its turns had
    /// no room): a speculating app stops showing it.
    CommandRefused {
        /// Whose.
        player: PlayerId,
        /// Which.
        seq: CommandSeq,
    },
    /// The session is over and every turn was executed.
    Ended(Option<EndReason>),
}

/// How far the app is between the last executed turn and the next, for rendering.
#[derive(Resource, Debug, Clone, Copy, Default, PartialEq)]
pub struct TurnProgress {
    /// The last turn executed.
    pub turn: Option<Turn>,
    /// 0 just after it executed, 1 when the next is due (clamped).
    pub alpha: f32,
    /// The last turn's length, milliseconds.
    pub length_ms: u32,
}

/// The state hash after the last executed turn (what was reported to the session).
#[derive(Resource, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StateHash {
    /// The turn.
    pub turn: Option<Turn>,
    /// The hash of every registered component and resource.
    pub hash: u64,
}

/// How the game saves and restores its state, for snapshots and desync forensics.
type SaveFn = fn(&mut World) -> Vec<u8>;
type RestoreFn = fn(&mut World, &[u8]) -> bool;

/// The plugin. Holds the session until [`Plugin::build`] moves it into the app as the
/// [`Lockstep`] resource.
pub struct PhalanxPlugin<C: Send + Sync + 'static> {
    session: Mutex<Option<Session<C>>>,
    /// Ticks of [`SimulationTick`] per turn (default 1).
    pub ticks_per_turn: u32,
    /// Give the session the game's state after every turn (with [`LockstepAppExt::snapshots`]'s
    /// save), so that a desync's forensics can compare states (default off: a save a turn).
    pub keep_states: bool,
    /// Run the game ahead of the confirmed turns on the player's own orders, so that they
    /// show at once (see the [crate docs](crate); needs [`LockstepAppExt::snapshots`]; a
    /// session without a player of its own does not speculate). Costs a save after every
    /// confirmed turn and the predicted turns run again. Default off.
    pub speculate: bool,
    /// With [`speculate`](Self::speculate): late seals. While the next confirmed turn is
    /// late, the game runs on through the turns due since, as predicted, at most this many
    /// past it (`Speculation::horizon_late`). Default 0: off.
    pub late_seals: u32,
    _command: PhantomData<fn() -> C>,
}

impl<C: Send + Sync + 'static> PhalanxPlugin<C> {
    /// A plugin driving `session`.
    pub fn new(session: Session<C>) -> Self {
        PhalanxPlugin {
            session: Mutex::new(Some(session)),
            ticks_per_turn: 1,
            keep_states: false,
            speculate: false,
            late_seals: 0,
            _command: PhantomData,
        }
    }

    /// With `ticks` ticks of [`SimulationTick`] per turn.
    pub fn with_ticks_per_turn(mut self, ticks: u32) -> Self {
        self.ticks_per_turn = ticks.max(1);
        self
    }

    /// With [`speculate`](Self::speculate) on: the player's own orders show at once.
    pub fn with_speculation(mut self) -> Self {
        self.speculate = true;
        self
    }

    /// With speculation and [`late_seals`](Self::late_seals) of at most `turns` turns.
    pub fn with_late_seals(mut self, turns: u32) -> Self {
        self.speculate = true;
        self.late_seals = turns;
        self
    }
}

/// The session in the app. Systems may use it for what the plugin does not do (the host's
/// `start` and `end`, stats, pause requests).
#[derive(Resource)]
pub struct Lockstep<C: Send + Sync + 'static> {
    session: Session<C>,
    ticks: u32,
    keep_states: bool,
    ended_told: bool,
    /// With [`PhalanxPlugin::speculate`]: `None` until the first turn (or again after a
    /// snapshot was restored), and for a session without a player.
    speculation: Option<speculate::Speculating<C>>,
    speculate: bool,
    /// [`PhalanxPlugin::late_seals`].
    late_seals: u32,
}

impl<C: Send + Sync + 'static> Lockstep<C> {
    /// The session.
    pub fn session(&self) -> &Session<C> {
        &self.session
    }

    /// The session, mutably (for `end`).
    pub fn session_mut(&mut self) -> &mut Session<C> {
        &mut self.session
    }
}

/// What the plugin hashes, and how the game saves and restores.
#[derive(Resource, Default)]
struct Registry {
    parts: Vec<fn(&mut World, &mut Fnv64)>,
    save: Option<SaveFn>,
    restore: Option<RestoreFn>,
}

impl<C> Plugin for PhalanxPlugin<C>
where
    C: Serialize + DeserializeOwned + Clone + Send + Sync + 'static,
{
    fn build(&self, app: &mut App) {
        let session = self.session.lock().ok().and_then(|mut slot| slot.take());
        let Some(session) = session else {
            // A plugin is built once; a second build has no session to move.
            return;
        };
        app.insert_resource(Lockstep {
            session,
            ticks: self.ticks_per_turn.max(1),
            keep_states: self.keep_states,
            ended_told: false,
            speculation: None,
            speculate: self.speculate,
            late_seals: self.late_seals,
        })
        .init_resource::<Registry>()
        .init_resource::<TurnProgress>()
        .init_resource::<StateHash>()
        .init_resource::<Prediction>()
        .init_schedule(ExecuteCommands)
        .init_schedule(SimulationTick)
        .init_schedule(Predicted)
        .add_message::<Submit<C>>()
        .add_message::<LockstepEvent>()
        .add_systems(PreUpdate, run_turns::<C>)
        .add_systems(bevy::app::PostUpdate, (submit::<C>, speculate::predict::<C>).chain());
    }
}

/// Registering what the plugin hashes and how it saves the game.
pub trait LockstepAppExt {
    /// Hashes every `T` of an entity with a [`SimId`], in `SimId` order, after every turn.
    fn hash_component<T: Component + Hash>(&mut self) -> &mut Self;
    /// Hashes resource `R` (if present) after every turn.
    fn hash_resource<R: Resource + Hash>(&mut self) -> &mut Self;
    /// How the game saves its deterministic state and restores it: a rejoining or late player
    /// restores the host's verified snapshot before its first turn; a peer asked for a
    /// snapshot gives one; with [`PhalanxPlugin::keep_states`], the state after every turn
    /// goes to desync forensics. `restore` returns `false` for bytes that are not a state.
    fn snapshots(&mut self, save: SaveFn, restore: RestoreFn) -> &mut Self;
}

impl LockstepAppExt for App {
    fn hash_component<T: Component + Hash>(&mut self) -> &mut Self {
        self.init_resource::<Registry>();
        self.world_mut().resource_mut::<Registry>().parts.push(hash::component::<T>);
        self
    }

    fn hash_resource<R: Resource + Hash>(&mut self) -> &mut Self {
        self.init_resource::<Registry>();
        self.world_mut().resource_mut::<Registry>().parts.push(hash::resource::<R>);
        self
    }

    fn snapshots(&mut self, save: SaveFn, restore: RestoreFn) -> &mut Self {
        self.init_resource::<Registry>();
        let mut registry = self.world_mut().resource_mut::<Registry>();
        registry.save = Some(save);
        registry.restore = Some(restore);
        self
    }
}

/// Sends this frame's [`Submit`] messages (and, speculating, predicts them).
fn submit<C>(mut orders: MessageReader<'_, '_, Submit<C>>, mut lockstep: ResMut<'_, Lockstep<C>>)
where
    C: Serialize + DeserializeOwned + Clone + Send + Sync + 'static,
{
    let lockstep = &mut *lockstep;
    for Submit(command) in orders.read() {
        // Refused commands (too large, too many this turn, session over) are dropped, as a
        // game drops an order it cannot send; the session's stats count them.
        if let Ok(ticket) = lockstep.session.submit(command) {
            if let Some(speculation) = lockstep.speculation.as_mut() {
                speculation.submitted(ticket, command.clone());
            }
        }
    }
}

/// Events, then every due turn (speculating: then the run ahead), then the progress.
fn run_turns<C>(world: &mut World)
where
    C: Serialize + DeserializeOwned + Clone + Send + Sync + 'static,
{
    let Some(mut lockstep) = world.remove_resource::<Lockstep<C>>() else { return };
    while let Some(event) = lockstep.session.try_event() {
        if let Event::CommandRefused { player, seq } = &event {
            if Some(*player) == lockstep.session.player() {
                speculate::refused(world, &mut lockstep, *seq);
            }
        }
        if let Some(message) = lifecycle(event) {
            world.write_message(message);
        }
    }
    while let Some(turn) = lockstep.session.try_next_turn() {
        execute(world, &mut lockstep, turn);
    }
    speculate::run_ahead(world, &mut lockstep);
    if lockstep.session.is_over() && !lockstep.ended_told {
        lockstep.ended_told = true;
        world.write_message(LockstepEvent::Ended(lockstep.session.ended()));
    }
    let until = lockstep.session.until_next_turn();
    let mut progress = world.resource_mut::<TurnProgress>();
    if let Some(until) = until {
        let length = progress.length_ms.max(1) as f32;
        progress.alpha = (1.0 - until.as_millis() as f32 / length).clamp(0.0, 1.0);
    }
    world.insert_resource(lockstep);
}

/// One turn: restore if asked, the schedules (speculating: on the confirmed state), the hash,
/// snapshots and kept states.
fn execute<C>(world: &mut World, lockstep: &mut Lockstep<C>, turn: phalanx::TypedTurn<C>)
where
    C: Serialize + DeserializeOwned + Clone + Send + Sync + 'static,
{
    let (save, restore) = {
        let registry = world.resource::<Registry>();
        (registry.save, registry.restore)
    };
    if let (Some(snapshot), Some(restore)) = (&turn.restore, restore) {
        // A game that cannot read the host's verified state cannot go on in step: the hash
        // checks will say so. Speculation starts over from it.
        lockstep.speculation = None;
        let _ = restore(world, &snapshot.state);
    }
    for record in &turn.records {
        match record {
            TypedRecord::Joined(player) => {
                world.write_message(LockstepEvent::PlayerJoined(*player));
            }
            TypedRecord::Left(player) => {
                world.write_message(LockstepEvent::PlayerLeft(*player));
            }
            _ => {}
        }
    }
    let number = turn.turn;
    let (wants_snapshot, length_ms) = (turn.wants_snapshot, turn.length_ms);
    if !speculate::confirm(world, lockstep, &turn) {
        run_schedules(world, number, turn.records, lockstep.ticks, false);
    }
    let state_hash = hash::state(world);
    // Errors mean the session is over: the end is told once it is.
    let _ = lockstep.session.report_state_hash(number, state_hash);
    // A game with a player of its own keeps states (a dedicated host has none to keep).
    let keep = lockstep.keep_states && lockstep.session.player().is_some();
    if let Some(state) = save.filter(|_| wants_snapshot || keep).map(|save| save(world)) {
        // One save serves both: the snapshot asked for and the state kept for forensics.
        if keep {
            let _ = lockstep.session.keep_state(number, state.clone());
        }
        if wants_snapshot {
            let _ = lockstep.session.offer_snapshot(number, state_hash, state);
        }
    }
    *world.resource_mut::<StateHash>() = StateHash { turn: Some(number), hash: state_hash };
    *world.resource_mut::<TurnProgress>() =
        TurnProgress { turn: Some(number), alpha: 0.0, length_ms };
}

/// Runs [`ExecuteCommands`] once and [`SimulationTick`] `ticks` times for one turn.
fn run_schedules<C>(
    world: &mut World,
    turn: Turn,
    records: Vec<TypedRecord<C>>,
    ticks: u32,
    predicted: bool,
) where
    C: Send + Sync + 'static,
{
    world.insert_resource(CurrentTurn { turn, records, tick: 0, ticks, predicted });
    let _ = world.try_run_schedule(ExecuteCommands);
    for tick in 0..ticks {
        world.resource_mut::<CurrentTurn<C>>().tick = tick;
        let _ = world.try_run_schedule(SimulationTick);
    }
    world.remove_resource::<CurrentTurn<C>>();
}

/// The message for a session event, if the game needs one.
fn lifecycle(event: Event) -> Option<LockstepEvent> {
    match event {
        Event::Desync(report) => Some(LockstepEvent::Desync(report)),
        Event::Waiting(players) => Some(LockstepEvent::Waiting(players)),
        Event::StallEnded => Some(LockstepEvent::StallEnded),
        Event::DesyncDiagnosed(bundle) => Some(LockstepEvent::DesyncDiagnosed(bundle)),
        Event::CommandRefused { player, seq } => {
            Some(LockstepEvent::CommandRefused { player, seq })
        }
        _ => None,
    }
}
