// Protocol-level volunteers for the coordinator bench (bench/coordinator.ts): each joins over
// HTTP, holds a real session WebSocket (heartbeats at the period the join gave) and a PeerJS
// signaling socket (its HEARTBEAT every 5 s, as PeerJS sends), loads the state it is told,
// answers every step assignment with a result after a simulated compute, uploads a real
// checkpoint when asked, and answers a ring announced ahead. No training compute and no WebRTC:
// everything the coordinator sees of a volunteer, at the cost of a few sockets and timers.
import { WebSocket } from 'ws';
import { encodeCheckpoint } from '../src/checkpoint/format.ts';
import { concatBytes } from '../src/data/bytes.ts';
import { PROTOCOL_VERSION, SESSION_PATH, type CoordinatorMessage, type JoinAccept, type PeerMessage } from '../src/protocol/messages.ts';
import { ShapeReceiver } from '../src/client/ring-shape.ts';

/** What the simulated peers measure, shared by all of them (the bench reads it). */
export interface SimLog {
  /** Per step (numbered from 0), when the last result of its final attempt was sent. */
  lastResultAt: Map<number, number>;
  /** Per step, when the last member received its assignment (of the attempt that committed or not). */
  lastAssignedAt: Map<number, number>;
  /** Per step, assignments received (a step re-run after a death is assigned again). */
  assigned: Map<number, number>;
  /** Sessions the coordinator closed or evicted that were not killed on purpose, with why. */
  dropped: string[];
  /** Assignments received, results sent. */
  assignments: number;
  results: number;
}

export const newSimLog = (): SimLog => ({ lastResultAt: new Map(), lastAssignedAt: new Map(), assigned: new Map(), dropped: [], assignments: 0, results: 0 });

export interface SimOptions {
  url: string;
  /** Milliseconds a step's compute takes (plus up to jitterMs). */
  computeMs: number;
  jitterMs: number;
  /** A checkpoint of `step` with the job's model (the coordinator checks its fingerprint and size). */
  checkpoint: (step: number, generation: number) => Uint8Array;
  log: SimLog;
}

/** A checkpoint file of zero weights for a model layout: what an upload must look like to the coordinator. */
export function zeroCheckpoint(fingerprint: string, paramFloats: number, stateFloats: number): (step: number, generation: number) => Uint8Array {
  return (step, generation) => concatBytes(encodeCheckpoint({
    step, generation, fingerprint, weights: new Float32Array(paramFloats), bnState: new Float32Array(stateFloats),
    optimizer: { momentum: new Float32Array(paramFloats) }, metadata: { bench: 'coordinator' },
  }));
}

export class SimPeer {
  private readonly shapes = new ShapeReceiver();
  private beat: ReturnType<typeof setInterval> | null = null;
  private signalBeat: ReturnType<typeof setInterval> | null = null;
  private signal: WebSocket | null = null;
  private step = 0;
  private generation = 0;
  killed = false;

  private constructor(private readonly o: SimOptions, readonly accept: JoinAccept, private readonly ws: WebSocket) {}

  get id(): string {
    return this.accept.peerId;
  }

