//! The handshake through the public API: cookies, payloads, wrong keys, replays.

mod common;

use common::{addr, establish, host_key, join, responder, NOW};
use phalanx_udp::{
    ClientHandshake, HandshakeError, HostKey, HostPublicKey, Outcome, Progress, Rejected,
    Responder, COOKIE_REPLY_LEN, COOKIE_ROTATION_MS, DATA_OVERHEAD, INITIATION_OVERHEAD,
    INITIATION_WITH_COOKIE_OVERHEAD, MAX_INITIATION_PAYLOAD, MAX_RESPONSE_PAYLOAD,
    RESPONSE_OVERHEAD,
};

#[test]
fn round_trip_delivers_both_payloads_then_data_both_ways() {
    let mut responder = responder();
    let from = addr(1);
    let (mut client, first) =
        ClientHandshake::new(responder.public(), b"token-42", [1; 32]).unwrap();
    assert_eq!(first.len(), INITIATION_OVERHEAD + 8);
    assert_eq!(client.packet(), &first[..]);

    let Outcome::Reply(cookie) = responder.handle(from, &first, NOW) else { panic!("cookie") };
    assert_eq!(cookie.len(), COOKIE_REPLY_LEN);
    assert!(cookie.len() < first.len());
    assert_eq!(responder.remembered(), 0);

    let Ok(Progress::Resend(second)) = client.handle(&cookie) else { panic!("resend") };
    assert_eq!(second.len(), INITIATION_WITH_COOKIE_OVERHEAD + 8);
    assert_eq!(client.packet(), &second[..]);

    let Outcome::Join(request) = responder.handle(from, &second, NOW) else { panic!("join") };
    assert_eq!(request.payload(), b"token-42");
    assert_eq!(request.from(), from);
    let (mut host, response) = request.accept(b"you are player 3").unwrap();
    assert_eq!(response.len(), RESPONSE_OVERHEAD + 16);

    let Ok(Progress::Established { channel: mut guest, payload }) = client.handle(&response) else {
        panic!("established")
    };
    assert_eq!(payload, b"you are player 3");
    // After the end, further packets are ignored.
    assert!(matches!(client.handle(&response), Ok(Progress::Ignored)));

    let stats = responder.stats();
    assert_eq!((stats.cookie_replies, stats.joins, stats.bad_cookies), (1, 1, 0));
    assert_eq!(responder.remembered(), 1);

    for round in 0..5u8 {
        let up = guest.seal(&[round; 10]).unwrap();
        assert_eq!(up.len(), 10 + DATA_OVERHEAD);
        assert_eq!(host.open(&up).unwrap(), vec![round; 10]);
        let down = host.seal(&[round; 200]).unwrap();
        assert_eq!(guest.open(&down).unwrap(), vec![round; 200]);
    }
    assert_eq!(guest.stats().delivered, 5);
    assert_eq!(host.stats().sealed, 5);
    // An empty payload is a valid packet.
    let empty = guest.seal(&[]).unwrap();
    assert_eq!(empty.len(), DATA_OVERHEAD);
    assert_eq!(host.open(&empty).unwrap(), Vec::<u8>::new());
}

#[test]
fn channels_of_two_handshakes_do_not_open_each_other() {
    let (mut guest_a, _host_a) = establish(1);
    let (_guest_b, mut host_b) = establish(2);
    let packet = guest_a.seal(b"hello").unwrap();
    assert_eq!(host_b.open(&packet), Err(phalanx_udp::Dropped::Tampered));
    assert_eq!(host_b.stats().tampered, 1);
}

#[test]
fn wrong_pinned_key_fails_at_once_naming_both_keys() {
    let mut responder = responder();
    let pinned = HostKey::from_bytes([8; 32]).public();
    let (mut client, first) = ClientHandshake::new(pinned, b"", [1; 32]).unwrap();
    let Outcome::Reply(cookie) = responder.handle(addr(1), &first, NOW) else { panic!() };
    let error = client.handle(&cookie).unwrap_err();
    assert_eq!(error, HandshakeError::WrongHostKey { pinned, host: responder.public() });
    let text = error.to_string();
    assert!(text.contains(&pinned.to_string()) && text.contains(&responder.public().to_string()));
}

