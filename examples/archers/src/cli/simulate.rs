//! `archers simulate` (the default): the whole match over a real transport under phalanx-sim's
//! simulated network, in named steps — configure the simulation, run it with a progress bar,
//! measure the report into a [`Summary`], write the replay and the HTML report, print the
//! summary (and its JSON line), and judge the run.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use archers::game::{Archers, Observed, Observer, Setup};
use archers::net;
use archers::replay::{ReplayFile, MAGIC};
use archers::report::{self, ReportInput, UDP_IP_BYTES};
use phalanx::replay::MatchSigner;
use phalanx::replay::{Replay, REPLAY_FORMAT_VERSION};
use phalanx::PlayerId;
use phalanx_sim::{run_with, SimConfig, SimReport, Step};
use serde::Serialize;

use super::catch_up::{self, Rejoin, Spectator};
use super::desync;
use super::json::{self, Desync};
use super::progress::Progress;
use super::removals::{self, Removed};
use super::SimulateArgs;

/// One row of the printed summary (and of the report's summary table): label, value.
type Line = (String, String);

/// What the run measured; also the `--json` line, field for field.
#[derive(Debug, Serialize)]
struct Summary {
    players: usize,
    units: usize,
    turns: usize,
    seed: u64,
    hashes_agree: bool,
    /// Players removed before the end (cut off past the idle timeout, misbehaving...).
    removed: Vec<Removed>,
    /// Players that were neither removed nor played every turn (empty when all went well).
    unfinished: Vec<u8>,
    /// Players whose process crashed and came back (`--rejoin-at`).
    rejoins: Vec<Rejoin>,
    /// Spectators (`--spectators`).
    spectators: Vec<Spectator>,
    #[serde(flatten)]
    play: json::Play,
    #[serde(flatten)]
    fair: super::fair::Fair,
    /// `--speculate`: when own orders showed, what the re-simulation cost (null without).
    speculation: Option<super::speculated::Speculated>,
    #[serde(serialize_with = "json::decimals::<3, _>")]
    wire_kbps_up_per_player: f64,
    #[serde(serialize_with = "json::decimals::<3, _>")]
    wire_kbps_down_per_player: f64,
    #[serde(serialize_with = "json::decimals::<1, _>")]
    app_bytes_per_turn_up: f64,
    #[serde(serialize_with = "json::decimals::<1, _>")]
    app_bytes_per_turn_down: f64,
    #[serde(serialize_with = "json::decimals::<1, _>")]
    sim_seconds: f64,
    #[serde(serialize_with = "json::decimals::<2, _>")]
    wall_seconds: f64,
    #[serde(serialize_with = "json::hex")]
    trace_digest: u64,
    /// Mesh runs: the pairs of players whose link went through the rendezvous (`--nats`).
    relayed_pairs: Vec<(u8, u8)>,
    /// Seconds of play the executed turns stand for (text only).
    #[serde(skip)]
    seconds_played: f64,
    /// The session's idle timeout (text only).
    #[serde(skip)]
    idle_timeout_ms: u32,
}

