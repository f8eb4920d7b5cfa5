//! `archers host` and `archers client`: the same match over real UDP/QUIC, one process per
//! node. The host prints machine-readable `LISTENING` / `SEAT` / `HOST` lines on stdout (the
//! loopback test reads them) and help on stderr; a client prints its summary, and with
//! `--json` a JSON line. Both say on stderr, one line each as they happen, when the host waits
//! for a player and when a player is removed or comes back; a client that was cut off says so
//! and prints the command that rejoins.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use archers::net::{self, ClientOutcome};
use phalanx::Event;
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
    /// The last turn after which the latency and stall figures were read (null: never).
    measured_at_turn: Option<u32>,
    /// When the host cut this client off: the command that rejoins (the same one, within the
    /// rejoin window).
    #[serde(skip_serializing_if = "Option::is_none")]
    rejoin: Option<String>,
    #[serde(flatten)]
    play: json::Play,
}

pub(super) fn runtime() -> tokio::runtime::Runtime {
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
        let transport = match args.transport {
            super::TransportArg::Udp => phalanx::Transport::Udp,
            super::TransportArg::Quic => phalanx::Transport::Quic,
        };
        let session = match net::HostSession::bind(args.bind, game, tokens.clone(), transport).await
        {
            Ok(session) => session,
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::FAILURE;
            }
        };
        let addr = session.local_addr().unwrap_or(args.bind);
        let (pin, pin_flag) = (session.pin(), session.pin().flag());
        // Machine-readable lines on stdout (the loopback test reads them), help on stderr.
        println!("LISTENING {addr} {pin}");
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
                "  cargo run --release -p archers -- client --connect {addr} {pin_flag} {pin} \
                 --token {token} --players {players} --units {units} --minutes {minutes} --seed {seed}"
            );
        }
        let limit = Duration::from_secs_f64(minutes * 60.0 * 3.0 + 120.0);
        let mut waiting: Option<Instant> = None;
        let mut ended = false;
        let config = game.session();
        let outcome = session
            .serve(Duration::from_secs(300), limit, |event| {
                eprintln!("host: {}", host_event_words(event, &mut waiting, &mut ended, &config));
            })
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
                eprintln!("host: {}", admission_words(&outcome.admission));
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("error: {error}");
                ExitCode::FAILURE
            }
        }
    })
}

/// The end-of-match summary of what the host refused and dropped, for its stderr: an attack
/// shows here (refused connections, failed handshakes, forged or replayed packets).
fn admission_words(stats: &phalanx::stats::AdmissionStats) -> String {
    let udp = &stats.udp;
    let handshakes = &udp.handshakes;
    format!(
        "admission: {} admitted, {} joined; refused {} busy, {} per address; {} handshakes \
         failed, {} join timeouts, {} joins refused, {} closed before joining, {} evicted idle; \
         udp: {} cookie replies, {} bad cookies, {} handshakes dropped (malformed {}, \
         undecryptable {}, replayed {}), packets dropped: {} tampered, {} replayed, {} too old, \
         {} malformed",
        stats.admitted,
        stats.joins_accepted,
        stats.refused_busy,
        stats.refused_address,
        stats.handshakes_failed,
        stats.join_timeouts,
        stats.joins_refused,
        stats.closed_before_join,
        stats.evicted_idle,
        handshakes.cookie_replies,
        handshakes.bad_cookies,
        handshakes.malformed + handshakes.undecryptable + handshakes.replayed,
        handshakes.malformed,
        handshakes.undecryptable,
        handshakes.replayed,
        udp.packets_tampered,
        udp.packets_replayed,
        udp.packets_too_old,
        udp.packets_malformed,
    )
}

/// A host event in words, for its stderr; `waiting` keeps when the current wait began, and
/// `ended` whether the session has ended (a player that goes after that has finished).
pub(super) fn host_event_words(
    event: &Event,
    waiting: &mut Option<Instant>,
    ended: &mut bool,
    config: &phalanx::SessionConfig,
) -> String {
    let seconds = |ms: u32| f64::from(ms) / 1e3;
    match event {
        Event::PlayerJoined(player) => format!("player {} joined", player.0),
        Event::PlayerRejoined(player) => format!("player {} rejoined", player.0),
        Event::PlayerTimedOut(player) => format!(
            "player {} timed out (nothing heard for {:.1} s): removed at the next sealed turn; \
             its seat is kept {:.0} s for a rejoin",
            player.0,
            seconds(config.link.idle_timeout_ms),
            seconds(config.catch_up.rejoin_window_ms)
        ),
        Event::PlayerMisbehaved(player) => format!(
            "player {} misbehaved (too many malformed datagrams): removed at the next sealed turn",
            player.0
        ),
        Event::PlayerRemoved(player) if *ended => {
            format!("player {} finished the match and disconnected", player.0)
        }
        Event::PlayerRemoved(player) => {
            format!("player {} left: removed at the next sealed turn", player.0)
        }
        Event::Waiting(players) => {
            waiting.get_or_insert_with(Instant::now);
            let players: Vec<u8> = players.iter().map(|p| p.0).collect();
            format!(
                "waiting for player(s) {players:?}: no acknowledgement of a window of turns for \
                 {:.1} s",
                seconds(config.turns.stall_notice_ms)
            )
        }
        Event::StallEnded => match waiting.take() {
            Some(since) => format!(
                "the wait is over after {:.1} s; sealing turns again",
                since.elapsed().as_secs_f64() + seconds(config.turns.stall_notice_ms)
            ),
            None => "the wait is over; sealing turns again".into(),
        },
        Event::PaceChanged(pace) => format!(
            "pace: {} ms turns, commands execute {} turn(s) after they are given",
            pace.turn_length_ms, pace.command_delay_turns
        ),
        Event::Ended(cause) => {
            *ended = true;
            format!("the session ended ({cause:?})")
        }
        Event::Desync(report) => format!(
            "desync at turn {}: players {:?} diverged",
            report.turn.0,
            report.diverged.iter().map(|p| p.0).collect::<Vec<_>>()
        ),
        other => format!("{other:?}"),
    }
}