#[test]
fn a_cookie_reply_without_the_initiations_echo_is_ignored() {
    let mut responder = responder();
    let (mut client, first) = ClientHandshake::new(responder.public(), b"", [1; 32]).unwrap();
    // A reply to another client's initiation, even naming another key, changes nothing.
    let (_other, other_first) = ClientHandshake::new(responder.public(), b"", [2; 32]).unwrap();
    let Outcome::Reply(mut foreign) = responder.handle(addr(1), &other_first, NOW) else {
        panic!()
    };
    let last = foreign.len() - 1;
    foreign[last] ^= 1;
    assert!(matches!(client.handle(&foreign), Ok(Progress::Ignored)));
    assert_eq!(client.packet(), &first[..]);
}

#[test]
fn a_forged_response_is_ignored_and_the_real_one_still_works() {
    let mut responder = responder();
    let (mut client, request) = join(&mut responder, addr(1), b"", 1);
    let (_host, response) = request.accept(b"ok").unwrap();
    let mut forged = response.clone();
    forged[10] ^= 0x40;
    assert!(matches!(client.handle(&forged), Ok(Progress::Ignored)));
    assert!(matches!(client.handle(&response), Ok(Progress::Established { .. })));
}

#[test]
fn a_cookie_from_one_address_is_refused_from_another() {
    let mut responder = responder();
    let (mut client, first) = ClientHandshake::new(responder.public(), b"", [1; 32]).unwrap();
    let Outcome::Reply(cookie) = responder.handle(addr(1), &first, NOW) else { panic!() };
    let Ok(Progress::Resend(second)) = client.handle(&cookie) else { panic!() };
    // From B: not decrypted, answered with B's own cookie.
    let Outcome::Reply(other) = responder.handle(addr(2), &second, NOW) else {
        panic!("a cookie from A is not valid from B")
    };
    assert_ne!(other, cookie);
    assert!(other.len() < second.len());
    assert_eq!(responder.stats().bad_cookies, 1);
    assert_eq!(responder.remembered(), 0);
    // Same port, other IP; same IP, other port.
    let mut a = addr(1);
    a.set_port(a.port() + 1);
    assert!(matches!(responder.handle(a, &second, NOW), Outcome::Reply(_)));
    // From A it works.
    assert!(matches!(responder.handle(addr(1), &second, NOW), Outcome::Join(_)));
}

#[test]
fn a_cookie_lives_one_rotation_more_and_no_longer() {
    let start = 5 * COOKIE_ROTATION_MS;
    for (late, accepted) in [
        (0, true),
        (COOKIE_ROTATION_MS - 1, true),
        (COOKIE_ROTATION_MS, true),
        (2 * COOKIE_ROTATION_MS - 1, true),
        (2 * COOKIE_ROTATION_MS, false),
        (3 * COOKIE_ROTATION_MS, false),
    ] {
        let mut responder = responder();
        let (mut client, first) = ClientHandshake::new(responder.public(), b"", [1; 32]).unwrap();
        let Outcome::Reply(cookie) = responder.handle(addr(1), &first, start) else { panic!() };
        let Ok(Progress::Resend(second)) = client.handle(&cookie) else { panic!() };
        let outcome = responder.handle(addr(1), &second, start + late);
        assert_eq!(matches!(outcome, Outcome::Join(_)), accepted, "{late} ms after: {outcome:?}");
        if !accepted {
            // The refusal is a fresh cookie, with which the client gets in.
            let Outcome::Reply(fresh) = outcome else { panic!() };
            let Ok(Progress::Resend(third)) = client.handle(&fresh) else { panic!() };
            let outcome = responder.handle(addr(1), &third, start + late);
            assert!(matches!(outcome, Outcome::Join(_)));
        }
    }
}

#[test]
fn a_replayed_initiation_is_refused_and_forgotten_with_its_cookie() {
    let mut responder = responder();
    let (mut client, first) = ClientHandshake::new(responder.public(), b"", [1; 32]).unwrap();
    let Outcome::Reply(cookie) = responder.handle(addr(1), &first, NOW) else { panic!() };
    let Ok(Progress::Resend(second)) = client.handle(&cookie) else { panic!() };
    assert!(matches!(responder.handle(addr(1), &second, NOW), Outcome::Join(_)));
    let again = responder.handle(addr(1), &second, NOW + 1000);
    assert!(matches!(again, Outcome::Dropped(Rejected::Replayed)));
    assert_eq!(responder.stats().replayed, 1);
    assert_eq!(responder.remembered(), 1);
    // Two rotations on, the cookie is dead: the replay gets a cookie reply and the memory is
    // gone.
    let later = NOW + 2 * COOKIE_ROTATION_MS + 1;
    assert!(matches!(responder.handle(addr(1), &second, later), Outcome::Reply(_)));
    assert_eq!(responder.remembered(), 0);
}

