//! The reliable message stream, from outside: messages both ways over a seeded lossy,
//! duplicating, reordering link arrive whole, in order, exactly once; every limit holds; a
//! misbehaving peer's packets are dropped and counted, never a panic.

mod common;

use std::collections::VecDeque;

use phalanx_udp::stream::{SendError, StreamError, ACK, SEGMENT};
use phalanx_udp::{Stream, StreamConfig};
use proptest::prelude::*;

/// A small deterministic generator for the link's faults (the seed comes from proptest).
struct Faults(u64);

impl Faults {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// Packets in flight one way: (arrival time, bytes).
#[derive(Default)]
struct Wire(Vec<(u64, Vec<u8>)>);

impl Wire {
    fn put(&mut self, now: u64, packet: Vec<u8>, faults: &mut Faults, loss: u64, dup: u64) {
        if faults.chance(loss) {
            return;
        }
        let copies = if faults.chance(dup) { 2 } else { 1 };
        for _ in 0..copies {
            let delay = 20 + faults.next() % 60; // 20-80 ms: reorders freely
            self.0.push((now + delay, packet.clone()));
        }
    }

    fn due(&mut self, now: u64) -> Vec<Vec<u8>> {
        let (due, later): (Vec<_>, Vec<_>) = self.0.drain(..).partition(|(at, _)| *at <= now);
        self.0 = later;
        due.into_iter().map(|(_, packet)| packet).collect()
    }
}

/// Runs two streams against each other until both sent everything and it was acknowledged
/// (or virtual time runs out); returns what each received.
fn exchange(
    config: StreamConfig,
    to_b: &[Vec<u8>],
    to_a: &[Vec<u8>],
    seed: u64,
    loss: u64,
    dup: u64,
) -> (Stream, Stream, Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let (mut a, mut b) = (Stream::new(config), Stream::new(config));
    let mut pending_a: VecDeque<&Vec<u8>> = to_b.iter().collect();
    let mut pending_b: VecDeque<&Vec<u8>> = to_a.iter().collect();
    let (mut a_to_b, mut b_to_a) = (Wire::default(), Wire::default());
    let mut faults = Faults(seed);
    let (mut got_a, mut got_b) = (Vec::new(), Vec::new());
    let mut now = 0;
    while now < 1_200_000 {
        for (stream, pending) in [(&mut a, &mut pending_a), (&mut b, &mut pending_b)] {
            while let Some(message) = pending.front() {
                match stream.send(message) {
                    Ok(()) => {
                        pending.pop_front();
                    }
                    Err(SendError::Full { .. }) => break,
                    Err(error) => panic!("{error}"),
                }
            }
        }
        for packet in a_to_b.due(now) {
            let _ = b.handle(now, &packet);
        }
        for packet in b_to_a.due(now) {
            let _ = a.handle(now, &packet);
        }
        a.handle_timeout(now);
        b.handle_timeout(now);
        while let Some(packet) = a.poll_transmit(now) {
            a_to_b.put(now, packet, &mut faults, loss, dup);
        }
        while let Some(packet) = b.poll_transmit(now) {
            b_to_a.put(now, packet, &mut faults, loss, dup);
        }
        got_a.extend(std::iter::from_fn(|| a.poll_message()));
        got_b.extend(std::iter::from_fn(|| b.poll_message()));
        let done = pending_a.is_empty() && pending_b.is_empty() && a.is_idle() && b.is_idle();
        if done && got_a.len() == to_a.len() && got_b.len() == to_b.len() {
            break;
        }
        now += 5;
    }
    (a, b, got_a, got_b)
}

fn messages() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let message = (0usize..5_000, any::<u8>())
        .prop_map(|(len, fill)| (0..len).map(|i| fill.wrapping_add(i as u8)).collect::<Vec<u8>>());
    proptest::collection::vec(message, 0..8)
}

