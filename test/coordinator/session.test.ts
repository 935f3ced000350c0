// The coordinator's session sockets, step barrier and checkpoint uploads against bad input,
// driven by a peer that speaks the protocol by hand (no GPU: it answers with made-up results,
// which is all the coordinator can see of any peer). Every refusal has a reason; nothing is
// stored or changed by a refused message or upload.
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { encodeCheckpoint, layoutFingerprint } from '../../src/checkpoint/format.ts';
import { PROTOCOL_VERSION, SESSION_PATH, type CoordinatorMessage, type PeerMessage } from '../../src/protocol/messages.ts';
import { layoutOf } from '../../src/nn/layout.ts';
import { modelByName } from '../../src/nn/models.ts';
import { buildTestData, startTestJob, tempRoot, testJob, until, type TestJob } from '../../testbed/jobs.ts';
import { HandPeer } from './hand-peer.ts';

let root: { dir: string; remove(): Promise<void> };
let job: TestJob;
let fingerprint = '';
let paramFloats = 0;
let stateFloats = 0;

beforeAll(async () => {
  root = await tempRoot('session');
  const data = await buildTestData(root.dir);
  job = await startTestJob(root.dir, 'job', data, testJob(6, { checkpointEvery: 2 }));
  const spec = modelByName('small-cnn', [1, 28, 28], 10);
  const layout = layoutOf(spec);
  fingerprint = layoutFingerprint(spec.name, layout);
  paramFloats = layout.paramFloats;
  stateFloats = layout.stateFloats;
});
afterAll(async () => {
  await job?.close();
  await root?.remove();
});

function upgradeStatus(path: string): Promise<number> {
  return new Promise((resolve) => {
    const ws = new WebSocket(`${job.url.replace('http', 'ws')}${path}`);
    ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
    ws.on('open', () => { ws.close(); resolve(101); });
    ws.on('error', () => undefined);
  });
}

const ckptFiles = async (): Promise<string[]> => (await readdir(join(job.jobDir, 'checkpoints'))).sort();

function checkpointFile(step: number, fp = fingerprint): Uint8Array {
  const chunks = encodeCheckpoint({
    step, generation: 1, fingerprint: fp, weights: new Float32Array(paramFloats).fill(0.5), bnState: new Float32Array(stateFloats),
    optimizer: { momentum: new Float32Array(paramFloats) }, metadata: {},
  });
  return new Uint8Array(Buffer.concat(chunks));
}

