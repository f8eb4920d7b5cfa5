//! Admission control: what the host lets in before a connection has joined.
//!
//! Every connection attempt passes the [`Gate`] in the accept loop before it gets a task or
//! any per-connection state. A connection that gets in holds a [`Pass`] until its join is
//! answered (or it fails); the pass counts it as *pending*. When `pending_max` are pending, a
//! new attempt takes the place of the connection that finished its handshake longest ago
//! without sending its join request, if that was at least `idle_evict_after` ago (a real client
//! sends it one round trip after its handshake; a flood that holds connections open does
//! not); with none such, the attempt is refused statelessly (quinn answers
//! `CONNECTION_REFUSED` without keeping anything). Above a lower threshold an attempt whose
//! address QUIC has not validated is sent a Retry first (stateless too: a spoofed source never
//! answers it).
//!
//! Counters are exact ([`AdmissionStats`]); the `tracing` events they match are rate-limited
//! to one per cause per second, each carrying how many were suppressed before it.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
// tokio's clock: virtual under a simulator (phalanx-sim), so a seed still fixes the run.
use tokio::time::Instant;

/// Limits on connections that have not joined yet: see `docs/guide/security-and-limits.md`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Admission {
    /// Connections in their handshake or waiting for their join to be answered, at most.
    /// Further attempts are refused at once (`CONNECTION_REFUSED`: the client's connect
    /// fails with [`ConnectError::HostBusy`](crate::ConnectError::HostBusy)). Default: 64.
    pub pending_max: usize,
    /// Of those, from one IP address, at most. Default: 8.
    pub per_address_max: usize,
    /// With this many pending or more, an attempt from an address QUIC has not validated yet
    /// is first sent a Retry: the client must prove it receives at its address before the
    /// host does any handshake work. Default: 16.
    pub retry_above: usize,
    /// How long a connection has, from its first packet, to complete the handshake and send
    /// its whole join request; past it the host closes it. Default: 5 s (a handshake over a
    /// lossy link can need several retransmissions).
    pub join_timeout: Duration,
    /// While `pending_max` are pending, a connection that finished its handshake this long ago
    /// without sending its join request is closed to make room for a new attempt. Default:
    /// 500 ms (a client sends its request one round trip after the handshake).
    pub idle_evict_after: Duration,
}

impl Default for Admission {
    fn default() -> Self {
        Admission {
            pending_max: 64,
            per_address_max: 8,
            retry_above: 16,
            join_timeout: Duration::from_secs(5),
            idle_evict_after: Duration::from_millis(500),
        }
    }
}

/// What the host's admission control has done so far: exact counters
/// ([`Host::admission_stats`](crate::Host::admission_stats)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AdmissionStats {
    /// Attempts let in (given a handshake).
    pub admitted: u64,
    /// Attempts refused because `pending_max` connections were pending.
    pub refused_busy: u64,
    /// Attempts refused because their address had `per_address_max` pending.
    pub refused_address: u64,
    /// Retries sent to unvalidated addresses while over `retry_above`.
    pub retries_sent: u64,
    /// Admitted connections whose handshake failed (wrong ALPN, bad TLS, lost).
    pub handshakes_failed: u64,
    /// Connections that did not complete their join request within `join_timeout`.
    pub join_timeouts: u64,
    /// Join requests that could not be read (answered with `JoinRefusal::Malformed`).
    pub joins_malformed: u64,
    /// Join requests longer than a join may be (answered with `JoinRefusal::TooLarge`).
    pub joins_oversized: u64,
    /// Well-formed joins the session refused (bad token, full, game data mismatch, ...).
    pub joins_refused: u64,
    /// Connections the client closed (or lost) after the handshake, before joining.
    pub closed_before_join: u64,
    /// Idle connections (handshake done, no join request) closed to make room.
    pub evicted_idle: u64,
    /// Joins accepted (new players and rejoins).
    pub joins_accepted: u64,
    /// Connections pending now.
    pub pending: u64,
    /// The most connections pending at once.
    pub pending_high_water: u64,
    /// Over raw UDP: what the endpoint answered and dropped
    /// before any connection (handshakes, cookies, replays) and of its connections' packets
    /// (forged, replayed, too old). Zero over QUIC, whose refusals are the counters above.
    #[cfg(feature = "udp")]
    pub udp: crate::udp::UdpHostStats,
}

