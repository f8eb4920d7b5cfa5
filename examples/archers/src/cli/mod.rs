//! The command line: one subcommand per mode, `simulate` when none is given (so a bare
//! `archers --json` runs the simulated match, as the README's first command does), and one
//! module per mode ([`simulate`], [`sockets`], [`replay`]). clap checks each flag on its own;
//! [`Cli::run`] first checks the flags that limit each other.

mod catch_up;
mod desync;
mod fair;
mod json;
mod mesh;
mod progress;
mod removals;
mod replay;
mod serve;
mod simulate;
mod sockets;
mod speculated;
mod verify;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use archers::net::Match;
use clap::builder::RangedU64ValueParser;
use clap::{Args, CommandFactory, Parser, Subcommand};
use phalanx::quic::Fingerprint;

/// The whole command line: a mode, or the simulated match's flags.
#[derive(Debug, Parser)]
#[command(
    name = "archers",
    version,
    about = "archers — the 1500-archer lockstep demo (phalanx). With no subcommand, plays the \
             whole match in the network simulator, over raw UDP by default (same as `archers simulate`).",
    long_about = None,
    args_conflicts_with_subcommands = true,
    after_help = "Through cargo: cargo run --release -p archers -- [COMMAND] [OPTIONS]"
)]
pub(crate) struct Cli {
    /// The mode; `simulate` when none is given.
    #[command(subcommand)]
    pub(crate) command: Option<Mode>,
    /// The flags of `simulate`, when no subcommand is given.
    #[command(flatten)]
    pub(crate) simulate: SimulateArgs,
}

impl Cli {
    /// Checks the flags that limit each other (exiting with status 2, as clap does for the
    /// flags it checks itself), then runs the mode.
    pub(crate) fn run(self) -> ExitCode {
        let mode = self.command.unwrap_or(Mode::Simulate(self.simulate));
        let checked = match &mode {
            Mode::Simulate(args) => args.check(),
            Mode::Host(args) => args.game.check(),
            Mode::Client(args) => args.game.check(),
            Mode::Rendezvous(args) => args.game.check(),
            Mode::Peer(args) => args.check(),
            Mode::Serve(args) => args.game.check(),
            Mode::Replay(_) | Mode::Diff(_) | Mode::Verify(_) => Ok(()),
        };
        if let Err(message) = checked {
            Cli::command().error(clap::error::ErrorKind::ValueValidation, message).exit();
        }
        match &mode {
            Mode::Simulate(args) => simulate::run(args),
            Mode::Host(args) => sockets::host(args),
            Mode::Client(args) => sockets::client(args),
            Mode::Rendezvous(args) => mesh::rendezvous(args),
            Mode::Peer(args) => mesh::peer(args),
            Mode::Serve(args) => serve::run(args),
            Mode::Replay(args) => replay::run(args),
            Mode::Diff(args) => desync::run(args),
            Mode::Verify(args) => verify::run(args),
        }
    }
}

/// What the binary does.
#[derive(Debug, Subcommand)]
pub(crate) enum Mode {
    /// The whole match in the network simulator (the default).
    Simulate(SimulateArgs),
    /// Host a match over real UDP/QUIC; prints each seat's client command line.
    Host(HostArgs),
    /// Play one seat of a hosted match.
    Client(ClientArgs),
    /// Stand in for a lobby of a peer-to-peer match: a rendezvous the peers meet through;
    /// prints each seat's `archers peer` command line.
    Rendezvous(RendezvousArgs),
    /// Play one seat of a peer-to-peer match (the command line `archers rendezvous` printed).
    Peer(PeerArgs),
    /// Play against bots in a browser: serves the page (the battle in wasm, over
    /// WebTransport) and prints the link that joins.
    Serve(ServeArgs),
    /// Re-simulate a recorded match and check every turn's state hash.
    Replay(ReplayArgs),
    /// Show what differs in a desync bundle (written by a run with a desync).
    Diff(DiffArgs),
    /// Check a signed match record (written beside --replay-out's replay) and its replay
    /// against the host's public key.
    Verify(VerifyArgs),
}

