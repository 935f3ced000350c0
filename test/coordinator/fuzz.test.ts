// Seeded fuzz of every message decoder (in process) and of every HTTP route and the session
// WebSocket of a real running job (real HTTP server, real sockets, the real PeerJS server):
// random and mutated inputs never crash, hang or answer 5xx; every refusal carries a reason;
// and nothing changes: the job folder's files are byte-identical, the driver's state and the
// join token are the same, and a valid join still works afterwards.
//
// The seed is printed; VT_FUZZ_SEED=<n> replays a run. The coordinator limits requests per
// source address, so requests come from 127.0.0.2-127.0.0.97 (all loopback): the limits stay
// as configured in production and almost no case is wasted on a 429.
import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { CheckpointError, decodeCheckpoint, encodeCheckpoint, layoutFingerprint } from '../../src/checkpoint/format.ts';
import {
  ERROR_KINDS, MAX_MESSAGE_BYTES, PROTOCOL_VERSION, SESSION_PATH, type CoordinatorMessage, type JoinAccept, type PeerMessage,
} from '../../src/protocol/messages.ts';
import { decodeCoordinatorMessage, decodePeerMessage, expectType } from '../../src/protocol/decode.ts';
import { FieldReader, describe as describeError, parseJsonText, type Decoded } from '../../src/protocol/fields.ts';
import { FrameKind, HEADER_BYTES, abortFrame, heartbeatFrame, parseAbort, parseFrame, writeHeader } from '../../src/protocol/frames.ts';
import { layoutOf } from '../../src/nn/layout.ts';
import { modelByName } from '../../src/nn/models.ts';
import { buildTestData, startTestJob, tempRoot, testJob, until, type TestJob } from '../../testbed/jobs.ts';
import { Gen, fuzzSeed } from './fuzz-gen.ts';
import { HangError, rawRequest, type RawReply, type RawRequest } from './fuzz-http.ts';

const SEED = fuzzSeed(20_250_601);
const replay = `fuzz seed ${SEED} (replay with VT_FUZZ_SEED=${SEED})`;
console.log(replay);

// ---- valid messages of every type (the fuzz mutates these) ----

const PEER_MESSAGES: PeerMessage[] = [
  { type: 'join', protocol: PROTOCOL_VERSION, token: 'lab-token-0123456789', name: 'desk-1' },
  { type: 'heartbeat', peerId: 'p-1', generation: 3, step: 17 },
  {
    type: 'step-result', peerId: 'p-1', generation: 3, step: 17, loss: 2.25, checksum: '00ff12ab', timings: { computeMs: 120.5, commMs: 30, waitMs: 0 },
    images: 64,
  },
  { type: 'collective-failure', peerId: 'p-1', generation: 3, step: 17, failedPeerId: 'p-2', kind: 'peer-timeout' },
  { type: 'checkpoint-announce', peerId: 'p-0', generation: 3, step: 100, bytes: 123456, sha256: 'a'.repeat(64) },
  { type: 'leave', peerId: 'p-1', reason: 'tab closed' },
  { type: 'ready', peerId: 'p-3', step: 40, checksum: '0123456789abcdef', device: 'llvmpipe' },
  { type: 'eval-result', peerId: 'p-3', step: 40, counts: { samples: 100, top1: 12, top5: 50, lossSum: 230.5 } },
];
const COORDINATOR_MESSAGES: CoordinatorMessage[] = [
  {
    type: 'join-accept', peerId: 'p-1', signalingToken: 'abc123', signalingPath: '/signal', job: 7, heartbeatMs: 5000, checkpointStep: 200,
    iceServers: [{ urls: ['stun:10.0.0.1:8080'] }, { urls: ['turn:10.0.0.1:3478?transport=udp'], username: '1767225600:p-1', credential: 'YWJj+/==' }],
  },
  {
    type: 'step-assignment', job: 7, generation: 2, step: 40, ring: ['p-0', 'p-1', 'p-2'], rank: 1, globalBatch: 8, sampleIds: [5, 9, 1], epoch: 0, seed: 42,
    uploadCheckpoint: true,
  },
  { type: 'error', kind: 'unauthorized', message: 'wrong join token' },
  { type: 'load-state', source: 'checkpoint', step: 40 },
  { type: 'upload-checkpoint', step: 40 },
  { type: 'done', step: 100, reason: 'finished' },
  { type: 'evicted', reason: 'its weights differ' },
  { type: 'evaluate', step: 40, ids: [0, 1, 2] },
];
const PEER_TYPES = [...new Set(PEER_MESSAGES.map((m) => m.type))];
const COORDINATOR_TYPES = [...new Set(COORDINATOR_MESSAGES.map((m) => m.type))];
const DECODE_KINDS = ['malformed', 'unknown-type', 'too-large'];
/**
 * A single decode of a message of at most MAX_MESSAGE_BYTES taking this long counts as a hang (a
 * quadratic decoder takes seconds there). Not tighter: on 2 shared cores a GC pause or a process
 * of the previous test file winding down made the 800 KB deep-nesting case take 390 ms once.
 */