/// Runs the simulated match; success when every player agreed over the turns it executed
/// and every player not removed played every turn (or, with `--inject-desync`, when the
/// desync was caught as promised).
pub(crate) fn run(args: &SimulateArgs) -> ExitCode {
    let (config, mut markers) = configure(args);
    let partition = !config.timeline.is_empty();
    eprintln!(
        "archers: {}{}",
        scenario(args, partition),
        args.inject_desync.map_or(String::new(), |t| format!(
            ", one bit of player {}'s state flipped after turn {t}",
            args.desync_player
        )),
    );
    let transport = match (&config.topology, config.transport) {
        (phalanx_sim::Topology::Mesh(_), _) => "a peer-to-peer mesh over raw UDP (Noise)",
        (_, phalanx::Transport::Udp) => "raw UDP (Noise)",
        _ => "real QUIC",
    };
    if matches!(config.topology, phalanx_sim::Topology::Mesh(_))
        && (args.spectators > 0 || args.rejoin_at.is_some())
    {
        eprintln!("error: a mesh has no spectators or rejoins yet");
        return ExitCode::FAILURE;
    }
    if args.network.nats && !matches!(config.topology, phalanx_sim::Topology::Mesh(_)) {
        eprintln!("error: --nats needs --topology mesh or mesh-modem");
        return ExitCode::FAILURE;
    }
    if args.late_seals > 0 && !args.speculate {
        eprintln!("error: --late-seals needs --speculate");
        return ExitCode::FAILURE;
    }
    if args.speculate && matches!(config.topology, phalanx_sim::Topology::Mesh(_)) {
        eprintln!("error: --speculate needs the host topology (a mesh does not speculate yet)");
        return ExitCode::FAILURE;
    }
    eprintln!("simulating over {transport} under phalanx-sim…");
    let observer = Arc::new(Observer::new((config.turns / 24).max(1), config.turns - 1));
    let started = Instant::now();
    let report = match play(args, &config, &observer) {
        Ok(report) => report,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    let summary = measure(args, &config, &report, started.elapsed().as_secs_f64());
    for gone in &summary.removed {
        if let Some(at) = gone.removed_at_ms {
            let cause = gone.cause.replace('_', " ");
            markers.push((at, format!("player {} removed ({cause})", gone.player)));
        }
    }
    markers.sort_by_key(|&(at, _)| at);
    let finished =
        Finished { args, config: &config, report: &report, observed: observer.observed() };
    let mut lines = summary.lines(args.game.seed);
    if matches!(config.topology, phalanx_sim::Topology::Mesh(_)) {
        lines.extend(mesh_lines(&report));
    }
    if let Some(bundle) = desync::first_bundle(&report) {
        match desync::write(&args.desync_bundle, bundle) {
            Ok(bytes) => lines.push((
                "desync bundle".into(),
                format!(
                    "{} ({} kB; show it with: archers diff {})",
                    args.desync_bundle.display(),
                    bytes.div_ceil(1024),
                    args.desync_bundle.display()
                ),
            )),
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::FAILURE;
            }
        }
    }
    if finished.write_replay(&mut lines).is_err()
        || finished.write_report(&summary, markers, partition, &mut lines).is_err()
    {
        return ExitCode::FAILURE;
    }
    println!();
    for (label, value) in &lines {
        println!("  {label:<24}{value}");
    }
    if args.json {
        json::print_line(&summary);
    }
    if succeeded(args, &config, &summary) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// A finished simulation, for the files it writes.
struct Finished<'a> {
    args: &'a SimulateArgs,
    config: &'a SimConfig,
    report: &'a SimReport,
    observed: Observed,
}

impl Finished<'_> {
    /// With `--replay-out`: writes the replay and adds a line saying where it went.
    fn write_replay(&self, lines: &mut Vec<Line>) -> Result<(), ()> {
        let Some(path) = &self.args.replay_out else { return Ok(()) };
        let file = replay_file(self.args, self.config, &self.observed, &agreed_hashes(self.report));
        write(path, &file.to_bytes(), "replay")?;
        lines.push((
            "replay".into(),
            format!(
                "{} ({} turns; check with: archers replay FILE)",
                path.display(),
                file.replay.turns.len()
            ),
        ));
        // The host's word on the match, signed with a key of this run's, beside the replay.
        let signed_path = super::verify::signed_path(path);
        let signer = MatchSigner::generate().map_err(|error| eprintln!("error: {error}"))?;
        let record = super::verify::record(&file, self.args.game.seed);
        write(&signed_path, &signer.sign(record).to_bytes(), "signed record")?;
        lines.push((
            "signed record".into(),
            format!(
                "{} (check with: archers verify {} --replay {} --key {})",
                signed_path.display(),
                signed_path.display(),
                path.display(),
                signer.public_key()
            ),
        ));
        Ok(())
    }

    /// Unless `--no-report`: writes the HTML report (its summary table is `lines`) and adds a
    /// line saying where it went.
    fn write_report(
        &self,
        summary: &Summary,
        mut markers: Vec<(u64, String)>,
        partition: bool,
        lines: &mut Vec<Line>,
    ) -> Result<(), ()> {
        let Some(path) = self.args.report_path() else { return Ok(()) };
        let report = self.report;
        if let Some(first) = summary.play.desyncs.first() {
            // Place the report at the time the reporting turn executed.
            let at = report
                .players
                .iter()
                .flat_map(|p| &p.samples)
                .find(|s| s.turn >= first.turn)
                .map(|s| s.at_ms);
            if let Some(at) = at {
                markers.push((at, format!("desync at turn {}", first.turn)));
            }
        }
        let input = ReportInput {
            subtitle: scenario(self.args, partition),
            summary: lines.clone(),
            players: &report.players,
            snapshots: &self.observed.snapshots,
            markers,
        };
        let html = report::html(&input);
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            let _ = std::fs::create_dir_all(dir);
        }
        write(path, html.as_bytes(), "report")?;
        lines.push((
            "report".into(),
            format!("{} ({} kB)", path.display(), html.len().div_ceil(1024)),
        ));
        Ok(())
    }
}

