// The coordinator's HTTP routes. Each handler either replies or throws an HttpError (a 4xx
// with a reason); the server turns anything else into a logged 500.
//
//   GET  /api/job                  public job info (never the join token)
//   POST /api/join                 {type:'join', protocol, token?, name?, donor?} -> JoinAccept
//   GET  /api/events               server-sent LiveEvents
//   GET  /api/checkpoints/latest   the newest verified .vtck file (x-checkpoint-step header)
//   GET  /api/checkpoints/<step>   the verified .vtck file of that step
//   POST /api/checkpoints/<step>?peer=<id>   a checkpoint the coordinator asked that peer for
//                                  (Authorization: Bearer <its token>; octet-stream body)
//   GET  /api/metrics              the job's metrics history: { records: [...] }, newest last
//   GET  /api/credit[?donor=ID]    the credit board (credit.ts): top donors, totals, the asking donor's line
//   POST /api/admin/pause|resume|join-token|schedule|volunteer-token|revoke-token|volunteer-tokens
//                                  the job owner's actions (admin token)
//   GET  /api/model.onnx           the newest checkpoint as an ONNX file (src/export)
//   GET  /api/samples/val/<id>     one test image as stored (PNG/JPEG; x-label header): the dashboard's grid
//   GET  /data/<dataset>/<file>    manifest.json and shards of the job's data set
//
// A private job's routes that serve data, weights, the model, metrics or events need a
// credential (checkAccess), as "Authorization: Bearer <token>" or ?token=<token> (an
// EventSource or an image tag cannot set a header): the join token (volunteers), a volunteer's
// own token (volunteer-tokens.ts; not once revoked) or the admin token open every one; the view
// token (people who watch) opens the dashboard's: the job, its events, metrics and credit board,
// the model, the test images and the data set's manifest (class names),
// never the training images or the checkpoints. /api/join, the admin and upload routes check
// their own tokens; the page's code and /ca.crt stay open (nothing of the job is in them).
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join } from 'node:path';
import { DONOR_ID, MAX_TOKEN_LENGTH, type DirectOffer, type IceServer, type JoinAccept, type LiveEvent } from '../src/protocol/messages.ts';
import { decodePeerMessage, expectType } from '../src/protocol/decode.ts';
import { FieldReader, describe } from '../src/protocol/fields.ts';
import { CheckpointError, decodeCheckpoint } from '../src/checkpoint/format.ts';
import type { CheckpointStore } from './checkpoints.ts';
import type { CreditView } from './credit.ts';
import { readMetrics } from './metrics.ts';
import type { RateLimiter } from './rate-limit.ts';
import type { Joiner } from './bans.ts';
import type { EventHub } from './events.ts';
import { HttpError, bearerToken, mediaType, readBody, readJsonBody, requestUrl, sendJson } from './http.ts';
import { JOIN_TOKEN_PATTERN, JOIN_TOKEN_RULE, publicJobInfo, type JobConfig } from './job.ts';
import { isolate, pathSegments, sendFileFrom } from './serve-files.ts';
import { hostOfHeader } from './ice.ts';
import type { SignalingServer } from './signaling.ts';

/** `paused`: the owner paused the job (admin), or asked it to pause at the next step boundary. */
export interface JobStatus { step: number; generation: number; peers: number; paused?: boolean }

