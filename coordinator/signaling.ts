// PeerJS signaling (the `peer` package) on the coordinator's own HTTP server and port.
//
// - Attaches to an existing http.Server: the caller routes requests and WebSocket upgrades to
//   handleRequest/handleUpgrade by path (so its API and its own WebSocket endpoints share the
//   port; PeerServer would answer every other WebSocket path with HTTP 400).
// - Peer ids are issued by the caller (issue()), never chosen by peers: an upgrade whose
//   (id, token) was not issued is refused with HTTP 403, and GET .../id is disabled.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { randomBytes, randomUUID } from 'node:crypto';
import type { Duplex } from 'node:stream';
import express from 'express';
import { ExpressPeerServer } from 'peer';
import { WebSocketServer, type WebSocket } from 'ws';

export interface SignalingOptions {
  /** URL path prefix, e.g. '/signal'; clients use the same `path`. */
  path?: string;
  /** PeerServer drops a client silent for this long (PeerJS pings every 5 s). */
  aliveTimeoutMs?: number;
  /** An offer to a peer that has not registered yet waits this long before 'peer-unavailable'. */
  expireTimeoutMs?: number;
}

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
  return new URL(req.url ?? '/', 'http://x').pathname;
}

function refuse(socket: Duplex, status: string): void {
  socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
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
    createWebSocketServer: () => (wss = new WebSocketServer({ noServer: true })),
  });
  // ExpressPeerServer sets itself up when mounted (RECIPES.md); its socket path becomes
  // `path`/peerjs. This small express app only ever sees requests under `path`.
  const app = express();
  app.use(path, peerApp);
  if (!wss) throw new Error('peer@1.0.2 did not create its WebSocket server on mount: check the installed version of `peer`');
  const sockets: WebSocketServer = wss;
  const issued = new Map<string, string>();
  const live = new Map<string, WebSocket>();

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
      const q = new URL(req.url ?? '/', 'http://x').searchParams;
      const id = q.get('id') ?? '';
      if (!issued.has(id) || issued.get(id) !== q.get('token')) {
        refuse(socket, '403 Forbidden');
        return true;
      }
      sockets.handleUpgrade(req, socket, head, (ws) => {
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
    if (!signaling.handleUpgrade(req, socket, head)) refuse(socket, '404 Not Found');
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