/// The simulation's config for these flags, and the report's markers for the partition.
fn configure(args: &SimulateArgs) -> (SimConfig, Vec<(u64, String)>) {
    let (game, network) = (&args.game, &args.network);
    let mut config = SimConfig::new(game.seed, game.players);
    net::tune(&mut config.session);
    config.latency_ms = network.rtt_ms / 2;
    config.faults.loss_permille = (network.loss_percent * 10.0).round() as u32;
    config.faults.jitter_ms = network.jitter_ms;
    if network.transport == super::TransportArg::Udp {
        config.transport = phalanx::Transport::Udp;
    }
    let peer = match network.topology {
        super::TopologyArg::Relay => None,
        super::TopologyArg::Mesh => Some(phalanx::proto::mesh::PeerConfig::default()),
        super::TopologyArg::MeshModem => Some(phalanx::proto::mesh::PeerConfig::modem()),
    };
    if let Some(peer) = peer {
        // The mesh plays the same turns; its lead and repeats are its profile's.
        config.topology = phalanx_sim::Topology::Mesh(peer);
        config.transport = phalanx::Transport::Udp;
        if network.nats {
            let kinds = phalanx_sim::NatKind::ALL.iter().cycle();
            config.nats = kinds.take(game.players).map(|&kind| Some(kind)).collect();
        }
    }
    config.samples_every_ms = 1_000;
    // As a shipping game would: every player keeps its state after each turn, so that a
    // desync's forensics gets both states at the first divergent turn.
    config.keep_states = true;
    config.speculate = args.speculate;
    config.late_seals = args.late_seals;
    config.turns = game.turns(config.session.turns.length_ms);
    config.limit_ms = (game.minutes * 60_000.0) as u64 * 3 + 60_000;
    let mut markers = Vec::new();
    if let Some(at_s) = args.rejoin_at {
        // A snapshot about every 10 s (on a check turn): the returning process restores the
        // latest one.
        let session = &mut config.session;
        let sync = session.sync.interval_turns.max(1);
        session.catch_up.snapshot_interval_turns =
            (10_000 / session.turns.length_ms).div_ceil(sync) * sync;
        config.timeline.push(Step::CrashClient {
            at_ms: at_s * 1_000,
            player: PlayerId(1),
            restart_after_ms: Some(5_000),
        });
        markers.push((at_s * 1_000, "player 1's process crashed".to_owned()));
        markers.push((at_s * 1_000 + 5_000, "player 1's new process rejoins".to_owned()));
    }
    config.spectators = vec![0; args.spectators];
    config.spectator_link = (network.rtt_ms / 2, 0);
    if network.partition_s > 0 && game.players > 3 {
        let (from, to) = (20_000, 20_000 + network.partition_s * 1_000);
        config.timeline.extend([
            Step::Partition { at_ms: from, player: PlayerId(3) },
            Step::Repair { at_ms: to, player: PlayerId(3) },
        ]);
        markers.push((from, "player 3 cut off".to_owned()));
        markers.push((to, "player 3's link restored".to_owned()));
    }
    (config, markers)
}

/// Runs the simulation, with a progress bar on a terminal.
fn play(
    args: &SimulateArgs,
    config: &SimConfig,
    observer: &Arc<Observer>,
) -> Result<SimReport, phalanx_sim::SimError> {
    let mut setup = Setup::new(args.game.players, args.game.units, config.turns);
    setup.desync = args.inject_desync.map(|turn| (args.desync_player, turn));
    setup.observer = Some(observer.clone());
    let progress = Progress::start(observer.clone(), config.turns);
    let result = run_with::<Archers>(config.clone(), setup);
    progress.finish();
    result
}