export interface RouteContext {
  job: JobConfig;
  /** The u32 job id carried by ring frames and step assignments. */
  jobId: number;
  /** Holds one folder per data set (`<dataDir>/<dataset>/manifest.json`, shards). */
  dataDir: string;
  /** The job's data set folder when it is not `<dataDir>/<dataset>` (ImageNet shards built per size and source). */
  dataFolder?: string;
  checkpoints: CheckpointStore;
  signaling: SignalingServer;
  events: EventHub;
  heartbeatMs: number;
  /** Largest JSON body accepted by POST routes. */
  maxBodyBytes: number;
  status(): JobStatus;
  /**
   * Told about each accepted join (the membership logic queues it for the next boundary); `address`: where it came from; `tokenLabel`:
   * whose volunteer token it joined with (none: the job's join token, or a public job).
   */
  onJoin(peerId: string, token: string, who: Joiner): void;
  /** Why a join is refused (a peer verification convicted: bans.ts), or null; none: nobody is. */
  refuseJoin?: (j: Joiner) => string | null;
  /** A joiner that offered direct links (a Node volunteer's TLS port) from `address`: the secret its answer carries (direct-links.ts); none: not taken. */
  directJoin?: (peerId: string, address: string, offer: DirectOffer) => string;
  /** Checkpoint uploads; without it, POST /api/checkpoints/<step> is refused. */
  uploads?: UploadPolicy;
  /** The metrics file GET /api/metrics serves (none: 404). */
  metricsPath?: string;
  /** Joins per client address. */
  joinLimiter?: RateLimiter;
  /** Admin actions (POST /api/admin/<action>); none: refused. */
  admin?: AdminActions;
  /** Resolves when every metric recorded so far is in the file (GET /api/metrics waits for it). */
  metricsFlushed?: () => Promise<void>;
  /** The credit board (credit.ts creditView) with the line of the donor whose lasting id is given. */
  credit?: (donor: string | null) => CreditView;
  /** The built page (vite build: index.html, assets/); none: / explains how to build it. */
  pageDir?: string;
  /**
   * The ICE servers a joining peer is given (TURN credentials made for it), from the host it
   * reached the coordinator by (its Host header; null when absent); none: [].
   */
  iceServers?: (peerId: string, host: string | null) => IceServer[];
  /** The local CA (tls.ts) whose certificate GET /ca.crt serves; none: 404. */
  localCa?: { pem: string; sha256: string };
  /** The addresses people can join by (addresses.ts), never with the join token. */
  joinUrls?: () => string[];
  /** The newest checkpoint as ONNX (null: no checkpoint yet); none: GET /api/model.onnx is 404. */
  onnx?: () => Promise<{ fileName: string; chunks: Uint8Array[] } | null>;
  /** A private job's view token (checkAccess): what people who watch the dashboard are given. */
  viewToken?: string;
  /** A private job's tokens of one volunteer each (volunteer-tokens.ts): who holds a token (null: none of them). */
  volunteerTokens?: { holder(given: string): TokenHolder | null };
  /** One stored test image by id (GET /api/samples/val/<id>); none: 404. */
  valSample?: (id: number) => Promise<{ bytes: Uint8Array; label: number; mediaType: string }>;
}

/** What the job owner may do with the admin token (coordinator/run.ts implements them). */
export interface AdminActions {
  token: string;
  pause(): void;
  resume(): void;
  /** Replaces a private job's join token (a new random one when none is given); returns it. */
  rotateJoinToken(token?: string): Promise<string>;
  /** Changes how often the job evaluates and checkpoints. */
  setSchedule(s: { evalEvery?: number; checkpointEvery?: number }): Promise<void>;
  /** A private job's new token for one volunteer, labelled with who gets it; returns it. */
  issueVolunteerToken(label: string): Promise<string>;
  /** Revokes the volunteer token labelled `label` (false: no such label). */
  revokeVolunteerToken(label: string, reason: string): Promise<boolean>;
  /** The volunteer tokens' labels, when issued, and why revoked (never the tokens). */
  volunteerTokens(): { label: string; issued: number; revoked?: { time: number; reason: string } }[];
}

/** A volunteer token as its holder is known (volunteer-tokens.ts): its label, and why it was revoked (null: it opens the job). */
export interface TokenHolder { label: string; revoked: string | null }

export interface UploadPolicy {
  /** The model fingerprint an upload must carry. */
  fingerprint: string;
  /** Largest upload accepted (the model's checkpoint size plus room for the header). */
  maxBytes: number;
  /** null when `peerId` (holding `token`) may upload `step` now, else why not (as an HttpError). */
  check(peerId: string, token: string, step: number): HttpError | null;
  stored(peerId: string, step: number): void;
}

/** GET /api/metrics sends at most this many (the newest) records. */
const MAX_METRIC_RECORDS = 20_000;

type Handler = (req: IncomingMessage, res: ServerResponse, ctx: RouteContext, segments: string[]) => Promise<void>;

