//! `archers serve`: a match against bots with one seat for a browser. It builds the page's
//! wasm module (`examples/archers-web`, once; or takes `--wasm`), hosts the match (QUIC for
//! the bots, WebTransport for the page, a fresh 13-day certificate the page pins), plays every
//! other seat with the demo's bot in this process, and serves the page over HTTP. stdout's
//! first line is `URL <link>` (the link carries the browser seat's match code); the summary
//! follows the match, with `--json` one JSON line last (what the end-to-end test reads).
//!
//! The page reports what it saw (`POST /report`: its turns, orders, state hash, latency and
//! frame times); with `--screenshot PATH`, a page opened with `&shot=S` sends its canvas as a
//! PNG S seconds into the match (`POST /screenshot`), written to PATH.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use archers::net::{self, ClientOutcome, HostOutcome, Match};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::routing::{get, post};
use axum::Router;
use phalanx::proto::JoinCode;
use phalanx::web::{BrowserConfig, BrowserIdentity};
use serde::Serialize;
use serde_json::Value;

use super::ServeArgs;

const INDEX: &str = include_str!("../../../archers-web/page/index.html");
const ARCHERS_JS: &str = include_str!("../../../archers-web/page/archers.js");
const PHALANX_JS: &str = include_str!("../../../../crates/phalanx-web/js/phalanx.js");

/// How long `archers serve` waits for the page's report once the match is over.
const REPORT_WAIT: Duration = Duration::from_secs(20);

/// What the HTTP handlers share.
struct Shared {
    wasm: Vec<u8>,
    /// `/match`: what the page needs besides its code.
    info: String,
    report: Mutex<Option<Value>>,
    reported: tokio::sync::Notify,
    screenshot: Option<PathBuf>,
}

/// One native (bot) player's side, in the summary.
#[derive(Debug, Serialize)]
struct NativeSide {
    player: u8,
    turns: u32,
    executed: u64,
    submitted: u64,
    final_state_hash: String,
    latency_ms_p50: Option<u32>,
    latency_ms_p95: Option<u32>,
    stall_ms: Option<u64>,
    ended: Option<String>,
}

/// The `--json` line.
#[derive(Debug, Serialize)]
struct ServeSummary {
    /// Every player (bots and the page) executed the same turns to the same state hash, and
    /// the host saw no desync.
    agree: bool,
    /// Every order submitted was executed by every player.
    every_order_executed: bool,
    players: usize,
    turns: u32,
    commands_sealed: u64,
    natives: Vec<NativeSide>,
    /// The page's report as it sent it (null: none came).
    browser: Option<Value>,
    wasm_bytes: usize,
}

