//! A relay shard and its players in memory, with no socket: how many heap allocations the
//! shard makes a datagram once the matches are running. The test allocator counts every
//! allocation made inside the shard's calls (the bots' and the harness's are not counted).
//!
//! The relay's own path (routing, the channel, timers, sending) reuses its buffers; what
//! allocates is what the session keeps: a command or a hash report received (stored for its
//! turn) and a sealed turn (its records and encoding, kept for the window and rejoins). That is
//! about half an allocation a datagram at the demo's command rate; one allocation more on
//! every datagram would double it, and fails this test.
#![allow(clippy::print_stderr)] // the figures, for the log

use std::alloc::System;
use std::net::SocketAddr;
use std::time::Duration;

use phalanx_relay::load::{Bot, BotConfig};
use phalanx_relay::{Limits, MatchId, MatchSpec, Outbox, Shard};
use phalanx_udp::HostKey;
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const MATCHES: u64 = 4;
const PLAYERS: u64 = 8;

/// The shard's outbox: packets kept in buffers reused from one millisecond to the next, so
/// that handing a packet over allocates nothing once warm.
#[derive(Default)]
struct Pool {
    packets: Vec<(SocketAddr, Vec<u8>)>,
    len: usize,
}

impl Outbox for Pool {
    fn send(&mut self, to: SocketAddr, packet: &[u8]) -> bool {
        if self.len == self.packets.len() {
            self.packets.push((to, Vec::with_capacity(1_200)));
        }
        let slot = &mut self.packets[self.len];
        slot.0 = to;
        slot.1.clear();
        slot.1.extend_from_slice(packet);
        self.len += 1;
        true
    }
}

#[test]
fn the_shard_allocates_next_to_nothing_a_datagram_once_warm() {
    let relay: SocketAddr = "10.0.0.1:7777".parse().unwrap();
    let key = HostKey::from_bytes([9; 32]);
    let mut shard = Shard::new(HostKey::from_bytes(key.to_bytes()), [5; 32], Limits::default(), 0);
    let session = phalanx_proto::SessionConfig::default().quiet_relay();
    let mut spec = MatchSpec::new(PLAYERS as u8);
    spec.session = session.clone();
    let mut bots = Vec::new();
    let mut to_shard: Vec<(SocketAddr, Vec<u8>)> = Vec::new();
    for m in 0..MATCHES {
        let tokens: Vec<u64> = (0..PLAYERS).map(|s| m * 100 + s + 1).collect();
        shard.create_match(0, MatchId(m), &spec, &tokens).unwrap();
        for (seat, &token) in tokens.iter().enumerate() {
            let address = SocketAddr::from(([10, 1, m as u8, seat as u8], 5000));
            let config = BotConfig {
                address: relay,
                pin: key.public(),
                token,
                session: session.clone(),
                seed: token,
                join_timeout: Duration::from_secs(10),
                hostile: false,
            };
            let mut send = |packet: &[u8]| to_shard.push((address, packet.to_vec()));
            bots.push((address, Bot::new(&config, 0, &mut send).unwrap()));
        }
    }
    let mut pool = Pool::default();
    let (mut counted, mut datagrams, mut allocations) = (false, 0u64, 0u64);
    let mut in_datagrams = 0u64;
    for now in 0..40_000u64 {
        // Measured from 10 s on: every match has long been running.
        counted |= now == 10_000;
        let region = Region::new(GLOBAL);
        for (from, packet) in to_shard.drain(..) {
            shard.handle_datagram(now, from, &packet, &mut pool);
            datagrams += u64::from(counted);
        }
        let on_datagrams = region.change().allocations as u64;
        shard.handle_timeout(now, &mut pool);
        if counted {
            allocations += region.change().allocations as u64;
            in_datagrams += on_datagrams;
            datagrams += pool.len as u64;
        }
        for (to, packet) in &pool.packets[..pool.len] {
            if let Some((address, bot)) = bots.iter_mut().find(|(address, _)| address == to) {
                let mut send = |packet: &[u8]| to_shard.push((*address, packet.to_vec()));
                bot.handle(now, packet, &mut send);
            }
        }
        pool.len = 0;
        for (address, bot) in &mut bots {
            if bot.poll_timeout().is_some_and(|at| at <= now) {
                let mut send = |packet: &[u8]| to_shard.push((*address, packet.to_vec()));
                bot.handle_timeout(now, &mut send);
            }
        }
    }
    let turns: u64 = bots.iter().map(|(_, bot)| bot.report().turns).sum();
    let commands: u64 = bots.iter().map(|(_, bot)| bot.report().commands).sum();
    let per_datagram = allocations as f64 / datagrams as f64;
    eprintln!("of which handling datagrams in: {in_datagrams}");
    eprintln!(
        "{MATCHES} matches of {PLAYERS}: {datagrams} datagrams in and out over 30 s, {allocations} \
         allocations in the shard ({per_datagram:.3} a datagram); {commands} commands, {turns} turns played"
    );
    assert!(bots.iter().all(|(_, bot)| bot.report().joined), "every bot joined");
    assert!(turns > MATCHES * PLAYERS * 250, "the matches ran: {turns} turns");
    assert!(per_datagram < 1.0, "{per_datagram} allocations a datagram");
}
