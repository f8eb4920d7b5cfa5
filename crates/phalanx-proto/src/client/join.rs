//! Joining (the host's reply, a rejoin's catch-up) and snapshots: restoring one after a
//! rejoin, and giving one when the host asks (see `crate::snapshot`).

use bytes::Bytes;

use crate::bundle::DesyncReport;
use crate::bundle::TurnBundle;
use crate::config::SessionConfig;
use crate::link::{Link, Repeat};
use crate::pace::Pace;
use crate::snapshot::{Snapshot, SnapshotError};
use crate::types::{Joined, PlayerId, Turn};
use crate::wire::{
    decode_join_reply_parts, decode_rejoin_log, encode_hashes_upload, encode_snapshot_upload,
    DecodeError, JoinAccept, Limits,
};

use super::{playout::Playout, Client, ClientJoinError, State};

impl Client {
    /// Handles the host's join reply. On success the client is running as the returned player,
    /// or watching as a spectator (it executes every turn but cannot submit).
    ///
    /// After a rejoin ([`is_catching_up`](Self::is_catching_up)) the game catches up first:
    /// with a snapshot, it restores [`take_restore`](Self::take_restore)'s state and
    /// [`next_turn`](Self::next_turn) hands out the turns after it; without one,
    /// [`next_turn`](Self::next_turn) hands out every turn from turn 0, for a game restarted
    /// from its initial state to replay. Live turns follow.
    pub fn handle_join_reply(
        &mut self,
        now_ms: u64,
        reply: &[u8],
    ) -> Result<Joined, ClientJoinError> {
        if !matches!(self.state, State::Joining) {
            return Err(ClientJoinError::AlreadyJoined);
        }
        let (accept, parts) = decode_join_reply_parts(reply).map_err(ClientJoinError::Malformed)?;
        let accept = accept.map_err(ClientJoinError::Refused)?;
        let config = self.config_from(&accept)?;
        self.limits = Limits::new(&config);
        if let Some(rejoin) = accept.rejoin {
            let first = rejoin.first_turn();
            let max = self.config.catch_up.snapshot_bytes_max;
            if parts.state.len() > max as usize {
                return Err(ClientJoinError::Malformed(DecodeError::TooLarge {
                    field: "snapshot bytes",
                    value: parts.state.len() as u64,
                    max: max.into(),
                }));
            }
            let bundles = decode_rejoin_log(parts.log, rejoin.turns - first, &self.limits)
                .map_err(ClientJoinError::Malformed)?;
            self.catch_up = bundles
                .into_iter()
                .enumerate()
                // Replayed at once; their lengths are the pace at the rejoin.
                .map(|(index, records)| TurnBundle {
                    turn: Turn(first + index as u32),
                    records,
                    length_ms: accept.turn_length_ms,
                })
                .collect();
            self.restore = rejoin.snapshot.map(|(turn, hash)| Snapshot {
                turn,
                hash,
                state: Bytes::copy_from_slice(parts.state),
            });
            self.next_exec = Turn(rejoin.turns);
            self.next_seq = rejoin.next_seq;
            self.send_next = rejoin.next_seq;
        }
        self.pace = Pace {
            turn_length_ms: accept.turn_length_ms,
            command_delay_turns: accept.command_delay_turns,
        };
        self.playout = Playout::configured(&config.playout, accept.turn_length_ms);
        self.config = config;
        self.buffered.resize(self.config.turns.window_turns as usize, None);
        // (The host acknowledges our commands in the next bundle it sends: up to a turn.)
        let mut link = Box::new(Link::new(
            now_ms,
            &self.config,
            self.config.link.ack_delay_ms,
            self.config.turns.length_ms,
        ));
        // Say hello at once: until the host hears a datagram from us it holds our seat on the
        // join grace, and another join with our token could take it over.
        link.send_soon();
        // Commands are rare and late ones cost a whole turn of latency: repeat them on any
        // link that lost lately (always under the quiet relay), whatever the threshold for
        // the host's bundles.
        link.set_repeat(if self.config.is_quiet() { Repeat::Always } else { Repeat::AtLoss(0) });
        self.link = Some(link);
        self.state = State::Running(match accept.joined {
            Joined::Player(player) => player,
            // No record names a spectator: player ids are below 64.
            Joined::Spectator(_) => PlayerId(u8::MAX),
        });
        self.spectator = accept.joined.spectator();
        Ok(accept.joined)
    }

    /// Our local config with the host's turn pipeline settings, checked.
    fn config_from(&self, accept: &JoinAccept) -> Result<SessionConfig, ClientJoinError> {
        let mut config = self.config.clone();
        config.turns.length_ms = accept.turn_length_ms;
        config.turns.length_ms_max = config.turns.length_ms_max.max(accept.turn_length_ms);
        config.turns.command_delay_turns = accept.command_delay_turns;
        config.turns.command_delay_turns_max =
            config.turns.command_delay_turns_max.max(accept.command_delay_turns);
        config.turns.window_turns = accept.turns_ahead_max;
        config.turns.players_max = accept.players_max;
        config.budget.commands_per_turn_max = accept.commands_per_turn_max;
        config.budget.turn_bytes_per_player_max = accept.turn_bytes_per_player_max;
        config.budget.command_bytes_max = accept.command_bytes_max;
        config.sync.interval_turns = accept.sync_interval_turns;
        config.validate().map_err(ClientJoinError::BadParameters)?;
        if accept.joined.player().is_some_and(|player| player.0 >= config.turns.players_max) {
            return Err(ClientJoinError::Malformed(DecodeError::Invalid("player")));
        }
        Ok(config)
    }

