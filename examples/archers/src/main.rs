//! The 1500-archer lockstep demo: 8 bot players command 1500 archers in a deterministic
//! battle, over raw UDP with Noise (or QUIC) under phalanx-sim's simulated network — RTT 40–150 ms,
//! 1–3 % loss, jitter, and one player cut off for a few seconds — then it prints what AoE's
//! authors cared about: did everyone agree, how much bandwidth, how much command latency, and
//! writes an HTML report with plots over time and the battlefield.
//!
//! Also: `archers host` / `archers client` play the same match over real sockets, and
//! `archers replay FILE` re-simulates a recorded match and checks every turn's hash.
//! `cargo run --release -p archers -- --help` lists the modes and flags; `--json` prints one
//! JSON object as the last line. The command line and one module per mode live in [`cli`].
//!
//! phalanx's `tracing` events (joins, refusals, removals...) go to stderr, filtered by
//! `RUST_LOG` (default: `warn`; e.g. `RUST_LOG=phalanx=debug`).
#![allow(clippy::print_stdout, clippy::print_stderr)] // a command-line program

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    install_tracing();
    cli::Cli::parse().run()
}

/// Sends `tracing` events to stderr, filtered by `RUST_LOG` (default: `warn`; a filter that
/// does not parse is reported and the default used), in colour only on a terminal.
fn install_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|error| {
        if std::env::var_os(EnvFilter::DEFAULT_ENV).is_some() {
            eprintln!("archers: ignoring RUST_LOG ({error}); logging warnings");
        }
        EnvFilter::new("warn")
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}
