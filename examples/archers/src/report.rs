//! The self-contained HTML report: the run's figures as embedded JSON, drawn into SVG by a
//! small inline script (no network, no external files). Plots: every command's latency,
//! stalls, wire bandwidth per player up and down, where the bytes go (phalanx's payload,
//! headers, the transport's own packets), the pace over time, and the battlefield as
//! an animation of snapshots. The script marks `<body data-rendered="yes">` when it has drawn
//! everything, or sets `data-error` with the message if it failed.

use phalanx_sim::{PlayerReport, Sample};
use serde_json::{json, Value};

use crate::game::Snapshot;
use crate::world::MAP_SIZE;

/// UDP + IPv4 header bytes added to each QUIC datagram on the wire.
pub const UDP_IP_BYTES: u64 = 28;

/// Everything the report shows.
#[derive(Debug)]
pub struct ReportInput<'a> {
    /// One line describing the run (players, network, seed).
    pub subtitle: String,
    /// The summary table: `(measure, value)`.
    pub summary: Vec<(String, String)>,
    /// Every player's report: its counter samples over simulated time, and `(simulated ms
    /// executed, latency ms)` of each of its commands.
    pub players: &'a [PlayerReport],
    /// Pictures of the battlefield, in turn order.
    pub snapshots: &'a [Snapshot],
    /// Simulated ms at which something happened to the network or the game, with a label
    /// (partitions, desync reports): drawn as vertical markers.
    pub markers: Vec<(u64, String)>,
}

fn seconds(ms: u64) -> f64 {
    (ms as f64 / 100.0).round() / 10.0
}

fn round2(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}

/// Per-interval rates between consecutive samples: `(time s, value per second)`.
fn rates(samples: &[Sample], pick: impl Fn(&Sample) -> f64) -> Vec<[f64; 2]> {
    samples
        .windows(2)
        .filter(|w| w[1].at_ms > w[0].at_ms)
        .map(|w| {
            let dt = (w[1].at_ms - w[0].at_ms) as f64 / 1e3;
            [seconds(w[1].at_ms), round2((pick(&w[1]) - pick(&w[0])) / dt)]
        })
        .collect()
}

fn wire_kbps(bytes: u64, datagrams: u64) -> f64 {
    (bytes + UDP_IP_BYTES * datagrams) as f64 * 8.0 / 1e3
}

/// The mean over players of their per-interval rates (as many intervals as the shortest
/// player's; the samples fall on the same simulated seconds).
fn mean_rates(players: &[PlayerReport], pick: impl Fn(&Sample) -> f64) -> Vec<[f64; 2]> {
    let each: Vec<Vec<[f64; 2]>> = players.iter().map(|p| rates(&p.samples, &pick)).collect();
    let intervals = each.iter().map(Vec::len).min().unwrap_or(0);
    (0..intervals)
        .map(|i| {
            let sum: f64 = each.iter().map(|rates| rates[i][1]).sum();
            [each[0][i][0], round2(sum / each.len() as f64)]
        })
        .collect()
}

/// Where each player's bytes go, up + down, mean over players: phalanx's payload and the
/// headers around it (kbit/s), and phalanx's datagrams against the transport's own packets
/// (per second).
fn split(players: &[PlayerReport]) -> Value {
    let payload = |x: &Sample| (x.app_bytes.0 + x.app_bytes.1) as f64 * 8.0 / 1e3;
    let wire = |x: &Sample| {
        wire_kbps(x.wire_bytes.0, x.wire_datagrams.0)
            + wire_kbps(x.wire_bytes.1, x.wire_datagrams.1)
    };
    let ours = |x: &Sample| (x.app_datagrams.0 + x.app_datagrams.1) as f64;
    let all = |x: &Sample| (x.wire_datagrams.0 + x.wire_datagrams.1) as f64;
    json!({
        "payload": mean_rates(players, payload),
        "headers": mean_rates(players, |x| wire(x) - payload(x)),
        "ours": mean_rates(players, ours),
        // (The two counts are read a moment apart: an interval's rate is never below zero.)
        "transport": mean_rates(players, |x| all(x) - ours(x))
            .into_iter()
            .map(|[at, rate]| [at, rate.max(0.0)])
            .collect::<Vec<_>>(),
    })
}

