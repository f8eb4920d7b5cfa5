//! Joins: the host's own player, new players in the lobby, players coming back after a
//! timeout (rejoin), and a new connection taking over a seat whose first connection was never
//! heard from.

use crate::bundle::Record;
use crate::link::Link;
use crate::types::{CommandSeq, Joined, PlayerId, Turn};
use crate::wire::{
    encode_join_reply, encode_join_reply_with_log, JoinAccept, JoinRefusal, JoinRequest, Rejoin,
};
use crate::PROTOCOL_VERSION;

use super::{
    refused, Host, HostEvent, JoinError, JoinResponse, LocalSeat, ObserveError, Peer, Seat,
};

impl Host {
    /// Seats the host's own player (a listen server). Before [`start`](Self::start) only.
    pub fn add_local_player(&mut self) -> Result<PlayerId, JoinRefusal> {
        if self.started {
            return Err(JoinRefusal::GameStarted);
        }
        let player = self.free_seat().ok_or(JoinRefusal::SessionFull)?;
        self.seats[player.0 as usize] =
            Seat::Local(LocalSeat { next_seq: CommandSeq(0), next_exec: Turn::ZERO });
        self.open[0].controls.push(Record::Joined(player));
        Ok(player)
    }

    /// Lets the host's own game, when the host does not play (a dedicated server), take every
    /// sealed turn through [`next_turn`](Self::next_turn) — to simulate the game, check its
    /// state, record it. Like a player's, that game is in the window: falling
    /// `turns.window_turns` turns behind holds the session back. Refused once the game started,
    /// or when the host already plays (its player takes the turns).
    pub fn observe_turns(&mut self) -> Result<(), ObserveError> {
        if self.started {
            return Err(ObserveError::GameStarted);
        }
        if self.local_player().is_some() {
            return Err(ObserveError::HostPlays);
        }
        self.observer = Some(Turn::ZERO);
        Ok(())
    }

    fn free_seat(&self) -> Option<PlayerId> {
        self.seats.iter().position(|seat| matches!(seat, Seat::Free)).map(|i| PlayerId(i as u8))
    }

    /// Handles a join request from the reliable stream of a new connection. On success the
    /// driver binds the connection to the returned player: from then on every datagram of that
    /// connection is handed in with that id, and no id inside a message is ever trusted.
    pub fn handle_join(&mut self, now_ms: u64, request: &[u8]) -> JoinResponse {
        let request = match JoinRequest::decode(request) {
            Ok(request) => request,
            Err(error) => {
                return JoinResponse {
                    reply: Some(encode_join_reply(&Err(JoinRefusal::Malformed))),
                    result: Err(JoinError::Malformed(error)),
                }
            }
        };
        if request.protocol_version != PROTOCOL_VERSION {
            return refused(JoinRefusal::VersionMismatch {
                host: PROTOCOL_VERSION,
                client: request.protocol_version,
            });
        }
        if request.game_data_hash != self.config.game_data_hash {
            return refused(JoinRefusal::GameDataMismatch {
                host: self.config.game_data_hash,
                client: request.game_data_hash,
            });
        }
        if request.heartbeat_ms != self.config.link.heartbeat_ms {
            return refused(JoinRefusal::HeartbeatMismatch {
                host: self.config.link.heartbeat_ms,
                client: request.heartbeat_ms,
            });
        }
        let Some(token) = self.tokens.iter().position(|&(token, _)| token == request.token) else {
            return match self.spectator_token(request.token) {
                Some(index) => self.join_spectator(now_ms, index),
                None => refused(JoinRefusal::BadToken),
            };
        };
        match self.tokens[token].1 {
            Some(player) => self.join_again(now_ms, player),
            None => self.join_new(now_ms, token),
        }
    }

