//! Helpers shared by the integration tests: keys, addresses and a full handshake.
#![allow(dead_code, unreachable_pub)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use phalanx_udp::{Channel, ClientHandshake, HostKey, Outcome, Progress, Responder};

pub const NOW: u64 = 1_000_000;

pub fn host_key() -> HostKey {
    HostKey::from_bytes([7; 32])
}

pub fn responder() -> Responder {
    Responder::new(host_key(), [9; 32])
}

/// Distinct addresses: IPv4 for even `n`, IPv6 for odd.
pub fn addr(n: u32) -> SocketAddr {
    let port = 1024 + (n % 60_000) as u16;
    if n.is_multiple_of(2) {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::from(0x0a00_0000_u32.wrapping_add(n))), port)
    } else {
        SocketAddr::new(IpAddr::V6(Ipv6Addr::from(0x2001_0db8_u128 << 96 | u128::from(n))), port)
    }
}

/// The join up to the host's decision: initiation, cookie reply, initiation with the cookie.
pub fn join(
    responder: &mut Responder,
    from: SocketAddr,
    payload: &[u8],
    seed: u8,
) -> (ClientHandshake, phalanx_udp::JoinRequest) {
    let (mut client, first) =
        ClientHandshake::new(responder.public(), payload, [seed; 32]).expect("payload fits");
    let Outcome::Reply(cookie) = responder.handle(from, &first, NOW) else {
        panic!("a first initiation gets a cookie reply")
    };
    let Ok(Progress::Resend(second)) = client.handle(&cookie) else {
        panic!("the client resends with the cookie")
    };
    let Outcome::Join(request) = responder.handle(from, &second, NOW) else {
        panic!("an initiation with a valid cookie is a join")
    };
    (client, request)
}

/// A full handshake: (client's channel, host's channel).
pub fn establish(seed: u8) -> (Channel, Channel) {
    let mut responder = responder();
    let (mut client, request) = join(&mut responder, addr(1), b"join", seed);
    let (host, response) = request.accept(b"welcome").expect("payload fits");
    let Ok(Progress::Established { channel, .. }) = client.handle(&response) else {
        panic!("the response establishes the client")
    };
    (channel, host)
}

/// A proptest config with `cases` cases, no regression files, and a fixed seed: runs are
/// reproducible (a failure prints its minimal input and reruns the same), and
/// `PHALANX_SEED=<u64>` explores other seeds, as in the project's other property tests.
pub fn config(cases: u32) -> proptest::test_runner::Config {
    let seed = std::env::var("PHALANX_SEED").ok().and_then(|seed| seed.parse().ok());
    let mut config = proptest::test_runner::Config::with_cases(cases);
    config.failure_persistence = None;
    config.rng_seed = proptest::test_runner::RngSeed::Fixed(seed.unwrap_or(0x5eed_0001));
    config
}
