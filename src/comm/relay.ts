// WebRTC for a Web Worker. Browsers have no RTCPeerConnection in workers, so the page keeps
// the real PeerJS Peer and its data channels (serveRtcRelay, main thread) and the worker
// drives them through a MessagePort with stand-ins (relayPeerClass) that have the shapes
// PeerEndpoint and PeerJsLink use. Frames cross the port as transferred ArrayBuffers (no
// copy). Back-pressure: the page reports the channel's bufferedAmount after each send and on
// `bufferedamountlow`; the worker adds the bytes it sent since the last report.
import type { DataChannelLike, DataConnectionLike, PeerConnectionLike } from './peerjs-link.ts';
import type { ConnectOptionsLike, PeerCtor, PeerLike, PeerOptionsLike } from './peerjs-peer.ts';
import type { LinkKind } from '../protocol/messages.ts';
import { gatherCandidates, type GatherPcCtor, type IceReport } from './ice-check.ts';
import { routeOf } from './route.ts';

type ToPage =
  | { op: 'peer'; pid: number; id: string; options: PeerOptionsLike }
  | { op: 'destroy'; pid: number }
  | { op: 'connect'; pid: number; cid: number; peer: string; options: ConnectOptionsLike }
  | { op: 'send'; cid: number; data: ArrayBuffer }
  | { op: 'close'; cid: number }
  | { op: 'low-water'; cid: number; bytes: number }
  | { op: 'route'; cid: number; rid: number; relayHosts: string[] }
  | { op: 'ice-check'; rid: number; config: RTCConfiguration; timeoutMs: number };

type ToWorker =
  | { ev: 'peer-open'; pid: number; id: string }
  | { ev: 'peer-error'; pid: number; message: string; type?: string }
  | { ev: 'connection'; pid: number; cid: number; peer: string; metadata: unknown }
  | { ev: 'open'; cid: number }
  | { ev: 'data'; cid: number; data: ArrayBuffer }
  | { ev: 'close'; cid: number }
  | { ev: 'error'; cid: number; message: string }
  | { ev: 'buffered'; cid: number; amount: number; acked: number }
  | { ev: 'low'; cid: number; amount: number }
  | { ev: 'state'; cid: number; state: string }
  | { ev: 'answer'; rid: number; route?: LinkKind | null; report?: IceReport };

/** Minimal port shape (MessagePort, or a Worker's side of one). */
export interface PortLike {
  postMessage(m: unknown, transfer?: Transferable[]): void;
  onmessage: ((e: MessageEvent) => void) | null;
}

const bufferOf = (d: unknown): ArrayBuffer | null => {
  if (d instanceof ArrayBuffer) return d;
  if (ArrayBuffer.isView(d)) return d.buffer.slice(d.byteOffset, d.byteOffset + d.byteLength) as ArrayBuffer;
  return null;
};

// ---- page side ----------------------------------------------------------------------------

/** Runs on the page: real PeerJS peers and connections on behalf of the worker at `port`. */
export function serveRtcRelay(port: PortLike, Peer: PeerCtor): () => void {
  const peers = new Map<number, PeerLike>();
  const conns = new Map<number, DataConnectionLike>();
  let nextCid = -1; // page-made ids (incoming connections) are negative, the worker's positive
  const post = (m: ToWorker, transfer: Transferable[] = []) => port.postMessage(m, transfer);

  const watch = (cid: number, conn: DataConnectionLike) => {
    conns.set(cid, conn);
    conn.on('open', () => {
      post({ ev: 'open', cid });
      conn.dataChannel?.addEventListener('bufferedamountlow', () => post({ ev: 'low', cid, amount: conn.dataChannel?.bufferedAmount ?? 0 }));
    });
    conn.on('data', (d) => {
      const buf = bufferOf(d);
      if (buf) post({ ev: 'data', cid, data: buf }, [buf]);
    });
    conn.on('close', () => { conns.delete(cid); post({ ev: 'close', cid }); });
    conn.on('error', (e) => post({ ev: 'error', cid, message: e.message }));
    const pc = conn.peerConnection;
    pc?.addEventListener('connectionstatechange', () => post({ ev: 'state', cid, state: pc.connectionState }));
  };

  port.onmessage = (e: MessageEvent) => {
    const m = e.data as ToPage;
    switch (m.op) {
      case 'peer': {
        const p = new Peer(m.id, m.options);
        peers.set(m.pid, p);
        p.on('open', (id) => post({ ev: 'peer-open', pid: m.pid, id }));
        p.on('error', (err) => post({ ev: 'peer-error', pid: m.pid, message: err.message, type: err.type }));
        p.on('connection', (conn) => {
          const cid = nextCid--;
          post({ ev: 'connection', pid: m.pid, cid, peer: conn.peer, metadata: conn.metadata });
          watch(cid, conn);
        });
        return;
      }
      case 'destroy':
        peers.get(m.pid)?.destroy();
        peers.delete(m.pid);
        return;
      case 'connect': {
        const conn = peers.get(m.pid)?.connect(m.peer, m.options);
        if (conn) watch(m.cid, conn);
        else post({ ev: 'close', cid: m.cid });
        return;
      }
      case 'send': {
        const conn = conns.get(m.cid);
        if (!conn?.open) return;
        conn.send(new Uint8Array(m.data));
        post({ ev: 'buffered', cid: m.cid, amount: conn.dataChannel?.bufferedAmount ?? 0, acked: m.data.byteLength });
        return;
      }
      case 'close':
        conns.get(m.cid)?.close();
        return;
      case 'low-water': {
        const dc = conns.get(m.cid)?.dataChannel;
        if (dc) dc.bufferedAmountLowThreshold = m.bytes;
        return;
      }
      case 'route':
        void routeOf(conns.get(m.cid)?.peerConnection, m.relayHosts).then((route) => post({ ev: 'answer', rid: m.rid, route }));
        return;
      case 'ice-check': {
        const Pc = (globalThis as { RTCPeerConnection?: unknown }).RTCPeerConnection as GatherPcCtor | undefined;
        const none: IceReport = { host: [], srflx: [], relay: [], errors: [], complete: false };
        void (Pc ? gatherCandidates(Pc, m.config, m.timeoutMs) : Promise.resolve(none)).then(
          (report) => post({ ev: 'answer', rid: m.rid, report }),
          () => post({ ev: 'answer', rid: m.rid, report: none }),
        );
        return;
      }
    }
  };
  return () => {
    for (const p of peers.values()) p.destroy();
    peers.clear();
    conns.clear();
    port.onmessage = null;
  };
}

