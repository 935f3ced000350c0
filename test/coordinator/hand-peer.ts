// A peer that speaks the session protocol by hand (no GPU): it answers with whatever the test
// says, which is all the coordinator can see of any peer.
import { WebSocket } from 'ws';
import { ShapeReceiver } from '../../src/client/ring-shape.ts';
import {
  PROTOCOL_VERSION, SESSION_PATH, type CoordinatorMessage, type JoinAccept, type PeerMessage, type StepAssignment,
} from '../../src/protocol/messages.ts';
import { until } from '../../testbed/jobs.ts';

export /** A peer speaking the session protocol by hand. */
class HandPeer {
  readonly inbox: CoordinatorMessage[] = [];
  private readonly shapes = new ShapeReceiver();
  /** Every assignment as it came over the wire (parsed JSON, before its shape is completed). */
  readonly wireAssignments: Record<string, unknown>[] = [];
  closed: { code: number; reason: string } | null = null;
  private constructor(readonly accept: JoinAccept, readonly ws: WebSocket) {
    ws.on('message', (data) => {
      const raw = JSON.parse(String(data)) as unknown;
      if (typeof raw === 'object' && raw !== null && (raw as { type?: unknown }).type === 'step-assignment')
        this.wireAssignments.push(raw as Record<string, unknown>);
      const d = this.shapes.decode(raw);
      if (!d.ok) throw new Error(`the coordinator sent a malformed message: ${JSON.stringify(d.error)}`);
      this.inbox.push(d.value);
    });
    ws.on('close', (code, reason) => { this.closed = { code, reason: reason.toString() }; });
  }
  static async join(url: string, token?: string): Promise<HandPeer> {
    const r = await fetch(`${url}/api/join`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'join', protocol: PROTOCOL_VERSION, name: 'hand', ...(token ? { token } : {}) }),
    });
    const accept = (await r.json()) as JoinAccept;
    const ws = new WebSocket(`${url.replace('http', 'ws')}${SESSION_PATH}?peer=${accept.peerId}&token=${accept.signalingToken}`);
    const peer = new HandPeer(accept, ws);
    await new Promise<void>((res, rej) => { ws.once('open', () => res()); ws.once('error', rej); });
    return peer;
  }
  get id(): string {
    return this.accept.peerId;
  }
  send(m: PeerMessage | Record<string, unknown> | string): void {
    this.ws.send(typeof m === 'string' ? m : JSON.stringify(m));
  }
  async next<T extends CoordinatorMessage['type']>(type: T, ms = 20_000): Promise<Extract<CoordinatorMessage, { type: T }>> {
    await until(() => this.inbox.some((m) => m.type === type), ms, `a '${type}' message`);
    const i = this.inbox.findIndex((m) => m.type === type);
    return this.inbox.splice(i, 1)[0] as Extract<CoordinatorMessage, { type: T }>;
  }
  result(a: StepAssignment, checksum = 'abcdef0123456789'): PeerMessage {
    return {
      type: 'step-result', peerId: this.id, generation: a.generation, step: a.step, loss: 2.3, checksum, timings: { computeMs: 100, commMs: 0, waitMs: 0 },
      images: a.sampleIds.length,
    };
  }
}
