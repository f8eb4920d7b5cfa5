//! Bot players for load: each a sans-IO [`Bot`] (a `phalanx_proto::Client` with the raw-UDP
//! transport's handshake, channel and stream driven by hand), as light as a player can be, so
//! that a load generator's one core carries thousands. [`run_bot`] puts one on a UDP socket of
//! its own; the `relay-load` binary runs thousands against a relay process; a test can run a
//! few, or run bots and a [`Shard`](crate::Shard) in memory with no socket at all.
//!
//! A bot gives orders at the archers demo's rate: one every 15–20 turns, three at once one time
//! in four, each a 12-byte command; it reports a state hash every check turn.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use phalanx_proto::{SessionConfig, SplitMix64, Turn};
use phalanx_udp::stream::{StreamConfig, ACK, SEGMENT};
pub use phalanx_udp::HostPublicKey;
use phalanx_udp::{
    Channel, ClientHandshake, Progress, Stream, KIND_CLOSE, KIND_DATAGRAM, MAX_PACKET,
};

/// One bot's seat and behaviour.
#[derive(Clone, Debug)]
pub struct BotConfig {
    /// The relay's (or host's) UDP address.
    pub address: SocketAddr,
    /// The relay's key.
    pub pin: HostPublicKey,
    /// The seat's token.
    pub token: u64,
    /// The session, as the match was created with.
    pub session: SessionConfig,
    /// Seeds the bot's keys and orders.
    pub seed: u64,
    /// The bot gives up joining after this long.
    pub join_timeout: Duration,
    /// A hostile bot: once joined, every session datagram it sends is garbage (sealed on its
    /// channel, so only the session can tell). The host removes it as misbehaving.
    pub hostile: bool,
}

/// How a bot's match went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BotReport {
    /// It joined.
    pub joined: bool,
    /// Turns it executed.
    pub turns: u64,
    /// Commands it submitted.
    pub commands: u64,
    /// Datagrams it received and sent.
    pub datagrams_in: u64,
    /// Datagrams it sent.
    pub datagrams_out: u64,
    /// Whether its session ended as finished (the host ended the match).
    pub finished: bool,
    /// The end's code, when it finished.
    pub end_code: Option<u32>,
}

/// Where a bot is: shaking hands, or joined (or joining) over its channel.
enum Phase {
    Handshake { handshake: Box<ClientHandshake>, resend_at: u64 },
    Linked { channel: Channel, stream: Box<Stream> },
    Over,
}

/// One bot player, sans-IO: packets in with [`Bot::handle`], packets out through the `send`
/// sink every call takes, timers by [`Bot::poll_timeout`] and [`Bot::handle_timeout`]. Times
/// are milliseconds of the caller's clock.
pub struct Bot {
    client: phalanx_proto::Client,
    request: Vec<u8>,
    phase: Phase,
    hostile: bool,
    random: SplitMix64,
    next_order: u32,
    join_deadline: u64,
    /// The time of the last [`handle_timeout`](Self::handle_timeout): a deadline at or before
    /// it that is still pending waits for a datagram (a late turn), and wakes nobody.
    last_now: u64,
    report: BotReport,
    plain: Vec<u8>,
    packet: Vec<u8>,
    datagram: Vec<u8>,
}

impl std::fmt::Debug for Bot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bot").field("report", &self.report).finish_non_exhaustive()
    }
}

/// How long a bot waits before it sends its handshake again, milliseconds.
const HANDSHAKE_RESEND_MS: u64 = 250;

impl Bot {
    /// A bot for `config`'s seat, starting at `now`; `send` gets its first packet.
    pub fn new(config: &BotConfig, now: u64, send: &mut dyn FnMut(&[u8])) -> Option<Bot> {
        let random = random_bytes(config.seed, b"bot handshake");
        let (handshake, first) = ClientHandshake::new(config.pin, &[], random).ok()?;
        let (client, request) =
            phalanx_proto::Client::new(config.session.clone(), config.token).ok()?;
        send(&first);
        let resend_at = now + HANDSHAKE_RESEND_MS;
        Some(Bot {
            client,
            request,
            phase: Phase::Handshake { handshake: Box::new(handshake), resend_at },
            hostile: config.hostile,
            random: SplitMix64::new(config.seed),
            next_order: 10 + (config.seed % 8) as u32,
            join_deadline: now + config.join_timeout.as_millis() as u64,
            last_now: now,
            report: BotReport::default(),
            plain: Vec::with_capacity(MAX_PACKET),
            packet: Vec::with_capacity(MAX_PACKET),
            datagram: Vec::with_capacity(MAX_PACKET),
        })
    }

