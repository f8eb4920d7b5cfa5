//! `relay-load`: N matches of bot players against a relay process on loopback, and what the
//! relay spent on them.
//!
//! It starts the relay (the `phalanx-relay` binary beside this one, pinned to `--relay-cpu`
//! with `taskset` when that is given), creates the matches through the admin API, connects
//! 8 bots a match (one UDP socket each, the demo's command rate), lets them settle, then
//! measures over a window: the relay's CPU (from `/proc/<pid>/stat`), its resident memory, seal
//! lateness (the relay's histogram, the window's part), datagrams it dropped (its counters) and
//! datagrams the kernel dropped (`/proc/net/snmp`'s UDP buffer errors, machine-wide). A sweep
//! (`--matches 100,250,500,1000`) runs each count on a fresh relay and writes a CSV and an SVG
//! plot of CPU against match count.
//!
//! `cargo build --release -p phalanx-relay && taskset -c 1 target/release/relay-load
//! --relay-cpu 0 --matches 1000` (the relay on core 0, the bots on core 1).
#![allow(clippy::print_stdout, clippy::print_stderr)] // a command-line report

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use phalanx_relay::load::{admin_request, run_bot, BotConfig, BotReport};
use phalanx_relay::metrics::Lateness;
use phalanx_relay::Metrics;

#[derive(Parser, Debug)]
#[command(name = "relay-load", about = "Bot matches against a relay process; what the relay spent")]
struct Cli {
    /// Matches, or a comma-separated sweep of counts (each on a fresh relay).
    #[arg(long, default_value = "100", value_delimiter = ',')]
    matches: Vec<usize>,
    /// Players a match.
    #[arg(long, default_value_t = 8)]
    players: u8,
    /// The turn length, milliseconds.
    #[arg(long, default_value_t = 150)]
    turn_ms: u32,
    /// Play with the session's defaults instead of the quiet relay (the demo's profile).
    #[arg(long)]
    default_profile: bool,
    /// Seconds after every bot joined before measuring.
    #[arg(long, default_value_t = 10)]
    warmup_s: u64,
    /// Seconds measured.
    #[arg(long, default_value_t = 30)]
    measure_s: u64,
    /// Bots started a second.
    #[arg(long, default_value_t = 1_000)]
    ramp: u64,
    /// The relay binary (default: `phalanx-relay` beside this one).
    #[arg(long)]
    relay: Option<PathBuf>,
    /// Pin the relay to this CPU with `taskset`.
    #[arg(long)]
    relay_cpu: Option<usize>,
    /// The relay's UDP port.
    #[arg(long, default_value_t = 17_777)]
    port: u16,
    /// The relay's admin port.
    #[arg(long, default_value_t = 17_780)]
    admin_port: u16,
    /// Measure the baseline instead: `host-baseline` (from phalanx-benches, built beside this
    /// binary), a `phalanx::Host` a match, as a game hosts one today.
    #[arg(long)]
    baseline: bool,
    /// Draw the sweeps in these CSV files (as a sweep writes them) into one chart,
    /// `<out>/cpu.svg`, and run nothing.
    #[arg(long, value_name = "CSV")]
    plot: Vec<PathBuf>,
    /// Where the sweep's CSV and SVG go.
    #[arg(long, default_value = "target/relay-load")]
    out: PathBuf,
}

const TOKEN: &str = "relay-load";

/// One request to the relay's admin API.
fn http(admin: SocketAddr, method: &str, path: &str, body: &str) -> Result<(u16, String), String> {
    admin_request(admin, TOKEN, method, path, body).map_err(|e| format!("admin API: {e}"))
}

/// A match to load: where its players connect, its pin, its tokens.
struct Seats {
    address: SocketAddr,
    pin: phalanx_relay::load::HostPublicKey,
    tokens: Vec<u64>,
}

/// What is measured: a relay process (matches made through its admin API), or the
/// `host-baseline` process (a `phalanx::Host` per match).
struct Target {
    child: Child,
    admin: Option<SocketAddr>,
    seats: Vec<Seats>,
    /// The relay's match ids (to end them).
    ids: Vec<String>,
    /// Resident memory before any match.
    rss_before: u64,
}