/// The match every mode plays; host and clients must agree on it.
#[derive(Clone, Copy, Debug, Args)]
#[command(next_help_heading = "Match (host and clients must agree)")]
pub(crate) struct MatchArgs {
    /// Players, 2 to 8.
    #[arg(long, value_name = "N", default_value_t = 8,
          value_parser = RangedU64ValueParser::<usize>::new().range(2..=8))]
    pub(crate) players: usize,
    /// Archers in total, from the player count to 60000.
    #[arg(long, value_name = "N", default_value_t = 1500)]
    pub(crate) units: usize,
    /// Match length in minutes, 0.05 to 60 (turns of the session's turn length).
    #[arg(long, value_name = "M", default_value_t = 2.0, value_parser = minutes)]
    pub(crate) minutes: f64,
    /// Seed of the game (and of the simulation).
    #[arg(long, value_name = "S", default_value_t = 1)]
    pub(crate) seed: u64,
}

/// The simulated network of the default mode.
#[derive(Clone, Copy, Debug, Args)]
#[command(next_help_heading = "Simulated network")]
pub(crate) struct NetworkArgs {
    /// Loss per datagram, percent (0 to 100).
    #[arg(long = "loss", value_name = "P", default_value_t = 2.0, value_parser = percent)]
    pub(crate) loss_percent: f64,
    /// Round-trip time, milliseconds.
    #[arg(long, value_name = "R", default_value_t = 100)]
    pub(crate) rtt_ms: u64,
    /// Extra random delay per datagram, milliseconds.
    #[arg(long, value_name = "J", default_value_t = 20)]
    pub(crate) jitter_ms: u64,
    /// Cut player 3 off for S seconds at 0:20 (0: never; needs 4 players or more).
    #[arg(long = "partition", value_name = "S", default_value_t = 2)]
    pub(crate) partition_s: u64,
    /// The transport: raw UDP with a Noise handshake (the default: no packet phalanx did not
    /// ask for), or QUIC (quinn adds its own ACK-only packets).
    #[arg(long, value_name = "T", value_enum, default_value_t = TransportArg::Udp)]
    pub(crate) transport: TransportArg,
    /// Who talks to whom: a host relaying every command (the default), or a peer-to-peer mesh
    /// with no host (raw UDP; no spectators or rejoins there yet), for a modem or not.
    #[arg(long, value_name = "T", value_enum, default_value_t = TopologyArg::Relay)]
    pub(crate) topology: TopologyArg,
    /// Mesh only: put the players behind NATs, the kinds in turn (full cone,
    /// address-restricted, port-restricted, symmetric); they meet through a rendezvous, which
    /// relays the pairs that cannot punch through.
    #[arg(long)]
    pub(crate) nats: bool,
}

/// `--topology`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TopologyArg {
    /// A host relays every command to every player.
    Relay,
    /// Every player sends its commands straight to every other.
    Mesh,
    /// The mesh with the modem's profile (`PeerConfig::modem`): turns final in batches, under
    /// 28.8 kbit/s a player, commands later.
    MeshModem,
}

/// `--transport`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TransportArg {
    /// QUIC (quinn).
    Quic,
    /// Raw UDP with a Noise handshake.
    Udp,
}