    /// How its match went so far.
    pub fn report(&self) -> BotReport {
        self.report
    }

    /// Whether it is done: its session ended, or it could not join.
    pub fn is_over(&self) -> bool {
        matches!(self.phase, Phase::Over)
    }

    /// When [`handle_timeout`](Self::handle_timeout) is next due.
    pub fn poll_timeout(&self) -> Option<u64> {
        match &self.phase {
            Phase::Handshake { resend_at, .. } => Some((*resend_at).min(self.join_deadline)),
            Phase::Linked { stream, .. } => {
                // What is still due at the last call is waiting for a datagram (a late turn),
                // not for time: only later deadlines wake the bot.
                let timers = [self.client.poll_timeout(), self.client.next_turn_due_ms()];
                let timers = timers.into_iter().chain([stream.poll_timeout()]).flatten();
                timers.filter(|&at| at > self.last_now).min()
            }
            Phase::Over => None,
        }
    }

    /// One packet from the relay (or host).
    pub fn handle(&mut self, now: u64, packet: &[u8], send: &mut dyn FnMut(&[u8])) {
        self.report.datagrams_in += 1;
        match &mut self.phase {
            Phase::Handshake { handshake, .. } => match handshake.handle(packet) {
                Ok(Progress::Resend(packet)) => send(&packet),
                Ok(Progress::Established { channel, .. }) => {
                    let mut stream = Box::new(Stream::new(StreamConfig::default()));
                    // A fresh stream takes a join request.
                    let _ = stream.send(&self.request);
                    self.phase = Phase::Linked { channel, stream };
                }
                // A packet that does not fit the handshake (corrupted, forged, another
                // host's) is ignored: the resends go on until the join deadline.
                Ok(Progress::Ignored) | Err(_) => {}
            },
            Phase::Linked { channel, stream } => {
                if channel.open_into(packet, &mut self.plain).is_err() {
                    return;
                }
                match self.plain.split_first() {
                    Some((&KIND_DATAGRAM, rest)) => self.client.handle_datagram(now, rest),
                    Some((&(SEGMENT | ACK), _)) => {
                        let _ = stream.handle(now, &self.plain);
                        while let Some(message) = stream.poll_message() {
                            let joined = self.client.handle_join_reply(now, &message).is_ok();
                            self.report.joined |= joined;
                        }
                    }
                    Some((&KIND_CLOSE, _)) => self.client.on_host_closed(),
                    _ => {}
                }
            }
            Phase::Over => return,
        }
        self.handle_timeout(now, send);
    }

    /// Fires what is due: handshake resends, the session's timers, turns (the bot plays them
    /// and gives its orders), datagrams and stream packets to send.
    pub fn handle_timeout(&mut self, now: u64, send: &mut dyn FnMut(&[u8])) {
        self.last_now = now;
        if let Phase::Handshake { handshake, resend_at } = &mut self.phase {
            if now >= self.join_deadline {
                self.phase = Phase::Over;
            } else if now >= *resend_at {
                send(handshake.packet());
                *resend_at = now + HANDSHAKE_RESEND_MS;
            }
            return;
        }
        let Phase::Linked { channel, stream } = &mut self.phase else { return };
        self.client.handle_timeout(now);
        while let Some(turn) = self.client.next_turn(now) {
            self.report.turns += 1;
            self.client.report_state_hash(turn.turn, 0x5EED);
            if turn.turn.0 >= self.next_order {
                let (client, random) = (&mut self.client, &mut self.random);
                self.next_order = orders(client, random, turn.turn, now, &mut self.report);
            }
        }
        let mut seal = |plain: &[u8], report: &mut BotReport, packet: &mut Vec<u8>| {
            if channel.seal_into(plain, packet).is_ok() {
                send(packet);
                report.datagrams_out += 1;
            }
        };
        while self.client.poll_transmit(now, &mut self.datagram) {
            if self.hostile && self.report.joined {
                self.datagram.iter_mut().for_each(|byte| *byte = !*byte);
            }
            self.plain.clear();
            self.plain.push(KIND_DATAGRAM);
            self.plain.extend_from_slice(&self.datagram);
            seal(&self.plain, &mut self.report, &mut self.packet);
        }
        stream.handle_timeout(now);
        while let Some(packet) = stream.poll_transmit(now) {
            seal(&packet, &mut self.report, &mut self.packet);
        }
        if let Some(ended) = self.client.ended() {
            if let phalanx_proto::EndReason::Finished { code } = ended {
                self.report.finished = true;
                self.report.end_code = Some(code);
            }
            self.leave(send);
        }
    }

