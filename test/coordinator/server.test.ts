// The coordinator's HTTP server on 127.0.0.1 (ephemeral port), with real requests: every
// route, private-job tokens, path traversal in all its spellings, oversized and malformed
// bodies, server-sent events, and PeerJS signaling upgrades on the same port.
import { request, type IncomingHttpHeaders } from 'node:http';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { encodeCheckpoint, decodeCheckpoint } from '../../src/checkpoint/format.ts';
import { openCheckpointStore, type CheckpointStore } from '../../coordinator/checkpoints.ts';
import { parseJobConfig } from '../../coordinator/job.ts';
import { startCoordinator, type Coordinator } from '../../coordinator/server.ts';
import { CreditLedger, creditView, donorKey } from '../../coordinator/credit.ts';
import { PROTOCOL_VERSION } from '../../src/protocol/messages.ts';
import { decodeCoordinatorMessage } from '../../src/protocol/decode.ts';

const TOKEN = 'lab-token-0123456789';
const VIEW = 'view-token-0123456789abc';
const SHARD = Buffer.from('pretend this is a tar shard\n'.repeat(100));
const SECRET = 'the coordinator private key';
let root = '';
let store: CheckpointStore;
let pub: Coordinator;
let priv: Coordinator;
const joined: string[] = [];
const donors = new Map<string, string>();
const ledger = new CreditLedger();
const DONOR = 'browser-donor-id-000042';

interface Reply { status: number; headers: IncomingHttpHeaders; body: Buffer }

/** A raw request: the path is sent exactly as given (fetch would normalise "..").  */
function send(port: number, method: string, path: string, body?: string | Buffer, headers: Record<string, string> = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}
const json = (r: Reply): Record<string, unknown> => JSON.parse(r.body.toString('utf8')) as Record<string, unknown>;
const postJson = (port: number, path: string, body: unknown): Promise<Reply> =>
  send(port, 'POST', path, JSON.stringify(body), { 'content-type': 'application/json' });

function expectError(r: Reply, status: number, kind: string, reason: RegExp): void {
  expect(r.status, r.body.toString()).toBe(status);
  const body = json(r);
  expect(decodeCoordinatorMessage(body).ok, 'an error reply is a protocol ErrorMessage').toBe(true);
  expect(body.kind).toBe(kind);
  expect(String(body.message)).toMatch(reason);
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'vt-server-'));
  const dataDir = join(root, 'data');
  await mkdir(join(dataDir, 'cifar10'), { recursive: true });
  await writeFile(join(dataDir, 'cifar10', 'manifest.json'), '{"format":"vt-shards"}');
  await writeFile(join(dataDir, 'cifar10', 'train-000000.tar'), SHARD);
  await mkdir(join(dataDir, 'cifar10', 'sub'));
  await writeFile(join(dataDir, 'secret.txt'), SECRET);
  await writeFile(join(root, 'secret.txt'), SECRET);
  await symlink(join(root, 'secret.txt'), join(dataDir, 'cifar10', 'escape.tar'));
  store = await openCheckpointStore(join(root, 'ckpt'), { keep: 2, log: () => undefined });
  const base = { model: 'small-cnn', dataset: 'cifar10', globalBatch: 64, optimizer: { kind: 'lars', lr: 1 }, steps: 10 };
  // Generous join limits: the fuzz below posts many joins from one address (rate limits are tested on their own).
  const rateLimits = { joins: { perSecond: 1000, burst: 1000 } };
  // A ledger of one committed step: a browser donor (lasting id) and a named Node volunteer.
  ledger.add({ type: 'generation', time: 0, generation: 1, ring: ['p1', 'p2'], peers: [
    { id: 'p1', name: 'alice', device: 'wasm', donor: donorKey('p1', 'alice', DONOR) },
    { id: 'p2', name: 'desk-2', device: 'wasm', donor: donorKey('p2', 'desk-2', undefined) }] });
  ledger.add({ type: 'step', time: 0, step: 1, generation: 1, ring: 2, loss: 1, imagesPerSec: 1, wallMs: 1, peers: [
    { peerId: 'p1', images: 40, computeMs: 400, commMs: 1, waitMs: 0, checksum: 'c' },
    { peerId: 'p2', images: 24, computeMs: 300, commMs: 1, waitMs: 0, checksum: 'c' }] });
  pub = await startCoordinator({
    job: parseJobConfig(base, 1000), jobId: 7, dataDir, checkpoints: store, rateLimits,
    onJoin: (id, _token, { donor }) => { joined.push(id); if (donor) donors.set(id, donor); }, credit: (donor) => creditView(ledger, 20, donor),
  });
  priv = await startCoordinator({
    job: parseJobConfig({ ...base, access: 'private', joinToken: TOKEN }, 1000), jobId: 8, dataDir, checkpoints: store, rateLimits, viewToken: VIEW,
  });
});