const SLOW_MS = 1000;

/** Checks the shape of any Decoded: a value, or an error of a known kind with non-empty problems. */
function checkDecoded(d: Decoded<unknown>, what: string): 'ok' | 'refused' {
  if (d.ok) return 'ok';
  expect(DECODE_KINDS, what).toContain(d.error.kind);
  expect(d.error.problems.length, what).toBeGreaterThan(0);
  for (const p of d.error.problems) expect(
    typeof p === 'string' && p.length > 0 && p.length < 4000, `${what}: problem ${JSON.stringify(p).slice(0, 200)}`,
  ).toBe(true);
  expect(describeError(d.error).length, what).toBeGreaterThan(0);
  return 'refused';
}

/** Runs `f`, failing with the case's description (and the seed) when it throws or takes too long. */
function guarded<T>(what: string, f: () => T): T {
  const t0 = performance.now();
  let out: T;
  try {
    out = f();
  } catch (e) {
    throw new Error(`${what} threw instead of returning an error: ${e instanceof Error ? e.stack : String(e)} [${replay}]`);
  }
  const ms = performance.now() - t0;
  if (ms > SLOW_MS) throw new Error(`${what} took ${ms.toFixed(0)} ms [${replay}]`);
  return out;
}

function protoSnapshot(): string {
  return [Object.prototype, Array.prototype, Function.prototype].map((p) => Object.getOwnPropertyNames(p).sort().join(',')).join('|');
}