proptest! {
    #![proptest_config(common::config(64))]

    /// Both ways at once, up to 30 % loss and 10 % duplication, delays that reorder: every
    /// message arrives intact, in order, once; nothing stays queued; losses were repaired by
    /// retransmission and duplicates counted.
    #[test]
    fn messages_arrive_whole_in_order_once(
        to_b in messages(),
        to_a in messages(),
        seed in any::<u64>(),
        loss in 0u64..30,
        dup in 0u64..10,
        segment_bytes in 1usize..1_176,
        window in 1u32..33,
    ) {
        let config = StreamConfig {
            segment_bytes,
            window,
            send_bytes_max: 12_000,
            ..StreamConfig::default()
        };
        let (a, b, got_a, got_b) = exchange(config, &to_b, &to_a, seed, loss, dup);
        prop_assert_eq!(&got_b, &to_b);
        prop_assert_eq!(&got_a, &to_a);
        prop_assert_eq!(a.queued_bytes() + b.queued_bytes(), 0);
        let (sa, sb) = (a.stats(), b.stats());
        prop_assert_eq!(sb.messages_received as usize, to_b.len());
        prop_assert_eq!(sa.malformed + sa.spoofed + sa.out_of_window + sa.too_large, 0);
        prop_assert_eq!(sb.malformed + sb.spoofed + sb.out_of_window + sb.too_large, 0);
    }

    /// Bytes that are not what a stream sends never panic, never deliver, and are counted.
    #[test]
    fn garbage_is_dropped_and_counted(
        packets in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..50),
    ) {
        let mut stream = Stream::new(StreamConfig::default());
        let mut refused = 0;
        for packet in &packets {
            // A packet of the right shape may be a genuine duplicate or ack; the rest refused.
            if stream.handle(0, packet).is_err() {
                refused += 1;
            }
        }
        let stats = stream.stats();
        prop_assert_eq!(stats.malformed + stats.spoofed + stats.out_of_window + stats.too_large, refused);
        prop_assert!(stream.poll_message().is_none() || packets.iter().any(|p| p.first() == Some(&SEGMENT)));
    }
}

#[test]
fn a_lossless_exchange_measures_the_round_trip_and_sends_nothing_twice() {
    let big: Vec<u8> = (0..40_000u32).map(|i| i as u8).collect();
    let (a, b, _, got_b) =
        exchange(StreamConfig::default(), std::slice::from_ref(&big), &[], 7, 0, 0);
    assert_eq!(got_b, vec![big]);
    let stats = a.stats();
    assert_eq!(stats.segments_sent, 37, "40,000 bytes in 1,100-byte segments");
    assert_eq!(stats.retransmits, 0);
    // Delays of 20-80 ms each way, plus up to 5 ms of polling.
    assert!((40..=170).contains(&stats.rtt_ms), "rtt {}", stats.rtt_ms);
    let acks = b.stats().acks_sent;
    assert!((1..=37).contains(&acks), "at most one ack per segment: {acks}");
}

#[test]
fn sending_respects_the_message_and_buffer_limits() {
    let config = StreamConfig { message_bytes_max: 100, send_bytes_max: 150, ..Default::default() };
    let mut stream = Stream::new(config);
    assert_eq!(stream.send(&[0; 101]), Err(SendError::TooLarge { len: 101, max: 100 }));
    assert_eq!(stream.send(&[0; 100]), Ok(()));
    assert_eq!(stream.send(&[0; 60]), Err(SendError::Full { len: 60, queued: 100 }));
    assert_eq!(stream.send(&[0; 50]), Ok(()));
    assert_eq!(stream.queued_bytes(), 150);
    // Acknowledged, the room comes back.
    let mut peer = Stream::new(config);
    while let Some(packet) = stream.poll_transmit(0) {
        peer.handle(10, &packet).unwrap();
    }
    while let Some(ack) = peer.poll_transmit(10) {
        stream.handle(20, &ack).unwrap();
    }
    assert_eq!(stream.queued_bytes(), 0);
    assert!(stream.is_idle());
    assert_eq!(peer.poll_message(), Some(vec![0; 100]));
    assert_eq!(peer.poll_message(), Some(vec![0; 50]));
    assert_eq!(stream.send(&[0; 60]), Ok(()));
}