afterAll(async () => {
  await Promise.all([pub?.close(), priv?.close()]);
  await rm(root, { recursive: true, force: true });
});

describe('API', () => {
  it('GET /api/job shows the job, never its token', async () => {
    const r = await send(priv.port, 'GET', '/api/job', undefined, { authorization: `Bearer ${VIEW}` });
    expect(r.status).toBe(200);
    expect(json(r)).toMatchObject({ jobId: 8, step: 0, generation: 0, peers: 0, job: { model: 'small-cnn', globalBatch: 64, access: 'private' } });
    expect(r.body.toString()).not.toContain(TOKEN);
  });

  it('POST /api/join on a public job issues a peer id and signaling token', async () => {
    const r = await postJson(pub.port, '/api/join', { type: 'join', protocol: PROTOCOL_VERSION, name: 'desk-1' });
    expect(r.status, r.body.toString()).toBe(200);
    const d = decodeCoordinatorMessage(json(r));
    expect(d.ok && d.value.type).toBe('join-accept');
    if (!d.ok || d.value.type !== 'join-accept') return;
    expect(d.value).toMatchObject({ job: 7, signalingPath: '/signal', checkpointStep: null });
    expect(joined).toContain(d.value.peerId);
  });

  it('every route of a private job that serves data, weights, the model, metrics or events needs a credential; a public job stays open', async () => {
    // The status only: /api/events streams and never ends.
    const statusOf = (port: number, path: string, headers: Record<string, string> = {}): Promise<number> => new Promise((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, method: 'GET', path, headers }, (res) => {
        resolve(res.statusCode ?? 0);
        res.destroy();
      });
      req.on('error', reject);
      req.end();
    });
    const routes: [string, 'watch' | 'train'][] = [
      ['/api/job', 'watch'], ['/api/events', 'watch'], ['/api/metrics', 'watch'], ['/api/credit', 'watch'], ['/api/model.onnx', 'watch'],
      ['/api/samples/val/0', 'watch'],
      ['/data/cifar10/manifest.json', 'watch'], ['/data/cifar10/train-000000.tar', 'train'], ['/api/checkpoints/latest', 'train'],
      ['/api/checkpoints/1', 'train'],
    ];
    const bearer = (t: string) => ({ authorization: `Bearer ${t}` });
    const opened = (status: number) => status !== 401 && status !== 403;
    for (const [path, need] of routes) {
      expect(await statusOf(priv.port, path), `${path} without a credential`).toBe(401);
      expect(await statusOf(priv.port, path, bearer('lab-token-0123456788')), `${path} with a wrong token`).toBe(403);
      expect(await statusOf(priv.port, `${path}?token=nope-nope-nope`), `${path} with a wrong ?token=`).toBe(403);
      expect(opened(await statusOf(priv.port, path, bearer(TOKEN))), `${path} with the join token`).toBe(true);
      expect(opened(await statusOf(priv.port, `${path}?token=${TOKEN}`)), `${path} with the join token as ?token=`).toBe(true);
      expect(opened(await statusOf(priv.port, path, bearer(VIEW))), `${path} with the view token`).toBe(need === 'watch');
      expect(opened(await statusOf(pub.port, path)), `${path} of a public job`).toBe(true);
    }
    const r = await send(priv.port, 'GET', '/data/cifar10/train-000000.tar', undefined, bearer(TOKEN));
    expect(r.body.equals(SHARD)).toBe(true);
    expectError(
      await send(priv.port, 'GET', '/data/cifar10/train-000000.tar', undefined, bearer(VIEW)), 403, 'forbidden', /view token shows the dashboard only/,
    );
    expectError(await send(priv.port, 'GET', '/api/metrics'), 401, 'unauthorized', /this job is private: send its join token or its view token/);
    // The page's code and the CA certificate hold nothing of the job.
    for (const path of ['/', '/ca.crt']) expect(opened(await statusOf(priv.port, path)), path).toBe(true);
  });

  it('GET /api/credit: the board by name, the asking donor\'s line by its id; a bad id is refused', async () => {
    const r = await send(pub.port, 'GET', '/api/credit');
    expect(r.status).toBe(200);
    const board = [{ rank: 1, name: 'alice', images: 40 }, { rank: 2, name: 'desk-2', images: 24 }];
    expect(json(r)).toMatchObject({ images: 64, donors: 2, board, you: null });
    const mine = json(await send(pub.port, 'GET', `/api/credit?donor=${DONOR}`));
    expect(mine.you).toMatchObject({ rank: 1, name: 'alice', images: 40, share: 40 / 64 });
    expect(JSON.stringify(mine)).not.toContain(DONOR);
    expectError(await send(pub.port, 'GET', '/api/credit?donor=no!'), 400, 'bad-request', /donor must be a donor id of 8 to 64 characters/);
  });

  it('POST /api/join takes a donor id and a name the board can show; refuses others with what to send', async () => {
    const ok = await postJson(pub.port, '/api/join', { type: 'join', protocol: PROTOCOL_VERSION, name: 'Zoë 3B', donor: DONOR });
    expect(ok.status, ok.body.toString()).toBe(200);
    expect(donors.get(String(json(ok).peerId))).toBe(DONOR);
    for (const name of ['', ' lead', 'x'.repeat(41), '<script>', 'a/b']) {
      const r = await postJson(pub.port, '/api/join', { type: 'join', protocol: PROTOCOL_VERSION, name });
      expectError(r, 400, 'bad-request', /name must be a name of 1 to 40 letters, digits, spaces/);
    }
    const short = await postJson(pub.port, '/api/join', { type: 'join', protocol: PROTOCOL_VERSION, donor: 'short' });
    expectError(short, 400, 'bad-request', /donor must be a donor id of 8 to 64 characters/);
  });

  it('a private job needs the right token', async () => {
    expectError(await postJson(priv.port, '/api/join', { type: 'join', protocol: PROTOCOL_VERSION }), 401, 'unauthorized', /private: join with the token/);
    expectError(
      await postJson(priv.port, '/api/join', { type: 'join', protocol: PROTOCOL_VERSION, token: 'lab-token-0123456788' }), 403, 'forbidden', /wrong join token/,
    );
    expectError(await postJson(priv.port, '/api/join', { type: 'join', protocol: PROTOCOL_VERSION, token: 'x' }), 403, 'forbidden', /wrong join token/);
    const ok = await postJson(priv.port, '/api/join', { type: 'join', protocol: PROTOCOL_VERSION, token: TOKEN });
    expect(ok.status).toBe(200);
    expect(json(ok).type).toBe('join-accept');
  });

  it('refuses malformed, oversized and mistyped bodies with a reason', async () => {
    expectError(await send(pub.port, 'POST', '/api/join', '{"type":"join",', { 'content-type': 'application/json' }), 400, 'bad-request', /not JSON/);
    expectError(await postJson(pub.port, '/api/join', { type: 'join', protocol: 'one' }), 400, 'bad-request', /protocol must be an integer/);
    expectError(
      await postJson(pub.port, '/api/join', { type: 'heartbeat', peerId: 'a', generation: 0, step: 0 }), 400, 'bad-request', /expected a 'join' message/,
    );
    expectError(
      await send(pub.port, 'POST', '/api/join', 'type=join', { 'content-type': 'application/x-www-form-urlencoded' }), 415, 'unsupported-media-type',
      /application\/json/,
    );
    const big = JSON.stringify({ type: 'join', protocol: PROTOCOL_VERSION, name: 'x'.repeat(20_000) });
    expectError(await send(pub.port, 'POST', '/api/join', big, { 'content-type': 'application/json' }), 413, 'too-large', /over the 16384-byte limit/);
    // No content-length (chunked): the limit is enforced while reading.
    const chunked = await new Promise<Reply>((resolve, reject) => {
      const req = request({
        host: '127.0.0.1', port: pub.port, method: 'POST', path: '/api/join', headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
      }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      });
      req.on('error', reject);
      for (let i = 0; i < 5; i++) req.write(Buffer.alloc(4096, 0x20));
      req.end();
    });
    expectError(chunked, 413, 'too-large', /over the 16384-byte limit/);
  });

  it('limits joins per address: 429 with a reason once the burst is spent', async () => {
    const limited = await startCoordinator({
      job: parseJobConfig({ model: 'small-cnn', dataset: 'cifar10', globalBatch: 64, optimizer: { kind: 'lars', lr: 1 }, steps: 10 }, 1000), jobId: 9,
      dataDir: join(root, 'data'), checkpoints: store, rateLimits: { joins: { perSecond: 0.01, burst: 3 } },
    });
    try {
      const codes = [];
      for (let i = 0; i < 5; i++) codes.push((await postJson(limited.port, '/api/join', { type: 'join', protocol: PROTOCOL_VERSION })).status);
      expect(codes).toEqual([200, 200, 200, 429, 429]);
      expectError(
        await postJson(limited.port, '/api/join', { type: 'join', protocol: PROTOCOL_VERSION }), 429, 'too-many-requests', /too many joins from this address/,
      );
      expect((await send(limited.port, 'GET', '/api/job')).status, 'other routes are not joins').toBe(200);
    } finally {
      await limited.close();
    }
  });

  it('answers unknown routes and methods with JSON 404/405', async () => {
    expectError(await send(pub.port, 'GET', '/api/nope'), 404, 'not-found', /no route \/api\/nope/);
    expectError(await send(pub.port, 'GET', '/api/join'), 405, 'method-not-allowed', /takes POST/);
    expectError(await send(pub.port, 'DELETE', '/api/job'), 405, 'method-not-allowed', /takes GET/);
    expectError(await send(pub.port, 'POST', '/data/cifar10/manifest.json'), 405, 'method-not-allowed', /GET/);
    expectError(await send(pub.port, 'GET', '/__proto__'), 404, 'not-found', /serves no page/);
    expectError(await send(pub.port, 'POST', '/index.html'), 404, 'not-found', /no route/);
  });
});