/// `binary` beside this one, pinned to `cpu` with `taskset` when given.
fn command(binary: PathBuf, cpu: Option<usize>) -> Command {
    match cpu {
        Some(cpu) => {
            let mut command = Command::new("taskset");
            command.arg("-c").arg(cpu.to_string()).arg(binary);
            command
        }
        None => Command::new(binary),
    }
}

fn beside_me(name: &str) -> Result<PathBuf, String> {
    let path = std::env::current_exe().map_err(|e| e.to_string())?.with_file_name(name);
    if path.exists() {
        Ok(path)
    } else {
        Err(format!("{} is missing: build it first (see --help)", path.display()))
    }
}

fn start_relay(cli: &Cli, count: usize) -> Result<Target, String> {
    let binary = match &cli.relay {
        Some(path) => path.clone(),
        None => beside_me("phalanx-relay")?,
    };
    let mut command = command(binary, cli.relay_cpu);
    command
        .args(["--udp", &format!("127.0.0.1:{}", cli.port)])
        .args(["--admin", &format!("127.0.0.1:{}", cli.admin_port)])
        .args(["--admin-token", TOKEN, "--drain-timeout-ms", "0", "--log", "warn"])
        .stdout(Stdio::null());
    let child = command.spawn().map_err(|e| format!("cannot start the relay: {e}"))?;
    let admin = SocketAddr::from(([127, 0, 0, 1], cli.admin_port));
    let mut target =
        Target { child, admin: Some(admin), seats: Vec::new(), ids: Vec::new(), rss_before: 0 };
    wait_ready(admin)?;
    target.rss_before = resident_bytes(target.child.id());
    (target.seats, target.ids) = create_matches(cli, admin, count)?;
    Ok(target)
}

fn start_baseline(cli: &Cli, count: usize) -> Result<Target, String> {
    let mut command = command(beside_me("host-baseline")?, cli.relay_cpu);
    command
        .args(["--matches", &count.to_string(), "--players", &cli.players.to_string()])
        .args(["--turn-ms", &cli.turn_ms.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    let mut child = command.spawn().map_err(|e| format!("cannot start host-baseline: {e}"))?;
    let stdout = child.stdout.take().ok_or("host-baseline's stdout")?;
    let mut seats = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.map_err(|e| e.to_string())?;
        if line == "READY" {
            break;
        }
        let mut words = line.split_whitespace().skip(1);
        let address = words.next().and_then(|a| a.parse().ok()).ok_or("a match's address")?;
        let pin = words.next().and_then(|p| p.parse().ok()).ok_or("a match's key")?;
        let tokens = words.filter_map(|t| t.parse().ok()).collect();
        seats.push(Seats { address, pin, tokens });
    }
    Ok(Target { child, admin: None, seats, ids: Vec::new(), rss_before: baseline_rss(cli)? })
}

/// The baseline process's resident memory with no match.
fn baseline_rss(cli: &Cli) -> Result<u64, String> {
    let mut command = command(beside_me("host-baseline")?, cli.relay_cpu);
    command.args(["--matches", "0"]).stdin(Stdio::piped()).stdout(Stdio::piped());
    let mut child = command.spawn().map_err(|e| format!("cannot start host-baseline: {e}"))?;
    let stdout = child.stdout.take().ok_or("host-baseline's stdout")?;
    let ready = BufReader::new(stdout).lines().map_while(Result::ok).any(|line| line == "READY");
    let rss = resident_bytes(child.id());
    drop(child.stdin.take());
    let _ = child.wait();
    if ready {
        Ok(rss)
    } else {
        Err("host-baseline did not start".into())
    }
}

/// utime + stime of `pid`, seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> =
        stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("").split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn resident_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap_or("");
    line.split_whitespace().nth(1).and_then(|k| k.parse::<u64>().ok()).unwrap_or(0) * 1024
}

/// The kernel's UDP drop counters (every socket of the machine): receive and send buffer errors.
fn kernel_udp_errors() -> (u64, u64) {
    let snmp = std::fs::read_to_string("/proc/net/snmp").unwrap_or_default();
    let mut lines = snmp.lines().filter(|l| l.starts_with("Udp:"));
    let (Some(names), Some(values)) = (lines.next(), lines.next()) else { return (0, 0) };
    let pairs: Vec<(&str, u64)> = names
        .split_whitespace()
        .zip(values.split_whitespace().map(|v| v.parse().unwrap_or(0)))
        .collect();
    let get = |name: &str| pairs.iter().find(|(n, _)| *n == name).map_or(0, |(_, v)| *v);
    (get("RcvbufErrors"), get("SndbufErrors"))
}

