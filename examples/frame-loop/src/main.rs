//! phalanx from a plain 60 Hz frame loop, the way most games are written: no async in the
//! game's code, only the polling [`Session`]. A host and its clients run over loopback QUIC in
//! one process, each in its own thread with its own session; each frame takes the turns that
//! are due, lets a bot give orders, interpolates unit positions between the last two turns
//! (drawing nothing), and sleeps to the next frame. After `--seconds` the host ends the game
//! and every player's loop ends with it.
//!
//! ```text
//! cargo run --release -p frame-loop                     # a host that plays + 3 clients, 30 s
//! cargo run --release -p frame-loop -- --role dedicated # a host that only observes + 4 clients
//! cargo run --release -p frame-loop -- --json           # one JSON object as the last line
//! ```
#![forbid(unsafe_code)]

mod world;

use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use phalanx::quic::HostIdentity;
use phalanx::{ClientOptions, EndReason, Event, HostControl, HostOptions, SessionConfig};
use world::{Order, World};

/// phalanx from a plain frame loop (see the crate docs).
#[derive(Parser, Debug)]
struct Cli {
    /// `listen`: the host plays, with three clients; `dedicated`: the host only runs the game
    /// (every turn, checked against the players' hashes), with four clients.
    #[arg(long, value_enum, default_value_t = Role::Listen)]
    role: Role,
    /// Seconds of play before the host ends the game.
    #[arg(long, default_value_t = 30.0)]
    seconds: f64,
    /// Print one JSON object as the last line.
    #[arg(long)]
    json: bool,
}

/// Who hosts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Role {
    Listen,
    Dedicated,
}

/// The whole match, as the game sees it.
type Session = phalanx::Session<Order>;

/// Frames a second.
const FPS: u64 = 60;

/// What one loop saw.
#[derive(Debug)]
struct Outcome {
    /// Its seat (`None`: a dedicated host).
    player: Option<u8>,
    /// The state hash after every turn.
    hashes: Vec<u64>,
    /// How its session ended.
    ended: Option<EndReason>,
    /// When its loop saw the session over, ms since the match's clock started.
    over_ms: u64,
    /// When the host called `end` (the host's loop only).
    end_called_ms: Option<u64>,
    frames: u64,
}

/// The frame loop every role runs. The match lasts `match_length`; with the host's `control`
/// (the host's loop), this loop ends it then.
fn frame_loop(
    mut session: Session,
    clock: Instant,
    match_length: Duration,
    control: Option<HostControl>,
) -> Outcome {
    let end_after = control.is_some().then_some(match_length);
    let me = session.player().map(|player| player.0);
    let mut world = World::new(4);
    let mut turn_length = Duration::from_millis(100);
    let mut last_turn_at = Instant::now();
    let mut outcome = Outcome {
        player: me,
        hashes: Vec::new(),
        ended: None,
        over_ms: 0,
        end_called_ms: None,
        frames: 0,
    };
    let frame = Duration::from_nanos(1_000_000_000 / FPS);
    // A safety net: the end reaches everyone within a second; past this, report what we saw.
    let limit = clock + match_length + Duration::from_secs(30);
    let mut next_frame = Instant::now();
    while !session.is_over() && Instant::now() < limit {
        while let Some(turn) = session.try_next_turn() {
            world.execute(&turn);
            let hash = world.hash();
            outcome.hashes.push(hash);
            last_turn_at = Instant::now();
            turn_length = Duration::from_millis(turn.length_ms.into());
            // Every turn's hash is offered; the session keeps the check turns'.
            let _ = session.report_state_hash(turn.turn, hash);
            if let Some(order) = me.and_then(|me| world.bot_order(me, turn.turn)) {
                let _ = session.submit(&order);
            }
        }
        while let Some(event) = session.try_event() {
            if let Event::Desync(report) = event {
                log_problem(&format!("desync: {report:?}"));
            }
        }
        // Where to draw every unit this frame: between the last two turns' positions.
        let alpha = last_turn_at.elapsed().as_secs_f32() / turn_length.as_secs_f32();
        std::hint::black_box(world.interpolate(alpha.min(1.0)));
        if end_after.is_some_and(|after| clock.elapsed() >= after)
            && outcome.end_called_ms.is_none()
        {
            outcome.end_called_ms = Some(clock.elapsed().as_millis() as u64);
            if let Some(Err(error)) = control.as_ref().map(|control| control.end(0)) {
                log_problem(&format!("end: {error}"));
            }
        }
        outcome.frames += 1;
        next_frame += frame;
        std::thread::sleep(next_frame.saturating_duration_since(Instant::now()));
    }
    outcome.over_ms = clock.elapsed().as_millis() as u64;
    outcome.ended = session.ended();
    session.shutdown();
    outcome
}

