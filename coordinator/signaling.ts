// PeerJS signaling (the `peer` package) on the coordinator's own HTTP server and port.
//
// - Attaches to an existing http.Server: the caller routes requests and WebSocket upgrades to
//   handleRequest/handleUpgrade by path (so its API and its own WebSocket endpoints share the
//   port; PeerServer would answer every other WebSocket path with HTTP 400).
// - Peer ids are issued by the caller (issue()), never chosen by peers: an upgrade whose
//   (id, token) was not issued is refused with HTTP 403, and GET .../id is disabled.
// - With `mayConnect`, the messages that set up a WebRTC connection (OFFER, ANSWER, CANDIDATE)
//   are relayed only between two peers it allows (the coordinator: neighbours in a ring of the
//   current generation, generationNeighbours). No data channel opens without them, so a stranger
//   to the ring can never open one to a member: refused here, before any data exists. A refused
//   OFFER is answered with EXPIRE (the dialer's PeerJS reports 'peer-unavailable'); candidates
//   and answers are dropped. Clients never send other relayed types (LEAVE, EXPIRE come from the
//   server), so those are dropped too, as is anything that is not JSON.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { randomBytes, randomUUID } from 'node:crypto';
import type { Duplex } from 'node:stream';
import express from 'express';
import { ExpressPeerServer } from 'peer';
import { WebSocketServer, type WebSocket } from 'ws';
import { refuseSocket, requestUrl } from './http.ts';
import { roleOf, type Topology } from '../src/comm/topology.ts';

export interface SignalingOptions {
  /** URL path prefix, e.g. '/signal'; clients use the same `path`. */
  path?: string;
  /** PeerServer drops a client silent for this long (PeerJS pings every 5 s). */
  aliveTimeoutMs?: number;
  /** An offer to a peer that has not registered yet waits this long before 'peer-unavailable'. */
  expireTimeoutMs?: number;
  /** Whether `fromId` may set up a connection with `toId` now; none: any two issued peers may. */
  mayConnect?: (fromId: string, toId: string) => boolean;
  /** Where refused relays are reported (once per pair of peers). */
  log?: (line: string) => void;
}

/** Whether a and b are next to each other in `ring` (both ways round; a ring of two: each other). */
export function ringNeighbours(ring: readonly string[], a: string, b: string): boolean {
  const i = ring.indexOf(a);
  const j = ring.indexOf(b);
  if (i < 0 || j < 0 || i === j) return false;
  const d = (j - i + ring.length) % ring.length;
  return d === 1 || d === ring.length - 1;
}

/**
 * Whether a and b share a ring of the generation: neighbours in `ring`, or, for a two-level
 * generation, in a group ring or a column ring of `topology` (its flat order is not a ring then).
 */
export function generationNeighbours(ring: readonly string[], topology: Topology | null, a: string, b: string): boolean {
  if (!topology) return ringNeighbours(ring, a, b);
  if (!ring.includes(a) || !ring.includes(b)) return false;
  const role = roleOf(topology, a);
  return ringNeighbours(role.groupIds, a, b) || (role.columnIds !== null && ringNeighbours(role.columnIds, a, b));
}

/** The PeerJS messages that set up a WebRTC connection; `dst` is the other peer. */
const CONNECTION_SETUP = new Set(['OFFER', 'ANSWER', 'CANDIDATE']);
/** Largest signaling message: an SDP offer with its candidates is a few KB. */
const MAX_SIGNALING_BYTES = 256 * 1024;

export interface IssuedId {
  id: string;
  token: string;
}

export interface SignalingServer {
  readonly path: string;
  /** Issues an id (a fresh one unless given) and the token the peer must present. */
  issue(id?: string): IssuedId;
  /** Forgets an id and disconnects its signaling socket, if any. */
  revoke(id: string): void;
  /** Handles the request if its path is under `path`; returns whether it did. */
  handleRequest(req: IncomingMessage, res: ServerResponse): boolean;
  /** Handles the upgrade if its path is `path`/peerjs; returns whether it did. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean;
  /** Closes every signaling socket. */
  close(): void;
}

function pathnameOf(req: IncomingMessage): string {
  return requestUrl(req).pathname;
}

