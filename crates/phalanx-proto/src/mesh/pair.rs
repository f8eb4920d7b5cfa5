//! One other peer, as this peer sees it: what we hold of its contributions, what it holds of
//! ours, the round trip, when we last heard from it and what it did wrong.

use std::collections::BTreeMap;

use crate::stats::DropCounters;
use crate::types::{PlayerId, Turn};
use crate::wire::{Entry, Report};

/// Where a peer stands in the match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    /// Playing: its contributions are needed and taken.
    Live,
    /// A master asked us to stop taking its contributions: a drop is being decided.
    Frozen,
    /// Dropped or left: its contributions count through `last` (none if `None`).
    Gone { last: Option<Turn> },
}

/// One other peer.
#[derive(Debug)]
pub(crate) struct Pair {
    pub(crate) player: PlayerId,
    pub(crate) status: Status,
    /// We hold its contributions through this turn.
    pub(crate) have: Option<Turn>,
    /// Its non-empty contributions, kept a window after we executed them (a drop may need them).
    pub(crate) inbox: BTreeMap<Turn, Entry>,
    /// Its own last turn, from a leave in its contribution.
    pub(crate) leaves_after: Option<Turn>,
    /// It holds our contributions through this turn.
    pub(crate) acked: Option<Turn>,
    /// The turn it said it executes next.
    pub(crate) next_exec: Turn,
    pub(crate) heard_ms: Option<u64>,
    pub(crate) sent_ms: Option<u64>,
    /// A datagram should go to it at the next transmit.
    pub(crate) send_due: bool,
    /// What we made final goes to it once more at this time ...
    pub(crate) repeat_at: Option<u64>,
    /// ... and this many more times after that, `repeat_ms` apart.
    pub(crate) repeats_left: u8,
    /// Its last stamp, and when it arrived (our clock).
    pub(crate) echo: Option<(u32, u64)>,
    /// That stamp is not echoed yet.
    pub(crate) echo_owed: bool,
    /// The first turn its last batch made final, and when that batch arrived.
    pub(crate) batch_at: Option<(Turn, u64)>,
    /// When we first asked it, this round, for a contribution we lack, and how many times
    /// (`Peer::repair_at`).
    pub(crate) probed: Option<(u64, u8)>,
    /// When a datagram to it last carried our stamp.
    pub(crate) stamped_ms: Option<u64>,
    /// The newest of our stamps it echoed.
    pub(crate) echoed: Option<u32>,
    pub(crate) srtt_ms: Option<u32>,
    /// Round-trip samples taken (saturating).
    pub(crate) rtt_samples: u8,
    pub(crate) rttvar_ms: u32,
    pub(crate) report: Report,
    /// When its report's suspects last changed.
    pub(crate) report_since_ms: u64,
    /// Datagrams dropped from it, by cause.
    pub(crate) drops: DropCounters,
    /// Bad datagrams so far.
    pub(crate) offences: u32,
    pub(crate) datagrams_sent: u64,
    pub(crate) datagrams_received: u64,
    pub(crate) bytes_sent: u64,
    pub(crate) bytes_received: u64,
    /// How many more datagrams to it carry our state hash reports from `hash_from` on.
    pub(crate) hash_sends: u32,
    /// The first check turn whose hash it still gets from us.
    pub(crate) hash_from: Turn,
    /// Nothing arrived from it for the idle timeout.
    pub(crate) suspected: bool,
    /// It sent more than `link.misbehaviour_max` bad datagrams: we no longer listen to it.
    pub(crate) offender: bool,
    /// It proposed a view below one we answered: tell it.
    pub(crate) behind_due: bool,
}

impl Pair {
    pub(crate) fn new(player: PlayerId) -> Self {
        Pair {
            player,
            status: Status::Live,
            have: None,
            inbox: BTreeMap::new(),
            leaves_after: None,
            acked: None,
            next_exec: Turn::ZERO,
            heard_ms: None,
            sent_ms: None,
            send_due: true,
            repeat_at: None,
            repeats_left: 0,
            echo: None,
            echo_owed: false,
            stamped_ms: None,
            batch_at: None,
            probed: None,
            echoed: None,
            srtt_ms: None,
            rtt_samples: 0,
            rttvar_ms: 0,
            report: Report::default(),
            report_since_ms: 0,
            drops: DropCounters::default(),
            offences: 0,
            datagrams_sent: 0,
            datagrams_received: 0,
            bytes_sent: 0,
            bytes_received: 0,
            hash_sends: 0,
            hash_from: Turn::ZERO,
            suspected: false,
            offender: false,
            behind_due: false,
        }
    }

