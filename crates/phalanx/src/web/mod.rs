//! Browser players over WebTransport (HTTP/3 over QUIC, through `wtransport` on the same
//! quinn): a host listens for them beside its own port
//! ([`HostOptions::browsers`](crate::HostOptions::browsers)), and a browser player is an
//! ordinary seat — the same join request on a bidirectional stream, the same datagrams, the
//! same tokens, limits and admission control as a native client.
//!
//! A page pins the host's certificate by its SHA-256 hash (the `serverCertificateHashes` option
//! of the browser's `WebTransport` constructor). Browsers accept that only for an ECDSA P-256
//! certificate valid for at most 14 days, which [`BrowserIdentity::generate`] makes; the lobby
//! hands the page [`BrowserIdentity::certificate_hash`] with the host's address and the seat's
//! token. The page connects to `https://<host>:<port>/phalanx` (the path is
//! [`BrowserConfig::path`]).
//!
//! The host renews the certificate before it runs out ([`BrowserConfig::renew_before`]): new
//! sessions get the new one, sessions under way keep theirs, and
//! [`HostControl::browsers`](crate::HostControl::browsers) gives the hash to pin from then on.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

pub(crate) mod host;

/// The longest validity a browser accepts for a pinned certificate: 14 days.
pub const VALIDITY_DAYS_MAX: u32 = 14;

/// A certificate's SHA-256 hash (of its DER bytes): what a page pins.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CertificateHash(pub [u8; 32]);

impl CertificateHash {
    /// Lower-case hex, 64 digits.
    pub fn to_hex(&self) -> String {
        crate::hex32(&self.0)
    }
}

impl fmt::Display for CertificateHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for CertificateHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CertificateHash({})", self.to_hex())
    }
}

/// Why a [`BrowserIdentity`] could not be made.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BrowserIdentityError {
    /// A name is neither a DNS name nor an IP address.
    InvalidName(String),
    /// The validity is 0 days or more than [`VALIDITY_DAYS_MAX`].
    Validity(u32),
}

impl fmt::Display for BrowserIdentityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BrowserIdentityError::InvalidName(name) => write!(f, "not a DNS name or IP: {name:?}"),
            BrowserIdentityError::Validity(days) => {
                write!(f, "{days} days of validity: browsers pin 1 to {VALIDITY_DAYS_MAX}")
            }
        }
    }
}

impl std::error::Error for BrowserIdentityError {}

/// A self-signed certificate and its key that a browser can pin: ECDSA P-256, valid from now
/// for at most [`VALIDITY_DAYS_MAX`] days.
pub struct BrowserIdentity {
    identity: wtransport::Identity,
    hash: CertificateHash,
    not_after: SystemTime,
    names: Vec<String>,
    days: u32,
}

impl BrowserIdentity {
    /// A fresh certificate for `names` (the host's DNS names or IP addresses, as the page
    /// will reach it), valid from now for `days` (1 to [`VALIDITY_DAYS_MAX`]).
    pub fn generate(names: &[&str], days: u32) -> Result<BrowserIdentity, BrowserIdentityError> {
        let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
        BrowserIdentity::generate_at(names, days, SystemTime::now())
    }

    /// A fresh certificate like this one (same names and validity), its expiry counted from
    /// `now` (the renewal clock's). The certificate itself is valid from the system's now.
    pub(crate) fn renewed(&self, now: SystemTime) -> Result<BrowserIdentity, BrowserIdentityError> {
        BrowserIdentity::generate_at(self.names.clone(), self.days, now)
    }

    fn generate_at(
        names: Vec<String>,
        days: u32,
        now: SystemTime,
    ) -> Result<BrowserIdentity, BrowserIdentityError> {
        if !(1..=VALIDITY_DAYS_MAX).contains(&days) {
            return Err(BrowserIdentityError::Validity(days));
        }
        let identity = wtransport::Identity::self_signed_builder()
            .subject_alt_names(&names)
            .from_now_utc()
            .validity_days(days)
            .build()
            .map_err(|error| BrowserIdentityError::InvalidName(error.to_string()))?;
        let certificate = &identity.certificate_chain().as_slice()[0];
        let hash = CertificateHash(*certificate.hash().as_ref());
        let not_after = now + Duration::from_secs(u64::from(days) * 86_400);
        Ok(BrowserIdentity { identity, hash, not_after, names, days })
    }

    /// The hash a page pins.
    pub fn certificate_hash(&self) -> CertificateHash {
        self.hash
    }

    /// When the certificate stops being valid (browsers refuse it from then on).
    pub fn not_after(&self) -> SystemTime {
        self.not_after
    }

    pub(crate) fn identity(&self) -> wtransport::Identity {
        self.identity.clone_identity()
    }
}

impl fmt::Debug for BrowserIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BrowserIdentity")
            .field("certificate_hash", &self.hash)
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

/// The clock certificate renewal reads: the system's by default; a test's may jump ahead.
#[derive(Clone)]
pub struct RenewalClock(pub Arc<dyn Fn() -> SystemTime + Send + Sync>);

impl Default for RenewalClock {
    fn default() -> Self {
        RenewalClock(Arc::new(SystemTime::now))
    }
}

impl fmt::Debug for RenewalClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RenewalClock")
    }
}

/// A host's WebTransport listener for browser players.
#[derive(Debug)]
#[non_exhaustive]
pub struct BrowserConfig {
    /// The certificate the pages pin.
    pub identity: BrowserIdentity,
    /// Where to listen (a UDP port of its own, beside the host's).
    pub bind: SocketAddr,
    /// The session's path: pages connect to `https://<host>:<port><path>`; any other path is
    /// answered 404. Default: `/phalanx`.
    pub path: String,
    /// Renew the certificate this long before it runs out (checked every second): a new one
    /// with the same names and validity, which new sessions get; sessions under way keep
    /// theirs. `None`: never. Default: one day.
    pub renew_before: Option<Duration>,
    /// The clock renewal reads. Default: the system's.
    pub clock: RenewalClock,
}

impl BrowserConfig {
    /// Browsers pinning `identity`, on `bind`, at `/phalanx`, renewed a day before it runs out.
    pub fn new(identity: BrowserIdentity, bind: SocketAddr) -> BrowserConfig {
        BrowserConfig {
            identity,
            bind,
            path: "/phalanx".to_owned(),
            renew_before: Some(Duration::from_secs(86_400)),
            clock: RenewalClock::default(),
        }
    }
}