/// Plays one seat to the last turn; success when it got there without a desync report (or,
/// with `--inject-desync`, got there at all). Waits, departures and returns are told on stderr
/// as they happen; a client the host cut off says so and how to rejoin.
pub(crate) fn client(args: &ClientArgs) -> ExitCode {
    let game = args.game.game();
    let pin = match (args.fingerprint, args.udp_key, args.pin) {
        (_, Some(key), _) | (_, _, Some(phalanx::Pin::UdpKey(key))) => net::Pin::UdpKey(key),
        (Some(fingerprint), ..) | (_, _, Some(phalanx::Pin::Fingerprint(fingerprint))) => {
            net::Pin::Fingerprint(fingerprint)
        }
        _ => {
            // clap requires one; kept for a caller that builds the args by hand.
            eprintln!(
                "error: --pin, --fingerprint (a QUIC host) or --udp-key (a UDP host) is needed"
            );
            return ExitCode::from(2);
        }
    };
    let Some(token) = args.token.or(args.code.map(|code| code.0)) else {
        eprintln!("error: --token or --code is needed");
        return ExitCode::from(2);
    };
    let started = Instant::now();
    let result = runtime().block_on(net::play(
        args.connect,
        pin,
        token,
        game,
        args.inject_desync,
        |notice| eprintln!("archers client: {notice}"),
    ));
    let outcome = match result {
        Ok(outcome) => outcome,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    print_outcome(&outcome, game.turns, started.elapsed().as_secs_f64());
    let rejoin = outcome.cut_off().then(this_command);
    if let Some(command) = &rejoin {
        let config = game.session();
        let why = match outcome.ended.as_deref() {
            Some("removed") => "the host removed this player".to_owned(),
            _ => format!(
                "nothing arrived from the host for {:.1} s (the idle timeout): cut off, and the \
                 host removes a player it does not hear from for as long",
                f64::from(config.link.idle_timeout_ms) / 1e3
            ),
        };
        eprintln!(
            "archers client: REMOVED from the match after turn {} of {}: {why}. A player removed \
             for silence keeps its seat for {} s: to rejoin, run the same command again (it \
             replays the match from turn 0, then plays on):\n  {command}",
            outcome.turns.saturating_sub(1),
            game.turns,
            config.catch_up.rejoin_window_ms / 1_000,
        );
    }
    if args.json {
        print_json(&outcome, rejoin);
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

/// The client's `--json` line.
pub(super) fn print_json(outcome: &ClientOutcome, rejoin: Option<String>) {
    let latency = outcome.latency_ms;
    json::print_line(&ClientSummary {
        player: outcome.player,
        turns: outcome.turns,
        ended: outcome.ended.clone().unwrap_or_else(|| "running".into()),
        measured_at_turn: outcome.measured_at_turn,
        rejoin,
        play: json::Play {
            final_state_hash: outcome.final_state_hash,
            desyncs: outcome
                .desyncs
                .iter()
                .map(|(turn, players)| Desync {
                    turn: *turn,
                    players: players.clone(),
                    first_turn: None,
                    diff: None,
                })
                .collect(),
            commands_submitted: outcome.submitted,
            commands_executed: outcome.executed,
            latency_ms_p50: latency.map(|l| l.0),
            latency_ms_p95: latency.map(|l| l.1),
            latency_ms_max: latency.map(|l| l.2),
            stall_ms: outcome.stall_ms,
        },
    });
}

/// This process's command line, as a shell would take it back.
fn this_command() -> String {
    let word = |arg: String| {
        let plain = !arg.is_empty()
            && arg.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:=,@+".contains(c));
        if plain {
            arg
        } else {
            format!("'{}'", arg.replace('\'', r"'\''"))
        }
    };
    std::env::args().map(word).collect::<Vec<_>>().join(" ")
}

/// The client's summary, for a reader: `turns` of the match's, `wall` seconds of real time.
pub(super) fn print_outcome(outcome: &ClientOutcome, turns: u32, wall: f64) {
    let measured = match (outcome.measured_at_turn, outcome.cut_off()) {
        (Some(turn), true) => format!(" (measured up to turn {turn}, before the cut)"),
        _ => String::new(),
    };
    let latency = match outcome.latency_ms {
        Some((p50, p95, max)) => format!("p50 {p50} ms, p95 {p95} ms, max {max} ms{measured}"),
        None => "none measured".into(),
    };
    let stall =
        outcome.stall_ms.map_or_else(|| "never measured".into(), |ms| format!("{ms} ms{measured}"));
    println!();
    println!("  player                  {}", outcome.player);
    println!("  turns executed          {} of {turns}", outcome.turns);
    println!("  final state hash        {:#018x}", outcome.final_state_hash);
    println!("  desync reports          {}", outcome.desyncs.len());
    println!(
        "  commands                {} submitted, {} executed (everyone's)",
        outcome.submitted, outcome.executed
    );
    println!("  command latency         {latency}");
    println!("  stall total             {stall}");
    println!("  wall time               {wall:.1} s");
    let ended = outcome.ended.as_deref().unwrap_or("running");
    if outcome.cut_off() {
        println!("  ended                   {ended}: REMOVED from the match (cut off)");
    } else {
        println!("  ended                   {ended}");
    }
}