/// `archers simulate` (and `archers` alone).
#[derive(Clone, Debug, Args)]
pub(crate) struct SimulateArgs {
    #[command(flatten)]
    pub(crate) game: MatchArgs,
    #[command(flatten)]
    pub(crate) network: NetworkArgs,
    /// Flip one bit of one player's state after turn T (the run then succeeds only if the
    /// desync is reported).
    #[arg(long, value_name = "T", help_heading = "Output")]
    pub(crate) inject_desync: Option<u32>,
    /// Whose state --inject-desync flips.
    #[arg(long, value_name = "P", default_value_t = 1, help_heading = "Output")]
    pub(crate) desync_player: u8,
    /// Crash player 1's process S seconds into the match and start a new one 5 s later: it
    /// rejoins through a snapshot (the players give one every 10 s) and plays on.
    #[arg(long, value_name = "S")]
    pub(crate) rejoin_at: Option<u64>,
    /// Each player's game runs ahead of the confirmed turns on its own orders and rolls back
    /// when a confirmed turn differs (`phalanx::speculate`): its orders show in the next frame
    /// (60 Hz). The summary adds when they showed, the re-simulation time per frame and the
    /// rollbacks; the turns, hashes and replay are those of the run without it.
    #[arg(long)]
    pub(crate) speculate: bool,
    /// With --speculate: late seals. While a confirmed turn is late, each player's game
    /// predicts on through the turns due since, at most N past it, instead of standing still;
    /// the summary adds how long the rendered state stood still (0: off).
    #[arg(long, value_name = "N", default_value_t = 0,
          value_parser = RangedU64ValueParser::<u32>::new().range(0..=20))]
    pub(crate) late_seals: u32,
    /// N spectators watch the match (on the players' network), from the start.
    #[arg(long, value_name = "N", default_value_t = 0,
          value_parser = RangedU64ValueParser::<usize>::new().range(0..=16))]
    pub(crate) spectators: usize,
    /// Write the HTML report here.
    #[arg(
        long,
        value_name = "PATH",
        default_value = "target/archers-report.html",
        help_heading = "Output"
    )]
    pub(crate) report: PathBuf,
    /// Write no report.
    #[arg(long, help_heading = "Output")]
    pub(crate) no_report: bool,
    /// Where a desync's bundle goes (both states at the first divergent turn; for `archers
    /// diff`), if there is one.
    #[arg(
        long,
        value_name = "PATH",
        default_value = "target/archers-desync.bundle",
        help_heading = "Output"
    )]
    pub(crate) desync_bundle: PathBuf,
    /// Record the match into a replay file (for `archers replay`).
    #[arg(long, value_name = "PATH", help_heading = "Output")]
    pub(crate) replay_out: Option<PathBuf>,
    /// Print a JSON summary as the last line of stdout.
    #[arg(long, help_heading = "Output")]
    pub(crate) json: bool,
}

/// `archers host`.
#[derive(Clone, Debug, Args)]
pub(crate) struct HostArgs {
    #[command(flatten)]
    pub(crate) game: MatchArgs,
    /// Where to listen (127.0.0.1:0 picks a port).
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "127.0.0.1:4433",
        help_heading = "Real sockets"
    )]
    pub(crate) bind: SocketAddr,
    /// The transport: QUIC (clients pin its certificate with --fingerprint), or raw UDP with
    /// a Noise handshake (clients pin the host's static key with --udp-key).
    #[arg(long, value_name = "T", value_enum, default_value_t = TransportArg::Quic,
          help_heading = "Real sockets")]
    pub(crate) transport: TransportArg,
}

/// `archers serve`.
#[derive(Clone, Debug, Args)]
pub(crate) struct ServeArgs {
    /// The match; the last seat is the browser's, the others are bots.
    #[command(flatten)]
    pub(crate) game: MatchArgs,
    /// Where the page is served over HTTP (127.0.0.1:0 picks a port).
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "127.0.0.1:8080",
        help_heading = "Real sockets"
    )]
    pub(crate) http: SocketAddr,
    /// Where the host listens for the bots (QUIC).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0", help_heading = "Real sockets")]
    pub(crate) bind: SocketAddr,
    /// Where the host listens for the page (WebTransport, a UDP port).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0", help_heading = "Real sockets")]
    pub(crate) web: SocketAddr,
    /// How long to wait for the page to join, seconds.
    #[arg(
        long = "join-wait",
        value_name = "S",
        default_value_t = 300,
        help_heading = "Real sockets"
    )]
    pub(crate) join_wait_s: u64,
    /// The page's wasm module, built already (default: build `archers-web` with cargo).
    #[arg(long, value_name = "PATH")]
    pub(crate) wasm: Option<PathBuf>,
    /// Where a page opened with `&shot=S` saves its canvas (PNG), S seconds into the match.
    #[arg(long, value_name = "PATH", help_heading = "Output")]
    pub(crate) screenshot: Option<PathBuf>,
    /// Print a JSON summary as the last line of stdout.
    #[arg(long, help_heading = "Output")]
    pub(crate) json: bool,
}

