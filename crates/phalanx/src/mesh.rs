//! Peer-to-peer matches over raw UDP, built with the `udp` cargo feature: no host, every
//! peer sends its commands straight to every other ([`phalanx_proto::mesh`]), each pair over
//! its own Noise channel ([`phalanx_udp::mesh`]) keyed by the match's roster.
//!
//! The roster — every player's number, static public key and addresses — comes from the
//! game's lobby or a rendezvous; each peer keeps its own [`HostKey`] secret. A
//! [`MeshSession`] opens a link to every other member (the lower player initiates, the higher
//! punches a hole through its NAT meanwhile), and once every link is open the match starts:
//! turn 0 is due `start_delay_ms` later. From then on it is polled like a [`Session`]:
//! [`try_next_turn`](MeshSession::try_next_turn), [`submit`](MeshSession::submit),
//! [`try_event`](MeshSession::try_event).
//!
//! ```no_run
//! # fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use phalanx::mesh::{MeshMember, MeshOptions, MeshSession};
//! use phalanx::udp::HostKey;
//! use phalanx::proto::PlayerId;
//!
//! #[derive(serde::Serialize, serde::Deserialize)]
//! struct Order(u32);
//!
//! // From the lobby: every member's key and address; our own secret key.
//! # let (my_key, roster): (HostKey, Vec<MeshMember>) = todo!();
//! let options = MeshOptions::new(PlayerId(0), my_key, roster, 0x5eed, "0.0.0.0:7777".parse()?);
//! let mut session: MeshSession<Order> = MeshSession::start(options, None)?;
//! loop {
//!     while let Some(turn) = session.try_next_turn() {
//!         // Execute `turn` in the deterministic simulation.
//!         # let _ = turn;
//!     }
//!     while let Some(event) = session.try_event() {
//!         # let _ = event;
//!     }
//!     if session.is_over() {
//!         break;
//!     }
//!     session.submit(&Order(1))?;
//!     # break;
//! }
//! # Ok(()) }
//! ```
//!
//! [`Session`]: crate::Session

use std::marker::PhantomData;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use phalanx_proto::mesh::{Peer, PeerConfig, PeerEnd, PeerEvent, PeerStats};
use phalanx_proto::{CommandCodec, DefaultCodec, PlayerId, SessionConfig, Ticket, Turn, TypedTurn};
use phalanx_udp::mesh::{LinkInfo, Links, Member};
use phalanx_udp::{HostKey, HostPublicKey, KIND_DATAGRAM};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::error::SessionError;
use crate::session::Runtime;
use crate::udp::{bind_socket, DatagramSocket};

/// One member of a match, as the lobby or rendezvous hands it out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MeshMember {
    /// Its player.
    pub player: PlayerId,
    /// Its static public key (its [`HostKey::public`]).
    pub key: HostPublicKey,
    /// Where it may be reached: its own address, the one its NAT showed the rendezvous...
    pub addrs: Vec<SocketAddr>,
}

/// What a [`MeshSession`] needs.
#[derive(Clone)]
#[non_exhaustive]
pub struct MeshOptions {
    /// The session config every member must share.
    pub session: SessionConfig,
    /// The mesh settings (the lead, the modem's batching); every member should share them.
    pub peer: PeerConfig,
    /// Our player.
    pub me: PlayerId,
    /// Our static key: the roster lists its public half for us.
    pub identity: HostKey,
    /// Every member of the match, us included.
    pub roster: Vec<MeshMember>,
    /// The match's id (the lobby's): links of another match are refused.
    pub match_id: u64,
    /// Where to bind the socket.
    pub bind: SocketAddr,
    /// The socket: `None` (the default) binds a real UDP socket on `bind`; phalanx-sim passes
    /// a simulated one.
    pub socket: Option<Arc<dyn DatagramSocket>>,
    /// Seeds the links' randomness, so a simulation's seed reproduces a run. Default: `None`
    /// (OS randomness).
    pub seed: Option<[u8; 32]>,
    /// Once every link is open, turn 0 is due this much later (ms). Default: 300.
    pub start_delay_ms: u32,
    /// Links still not open after this long fail the start (ms). Default: 10,000.
    pub connect_timeout_ms: u32,
    /// A rendezvous ([`RendezvousServer`], or any speaking `phalanx_udp::mesh`'s rendezvous
    /// packets): the members learn each other's outside addresses from it (the roster's may
    /// then be empty), and a pair that cannot punch through its NATs talks through it.
    /// Default: `None` (the roster's addresses only, no relay).
    pub rendezvous: Option<SocketAddr>,
}

