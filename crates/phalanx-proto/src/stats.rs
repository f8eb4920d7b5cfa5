//! Counters and high-water marks. Plain data: read them, diff them, log them.

/// Transport counters of one link (one direction pair of a connection).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LinkStats {
    /// Smoothed round-trip time, once sampled.
    pub rtt_smoothed_ms: Option<u64>,
    /// Smallest round-trip time seen.
    pub rtt_min_ms: Option<u64>,
    /// Current retransmit timeout.
    pub rto_ms: u64,
    /// Loss estimate in parts per thousand (moving average over recent packets).
    pub loss_permille: u32,
    /// Packets the peer acknowledged.
    pub packets_acked: u64,
    /// Packets declared lost.
    pub packets_lost: u64,
    /// Packets sent because the retransmit timer fired.
    pub retransmits: u64,
    /// New data scheduled to be sent a second time because the link is lossy.
    pub repeats: u64,
    /// Payload bytes sent again because the peer had not acknowledged them yet (redundancy).
    pub redundant_bytes: u64,
    /// Datagrams sent.
    pub datagrams_sent: u64,
    /// Bytes sent (our datagrams, before QUIC/UDP/IP overhead).
    pub bytes_sent: u64,
    /// Datagrams received and accepted (not duplicates, not malformed).
    pub datagrams_received: u64,
    /// Bytes of accepted datagrams.
    pub bytes_received: u64,
}

/// Input dropped from one peer, by cause. Every drop path increments exactly one of these.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DropCounters {
    /// Datagrams that failed to decode (truncated, trailing bytes, bad tag, bad length...).
    pub malformed: u64,
    /// Datagrams, commands or bundles already received.
    pub duplicate: u64,
    /// Data for turns already executed or sealed.
    pub stale: u64,
    /// Data for turns beyond the window: dropped, nothing allocated.
    pub future: u64,
    /// Messages claiming something the peer cannot know or own (an ack for a packet never
    /// sent, a turn not yet sealed, a command sequence never issued).
    pub spoofed: u64,
    /// Commands over the per-player, per-turn budget.
    pub over_budget: u64,
    /// Commands skipped because an earlier one was missing (they come again with it).
    pub out_of_order: u64,
    /// Commands the game's rule refused ([`Host::set_command_rule`](crate::Host::set_command_rule)):
    /// never sealed. Each is an offence.
    pub refused: u64,
}

impl DropCounters {
    /// All drops together.
    pub fn total(&self) -> u64 {
        self.malformed
            + self.duplicate
            + self.stale
            + self.future
            + self.spoofed
            + self.over_budget
            + self.out_of_order
            + self.refused
    }
}

/// The host's view of one connected player.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PeerStats {
    /// Transport counters.
    pub link: LinkStats,
    /// Dropped input, by cause.
    pub drops: DropCounters,
    /// The peer holds every bundle before this turn.
    pub turn_ack: crate::Turn,
    /// Commands accepted from this peer.
    pub commands_accepted: u64,
}

/// Session-wide counters of a host.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HostStats {
    /// Turns sealed so far.
    pub turns_sealed: u64,
    /// Commands sealed into turns so far.
    pub commands_sealed: u64,
    /// Commands that reached the host after their stamped turn was sealed and went into a
    /// later turn.
    pub commands_late: u64,
    /// Commands the game's rule refused, the host's own player's included
    /// ([`Host::set_command_rule`](crate::Host::set_command_rule)): never sealed.
    pub commands_refused: u64,
    /// Milliseconds a due turn waited for the window (a client too far behind).
    pub stall_ms: u64,
    /// Most sealed bundles held at once (bounded by the window).
    pub sealed_high_water: usize,
    /// Most commands waiting in open turns at once (bounded by the budgets × window).
    pub open_commands_high_water: usize,
    /// Players who came back after timing out.
    pub rejoins: u64,
    /// Bytes of sealed turns kept for rejoins (bounded by `catch_up.rejoin_log_bytes_max`): with
    /// snapshots, only the turns after the verified one.
    pub rejoin_log_bytes: usize,
    /// Snapshots verified and kept.
    pub snapshots_stored: u64,
    /// Snapshots whose hash did not match their turn's reference, or could not be verified.
    pub snapshots_rejected: u64,
    /// Snapshot uploads refused unread: not asked for, too large, stale or malformed.
    pub snapshots_refused: u64,
    /// A desync's uploads refused (its turn hashes, or a player's state at its first divergent
    /// turn): nobody asked for them, or they did not decode.
    pub hashes_refused: u64,
    /// Bytes of snapshot state held (at most two snapshots, more with a broadcast delay).
    pub snapshot_bytes: usize,
    /// Spectators connected now.
    pub spectators: usize,
    /// Commands spectators sent, refused.
    pub spectator_commands_refused: u64,
    /// Spectators dropped for falling `catch_up.spectator_lag_turns_max` behind.
    pub spectators_lagged: u64,
    /// Spectators whose reported state hash differed from the players' reference.
    pub spectator_desyncs: u64,
    /// Bytes of sealed turns kept for spectators.
    pub spectator_turns_bytes: usize,
    /// Events dropped because nobody polled them (1,024 are held).
    pub events_dropped: u64,
}

/// Counters of a client.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientStats {
    /// Transport counters.
    pub link: LinkStats,
    /// Dropped input, by cause.
    pub drops: DropCounters,
    /// Commands submitted and not yet acknowledged by the host.
    pub commands_unacked: usize,
    /// Most unacknowledged commands at once.
    pub commands_unacked_high_water: usize,
    /// Most bundles buffered ahead of the game at once (bounded by the window).
    pub bundles_buffered_high_water: usize,
    /// Our commands that executed at a later turn than stamped.
    pub commands_late: u64,
    /// Our commands the host told us it will never seal
    /// ([`ClientEvent::CommandRefused`](crate::ClientEvent::CommandRefused)).
    pub commands_refused: u64,
    /// The turn length in force.
    pub turn_length_ms: u32,
    /// The command delay in force.
    pub command_delay_turns: u32,
    /// Submit → execute latency of our recent commands: median, 95th percentile, maximum.
    pub latency_ms_p50: Option<u32>,
    /// See `latency_ms_p50`.
    pub latency_ms_p95: Option<u32>,
    /// See `latency_ms_p50`.
    pub latency_ms_max: Option<u32>,
    /// Time the game waited for a turn beyond its length (gaps over 1.5 turn lengths).
    pub stall_ms: u64,
    /// The playout buffer in force: turns execute this long after the earliest they could on
    /// a steady schedule (see `SessionConfig::playout.buffer_ms_max`).
    pub playout_ms: u32,
    /// Turns that arrived after their time on the playout schedule and executed on arrival.
    pub playout_late: u64,
    /// Events dropped because nobody polled them (1,024 are held).
    pub events_dropped: u64,
}
