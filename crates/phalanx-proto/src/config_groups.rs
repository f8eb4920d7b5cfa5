//! The groups of [`SessionConfig`](super::SessionConfig), each with its fields' units, ranges
//! and defaults.

use super::{DesyncPolicy, DesyncReference};

/// The turn pipeline and its pace, the seats and the waiting rules: the host's. A client takes
/// the turn length, command delay, window and seats from the host's join reply; its own values
/// here are not used.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TurnConfig {
    /// The shortest (and first) turn length. AoE used 200 ms; phalanx defaults to 100 ms and
    /// lets speed control lengthen it for slow machines or long round trips. 10..=2000.
    /// Default: 100 ms.
    pub length_ms: u32,
    /// The longest turn speed control may choose. `turns.length_ms..=5000`. Default: 1,000 ms.
    pub length_ms_max: u32,
    /// The first command delay: a command submitted while the game executes turn `t` is
    /// stamped for `t + turns.command_delay_turns` (AoE: 2). 1..=`turns.command_delay_turns_max`.
    /// Default: 2 turns.
    pub command_delay_turns: u32,
    /// The largest command delay speed control may choose. Below `turns.window_turns`.
    /// Default: 8 turns.
    pub command_delay_turns_max: u32,
    /// The window: the host never seals a turn more than this many turns after the oldest turn
    /// a client has not acknowledged, and a peer never buffers data further ahead. 2..=256.
    /// Default: 16.
    pub window_turns: u32,
    /// Whether the host adapts the pace (see `pace` in the crate docs). Off: the first pace
    /// holds for the whole session. Default: `true`.
    pub adaptive_pace: bool,
    /// Added to the worst smoothed round trip when choosing the command delay (raise it to
    /// trade latency for fewer commands missing their stamped turn). Default: 0 ms.
    pub pace_margin_ms: u32,
    /// How far the round trip may exceed what the command delay covers before the host raises
    /// the delay (0, the default: not at all). A round trip that brushes the limit for a few
    /// turns then costs a few commands a turn, instead of a turn of latency on every command
    /// for `turns.pace_settle_turns`. The quiet relay's playout buffer of a turn length brings the
    /// demo's round trip within 10–20 ms of two turns. 0..=`turns.length_ms` / 2. Default: 0 ms.
    pub pace_tolerance_ms: u32,
    /// Turns a lower pace must be wanted before the host lowers it (by one step).
    /// Default: 30 turns.
    pub pace_settle_turns: u32,
    /// Seats in the session, host's own player included. 1..=64. Default: 8.
    pub players_max: u8,
    /// How long the host waits for a player before everyone gets a "waiting for" notice.
    /// Default: 500 ms.
    pub stall_notice_ms: u32,
    /// Pauses each player may request in a session. Default: 3.
    pub pauses_per_player_max: u32,
    /// How the host orders the commands of a turn (every player executes them in that
    /// order). Default: [`CommandOrder::BySeat`].
    pub order: CommandOrder,
    /// When a listen host's own player's commands execute: at once ([`Fairness::Fast`]) or
    /// after the same command delay as everyone else's ([`Fairness::Fair`]). Default:
    /// [`Fairness::Fast`].
    pub fairness: Fairness,
}

/// A listen host's own player against its clients. A client's command crosses the network to
/// the host before it can be sealed into a turn, so a client stamps it for a turn the command
/// delay ahead (the host sets that delay to cover the slowest player's measured round trip).
/// The host's own player needs no crossing. A dedicated host or a relay has no player of its
/// own and is neutral by construction; this setting is for a host that plays.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fairness {
    /// The host's own commands go into the next turn it seals: its player's orders execute
    /// within a turn, several turns before a client's. For casual play, where responsiveness
    /// for the player hosting is worth more than parity. The default.
    #[default]
    Fast,
    /// The host's own commands are stamped as a client's are: for the turn after the one its
    /// game is executing plus the current command delay. Its player waits as long as a client in step with
    /// the host, and an order it gives in reaction to a turn lands on the same turn as the
    /// same reaction of a client. For ranked play on a listen server. The host's game still
    /// receives each sealed turn one network crossing before the clients do.
    Fair,
}