// ---- worker side ----------------------------------------------------------------------------

type Listener = (...args: never[]) => void;

class Emitter {
  private readonly on_ = new Map<string, Listener[]>();
  on(event: string, cb: Listener): this {
    this.on_.set(event, [...(this.on_.get(event) ?? []), cb]);
    return this;
  }
  protected emit(event: string, ...args: unknown[]): void {
    for (const cb of this.on_.get(event) ?? []) (cb as (...a: unknown[]) => void)(...args);
  }
}

class RelayChannel implements DataChannelLike {
  /** The page's last report plus what was sent since. */
  reported = 0;
  unacked = 0;
  private threshold = 0;
  readonly lows: (() => void)[] = [];
  constructor(private readonly setLow: (bytes: number) => void) {}
  get bufferedAmount(): number {
    return this.reported + this.unacked;
  }
  get bufferedAmountLowThreshold(): number {
    return this.threshold;
  }
  set bufferedAmountLowThreshold(v: number) {
    this.threshold = v;
    this.setLow(v);
  }
  addEventListener(_type: 'bufferedamountlow', cb: () => void): void {
    this.lows.push(cb);
  }
  drained(): void {
    for (const cb of this.lows) cb();
  }
}

class RelayPeerConnection implements PeerConnectionLike {
  connectionState = 'new';
  readonly listeners: (() => void)[] = [];
  constructor(private readonly hub: RelayHub, private readonly cid: number) {}
  /** Only the connection's state crosses from the page (no ICE state: such a link is never hedged). */
  addEventListener(type: 'connectionstatechange' | 'iceconnectionstatechange', cb: () => void): void {
    if (type === 'connectionstatechange') this.listeners.push(cb);
  }
  async route(relayHosts: readonly string[]): Promise<LinkKind | null> {
    return (await this.hub.ask({ op: 'route', cid: this.cid, rid: 0, relayHosts: [...relayHosts] })).route ?? null;
  }
}