impl MeshOptions {
    /// The options for player `me` with key `identity`, of match `match_id` among `roster`,
    /// bound to `bind`, with the default configs.
    pub fn new(
        me: PlayerId,
        identity: HostKey,
        roster: Vec<MeshMember>,
        match_id: u64,
        bind: SocketAddr,
    ) -> MeshOptions {
        MeshOptions {
            session: SessionConfig::default(),
            peer: PeerConfig::default(),
            me,
            identity,
            roster,
            match_id,
            bind,
            socket: None,
            seed: None,
            start_delay_ms: 300,
            connect_timeout_ms: 10_000,
            rendezvous: None,
        }
    }
}

/// Why a [`MeshSession`] did not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum MeshError {
    /// The socket or the runtime could not be set up.
    Io(std::io::Error),
    /// The options are invalid: the peer says why.
    Peer(phalanx_proto::mesh::PeerError),
}

impl std::fmt::Display for MeshError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MeshError::Io(error) => write!(f, "mesh socket: {error}"),
            MeshError::Peer(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for MeshError {}

/// How a mesh session ended, when it did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MeshEnd {
    /// The match ended (or we left, or lost the majority): the peer's reason.
    Peer(PeerEnd),
    /// Some links did not open within `connect_timeout_ms`: the match never started. The
    /// players are those we could not reach.
    Unreachable,
}

/// What the driver and the game share.
struct Core {
    links: Links,
    /// `None` until every link is open.
    peer: Option<Peer>,
    pending_peer: Option<(SessionConfig, PeerConfig, Vec<PlayerId>)>,
    me: PlayerId,
    origin: Instant,
    connect_deadline_ms: u64,
    start_delay_ms: u64,
    unreachable: bool,
    buf: Vec<u8>,
    framed: Vec<u8>,
}

impl Core {
    fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }

    /// Starts the peer once every link is open, or gives up at the deadline.
    fn start_if_ready(&mut self, now_ms: u64) {
        if self.peer.is_some() || self.unreachable {
            return;
        }
        let all_open = self.links.links().iter().all(|link| link.addr.is_some());
        if all_open {
            if let Some((session, peer, roster)) = self.pending_peer.take() {
                let start = now_ms + self.start_delay_ms;
                self.peer = Peer::new(session, peer, &roster, self.me, start).ok();
            }
        } else if now_ms >= self.connect_deadline_ms {
            self.unreachable = true;
        }
    }

    fn on_packet(&mut self, now_ms: u64, from: SocketAddr, packet: &[u8]) {
        let Some((player, payload)) = self.links.handle(now_ms, from, packet) else { return };
        if let (Some(peer), Some((&KIND_DATAGRAM, datagram))) =
            (self.peer.as_mut(), payload.split_first())
        {
            peer.handle_datagram(now_ms, PlayerId(player), datagram);
        }
    }

    fn on_time(&mut self, now_ms: u64) {
        self.links.handle_timeout(now_ms);
        self.start_if_ready(now_ms);
        if let Some(peer) = self.peer.as_mut() {
            peer.handle_timeout(now_ms);
        }
    }

    /// Sends everything the peer and the links have to send.
    fn flush(&mut self, now_ms: u64, socket: &dyn DatagramSocket) {
        if let Some(peer) = self.peer.as_mut() {
            while let Some(to) = peer.poll_transmit(now_ms, &mut self.buf) {
                self.framed.clear();
                self.framed.push(KIND_DATAGRAM);
                self.framed.extend_from_slice(&self.buf);
                let _ = self.links.send(to.0, &self.framed);
            }
        }
        while let Some((to, packet)) = self.links.poll_transmit() {
            // A full socket buffer drops the packet, as a congested network would.
            let _ = socket.try_send_to(&packet, to);
        }
    }

    fn deadline_ms(&self) -> Option<u64> {
        let links = if self.peer.is_none() && !self.unreachable {
            [self.links.poll_timeout(), Some(self.connect_deadline_ms)].into_iter().flatten().min()
        } else {
            None
        };
        let peer = self.peer.as_ref().and_then(Peer::poll_timeout);
        links.into_iter().chain(peer).min()
    }

    fn is_done(&self, now_ms: u64) -> bool {
        self.unreachable || self.peer.as_ref().is_some_and(|peer| peer.is_closed(now_ms))
    }
}

