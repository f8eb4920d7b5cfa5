//! quinn's socket trait over turmoil's simulated UDP, with a seeded fault layer.
//!
//! turmoil delivers datagrams on simulated time but has no independent per-packet loss,
//! duplication or reordering of its own (its `fail_rate` flaps whole links); those live here,
//! applied on send, every draw from the scenario's seed. quinn is told the path may fragment,
//! so it stays at 1200-byte packets (turmoil has no MTU); an MTU cap here drops larger ones.

use std::fmt;
use std::future::Future;
use std::io::{self, IoSliceMut};
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, UdpPoller};

use phalanx_testkit::BurstState;

use crate::nat::{envelope, open_envelope, NatWorld, ENVELOPE_MAX};
use crate::trace::Trace;
use crate::{LinkFaults, Rng};

type Readable = Pin<Box<dyn Future<Output = io::Result<()>> + Send>>;

/// A simulated UDP socket for quinn, with faults on the way out.
pub struct SimSocket {
    socket: Arc<turmoil::net::UdpSocket>,
    local: SocketAddr,
    /// The node's own address (the socket may be bound to the unspecified address).
    node: SocketAddr,
    /// turmoil's `readable()` holds the socket's receive lock while it waits: the future must
    /// be kept across polls, not recreated.
    readable: Mutex<Option<Readable>>,
    faults: Mutex<FaultState>,
    trace: Arc<Mutex<Trace>>,
    /// Set when the process that owns the socket dies: nothing leaves it any more (not even
    /// a transport's closing packet) and nothing reaches it.
    dead: AtomicBool,
    /// The run's NATs, when it has any: every datagram goes through them, in an envelope.
    nats: OnceLock<Arc<Mutex<NatWorld>>>,
}

struct FaultState {
    rng: Rng,
    faults: LinkFaults,
    burst: BurstState,
    /// Extra independent loss (‰) on the way to these addresses (the spectators' links).
    lossy: Vec<(IpAddr, u32)>,
}

impl fmt::Debug for SimSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimSocket").field("local", &self.local).finish_non_exhaustive()
    }
}

impl SimSocket {
    /// Binds a simulated socket (inside a turmoil host) with the given outbound faults.
    pub(crate) async fn bind(
        node: &str,
        addr: SocketAddr,
        faults: LinkFaults,
        seed: u64,
        trace: Arc<Mutex<Trace>>,
    ) -> io::Result<Arc<SimSocket>> {
        let socket = turmoil::net::UdpSocket::bind(addr).await?;
        let local = socket.local_addr()?;
        let node = SocketAddr::new(turmoil::lookup(node), local.port());
        Ok(Arc::new(SimSocket {
            socket: Arc::new(socket),
            local,
            node,
            readable: Mutex::new(None),
            faults: Mutex::new(FaultState {
                rng: Rng::new(seed),
                faults,
                burst: BurstState::default(),
                lossy: Vec::new(),
            }),
            trace,
            dead: AtomicBool::new(false),
            nats: OnceLock::new(),
        }))
    }

    /// Routes everything this socket sends and receives through the run's NATs (see
    /// `nat.rs`); every socket of the run must.
    pub(crate) fn through(&self, nats: Arc<Mutex<NatWorld>>) {
        let _ = self.nats.set(nats);
    }

    /// Where a datagram to `to` goes, and, in a run with NATs, the source its envelope
    /// names; `None` when a NAT drops it.
    fn route(&self, to: SocketAddr) -> Option<(SocketAddr, Option<SocketAddr>)> {
        let Some(nats) = self.nats.get() else { return Some((to, None)) };
        let now = turmoil::elapsed().as_millis() as u64;
        let (destination, source) = nats.lock().expect("not poisoned").route(now, self.node, to)?;
        Some((destination, Some(source)))
    }

    /// The owning process dies: from now on the socket sends nothing and drops what arrives,
    /// so a crash is silent on every transport (a QUIC connection dropped with its endpoint
    /// would otherwise send a close the host takes for a goodbye).
    pub(crate) fn kill(&self) {
        self.dead.store(true, Ordering::Relaxed);
    }

    fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Relaxed)
    }

    /// Loses `permille` ‰ more of what this socket sends to `to`, independently.
    pub(crate) fn add_loss_to(&self, to: IpAddr, permille: u32) {
        self.faults.lock().expect("not poisoned").lossy.push((to, permille));
    }

    /// Decides the fate of one outgoing datagram: how many copies, each after what delay, and
    /// whether to flip a byte (at which index).
    fn plan(&self, len: usize, to: IpAddr) -> (Vec<Duration>, Option<usize>) {
        let mut state = self.faults.lock().expect("not poisoned");
        let FaultState { rng, faults, burst: chain, lossy } = &mut *state;
        if let Some(&(_, permille)) = lossy.iter().find(|(ip, _)| *ip == to) {
            if rng.chance(permille) {
                return (Vec::new(), None);
            }
        }
        let latency = faults.latency_ms;
        if !faults.active_at(turmoil::elapsed().as_millis() as u64) {
            return (vec![Duration::from_millis(latency)], None);
        }
        if faults.over_mtu(len) {
            return (Vec::new(), None);
        }
        let mut lost = rng.chance(faults.loss_permille);
        if let Some(burst) = faults.burst {
            lost |= chain.lose(&burst, rng);
        }
        if lost {
            return (Vec::new(), None);
        }
        let mut delays = vec![Duration::from_millis(latency + rng.below(faults.jitter_ms + 1))];
        if rng.chance(faults.duplicate_permille) {
            let replay = rng.below(faults.replay_delay_ms + 1);
            delays.push(Duration::from_millis(latency + rng.below(faults.jitter_ms + 50) + replay));
        }
        let corrupt = rng.chance(faults.corrupt_permille).then(|| rng.below(len as u64) as usize);
        (delays, corrupt)
    }
}

impl AsyncUdpSocket for SimSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        // turmoil has no back-pressure: the socket is always writable.
        Box::pin(AlwaysWritable)
    }

    fn try_send(&self, transmit: &Transmit<'_>) -> io::Result<()> {
        if self.is_dead() {
            return Ok(());
        }
        let len = transmit.contents.len();
        let Some((destination, source)) = self.route(transmit.destination) else {
            // A NAT dropped it: lost on the way, as the trace sees it.
            let mut trace = self.trace.lock().expect("not poisoned");
            trace.record(self.node, transmit.destination, len, 0);
            return Ok(());
        };
        let (copies, corrupt) = self.plan(len, destination.ip());
        self.trace.lock().expect("not poisoned").record(self.node, destination, len, copies.len());
        let mut contents = std::borrow::Cow::Borrowed(transmit.contents);
        let mut front = 0;
        if let Some(source) = source {
            let mut bytes = Vec::with_capacity(ENVELOPE_MAX + len);
            envelope(source, &mut bytes);
            front = bytes.len();
            bytes.extend_from_slice(transmit.contents);
            contents = std::borrow::Cow::Owned(bytes);
        }
        if let Some(index) = corrupt {
            // The payload only: the envelope stands for the IP header, which a checksum guards.
            contents.to_mut()[front + index] ^= 0x20;
        }
        for delay in copies {
            if delay.is_zero() {
                // A send error is loss, as on a real network.
                let _ = self.socket.try_send_to(&contents, destination);
            } else {
                let socket = self.socket.clone();
                let bytes = contents.to_vec();
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let _ = socket.try_send_to(&bytes, destination);
                });
            }
        }
        Ok(())
    }

    fn poll_recv(
        &self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        let (Some(buf), Some(slot)) = (bufs.first_mut(), meta.first_mut()) else {
            return Poll::Ready(Ok(0));
        };
        loop {
            match self.socket.try_recv_from(buf) {
                Ok(_) if self.is_dead() => {}
                Ok((len, addr)) => {
                    let (addr, len) = match self.nats.get() {
                        None => (addr, len),
                        Some(_) => {
                            let Some((source, front)) = open_envelope(&buf[..len]) else {
                                continue;
                            };
                            buf.copy_within(front..len, 0);
                            (source, len - front)
                        }
                    };
                    *slot = RecvMeta { addr, len, stride: len, ecn: None, dst_ip: None };
                    return Poll::Ready(Ok(1));
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    let mut readable = self.readable.lock().expect("not poisoned");
                    let future = readable.get_or_insert_with(|| {
                        let socket = self.socket.clone();
                        Box::pin(async move { socket.readable().await })
                    });
                    match future.as_mut().poll(cx) {
                        Poll::Ready(_) => *readable = None,
                        Poll::Pending => return Poll::Pending,
                    }
                }
                Err(error) => return Poll::Ready(Err(error)),
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }

    fn may_fragment(&self) -> bool {
        true
    }
}

#[derive(Debug)]
struct AlwaysWritable;

impl UdpPoller for AlwaysWritable {
    fn poll_writable(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