/// The summary of a finished run that took `wall` seconds of real time. Agreement is judged
/// over the turns each player executed: a removed player agrees if its hashes equal the
/// others' up to its removal. Latency and stall figures are those of the players whose stats
/// were read (a removed player's: up to its last reading before the removal).
fn measure(args: &SimulateArgs, config: &SimConfig, report: &SimReport, wall: f64) -> Summary {
    let players = args.game.players;
    let turn_ms = u64::from(config.session.turns.length_ms);
    let hashes_agree = report.check_agreement().is_ok() && report.check_spectators_agree().is_ok();
    let removed = removals::removed(report);
    let gone = |p: &phalanx_sim::PlayerReport| {
        removed.iter().any(|r| p.player.map(|id| id.0) == Some(r.player))
    };
    let unfinished = report
        .players
        .iter()
        .filter(|p| !gone(p) && p.turns_played() < config.turns as usize)
        .filter_map(|p| p.player.map(|id| id.0))
        .collect();
    // Of the players who played the whole match in one process (a restarted one executed
    // only what came after its snapshot).
    let whole = |p: &&phalanx_sim::PlayerReport| !gone(p) && p.incarnations == 1;
    let commands_executed =
        report.players.iter().filter(whole).map(|p| p.executed).min().unwrap_or(0);
    let measured = || report.players.iter().filter(|p| p.stats_at_ms.is_some());
    let turns = report.players.iter().map(|p| p.turns_played()).max().unwrap_or(0);
    let seconds = (turns as u64 * turn_ms) as f64 / 1e3;
    let per_player = |pick: fn(&(u64, u64)) -> u64, datagrams: fn(&(u64, u64)) -> u64| {
        let total: u64 = report.players.iter().map(|p| pick(&p.wire_bytes)).sum::<u64>()
            + UDP_IP_BYTES
                * report.players.iter().map(|p| datagrams(&p.wire_datagrams)).sum::<u64>();
        total as f64 * 8.0 / 1e3 / seconds.max(1e-9) / players as f64
    };
    let app_per_turn = |pick: fn(&(u64, u64)) -> u64| {
        report.players.iter().map(|p| pick(&p.app_bytes)).sum::<u64>() as f64
            / (turns.max(1) * players) as f64
    };
    let latencies: Vec<(u32, u32, u32)> = measured().filter_map(|p| p.latency_ms).collect();
    // Every player meets each report once; list each (turn, diverged players) once.
    let desyncs: BTreeSet<Desync> = report
        .desyncs
        .iter()
        .map(|(_, turn, players)| Desync {
            turn: *turn,
            players: players.iter().map(|p| p.0).collect(),
            first_turn: None,
            diff: None,
        })
        .collect();
    let mut desyncs: Vec<Desync> = desyncs.into_iter().collect();
    desync::annotate(&mut desyncs, report);
    Summary {
        players,
        units: args.game.units,
        turns,
        seed: args.game.seed,
        hashes_agree,
        removed,
        unfinished,
        rejoins: catch_up::rejoins(report),
        spectators: catch_up::spectators(report, turn_ms),
        play: json::Play {
            final_state_hash: agreed_hashes(report).last().copied().unwrap_or(0),
            desyncs,
            commands_submitted: report.players.iter().map(|p| p.submitted).sum(),
            commands_executed,
            latency_ms_p50: latencies.iter().map(|l| l.0).max(),
            latency_ms_p95: latencies.iter().map(|l| l.1).max(),
            latency_ms_max: latencies.iter().map(|l| l.2).max(),
            stall_ms: measured().map(|p| p.stall_ms).max(),
        },
        fair: super::fair::measure(config, report),
        speculation: super::speculated::Speculated::measure(report, seconds / 60.0),
        wire_kbps_up_per_player: per_player(|b| b.0, |d| d.0),
        wire_kbps_down_per_player: per_player(|b| b.1, |d| d.1),
        app_bytes_per_turn_up: app_per_turn(|b| b.0),
        app_bytes_per_turn_down: app_per_turn(|b| b.1),
        sim_seconds: report.sim_ms as f64 / 1e3,
        wall_seconds: wall,
        trace_digest: report.trace_digest,
        relayed_pairs: relayed_pairs(report),
        seconds_played: seconds,
        idle_timeout_ms: config.session.link.idle_timeout_ms,
    }
}

