//! Telling a QUIC peer from a raw-UDP one at once, with QUIC's own version negotiation
//! (RFC 9000 §6, RFC 8999), so that neither side waits out a timeout when the lobby named the
//! wrong transport:
//!
//! - A QUIC client reaching a UDP host sends an Initial (version 1, at least 1,200 bytes); the
//!   UDP host answers with a Version Negotiation packet listing no version the client speaks,
//!   and quinn fails the connection at once (`VersionMismatch`).
//! - A UDP client whose initiation got no answer for its first resend interval sends, once, a
//!   1,200-byte long-header probe with a reserved (never supported) version. A QUIC host's
//!   endpoint answers any such packet with Version Negotiation; the client recognizes the
//!   answer by the 8 bytes of its initiation it echoes (an off-path attacker cannot forge it)
//!   and fails with `UdpConnectError::QuicHost`. A UDP host ignores the probe.
//!
//! Version Negotiation is unauthenticated in QUIC too: an on-path attacker who sees the probe
//! can make a connect fail early, as it could drop every packet.

/// The size of a QUIC Initial (and of the probe): RFC 9000's minimum for a client's first
/// packet, below which a server must not answer with Version Negotiation.
pub const QUIC_INITIAL_MIN: usize = 1_200;
/// QUIC version 1.
const QUIC_V1: u32 = 1;
/// The probe's version: reserved for forcing version negotiation (RFC 9000 §15), so no
/// endpoint supports it.
const PROBE_VERSION: u32 = 0x1a2a_3a4a;
/// The version a UDP host's Version Negotiation lists: reserved, so no client supports it.
const NEGOTIATED_VERSION: u32 = 0x0a1a_2a3a;
/// Bytes of the client's initiation (after its kind byte: the start of its ephemeral key)
/// that the probe carries as its connection id and a QUIC host echoes back.
const ECHO: usize = 8;
/// The longest connection id QUIC allows.
const CID_MAX: usize = 20;

/// A QUIC long header's fields: version, destination and source connection ids.
struct LongHeader<'a> {
    version: u32,
    dcid: &'a [u8],
    scid: &'a [u8],
}

/// A QUIC long header (RFC 8999: the form bit, a version, two length-prefixed ids), if
/// `packet` starts with one.
fn long_header(packet: &[u8]) -> Option<LongHeader<'_>> {
    let (&first, rest) = packet.split_first()?;
    if first & 0x80 == 0 {
        return None;
    }
    let version = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?);
    let rest = &rest[4..];
    let dcid_len = usize::from(*rest.first()?);
    let dcid = rest.get(1..1 + dcid_len)?;
    let rest = &rest[1 + dcid_len..];
    let scid_len = usize::from(*rest.first()?);
    let scid = rest.get(1..1 + scid_len)?;
    (dcid_len <= CID_MAX && scid_len <= CID_MAX).then_some(LongHeader { version, dcid, scid })
}

/// What a UDP host does with a packet from an address with no connection, before the
/// handshake sees it.
#[derive(Debug, PartialEq, Eq)]
pub enum Foreign {
    /// Not QUIC: the handshake's to judge.
    No,
    /// A QUIC client's Initial: send this Version Negotiation back.
    Answer(Vec<u8>),
    /// Another QUIC long header (a UDP client's probe, say): drop it silently.
    Ignore,
}

/// Sorts a packet a UDP host got from an unknown address.
pub fn at_udp_host(packet: &[u8]) -> Foreign {
    let Some(header) = long_header(packet) else { return Foreign::No };
    // Every phalanx-udp handshake packet has its top bit clear; only a real Initial (fixed
    // bit set, type Initial, full size) is answered, so nothing is amplified.
    let initial = packet[0] & 0xf0 == 0xc0;
    if header.version == QUIC_V1 && initial && packet.len() >= QUIC_INITIAL_MIN {
        return Foreign::Answer(version_negotiation(header.scid, header.dcid, NEGOTIATED_VERSION));
    }
    Foreign::Ignore
}

