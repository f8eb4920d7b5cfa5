//! The 1500-archer lockstep demo: 8 bot players command 1500 archers in a deterministic
//! battle, over real QUIC (quinn) under phalanx-sim's simulated network — RTT 40–150 ms,
//! 1–3 % loss, jitter, and one player cut off for a few seconds — then it prints what AoE's
//! authors cared about: did everyone agree, how much bandwidth, how much command latency, and
//! writes an HTML report with plots over time and the battlefield.
//!
//! Also: `archers host` / `archers client` play the same match over real sockets, and
//! `archers replay FILE` re-simulates a recorded match and checks every turn's hash.
//! `cargo run --release -p archers -- --help` lists the modes and flags; `--json` prints one
//! JSON object as the last line. The command line and one module per mode live in [`cli`].
#![allow(clippy::print_stdout, clippy::print_stderr)] // a command-line program

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    cli::Cli::parse().run()
}
