//! What a client pins to join a host, which also names the transport: the lobby's one string.

use std::fmt;
use std::str::FromStr;

use crate::{ClientTransport, Transport};

/// What a client pins to join a host — the certificate's fingerprint over QUIC, the static key
/// over raw UDP — and so the transport it joins over. A host gives its own
/// ([`HostControl::pin`](crate::HostControl::pin)); a lobby hands it to the players with the
/// address and a seat token, and each player joins with
/// `ClientOptions::new(token, pin)`.
///
/// It prints as `quic:` or `udp:` and 64 hex digits, and parses back from that, so a lobby or
/// an invite link carries it as text:
///
/// ```no_run
/// # fn example() -> Result<(), Box<dyn std::error::Error>> {
/// use phalanx::{ClientOptions, Pin};
///
/// let pin: Pin = "udp:8f3c0ad35e0b1f6e2a9b7c4d1e0f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b".parse()?;
/// assert_eq!(pin.to_string().parse::<Pin>()?, pin);
/// let options = ClientOptions::new(7, pin);
/// # let _ = options; Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Pin {
    /// QUIC: the host certificate's fingerprint.
    #[cfg(feature = "quic")]
    Fingerprint(crate::quic::Fingerprint),
    /// Raw UDP: the host's static Noise key.
    #[cfg(feature = "udp")]
    UdpKey(crate::udp::HostPublicKey),
}

impl Pin {
    /// The transport this pin is for.
    pub fn transport(&self) -> Transport {
        match self {
            #[cfg(feature = "quic")]
            Pin::Fingerprint(_) => Transport::Quic,
            #[cfg(feature = "udp")]
            Pin::UdpKey(_) => Transport::Udp,
        }
    }
}

impl fmt::Display for Pin {
    /// `quic:` or `udp:`, then 64 lowercase hex digits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            #[cfg(feature = "quic")]
            Pin::Fingerprint(fingerprint) => write!(f, "quic:{fingerprint}"),
            #[cfg(feature = "udp")]
            Pin::UdpKey(key) => write!(f, "udp:{key}"),
        }
    }
}

/// Why a pin string did not parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PinParseError {
    /// It does not start with `quic:` or `udp:`.
    NoTransport,
    /// It names a transport this build does not have (its cargo feature is off).
    TransportNotBuilt,
    /// The digits after the prefix are not 64 hex digits.
    Digits,
}

impl fmt::Display for PinParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PinParseError::NoTransport => "a pin starts with `quic:` or `udp:`",
            PinParseError::TransportNotBuilt => "this build does not have that pin's transport",
            PinParseError::Digits => "a pin's key or fingerprint is 64 hex digits",
        })
    }
}

impl std::error::Error for PinParseError {}

impl FromStr for Pin {
    type Err = PinParseError;

    fn from_str(text: &str) -> Result<Pin, PinParseError> {
        let text = text.trim();
        if let Some(digits) = text.strip_prefix("quic:") {
            #[cfg(feature = "quic")]
            return digits.parse().map(Pin::Fingerprint).map_err(|_| PinParseError::Digits);
            #[cfg(not(feature = "quic"))]
            return Err(if digits.len() == 64 {
                PinParseError::TransportNotBuilt
            } else {
                PinParseError::Digits
            });
        }
        if let Some(digits) = text.strip_prefix("udp:") {
            #[cfg(feature = "udp")]
            return digits.parse().map(Pin::UdpKey).map_err(|_| PinParseError::Digits);
            #[cfg(not(feature = "udp"))]
            return Err(if digits.len() == 64 {
                PinParseError::TransportNotBuilt
            } else {
                PinParseError::Digits
            });
        }
        Err(PinParseError::NoTransport)
    }
}

/// The pin's transport with its defaults, checking the host against the pin.
impl From<Pin> for ClientTransport {
    fn from(pin: Pin) -> ClientTransport {
        match pin {
            #[cfg(feature = "quic")]
            Pin::Fingerprint(fingerprint) => {
                crate::quic::HostVerification::Pinned(fingerprint).into()
            }
            #[cfg(feature = "udp")]
            Pin::UdpKey(key) => key.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_round_trip_as_text_and_refuse_what_is_not_one() {
        let digits = "ab".repeat(32);
        #[cfg(feature = "quic")]
        {
            let pin: Pin = format!("quic:{digits}").parse().unwrap();
            assert_eq!(pin.transport(), Transport::Quic);
            assert_eq!(pin.to_string(), format!("quic:{digits}"));
        }
        #[cfg(feature = "udp")]
        {
            let pin: Pin = format!(" udp:{digits}\n").parse().unwrap();
            assert_eq!(pin.transport(), Transport::Udp);
            assert_eq!(pin.to_string(), format!("udp:{digits}"));
        }
        assert_eq!(digits.parse::<Pin>(), Err(PinParseError::NoTransport));
        assert_eq!("udp:abc".parse::<Pin>(), Err(PinParseError::Digits));
        assert_eq!("quic:zz".parse::<Pin>(), Err(PinParseError::Digits));
        assert_eq!(format!("tcp:{digits}").parse::<Pin>(), Err(PinParseError::NoTransport));
    }
}
