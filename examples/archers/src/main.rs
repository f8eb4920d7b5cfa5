//! The 1500-archer lockstep demo: 8 bot players command 1500 archers in a deterministic
//! battle, over real QUIC (quinn) under phalanx-sim's simulated network — RTT 40–150 ms,
//! 1–3 % loss, jitter, and one player cut off for a few seconds — then it prints what AoE's
//! authors cared about: did everyone agree, how much bandwidth, how much command latency.
//!
//! `cargo run --release -p archers -- --help` lists the flags; `--json` prints one JSON object
//! as the last line.
#![allow(clippy::print_stdout, clippy::print_stderr)] // a command-line program

mod world;

use std::process::ExitCode;
use std::time::Instant;

use phalanx::{PlayerId, SplitMix64, Turn, TypedTurn};
use phalanx_sim::{run_with, SimConfig, SimGame, Step};
use world::{Order, World};

#[derive(Clone, Debug)]
struct Options {
    players: usize,
    units: usize,
    minutes: f64,
    seed: u64,
    loss_percent: f64,
    rtt_ms: u64,
    jitter_ms: u64,
    partition_s: u64,
    json: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            players: 8,
            units: 1500,
            minutes: 2.0,
            seed: 1,
            loss_percent: 2.0,
            rtt_ms: 100,
            jitter_ms: 20,
            partition_s: 2,
            json: false,
        }
    }
}

const HELP: &str = "archers — the 1500-archer lockstep demo (phalanx)

USAGE: cargo run --release -p archers -- [FLAGS]

  --players N       players (2-8)                      [8]
  --units N         archers in total                   [1500]
  --minutes M       simulated match length             [2]
  --seed S          seed of the whole run              [1]
  --loss P          loss per datagram, percent         [2]
  --rtt-ms R        round-trip time                    [100]
  --jitter-ms J     extra random delay per datagram    [20]
  --partition S     cut player 3 off for S seconds     [2]
  --json            print a JSON summary as the last line
