//! What a relay counts: datagrams, bytes, drops by reason, matches and players, and how late
//! turns were sealed; and their Prometheus text form.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// The upper bounds (milliseconds, inclusive) of the seal-lateness histogram's buckets; a last
/// bucket holds everything later.
pub const LATENESS_BUCKETS_MS: [u64; 16] =
    [0, 1, 2, 3, 4, 5, 7, 10, 15, 20, 30, 50, 100, 250, 500, 1000];

/// How late turns were sealed: from the turn's deadline to the moment the relay sealed it
/// (a relay that wakes late, or is busy with other matches, seals late). A stall (a player a
/// whole window behind) is not lateness: the turn is not due then.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lateness {
    counts: [u32; LATENESS_BUCKETS_MS.len() + 1],
    sum_ms: u64,
    max_ms: u64,
}

impl Lateness {
    /// Counts one turn sealed `ms` after its deadline.
    pub fn record(&mut self, ms: u64) {
        let bucket = LATENESS_BUCKETS_MS.iter().position(|&bound| ms <= bound);
        let bucket = bucket.unwrap_or(LATENESS_BUCKETS_MS.len());
        self.counts[bucket] = self.counts[bucket].saturating_add(1);
        self.sum_ms += ms;
        self.max_ms = self.max_ms.max(ms);
    }

    /// Turns counted.
    pub fn count(&self) -> u64 {
        self.counts.iter().map(|&c| u64::from(c)).sum()
    }

    /// The latest any turn was sealed, in milliseconds.
    pub fn max_ms(&self) -> u64 {
        self.max_ms
    }

    /// The bucket bound at or under which a fraction `q` (0 to 1) of the turns were sealed:
    /// `quantile(0.99)` is the p99, rounded up to a bucket's bound (the largest seen, past the
    /// last bound). `None` before any turn.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        let count = self.count();
        if count == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (bucket, &n) in self.counts.iter().enumerate() {
            seen += u64::from(n);
            if seen >= rank {
                return Some(LATENESS_BUCKETS_MS.get(bucket).copied().unwrap_or(self.max_ms));
            }
        }
        Some(self.max_ms)
    }

    /// The turns counted here and not in `earlier` (an earlier reading of the same counter):
    /// a window's lateness. The window's max is the bound of its latest bucket.
    pub fn since(&self, earlier: &Lateness) -> Lateness {
        let mut window = Lateness::default();
        for (i, (now, then)) in self.counts.iter().zip(earlier.counts).enumerate() {
            window.counts[i] = now.saturating_sub(then);
            if window.counts[i] > 0 {
                window.max_ms = LATENESS_BUCKETS_MS.get(i).copied().unwrap_or(self.max_ms);
            }
        }
        window.sum_ms = self.sum_ms.saturating_sub(earlier.sum_ms);
        window
    }

    /// Adds `other`'s counts to these.
    pub fn merge(&mut self, other: &Lateness) {
        for (mine, theirs) in self.counts.iter_mut().zip(other.counts) {
            *mine = mine.saturating_add(theirs);
        }
        self.sum_ms += other.sum_ms;
        self.max_ms = self.max_ms.max(other.max_ms);
    }

    fn prometheus(&self, out: &mut String, name: &str) {
        let _ = writeln!(out, "# HELP {name} Turns sealed, by how late after their deadline.");
        let _ = writeln!(out, "# TYPE {name} histogram");
        let mut seen = 0u64;
        for (bound, &n) in LATENESS_BUCKETS_MS.iter().zip(&self.counts) {
            seen += u64::from(n);
            let seconds = *bound as f64 / 1000.0;
            let _ = writeln!(out, "{name}_bucket{{le=\"{seconds}\"}} {seen}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", self.count());
        let _ = writeln!(out, "{name}_sum {}", self.sum_ms as f64 / 1000.0);
        let _ = writeln!(out, "{name}_count {}", self.count());
    }
}