/// Runs `archers serve`.
pub(crate) fn run(args: &ServeArgs) -> ExitCode {
    let wasm = match page_module(args.wasm.as_deref()) {
        Ok(wasm) => wasm,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    super::sockets::runtime().block_on(async {
        match serve(args, wasm).await {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::FAILURE,
            Err(error) => {
                eprintln!("error: {error}");
                ExitCode::FAILURE
            }
        }
    })
}

/// The page's module: `--wasm`, or built from this workspace into `target/web` (release,
/// wasm32-unknown-unknown), cargo's progress on stderr.
fn page_module(path: Option<&Path>) -> Result<Vec<u8>, String> {
    if let Some(path) = path {
        return std::fs::read(path).map_err(|error| format!("{}: {error}", path.display()));
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = root.join("target/web");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!(
        "archers serve: building the page's module (cargo build -p archers-web --release \
         --target wasm32-unknown-unknown; about a minute the first time)"
    );
    let status = Command::new(cargo)
        .current_dir(&root)
        .args(["build", "--release", "-p", "archers-web", "--target", "wasm32-unknown-unknown"])
        .arg("--target-dir")
        .arg(&target)
        .status()
        .map_err(|error| format!("cannot run cargo: {error}"))?;
    if !status.success() {
        return Err("the page's module did not build (is the target installed? \
                    `rustup target add wasm32-unknown-unknown`)"
            .into());
    }
    let path = target.join("wasm32-unknown-unknown/release/archers_web.wasm");
    std::fs::read(&path).map_err(|error| format!("{}: {error}", path.display()))
}

/// Hosts the match, serves the page, plays the bots; prints the summary. `Ok(false)`: the
/// players did not agree or an order was lost.
async fn serve(args: &ServeArgs, wasm: Vec<u8>) -> Result<bool, String> {
    let game = args.game.game();
    let tokens = net::seat_tokens(game.players);
    let names = ["localhost", "127.0.0.1"];
    let identity = BrowserIdentity::generate(&names, 13).map_err(|e| e.to_string())?;
    let browsers = BrowserConfig::new(identity, args.web);
    let session =
        net::HostSession::bind_with_browsers(args.bind, game, tokens.clone(), browsers).await?;
    let addr = session.local_addr().map_err(|e| e.to_string())?;
    let (web, hash) = session.browsers().ok_or("the host does not listen for browsers")?;
    let web_host =
        if web.ip().is_unspecified() { "127.0.0.1".to_owned() } else { web.ip().to_string() };
    let seed = game.seed.to_string();
    let info = serde_json::json!({
        "webtransport": format!("https://{web_host}:{}/phalanx", web.port()),
        "certificate_hash": hash.to_hex(),
        "players": game.players,
        "units": game.units,
        "seed": seed,
        "turns": game.turns,
    });
    let wasm_bytes = wasm.len();
    let shared = Arc::new(Shared {
        wasm,
        info: info.to_string(),
        report: Mutex::new(None),
        reported: tokio::sync::Notify::new(),
        screenshot: args.screenshot.clone(),
    });
    let listener = tokio::net::TcpListener::bind(args.http).await.map_err(|e| e.to_string())?;
    let http = listener.local_addr().map_err(|e| e.to_string())?;
    let app = router(Arc::clone(&shared));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let browser_seat = game.players - 1;
    let link = format!("http://{http}/?code={}", JoinCode(tokens[browser_seat]));
    println!("URL {link}");
    eprintln!(
        "archers serve: {} bots and you (player {browser_seat}), {} archers, {} turns; open \
         {link} in a browser with WebTransport (Chromium, Edge, Firefox); the match starts \
         when the page joins",
        game.players - 1,
        game.units,
        game.turns,
    );
    // Each bot on a thread of its own (a client's future stays on its runtime's thread).
    let mut bots = Vec::new();
    for &token in &tokens[..browser_seat] {
        let pin = session.pin();
        bots.push(std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
            let runtime = runtime.map_err(|error| error.to_string())?;
            runtime.block_on(net::play(addr, pin, token, game, None, |_| {}))
        }));
    }
    let limit = Duration::from_secs_f64(args.game.minutes * 60.0 * 3.0 + 120.0);
    let join_wait = Duration::from_secs(args.join_wait_s);
    let (mut waiting, mut ended, config) = (None, false, game.session());
    let host = session
        .serve(join_wait, limit, |event| {
            let words = super::sockets::host_event_words(event, &mut waiting, &mut ended, &config);
            eprintln!("host: {words}");
        })
        .await?;
    let mut natives = Vec::new();
    for bot in bots {
        let joined = tokio::task::spawn_blocking(move || bot.join()).await;
        let played = joined.map_err(|e| e.to_string())?;
        natives.push(played.map_err(|_| "a bot's thread panicked".to_owned())??);
    }
    let browser = page_report(&shared).await;
    Ok(summarise(game, &host, &natives, browser, wasm_bytes, args.json))
}

/// The page's report: at once if it came, else within [`REPORT_WAIT`] (`None`: it did not).
async fn page_report(shared: &Shared) -> Option<Value> {
    let waited = tokio::time::timeout(REPORT_WAIT, async {
        loop {
            let notified = shared.reported.notified();
            if let Some(report) = shared.report.lock().ok()?.clone() {
                return Some(report);
            }
            notified.await;
        }
    });
    waited.await.ok().flatten()
}

