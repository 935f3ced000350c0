// A new connection's frames arrive in the order they were sent, even when the accepting end is
// busy as the connection comes up (a volunteer computes while its ring forms). node-datachannel
// (0.33, libdatachannel 0.24) reorders a channel's messages when some arrived before JavaScript
// took the channel: setting the message callback flushes them on the JavaScript thread while the
// SCTP thread flushes newer ones. Measured with this test and the dialer sending at once (its
// link made as an accepting end's, which does not wait for READY): frames came late in 2-5 of the
// 12 connections of every run (9 runs of 9 failed; 1 to 33 frames late per connection). It cost
// an honest volunteer its place: a ring refused "frame out of sequence" in a generation's first
// step and evicted the sender (test/e2e/imagenet-start, 2 full suites in 5). PeerJsLink's dialing
// end now sends nothing before it has heard the accepting end (its READY): every frame of every
// connection must come in order (35 runs did, 420 connections; two more stopped early, before
// this test re-dialed as formation does, when a dial failed its DTLS handshake).
// Real parts: a PeerJS signaling server, node-datachannel in two processes, PeerJsLink at both ends.
import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSignalingServer, type StandaloneSignaling } from '../../coordinator/signaling.ts';
import { ROOT } from '../../coordinator/local-volunteers.ts';
import { NODE_RTC_CONFIG, loadNodePeer } from '../../src/comm/node.ts';
import type { PeerLike } from '../../src/comm/peerjs-peer.ts';
import { PeerJsLink } from '../../src/comm/peerjs-link.ts';

/** Connections tried; each takes about a second. */
const TRIALS = 12;
const FRAMES = 400;
const FRAME_BYTES = 64 << 10;
/** The accepting end's event loop is busy this long once a connection's ICE is up. */
const BLOCK_MS = 300;
/** The ring's back-pressure (ring.ts DEFAULT_RING_SETTINGS). */
const HIGH_WATER = 1 << 20;
const LOW_WATER = 256 << 10;

interface Report { label: string; received: number; late: number; lateFrames: number[]; first: number; around: number[] }

let sig: StandaloneSignaling;
let child: ChildProcess | null = null;
let dialer: PeerLike | null = null;
const reports = new Map<string, (r: Report) => void>();
const early = new Map<string, Report>();

beforeAll(async () => {
  sig = await startSignalingServer({ path: '/signal' });
  const acceptor = sig.signaling.issue('acceptor');
  const me = sig.signaling.issue('dialer');
  child = spawn(
    process.execPath, ['--import', 'tsx', 'test/comm/ndc-order-peer.ts', acceptor.id, acceptor.token, String(sig.port), String(BLOCK_MS), String(FRAMES)],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let partial = '';
  const opened = new Promise<void>((resolve, reject) => {
    child!.once('exit', (code) => reject(new Error(`the accepting process exited (${code})`)));
    child!.stdout!.setEncoding('utf8').on('data', (d: string) => {
      const lines = (partial + d).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        const m = JSON.parse(line) as Partial<Report> & { open?: string };
        if (m.open) resolve();
        if (m.label === undefined) continue;
        const r = m as Report;
        const waiter = reports.get(r.label);
        if (waiter) waiter(r);
        else early.set(r.label, r);
      }
    });
  });
  const Peer = await loadNodePeer();
  dialer = new Peer(me.id, { host: '127.0.0.1', port: sig.port, path: '/signal', secure: false, token: me.token, config: NODE_RTC_CONFIG, debug: 0 });
  await Promise.all([opened, new Promise<void>((resolve) => dialer!.on('open', () => resolve()))]);
}, 60_000);

afterAll(async () => {
  dialer?.destroy();
  if (child && child.exitCode === null) {
    const gone = new Promise((resolve) => child!.once('exit', resolve));
    child.kill('SIGTERM');
    await Promise.race([gone, new Promise((resolve) => setTimeout(resolve, 3000))]);
    child.kill('SIGKILL');
  }
  await sig?.close();
});

/** The accepting process's report on the connection labelled `label`. */
function reportOf(label: string, timeoutMs: number): Promise<Report> {
  const got = early.get(label);
  if (got) return Promise.resolve(got);
  return new Promise<Report>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no report on ${label} within ${timeoutMs} ms`)), timeoutMs);
    reports.set(label, (r) => { clearTimeout(timer); resolve(r); });
  });
}

/** An open dialed link to the accepting process, labelled `label`; a dial that fails to open is made again, as link formation does. */
async function dial(label: string): Promise<{ link: PeerJsLink; label: string }> {
  for (let attempt = 0; ; attempt++) {
    const tried = `${label}.${attempt}`;
    const conn = dialer!.connect(
      'acceptor', { label: tried, metadata: { vt: 'ring', job: 1, generation: 1, from: 'dialer' }, serialization: 'raw', reliable: true },
    );
    if (!conn) throw new Error('PeerJS could not dial');
    const link = new PeerJsLink(conn, 'dialed');
    try {
      await link.opened;
      return { link, label: tried };
    } catch (e) {
      // The DTLS race of src/comm/node.ts (offerAsDtlsClient): the attempt fails at once, visibly.
      link.close();
      if (attempt >= 3) throw e;
    }
  }
}

/** Sends FRAMES numbered frames on `link` as a ring would: at once, with its back-pressure (for `withinMs` at most). */
async function sendNumbered(link: PeerJsLink, withinMs: number): Promise<void> {
  let wake: (() => void) | null = null;
  link.listen({ frame: () => undefined, drain: () => { wake?.(); }, close: () => { wake?.(); } });
  link.setLowWater(LOW_WATER);
  const deadline = performance.now() + withinMs;
  for (let i = 0; i < FRAMES; i++) {
    while (link.bufferedAmount > HIGH_WATER && !link.closed) {
      if (performance.now() > deadline) throw new Error(`the link took ${withinMs} ms without taking ${FRAMES} frames (${i} sent)`);
      await new Promise<void>((resolve) => {
        wake = resolve;
        setTimeout(resolve, 50);
      });
    }
    const frame = new Uint8Array(FRAME_BYTES);
    new DataView(frame.buffer).setUint32(0, i, true);
    link.send(frame);
  }
}

describe('frames of a new node-datachannel connection, the accepting end busy as it comes up', () => {
  it(`${TRIALS} connections of ${FRAMES} frames: every frame in the order sent`, async () => {
    const bad: Report[] = [];
    for (let t = 0; t < TRIALS; t++) {
      const { link, label } = await dial(`t${t}`);
      try {
        const report = reportOf(label, 30_000);
        // Awaited below; should sending fail first, the report's timeout is not an unhandled rejection.
        report.catch(() => undefined);
        await sendNumbered(link, 20_000);
        const r = await report;
        expect(r.received, `connection ${label}`).toBe(FRAMES);
        if (r.late > 0 || r.first >= 0) bad.push(r);
      } finally {
        link.close();
      }
    }
    expect(bad, `frames out of order: ${JSON.stringify(bad)}`).toEqual([]);
  }, 120_000);
});