describe('decoders (in process)', () => {
  it('src/protocol/messages.ts: decodePeerMessage, decodeCoordinatorMessage, expectType, parseJsonText on mutated messages and mangled text', () => {
    const gen = new Gen(SEED);
    const before = protoSnapshot();
    const all = [...PEER_MESSAGES, ...COORDINATOR_MESSAGES] as unknown as Record<string, unknown>[];
    const tally = { ok: 0, refused: 0 };
    const t0 = performance.now();
    for (let i = 0; i < 6000; i++) {
      const base = gen.pick(all);
      let input: unknown;
      let what: string;
      if (i % 20 === 10) {
        // The valid message itself: its own side must accept it (a decoder refusing all fails here).
        input = structuredClone(base);
        what = `case ${i}: valid ${base.type}`;
        const own = (PEER_TYPES as string[]).includes(base.type as string) ? decodePeerMessage(input) : decodeCoordinatorMessage(input);
        expect(own.ok, `${what}: ${own.ok ? '' : describeError(own.error)}`).toBe(true);
      } else if (i % 3 === 0) {
        // Through the text path, as from a socket: JSON text, mangled, then parsed and decoded.
        const text = gen.chance(0.7) ? gen.mangleText(JSON.stringify(base)) : JSON.stringify(gen.mutateMany(base).value) ?? 'undefined';
        what = `case ${i}: text ${JSON.stringify(text.slice(0, 120))}`;
        const parsed = guarded(what, () => parseJsonText(text));
        if (checkDecoded(parsed, what) === 'refused') { tally.refused++; continue; }
        input = parsed.ok ? parsed.value : undefined;
      } else if (i % 11 === 1) {
        input = gen.value();
        what = `case ${i}: random value`;
      } else {
        const m = gen.mutateMany(base);
        input = m.value;
        what = `case ${i}: ${base.type} mutated by ${m.ops.join(', ')}`;
      }
      for (const [side, decode, types] of [['peer', decodePeerMessage, PEER_TYPES], ['coordinator', decodeCoordinatorMessage, COORDINATOR_TYPES]] as const) {
        const d = guarded(`${what} (${side} side)`, () => (decode as (v: unknown) => Decoded<PeerMessage | CoordinatorMessage>)(input));
        if (checkDecoded(d, what) === 'ok') {
          tally.ok++;
          // An accepted value is a plain message of a known type that survives the wire again.
          if (!d.ok) continue;
          expect((types as readonly string[]).includes(d.value.type), what).toBe(true);
          expect(Object.getPrototypeOf(d.value), what).toBe(Object.prototype);
          expect(decode(JSON.parse(JSON.stringify(d.value)) as unknown), what).toEqual(d);
        } else tally.refused++;
        const type = gen.pick(types as readonly string[]);
        const narrowed = guarded(`${what} expectType ${type}`, () => expectType(d as Decoded<{ type: string }>, type));
        checkDecoded(narrowed, `${what} expectType ${type}`);
        if (narrowed.ok) expect(narrowed.value.type).toBe(type);
      }
    }
    console.log(`protocol decoders: ${tally.ok} accepted, ${tally.refused} refused in ${(performance.now() - t0).toFixed(0)} ms`);
    // Both outcomes must be common, or the mutations test nothing (or the decoders refuse everything).
    expect(tally.ok, replay).toBeGreaterThan(400);
    expect(tally.refused, replay).toBeGreaterThan(5000);
    expect(protoSnapshot(), 'no prototype was polluted').toBe(before);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('parseJsonText: binary garbage, deep nesting and the size limit', () => {
    const gen = new Gen(SEED + 1);
    for (let i = 0; i < 1500; i++) {
      const text = i % 5 === 0 ? gen.mangleText('') : Buffer.from(gen.bytes(gen.int(400))).toString(gen.pick(['utf8', 'latin1', 'utf16le'] as const));
      checkDecoded(guarded(`garbage case ${i}`, () => parseJsonText(text)), `garbage case ${i}`);
    }
    const deep = guarded('deep nesting', () => parseJsonText(`${'['.repeat(400_000)}${']'.repeat(400_000)}`));
    checkDecoded(deep, 'deep nesting');
    if (deep.ok) checkDecoded(guarded('deep nesting decoded', () => decodePeerMessage(deep.value)), 'deep nesting decoded');
    const big = guarded('oversized', () => parseJsonText(' '.repeat(MAX_MESSAGE_BYTES + 1)));
    expect(!big.ok && big.error.kind).toBe('too-large');
  });

  it('FieldReader (the readers every route uses): every getter on random objects', () => {
    const gen = new Gen(SEED + 2);
    for (let i = 0; i < 3000; i++) {
      const obj = Object.fromEntries(Array.from({ length: gen.int(5) }, () => [gen.key(), gen.value()]));
      const r = new FieldReader(obj, gen.pick(['', 'counts', 'x'.repeat(100)]));
      const key = gen.chance(0.5) ? gen.key() : gen.pick(Object.keys(obj).concat('type'));
      const what = `FieldReader case ${i} key ${JSON.stringify(key)}`;
      guarded(what, () => {
        r.only(gen.chance(0.5) ? [] : ['type', key]);
        r.has(key);
        r.int(key, 0, gen.pick([0, 1, 2 ** 32 - 1]));
        r.num(key, -1e30, 1e30);
        r.bool(key);
        r.str(key, gen.pick([1, 64, 1000]), gen.chance(0.5) ? /^[a-z]+$/ : undefined);
        r.id(key);
        r.oneOf(key, ['a', 'b'] as const);
        r.array(key, gen.pick([0, 3, 1024]), (v) => (typeof v === 'number' ? null : 'must be a number'));
      });
      for (const p of r.problems) expect(typeof p === 'string' && p.length > 0 && p.length < 4000, what).toBe(true);
    }
  });

  it('src/protocol/frames.ts (peer-to-peer ring frames): parseFrame and parseAbort on mutated frames and garbage', () => {
    const gen = new Gen(SEED + 3);
    const ids = { job: 7, generation: 2 };
    const data = new Uint8Array(HEADER_BYTES + 16);
    writeHeader(data, { kind: FrameKind.data, phase: 0, dtype: 'f32', job: 7, generation: 2, step: 1, chunk: 0, offset: 0, length: 4 });
    const valid = [data, heartbeatFrame(ids), abortFrame(ids, { peerId: 'p-1', kind: 'stalled', detail: 'x' })];
    const tally = { ok: 0, refused: 0 };
    for (let i = 0; i < 3000; i++) {
      let frame: Uint8Array;
      if (i % 4 === 0) frame = gen.bytes(gen.int(HEADER_BYTES * 3));
      else {
        frame = new Uint8Array(gen.pick(valid));
        for (let k = 1 + gen.int(3); k > 0; k--) frame[gen.int(frame.length)] = gen.int(256);
        if (gen.chance(0.2)) frame = frame.subarray(0, gen.int(frame.length + 1));
        if (gen.chance(0.1)) { const f = new Uint8Array(frame.length + 1 + gen.int(64)); f.set(frame); frame = f; }
      }
      const what = `frame case ${i} (${frame.length} bytes)`;
      const parsed = guarded(what, () => parseFrame(frame));
      if (parsed.ok) tally.ok++;
      else { tally.refused++; expect(parsed.reason.length, what).toBeGreaterThan(0); }
      const notice = guarded(`${what} parseAbort`, () => parseAbort(frame));
      if (notice) for (const v of [notice.peerId, notice.kind, notice.detail]) expect(typeof v, what).toBe('string');
    }
    expect(tally.ok, replay).toBeGreaterThan(50);
    expect(tally.refused, replay).toBeGreaterThan(1500);
  });

  it('checkpoint uploads (decodeCheckpoint): a checkpoint or a CheckpointError, nothing else', () => {
    const gen = new Gen(SEED + 4);
    const valid = Buffer.concat(encodeCheckpoint({
      step: 3, generation: 1, fingerprint: 'f', weights: new Float32Array([1, 2, 3]), bnState: new Float32Array(2),
      optimizer: { momentum: new Float32Array(3) }, metadata: { a: 1 },
    }));
    let refused = 0;
    for (let i = 0; i < 1500; i++) {
      let file: Uint8Array = new Uint8Array(valid);
      if (i % 5 === 0) file = gen.bytes(gen.int(300));
      else if (i % 5 === 1) file = file.subarray(0, gen.int(file.length));
      else for (let k = 1 + gen.int(3); k > 0; k--) file[gen.int(file.length)] = gen.int(256);
      try {
        decodeCheckpoint(file, `fuzz case ${i}`);
      } catch (e) {
        if (!(e instanceof CheckpointError)) throw new Error(`fuzz case ${i}: decodeCheckpoint threw ${String(e)} instead of a CheckpointError [${replay}]`);
        refused++;
      }
    }
    expect(refused).toBeGreaterThan(1400);
  });
});

// ---- the running job ----

const JOIN_TOKEN = 'fuzz-join-token-0123456789';
let root: { dir: string; remove(): Promise<void> };
let job: TestJob;
let shard = '';
let addr = 0;
/** The next of 96 loopback source addresses: each stays far below the per-address limits. */
const nextAddress = (): string => `127.0.0.${2 + (addr++ % 96)}`;

async function folderDigest(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const e of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!e.isFile()) continue;
    const path = join(e.parentPath, e.name);
    out[relative(dir, path)] = createHash('sha256').update(await readFile(path)).digest('hex');
  }
  return out;
}

