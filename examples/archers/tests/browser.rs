//! The HTML report renders in a real browser: a short match writes its report, headless
//! Chromium loads it from a file and dumps the DOM after the page's script ran, and every plot
//! must hold drawn elements — one latency point per command the run counted, the battlefield's
//! living archers — with the script's `data-rendered="yes"` mark and no error mark.
//!
//! Skips (with a message) when no Chromium is installed, unless `PHALANX_REQUIRE_BROWSER` is
//! set (CI sets it, so there a missing browser fails). Bounded: Chromium is killed after 60 s.

#![allow(clippy::print_stderr)] // the skip message

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

/// The DOM of `page` after its scripts ran, from headless Chromium (killed at 60 s).
fn dump_dom(browser: &PathBuf, page: &std::path::Path, profile: &std::path::Path) -> String {
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromium");
    let mut stdout = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut dom = String::new();
        let _ = stdout.read_to_string(&mut dom);
        dom
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("chromium did not finish within 60 s");
            }
        }
    }
    reader.join().expect("the reader thread")
}

/// The markup of the `<svg>` element with id `id`.
fn svg<'a>(dom: &'a str, id: &str) -> &'a str {
    let start = dom.find(&format!("id=\"{id}\"")).unwrap_or_else(|| panic!("no #{id}"));
    let end = dom[start..].find("</svg>").map(|e| start + e).unwrap_or_else(|| panic!("#{id}"));
    &dom[start..end]
}

#[test]
fn report_renders_its_plots_in_headless_chromium() {
    let Some(browser) = common::chromium() else {
        assert!(
            std::env::var_os("PHALANX_REQUIRE_BROWSER").is_none(),
            "PHALANX_REQUIRE_BROWSER is set but no chromium was found"
        );
        eprintln!("SKIPPED report_renders_its_plots_in_headless_chromium: no chromium in PATH");
        return;
    };
    let dir = std::env::temp_dir().join(format!("archers-browser-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let report = dir.join("report.html");
    let output = Command::new(env!("CARGO_BIN_EXE_archers"))
        .args(["--minutes", "0.4", "--units", "400", "--players", "6", "--seed", "3", "--json"])
        .arg("--report")
        .arg(&report)
        .output()
        .expect("the demo runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8(output.stdout).expect("utf-8");
    let json = common::json(stdout.lines().last().expect("a JSON line"));
    let commands = json["commands_executed"].as_u64().expect("commands_executed") as usize;
    let seconds = json["sim_seconds"].as_f64().expect("sim_seconds");

    let dom = dump_dom(&browser, &report, &dir.join("profile"));
    let _ = std::fs::remove_dir_all(&dir);
    let body = dom.find("<body").map(|i| &dom[i..dom[i..].find('>').map_or(dom.len(), |e| i + e)]);
    let body = body.expect("a body element");
    assert!(!body.contains("data-error"), "the script failed: {body}");
    assert!(body.contains("data-rendered=\"yes\""), "the script did not finish: {body}");

    let latency = svg(&dom, "plot-latency");
    assert_eq!(latency.matches("<circle").count(), commands, "one point per command");
    for id in ["plot-stall", "plot-up", "plot-down"] {
        // One line per player, and the axes' labels.
        assert_eq!(svg(&dom, id).matches("<path").count(), 6, "#{id}");
    }
    for id in ["plot-split", "plot-packets"] {
        // Two lines (payload and headers; phalanx's datagrams and the transport's), each a
        // vertex a sample.
        let plot = svg(&dom, id);
        assert_eq!(plot.matches("<path").count(), 2, "#{id}");
        let vertices = plot.matches('L').count();
        assert!(vertices as f64 >= seconds, "#{id}: {vertices} points for {seconds} s");
    }
    for id in ["plot-turn", "plot-delay"] {
        let plot = svg(&dom, id);
        assert_eq!(plot.matches("<path").count(), 1, "#{id}");
        // A pace line spans the run: as many vertices as samples, about one a second.
        let vertices = plot.matches('L').count();
        assert!(vertices as f64 >= seconds * 0.5, "#{id}: {vertices} points for {seconds} s");
    }
    let field_svg = svg(&dom, "plot-field");
    let standing = field_svg.matches("<circle").count();
    assert!(standing > 0 && standing <= 400, "{standing} archers drawn");
    assert!(dom.contains("archers standing"), "the battlefield caption");
}
