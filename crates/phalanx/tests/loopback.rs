//! The QUIC host and client on real loopback sockets: a small game plays to the same state on
//! every client; joins fail with typed errors (wrong fingerprint, bad token, other version);
//! and the host never accepts 0-RTT data. Every test is bounded in time.

#![cfg(feature = "quic")]

use std::sync::Arc;
use std::time::Duration;

use phalanx::{Client, ClientOptions, ConnectError, Host, HostOptions, SessionConfig, TypedRecord};
use phalanx_proto::{ClientJoinError, JoinRefusal};

#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
enum Order {
    Move { unit: u32, x: i32, y: i32 },
    Stop { unit: u32 },
}

fn session() -> SessionConfig {
    let mut session = SessionConfig::default();
    session.turns.length_ms = 20;
    session
}

async fn host(tokens: Vec<u64>) -> Host<Order> {
    let identity = phalanx::quic::HostIdentity::generate_self_signed("loopback").unwrap();
    let mut options = HostOptions::new(identity, "127.0.0.1:0".parse().unwrap(), tokens);
    options.session = session();
    Host::bind(options).await.unwrap()
}

fn client_options(token: u64, host: &Host<Order>) -> ClientOptions {
    let mut options = ClientOptions::new(token, host.pin());
    options.session = session();
    options
}

