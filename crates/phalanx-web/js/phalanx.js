// phalanx.js: carries a phalanx-web module's bytes over the browser's WebTransport.
//
// The wasm module (phalanx-web's `phx_` exports, usually linked into the game's own module)
// runs the session: the join, acknowledgements, resends, the turns. This file only moves bytes
// between the module's I/O buffer and a WebTransport session, and keeps the module's timers.
// No build step, no dependencies: an ES module a page imports as it is.
//
//   const len = wasm.phx_join(tokenHi, tokenLo);  // or the game's own join export
//   const session = await Session.open(wasm, { url, certificateHash, requestLength: len });
//   // every frame (requestAnimationFrame):
//   session.tick();                 // due timers, and what they send
//   /* the game takes its turns and submits its orders in the module */
//   session.flush();                // sends what the frame queued
//
// `url` is the host's WebTransport address (`https://host:port/phalanx`); `certificateHash`
// the SHA-256 of its certificate in hex, as the lobby hands it to the page (the host's
// `HostControl::browsers`): the browser pins it instead of asking a certificate authority.

/** The bytes of a hex string. */
export function hexBytes(hex) {
  if (hex.length % 2 !== 0 || /[^0-9a-fA-F]/.test(hex)) {
    throw new Error(`not a hex string: ${hex}`);
  }
  const bytes = new Uint8Array(hex.length / 2);
  for (let i = 0; i < bytes.length; i += 1) {
    bytes[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  }
  return bytes;
}

/** Copies `bytes` into the module's I/O buffer (made that long). */
export function writeIo(wasm, bytes) {
  const ptr = wasm.phx_io(bytes.length);
  if (ptr === 0) {
    throw new Error(`${bytes.length} bytes: more than the module's I/O buffer holds`);
  }
  new Uint8Array(wasm.memory.buffer, ptr, bytes.length).set(bytes);
}

/** A copy of the I/O buffer's first `len` bytes. */
export function readIo(wasm, len) {
  // Asking for the length the buffer has keeps its bytes.
  const ptr = wasm.phx_io(len);
  return new Uint8Array(wasm.memory.buffer, ptr, len).slice();
}

/** Everything a readable stream yields, to its end, as one array. */
async function readToEnd(readable) {
  const reader = readable.getReader();
  const chunks = [];
  let length = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    chunks.push(value);
    length += value.length;
  }
  const bytes = new Uint8Array(length);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.length;
  }
  return bytes;
}

/** A joined session: the module's client on one WebTransport session. */
export class Session {
  /**
   * Opens a WebTransport session to `url` pinning `certificateHash` (hex), sends the join
   * request the module left in its I/O buffer (`requestLength` bytes) on a bidirectional
   * stream, hands the host's reply to `phx_join_reply` and starts carrying datagrams.
   * Resolves to the session (its `seat`: the player id; 255 for a spectator); rejects when
   * the host cannot be reached or refuses the join.
   */
  static async open(wasm, { url, certificateHash, requestLength }) {
    const request = readIo(wasm, requestLength);
    const transport = new WebTransport(url, {
      serverCertificateHashes: [{ algorithm: "sha-256", value: hexBytes(certificateHash) }],
    });
    await transport.ready;
    const stream = await transport.createBidirectionalStream();
    const writer = stream.writable.getWriter();
    await writer.write(request);
    await writer.close();
    const reply = await readToEnd(stream.readable);
    writeIo(wasm, reply);
    const seat = wasm.phx_join_reply(reply.length, performance.now());
    if (seat < 0) {
      transport.close();
      throw new Error(`the join did not complete (code ${seat})`);
    }
    return new Session(wasm, transport, seat);
  }

  constructor(wasm, transport, seat) {
    this.wasm = wasm;
    this.transport = transport;
    this.seat = seat;
    /** Datagrams sent and received, for the page's figures. */
    this.sent = 0;
    this.received = 0;
    /** Set once the session closed (the host went away, or `close`). */
    this.closed = false;
    this.writer = transport.datagrams.writable.getWriter();
    this.timer = null;
    this.timerAt = Infinity;
    transport.closed.then(() => this.#onClosed(), () => this.#onClosed());
    this.#receive();
    this.flush();
  }

  /** Fires the module's due timers and sends what they queued. */
  tick() {
    if (this.closed) return;
    this.wasm.phx_timeout(performance.now());
    this.flush();
  }

  /** Sends every datagram the module has queued, then arms the timer for its next wakeup. */
  flush() {
    if (this.closed) return;
    const now = performance.now();
    for (;;) {
      const len = this.wasm.phx_poll_datagram(now);
      if (len < 0) break;
      // A datagram may be dropped on the way, as any: the session resends what matters.
      this.writer.write(readIo(this.wasm, len)).catch(() => {});
      this.sent += 1;
    }
    this.#arm();
  }

  /** Closes the WebTransport session (the module's client should `leave` first). */
  close() {
    this.flush();
    this.transport.close();
  }

  async #receive() {
    const reader = this.transport.datagrams.readable.getReader();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        writeIo(this.wasm, value);
        this.wasm.phx_datagram(value.length, performance.now());
        this.received += 1;
        this.flush();
      }
    } catch {
      // The session closed under the read.
    }
    this.#onClosed();
  }

  #arm() {
    const at = this.wasm.phx_wakeup();
    if (at < 0 || at >= this.timerAt) return;
    clearTimeout(this.timer);
    this.timerAt = at;
    // The module reads whole milliseconds: a millisecond past `at`, the timer is due.
    const delay = Math.max(1, at + 1 - performance.now());
    this.timer = setTimeout(() => {
      this.timer = null;
      this.timerAt = Infinity;
      this.tick();
    }, delay);
  }

  #onClosed() {
    this.closed = true;
    clearTimeout(this.timer);
  }
}