/// The example logs nothing on success; problems go to stderr.
#[allow(clippy::print_stderr, reason = "the example's diagnostics")]
fn log_problem(line: &str) {
    eprintln!("frame-loop: {line}");
}

/// The session's settings, the same on every machine. `game_data_hash` names the game's rules
/// and data: a client built with other rules is refused at the join instead of desyncing.
fn session_config() -> SessionConfig {
    let mut config = SessionConfig::default();
    config.game_data_hash = GAME_DATA_HASH;
    config
}

/// This build's rules and data (the grid's size, the units, the bot): a real game hashes its
/// data files and its version.
const GAME_DATA_HASH: u64 = 0x6672_616d_652d_6c6f;

/// Runs the match; every outcome, the host's first.
fn run(cli: &Cli) -> Result<Vec<Outcome>, String> {
    let clients = if cli.role == Role::Listen { 3 } else { 4 };
    let tokens: Vec<u64> = (1..=clients).collect();
    let identity = HostIdentity::generate_self_signed("frame-loop").map_err(|e| e.to_string())?;
    let bind = "127.0.0.1:0".parse().map_err(|e| format!("{e}"))?;
    let mut options = HostOptions::new(identity, bind, tokens.clone());
    options.session = session_config();
    options.local_player = cli.role == Role::Listen;
    options.observe_turns = cli.role == Role::Dedicated;
    let (host, control) = Session::host(options, None).map_err(|e| e.to_string())?;
    // What the lobby hands each player: the address, the pin (it names the transport) and a
    // seat token.
    let (addr, pin) = (control.local_addr(), control.pin());
    let mut joined = Vec::new();
    for token in tokens {
        let mut options = ClientOptions::new(token, pin);
        options.session = session_config();
        joined.push(Session::connect(addr, options, None).map_err(|e| e.to_string())?);
    }
    control.start().map_err(|e| e.to_string())?;
    let clock = Instant::now();
    let end_after = Duration::from_secs_f64(cli.seconds.max(0.0));
    let threads: Vec<_> = joined
        .into_iter()
        .map(|session| std::thread::spawn(move || frame_loop(session, clock, end_after, None)))
        .collect();
    let mut outcomes = vec![frame_loop(host, clock, end_after, Some(control))];
    for thread in threads {
        outcomes.push(thread.join().map_err(|_| "a player's loop panicked")?);
    }
    Ok(outcomes)
}

#[allow(clippy::print_stdout, reason = "the example's report")]
fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let outcomes = match run(&cli) {
        Ok(outcomes) => outcomes,
        Err(error) => {
            log_problem(&error);
            return std::process::ExitCode::FAILURE;
        }
    };
    let players: Vec<&Outcome> = outcomes.iter().filter(|o| o.player.is_some()).collect();
    let reference = &outcomes[0].hashes;
    let hashes_agree = outcomes.iter().all(|o| &o.hashes == reference) && !reference.is_empty();
    let end_called = outcomes[0].end_called_ms.unwrap_or(u64::MAX);
    let end_latency_ms_max =
        players.iter().map(|o| o.over_ms.saturating_sub(end_called)).max().unwrap_or(0);
    let ended: Vec<&str> =
        players.iter().map(|o| o.ended.map_or("running", |reason| reason.name())).collect();
    let frames: u64 = outcomes.iter().map(|o| o.frames).sum();
    let role = if cli.role == Role::Listen { "listen" } else { "dedicated" };
    let turns = reference.len();
    if cli.json {
        let report = serde_json::json!({
            "role": role,
            "players": players.len(),
            "turns": turns,
            "hashes_agree": hashes_agree,
            "ended": ended,
            "end_latency_ms_max": end_latency_ms_max,
            "frames": frames,
        });
        println!("{report}");
    } else {
        println!(
            "{role} host, {} players: {turns} turns, every game agrees: {}, ended {ended:?}, \
             the end reached every player within {end_latency_ms_max} ms ({frames} frames drawn)",
            players.len(),
            if hashes_agree { "yes" } else { "NO" },
        );
    }
    let finished = ended.iter().all(|&end| end == "finished");
    if hashes_agree && finished {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}
