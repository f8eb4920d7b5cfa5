//! What a session tells the game, whatever its role: one flat enum.

use std::sync::Arc;

use phalanx_proto::{
    ClientEvent, CommandSeq, DesyncBundle, DesyncReport, EndCause, EndReason, HostEvent, Pace,
    PauseBy, PlayerId, SnapshotRejection, SpectatorGone, SpectatorId, Turn,
};

/// Something a session tells the game ([`Session::try_event`](crate::Session::try_event)).
///
/// One enum for every role: a frame loop matches `Event::Desync` once and sees a listen
/// server's own desync and a client's alike. Each variant says which roles raise it; the
/// others never do.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// Every role: a check turn's state hashes differ (the report names every hash and who
    /// diverged). Raised on the same turn everywhere.
    Desync(DesyncReport),
    /// Every role: the host is waiting for these players (their acknowledgements are a window
    /// behind).
    Waiting(Vec<PlayerId>),
    /// Every role: the stall announced by `Waiting` is over.
    StallEnded,
    /// Every role: the pace changed (turn length, command delay) from the next turn on.
    PaceChanged(Pace),
    /// Every role: the game pauses after this turn.
    Paused(PauseBy),
    /// Every role: the game resumed.
    Resumed(PauseBy),
    /// Every role: the session is over (the last event it raises).
    Ended(EndReason),
    /// A client: one of its commands reached the host after its stamped turn was sealed and
    /// executes at a later turn. Nothing was lost.
    CommandLate {
        /// The command.
        seq: CommandSeq,
        /// The turn it was stamped for.
        stamped: Turn,
        /// The turn it executes at.
        executed: Turn,
    },
    /// A host: a player joined; its `Joined` record is in the next sealed turn.
    PlayerJoined(PlayerId),
    /// A host: a player came back on a new connection (after a crash, a timeout or a leave
    /// within the rejoin window).
    PlayerRejoined(PlayerId),
    /// A host: a player's connection went silent past `link.idle_timeout_ms`; it leaves at the
    /// next sealed turn.
    PlayerTimedOut(PlayerId),
    /// A host: a player sent too many malformed datagrams or refused commands; it leaves at
    /// the next sealed turn.
    PlayerMisbehaved(PlayerId),
    /// A host: the game's [`CommandRule`](crate::CommandRule) refused a client's command (never
    /// sealed; an offence of the player's). A client: the host will never seal one of ours
    /// (its rule refused it, or its turns had no room); no game executes it, and a
    /// speculating game drops it ([`Speculation::refused`](crate::speculate::Speculation::refused)).
    CommandRefused {
        /// Whose.
        player: PlayerId,
        /// Its sequence number.
        seq: CommandSeq,
    },
    /// A host: a player was removed (kicked, or it left on purpose); it leaves at the next
    /// sealed turn.
    PlayerRemoved(PlayerId),
    /// A host: a snapshot was verified and kept for rejoins.
    SnapshotStored {
        /// The check turn it follows.
        turn: Turn,
        /// Who gave it (`None`: the host's own game).
        from: Option<PlayerId>,
        /// The state's size.
        bytes: usize,
    },
    /// A host: a snapshot was not kept.
    SnapshotRejected {
        /// The check turn it follows.
        turn: Turn,
        /// Who gave it (`None`: the host's own game).
        from: Option<PlayerId>,
        /// Why.
        reason: SnapshotRejection,
    },
    /// A host: a spectator joined.
    SpectatorJoined(SpectatorId),
    /// A host: a spectator left.
    SpectatorLeft(SpectatorId, SpectatorGone),
    /// A host: a spectator's state hash at a check turn differs from the players' reference.
    SpectatorDesync {
        /// Who.
        spectator: SpectatorId,
        /// The check turn.
        turn: Turn,
        /// Its hash.
        hash: u64,
        /// The players' reference hash.
        reference: u64,
    },
    /// A host: a desync's first divergent turn, from the players' per-turn hashes.
    DesyncPinned {
        /// The check turn whose hashes differed.
        check_turn: Turn,
        /// The first turn after which a diverged player's state differed from the reference.
        first_turn: Turn,
        /// The diverged players whose state differed by then.
        players: Vec<PlayerId>,
        /// Whether the turn before `first_turn` was compared and agreed.
        exact: bool,
    },
    /// A host: both states after a pinned desync's first divergent turn; name what differs
    /// with [`DesyncBundle::diff`] and the game's inspection hook.
    DesyncDiagnosed(Arc<DesyncBundle>),
}

/// How a session ended, from the host's record of it.
pub(crate) fn end_reason(cause: EndCause) -> EndReason {
    match cause {
        EndCause::Desync => EndReason::Desync,
        EndCause::Finished { code } => EndReason::Finished { code },
    }
}

impl From<ClientEvent> for Event {
    fn from(event: ClientEvent) -> Event {
        match event {
            ClientEvent::CommandLate { seq, stamped, executed } => {
                Event::CommandLate { seq, stamped, executed }
            }
            ClientEvent::CommandRefused { player, seq } => Event::CommandRefused { player, seq },
            ClientEvent::Ended(reason) => Event::Ended(reason),
            ClientEvent::Desync(report) => Event::Desync(report),
            ClientEvent::Waiting(players) => Event::Waiting(players),
            ClientEvent::StallEnded => Event::StallEnded,
            ClientEvent::PaceChanged(pace) => Event::PaceChanged(pace),
            ClientEvent::Paused(by) => Event::Paused(by),
            ClientEvent::Resumed(by) => Event::Resumed(by),
        }
    }
}

impl From<HostEvent> for Event {
    fn from(event: HostEvent) -> Event {
        match event {
            HostEvent::PlayerJoined(player) => Event::PlayerJoined(player),
            HostEvent::PlayerRejoined(player) => Event::PlayerRejoined(player),
            HostEvent::PlayerTimedOut(player) => Event::PlayerTimedOut(player),
            HostEvent::PlayerMisbehaved(player) => Event::PlayerMisbehaved(player),
            HostEvent::CommandRefused { player, seq } => Event::CommandRefused { player, seq },
            HostEvent::PlayerRemoved(player) => Event::PlayerRemoved(player),
            HostEvent::Desync(report) => Event::Desync(report),
            HostEvent::Waiting(players) => Event::Waiting(players),
            HostEvent::StallEnded => Event::StallEnded,
            HostEvent::PaceChanged(pace) => Event::PaceChanged(pace),
            HostEvent::Paused(by) => Event::Paused(by),
            HostEvent::Resumed(by) => Event::Resumed(by),
            HostEvent::Ended(cause) => Event::Ended(end_reason(cause)),
            HostEvent::SnapshotStored { turn, from, bytes } => {
                Event::SnapshotStored { turn, from, bytes }
            }
            HostEvent::SnapshotRejected { turn, from, reason } => {
                Event::SnapshotRejected { turn, from, reason }
            }
            HostEvent::SpectatorJoined(id) => Event::SpectatorJoined(id),
            HostEvent::SpectatorLeft(id, why) => Event::SpectatorLeft(id, why),
            HostEvent::DesyncPinned { check_turn, first_turn, players, exact } => {
                Event::DesyncPinned { check_turn, first_turn, players, exact }
            }
            HostEvent::DesyncDiagnosed(bundle) => Event::DesyncDiagnosed(bundle),
            HostEvent::SpectatorDesync { spectator, turn, hash, reference } => {
                Event::SpectatorDesync { spectator, turn, hash, reference }
            }
        }
    }
}