/// The page, its scripts and module, the match's details; the page's report and screenshot.
fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/", get(|| async { ([(CONTENT_TYPE, "text/html; charset=utf-8")], INDEX) }))
        .route("/archers.js", get(|| async { ([(CONTENT_TYPE, "text/javascript")], ARCHERS_JS) }))
        .route("/phalanx.js", get(|| async { ([(CONTENT_TYPE, "text/javascript")], PHALANX_JS) }))
        .route(
            "/archers_web.wasm",
            get(|State(shared): State<Arc<Shared>>| async move {
                ([(CONTENT_TYPE, "application/wasm")], shared.wasm.clone())
            }),
        )
        .route(
            "/match",
            get(|State(shared): State<Arc<Shared>>| async move {
                ([(CONTENT_TYPE, "application/json")], shared.info.clone())
            }),
        )
        .route(
            "/report",
            post(|State(shared): State<Arc<Shared>>, body: String| async move {
                let report: Value = serde_json::from_str(&body)
                    .unwrap_or_else(|error| serde_json::json!({ "error": error.to_string() }));
                if let Ok(mut slot) = shared.report.lock() {
                    *slot = Some(report);
                }
                shared.reported.notify_waiters();
            }),
        )
        .route(
            "/screenshot",
            post(|State(shared): State<Arc<Shared>>, body: Bytes| async move {
                if let Some(path) = &shared.screenshot {
                    match std::fs::write(path, &body) {
                        Ok(()) => eprintln!("archers serve: saved {}", path.display()),
                        Err(error) => eprintln!("archers serve: {}: {error}", path.display()),
                    }
                }
            }),
        )
        .with_state(shared)
}

/// Prints the summary (and with `json` the JSON line): whether every player agreed and
/// executed every order.
fn summarise(
    game: Match,
    host: &HostOutcome,
    natives: &[ClientOutcome],
    browser: Option<Value>,
    wasm_bytes: usize,
    json: bool,
) -> bool {
    let natives: Vec<NativeSide> = natives
        .iter()
        .map(|outcome| NativeSide {
            player: outcome.player,
            turns: outcome.turns,
            executed: outcome.executed,
            submitted: outcome.submitted,
            final_state_hash: format!("{:016x}", outcome.final_state_hash),
            latency_ms_p50: outcome.latency_ms.map(|(p50, _, _)| p50),
            latency_ms_p95: outcome.latency_ms.map(|(_, p95, _)| p95),
            stall_ms: outcome.stall_ms,
            ended: outcome.ended.clone(),
        })
        .collect();
    let field = |name: &str| browser.as_ref().and_then(|report| report.get(name).cloned());
    let browser_hash = field("final_state_hash").and_then(|v| v.as_str().map(str::to_owned));
    let browser_turns = field("turns").and_then(|v| v.as_u64());
    let browser_executed = field("executed").and_then(|v| v.as_u64());
    let browser_submitted = field("submitted").and_then(|v| v.as_u64()).unwrap_or(0);
    let agree = host.desyncs.is_empty()
        && natives.iter().all(|native| {
            Some(&native.final_state_hash) == browser_hash.as_ref()
                && Some(u64::from(native.turns)) == browser_turns
        });
    let submitted: u64 = natives.iter().map(|n| n.submitted).sum::<u64>() + browser_submitted;
    let every_order_executed = submitted == host.commands_sealed
        && browser_executed == Some(host.commands_sealed)
        && natives.iter().all(|native| native.executed == host.commands_sealed);
    println!(
        "players {}: {} (bots {}, the page {}); {} orders submitted, {} sealed, {}",
        game.players,
        if agree { "agree" } else { "DO NOT AGREE" },
        natives.len(),
        if browser.is_some() { "reported" } else { "sent no report" },
        submitted,
        host.commands_sealed,
        if every_order_executed { "every one executed by every player" } else { "SOME LOST" },
    );
    for native in &natives {
        println!(
            "  bot {}: {} turns, hash {}, order latency p95 {} ms",
            native.player,
            native.turns,
            native.final_state_hash,
            native.latency_ms_p95.map_or("-".into(), |p95| p95.to_string()),
        );
    }
    if let Some(report) = &browser {
        println!("  page: {report}");
    }
    if json {
        let summary = ServeSummary {
            agree,
            every_order_executed,
            players: game.players,
            turns: game.turns,
            commands_sealed: host.commands_sealed,
            natives,
            browser,
            wasm_bytes,
        };
        println!("{}", serde_json::to_string(&summary).unwrap_or_default());
    }
    agree && every_order_executed
}