interface State { files: Record<string, string>; status: unknown; joinToken: string; schedule: [number, number] }
async function state(): Promise<State> {
  const access = job.job.access;
  return {
    files: await folderDigest(job.jobDir),
    status: job.driver.status(),
    joinToken: access.kind === 'private' ? access.joinToken : '',
    schedule: [job.job.evalEvery, job.job.checkpointEvery],
  };
}

async function validJoin(): Promise<JoinAccept> {
  const r = await rawRequest(job.coordinator.port, {
    method: 'POST', path: '/api/join', localAddress: nextAddress(),
    headers: [['content-type', 'application/json']],
    body: Buffer.from(JSON.stringify({ type: 'join', protocol: PROTOCOL_VERSION, token: JOIN_TOKEN, name: 'fuzz' })),
  }, 5000);
  expect(r.status, r.body.toString()).toBe(200);
  const d = decodeCoordinatorMessage(JSON.parse(r.body.toString()) as unknown);
  if (!d.ok || d.value.type !== 'join-accept') throw new Error(`not a join-accept: ${r.body.toString()}`);
  return d.value;
}

beforeAll(async () => {
  const t0 = performance.now();
  root = await tempRoot('fuzz');
  const data = await buildTestData(root.dir);
  shard = (await readdir(join(data.dataDir, 'mnist'))).find((f) => f.endsWith('.tar')) ?? 'none.tar';
  const pageDir = join(root.dir, 'page');
  await mkdir(join(pageDir, 'assets'), { recursive: true });
  await writeFile(join(pageDir, 'index.html'), '<!doctype html><title>vt</title>');
  await writeFile(join(pageDir, 'assets', 'app.js'), 'console.log(1)');
  // minPeers far above the number of sessions: no ring forms, so a message that is valid by
  // chance (a 'ready', a 'step-result') legitimately changes nothing either.
  job = await startTestJob(root.dir, 'job', data, testJob(6, { access: 'private', joinToken: JOIN_TOKEN, minPeers: 1000, checkpointEvery: 2 }), { pageDir });
  const spec = modelByName('small-cnn', [1, 28, 28], 10);
  const layout = layoutOf(spec);
  await job.checkpoints.write({
    step: 0, generation: 0, fingerprint: layoutFingerprint(spec.name, layout), weights: new Float32Array(layout.paramFloats),
    bnState: new Float32Array(layout.stateFloats), optimizer: { momentum: new Float32Array(layout.paramFloats) }, metadata: {},
  });
  console.log(`fuzz job ready in ${(performance.now() - t0).toFixed(0)} ms`);
}, 120_000);
let closed = false;
afterAll(async () => {
  if (!closed) await job?.close();
  await root?.remove();
});

