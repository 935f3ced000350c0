// Direct ring links between Node volunteers: TLS over TCP in place of a WebRTC data channel
// where both ends are Node volunteers that can reach each other (a lab's desktops). WebRTC
// costs ~10x kernel TCP's CPU per byte here and a ring peer moves about a quarter of a 1 Gbit/s
// line through it (docs/transport.md); TLS over TCP with AES-GCM costs about what TCP does.
//
// A DirectListener is the volunteer's TLS server (one per process, on a port it announces when
// it joins). A DirectPeer wraps the volunteer's PeerJS Peer for one session: connect() to a
// peer the coordinator gave a direct route for (StepAssignment.direct) dials TLS; to anyone
// else, or to a peer whose direct dial failed once, it dials WebRTC as before. Connections
// accepted by the listener come out of the same 'connection' event as PeerJS's. Everything above
// (PeerEndpoint, formation, the pool, the ring) sees DataConnections and is unchanged.
//
// Keys: TLS 1.2 with a pre-shared key (direct-key.ts), the dialer's peer id as PSK identity, no
// certificates. The listener accepts only identities whose key it can derive from its session's
// secret, and only a hello that names the same peer; PeerEndpoint then refuses whoever is not
// the ring's prev, as for WebRTC.
import { connect as tlsConnect, createServer, type Server, type TLSSocket } from 'node:tls';
import type { AddressInfo } from 'node:net';
import { directKey } from './direct-key.ts';
import { DirectConnection } from './direct-conn.ts';
import type { DataConnectionLike } from './peerjs-link.ts';
import type { ConnectOptionsLike, PeerLike } from './peerjs-peer.ts';
import type { DirectRoute, DirectRoutes } from '../protocol/messages.ts';
import { ID_PATTERN } from '../protocol/fields.ts';

/** TLS 1.2 PSK suites: AES-GCM first (AES-NI: about 1 CPU-s per GB for both ends here), ChaCha20 where AES is slow. */
export const DIRECT_CIPHERS = 'PSK-AES128-GCM-SHA256:ECDHE-PSK-CHACHA20-POLY1305';
/** A direct dial not up (TCP and TLS) within this time is given up: the link is dialed over WebRTC instead. */
export const DIRECT_DIAL_MS = 3000;
/** An accepted connection must finish its handshake and say hello within this time. */
const ACCEPT_MS = 5000;
/** Connections the listener holds at once (a ring member holds two per ring, and dials ahead). */
const MAX_CONNECTIONS = 64;
/** Idle time before TCP keepalive probes a link (the ring's heartbeats notice a dead neighbour first). */
const KEEPALIVE_MS = 5000;

interface ListenerSession { id: string; secret: string; accept(c: DirectConnection): void }

/** The TLS server of one Node volunteer process: accepts direct links for its current session. */
export class DirectListener {
  private session: ListenerSession | null = null;

  private constructor(private readonly server: Server, readonly port: number) {}