#[test]
fn a_peer_message_over_the_limit_is_dropped_and_the_next_one_arrives() {
    let sender_config = StreamConfig { segment_bytes: 100, ..Default::default() };
    let receiver_config = StreamConfig { message_bytes_max: 1_000, ..sender_config };
    let (mut sender, mut receiver) = (Stream::new(sender_config), Stream::new(receiver_config));
    sender.send(&[1; 3_000]).unwrap();
    sender.send(b"next").unwrap();
    let mut errors = Vec::new();
    for round in 0..100 {
        while let Some(packet) = sender.poll_transmit(round) {
            if let Err(error) = receiver.handle(round, &packet) {
                errors.push(error);
            }
        }
        while let Some(ack) = receiver.poll_transmit(round) {
            sender.handle(round, &ack).unwrap();
        }
    }
    assert_eq!(errors, vec![StreamError::MessageTooLarge]);
    assert_eq!(receiver.poll_message(), Some(b"next".to_vec()));
    assert_eq!(receiver.poll_message(), None);
    assert_eq!(receiver.stats().too_large, 1);
    assert!(sender.is_idle());
}

#[test]
fn malformed_spoofed_and_out_of_window_packets_are_refused() {
    let mut stream = Stream::new(StreamConfig { window: 4, ..Default::default() });
    let segment = |seq: u32, flags: u8, data: &[u8]| {
        let mut packet = vec![SEGMENT];
        packet.extend_from_slice(&seq.to_le_bytes());
        packet.push(flags);
        packet.extend_from_slice(data);
        packet
    };
    assert_eq!(stream.handle(0, &[]), Err(StreamError::Malformed));
    assert_eq!(stream.handle(0, &[9, 1, 2]), Err(StreamError::Malformed));
    assert_eq!(stream.handle(0, &segment(0, 0x80, b"x")), Err(StreamError::Malformed));
    assert_eq!(stream.handle(0, &segment(0, 1, &[0; 1_101])), Err(StreamError::Malformed));
    assert_eq!(stream.handle(0, &segment(4, 1, b"x")), Err(StreamError::OutOfWindow));
    let mut ack = vec![ACK];
    ack.extend_from_slice(&5u32.to_le_bytes());
    ack.extend_from_slice(&0u32.to_le_bytes());
    assert_eq!(stream.handle(0, &ack), Err(StreamError::Spoofed), "nothing was sent");
    assert_eq!(stream.handle(0, &ack[..8]), Err(StreamError::Malformed));
    let stats = stream.stats();
    assert_eq!((stats.malformed, stats.out_of_window, stats.spoofed), (5, 1, 1));
    // Within the window, out of order: held, then delivered when the gap fills.
    assert_eq!(stream.handle(0, &segment(1, 1, b"b")), Ok(()));
    assert_eq!(stream.poll_message(), None);
    assert_eq!(stream.handle(0, &segment(0, 1, b"a")), Ok(()));
    assert_eq!(stream.poll_message(), Some(b"a".to_vec()));
    assert_eq!(stream.poll_message(), Some(b"b".to_vec()));
    assert_eq!(stream.handle(0, &segment(0, 1, b"a")), Ok(()), "an old repeat is re-acked");
    assert_eq!(stream.stats().duplicates, 1);
}

#[test]
fn a_dead_link_backs_the_retransmit_timer_off_to_its_cap() {
    let config = StreamConfig { rto_initial_ms: 100, rto_max_ms: 1_600, ..Default::default() };
    let mut stream = Stream::new(config);
    stream.send(b"hello").unwrap();
    let mut now = 0;
    let mut gaps = Vec::new();
    for _ in 0..8 {
        assert!(stream.poll_transmit(now).is_some());
        let due = stream.poll_timeout().expect("a segment is in flight");
        gaps.push(due - now);
        now = due;
        stream.handle_timeout(now);
    }
    assert_eq!(gaps, vec![100, 200, 400, 800, 1_600, 1_600, 1_600, 1_600]);
    assert_eq!(stream.stats().retransmits, 7);
}