";

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options::default();
    let mut iter = args.iter();
    while let Some(flag) = iter.next() {
        if flag == "--json" {
            options.json = true;
            continue;
        }
        if flag == "--help" || flag == "-h" {
            return Err(String::new());
        }
        let value = iter.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let bad = |_| format!("{flag}: cannot read {value:?}");
        match flag.as_str() {
            "--players" => options.players = value.parse().map_err(bad)?,
            "--units" => options.units = value.parse().map_err(bad)?,
            "--minutes" => {
                options.minutes = value.parse().map_err(|_| format!("{flag}: {value:?}"))?
            }
            "--seed" => options.seed = value.parse().map_err(bad)?,
            "--loss" => {
                options.loss_percent = value.parse().map_err(|_| format!("{flag}: {value:?}"))?
            }
            "--rtt-ms" => options.rtt_ms = value.parse().map_err(bad)?,
            "--jitter-ms" => options.jitter_ms = value.parse().map_err(bad)?,
            "--partition" => options.partition_s = value.parse().map_err(bad)?,
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if !(2..=8).contains(&options.players) {
        return Err("--players must be 2 to 8".into());
    }
    if options.units < options.players || options.units > 60_000 {
        return Err("--units must be between the player count and 60000".into());
    }
    if !(0.0..=100.0).contains(&options.loss_percent) || !(0.05..=60.0).contains(&options.minutes) {
        return Err("--loss must be 0-100 and --minutes 0.05-60".into());
    }
    Ok(options)
}

#[derive(Clone)]
struct Setup {
    players: usize,
    units: usize,
    /// Bots give no orders from this turn on, so every order is executed before the end.
    quiet_from: u32,
}

/// One player: the shared battle plus a bot that gives orders at AoE's measured pace (one
/// every 1.5–2 s, bursts of 3–4 a second in battle).
struct Archers {
    player: PlayerId,
    players: usize,
    world: World,
    bot: SplitMix64,
    next_order: u32,
    quiet_from: u32,
}

impl Archers {
    fn random(&mut self) -> u64 {
        self.bot.next_u64()
    }
}

impl SimGame for Archers {
    type Command = Order;
    type Setup = Setup;

    fn new(player: PlayerId, seed: u64, setup: &Setup) -> Self {
        Archers {
            player,
            players: setup.players,
            world: World::new(setup.players, setup.units, seed),
            bot: SplitMix64::new(
                seed ^ (u64::from(player.0) + 1).wrapping_mul(0xA24B_AED4_963E_E407),
            ),
            next_order: 10 + u32::from(player.0),
            quiet_from: setup.quiet_from,
        }
    }

    fn execute(&mut self, turn: &TypedTurn<Order>) {
        self.world.execute(turn);
    }

    fn state_hash(&self) -> u64 {
        self.world.state_hash()
    }

    fn commands(&mut self, turn: Turn) -> Vec<Order> {
        if turn.0 < self.next_order || turn.0 >= self.quiet_from {
            return Vec::new();
        }
        let (first, count, _) = self.world.army(self.player);
        let burst = if self.random().is_multiple_of(4) { 3 } else { 1 };
        let mut orders = Vec::new();
        for _ in 0..burst {
            let enemy =
                (usize::from(self.player.0) + 1 + (self.random() as usize % (self.players - 1)))
                    % self.players;
            let (x, y) = world::spawn(enemy, self.players);
            let group = (count / 4).max(1);
            let start = first + (self.random() % u64::from(count.saturating_sub(group) + 1)) as u16;
            let order = match self.random() % 10 {
                0 => Order::Stop { first: start, count: group },
                1..=2 => Order::Move { first, count, x, y },
                _ => Order::AttackMove { first: start, count: group, x, y },
            };
            orders.push(order);
        }
        // 15-20 turns at 100 ms: one order every 1.5-2 s.
        self.next_order = turn.0 + 15 + (self.random() % 6) as u32;
        orders
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = match parse(&args) {
        Ok(options) => options,
        Err(message) => {
            if !message.is_empty() {
                eprintln!("error: {message}\n");
            }
            eprint!("{HELP}");
            return if message.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(2) };
        }
    };
    let mut config = SimConfig::new(options.seed, options.players);
    config.latency_ms = options.rtt_ms / 2;
    config.faults.loss_permille = (options.loss_percent * 10.0).round() as u32;
    config.faults.jitter_ms = options.jitter_ms;
    let turn_ms = u64::from(config.session.turn_length_ms);
    config.turns = ((options.minutes * 60_000.0) as u64 / turn_ms).max(1) as u32;
    config.limit_ms = (options.minutes * 60_000.0) as u64 * 3 + 60_000;
    if options.partition_s > 0 && options.players > 3 {
        config.timeline = vec![
            Step::Partition { at_ms: 20_000, player: 3 },
            Step::Repair { at_ms: 20_000 + options.partition_s * 1_000, player: 3 },
        ];
    }
    eprintln!(
        "archers: {} players, {} archers, {:.1} min, seed {}, RTT {} ms, {:.1} % loss, jitter {} ms{}",
        options.players,
        options.units,
        options.minutes,
        options.seed,
        options.rtt_ms,
        options.loss_percent,
        options.jitter_ms,
        if config.timeline.is_empty() { String::new() } else { format!(", player 3 cut off for {} s at 0:20", options.partition_s) },
    );
    eprintln!("simulating over real QUIC under phalanx-sim…");
    // The last 3 s are quiet: orders still in flight land before the players stop.
    let setup = Setup {
        players: options.players,
        units: options.units,
        quiet_from: config.turns.saturating_sub(30),
    };
    let started = Instant::now();
    let report = match run_with::<Archers>(config.clone(), setup) {
        Ok(report) => report,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    let wall = started.elapsed().as_secs_f64();
    let agree = report.check_agreement();
    let finals: Vec<u64> = report.hashes.iter().filter_map(|h| h.last().copied()).collect();
    let hashes_agree = agree.is_ok() && finals.windows(2).all(|w| w[0] == w[1]);
    let turns = report.hashes.iter().map(Vec::len).max().unwrap_or(0);
    let submitted: u64 = report.submitted.iter().sum();
    let executed = report.executed.iter().copied().min().unwrap_or(0);
    let sim_s = report.sim_ms as f64 / 1e3;
    let seconds = (turns as u64 * turn_ms) as f64 / 1e3;
    let per_player = |pick: fn(&(u64, u64)) -> u64, datagrams: fn(&(u64, u64)) -> u64| {
        let total: u64 = report.wire_bytes.iter().map(pick).sum::<u64>()
            + 28 * report.wire_datagrams.iter().map(datagrams).sum::<u64>();
        total as f64 * 8.0 / 1e3 / seconds.max(1e-9) / options.players as f64
    };
    let up_kbps = per_player(|b| b.0, |d| d.0);
    let down_kbps = per_player(|b| b.1, |d| d.1);
    let app_up = report.app_bytes.iter().map(|b| b.0).sum::<u64>() as f64
        / (turns.max(1) * options.players) as f64;
    let app_down = report.app_bytes.iter().map(|b| b.1).sum::<u64>() as f64
        / (turns.max(1) * options.players) as f64;
    let latencies: Vec<(u32, u32, u32)> = report.latency_ms.iter().flatten().copied().collect();
    let p50 = latencies.iter().map(|l| l.0).max().unwrap_or(0);
    let p95 = latencies.iter().map(|l| l.1).max().unwrap_or(0);
    let max = latencies.iter().map(|l| l.2).max().unwrap_or(0);
    let stall = report.stall_ms.iter().copied().max().unwrap_or(0);
    let final_hash = finals.first().copied().unwrap_or(0);

    println!();
    println!("  players                 {}", options.players);
    println!("  archers                 {}", options.units);
    println!("  turns executed          {turns} ({seconds:.0} s of play)");
    println!("  every player agrees     {}", if hashes_agree { "yes" } else { "NO" });
    println!("  final state hash        {final_hash:#018x}");
    println!("  desync reports          {}", report.desyncs.len());
    println!("  commands                {submitted} submitted, {executed} executed");
    println!("  command latency         p50 {p50} ms, p95 {p95} ms, max {max} ms (worst player)");
    println!("  longest stall total     {stall} ms (worst player)");
    println!("  wire per player         {up_kbps:.2} kbit/s up, {down_kbps:.2} kbit/s down (QUIC + UDP/IP)");
    println!("  28.8 kbit/s modem share {:.0} %", (up_kbps + down_kbps) / 28.8 * 100.0);
    println!("  app bytes per turn      {app_up:.1} up, {app_down:.1} down (phalanx, before QUIC)");
    println!("  simulated / wall time   {sim_s:.1} s / {wall:.1} s");
    println!(
        "  trace digest            {:#018x} (rerun with --seed {})",
        report.trace_digest, options.seed
    );
    if options.json {
        let desyncs: Vec<String> = report
            .desyncs
            .iter()
            .map(|(_, turn, players)| format!("{{\"turn\":{turn},\"players\":{players:?}}}"))
            .collect();
        println!(
            "{{\"players\":{},\"units\":{},\"turns\":{turns},\"seed\":{},\"hashes_agree\":{hashes_agree},\
             \"final_state_hash\":\"{final_hash:#018x}\",\"desyncs\":[{}],\"commands_submitted\":{submitted},\
             \"commands_executed\":{executed},\"latency_ms_p50\":{p50},\"latency_ms_p95\":{p95},\
             \"latency_ms_max\":{max},\"stall_ms\":{stall},\"wire_kbps_up_per_player\":{up_kbps:.3},\
             \"wire_kbps_down_per_player\":{down_kbps:.3},\"app_bytes_per_turn_up\":{app_up:.1},\
             \"app_bytes_per_turn_down\":{app_down:.1},\"sim_seconds\":{sim_s:.1},\"wall_seconds\":{wall:.2},\
             \"trace_digest\":\"{:#018x}\"}}",
            options.players,
            options.units,
            options.seed,
            desyncs.join(","),
            report.trace_digest,
        );
    }
    if hashes_agree {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
