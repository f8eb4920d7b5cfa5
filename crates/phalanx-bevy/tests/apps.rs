//! Headless Bevy apps (`MinimalPlugins`) in one process over loopback QUIC, as a game uses the
//! plugin: a listen server and three clients play a tiny deterministic battle (units with a
//! `SimId`, hit points and positions, orders as `Submit` messages); every app's state hash
//! after every turn is equal; a desync injected into one app's state is reported to every
//! app; the host ending the session ends every app. A speculating app shows its own order on
//! the next update and rolls back the turns it predicted without another player's orders.

#![allow(elided_lifetimes_in_paths, reason = "Bevy system parameters read better without them")]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bevy::prelude::*;
use phalanx::quic::{HostIdentity, HostVerification};
use phalanx::{
    ClientOptions, CommandRule, EndReason, HostControl, HostOptions, PlayerId, Session,
    SessionConfig, Turn,
};
use phalanx_bevy::{
    CurrentTurn, ExecuteCommands, LockstepAppExt, LockstepEvent, PhalanxPlugin, Prediction, SimId,
    SimulationTick, StateHash, Submit,
};

#[derive(serde::Serialize, serde::Deserialize, Clone, Debug)]
struct Order {
    unit: u64,
    to: (i64, i64),
}

#[derive(Component, Hash)]
struct Position(i64, i64);

#[derive(Component, Hash)]
struct Goal(i64, i64);

#[derive(Component, Hash)]
struct Hp(i32);

/// What a test reads back from an app.
#[derive(Resource, Default)]
struct Seen {
    hashes: BTreeMap<u32, u64>,
    desyncs: Vec<u32>,
    ended: Option<Option<EndReason>>,
    player: Option<PlayerId>,
    diagnosed: Vec<std::sync::Arc<phalanx::desync::DesyncBundle>>,
    refused: Vec<(PlayerId, u32)>,
}

/// This app flips one unit's hit points after this turn.
#[derive(Resource)]
struct Corrupt(u32);

const UNITS: u64 = 12;
const TURN_MS: u32 = 30;

fn spawn_units(mut commands: Commands) {
    for id in 0..UNITS {
        let at = (id as i64 * 10, (id % 3) as i64 * 7);
        commands.spawn((SimId(id), Position(at.0, at.1), Goal(at.0, at.1), Hp(100)));
    }
}

fn apply_orders(turn: Res<CurrentTurn<Order>>, mut units: Query<(&SimId, &mut Goal)>) {
    for (_, order) in turn.commands() {
        for (id, mut goal) in &mut units {
            if id.0 == order.unit {
                *goal = Goal(order.to.0, order.to.1);
            }
        }
    }
}

fn step(mut units: Query<(&mut Position, &Goal, &mut Hp)>) {
    for (mut at, goal, mut hp) in &mut units {
        at.0 += (goal.0 - at.0).signum();
        at.1 += (goal.1 - at.1).signum();
        if at.0 == goal.0 && at.1 == goal.1 {
            hp.0 -= 1;
        }
    }
}

fn corrupt(
    turn: Res<CurrentTurn<Order>>,
    corrupt: Option<Res<Corrupt>>,
    mut units: Query<(&SimId, &mut Hp)>,
) {
    let at = corrupt.map(|c| c.0);
    if at == Some(turn.turn.0) && turn.tick == turn.ticks - 1 {
        for (id, mut hp) in &mut units {
            if id.0 == 3 {
                hp.0 ^= 1;
            }
        }
    }
}

/// A bot: an order every few frames, for one of our units.
fn bot(mut frame: Local<u64>, seen: Res<Seen>, mut submit: MessageWriter<Submit<Order>>) {
    *frame += 1;
    let Some(player) = seen.player else { return };
    if (*frame).is_multiple_of(4) {
        let unit = (*frame / 4 * 4 + u64::from(player.0)) % UNITS;
        let to = ((*frame % 50) as i64, (*frame % 13) as i64 - 6);
        submit.write(Submit(Order { unit, to }));
    }
}

