//! The relay process: one thread per worker, each with its own socket, its own [`Shard`] and a
//! current-thread tokio runtime; a [`RelayHandle`] talks to them through bounded queues. The
//! datagram path takes no lock: a worker alone owns its shard and its socket.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use phalanx_proto::{JoinCode, PlayerId, Readmit};
use phalanx_udp::{HostKey, HostPublicKey, MAX_PACKET};
use tokio::sync::{mpsc, oneshot};

use crate::api::{CreateError, MatchError, MatchId, MatchInfo, MatchSpec, MatchTicket, SeatTicket};
use crate::config::RelayConfig;
use crate::metrics::Metrics;
use crate::shard::{Outbox, Shard};

/// Operator requests queued for a worker at most.
const COMMANDS_MAX: usize = 256;
/// Datagrams a worker reads in a row before it looks at its timers again.
const BATCH_MAX: usize = 256;
/// Socket buffers asked of the kernel (it may give less: `net.core.rmem_max`).
const SOCKET_BUFFER_BYTES: usize = 8 << 20;

/// Why a relay did not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum RelayError {
    /// A worker's socket could not be bound.
    Bind(SocketAddr, std::io::Error),
    /// The key file could not be read or written, or does not hold a key.
    KeyFile(std::path::PathBuf, String),
    /// A worker thread could not be started.
    Spawn(std::io::Error),
    /// The configuration is not usable (no workers, say).
    Config(String),
}

impl std::fmt::Display for RelayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RelayError::Bind(addr, error) => write!(f, "cannot bind UDP {addr}: {error}"),
            RelayError::KeyFile(path, why) => write!(f, "key file {}: {why}", path.display()),
            RelayError::Spawn(error) => write!(f, "cannot start a worker thread: {error}"),
            RelayError::Config(why) => write!(f, "configuration: {why}"),
        }
    }
}

impl std::error::Error for RelayError {}

type Reply<T> = oneshot::Sender<T>;

enum Command {
    Create(MatchId, Box<MatchSpec>, Vec<u64>, Reply<Result<(), CreateError>>),
    List(Reply<Vec<MatchInfo>>),
    Inspect(MatchId, Reply<Result<MatchInfo, MatchError>>),
    Start(MatchId, Reply<Result<(), MatchError>>),
    End(MatchId, u32, Reply<Result<(), MatchError>>),
    Kick(MatchId, PlayerId, Readmit, Reply<Result<(), MatchError>>),
    Metrics(Reply<Metrics>),
    Drain(Instant),
}

struct Worker {
    commands: mpsc::Sender<Command>,
    address: SocketAddr,
}

/// A running relay. Dropping it does not stop it: [`RelayHandle::drain`] does, and
/// [`Relay::wait`] waits for that.
#[derive(Debug)]
pub struct Relay {
    handle: RelayHandle,
    threads: Vec<std::thread::JoinHandle<()>>,
}

/// Talks to a running relay: cheap to clone, usable from any task.
#[derive(Clone)]
pub struct RelayHandle {
    workers: Arc<[Worker]>,
    public: HostPublicKey,
    next: Arc<AtomicUsize>,
    draining: Arc<AtomicBool>,
    stopped: Arc<AtomicUsize>,
}

impl std::fmt::Debug for RelayHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let addresses: Vec<SocketAddr> = self.workers.iter().map(|w| w.address).collect();
        f.debug_struct("RelayHandle").field("addresses", &addresses).finish_non_exhaustive()
    }
}

fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
        .expect("OS randomness is available");
    bytes
}

fn random_u64() -> u64 {
    u64::from_le_bytes(random_bytes())
}

/// The relay's static key: from the key file (made there if it does not exist), or fresh.
fn load_key(config: &RelayConfig) -> Result<HostKey, RelayError> {
    let Some(path) = &config.key_file else { return Ok(HostKey::from_bytes(random_bytes())) };
    let error = |why: String| RelayError::KeyFile(path.clone(), why);
    match std::fs::read_to_string(path) {
        Ok(text) => HostKey::from_hex(&text).map_err(|_| error("expected 64 hex digits".into())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let key = HostKey::from_bytes(random_bytes());
            std::fs::write(path, key.to_hex() + "\n").map_err(|e| error(e.to_string()))?;
            Ok(key)
        }
        Err(e) => Err(error(e.to_string())),
    }
}