    /// A first join with the unused token at `token`: the first free seat, in the lobby, or
    /// with `catch_up.late_join` in a running game (caught up as a returning player is).
    fn join_new(&mut self, now_ms: u64, token: usize) -> JoinResponse {
        if self.started && (!self.config.catch_up.late_join || self.ended) {
            return refused(JoinRefusal::GameStarted);
        }
        if self.started && self.rejoin_material().is_none() {
            return refused(JoinRefusal::RejoinUnavailable);
        }
        let Some(player) = self.free_seat() else {
            return refused(JoinRefusal::SessionFull);
        };
        self.tokens[token].1 = Some(player);
        let from = if self.started { self.next_seal } else { Turn::ZERO };
        self.seats[player.0 as usize] =
            Seat::Remote(Box::new(self.new_peer(now_ms, from, CommandSeq(0), 0)));
        self.open[0].controls.push(Record::Joined(player));
        self.push_event(HostEvent::PlayerJoined(player));
        let reply = if self.started {
            self.rejoin_reply(player, Some(CommandSeq(0)))
        } else {
            encode_join_reply(&Ok(self.accept(player, None)))
        };
        JoinResponse { reply: Some(reply), result: Ok(Joined::Player(player)) }
    }

    /// A join with a token that already took `player`'s seat.
    fn join_again(&mut self, now_ms: u64, player: PlayerId) -> JoinResponse {
        match self.seats[player.0 as usize] {
            Seat::Away { since_ms, next_seq, pauses_used } => {
                if now_ms.saturating_sub(since_ms)
                    > u64::from(self.config.catch_up.rejoin_window_ms)
                {
                    refused(JoinRefusal::RejoinExpired)
                } else if self.ended || self.rejoin_material().is_none() {
                    refused(JoinRefusal::RejoinUnavailable)
                } else {
                    self.rejoin(now_ms, player, next_seq, pauses_used)
                }
            }
            Seat::Revoked => refused(JoinRefusal::TokenRevoked),
            Seat::Gone if self.started => refused(JoinRefusal::RejoinUnavailable),
            // The seat's connection never sent a datagram: most likely this client's own
            // earlier attempt, whose reply was lost or too slow. The new connection takes
            // the seat over (with every sealed turn if the game has started).
            Seat::Remote(ref peer) if !peer.link.heard_from() => {
                let next_seq = peer.next_seq;
                self.take_over(now_ms, player, next_seq)
            }
            _ => refused(JoinRefusal::TokenUsed),
        }
    }

    /// The link to a newly seated player or spectator: our acks and theirs held back as the
    /// session says, and the join grace before the idle timeout applies (the client cannot
    /// send before our reply reaches it over the reliable stream).
    pub(super) fn new_link(&self, now_ms: u64) -> Link {
        let config = &self.config;
        let mut link =
            Link::new(now_ms, config, config.host_ack_delay_ms(), config.client_ack_delay_ms());
        link.await_first_datagram(now_ms + u64::from(config.link.join_grace_ms));
        link
    }

    fn new_peer(&self, now_ms: u64, from: Turn, next_seq: CommandSeq, pauses_used: u32) -> Peer {
        Peer {
            link: self.new_link(now_ms),
            turn_ack: from,
            next_exec: from,
            send_next: from,
            next_seq,
            commands_accepted: 0,
            cost_ms: 0,
            playout_ms: 0,
            hash_acked: None,
            pause_seq: None,
            pauses_used,
            notify_due: false,
            refusals: Default::default(),
        }
    }

