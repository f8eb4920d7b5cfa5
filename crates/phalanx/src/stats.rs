//! Counters: a session's, a host's and each of its players', the links' and what admission
//! control and the transport refused or dropped. Exact, cheap to read, for overlays, logs
//! and an operator's dashboard.

pub use crate::admission::AdmissionStats;
pub use crate::session::SessionStats;
#[cfg(feature = "udp")]
pub use crate::udp::UdpHostStats;
pub use phalanx_proto::{ClientStats, DropCounters, HostStats, LinkStats, PeerStats};
