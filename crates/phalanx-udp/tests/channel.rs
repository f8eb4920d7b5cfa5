//! Property tests of the established channel: tampering, truncation, replay, reordering,
//! the window's edge, and garbage.

mod common;

use common::establish;
use phalanx_udp::{
    ChannelStats, Dropped, DATA_OVERHEAD, MAX_DATA_PAYLOAD, MAX_PACKET, REPLAY_WINDOW,
};
use proptest::prelude::*;

fn drops(stats: ChannelStats) -> u64 {
    stats.malformed + stats.tampered + stats.replayed + stats.too_old
}

proptest! {
    #![proptest_config(common::config(48))]

    /// Any single flipped bit, header included, makes the packet undeliverable; the unaltered
    /// packet is still delivered afterwards (the forgery did not burn its number).
    #[test]
    fn a_flipped_bit_anywhere_is_dropped(
        seed in 1u8..,
        before in 0usize..4,
        payload in proptest::collection::vec(any::<u8>(), 0..64),
        bit in any::<prop::sample::Index>(),
    ) {
        let (mut guest, mut host) = establish(seed);
        for _ in 0..before {
            let packet = guest.seal(b"earlier").unwrap();
            host.open(&packet).unwrap();
        }
        let packet = guest.seal(&payload).unwrap();
        let bit = bit.index(packet.len() * 8);
        let mut flipped = packet.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        let result = host.open(&flipped);
        prop_assert!(matches!(result, Err(Dropped::Tampered | Dropped::Malformed)), "{result:?}");
        let stats = host.stats();
        prop_assert_eq!(stats.tampered + stats.malformed, 1);
        prop_assert_eq!(stats.delivered, before as u64);
        prop_assert_eq!(host.open(&packet), Ok(payload));
    }

    /// Every proper prefix of a packet is dropped and counted; the whole packet still opens.
    #[test]
    fn every_truncation_is_dropped(
        seed in 1u8..,
        payload in proptest::collection::vec(any::<u8>(), 0..100),
    ) {
        let (mut guest, mut host) = establish(seed);
        let packet = guest.seal(&payload).unwrap();
        for len in 0..packet.len() {
            let expected = if len < DATA_OVERHEAD { Dropped::Malformed } else { Dropped::Tampered };
            prop_assert_eq!(host.open(&packet[..len]), Err(expected), "prefix of {}", len);
        }
        let stats = host.stats();
        prop_assert_eq!(stats.malformed, DATA_OVERHEAD as u64);
        prop_assert_eq!(stats.tampered, (packet.len() - DATA_OVERHEAD) as u64);
        prop_assert_eq!(host.open(&packet), Ok(payload));
    }

    /// Packets within the window, in any order and each sent twice, are delivered exactly once.
    #[test]
    fn a_permutation_within_the_window_is_delivered_exactly_once(
        seed in 1u8..,
        order in (1usize..=300).prop_flat_map(|n| Just((0..n).collect::<Vec<_>>()).prop_shuffle()),
        duplicates in proptest::collection::vec(any::<prop::sample::Index>(), 0..50),
    ) {
        let (mut guest, mut host) = establish(seed);
        let packets: Vec<Vec<u8>> =
            (0..order.len()).map(|i| guest.seal(&(i as u32).to_le_bytes()).unwrap()).collect();
        let mut delivered = vec![0u32; order.len()];
        let mut sent = order.clone();
        for index in &duplicates {
            let at = index.index(sent.len() + 1);
            sent.insert(at, order[index.index(order.len())]);
        }
        for &i in &sent {
            match host.open(&packets[i]) {
                Ok(payload) => {
                    let n = u32::from_le_bytes(payload.try_into().unwrap());
                    delivered[n as usize] += 1;
                }
                Err(reason) => prop_assert_eq!(reason, Dropped::Replayed),
            }
        }
        prop_assert!(delivered.iter().all(|&count| count == 1), "{delivered:?}");
        prop_assert_eq!(host.stats().replayed, duplicates.len() as u64);
        prop_assert_eq!(host.stats().delivered, order.len() as u64);
    }

    /// Once a packet `REPLAY_WINDOW` or more ahead was delivered, an older one is dropped as
    /// too old; one just inside the window is delivered.
    #[test]
    fn a_packet_older_than_the_window_is_dropped(
        seed in 1u8..,
        ahead in 0u64..3000,
    ) {
        let (mut guest, mut host) = establish(seed);
        let newest = REPLAY_WINDOW + ahead;
        let packets: Vec<Vec<u8>> = (0..=newest).map(|_| guest.seal(b"p").unwrap()).collect();
        host.open(&packets[newest as usize]).unwrap();
        let edge = (newest - REPLAY_WINDOW) as usize;
        prop_assert_eq!(host.open(&packets[edge]), Err(Dropped::TooOld));
        prop_assert_eq!(host.open(&packets[0]), Err(Dropped::TooOld));
        prop_assert_eq!(host.open(&packets[edge + 1]), Ok(b"p".to_vec()));
        prop_assert_eq!(host.stats().too_old, 2);
    }

    /// Garbage never panics and is never delivered; every packet is counted once.
    #[test]
    fn garbage_into_open_is_dropped(
        seed in 1u8..,
        garbage in proptest::collection::vec(
            proptest::collection::vec(any::<u8>(), 0..1400), 1..20),
    ) {
        let (_guest, mut host) = establish(seed);
        for packet in &garbage {
            prop_assert!(host.open(packet).is_err());
        }
        prop_assert_eq!(drops(host.stats()), garbage.len() as u64);
        prop_assert_eq!(host.stats().delivered, 0);
    }
}

