//! Peer-to-peer matches: every peer sends its commands straight to every other, with no host.
//!
//! This is the topology of "1500 Archers on a 28.8". Each peer's *contribution* to a turn is
//! the commands it gives for it, and turn `t` executes on every peer once every peer still in
//! the match has made its contribution to `t` final. A contribution is final `lead_ms` before
//! its turn is due ([`PeerConfig::lead_ms`]), so that it reaches every peer in time; a command
//! goes into the first turn of ours that is not final yet and leaves at once. A datagram to a
//! peer carries our watermark (our contributions are final through this turn), every
//! non-empty contribution of ours it has not acknowledged, and our acknowledgement of its own:
//! an empty turn costs nothing, and a lost datagram is repaired by the next one.
//!
//! The **master** is the lowest player still in the match; it alone may put control records
//! (the end of the game, a desync report, a pace change) in its contributions, so every peer
//! executes them on the same turn. It also decides departures: a peer nothing came from for
//! `link.idle_timeout_ms` is dropped by a view change (`view.rs`) that agrees, before anyone
//! executes past it, on the last turn whose contribution from the gone peer counts, and hands
//! every survivor the contributions it lacks. When the master itself goes, the next lowest
//! takes over the same way. A side of a network split that is not a majority of the match
//! ends ([`PeerEnd::LostMajority`]) rather than play on alone.
//!
//! Like the rest of phalanx-proto this is sans-IO: the driver hands in datagrams with the
//! player they came from (the transport authenticated it) and the time, and sends what
//! [`Peer::poll_transmit`] returns.
//!
//! ```
//! use phalanx_proto::mesh::{Peer, PeerConfig};
//! use phalanx_proto::{PlayerId, SessionConfig};
//!
//! let roster = [PlayerId(0), PlayerId(1)];
//! let config = SessionConfig::default();
//! let mut peers = [
//!     Peer::new(config.clone(), PeerConfig::default(), &roster, PlayerId(0), 0).unwrap(),
//!     Peer::new(config, PeerConfig::default(), &roster, PlayerId(1), 0).unwrap(),
//! ];
//! peers[0].submit(0, b"attack").unwrap();
//! let mut executed = Vec::new();
//! let mut buf = Vec::new();
//! for now in (0..1_000).step_by(5) {
//!     for from in 0..2 {
//!         // (A real driver sends over the network; here the datagram arrives at once.)
//!         while let Some(to) = peers[from].poll_transmit(now, &mut buf) {
//!             let sender = PlayerId(from as u8);
//!             peers[usize::from(to.0)].handle_datagram(now, sender, &buf);
//!         }
//!         peers[from].handle_timeout(now);
//!     }
//!     while let Some(turn) = peers[1].next_turn(now) {
//!         executed.extend(turn.commands().map(|(player, _, payload)| (player, payload.clone())));
//!     }
//!     while peers[0].next_turn(now).is_some() {}
//! }
//! assert_eq!(executed, vec![(PlayerId(0), bytes::Bytes::from_static(b"attack"))]);
//! ```

mod pair;
mod peer;
mod transmit;
mod turns;
mod types;
mod view;

pub use peer::Peer;
pub use turns::EndError;
pub use types::{PairStats, PeerConfig, PeerEnd, PeerError, PeerEvent, PeerStats};
