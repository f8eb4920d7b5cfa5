//! The host machine as a phalanx-relay ([`SimConfig::relay_matches`](crate::SimConfig), cargo
//! feature `relay`): a relay `Shard` on the host's simulated socket holds the scenario's match
//! (the players' tokens, its spectators, its timeline's end and shutdown) and `n` more, each
//! played by eight sans-IO bots from the machine `crowd`, so that the scenario's players share
//! their host with other matches as they would on a deployed relay. Raw UDP only.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use phalanx::udp::{DatagramSocket, QuinnSocket};
use phalanx_relay::load::{Bot, BotConfig};
use phalanx_relay::{Limits, MatchId, MatchSpec, Outbox, Shard, StartPolicy};

use crate::report::CrowdReport;
use crate::run::{
    host_socket, host_steps, host_wake_ms, node_seed, now_ms, quic_seed, start_due, until, Run,
    HOST_PORT,
};
use crate::spectator::spectator_token;
use crate::{LinkFaults, SimSocket, Step};

/// The scenario's match on the relay.
const SCENARIO: MatchId = MatchId(1);
/// Players of each crowd match.
const CROWD_PLAYERS: usize = 8;
/// The crowd's first port (bot `i` binds this + `i`).
const CROWD_PORT: u16 = 7_000;

fn crowd_token(game: usize, seat: usize) -> u64 {
    1_000_000 + (game * 64 + seat) as u64
}

/// Sends on the host's simulated socket.
struct SimOut<'a>(&'a QuinnSocket);

impl Outbox for SimOut<'_> {
    fn send(&mut self, to: SocketAddr, packet: &[u8]) -> bool {
        self.0.try_send_to(packet, to).is_ok()
    }
}

/// The shard with the scenario's match and the crowd's.
fn shard(run: &Run, key: phalanx::udp::HostKey) -> Result<Shard, String> {
    let config = &run.config;
    let mut shard = Shard::new(key, quic_seed(config.seed, 0), Limits::default(), now_ms());
    let mut spec = MatchSpec::new(config.players as u8);
    spec.session = config.session.clone();
    spec.spectators = config.spectators.len() as u8;
    spec.start = StartPolicy::Manual;
    let mut tokens: Vec<u64> = (0..config.players as u64).map(|machine| 100 + machine).collect();
    tokens.extend((0..config.spectators.len()).map(spectator_token));
    shard.create_match(now_ms(), SCENARIO, &spec, &tokens).map_err(|e| e.to_string())?;
    for game in 0..config.relay_matches.unwrap_or(0) {
        let mut crowd = MatchSpec::new(CROWD_PLAYERS as u8);
        crowd.session = config.session.clone();
        crowd.turns_max = Some(config.turns);
        let tokens: Vec<u64> = (0..CROWD_PLAYERS).map(|seat| crowd_token(game, seat)).collect();
        let id = MatchId(2 + game as u64);
        shard.create_match(now_ms(), id, &crowd, &tokens).map_err(|e| e.to_string())?;
    }
    Ok(shard)
}

/// The host node's task over a relay: as `run::host`, but with the relay's core.
pub(crate) async fn relay_host(run: Run, key: phalanx::udp::HostKey) -> turmoil::Result {
    let config = run.config.clone();
    let socket = QuinnSocket(host_socket(&run).await?);
    let mut shard = shard(&run, key)?;
    let mut steps = host_steps(&config);
    let (mut started, mut buf) = (false, vec![0u8; 2_048]);
    loop {
        while let Some(step) = steps.next_if(|step| now_ms() >= step.at_ms()) {
            if !on_step(&run, &mut shard, &socket, step) {
                // Shut down: nothing runs here any more; the players end on their own.
                loop {
                    tokio::time::sleep(Duration::from_secs(3_600)).await;
                }
            }
        }
        let joined = shard.inspect(now_ms(), SCENARIO).map_or(0, |info| info.connected.len());
        if !started && start_due(&config, joined) {
            shard
                .start_match(now_ms(), SCENARIO, &mut SimOut(&socket))
                .map_err(|e| e.to_string())?;
            started = true;
        }
        report_events(&run, &mut shard);
        let wake = shard.poll_timeout().unwrap_or(u64::MAX);
        let sleep = until(wake.min(host_wake_ms(&mut steps, started)));
        // Biased: select!'s random order would make runs of one seed differ.
        tokio::select! {
            biased;
            received = std::future::poll_fn(|cx| socket.poll_recv_from(cx, &mut buf)) => {
                if let Ok((len, from)) = received {
                    shard.handle_datagram(now_ms(), from, &buf[..len], &mut SimOut(&socket));
                }
            }
            () = tokio::time::sleep(sleep) => {}
        }
        shard.handle_timeout(now_ms(), &mut SimOut(&socket));
    }
}

