// One benchmark peer in its own OS process (forked by bench/allreduce.ts, run with
// `node --import tsx`). It registers with the parent's signaling server, then does what the
// parent says over IPC: prepare a task (form its links), run timed rounds on 'go' (timing its
// own part), release the links. Peers never talk to each other except over WebRTC.
//
// Frames of a round may arrive before this process has seen its own 'go' (another peer got it
// first), so every receive handler works whenever a frame arrives; a round only waits until the
// counts it needs are reached. State is reset at the end of each round, before 'done' is sent,
// and the parent sends the next 'go' only after every peer's 'done': no frame of round k+1 can
// meet round k's state.
import { DEFAULT_RING_SETTINGS, RingError, allReduceSum, openEndpoint, type Link, type PeerEndpoint, type Ring } from '../src/comm/index.ts';
import { NODE_RTC_CONFIG, loadNodePeer, type SctpSettings } from '../src/comm/node.ts';
import { FrameKind, HEADER_BYTES, Phase, parseFrame, writeHeader } from '../src/protocol/frames.ts';
import {
  checkResult, envInt, fillInput, parseToPeer, type FromPeer, type ResultCheck, type RingTask, type StarTask, type StreamTask, type Task,
} from './allreduce-protocol.ts';

// The ring's own back-pressure marks, for the ring and the stream alike (VT_HIGH / VT_LOW try others).
const HIGH = envInt('VT_HIGH', DEFAULT_RING_SETTINGS.highWaterBytes);
const LOW = envInt('VT_LOW', DEFAULT_RING_SETTINGS.lowWaterBytes);
// VT_MTU sets libdatachannel's path MTU (node-datachannel passes RTC config through); unset = its default.
const MTU = envInt('VT_MTU', 0);
// Pairs open in 10-30 ms (connectLinks re-dials a link whose DTLS handshake failed, see
// src/comm/node.ts); if a ring still does not form, the parent retries it with a fresh job.
const CONNECT_TIMEOUT_MS = 4000;
// Peers share 2 cores: a neighbour's event loop may be busy for a while without being gone.
const RING_SETTINGS = { deadAfterMs: 20_000, stallTimeoutMs: 120_000, highWaterBytes: HIGH, lowWaterBytes: LOW };

function send(msg: FromPeer): void {
  process.send?.(msg);
}

/** One side of a raw link with event-driven back-pressure (bufferedamountlow), no polling. */
class Lane {
  onFrame: (f: Uint8Array) => void = () => {
    throw new Error(`frame from ${this.link.remoteId} before the task set a handler`);
  };
  private waiter: (() => void) | null = null;
  private closedWhy = '';
  private released = false;
  private failRound: ((e: Error) => void) | null = null;

  constructor(readonly link: Link) {
    link.setLowWater(LOW);
    link.listen({
      frame: (f) => this.onFrame(f),
      drain: () => this.wake(),
      close: (why) => {
        this.closedWhy = why;
        this.wake();
        // Closes after release are ours or a neighbour's release; during a round they are fatal.
        if (!this.released) this.failRound?.(new Error(`link ${this.link.remoteId} closed mid-round: ${why}`));
      },
    });
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = null;
    w?.();
  }

  /** Rejects when this lane closes before release (raced against a round's work). */
  watch(): Promise<never> {
    return new Promise<never>((_, reject) => { this.failRound = reject; });
  }

  async send(frame: Uint8Array): Promise<void> {
    while (this.link.bufferedAmount > HIGH && !this.closedWhy) await new Promise<void>((r) => { this.waiter = r; });
    if (this.closedWhy) throw new Error(`benchmark link to ${this.link.remoteId} closed: ${this.closedWhy}`);
    this.link.send(frame);
  }

  release(): void {
    this.released = true;
    this.link.close();
  }
}

/** Resolves once `count()` reaches `want`; `poke()` re-checks (call it on every frame). */
class Counter {
  private want = Infinity;
  private resolve: (() => void) | null = null;
  constructor(private readonly count: () => number) {}
  until(want: number): Promise<void> {
    this.want = want;
    return new Promise<void>((r) => { this.resolve = r; this.poke(); });
  }
  poke(): void {
    if (this.resolve && this.count() >= this.want) {
      const r = this.resolve;
      this.resolve = null;
      this.want = Infinity;
      r();
    }
  }
}

interface Running {
  /** One round: the timed part, this peer's share of the collective. */
  round(warm: boolean): Promise<void>;
  /** Untimed: checks the result (null when there is nothing to check) and resets for the next round. */
  after(warm: boolean): ResultCheck | null;
  release(): void;
}

