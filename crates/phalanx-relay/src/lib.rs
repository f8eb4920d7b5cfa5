//! A dedicated relay for phalanx matches: one process hosts many lockstep matches (a thousand
//! 8-player matches a core) and runs none of their games.
//!
//! Players connect over the `phalanx::udp` transport (raw UDP + Noise), exactly as to a
//! `phalanx::Host`; the relay is the host of every match it holds: it seals turns, relays
//! them, times players out, asks players for snapshots and pins desyncs, with the same sans-IO
//! `phalanx_proto::Host` a game's own host runs.
//!
//! - [`Relay::start`] binds one UDP socket per worker thread and hands back a [`RelayHandle`]:
//!   create, list, inspect, start, end matches and kick players; read [`Metrics`]; drain.
//! - `admin::router` serves the same over HTTP (JSON, bearer token) with `/metrics`,
//!   `/healthz` and `/readyz`; the `phalanx-relay` binary runs both (cargo feature `server`, on
//!   by default).
//! - [`Shard`] is the sans-IO core a worker runs (and a simulation can): many matches, one
//!   timing wheel, datagrams in and out.
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use phalanx_relay::{MatchSpec, Relay, RelayConfig};
//!
//! let relay = Relay::start(RelayConfig::default())?;
//! let ticket = relay.handle().create_match(MatchSpec::new(2)).await?;
//! // Hand each player `ticket.address`, `ticket.pin` and their seat's token.
//! println!("{}", serde_json::to_string_pretty(&ticket)?);
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]

#[cfg(feature = "server")]
pub mod admin;
mod api;
mod config;
pub mod load;
pub mod metrics;
mod rule;
mod runtime;
mod shard;

pub use api::{
    CreateError, MatchError, MatchId, MatchIdError, MatchInfo, MatchSpec, MatchState, MatchTicket,
    SeatTicket, StartPolicy,
};
pub use config::{Limits, RelayConfig};
pub use metrics::Metrics;
pub use phalanx_proto::JoinCode;
pub use rule::CommandRule;
pub use runtime::{Relay, RelayError, RelayHandle};
pub use shard::{Outbox, Shard};

/// The end code of a match the relay ended because no player was left in it.
pub const END_EMPTY: u32 = 0xFFFF_0001;
/// The end code of a match the relay ended because it was draining and the drain's deadline
/// passed.
pub const END_DRAIN: u32 = 0xFFFF_0002;
