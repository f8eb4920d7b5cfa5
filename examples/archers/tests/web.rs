//! A browser player in the same match as native ones, end to end: `archers serve` hosts a
//! two-minute match whose first two seats are bots over QUIC (in its process) and serves the
//! page; headless Chromium opens the link it prints with `&autoplay` (the page's own bot gives
//! the browser seat's orders, over WebTransport, in the wasm module). The summary must show
//! every player at the same final state hash after every turn of the match, no desync, every
//! order submitted executed by every player, and the page's order latency p95 within 20 % of
//! the bots' (all on loopback). The page's frame work and module size are printed.
//!
//! Needs Chromium and the `wasm32-unknown-unknown` target (`archers serve` builds the page's
//! module with cargo): skips with a SKIPPED line when either is missing, unless
//! `PHALANX_REQUIRE_BROWSER` (Chromium) or `PHALANX_REQUIRE_WASM` (the target) is set, as CI
//! sets them. Bounded: both processes are killed at the deadline.

#![allow(clippy::print_stderr)] // the skip message and the figures

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
#[path = "common/node.rs"]
mod node;

use node::Node;

fn wasm_target_installed() -> bool {
    Command::new("rustup").args(["target", "list", "--installed"]).output().is_ok_and(|out| {
        String::from_utf8_lossy(&out.stdout).lines().any(|l| l == "wasm32-unknown-unknown")
    })
}

/// Whether the test can run here; panics when CI asked for what is missing.
fn can_run(test: &str) -> Option<PathBuf> {
    let browser = common::chromium();
    if browser.is_none() {
        assert!(std::env::var_os("PHALANX_REQUIRE_BROWSER").is_none(), "no chromium found");
        eprintln!("SKIPPED {test}: no chromium in PATH");
        return None;
    }
    if !wasm_target_installed() {
        assert!(
            std::env::var_os("PHALANX_REQUIRE_WASM").is_none(),
            "the wasm32-unknown-unknown target is not installed"
        );
        eprintln!("SKIPPED {test}: no wasm32-unknown-unknown target (rustup target add it)");
        return None;
    }
    browser
}

/// Headless Chromium on `url`, its profile in `profile`; killed when dropped.
fn open_page(browser: &PathBuf, url: &str, profile: &std::path::Path) -> Node {
    let mut command = Command::new(browser);
    command
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-background-timer-throttling",
            "--disable-renderer-backgrounding",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(url)
        .stdin(Stdio::null());
    Node::from_command(command)
}

#[test]
fn a_browser_plays_a_match_with_native_players_to_the_same_state() {
    let test = "a_browser_plays_a_match_with_native_players_to_the_same_state";
    let Some(browser) = can_run(test) else { return };
    let dir = std::env::temp_dir().join(format!("archers-web-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    // Building the page's module takes a minute or two on a cold target.
    let deadline = Instant::now() + Duration::from_secs(900);
    let serve = Node::spawn(&[
        "serve",
        "--players",
        "3",
        "--units",
        "600",
        "--minutes",
        "2",
        "--seed",
        "5",
        "--http",
        "127.0.0.1:0",
        "--join-wait",
        "120",
        "--json",
    ]);
    let url = serve.line("URL ", deadline).expect("archers serve prints its link");
    let page = open_page(&browser, &format!("{url}&autoplay"), &dir.join("profile"));
    let summary = serve.line("{", deadline).map(|rest| format!("{{{rest}"));
    drop(page);
    let (ok, stderr) = serve.finish(deadline);
    let _ = std::fs::remove_dir_all(&dir);
    let summary = common::json(&summary.unwrap_or_else(|| panic!("no summary: {stderr}")));
    let browser = &summary["browser"];
    eprintln!(
        "page: {} frames, frame work p50 {} / p99 {} / max {} ms, frame to frame p99 {} ms; \
         order latency p95 {} ms (bots {}); module {} bytes",
        browser["frames"],
        browser["frame_work_ms_p50"],
        browser["frame_work_ms_p99"],
        browser["frame_work_ms_max"],
        browser["frame_interval_ms_p99"],
        browser["latency_ms_p95"],
        summary["natives"],
        summary["wasm_bytes"],
    );
    assert!(summary["agree"].as_bool() == Some(true), "players disagree: {summary}\n{stderr}");
    assert_eq!(summary["every_order_executed"].as_bool(), Some(true), "{summary}");
    assert!(ok, "archers serve failed: {stderr}");
    assert_eq!(browser["ended"], "finished", "{browser}");
    assert_eq!(browser["turns"], summary["turns"], "the page played every turn");
    assert!(browser["submitted"].as_u64().unwrap_or(0) > 0, "the page gave orders: {browser}");
    let natives = summary["natives"].as_array().expect("natives");
    assert_eq!(natives.len(), 2);
    let page_p95 = browser["latency_ms_p95"].as_f64().expect("the page's latency");
    for native in natives {
        let p95 = native["latency_ms_p95"].as_f64().expect("a bot's latency");
        assert!(
            page_p95 <= p95 * 1.2 && page_p95 >= p95 * 0.8,
            "the page's order latency p95 {page_p95} ms is not within 20 % of a bot's {p95} ms"
        );
    }
}