#[test]
fn an_initiation_for_another_host_key_is_undecryptable() {
    // Two hosts sharing cookie secrets (same random bytes) but not keys.
    let mut ours = Responder::new(host_key(), [9; 32]);
    let mut theirs = Responder::new(HostKey::from_bytes([8; 32]), [9; 32]);
    let (mut client, first) = ClientHandshake::new(theirs.public(), b"", [1; 32]).unwrap();
    let Outcome::Reply(cookie) = theirs.handle(addr(1), &first, NOW) else { panic!() };
    let Ok(Progress::Resend(second)) = client.handle(&cookie) else { panic!() };
    let outcome = ours.handle(addr(1), &second, NOW);
    assert!(matches!(outcome, Outcome::Dropped(Rejected::Undecryptable)));
    assert_eq!(ours.stats().undecryptable, 1);
    assert_eq!(ours.remembered(), 0);
}

#[test]
fn data_and_handshake_replies_sent_to_the_responder_are_not_handshakes() {
    let (mut guest, _host) = establish(1);
    let mut responder = responder();
    let data = guest.seal(b"x").unwrap();
    assert!(matches!(
        responder.handle(addr(1), &data, NOW),
        Outcome::Dropped(Rejected::NotHandshake)
    ));
    let (_client, first) = ClientHandshake::new(responder.public(), b"", [1; 32]).unwrap();
    let Outcome::Reply(cookie) = responder.handle(addr(1), &first, NOW) else { panic!() };
    assert!(matches!(
        responder.handle(addr(1), &cookie, NOW),
        Outcome::Dropped(Rejected::NotHandshake)
    ));
    assert!(matches!(responder.handle(addr(1), &[], NOW), Outcome::Dropped(Rejected::Malformed)));
    assert!(matches!(
        responder.handle(addr(1), &first[..50], NOW),
        Outcome::Dropped(Rejected::Malformed)
    ));
}

#[test]
fn payload_limits_are_checked() {
    let pinned = host_key().public();
    let big = vec![0u8; MAX_INITIATION_PAYLOAD + 1];
    assert_eq!(
        ClientHandshake::new(pinned, &big, [1; 32]).unwrap_err(),
        HandshakeError::PayloadTooLarge { len: big.len(), max: MAX_INITIATION_PAYLOAD }
    );
    // The largest payloads fit in 1200-byte packets all the way.
    let mut responder = responder();
    let payload = vec![5u8; MAX_INITIATION_PAYLOAD];
    let (mut client, request) = join(&mut responder, addr(1), &payload, 1);
    assert_eq!(client.packet().len(), 1200);
    assert_eq!(request.payload(), &payload[..]);
    let (_host, response) = request.accept(&[6u8; MAX_RESPONSE_PAYLOAD]).unwrap();
    assert_eq!(response.len(), 1200);
    assert!(matches!(client.handle(&response), Ok(Progress::Established { .. })));
    let (_, request) = join(&mut responder, addr(2), b"", 2);
    assert!(matches!(
        request.accept(&[0u8; MAX_RESPONSE_PAYLOAD + 1]),
        Err(HandshakeError::PayloadTooLarge { .. })
    ));
}

#[test]
fn keys_round_trip_through_bytes_and_hex() {
    let key = HostKey::from_bytes([3; 32]);
    assert_eq!(HostKey::from_bytes(key.to_bytes()).public(), key.public());
    let public = key.public();
    let hex = public.to_string();
    assert_eq!(hex.len(), 64);
    assert_eq!(hex.parse::<HostPublicKey>(), Ok(public));
    assert_eq!(format!("{public:#}"), format!("{}…", &hex[..16]));
    assert!("zz".parse::<HostPublicKey>().is_err());
    assert!(hex[..63].parse::<HostPublicKey>().is_err());
    // Debug never shows the secret.
    assert!(!format!("{key:?}").contains("0303030303"));
    // The secret's own hex reads back to the same key pair; anything else is refused.
    let secret = key.to_hex();
    assert_eq!(secret, "03".repeat(32));
    assert_eq!(HostKey::from_hex(&secret).map(|k| k.public()), Ok(public));
    assert!(HostKey::from_hex(&secret[..63]).is_err());
    assert!(HostKey::from_hex(&"é".repeat(32)).is_err());
}