/// How the host orders the commands within a turn: what "first" means when two orders in one
/// turn contend for one thing (a last unit in a shop, one tile to build on). The order is the
/// host's alone: clients execute the turns as sealed, so a client needs no setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CommandOrder {
    /// By seat, then in each player's submission order: the lower seat's orders always come
    /// first, so between two contending orders the lower seat wins every time. The default.
    BySeat,
    /// The seats shuffled afresh each turn (a permutation keyed by `salt` and the turn), then
    /// each player's submission order: every seat comes first in its share of turns, and of
    /// any two seats each goes first in half of them. Pick `salt` at random for each match and
    /// keep it from the players (phalanx's host does when it is 0): a player who knew it could
    /// hold an order for a turn in which it comes first. Peer to peer every peer must have the
    /// same salt (peers that differ desync), so every player knows it; the key then also
    /// mixes in a digest of the turn's commands, which no peer knows before every
    /// contribution to the turn is final.
    Shuffled {
        /// The shuffle's key.
        salt: u64,
    },
}

impl CommandOrder {
    /// Each seat's place in `turn`'s order, for `players` seats (`ranks[seat]`; 0 comes
    /// first). By seat: the seat itself.
    pub fn ranks(self, turn: crate::Turn, players: u8) -> [u8; 64] {
        let mut ranks = [0u8; 64];
        let players = usize::from(players.min(64));
        let mut seats: [u8; 64] = std::array::from_fn(|seat| seat as u8);
        if let CommandOrder::Shuffled { salt } = self {
            let key = salt ^ u64::from(turn.0).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let mut random = crate::SplitMix64::new(key);
            // Fisher-Yates over the first `players` seats.
            for i in (1..players).rev() {
                let j = (random.next_u64() % (i as u64 + 1)) as usize;
                seats.swap(i, j);
            }
        }
        for (place, &seat) in seats[..players].iter().enumerate() {
            ranks[usize::from(seat)] = place as u8;
        }
        ranks
    }
}

impl Default for TurnConfig {
    fn default() -> Self {
        TurnConfig {
            length_ms: 100,
            length_ms_max: 1_000,
            command_delay_turns: 2,
            command_delay_turns_max: 8,
            window_turns: 16,
            adaptive_pace: true,
            pace_margin_ms: 0,
            pace_tolerance_ms: 0,
            pace_settle_turns: 30,
            players_max: 8,
            stall_notice_ms: 500,
            pauses_per_player_max: 3,
            order: CommandOrder::BySeat,
            fairness: Fairness::Fast,
        }
    }
}

/// What one player may put in one turn. The host's limits, taken by its clients from the join
/// reply, except `budget.overflow_turns_max`, which each end sets for its own submits.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BudgetConfig {
    /// Commands one player may have in one turn. 1..=64. Default: 4.
    pub commands_per_turn_max: u16,
    /// Payload bytes one player may have in one turn. At least `budget.command_bytes_max`.
    /// Default: 72 bytes.
    pub turn_bytes_per_player_max: u16,
    /// Payload bytes of one command. 1..=`budget.turn_bytes_per_player_max`. Larger orders must be
    /// split by the game (or sent as bulk data): they are refused, never truncated.
    /// Default: 72 bytes.
    pub command_bytes_max: u16,
    /// Turns an over-budget command may spill into (a local setting; 0, the default: it is
    /// refused with `SubmitError::OverBudget` and the game queues it itself). With `k`, a
    /// command that does not fit its stamped turn's budget is stamped for the first of the next
    /// `k` turns that has room, in submission order; the ticket names that turn. At most
    /// `turns.window_turns − turns.command_delay_turns_max − 1`, so it stays inside the window.
    /// Default: 0 turns (refused).
    pub overflow_turns_max: u32,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        BudgetConfig {
            commands_per_turn_max: 4,
            turn_bytes_per_player_max: 72,
            command_bytes_max: 72,
            overflow_turns_max: 0,
        }
    }
}

