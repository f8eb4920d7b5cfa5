//! The 1500-archer battle on screen, through `phalanx-bevy`.
//!
//! One process: the window is a listen server (player 0) and seven headless Bevy apps on a
//! second thread are the other players, all over loopback QUIC. Every app runs the same
//! [`battle`] (the archers demo's deterministic world as a resource, a bot for its player);
//! the window also draws it ([`draw`]). `cargo run --release` in this folder;
//! `--screenshot PATH` saves a picture after a few seconds and exits (see `screenshot.sh`).

#![forbid(unsafe_code)]

mod battle;
mod draw;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use archers::world::Order;
use bevy::prelude::*;
use bevy::render::view::screenshot::{save_to_disk, Screenshot, ScreenshotCaptured};
use bevy::window::WindowResolution;
use clap::Parser;
use phalanx::quic::HostIdentity;
use phalanx::{ClientOptions, HostControl, HostOptions, Session};
use phalanx_bevy::{Lockstep, LockstepEvent, StateHash};

use battle::Match;

/// The archers battle drawn with Bevy: eight bot players over loopback QUIC.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Players (armies), 2 to 8.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u8).range(2..=8))]
    players: u8,
    /// Archers in all, split between the armies (up to 60000).
    #[arg(long, default_value_t = 1500, value_parser = clap::value_parser!(u16).range(2..=60000))]
    units: u16,
    /// The battle's seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The host ends the game after this turn (0: play until the window closes).
    #[arg(long, default_value_t = 0)]
    turns: u32,
    /// Save a PNG of the window to this path after `--screenshot-after` seconds, then exit.
    #[arg(long)]
    screenshot: Option<PathBuf>,
    /// Player 1's app flips one bit of its battle after this turn: every app reports the
    /// desync at the next check turn (and a screenshot run fails).
    #[arg(long)]
    inject_desync: Option<u32>,
    /// The window's player (player 0) sees its own orders at once: its battle runs ahead of
    /// the confirmed turns on them and rolls back when a confirmed turn differs.
    #[arg(long)]
    speculate: bool,
    /// Seconds of play before the screenshot.
    #[arg(long, default_value_t = 5.0)]
    screenshot_after: f32,
}

/// When the host ends the game, and when the picture is taken.
#[derive(Resource)]
struct Plan {
    end_at: Option<u32>,
    /// The host's controls (the window's app is the listen server).
    control: HostControl,
    screenshot: Option<(PathBuf, Duration)>,
    started: Instant,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let game = Match {
        players: usize::from(args.players),
        units: usize::from(args.units),
        seed: args.seed,
        desync: args.inject_desync.map(|turn| (1, turn)),
    };
    if game.units < game.players {
        return Err("--units must be at least --players".into());
    }
    let (host, control, clients) = sessions(game.players)?;
    std::thread::Builder::new().name("bots".into()).spawn(move || bots(clients, game))?;

    let mut app = App::new();
    let window = Window {
        title: "phalanx · archers".into(),
        resolution: WindowResolution::new(draw::WINDOW as u32, draw::WINDOW as u32),
        ..default()
    };
    app.add_plugins(DefaultPlugins.set(WindowPlugin { primary_window: Some(window), ..default() }));
    battle::add_battle(&mut app, host, game, args.speculate);
    app.add_plugins(draw::DrawPlugin { units: game.units })
        .insert_resource(Plan {
            end_at: (args.turns > 0).then_some(args.turns),
            control,
            screenshot: args
                .screenshot
                .map(|path| (path, Duration::from_secs_f32(args.screenshot_after.max(0.0)))),
            started: Instant::now(),
        })
        .init_resource::<Desyncs>()
        .add_systems(Update, (end_game, screenshot, log_events));
    match app.run() {
        AppExit::Success => Ok(()),
        AppExit::Error(code) => std::process::exit(i32::from(code.get())),
    }
}

/// A listen server for player 0 and a joined client for each other player.
/// The window's session (the host) and the bots' (clients).
type Sessions = (Session<Order>, HostControl, Vec<Session<Order>>);