/// Datagrams the relay dropped, by reason. Every one is counted here; none is dropped silently.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Drops {
    /// Not a packet of the protocol: empty, oversize, or a data packet from an address with no
    /// connection.
    pub malformed: u64,
    /// A data packet whose tag did not verify (corrupted, forged, another connection's).
    pub tampered: u64,
    /// An authentic data packet delivered before (a replay).
    pub replayed: u64,
    /// An authentic data packet older than the replay window.
    pub too_old: u64,
    /// A handshake the responder refused (bad cookie, replayed, undecryptable).
    pub handshake_refused: u64,
    /// A completed handshake turned away: the relay holds as many connections as it may.
    pub connections_full: u64,
    /// A datagram the socket would not take (its send buffer full) or refused.
    pub send_failed: u64,
}

impl Drops {
    fn merge(&mut self, other: &Drops) {
        self.malformed += other.malformed;
        self.tampered += other.tampered;
        self.replayed += other.replayed;
        self.too_old += other.too_old;
        self.handshake_refused += other.handshake_refused;
        self.connections_full += other.connections_full;
        self.send_failed += other.send_failed;
    }

    /// Every drop, whatever its reason.
    pub fn total(&self) -> u64 {
        self.malformed
            + self.tampered
            + self.replayed
            + self.too_old
            + self.handshake_refused
            + self.connections_full
            + self.send_failed
    }
}

/// A relay's (or one worker's) counters and gauges.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Metrics {
    /// Datagrams received.
    pub datagrams_in: u64,
    /// UDP payload bytes received.
    pub bytes_in: u64,
    /// Datagrams sent.
    pub datagrams_out: u64,
    /// UDP payload bytes sent.
    pub bytes_out: u64,
    /// Datagrams dropped, by reason.
    pub drops: Drops,
    /// Cookie replies sent to handshakes (the anti-spoofing step).
    pub cookie_replies: u64,
    /// QUIC clients told at once (QUIC version negotiation) that the relay speaks raw UDP.
    pub quic_clients_answered: u64,
    /// Join requests refused (unknown token, full match, wrong game data...).
    pub joins_refused: u64,
    /// Players (and spectators) seated, rejoins included.
    pub joins: u64,
    /// Matches created.
    pub matches_created: u64,
    /// Matches that ended and were freed (finished, ended by the operator, emptied or drained).
    pub matches_finished: u64,
    /// Matches freed because nobody joined them in time.
    pub matches_expired: u64,
    /// Matches held now.
    pub matches: u64,
    /// Connections held now (joining or seated).
    pub connections: u64,
    /// Players seated now (spectators not included).
    pub players: u64,
    /// How late turns were sealed.
    pub seal_lateness: Lateness,
    /// Match events nobody took in time ([`Shard::poll_event`](crate::Shard::poll_event)).
    pub events_dropped: u64,
    /// Commands the game's rule refused ([`CommandRule`](crate::CommandRule)).
    pub commands_refused: u64,
}

impl Metrics {
    /// Adds another worker's metrics to these.
    pub fn merge(&mut self, other: &Metrics) {
        self.datagrams_in += other.datagrams_in;
        self.bytes_in += other.bytes_in;
        self.datagrams_out += other.datagrams_out;
        self.bytes_out += other.bytes_out;
        self.drops.merge(&other.drops);
        self.cookie_replies += other.cookie_replies;
        self.quic_clients_answered += other.quic_clients_answered;
        self.joins_refused += other.joins_refused;
        self.joins += other.joins;
        self.matches_created += other.matches_created;
        self.matches_finished += other.matches_finished;
        self.matches_expired += other.matches_expired;
        self.matches += other.matches;
        self.connections += other.connections;
        self.players += other.players;
        self.seal_lateness.merge(&other.seal_lateness);
        self.events_dropped += other.events_dropped;
        self.commands_refused += other.commands_refused;
    }