/// Each link's datagrams, acknowledgements, timers and the quiet relay: every end honours its
/// own (`link.heartbeat_ms` must agree, and the join checks it).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LinkConfig {
    /// The largest datagram the transport carries (quinn: 1162 bytes at the initial 1200-byte
    /// MTU). A whole turn bundle at full budget must fit in one: validated. Default: 1,162 bytes.
    pub datagram_bytes_max: u16,
    /// A datagram with a new bundle also repeats up to this many earlier bundles the client has
    /// not acknowledged (the retransmit timer covers the rest); under the quiet relay, to a
    /// player only while its link lost a datagram lately (within 256 acked). 0..=`turns.window_turns`.
    /// Default: 2 turns.
    pub redundant_turns: u32,
    /// The host sends a new turn a second time a quarter turn later while the link's loss
    /// estimate (an average over the last packets, gain 1/16, in ‰) is at least this and a
    /// loss was seen in the last 256 acknowledged packets. 0 (the default): for those 256
    /// packets after any loss — the least stall, at up to twice the datagrams; 1000: never.
    /// (Clients always repeat new commands after a loss: they are rare and a late one costs a
    /// turn.) On the demo's 2 %-loss network 5 — repeats for about 40 packets after a loss —
    /// cut the wire rate by a quarter with p95 latency unchanged; at 5 % loss even 5 breaks
    /// the "stall < 1 %" promise the default keeps. Default: 0 ‰.
    pub repeat_loss_permille: u32,
    /// How long a peer may hold an acknowledgement back hoping to piggyback it. Default: 25 ms.
    pub ack_delay_ms: u32,
    /// Retransmit timeout before any RTT sample. Default: 300 ms.
    pub rto_ms_initial: u32,
    /// Lower bound of the retransmit timeout. Default: 40 ms.
    pub rto_ms_min: u32,
    /// Upper bound of the retransmit timeout, backoff included. Default: 2,000 ms.
    pub rto_ms_max: u32,
    /// How late a timer may fire on either side (RFC 9002's timer granularity): the
    /// retransmit timeout keeps this much slack over the measured round trip and again over
    /// the peer's ack delay, so data acknowledged in time is not sent again when wake-ups are
    /// late. tokio on an idle machine is about 1–2 ms late, and so is a `phalanx::Session`'s
    /// driver (it runs on a runtime of its own: the default fits); a sans-IO session whose
    /// timers are only handled from a frame loop is up to a frame late (set 17 at 60 Hz).
    /// Default: 10 ms.
    pub timer_granularity_ms: u32,
    /// Send a keep-alive after this long without sending anything. During play at 100 ms
    /// turns a datagram goes each way every turn and keep-alives never fire; they keep a quiet
    /// link (the lobby, a pause, longer turns) alive, and they set how long before a cut the
    /// peer last heard us: a cut of 0.9 × `link.idle_timeout_ms` leaves 300 ms for that, the first
    /// probe after the cut and the latency. At 250 ms, seeded L2 runs of such cuts at 5 % loss
    /// and 40 ms jitter dropped players; at 100 ms none of the CI seeds do. A player is dropped
    /// only when every datagram of an idle timeout is lost (30 of them). Default: 100 ms.
    pub keep_alive_ms: u32,
    /// While the peer has been silent for `link.keep_alive_ms` or more (a cut, a burst of loss),
    /// keep-alives go out every `link.probe_interval_ms` instead, whatever the retransmit backoff:
    /// the first one after the link heals reaches the peer within this plus the one-way
    /// latency: a cut shorter than `link.idle_timeout_ms − link.probe_interval_ms −` one-way latency `−`
    /// the time since the peer last heard us (up to a keep-alive or heartbeat, more after a
    /// loss) never drops a player. Costs nothing while the link works. Default: 50 ms.
    pub probe_interval_ms: u32,
    /// A peer silent this long is timed out (anchors: a dead peer detected in ≤ 3 s).
    /// Default: 3,000 ms.
    pub idle_timeout_ms: u32,
    /// The quiet relay, for links where every datagram counts (0, the default: off). When
    /// set, a client with nothing to say stays silent and sends a heartbeat — its
    /// acknowledgements, the turn it executes, a state hash report, its turn cost and playout
    /// buffer — this often, instead of acknowledging every turn within `link.ack_delay_ms`. It still
    /// sends at once new commands (repeated a sixteenth of a turn later), pause requests,
    /// answers to a probe, and an ack when a turn is missing while a later one arrived or is
    /// overdue (a round trip before its playout time): the host resends what is missing at
    /// once. Keep-alives on both ends go at this period instead of `link.keep_alive_ms`, and the
    /// host's retransmit timer allows for it. Acks lag up to a heartbeat, so a window
    /// (`turns.window_turns`) a heartbeat longer than an outage rides it out without the others
    /// waiting. A session setting: host and clients must agree (the host refuses a join with
    /// another, `JoinRefusal::HeartbeatMismatch`). 0 or 50..=`link.idle_timeout_ms` / 4.
    /// Default: 0 ms (off).
    pub heartbeat_ms: u32,
    /// How long the host waits for a newly seated player's first datagram. A client cannot
    /// send any before the join reply reaches it, and on a lossy link the reliable stream's
    /// retransmissions can take longer than `link.idle_timeout_ms`; a player is only held to the
    /// idle timeout once it has been heard. At least `link.idle_timeout_ms`; match it to the
    /// clients' join timeout (phalanx's default is 10 s). Default: 10,000 ms.
    pub join_grace_ms: u32,
    /// Malformed or spoofed datagrams tolerated from one peer before it is disconnected.
    /// Default: 32.
    pub misbehaviour_max: u32,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            datagram_bytes_max: 1162,
            redundant_turns: 2,
            repeat_loss_permille: 0,
            ack_delay_ms: 25,
            rto_ms_initial: 300,
            rto_ms_min: 40,
            rto_ms_max: 2_000,
            timer_granularity_ms: 10,
            keep_alive_ms: 100,
            probe_interval_ms: 50,
            idle_timeout_ms: 3_000,
            heartbeat_ms: 0,
            join_grace_ms: 10_000,
            misbehaviour_max: 32,
        }
    }
}