/** What a route of a private job serves: what people who watch see, or what only those who train get. */
type Access = 'watch' | 'train';

/** Refuses a request to a private job's route without a credential for `need` (see the header). */
export function checkAccess(req: IncomingMessage, ctx: RouteContext, need: Access): void {
  if (ctx.job.access.kind !== 'private') return;
  const given = bearerToken(req) ?? requestUrl(req).searchParams.get('token');
  const what = need === 'watch' ? 'its join token or its view token' : 'its join token (the view token shows the dashboard only)';
  if (!given) throw new HttpError('unauthorized', `this job is private: send ${what} as "Authorization: Bearer <token>" or ?token=<token>`);
  const opens = (t: string | undefined): boolean => t !== undefined && given.length <= MAX_TOKEN_LENGTH && tokensMatch(given, t);
  if (opens(ctx.job.access.joinToken) || opens(ctx.admin?.token) || (need === 'watch' && opens(ctx.viewToken))) return;
  const holder = given.length <= MAX_TOKEN_LENGTH ? ctx.volunteerTokens?.holder(given) ?? null : null;
  if (holder && holder.revoked === null) return;
  if (holder) throw new HttpError('forbidden', revokedText(holder));
  throw new HttpError('forbidden', `this job is private and that token does not open it: ask its owner for ${what}`);
}

/** A handler behind checkAccess. */
const guarded = (need: Access, h: Handler): Handler => (req, res, ctx, segments) => {
  checkAccess(req, ctx, need);
  return h(req, res, ctx, segments);
};

/** Constant-time comparison: hashing first makes the lengths equal, so length leaks nothing. */
export function tokensMatch(given: string, expected: string): boolean {
  const h = (s: string): Buffer => createHash('sha256').update(s).digest();
  return timingSafeEqual(h(given), h(expected));
}

const getJob: Handler = async (_req, res, ctx) => {
  const tls = ctx.localCa ? { caUrl: '/ca.crt', caSha256: ctx.localCa.sha256 } : null;
  sendJson(res, 200, { jobId: ctx.jobId, job: publicJobInfo(ctx.job), ...ctx.status(), joinUrls: ctx.joinUrls?.() ?? [], tls });
};

/** The local CA's certificate (never its key), for people to trust on their devices. */
const getCaCert: Handler = async (_req, res, ctx) => {
  if (!ctx.localCa) {
    throw new HttpError(
      'not-found',
      'this coordinator has no local certificate authority (it serves plain HTTP on loopback, or a real certificate from --cert)',
    );
  }
  res.writeHead(200, {
    'content-type': 'application/x-x509-ca-cert', 'content-disposition': 'attachment; filename="volunteer-trainer-ca.crt"', 'cache-control': 'no-cache',
  });
  res.end(ctx.localCa.pem);
};

const postJoin: Handler = async (req, res, ctx) => {
  if (ctx.joinLimiter && !ctx.joinLimiter.take(req.socket.remoteAddress ?? '?')) {
    throw new HttpError('too-many-requests', 'too many joins from this address: wait a few seconds before joining again');
  }
  const d = expectType(decodePeerMessage(await readJsonBody(req, ctx.maxBodyBytes)), 'join');
  if (!d.ok) throw new HttpError('bad-request', describe(d.error));
  const access = ctx.job.access;
  let tokenLabel: string | undefined;
  if (access.kind === 'private') {
    if (d.value.token === undefined) throw new HttpError('unauthorized', 'this job is private: join with the token its owner gave you');
    if (!tokensMatch(d.value.token, access.joinToken)) {
      const holder = ctx.volunteerTokens?.holder(d.value.token) ?? null;
      if (!holder) throw new HttpError('forbidden', 'wrong join token: ask the job owner for the current one');
      if (holder.revoked !== null) throw new HttpError('forbidden', revokedText(holder));
      tokenLabel = holder.label;
    }
  }
  const address = req.socket.remoteAddress;
  const who: Joiner = {
    name: d.value.name ?? null, ...(d.value.donor ? { donor: d.value.donor } : {}), ...(address ? { address } : {}), ...(tokenLabel ? { tokenLabel } : {}),
    ...(d.value.probeMsPerImage !== undefined ? { probeMsPerImage: d.value.probeMsPerImage } : {}),
    ...(d.value.microBatch !== undefined ? { microBatch: d.value.microBatch } : {}),
  };
  const refused = ctx.refuseJoin?.(who);
  if (refused) throw new HttpError('forbidden', refused);
  const issued = ctx.signaling.issue();
  const newest = (await ctx.checkpoints.list())[0];
  const accept: JoinAccept = {
    type: 'join-accept', peerId: issued.id, signalingToken: issued.token, signalingPath: ctx.signaling.path,
    job: ctx.jobId, heartbeatMs: ctx.heartbeatMs, checkpointStep: newest ? newest.step : null,
    iceServers: ctx.iceServers?.(issued.id, hostOfHeader(req.headers.host)) ?? [],
  };
  const directSecret = d.value.direct && address && ctx.directJoin ? ctx.directJoin(issued.id, address, d.value.direct) : undefined;
  if (directSecret) accept.directSecret = directSecret;
  ctx.onJoin(issued.id, issued.token, who);
  ctx.events.publish({ type: 'peer-joined', peerId: issued.id, name: d.value.name ?? null });
  sendJson(res, 200, accept);
};

