//! Bot players for load: each a sans-IO `phalanx_proto::Client` on its own UDP socket, with
//! the raw-UDP transport's handshake, channel and stream driven by hand — as light as a player
//! can be, so that a load generator's one core carries thousands. The `relay-load` binary
//! runs them against a relay process; a test can run a few.
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

struct Link {
    socket: tokio::net::UdpSocket,
    address: SocketAddr,
    channel: Channel,
    stream: Stream,
    plain: Vec<u8>,
    packet: Vec<u8>,
    report: BotReport,
}

impl Link {
    fn send(&mut self, kind: Option<u8>, payload: &[u8]) {
        self.plain.clear();
        self.plain.extend(kind);
        self.plain.extend_from_slice(payload);
        if self.channel.seal_into(&self.plain, &mut self.packet).is_ok() {
            // A full socket buffer is loss, which the session repairs.
            let _ =
                socket2::SockRef::from(&self.socket).send_to(&self.packet, &self.address.into());
            self.report.datagrams_out += 1;
        }
    }

    fn pump(&mut self, now: u64) {
        self.stream.handle_timeout(now);
        while let Some(packet) = self.stream.poll_transmit(now) {
            self.send(None, &packet);
        }
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

/// The handshake, resent every 250 ms until `deadline`.
async fn handshake(
    config: &BotConfig,
    socket: &tokio::net::UdpSocket,
    deadline: Instant,
) -> Option<Channel> {
    let random = random_bytes(config.seed, b"bot handshake");
    let (mut handshake, first) = ClientHandshake::new(config.pin, &[], random).ok()?;
    let mut buf = vec![0u8; MAX_PACKET + 1];
    socket.send_to(&first, config.address).await.ok()?;
    while Instant::now() < deadline {
        let received = tokio::time::timeout(Duration::from_millis(250), socket.recv_from(&mut buf));
        match received.await {
            Ok(Ok((len, _))) => match handshake.handle(&buf[..len]).ok()? {
                Progress::Resend(packet) => {
                    socket.send_to(&packet, config.address).await.ok()?;
                }
                Progress::Established { channel, .. } => return Some(channel),
                Progress::Ignored => {}
            },
            _ => {
                socket.send_to(handshake.packet(), config.address).await.ok()?;
            }
        }
    }
    None
}

/// Plays one seat until its session ends (or it cannot join); `stop` ends it early.
pub async fn run_bot(config: BotConfig, mut stop: tokio::sync::watch::Receiver<bool>) -> BotReport {
    let epoch = Instant::now();
    let now = || epoch.elapsed().as_millis() as u64;
    let Ok(socket) = tokio::net::UdpSocket::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await
    else {
        return BotReport::default();
    };
    let deadline = epoch + config.join_timeout;
    let Some(channel) = handshake(&config, &socket, deadline).await else {
        return BotReport::default();
    };
    let Ok((mut client, request)) =
        phalanx_proto::Client::new(config.session.clone(), config.token)
    else {
        return BotReport::default();
    };
    let stream = Stream::new(StreamConfig::default());
    let plain = Vec::with_capacity(MAX_PACKET);
    let packet = Vec::with_capacity(MAX_PACKET);
    let report = BotReport::default();
    let mut link = Link { socket, address: config.address, channel, stream, plain, packet, report };
    let _ = link.stream.send(&request);
    link.pump(now());
    let mut random = SplitMix64::new(config.seed);
    let mut next_order = 10 + (config.seed % 8) as u32;
    let mut buf = vec![0u8; MAX_PACKET + 1];
    let mut datagram = Vec::with_capacity(MAX_PACKET);
    let mut opened = Vec::with_capacity(MAX_PACKET);
    loop {
        let wake = [client.poll_timeout(), client.next_turn_due_ms(), link.stream.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(now() + 1_000);
        let sleep = tokio::time::sleep_until((epoch + Duration::from_millis(wake)).into());
        tokio::select! {
            received = link.socket.recv_from(&mut buf) => {
                let Ok((len, _)) = received else { continue };
                link.report.datagrams_in += 1;
                if link.channel.open_into(&buf[..len], &mut opened).is_err() {
                    continue;
                }
                match opened.split_first() {
                    Some((&KIND_DATAGRAM, rest)) => client.handle_datagram(now(), rest),
                    Some((&(SEGMENT | ACK), _)) => {
                        let _ = link.stream.handle(now(), &opened);
                        while let Some(message) = link.stream.poll_message() {
                            link.report.joined |= client.handle_join_reply(now(), &message).is_ok();
                        }
                    }
                    Some((&KIND_CLOSE, _)) => client.on_host_closed(),
                    _ => {}
                }
            }
            () = sleep => {}
            _ = stop.changed() => break,
        }
        let at = now();
        client.handle_timeout(at);
        while let Some(turn) = client.next_turn(at) {
            link.report.turns += 1;
            client.report_state_hash(turn.turn, 0x5EED);
            if turn.turn.0 >= next_order {
                next_order = orders(&mut client, &mut random, turn.turn, at, &mut link.report);
            }
        }
        while client.poll_transmit(at, &mut datagram) {
            if config.hostile && link.report.joined {
                datagram.iter_mut().for_each(|byte| *byte = !*byte);
            }
            link.send(Some(KIND_DATAGRAM), &datagram);
        }
        link.pump(at);
        if let Some(ended) = client.ended() {
            if let phalanx_proto::EndReason::Finished { code } = ended {
                link.report.finished = true;
                link.report.end_code = Some(code);
            }
            break;
        }
    }
    link.send(Some(KIND_CLOSE), &phalanx_proto::CLOSE_LEFT.to_le_bytes());
    link.report
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