/// State-hash checks and what a desync does: the host's.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SyncConfig {
    /// Every this many turns each player reports a state hash and the host compares them;
    /// 0 turns sync checks off. The check turns are the multiples of it, turn 0 included: a
    /// game reports its hash right after executing one (other turns' reports are ignored).
    /// Default: 10 turns.
    pub interval_turns: u32,
    /// Whose hash is right when they differ. Default: `Majority`.
    pub reference: DesyncReference,
    /// What the host does on a desync. Default: `Warn`.
    pub policy: DesyncPolicy,
}

impl Default for SyncConfig {
    fn default() -> Self {
        SyncConfig {
            interval_turns: 10,
            reference: DesyncReference::Majority,
            policy: DesyncPolicy::Warn,
        }
    }
}

/// The playout buffer that turns execute behind: a client's own (the host's player executes
/// turns as it seals them).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PlayoutConfig {
    /// The longest playout buffer a client may hold turns in (a local setting; 0: turns
    /// execute the moment they arrive). A client executes turns on a steady schedule derived
    /// from the host's pace, behind a buffer of the 95th percentile of the recent arrival
    /// jitter, capped here: turns that arrive within it execute exactly a turn length apart.
    /// The buffer in force is [`ClientStats::playout_ms`](crate::ClientStats::playout_ms);
    /// speed control adds it to the round trip it covers. 0..=1000. Default: 80 ms.
    pub buffer_ms_max: u32,
    /// Added to the playout buffer the jitter calls for, up to `playout.buffer_ms_max` (a local
    /// setting; 0, the default: the buffer covers the jitter alone). A turn length hides a single
    /// lost turn: its copy rides in the next turn's datagram (`link.redundant_turns` ≥ 1; under the
    /// quiet relay once the link has lost one: a first loss is reported overdue, and comes in time
    /// while the round trip is under the buffer less twice the jitter). The price is that more of
    /// the round trip for speed control to cover (the command delay may rise a step; see
    /// `turns.pace_tolerance_ms`). The quiet relay's setting (see `link.heartbeat_ms`). 0..=`playout.buffer_ms_max`.
    /// Default: 0 ms.
    pub extra_ms: u32,
    /// Add `playout.extra_ms` only while the link loses turns (a local setting): from the first
    /// turn that arrives missing (a later turn came first, it first came as a copy or a
    /// resend, or it was not there a margin past its slowest arrival) until 1,024 turns pass
    /// without another. A clean link then keeps the jitter's buffer alone, and the command
    /// delay that buffer allows (a turn less when the round trip is under a turn). The price:
    /// the first loss after a clean spell is late, and the schedule then moves later by the
    /// extra at once, so the commands in flight then execute that much later. The quiet
    /// relay's setting. Default: off.
    pub extra_after_loss: bool,
}

