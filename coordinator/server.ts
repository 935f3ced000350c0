// The coordinator's one HTTP server on one port: the JSON API and data files (routes.ts),
// server-sent events (events.ts) and the PeerJS signaling server (signaling.ts), which also
// takes the WebSocket upgrades on its path. Every other upgrade is refused.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import type { TlsMaterial } from './tls.ts';
import type { Duplex } from 'node:stream';
import type { CheckpointStore } from './checkpoints.ts';
import { createEventHub, type EventHub } from './events.ts';
import { HttpError, refuseSocket, sendError } from './http.ts';
import type { JobConfig } from './job.ts';
import { RateLimiter, type RateLimit } from './rate-limit.ts';
import { route, type AdminActions, type JobStatus, type RouteContext, type UploadPolicy } from './routes.ts';
import { createSignalingServer, type SignalingServer } from './signaling.ts';

export interface CoordinatorOptions {
  job: JobConfig;
  jobId: number;
  dataDir: string;
  /** The job's data set folder, when it is not `<dataDir>/<dataset>`. */
  dataFolder?: string;
  checkpoints: CheckpointStore;
  host?: string;
  /** 0: an ephemeral port (tests). */
  port?: number;
  heartbeatMs?: number;
  maxBodyBytes?: number;
  maxEventClients?: number;
  /** Where unexpected (500) errors are reported. */
  log?: (line: string) => void;
  status?: () => JobStatus;
  onJoin?: RouteContext['onJoin'];
  refuseJoin?: RouteContext['refuseJoin'];
  directJoin?: RouteContext['directJoin'];
  /** Checkpoint uploads (routes.ts); none: uploads are refused. */
  uploads?: UploadPolicy;
  metricsPath?: string;
  /** The built page to serve at / (vite build output). */
  pageDir?: string;
  metricsFlushed?: () => Promise<void>;
  credit?: RouteContext['credit'];
  /** The job owner's actions (POST /api/admin/...); none: refused. */
  admin?: AdminActions;
  /** Requests per client address (default 100/s, burst 400) and joins (default 1/s, burst 30). */
  rateLimits?: { requests?: RateLimit; joins?: RateLimit };
  /** Which peers may set up a WebRTC connection through signaling (signaling.ts); none: any. */
  mayConnect?: (fromId: string, toId: string) => boolean;
  /** The ICE servers each joining peer is given (routes.ts); none: []. */
  iceServers?: RouteContext['iceServers'];
  joinUrls?: RouteContext['joinUrls'];
  onnx?: RouteContext['onnx'];
  valSample?: RouteContext['valSample'];
  viewToken?: RouteContext['viewToken'];
  volunteerTokens?: RouteContext['volunteerTokens'];
  /**
   * Serve HTTPS (tls.ts) on the port; a plain-HTTP request there is redirected to https://.
   * None: plain HTTP (loopback: a browser treats http://127.0.0.1 as a secure context).
   */
  tls?: TlsMaterial;
  /** Other WebSocket endpoints on the same port (the session sockets): true when taken. */
  upgrade?: (req: IncomingMessage, socket: Duplex, head: Buffer) => boolean;
}

export interface Coordinator {
  readonly server: Server | HttpsServer;
  readonly signaling: SignalingServer;
  readonly events: EventHub;
  readonly port: number;
  readonly url: string;
  /** Swaps the certificate of a TLS coordinator (renewal) without a restart. */
  setTls(m: TlsMaterial): void;
  close(): Promise<void>;
}