    /// After a rejoin through a snapshot: the game's state after the snapshot's turn, for the
    /// game to restore (deserialize it in place of its state) before it executes anything
    /// more. Until it is taken, [`next_turn`](Self::next_turn) hands out nothing; afterwards
    /// it hands out the turns after the snapshot's, then live ones. The game should check
    /// its restored state's hash against [`Snapshot::hash`]: the host verified that hash
    /// against every player's.
    pub fn take_restore(&mut self) -> Option<Snapshot> {
        self.restore.take()
    }

    /// Whether the host asks our game for a snapshot of its state after `turn`: call it
    /// after executing each turn, and if so, [`offer_snapshot`](Self::offer_snapshot).
    pub fn wants_snapshot(&self, turn: Turn) -> bool {
        self.snapshot_wanted == Some(turn)
    }

    /// Gives the host the game's state after `turn` (serialized by the game) and its state
    /// hash there, as asked ([`wants_snapshot`](Self::wants_snapshot)). The bytes wait in
    /// [`poll_upload`](Self::poll_upload) for the driver.
    pub fn offer_snapshot(
        &mut self,
        turn: Turn,
        hash: u64,
        state: &[u8],
    ) -> Result<(), SnapshotError> {
        if self.snapshot_wanted != Some(turn) {
            return Err(SnapshotError::NotWanted { turn });
        }
        let max = self.config.catch_up.snapshot_bytes_max;
        if state.len() > max as usize {
            self.snapshot_wanted = None;
            return Err(SnapshotError::TooLarge { len: state.len(), max });
        }
        self.snapshot_wanted = None;
        self.push_upload(encode_snapshot_upload(turn, hash, state));
        Ok(())
    }

    /// The next upload for the driver to send on a new reliable stream to the host — a
    /// snapshot ([`offer_snapshot`](Self::offer_snapshot)), or the turn hashes a desync asks
    /// for — which the host reads with [`Host::handle_upload`](crate::Host::handle_upload).
    pub fn poll_upload(&mut self) -> Option<Vec<u8>> {
        self.uploads.pop_front()
    }

    /// Queues an upload; past two waiting, the oldest goes (a driver that never sends them
    /// must not grow the client).
    pub(super) fn push_upload(&mut self, bytes: Vec<u8>) {
        if self.uploads.len() >= 2 {
            self.uploads.pop_front();
        }
        self.uploads.push_back(bytes);
    }

    /// Keeps the game's hash after `turn` for a desync's forensics.
    pub(super) fn keep_turn_hash(&mut self, turn: Turn, hash: u64) {
        if self.turn_hashes.back().is_some_and(|&(last, _)| last >= turn) {
            return;
        }
        if self.turn_hashes.len() >= self.forensics_keep() {
            self.turn_hashes.pop_front();
        }
        self.turn_hashes.push_back((turn, hash));
    }

    /// A desync was reported for a check turn we reported: send the host our hashes of the
    /// turns since the check turn before it, the contiguous run we still hold.
    pub(super) fn send_turn_hashes(&mut self, report: &DesyncReport) {
        let me = self.player();
        if !report.hashes.iter().any(|&(who, _)| Some(who) == me) {
            return;
        }
        let check = report.turn;
        let first = Turn(check.0.saturating_sub(self.config.sync.interval_turns.max(1) - 1));
        let run: Vec<(Turn, u64)> = self
            .turn_hashes
            .iter()
            .copied()
            .filter(|&(turn, _)| turn >= first && turn <= check)
            .collect();
        let contiguous = run.windows(2).all(|pair| pair[1].0 == pair[0].0.next());
        // A run that ends at the check turn and says more than its hash (a game that reports
        // only check turns has nothing to send).
        let ends = run.last().is_some_and(|&(last, _)| last == check);
        let Some(&(start, _)) = run.first().filter(|_| contiguous && ends && run.len() > 1) else {
            return;
        };
        let hashes: Vec<u64> = run.iter().map(|&(_, hash)| hash).collect();
        self.push_upload(encode_hashes_upload(check, start, &hashes));
        self.hold_states(check, run);
    }

    /// The host asked for a snapshot of `turn` (in a datagram's extras).
    pub(super) fn on_snapshot_wanted(&mut self, turn: Turn) {
        // Only a turn the game has yet to execute can still be given.
        if turn >= self.next_exec() && self.snapshot_wanted < Some(turn) {
            self.snapshot_wanted = Some(turn);
        }
    }
}