    /// Leaves the match (a close with `CLOSE_LEFT`) and is over.
    pub fn leave(&mut self, send: &mut dyn FnMut(&[u8])) {
        if let Phase::Linked { channel, .. } = &mut self.phase {
            let mut plain = vec![KIND_CLOSE];
            plain.extend_from_slice(&phalanx_proto::CLOSE_LEFT.to_le_bytes());
            if channel.seal_into(&plain, &mut self.packet).is_ok() {
                send(&self.packet);
            }
        }
        self.phase = Phase::Over;
    }
}

fn random_bytes(seed: u64, label: &[u8]) -> [u8; 32] {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    context.update(&seed.to_le_bytes());
    context.update(label);
    let mut bytes = [0u8; 32];
    bytes.copy_from_slice(context.finish().as_ref());
    bytes
}

/// Plays one seat on a UDP socket of its own until its session ends (or it cannot join);
/// `stop` ends it early (it leaves).
pub async fn run_bot(config: BotConfig, mut stop: tokio::sync::watch::Receiver<bool>) -> BotReport {
    let epoch = Instant::now();
    let now = || epoch.elapsed().as_millis() as u64;
    let Ok(socket) = tokio::net::UdpSocket::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await
    else {
        return BotReport::default();
    };
    let address = config.address;
    // A full socket buffer is loss, which the session repairs.
    let mut send = |packet: &[u8]| {
        let _ = socket2::SockRef::from(&socket).send_to(packet, &address.into());
    };
    let Some(mut bot) = Bot::new(&config, now(), &mut send) else { return BotReport::default() };
    let mut buf = vec![0u8; MAX_PACKET + 1];
    while !bot.is_over() {
        let wake = bot.poll_timeout().unwrap_or(now() + 1_000);
        let sleep = tokio::time::sleep_until((epoch + Duration::from_millis(wake)).into());
        tokio::select! {
            biased;
            received = socket.recv_from(&mut buf) => {
                if let Ok((len, from)) = received {
                    if from == address {
                        bot.handle(now(), &buf[..len], &mut send);
                    }
                }
            }
            () = sleep => bot.handle_timeout(now(), &mut send),
            _ = stop.changed() => bot.leave(&mut send),
        }
    }
    bot.report()
}

/// The demo's orders: one (three, one time in four) 12-byte command; the next in 15–20 turns.
fn orders(
    client: &mut phalanx_proto::Client,
    random: &mut SplitMix64,
    turn: Turn,
    now: u64,
    report: &mut BotReport,
) -> u32 {
    let burst = if random.next_u64().is_multiple_of(4) { 3 } else { 1 };
    for _ in 0..burst {
        let command = random.next_u64().to_le_bytes();
        let mut payload = [0u8; 12];
        payload[..8].copy_from_slice(&command);
        payload[8..].copy_from_slice(&turn.0.to_le_bytes());
        if client.submit(now, &payload).is_ok() {
            report.commands += 1;
        }
    }
    turn.0 + 15 + (random.next_u64() % 6) as u32
}

/// One request to a relay's admin API (HTTP/1.1, a connection each, bearer `token`): the
/// status and the body. Blocking; for tools and tests.
pub fn admin_request(
    admin: SocketAddr,
    token: &str,
    method: &str,
    path: &str,
    body: &str,
) -> std::io::Result<(u16, String)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(admin)?;
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {admin}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes())?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let status = response.get(9..12).and_then(|s| s.parse().ok());
    let status = status.ok_or_else(|| std::io::Error::other("no HTTP status line"))?;
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Ok((status, body))
}