export async function startCoordinator(o: CoordinatorOptions): Promise<Coordinator> {
  const log = o.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const server: Server | HttpsServer = o.tls ? createHttpsServer({ key: o.tls.key, cert: o.tls.cert }) : createServer();
  // signaling.ts mounts on the server's 'upgrade'/'request' events, which https.Server has alike.
  const signaling = createSignalingServer(server as Server, { path: '/signal', mayConnect: o.mayConnect, log });
  const events = createEventHub(o.maxEventClients);
  const ctx: RouteContext = {
    job: o.job, jobId: o.jobId, dataDir: o.dataDir, ...(o.dataFolder ? { dataFolder: o.dataFolder } : {}), checkpoints: o.checkpoints, signaling, events,
    heartbeatMs: o.heartbeatMs ?? 2000,
    maxBodyBytes: o.maxBodyBytes ?? 16_384,
    status: o.status ?? (() => ({ step: 0, generation: 0, peers: 0 })),
    onJoin: o.onJoin ?? (() => undefined),
    refuseJoin: o.refuseJoin,
    directJoin: o.directJoin,
    uploads: o.uploads,
    metricsPath: o.metricsPath,
    pageDir: o.pageDir,
    metricsFlushed: o.metricsFlushed,
    credit: o.credit,
    admin: o.admin,
    iceServers: o.iceServers,
    joinUrls: o.joinUrls,
    onnx: o.onnx,
    valSample: o.valSample,
    viewToken: o.viewToken,
    ...(o.volunteerTokens ? { volunteerTokens: o.volunteerTokens } : {}),
    localCa: o.tls?.ca,
    joinLimiter: new RateLimiter(o.rateLimits?.joins ?? { perSecond: 1, burst: 30 }),
  };
  const requests = new RateLimiter(o.rateLimits?.requests ?? { perSecond: 100, burst: 400 });

  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    if (!requests.take(req.socket.remoteAddress ?? '?')) {
      return sendError(res, new HttpError('too-many-requests', 'too many requests from this address: slow down and try again in a few seconds'));
    }
    if (signaling.handleRequest(req, res)) return;
    route(req, res, ctx).catch((e: unknown) => {
      if (e instanceof HttpError) return sendError(res, e);
      log(`coordinator: ${req.method} ${req.url?.slice(0, 200)} failed: ${e instanceof Error ? e.stack ?? e.message : String(e)}`);
      sendError(res, new HttpError('internal', 'the coordinator failed on this request (logged on its console); try again'));
    });
  });
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    if (!signaling.handleUpgrade(req, socket, head) && !o.upgrade?.(req, socket, head)) {
      refuseSocket(socket, '404 Not Found', 'no WebSocket endpoint here: the session is /api/session, signaling /signal/peerjs');
    }
  });
  // Node closes CONNECT requests without a word unless someone listens: say why.
  server.on('connect', (_req: IncomingMessage, socket: Duplex) => {
    refuseSocket(socket, '405 Method Not Allowed', 'CONNECT is not supported: this server is not a proxy');
  });
  // A malformed request line, headers or body framing: answer 400 rather than leave the socket hanging.
  server.on('clientError', (_e, socket: Duplex) => {
    if (socket.writable) refuseSocket(socket, '400 Bad Request', 'malformed HTTP request (request line, headers or body length)');
  });

  const host = o.host ?? '127.0.0.1';
  // With TLS, one port speaks both: a TLS handshake goes to the HTTPS server, anything else to
  // a redirect to https:// (people type http://).
  const redirect = o.tls ? createServer((req, res) => {
    const target = `https://${req.headers.host ?? `${host}:${port}`}${req.url ?? '/'}`;
    res.writeHead(308, { location: target, 'content-type': 'text/plain; charset=utf-8' });
    res.end(`This coordinator speaks HTTPS (browsers give WebGPU only to secure pages): open ${target}\n`);
  }) : null;
  const front: NetServer | Server | HttpsServer = redirect ? createNetServer((socket: Socket) => {
    socket.on('error', () => socket.destroy());
    socket.once('data', (first: Buffer) => {
      socket.pause();
      socket.unshift(first);
      (first[0] === 0x16 ? server : redirect).emit('connection', socket);
      process.nextTick(() => socket.resume());
    });
  }) : server;
  await new Promise<void>((resolve, reject) => {
    front.once('error', reject);
    front.listen(o.port ?? 0, host, () => {
      front.off('error', reject);
      resolve();
    });
  });
  const addr = front.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return {
    server, signaling, events, port,
    url: `${o.tls ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${port}`,
    setTls: (m) => { if ('setSecureContext' in server) server.setSecureContext({ key: m.key, cert: m.cert }); },
    close: () => new Promise<void>((resolve, reject) => {
      events.close();
      signaling.close();
      server.closeAllConnections();
      redirect?.closeAllConnections();
      if (front !== server) server.close();
      front.close((e) => (e ? reject(e) : resolve()));
    }),
  };
}