fn bind(addr: SocketAddr) -> std::io::Result<std::net::UdpSocket> {
    let domain = socket2::Domain::for_address(addr);
    let socket = socket2::Socket::new(domain, socket2::Type::DGRAM, Some(socket2::Protocol::UDP))?;
    // Best effort: the kernel caps these at its own maximum.
    let _ = socket.set_recv_buffer_size(SOCKET_BUFFER_BYTES);
    let _ = socket.set_send_buffer_size(SOCKET_BUFFER_BYTES);
    socket.bind(&addr.into())?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

impl Relay {
    /// Binds every worker's socket and starts the workers. The admin API is separate
    /// (`admin::router`, with the `server` feature).
    pub fn start(config: RelayConfig) -> Result<Relay, RelayError> {
        if config.workers == 0 || config.workers > 256 {
            return Err(RelayError::Config(format!("{} workers: 1 to 256", config.workers)));
        }
        let key = load_key(&config)?;
        let public = key.public();
        let mut workers = Vec::new();
        let mut threads = Vec::new();
        let stopped = Arc::new(AtomicUsize::new(0));
        for index in 0..config.workers {
            let mut addr = config.udp;
            if addr.port() != 0 {
                addr.set_port(addr.port() + index as u16);
            }
            let socket = bind(addr).map_err(|e| RelayError::Bind(addr, e))?;
            let address = socket.local_addr().map_err(|e| RelayError::Bind(addr, e))?;
            let (tx, rx) = mpsc::channel(COMMANDS_MAX);
            let shard_key = HostKey::from_bytes(key.to_bytes());
            let limits = config.limits;
            let rule = config.command_rule.clone();
            let stopped = stopped.clone();
            let thread = std::thread::Builder::new()
                .name(format!("relay-worker-{index}"))
                .spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .expect("a current-thread runtime starts");
                    let epoch = Instant::now();
                    let mut shard = Shard::new(shard_key, random_bytes(), limits, 0);
                    if let Some(rule) = rule {
                        shard.set_command_rule(rule);
                    }
                    runtime.block_on(run(shard, socket, rx, epoch, limits.end_grace_ms));
                    stopped.fetch_add(1, Ordering::SeqCst);
                })
                .map_err(RelayError::Spawn)?;
            tracing::info!(worker = index, %address, "relay worker listening (raw UDP + Noise)");
            workers.push(Worker { commands: tx, address });
            threads.push(thread);
        }
        let handle = RelayHandle {
            workers: workers.into(),
            public,
            next: Arc::new(AtomicUsize::new(0)),
            draining: Arc::new(AtomicBool::new(false)),
            stopped,
        };
        Ok(Relay { handle, threads })
    }

    /// A handle to talk to the relay.
    pub fn handle(&self) -> RelayHandle {
        self.handle.clone()
    }

    /// Blocks until every worker has stopped (after a [drain](RelayHandle::drain)).
    pub fn wait(self) {
        for thread in self.threads {
            let _ = thread.join();
        }
    }
}

impl RelayHandle {
    /// The relay's key as clients pin it: `udp:<hex>` (`phalanx::Pin` parses it).
    pub fn pin(&self) -> String {
        format!("udp:{}", self.public)
    }

    /// The relay's static public key.
    pub fn public_key(&self) -> HostPublicKey {
        self.public
    }

    /// Each worker's UDP address, in worker order.
    pub fn addresses(&self) -> Vec<SocketAddr> {
        self.workers.iter().map(|w| w.address).collect()
    }