describe('data files', () => {
  it('serves the manifest and shards of the job data set', async () => {
    const m = await send(pub.port, 'GET', '/data/cifar10/manifest.json');
    expect(m.status).toBe(200);
    expect(m.headers['content-type']).toMatch(/application\/json/);
    expect(m.body.toString()).toBe('{"format":"vt-shards"}');
    const s = await send(pub.port, 'GET', '/data/cifar10/train-000000.tar');
    expect(s.status).toBe(200);
    expect(s.body.equals(SHARD)).toBe(true);
  });

  it.each([
    ['dot-dot', '/data/cifar10/../secret.txt', 400],
    ['dot-dot twice', '/data/cifar10/../../secret.txt', 400],
    ['encoded dot-dot', '/data/cifar10/%2e%2e/secret.txt', 400],
    ['encoded slash', '/data/cifar10/..%2fsecret.txt', 400],
    ['encoded backslash', '/data/cifar10/..%5csecret.txt', 400],
    ['double encoding', '/data/cifar10/%252e%252e%252fsecret.txt', 404],
    ['absolute path', '/data/cifar10//etc/passwd', 404],
    ['encoded absolute path', '/data/cifar10/%2fetc%2fpasswd', 400],
    ['NUL byte', '/data/cifar10/manifest.json%00.tar', 400],
    ['bad escape', '/data/cifar10/%zz', 400],
    ['symlink out of the folder', '/data/cifar10/escape.tar', 404],
    ['a folder', '/data/cifar10/sub', 404],
    ['hidden name', '/data/cifar10/.manifest.json', 404],
    ['missing file', '/data/cifar10/train-000009.tar', 404],
    ['another data set', '/data/mnist/manifest.json', 404],
    ['the data root', '/data/secret.txt', 404],
    ['dataset dot-dot', '/data/../secret.txt', 400],
  ])('refuses %s', async (_n, path, status) => {
    const r = await send(pub.port, 'GET', path);
    expect(r.status, r.body.toString()).toBe(status);
    expect(r.body.toString()).not.toContain(SECRET);
    expect(json(r).type).toBe('error');
  });
});