/// Why an attempt or a join did not get in: one counter and one rate-limited event each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    RefusedBusy,
    RefusedAddress,
    RetrySent,
    HandshakeFailed,
    JoinTimeout,
    JoinMalformed,
    JoinOversized,
    JoinRefused,
    ClosedBeforeJoin,
    EvictedIdle,
}

impl Outcome {
    const ALL: usize = 10;

    fn index(self) -> usize {
        self as usize
    }

    fn name(self) -> &'static str {
        match self {
            Outcome::RefusedBusy => "refused: too many pending connections",
            Outcome::RefusedAddress => "refused: too many pending connections from the address",
            Outcome::RetrySent => "retry sent to an unvalidated address",
            Outcome::HandshakeFailed => "handshake failed",
            Outcome::JoinTimeout => "no complete join request in time",
            Outcome::JoinMalformed => "malformed join request",
            Outcome::JoinOversized => "oversized join request",
            Outcome::JoinRefused => "join refused",
            Outcome::ClosedBeforeJoin => "connection closed before joining",
            Outcome::EvictedIdle => "idle connection closed to make room (no join request)",
        }
    }
}

/// What the gate says to a connection attempt.
pub(crate) enum Verdict {
    /// Let it in; the pass counts it as pending until dropped.
    Admit(Pass),
    /// Send a Retry (its address is not validated and the host is busy).
    Retry,
    /// Refuse it.
    Refuse,
}

/// The host's admission state, shared by the accept loop and the connection tasks.
#[derive(Debug)]
pub(crate) struct Gate {
    limits: Admission,
    pending: Mutex<Pending>,
    counters: [AtomicU64; Outcome::ALL],
    admitted: AtomicU64,
    joins_accepted: AtomicU64,
    high_water: AtomicU64,
    /// Per outcome: when its last event went out, and how many were suppressed since.
    events: Mutex<[(Option<Instant>, u64); Outcome::ALL]>,
}

#[derive(Debug, Default)]
struct Pending {
    by_address: BTreeMap<IpAddr, usize>,
    /// Every pending connection by its pass's number (admission order).
    entries: BTreeMap<u64, Entry>,
    next_id: u64,
}

#[derive(Debug)]
struct Entry {
    address: IpAddr,
    /// When its handshake finished (`None`: still in it). Cleared when its join request is in.
    idle_since: Option<Instant>,
    /// Told when the connection is evicted.
    evict: Arc<Notify>,
}

impl Pending {
    /// Forgets entry `id`; `false` if it was gone already (evicted).
    fn remove(&mut self, id: u64) -> bool {
        let Some(entry) = self.entries.remove(&id) else { return false };
        if let Some(count) = self.by_address.get_mut(&entry.address) {
            *count -= 1;
            if *count == 0 {
                self.by_address.remove(&entry.address);
            }
        }
        true
    }

    /// The connection idle (handshake done, no join request) longest, if for `at_least`.
    fn idlest(&self, now: Instant, at_least: Duration) -> Option<u64> {
        self.entries
            .iter()
            .filter_map(|(&id, entry)| Some((entry.idle_since?, id)))
            .filter(|&(since, _)| now.duration_since(since) >= at_least)
            .min()
            .map(|(_, id)| id)
    }
}

/// Events of one outcome at most this often.
const EVENT_INTERVAL: Duration = Duration::from_secs(1);

impl Gate {
    pub(crate) fn new(limits: Admission) -> Arc<Gate> {
        Arc::new(Gate {
            limits,
            pending: Mutex::default(),
            counters: Default::default(),
            admitted: AtomicU64::new(0),
            joins_accepted: AtomicU64::new(0),
            high_water: AtomicU64::new(0),
            events: Mutex::new([(None, 0); Outcome::ALL]),
        })
    }

    pub(crate) fn limits(&self) -> &Admission {
        &self.limits
    }