    /// Whether the relay is draining (it takes no new match).
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Whether every worker has stopped.
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst) == self.workers.len()
    }

    fn worker_of(&self, id: MatchId) -> &Worker {
        &self.workers[(id.0 % self.workers.len() as u64) as usize]
    }

    async fn ask<T>(&self, worker: &Worker, make: impl FnOnce(Reply<T>) -> Command) -> Option<T> {
        let (tx, rx) = oneshot::channel();
        worker.commands.send(make(tx)).await.ok()?;
        rx.await.ok()
    }

    /// Creates a match on the next worker in turn, with random tokens unless the spec gives
    /// them; the ticket says where and how to join it.
    pub async fn create_match(&self, spec: MatchSpec) -> Result<MatchTicket, CreateError> {
        if self.is_draining() {
            return Err(CreateError::Draining);
        }
        let count = self.workers.len() as u64;
        let index = self.next.fetch_add(1, Ordering::Relaxed) as u64 % count;
        let id = MatchId(random_u64() / count * count + index);
        let mut tokens = match &spec.tokens {
            Some(tokens) => tokens.clone(),
            None => (0..spec.players).map(|_| random_u64()).collect(),
        };
        tokens.extend((0..spec.spectators).map(|_| random_u64()));
        let mut unique = tokens.clone();
        unique.sort_unstable();
        unique.dedup();
        if unique.len() != tokens.len() {
            return Err(CreateError::Tokens("a token is repeated".into()));
        }
        let worker = &self.workers[index as usize];
        let asked = tokens.clone();
        let result =
            self.ask(worker, |reply| Command::Create(id, Box::new(spec.clone()), asked, reply));
        result.await.ok_or(CreateError::Draining)??;
        let ticket = |(player, &token): (usize, &u64)| SeatTicket {
            player: player as u8,
            token,
            code: JoinCode(token),
        };
        let players = usize::from(spec.players);
        Ok(MatchTicket {
            id,
            address: worker.address,
            pin: self.pin(),
            seats: tokens[..players].iter().enumerate().map(ticket).collect(),
            spectators: tokens[players..].iter().enumerate().map(ticket).collect(),
        })
    }

    /// Every match, worker by worker.
    pub async fn list(&self) -> Vec<MatchInfo> {
        let mut all = Vec::new();
        for worker in self.workers.iter() {
            all.extend(self.ask(worker, Command::List).await.unwrap_or_default());
        }
        all
    }

    /// One match.
    pub async fn inspect(&self, id: MatchId) -> Result<MatchInfo, MatchError> {
        let worker = self.worker_of(id);
        self.ask(worker, |reply| Command::Inspect(id, reply)).await.ok_or(MatchError::Stopped)?
    }

    /// Starts a match (one whose start policy is manual, or before it is full).
    pub async fn start_match(&self, id: MatchId) -> Result<(), MatchError> {
        let worker = self.worker_of(id);
        self.ask(worker, |reply| Command::Start(id, reply)).await.ok_or(MatchError::Stopped)?
    }

    /// Ends a match with the game's `code` (a match not started is closed at once).
    pub async fn end_match(&self, id: MatchId, code: u32) -> Result<(), MatchError> {
        let worker = self.worker_of(id);
        self.ask(worker, |reply| Command::End(id, code, reply)).await.ok_or(MatchError::Stopped)?
    }

    /// Removes a player; with [`Readmit::Never`] their token is revoked.
    pub async fn kick(
        &self,
        id: MatchId,
        player: PlayerId,
        readmit: Readmit,
    ) -> Result<(), MatchError> {
        let worker = self.worker_of(id);
        let ask = self.ask(worker, |reply| Command::Kick(id, player, readmit, reply));
        ask.await.ok_or(MatchError::Stopped)?
    }

    /// Every worker's counters, summed.
    pub async fn metrics(&self) -> Metrics {
        let mut all = Metrics::default();
        for worker in self.workers.iter() {
            if let Some(metrics) = self.ask(worker, Command::Metrics).await {
                all.merge(&metrics);
            }
        }
        all
    }

    /// Drains the relay: no new match from now on; running matches play on for `timeout`,
    /// then end with [`END_DRAIN`](crate::END_DRAIN); each worker stops once it holds no
    /// match (and at the latest its `end_grace_ms` after the deadline).
    pub async fn drain(&self, timeout: Duration) {
        self.draining.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + timeout;
        for worker in self.workers.iter() {
            let _ = worker.commands.send(Command::Drain(deadline)).await;
        }
    }
}

/// Sends on the worker's socket, straight to the kernel (non-blocking).
struct SocketOut<'a>(&'a tokio::net::UdpSocket);

impl Outbox for SocketOut<'_> {
    fn send(&mut self, to: SocketAddr, packet: &[u8]) -> bool {
        socket2::SockRef::from(self.0).send_to(packet, &to.into()).is_ok()
    }
}

fn millis(epoch: Instant) -> u64 {
    epoch.elapsed().as_millis() as u64
}

/// A drain in progress: when running matches end, and when the worker stops regardless.
struct Drain {
    end_at: Instant,
    ended: bool,
    stop_at: Instant,
}