impl Summary {
    /// The printed summary, one labelled line each.
    fn lines(&self, seed: u64) -> Vec<Line> {
        let (up, down) = (self.wire_kbps_up_per_player, self.wire_kbps_down_per_player);
        let line = |label: &str, value: String| (label.to_owned(), value);
        let mut lines = self.outcome_lines();
        lines.extend([
            line("final state hash", format!("{:#018x} (majority)", self.play.final_state_hash)),
            line("desync reports", self.desync_words()),
            line("commands", self.command_words()),
            line("command latency", format!("{} (worst player)", self.play.latency_words())),
            line("latency by player", self.fair.words()),
            line("longest stall total", format!("{} (worst player)", self.play.stall_words())),
            line(
                "wire per player",
                format!("{up:.2} kbit/s up, {down:.2} kbit/s down (transport + UDP/IP)"),
            ),
            line("28.8 kbit/s modem share", format!("{:.0} %", (up + down) / 28.8 * 100.0)),
            line(
                "app bytes per turn",
                format!(
                    "{:.1} up, {:.1} down (phalanx, before the transport)",
                    self.app_bytes_per_turn_up, self.app_bytes_per_turn_down
                ),
            ),
            line(
                "simulated / wall time",
                format!("{:.1} s / {:.1} s", self.sim_seconds, self.wall_seconds),
            ),
            line("trace digest", format!("{:#018x} (rerun with --seed {seed})", self.trace_digest)),
        ]);
        if let Some(speculation) = &self.speculation {
            // After the confirmed latency ("latency by player").
            let at = lines.iter().position(|(label, _)| label == "latency by player");
            let at = at.map_or(lines.len(), |at| at + 1);
            lines.splice(at..at, speculation.words());
        }
        lines
    }

    /// The match, whether everyone agreed, and who was removed or did not finish.
    fn outcome_lines(&self) -> Vec<Line> {
        let line = |label: &str, value: String| (label.to_owned(), value);
        let agree = match (self.hashes_agree, self.removed.is_empty()) {
            (false, _) => "NO".to_owned(),
            (true, true) => "yes".to_owned(),
            (true, false) => "yes (each over the turns it executed)".to_owned(),
        };
        let mut lines = vec![
            line("players", self.players.to_string()),
            line("archers", self.units.to_string()),
            line(
                "turns executed",
                format!("{} ({:.0} s of play)", self.turns, self.seconds_played),
            ),
            line("every player agrees", agree),
        ];
        for gone in &self.removed {
            lines.extend(gone.lines(self.idle_timeout_ms));
        }
        lines.extend(self.rejoins.iter().map(Rejoin::line));
        lines.extend(self.spectators.iter().map(Spectator::line));
        if !self.unfinished.is_empty() {
            lines.push(line(
                "UNFINISHED",
                format!("players {:?} stopped early without being removed", self.unfinished),
            ));
        }
        lines
    }

    /// The desync reports in words.
    fn desync_words(&self) -> String {
        match self.play.desyncs.first() {
            None => "0".into(),
            Some(Desync { turn, players, first_turn, diff }) => {
                let pinned = first_turn
                    .map_or(String::new(), |first| format!("; first divergent turn {first}"));
                let parts = diff
                    .as_ref()
                    .map_or(String::new(), |diff| format!(", differing: {}", diff.join(", ")));
                format!(
                    "{} (first at turn {turn}, naming players {players:?}{pinned}{parts})",
                    self.play.desyncs.len()
                )
            }
        }
    }

    /// Commands submitted and executed in words, saying which were lost with removed players.
    fn command_words(&self) -> String {
        let (submitted, executed) = (self.play.commands_submitted, self.play.commands_executed);
        let lost: u64 = self.removed.iter().map(|r| r.commands_lost).sum();
        match (self.removed.is_empty(), lost) {
            (true, _) => format!("{submitted} submitted, {executed} executed"),
            (false, 0) => {
                format!("{submitted} submitted, {executed} executed by every player who stayed")
            }
            (false, lost) => format!(
                "{submitted} submitted, {executed} executed by every player who stayed ({lost} \
                 of removed players' never reached the host)"
            ),
        }
    }
}

