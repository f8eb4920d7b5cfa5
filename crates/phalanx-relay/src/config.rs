//! A relay's settings: addresses, workers, limits. Read from a TOML file, the environment and
//! flags by the binary; built in code by an embedding server.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

/// Everything a relay is started with. Every field has a sane default: a relay needs no
/// configuration file.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct RelayConfig {
    /// The players' UDP address (raw UDP + Noise). With several workers, worker `i` binds this
    /// port + `i`. Default `0.0.0.0:7777`.
    pub udp: SocketAddr,
    /// The admin HTTP API's address (matches, `/metrics`, `/healthz`, `/readyz`). Default
    /// `127.0.0.1:7780`: only this machine.
    pub admin: SocketAddr,
    /// The bearer token the admin API's `/v1/` routes require. Default: none given, so a random
    /// one is made at start and logged.
    pub admin_token: Option<String>,
    /// Worker threads, each with its own socket and its own shard of matches. Default 1.
    pub workers: usize,
    /// Where the relay's static key is kept (created on first start), so that its pin survives
    /// restarts. Default: none (a fresh key each start).
    pub key_file: Option<PathBuf>,
    /// How long a drain (SIGTERM) lets running matches play before ending them. Default 60 s.
    pub drain_timeout_ms: u64,
    /// Limits per worker.
    pub limits: Limits,
    /// The game's rule for commands, for every match (set in code: a file or flag cannot
    /// hold one). Default: none.
    #[serde(skip)]
    pub command_rule: Option<crate::CommandRule>,
}

impl Default for RelayConfig {
    fn default() -> Self {
        RelayConfig {
            udp: SocketAddr::from(([0, 0, 0, 0], 7777)),
            admin: SocketAddr::from(([127, 0, 0, 1], 7780)),
            admin_token: None,
            workers: 1,
            key_file: None,
            drain_timeout_ms: 60_000,
            limits: Limits::default(),
            command_rule: None,
        }
    }
}

/// A worker's limits: every queue and table a peer or an operator can grow is bounded here.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct Limits {
    /// Matches held at most. Default 4,096.
    pub matches_max: usize,
    /// Connections held at most, joining and seated. Default 40,000.
    pub connections_max: usize,
    /// Players a match may have at most (and spectators, separately). Default 16.
    pub players_max: u8,
    /// A connection must send its join request this soon after its handshake. Default 10 s.
    pub join_timeout_ms: u64,
    /// A match that nobody joined this soon after it was created is freed. Default 120 s.
    pub join_window_ms: u64,
    /// A started match with no player connected for this long ends and is freed. Default 30 s.
    pub empty_grace_ms: u64,
    /// An ended match is freed this soon even if a player never acknowledged the last turn.
    /// Default 10 s.
    pub end_grace_ms: u64,
    /// The largest upload (a snapshot, a desync's hashes or state) taken from a player.
    /// Default 1 MiB.
    pub upload_bytes_max: usize,
    /// The largest join reply (a rejoin's turns) queued for a client. Default 2 MiB.
    pub join_reply_bytes_max: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            matches_max: 4_096,
            connections_max: 40_000,
            players_max: 16,
            join_timeout_ms: 10_000,
            join_window_ms: 120_000,
            empty_grace_ms: 30_000,
            end_grace_ms: 10_000,
            upload_bytes_max: 1 << 20,
            join_reply_bytes_max: 2 << 20,
        }
    }
}