/// The data the page's script draws.
pub fn data(input: &ReportInput<'_>) -> Value {
    let latency: Vec<Value> = input
        .players
        .iter()
        .map(|player| {
            player.command_latencies.iter().map(|&(at, ms)| json!([seconds(at), ms])).collect()
        })
        .collect();
    let stall: Vec<Value> = input
        .players
        .iter()
        .map(|p| json!(rates(&p.samples, |x| x.stall_ms as f64 / 1e3 * 100.0)))
        .collect();
    let up: Vec<Value> = input
        .players
        .iter()
        .map(|p| json!(rates(&p.samples, |x| wire_kbps(x.wire_bytes.0, x.wire_datagrams.0))))
        .collect();
    let down: Vec<Value> = input
        .players
        .iter()
        .map(|p| json!(rates(&p.samples, |x| wire_kbps(x.wire_bytes.1, x.wire_datagrams.1))))
        .collect();
    // The pace is the host's: every player sees the same; take the longest series.
    let pace = input
        .players
        .iter()
        .map(|p| &p.samples)
        .max_by_key(|s| s.len())
        .cloned()
        .unwrap_or_default();
    let turn_length: Vec<Value> =
        pace.iter().map(|s| json!([seconds(s.at_ms), s.turn_length_ms])).collect();
    let delay: Vec<Value> =
        pace.iter().map(|s| json!([seconds(s.at_ms), s.command_delay_turns])).collect();
    // Turn → simulated time, from the samples, to place the battlefield frames.
    let time_of = |turn: u32| {
        pace.iter().find(|s| s.turn >= turn).or(pace.last()).map_or(0.0, |s| seconds(s.at_ms))
    };
    let frames: Vec<Value> = input
        .snapshots
        .iter()
        .map(|snap| {
            let units: Vec<i32> = snap
                .units
                .iter()
                .flat_map(|&(army, x, y)| [i32::from(army), x / 4, y / 4])
                .collect();
            json!({ "turn": snap.turn, "t": time_of(snap.turn), "units": units })
        })
        .collect();
    let markers: Vec<Value> =
        input.markers.iter().map(|(at, label)| json!([seconds(*at), label])).collect();
    json!({
        "players": input.players.len(),
        "map": MAP_SIZE / 4,
        "latency": latency,
        "stall": stall,
        "up": up,
        "down": down,
        "split": split(input.players),
        "turn_length": turn_length,
        "delay": delay,
        "frames": frames,
        "markers": markers,
    })
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The whole page.
pub fn html(input: &ReportInput<'_>) -> String {
    // `</` cannot occur in numbers, and labels are escaped for the script element too.
    let data = data(input).to_string().replace("</", "<\\/");
    let rows: String = input
        .summary
        .iter()
        .map(|(k, v)| format!("<tr><th>{}</th><td>{}</td></tr>\n", escape(k), escape(v)))
        .collect();
    let mut page = String::with_capacity(data.len() + 16_384);
    page.push_str(HEAD);
    page.push_str(&format!(
        "<h1>phalanx — 1500 archers</h1>\n<p class=\"sub\">{}</p>\n<p id=\"error\"></p>\n\
         <table class=\"summary\">\n{rows}</table>\n",
        escape(&input.subtitle)
    ));
    page.push_str(BODY);
    page.push_str("<script type=\"application/json\" id=\"data\">");
    page.push_str(&data);
    page.push_str("</script>\n<script>\n");
    page.push_str(SCRIPT);
    page.push_str("</script>\n</body>\n</html>\n");
    page
}

const HEAD: &str = r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>phalanx — 1500 archers report</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px auto; max-width: 980px; color: #222; }
h1 { margin-bottom: 0; } h2 { margin-top: 28px; font-size: 17px; }
.sub { color: #555; margin-top: 4px; }
table.summary { border-collapse: collapse; }
table.summary th { text-align: left; font-weight: normal; color: #555; padding: 2px 18px 2px 0; }
table.summary td { font-family: ui-monospace, monospace; }
svg.plot { width: 100%; height: auto; background: #fff; border: 1px solid #ddd; }
svg text { font: 11px system-ui, sans-serif; fill: #444; }
.legend span { display: inline-block; margin-right: 12px; font-size: 12px; }
.legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px; }
#error { color: #b00; font-weight: bold; }
.note { color: #555; font-size: 13px; }
</style>
</head>
<body>
"#;

const BODY: &str = r#"<div class="legend" id="legend"></div>
<h2>Command latency</h2>
<p class="note">Every command, from submit to execution on its own player, by the simulated time it executed.</p>
<svg class="plot" id="plot-latency" viewBox="0 0 900 260"></svg>
<h2>Stalls</h2>
<p class="note">Share of each second a player's game waited for a turn beyond its length (%).</p>
<svg class="plot" id="plot-stall" viewBox="0 0 900 220"></svg>
<h2>Wire bandwidth per player, upstream</h2>
<p class="note">kbit/s sent by each player: the transport's datagrams plus 28 B of UDP/IP each.</p>
<svg class="plot" id="plot-up" viewBox="0 0 900 220"></svg>
<h2>Wire bandwidth per player, downstream</h2>
<p class="note">kbit/s the host sent each player.</p>
<svg class="plot" id="plot-down" viewBox="0 0 900 220"></svg>
<h2>Where the bytes go</h2>
<p class="note">Mean per player, up + down, kbit/s: phalanx's payload (blue) and the headers
around it (red: UDP/IP and the transport's, per datagram; downstream also datagrams lost on
the way).</p>
<svg class="plot" id="plot-split" viewBox="0 0 900 200"></svg>
<p class="note">Mean per player, up + down, datagrams a second: phalanx's (blue) and the
transport's own (red: QUIC's ACK-only packets and handshake, the UDP transport's
reliable-message segments; downstream also phalanx's datagrams lost on the way).</p>
<svg class="plot" id="plot-packets" viewBox="0 0 900 200"></svg>
<h2>Pace</h2>
<p class="note">Speed control: the turn length and the command delay the host set, over time.</p>
<svg class="plot" id="plot-turn" viewBox="0 0 900 180"></svg>
<svg class="plot" id="plot-delay" viewBox="0 0 900 180"></svg>
<h2>Battlefield</h2>
<p class="note" id="field-caption"></p>
<p><button id="field-play" type="button">play</button>
<input id="field-frame" type="range" min="0" max="0" value="0" style="width:70%"></p>
<svg class="plot" id="plot-field" viewBox="0 0 1024 1024" style="max-width:640px"></svg>
"#;

const SCRIPT: &str = r#"(function () {
'use strict';
var NS = 'http://www.w3.org/2000/svg';
var COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf'];
function el(tag, attrs, parent) {
  var node = document.createElementNS(NS, tag);
  for (var key in attrs) { node.setAttribute(key, attrs[key]); }
  if (parent) { parent.appendChild(node); }
  return node;
}
function nice(max, ticks) {
  if (!(max > 0)) { return 1; }
  var step = Math.pow(10, Math.floor(Math.log10(max)));
  var units = [0.1, 0.2, 0.25, 0.5, 1, 2, 2.5, 5, 10];
  for (var i = 0; i < units.length; i++) { if (units[i] * step * ticks >= max) { return units[i] * step; } }
  return 10 * step;
}
// series: [{points: [[x, y]...], color, scatter, step}]
function chart(id, series, yLabel, xMax, markers) {
  var svg = document.getElementById(id);
  var box = svg.viewBox.baseVal, W = box.width, H = box.height;
  var L = 56, R = 12, T = 12, B = 30, w = W - L - R, h = H - T - B;
  var yMax = 0;
  series.forEach(function (s) { s.points.forEach(function (p) { if (p[1] > yMax) { yMax = p[1]; } }); });
  var yStep = nice(yMax * 1.05, 5), yTop = Math.max(yStep, Math.ceil(yMax * 1.05 / yStep) * yStep);
  var xStep = nice(xMax, 8), xTop = Math.max(xStep, Math.ceil(xMax / xStep) * xStep);
  function X(x) { return L + w * x / xTop; }
  function Y(y) { return T + h - h * y / yTop; }
  var axes = el('g', {}, svg);
  for (var y = 0; y <= yTop + 1e-9; y += yStep) {
    el('line', {x1: L, x2: L + w, y1: Y(y), y2: Y(y), stroke: '#eee'}, axes);
    el('text', {x: L - 6, y: Y(y) + 4, 'text-anchor': 'end'}, axes).textContent = +y.toFixed(2);
  }
  for (var x = 0; x <= xTop + 1e-9; x += xStep) {
    el('line', {x1: X(x), x2: X(x), y1: T, y2: T + h, stroke: '#f3f3f3'}, axes);
    el('text', {x: X(x), y: T + h + 16, 'text-anchor': 'middle'}, axes).textContent = x + ' s';
  }
  el('rect', {x: L, y: T, width: w, height: h, fill: 'none', stroke: '#999'}, axes);
  var label = el('text', {x: 14, y: T + h / 2, transform: 'rotate(-90 14 ' + (T + h / 2) + ')', 'text-anchor': 'middle'}, axes);
  label.textContent = yLabel;
  (markers || []).forEach(function (m, i) {
    el('line', {x1: X(m[0]), x2: X(m[0]), y1: T, y2: T + h, stroke: '#aaa', 'stroke-dasharray': '4 3'}, axes);
    el('text', {x: X(m[0]) + 3, y: T + 11 + 13 * (i % 3)}, axes).textContent = m[1];
  });
  var drawn = 0;
  series.forEach(function (s) {
    if (s.scatter) {
      var g = el('g', {fill: s.color, 'fill-opacity': 0.55}, svg);
      s.points.forEach(function (p) { el('circle', {cx: X(p[0]).toFixed(1), cy: Y(p[1]).toFixed(1), r: 2.2}, g); drawn++; });
    } else {
      var d = '';
      s.points.forEach(function (p, i) {
        if (i > 0 && s.step) { d += 'L' + X(p[0]).toFixed(1) + ',' + Y(s.points[i - 1][1]).toFixed(1); }
        d += (i ? 'L' : 'M') + X(p[0]).toFixed(1) + ',' + Y(p[1]).toFixed(1);
      });
      if (d === '') { d = 'M' + L + ',' + Y(0) + 'L' + (L + w) + ',' + Y(0); }
      el('path', {d: d, fill: 'none', stroke: s.color, 'stroke-width': 1.4, 'stroke-linejoin': 'round'}, svg);
      drawn++;
    }
  });
  svg.setAttribute('data-drawn', drawn);
}
function perPlayer(lists, scatter) {
  return lists.map(function (points, i) { return {points: points, color: COLORS[i % 8], scatter: scatter}; });
}
try {
  var D = JSON.parse(document.getElementById('data').textContent);
  var xMax = 1;
  ['latency', 'stall', 'up', 'down'].forEach(function (k) {
    D[k].forEach(function (list) { list.forEach(function (p) { if (p[0] > xMax) { xMax = p[0]; } }); });
  });
  var legend = document.getElementById('legend');
  for (var p = 0; p < D.players; p++) {
    var item = document.createElement('span');
    var swatch = document.createElement('i');
    swatch.style.background = COLORS[p % 8];
    item.appendChild(swatch);
    item.appendChild(document.createTextNode('player ' + p));
    legend.appendChild(item);
  }
  chart('plot-latency', perPlayer(D.latency, true), 'ms', xMax, D.markers);
  chart('plot-stall', perPlayer(D.stall, false), '% waiting', xMax, D.markers);
  chart('plot-up', perPlayer(D.up, false), 'kbit/s', xMax, D.markers);
  chart('plot-down', perPlayer(D.down, false), 'kbit/s', xMax, D.markers);
  chart('plot-split', [{points: D.split.payload, color: COLORS[0]},
    {points: D.split.headers, color: COLORS[1]}], 'kbit/s', xMax, D.markers);
  chart('plot-packets', [{points: D.split.ours, color: COLORS[0]},
    {points: D.split.transport, color: COLORS[1]}], 'datagrams/s', xMax, D.markers);
  chart('plot-turn', [{points: D.turn_length, color: '#333', step: true}], 'turn ms', xMax, D.markers);
  chart('plot-delay', [{points: D.delay, color: '#333', step: true}], 'delay, turns', xMax, D.markers);

  var field = document.getElementById('plot-field');
  el('rect', {x: 0, y: 0, width: D.map, height: D.map, fill: '#f4f1e6'}, field);
  var layer = el('g', {}, field);
  var slider = document.getElementById('field-frame');
  var caption = document.getElementById('field-caption');
  function show(index) {
    var frame = D.frames[index];
    while (layer.firstChild) { layer.removeChild(layer.firstChild); }
    if (!frame) { caption.textContent = 'no snapshots'; return; }
    var alive = [];
    for (var i = 0; i + 2 < frame.units.length; i += 3) {
      var army = frame.units[i];
      alive[army] = (alive[army] || 0) + 1;
      el('circle', {cx: frame.units[i + 1], cy: frame.units[i + 2], r: 6, fill: COLORS[army % 8]}, layer);
    }
    var counts = [];
    for (var a = 0; a < D.players; a++) { counts.push('player ' + a + ': ' + (alive[a] || 0)); }
    caption.textContent = 'Turn ' + frame.turn + ' (' + frame.t + ' s): ' + frame.units.length / 3 +
      ' archers standing — ' + counts.join(', ');
    field.setAttribute('data-drawn', frame.units.length / 3);
  }
  slider.max = Math.max(0, D.frames.length - 1);
  slider.value = slider.max;
  slider.addEventListener('input', function () { show(+slider.value); });
  var timer = null;
  document.getElementById('field-play').addEventListener('click', function () {
    if (timer) { clearInterval(timer); timer = null; return; }
    slider.value = 0; show(0);
    timer = setInterval(function () {
      if (+slider.value >= +slider.max) { clearInterval(timer); timer = null; return; }
      slider.value = +slider.value + 1; show(+slider.value);
    }, 400);
  });
  show(D.frames.length - 1);
  document.body.setAttribute('data-rendered', 'yes');
} catch (e) {
  document.body.setAttribute('data-error', String(e));
  document.getElementById('error').textContent = 'The report failed to render: ' + e;
}
})();
"#;
