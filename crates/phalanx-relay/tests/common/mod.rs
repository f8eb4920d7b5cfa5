//! A relay in this process with its admin API served on a free port, as the tests use it.
#![allow(dead_code)] // each test file uses its part

use std::net::SocketAddr;
use std::time::Duration;

use phalanx_relay::load::{admin_request, BotConfig};
use phalanx_relay::{admin, Limits, Relay, RelayConfig, RelayHandle};

/// The admin token of every test relay.
pub(crate) const TOKEN: &str = "test-token";

/// A running relay, its handle and its admin API's address.
pub(crate) struct Served {
    pub(crate) relay: Relay,
    pub(crate) handle: RelayHandle,
    pub(crate) admin: SocketAddr,
}

/// Starts a relay on loopback with `limits`, and its admin API on a thread of its own.
pub(crate) fn serve(limits: Limits) -> Served {
    let mut config = RelayConfig::default();
    config.udp = "127.0.0.1:0".parse().unwrap();
    config.limits = limits;
    let relay = Relay::start(config).expect("the relay starts");
    let handle = relay.handle();
    let router = admin::router(handle.clone(), TOKEN);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, router).await.unwrap();
        });
    });
    let admin = rx.recv().expect("the admin API listens");
    Served { relay, handle, admin }
}

/// A request with the right token; the status and the body as JSON (`Null` if not JSON).
pub(crate) fn request(
    admin: SocketAddr,
    method: &str,
    path: &str,
    body: &str,
) -> (u16, serde_json::Value) {
    let (status, body) = admin_request(admin, TOKEN, method, path, body).expect("the API answers");
    (status, serde_json::from_str(&body).unwrap_or(serde_json::Value::Null))
}

/// A bot for seat `seat` of the match `ticket` (the create call's JSON) made with `session`.
pub(crate) fn bot(
    ticket: &serde_json::Value,
    seat: usize,
    session: &phalanx_proto::SessionConfig,
) -> BotConfig {
    BotConfig {
        address: ticket["address"].as_str().unwrap().parse().unwrap(),
        pin: ticket["pin"].as_str().unwrap().trim_start_matches("udp:").parse().unwrap(),
        token: ticket["seats"][seat]["token"].as_u64().unwrap(),
        session: session.clone(),
        seed: ticket["seats"][seat]["token"].as_u64().unwrap(),
        join_timeout: Duration::from_secs(10),
        hostile: false,
    }
}
