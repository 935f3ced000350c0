// One direct ring link between two Node volunteers (direct-peer.ts opens them): a TLS socket
// carrying length-prefixed messages (stream-frames.ts), dressed as the PeerJS DataConnection
// that PeerJsLink wraps, so the ring, formation, the pool and its REUSE handshake run on it
// unchanged. The dialing end's first message is a hello (the PeerJS label and ring metadata a
// WebRTC dial carries in signaling); the accepting end takes the connection once that hello
// names the peer the TLS key was made for (its PSK identity). Back-pressure is the socket's
// unsent bytes (`bufferedAmount`) and its `drain`.
//
//   dialed:   connecting --(TLS up: hello written)--> open --(close | remote end | error)--> closed
//   accepted: hello? --(hello names the key's peer)--> open --...--> closed
//             hello? --(no hello in time, or a wrong one)--> closed (never announced)
import type { DataChannelLike, DataConnectionLike, PeerConnectionLike } from './peerjs-link.ts';
import { ringMetadata, type RingMetadata } from './peerjs-peer.ts';
import { StreamSplitter, streamHeader } from './stream-frames.ts';

/** The parts of a Node socket (net.Socket, tls.TLSSocket) a direct connection uses. */
export interface StreamSocket {
  readonly writableLength: number;
  readonly destroyed: boolean;
  write(data: Uint8Array): boolean;
  cork(): void;
  uncork(): void;
  end(): unknown;
  destroy(): unknown;
  on(event: 'data', cb: (d: Uint8Array) => void): unknown;
  on(event: 'drain' | 'close' | 'end', cb: () => void): unknown;
  on(event: 'error', cb: (e: Error) => void): unknown;
}

/** What a dial says before anything else: who it is from and for which ring (as a WebRTC dial's signaling does). */
export interface DirectHello { label: string; metadata: RingMetadata }

/** The largest hello (label and metadata are a few hundred bytes). */
const MAX_HELLO_BYTES = 4096;
/** A closed connection that has not flushed its last bytes within this time is cut. */
const END_GRACE_MS = 1000;

type Listener = (...args: never[]) => void;

/** A direct link's connection, either end. */
export class DirectConnection implements DataConnectionLike {
  /** No WebRTC underneath: the route says so, and nothing else of it is watched (no ICE state: formation never hedges it). */
  readonly peerConnection: PeerConnectionLike = { connectionState: 'connected', addEventListener: () => undefined, route: async () => 'tcp' };
  readonly dataChannel: DataChannelLike;
  private isOpen = false;
  private isClosed = false;
  /** Whether this end closed it (a formation given up, a ring closed), not the socket or the other end. */
  closedHere = false;
  private meta: RingMetadata | null;
  private readonly splitter = new StreamSplitter();
  private readonly listeners = new Map<string, Listener[]>();
  private lowWater = 0;
  private readonly lowWaterCbs: (() => void)[] = [];
  /** Accepting end: told once the hello is read (the connection is then open), or never. */
  private onHello: ((hello: DirectHello) => boolean) | null = null;
  /** Dialing end: the hello it says once its socket is up. */
  private pendingHello: DirectHello | null = null;
  /** The PeerJS label the dial carried (logs). */
  label = '';

  private constructor(private readonly socket: StreamSocket, readonly peer: string, meta: RingMetadata | null) {
    this.meta = meta;
    const self = this;
    this.dataChannel = {
      get bufferedAmount() { return self.socket.writableLength; },
      get bufferedAmountLowThreshold() { return self.lowWater; },
      set bufferedAmountLowThreshold(bytes: number) { self.lowWater = bytes; },
      addEventListener: (_type: 'bufferedamountlow', cb: () => void) => { this.lowWaterCbs.push(cb); },
    };
    socket.on('data', (d) => this.received(d));
    socket.on('drain', () => {
      if (this.socket.writableLength <= this.lowWater) for (const cb of this.lowWaterCbs) cb();
    });
    socket.on('end', () => this.gone());
    socket.on('close', () => this.gone());
    socket.on('error', (e) => {
      if (!this.isClosed) this.emit('error', e);
      this.gone();
    });
  }

