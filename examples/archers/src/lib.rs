//! The 1500-archer lockstep demo as a library: the deterministic battle ([`world`]), a bot
//! ([`bot`]) and the match's rules ([`rules`]), which build for the browser too; and, with the
//! `native` feature (the default), one player's game ([`game`]), the replay file ([`replay`]),
//! the HTML report ([`report`]), desync forensics ([`inspect`]) and the real-socket host and
//! client ([`net`], [`peer`]). The `archers` binary puts them together; the tick bench, the
//! tests and the browser page (`examples/archers-web`) use them directly.

pub mod bot;
#[cfg(feature = "native")]
pub mod game;
#[cfg(feature = "native")]
pub mod inspect;
#[cfg(feature = "native")]
pub mod net;
#[cfg(feature = "native")]
pub mod peer;
#[cfg(feature = "native")]
pub mod replay;
#[cfg(feature = "native")]
pub mod report;
pub mod rules;
pub mod world;
