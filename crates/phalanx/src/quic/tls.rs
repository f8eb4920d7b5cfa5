//! Host identity (a certificate and its key), certificate fingerprints, and how a client checks
//! the host: by pinning the fingerprint the host showed (a lobby or invite link carries it), by
//! the usual root certificates, or — for tests and examples only — not at all.
//!
//! Crypto is rustls with the ring provider, TLS 1.3 only (QUIC requires it). 0-RTT is off:
//! the host never accepts early data (it would be replayable).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// The ALPN protocol of phalanx over QUIC.
pub const ALPN: &[u8] = b"phalanx/1";

/// A SHA-256 digest of a certificate's DER bytes. Shown by the host, pinned by clients.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub [u8; 32]);

impl Fingerprint {
    /// The fingerprint of a DER-encoded certificate.
    pub fn of(cert_der: &[u8]) -> Fingerprint {
        let digest = ring::digest::digest(&ring::digest::SHA256, cert_der);
        let mut bytes = [0u8; 32];
        bytes.copy_from_slice(digest.as_ref());
        Fingerprint(bytes)
    }
}

impl fmt::Display for Fingerprint {
    /// 64 lowercase hex digits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::hex32(&self.0))
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

/// A fingerprint string was not 64 hex digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FingerprintParseError;

impl fmt::Display for FingerprintParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a fingerprint is 64 hex digits (SHA-256)")
    }
}

impl std::error::Error for FingerprintParseError {}

impl FromStr for Fingerprint {
    type Err = FingerprintParseError;

    fn from_str(text: &str) -> Result<Fingerprint, FingerprintParseError> {
        crate::parse_hex32(text).map(Fingerprint).ok_or(FingerprintParseError)
    }
}

/// A host's certificate and private key.
#[derive(Debug)]
pub struct HostIdentity {
    cert: CertificateDer<'static>,
    key: PrivatePkcs8KeyDer<'static>,
}

/// The identity could not be created or loaded.
#[derive(Debug)]
#[non_exhaustive]
pub enum IdentityError {
    /// Generating the certificate failed (names are invalid, or the key could not be made).
    Generate(String),
    /// The certificate and key do not make a usable TLS configuration.
    Tls(rustls::Error),
}

impl fmt::Display for IdentityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IdentityError::Generate(why) => write!(f, "cannot generate a certificate: {why}"),
            IdentityError::Tls(error) => write!(f, "unusable certificate or key: {error}"),
        }
    }
}

impl std::error::Error for IdentityError {}

impl HostIdentity {
    /// A fresh self-signed Ed25519 certificate for `name` (any name: clients pin the
    /// fingerprint, not the name). Show [`fingerprint`](Self::fingerprint) to players. Ed25519
    /// signatures have a fixed size, which keeps handshake packet sizes — and so simulated
    /// traces — identical from run to run.
    pub fn generate_self_signed(name: &str) -> Result<HostIdentity, IdentityError> {
        let generate = |error: rcgen::Error| IdentityError::Generate(error.to_string());
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).map_err(generate)?;
        let cert = rcgen::CertificateParams::new(vec![name.to_owned()])
            .map_err(generate)?
            .self_signed(&key)
            .map_err(generate)?;
        Ok(HostIdentity {
            cert: cert.der().clone(),
            key: PrivatePkcs8KeyDer::from(key.serialize_der()),
        })
    }

    /// An identity from a stored certificate (DER) and PKCS#8 key (DER), so a host keeps its
    /// fingerprint across restarts.
    pub fn from_der(cert_der: Vec<u8>, key_pkcs8_der: Vec<u8>) -> HostIdentity {
        HostIdentity {
            cert: CertificateDer::from(cert_der),
            key: PrivatePkcs8KeyDer::from(key_pkcs8_der),
        }
    }

    /// The certificate's DER bytes (store them with the key to keep the fingerprint).
    pub fn cert_der(&self) -> &[u8] {
        self.cert.as_ref()
    }

    /// The key's PKCS#8 DER bytes. Keep them secret.
    pub fn key_der(&self) -> &[u8] {
        self.key.secret_pkcs8_der()
    }

    /// The certificate's fingerprint.
    pub fn fingerprint(&self) -> Fingerprint {
        Fingerprint::of(self.cert.as_ref())
    }

    /// A static key for the raw-UDP transport, derived from this identity's private key: one
    /// identity serves both transports, and a host that keeps it keeps both pins
    /// (`udp::HostConfig::new(identity.udp_key())`).
    #[cfg(feature = "udp")]
    pub fn udp_key(&self) -> crate::udp::HostKey {
        let mut context = ring::digest::Context::new(&ring::digest::SHA256);
        context.update(b"phalanx udp static key v1\0");
        context.update(self.key.secret_pkcs8_der());
        let mut secret = [0u8; 32];
        secret.copy_from_slice(context.finish().as_ref());
        crate::udp::HostKey::from_bytes(secret)
    }

    /// What UDP clients pin for a host keyed with [`udp_key`](Self::udp_key): its public
    /// half.
    #[cfg(feature = "udp")]
    pub fn udp_public_key(&self) -> crate::udp::HostPublicKey {
        self.udp_key().public()
    }

    /// The rustls server config: TLS 1.3, ALPN `phalanx/1`, no client auth, no early data.
    pub(crate) fn server_tls(&self) -> Result<rustls::ServerConfig, IdentityError> {
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(IdentityError::Tls)?
            .with_no_client_auth()
            .with_single_cert(vec![self.cert.clone()], PrivateKeyDer::Pkcs8(self.key.clone_key()))
            .map_err(IdentityError::Tls)?;
        config.alpn_protocols = vec![ALPN.to_vec()];
        // 0-RTT data is replayable: never accept it.
        config.max_early_data_size = 0;
        Ok(config)
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// How a client checks the host's certificate.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum HostVerification {
    /// Accept exactly the certificate with this fingerprint (self-signed hosts).
    Pinned(Fingerprint),
    /// Normal WebPKI verification against these roots, for the server name given at connect.
    Roots(Arc<rustls::RootCertStore>),
    /// Accept any certificate. **Insecure**: anyone on the path can impersonate the host. For
    /// tests and local examples only.
    DangerousAcceptAnyHost,
}