/// `archers rendezvous`.
#[derive(Clone, Debug, Args)]
pub(crate) struct RendezvousArgs {
    #[command(flatten)]
    pub(crate) game: MatchArgs,
    /// Where to listen (127.0.0.1:0 picks a port); the peers must reach it.
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "127.0.0.1:4434",
        help_heading = "Real sockets"
    )]
    pub(crate) bind: SocketAddr,
    /// The peers play with the modem's profile (`PeerConfig::modem`).
    #[arg(long, help_heading = "Real sockets")]
    pub(crate) modem: bool,
}

/// `archers peer`.
#[derive(Clone, Debug, Args)]
pub(crate) struct PeerArgs {
    #[command(flatten)]
    pub(crate) game: MatchArgs,
    /// The rendezvous' address.
    #[arg(long, value_name = "ADDR", help_heading = "Real sockets")]
    pub(crate) rendezvous: SocketAddr,
    /// The match's id, as the rendezvous printed it.
    #[arg(long = "match", value_name = "ID", help_heading = "Real sockets")]
    pub(crate) match_id: u64,
    /// Our seat.
    #[arg(long, value_name = "N", help_heading = "Real sockets")]
    pub(crate) seat: u8,
    /// Our secret key (64 hex digits), as the rendezvous printed it.
    #[arg(long, value_name = "HEX", help_heading = "Real sockets", value_parser = secret_key)]
    pub(crate) secret: phalanx::udp::HostKey,
    /// Every seat's public key, by seat, comma-separated.
    #[arg(long, value_name = "HEX,..", help_heading = "Real sockets", value_delimiter = ',')]
    pub(crate) roster: Vec<phalanx::udp::HostPublicKey>,
    /// The modem's profile (`PeerConfig::modem`); every peer must agree.
    #[arg(long, help_heading = "Real sockets")]
    pub(crate) modem: bool,
    /// Print a JSON summary as the last line of stdout.
    #[arg(long, help_heading = "Output")]
    pub(crate) json: bool,
}

impl PeerArgs {
    /// The checks between flags that clap cannot make one flag at a time.
    pub(crate) fn check(&self) -> Result<(), String> {
        self.game.check()?;
        if self.roster.len() != self.game.players {
            return Err(format!(
                "--roster lists {} keys for {} players",
                self.roster.len(),
                self.game.players
            ));
        }
        if usize::from(self.seat) >= self.game.players {
            return Err("--seat must be a player (0 to players - 1)".into());
        }
        Ok(())
    }
}

/// A secret key: 64 hex digits (`HostKey::to_hex`).
fn secret_key(text: &str) -> Result<phalanx::udp::HostKey, String> {
    phalanx::udp::HostKey::from_hex(text).map_err(|error| error.to_string())
}

