//! The demo over real sockets: `archers host` listens (QUIC on UDP, a fresh self-signed
//! identity whose fingerprint clients pin) and seals turns; each `archers client` joins with
//! its seat token and plays the same game and bot as in the simulation. The match parameters
//! (players, archers, seed, length) are folded into the session's game-data hash, so a client
//! started with other flags is refused at the join, naming both hashes.

use std::hash::{BuildHasher, Hasher};
use std::net::SocketAddr;
use std::time::Duration;

use phalanx::quic::{Fingerprint, HostIdentity, HostVerification};
use phalanx::udp::HostPublicKey;
use phalanx::web::{BrowserConfig, CertificateHash};
use phalanx::{
    session::Update, Client, ClientOptions, CommandRule, Event, Host, HostOptions, HostTransport,
    Transport, TypedRecord, TypedTurn,
};
use phalanx_sim::SimGame;

use crate::game::{Archers, Setup};
use crate::world::Order;

pub use crate::rules::{demo_session, tune, Match};

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
    pin: Pin,
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
    /// What admission control refused and the transport dropped, for the operator.
    pub admission: phalanx::stats::AdmissionStats,
}

impl HostSession {
    /// Binds the host on `bind` over `transport` with a fresh self-signed identity and these
    /// seat tokens.
    pub async fn bind(
        bind: SocketAddr,
        game: Match,
        tokens: Vec<u64>,
        transport: Transport,
    ) -> Result<Self, String> {
        Self::bind_with(bind, game, tokens, transport, None).await
    }

    /// [`bind`](Self::bind) over QUIC, listening for browser players too (WebTransport, on
    /// `browsers.bind`): a page joins with a seat's token like any client (`archers serve`).
    pub async fn bind_with_browsers(
        bind: SocketAddr,
        game: Match,
        tokens: Vec<u64>,
        browsers: BrowserConfig,
    ) -> Result<Self, String> {
        Self::bind_with(bind, game, tokens, Transport::Quic, Some(browsers)).await
    }

    async fn bind_with(
        bind: SocketAddr,
        game: Match,
        tokens: Vec<u64>,
        transport: Transport,
        browsers: Option<BrowserConfig>,
    ) -> Result<Self, String> {
        let (transport, pin): (HostTransport, Pin) = match transport {
            Transport::Udp => {
                let udp = phalanx::udp::HostConfig::generate();
                let pin = Pin::UdpKey(udp.public_key());
                (udp.into(), pin)
            }
            _ => {
                let identity =
                    HostIdentity::generate_self_signed("archers").map_err(|e| e.to_string())?;
                let pin = Pin::Fingerprint(identity.fingerprint());
                (identity.into(), pin)
            }
        };
        let mut options = HostOptions::new(transport, bind, tokens);
        options.session = game.session();
        options.browsers = browsers;
        // The host watches the sealed turns (without simulating them) to end the match after
        // its last one.
        options.observe_turns = true;
        // Orders only for the sender's own archers: anything else is a cheat, refused
        // before it reaches a turn.
        options.command_rule =
            Some(CommandRule::new(move |player, order: &Order| game.admits(player, order)));
        let host = Host::bind(options).await.map_err(|e| e.to_string())?;
        Ok(HostSession { host, game, pin })
    }

    /// What clients pin: the certificate's fingerprint over QUIC, the static key over UDP.
    pub fn pin(&self) -> Pin {
        self.pin
    }

    /// Where browsers connect and the certificate hash their pages pin (`None`: not
    /// listening for browsers).
    pub fn browsers(&self) -> Option<(SocketAddr, CertificateHash)> {
        self.host.control().browsers()
    }

    /// Where it listens.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.host.local_addr()
    }

    /// Waits for every player (at most `join_wait`), starts, and serves until every player has
    /// left (or `limit` passed). `events` sees every host event.
    pub async fn serve(
        mut self,
        join_wait: Duration,
        limit: Duration,
        mut events: impl FnMut(&Event),
    ) -> Result<HostOutcome, String> {
        let started = tokio::time::Instant::now();
        let mut outcome = HostOutcome::default();
        let mut gone = std::collections::BTreeSet::new();
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
                    Event::PlayerJoined(_) => outcome.joined += 1,
                    Event::PlayerTimedOut(player)
                    | Event::PlayerMisbehaved(player)
                    | Event::PlayerRemoved(player) => {
                        gone.insert(*player);
                    }
                    // Back within the rejoin window: it plays again.
                    Event::PlayerRejoined(player) => {
                        gone.remove(player);
                    }
                    Event::Desync(report) => outcome
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
            } else if gone.len() >= outcome.joined || started.elapsed() > limit {
                break;
            }
        }
        if let Ok((stats, _)) = self.host.stats().await {
            outcome.turns_sealed = stats.turns_sealed;
            outcome.commands_sealed = stats.commands_sealed;
        }
        outcome.admission = self.host.admission_stats();
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
    /// Command latency p50, p95, max (ms) of our recent commands (`None`: none measured).
    pub latency_ms: Option<(u32, u32, u32)>,
    /// Time the game waited for turns beyond their length (`None`: never measured).
    pub stall_ms: Option<u64>,
    /// The last turn after which the figures above (`latency_ms`, `stall_ms`) were read: the
    /// client's stats are read after every turn, since they can no longer be read once the
    /// session is over (`None`: never read).
    pub measured_at_turn: Option<u32>,
    /// How the session ended (`finished` when the host ended the match after its last turn),
    /// lower case.
    pub ended: Option<String>,
}