fn sessions(players: usize) -> Result<Sessions, Box<dyn std::error::Error>> {
    let identity = HostIdentity::generate_self_signed("archers-bevy")?;
    let tokens: Vec<u64> = (1..players as u64).collect();
    let mut options = HostOptions::new(identity, "127.0.0.1:0".parse()?, tokens.clone());
    options.local_player = true;
    let (host, control) = Session::host(options, None)?;
    let (addr, pin) = (control.local_addr(), control.pin());
    let mut clients = Vec::new();
    for token in tokens {
        let options = ClientOptions::new(token, pin);
        clients.push(Session::connect(addr, options, None)?);
    }
    control.start()?;
    Ok((host, control, clients))
}

/// The other players: headless apps, updated in turn until every session is over.
fn bots(clients: Vec<Session<Order>>, game: Match) {
    let mut apps: Vec<App> = clients
        .into_iter()
        .map(|session| {
            let mut app = App::new();
            app.add_plugins(MinimalPlugins);
            battle::add_battle(&mut app, session, game, false);
            app
        })
        .collect();
    loop {
        for app in &mut apps {
            app.update();
        }
        let over = apps.iter().all(|app| {
            app.world().get_resource::<Lockstep<Order>>().is_none_or(|l| l.session().is_over())
        });
        if over {
            return;
        }
        std::thread::sleep(Duration::from_millis(4));
    }
}

fn end_game(plan: Res<Plan>, hash: Res<StateHash>, mut done: Local<bool>) {
    let (Some(end_at), Some(turn)) = (plan.end_at, hash.turn) else { return };
    if turn.0 >= end_at && !*done {
        *done = true;
        if let Err(error) = plan.control.end(0) {
            warn!("could not end the game: {error}");
        }
    }
}

fn screenshot(
    plan: Res<Plan>,
    hash: Res<StateHash>,
    mut commands: Commands,
    mut taken: Local<bool>,
) {
    let Some((path, after)) = &plan.screenshot else { return };
    if *taken || hash.turn.is_none() || plan.started.elapsed() < *after {
        return;
    }
    *taken = true;
    commands
        .spawn(Screenshot::primary_window())
        .observe(save_to_disk(path.clone()))
        .observe(check_picture);
}

/// Every army with archers alive must show in the picture, and no app may have reported a
/// desync: otherwise the run fails.
fn check_picture(
    captured: On<ScreenshotCaptured>,
    battle: Res<battle::Battle>,
    hash: Res<StateHash>,
    desyncs: Res<Desyncs>,
    mut exit: MessageWriter<AppExit>,
) {
    let mut alive = [0usize; 8];
    for (army, ..) in battle.0.living() {
        alive[usize::from(army % 8)] += 1;
    }
    let Some(pixels) = draw::army_pixels(&captured.image) else {
        error!("the screenshot could not be read");
        exit.write(AppExit::error());
        return;
    };
    println!("archers alive by army:  {alive:?}");
    println!("their pixels on screen: {pixels:?}");
    let missing: Vec<usize> =
        (0..8).filter(|&army| alive[army] > 0 && pixels[army] < draw::ARCHER_PIXELS).collect();
    let turn = hash.turn.map_or(0, |turn| turn.0);
    println!("turn {turn}: {} desync reports", desyncs.0);
    if desyncs.0 > 0 {
        error!("the apps' states diverged");
        exit.write(AppExit::error());
    } else if missing.is_empty() {
        exit.write(AppExit::Success);
    } else {
        error!("armies with archers alive but not on screen: {missing:?}");
        exit.write(AppExit::error());
    }
}

/// Desync reports seen (every app checks its state hash against the others').
#[derive(Resource, Default)]
struct Desyncs(u32);

fn log_events(mut events: MessageReader<LockstepEvent>, mut desyncs: ResMut<Desyncs>) {
    for event in events.read() {
        if matches!(event, LockstepEvent::Desync(_)) {
            desyncs.0 += 1;
            error!("{event:?}");
        } else {
            info!("{event:?}");
        }
    }
}