describe('checkpoints', () => {
  it('GET /api/checkpoints/latest is 404 before the first, then the newest verified file', async () => {
    expectError(await send(pub.port, 'GET', '/api/checkpoints/latest'), 404, 'not-found', /no checkpoint yet/);
    const c = {
      step: 5, generation: 1, fingerprint: 'f', weights: new Float32Array([1, 2, 3]), bnState: new Float32Array(2),
      optimizer: { momentum: new Float32Array(3) }, metadata: {},
    };
    await store.write(c);
    const r = await send(pub.port, 'GET', '/api/checkpoints/latest');
    expect(r.status).toBe(200);
    expect(r.headers['x-checkpoint-step']).toBe('5');
    expect(r.body.equals(Buffer.concat(encodeCheckpoint(c)))).toBe(true);
    expect([...decodeCheckpoint(r.body, 'download').weights]).toEqual([1, 2, 3]);
    const accept = json(await postJson(pub.port, '/api/join', { type: 'join', protocol: PROTOCOL_VERSION }));
    expect(accept.checkpointStep).toBe(5);
  });
});

describe('live events', () => {
  it('GET /api/events streams hello, then each published event', async () => {
    const received: string[] = [];
    let closeStream = (): void => undefined;
    const done = new Promise<void>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port: pub.port, path: '/api/events' }, (res) => {
        expect(res.headers['content-type']).toMatch(/text\/event-stream/);
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          received.push(chunk);
          const all = received.join('');
          if (all.includes('event: hello') && !all.includes('peer-joined') && received.length === 1) {
            void postJson(pub.port, '/api/join', { type: 'join', protocol: PROTOCOL_VERSION, name: 'sse-watcher' }).catch(reject);
          }
          if (all.includes('event: peer-joined')) resolve();
        });
      });
      req.on('error', reject);
      req.end();
      closeStream = () => req.destroy();
    });
    await done;
    closeStream();
    const text = received.join('');
    expect(text).toMatch(/event: hello\ndata: \{"type":"hello","job":7,"step":0,"generation":0\}\n\n/);
    expect(text).toMatch(/event: peer-joined\ndata: \{"type":"peer-joined","peerId":"[A-Za-z0-9-]+","name":"sse-watcher"\}\n\n/);
  });
});