    /// Takes a player back: the reply carries every sealed turn; live play resumes at the
    /// next one, whose `Joined` record tells every game the player is back. The window
    /// counts the returning player as caught up, so replaying the log is their own cost.
    fn rejoin(
        &mut self,
        now_ms: u64,
        player: PlayerId,
        next_seq: CommandSeq,
        pauses_used: u32,
    ) -> JoinResponse {
        let from = self.next_seal;
        self.seats[player.0 as usize] =
            Seat::Remote(Box::new(self.new_peer(now_ms, from, next_seq, pauses_used)));
        // Back before the turn carrying its `Left` was sealed: that turn no longer carries it,
        // and no game ever sees the player go (a `Left` and a `Joined` of one player in one
        // turn would end the returning client on its own departure).
        let controls = &mut self.open[0].controls;
        match controls.iter().position(|record| *record == Record::Left(player)) {
            Some(index) => {
                controls.remove(index);
            }
            None => controls.push(Record::Joined(player)),
        }
        self.push_event(HostEvent::PlayerRejoined(player));
        self.stats.rejoins += 1;
        let reply = self.rejoin_reply(player, Some(next_seq));
        JoinResponse { reply: Some(reply), result: Ok(Joined::Player(player)) }
    }

    /// A new connection replaces a seated one that was never heard from. Nothing changes for
    /// the other players: the seat never left the game.
    fn take_over(&mut self, now_ms: u64, player: PlayerId, next_seq: CommandSeq) -> JoinResponse {
        if self.ended || (self.started && self.rejoin_material().is_none()) {
            return refused(JoinRefusal::RejoinUnavailable);
        }
        let from = self.next_seal;
        self.seats[player.0 as usize] =
            Seat::Remote(Box::new(self.new_peer(now_ms, from, next_seq, 0)));
        self.push_event(HostEvent::PlayerRejoined(player));
        self.stats.rejoins += 1;
        let reply = self.rejoin_reply(player, (from > Turn::ZERO).then_some(next_seq));
        JoinResponse { reply: Some(reply), result: Ok(Joined::Player(player)) }
    }

    /// An acceptance for `player` that, with `next_seq`, carries what a game joining at the
    /// next sealed turn needs: the verified snapshot and the turns after it, or every turn.
    fn rejoin_reply(&self, player: PlayerId, next_seq: Option<CommandSeq>) -> Vec<u8> {
        let turns = self.next_seal.0;
        let material = next_seq.zip(self.rejoin_material());
        let Some((next_seq, (snapshot, log))) = material else {
            let none = std::iter::empty();
            return encode_join_reply_with_log(&Ok(self.accept(player, None)), &[], none);
        };
        let rejoin = Rejoin {
            turns,
            next_seq,
            snapshot: snapshot.map(|snapshot| (snapshot.turn, snapshot.hash)),
        };
        let state = snapshot.map_or(&[][..], |snapshot| &snapshot.state[..]);
        encode_join_reply_with_log(&Ok(self.accept(player, Some(rejoin))), state, log)
    }

    fn accept(&self, player: PlayerId, rejoin: Option<Rejoin>) -> JoinAccept {
        self.accept_fields(Joined::Player(player), rejoin)
    }

    /// The session's parameters for whoever `joined`.
    pub(super) fn accept_fields(&self, joined: Joined, rejoin: Option<Rejoin>) -> JoinAccept {
        JoinAccept {
            joined,
            turn_length_ms: self.pace.current.turn_length_ms,
            command_delay_turns: self.pace.current.command_delay_turns,
            turns_ahead_max: self.config.turns.window_turns,
            players_max: self.config.turns.players_max,
            commands_per_turn_max: self.config.budget.commands_per_turn_max,
            turn_bytes_per_player_max: self.config.budget.turn_bytes_per_player_max,
            command_bytes_max: self.config.budget.command_bytes_max,
            sync_interval_turns: self.config.sync.interval_turns,
            rejoin,
        }
    }

    /// The driver learned that `player`'s join reply reached the client (its transport
    /// acknowledged every byte). Optional: until the first datagram arrives, a new player is
    /// given `link.join_grace_ms`; with this call the usual idle timeout runs from delivery, so a
    /// client that dies right after joining is noticed as fast as any other.
    pub fn handle_join_delivered(&mut self, now_ms: u64, player: PlayerId) {
        if let Some(peer) = self.remote_mut(player) {
            peer.link.on_reply_delivered(now_ms);
        }
    }
}
