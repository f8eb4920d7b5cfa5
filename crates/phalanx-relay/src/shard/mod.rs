//! The sans-IO relay core: one [`Shard`] holds many matches and every connection to them, on
//! one socket's worth of datagrams. It reads no clock and touches no socket: the caller passes
//! each datagram in with the time, sends what the shard hands its [`Outbox`], and calls
//! [`Shard::handle_timeout`] when [`Shard::poll_timeout`] says. The relay's workers run one
//! shard each on a real socket; a simulation runs one on a simulated socket.
//!
//! Every match's and connection's timer lives in the shard's one hashed timing wheel
//! (milliseconds), so a shard with a thousand matches wakes once for whatever is due first,
//! not once per match.
//!
//! The wire is the `phalanx::udp` transport's, byte for byte: a client cannot tell a relay
//! from a host bound by `phalanx::Host`. A connection's first reliable message is its join
//! request; its token names the match it joins.

mod conn;
mod game;
mod slab;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;

use phalanx_proto::{
    encode_join_reply, HostEvent, JoinRefusal, JoinRequest, Joined, PlayerId, Readmit,
    SpectatorGone, CLOSE_LEFT, CLOSE_REMOVED, CLOSE_SHUTDOWN, PROTOCOL_VERSION,
};
use phalanx_udp::stream::{StreamConfig, ACK, SEGMENT};
use phalanx_udp::{
    mismatch, Dropped, HostKey, Outcome, Responder, Stream, KIND_CLOSE, KIND_DATAGRAM, MAX_PACKET,
};
use phalanx_wheel::HashedWheel;

use crate::api::{CreateError, MatchError, MatchId, MatchInfo, MatchSpec, StartPolicy};
use crate::metrics::Metrics;
use crate::{CommandRule, Limits};
use conn::{Conn, Phase, Wire};
use game::Game;
use slab::{Key, Slab};

/// Where a shard's datagrams go: the caller's socket.
pub trait Outbox {
    /// Sends `packet` to `to` now; `false` if it was not sent (counted as a drop).
    fn send(&mut self, to: SocketAddr, packet: &[u8]) -> bool;
}

impl Outbox for Vec<(SocketAddr, Vec<u8>)> {
    fn send(&mut self, to: SocketAddr, packet: &[u8]) -> bool {
        self.push((to, packet.to_vec()));
        true
    }
}

/// How long a refusal has to reach the client before its connection closes, milliseconds.
const REFUSAL_GRACE_MS: u64 = 2_000;
/// The most bytes of a join request.
const JOIN_BYTES_MAX: usize = 1_024;
/// Match events kept for [`Shard::poll_event`]; past it the oldest go (and are counted).
const EVENTS_MAX: usize = 4_096;

/// What a timer in the wheel is for.
#[derive(Clone, Copy, Debug)]
enum Due {
    Game(Key),
    Conn(Key),
}

/// The sans-IO relay core: many matches and every connection to them, behind one socket.
///
/// It reads no clock and touches no socket: the caller passes each datagram in with the time
/// ([`handle_datagram`](Self::handle_datagram)), sends what the shard hands its [`Outbox`],
/// and calls [`handle_timeout`](Self::handle_timeout) when [`poll_timeout`](Self::poll_timeout)
/// says. Times are milliseconds of the caller's clock. The relay's workers run one shard each on
/// a real socket; phalanx-sim runs one on a simulated socket.
///
/// Every match's and connection's timer lives in the shard's one hashed timing wheel, so a
/// shard with a thousand matches wakes once for whatever is due first, not once per match. The
/// wire is the `phalanx::udp` transport's, byte for byte: a client cannot tell a relay from a
/// host bound by `phalanx::Host`. A connection's first reliable message is its join request;
/// its token names the match it joins. Match events come out of
/// [`poll_event`](Self::poll_event).
pub struct Shard {
    limits: Limits,
    responder: Responder,
    conns: Slab<Conn>,
    /// Lookup only, never iterated: order never depends on it.
    by_addr: HashMap<SocketAddr, Key>,
    games: Slab<Game>,
    by_id: BTreeMap<MatchId, Key>,
    /// Lookup only, never iterated.
    tokens: HashMap<u64, Key>,
    wheel: HashedWheel<Due>,
    metrics: Metrics,
    wire: Wire,
    /// An opened packet's payload, reused.
    plain: Vec<u8>,
    /// A host's datagram, reused.
    datagram: Vec<u8>,
    events: VecDeque<(MatchId, HostEvent)>,
    draining: bool,
    /// The game's rule for commands, given to each match created.
    rule: Option<CommandRule>,
}