class RelayConnection extends Emitter implements DataConnectionLike {
  open = false;
  readonly dataChannel: RelayChannel;
  readonly peerConnection: RelayPeerConnection;
  constructor(private readonly hub: RelayHub, readonly cid: number, readonly peer: string, readonly metadata: unknown) {
    super();
    this.peerConnection = new RelayPeerConnection(hub, cid);
    this.dataChannel = new RelayChannel((bytes) => hub.post({ op: 'low-water', cid, bytes }));
  }
  send(data: Uint8Array): void {
    // A frame owns its whole buffer (the ring builds one per message): transfer it; else copy.
    const whole = data.byteOffset === 0 && data.byteLength === data.buffer.byteLength && data.buffer instanceof ArrayBuffer;
    const buf = whole ? (data.buffer as ArrayBuffer) : (data.slice().buffer as ArrayBuffer);
    this.dataChannel.unacked += buf.byteLength;
    this.hub.post({ op: 'send', cid: this.cid, data: buf }, [buf]);
  }
  close(): void {
    this.hub.post({ op: 'close', cid: this.cid });
  }
  event(m: ToWorker): void {
    switch (m.ev) {
      case 'open': this.open = true; this.emit('open'); return;
      case 'data': this.emit('data', m.data); return;
      case 'close': this.open = false; this.hub.conns.delete(this.cid); this.emit('close'); return;
      case 'error': this.emit('error', new Error(m.message)); return;
      case 'buffered': {
        const dc = this.dataChannel;
        const before = dc.bufferedAmount;
        dc.unacked = Math.max(0, dc.unacked - m.acked);
        dc.reported = m.amount;
        // The page's channel never rose past the threshold, so it will not fire
        // bufferedamountlow: our own estimate falling through it is the drain.
        if (before > dc.bufferedAmountLowThreshold && dc.bufferedAmount <= dc.bufferedAmountLowThreshold) dc.drained();
        return;
      }
      case 'low': this.dataChannel.reported = m.amount; this.dataChannel.drained(); return;
      case 'state':
        this.peerConnection.connectionState = m.state;
        for (const cb of this.peerConnection.listeners) cb();
        return;
      default:
        return;
    }
  }
}

class RelayHub {
  readonly peers = new Map<number, RelayPeer>();
  readonly conns = new Map<number, RelayConnection>();
  private readonly asked = new Map<number, (m: Extract<ToWorker, { ev: 'answer' }>) => void>();
  private nextId = 1;
  constructor(private readonly port: PortLike) {
    port.onmessage = (e: MessageEvent) => {
      const m = e.data as ToWorker;
      if (m.ev === 'answer') {
        this.asked.get(m.rid)?.(m);
        this.asked.delete(m.rid);
        return;
      }
      if ('pid' in m && m.ev !== 'connection') return this.peers.get(m.pid)?.event(m);
      if (m.ev === 'connection') {
        const conn = new RelayConnection(this, m.cid, m.peer, m.metadata);
        this.conns.set(m.cid, conn);
        return this.peers.get(m.pid)?.event(m, conn);
      }
      this.conns.get(m.cid)?.event(m);
    };
  }
  id(): number {
    return this.nextId++;
  }
  post(m: ToPage, transfer: Transferable[] = []): void {
    this.port.postMessage(m, transfer);
  }
  /** A request the page answers once (its `rid` is set here). */
  ask(m: Extract<ToPage, { rid: number }>): Promise<Extract<ToWorker, { ev: 'answer' }>> {
    const rid = this.id();
    return new Promise((resolve) => {
      this.asked.set(rid, resolve);
      this.post({ ...m, rid });
    });
  }
}

class RelayPeer extends Emitter implements PeerLike {
  open = false;
  destroyed = false;
  readonly pid: number;
  constructor(private readonly hub: RelayHub, readonly id: string, options: PeerOptionsLike) {
    super();
    this.pid = hub.id();
    hub.peers.set(this.pid, this);
    hub.post({ op: 'peer', pid: this.pid, id, options });
  }
  connect(peer: string, options: ConnectOptionsLike): DataConnectionLike | undefined {
    if (this.destroyed) return undefined;
    const cid = this.hub.id();
    const conn = new RelayConnection(this.hub, cid, peer, options.metadata);
    this.hub.conns.set(cid, conn);
    this.hub.post({ op: 'connect', pid: this.pid, cid, peer, options });
    return conn;
  }
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.open = false;
    this.hub.peers.delete(this.pid);
    this.hub.post({ op: 'destroy', pid: this.pid });
  }
  event(m: ToWorker, conn?: RelayConnection): void {
    if (m.ev === 'peer-open') {
      this.open = true;
      this.emit('open', m.id);
    } else if (m.ev === 'peer-error') {
      this.emit('error', Object.assign(new Error(m.message), { type: m.type }));
    } else if (m.ev === 'connection' && conn) {
      this.emit('connection', conn);
    }
  }
}

/**
 * Runs in the worker: a Peer class whose peers live on the page behind `port`, and the ICE
 * self-check (ice-check.ts) run by the page, which has RTCPeerConnection.
 */
export function relayPeerClass(port: PortLike): PeerCtor & { iceCheck(config: RTCConfiguration, timeoutMs?: number): Promise<IceReport> } {
  const hub = new RelayHub(port);
  return class extends RelayPeer {
    constructor(id: string, options: PeerOptionsLike) {
      super(hub, id, options);
    }
    static async iceCheck(config: RTCConfiguration, timeoutMs = 5000): Promise<IceReport> {
      return (await hub.ask({ op: 'ice-check', config, timeoutMs, rid: 0 })).report ?? { host: [], srflx: [], relay: [], errors: [], complete: false };
    }
  };
}
