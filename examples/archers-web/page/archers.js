// The archers battle in a canvas: the demo's game (World and bot) runs in the wasm module
// with phalanx's client; this file joins, moves datagrams (phalanx.js), draws, and reports.
//
// The link `archers serve` prints carries the seat's match code: /?code=XXXXXXXXXXXXX.
// Optional: &autoplay (a bot gives this player's orders, as a headless test plays), &shot=S
// (send the canvas as a PNG to the server S seconds into the match).
import { Session, readIo, writeIo } from "./phalanx.js";

const COLOURS = ["#e6554a", "#4a90e6", "#f2c744", "#59c26b", "#b46ee0", "#f08c3a", "#4fd1c5", "#e8e4d8"];
const MAP_SIZE = 4096;

const canvas = document.getElementById("battle");
const context = canvas.getContext("2d");
const status = document.getElementById("status");
const params = new URLSearchParams(location.search);

function say(text, error = false) {
  status.textContent = text;
  status.toggleAttribute("data-error", error);
}

/** The p-th percentile of `values` (sorted here). */
function percentile(values, p) {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

function draw(wasm, info, seat, hud) {
  const scale = canvas.width / MAP_SIZE;
  context.fillStyle = "#3d4a2f";
  context.fillRect(0, 0, canvas.width, canvas.height);
  const count = wasm.archers_units();
  const units = new Int32Array(wasm.memory.buffer, wasm.archers_units_ptr(), count * 3);
  for (let i = 0; i < count; i += 1) {
    const army = units[3 * i];
    context.fillStyle = COLOURS[army % COLOURS.length];
    const size = army === seat ? 4 : 3;
    context.fillRect(units[3 * i + 1] * scale - size / 2, units[3 * i + 2] * scale - size / 2, size, size);
  }
  context.fillStyle = "rgba(0, 0, 0, 0.55)";
  context.fillRect(0, 0, canvas.width, 24);
  context.fillStyle = COLOURS[seat % COLOURS.length];
  context.font = "14px system-ui, sans-serif";
  context.fillText(hud, 8, 17);
}

async function post(path, body, type) {
  await fetch(path, { method: "POST", headers: { "content-type": type }, body });
}

async function main() {
  const code = params.get("code");
  if (!code) throw new Error("no match code in the link (?code=...)");
  const info = await (await fetch("match")).json();
  const { instance } = await WebAssembly.instantiateStreaming(fetch("archers_web.wasm"), {});
  const wasm = instance.exports;
  const codeBytes = new TextEncoder().encode(code);
  writeIo(wasm, codeBytes);
  const seed = BigInt(info.seed);
  const requestLength = wasm.archers_join(
    codeBytes.length, info.players, info.units,
    Number(seed >> 32n), Number(seed & 0xffffffffn), info.turns,
  );
  if (requestLength < 0) throw new Error(`the match code or rules were refused (code ${requestLength})`);
  say("joining…");
  const session = await Session.open(wasm, {
    url: info.webtransport,
    certificateHash: info.certificate_hash,
    requestLength,
  });
  const seat = session.seat;
  wasm.archers_start(seat, params.has("autoplay") ? 1 : 0);
  canvas.addEventListener("click", (event) => {
    const box = canvas.getBoundingClientRect();
    const x = Math.round(((event.clientX - box.left) / box.width) * MAP_SIZE);
    const y = Math.round(((event.clientY - box.top) / box.height) * MAP_SIZE);
    wasm.archers_order(x, y, performance.now());
    session.flush();
  });
  const shotAt = params.has("shot") ? Number(params.get("shot")) * 1000 : null;
  let shotTaken = false;
  const frames = { work: [], intervals: [], last: null };
  let startedAt = null;

  const frame = (timestamp) => {
    const start = performance.now();
    if (frames.last !== null) frames.intervals.push(timestamp - frames.last);
    frames.last = timestamp;
    session.tick();
    wasm.archers_frame(start);
    session.flush();
    const turns = wasm.archers_turns();
    if (turns > 0 && startedAt === null) startedAt = start;
    const hud = `player ${seat} · turn ${turns} of ${info.turns} · ${session.sent} sent, ${session.received} received`;
    draw(wasm, info, seat, hud);
    frames.work.push(performance.now() - start);
    if (shotAt !== null && !shotTaken && startedAt !== null && start - startedAt >= shotAt) {
      shotTaken = true;
      canvas.toBlob((blob) => post("screenshot", blob, "image/png"), "image/png");
    }
    if (wasm.archers_ended() || session.closed) {
      finish(wasm, session, frames);
      return;
    }
    requestAnimationFrame(frame);
  };
  say(`playing as player ${seat}`);
  requestAnimationFrame(frame);
}

async function finish(wasm, session, { work, intervals }) {
  wasm.archers_frame(performance.now());
  const length = wasm.archers_report();
  const report = JSON.parse(new TextDecoder().decode(readIo(wasm, length)));
  report.frames = work.length;
  report.frame_work_ms_p50 = percentile(work, 50);
  report.frame_work_ms_p99 = percentile(work, 99);
  report.frame_work_ms_max = work.length ? Math.max(...work) : null;
  // From one frame to the next (the browser's frame rate, and any frame the work delayed).
  report.frame_interval_ms_p50 = percentile(intervals, 50);
  report.frame_interval_ms_p99 = percentile(intervals, 99);
  report.datagrams_sent = session.sent;
  report.datagrams_received = session.received;
  session.close();
  say(`match over (${report.ended ?? "closed"}): ${report.turns} turns, ${report.executed} orders executed`);
  await post("report", JSON.stringify(report), "application/json");
}

main().catch(async (error) => {
  say(`error: ${error.message}`, true);
  await post("report", JSON.stringify({ error: String(error.message) }), "application/json").catch(() => {});
});