/// A hash chain over every record executed: equal chains mean equal games.
fn fold(state: u64, turn: u32, records: &[TypedRecord<Order>]) -> u64 {
    let text = format!("{turn}:{records:?}");
    text.bytes().fold(state, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// Three clients on loopback, pinned to the host's self-signed certificate, play 80 turns with
/// commands from everyone; every client ends on the same state after every turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_game_reaches_the_same_state_everywhere() {
    let test = async {
        let host = host(vec![1, 2, 3]).await;
        let addr = host.local_addr().unwrap();
        let mut players = Vec::new();
        for token in [1, 2, 3] {
            let client: Client<Order> = Client::connect(addr, client_options(token, &host))
                .await
                .expect("joins with the pinned fingerprint");
            players.push(client);
        }
        host.start().await.unwrap();
        let mut tasks = Vec::new();
        for (index, mut client) in players.into_iter().enumerate() {
            tasks.push(tokio::spawn(async move {
                let mut state = 0xcbf2_9ce4_8422_2325u64;
                let mut chain = Vec::new();
                let mut executed = 0;
                while let Some(turn) = client.next_turn().await {
                    state = fold(state, turn.turn.0, &turn.records);
                    chain.push(state);
                    executed += turn
                        .records
                        .iter()
                        .filter(|r| matches!(r, TypedRecord::Command { command: Ok(_), .. }))
                        .count();
                    if turn.turn.0 % 5 == index as u32 && turn.turn.0 < 60 {
                        let order =
                            Order::Move { unit: index as u32, x: turn.turn.0 as i32, y: -1 };
                        client.submit(&order).await.expect("within budget");
                        client.submit(&Order::Stop { unit: 7 }).await.expect("within budget");
                    }
                    if chain.len() == 80 {
                        break;
                    }
                }
                let stats = client.stats().await.unwrap();
                client.shutdown().await;
                (chain, executed, stats)
            }));
        }
        let mut results = Vec::new();
        for task in tasks {
            results.push(task.await.unwrap());
        }
        host.shutdown().await;
        results
    };
    let results = tokio::time::timeout(Duration::from_secs(60), test).await.expect("bounded");
    let (reference, executed, _) = &results[0];
    assert_eq!(reference.len(), 80);
    assert!(*executed >= 60, "commands flowed: {executed}");
    for (chain, other_executed, stats) in &results[1..] {
        assert_eq!(chain, reference, "every client executes identical turns");
        assert_eq!(other_executed, executed);
        assert_eq!(stats.drops.malformed, 0);
    }
}

/// A client pinning another fingerprint cannot connect: the TLS handshake fails, and the error
/// names both fingerprints.
#[tokio::test]
async fn a_wrong_fingerprint_is_refused() {
    let test = async {
        let host = host(vec![1]).await;
        let other =
            phalanx::quic::HostIdentity::generate_self_signed("impostor").unwrap().fingerprint();
        let mut options = client_options(1, &host);
        options.transport = phalanx::quic::HostVerification::Pinned(other).into();
        let result = Client::<Order>::connect(host.local_addr().unwrap(), options).await;
        let phalanx::Pin::Fingerprint(real) = host.pin() else { panic!("a QUIC host") };
        host.shutdown().await;
        (result, other, real)
    };
    let (result, other, real) =
        tokio::time::timeout(Duration::from_secs(20), test).await.expect("bounded");
    match result {
        Err(ConnectError::WrongHost { expected, found }) => {
            assert_eq!((expected, found), (other, real));
        }
        other => panic!("{:?}", other.err()),
    }
}

/// Bad tokens, used tokens and other protocol versions are refused with typed errors naming
/// the cause (and both versions).
#[tokio::test]
async fn joins_are_refused_with_typed_errors() {
    let test = async {
        let host = host(vec![1]).await;
        let addr = host.local_addr().unwrap();
        let bad = Client::<Order>::connect(addr, client_options(99, &host)).await.err();
        let mut old = client_options(1, &host);
        old.session.protocol_version = 0;
        let version = Client::<Order>::connect(addr, old).await.err();
        let first = Client::<Order>::connect(addr, client_options(1, &host)).await;
        // Once the first client has been heard (it says hello at once), its token is spent.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let reused = Client::<Order>::connect(addr, client_options(1, &host)).await.err();
        if let Ok(client) = first {
            client.shutdown().await;
        }
        host.shutdown().await;
        (bad, version, reused)
    };
    let (bad, version, reused) =
        tokio::time::timeout(Duration::from_secs(30), test).await.expect("bounded");
    assert!(matches!(
        bad,
        Some(ConnectError::Join(ClientJoinError::Refused(JoinRefusal::BadToken)))
    ));
    assert!(
        matches!(
            version,
            Some(ConnectError::Join(ClientJoinError::Refused(JoinRefusal::VersionMismatch {
                host: phalanx_proto::PROTOCOL_VERSION,
                client: 0
            })))
        ),
        "{version:?}"
    );
    assert!(matches!(
        reused,
        Some(ConnectError::Join(ClientJoinError::Refused(JoinRefusal::TokenUsed)))
    ));
}

/// A verifier that accepts the host's certificate, for a raw quinn client in this test only.
#[derive(Debug)]
struct AcceptAny(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// 0-RTT is off: a client that *wants* early data (enabled, and holding a session ticket from
/// a first connection) still cannot send any before the handshake, because the host's tickets
/// never allow it.
#[tokio::test]
async fn the_host_never_accepts_early_data() {
    let test = async {
        let host = host(vec![1]).await;
        let addr = host.local_addr().unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAny(provider)))
            .with_no_client_auth();
        tls.alpn_protocols = vec![phalanx::quic::ALPN.to_vec()];
        tls.enable_early_data = true;
        let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
        let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
        // First connection: full handshake; wait for the session ticket to arrive.
        let first = endpoint.connect(addr, "phalanx").unwrap().await.expect("handshake");
        tokio::time::sleep(Duration::from_millis(200)).await;
        first.close(quinn::VarInt::from_u32(0), b"");
        // Second connection: try 0-RTT with the ticket.
        let refused = match endpoint.connect(addr, "phalanx").unwrap().into_0rtt() {
            Ok((connection, _)) => {
                connection.close(quinn::VarInt::from_u32(0), b"");
                false
            }
            Err(connecting) => {
                // No early data possible: the handshake completes normally instead.
                let connection = connecting.await.expect("the normal handshake still works");
                connection.close(quinn::VarInt::from_u32(0), b"");
                true
            }
        };
        endpoint.close(quinn::VarInt::from_u32(0), b"");
        host.shutdown().await;
        refused
    };
    let refused = tokio::time::timeout(Duration::from_secs(20), test).await.expect("bounded");
    assert!(refused, "the client could send 0-RTT data");
}