fn metrics(admin: SocketAddr) -> Result<Metrics, String> {
    let (status, body) = http(admin, "GET", "/v1/metrics", "")?;
    if status != 200 {
        return Err(format!("metrics: {status} {body}"));
    }
    serde_json::from_str(&body).map_err(|e| e.to_string())
}

/// One measured point.
#[derive(Debug, Default)]
struct Point {
    matches: usize,
    joined: usize,
    cpu_share: f64,
    cpu_us_per_match_second: f64,
    rss_per_match: f64,
    lateness: Lateness,
    relay_drops: u64,
    kernel_drops: (u64, u64),
    datagrams_per_second: f64,
    /// This process's CPU over the window (the bots'), share of one core: near 1, the bots
    /// cannot keep up and the point measures them, not the relay.
    bots_cpu_share: f64,
    bots: BotReport,
}

fn wait_ready(admin: SocketAddr) -> Result<(), String> {
    for _ in 0..200 {
        if matches!(http(admin, "GET", "/healthz", ""), Ok((200, _))) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    Err("the relay did not come up".into())
}

fn create_matches(
    cli: &Cli,
    admin: SocketAddr,
    count: usize,
) -> Result<(Vec<Seats>, Vec<String>), String> {
    let profile = if cli.default_profile { "default" } else { "quiet_relay" };
    let body = format!(
        "{{\"players\": {}, \"turn_ms\": {}, \"profile\": \"{profile}\"}}",
        cli.players, cli.turn_ms
    );
    let (mut matches, mut ids) = (Vec::new(), Vec::new());
    for _ in 0..count {
        let (status, body) = http(admin, "POST", "/v1/matches", &body)?;
        if status != 201 {
            return Err(format!("create: {status} {body}"));
        }
        let ticket: serde_json::Value = serde_json::from_str(&body).map_err(|e| e.to_string())?;
        let address = ticket["address"].as_str().and_then(|a| a.parse().ok()).ok_or("address")?;
        let pin = ticket["pin"].as_str().unwrap_or_default().trim_start_matches("udp:");
        let pin = pin.parse().map_err(|_| "the ticket's pin")?;
        let tokens = ticket["seats"].as_array().map_or(Vec::new(), |seats| {
            seats.iter().filter_map(|seat| seat["token"].as_u64()).collect()
        });
        matches.push(Seats { address, pin, tokens });
        ids.push(ticket["id"].as_str().unwrap_or_default().to_owned());
    }
    Ok((matches, ids))
}

fn run_point(cli: &Cli, count: usize) -> Result<Point, String> {
    let target = if cli.baseline { start_baseline(cli, count) } else { start_relay(cli, count) };
    let mut target = target?;
    let result = measure(cli, &target, count);
    if target.admin.is_some() {
        // The matches were ended; the relay drains at once and exits.
        let _ = Command::new("kill").arg("-TERM").arg(target.child.id().to_string()).status();
    } else {
        drop(target.child.stdin.take());
    }
    let status = target.child.wait().map_err(|e| e.to_string())?;
    if result.is_ok() && !status.success() {
        return Err(format!("the process under load exited with {status}"));
    }
    result
}

fn session(cli: &Cli) -> phalanx_proto::SessionConfig {
    let mut session = phalanx_proto::SessionConfig::default();
    if !cli.default_profile {
        session = session.quiet_relay();
    }
    session.turns.length_ms = cli.turn_ms;
    session.turns.players_max = cli.players;
    session
}

type Bots = Vec<tokio::task::JoinHandle<BotReport>>;

/// One bot a seat, `cli.ramp` a second.
async fn spawn_bots(cli: &Cli, target: &Target, stop: &tokio::sync::watch::Receiver<bool>) -> Bots {
    let session = session(cli);
    let mut bots = Vec::new();
    let gap = Duration::from_secs_f64(1.0 / cli.ramp.max(1) as f64);
    for (m, seats) in target.seats.iter().enumerate() {
        for (seat, &token) in seats.tokens.iter().enumerate() {
            let config = BotConfig {
                address: seats.address,
                pin: seats.pin,
                token,
                session: session.clone(),
                seed: (m * 64 + seat) as u64,
                join_timeout: Duration::from_secs(60),
                hostile: false,
            };
            bots.push(tokio::spawn(run_bot(config, stop.clone())));
            tokio::time::sleep(gap).await;
        }
    }
    bots
}

/// Every bot's report, summed. Bots still playing `grace` after the end (the baseline's
/// matches do not end) are told to stop, and report what they did.
async fn collect_bots(
    bots: Bots,
    stop: tokio::sync::watch::Sender<bool>,
    grace: Duration,
) -> (usize, BotReport) {
    let mut total = BotReport::default();
    let mut joined = 0;
    let end_wait = tokio::time::sleep(grace);
    tokio::pin!(end_wait);
    for mut bot in bots {
        let report = tokio::select! {
            report = &mut bot => report,
            () = &mut end_wait => { let _ = stop.send(true); bot.await }
        };
        let report = report.unwrap_or_default();
        joined += usize::from(report.joined);
        total.turns += report.turns;
        total.commands += report.commands;
        total.datagrams_in += report.datagrams_in;
        total.datagrams_out += report.datagrams_out;
        total.finished |= report.finished;
    }
    let _ = stop.send(true);
    (joined, total)
}

/// The relay's metrics, or none for the baseline (it has no such counters).
fn target_metrics(target: &Target) -> Result<Metrics, String> {
    target.admin.map_or(Ok(Metrics::default()), metrics)
}

fn measure(cli: &Cli, target: &Target, count: usize) -> Result<Point, String> {
    let pid = target.child.id();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let (stop_tx, stop) = tokio::sync::watch::channel(false);
        let bots = spawn_bots(cli, target, &stop).await;
        eprintln!("{count} matches: {} bots started; warming up {} s", bots.len(), cli.warmup_s);
        tokio::time::sleep(Duration::from_secs(cli.warmup_s)).await;
        let before = target_metrics(target)?;
        let (cpu_before, kernel_before, start) =
            (cpu_seconds(pid), kernel_udp_errors(), Instant::now());
        let own_before = cpu_seconds(std::process::id());
        tokio::time::sleep(Duration::from_secs(cli.measure_s)).await;
        let after = target_metrics(target)?;
        let (cpu_after, kernel_after, elapsed) =
            (cpu_seconds(pid), kernel_udp_errors(), start.elapsed().as_secs_f64());
        let own = cpu_seconds(std::process::id()) - own_before;
        let rss = resident_bytes(pid);
        if let Some(admin) = target.admin {
            for id in &target.ids {
                http(admin, "POST", &format!("/v1/matches/{id}/end"), "{\"code\": 0}")?;
            }
        }
        let grace = Duration::from_secs(if target.admin.is_some() { 15 } else { 0 });
        let (joined, bots) = collect_bots(bots, stop_tx, grace).await;
        let cpu = cpu_after - cpu_before;
        let datagrams = |m: &Metrics| m.datagrams_in + m.datagrams_out;
        Ok(Point {
            matches: count,
            joined,
            cpu_share: cpu / elapsed,
            cpu_us_per_match_second: cpu / elapsed / count as f64 * 1e6,
            rss_per_match: rss.saturating_sub(target.rss_before) as f64 / count as f64,
            lateness: after.seal_lateness.since(&before.seal_lateness),
            relay_drops: after.drops.total() - before.drops.total(),
            kernel_drops: (kernel_after.0 - kernel_before.0, kernel_after.1 - kernel_before.1),
            datagrams_per_second: (datagrams(&after) - datagrams(&before)) as f64 / elapsed,
            bots_cpu_share: own / elapsed,
            bots,
        })
    })
}