  /** Joins (POST /api/join from `localAddress`), opens the session and signaling sockets. */
  static async join(o: SimOptions, name: string, localAddress: string): Promise<SimPeer> {
    const { request } = await import('node:http');
    const url = new URL(o.url);
    const body = JSON.stringify({ type: 'join', protocol: PROTOCOL_VERSION, name });
    const accept = await new Promise<JoinAccept>((resolve, reject) => {
      const headers = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) };
      const req = request({ host: url.hostname, port: url.port, path: '/api/join', method: 'POST', localAddress, headers }, (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (d: string) => (text += d)).on('end', () => {
          if (res.statusCode !== 200) reject(new Error(`join: ${res.statusCode} ${text.slice(0, 200)}`));
          else resolve(JSON.parse(text) as JoinAccept);
        });
      });
      req.on('error', reject);
      req.end(body);
    });
    const ws = new WebSocket(`${o.url.replace('http', 'ws')}${SESSION_PATH}?peer=${accept.peerId}&token=${accept.signalingToken}`, { localAddress });
    const peer = new SimPeer(o, accept, ws);
    ws.on('message', (data) => peer.onMessage(String(data)));
    ws.on('close', (code, reason) => peer.onClose(code, reason.toString()));
    await new Promise<void>((res, rej) => { ws.once('open', () => res()); ws.once('error', rej); });
    peer.beat = setInterval(() => peer.send({ type: 'heartbeat', peerId: peer.id, generation: peer.generation, step: peer.step }), accept.heartbeatMs);
    const signalUrl = `${o.url.replace('http', 'ws')}${accept.signalingPath}/peerjs?key=peerjs&id=${accept.peerId}&token=${accept.signalingToken}`;
    peer.signal = new WebSocket(signalUrl, { localAddress });
    peer.signal.on('error', () => undefined);
    peer.signalBeat = setInterval(() => { if (peer.signal?.readyState === WebSocket.OPEN) peer.signal.send('{"type":"HEARTBEAT"}'); }, 5000);
    return peer;
  }

  private send(m: PeerMessage): void {
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(m));
  }

  private onMessage(text: string): void {
    const d = this.shapes.decode(JSON.parse(text) as unknown);
    if (!d.ok) {
      this.o.log.dropped.push(`${this.id} got a message its decoder refuses: ${JSON.stringify(d.error).slice(0, 200)}`);
      return;
    }
    const m: CoordinatorMessage = d.value;
    const log = this.o.log;
    switch (m.type) {
      case 'load-state':
        this.step = m.step;
        this.send({ type: 'ready', peerId: this.id, step: m.step, checksum: 'c0ffee', device: 'simulated' });
        return;
      case 'step-assignment': {
        const at = performance.now();
        log.assignments++;
        log.lastAssignedAt.set(m.step, Math.max(log.lastAssignedAt.get(m.step) ?? 0, at));
        log.assigned.set(m.step, (log.assigned.get(m.step) ?? 0) + 1);
        this.generation = m.generation;
        const images = m.sampleIds.length;
        setTimeout(() => {
          if (this.killed) return;
          this.step = m.step + 1;
          const timings = { computeMs: this.o.computeMs, commMs: 1, waitMs: 0 };
          this.send({ type: 'step-result', peerId: this.id, generation: m.generation, step: m.step, loss: 1, checksum: 'c0ffee', timings, images });
          log.results++;
          log.lastResultAt.set(m.step, performance.now());
        }, this.o.computeMs + Math.random() * this.o.jitterMs);
        return;
      }
      case 'upload-checkpoint': {
        const file = this.o.checkpoint(m.step, this.generation);
        void fetch(`${this.o.url}/api/checkpoints/${m.step}?peer=${encodeURIComponent(this.id)}`, {
          method: 'POST', body: file as Uint8Array<ArrayBuffer>,
          headers: { authorization: `Bearer ${this.accept.signalingToken}`, 'content-type': 'application/octet-stream' },
        }).then((r) => r.body?.cancel(), () => undefined);
        return;
      }
      case 'prepare':
        this.send({ type: 'prepared', peerId: this.id, id: m.id });
        return;
      case 'evaluate':
        this.send({ type: 'eval-result', peerId: this.id, step: m.step, counts: { samples: m.ids.length, top1: 0, top5: 0, lossSum: m.ids.length } });
        return;
      case 'evicted':
        if (!this.killed) this.o.log.dropped.push(`${this.id} evicted: ${m.reason}`);
        return;
      default:
        return;
    }
  }

  private onClose(code: number, reason: string): void {
    this.stopTimers();
    if (!this.killed) this.o.log.dropped.push(`${this.id} session closed ${code} ${reason}`);
  }

  private stopTimers(): void {
    if (this.beat) clearInterval(this.beat);
    if (this.signalBeat) clearInterval(this.signalBeat);
    this.beat = this.signalBeat = null;
  }

  /** Dies without a word (a tab closed, a desktop switched off): its sockets are cut. */
  kill(): void {
    this.killed = true;
    this.stopTimers();
    this.ws.terminate();
    this.signal?.terminate();
  }
}