/** Requests that are valid (or nearly: a wrong secret) on each route; the fuzz mangles them. */
function templates(accept: JoinAccept): RawRequest[] {
  const json: [string, string] = ['content-type', 'application/json'];
  const admin = (a: string, body?: unknown): RawRequest => ({
    method: 'POST', path: `/api/admin/${a}`, headers: [json, ['authorization', `Bearer ${'w'.repeat(32)}`]],
    body: body === undefined ? undefined : Buffer.from(JSON.stringify(body)),
  });
  return [
    { method: 'GET', path: '/api/job', headers: [] },
    {
      method: 'POST', path: '/api/join', headers: [json],
      body: Buffer.from(JSON.stringify({ type: 'join', protocol: PROTOCOL_VERSION, token: JOIN_TOKEN, name: 'n' })),
    },
    { method: 'GET', path: '/api/events', headers: [] },
    { method: 'GET', path: '/api/metrics', headers: [] },
    { method: 'GET', path: '/api/checkpoints/latest', headers: [] },
    { method: 'GET', path: '/api/checkpoints/0', headers: [] },
    {
      method: 'POST', path: `/api/checkpoints/0?peer=${accept.peerId}`,
      headers: [['content-type', 'application/octet-stream'], ['authorization', `Bearer ${accept.signalingToken}`]], body: Buffer.from('VTCK not really'),
    },
    admin('pause'), admin('resume'), admin('join-token', { token: 'another-join-token-42' }), admin('schedule', { evalEvery: 1, checkpointEvery: 1 }),
    { method: 'GET', path: '/data/mnist/manifest.json', headers: [] },
    { method: 'GET', path: `/data/mnist/${shard}`, headers: [] },
    { method: 'GET', path: '/', headers: [] },
    { method: 'GET', path: '/index.html', headers: [] },
    { method: 'GET', path: '/assets/app.js', headers: [] },
    { method: 'GET', path: '/signal', headers: [] },
    { method: 'GET', path: '/signal/peerjs/id', headers: [] },
    { method: 'GET', path: '/signal/peerjs/peers', headers: [] },
  ];
}