/// A peer-to-peer match, polled from a frame loop. See the [module docs](self).
pub struct MeshSession<C, K: CommandCodec = DefaultCodec> {
    core: Arc<Mutex<Core>>,
    notify: Arc<Notify>,
    task: Option<tokio::task::JoinHandle<()>>,
    // Dropped after the task is aborted.
    _runtime: Runtime,
    over: bool,
    _types: PhantomData<fn() -> (C, K)>,
}

impl<C, K> MeshSession<C, K>
where
    C: Serialize + DeserializeOwned + Send + 'static,
    K: CommandCodec,
{
    /// Binds the socket and starts opening the links, on `runtime` (the game's tokio
    /// runtime) or, with `None`, on one the session starts for itself.
    pub fn start(
        options: MeshOptions,
        runtime: Option<tokio::runtime::Handle>,
    ) -> Result<MeshSession<C, K>, MeshError> {
        let roster: Vec<PlayerId> = options.roster.iter().map(|m| m.player).collect();
        // Validate now: a bad config or roster fails here, not when the links are open.
        Peer::new(options.session.clone(), options.peer.clone(), &roster, options.me, 0)
            .map_err(MeshError::Peer)?;
        let runtime = Runtime::new(runtime).map_err(MeshError::Io)?;
        let handle = runtime.handle().clone();
        let socket = match options.socket.clone() {
            Some(socket) => socket,
            None => {
                let _guard = handle.enter();
                bind_socket(options.bind).map_err(MeshError::Io)?
            }
        };
        let random = options.seed.unwrap_or_else(crate::random_bytes::<32>);
        let members = options
            .roster
            .iter()
            .map(|m| Member { player: m.player.0, key: m.key, addrs: m.addrs.clone() })
            .collect();
        let mut links =
            Links::new(options.me.0, options.identity.clone(), members, options.match_id, random);
        if let Some(rendezvous) = options.rendezvous {
            links = links.with_rendezvous(rendezvous);
        }
        let core = Arc::new(Mutex::new(Core {
            links,
            peer: None,
            pending_peer: Some((options.session, options.peer, roster)),
            me: options.me,
            origin: Instant::now(),
            connect_deadline_ms: u64::from(options.connect_timeout_ms),
            start_delay_ms: u64::from(options.start_delay_ms),
            unreachable: false,
            buf: Vec::new(),
            framed: Vec::new(),
        }));
        let notify = Arc::new(Notify::new());
        let task = handle.spawn(drive(core.clone(), socket, notify.clone()));
        Ok(MeshSession {
            core,
            notify,
            task: Some(task),
            _runtime: runtime,
            over: false,
            _types: PhantomData,
        })
    }

    fn core(&self) -> MutexGuard<'_, Core> {
        self.core.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Submits a command for our player: it goes into our first turn not final yet (the
    /// ticket names it) and leaves at once.
    pub fn submit(&self, command: &C) -> Result<Ticket, SessionError> {
        let payload = K::encode(command).map_err(SessionError::Codec)?;
        let mut core = self.core();
        let now = core.now_ms();
        let peer = core
            .peer
            .as_mut()
            .ok_or(SessionError::Submit(phalanx_proto::SubmitError::NotRunning))?;
        let ticket = peer.submit(now, &payload).map_err(SessionError::Submit)?;
        drop(core);
        self.notify.notify_one();
        Ok(ticket)
    }

    /// The next turn if it is due, without waiting; each turn once, in order.
    pub fn try_next_turn(&mut self) -> Option<TypedTurn<C>> {
        let mut core = self.core();
        let now = core.now_ms();
        let bundle = core.peer.as_mut().and_then(|peer| peer.next_turn(now));
        let over =
            core.unreachable || core.peer.as_ref().is_some_and(|peer| peer.ended().is_some());
        drop(core);
        match bundle {
            Some(bundle) => {
                self.notify.notify_one();
                Some(TypedTurn::decode::<K>(bundle))
            }
            None => {
                self.over |= over;
                None
            }
        }
    }

    /// Whether the match is over and every turn was taken.
    pub fn is_over(&self) -> bool {
        self.over
    }

    /// Whether every link is open and the match has started.
    pub fn is_started(&self) -> bool {
        self.core().peer.is_some()
    }

    /// How the match ended for us (`None` while it runs).
    pub fn ended(&self) -> Option<MeshEnd> {
        let core = self.core();
        if core.unreachable {
            return Some(MeshEnd::Unreachable);
        }
        core.peer.as_ref().and_then(Peer::ended).map(MeshEnd::Peer)
    }

    /// The next event, if one is waiting.
    pub fn try_event(&mut self) -> Option<PeerEvent> {
        self.core().peer.as_mut().and_then(Peer::poll_event)
    }

    /// Reports the game's state hash after executing `turn` (only check turns are kept).
    pub fn report_state_hash(&self, turn: Turn, hash: u64) {
        if let Some(peer) = self.core().peer.as_mut() {
            peer.report_state_hash(turn, hash);
        }
    }

    /// The master ends the match for everyone with the game's `code`.
    pub fn end(&self, code: u32) -> Result<Turn, phalanx_proto::mesh::EndError> {
        let mut core = self.core();
        let peer = core.peer.as_mut().ok_or(phalanx_proto::mesh::EndError::NotRunning)?;
        let turn = peer.end(code)?;
        drop(core);
        self.notify.notify_one();
        Ok(turn)
    }

    /// Leaves the match: the others go on without us after our last turn.
    pub fn leave(&self) {
        let mut core = self.core();
        let now = core.now_ms();
        if let Some(peer) = core.peer.as_mut() {
            peer.leave(now);
        }
        drop(core);
        self.notify.notify_one();
    }

    /// The peer's counters (`None` before the match started).
    pub fn stats(&self) -> Option<PeerStats> {
        self.core().peer.as_ref().map(Peer::stats)
    }

    /// Every link: the address it is bound to, whether confirmed.
    pub fn links(&self) -> Vec<LinkInfo> {
        self.core().links.links()
    }

    /// The master as we see it.
    pub fn master(&self) -> Option<PlayerId> {
        self.core().peer.as_ref().map(Peer::master)
    }
}

impl<C, K: CommandCodec> Drop for MeshSession<C, K> {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The driver: the socket, the links and the peer, in one task.
async fn drive(core: Arc<Mutex<Core>>, socket: Arc<dyn DatagramSocket>, notify: Arc<Notify>) {
    let mut buf = vec![0u8; 2048];
    let origin = core.lock().map(|core| core.origin).unwrap_or_else(|p| p.into_inner().origin);
    loop {
        let deadline = {
            let mut core = core.lock().unwrap_or_else(|p| p.into_inner());
            let now = core.now_ms();
            core.on_time(now);
            core.flush(now, &*socket);
            if core.is_done(now) {
                return;
            }
            core.deadline_ms()
        };
        let sleep = async {
            match deadline {
                Some(at) => {
                    tokio::time::sleep_until(origin + std::time::Duration::from_millis(at)).await
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            received = std::future::poll_fn(|cx| socket.poll_recv_from(cx, &mut buf)) => {
                if let Ok((len, from)) = received {
                    let mut core = core.lock().unwrap_or_else(|p| p.into_inner());
                    let now = core.now_ms();
                    core.on_packet(now, from, &buf[..len]);
                }
            }
            () = notify.notified() => {}
            () = sleep => {}
        }
    }
}

/// A rendezvous for peer-to-peer matches on a UDP socket: members learn each other's outside
/// addresses from it, and pairs that cannot punch through their NATs talk through it (see
/// `phalanx_udp::mesh::Rendezvous`). Any number of matches; it stops when dropped.
pub struct RendezvousServer {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl RendezvousServer {
    /// Binds `bind` and serves, on the running tokio runtime.
    pub fn bind(bind: SocketAddr) -> std::io::Result<RendezvousServer> {
        RendezvousServer::on(bind_socket(bind)?)
    }

    /// Serves on `socket` (a simulator's, say), on the running tokio runtime.
    pub fn on(socket: Arc<dyn DatagramSocket>) -> std::io::Result<RendezvousServer> {
        let addr = socket.local_addr()?;
        let task = tokio::spawn(async move {
            let mut server = phalanx_udp::mesh::Rendezvous::new();
            let origin = Instant::now();
            let mut buf = vec![0u8; 2048];
            loop {
                let received = std::future::poll_fn(|cx| socket.poll_recv_from(cx, &mut buf)).await;
                let Ok((len, from)) = received else { continue };
                let now = origin.elapsed().as_millis() as u64;
                if let Some((to, packet)) = server.handle(now, from, &buf[..len]) {
                    let _ = socket.try_send_to(&packet, to);
                }
            }
        });
        Ok(RendezvousServer { addr, task })
    }

    /// The address it serves on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for RendezvousServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