const getEvents: Handler = async (_req, res, ctx) => {
  const { step, generation } = ctx.status();
  const hello: LiveEvent = { type: 'hello', job: ctx.jobId, step, generation };
  if (!ctx.events.open(res, hello)) throw new HttpError('unavailable', 'too many live-event listeners: try again later');
};

function sendCheckpointFile(res: ServerResponse, file: { step: number; bytes: Uint8Array }): void {
  res.writeHead(200, {
    'content-type': 'application/octet-stream', 'content-length': file.bytes.byteLength, 'x-checkpoint-step': String(file.step), 'cache-control': 'no-store',
  });
  res.end(file.bytes);
}

const getLatestCheckpoint: Handler = async (_req, res, ctx) => {
  const file = await ctx.checkpoints.readNewestFile();
  if (!file) throw new HttpError('not-found', 'no checkpoint yet: start from the job seed');
  sendCheckpointFile(res, file);
};

const STEP = /^\d{1,10}$/;
function stepOf(segment: string | undefined): number {
  if (segment === undefined || !STEP.test(segment)) {
    throw new HttpError('not-found', 'checkpoints are /api/checkpoints/latest or /api/checkpoints/<step> (a whole number)');
  }
  return Number(segment);
}

const getCheckpointOfStep: Handler = async (_req, res, ctx, segments) => {
  const step = stepOf(segments[2]);
  const file = await ctx.checkpoints.readStepFile(step);
  if (!file) throw new HttpError('not-found', `no usable checkpoint of step ${step}: GET /api/checkpoints/latest for the newest`);
  sendCheckpointFile(res, file);
};

const postCheckpoint: Handler = async (req, res, ctx, segments) => {
  const step = stepOf(segments[2]);
  const policy = ctx.uploads;
  if (!policy) throw new HttpError('forbidden', 'this coordinator takes no checkpoint uploads');
  const peerId = requestUrl(req).searchParams.get('peer') ?? '';
  const token = bearerToken(req);
  if (!token) throw new HttpError('unauthorized', 'send the token your join gave you as "Authorization: Bearer <token>"');
  const refused = policy.check(peerId, token, step);
  if (refused) throw refused;
  if (mediaType(req) !== 'application/octet-stream') throw new HttpError('unsupported-media-type', 'send the .vtck file as application/octet-stream');
  const bytes = new Uint8Array(await readBody(req, policy.maxBytes, (declared) =>
    `a checkpoint of this job is at most ${policy.maxBytes} bytes${declared === undefined ? '' : `, this one says ${declared}`}`));
  let c;
  try {
    c = decodeCheckpoint(bytes, `the upload of step ${step}`);
  } catch (e) {
    if (!(e instanceof CheckpointError)) throw e;
    throw new HttpError('bad-request', e.message);
  }
  if (c.fingerprint !== policy.fingerprint) throw new HttpError('conflict', `the upload is of model ${c.fingerprint}, this job trains ${policy.fingerprint}`);
  if (c.step !== step) throw new HttpError('bad-request', `the upload holds step ${c.step}, the URL says ${step}`);
  // Checked again: the job may have moved on while the body arrived.
  const late = policy.check(peerId, token, step);
  if (late) throw late;
  await ctx.checkpoints.write(c);
  policy.stored(peerId, step);
  sendJson(res, 201, { step });
};

