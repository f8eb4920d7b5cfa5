//! The demo over real sockets: `archers host` listens (QUIC on UDP, a fresh self-signed
//! identity whose fingerprint clients pin) and seals turns; each `archers client` joins with
//! its seat token and plays the same game and bot as in the simulation. The match parameters
//! (players, archers, seed, length) are folded into the session's game-data hash, so a client
//! started with other flags is refused at the join, naming both hashes.

use std::hash::{BuildHasher, Hasher};
use std::net::SocketAddr;
use std::time::Duration;

use phalanx::{
    Client, ClientEvent, ClientOptions, Fingerprint, Host, HostEvent, HostIdentity, HostOptions,
    HostVerification, SessionConfig, TypedRecord, Update,
};
use phalanx_sim::SimGame;

use crate::game::{Archers, Setup};
use crate::world::Order;

/// The match both sides must agree on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Match {
    /// Players (each a client process).
    pub players: usize,
    /// Archers in total.
    pub units: usize,
    /// The game's seed.
    pub seed: u64,
    /// Turns to play.
    pub turns: u32,
}

impl Match {
    /// The session config: default timing and speed control, `players` seats, and a game-data
    /// hash over the match parameters.
    pub fn session(&self) -> SessionConfig {
        let mut session = demo_session();
        session.players_max = self.players as u8;
        let mut hash = 0xcbf2_9ce4_8422_2325u64;
        for word in [self.players as u64, self.units as u64, self.seed, u64::from(self.turns)] {
            for byte in word.to_le_bytes() {
                hash = (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
        session.game_data_hash = hash;
        session
    }
}

/// The demo's departure from the default session: the host repeats a new turn a quarter turn
/// later only for about 40 packets after a loss (loss estimate ≥ 5 ‰), rather than for 256.
/// On the default 2 %-loss network that cuts the wire rate by a quarter (24.7 → 18.6 kbit/s
/// per player over seeds 1–3) with p95 latency still under 240 ms, for a little more stall.
pub fn tune(session: &mut SessionConfig) {
    session.repeat_loss_permille = 5;
}

/// The demo's session before a match is folded in: the default with [`tune`] applied. Its
/// turn length is what a match's length in minutes is counted in.
pub fn demo_session() -> SessionConfig {
    let mut session = SessionConfig::default();
    tune(&mut session);
    session
}

/// Unpredictable seat tokens, one per player (std's randomly keyed SipHash: enough for a
/// demo's lobby; a real lobby hands out tokens from a CSPRNG).
pub fn seat_tokens(players: usize) -> Vec<u64> {
    (0..players as u64)
        .map(|seat| {
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_u64(seat);
            hasher.finish()
        })
        .collect()
}

/// A bound host, not yet started.
pub struct HostSession {
    host: Host<Order>,
    game: Match,
}

impl std::fmt::Debug for HostSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostSession").field("game", &self.game).finish_non_exhaustive()
    }
}

/// How the host's side of a match went.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostOutcome {
    /// Players that joined.
    pub joined: usize,
    /// Turns sealed.
    pub turns_sealed: u64,
    /// Commands sealed into turns.
    pub commands_sealed: u64,
    /// Desync reports: `(check turn, diverged players)`.
    pub desyncs: Vec<(u32, Vec<u8>)>,
}

impl HostSession {
    /// Binds the host on `bind` with a fresh self-signed identity and these seat tokens.
    pub async fn bind(bind: SocketAddr, game: Match, tokens: Vec<u64>) -> Result<Self, String> {
        let identity = HostIdentity::generate_self_signed("archers").map_err(|e| e.to_string())?;
        let mut options = HostOptions::new(identity, bind, tokens);
        options.session = game.session();
        // The host watches the sealed turns (without simulating them) to end the match after
        // its last one.
        options.observe_turns = true;
        let host = Host::bind(options).await.map_err(|e| e.to_string())?;
        Ok(HostSession { host, game })
    }

