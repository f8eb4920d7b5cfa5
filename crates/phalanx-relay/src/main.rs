//! `phalanx-relay`: a dedicated relay for phalanx matches.
//!
//! `cargo run --release -p phalanx-relay` starts one with the defaults: players on UDP port
//! 7777, the admin API on 127.0.0.1:7780 with a random token (logged). Settings come from a
//! TOML file (`--config`), then the environment (`PHALANX_RELAY_*`), then flags, each
//! overriding the one before. SIGTERM (or Ctrl-C) drains: no new match, running ones play on
//! for `drain_timeout_ms` and then end; the process exits 0 once every match is gone.
//!
//! Besides its logs (stderr), it prints one line per address on stdout for scripts:
//! `UDP <address>` for each worker's socket, then `ADMIN <address>`.
#![allow(clippy::print_stdout)] // the addresses, for scripts

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use phalanx_relay::{admin, Relay, RelayConfig};

#[derive(Parser, Debug)]
#[command(
    name = "phalanx-relay",
    version,
    about = "A dedicated relay for phalanx lockstep matches"
)]
struct Cli {
    /// A TOML file of settings (see `RelayConfig`); flags and the environment override it.
    #[arg(long, env = "PHALANX_RELAY_CONFIG")]
    config: Option<PathBuf>,
    /// The players' UDP address (worker i binds its port + i).
    #[arg(long, env = "PHALANX_RELAY_UDP")]
    udp: Option<SocketAddr>,
    /// The admin HTTP API's address.
    #[arg(long, env = "PHALANX_RELAY_ADMIN")]
    admin: Option<SocketAddr>,
    /// The admin API's bearer token (default: random, logged at start).
    #[arg(long, env = "PHALANX_RELAY_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// Worker threads, one socket and one shard of matches each.
    #[arg(long, env = "PHALANX_RELAY_WORKERS")]
    workers: Option<usize>,
    /// Where the relay's static key is kept (made on first start).
    #[arg(long, env = "PHALANX_RELAY_KEY_FILE")]
    key_file: Option<PathBuf>,
    /// How long a drain lets running matches play, milliseconds.
    #[arg(long, env = "PHALANX_RELAY_DRAIN_TIMEOUT_MS")]
    drain_timeout_ms: Option<u64>,
    /// Log filter (tracing's `EnvFilter` syntax).
    #[arg(long, env = "PHALANX_RELAY_LOG", default_value = "info")]
    log: String,
}

fn settings(cli: &Cli) -> Result<RelayConfig, String> {
    let mut config = match &cli.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?
        }
        None => RelayConfig::default(),
    };
    config.udp = cli.udp.unwrap_or(config.udp);
    config.admin = cli.admin.unwrap_or(config.admin);
    config.admin_token = cli.admin_token.clone().or(config.admin_token);
    config.workers = cli.workers.unwrap_or(config.workers);
    config.key_file = cli.key_file.clone().or(config.key_file);
    config.drain_timeout_ms = cli.drain_timeout_ms.unwrap_or(config.drain_timeout_ms);
    Ok(config)
}

fn random_token() -> String {
    let mut bytes = [0u8; 16];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
        .expect("OS randomness is available");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

async fn terminated() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("a SIGTERM handler installs");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_new(&cli.log)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    let config = match settings(&cli) {
        Ok(config) => config,
        Err(why) => {
            tracing::error!("{why}");
            return std::process::ExitCode::from(2);
        }
    };
    match serve(config) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(why) => {
            tracing::error!("{why}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn serve(config: RelayConfig) -> Result<(), String> {
    let token = match &config.admin_token {
        Some(token) => token.clone(),
        None => {
            let token = random_token();
            tracing::info!(admin_token = %token, "no admin token given: made one");
            token
        }
    };
    let relay = Relay::start(config.clone()).map_err(|e| e.to_string())?;
    let handle = relay.handle();
    tracing::info!(pin = %handle.pin(), "relay key");
    for address in handle.addresses() {
        println!("UDP {address}");
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(config.admin)
            .await
            .map_err(|e| format!("cannot bind the admin API on {}: {e}", config.admin))?;
        let address = listener.local_addr().map_err(|e| e.to_string())?;
        tracing::info!(%address, "admin API listening");
        println!("ADMIN {address}");
        let app = admin::router(handle.clone(), &token);
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        terminated().await;
        tracing::info!(timeout_ms = config.drain_timeout_ms, "draining: no new matches");
        handle.drain(Duration::from_millis(config.drain_timeout_ms)).await;
        while !handle.is_stopped() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        server.abort();
        tracing::info!("drained: every match is gone");
        Ok::<(), String>(())
    })?;
    relay.wait();
    Ok(())
}