  /** Listens on `port` (0: any free one) of `host` (default: every interface). */
  static async open(o: { host?: string; port?: number } = {}): Promise<DirectListener> {
    const identities = new WeakMap<object, string>();
    let self: DirectListener | null = null;
    const server = createServer({
      ciphers: DIRECT_CIPHERS, minVersion: 'TLSv1.2', maxVersion: 'TLSv1.2', handshakeTimeout: ACCEPT_MS,
      pskCallback: (socket, identity) => {
        const s = self?.session;
        if (!s || identity.length > 64 || !ID_PATTERN.test(identity) || identity === s.id) return null;
        identities.set(socket, identity);
        return directKey(s.secret, identity);
      },
    }, (socket: TLSSocket) => {
      const s = self?.session;
      const identity = identities.get(socket);
      if (!s || identity === undefined) return void socket.destroy();
      socket.setNoDelay(true);
      socket.setKeepAlive(true, KEEPALIVE_MS);
      const timer = setTimeout(() => socket.destroy(), ACCEPT_MS);
      DirectConnection.accepting(socket, identity, (c) => {
        clearTimeout(timer);
        // A session that ended meanwhile takes nothing.
        if (self?.session === s) s.accept(c);
        else c.close();
      });
      socket.on('close', () => clearTimeout(timer));
    });
    server.maxConnections = MAX_CONNECTIONS;
    // A failed handshake (a wrong key, a port scan) is the dialer's problem, not this process's.
    server.on('tlsClientError', () => undefined);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(o.port ?? 0, o.host, () => { server.off('error', reject); resolve(); });
    });
    self = new DirectListener(server, (server.address() as AddressInfo).port);
    return self;
  }

  /** From now on, connections keyed for `id` (the session's peer id) under `secret` go to `accept`. */
  use(id: string, secret: string, accept: (c: DirectConnection) => void): void {
    this.session = { id, secret, accept };
  }

  /** The session `id` ended: nothing more is accepted for it. */
  release(id: string): void {
    if (this.session?.id === id) this.session = null;
  }

  close(): Promise<void> {
    this.session = null;
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** Dials a direct link to `peer` at `route` as `self` (its TLS identity); the connection opens once TLS is up. */
export function dialDirect(self: string, peer: string, route: DirectRoute, options: ConnectOptionsLike): DirectConnection {
  const psk = Buffer.from(route.key, 'base64url');
  const socket = tlsConnect({
    host: route.host, port: route.port, ciphers: DIRECT_CIPHERS, minVersion: 'TLSv1.2', maxVersion: 'TLSv1.2',
    pskCallback: () => ({ identity: self, psk }), checkServerIdentity: () => undefined,
  });
  socket.setNoDelay(true);
  socket.setKeepAlive(true, KEEPALIVE_MS);
  const conn = DirectConnection.dialing(socket, peer, { label: options.label, metadata: options.metadata });
  const timer = setTimeout(() => socket.destroy(new Error(`no TLS connection to ${route.host}:${route.port} within ${DIRECT_DIAL_MS} ms`)), DIRECT_DIAL_MS);
  socket.once('secureConnect', () => {
    clearTimeout(timer);
    conn.connected();
  });
  socket.once('close', () => clearTimeout(timer));
  return conn;
}

type ConnectionCb = (conn: DataConnectionLike) => void;

/**
 * One session's Peer: PeerJS underneath, direct links where the coordinator routed them. The
 * direct links it made or took close with it.
 */
export class DirectPeer implements PeerLike {
  private readonly routes = new Map<string, DirectRoute>();
  /** Peers whose direct dial failed before it opened: dialed over WebRTC for the rest of the session. */
  private readonly failed = new Set<string>();
  private readonly connectionCbs: ConnectionCb[] = [];
  private readonly conns = new Set<DirectConnection>();
  /** Direct links opened (dialed or accepted) and dials that fell back to WebRTC: logs and tests. */
  readonly counts = { dialed: 0, accepted: 0, fellBack: 0 };

  constructor(
    private readonly inner: PeerLike, private readonly listener: DirectListener, secret: string, private readonly log: (line: string) => void = () => undefined,
  ) {
    listener.use(inner.id, secret, (c) => {
      this.track(c);
      this.counts.accepted++;
      for (const cb of this.connectionCbs) cb(c);
    });
  }

  get id(): string {
    return this.inner.id;
  }

  get open(): boolean {
    return this.inner.open;
  }

  get destroyed(): boolean {
    return this.inner.destroyed;
  }

  fellBack(peer: string): boolean {
    return this.failed.has(peer);
  }

  /** Direct routes from the coordinator (an assignment's or announcement's); newer ones replace older ones. */
  learn(routes: DirectRoutes): void {
    for (const [id, r] of Object.entries(routes)) this.routes.set(id, r);
  }

  connect(peer: string, options: ConnectOptionsLike): DataConnectionLike | undefined {
    const route = this.routes.get(peer);
    if (!route || this.failed.has(peer) || this.inner.destroyed) return this.inner.connect(peer, options);
    const conn = dialDirect(this.id, peer, route, options);
    this.track(conn);
    let opened = false;
    conn.on('open', () => {
      opened = true;
      this.counts.dialed++;
    });
    // A dial that failed before it opened (an error comes before its close) sends this peer to WebRTC.
    const fallBack = (why: string) => {
      if (opened || this.failed.has(peer)) return;
      this.failed.add(peer);
      this.counts.fellBack++;
      this.log(`direct link to ${peer} at ${route.host}:${route.port} ${why}: dialing it over WebRTC from now on`);
    };
    conn.on('error', (e) => fallBack(`failed (${e.message})`));
    // Closed here before it opened (its formation was given up): the route may be fine.
    conn.on('close', () => { if (!conn.closedHere) fallBack('closed before it opened'); });
    return conn;
  }

  private track(c: DirectConnection): void {
    this.conns.add(c);
    c.on('close', () => this.conns.delete(c));
  }

  on(event: 'open', cb: (id: string) => void): unknown;
  on(event: 'connection', cb: (conn: DataConnectionLike) => void): unknown;
  on(event: 'error', cb: (err: Error & { type?: string }) => void): unknown;
  on(event: 'open' | 'connection' | 'error', cb: (arg: never) => void): unknown {
    if (event === 'connection') this.connectionCbs.push(cb as ConnectionCb);
    return (this.inner.on as (e: string, f: (arg: never) => void) => unknown)(event, cb);
  }

  destroy(): void {
    this.listener.release(this.inner.id);
    for (const c of [...this.conns]) c.close();
    this.inner.destroy();
  }
}
