// The coordinator's HTTP routes. Each handler either replies or throws an HttpError (a 4xx
// with a reason); the server turns anything else into a logged 500.
//
//   GET  /api/job                  public job info (never the join token)
//   POST /api/join                 {type:'join', protocol, token?, name?} -> JoinAccept
//   GET  /api/events               server-sent LiveEvents
//   GET  /api/checkpoints/latest   the newest verified .vtck file (x-checkpoint-step header)
//   GET  /data/<dataset>/<file>    manifest.json and shards of the job's data set
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join } from 'node:path';
import { decodePeerMessage, describe, expectType, type JoinAccept, type LiveEvent } from '../src/client/protocol.ts';
import type { CheckpointStore } from './checkpoints.ts';
import type { EventHub } from './events.ts';
import { HttpError, readJsonBody, sendJson } from './http.ts';
import { publicJobInfo, type JobConfig } from './job.ts';
import { pathSegments, sendFileFrom } from './serve-files.ts';
import type { SignalingServer } from './signaling.ts';

export interface JobStatus { step: number; generation: number; peers: number }

export interface RouteContext {
  job: JobConfig;
  /** The u32 job id carried by ring frames and step assignments. */
  jobId: number;
  /** Holds one folder per data set (`<dataDir>/<dataset>/manifest.json`, shards). */
  dataDir: string;
  checkpoints: CheckpointStore;
  signaling: SignalingServer;
  events: EventHub;
  heartbeatMs: number;
  /** Largest JSON body accepted by POST routes. */
  maxBodyBytes: number;
  status(): JobStatus;
  /** Told about each accepted join (the membership logic queues it for the next boundary). */
  onJoin(peerId: string, name: string | null): void;
}

type Handler = (req: IncomingMessage, res: ServerResponse, ctx: RouteContext, segments: string[]) => Promise<void>;

/** Constant-time comparison: hashing first makes the lengths equal, so length leaks nothing. */
export function tokensMatch(given: string, expected: string): boolean {
  const h = (s: string): Buffer => createHash('sha256').update(s).digest();
  return timingSafeEqual(h(given), h(expected));
}

const getJob: Handler = async (_req, res, ctx) => {
  sendJson(res, 200, { jobId: ctx.jobId, job: publicJobInfo(ctx.job), ...ctx.status() });
};

const postJoin: Handler = async (req, res, ctx) => {
  const d = expectType(decodePeerMessage(await readJsonBody(req, ctx.maxBodyBytes)), 'join');
  if (!d.ok) throw new HttpError('bad-request', describe(d.error));
  const access = ctx.job.access;
  if (access.kind === 'private') {
    if (d.value.token === undefined) throw new HttpError('unauthorized', 'this job is private: join with the token its owner gave you');
    if (!tokensMatch(d.value.token, access.joinToken)) throw new HttpError('forbidden', 'wrong join token: ask the job owner for the current one');
  }
  const issued = ctx.signaling.issue();
  const newest = (await ctx.checkpoints.list())[0];
  const accept: JoinAccept = {
    type: 'join-accept', peerId: issued.id, signalingToken: issued.token, signalingPath: ctx.signaling.path,
    job: ctx.jobId, heartbeatMs: ctx.heartbeatMs, checkpointStep: newest ? newest.step : null,
  };
  ctx.onJoin(issued.id, d.value.name ?? null);
  ctx.events.publish({ type: 'peer-joined', peerId: issued.id, name: d.value.name ?? null });
  sendJson(res, 200, accept);
};

const getEvents: Handler = async (_req, res, ctx) => {
  const { step, generation } = ctx.status();
  const hello: LiveEvent = { type: 'hello', job: ctx.jobId, step, generation };
  if (!ctx.events.open(res, hello)) throw new HttpError('unavailable', 'too many live-event listeners: try again later');
};

const getLatestCheckpoint: Handler = async (_req, res, ctx) => {
  const file = await ctx.checkpoints.readNewestFile();
  if (!file) throw new HttpError('not-found', 'no checkpoint yet: start from the job seed');
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': file.bytes.byteLength, 'x-checkpoint-step': String(file.step), 'cache-control': 'no-store' });
  res.end(file.bytes);
};

const getData: Handler = async (_req, res, ctx, segments) => {
  const [, dataset, name, ...more] = segments;
  if (dataset !== ctx.job.dataset || name === undefined || more.length) throw new HttpError('not-found', `this job serves /data/${ctx.job.dataset}/<file> only`);
  await sendFileFrom(res, join(ctx.dataDir, dataset), name, name.endsWith('.json') ? 'application/json; charset=utf-8' : 'application/octet-stream');
};

const ROUTES: Record<string, Partial<Record<string, Handler>>> = {
  '/api/job': { GET: getJob },
  '/api/join': { POST: postJoin },
  '/api/events': { GET: getEvents },
  '/api/checkpoints/latest': { GET: getLatestCheckpoint },
};

/** Routes one request (signaling paths are handled before this). */
export async function route(req: IncomingMessage, res: ServerResponse, ctx: RouteContext): Promise<void> {
  const segments = pathSegments(req.url ?? '/');
  const path = `/${segments.join('/')}`;
  const method = req.method ?? 'GET';
  if (segments[0] === 'data') {
    if (method !== 'GET' && method !== 'HEAD') throw new HttpError('method-not-allowed', 'data files are read with GET');
    return getData(req, res, ctx, segments);
  }
  const table = Object.hasOwn(ROUTES, path) ? ROUTES[path] : undefined;
  if (!table) throw new HttpError('not-found', `no route ${path.slice(0, 100)}: the API is /api/job, /api/join, /api/events, /api/checkpoints/latest, /data/<dataset>/<file>`);
  const handler = table[method];
  if (!handler) throw new HttpError('method-not-allowed', `${path} takes ${Object.keys(table).join(', ')}`);
  return handler(req, res, ctx, segments);
}
