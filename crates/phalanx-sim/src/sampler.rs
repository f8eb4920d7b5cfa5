//! Per-player samples of counters over simulated time, and the latency of each command (a
//! no-op unless [`SimConfig::samples_every_ms`](crate::SimConfig::samples_every_ms) is set).

use std::collections::BTreeMap;
use std::sync::Mutex;

use phalanx::{Client, PlayerId, Turn, TypedTurn};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::trace::{flows, Trace};
use crate::{Sample, SimReport};

/// Collects a player's [`Sample`]s and command latencies for the report (a no-op unless
/// sampling is on).
pub(crate) struct Sampler {
    machine: usize,
    every_ms: u64,
    next_ms: u64,
    /// Our commands not yet executed: sequence number → simulated ms at submit.
    open: BTreeMap<u32, u64>,
}

impl Sampler {
    pub(crate) fn new(machine: usize, every_ms: u64) -> Sampler {
        Sampler { machine, every_ms, next_ms: 0, open: BTreeMap::new() }
    }

    pub(crate) fn submitted(&mut self, ticket: &phalanx::proto::Ticket) {
        if self.every_ms > 0 {
            self.open.insert(ticket.seq.0, turmoil::elapsed().as_millis() as u64);
        }
    }

    pub(crate) fn executed<C>(
        &mut self,
        me: PlayerId,
        turn: &TypedTurn<C>,
        report: &Mutex<SimReport>,
    ) {
        if self.every_ms == 0 {
            return;
        }
        let now = turmoil::elapsed().as_millis() as u64;
        for record in &turn.records {
            if let phalanx::TypedRecord::Command { player, seq, .. } = record {
                if let Some(at) = (*player == me).then(|| self.open.remove(&seq.0)).flatten() {
                    let latency = now.saturating_sub(at).min(u64::from(u32::MAX)) as u32;
                    let mut report = report.lock().expect("not poisoned");
                    report.players[self.machine].command_latencies.push((now, latency));
                }
            }
        }
    }

    pub(crate) async fn sample<C: Serialize + DeserializeOwned>(
        &mut self,
        client: &Client<C>,
        turn: Turn,
        report: &Mutex<SimReport>,
        trace: &Mutex<Trace>,
    ) {
        let now = turmoil::elapsed().as_millis() as u64;
        if self.every_ms == 0 || now < self.next_ms {
            return;
        }
        self.next_ms = (now / self.every_ms + 1) * self.every_ms;
        let Ok(stats) = client.stats().await else { return };
        let (up, down) = flows(trace, self.machine);
        let sample = Sample {
            at_ms: now,
            turn: turn.0,
            wire_bytes: (up.1, down.1),
            wire_datagrams: (up.0, down.0),
            app_bytes: (stats.link.bytes_sent, stats.link.bytes_received),
            app_datagrams: (stats.link.datagrams_sent, stats.link.datagrams_received),
            stall_ms: stats.stall_ms,
            turn_length_ms: stats.turn_length_ms,
            command_delay_turns: stats.command_delay_turns,
            playout_ms: stats.playout_ms,
        };
        let mut report = report.lock().expect("not poisoned");
        let player = &mut report.players[self.machine];
        player.samples.push(sample);
        // Kept in case the session ends before the stats can be read at the end.
        player.record_stats(now, &stats);
    }
}
