//! What the tests share: a raw quinn client that accepts any certificate, as a flood or a
//! foreign client would (admission control), and the desync tests' saved state and its
//! inspection hook.

#![allow(dead_code, unreachable_pub)] // each test binary uses its own part

use std::sync::Arc;

#[cfg(feature = "udp")]
use phalanx::udp::DatagramSocket;
#[cfg(all(feature = "udp", feature = "quic"))]
use phalanx::udp::QuinnSocket;
use phalanx::{HostTransport, Transport};

/// The transports this build has (the `quic` and `udp` features).
pub fn transports() -> Vec<Transport> {
    [
        #[cfg(feature = "quic")]
        Transport::Quic,
        #[cfg(feature = "udp")]
        Transport::Udp,
    ]
    .to_vec()
}

/// The transport a test that runs over one uses: `PHALANX_TRANSPORT` (`quic` or `udp`) when
/// set and built, else QUIC when built, else UDP.
pub fn transport() -> Transport {
    let built = transports();
    let wanted = match std::env::var("PHALANX_TRANSPORT").as_deref() {
        #[cfg(feature = "udp")]
        Ok("udp") => Some(Transport::Udp),
        #[cfg(feature = "quic")]
        Ok("quic") => Some(Transport::Quic),
        _ => None,
    };
    wanted.unwrap_or(built[0])
}

/// A host transport of `kind` with a fresh identity (clients pin it through
/// `HostControl::client_transport`).
pub fn host_transport(kind: Transport) -> HostTransport {
    match kind {
        #[cfg(feature = "quic")]
        Transport::Quic => {
            phalanx::quic::HostIdentity::generate_self_signed("test").expect("an identity").into()
        }
        #[cfg(feature = "udp")]
        Transport::Udp => phalanx::udp::HostConfig::generate().into(),
        _ => unreachable!("a transport this build does not have"),
    }
}

/// A client config that accepts any certificate: an attacker does not care who it talks to.
#[cfg(feature = "quic")]
pub fn attacker_config() -> quinn::ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAny(provider)))
        .with_no_client_auth();
    tls.alpn_protocols = vec![phalanx::quic::ALPN.to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).expect("QUIC TLS");
    quinn::ClientConfig::new(Arc::new(crypto))
}

#[cfg(feature = "quic")]
#[derive(Debug)]
pub struct AcceptAny(Arc<rustls::crypto::CryptoProvider>);

#[cfg(feature = "quic")]
impl rustls::client::danger::ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &rustls::pki_types::CertificateDer<'_>,
        _dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _message: &[u8],
        _cert: &rustls::pki_types::CertificateDer<'_>,
        _dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A real UDP socket that can be cut dead, as a crashed process's would be: once its switch
/// is set nothing leaves it (a close included) and everything arriving is dropped. It serves
/// either transport.
#[derive(Debug)]
pub struct Killable {
    #[cfg(feature = "quic")]
    inner: Arc<dyn quinn::AsyncUdpSocket>,
    #[cfg(not(feature = "quic"))]
    inner: tokio::net::UdpSocket,
    dead: Arc<std::sync::atomic::AtomicBool>,
}

impl Killable {
    /// A socket on a free loopback port (call inside a tokio runtime), and its switch.
    pub fn bind() -> (Arc<Killable>, Arc<std::sync::atomic::AtomicBool>) {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").expect("a loopback port");
        #[cfg(feature = "quic")]
        let inner =
            quinn::Runtime::wrap_udp_socket(&quinn::TokioRuntime, socket).expect("a socket");
        #[cfg(not(feature = "quic"))]
        let inner = {
            socket.set_nonblocking(true).expect("non-blocking");
            tokio::net::UdpSocket::from_std(socket).expect("a tokio socket")
        };
        let dead = Arc::new(std::sync::atomic::AtomicBool::new(false));
        (Arc::new(Killable { inner, dead: dead.clone() }), dead)
    }

    /// The client transport of `kind` on this socket, pinning what `pin` pins.
    pub fn client_transport(
        self: &Arc<Self>,
        pin: phalanx::ClientTransport,
    ) -> phalanx::ClientTransport {
        match pin {
            #[cfg(feature = "quic")]
            phalanx::ClientTransport::Quic(mut config) => {
                config.socket = Some(self.clone());
                config.into()
            }
            #[cfg(feature = "udp")]
            phalanx::ClientTransport::Udp(mut config) => {
                config.socket = Some(self.clone());
                config.into()
            }
            _ => unreachable!("a transport this build does not have"),
        }
    }

    fn is_dead(&self) -> bool {
        self.dead.load(std::sync::atomic::Ordering::Relaxed)
    }
}

#[cfg(feature = "quic")]
impl quinn::AsyncUdpSocket for Killable {
    fn create_io_poller(self: Arc<Self>) -> std::pin::Pin<Box<dyn quinn::UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, transmit: &quinn::udp::Transmit<'_>) -> std::io::Result<()> {
        if self.is_dead() {
            return Ok(());
        }
        self.inner.try_send(transmit)
    }

    fn poll_recv(
        &self,
        cx: &mut std::task::Context<'_>,
        bufs: &mut [std::io::IoSliceMut<'_>],
        meta: &mut [quinn::udp::RecvMeta],
    ) -> std::task::Poll<std::io::Result<usize>> {
        loop {
            match self.inner.poll_recv(cx, bufs, meta) {
                std::task::Poll::Ready(Ok(_)) if self.is_dead() => continue,
                other => return other,
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.inner.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}

#[cfg(feature = "udp")]
impl phalanx::udp::DatagramSocket for Killable {
    fn try_send_to(&self, buf: &[u8], target: std::net::SocketAddr) -> std::io::Result<usize> {
        if self.is_dead() {
            return Ok(buf.len());
        }
        #[cfg(feature = "quic")]
        return DatagramSocket::try_send_to(&QuinnSocket(self.inner.clone()), buf, target);
        #[cfg(not(feature = "quic"))]
        DatagramSocket::try_send_to(&self.inner, buf, target)
    }

    fn poll_recv_from(
        &self,
        cx: &mut std::task::Context<'_>,
        buf: &mut [u8],
    ) -> std::task::Poll<std::io::Result<(usize, std::net::SocketAddr)>> {
        loop {
            #[cfg(feature = "quic")]
            let polled = DatagramSocket::poll_recv_from(&QuinnSocket(self.inner.clone()), cx, buf);
            #[cfg(not(feature = "quic"))]
            let polled = DatagramSocket::poll_recv_from(&self.inner, cx, buf);
            match polled {
                std::task::Poll::Ready(Ok(_)) if self.is_dead() => continue,
                other => return other,
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        #[cfg(feature = "quic")]
        return self.inner.local_addr();
        #[cfg(not(feature = "quic"))]
        tokio::net::UdpSocket::local_addr(&self.inner)
    }
}

/// The desync tests' saved game state: a chain of everything executed, then `hp`.
pub fn save_state(chain: u64, hp: u32) -> Vec<u8> {
    [chain.to_le_bytes().as_slice(), &hp.to_le_bytes()].concat()
}

/// The desync tests' inspection hook over [`save_state`]'s bytes.
pub fn inspect(state: &[u8]) -> Option<Vec<(String, u64)>> {
    let (chain, hp) = state.split_first_chunk::<8>()?;
    let hp = <[u8; 4]>::try_from(hp).ok()?;
    Some(vec![
        ("chain".to_owned(), u64::from_le_bytes(*chain)),
        ("hp".to_owned(), u32::from_le_bytes(hp).into()),
    ])
}