/** One mangled request from a template: path, method, headers and body each maybe changed. */
function mangle(gen: Gen, t: RawRequest, secrets: string[], paths: string[]): { req: RawRequest; what: string } {
  const req: RawRequest = { ...t, headers: t.headers.filter(() => gen.chance(0.8)), localAddress: nextAddress() };
  const edits: string[] = [];
  if (gen.chance(0.4)) { req.path = gen.path(paths); edits.push('path'); }
  if (gen.chance(0.2)) { req.method = gen.method(); edits.push('method'); }
  if (gen.chance(0.3)) {
    const ct = gen.contentType();
    req.headers = req.headers.filter(([k]) => k !== 'content-type').concat(ct === undefined ? [] : [['content-type', ct]]);
    edits.push('content-type');
  }
  if (gen.chance(0.3)) {
    const a = gen.authorization(secrets);
    req.headers = req.headers.filter(([k]) => k !== 'authorization').concat(a === undefined ? [] : [['authorization', a]]);
    edits.push('authorization');
  }
  if (gen.chance(0.5)) {
    const base = t.body ? t.body.toString() : '{}';
    let parsed: unknown = null;
    try { parsed = JSON.parse(base); } catch { parsed = null; }
    const k = gen.int(4);
    if (k === 0 && typeof parsed === 'object' && parsed !== null)
      req.body = Buffer.from(JSON.stringify(gen.mutateMany(parsed as Record<string, unknown>).value) ?? '');
    else if (k === 1) req.body = Buffer.from(gen.mangleText(base));
    else if (k === 2) req.body = Buffer.from(gen.bytes(gen.int(2000)));
    else req.body = Buffer.from(JSON.stringify(gen.value()) ?? '');
    edits.push('body');
  }
  const len = req.body?.length ?? 0;
  if (gen.chance(0.25)) {
    // Content-length: the truth, a lie either way, nonsense, or chunked.
    const cl = gen.pick([
      String(len), String(len + 1 + gen.int(100)), String(Math.max(0, len - 1 - gen.int(10))), '-1', 'abc', '1e3', '99999999999999999999', `${len}, ${len + 1}`,
      '',
    ]);
    req.headers = req.headers.concat([['content-length', cl]]);
    req.halfClose = true; // a length over the body would otherwise wait for bytes that never come
    edits.push(`content-length ${cl.slice(0, 24)}`);
  }
  return { req, what: `${req.method} ${req.path.slice(0, 160)} [${edits.join(', ') || 'as is'}]` };
}

function checkReply(r: RawReply, req: RawRequest, what: string): void {
  if (r.status === 0) {
    // Closed without a reply: only when we cut the request short ourselves (a length over the body).
    expect(req.halfClose, `${what} -> the connection closed without a reply`).toBe(true);
    return;
  }
  expect(r.status < 500, `${what} -> ${r.status} ${r.body.toString().slice(0, 300)} [${replay}]`).toBe(true);
  expect((r.status >= 200 && r.status < 300) || (r.status >= 400 && r.status < 500), `${what} -> ${r.status}`).toBe(true);
  // HEAD: no body by definition; the reply still says what a GET would carry.
  if (r.status >= 400 && req.method === 'HEAD') expect(r.headers['content-type'], `${what} -> ${r.status} without a content type`).toBeTruthy();
  else if (r.status >= 400) {
    // A reason: the protocol's ErrorMessage (API routes), or a text body (parser, PeerJS, signaling).
    expect(r.body.length, `${what} -> ${r.status} with an empty body`).toBeGreaterThan(0);
    if (/application\/json/.test(r.headers['content-type'] ?? '')) {
      const d = decodeCoordinatorMessage(JSON.parse(r.body.toString()) as unknown);
      expect(d.ok && d.value.type === 'error' && ERROR_KINDS.includes(d.value.kind), `${what} -> ${r.body.toString().slice(0, 200)}`).toBe(true);
    }
  }
  if (r.status < 300) {
    // Legitimate successes only: never an admin action (no case has the admin token), never an upload.
    expect(req.path.startsWith('/api/admin') && req.method === 'POST', `${what} -> ${r.status}: an admin action without the admin token`).toBe(false);
    expect(/^\/api\/checkpoints\/\d/.test(req.path) && req.method === 'POST', `${what} -> ${r.status}: an upload nobody asked for`).toBe(false);
  }
}