/// A worker: datagrams, timers and operator commands, until a drain has emptied it.
async fn run(
    mut shard: Shard,
    socket: std::net::UdpSocket,
    mut commands: mpsc::Receiver<Command>,
    epoch: Instant,
    end_grace_ms: u64,
) {
    let socket = tokio::net::UdpSocket::from_std(socket).expect("inside the worker's runtime");
    let mut buf = vec![0u8; MAX_PACKET + 1];
    let mut drain: Option<Drain> = None;
    let sleep = tokio::time::sleep(Duration::from_secs(3_600));
    tokio::pin!(sleep);
    loop {
        let now = millis(epoch);
        shard.handle_timeout(now, &mut SocketOut(&socket));
        if let Some(state) = &mut drain {
            let instant = Instant::now();
            if !state.ended && instant >= state.end_at {
                state.ended = true;
                state.stop_at = instant + Duration::from_millis(end_grace_ms);
                shard.end_all(now, crate::END_DRAIN, &mut SocketOut(&socket));
            }
            if shard.matches() == 0 || (state.ended && instant >= state.stop_at) {
                shard.close_all(&mut SocketOut(&socket));
                return;
            }
        }
        log_events(&mut shard);
        let mut wake = shard.poll_timeout().map(|at| epoch + Duration::from_millis(at));
        if let Some(state) = &drain {
            let next = if state.ended { state.stop_at } else { state.end_at };
            wake = Some(wake.map_or(next, |at| at.min(next)));
        }
        let wake = wake.unwrap_or_else(|| Instant::now() + Duration::from_secs(3_600));
        sleep.as_mut().reset(tokio::time::Instant::from_std(wake));
        tokio::select! {
            biased;
            ready = socket.readable() => {
                if ready.is_ok() {
                    read_batch(&mut shard, &socket, &mut buf, epoch);
                }
            }
            command = commands.recv() => match command {
                Some(command) => on_command(&mut shard, command, &socket, epoch, &mut drain),
                // Every handle is gone: nobody can drain this worker any more; it serves on.
                None => std::future::pending::<()>().await,
            },
            () = &mut sleep => {}
        }
    }
}

/// Logs what the matches' hosts reported: what an operator looks for (a player timed out,
/// misbehaved or was removed; a command refused; a desync; an end) at `info`, the rest at
/// `debug`.
fn log_events(shard: &mut Shard) {
    use phalanx_proto::HostEvent;
    while let Some((id, event)) = shard.poll_event() {
        match &event {
            HostEvent::PlayerTimedOut(_)
            | HostEvent::PlayerMisbehaved(_)
            | HostEvent::CommandRefused { .. }
            | HostEvent::PlayerRemoved(_)
            | HostEvent::Desync(_)
            | HostEvent::DesyncPinned { .. }
            | HostEvent::Ended(_) => tracing::info!(%id, ?event, "match event"),
            _ => tracing::debug!(%id, ?event, "match event"),
        }
    }
}

/// Reads what the socket holds, up to a batch.
fn read_batch(shard: &mut Shard, socket: &tokio::net::UdpSocket, buf: &mut [u8], epoch: Instant) {
    for _ in 0..BATCH_MAX {
        match socket.try_recv_from(buf) {
            Ok((len, from)) => {
                let now = millis(epoch);
                shard.handle_datagram(now, from, &buf[..len], &mut SocketOut(socket));
            }
            // Empty (`WouldBlock`), or an error for one datagram (an ICMP report): next time.
            Err(_) => return,
        }
    }
}

fn on_command(
    shard: &mut Shard,
    command: Command,
    socket: &tokio::net::UdpSocket,
    epoch: Instant,
    drain: &mut Option<Drain>,
) {
    let now = millis(epoch);
    let out = &mut SocketOut(socket);
    // A requester that went away does not want its answer.
    match command {
        Command::Create(id, spec, tokens, reply) => {
            let _ = reply.send(shard.create_match(now, id, &spec, &tokens));
        }
        Command::List(reply) => {
            let _ = reply.send(shard.list(now));
        }
        Command::Inspect(id, reply) => {
            let _ = reply.send(shard.inspect(now, id));
        }
        Command::Start(id, reply) => {
            let _ = reply.send(shard.start_match(now, id, out));
        }
        Command::End(id, code, reply) => {
            let _ = reply.send(shard.end_match(now, id, code, out).map(|_| ()));
        }
        Command::Kick(id, player, readmit, reply) => {
            let _ = reply.send(shard.kick(now, id, player, readmit, out));
        }
        Command::Metrics(reply) => {
            let _ = reply.send(shard.metrics());
        }
        Command::Drain(end_at) => {
            shard.drain();
            drain.get_or_insert(Drain { end_at, ended: false, stop_at: end_at });
        }
    }
}