function upload(peer: HandPeer, step: number, body: Uint8Array | string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${job.url}/api/checkpoints/${step}?peer=${peer.id}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${peer.accept.signalingToken}`, 'content-type': 'application/octet-stream', ...headers },
    body: typeof body === 'string' ? body : (body as Uint8Array<ArrayBuffer>),
  });
}

async function expectRefusal(r: Response, status: number, reason: RegExp): Promise<void> {
  const body = (await r.json()) as { type: string; message: string };
  expect(r.status, body.message).toBe(status);
  expect(body.type).toBe('error');
  expect(body.message).toMatch(reason);
}

describe('session sockets', () => {
  it('refuse unknown peers, wrong tokens and a second session', async () => {
    expect(await upgradeStatus(`${SESSION_PATH}?peer=nobody&token=x`)).toBe(403);
    const p = await HandPeer.join(job.url);
    expect(await upgradeStatus(`${SESSION_PATH}?peer=${p.id}&token=wrong`)).toBe(403);
    expect(await upgradeStatus(`${SESSION_PATH}?peer=${p.id}&token=${p.accept.signalingToken}`)).toBe(409);
    p.ws.close();
    await until(() => job.driver.status().peers === 0, 10_000, 'the peer to be gone');
  });

  it('answer malformed messages with a reason and change nothing; cut off a peer that keeps at it', async () => {
    const p = await HandPeer.join(job.url);
    const load = await p.next('load-state');
    expect(load).toMatchObject({ source: 'seed', step: 0 });
    const before = job.driver.status();
    const bad: (string | Record<string, unknown>)[] = [
      '{"type":"heartbeat",', 'null', '[1,2]',
      { type: 'teleport', peerId: p.id },
      { type: 'join', protocol: PROTOCOL_VERSION },
      { type: 'heartbeat', peerId: 'someone-else', generation: 0, step: 0 },
      { type: 'step-result', peerId: p.id, generation: 0, step: 0, loss: 1, checksum: 'ZZ', timings: { computeMs: 1, commMs: 0, waitMs: 0 }, images: 1 },
      { type: 'ready', peerId: p.id, step: -1, checksum: 'ab', device: 'x' },
      { type: 'eval-result', peerId: p.id, step: 0, counts: { samples: 2, top1: 3, top5: 1, lossSum: 0 } },
    ];
    for (const m of bad) p.send(m);
    await until(() => p.inbox.filter((m) => m.type === 'error').length === bad.length, 10_000, 'an error reply per bad message');
    const reasons = p.inbox.filter((m): m is Extract<CoordinatorMessage, { type: 'error' }> => m.type === 'error').map((m) => m.message);
    expect(reasons[0]).toMatch(/not JSON/);
    expect(reasons[3]).toMatch(/type must be one of/);
    expect(reasons[4]).toMatch(/POST \/api\/join/);
    expect(reasons[5]).toMatch(/belongs to/);
    expect(reasons[6]).toMatch(/checksum/);
    expect(reasons[8]).toMatch(/top1/);
    expect(job.driver.status()).toEqual(before);
    // A message over the size limit closes the socket (1009), as does a flood of bad ones.
    p.send(JSON.stringify({ type: 'leave', peerId: p.id, reason: 'x'.repeat(1_100_000) }));
    await until(() => p.closed !== null, 10_000, 'the socket to be closed');
    expect(p.closed!.code).toBe(1009);
    await until(() => job.driver.status().peers === 0, 10_000, 'the peer to be gone');
    const q = await HandPeer.join(job.url);
    for (let i = 0; i < 25; i++) q.send('{');
    await until(() => q.closed !== null, 10_000, 'the flooding socket to be closed');
    expect(q.closed).toMatchObject({ code: 1008, reason: 'too many malformed messages' });
    await until(() => job.driver.status().peers === 0, 10_000, 'the peer to be gone');
  });
});

describe('rate limits', () => {
  it('a session that floods well-formed messages is cut off; nothing else changes', async () => {
    const p = await HandPeer.join(job.url);
    await p.next('load-state');
    const before = job.driver.status().step;
    for (let i = 0; i < 300; i++) p.send({ type: 'heartbeat', peerId: p.id, generation: 0, step: 0 });
    await until(() => p.closed !== null, 10_000, 'the flooding socket to be closed');
    expect(p.closed).toMatchObject({ code: 1008, reason: 'flooding: too many messages' });
    await until(() => job.driver.status().peers === 0, 10_000, 'the peer to be gone');
    expect(job.driver.status().step).toBe(before);
  });
});

describe('step barrier and checkpoint uploads', () => {
  it('commits results of the running step only, and stores only the checkpoint it asked for', async () => {
    const p = await HandPeer.join(job.url);
    const load = await p.next('load-state');
    p.send({ type: 'ready', peerId: p.id, step: load.step, checksum: '00', device: 'hand' });
    let a = await p.next('step-assignment');
    expect(a).toMatchObject({ step: 0, ring: [p.id], rank: 0, globalBatch: 24 });
    expect(a.sampleIds.length).toBe(24);
    // Out of order: a result for a step or generation that is not running changes nothing.
    p.send({ ...p.result(a), step: 5 } as PeerMessage);
    p.send({ ...p.result(a), generation: a.generation + 7 } as PeerMessage);
    p.send({ type: 'collective-failure', peerId: p.id, generation: a.generation + 1, step: 0, failedPeerId: p.id, kind: 'peer-closed' });
    await new Promise((r) => setTimeout(r, 300));
    expect(job.driver.status()).toMatchObject({ step: 0, phase: 'running', peers: 1 });
    p.send(p.result(a));
    a = await p.next('step-assignment');
    expect(a.step).toBe(1);
    // The ring went spelled out once; the next assignment copies it from the last (ring-shape.ts).
    const [first, second] = p.wireAssignments;
    expect(first).toMatchObject({ shape: { runs: [p.id] } });
    expect(second).toMatchObject({ step: 1, generation: first!.generation, shape: { runs: [[0, 1]] } });
    expect(second).not.toHaveProperty('ring');
    expect(a).toMatchObject({ ring: [p.id], rank: 0 });
    p.send(p.result(a));
    p.send(p.result(a)); // a duplicate is ignored
    a = await p.next('step-assignment');
    expect(a).toMatchObject({ step: 2, uploadCheckpoint: true });
    expect(job.driver.status().step).toBe(2);

    const files = await ckptFiles();
    const other = await HandPeer.join(job.url);
    await expectRefusal(await upload(p, 2, checkpointFile(2), { authorization: 'Bearer wrong' }), 403, /wrong token/);
    await expectRefusal(await upload(p, 2, checkpointFile(2), { authorization: 'Basic abc' }), 401, /Bearer/);
    await expectRefusal(await upload(other, 2, checkpointFile(2)), 409, /did not ask/);
    await expectRefusal(await upload(p, 4, checkpointFile(4)), 409, /did not ask/);
    await expectRefusal(await upload(p, 2, 'not a checkpoint at all'), 400, /unusable/);
    const cut = checkpointFile(2);
    await expectRefusal(await upload(p, 2, cut.subarray(0, cut.length - 10)), 400, /cut-off/);
    const flipped = checkpointFile(2);
    flipped[flipped.length - 1]! ^= 1;
    await expectRefusal(await upload(p, 2, flipped), 400, /sha256 mismatch/);
    await expectRefusal(await upload(p, 2, checkpointFile(2, 'resnet50:0000000000000000')), 409, /this job trains/);
    await expectRefusal(await upload(p, 2, checkpointFile(3)), 400, /holds step 3/);
    await expectRefusal(await upload(p, 2, checkpointFile(2), { 'content-type': 'application/json' }), 415, /octet-stream/);
    await expectRefusal(await upload(p, 2, new Uint8Array(3 * 4 * paramFloats)), 413, /at most/);
    await expectRefusal(await fetch(`${job.url}/api/checkpoints/2x`), 404, /whole number/);
    await expectRefusal(await fetch(`${job.url}/api/checkpoints/2`, { method: 'DELETE' }), 405, /GET, POST/);
    expect(await ckptFiles(), 'nothing was stored by a refused upload').toEqual(files);

    const ok = await upload(p, 2, checkpointFile(2));
    expect(ok.status).toBe(201);
    expect(await ckptFiles()).toEqual([...files, 'step-0000000002.vtck'].sort());
    await expectRefusal(await upload(p, 2, checkpointFile(2)), 409, /did not ask/);
    const back = await fetch(`${job.url}/api/checkpoints/2`);
    expect(back.status).toBe(200);
    expect(Buffer.from(await back.arrayBuffer()).equals(Buffer.from(checkpointFile(2)))).toBe(true);
    await expectRefusal(await fetch(`${job.url}/api/checkpoints/3`), 404, /no usable checkpoint of step 3/);

    // The waiting peer enters at the next boundary: it must load the checkpoint of step 3,
    // which the ring's first peer is asked to upload first.
    p.send(p.result(a));
    const up = await p.next('upload-checkpoint');
    expect(up.step).toBe(3);
    expect((await upload(p, 3, checkpointFile(3))).status).toBe(201);
    const l2 = await other.next('load-state');
    expect(l2).toEqual({ type: 'load-state', source: 'checkpoint', step: 3 });
    other.send({ type: 'ready', peerId: other.id, step: 3, checksum: '00', device: 'hand' });
    const [a1, a2] = [await p.next('step-assignment'), await other.next('step-assignment')];
    expect(a1.ring).toEqual([p.id, other.id]);
    expect(a1.generation).toBe(a2.generation);
    expect([...a1.sampleIds, ...a2.sampleIds].length).toBe(24);
    // Disagreeing weights: with two peers, rank 0's checksum wins, the other is evicted and
    // the step runs again without it (what it added to the sum is not trusted).
    p.send(p.result(a1, '1111111111111111'));
    other.send(other.result(a2, '2222222222222222'));
    const ev = await other.next('evicted');
    expect(ev.reason).toMatch(/differ from the ring/);
    const a3 = await p.next('step-assignment');
    expect(a3).toMatchObject({ step: 3, ring: [p.id] });
    expect(a3.generation).toBeGreaterThan(a1.generation);
    expect(a3.sampleIds.length).toBe(24);
  });
});