    /// Decides on an attempt from `address`; `validated`: QUIC validated the address (the
    /// attempt answered a Retry); `may_retry`: a Retry can still be sent.
    pub(crate) fn admit(
        self: &Arc<Self>,
        address: IpAddr,
        validated: bool,
        may_retry: bool,
    ) -> Verdict {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let mut evicted = None;
        if pending.entries.len() >= self.limits.pending_max {
            let idlest = pending.idlest(Instant::now(), self.limits.idle_evict_after);
            match idlest {
                Some(id) => {
                    if let Some(entry) = pending.entries.get(&id) {
                        entry.evict.notify_one();
                        evicted = Some(entry.address);
                    }
                    pending.remove(id);
                }
                None => {
                    drop(pending);
                    self.count(Outcome::RefusedBusy, Some(address), None);
                    return Verdict::Refuse;
                }
            }
        }
        let outcome = if pending.entries.len() >= self.limits.retry_above && !validated && may_retry
        {
            Some(Outcome::RetrySent)
        } else if pending.by_address.get(&address).copied().unwrap_or(0)
            >= self.limits.per_address_max
        {
            Some(Outcome::RefusedAddress)
        } else {
            None
        };
        let verdict = match outcome {
            Some(Outcome::RetrySent) => Verdict::Retry,
            Some(_) => Verdict::Refuse,
            None => {
                let id = pending.next_id;
                pending.next_id += 1;
                let evict = Arc::new(Notify::new());
                let entry = Entry { address, idle_since: None, evict: evict.clone() };
                pending.entries.insert(id, entry);
                *pending.by_address.entry(address).or_insert(0) += 1;
                self.high_water.fetch_max(pending.entries.len() as u64, Ordering::Relaxed);
                self.admitted.fetch_add(1, Ordering::Relaxed);
                Verdict::Admit(Pass { gate: self.clone(), id, address, evict })
            }
        };
        drop(pending);
        if let Some(gone) = evicted {
            self.count(Outcome::EvictedIdle, Some(gone), None);
        }
        match outcome {
            Some(outcome) => self.count(outcome, Some(address), None),
            None => tracing::debug!(%address, "connection admitted"),
        }
        verdict
    }

    fn set_idle(&self, id: u64, idle_since: Option<Instant>) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = pending.entries.get_mut(&id) {
            entry.idle_since = idle_since;
        }
    }

    /// Counts `outcome` and emits its event unless one went out in the last second.
    pub(crate) fn count(&self, outcome: Outcome, address: Option<IpAddr>, detail: Option<&str>) {
        self.counters[outcome.index()].fetch_add(1, Ordering::Relaxed);
        let suppressed = {
            let mut events = self.events.lock().unwrap_or_else(PoisonError::into_inner);
            let (last, suppressed) = &mut events[outcome.index()];
            let now = Instant::now();
            if last.is_some_and(|last| now.duration_since(last) < EVENT_INTERVAL) {
                *suppressed += 1;
                return;
            }
            *last = Some(now);
            std::mem::take(suppressed)
        };
        let reason = outcome.name();
        let address = address.map(|address| address.to_string());
        let address = address.as_deref().unwrap_or("-");
        let detail = detail.unwrap_or("");
        match outcome {
            Outcome::RetrySent => tracing::info!(address, suppressed, "{reason}"),
            _ => tracing::warn!(address, suppressed, detail, "{reason}"),
        }
    }

    /// A join was accepted.
    pub(crate) fn joined(&self) {
        self.joins_accepted.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn stats(&self) -> AdmissionStats {
        let count = |outcome: Outcome| self.counters[outcome.index()].load(Ordering::Relaxed);
        let pending =
            self.pending.lock().unwrap_or_else(PoisonError::into_inner).entries.len() as u64;
        AdmissionStats {
            admitted: self.admitted.load(Ordering::Relaxed),
            refused_busy: count(Outcome::RefusedBusy),
            refused_address: count(Outcome::RefusedAddress),
            retries_sent: count(Outcome::RetrySent),
            handshakes_failed: count(Outcome::HandshakeFailed),
            join_timeouts: count(Outcome::JoinTimeout),
            joins_malformed: count(Outcome::JoinMalformed),
            joins_oversized: count(Outcome::JoinOversized),
            joins_refused: count(Outcome::JoinRefused),
            closed_before_join: count(Outcome::ClosedBeforeJoin),
            evicted_idle: count(Outcome::EvictedIdle),
            joins_accepted: self.joins_accepted.load(Ordering::Relaxed),
            pending,
            pending_high_water: self.high_water.load(Ordering::Relaxed),
            #[cfg(feature = "udp")]
            udp: crate::udp::UdpHostStats::default(),
        }
    }
}