fn record(hash: Res<StateHash>, mut events: MessageReader<LockstepEvent>, mut seen: ResMut<Seen>) {
    if let Some(turn) = hash.turn {
        seen.hashes.insert(turn.0, hash.hash);
    }
    for event in events.read() {
        match event {
            LockstepEvent::Desync(report) => seen.desyncs.push(report.turn.0),
            LockstepEvent::Ended(reason) => seen.ended = Some(*reason),
            LockstepEvent::DesyncDiagnosed(bundle) => seen.diagnosed.push(bundle.clone()),
            LockstepEvent::CommandRefused { player, seq } => seen.refused.push((*player, seq.0)),
            _ => {}
        }
    }
}

fn app(session: Session<Order>, corrupt_at: Option<u32>, keep_states: bool) -> App {
    let mut plugin = PhalanxPlugin::new(session).with_ticks_per_turn(3);
    plugin.keep_states = keep_states;
    let mut app = game(plugin);
    app.add_systems(Update, bot);
    if let Some(turn) = corrupt_at {
        app.insert_resource(Corrupt(turn));
    }
    app
}

/// The game without its bot: orders come only from the test.
fn game(plugin: PhalanxPlugin<Order>) -> App {
    let mut app = App::new();
    app.add_plugins((MinimalPlugins, plugin))
        .snapshots(save, restore)
        .hash_component::<Position>()
        .hash_component::<Goal>()
        .hash_component::<Hp>()
        .init_resource::<Seen>()
        .add_systems(Startup, (spawn_units, who_am_i))
        .add_systems(ExecuteCommands, apply_orders)
        .add_systems(SimulationTick, (step, corrupt).chain())
        .add_systems(Update, record);
    app
}

/// The bot's player, from the session.
fn who_am_i(lockstep: Res<phalanx_bevy::Lockstep<Order>>, mut seen: ResMut<Seen>) {
    seen.player = lockstep.session().player();
}

fn config() -> SessionConfig {
    let mut config = SessionConfig::default();
    config.turns.length_ms = TURN_MS;
    config
}

/// A listen server (its own player plays) with `rule` for commands, a client session for
/// each of `tokens`, joined, and the game started.
fn listen_server(
    name: &str,
    tokens: &[u64],
    rule: Option<CommandRule>,
) -> (Session<Order>, Vec<Session<Order>>, HostControl) {
    let identity = HostIdentity::generate_self_signed(name).unwrap();
    let fingerprint = identity.fingerprint();
    let mut options = HostOptions::new(identity, "127.0.0.1:0".parse().unwrap(), tokens.to_vec());
    options.session = config();
    options.local_player = true;
    options.command_rule = rule;
    let (host, control): (Session<Order>, _) = Session::host(options, None).expect("binds");
    let clients = tokens
        .iter()
        .map(|&token| {
            let mut options = ClientOptions::new(token, HostVerification::Pinned(fingerprint));
            options.session = config();
            Session::connect(control.local_addr(), options, None).expect("joins")
        })
        .collect();
    control.start().expect("starts");
    (host, clients, control)
}

/// The last turn an app's game confirmed (0 before any).
fn confirmed(app: &App) -> u32 {
    app.world().resource::<StateHash>().turn.map_or(0, |t| t.0)
}

/// A listen server and three clients, each an app; the host ends the game at `end_at`.
fn play(corrupt: Option<(usize, u32)>, end_at: u32) -> Vec<Seen> {
    play_keeping(corrupt, end_at, false)
}