/// `archers client`.
#[derive(Clone, Debug, Args)]
pub(crate) struct ClientArgs {
    #[command(flatten)]
    pub(crate) game: MatchArgs,
    /// The host's address.
    #[arg(long, value_name = "ADDR", help_heading = "Real sockets")]
    pub(crate) connect: SocketAddr,
    /// The host's certificate fingerprint (pinned), as the host printed it: a QUIC host.
    #[arg(
        long,
        value_name = "HEX",
        help_heading = "Real sockets",
        required_unless_present_any = ["udp_key", "pin"],
        conflicts_with_all = ["udp_key", "pin"]
    )]
    pub(crate) fingerprint: Option<Fingerprint>,
    /// The host's static key (pinned), as the host printed it: a host over raw UDP
    /// (`host --transport udp`).
    #[arg(long, value_name = "HEX", help_heading = "Real sockets", conflicts_with = "pin")]
    pub(crate) udp_key: Option<phalanx::udp::HostPublicKey>,
    /// The host's pin as text, `quic:<hex>` or `udp:<hex>` (a relay's match ticket gives it).
    #[arg(long, value_name = "PIN", help_heading = "Real sockets")]
    pub(crate) pin: Option<phalanx::Pin>,
    /// The seat token the host printed.
    #[arg(
        long,
        value_name = "N",
        help_heading = "Real sockets",
        required_unless_present = "code",
        conflicts_with = "code"
    )]
    pub(crate) token: Option<u64>,
    /// The seat's join code (a relay's match ticket gives it): the token as a player types it.
    #[arg(long, value_name = "CODE", help_heading = "Real sockets")]
    pub(crate) code: Option<phalanx::JoinCode>,
    /// Flip one bit of this client's state after turn T.
    #[arg(long, value_name = "T", help_heading = "Output")]
    pub(crate) inject_desync: Option<u32>,
    /// Print a JSON summary as the last line of stdout.
    #[arg(long, help_heading = "Output")]
    pub(crate) json: bool,
}

/// `archers diff`.
#[derive(Clone, Debug, Args)]
pub(crate) struct DiffArgs {
    /// The desync bundle (written by a run with a desync, see --desync-bundle).
    #[arg(value_name = "BUNDLE")]
    pub(crate) file: PathBuf,
    /// Print a JSON summary as the last line of stdout.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `archers replay`.
#[derive(Clone, Debug, Args)]
pub(crate) struct ReplayArgs {
    /// The replay file (written by --replay-out).
    #[arg(value_name = "FILE")]
    pub(crate) file: PathBuf,
    /// Print a JSON summary as the last line of stdout.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `archers verify`.
#[derive(Clone, Debug, Args)]
pub(crate) struct VerifyArgs {
    /// The signed record (`FILE.signed` beside a replay written by --replay-out).
    #[arg(value_name = "RECORD")]
    pub(crate) record: PathBuf,
    /// The replay it must sign.
    #[arg(long, value_name = "FILE")]
    pub(crate) replay: PathBuf,
    /// The host's public key (64 hex digits, as the run that wrote them printed it).
    #[arg(long, value_name = "HEX", value_parser = match_key)]
    pub(crate) key: phalanx::replay::MatchKey,
    /// Print a JSON summary as the last line of stdout.
    #[arg(long)]
    pub(crate) json: bool,
}

fn match_key(value: &str) -> Result<phalanx::replay::MatchKey, String> {
    phalanx::replay::MatchKey::from_hex(value).ok_or_else(|| "not 64 hex digits".to_owned())
}

fn minutes(value: &str) -> Result<f64, String> {
    let minutes: f64 = value.parse().map_err(|_| format!("cannot read {value:?} as minutes"))?;
    if (0.05..=60.0).contains(&minutes) {
        Ok(minutes)
    } else {
        Err("must be 0.05 to 60".into())
    }
}

fn percent(value: &str) -> Result<f64, String> {
    let percent: f64 = value.parse().map_err(|_| format!("cannot read {value:?} as percent"))?;
    if (0.0..=100.0).contains(&percent) {
        Ok(percent)
    } else {
        Err("must be 0 to 100".into())
    }
}

impl MatchArgs {
    /// The checks between flags that clap cannot make one flag at a time.
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.units < self.players || self.units > 60_000 {
            return Err("--units must be between the player count and 60000".into());
        }
        Ok(())
    }

    /// The match's length in turns of `turns.length_ms` (at least one).
    pub(crate) fn turns(&self, turn_length_ms: u32) -> u32 {
        let turns = (self.minutes * 60_000.0) as u64 / u64::from(turn_length_ms.max(1));
        u32::try_from(turns.max(1)).unwrap_or(u32::MAX)
    }

