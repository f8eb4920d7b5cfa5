//! The 1500-archer lockstep demo: 8 bot players command 1500 archers in a deterministic
//! battle, over real QUIC (quinn) under phalanx-sim's simulated network — RTT 40–150 ms,
//! 1–3 % loss, jitter, and one player cut off for a few seconds — then it prints what AoE's
//! authors cared about: did everyone agree, how much bandwidth, how much command latency, and
//! writes an HTML report with plots over time and the battlefield.
//!
//! Also: `archers host` / `archers client` play the same match over real sockets, and
//! `archers replay FILE` re-simulates a recorded match and checks every turn's state hash.
//! `cargo run --release -p archers -- --help` lists the flags; `--json` prints one JSON object
//! as the last line.
#![allow(clippy::print_stdout, clippy::print_stderr)] // a command-line program

use std::collections::BTreeSet;
use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use archers::game::{Archers, Observed, Observer, Setup};
use archers::net::{self, Match};
use archers::replay::{ReplayFile, MAGIC};
use archers::report::{self, ReportInput, UDP_IP_BYTES};
use phalanx::{Fingerprint, PlayerId};
use phalanx_proto::{Replay, REPLAY_FORMAT_VERSION};
use phalanx_sim::{run_with, SimConfig, SimReport, Step};

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
    inject_desync: Option<u32>,
    desync_player: u8,
    report: Option<PathBuf>,
    replay_out: Option<PathBuf>,
    json: bool,
    bind: SocketAddr,
    connect: Option<SocketAddr>,
    fingerprint: Option<Fingerprint>,
    token: Option<u64>,
    file: Option<PathBuf>,
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
            inject_desync: None,
            desync_player: 1,
            report: Some(PathBuf::from("target/archers-report.html")),
            replay_out: None,
            json: false,
            bind: SocketAddr::from(([127, 0, 0, 1], 4433)),
            connect: None,
            fingerprint: None,
            token: None,
            file: None,
        }
    }
}

const HELP: &str = "archers — the 1500-archer lockstep demo (phalanx)

USAGE:
  archers [FLAGS]                 the whole match in the network simulator (default)
  archers host [FLAGS]            host a match over real UDP/QUIC; prints each seat's
                                  client command line
  archers client --connect ADDR --fingerprint HEX --token N [FLAGS]
                                  play one seat of a hosted match
  archers replay FILE             re-simulate a recorded match, check every turn's hash

  (cargo run --release -p archers -- [ARGS])

MATCH (every mode; host and clients must agree):
  --players N         players (2-8)                             [8]
  --units N           archers in total                          [1500]
  --minutes M         match length (100 ms turns)               [2]
  --seed S            seed of the game (and of the simulation)  [1]

SIMULATED NETWORK (default mode):
  --loss P            loss per datagram, percent                [2]
  --rtt-ms R          round-trip time                           [100]
  --jitter-ms J       extra random delay per datagram           [20]
  --partition S       cut player 3 off for S seconds at 0:20    [2]

OUTPUT:
  --inject-desync T   flip one bit of one player's state after turn T (shows detection;
                      in client mode, of this client's state)
  --desync-player P   whose state --inject-desync flips          [1]
  --report PATH       write the HTML report here                [target/archers-report.html]
  --no-report         write no report
  --replay-out PATH   record the match into a replay file (for `archers replay`)
  --json              print a JSON summary as the last line of stdout

REAL SOCKETS:
  --bind ADDR         host: where to listen                     [127.0.0.1:4433]
  --connect ADDR      client: the host's address
  --fingerprint HEX   client: the host's certificate fingerprint (pinned)
  --token N           client: the seat token the host printed
