//! The stateless cookie under a spoofed flood, and garbage into the handshake.

mod common;

use common::{addr, responder, NOW};
use phalanx_udp::{
    ClientHandshake, HostKey, Outcome, Progress, COOKIE_REPLY_LEN, INITIATION_OVERHEAD,
};
use proptest::prelude::*;

#[test]
fn ten_thousand_spoofed_initiations_get_small_replies_and_leave_no_state() {
    let mut responder = responder();
    let (_client, real) = ClientHandshake::new(responder.public(), b"join", [1; 32]).unwrap();
    let mut cookies = std::collections::BTreeSet::new();
    for n in 0..10_000u32 {
        // Alternate a real initiation and random-looking ones of various lengths.
        let initiation = if n.is_multiple_of(2) {
            real.clone()
        } else {
            let len = INITIATION_OVERHEAD + (n as usize % 300);
            let mut bytes: Vec<u8> =
                (0..len).map(|i| (i as u32 ^ n).wrapping_mul(2_654_435_761) as u8).collect();
            bytes[0] = 0x01;
            bytes
        };
        let Outcome::Reply(reply) = responder.handle(addr(n), &initiation, NOW + u64::from(n))
        else {
            panic!("initiation {n} without a cookie gets a cookie reply")
        };
        assert_eq!(reply.len(), COOKIE_REPLY_LEN);
        assert!(reply.len() <= initiation.len());
        cookies.insert(reply);
    }
    // Every address got its own cookie, and the responder stored nothing for any of them.
    assert_eq!(cookies.len(), 10_000);
    assert_eq!(responder.remembered(), 0);
    let stats = responder.stats();
    assert_eq!(stats.cookie_replies, 10_000);
    assert_eq!(stats.joins, 0);
}

#[test]
fn spoofed_initiations_with_forged_cookies_are_not_decrypted() {
    let mut responder = responder();
    // A real client's cookie-bearing initiation, replayed from 10,000 other addresses.
    let (mut client, first) = ClientHandshake::new(responder.public(), b"", [1; 32]).unwrap();
    let Outcome::Reply(cookie) = responder.handle(addr(0), &first, NOW) else { panic!() };
    let Ok(Progress::Resend(second)) = client.handle(&cookie) else { panic!() };
    for n in 1..10_000u32 {
        let Outcome::Reply(reply) = responder.handle(addr(n), &second, NOW) else {
            panic!("a cookie from another address is refused")
        };
        assert!(reply.len() < second.len());
    }
    assert_eq!(responder.remembered(), 0);
    assert_eq!(responder.stats().bad_cookies, 9_999);
    assert_eq!(responder.stats().joins, 0);
}

proptest! {
    #![proptest_config(common::config(256))]

    /// Random bytes of every type never panic the responder, never make it answer with more
    /// bytes than it got, and never make it remember anything.
    #[test]
    fn garbage_into_the_responder_never_panics(
        packet in proptest::collection::vec(any::<u8>(), 0..1400),
        kind in 0u8..6,
        n in any::<u32>(),
        now in any::<u64>(),
    ) {
        let mut responder = responder();
        let mut packet = packet;
        if let Some(first) = packet.first_mut() {
            *first = if kind == 5 { *first } else { kind };
        }
        match responder.handle(addr(n), &packet, now) {
            Outcome::Reply(reply) => prop_assert!(reply.len() <= packet.len()),
            Outcome::Join(_) => prop_assert!(false, "garbage decrypted"),
            Outcome::Dropped(_) => {}
        }
        prop_assert_eq!(responder.remembered(), 0);
    }

    /// Random bytes never panic a client handshake, and never establish it.
    #[test]
    fn garbage_into_the_client_never_panics(
        packets in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..1400), 1..8),
        kind in 0u8..6,
    ) {
        let pinned = HostKey::from_bytes([7; 32]).public();
        let (mut client, _) = ClientHandshake::new(pinned, b"", [1; 32]).unwrap();
        for mut packet in packets {
            if let Some(first) = packet.first_mut() {
                *first = if kind == 5 { *first } else { kind };
            }
            let progress = client.handle(&packet);
            prop_assert!(matches!(progress, Ok(Progress::Ignored)), "{progress:?}");
        }
    }
}