describe('HTTP routes of a running job', () => {
  it('2,000 mangled requests on every route: 2xx or 4xx with a reason, never 5xx or a hang; nothing changes', async ({ onTestFailed }) => {
    onTestFailed(() => console.error(`FAILED with ${replay}`));
    const before = await state();
    const accept = await validJoin();
    const gen = new Gen(SEED + 10);
    const list = templates(accept);
    const paths = list.map((t) => t.path.split('?')[0]!).concat([
      '/api', '/api/checkpoints', '/api/admin', '/data', '/data/mnist', '/signal/peerjs', '/assets',
    ]);
    const secrets = [job.adminToken.slice(0, -2) + 'zz', JOIN_TOKEN, accept.signalingToken, 'x'.repeat(32)];
    const statuses = new Map<number, number>();
    const t0 = performance.now();
    const N = 2000;
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < N) {
        const i = next++;
        const { req, what } = mangle(gen, gen.pick(list), secrets, paths);
        let r: RawReply;
        try {
          r = await rawRequest(job.coordinator.port, req, 5000);
        } catch (e) {
          if (e instanceof HangError) throw new Error(`case ${i}: ${e.message} [${replay}]`);
          throw new Error(`case ${i}: ${what}: ${e instanceof Error ? e.message : String(e)} [${replay}]`);
        }
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
        checkReply(r, req, `case ${i}: ${what}`);
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    const ms = performance.now() - t0;
    console.log(`HTTP fuzz: ${N} requests in ${ms.toFixed(0)} ms; statuses ${JSON.stringify(Object.fromEntries([...statuses].sort((a, b) => a[0] - b[0])))}`);
    // The cases must reach the routes: few rate-limit refusals, many successes and many refusals.
    expect(statuses.get(429) ?? 0, 'rate limiting made the cases meaningless').toBeLessThan(N / 100);
    expect(statuses.get(200) ?? 0).toBeGreaterThan(N / 10);
    expect([...statuses].filter(([s]) => s >= 400).reduce((a, [, n]) => a + n, 0)).toBeGreaterThan(N / 2);
    expect(job.lines.filter((l) => /failed|error/i.test(l)), 'no request was logged as a server failure').toEqual([]);
    await expectUnchanged(before);
  }, 60_000);

  it('upgrades to random paths are refused with a status, and the server keeps serving', async () => {
    const gen = new Gen(SEED + 11);
    const paths = [SESSION_PATH, '/signal/peerjs', '/api/events', '/'];
    for (let i = 0; i < 60; i++) {
      const path = `${gen.path(paths)}${gen.chance(0.5)
        ? `?peer=${gen.pick(['nobody', '', '%00', 'x'.repeat(300)])}&token=${gen.pick(['', 'x', JOIN_TOKEN])}&id=a&key=peerjs`
        : ''}`;
      const r = await rawRequest(job.coordinator.port, {
        method: 'GET', path, localAddress: nextAddress(),
        headers: [['upgrade', 'websocket'], ['connection', 'Upgrade'], ['sec-websocket-key', 'dGhlIHNhbXBsZSBub25jZQ=='], ['sec-websocket-version', '13']],
      }, 5000);
      expect(r.status >= 400 && r.status < 500, `upgrade ${path.slice(0, 120)} -> ${r.status} [${replay}]`).toBe(true);
      expect(r.body.length, `upgrade ${path.slice(0, 120)} -> ${r.status} with no reason`).toBeGreaterThan(0);
    }
    expect((await rawRequest(
      job.coordinator.port, { method: 'GET', path: '/api/job', headers: [['authorization', `Bearer ${JOIN_TOKEN}`]], localAddress: nextAddress() }, 5000,
    )).status).toBe(200);
  });
});

async function expectUnchanged(before: State): Promise<void> {
  await until(() => job.driver.status().peers === 0, 10_000, 'every fuzz session to be gone');
  const after = await state();
  expect(after.files, 'the job folder is byte-identical').toEqual(before.files);
  expect(after.status, 'the driver state is unchanged').toEqual(before.status);
  expect(after.joinToken).toBe(before.joinToken);
  expect(after.schedule).toEqual(before.schedule);
  // Still serving, and a valid join still works.
  const r = await rawRequest(
    job.coordinator.port, { method: 'GET', path: '/api/job', headers: [['authorization', `Bearer ${JOIN_TOKEN}`]], localAddress: nextAddress() }, 5000,
  );
  expect(r.status).toBe(200);
  expect((await validJoin()).type).toBe('join-accept');
}

// ---- the session WebSocket ----

interface SessionOutcome { sent: number; bad: number; errors: number; close: { code: number; reason: string } | null; leftOnPurpose: boolean }

/** What the coordinator should make of one message on session `id`: bad (an error reply) or not. */
function expectedBad(id: string, text: string | Buffer): boolean {
  if (typeof text !== 'string') return true;
  const p = parseJsonText(text);
  const d = p.ok ? decodePeerMessage(p.value) : p;
  return !d.ok || d.value.type === 'join' || d.value.peerId !== id;
}