";

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options::default();
    let mut iter = args.iter();
    while let Some(flag) = iter.next() {
        match flag.as_str() {
            "--json" => {
                options.json = true;
                continue;
            }
            "--no-report" => {
                options.report = None;
                continue;
            }
            "--help" | "-h" => return Err(String::new()),
            other if !other.starts_with("--") && options.file.is_none() => {
                options.file = Some(PathBuf::from(other));
                continue;
            }
            _ => {}
        }
        let value = iter.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let bad = || format!("{flag}: cannot read {value:?}");
        match flag.as_str() {
            "--players" => options.players = value.parse().map_err(|_| bad())?,
            "--units" => options.units = value.parse().map_err(|_| bad())?,
            "--minutes" => options.minutes = value.parse().map_err(|_| bad())?,
            "--seed" => options.seed = value.parse().map_err(|_| bad())?,
            "--loss" => options.loss_percent = value.parse().map_err(|_| bad())?,
            "--rtt-ms" => options.rtt_ms = value.parse().map_err(|_| bad())?,
            "--jitter-ms" => options.jitter_ms = value.parse().map_err(|_| bad())?,
            "--partition" => options.partition_s = value.parse().map_err(|_| bad())?,
            "--inject-desync" => options.inject_desync = Some(value.parse().map_err(|_| bad())?),
            "--desync-player" => options.desync_player = value.parse().map_err(|_| bad())?,
            "--report" => options.report = Some(PathBuf::from(value)),
            "--replay-out" => options.replay_out = Some(PathBuf::from(value)),
            "--bind" => options.bind = value.parse().map_err(|_| bad())?,
            "--connect" => options.connect = Some(value.parse().map_err(|_| bad())?),
            "--fingerprint" => options.fingerprint = Some(value.parse().map_err(|_| bad())?),
            "--token" => options.token = Some(value.parse().map_err(|_| bad())?),
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
    if usize::from(options.desync_player) >= options.players {
        return Err("--desync-player must be a player (0 to players - 1)".into());
    }
    Ok(options)
}

impl Options {
    fn turns(&self) -> u32 {
        ((self.minutes * 60_000.0) as u64 / 100).max(1) as u32
    }

    fn game(&self) -> Match {
        Match { players: self.players, units: self.units, seed: self.seed, turns: self.turns() }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode =
        args.first().map(String::as_str).filter(|m| ["host", "client", "replay"].contains(m));
    let rest = if mode.is_some() { &args[1..] } else { &args[..] };
    let options = match parse(rest) {
        Ok(options) => options,
        Err(message) => {
            if !message.is_empty() {
                eprintln!("error: {message}\n");
            }
            eprint!("{HELP}");
            return if message.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(2) };
        }
    };
    if options.file.is_some() && mode != Some("replay") {
        eprintln!("error: unexpected argument {:?} (see --help)", options.file);
        return ExitCode::from(2);
    }
    match mode {
        Some("host") => host(&options),
        Some("client") => client(&options),
        Some("replay") => replay(&options),
        _ => simulate(&options),
    }
}

/// A progress bar on stderr while the simulation runs, only if stderr is a terminal.
struct Progress {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    fn start(observer: Arc<Observer>, turns: u32) -> Progress {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::io::stderr().is_terminal().then(|| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let started = Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    let done = observer.progress.load(Ordering::Relaxed).min(turns);
                    let filled = (done as usize * 40) / turns.max(1) as usize;
                    eprint!(
                        "\r  [{}{}] {:3}%  turn {done}/{turns}  {:.0} s ",
                        "#".repeat(filled),
                        "-".repeat(40 - filled),
                        done as u64 * 100 / u64::from(turns.max(1)),
                        started.elapsed().as_secs_f64()
                    );
                    let _ = std::io::stderr().flush();
                    std::thread::sleep(Duration::from_millis(200));
                }
                eprint!("\r{}\r", " ".repeat(72));
            })
        });
        Progress { stop, thread }
    }

    fn finish(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The state hash most players had after each turn (the host's reference is the majority).
fn agreed_hashes(report: &SimReport) -> Vec<u64> {
    let longest = report.players.iter().map(|p| p.hashes.len()).max().unwrap_or(0);
    (0..longest)
        .map(|turn| {
            let mut counts = std::collections::BTreeMap::new();
            for hash in report.players.iter().filter_map(|p| p.hashes.get(turn)) {
                *counts.entry(*hash).or_insert(0u32) += 1;
            }
            counts
                .into_iter()
                .max_by_key(|&(hash, n)| (n, std::cmp::Reverse(hash)))
                .map_or(0, |x| x.0)
        })
        .collect()
}

fn replay_file(
    options: &Options,
    config: &SimConfig,
    observed: &Observed,
    hashes: &[u64],
) -> ReplayFile {
    let session = &config.session;
    let checks = (0..observed.turns.len().min(hashes.len()))
        .map(|k| (observed.first_turn + k as u32, hashes[k]))
        .collect();
    ReplayFile {
        magic: MAGIC,
        players: options.players as u8,
        units: options.units as u32,
        replay: Replay {
            format_version: REPLAY_FORMAT_VERSION,
            protocol_version: phalanx_proto::PROTOCOL_VERSION,
            game_data_hash: session.game_data_hash,
            seed: options.seed,
            players_max: options.players as u8,
            first_pace: (session.turn_length_ms, session.command_delay_turns),
            first_turn: observed.first_turn,
            turns: observed.turns.clone(),
            checks,
            truncated: false,
        },
    }
}

/// The match and its simulated network, in words (for stderr and the report's subtitle).
fn scenario(options: &Options, partition: bool) -> String {
    format!(
        "{} players, {} archers, {:.1} min, seed {}; simulated network: RTT {} ms, {:.1} % loss, \
         jitter {} ms{}",
        options.players,
        options.units,
        options.minutes,
        options.seed,
        options.rtt_ms,
        options.loss_percent,
        options.jitter_ms,
        if partition {
            format!(", player 3 cut off for {} s at 0:20", options.partition_s)
        } else {
            String::new()
        },
    )
}

fn simulate(options: &Options) -> ExitCode {
    let mut config = SimConfig::new(options.seed, options.players);
    net::tune(&mut config.session);
    config.latency_ms = options.rtt_ms / 2;
    config.faults.loss_permille = (options.loss_percent * 10.0).round() as u32;
    config.faults.jitter_ms = options.jitter_ms;
    config.samples_every_ms = 1_000;
    let turn_ms = u64::from(config.session.turn_length_ms);
    config.turns = ((options.minutes * 60_000.0) as u64 / turn_ms).max(1) as u32;
    config.limit_ms = (options.minutes * 60_000.0) as u64 * 3 + 60_000;
    let mut markers = Vec::new();
    if options.partition_s > 0 && options.players > 3 {
        let (from, to) = (20_000, 20_000 + options.partition_s * 1_000);
        config.timeline = vec![
            Step::Partition { at_ms: from, player: PlayerId(3) },
            Step::Repair { at_ms: to, player: PlayerId(3) },
        ];
        markers.push((from, "player 3 cut off".to_owned()));
        markers.push((to, "reconnected".to_owned()));
    }
    let partition = !config.timeline.is_empty();
    eprintln!(
        "archers: {}{}",
        scenario(options, partition),
        options.inject_desync.map_or(String::new(), |t| format!(
            ", one bit of player {}'s state flipped after turn {t}",
            options.desync_player
        )),
    );
    eprintln!("simulating over real QUIC under phalanx-sim…");
    let observer = Arc::new(Observer::new((config.turns / 24).max(1), config.turns - 1));
    let mut setup = Setup::new(options.players, options.units, config.turns);
    setup.desync = options.inject_desync.map(|turn| (options.desync_player, turn));
    setup.observer = Some(observer.clone());
    let started = Instant::now();
    let progress = Progress::start(observer.clone(), config.turns);
    let result = run_with::<Archers>(config.clone(), setup);
    progress.finish();
    let report = match result {
        Ok(report) => report,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    let wall = started.elapsed().as_secs_f64();
    let agree = report.check_agreement();
    let finals: Vec<u64> = report.players.iter().filter_map(|p| p.hashes.last().copied()).collect();
    let hashes_agree = agree.is_ok() && finals.windows(2).all(|w| w[0] == w[1]);
    let turns = report.players.iter().map(|p| p.hashes.len()).max().unwrap_or(0);
    let submitted: u64 = report.players.iter().map(|p| p.submitted).sum();
    let executed = report.players.iter().map(|p| p.executed).min().unwrap_or(0);
    let sim_s = report.sim_ms as f64 / 1e3;
    let seconds = (turns as u64 * turn_ms) as f64 / 1e3;
    let per_player = |pick: fn(&(u64, u64)) -> u64, datagrams: fn(&(u64, u64)) -> u64| {
        let total: u64 = report.players.iter().map(|p| pick(&p.wire_bytes)).sum::<u64>()
            + UDP_IP_BYTES
                * report.players.iter().map(|p| datagrams(&p.wire_datagrams)).sum::<u64>();
        total as f64 * 8.0 / 1e3 / seconds.max(1e-9) / options.players as f64
    };
    let up_kbps = per_player(|b| b.0, |d| d.0);
    let down_kbps = per_player(|b| b.1, |d| d.1);
    let app_up = report.players.iter().map(|p| p.app_bytes.0).sum::<u64>() as f64
        / (turns.max(1) * options.players) as f64;
    let app_down = report.players.iter().map(|p| p.app_bytes.1).sum::<u64>() as f64
        / (turns.max(1) * options.players) as f64;
    let latencies: Vec<(u32, u32, u32)> =
        report.players.iter().filter_map(|p| p.latency_ms).collect();
    let p50 = latencies.iter().map(|l| l.0).max().unwrap_or(0);
    let p95 = latencies.iter().map(|l| l.1).max().unwrap_or(0);
    let max = latencies.iter().map(|l| l.2).max().unwrap_or(0);
    let stall = report.players.iter().map(|p| p.stall_ms).max().unwrap_or(0);
    let final_hash = agreed_hashes(&report).last().copied().unwrap_or(0);
    // Every player meets each report once; list each (turn, diverged players) once.
    let desyncs: BTreeSet<(u32, Vec<u8>)> = report
        .desyncs
        .iter()
        .map(|(_, turn, players)| (*turn, players.iter().map(|p| p.0).collect()))
        .collect();
    let observed = observer.observed();

    let mut summary: Vec<(String, String)> = vec![
        ("players".into(), options.players.to_string()),
        ("archers".into(), options.units.to_string()),
        ("turns executed".into(), format!("{turns} ({seconds:.0} s of play)")),
        ("every player agrees".into(), if hashes_agree { "yes" } else { "NO" }.into()),
        ("final state hash".into(), format!("{final_hash:#018x} (majority)")),
    ];
    let first_desync = desyncs.iter().next();
    summary.push((
        "desync reports".into(),
        match first_desync {
            None => "0".into(),
            Some((turn, players)) => {
                format!("{} (first at turn {turn}, naming players {players:?})", desyncs.len())
            }
        },
    ));
    summary.extend([
        ("commands".into(), format!("{submitted} submitted, {executed} executed")),
        (
            "command latency".into(),
            format!("p50 {p50} ms, p95 {p95} ms, max {max} ms (worst player)"),
        ),
        ("longest stall total".into(), format!("{stall} ms (worst player)")),
        (
            "wire per player".into(),
            format!("{up_kbps:.2} kbit/s up, {down_kbps:.2} kbit/s down (QUIC + UDP/IP)"),
        ),
        (
            "28.8 kbit/s modem share".into(),
            format!("{:.0} %", (up_kbps + down_kbps) / 28.8 * 100.0),
        ),
        (
            "app bytes per turn".into(),
            format!("{app_up:.1} up, {app_down:.1} down (phalanx, before QUIC)"),
        ),
        ("simulated / wall time".into(), format!("{sim_s:.1} s / {wall:.1} s")),
        (
            "trace digest".into(),
            format!("{:#018x} (rerun with --seed {})", report.trace_digest, options.seed),
        ),
    ]);

    if let Some(path) = &options.replay_out {
        let file = replay_file(options, &config, &observed, &agreed_hashes(&report));
        match std::fs::write(path, file.to_bytes()) {
            Ok(()) => summary.push((
                "replay".into(),
                format!(
                    "{} ({} turns; check with: archers replay FILE)",
                    path.display(),
                    file.replay.turns.len()
                ),
            )),
            Err(error) => {
                eprintln!("error: cannot write the replay to {}: {error}", path.display());
                return ExitCode::FAILURE;
            }
        }
    }
    if let Some(path) = &options.report {
        if let Some((turn, _)) = first_desync {
            // Place the report at the time the reporting turn executed.
            let at = report
                .players
                .iter()
                .flat_map(|p| &p.samples)
                .find(|s| s.turn >= *turn)
                .map(|s| s.at_ms);
            if let Some(at) = at {
                markers.push((at, format!("desync at turn {turn}")));
            }
        }
        let input = ReportInput {
            subtitle: scenario(options, partition),
            summary: summary.clone(),
            players: &report.players,
            snapshots: &observed.snapshots,
            markers,
        };
        let html = report::html(&input);
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            let _ = std::fs::create_dir_all(dir);
        }
        match std::fs::write(path, &html) {
            Ok(()) => summary.push((
                "report".into(),
                format!("{} ({} kB)", path.display(), html.len().div_ceil(1024)),
            )),
            Err(error) => {
                eprintln!("error: cannot write the report to {}: {error}", path.display());
                return ExitCode::FAILURE;
            }
        }
    }

    println!();
    for (label, value) in &summary {
        println!("  {label:<24}{value}");
    }
    if options.json {
        let desyncs: Vec<String> = desyncs
            .iter()
            .map(|(turn, players)| format!("{{\"turn\":{turn},\"players\":{players:?}}}"))
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
    let ok = match options.inject_desync {
        None => hashes_agree,
        // Success is the injected divergence being caught, at the first check turn at or
        // after it, naming exactly the flipped player.
        Some(turn) => {
            let interval = config.session.sync_interval_turns.max(1);
            let expected = turn.div_ceil(interval) * interval;
            first_desync == Some(&(expected, vec![options.desync_player]))
        }
    };
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

fn host(options: &Options) -> ExitCode {
    let game = options.game();
    let tokens = net::seat_tokens(options.players);
    runtime().block_on(async {
        let session = match net::HostSession::bind(options.bind, game, tokens.clone()).await {
            Ok(session) => session,
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::FAILURE;
            }
        };
        let addr = session.local_addr().unwrap_or(options.bind);
        let fingerprint = session.fingerprint();
        // Machine-readable lines on stdout (the loopback test reads them), help on stderr.
        println!("LISTENING {addr} {fingerprint}");
        for (seat, token) in tokens.iter().enumerate() {
            println!("SEAT {seat} {token}");
        }
        eprintln!(
            "archers host: {} players, {} archers, {:.1} min, seed {}; listening on {addr}",
            options.players, options.units, options.minutes, options.seed
        );
        eprintln!("start each player with (one command per seat):");
        for token in &tokens {
            eprintln!(
                "  cargo run --release -p archers -- client --connect {addr} --fingerprint {fingerprint} \
                 --token {token} --players {} --units {} --minutes {} --seed {}",
                options.players, options.units, options.minutes, options.seed
            );
        }
        let limit = Duration::from_secs_f64(options.minutes * 60.0 * 3.0 + 120.0);
        let outcome = session
            .serve(Duration::from_secs(300), limit, |event| eprintln!("host: {event:?}"))
            .await;
        match outcome {
            Ok(outcome) => {
                println!(
                    "HOST joined={} turns_sealed={} commands_sealed={} desyncs={}",
                    outcome.joined,
                    outcome.turns_sealed,
                    outcome.commands_sealed,
                    outcome.desyncs.len()
                );
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("error: {error}");
                ExitCode::FAILURE
            }
        }
    })
}

fn client(options: &Options) -> ExitCode {
    let (Some(addr), Some(fingerprint), Some(token)) =
        (options.connect, options.fingerprint, options.token)
    else {
        eprintln!("error: client needs --connect, --fingerprint and --token (see --help)");
        return ExitCode::from(2);
    };
    let game = options.game();
    let started = Instant::now();
    let result =
        runtime().block_on(net::play(addr, fingerprint, token, game, options.inject_desync));
    let outcome = match result {
        Ok(outcome) => outcome,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    let (p50, p95, max) = outcome.latency_ms.unwrap_or_default();
    println!();
    println!("  player                  {}", outcome.player);
    println!("  turns executed          {} of {}", outcome.turns, game.turns);
    println!("  final state hash        {:#018x}", outcome.final_state_hash);
    println!("  desync reports          {}", outcome.desyncs.len());
    println!(
        "  commands                {} submitted, {} executed (everyone's)",
        outcome.submitted, outcome.executed
    );
    println!("  command latency         p50 {p50} ms, p95 {p95} ms, max {max} ms");
    println!("  stall total             {} ms", outcome.stall_ms);
    println!("  wall time               {:.1} s", started.elapsed().as_secs_f64());
    if let Some(ended) = &outcome.ended {
        println!("  ended early             {ended}");
    }
    if options.json {
        let desyncs: Vec<String> = outcome
            .desyncs
            .iter()
            .map(|(turn, players)| format!("{{\"turn\":{turn},\"players\":{players:?}}}"))
            .collect();
        println!(
            "{{\"player\":{},\"turns\":{},\"final_state_hash\":\"{:#018x}\",\"desyncs\":[{}],\
             \"commands_submitted\":{},\"commands_executed\":{},\"latency_ms_p50\":{p50},\
             \"latency_ms_p95\":{p95},\"latency_ms_max\":{max},\"stall_ms\":{}}}",
            outcome.player,
            outcome.turns,
            outcome.final_state_hash,
            desyncs.join(","),
            outcome.submitted,
            outcome.executed,
            outcome.stall_ms,
        );
    }
    if outcome.turns == game.turns
        && (outcome.desyncs.is_empty() || options.inject_desync.is_some())
    {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn replay(options: &Options) -> ExitCode {
    let Some(path) = &options.file else {
        eprintln!("error: replay needs a FILE (see --help)");
        return ExitCode::from(2);
    };
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) => {
            eprintln!("error: cannot read {}: {error}", path.display());
            return ExitCode::FAILURE;
        }
    };
    let started = Instant::now();
    let result = ReplayFile::from_bytes(&bytes).and_then(|file| Ok((file.verify()?, file)));
    match result {
        Ok((verified, file)) => {
            let last = file.replay.checks.last().map_or(0, |c| c.1);
            println!(
                "{}: {} players, {} archers, seed {}: re-simulated {} turns, {} of {} state hashes \
                 match (final {last:#018x}) in {:.1} s",
                path.display(),
                file.players,
                file.units,
                file.replay.seed,
                verified.turns,
                verified.checks_matched,
                file.replay.checks.len(),
                started.elapsed().as_secs_f64()
            );
            if options.json {
                println!(
                    "{{\"verified\":true,\"turns\":{},\"hashes_matched\":{},\"final_state_hash\":\"{last:#018x}\"}}",
                    verified.turns, verified.checks_matched
                );
            }
            if verified.checks_matched as usize == file.replay.checks.len() {
                ExitCode::SUCCESS
            } else {
                eprintln!("error: some recorded hashes were never reached");
                ExitCode::FAILURE
            }
        }
        Err(error) => {
            eprintln!("error: {}: {error}", path.display());
            ExitCode::FAILURE
        }
    }
}
