//! The 1500-archer lockstep demo as a library: the deterministic battle ([`world`]), one
//! player's game and bot ([`game`]), the replay file ([`replay`]), the HTML report
//! ([`report`]), desync forensics ([`inspect`]) and the real-socket host and client ([`net`]). The `archers` binary puts them
//! together; the tick bench and the tests use them directly.

pub mod game;
pub mod inspect;
pub mod net;
pub mod peer;
pub mod replay;
pub mod report;
pub mod world;