export function createSignalingServer(server: Server, opts: SignalingOptions = {}): SignalingServer {
  const path = (opts.path ?? '/signal').replace(/\/+$/, '') || '/signal';
  const wsPath = `${path}/peerjs`;
  let wss: WebSocketServer | null = null;
  const peerApp = ExpressPeerServer(server, {
    path: '/',
    key: 'peerjs',
    alive_timeout: opts.aliveTimeoutMs ?? 60_000,
    expire_timeout: opts.expireTimeoutMs ?? 5_000,
    allow_discovery: false,
    // noServer: we route upgrades ourselves (see handleUpgrade).
    createWebSocketServer: () => (wss = new WebSocketServer({ noServer: true, maxPayload: MAX_SIGNALING_BYTES })),
  });
  // ExpressPeerServer sets itself up when mounted (RECIPES.md); its socket path becomes
  // `path`/peerjs. This small express app only ever sees requests under `path`.
  const app = express();
  app.use(path, peerApp);
  if (!wss) throw new Error('peer@1.0.2 did not create its WebSocket server on mount: check the installed version of `peer`');
  const sockets: WebSocketServer = wss;
  const issued = new Map<string, string>();
  const live = new Map<string, WebSocket>();
  const log = opts.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const reported = new Set<string>();

  /** Whether a message from `from` goes on to PeerServer; a refused OFFER gets EXPIRE back. */
  function admit(from: string, ws: WebSocket, data: unknown): boolean {
    if (!Buffer.isBuffer(data)) return false;
    let m: unknown;
    try {
      m = JSON.parse(data.toString('utf8'));
    } catch {
      return false; // PeerServer would only report a parse error
    }
    if (typeof m !== 'object' || m === null) return false;
    const { type, dst } = m as { type?: unknown; dst?: unknown };
    if (type === 'HEARTBEAT') return true;
    if (typeof type !== 'string' || !CONNECTION_SETUP.has(type) || typeof dst !== 'string') return false;
    if (!opts.mayConnect || opts.mayConnect(from, dst)) return true;
    const pair = `${from} ${dst}`;
    if (!reported.has(pair)) {
      if (reported.size >= 1000) reported.clear();
      reported.add(pair);
      log(`signaling: refused ${type} from ${from.slice(0, 64)} to ${dst.slice(0, 64)}: not neighbours in the current ring`);
    }
    if (type === 'OFFER' && ws.readyState === ws.OPEN) ws.send(JSON.stringify({ type: 'EXPIRE', src: dst, dst: from }));
    return false;
  }

  return {
    path,
    issue(id = randomUUID()) {
      const token = randomBytes(16).toString('hex');
      issued.set(id, token);
      return { id, token };
    },
    revoke(id) {
      issued.delete(id);
      live.get(id)?.close();
      live.delete(id);
    },
    handleRequest(req, res) {
      const p = pathnameOf(req);
      if (p !== path && !p.startsWith(`${path}/`)) return false;
      if (p.endsWith('/id')) {
        res.writeHead(403, { 'content-type': 'text/plain' }).end('peer ids are issued by the coordinator, not chosen by peers\n');
        return true;
      }
      app(req, res);
      return true;
    },
    handleUpgrade(req, socket, head) {
      if (pathnameOf(req) !== wsPath) return false;
      const q = requestUrl(req).searchParams;
      const id = q.get('id') ?? '';
      if (!issued.has(id) || issued.get(id) !== q.get('token')) {
        refuseSocket(socket, '403 Forbidden', 'unknown peer id or wrong token: signaling takes the id and token a join issued');
        return true;
      }
      sockets.handleUpgrade(req, socket, head, (ws) => {
        // PeerServer reads messages from ws's 'message' events: only admitted ones reach it.
        const emit = ws.emit.bind(ws);
        ws.emit = (event: string | symbol, ...args: unknown[]): boolean => (event === 'message' && !admit(id, ws, args[0]) ? false : emit(event, ...args));
        live.set(id, ws);
        ws.on('close', () => { if (live.get(id) === ws) live.delete(id); });
        sockets.emit('connection', ws, req);
      });
      return true;
    },
    close() {
      for (const ws of sockets.clients) ws.terminate();
      sockets.close();
    },
  };
}

export interface StandaloneSignaling {
  signaling: SignalingServer;
  server: Server;
  port: number;
  close(): Promise<void>;
}

/** A signaling server alone on its own port (tests, benchmarks); the coordinator embeds instead. */
export async function startSignalingServer(o: SignalingOptions & { host?: string; port?: number } = {}): Promise<StandaloneSignaling> {
  const { createServer } = await import('node:http');
  const server = createServer();
  const signaling = createSignalingServer(server, o);
  server.on('request', (req, res) => {
    if (!signaling.handleRequest(req, res)) res.writeHead(404).end();
  });
  server.on('upgrade', (req, socket: Duplex, head: Buffer) => {
    if (!signaling.handleUpgrade(req, socket, head)) refuseSocket(socket, '404 Not Found', `no WebSocket endpoint here: signaling is ${signaling.path}/peerjs`);
  });
  await new Promise<void>((resolve) => server.listen(o.port ?? 0, o.host ?? '127.0.0.1', resolve));
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return {
    signaling, server, port,
    close: () => new Promise<void>((resolve, reject) => {
      signaling.close();
      server.closeAllConnections();
      server.close((e) => (e ? reject(e) : resolve()));
    }),
  };
}