impl Default for PlayoutConfig {
    fn default() -> Self {
        PlayoutConfig { buffer_ms_max: 80, extra_ms: 0, extra_after_loss: false }
    }
}

/// Rejoins, late joins, snapshots and spectators: the host's, except `catch_up.snapshot_bytes_max` and
/// `catch_up.rejoin_log_bytes_max`, which each end sets as its own limit on what it keeps or accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CatchUpConfig {
    /// How long a timed-out player's seat stays open for a rejoin (0: no rejoin). A player
    /// who comes back in time with its join token gets the log of every sealed turn, replays
    /// it from the game's start and plays on; later, the join is refused with
    /// [`JoinRefusal::RejoinExpired`](crate::JoinRefusal::RejoinExpired). Default: 60,000 ms.
    pub rejoin_window_ms: u32,
    /// The most bytes of sealed turns the host keeps for rejoins (and a client accepts in a
    /// join reply). A longer game makes rejoin unavailable rather than growing without bound:
    /// 1 MiB is about an hour of an 8-player game at 200 ms turns. Default: 1 MiB.
    pub rejoin_log_bytes_max: u32,
    /// Every this many turns (a multiple of `sync.interval_turns`; 0: never) the host wants
    /// a [`Snapshot`](crate::Snapshot) of the game's state after that check turn, verified
    /// against the sync check's reference hash. A rejoin then restores the latest one and
    /// replays only the turns after it, so the game's length no longer limits rejoin. The
    /// game must be able to serialize and restore its state. Off by default.
    /// Default: 0 turns (off).
    pub snapshot_interval_turns: u32,
    /// The largest snapshot a host keeps or a client sends or accepts (a local setting on
    /// each side; keep them equal). The host holds at most two. Default: 8 MiB.
    pub snapshot_bytes_max: u32,
    /// Whether the host seats a new player (an unused token) after the game started (a host
    /// setting). The late joiner gets what a returning player gets — the verified snapshot
    /// and the turns after it, or every turn — and its `Joined` record in the next sealed
    /// turn is when every game adds it. Needs rejoin on (`catch_up.rejoin_window_ms` > 0: the turns are
    /// logged; otherwise [`validate`](super::SessionConfig::validate) names both fields); when the turns are
    /// not all held, the join is refused with `RejoinUnavailable`. Off by default:
    /// `GameStarted`. Default: `false`.
    pub late_join: bool,
    /// Spectator slots: spectators the host seats at once (their tokens are given with
    /// [`Host::allow_spectators`](crate::Host::allow_spectators)). 0..=64. Default: 16.
    pub spectators_max: u8,
    /// A spectator more than this many turns behind what it may be sent is dropped (it can
    /// join again, from a snapshot): the host keeps that many turns for spectators. The
    /// players never wait for a spectator. 1..=36,000. Default: 300 turns.
    pub spectator_lag_turns_max: u32,
    /// Broadcast delay: a spectator is sent a turn this many turns after it is sealed (0: as
    /// soon as the players; a tournament might use a few minutes). A spectator joining
    /// mid-game starts that far back too, from a snapshot at least that old. 0..=36,000.
    /// Default: 0 turns.
    pub spectator_delay_turns: u32,
}

impl Default for CatchUpConfig {
    fn default() -> Self {
        CatchUpConfig {
            rejoin_window_ms: 60_000,
            rejoin_log_bytes_max: 1 << 20,
            snapshot_interval_turns: 0,
            snapshot_bytes_max: 8 << 20,
            late_join: false,
            spectators_max: 16,
            spectator_lag_turns_max: 300,
            spectator_delay_turns: 0,
        }
    }
}