#[test]
fn a_replayed_packet_is_dropped_and_counted() {
    let (mut guest, mut host) = establish(1);
    let packet = guest.seal(b"once").unwrap();
    assert_eq!(host.open(&packet), Ok(b"once".to_vec()));
    for _ in 0..3 {
        assert_eq!(host.open(&packet), Err(Dropped::Replayed));
    }
    assert_eq!(host.stats().replayed, 3);
    assert_eq!(host.stats().delivered, 1);
}

#[test]
fn oversize_payloads_and_packets_are_refused() {
    let (mut guest, mut host) = establish(1);
    let packet = guest.seal(&[1u8; MAX_DATA_PAYLOAD]).unwrap();
    assert_eq!(packet.len(), MAX_PACKET);
    assert!(guest.seal(&[1u8; MAX_DATA_PAYLOAD + 1]).is_err());
    let mut long = packet.clone();
    long.push(0);
    assert_eq!(host.open(&long), Err(Dropped::Malformed));
    assert_eq!(host.open(&packet).map(|p| p.len()), Ok(MAX_DATA_PAYLOAD));
}

#[test]
fn packet_numbers_past_the_truncated_span_reconstruct() {
    // 40,000 packets cross the 15-bit span (32,768) on the wire; losing most of them on the
    // way is fine as long as the gap stays under half the span.
    let (mut guest, mut host) = establish(1);
    for n in 0u32..40_000 {
        let packet = guest.seal(&n.to_le_bytes()).unwrap();
        if n.is_multiple_of(1000) || n > 39_990 {
            assert_eq!(host.open(&packet), Ok(n.to_le_bytes().to_vec()), "packet {n}");
        }
    }
}

#[test]
fn every_single_bit_flip_of_one_packet_is_dropped() {
    let (mut guest, mut host) = establish(3);
    let packet = guest.seal(b"thirty-two bytes of game command").unwrap();
    for bit in 0..packet.len() * 8 {
        let mut flipped = packet.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        let result = host.open(&flipped);
        assert!(matches!(result, Err(Dropped::Tampered | Dropped::Malformed)), "bit {bit}");
    }
    let stats = host.stats();
    assert_eq!(stats.tampered + stats.malformed, (packet.len() * 8) as u64);
    // Only the data bit makes it malformed; every other flip fails authentication.
    assert_eq!(stats.malformed, 1);
    assert_eq!(host.open(&packet), Ok(b"thirty-two bytes of game command".to_vec()));
}