const ADMIN_ACTIONS = ['pause', 'resume', 'join-token', 'schedule', 'volunteer-token', 'revoke-token', 'volunteer-tokens'] as const;

/** What a revoked volunteer token's holder reads. */
function revokedText(h: TokenHolder): string {
  return `the token "${h.label}" was revoked (${h.revoked ?? ''}): ask the job's owner`;
}

/** POST /api/admin/<action> with "Authorization: Bearer <admin token>". */
const postAdmin: Handler = async (req, res, ctx, segments) => {
  const admin = ctx.admin;
  if (!admin) throw new HttpError('forbidden', 'this coordinator has no admin actions');
  const action = ADMIN_ACTIONS.find((a) => a === segments[2]);
  if (!action || segments.length !== 3) throw new HttpError('not-found', `admin actions are POST /api/admin/${ADMIN_ACTIONS.join('|')}`);
  const token = bearerToken(req);
  if (!token) throw new HttpError('unauthorized', 'admin actions need "Authorization: Bearer <admin token>" (npm start printed it; it is in the job folder)');
  if (!tokensMatch(token, admin.token)) throw new HttpError('forbidden', 'wrong admin token');
  const body = (req.headers['content-length'] ?? '0') === '0' && !req.headers['transfer-encoding'] ? {} : await readJsonBody(req, 4096);
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new HttpError('bad-request', 'the body must be a JSON object (or empty)');
  const r = new FieldReader(body as Record<string, unknown>);
  switch (action) {
    case 'pause':
    case 'resume':
      r.only([]);
      if (r.problems.length) throw new HttpError('bad-request', r.problems.join('; '));
      if (action === 'pause') admin.pause();
      else admin.resume();
      return sendJson(res, 200, { ...ctx.status(), paused: action === 'pause' });
    case 'join-token': {
      r.only(['token']);
      const joinToken = r.has('token') ? r.str('token', MAX_TOKEN_LENGTH, JOIN_TOKEN_PATTERN, JOIN_TOKEN_RULE) : undefined;
      if (r.problems.length) throw new HttpError('bad-request', r.problems.join('; '));
      return sendJson(res, 200, { joinToken: await admin.rotateJoinToken(joinToken) });
    }
    case 'schedule': {
      r.only(['evalEvery', 'checkpointEvery']);
      const patch: { evalEvery?: number; checkpointEvery?: number } = {};
      if (r.has('evalEvery')) patch.evalEvery = r.int('evalEvery', 0, 2 ** 32 - 1);
      if (r.has('checkpointEvery')) patch.checkpointEvery = r.int('checkpointEvery', 1, 2 ** 32 - 1);
      if (r.problems.length) throw new HttpError('bad-request', r.problems.join('; '));
      await admin.setSchedule(patch);
      return sendJson(res, 200, { evalEvery: ctx.job.evalEvery, checkpointEvery: ctx.job.checkpointEvery });
    }
    case 'volunteer-token':
    case 'revoke-token':
    case 'volunteer-tokens':
      return sendJson(res, 200, await tokenAction(action, r, admin));
  }
};

/** The admin's volunteer-token actions (volunteer-tokens.ts): issue one for a label, revoke one, or list them. */
async function tokenAction(action: 'volunteer-token' | 'revoke-token' | 'volunteer-tokens', r: FieldReader, admin: AdminActions): Promise<object> {
  r.only(action === 'volunteer-tokens' ? [] : action === 'revoke-token' ? ['label', 'reason'] : ['label']);
  const label = action === 'volunteer-tokens' ? '' : r.str('label', 40);
  const reason = r.has('reason') ? r.str('reason', 200) : 'revoked by the job owner';
  if (r.problems.length) throw new HttpError('bad-request', r.problems.join('; '));
  if (action === 'volunteer-tokens') return { tokens: admin.volunteerTokens() };
  if (action === 'volunteer-token') return { label, token: await admin.issueVolunteerToken(label) };
  if (!(await admin.revokeVolunteerToken(label, reason))) throw new HttpError('not-found', `no volunteer token is labelled "${label}"`);
  return { label, revoked: true };
}