/// As [`play`]; with `keep_states`, every app keeps its state after every turn.
fn play_keeping(corrupt: Option<(usize, u32)>, end_at: u32, keep_states: bool) -> Vec<Seen> {
    let (host, clients, control) = listen_server("bevy", &[1, 2, 3], None);
    let sessions = std::iter::once(host).chain(clients);
    let corrupt_at = |index: usize| corrupt.filter(|c| c.0 == index).map(|c| c.1);
    let mut apps: Vec<App> =
        sessions.enumerate().map(|(i, s)| app(s, corrupt_at(i), keep_states)).collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut ended = false;
    while Instant::now() < deadline {
        for app in &mut apps {
            app.update();
        }
        let host_turn = confirmed(&apps[0]);
        if host_turn >= end_at && !ended {
            ended = true;
            control.end(0).expect("the host ends it");
        }
        if apps.iter().all(|app| app.world().resource::<Seen>().ended.is_some()) {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    apps.into_iter().map(|mut app| app.world_mut().remove_resource::<Seen>().unwrap()).collect()
}

#[test]
fn every_app_reaches_the_same_state_and_ends_with_the_host() {
    let seen = play(None, 120);
    for (index, app) in seen.iter().enumerate() {
        assert_eq!(app.ended, Some(Some(EndReason::Finished { code: 0 })), "app {index}");
        assert!(app.desyncs.is_empty(), "app {index}: {:?}", app.desyncs);
        assert!(app.hashes.len() >= 120, "app {index} executed {} turns", app.hashes.len());
    }
    // Every turn two apps both executed has one hash; the states moved.
    for app in &seen[1..] {
        assert_eq!(app.hashes, seen[0].hashes);
    }
    let distinct: std::collections::BTreeSet<u64> = seen[0].hashes.values().copied().collect();
    assert!(distinct.len() > 100, "the state changes turn by turn");
}

#[test]
fn a_desync_in_one_app_is_reported_by_every_app() {
    let seen = play(Some((2, 41)), 90);
    let interval = SessionConfig::default().sync.interval_turns;
    let check = 41u32.div_ceil(interval) * interval;
    for (index, app) in seen.iter().enumerate() {
        assert_eq!(app.desyncs.first(), Some(&check), "app {index}");
    }
    // Before the flip the states agreed; from it, app 2's differs.
    assert_eq!(seen[2].hashes.get(&40), seen[0].hashes.get(&40));
    assert_ne!(seen[2].hashes.get(&41), seen[0].hashes.get(&41));
    let _ = Turn(0);
}

/// The game's inspection hook for desync forensics: each unit's fields by name, from `save`'s
/// bytes.
fn inspect(state: &[u8]) -> Option<Vec<(String, u64)>> {
    if !state.len().is_multiple_of(48) {
        return None;
    }
    let names = ["x", "y", "goal x", "goal y", "hp"];
    let mut parts = Vec::new();
    for unit in state.chunks_exact(48) {
        let word = |i: usize| u64::from_le_bytes(unit[8 * i..8 * i + 8].try_into().unwrap());
        for (i, name) in names.iter().enumerate() {
            parts.push((format!("unit {} {name}", word(0)), word(i + 1)));
        }
    }
    Some(parts)
}

/// With states kept, the host's app gets the desync's bundle, and the game's hook names the
/// one field that was flipped.
#[test]
fn a_desync_is_diagnosed_when_the_apps_keep_their_states() {
    let seen = play_keeping(Some((2, 41)), 90, true);
    let bundle = seen[0].diagnosed.first().expect("the host diagnosed the desync");
    assert_eq!(bundle.first_turn, Turn(41));
    assert_eq!(bundle.diff(inspect), Ok(vec!["unit 3 hp".to_owned()]));
    for (index, app) in seen.iter().enumerate().skip(1) {
        assert!(app.diagnosed.is_empty(), "app {index}: bundles go to the host only");
    }
}

/// The game's state, saved for snapshots: every unit in `SimId` order.
fn save(world: &mut World) -> Vec<u8> {
    let mut query = world.query::<(&SimId, &Position, &Goal, &Hp)>();
    let mut units: Vec<_> = query.iter(world).collect();
    units.sort_unstable_by_key(|(id, ..)| **id);
    let mut bytes = Vec::new();
    for (id, at, goal, hp) in units {
        for word in [id.0 as i64, at.0, at.1, goal.0, goal.1, i64::from(hp.0)] {
            bytes.extend_from_slice(&word.to_le_bytes());
        }
    }
    bytes
}

/// Replaces every unit with those `save` wrote.
fn restore(world: &mut World, bytes: &[u8]) -> bool {
    if !bytes.len().is_multiple_of(48) {
        return false;
    }
    let old: Vec<Entity> = world.query_filtered::<Entity, With<SimId>>().iter(world).collect();
    old.into_iter().for_each(|entity| {
        world.despawn(entity);
    });
    for unit in bytes.chunks_exact(48) {
        let word = |i: usize| i64::from_le_bytes(unit[8 * i..8 * i + 8].try_into().unwrap());
        let hp = Hp(word(5) as i32);
        world.spawn((
            SimId(word(0) as u64),
            Position(word(1), word(2)),
            Goal(word(3), word(4)),
            hp,
        ));
    }
    true
}

#[test]
fn a_late_player_restores_a_snapshot_then_agrees_and_the_progress_moves() {
    let mut session = config();
    session.catch_up.late_join = true;
    session.catch_up.snapshot_interval_turns = 20;
    let identity = HostIdentity::generate_self_signed("bevy-late").unwrap();
    let fingerprint = identity.fingerprint();
    let mut options = HostOptions::new(identity, "127.0.0.1:0".parse().unwrap(), vec![1, 2]);
    options.session = session.clone();
    options.local_player = true;
    let (host, control): (Session<Order>, _) = Session::host(options, None).expect("binds");
    let addr = control.local_addr();
    let connect = |token| {
        let mut options = ClientOptions::new(token, HostVerification::Pinned(fingerprint));
        options.session = session.clone();
        Session::<Order>::connect(addr, options, None).expect("joins")
    };
    let first = connect(1);
    control.start().expect("starts");
    // `app` registers the game's snapshots (save and restore).
    let mut apps = vec![app(host, None, false), app(first, None, false)];
    let (mut alphas, deadline) = (Vec::new(), Instant::now() + Duration::from_secs(60));
    while Instant::now() < deadline {
        for app in &mut apps {
            app.update();
        }
        alphas.push(apps[1].world().resource::<phalanx_bevy::TurnProgress>().alpha);
        let host_turn = confirmed(&apps[0]);
        if host_turn >= 50 && apps.len() == 2 {
            apps.push(app(connect(2), None, false));
        }
        if host_turn >= 160 {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let seen: Vec<Seen> =
        apps.iter_mut().map(|app| app.world_mut().remove_resource::<Seen>().unwrap()).collect();
    assert_eq!(seen.len(), 3, "the late player joined");
    let late = &seen[2];
    let first_turn = *late.hashes.keys().next().expect("the late player played");
    assert!(first_turn > 20, "it started from a snapshot, not turn 0: {first_turn}");
    assert!(late.hashes.len() >= 50, "it played {} turns", late.hashes.len());
    for (turn, hash) in &late.hashes {
        assert_eq!(seen[0].hashes.get(turn), Some(hash), "turn {turn}");
    }
    assert!(late.desyncs.is_empty() && seen[0].desyncs.is_empty());
    // The render factor moved between turns, within 0..=1.
    assert!(alphas.iter().all(|a| (0.0..=1.0).contains(a)));
    assert!(alphas.iter().any(|&a| a > 0.2 && a < 0.8), "interpolation moves");
}

/// A unit's goal in an app's world now.
fn goal_of(app: &mut App, unit: u64) -> (i64, i64) {
    let world = app.world_mut();
    let mut query = world.query::<(&SimId, &Goal)>();
    let found = query.iter(world).find(|(id, _)| id.0 == unit).map(|(_, goal)| (goal.0, goal.1));
    found.expect("the unit exists")
}

/// Updates both apps (host first) until `done` says so, within 30 s.
fn update_until<const N: usize>(apps: &mut [App; N], mut done: impl FnMut(&mut [App; N]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done(apps) {
        assert!(Instant::now() < deadline, "timed out");
        for app in apps.iter_mut() {
            app.update();
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A listen server's app and a speculating client's app (the host taking `rule` for
/// commands), updated until the client confirmed ten turns.
fn speculating_client(name: &str, rule: Option<CommandRule>) -> [App; 2] {
    let (host, mut clients, _control) = listen_server(name, &[1], rule);
    let client = clients.pop().expect("one client");
    let host = game(PhalanxPlugin::new(host).with_ticks_per_turn(3));
    let client = game(PhalanxPlugin::new(client).with_ticks_per_turn(3).with_speculation());
    let mut apps = [host, client];
    update_until(&mut apps, |apps| confirmed(&apps[1]) >= 10);
    apps
}

#[test]
fn a_speculating_app_shows_its_order_at_once_and_rolls_back_what_others_change() {
    let mut apps = speculating_client("bevy-speculate", None);

    // The host's player orders unit 2 about every frame; meanwhile the client orders unit 5,
    // once: every turn it predicts has host orders it cannot know.
    let host_orders = |apps: &mut [App; 2], frames: i64| {
        for frame in 0..frames {
            apps[0].world_mut().write_message(Submit(Order { unit: 2, to: (-40 + frame, 3) }));
            apps.iter_mut().for_each(App::update);
            std::thread::sleep(Duration::from_millis(2));
        }
    };
    host_orders(&mut apps, 10);
    apps[0].world_mut().write_message(Submit(Order { unit: 2, to: (-50, 3) }));
    apps[0].update();
    apps[1].world_mut().write_message(Submit(Order { unit: 5, to: (500, 0) }));
    apps[1].update();
    let prediction = *apps[1].world().resource::<Prediction>();
    let through = prediction.predicted_through.expect("the client runs ahead");
    assert_eq!(prediction.stats.pending_orders, 1);
    assert!(confirmed(&apps[1]) < through.0, "no confirmed turn carries the order yet");
    assert_eq!(goal_of(&mut apps[1], 5), (500, 0), "the order shows on the next update");
    assert_ne!(goal_of(&mut apps[0], 5), (500, 0), "but not yet on the host");
    host_orders(&mut apps, 30);

    // The turns carrying the orders are confirmed: the client's predictions, made without the
    // host's orders, were rolled back, and every confirmed state is the host's.
    let host_at = confirmed(&apps[0]);
    update_until(&mut apps, |apps| confirmed(&apps[1]) >= host_at.max(through.0) + 5);
    let prediction = *apps[1].world().resource::<Prediction>();
    assert!(prediction.stats.mispredictions >= 1, "{prediction:?}");
    assert!(prediction.stats.resimulated_turns >= 1, "{prediction:?}");
    assert_eq!((prediction.stats.pending_orders, prediction.predicted_through), (0, None));
    assert_eq!(goal_of(&mut apps[1], 5), (500, 0), "the order, confirmed");
    let seen: Vec<Seen> =
        apps.iter_mut().map(|app| app.world_mut().remove_resource::<Seen>().unwrap()).collect();
    assert!(seen[1].hashes.len() > 10);
    for (turn, hash) in &seen[1].hashes {
        assert_eq!(seen[0].hashes.get(turn), Some(hash), "turn {turn}: the confirmed states");
    }
    assert!(seen.iter().all(|seen| seen.desyncs.is_empty()));
}

/// The host's rule refuses the client's orders for unit 7: the speculating client shows the
/// order at once, then learns of the refusal (a `CommandRefused` message on both apps), stops
/// showing it and ends in the host's state; no game ever executed it.
#[test]
fn a_refused_order_stops_showing_in_a_speculating_app() {
    let rule = CommandRule::new(|_, order: &Order| order.unit != 7);
    let mut apps = speculating_client("bevy-refused", Some(rule));
    let before = goal_of(&mut apps[1], 7);
    apps[1].world_mut().write_message(Submit(Order { unit: 7, to: (900, 9) }));
    apps[1].update();
    assert_eq!(goal_of(&mut apps[1], 7), (900, 9), "the order shows on the next update");
    let told = |app: &App| !app.world().resource::<Seen>().refused.is_empty();
    update_until(&mut apps, |apps| told(&apps[1]));
    apps[1].update();
    let prediction = *apps[1].world().resource::<Prediction>();
    assert_eq!(prediction.stats.pending_orders, 0, "{prediction:?}");
    assert_eq!(goal_of(&mut apps[1], 7), before, "refused: it shows no more");
    let host_at = confirmed(&apps[0]);
    update_until(&mut apps, |apps| confirmed(&apps[1]) >= host_at + 5);
    let seen: Vec<Seen> =
        apps.iter_mut().map(|app| app.world_mut().remove_resource::<Seen>().unwrap()).collect();
    assert_eq!(seen[1].refused, [(PlayerId(1), 0)], "told once, of our own order");
    assert_eq!(seen[0].refused, [(PlayerId(1), 0)], "the host's app hears of it too");
    for (turn, hash) in &seen[1].hashes {
        assert_eq!(seen[0].hashes.get(turn), Some(hash), "turn {turn}: the confirmed states");
    }
}

/// Late seals: the host's game stops taking turns, so a window later the host stops sealing
/// and the clients' next turn is late. The client with late seals runs on through the turns
/// due since (at most five past the late one), with no order of its own pending; the client
/// without them holds its confirmed state. When the host's game takes turns again, both
/// confirm every turn, and every confirmed state is the host's.
#[test]
fn a_late_sealing_app_runs_on_while_its_turn_is_late() {
    let (host, mut clients, _control) = listen_server("bevy-late-seals", &[1, 2], None);
    let waiting = clients.pop().expect("two clients");
    let late = clients.pop().expect("two clients");
    let host = game(PhalanxPlugin::new(host).with_ticks_per_turn(3));
    let late = game(PhalanxPlugin::new(late).with_ticks_per_turn(3).with_late_seals(5));
    let waiting = game(PhalanxPlugin::new(waiting).with_ticks_per_turn(3).with_speculation());
    let mut apps = [host, late, waiting];
    update_until(&mut apps, |apps| confirmed(&apps[1]) >= 10 && confirmed(&apps[2]) >= 10);

    let prediction = |app: &App| *app.world().resource::<Prediction>();
    let deadline = Instant::now() + Duration::from_secs(20);
    let ran_on = loop {
        assert!(Instant::now() < deadline, "the late-sealing client never ran on");
        apps[1].update();
        apps[2].update();
        let (ahead, behind) = (prediction(&apps[1]), prediction(&apps[2]));
        assert_eq!(behind.predicted_through, None, "without late seals it holds: {behind:?}");
        let next = ahead.confirmed.map_or(0, |t| t.0 + 1);
        if let Some(through) = ahead.predicted_through.filter(|t| t.0 >= next + 3) {
            assert_eq!(ahead.stats.pending_orders, 0);
            assert!(through.0 <= next + 5, "at most five turns past the late one: {ahead:?}");
            break through;
        }
        std::thread::sleep(Duration::from_millis(2));
    };

    update_until(&mut apps, |apps| apps.iter().all(|app| confirmed(app) >= ran_on.0 + 5));
    let seen: Vec<Seen> =
        apps.iter_mut().map(|app| app.world_mut().remove_resource::<Seen>().unwrap()).collect();
    // The apps note the state after the last turn of each update: compare the turns both
    // noted (the host's game takes many turns in one update when it comes back).
    for client in &seen[1..] {
        let both: Vec<_> =
            client.hashes.iter().filter(|(turn, _)| seen[0].hashes.contains_key(turn)).collect();
        assert!(both.len() > 10, "{} turns noted by both", both.len());
        for (turn, hash) in both {
            assert_eq!(seen[0].hashes.get(turn), Some(hash), "turn {turn}: the confirmed states");
        }
    }
    assert!(seen.iter().all(|seen| seen.desyncs.is_empty()));
}