fn print_point(point: &Point) {
    let b = &point.bots;
    eprintln!(
        "{} matches: bots executed {} turns, gave {} commands, got {} and sent {} datagrams; finished: {}",
        point.matches, b.turns, b.commands, b.datagrams_in, b.datagrams_out, b.finished
    );
    let l = &point.lateness;
    println!(
        "{:>6} {:>7} {:>8.1}% {:>10.1} {:>9.1} {:>6} {:>6} {:>6} {:>8} {:>6}/{:<6} {:>9.0} {:>8.0}%{}",
        point.matches,
        point.joined,
        point.cpu_share * 100.0,
        point.cpu_us_per_match_second,
        point.rss_per_match / 1024.0,
        l.quantile(0.5).map_or("-".into(), |v| v.to_string()),
        l.quantile(0.99).map_or("-".into(), |v| v.to_string()),
        l.max_ms(),
        point.relay_drops,
        point.kernel_drops.0,
        point.kernel_drops.1,
        point.datagrams_per_second,
        point.bots_cpu_share * 100.0,
        if point.bots_cpu_share > 0.9 { "  (bots saturated: not the relay's figure)" } else { "" },
    );
}

/// One series of a chart: its name and its points (matches, CPU % of a core, trouble).
type Series = (String, Vec<(f64, f64, Option<&'static str>)>);

/// What went wrong at a point, if anything: the relay (or kernel) dropped datagrams, or the
/// bots could not keep up (then the point measures them): their CPU was near a core, or the
/// datagrams a match each second (`rate`) fell under 80 % of the sweep's best (`best`).
fn trouble(
    drops: u64,
    kernel: u64,
    bots_cpu_share: f64,
    rate: f64,
    best: f64,
) -> Option<&'static str> {
    if drops + kernel > 0 {
        Some("drops")
    } else if bots_cpu_share > 0.9 || rate < 0.8 * best {
        Some("bots short")
    } else {
        None
    }
}

/// A sweep's CSV (as this tool writes it) as a series named `name`.
fn read_series(path: &std::path::Path, name: String) -> Result<Series, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let column = |name: &str| header.iter().position(|h| *h == name).ok_or(format!("no {name}"));
    let (m, cpu, drops) = (column("matches")?, column("cpu_share")?, column("relay_drops")?);
    let (kernel, bots) = (column("kernel_rcvbuf_errors")?, column("bots_cpu_share")?);
    let datagrams = column("datagrams_per_second")?;
    let rows: Vec<Vec<f64>> =
        lines.map(|line| line.split(',').map(|f| f.parse().unwrap_or(0.0)).collect()).collect();
    let rate = |row: &Vec<f64>| row[datagrams] / row[m].max(1.0);
    let best = rows.iter().map(rate).fold(0.0, f64::max);
    let points = rows
        .iter()
        .map(|row| {
            let trouble =
                trouble(row[drops] as u64, row[kernel] as u64, row[bots], rate(row), best);
            (row[m], row[cpu] * 100.0, trouble)
        })
        .collect();
    Ok((name, points))
}