impl ClientOutcome {
    /// Whether the host cut this client off: its session ended with `host_lost` (nothing
    /// arrived from the host for the idle timeout) or `removed` (the host removed it) before
    /// the match's end. A player removed for silence may rejoin with its token within the
    /// session's `catch_up.rejoin_window_ms`.
    pub fn cut_off(&self) -> bool {
        matches!(self.ended.as_deref(), Some("host_lost" | "removed"))
    }
}

/// Something a client saw happen to the match while it played, as it happened.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Notice {
    /// The host is waiting for these players: their acknowledgements are a window behind
    /// (cut off, or slow). `turn`: the last turn we executed.
    Waiting {
        /// The players it waits for.
        players: Vec<u8>,
        /// The last turn we executed.
        turn: u32,
    },
    /// The wait announced by [`Notice::Waiting`] is over.
    WaitOver {
        /// How long it lasted, from the notice to its end, as we saw it.
        waited: Duration,
        /// The last turn we executed.
        turn: u32,
    },
    /// Another player's `Left` record was executed: the host removed it (it timed out,
    /// misbehaved or was kicked) or it left; the others play on without it.
    Left {
        /// The player.
        player: u8,
        /// The turn that carried the record.
        turn: u32,
    },
    /// Another player that had left came back (rejoined with its token).
    Rejoined {
        /// The player.
        player: u8,
        /// The turn that carried its `Joined` record.
        turn: u32,
    },
}

impl std::fmt::Display for Notice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Notice::Waiting { players, turn } => write!(
                f,
                "after turn {turn}: the host is waiting for player(s) {players:?} (a window of \
                 turns unacknowledged)"
            ),
            Notice::WaitOver { waited, turn } => write!(
                f,
                "after turn {turn}: the wait is over, {:.1} s after the host's notice; playing on",
                waited.as_secs_f64()
            ),
            Notice::Left { player, turn } => write!(
                f,
                "turn {turn}: player {player} left the match (removed by the host, or gone); \
                 playing on without it"
            ),
            Notice::Rejoined { player, turn } => write!(f, "turn {turn}: player {player} rejoined"),
        }
    }
}

/// Why a join failed, in words; a game-data mismatch also says what enters the hash.
fn join_failure(error: &phalanx::ConnectError, game: &Match) -> String {
    match error.refusal() {
        Some(phalanx::error::JoinRefusal::GameDataMismatch { .. }) => format!(
            "cannot join: {error}. The game-data hash covers the match flags --players, --units, \
             --seed and --minutes (in turns); this client has players {}, units {}, seed {}, \
             {} turns: start it with the host's flags (the host prints a ready client command)",
            game.players, game.units, game.seed, game.turns
        ),
        _ => format!("cannot join: {error}"),
    }
}

/// What a client pins, which also says the transport: a certificate fingerprint (QUIC) or the
/// host's static key (raw UDP).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pin {
    /// QUIC: the host certificate's fingerprint.
    Fingerprint(Fingerprint),
    /// Raw UDP with Noise: the host's static key.
    UdpKey(HostPublicKey),
}

impl Pin {
    /// The client flag that carries it.
    pub fn flag(&self) -> &'static str {
        match self {
            Pin::Fingerprint(_) => "--fingerprint",
            Pin::UdpKey(_) => "--udp-key",
        }
    }
}

impl std::fmt::Display for Pin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pin::Fingerprint(fingerprint) => fingerprint.fmt(f),
            Pin::UdpKey(key) => key.fmt(f),
        }
    }
}

/// Joins the host at `addr` (pinning `pin`, over its transport) with `token` and plays the
/// match's bot to the last turn. `inject_desync`: flip one bit of our state after that turn.
/// `notices` sees waits, departures and returns as they happen.
pub async fn play(
    addr: SocketAddr,
    pin: Pin,
    token: u64,
    game: Match,
    inject_desync: Option<u32>,
    notices: impl FnMut(Notice),
) -> Result<ClientOutcome, String> {
    let mut options = match pin {
        Pin::Fingerprint(fingerprint) => {
            ClientOptions::new(token, HostVerification::Pinned(fingerprint))
        }
        Pin::UdpKey(key) => ClientOptions::new(token, key),
    };
    options.session = game.session();
    let client: Client<Order> =
        Client::connect(addr, options).await.map_err(|error| join_failure(&error, &game))?;
    let player = client.player().ok_or("the host seated this token as a spectator")?;
    let mut setup = Setup::new(game.players, game.units, game.turns);
    setup.desync = inject_desync.map(|turn| (player.0, turn));
    let seat = Seat {
        archers: Archers::new(player, game.seed, &setup),
        game,
        outcome: ClientOutcome { player: player.0, ..ClientOutcome::default() },
        notices,
        gone: Vec::new(),
        waiting_since: None,
    };
    Ok(seat.play(client).await)
}

