//! The example of `docs/guide/bevy.md`: a listen server whose orders move one unit.
#![allow(elided_lifetimes_in_paths, clippy::print_stderr)]
use bevy::prelude::*;
use phalanx::quic::HostIdentity;
use phalanx::{HostOptions, Session};
use phalanx_bevy::*;
#[derive(serde::Serialize, serde::Deserialize, Clone)]
struct Move(i64);
#[derive(Component, Hash)]
struct Unit(i64, i64); // where it is, where it goes
fn orders(turn: Res<CurrentTurn<Move>>, mut units: Query<&mut Unit>) {
    for (_player, Move(to)) in turn.commands() {
        units.iter_mut().for_each(|mut unit| unit.1 = *to);
    }
}
fn tick(mut units: Query<&mut Unit>) {
    units.iter_mut().for_each(|mut unit| unit.0 += (unit.1 - unit.0).signum());
}
fn play(mut submit: MessageWriter<Submit<Move>>, mut events: MessageReader<LockstepEvent>) {
    submit.write(Submit(Move(10))); // executed a few turns from now, on every peer
    for event in events.read() {
        eprintln!("{event:?}"); // joined, left, waiting, desync, ended
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let identity = HostIdentity::generate_self_signed("minimal")?;
    let mut options = HostOptions::new(identity, "127.0.0.1:0".parse()?, vec![]);
    options.local_player = true; // a listen server: the host plays
    let (session, control) = Session::<Move>::host(options, None)?;
    control.start()?;
    App::new()
        .add_plugins((MinimalPlugins, PhalanxPlugin::new(session).with_ticks_per_turn(2)))
        .hash_component::<Unit>() // hashed after every turn, in SimId order
        .add_systems(Startup, |mut commands: Commands| {
            commands.spawn((SimId(0), Unit(0, 0)));
        })
        .add_systems(ExecuteCommands, orders)
        .add_systems(SimulationTick, tick)
        .add_systems(Update, play)
        .run();
    Ok(())
}