/// A timeline step for the host; `false` once the host shut down.
fn on_step(run: &Run, shard: &mut Shard, socket: &QuinnSocket, step: Step) -> bool {
    let out = &mut SimOut(socket);
    let what = match step {
        Step::EndGame { code, .. } => {
            let ended = shard.end_match(now_ms(), SCENARIO, code, out);
            if let Ok(Some(last)) = ended {
                run.with_report(|report| report.game_ended = Some((now_ms(), last)));
            }
            format!("end({code}): {ended:?}")
        }
        _ => {
            run.with_report(|report| report.host_shutdown_ms = Some(now_ms()));
            shard.close_all(out);
            run.with_report(|report| report.host_events.push((now_ms(), "shutdown".into())));
            return false;
        }
    };
    run.with_report(|report| report.host_events.push((now_ms(), what)));
    true
}

/// The scenario match's events, into the report as a host's are.
fn report_events(run: &Run, shard: &mut Shard) {
    while let Some((id, event)) = shard.poll_event() {
        if id != SCENARIO {
            continue;
        }
        let event = phalanx::Event::from(event);
        let line = (now_ms(), format!("{event:?}"));
        run.with_report(|report| {
            report.host_events.push(line);
            report.events.push((now_ms(), event));
        });
    }
}

/// The crowd's machine: eight bots a crowd match, each on a socket of its own.
pub(crate) fn crowd_node(sim: &mut turmoil::Sim<'_>, run: &Run) {
    if run.config.relay_matches.unwrap_or(0) == 0 {
        return;
    }
    // A host node, not a client: the run ends when the scenario's players are done, whether
    // or not every crowd match has.
    let run = run.clone();
    sim.host("crowd", move || {
        let run = run.clone();
        async move { crowd(run).await }
    });
}

async fn crowd(run: Run) -> turmoil::Result {
    let relay = SocketAddr::from((turmoil::lookup("host"), HOST_PORT));
    let count = run.config.relay_matches.unwrap_or(0) * CROWD_PLAYERS;
    run.with_report(|report| report.crowd = vec![CrowdReport::default(); count]);
    let mut bots = Vec::new();
    for game in 0..run.config.relay_matches.unwrap_or(0) {
        for seat in 0..CROWD_PLAYERS {
            let index = game * CROWD_PLAYERS + seat;
            let bind = SocketAddr::from((IpAddr::from([0, 0, 0, 0]), CROWD_PORT + index as u16));
            let seed = node_seed(run.config.seed, 50_000 + index as u64);
            let socket =
                SimSocket::bind("crowd", bind, LinkFaults::default(), seed, run.trace.clone())
                    .await?;
            let config = BotConfig {
                address: relay,
                pin: run.udp_key,
                token: crowd_token(game, seat),
                session: run.config.session.clone(),
                seed,
                join_timeout: Duration::from_secs(30),
                hostile: false,
            };
            bots.push(tokio::spawn(bot(run.clone(), index, socket, config)));
        }
    }
    for bot in bots {
        let _ = bot.await;
    }
    // A host node runs on: the crowd's work is done.
    loop {
        tokio::time::sleep(Duration::from_secs(3_600)).await;
    }
}

/// One crowd bot until its match ends (or it cannot join), its account in the report as it
/// goes (a second apart) and at the end.
async fn bot(run: Run, index: usize, socket: Arc<SimSocket>, config: BotConfig) {
    let socket = QuinnSocket(socket);
    let relay = config.address;
    let mut send = |packet: &[u8]| {
        // turmoil has no back-pressure: a send fails only on a dead socket.
        let _ = socket.try_send_to(packet, relay);
    };
    let Some(mut bot) = Bot::new(&config, now_ms(), &mut send) else { return };
    let mut buf = vec![0u8; 2_048];
    let mut reported_ms = 0;
    let account = |bot: &Bot| {
        let r = bot.report();
        let account = CrowdReport { joined: r.joined, turns: r.turns, finished: r.finished };
        run.with_report(|report| report.crowd[index] = account);
    };
    while !bot.is_over() {
        if now_ms() >= reported_ms + 1_000 {
            reported_ms = now_ms();
            account(&bot);
        }
        let wake = bot.poll_timeout().unwrap_or(now_ms() + 1_000);
        let sleep = Duration::from_millis(wake.saturating_sub(now_ms()));
        tokio::select! {
            biased;
            received = std::future::poll_fn(|cx| socket.poll_recv_from(cx, &mut buf)) => {
                if let Ok((len, from)) = received {
                    if from == relay {
                        bot.handle(now_ms(), &buf[..len], &mut send);
                    }
                }
            }
            () = tokio::time::sleep(sleep) => bot.handle_timeout(now_ms(), &mut send),
        }
    }
    account(&bot);
}
