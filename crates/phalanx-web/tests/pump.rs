//! The browser client's pump, natively, against the sans-IO host in memory, exactly as a
//! page's glue drives it: the join request read from the I/O buffer, the reply and every
//! datagram written into it, datagrams for the host polled out of it. The pump's player and the
//! host's own player execute the same turns, with orders from both; bad input is an error or
//! a counted drop, never a panic.

use std::collections::VecDeque;

use phalanx_proto::{Host, Joined, PlayerId, Record, SessionConfig, SplitMix64, TurnBundle};
use phalanx_web::{Pump, PumpError, IO_BYTES_MAX};

/// One-way latency, ms.
const LATENCY_MS: u64 = 10;

fn config() -> SessionConfig {
    let mut config = SessionConfig::default();
    config.turns.length_ms = 20;
    config
}

/// A hash chain over a turn's records.
fn fold(state: u64, bundle: &TurnBundle) -> u64 {
    let text = format!("{}:{:?}", bundle.turn.0, bundle.records);
    text.bytes().fold(state, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// The host (with a player of its own) and the pump's player, joined.
struct Net {
    host: Host,
    pump: Pump,
    player: PlayerId,
    to_pump: VecDeque<(u64, Vec<u8>)>,
    to_host: VecDeque<(u64, Vec<u8>)>,
}

impl Net {
    fn joined() -> Net {
        let mut host = Host::new(config(), &[1]).expect("a valid config");
        host.add_local_player().expect("a seat");
        let mut pump = Pump::new();
        let len = pump.join(config(), 1).expect("a valid config");
        let request = pump.io()[..len].to_vec();
        let response = host.handle_join(0, &request);
        let reply = response.reply.expect("a reply");
        pump.io_mut(reply.len()).unwrap().copy_from_slice(&reply);
        let Joined::Player(player) = pump.join_reply(LATENCY_MS, reply.len()).expect("joined")
        else {
            panic!("a player")
        };
        host.start(LATENCY_MS);
        Net { host, pump, player, to_pump: VecDeque::new(), to_host: VecDeque::new() }
    }

    /// One millisecond: timers, datagrams both ways (each `LATENCY_MS` later).
    fn step(&mut self, now: u64) {
        if self.host.poll_timeout().is_some_and(|at| at <= now) {
            self.host.handle_timeout(now);
        }
        let mut buf = Vec::new();
        while let Some(player) = self.host.poll_transmit(now, &mut buf) {
            assert_eq!(player, self.player);
            self.to_pump.push_back((now + LATENCY_MS, buf.clone()));
        }
        while self.to_pump.front().is_some_and(|(at, _)| *at <= now) {
            let (_, datagram) = self.to_pump.pop_front().unwrap();
            self.pump.io_mut(datagram.len()).unwrap().copy_from_slice(&datagram);
            self.pump.datagram(now, datagram.len()).unwrap();
        }
        self.pump.timeout(now).unwrap();
        while let Some(len) = self.pump.poll_datagram(now).unwrap() {
            self.to_host.push_back((now + LATENCY_MS, self.pump.io()[..len].to_vec()));
        }
        while self.to_host.front().is_some_and(|(at, _)| *at <= now) {
            let (_, datagram) = self.to_host.pop_front().unwrap();
            self.host.handle_datagram(now, self.player, &datagram);
        }
    }
}

#[test]
fn the_pumps_player_and_the_hosts_execute_the_same_turns() {
    const TURNS: usize = 150;
    let mut net = Net::joined();
    let (mut host_chain, mut pump_chain) = (vec![1u64], vec![1u64]);
    // Each player's commands among the turns the pump's player executed.
    let mut executed = [0usize; 2];
    for now in LATENCY_MS..20_000 {
        net.step(now);
        while let Some(bundle) = net.host.next_turn() {
            host_chain.push(fold(*host_chain.last().unwrap(), &bundle));
            if bundle.turn.0 % 7 == 0 {
                net.host.submit(&[1, bundle.turn.0 as u8]).expect("within budget");
            }
        }
        let client = net.pump.client().expect("joined");
        while let Some(bundle) = client.next_turn(now) {
            pump_chain.push(fold(*pump_chain.last().unwrap(), &bundle));
            for record in &bundle.records {
                if let Record::Command { player, .. } = record {
                    executed[usize::from(*player == net.player)] += 1;
                }
            }
            if bundle.turn.0 % 5 == 0 {
                client.submit(now, &[2, bundle.turn.0 as u8]).expect("within budget");
            }
        }
        if host_chain.len() > TURNS && pump_chain.len() > TURNS {
            break;
        }
    }
    assert!(pump_chain.len() > TURNS, "the pump's player played {} turns", pump_chain.len());
    assert_eq!(pump_chain[..=TURNS], host_chain[..=TURNS], "the same turns, in order");
    // About one in seven turns carries the host's order, one in five the pump's.
    assert!(executed[0] >= TURNS / 7 - 4 && executed[1] >= TURNS / 5 - 4, "{executed:?}");
}

#[test]
fn bad_input_is_an_error_or_a_counted_drop_never_a_panic() {
    let mut pump = Pump::new();
    assert_eq!(pump.timeout(0), Err(PumpError::NoClient));
    assert_eq!(pump.datagram(0, 0), Err(PumpError::NoClient));
    assert_eq!(pump.poll_datagram(0), Err(PumpError::NoClient));
    assert_eq!(pump.wakeup_ms(), None);
    assert!(matches!(pump.io_mut(IO_BYTES_MAX + 1), Err(PumpError::TooLarge { .. })));
    let len = pump.join(config(), 1).unwrap();
    assert!(len > 0);
    assert!(matches!(pump.datagram(0, len + 1), Err(PumpError::TooLarge { .. })));
    pump.io_mut(16).unwrap().fill(0xff);
    assert!(matches!(pump.join_reply(0, 16), Err(PumpError::Join(_))));

    // A joined pump takes random datagrams: every one dropped and counted.
    let mut net = Net::joined();
    let mut random = SplitMix64::new(11);
    for k in 0..500u64 {
        let len = 1 + (random.next_u64() % 200) as usize;
        let io = net.pump.io_mut(len).unwrap();
        io.iter_mut().for_each(|byte| *byte = random.next_u64() as u8);
        net.pump.datagram(LATENCY_MS + k, len).unwrap();
    }
    let drops = net.pump.client().unwrap().stats().drops;
    assert!(drops.malformed > 0, "counted: {drops:?}");
}