const getMetrics: Handler = async (_req, res, ctx) => {
  if (!ctx.metricsPath) throw new HttpError('not-found', 'this coordinator keeps no metrics');
  await ctx.metricsFlushed?.();
  const records = await readMetrics(ctx.metricsPath);
  sendJson(res, 200, { records: records.slice(-MAX_METRIC_RECORDS) });
};

/** GET /api/credit[?donor=ID]: the board's top donors and totals, and the asking donor's own line (DONOR_ID). */
const getCredit: Handler = async (req, res, ctx) => {
  if (!ctx.credit) throw new HttpError('not-found', 'this coordinator keeps no credit');
  const donor = new URL(req.url ?? '/', 'http://x').searchParams.get('donor');
  if (donor !== null && !DONOR_ID.test(donor)) {
    throw new HttpError('bad-request', 'donor must be a donor id of 8 to 64 characters [A-Za-z0-9_-] (the page keeps its own)');
  }
  sendJson(res, 200, ctx.credit(donor));
};

const TYPES: Record<string, string> = {
  html: 'text/html; charset=utf-8', js: 'text/javascript; charset=utf-8', css: 'text/css; charset=utf-8', svg: 'image/svg+xml',
  json: 'application/json; charset=utf-8', wasm: 'application/wasm', png: 'image/png', ico: 'image/x-icon', map: 'application/json',
};
const typeOf = (name: string): string => TYPES[name.slice(name.lastIndexOf('.') + 1)] ?? 'application/octet-stream';

/** The page and its assets: `/` (index.html), `/assets/<file>`, `/<file>` (favicon and such). */
const getPage: Handler = async (_req, res, ctx, segments) => {
  isolate(res); // COOP + COEP: the page is cross-origin isolated (wasm threads)
  if (!ctx.pageDir) throw new HttpError('not-found', 'this coordinator serves no page: build it with `npm run build` (npm start does) and restart');
  const [first, second, ...more] = segments;
  if (first === '' || first === undefined || first === 'index.html') return sendFileFrom(res, ctx.pageDir, 'index.html', TYPES.html!);
  if (first === 'assets' && second !== undefined && more.length === 0) return sendFileFrom(res, join(ctx.pageDir, 'assets'), second, typeOf(second));
  if (second === undefined) return sendFileFrom(res, ctx.pageDir, first, typeOf(first));
  throw new HttpError('not-found', `no page file /${segments.join('/').slice(0, 100)}`);
};

const getData: Handler = async (_req, res, ctx, segments) => {
  const [, dataset, name, ...more] = segments;
  if (dataset !== ctx.job.dataset || name === undefined || more.length) {
    throw new HttpError('not-found', `this job serves /data/${ctx.job.dataset}/<file> only`);
  }
  await sendFileFrom(
    res, ctx.dataFolder ?? join(ctx.dataDir, dataset), name, name.endsWith('.json') ? 'application/json; charset=utf-8' : 'application/octet-stream',
  );
};

/** GET /api/model.onnx: the newest checkpoint, exported as it is asked for. */
const getOnnx: Handler = async (_req, res, ctx) => {
  if (!ctx.onnx) throw new HttpError('not-found', 'this coordinator does not export its model');
  const model = await ctx.onnx();
  if (!model) throw new HttpError('not-found', 'no checkpoint yet: the model can be downloaded after the first checkpoint');
  const bytes = model.chunks.reduce((a, c) => a + c.length, 0);
  res.writeHead(200, {
    'content-type': 'application/octet-stream', 'content-length': bytes,
    'content-disposition': `attachment; filename="${model.fileName.replace(/[^A-Za-z0-9._-]/g, '_')}"`, 'cache-control': 'no-store',
  });
  for (const c of model.chunks) res.write(c);
  res.end();
};