    /// Whether we count it as unreachable: silent for the idle timeout, or an offender.
    pub(crate) fn doubted(&self) -> bool {
        self.suspected || self.offender
    }

    /// Whether its contribution to `turn` is needed to execute it.
    pub(crate) fn needed_at(&self, turn: Turn) -> bool {
        let last = match self.status {
            Status::Gone { last } => last,
            _ => self.leaves_after,
        };
        match (self.status, last) {
            (Status::Gone { .. }, None) => false,
            (_, Some(last)) => turn <= last,
            (_, None) => true,
        }
    }

    /// Whether it is still in the match (not dropped, not past its leave).
    pub(crate) fn is_in(&self) -> bool {
        !matches!(self.status, Status::Gone { .. })
    }

    /// Whether we hold its contribution to `turn`.
    pub(crate) fn holds(&self, turn: Turn) -> bool {
        self.have.is_some_and(|have| have >= turn)
    }

    /// How long a datagram to it may take: half the smoothed round trip, twice the
    /// variation, and 10 ms. `None` until a round trip is measured.
    pub(crate) fn trip_ms(&self) -> Option<u32> {
        Some(self.srtt_ms? / 2 + 2 * self.rttvar_ms + 10)
    }

    /// How long asking it again takes, both ways twice `repeat_ms` apart: a smoothed round
    /// trip, twice the variation, 10 ms and the gap.
    pub(crate) fn repair_ms(&self, repeat_ms: u32) -> Option<u32> {
        Some(self.srtt_ms? + 2 * self.rttvar_ms + 10 + repeat_ms)
    }

    /// A round-trip sample (RFC 6298's smoothing).
    pub(crate) fn on_rtt(&mut self, sample_ms: u32) {
        self.rtt_samples = self.rtt_samples.saturating_add(1);
        match self.srtt_ms {
            None => {
                self.srtt_ms = Some(sample_ms);
                self.rttvar_ms = sample_ms / 2;
            }
            Some(srtt) => {
                let delta = srtt.abs_diff(sample_ms);
                self.rttvar_ms = (3 * self.rttvar_ms + delta) / 4;
                self.srtt_ms = Some((7 * srtt + sample_ms) / 8);
            }
        }
    }

    /// How long to wait for an acknowledgement before sending unacknowledged data again.
    pub(crate) fn rto_ms(&self, floor_ms: u32) -> u64 {
        let rto = self.srtt_ms.map_or(300, |srtt| srtt + 4 * self.rttvar_ms.max(5));
        u64::from(rto.max(floor_ms))
    }

    /// Whether nothing arrived from it for `idle_ms` (counting from `since_ms` if never heard).
    pub(crate) fn silent(&self, now_ms: u64, idle_ms: u64, since_ms: u64, first_ms: u64) -> bool {
        now_ms >= self.silent_at(idle_ms, since_ms, first_ms)
    }

    /// When it counts as silent: `idle_ms` after we last heard from it, or, never heard,
    /// `first_ms` (at least `idle_ms`) after `since_ms`.
    pub(crate) fn silent_at(&self, idle_ms: u64, since_ms: u64, first_ms: u64) -> u64 {
        match self.heard_ms {
            Some(heard) => heard + idle_ms,
            None => since_ms + idle_ms.max(first_ms),
        }
    }

    /// Forgets its contributions before `before` (executed a window ago).
    pub(crate) fn prune(&mut self, before: Turn) {
        while let Some(entry) = self.inbox.first_entry() {
            if *entry.key() >= before {
                break;
            }
            entry.remove();
        }
    }

    /// Its non-empty contributions in `(after, upto]`.
    pub(crate) fn entries_between(
        &self,
        after: Option<Turn>,
        upto: Turn,
    ) -> impl Iterator<Item = (Turn, &Entry)> + '_ {
        let from = after.map_or(Turn::ZERO, Turn::next);
        self.inbox.range(from..).take_while(move |(turn, _)| **turn <= upto).map(|(t, e)| (*t, e))
    }
}