    /// The Prometheus text exposition of these metrics, and of the process's CPU and memory
    /// when `process` is given.
    pub fn prometheus(&self, process: Option<Process>) -> String {
        let mut out = String::with_capacity(4_096);
        let counters = [
            ("phalanx_relay_datagrams_received_total", "Datagrams received.", self.datagrams_in),
            ("phalanx_relay_bytes_received_total", "UDP payload bytes received.", self.bytes_in),
            ("phalanx_relay_datagrams_sent_total", "Datagrams sent.", self.datagrams_out),
            ("phalanx_relay_bytes_sent_total", "UDP payload bytes sent.", self.bytes_out),
            ("phalanx_relay_cookie_replies_total", "Cookie replies sent.", self.cookie_replies),
            (
                "phalanx_relay_quic_clients_answered_total",
                "QUIC clients told the relay speaks raw UDP.",
                self.quic_clients_answered,
            ),
            ("phalanx_relay_joins_total", "Players and spectators seated.", self.joins),
            ("phalanx_relay_joins_refused_total", "Join requests refused.", self.joins_refused),
            ("phalanx_relay_matches_created_total", "Matches created.", self.matches_created),
            ("phalanx_relay_matches_finished_total", "Matches ended.", self.matches_finished),
            ("phalanx_relay_matches_expired_total", "Matches nobody joined.", self.matches_expired),
            (
                "phalanx_relay_commands_refused_total",
                "Commands the game's rule refused.",
                self.commands_refused,
            ),
        ];
        for (name, help, value) in counters {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}");
        }
        let name = "phalanx_relay_dropped_datagrams_total";
        let _ = writeln!(out, "# HELP {name} Datagrams dropped, by reason.\n# TYPE {name} counter");
        let d = &self.drops;
        let reasons = [
            ("malformed", d.malformed),
            ("tampered", d.tampered),
            ("replayed", d.replayed),
            ("too_old", d.too_old),
            ("handshake_refused", d.handshake_refused),
            ("connections_full", d.connections_full),
            ("send_failed", d.send_failed),
        ];
        for (reason, value) in reasons {
            let _ = writeln!(out, "{name}{{reason=\"{reason}\"}} {value}");
        }
        let gauges = [
            ("phalanx_relay_matches", "Matches held.", self.matches),
            ("phalanx_relay_connections", "Connections held.", self.connections),
            ("phalanx_relay_players", "Players seated.", self.players),
        ];
        for (name, help, value) in gauges {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}");
        }
        self.seal_lateness.prometheus(&mut out, "phalanx_relay_seal_lateness_seconds");
        if let Some(process) = process {
            process.prometheus(&mut out);
        }
        out
    }
}

/// The relay process's CPU time and memory (Linux: `/proc/self`; zero elsewhere).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Process {
    /// CPU seconds used, user and system.
    pub cpu_seconds: f64,
    /// Resident memory, in bytes.
    pub resident_bytes: u64,
}

impl Process {
    /// Reads them now.
    pub fn read() -> Process {
        let ticks_per_second = 100.0; // USER_HZ, 100 on every Linux this runs on
        let cpu_seconds = std::fs::read_to_string("/proc/self/stat")
            .ok()
            .and_then(|stat| {
                // The fields after the command's closing parenthesis: utime is the 12th, stime the 13th.
                let rest = stat.rsplit_once(')')?.1;
                let fields: Vec<&str> = rest.split_whitespace().collect();
                let user: f64 = fields.get(11)?.parse().ok()?;
                let system: f64 = fields.get(12)?.parse().ok()?;
                Some((user + system) / ticks_per_second)
            })
            .unwrap_or(0.0);
        let resident_bytes = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|status| {
                let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
                let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
                Some(kib * 1024)
            })
            .unwrap_or(0);
        Process { cpu_seconds, resident_bytes }
    }

    fn prometheus(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "# HELP process_cpu_seconds_total CPU time used, user and system.\n\
             # TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total {}",
            self.cpu_seconds
        );
        let _ = writeln!(
            out,
            "# HELP process_resident_memory_bytes Resident memory.\n\
             # TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes {}",
            self.resident_bytes
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_round_up_to_a_bucket_bound() {
        let mut lateness = Lateness::default();
        assert_eq!(lateness.quantile(0.99), None);
        for _ in 0..98 {
            lateness.record(0);
        }
        lateness.record(6);
        lateness.record(2_000);
        assert_eq!(lateness.quantile(0.5), Some(0));
        assert_eq!(lateness.quantile(0.99), Some(7));
        assert_eq!(lateness.quantile(1.0), Some(2_000));
        assert_eq!(lateness.count(), 100);
        assert_eq!(lateness.max_ms(), 2_000);
    }
}
