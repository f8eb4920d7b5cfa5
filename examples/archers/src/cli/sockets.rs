//! `archers host` and `archers client`: the same match over real UDP/QUIC, one process per
//! node. The host prints machine-readable `LISTENING` / `SEAT` / `HOST` lines on stdout (the
//! loopback test reads them) and help on stderr; a client prints its summary, and with
//! `--json` a JSON line.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use archers::net::{self, ClientOutcome};
use serde::Serialize;

use super::json::{self, Desync};
use super::{ClientArgs, HostArgs, MatchArgs};

/// A client's `--json` line.
#[derive(Debug, Serialize)]
struct ClientSummary {
    player: u8,
    turns: u32,
    /// How the session ended: `finished` when the host ended the match after its last turn.
    ended: String,
    #[serde(flatten)]
    play: json::Play,
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Hosts the match until every player has left (or three times its length passed).
pub(crate) fn host(args: &HostArgs) -> ExitCode {
    let game = args.game.game();
    let tokens = net::seat_tokens(game.players);
    runtime().block_on(async {
        let session = match net::HostSession::bind(args.bind, game, tokens.clone()).await {
            Ok(session) => session,
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::FAILURE;
            }
        };
        let addr = session.local_addr().unwrap_or(args.bind);
        let fingerprint = session.fingerprint();
        // Machine-readable lines on stdout (the loopback test reads them), help on stderr.
        println!("LISTENING {addr} {fingerprint}");
        for (seat, token) in tokens.iter().enumerate() {
            println!("SEAT {seat} {token}");
        }
        let MatchArgs { players, units, minutes, seed } = args.game;
        eprintln!(
            "archers host: {players} players, {units} archers, {minutes:.1} min, seed {seed}; \
             listening on {addr}"
        );
        eprintln!("start each player with (one command per seat):");
        for token in &tokens {
            eprintln!(
                "  cargo run --release -p archers -- client --connect {addr} --fingerprint {fingerprint} \
                 --token {token} --players {players} --units {units} --minutes {minutes} --seed {seed}"
            );
        }
        let limit = Duration::from_secs_f64(minutes * 60.0 * 3.0 + 120.0);
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

/// Plays one seat to the last turn; success when it got there without a desync report (or,
/// with `--inject-desync`, got there at all).
pub(crate) fn client(args: &ClientArgs) -> ExitCode {
    let game = args.game.game();
    let started = Instant::now();
    let result = runtime().block_on(net::play(
        args.connect,
        args.fingerprint,
        args.token,
        game,
        args.inject_desync,
    ));
    let outcome = match result {
        Ok(outcome) => outcome,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    print_outcome(&outcome, game.turns, started.elapsed().as_secs_f64());
    if args.json {
        let latency = outcome.latency_ms;
        json::print_line(&ClientSummary {
            player: outcome.player,
            turns: outcome.turns,
            ended: outcome.ended.clone().unwrap_or_else(|| "running".into()),
            play: json::Play {
                final_state_hash: outcome.final_state_hash,
                desyncs: outcome
                    .desyncs
                    .iter()
                    .map(|(turn, players)| Desync { turn: *turn, players: players.clone() })
                    .collect(),
                commands_submitted: outcome.submitted,
                commands_executed: outcome.executed,
                latency_ms_p50: latency.map(|l| l.0),
                latency_ms_p95: latency.map(|l| l.1),
                latency_ms_max: latency.map(|l| l.2),
                stall_ms: Some(outcome.stall_ms),
            },
        });
    }
    let finished = outcome.ended.as_deref() == Some("finished");
    if outcome.turns == game.turns
        && finished
        && (outcome.desyncs.is_empty() || args.inject_desync.is_some())
    {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The client's summary, for a reader: `turns` of the match's, `wall` seconds of real time.
fn print_outcome(outcome: &ClientOutcome, turns: u32, wall: f64) {
    let (p50, p95, max) = outcome.latency_ms.unwrap_or_default();
    println!();
    println!("  player                  {}", outcome.player);
    println!("  turns executed          {} of {turns}", outcome.turns);
    println!("  final state hash        {:#018x}", outcome.final_state_hash);
    println!("  desync reports          {}", outcome.desyncs.len());
    println!(
        "  commands                {} submitted, {} executed (everyone's)",
        outcome.submitted, outcome.executed
    );
    println!("  command latency         p50 {p50} ms, p95 {p95} ms, max {max} ms");
    println!("  stall total             {} ms", outcome.stall_ms);
    println!("  wall time               {wall:.1} s");
    println!("  ended                   {}", outcome.ended.as_deref().unwrap_or("running"));
}