impl std::fmt::Debug for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shard")
            .field("matches", &self.games.len())
            .field("connections", &self.conns.len())
            .finish_non_exhaustive()
    }
}

impl Shard {
    /// A shard answering handshakes with `key`; `random` seeds its cookie secrets (32 bytes
    /// from the OS in a relay, from the seed in a simulation); `now` starts its clock.
    pub fn new(key: HostKey, random: [u8; 32], limits: Limits, now: u64) -> Shard {
        let wheel = HashedWheel::new(now, 4_096).expect("4,096 is a power of two");
        Shard {
            limits,
            responder: Responder::new(key, random),
            conns: Slab::default(),
            by_addr: HashMap::new(),
            games: Slab::default(),
            by_id: BTreeMap::new(),
            tokens: HashMap::new(),
            wheel,
            metrics: Metrics::default(),
            wire: Wire::default(),
            plain: Vec::with_capacity(MAX_PACKET),
            datagram: Vec::with_capacity(MAX_PACKET),
            events: VecDeque::new(),
            draining: false,
            rule: None,
        }
    }

    /// Sets the game's rule for the commands of every match created from now on (see
    /// [`CommandRule`]).
    pub fn set_command_rule(&mut self, rule: CommandRule) {
        self.rule = Some(rule);
    }

    /// What this shard counted, and holds now.
    pub fn metrics(&self) -> Metrics {
        let mut metrics = self.metrics;
        metrics.matches = self.games.len() as u64;
        metrics.connections = self.conns.len() as u64;
        metrics.players = self
            .games
            .keys()
            .filter_map(|key| self.games.get(key))
            .map(|game| game.players_connected().count() as u64)
            .sum();
        metrics
    }

    /// The next thing a match's host reported (a player joined, timed out, misbehaved, a
    /// desync, the end...), oldest first; the last 4,096 are kept
    /// ([`Metrics::events_dropped`] counts the others).
    pub fn poll_event(&mut self) -> Option<(MatchId, HostEvent)> {
        self.events.pop_front()
    }

