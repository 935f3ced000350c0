// A hostile volunteer for tests: it speaks the real protocol (HTTP join, session socket, PeerJS
// signaling, WebRTC ring over node-datachannel) but sends a gradient of NaN, or of huge values,
// or an all-zero gradient with a false weight checksum. It computes nothing.
import { WebSocket } from 'ws';
import { ShapeReceiver } from '../../src/client/ring-shape.ts';
import { isRingError, openEndpoint, type PeerEndpoint } from '../../src/comm/index.ts';
import { allReduceBuckets, type BucketRange } from '../../src/comm/buckets.ts';
import { syncBuckets } from '../../src/client/sync-step.ts';
import type { Layout } from '../../src/nn/layout.ts';
import { NODE_RTC_CONFIG, loadNodePeer } from '../../src/comm/node.ts';
import { PROTOCOL_VERSION, SESSION_PATH, type CoordinatorMessage, type JoinAccept, type PeerMessage } from '../../src/protocol/messages.ts';

export type Poison = 'nan' | 'huge' | 'checksum';

export class PoisonPeer {
  private readonly inbox: CoordinatorMessage[] = [];
  private readonly shapes = new ShapeReceiver();
  private wake: (() => void) | null = null;
  private closed = false;

  private constructor(
    private readonly accept: JoinAccept, private readonly endpoint: PeerEndpoint, private readonly ws: WebSocket, private readonly floats: number,
    private readonly buckets: readonly BucketRange[],
  ) {
    ws.on('message', (data) => {
      const d = this.shapes.decode(JSON.parse(String(data)) as unknown);
      if (d.ok) this.inbox.push(d.value);
      this.wake?.();
    });
    ws.on('close', () => { this.closed = true; this.wake?.(); });
  }

  /** Joins a job of the default bucket settings over a model of `layout`: it sends its frames in the honest peers' buckets. */
  static async join(url: string, layout: Layout): Promise<PoisonPeer> {
    const res = await fetch(`${url}/api/join`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ type: 'join', protocol: PROTOCOL_VERSION, name: 'poison' }),
    });
    const accept = (await res.json()) as JoinAccept;
    const u = new URL(url);
    const endpoint = await openEndpoint({
      Peer: await loadNodePeer(), id: accept.peerId, token: accept.signalingToken,
      server: { host: u.hostname, port: Number(u.port), path: accept.signalingPath }, rtcConfig: NODE_RTC_CONFIG,
    });
    const ws = new WebSocket(`ws://${u.host}${SESSION_PATH}?peer=${accept.peerId}&token=${accept.signalingToken}`);
    const peer = new PoisonPeer(accept, endpoint, ws, layout.paramFloats, syncBuckets(layout, {}));
    await new Promise<void>((resolve, reject) => { ws.once('open', () => resolve()); ws.once('error', reject); });
    return peer;
  }

  get id(): string {
    return this.accept.peerId;
  }

  private send(m: PeerMessage): void {
    if (this.ws.readyState === this.ws.OPEN) this.ws.send(JSON.stringify(m));
  }

  private async next(): Promise<CoordinatorMessage | null> {
    while (!this.inbox.length && !this.closed) await new Promise<void>((r) => { this.wake = r; });
    return this.inbox.shift() ?? null;
  }

  /** Plays along until its first step, poisons it, and returns the reason it was evicted. */
  async attack(poison: Poison): Promise<string> {
    for (;;) {
      const m = await this.next();
      if (!m) throw new Error('the coordinator closed the session without evicting the poisoned peer');
      if (m.type === 'evicted') {
        this.close();
        return m.reason;
      }
      if (m.type === 'load-state') this.send({ type: 'ready', peerId: this.id, step: m.step, checksum: '00', device: 'poison' });
      if (m.type === 'evaluate') this.send({ type: 'eval-result', peerId: this.id, step: m.step, counts: { samples: 0, top1: 0, top5: 0, lossSum: 0 } });
      if (m.type === 'step-assignment') {
        const ring = await this.endpoint.formRing({ ids: m.ring, job: m.job, generation: m.generation });
        const g = new Float32Array(this.floats).fill(poison === 'nan' ? Number.NaN : poison === 'huge' ? 1e15 : 0);
        try {
          // The honest peers' bucket plan, every bucket ready at once.
          await allReduceBuckets(g, this.buckets, () => Promise.resolve(), { ring, step: m.step });
        } catch (e) {
          // Refused by its neighbour, as it should be: wait for the eviction.
          if (isRingError(e)) continue;
          throw e;
        }
        this.send({
          type: 'step-result', peerId: this.id, generation: m.generation, step: m.step, loss: 2.3, checksum: 'deadbeefdeadbeef',
          timings: { computeMs: 10, commMs: 10, waitMs: 0 }, images: m.sampleIds.length,
        });
      }
    }
  }

  close(): void {
    this.endpoint.destroy();
    this.ws.close();
  }
}