/** GET /api/samples/val/<id>: one test image as stored, its class index in x-label. */
const getValSample = async (res: ServerResponse, ctx: RouteContext, segments: string[]): Promise<void> => {
  if (!ctx.valSample) throw new HttpError('not-found', 'this coordinator serves no test images');
  const raw = segments[3] ?? '';
  const id = /^\d{1,10}$/.test(raw) ? Number(raw) : NaN;
  let sample;
  try {
    if (!Number.isSafeInteger(id)) throw new Error('not an id');
    sample = await ctx.valSample(id);
  } catch (e) {
    if (e instanceof Error && 'kind' in e && e.kind !== 'bad-input' && e.message !== 'not an id') throw e;
    throw new HttpError('not-found', `no test image ${raw.slice(0, 20)}: ids are 0 .. (test images - 1)`);
  }
  res.writeHead(200, {
    'content-type': sample.mediaType, 'content-length': sample.bytes.length, 'x-label': String(sample.label), 'cache-control': 'max-age=3600',
  });
  res.end(sample.bytes);
};

const ROUTES: Record<string, Partial<Record<string, Handler>>> = {
  '/api/model.onnx': { GET: guarded('watch', getOnnx) },
  '/api/job': { GET: guarded('watch', getJob) },
  '/api/join': { POST: postJoin },
  '/api/events': { GET: guarded('watch', getEvents) },
  '/api/checkpoints/latest': { GET: guarded('train', getLatestCheckpoint) },
  '/api/metrics': { GET: guarded('watch', getMetrics) },
  '/api/credit': { GET: guarded('watch', getCredit) },
  '/ca.crt': { GET: getCaCert },
};

/** Routes one request (signaling paths are handled before this). */
export async function route(req: IncomingMessage, res: ServerResponse, ctx: RouteContext): Promise<void> {
  const segments = pathSegments(req.url ?? '/');
  const path = `/${segments.join('/')}`;
  const method = req.method ?? 'GET';
  if (segments[0] === 'data') {
    if (method !== 'GET' && method !== 'HEAD') throw new HttpError('method-not-allowed', 'data files are read with GET');
    // The manifest names the classes the dashboard shows; the shards are the training images.
    checkAccess(req, ctx, segments.length === 3 && segments[2] === 'manifest.json' ? 'watch' : 'train');
    return getData(req, res, ctx, segments);
  }
  if (segments[0] === 'api' && segments[1] === 'admin') {
    if (method !== 'POST') throw new HttpError('method-not-allowed', 'admin actions take POST');
    return postAdmin(req, res, ctx, segments);
  }
  if (segments[0] === 'api' && segments[1] === 'checkpoints' && segments.length === 3 && segments[2] !== 'latest') {
    if (method === 'GET') return guarded('train', getCheckpointOfStep)(req, res, ctx, segments);
    if (method === 'POST') return postCheckpoint(req, res, ctx, segments);
    throw new HttpError('method-not-allowed', '/api/checkpoints/<step> takes GET, POST');
  }
  if (segments[0] === 'api' && segments[1] === 'samples' && segments[2] === 'val' && segments.length === 4) {
    if (method !== 'GET') throw new HttpError('method-not-allowed', 'test images are read with GET');
    checkAccess(req, ctx, 'watch');
    return getValSample(res, ctx, segments);
  }
  const table = Object.hasOwn(ROUTES, path) ? ROUTES[path] : undefined;
  if (!table && segments[0] !== 'api' && (method === 'GET' || method === 'HEAD')) return getPage(req, res, ctx, segments);
  if (!table) {
    throw new HttpError('not-found', `no route ${path.slice(0, 100)}: the API is /api/job, /api/join, /api/events, /api/metrics, /api/checkpoints/latest, `
      + '/api/checkpoints/<step>, /api/model.onnx, /api/samples/val/<id>, /data/<dataset>/<file>');
  }
  const handler = table[method];
  if (!handler) throw new HttpError('method-not-allowed', `${path} takes ${Object.keys(table).join(', ')}`);
  return handler(req, res, ctx, segments);
}