/// One admitted connection, pending until the pass is dropped (its join answered, or the
/// connection gone) or evicted.
#[derive(Debug)]
pub(crate) struct Pass {
    gate: Arc<Gate>,
    id: u64,
    address: IpAddr,
    evict: Arc<Notify>,
}

impl Pass {
    pub(crate) fn address(&self) -> IpAddr {
        self.address
    }

    pub(crate) fn gate(&self) -> &Gate {
        &self.gate
    }

    /// The handshake is done: from now the connection may be evicted while it sends no join
    /// request.
    pub(crate) fn handshake_done(&self) {
        self.gate.set_idle(self.id, Some(Instant::now()));
    }

    /// The join request is in: never evicted from now.
    pub(crate) fn request_received(&self) {
        self.gate.set_idle(self.id, None);
    }

    /// Completes when the gate evicted this connection to make room.
    pub(crate) async fn evicted(&self) {
        self.evict.notified().await;
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        let mut pending = self.gate.pending.lock().unwrap_or_else(PoisonError::into_inner);
        pending.remove(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(pending_max: usize, per_address_max: usize, retry_above: usize) -> Arc<Gate> {
        let idle_evict_after = Duration::from_secs(3_600);
        let limits = Admission {
            pending_max,
            per_address_max,
            retry_above,
            idle_evict_after,
            ..Admission::default()
        };
        Gate::new(limits)
    }

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn limits_hold_and_passes_give_room_back() {
        let gate = gate(3, 2, 100);
        let a = gate.admit(ip(1), false, true);
        let b = gate.admit(ip(1), false, true);
        assert!(matches!(a, Verdict::Admit(_)) && matches!(b, Verdict::Admit(_)));
        // A third from the same address: over its limit.
        assert!(matches!(gate.admit(ip(1), false, true), Verdict::Refuse));
        let c = gate.admit(ip(2), false, true);
        assert!(matches!(c, Verdict::Admit(_)));
        // Three pending: everyone is refused.
        assert!(matches!(gate.admit(ip(3), true, false), Verdict::Refuse));
        let stats = gate.stats();
        assert_eq!((stats.admitted, stats.refused_address, stats.refused_busy), (3, 1, 1));
        assert_eq!((stats.pending, stats.pending_high_water), (3, 3));
        drop((a, b, c));
        let stats = gate.stats();
        assert_eq!((stats.pending, stats.pending_high_water), (0, 3));
        assert!(matches!(gate.admit(ip(1), false, true), Verdict::Admit(_)));
    }

    #[test]
    fn retries_unvalidated_addresses_when_busy() {
        let gate = gate(10, 10, 1);
        let first = gate.admit(ip(1), false, true);
        assert!(matches!(first, Verdict::Admit(_)));
        assert!(matches!(gate.admit(ip(2), false, true), Verdict::Retry));
        // The same client back with its Retry token: validated, let in.
        assert!(matches!(gate.admit(ip(2), true, false), Verdict::Admit(_)));
        assert_eq!(gate.stats().retries_sent, 1);
    }

    #[test]
    fn a_full_gate_evicts_the_longest_idle_connection() {
        let limits =
            Admission { pending_max: 2, idle_evict_after: Duration::ZERO, ..Admission::default() };
        let gate = Gate::new(limits);
        let Verdict::Admit(first) = gate.admit(ip(1), true, false) else { panic!("admitted") };
        let Verdict::Admit(second) = gate.admit(ip(2), true, false) else { panic!("admitted") };
        // Nobody idle (both still in their handshake): refused.
        assert!(matches!(gate.admit(ip(3), true, false), Verdict::Refuse));
        // The second finished its handshake and sent nothing: it makes room.
        second.handshake_done();
        first.handshake_done();
        first.request_received();
        let Verdict::Admit(third) = gate.admit(ip(3), true, false) else { panic!("admitted") };
        let stats = gate.stats();
        assert_eq!((stats.evicted_idle, stats.refused_busy, stats.pending), (1, 1, 2));
        // The evicted pass learns it; dropping it later frees nothing twice.
        let evicted = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        evicted.block_on(async {
            tokio::time::timeout(Duration::from_secs(1), second.evicted()).await.expect("told")
        });
        drop(second);
        assert_eq!(gate.stats().pending, 2);
        drop((first, third));
        assert_eq!(gate.stats().pending, 0);
    }
}