/// A client's game while it plays: what it has seen so far.
struct Seat<F> {
    archers: Archers,
    game: Match,
    outcome: ClientOutcome,
    notices: F,
    /// Players whose `Left` record was executed (and who have not come back).
    gone: Vec<u8>,
    /// When the host's wait was announced, if it is not over.
    waiting_since: Option<(tokio::time::Instant, Vec<u8>)>,
}

impl<F: FnMut(Notice)> Seat<F> {
    /// Plays until the session ends: the host ends it after the match's last turn. Turns and
    /// events are taken as they come, so waits are told while they last; after the end event,
    /// the turns already handed over are played out.
    async fn play(mut self, mut client: Client<Order>) -> ClientOutcome {
        while let Some(update) = client.next_update().await {
            match update {
                Update::Turn(turn) => self.take_turn(&mut client, turn).await,
                Update::Event(Event::Ended(_)) => break,
                Update::Event(event) => self.on_event(event),
            }
        }
        // Over: the rest of the turns (`None` after the last), then the rest of the events.
        while let Some(turn) = client.next_turn().await {
            self.take_turn(&mut client, turn).await;
        }
        while let Some(event) = client.try_event() {
            self.on_event(event);
        }
        self.outcome.ended = client.ended().map(|reason| reason.name().to_owned());
        client.shutdown().await;
        self.outcome
    }

    /// Executes `turn`, reports the hash on check turns, reads the stats and gives the bot's
    /// orders.
    async fn take_turn(&mut self, client: &mut Client<Order>, turn: TypedTurn<Order>) {
        if turn.turn.0 >= self.game.turns {
            // The turn that carries the end: nothing of the match's is left in it.
            return;
        }
        let hash = self.execute(&turn);
        if turn.turn.0.is_multiple_of(self.game.session().sync.interval_turns.max(1)) {
            let _ = client.report_state_hash(turn.turn, hash).await;
        }
        // Read after every turn: once the session is over they may no longer be readable.
        if let Ok(stats) = client.stats().await {
            self.outcome.latency_ms = match (stats.latency_ms_p50, stats.latency_ms_p95) {
                (Some(p50), Some(p95)) => Some((p50, p95, stats.latency_ms_max.unwrap_or(p95))),
                _ => None,
            };
            self.outcome.stall_ms = Some(stats.stall_ms);
            self.outcome.measured_at_turn = Some(turn.turn.0);
        }
        if turn.turn.0 + 1 >= self.game.turns {
            return;
        }
        for order in self.archers.commands(turn.turn) {
            if client.submit(&order).await.is_ok() {
                self.outcome.submitted += 1;
            }
        }
    }

    /// Executes `turn`, counts it, tells of departures and returns; returns the state hash.
    fn execute(&mut self, turn: &TypedTurn<Order>) -> u64 {
        self.archers.execute(turn);
        self.outcome.turns += 1;
        let me = self.outcome.player;
        for record in &turn.records {
            match record {
                TypedRecord::Command { .. } => self.outcome.executed += 1,
                // Our own departure ends our session (the end says so); after a rejoin, the
                // replayed turns carry it as history.
                TypedRecord::Left(player) | TypedRecord::Joined(player) if player.0 == me => {}
                TypedRecord::Left(player) => {
                    self.gone.push(player.0);
                    (self.notices)(Notice::Left { player: player.0, turn: turn.turn.0 });
                }
                TypedRecord::Joined(player) if self.gone.contains(&player.0) => {
                    self.gone.retain(|&p| p != player.0);
                    (self.notices)(Notice::Rejoined { player: player.0, turn: turn.turn.0 });
                }
                TypedRecord::Joined(_) => {}
            }
        }
        let hash = self.archers.state_hash();
        self.outcome.final_state_hash = hash;
        hash
    }

    /// Keeps desync reports; tells of the host's waits.
    fn on_event(&mut self, event: Event) {
        let turn = self.outcome.turns.saturating_sub(1);
        match event {
            Event::Desync(report) => self
                .outcome
                .desyncs
                .push((report.turn.0, report.diverged.iter().map(|p| p.0).collect())),
            Event::Waiting(players) => {
                let players: Vec<u8> = players.iter().map(|p| p.0).collect();
                // One notice per wait, unless it names other players.
                if self.waiting_since.as_ref().is_none_or(|(_, named)| *named != players) {
                    let since = self.waiting_since.as_ref().map(|(at, _)| *at);
                    let at = since.unwrap_or_else(tokio::time::Instant::now);
                    self.waiting_since = Some((at, players.clone()));
                    (self.notices)(Notice::Waiting { players, turn });
                }
            }
            Event::StallEnded => {
                if let Some((since, _)) = self.waiting_since.take() {
                    (self.notices)(Notice::WaitOver { waited: since.elapsed(), turn });
                }
            }
            _ => {}
        }
    }
}