/// An SVG chart of CPU (% of one core) against matches, a line a series; a point where
/// something went wrong is red and says what.
fn plot(series: &[Series]) -> String {
    let (w, h, m) = (640.0, 400.0, 60.0);
    let all = || series.iter().flat_map(|(_, points)| points.iter());
    let max_x = all().map(|p| p.0).fold(1.0, f64::max);
    let max_y = all().map(|p| p.1).fold(100.0, f64::max);
    let x = |v: f64| m + v / max_x * (w - 2.0 * m);
    let y = |v: f64| h - m - v / max_y * (h - 2.0 * m);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
         font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    );
    svg +=
        &format!("<path d=\"M{m} {m} V{} H{}\" fill=\"none\" stroke=\"black\"/>\n", h - m, w - m);
    svg += &format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">8-player matches</text>\n",
        w / 2.0,
        h - 20.0
    );
    svg += &format!(
        "<text x=\"15\" y=\"{0}\" transform=\"rotate(-90 15 {0})\" text-anchor=\"middle\">CPU, % of one core</text>\n",
        h / 2.0
    );
    svg += &format!(
        "<line x1=\"{m}\" y1=\"{0:.1}\" x2=\"{1}\" y2=\"{0:.1}\" stroke=\"gray\" stroke-dasharray=\"4\"/>\n",
        y(100.0),
        w - m
    );
    let colours = ["steelblue", "darkorange", "seagreen", "purple"];
    for (index, (name, points)) in series.iter().enumerate() {
        let colour = colours[index % colours.len()];
        let line: Vec<String> =
            points.iter().map(|p| format!("{:.1},{:.1}", x(p.0), y(p.1))).collect();
        svg += &format!(
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"/>\n",
            line.join(" ")
        );
        svg += &format!(
            "<text x=\"{}\" y=\"{}\" fill=\"{colour}\">{name}</text>\n",
            m + 10.0,
            m + 15.0 * index as f64
        );
        for &(matches, cpu, trouble) in points {
            let (px, py) = (x(matches), y(cpu));
            let fill = if trouble.is_some() { "red" } else { colour };
            let label =
                format!("{cpu:.0}%{}", trouble.map(|t| format!(" ({t})")).unwrap_or_default());
            svg += &format!("<circle cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"3\" fill=\"{fill}\"/>\n");
            svg += &format!("<text x=\"{px:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"{fill}\">{label}</text>\n", py - 8.0);
            svg += &format!(
                "<text x=\"{px:.1}\" y=\"{}\" text-anchor=\"middle\">{matches}</text>\n",
                h - m + 15.0
            );
        }
    }
    svg + "</svg>\n"
}