    /// Where it listens.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.host.local_addr()
    }

    /// The fingerprint clients pin.
    pub fn fingerprint(&self) -> Fingerprint {
        self.host.fingerprint()
    }

    /// Waits for every player (at most `join_wait`), starts, and serves until every player has
    /// left (or `limit` passed). `events` sees every host event.
    pub async fn serve(
        mut self,
        join_wait: Duration,
        limit: Duration,
        mut events: impl FnMut(&HostEvent),
    ) -> Result<HostOutcome, String> {
        let started = tokio::time::Instant::now();
        let mut outcome = HostOutcome::default();
        let mut gone = 0;
        let mut running = false;
        loop {
            // Wait for the next sealed turn, event or deadline: no polling.
            let deadline = if running { limit } else { join_wait };
            let left = deadline.saturating_sub(started.elapsed());
            let event = tokio::select! {
                update = self.host.next_update() => match update {
                    // The match's last turn is sealed: the next one ends it for everyone.
                    Some(Update::Turn(turn)) if turn.turn.0 + 1 == self.game.turns => {
                        self.host.end(0).await.map_err(|e| e.to_string())?;
                        None
                    }
                    Some(Update::Turn(_)) => None,
                    Some(Update::Event(event)) => Some(event),
                    // The driver stopped: nothing more will happen.
                    None => break,
                },
                () = tokio::time::sleep(left) => None,
            };
            if let Some(event) = event {
                match &event {
                    HostEvent::PlayerJoined(_) => outcome.joined += 1,
                    HostEvent::PlayerTimedOut(_)
                    | HostEvent::PlayerMisbehaved(_)
                    | HostEvent::PlayerRemoved(_) => gone += 1,
                    HostEvent::Desync(report) => outcome
                        .desyncs
                        .push((report.turn.0, report.diverged.iter().map(|p| p.0).collect())),
                    _ => {}
                }
                events(&event);
            }
            if !running {
                if outcome.joined == self.game.players {
                    self.host.start().await.map_err(|e| e.to_string())?;
                    running = true;
                } else if started.elapsed() > join_wait {
                    return Err(format!(
                        "{} of {} players joined in {} s",
                        outcome.joined,
                        self.game.players,
                        join_wait.as_secs()
                    ));
                }
            } else if gone >= outcome.joined || started.elapsed() > limit {
                break;
            }
        }
        if let Ok((stats, _)) = self.host.stats().await {
            outcome.turns_sealed = stats.turns_sealed;
            outcome.commands_sealed = stats.commands_sealed;
        }
        self.host.shutdown().await;
        Ok(outcome)
    }
}

/// How a client's side of a match went.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientOutcome {
    /// Our player.
    pub player: u8,
    /// Turns executed.
    pub turns: u32,
    /// The state hash after the last turn.
    pub final_state_hash: u64,
    /// Commands we submitted, and commands (of anyone) we executed.
    pub submitted: u64,
    /// See `submitted`.
    pub executed: u64,
    /// Desync reports we received: `(check turn, diverged players)`.
    pub desyncs: Vec<(u32, Vec<u8>)>,
    /// Command latency p50, p95, max (ms) of our recent commands.
    pub latency_ms: Option<(u32, u32, u32)>,
    /// Time the game waited for turns beyond their length.
    pub stall_ms: u64,
    /// How the session ended (`finished` when the host ended the match after its last turn),
    /// lower case.
    pub ended: Option<String>,
}

/// Joins the host at `addr` (pinning `fingerprint`) with `token` and plays the match's bot to
/// the last turn. `inject_desync`: flip one bit of our state after that turn.
pub async fn play(
    addr: SocketAddr,
    fingerprint: Fingerprint,
    token: u64,
    game: Match,
    inject_desync: Option<u32>,
) -> Result<ClientOutcome, String> {
    let mut options = ClientOptions::new(token, HostVerification::Pinned(fingerprint));
    options.session = game.session();
    let mut client: Client<Order> =
        Client::connect(addr, options).await.map_err(|e| format!("cannot join: {e}"))?;
    let player = client.player();
    let mut setup = Setup::new(game.players, game.units, game.turns);
    setup.desync = inject_desync.map(|turn| (player.0, turn));
    let mut archers = Archers::new(player, game.seed, &setup);
    let interval = game.session().sync_interval_turns.max(1);
    let mut outcome = ClientOutcome { player: player.0, ..ClientOutcome::default() };
    // Until the session ends: the host ends it after the match's last turn.
    while let Some(turn) = client.next_turn().await {
        if turn.turn.0 >= game.turns {
            // The turn that carries the end: nothing of the match's is left in it.
            continue;
        }
        archers.execute(&turn);
        outcome.turns += 1;
        outcome.executed +=
            turn.records.iter().filter(|r| matches!(r, TypedRecord::Command { .. })).count() as u64;
        let hash = archers.state_hash();
        outcome.final_state_hash = hash;
        if turn.turn.0.is_multiple_of(interval) {
            let _ = client.report_state_hash(turn.turn, hash).await;
        }
        while let Some(event) = client.try_event() {
            if let ClientEvent::Desync(report) = event {
                outcome
                    .desyncs
                    .push((report.turn.0, report.diverged.iter().map(|p| p.0).collect()));
            }
        }
        if turn.turn.0 + 1 >= game.turns {
            continue;
        }
        for order in archers.commands(turn.turn) {
            if client.submit(&order).await.is_ok() {
                outcome.submitted += 1;
            }
        }
    }
    if let Ok(stats) = client.stats().await {
        outcome.latency_ms = match (stats.latency_ms_p50, stats.latency_ms_p95) {
            (Some(p50), Some(p95)) => Some((p50, p95, stats.latency_ms_max.unwrap_or(p95))),
            _ => None,
        };
        outcome.stall_ms = stats.stall_ms;
    }
    outcome.ended = client.ended().map(|reason| reason.name().to_owned());
    client.shutdown().await;
    Ok(outcome)
}