  /** The dialing end, before its socket is up: call `connected()` once it is (TLS handshake done). */
  static dialing(socket: StreamSocket, peer: string, hello: DirectHello): DirectConnection {
    const c = new DirectConnection(socket, peer, hello.metadata);
    c.pendingHello = hello;
    return c;
  }

  /**
   * The accepting end, `peer` being who the TLS key was made for: `accept` is called with the
   * connection once its hello names that peer (the connection is open then); anything else
   * closes it unannounced.
   */
  static accepting(socket: StreamSocket, peer: string, accept: (c: DirectConnection) => void): DirectConnection {
    const c = new DirectConnection(socket, peer, null);
    c.onHello = (hello) => {
      if (hello.metadata.from !== peer) return false;
      c.meta = hello.metadata;
      c.label = hello.label;
      c.isOpen = true;
      accept(c);
      return true;
    };
    return c;
  }

  /** Dialing end: the socket is up; says hello and opens. */
  connected(): void {
    const hello = this.pendingHello;
    if (this.isClosed || !hello) return;
    this.pendingHello = null;
    this.label = hello.label;
    this.writeMessage(new TextEncoder().encode(JSON.stringify(hello)));
    this.isOpen = true;
    this.emit('open');
  }

  get metadata(): unknown {
    return this.meta;
  }

  get open(): boolean {
    return this.isOpen && !this.isClosed;
  }

  private received(chunk: Uint8Array): void {
    if (this.isClosed) return;
    const messages = this.splitter.push(chunk);
    if (!Array.isArray(messages)) return this.fail(messages.error);
    for (const m of messages) {
      if (this.isClosed) return;
      if (this.onHello) {
        const take = this.onHello;
        this.onHello = null;
        const hello = m.byteLength <= MAX_HELLO_BYTES ? parseHello(m) : null;
        if (!hello || !take(hello)) return this.fail('the dialer\'s hello did not name the peer its key was made for');
        continue;
      }
      if (this.isOpen) this.emit('data', m);
    }
  }

  private writeMessage(data: Uint8Array): void {
    this.socket.cork();
    this.socket.write(streamHeader(data.byteLength));
    this.socket.write(data);
    this.socket.uncork();
  }

  send(data: Uint8Array): void {
    if (!this.open) return;
    this.writeMessage(data);
  }

  private fail(reason: string): void {
    if (this.isClosed) return;
    if (this.isOpen) this.emit('error', new Error(reason));
    this.gone();
    this.socket.destroy();
  }

  /** The connection ended at either end: once, `close` for whoever listens. */
  private gone(): void {
    if (this.isClosed) return;
    this.isClosed = true;
    this.onHello = null;
    if (!this.socket.destroyed) {
      this.socket.end();
      setTimeout(() => this.socket.destroy(), END_GRACE_MS).unref?.();
    }
    this.emit('close');
  }

  close(): void {
    if (!this.isClosed) this.closedHere = true;
    this.gone();
  }

  on(event: 'data', cb: (data: unknown) => void): unknown;
  on(event: 'open' | 'close', cb: () => void): unknown;
  on(event: 'error', cb: (err: Error) => void): unknown;
  on(event: string, cb: Listener): unknown {
    const list = this.listeners.get(event) ?? [];
    list.push(cb);
    this.listeners.set(event, list);
    return this;
  }

  private emit(event: 'open' | 'close'): void;
  private emit(event: 'data', data: Uint8Array): void;
  private emit(event: 'error', e: Error): void;
  private emit(event: string, arg?: unknown): void {
    for (const cb of this.listeners.get(event) ?? []) (cb as (a?: unknown) => void)(arg);
  }
}

/** A hello as the dialer wrote it, or null. */
export function parseHello(bytes: Uint8Array): DirectHello | null {
  let x: unknown;
  try {
    x = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch {
    return null;
  }
  if (typeof x !== 'object' || x === null) return null;
  const { label, metadata } = x as Record<string, unknown>;
  const meta = ringMetadata(metadata);
  if (typeof label !== 'string' || label.length > 256 || !meta) return null;
  return { label, metadata: meta };
}