const frameHeader = (job: number, step: number, offset: number, length: number) =>
  ({ kind: FrameKind.data, phase: Phase.reduceScatter, dtype: 'f32', job, generation: 1, step, chunk: 0, offset, length }) as const;

/** Packs grad[off, off+len) into a fresh frame (links keep what they send) with a ring header. */
function pack(grad: Float32Array, job: number, step: number, off: number, len: number): Uint8Array {
  const f = new Uint8Array(HEADER_BYTES + 4 * len);
  writeHeader(f, frameHeader(job, step, off, len));
  new Float32Array(f.buffer, HEADER_BYTES, len).set(grad.subarray(off, off + len));
  return f;
}

/** Header-checked payload of a star frame (parseFrame, as the ring does for each frame). */
function unpack(f: Uint8Array): { off: number; v: Float32Array } {
  const p = parseFrame(f);
  if (!p.ok) throw new Error(`star frame: ${p.reason}`);
  // node-datachannel hands each message its own ArrayBuffer, so the payload is 4-byte aligned.
  return { off: p.header.offset, v: new Float32Array(f.buffer, f.byteOffset + HEADER_BYTES, p.header.length) };
}

const framesOf = (payloadBytes: number, msgBytes: number) => Math.ceil(payloadBytes / (msgBytes - HEADER_BYTES));

async function stream(ep: PeerEndpoint, t: StreamTask): Promise<Running> {
  const { next, prev } = await ep.connectLinks({ ids: t.ids, job: t.job, generation: 1, connectTimeoutMs: CONNECT_TIMEOUT_MS });
  const out = new Lane(next);
  const inc = new Lane(prev);
  let got = 0;
  const arrived = new Counter(() => got);
  inc.onFrame = () => { got++; arrived.poke(); };
  // Same per-frame work as the ring's sender (a fresh frame, a header, a payload copy), no sums.
  const src = new Float32Array((t.msgBytes - HEADER_BYTES) >> 2);
  fillInput(src, 1);
  return {
    async round(warm) {
      const frames = framesOf(warm ? t.warmBytes : t.bytes, t.msgBytes);
      const sendAll = async () => { for (let i = 0; i < frames; i++) await out.send(pack(src, t.job, 0, 0, src.length)); };
      await Promise.race([Promise.all([sendAll(), arrived.until(frames)]), out.watch(), inc.watch()]);
      got -= frames;
    },
    after: () => null,
    release() { out.release(); inc.release(); },
  };
}

async function ring(ep: PeerEndpoint, t: RingTask): Promise<Running> {
  const r: Ring = await ep.formRing({ ids: t.ids, job: t.job, generation: 1, settings: RING_SETTINGS, connectTimeoutMs: CONNECT_TIMEOUT_MS });
  const seeds = t.ids.map((_, i) => t.seed + i);
  const input = new Float32Array(t.elems);
  fillInput(input, seeds[t.ids.indexOf(ep.id)]);
  const grad = input.slice();
  let step = 0;
  return {
    async round(warm) {
      await allReduceSum(grad.subarray(0, warm ? t.warmElems : t.elems), { ring: r, step: step++, messageBytes: t.msgBytes, wire: t.wire });
    },
    after(warm) {
      const check = warm ? null : checkResult(grad.subarray(0, t.elems), seeds);
      grad.set(input);
      return check;
    },
    release() { r.close(); },
  };
}