/// Whether the run did what it promised: every player agreed over the turns it executed and
/// every player not removed played to the end; or, with `--inject-desync`, the injected
/// divergence was caught at the first check turn at or after it, naming exactly the flipped
/// player, pinned to exactly its turn, and the one part that differs is a unit's hit points
/// (what the injection flips).
fn succeeded(args: &SimulateArgs, config: &SimConfig, summary: &Summary) -> bool {
    match args.inject_desync {
        None => {
            summary.hashes_agree
                && summary.unfinished.is_empty()
                && summary.rejoins.iter().all(|r| r.hashes_agree && r.catch_up_ms.is_some())
                && summary.spectators.iter().all(|s| s.hashes_agree)
        }
        Some(turn) => {
            let interval = config.session.sync.interval_turns.max(1);
            let expected = turn.div_ceil(interval) * interval;
            summary.play.desyncs.first().is_some_and(|first| {
                (first.turn, &first.players, first.first_turn)
                    == (expected, &vec![args.desync_player], Some(turn))
                    && first.diff.as_ref().is_some_and(|diff| {
                        matches!(diff.as_slice(), [part] if part.starts_with("unit ") && part.ends_with(" hp"))
                    })
            })
        }
    }
}

/// Writes `bytes` to `path`, saying on stderr what failed.
fn write(path: &Path, bytes: &[u8], what: &str) -> Result<(), ()> {
    std::fs::write(path, bytes).map_err(|error| {
        eprintln!("error: cannot write the {what} to {}: {error}", path.display());
    })
}

/// The state hash most players had after each turn (the host's reference is the majority).
fn agreed_hashes(report: &SimReport) -> Vec<u64> {
    let longest = report.players.iter().map(|p| p.turns_played()).max().unwrap_or(0);
    (0..longest)
        .map(|turn| {
            let mut counts = std::collections::BTreeMap::new();
            for hash in report.players.iter().filter_map(|p| p.hash_at(turn)) {
                *counts.entry(hash).or_insert(0u32) += 1;
            }
            counts
                .into_iter()
                .max_by_key(|&(hash, n)| (n, std::cmp::Reverse(hash)))
                .map_or(0, |x| x.0)
        })
        .collect()
}

/// The replay of the observed match, checked against the agreed hashes.
fn replay_file(
    args: &SimulateArgs,
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
        players: args.game.players as u8,
        units: args.game.units as u32,
        replay: Replay {
            format_version: REPLAY_FORMAT_VERSION,
            protocol_version: phalanx::proto::PROTOCOL_VERSION,
            game_data_hash: session.game_data_hash,
            seed: args.game.seed,
            players_max: args.game.players as u8,
            first_pace: (session.turns.length_ms, session.turns.command_delay_turns),
            first_turn: observed.first_turn,
            turns: observed.turns.clone(),
            checks,
            truncated: false,
        },
    }
}

/// The match and its simulated network, in words (for stderr and the report's subtitle).
fn scenario(args: &SimulateArgs, partition: bool) -> String {
    let (game, network) = (&args.game, &args.network);
    format!(
        "{} players, {} archers, {:.1} min, seed {}; simulated network: RTT {} ms, {:.1} % loss, \
         jitter {} ms{}",
        game.players,
        game.units,
        game.minutes,
        game.seed,
        network.rtt_ms,
        network.loss_percent,
        network.jitter_ms,
        if partition {
            format!(", player 3 cut off for {} s at 0:20", network.partition_s)
        } else {
            String::new()
        },
    )
}

/// The pairs of players whose link went through the rendezvous, lower player first, as the
/// lower player saw it.
fn relayed_pairs(report: &SimReport) -> Vec<(u8, u8)> {
    let mut pairs: Vec<(u8, u8)> = report
        .players
        .iter()
        .filter_map(|p| p.player.map(|me| (me, &p.relayed)))
        .flat_map(|(me, others)| others.iter().filter(move |o| me < **o).map(move |o| (me.0, o.0)))
        .collect();
    pairs.sort_unstable();
    pairs
}

/// A mesh run's links: each player's round trip to every other, and which pairs went through
/// the rendezvous.
fn mesh_lines(report: &SimReport) -> Vec<Line> {
    let mut lines: Vec<Line> = report
        .host_events
        .iter()
        .filter(|(_, line)| line.contains(" rtt "))
        .map(|(_, line)| {
            let (machine, rest) = line.split_once(' ').unwrap_or((line, ""));
            (format!("links of {machine}"), rest.to_owned())
        })
        .collect();
    lines.sort();
    let mut relayed: Vec<String> =
        relayed_pairs(report).iter().map(|(a, b)| format!("{a}-{b}")).collect();
    if relayed.is_empty() {
        relayed.push("none (every pair is direct)".into());
    }
    lines.push(("relayed pairs".into(), relayed.join(", ")));
    lines
}
