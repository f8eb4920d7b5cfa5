//! The host's controls for a lobby or an operator: a cloneable handle that any thread can hold
//! while the game's frame loop owns the [`Session`](crate::Session).

use std::net::SocketAddr;
use std::sync::Arc;
#[cfg(feature = "udp")]
use std::sync::{Mutex, PoisonError};

use phalanx_proto::{HostStats, PeerStats, PlayerId, Readmit, Replay, Turn};

use super::Command;
use crate::admission::{AdmissionStats, Gate};
use crate::driver::Control;
use crate::{Pin, SessionError};

/// The UDP endpoint's drop counters (none over QUIC).
#[cfg(feature = "udp")]
pub(super) type Drops = Option<Arc<Mutex<crate::udp::UdpHostStats>>>;

/// The host's controls: start, end, kick, pause, record, snapshots and counters, for a lobby
/// or an operator thread (from [`Session::host`](crate::Session::host) or
/// [`Host::control`](crate::Host::control)). Clone it freely; every clone drives the same
/// host, and the game's frame loop keeps its [`Session`](crate::Session).
///
/// Its calls wait for the host's answer (a channel round trip to a task that does nothing
/// slow): make them from a thread, not from inside an async task (tokio refuses to block
/// there; an async game uses [`Host`](crate::Host)'s own async methods). After the host shut
/// down they fail with [`SessionError::Closed`].
///
/// ```no_run
/// # fn example(control: phalanx::HostControl) -> Result<(), phalanx::SessionError> {
/// use phalanx::{PlayerId, Readmit};
/// // The lobby hands out the address and the pin, and starts the game once everyone is in.
/// println!("join {} pinning {}", control.local_addr(), control.pin());
/// control.start()?;
/// // Later, from an operator console: a kick that is a ban, then the end of the game.
/// control.remove(PlayerId(2), Readmit::Never)?;
/// let last = control.end(0)?;
/// # let _ = last; Ok(()) }
/// ```
#[derive(Clone)]
pub struct HostControl {
    pub(super) control: Control<Command>,
    pub(super) local: SocketAddr,
    pub(super) pin: Pin,
    pub(super) gate: Arc<Gate>,
    #[cfg(feature = "udp")]
    pub(super) drops: Drops,
    /// The browsers' listener: its address and the certificate hash pages pin.
    #[cfg(feature = "webtransport")]
    pub(super) browsers: Option<(SocketAddr, crate::web::host::SharedHash)>,
}

impl std::fmt::Debug for HostControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut debug = f.debug_struct("HostControl");
        debug.field("local", &self.local).field("pin", &self.pin).finish_non_exhaustive()
    }
}

impl HostControl {
    /// Where browser players connect (WebTransport,
    /// [`HostOptions::browsers`](crate::HostOptions::browsers)), and the certificate hash a
    /// page pins now (it changes when the host renews its certificate: read it for each page
    /// handed out); `None` without a browser listener.
    #[cfg(feature = "webtransport")]
    pub fn browsers(&self) -> Option<(SocketAddr, crate::web::CertificateHash)> {
        let (addr, hash) = self.browsers.as_ref()?;
        Some((*addr, *hash.lock().unwrap_or_else(std::sync::PoisonError::into_inner)))
    }

    /// The address the host listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// What clients pin to join this host — its certificate's fingerprint over QUIC, its
    /// static key over raw UDP — which also names the transport. A lobby hands it to the
    /// players (it prints as text and parses back); each joins with
    /// `ClientOptions::new(token, pin)`.
    pub fn pin(&self) -> Pin {
        self.pin
    }

    /// What admission control and the transport refused and dropped so far (exact counters;
    /// see [`Admission`](crate::session::Admission)).
    pub fn admission_stats(&self) -> AdmissionStats {
        #[cfg_attr(not(feature = "udp"), allow(unused_mut))]
        let mut stats = self.gate.stats();
        #[cfg(feature = "udp")]
        if let Some(drops) = &self.drops {
            stats.udp = *drops.lock().unwrap_or_else(PoisonError::into_inner);
        }
        stats
    }

    /// Starts the game: turn 0 is sealed one turn from now; no more joins (but with
    /// `catch_up.late_join`). Starting a started game does nothing.
    pub fn start(&self) -> Result<(), SessionError> {
        self.control.tell(Command::Start)
    }

    /// Ends the game with the game's own `code`: the next sealed turn is the last, and every
    /// peer executes up to it and ends `Finished { code }`. Returns that last turn; refused
    /// before the start or when already ending ([`SessionError::End`]).
    pub fn end(&self, code: u32) -> Result<Turn, SessionError> {
        self.control.ask(|reply| Command::End(code, reply))?.map_err(SessionError::End)
    }

    /// Removes (kicks) a remote player: it leaves at the next sealed turn and its connection
    /// is closed. [`Readmit::Allow`] keeps its seat open for `catch_up.rejoin_window_ms` (its token
    /// takes it back); [`Readmit::Never`] is a ban (its token is refused with
    /// `JoinRefusal::TokenRevoked` for the rest of the session).
    pub fn remove(&self, player: PlayerId, readmit: Readmit) -> Result<(), SessionError> {
        let remove = |reply| Command::Remove(player, readmit, reply);
        self.control.ask(remove)?.map_err(SessionError::Remove)
    }

    /// Pauses the game after the next sealed turn.
    pub fn pause(&self) -> Result<(), SessionError> {
        self.control.tell(Command::Pause(true))
    }

    /// Resumes a paused game.
    pub fn resume(&self) -> Result<(), SessionError> {
        self.control.tell(Command::Pause(false))
    }

    /// Records every turn sealed from now on (at most `turns_max`), with the game's own `seed`
    /// ([`replay`](Self::replay) gives it).
    pub fn start_recording(&self, seed: u64, turns_max: usize) -> Result<(), SessionError> {
        self.control.tell(Command::Record { seed, turns_max })
    }

    /// The recording so far (`None` if not recording); it stays available after the end.
    pub fn replay(&self) -> Result<Option<Replay>, SessionError> {
        self.control.ask(Command::Replay)
    }

    /// Asks for a snapshot after the next check turn, besides those of
    /// `catch_up.snapshot_interval_turns` (before a late join, say). Refused when sync checks are off.
    pub fn request_snapshot(&self) -> Result<(), SessionError> {
        self.control.ask(Command::RequestSnapshot)?.map_err(SessionError::Snapshot)
    }

    /// The host's counters and every connected player's.
    pub fn stats(&self) -> Result<(HostStats, Vec<(PlayerId, PeerStats)>), SessionError> {
        self.control.ask(Command::Stats)
    }
}