async function star(ep: PeerEndpoint, t: StarTask): Promise<Running> {
  const rank = t.ids.indexOf(ep.id);
  const hub = t.ids[0];
  const seeds = t.ids.map((_, i) => t.seed + i);
  const input = new Float32Array(t.elems);
  fillInput(input, seeds[rank]);
  const grad = input.slice();
  const per = (t.msgBytes - HEADER_BYTES) >> 2;
  let step = 0;
  let len = t.elems;
  let got = 0;
  const sendAll = async (lane: Lane) => { for (let off = 0; off < len; off += per) await lane.send(pack(grad, t.job, step, off, Math.min(per, len - off))); };
  // Hub and leaves alike: check the result, then reset for the next round (untimed).
  const after = (warm: boolean): ResultCheck | null => {
    const check = warm ? null : checkResult(grad.subarray(0, len), seeds);
    grad.set(input);
    got = 0;
    step++;
    return check;
  };
  const arrived = new Counter(() => got);
  /** A frame handler: `apply` its payload, count it. */
  const onData = (apply: (off: number, v: Float32Array) => void) => (f: Uint8Array) => {
    const { off, v } = unpack(f);
    apply(off, v);
    got++;
    arrived.poke();
  };
  /** Starts a round: its length, and how many frames each leaf sends (and gets back). */
  const begin = (warm: boolean): number => {
    len = warm ? t.warmElems : t.elems;
    return Math.ceil(len / per);
  };
  // One pair of links per leaf, each pair its own job (a PeerEndpoint forms one ring per job).
  const pair = (leafRank: number) =>
    ep.connectLinks({ ids: [hub, t.ids[leafRank]], job: t.job + leafRank - 1, generation: 1, connectTimeoutMs: CONNECT_TIMEOUT_MS });

  if (rank === 0) {
    const settled = await Promise.allSettled(t.ids.slice(1).map((_, k) => pair(k + 1)));
    const failed = settled.find((s) => s.status === 'rejected');
    const pairs = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    if (failed) {
      for (const p of pairs) { p.next.close(); p.prev.close(); } // no half-formed star left behind
      throw failed.reason;
    }
    const outs = pairs.map((p) => new Lane(p.next));
    const ins = pairs.map((p) => new Lane(p.prev));
    for (const lane of ins) {
      lane.onFrame = onData((off, v) => {
        const dst = grad.subarray(off, off + v.length);
        for (let i = 0; i < v.length; i++) dst[i] += v[i];
      });
    }
    return {
      async round(warm) {
        const frames = begin(warm);
        const watch = [...outs, ...ins].map((l) => l.watch());
        await Promise.race([arrived.until(frames * ins.length), ...watch]);
        await Promise.race([Promise.all(outs.map(sendAll)), ...watch]);
      },
      after,
      release() { for (const l of [...outs, ...ins]) l.release(); },
    };
  }

  const { next, prev } = await pair(rank);
  const out = new Lane(next);
  const inc = new Lane(prev);
  inc.onFrame = onData((off, v) => grad.set(v, off));
  return {
    async round(warm) {
      const frames = begin(warm);
      await Promise.race([Promise.all([sendAll(out), arrived.until(frames)]), out.watch(), inc.watch()]);
    },
    after,
    release() { out.release(); inc.release(); },
  };
}

const tasks: { [K in Task['kind']]: (ep: PeerEndpoint, t: Extract<Task, { kind: K }>) => Promise<Running> } = { stream, ring, star };

let endpoint: PeerEndpoint | null = null;
let running: Running | null = null;

async function handle(raw: unknown): Promise<void> {
  const msg = parseToPeer(raw);
  switch (msg.type) {
    case 'open': {
      // VT_SCTP='{"delayedSackTime":0}' tries node-datachannel SCTP settings (see node.ts).
      const Peer = await loadNodePeer(process.env.VT_SCTP ? (JSON.parse(process.env.VT_SCTP) as SctpSettings) : undefined);
      endpoint = await openEndpoint({
        Peer, id: msg.id, token: msg.token, server: msg.server, rtcConfig: MTU ? ({ ...NODE_RTC_CONFIG, mtu: MTU } as RTCConfiguration) : NODE_RTC_CONFIG,
      });
      return send({ type: 'opened' });
    }
    case 'prepare': {
      if (!endpoint) throw new Error('prepare before open');
      if (running) throw new Error('prepare while a task is still prepared: release it first');
      const t = msg.task;
      const make = tasks[t.kind] as (ep: PeerEndpoint, t: Task) => Promise<Running>;
      running = await make(endpoint, t);
      return send({ type: 'prepared' });
    }
    case 'go': {
      if (!running) throw new Error('go before prepare');
      const t0 = performance.now();
      // CPU of the whole process (JS thread and node-datachannel's threads): the cores are the limit.
      const cpu0 = process.cpuUsage();
      await running.round(msg.warm);
      const seconds = (performance.now() - t0) / 1000;
      const cpu = process.cpuUsage(cpu0);
      return send({ type: 'done', seconds, cpuSeconds: (cpu.user + cpu.system) / 1e6, check: running.after(msg.warm) });
    }
    case 'release':
      running?.release();
      running = null;
      return send({ type: 'released' });
    case 'exit':
      running?.release();
      endpoint?.destroy();
      process.exit(0);
  }
}

// Messages are handled one at a time, in order: the parent never sends the next before a reply.
let queue = Promise.resolve();
process.on('message', (raw: unknown) => {
  queue = queue.then(() => handle(raw)).catch((e: unknown) => {
    const connect = e instanceof RingError && e.kind === 'connect-failed';
    send({ type: 'failed', kind: connect ? 'connect-failed' : 'other', message: e instanceof Error ? (e.stack ?? e.message) : String(e) });
  });
});
// The parent died or let go: nothing is left for this process to do.
process.on('disconnect', () => process.exit(0));