async function fuzzSession(gen: Gen, i: number): Promise<SessionOutcome> {
  const accept = await validJoin();
  const id = accept.peerId;
  const ws = new WebSocket(`ws://127.0.0.1:${job.coordinator.port}${SESSION_PATH}?peer=${id}&token=${accept.signalingToken}`, { localAddress: nextAddress() });
  const out: SessionOutcome = { sent: 0, bad: 0, errors: 0, close: null, leftOnPurpose: false };
  ws.on('message', (data, isBinary) => {
    expect(isBinary, `session ${i}: the coordinator sends text`).toBe(false);
    const d = decodeCoordinatorMessage(JSON.parse(String(data)) as unknown);
    expect(d.ok, `session ${i}: the coordinator sent a malformed message ${String(data).slice(0, 200)}`).toBe(true);
    if (d.ok && d.value.type === 'error') {
      expect(d.value.message.length).toBeGreaterThan(0);
      out.errors++;
    }
  });
  ws.on('close', (code, reason) => { out.close = { code, reason: reason.toString() }; });
  await new Promise<void>((resolve, reject) => { ws.once('open', () => resolve()); ws.once('error', reject); });
  const own = PEER_MESSAGES.map((m) => ('peerId' in m ? { ...m, peerId: id } : m)) as unknown as Record<string, unknown>[];
  const count = 5 + gen.int(30);
  for (let k = 0; k < count && ws.readyState === ws.OPEN; k++) {
    const base = gen.pick(own);
    let msg: string | Buffer;
    const r = gen.int(20);
    if (r < 10) msg = JSON.stringify(gen.mutateMany(base).value) ?? 'undefined';
    else if (r < 15) msg = gen.mangleText(JSON.stringify(base));
    else if (r < 17) msg = Buffer.from(gen.bytes(1 + gen.int(200)));
    else if (r < 18 && k > 3) msg = JSON.stringify({ ...base, reason: 'x'.repeat(MAX_MESSAGE_BYTES + 10) });
    else msg = JSON.stringify(gen.value()) ?? 'null';
    const oversized = typeof msg === 'string' && msg.length > MAX_MESSAGE_BYTES; // closes the session (1009), no reply
    if (!oversized && expectedBad(id, msg)) out.bad++;
    else if (!oversized && typeof msg === 'string' && msg.includes('"leave"')) out.leftOnPurpose = true;
    ws.send(msg, { binary: typeof msg !== 'string' });
    out.sent++;
    if (oversized) break;
  }
  // Every bad message answered (until the coordinator cut the session off), then we leave.
  await until(
    () => out.close !== null || out.errors >= out.bad, 10_000, `session ${i}: an error reply per bad message (${out.errors} of ${out.bad})`,
  ).catch((e: unknown) => {
    throw new Error(`${e instanceof Error ? e.message : String(e)} [${replay}]`);
  });
  if (out.close === null) ws.close(1000, 'fuzz done');
  await until(() => out.close !== null, 10_000, `session ${i} to close`);
  return out;
}

describe('session WebSocket of a running job', () => {
  it('sessions fed random and mutated messages answer each bad one with a reason or close 1008/1009; nothing changes', async ({ onTestFailed }) => {
    onTestFailed(() => console.error(`FAILED with ${replay}`));
    const before = await state();
    const gen = new Gen(SEED + 20);
    const outcomes: SessionOutcome[] = [];
    const t0 = performance.now();
    for (let batch = 0; batch < 8; batch++) outcomes.push(...await Promise.all(Array.from({ length: 5 }, (_, k) => fuzzSession(gen, batch * 5 + k))));
    const closes = new Map<number, number>();
    for (const [i, o] of outcomes.entries()) {
      const code = o.close!.code;
      closes.set(code, (closes.get(code) ?? 0) + 1);
      // Closed by us (1000 'fuzz done'), by a valid leave (1000), or cut off as documented.
      expect([1000, 1008, 1009], `session ${i}: close ${JSON.stringify(o.close)} [${replay}]`).toContain(code);
      if (code === 1008) expect(o.close!.reason).toMatch(/too many malformed messages|flooding/);
      if (code === 1000 && !o.leftOnPurpose) expect(o.errors, `session ${i}`).toBe(o.bad);
    }
    const sent = outcomes.reduce((a, o) => a + o.sent, 0);
    console.log(`session fuzz: ${outcomes.length} sessions, ${sent} messages, ${outcomes.reduce((a, o) => a + o.errors, 0)} error replies ` +
      `in ${(performance.now() - t0).toFixed(0)} ms; closes ${JSON.stringify(Object.fromEntries(closes))}`);
    expect(sent).toBeGreaterThan(400);
    expect(job.lines.filter((l) => /failed|error/i.test(l))).toEqual([]);
    await expectUnchanged(before);
  }, 60_000);
});

describe('after the fuzz', () => {
  it('the coordinator closes promptly: no refused socket or session is left hanging', async () => {
    const t0 = performance.now();
    closed = true;
    await job.close();
    expect(performance.now() - t0, `close took too long [${replay}]`).toBeLessThan(8000);
  }, 20_000);
});