    /// When [`handle_timeout`](Self::handle_timeout) is next due.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.wheel.next_deadline()
    }

    /// Fires every timer due by `now`: turn deadlines, retransmits, join deadlines, expiries.
    pub fn handle_timeout(&mut self, now: u64, out: &mut dyn Outbox) {
        while let Some(expired) = self.wheel.poll(now) {
            match expired.value {
                Due::Game(key) => {
                    if let Some(game) = self.games.get_mut(key) {
                        game.timer = None;
                        self.game_timeout(now, key, out);
                    }
                }
                Due::Conn(key) => {
                    if let Some(conn) = self.conns.get_mut(key) {
                        conn.timer = None;
                        self.conn_timeout(now, key, out);
                    }
                }
            }
        }
    }

    /// One datagram from `from`. Whatever it holds, it never panics; what is not a packet of
    /// the protocol is dropped and counted.
    pub fn handle_datagram(
        &mut self,
        now: u64,
        from: SocketAddr,
        packet: &[u8],
        out: &mut dyn Outbox,
    ) {
        self.metrics.datagrams_in += 1;
        self.metrics.bytes_in += packet.len() as u64;
        let Some(&first) = packet.first() else {
            self.metrics.drops.malformed += 1;
            return;
        };
        if packet.len() > MAX_PACKET {
            self.metrics.drops.malformed += 1;
            return;
        }
        let known = self.by_addr.get(&from).copied();
        match known {
            Some(key) if first & 0x80 != 0 => self.on_data(now, key, packet, out),
            None if first & 0x80 != 0 => match mismatch::at_udp_host(packet) {
                // A QUIC client: told at once that this is not a QUIC endpoint.
                mismatch::Foreign::Answer(negotiation) => {
                    self.metrics.quic_clients_answered += 1;
                    self.send_raw(from, &negotiation, out);
                }
                // Data from an address with no connection, or another QUIC long header.
                mismatch::Foreign::No | mismatch::Foreign::Ignore => {
                    self.metrics.drops.malformed += 1;
                }
            },
            _ => {
                let resend =
                    known.and_then(|key| self.conns.get(key)).and_then(|c| c.response.clone());
                match resend {
                    // The client repeats its initiation: the response was lost.
                    Some(response) => self.send_raw(from, &response, out),
                    None => self.on_handshake(now, from, packet, out),
                }
            }
        }
    }

    fn send_raw(&mut self, to: SocketAddr, packet: &[u8], out: &mut dyn Outbox) {
        if out.send(to, packet) {
            self.metrics.datagrams_out += 1;
            self.metrics.bytes_out += packet.len() as u64;
        } else {
            self.metrics.drops.send_failed += 1;
        }
    }

    fn on_handshake(&mut self, now: u64, from: SocketAddr, packet: &[u8], out: &mut dyn Outbox) {
        match self.responder.handle(from, packet, now) {
            Outcome::Reply(reply) => {
                self.metrics.cookie_replies += 1;
                self.send_raw(from, &reply, out);
            }
            Outcome::Join(request) => {
                let known = self.by_addr.get(&from).copied();
                if known.is_none() && self.conns.len() >= self.limits.connections_max {
                    self.metrics.drops.connections_full += 1;
                    return;
                }
                let Ok((channel, response)) = request.accept(&[]) else {
                    self.metrics.drops.handshake_refused += 1;
                    return;
                };
                self.send_raw(from, &response, out);
                if let Some(old) = known {
                    // The client restarted: its new connection replaces the old one, which
                    // the match forgets (its player may rejoin on the new one).
                    self.forget_conn(old);
                }
                let stream = Stream::new(self.stream_config());
                let deadline = now + self.limits.join_timeout_ms;
                let conn = Conn {
                    addr: from,
                    channel,
                    stream,
                    response: Some(response),
                    phase: Phase::Joining { deadline },
                    timer: None,
                };
                let key = self.conns.insert(conn);
                self.by_addr.insert(from, key);
                self.rearm_conn(key);
            }
            Outcome::Dropped(_) => self.metrics.drops.handshake_refused += 1,
        }
    }

    fn stream_config(&self) -> StreamConfig {
        StreamConfig {
            message_bytes_max: self.limits.upload_bytes_max.max(JOIN_BYTES_MAX),
            send_bytes_max: self.limits.join_reply_bytes_max,
            ..StreamConfig::default()
        }
    }

    fn on_data(&mut self, now: u64, key: Key, packet: &[u8], out: &mut dyn Outbox) {
        let Some(conn) = self.conns.get_mut(key) else { return };
        if let Err(dropped) = conn.channel.open_into(packet, &mut self.plain) {
            let drops = &mut self.metrics.drops;
            *match dropped {
                Dropped::Malformed => &mut drops.malformed,
                Dropped::Tampered => &mut drops.tampered,
                Dropped::Replayed => &mut drops.replayed,
                Dropped::TooOld => &mut drops.too_old,
            } += 1;
            return;
        }
        conn.response = None;
        let plain = std::mem::take(&mut self.plain);
        match plain.split_first() {
            Some((&KIND_DATAGRAM, rest)) => self.on_session_datagram(now, key, rest, out),
            Some((&(SEGMENT | ACK), _)) => self.on_stream(now, key, &plain, out),
            Some((&KIND_CLOSE, rest)) => {
                let code =
                    rest.get(..4).map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
                self.on_close(now, key, code, out);
            }
            _ => self.metrics.drops.malformed += 1,
        }
        self.plain = plain;
    }

    fn on_session_datagram(&mut self, now: u64, key: Key, datagram: &[u8], out: &mut dyn Outbox) {
        let Some(Phase::Seated { game, joined, .. }) = self.conns.get(key).map(|c| c.phase) else {
            return;
        };
        let Some(g) = self.games.get_mut(game) else { return };
        match joined {
            Joined::Player(player) => g.host.handle_datagram(now, player, datagram),
            Joined::Spectator(id) => g.host.handle_spectator_datagram(now, id, datagram),
        }
        self.flush_game(now, game, out);
    }

    fn on_stream(&mut self, now: u64, key: Key, packet: &[u8], out: &mut dyn Outbox) {
        let Some(conn) = self.conns.get_mut(key) else { return };
        // A bad segment is the stream's to count; the connection goes on.
        let _ = conn.stream.handle(now, packet);
        while let Some(message) = self.conns.get_mut(key).and_then(|c| c.stream.poll_message()) {
            self.on_message(now, key, &message, out);
        }
        self.after_stream(now, key, out);
    }

    /// Sends what the stream has due, and acts on a stream that went idle: a join reply
    /// delivered, a refusal delivered.
    fn after_stream(&mut self, now: u64, key: Key, out: &mut dyn Outbox) {
        let Some(conn) = self.conns.get_mut(key) else { return };
        self.wire.pump(now, conn, out, &mut self.metrics);
        let idle = conn.stream.is_idle();
        match conn.phase {
            Phase::Seated { game, joined: Joined::Player(player), delivered: false } if idle => {
                conn.phase =
                    Phase::Seated { game, joined: Joined::Player(player), delivered: true };
                if let Some(g) = self.games.get_mut(game) {
                    g.host.handle_join_delivered(now, player);
                    self.flush_game(now, game, out);
                }
            }
            Phase::Refusing { .. } if idle => return self.close_conn(key, CLOSE_REMOVED, out),
            _ => {}
        }
        self.rearm_conn(key);
    }

    fn on_message(&mut self, now: u64, key: Key, message: &[u8], out: &mut dyn Outbox) {
        let Some(phase) = self.conns.get(key).map(|c| c.phase) else { return };
        match phase {
            Phase::Joining { .. } => self.on_join(now, key, message, out),
            Phase::Seated { game, joined: Joined::Player(player), .. } => {
                if let Some(g) = self.games.get_mut(game) {
                    // A refused upload is counted by the host.
                    let _ = g.host.handle_upload(player, message);
                    self.flush_game(now, game, out);
                }
            }
            Phase::Seated { .. } | Phase::Refusing { .. } => {}
        }
    }

    fn on_join(&mut self, now: u64, key: Key, request: &[u8], out: &mut dyn Outbox) {
        let game = match JoinRequest::decode(request) {
            _ if request.len() > JOIN_BYTES_MAX => {
                Err(JoinRefusal::TooLarge { max: JOIN_BYTES_MAX as u32 })
            }
            Ok(r) if r.protocol_version != PROTOCOL_VERSION => Err(JoinRefusal::VersionMismatch {
                host: PROTOCOL_VERSION,
                client: r.protocol_version,
            }),
            Ok(r) => self.tokens.get(&r.token).copied().ok_or(JoinRefusal::BadToken),
            Err(_) => Err(JoinRefusal::Malformed),
        };
        let game = match game {
            Ok(game) => game,
            Err(refusal) => return self.refuse(now, key, &encode_join_reply(&Err(refusal)), out),
        };
        let Some(g) = self.games.get_mut(game) else { return };
        let response = g.host.handle_join(now, request);
        let joined = match response.result {
            Ok(joined) => joined,
            Err(_) => {
                let reply = response.reply.unwrap_or_default();
                return self.refuse(now, key, &reply, out);
            }
        };
        self.metrics.joins += 1;
        g.expires_ms = None;
        if joined.player().is_some() {
            g.empty_since = None;
        }
        let old = g.seats.insert(joined, key);
        let full = g.players_connected().count() == usize::from(g.players);
        if full && g.start == StartPolicy::WhenFull && !g.host.is_started() {
            g.host.start(now);
        }
        if let Some(old) = old.filter(|&old| old != key) {
            self.close_conn(old, CLOSE_REMOVED, out);
        }
        if let Some(conn) = self.conns.get_mut(key) {
            conn.phase = Phase::Seated { game, joined, delivered: false };
            if let Some(reply) = response.reply {
                // The stream's send buffer holds the largest join reply: this cannot fail.
                let _ = conn.stream.send(&reply);
            }
        }
        self.flush_game(now, game, out);
        self.after_stream(now, key, out);
    }

    fn refuse(&mut self, now: u64, key: Key, reply: &[u8], out: &mut dyn Outbox) {
        self.metrics.joins_refused += 1;
        let Some(conn) = self.conns.get_mut(key) else { return };
        conn.phase = Phase::Refusing { deadline: now + REFUSAL_GRACE_MS };
        let _ = conn.stream.send(reply);
        self.after_stream(now, key, out);
    }

    fn on_close(&mut self, now: u64, key: Key, code: u32, out: &mut dyn Outbox) {
        let phase = self.conns.get(key).map(|c| c.phase);
        self.forget_conn(key);
        let Some(Phase::Seated { game, joined, .. }) = phase else { return };
        let Some(g) = self.games.get_mut(game) else { return };
        if code == CLOSE_LEFT {
            // Seated and current: removal cannot fail. After the last turn it only stops the
            // host waiting for the player.
            match joined {
                Joined::Player(player) => {
                    let _ = g.host.remove(now, player, Readmit::Allow);
                }
                Joined::Spectator(id) => {
                    g.host.remove_spectator(id);
                }
            }
        }
        self.flush_game(now, game, out);
    }

    /// Drops a connection without a word to its peer, and unseats it from its match if it is
    /// still the seat's connection.
    fn forget_conn(&mut self, key: Key) {
        let Some(conn) = self.conns.remove(key) else { return };
        if self.by_addr.get(&conn.addr) == Some(&key) {
            self.by_addr.remove(&conn.addr);
        }
        if let Some((handle, _)) = conn.timer {
            self.wheel.discard(handle);
        }
        if let Phase::Seated { game, joined, .. } = conn.phase {
            if let Some(g) = self.games.get_mut(game) {
                if g.seats.get(&joined) == Some(&key) {
                    g.seats.remove(&joined);
                }
            }
        }
    }

    /// Tells the peer the connection is closed, then forgets it.
    fn close_conn(&mut self, key: Key, code: u32, out: &mut dyn Outbox) {
        if let Some(conn) = self.conns.get_mut(key) {
            self.wire.close(conn, code, out, &mut self.metrics);
        }
        self.forget_conn(key);
    }

    fn conn_timeout(&mut self, now: u64, key: Key, out: &mut dyn Outbox) {
        let Some(conn) = self.conns.get(key) else { return };
        match conn.phase {
            Phase::Joining { deadline } | Phase::Refusing { deadline } if deadline <= now => {
                self.close_conn(key, CLOSE_REMOVED, out);
            }
            _ => self.after_stream(now, key, out),
        }
    }

    fn rearm_conn(&mut self, key: Key) {
        let Some(conn) = self.conns.get_mut(key) else { return };
        let wanted = conn.poll_timeout();
        conn.timer = rearm(&mut self.wheel, conn.timer, wanted, Due::Conn(key));
    }

    fn rearm_game(&mut self, key: Key) {
        let Some(game) = self.games.get_mut(key) else { return };
        let wanted = game.poll_timeout(self.limits.empty_grace_ms);
        game.timer = rearm(&mut self.wheel, game.timer, wanted, Due::Game(key));
    }

    fn game_timeout(&mut self, now: u64, key: Key, out: &mut dyn Outbox) {
        let Some(game) = self.games.get_mut(key) else { return };
        if game.expires_ms.is_some_and(|at| at <= now) {
            self.metrics.matches_expired += 1;
            return self.free_game(key, CLOSE_SHUTDOWN, out);
        }
        if game.free_by_ms.is_some_and(|at| at <= now) {
            self.metrics.matches_finished += 1;
            return self.free_game(key, CLOSE_SHUTDOWN, out);
        }
        if game.empty_since.is_some_and(|since| since + self.limits.empty_grace_ms <= now) {
            game.empty_since = None;
            // Nobody is left to play: the match ends (freed at once: nobody waits for it).
            let _ = game.host.end(now, crate::END_EMPTY);
            self.metrics.matches_finished += 1;
            return self.free_game(key, CLOSE_SHUTDOWN, out);
        }
        let due = game.host.next_seal_at_ms().filter(|&due| due <= now);
        let sealed = game.host.stats().turns_sealed;
        game.host.handle_timeout(now);
        if let Some(due) = due {
            if game.host.stats().turns_sealed > sealed {
                game.lateness.record(now - due);
                self.metrics.seal_lateness.record(now - due);
            }
        }
        let last = game.turns_max.is_some_and(|max| game.host.next_seal().0 >= max);
        if last && !game.host.is_ended() {
            // Its length is up: the end goes out in the next turn. Started and not ended:
            // this cannot fail.
            let _ = game.host.end(now, 0);
        }
        self.flush_game(now, key, out);
    }

    /// Sends every datagram the match's host has, acts on its events, frees it once it is
    /// finished, and re-arms its timer.
    fn flush_game(&mut self, now: u64, key: Key, out: &mut dyn Outbox) {
        let Some(game) = self.games.get_mut(key) else { return };
        loop {
            let to = match game.host.poll_transmit(now, &mut self.datagram) {
                Some(player) => Joined::Player(player),
                None => match game.host.poll_transmit_spectators(now, &mut self.datagram) {
                    Some(id) => Joined::Spectator(id),
                    None => break,
                },
            };
            if let Some(conn) = game.seats.get(&to).and_then(|&c| self.conns.get_mut(c)) {
                self.wire.datagram(conn, &self.datagram, out, &mut self.metrics);
            }
        }
        let mut gone = Vec::new();
        while let Some(event) = game.host.poll_event() {
            if self.events.len() >= EVENTS_MAX {
                self.events.pop_front();
                self.metrics.events_dropped += 1;
            }
            self.events.push_back((game.id, event.clone()));
            match event {
                HostEvent::CommandRefused { .. } => self.metrics.commands_refused += 1,
                HostEvent::PlayerTimedOut(player)
                | HostEvent::PlayerMisbehaved(player)
                | HostEvent::PlayerRemoved(player) => gone.push(Joined::Player(player)),
                HostEvent::SpectatorLeft(id, why)
                    if !matches!(why, SpectatorGone::Replaced | SpectatorGone::Left) =>
                {
                    gone.push(Joined::Spectator(id));
                }
                _ => {}
            }
        }
        let closed: Vec<Key> = gone.iter().filter_map(|joined| game.seats.remove(joined)).collect();
        for conn in closed {
            self.close_conn(conn, CLOSE_REMOVED, out);
        }
        let Some(game) = self.games.get_mut(key) else { return };
        // Over: every player holds the last turn, or nobody is left to wait for.
        if game.host.is_finished() || (game.host.is_ended() && game.seats.is_empty()) {
            self.metrics.matches_finished += 1;
            return self.free_game(key, CLOSE_SHUTDOWN, out);
        }
        if game.host.is_ended() && game.free_by_ms.is_none() {
            game.free_by_ms = Some(now + self.limits.end_grace_ms);
        }
        let started = game.host.is_started();
        if started && game.empty_since.is_none() && game.players_connected().next().is_none() {
            game.empty_since = Some(now);
        }
        self.rearm_game(key);
    }

    /// Closes every connection of the match with `code` and forgets it.
    fn free_game(&mut self, key: Key, code: u32, out: &mut dyn Outbox) {
        let Some(game) = self.games.remove(key) else { return };
        if let Some((handle, _)) = game.timer {
            self.wheel.discard(handle);
        }
        for token in &game.tokens {
            self.tokens.remove(token);
        }
        self.by_id.remove(&game.id);
        for &conn in game.seats.values() {
            self.close_conn(conn, code, out);
        }
    }

    /// Creates a match with the given id and tokens (one a player, then one a spectator).
    pub fn create_match(
        &mut self,
        now: u64,
        id: MatchId,
        spec: &MatchSpec,
        tokens: &[u64],
    ) -> Result<(), CreateError> {
        if self.draining {
            return Err(CreateError::Draining);
        }
        if self.games.len() >= self.limits.matches_max {
            return Err(CreateError::Full { max: self.limits.matches_max });
        }
        let max = self.limits.players_max;
        if spec.players == 0 || spec.players > max || spec.spectators > max {
            return Err(CreateError::Players { asked: spec.players.max(spec.spectators), max });
        }
        let wanted = usize::from(spec.players) + usize::from(spec.spectators);
        if tokens.len() != wanted {
            return Err(CreateError::Tokens(format!("{} tokens for {wanted} seats", tokens.len())));
        }
        if let Some(used) = tokens.iter().find(|t| self.tokens.contains_key(t)) {
            return Err(CreateError::Tokens(format!("token {used} is in use")));
        }
        if self.by_id.contains_key(&id) {
            return Err(CreateError::Tokens(format!("match {id} exists")));
        }
        let (players, spectators) = tokens.split_at(usize::from(spec.players));
        let mut session = spec.session.clone();
        session.turns.players_max = spec.players;
        let mut host = phalanx_proto::Host::new(session, players)
            .map_err(|error| CreateError::Config(error.to_string()))?;
        if !spectators.is_empty() {
            host.allow_spectators(spectators).map_err(|e| CreateError::Config(e.to_string()))?;
        }
        if let Some(rule) = self.rule.clone() {
            host.set_command_rule(move |player, payload| rule.admits(id, player, payload));
        }
        let game = Game {
            id,
            host,
            seats: BTreeMap::new(),
            tokens: tokens.to_vec(),
            players: spec.players,
            start: spec.start,
            turns_max: spec.turns_max,
            created_ms: now,
            expires_ms: Some(now + self.limits.join_window_ms),
            empty_since: None,
            free_by_ms: None,
            lateness: Default::default(),
            timer: None,
        };
        let key = self.games.insert(game);
        for &token in tokens {
            self.tokens.insert(token, key);
        }
        self.by_id.insert(id, key);
        self.metrics.matches_created += 1;
        self.rearm_game(key);
        Ok(())
    }

    fn game_key(&self, id: MatchId) -> Result<Key, MatchError> {
        self.by_id.get(&id).copied().ok_or(MatchError::UnknownMatch(id))
    }

    /// Every match, in id order.
    pub fn list(&self, now: u64) -> Vec<MatchInfo> {
        let games = self.by_id.values().filter_map(|&key| self.games.get(key));
        games.map(|game| game.info(now)).collect()
    }

    /// One match.
    pub fn inspect(&self, now: u64, id: MatchId) -> Result<MatchInfo, MatchError> {
        let key = self.game_key(id)?;
        self.games.get(key).map(|game| game.info(now)).ok_or(MatchError::UnknownMatch(id))
    }

    /// Starts a match whose [`StartPolicy`] is `Manual` (or a `WhenFull` one early).
    pub fn start_match(
        &mut self,
        now: u64,
        id: MatchId,
        out: &mut dyn Outbox,
    ) -> Result<(), MatchError> {
        let key = self.game_key(id)?;
        let game = self.games.get_mut(key).ok_or(MatchError::UnknownMatch(id))?;
        if game.host.is_started() {
            return Err(MatchError::Started);
        }
        game.host.start(now);
        self.flush_game(now, key, out);
        Ok(())
    }

    /// Ends a match with the game's `code`: the end goes out in the next sealed turn (which
    /// is returned), and the match is freed once every player holds it. A match not started
    /// is closed at once (`None`).
    pub fn end_match(
        &mut self,
        now: u64,
        id: MatchId,
        code: u32,
        out: &mut dyn Outbox,
    ) -> Result<Option<phalanx_proto::Turn>, MatchError> {
        let key = self.game_key(id)?;
        let game = self.games.get_mut(key).ok_or(MatchError::UnknownMatch(id))?;
        if !game.host.is_started() {
            // Nothing to end: nobody plays yet. The lobby is closed.
            self.metrics.matches_finished += 1;
            self.free_game(key, CLOSE_SHUTDOWN, out);
            return Ok(None);
        }
        let last = game.host.end(now, code).map_err(|_| MatchError::Ended)?;
        self.flush_game(now, key, out);
        Ok(Some(last))
    }

    /// Removes a player from a match; with [`Readmit::Never`] their token is revoked.
    pub fn kick(
        &mut self,
        now: u64,
        id: MatchId,
        player: PlayerId,
        readmit: Readmit,
        out: &mut dyn Outbox,
    ) -> Result<(), MatchError> {
        let key = self.game_key(id)?;
        let game = self.games.get_mut(key).ok_or(MatchError::UnknownMatch(id))?;
        game.host.remove(now, player, readmit).map_err(|_| MatchError::NotSeated(player))?;
        self.flush_game(now, key, out);
        Ok(())
    }

    /// Takes no new match from now on ([`CreateError::Draining`]).
    pub fn drain(&mut self) {
        self.draining = true;
    }

    /// Ends every running match with `code` and frees every match not started.
    pub fn end_all(&mut self, now: u64, code: u32, out: &mut dyn Outbox) {
        let ids: Vec<MatchId> = self.by_id.keys().copied().collect();
        for id in ids {
            let _ = self.end_match(now, id, code, out);
        }
    }

    /// Frees every match at once, closing its connections (a relay's last act).
    pub fn close_all(&mut self, out: &mut dyn Outbox) {
        let keys: Vec<Key> = self.by_id.values().copied().collect();
        for key in keys {
            self.metrics.matches_finished += 1;
            self.free_game(key, CLOSE_SHUTDOWN, out);
        }
    }

    /// Matches held.
    pub fn matches(&self) -> usize {
        self.games.len()
    }
}

/// Moves a timer to `wanted` (starting, moving or stopping it); a deadline already past is
/// due at the wheel's now.
fn rearm(
    wheel: &mut HashedWheel<Due>,
    timer: Option<(phalanx_wheel::TimerHandle, u64)>,
    wanted: Option<u64>,
    due: Due,
) -> Option<(phalanx_wheel::TimerHandle, u64)> {
    let wanted = wanted.map(|at| at.max(wheel.now()));
    match (timer, wanted) {
        (Some((handle, at)), Some(wanted)) if at == wanted => Some((handle, at)),
        (Some((handle, _)), Some(wanted)) => match wheel.reset(handle, wanted) {
            Ok(()) => Some((handle, wanted)),
            Err(_) => wheel.insert(wanted, due).ok().map(|h| (h, wanted)),
        },
        (None, Some(wanted)) => wheel.insert(wanted, due).ok().map(|h| (h, wanted)),
        (Some((handle, _)), None) => {
            wheel.discard(handle);
            None
        }
        (None, None) => None,
    }
}