/// `--plot`: the chart of the sweeps' CSVs, each named by its directory.
fn plot_files(cli: &Cli) -> std::process::ExitCode {
    let mut series = Vec::new();
    for path in &cli.plot {
        let name = path
            .parent()
            .and_then(|d| d.file_name())
            .map_or("sweep".into(), |n| n.to_string_lossy().into_owned());
        match read_series(path, name) {
            Ok(one) => series.push(one),
            Err(why) => {
                eprintln!("{why}");
                return std::process::ExitCode::FAILURE;
            }
        }
    }
    let out = cli.out.join("cpu.svg");
    if let Err(why) =
        std::fs::create_dir_all(&cli.out).and_then(|()| std::fs::write(&out, plot(&series)))
    {
        eprintln!("{}: {why}", out.display());
        return std::process::ExitCode::FAILURE;
    }
    println!("wrote {}", out.display());
    std::process::ExitCode::SUCCESS
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    if !cli.plot.is_empty() {
        return plot_files(&cli);
    }
    println!(
        "{:>6} {:>7} {:>9} {:>10} {:>9} {:>6} {:>6} {:>6} {:>8} {:>13} {:>9} {:>9}",
        "matches",
        "joined",
        "relay CPU",
        "µs/match/s",
        "KiB/match",
        "p50ms",
        "p99ms",
        "maxms",
        "drops",
        "kernel rx/tx",
        "dgrams/s",
        "bots CPU"
    );
    let mut points = Vec::new();
    for &count in &cli.matches {
        match run_point(&cli, count) {
            Ok(point) => {
                print_point(&point);
                points.push(point);
            }
            Err(why) => {
                eprintln!("{count} matches: {why}");
                return std::process::ExitCode::FAILURE;
            }
        }
    }
    if points.len() > 1 {
        let _ = std::fs::create_dir_all(&cli.out);
        let mut csv = String::from("matches,joined,cpu_share,cpu_us_per_match_second,rss_bytes_per_match,lateness_p50_ms,lateness_p99_ms,lateness_max_ms,relay_drops,kernel_rcvbuf_errors,kernel_sndbuf_errors,datagrams_per_second,bots_cpu_share\n");
        for p in &points {
            csv += &format!(
                "{},{},{:.4},{:.1},{:.0},{},{},{},{},{},{},{:.0},{:.3}\n",
                p.matches,
                p.joined,
                p.cpu_share,
                p.cpu_us_per_match_second,
                p.rss_per_match,
                p.lateness.quantile(0.5).unwrap_or(0),
                p.lateness.quantile(0.99).unwrap_or(0),
                p.lateness.max_ms(),
                p.relay_drops,
                p.kernel_drops.0,
                p.kernel_drops.1,
                p.datagrams_per_second,
                p.bots_cpu_share
            );
        }
        let _ = std::fs::write(cli.out.join("sweep.csv"), csv);
        let rate = |p: &Point| p.datagrams_per_second / p.matches.max(1) as f64;
        let best = points.iter().map(rate).fold(0.0, f64::max);
        let series: Series = (
            if cli.baseline { "baseline" } else { "relay" }.to_owned(),
            points
                .iter()
                .map(|p| {
                    let (drops, kernel) = (p.relay_drops, p.kernel_drops.0);
                    let trouble = trouble(drops, kernel, p.bots_cpu_share, rate(p), best);
                    (p.matches as f64, p.cpu_share * 100.0, trouble)
                })
                .collect(),
        );
        let _ = std::fs::write(cli.out.join("cpu.svg"), plot(&[series]));
        println!(
            "wrote {} and {}",
            cli.out.join("sweep.csv").display(),
            cli.out.join("cpu.svg").display()
        );
    }
    std::process::ExitCode::SUCCESS
}