/// A Version Negotiation packet to `dcid` from `scid`, listing `version`.
fn version_negotiation(dcid: &[u8], scid: &[u8], version: u32) -> Vec<u8> {
    let mut packet = Vec::with_capacity(7 + dcid.len() + scid.len() + 4);
    packet.push(0xc0);
    packet.extend_from_slice(&0u32.to_be_bytes());
    packet.push(dcid.len() as u8);
    packet.extend_from_slice(dcid);
    packet.push(scid.len() as u8);
    packet.extend_from_slice(scid);
    packet.extend_from_slice(&version.to_be_bytes());
    packet
}

/// The probe a UDP client sends when its `initiation` went unanswered: a long header with a
/// reserved version, the initiation's echo bytes as its destination id, padded to 1,200 bytes.
pub fn probe(initiation: &[u8]) -> Vec<u8> {
    let echo = initiation.get(1..1 + ECHO).unwrap_or_default();
    let mut packet = Vec::with_capacity(QUIC_INITIAL_MIN);
    packet.push(0xc0);
    packet.extend_from_slice(&PROBE_VERSION.to_be_bytes());
    packet.push(echo.len() as u8);
    packet.extend_from_slice(echo);
    packet.push(0);
    packet.resize(QUIC_INITIAL_MIN, 0);
    packet
}

/// Whether `packet` is a QUIC endpoint's Version Negotiation answering the probe of
/// `initiation`.
pub fn is_quic_answer(packet: &[u8], initiation: &[u8]) -> bool {
    let Some(header) = long_header(packet) else { return false };
    let echo = initiation.get(1..1 + ECHO).unwrap_or_default();
    header.version == 0 && header.dcid.is_empty() && header.scid == echo && !echo.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A QUIC v1 Initial's first bytes, padded as a client pads it.
    fn initial(dcid: &[u8], scid: &[u8]) -> Vec<u8> {
        let mut packet = vec![0xc3];
        packet.extend_from_slice(&QUIC_V1.to_be_bytes());
        packet.push(dcid.len() as u8);
        packet.extend_from_slice(dcid);
        packet.push(scid.len() as u8);
        packet.extend_from_slice(scid);
        packet.resize(QUIC_INITIAL_MIN, 0);
        packet
    }

    #[test]
    fn a_quic_initial_is_answered_with_version_negotiation_and_nothing_else_is() {
        let answer = at_udp_host(&initial(&[1; 8], &[2; 4]));
        let Foreign::Answer(packet) = answer else { panic!("{answer:?}") };
        let header = long_header(&packet).expect("a long header");
        assert_eq!((header.version, header.dcid, header.scid), (0, &[2u8; 4][..], &[1u8; 8][..]));
        assert_eq!(packet[packet.len() - 4..], NEGOTIATED_VERSION.to_be_bytes());
        // Too short to answer (no amplification), another version, a probe: dropped.
        assert_eq!(at_udp_host(&initial(&[1; 8], &[])[..1_199]), Foreign::Ignore);
        assert_eq!(at_udp_host(&probe(&[1; 97])), Foreign::Ignore);
        // phalanx-udp's own handshake packets are not QUIC.
        for kind in 1..=4u8 {
            let mut packet = vec![kind];
            packet.resize(97, 0xff);
            assert_eq!(at_udp_host(&packet), Foreign::No);
        }
        assert_eq!(at_udp_host(&[]), Foreign::No);
        assert_eq!(at_udp_host(&[0xc0, 0, 0]), Foreign::No, "truncated");
    }

    #[test]
    fn only_an_answer_echoing_the_initiation_counts() {
        let initiation: Vec<u8> = (0..97).collect();
        let probe = probe(&initiation);
        assert_eq!(probe.len(), QUIC_INITIAL_MIN);
        let header = long_header(&probe).expect("a long header");
        assert_eq!(header.version, PROBE_VERSION);
        // What a QUIC server sends back: its ids swapped.
        let answer = version_negotiation(header.scid, header.dcid, QUIC_V1);
        assert!(is_quic_answer(&answer, &initiation));
        let other: Vec<u8> = (1..98).collect();
        assert!(!is_quic_answer(&answer, &other), "another initiation's echo");
        assert!(!is_quic_answer(&initiation, &initiation), "a handshake packet");
        assert!(!is_quic_answer(&[], &initiation));
    }
}