    /// The match over real sockets, its length in turns of the demo session's turn length.
    pub(crate) fn game(&self) -> Match {
        let turns = self.turns(archers::net::demo_session().turns.length_ms);
        Match { players: self.players, units: self.units, seed: self.seed, turns }
    }
}

impl SimulateArgs {
    /// The checks between flags that clap cannot make one flag at a time.
    pub(crate) fn check(&self) -> Result<(), String> {
        self.game.check()?;
        if usize::from(self.desync_player) >= self.game.players {
            return Err("--desync-player must be a player (0 to players - 1)".into());
        }
        Ok(())
    }

    /// Where the HTML report goes, unless `--no-report`.
    pub(crate) fn report_path(&self) -> Option<&Path> {
        (!self.no_report).then_some(self.report.as_path())
    }
}

#[cfg(test)]
mod tests {
    //! The command line as the README documents it: no subcommand is the simulated match,
    //! each mode takes its own flags, and a match's length counts turns of the turn length.

    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("archers").chain(args.iter().copied()))
    }

    #[test]
    fn the_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn no_subcommand_is_the_simulated_match_with_its_flags() {
        let cli = parse(&["--minutes", "10", "--loss", "5", "--no-report", "--json"]).unwrap();
        assert!(cli.command.is_none());
        assert!(cli.simulate.json && cli.simulate.report_path().is_none());
        assert_eq!((cli.simulate.game.minutes, cli.simulate.network.loss_percent), (10.0, 5.0));
        let Some(Mode::Simulate(args)) = parse(&["simulate", "--json"]).unwrap().command else {
            panic!("`simulate` names the default mode");
        };
        assert!(args.json && args.report_path().is_some());
    }

    #[test]
    fn each_mode_takes_its_own_flags() {
        let cli = parse(&["replay", "match.replay", "--json"]).unwrap();
        assert!(matches!(cli.command, Some(Mode::Replay(ReplayArgs { json: true, .. }))));
        let cli = parse(&["host", "--players", "2", "--bind", "127.0.0.1:0"]).unwrap();
        assert!(matches!(
            cli.command,
            Some(Mode::Host(HostArgs { game: MatchArgs { players: 2, .. }, .. }))
        ));
        // Match flags go after the mode; a client needs the host, its fingerprint and a seat.
        assert!(parse(&["--players", "2", "host"]).is_err());
        assert!(parse(&["client", "--connect", "127.0.0.1:4433"]).is_err());
        assert!(parse(&["host", "--loss", "5"]).is_err());
    }

    #[test]
    fn limits_pass_at_the_edge_and_fail_past_it() {
        assert!(parse(&["--players", "8"]).is_ok() && parse(&["--players", "9"]).is_err());
        assert!(parse(&["--players", "2"]).is_ok() && parse(&["--players", "1"]).is_err());
        assert!(parse(&["--minutes", "60"]).is_ok() && parse(&["--minutes", "60.1"]).is_err());
        assert!(parse(&["--loss", "100"]).is_ok() && parse(&["--loss", "100.1"]).is_err());
        let units = |n: &str| parse(&["--players", "4", "--units", n]).unwrap().simulate.check();
        assert!(units("4").is_ok() && units("3").is_err());
        assert!(units("60000").is_ok() && units("60001").is_err());
        let desync = |p: &str| parse(&["--players", "4", "--desync-player", p]).unwrap().simulate;
        assert!(desync("3").check().is_ok() && desync("4").check().is_err());
    }

    #[test]
    fn a_match_counts_turns_of_the_turn_length() {
        let game = parse(&["--minutes", "2"]).unwrap().simulate.game;
        assert_eq!(game.turns(100), 1_200);
        assert_eq!(game.turns(200), 600);
        let turn_length_ms = archers::net::demo_session().turns.length_ms;
        assert_eq!(game.game().turns, 120_000 / turn_length_ms);
        let short = parse(&["--minutes", "0.05"]).unwrap().simulate.game;
        assert_eq!(short.turns(60_000), 1, "at least one turn");
    }
}