describe('signaling on the same port', () => {
  function upgrade(port: number, path: string): Promise<{ opened: boolean; status?: number; first?: string }> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(`ws://127.0.0.1:${port}${path}`);
      ws.on('message', (m: Buffer) => {
        resolve({ opened: true, first: m.toString() });
        ws.close();
      });
      ws.on('unexpected-response', (_req, res) => {
        resolve({ opened: false, status: res.statusCode });
        res.resume();
      });
      ws.on('error', (e) => reject(e));
    });
  }

  it('accepts the id and token a join issued, refuses others and other paths', async () => {
    const accept = json(await postJson(pub.port, '/api/join', { type: 'join', protocol: PROTOCOL_VERSION }));
    const q = (id: unknown, token: unknown): string => `/signal/peerjs?key=peerjs&id=${String(id)}&token=${String(token)}`;
    const ok = await upgrade(pub.port, q(accept.peerId, accept.signalingToken));
    expect(ok.opened).toBe(true);
    expect(ok.first).toContain('OPEN');
    expect(await upgrade(pub.port, q(accept.peerId, 'wrong'))).toEqual({ opened: false, status: 403 });
    expect(await upgrade(pub.port, q('self-chosen', accept.signalingToken))).toEqual({ opened: false, status: 403 });
    expect(await upgrade(pub.port, '/api/events')).toEqual({ opened: false, status: 404 });
  });

  it('refuses to let a peer choose its id over HTTP', async () => {
    const r = await send(pub.port, 'GET', '/signal/peerjs/id');
    expect(r.status).toBe(403);
  });
});

describe('API fuzz', () => {
  it('random and mutated join bodies and paths get 200 or a 4xx with a reason, never a 500', async () => {
    const { makeRng } = await import('../../src/rng.ts');
    const rng = makeRng(99);
    const pieces = [
      '{', '}', '"type"', ':', '"join"', ',', '"protocol"', '1', 'null', '[', ']', '"token"', '"\\u0000"', '1e999', '-0', '"__proto__"', '{"a":'.repeat(50),
      '"x"',
    ];
    const paths = [
      '/api/job', '/api/join', '/api/%', '/data/cifar10/%2e', '/data/cifar10/manifest.json?x=../..', '/api//join', '/signal/x',
      '/data/cifar10/' + 'a'.repeat(300), '/api/events/..',
    ];
    const statuses = new Map<number, number>();
    for (let i = 0; i < 150; i++) {
      const body = Array.from({ length: rng.int(12) }, () => pieces[rng.int(pieces.length)]).join('');
      const r = i % 3 === 2
        ? await send(pub.port, ['GET', 'POST', 'PUT', 'HEAD'][rng.int(4)]!, paths[rng.int(paths.length)]!)
        : await send(priv.port, 'POST', '/api/join', body, { 'content-type': 'application/json' });
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      expect(r.status === 200 || (r.status >= 400 && r.status < 500), `${r.status} ${r.body.toString().slice(0, 200)}`).toBe(true);
    }
    expect(statuses.get(400) ?? 0).toBeGreaterThan(50);
    expect((await send(pub.port, 'GET', '/api/job')).status).toBe(200);
  });
});