/// What a pinned-fingerprint check saw: the host's fingerprint when it was not the pinned one.
pub(crate) type Mismatch = Arc<std::sync::Mutex<Option<Fingerprint>>>;

/// The rustls client config for a verification choice: TLS 1.3, ALPN `phalanx/1`, no 0-RTT.
pub(crate) fn client_tls(
    verification: &HostVerification,
    mismatch: &Mismatch,
) -> Result<rustls::ClientConfig, rustls::Error> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?;
    let mut config = match verification {
        HostVerification::Roots(roots) => {
            builder.with_root_certificates(roots.clone()).with_no_client_auth()
        }
        HostVerification::Pinned(fingerprint) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(PinnedHost {
                fingerprint: Some(*fingerprint),
                provider: provider(),
                mismatch: mismatch.clone(),
            }))
            .with_no_client_auth(),
        HostVerification::DangerousAcceptAnyHost => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(PinnedHost {
                fingerprint: None,
                provider: provider(),
                mismatch: mismatch.clone(),
            }))
            .with_no_client_auth(),
    };
    config.alpn_protocols = vec![ALPN.to_vec()];
    config.enable_early_data = false;
    Ok(config)
}

/// Checks the host's certificate against a pinned fingerprint (or, with `None`, accepts any),
/// and verifies the handshake signatures with the certificate's key in every case.
#[derive(Debug)]
struct PinnedHost {
    fingerprint: Option<Fingerprint>,
    provider: Arc<CryptoProvider>,
    /// Where a mismatch is reported, so the connect error can name it.
    mismatch: Mismatch,
}

impl ServerCertVerifier for PinnedHost {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.fingerprint {
            Some(pinned) if Fingerprint::of(end_entity.as_ref()) != pinned => {
                if let Ok(mut seen) = self.mismatch.lock() {
                    *seen = Some(Fingerprint::of(end_entity.as_ref()));
                }
                Err(rustls::Error::InvalidCertificate(
                    rustls::CertificateError::ApplicationVerificationFailure,
                ))
            }
            _ => Ok(ServerCertVerified::assertion()),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_round_trip_as_hex() {
        let fingerprint = Fingerprint::of(b"certificate");
        let text = fingerprint.to_string();
        assert_eq!(text.len(), 64);
        assert_eq!(text.parse::<Fingerprint>(), Ok(fingerprint));
        assert_eq!("xyz".parse::<Fingerprint>(), Err(FingerprintParseError));
        assert_eq!(text[..63].parse::<Fingerprint>(), Err(FingerprintParseError));
    }

    #[test]
    fn identities_persist_their_fingerprint() {
        let identity = HostIdentity::generate_self_signed("host").unwrap();
        let again =
            HostIdentity::from_der(identity.cert_der().to_vec(), identity.key_der().to_vec());
        assert_eq!(identity.fingerprint(), again.fingerprint());
        let tls = again.server_tls().unwrap();
        assert_eq!(tls.max_early_data_size, 0, "0-RTT stays off");
        assert_eq!(tls.alpn_protocols, vec![ALPN.to_vec()]);
    }
}
