// The coordinator <-> peer protocol decoders: every valid message round-trips, every listed
// kind of bad input is refused with a reason naming the field, and a seeded fuzz loop of
// mutated messages never makes a decoder throw or accept something that breaks an invariant.
import { describe as suite, expect, it } from 'vitest';
import {
  failureDetail, MAX_BATCH, MAX_FAILURE_DETAIL, MAX_MESSAGE_BYTES, MAX_RING, PROTOCOL_VERSION, SKETCH_LENGTH, type CoordinatorMessage, type PeerMessage,
} from '../../src/protocol/messages.ts';
import { decodeCoordinatorMessage, decodePeerMessage, expectType } from '../../src/protocol/decode.ts';
import { describe, parseJsonText, type Decoded } from '../../src/protocol/fields.ts';
import { makeRng, type Rng } from '../../src/rng.ts';

/** A verification sketch (SKETCH_LENGTH buckets of sums and squares). */
const SKETCH = { sums: Array.from({ length: SKETCH_LENGTH }, (_, i) => i - 3.5), squares: Array.from({ length: SKETCH_LENGTH }, (_, i) => i * 0.25) };
const PEER: PeerMessage[] = [
  { type: 'join', protocol: PROTOCOL_VERSION },
  { type: 'join', protocol: PROTOCOL_VERSION, token: 'lab-secret-token', name: 'desk-12', probeMsPerImage: 412.5, microBatch: 24 },
  { type: 'heartbeat', peerId: 'p-1', generation: 3, step: 17 },
  {
    type: 'step-result', peerId: 'p-1', generation: 3, step: 17, loss: 2.25, checksum: '00ff12ab', timings: { computeMs: 120.5, commMs: 30, waitMs: 0 },
    images: 64,
  },
  { type: 'step-result', peerId: 'p-1', generation: 3, step: 17, loss: null, checksum: 'deadbeef', timings: { computeMs: 1, commMs: 1, waitMs: 1 }, images: 0 },
  { type: 'collective-failure', peerId: 'p-1', generation: 3, step: 17, failedPeerId: 'p-2', kind: 'peer-timeout' },
  { type: 'checkpoint-announce', peerId: 'p-0', generation: 3, step: 100, bytes: 123456, sha256: 'a'.repeat(64) },
  { type: 'leave', peerId: 'p-1' },
  { type: 'leave', peerId: 'p-1', reason: 'tab closed' },
  { type: 'leave', peerId: 'p-1', reason: 'stopped by its owner', afterStep: true },
  { type: 'ready', peerId: 'p-3', step: 40, checksum: '0123456789abcdef', device: 'llvmpipe (opengles)' },
  { type: 'eval-result', peerId: 'p-3', step: 40, counts: { samples: 100, top1: 12, top5: 50, lossSum: 230.5 } },
  { type: 'prepared', peerId: 'p-3', id: 4 },
  {
    type: 'collective-failure', peerId: 'p-1', generation: 3, step: 17, failedPeerId: 'p-2', kind: 'bad-frame',
    detail: 'generation 4 step 17: expected chunk 39, got chunk 38',
  },
  {
    type: 'step-result', peerId: 'p-1', generation: 3, step: 17, loss: 2.25, checksum: '00ff12ab00ff12ab', timings: { computeMs: 1, commMs: 1, waitMs: 1 },
    images: 8,
    sketch: SKETCH, total: SKETCH, audit: { peer: 'p-2', ...SKETCH },
    hops: { received: SKETCH, forwarded: SKETCH, owned: SKETCH, gathered: SKETCH },
  },
];
const COORD: CoordinatorMessage[] = [
  { type: 'join-accept', peerId: 'p-1', signalingToken: 'abc123', signalingPath: '/signal', job: 7, heartbeatMs: 5000, checkpointStep: null, iceServers: [] },
  {
    type: 'join-accept', peerId: 'p-1', signalingToken: 'abc123', signalingPath: '/signal', job: 7, heartbeatMs: 5000, checkpointStep: 200,
    iceServers: [{ urls: ['stun:10.0.0.1:8080', 'turn:10.0.0.1:3478'], username: '1767225600:p-1', credential: 'YWJj+/==' }],
  },
  { type: 'step-assignment', job: 7, generation: 2, step: 40, ring: ['p-0', 'p-1', 'p-2'], rank: 1, globalBatch: 8, sampleIds: [5, 9, 1], epoch: 0, seed: 42 },
  {
    type: 'step-assignment', job: 7, generation: 2, step: 40, ring: ['p-0', 'p-1', 'p-2'], rank: 1, globalBatch: 8, sampleIds: [5, 9], epoch: 0, seed: 42,
    deadMs: 8000,
  },
  {
    type: 'step-assignment', job: 7, generation: 2, step: 40, ring: ['p-0'], rank: 0, globalBatch: 1, sampleIds: [5], epoch: 0, seed: 42,
    uploadCheckpoint: true,
  },
  {
    type: 'step-assignment', job: 7, generation: 2, step: 40, ring: ['p-0', 'p-1', 'p-2'], rank: 1, globalBatch: 8, sampleIds: [5, 9], epoch: 0, seed: 42,
    verify: {},
  },
  {
    type: 'step-assignment', job: 7, generation: 2, step: 40, ring: ['p-0', 'p-1', 'p-2'], rank: 1, globalBatch: 8, sampleIds: [5, 9], epoch: 0, seed: 42,
    verify: { audit: { peer: 'p-2', sampleIds: [1, 3], epoch: 0, seed: 77, microBatch: 1, pieces: [1, 1] } },
  },
  {
    type: 'step-assignment', job: 7, generation: 2, step: 40, ring: ['p-0', 'p-1', 'p-2'], rank: 1, globalBatch: 8, sampleIds: [], epoch: 0, seed: 42,
    round: { ids: [[5, 9], [2]], epochs: [0, 0], images: 9 }, verify: { audit: { peer: 'p-2', sampleIds: [], epoch: 0, round: [[1, 3], [4]] } },
  },
  {
    type: 'step-assignment', job: 7, generation: 2, step: 40, ring: ['p-0', 'p-1', 'p-2'], rank: 2, globalBatch: 8, sampleIds: [5], epoch: 0, seed: 42,
    topology: { groups: [['p-0'], ['p-1', 'p-2']], shards: 1, columns: [['p-0', 'p-1']] },
  },
  { type: 'error', kind: 'unauthorized', message: 'wrong join token: ask the job owner for it' },
  { type: 'load-state', source: 'seed', step: 0 },
  { type: 'load-state', source: 'checkpoint', step: 40 },
  { type: 'load-state', source: 'checkpoint', step: 40, next: { step: 40, epoch: 1, sampleIds: [3, 8] } },
  { type: 'prepare', id: 4, ring: ['p-0', 'p-1', 'p-2'] },
  { type: 'prepare', id: 4, ring: ['p-0', 'p-1', 'p-2'], next: { step: 9, epoch: 0, sampleIds: [1, 2] } },
  { type: 'prepare', id: 5, ring: ['p-0', 'p-1', 'p-2'], topology: { groups: [['p-0'], ['p-1', 'p-2']], shards: 1, columns: [['p-0', 'p-1']] } },
  { type: 'upload-checkpoint', step: 40 },
  { type: 'evaluate', step: 40, ids: [0, 1, 2] },
  { type: 'done', step: 100, reason: 'the job has run its 100 steps' },
  { type: 'evicted', reason: 'its weights differ from the ring' },
];

const COORD_TYPES = new Set<string>(COORD.map((m) => m.type));

function problemsOf<T>(d: Decoded<T>): string {
  expect(d.ok, 'expected the decoder to refuse this').toBe(false);
  return d.ok ? '' : describe(d.error);
}

suite('protocol: verification fields', () => {
  it('refuses sketches of the wrong length or with negative squares, and an audit without its peer', () => {
    const base = PEER.find((m) => m.type === 'step-result' && m.sketch)!;
    const bad = (patch: Record<string, unknown>) => problemsOf(decodePeerMessage({ ...base, ...patch }));
    expect(bad({ sketch: { sums: [1, 2], squares: [1, 2] } })).toMatch(new RegExp(`sums and squares must have ${SKETCH_LENGTH} items each`));
    expect(bad({ total: { ...SKETCH, squares: SKETCH.squares.map((q) => -q - 1) } })).toMatch(/squares must not be negative/);
    expect(bad({ audit: SKETCH })).toMatch(/audit\.peer/);
    expect(bad({ sketch: { ...SKETCH, extra: 1 } })).toMatch(/extra/);
    // Hop records: all four sketches, each whole.
    expect(bad({ hops: { received: SKETCH, forwarded: SKETCH, owned: SKETCH } })).toMatch(/gathered/);
    const short = { sums: [1], squares: [1] };
    expect(bad({ hops: { received: SKETCH, forwarded: SKETCH, owned: short, gathered: SKETCH } })).toMatch(/items each/);
    expect(bad({ hops: [SKETCH] })).toMatch(/hops/);
  });

  it('takes a round\'s audit only with a round, and a sync step\'s only without one', () => {
    const round = COORD.find((m) => m.type === 'step-assignment' && m.round && m.verify)!;
    const bad = (patch: Record<string, unknown>) => problemsOf(decodeCoordinatorMessage({ ...round, ...patch }));
    expect(bad({ round: undefined })).toMatch(/verify\.audit\.round goes with a round/);
    expect(bad({ verify: { audit: { peer: 'p-2', sampleIds: [1], epoch: 0 } } })).toMatch(/verify\.audit\.round goes with a round/);
    expect(bad({ verify: { audit: { peer: 'p-2', sampleIds: [], epoch: 0, round: [[-1]] } } })).toMatch(/round/);
    // A re-run's pieces add up to the slice.
    const sync = COORD.find((m) => m.type === 'step-assignment' && m.verify?.audit?.pieces)!;
    const withPieces = (pieces: unknown) => decodeCoordinatorMessage({ ...sync, verify: { audit: { peer: 'p-2', sampleIds: [1, 3], epoch: 0, pieces } } });
    expect(problemsOf(withPieces([1, 2]))).toMatch(/verify\.audit\.pieces must add up to its 2 sampleIds, got 3/);
    expect(problemsOf(withPieces([0, 2]))).toMatch(/pieces/);
    expect(withPieces([2]).ok).toBe(true);
    // An audit's micro-batch: whole images, at most the step's batch.
    for (const microBatch of [0, 9, 1.5]) {
      expect(bad({ verify: { audit: { peer: 'p-2', sampleIds: [], epoch: 0, round: [[1]], microBatch } } })).toMatch(/verify\.audit\.microBatch must be/);
    }
  });

  it('refuses a ring dead time outside 1 s .. 10 min', () => {
    const base = COORD.find((m) => m.type === 'step-assignment' && m.deadMs !== undefined)!;
    for (const deadMs of [999, 600_001, 1.5e3 + 0.5, -1, '8000']) {
      expect(problemsOf(decodeCoordinatorMessage({ ...base, deadMs })), String(deadMs)).toMatch(/deadMs/);
    }
  });
});

suite('protocol: valid messages', () => {
  it('decodes every message type to an equal value, on its own side only', () => {
    for (const m of PEER) {
      expect(decodePeerMessage(JSON.parse(JSON.stringify(m)))).toEqual({ ok: true, value: m });
      expect(decodeCoordinatorMessage(m).ok).toBe(false);
    }
    for (const m of COORD) {
      expect(decodeCoordinatorMessage(JSON.parse(JSON.stringify(m)))).toEqual({ ok: true, value: m });
      expect(decodePeerMessage(m).ok).toBe(false);
    }
  });

  it('expectType narrows and refuses another type', () => {
    const d = expectType(decodePeerMessage(PEER[0]), 'join');
    expect(d.ok && d.value.protocol).toBe(PROTOCOL_VERSION);
    expect(problemsOf(expectType(decodePeerMessage(PEER[2]), 'join'))).toContain("expected a 'join' message");
  });
});

suite('protocol: malformed messages are refused with a reason', () => {
  const assignment = COORD[2] as Extract<CoordinatorMessage, { type: 'step-assignment' }>;
  const twoLevel = COORD.find((m) => m.type === 'step-assignment' && m.topology) as Extract<CoordinatorMessage, { type: 'step-assignment' }>;
  const cases: [string, unknown, string][] = [
    ['not an object', 'hello', 'expected a JSON object'],
    ['null', null, 'expected a JSON object'],
    ['array', [PEER[2]], 'expected a JSON object'],
    ['unknown type', { type: 'format-disk' }, 'type must be one of'],
    ['prototype key as type', { type: '__proto__' }, 'type must be one of'],
    ['constructor as type', { type: 'constructor' }, 'type must be one of'],
    ['missing field', { type: 'heartbeat', peerId: 'p', generation: 1 }, 'step must be an integer'],
    ['negative step', { type: 'heartbeat', peerId: 'p', generation: 1, step: -1 }, 'step must be an integer'],
    ['step beyond u32', { type: 'heartbeat', peerId: 'p', generation: 1, step: 2 ** 32 }, 'step must be'],
    ['fractional generation', { type: 'heartbeat', peerId: 'p', generation: 1.5, step: 1 }, 'generation must be'],
    ['string number', { type: 'heartbeat', peerId: 'p', generation: '1', step: 1 }, 'generation must be'],
    ['bad peer id', { type: 'heartbeat', peerId: '../etc', generation: 1, step: 1 }, 'peerId must be an id'],
    ['long peer id', { type: 'heartbeat', peerId: 'x'.repeat(65), generation: 1, step: 1 }, 'peerId must be an id'],
    ['extra field', { ...PEER[2], payload: 'x'.repeat(1000) }, 'unknown field(s) payload'],
    ['wrong protocol', { type: 'join', protocol: 99 }, 'protocol 99 is not supported'],
    ['long token', { type: 'join', protocol: 1, token: 't'.repeat(257) }, 'token must be'],
    ['probe beyond a minute an image', { ...PEER[1], probeMsPerImage: 60_001 }, 'probeMsPerImage must be'],
    ['negative probe', { ...PEER[1], probeMsPerImage: -1 }, 'probeMsPerImage must be'],
    ['a micro-batch of 0 images', { ...PEER[1], microBatch: 0 }, 'microBatch must be an integer in [1, 65536]'],
    ['a fractional micro-batch', { ...PEER[1], microBatch: 2.5 }, 'microBatch must be an integer'],
    ['bad checksum', { ...PEER[3], checksum: 'XYZ' }, 'checksum must be a lower-case hex'],
    ['timings not object', { ...PEER[3], timings: 5 }, 'timings must be an object'],
    ['negative timing', { ...PEER[3], timings: { computeMs: -1, commMs: 0, waitMs: 0 } }, 'timings.computeMs must be'],
    ['extra timing', { ...PEER[3], timings: { computeMs: 1, commMs: 0, waitMs: 0, gpu: 3 } }, 'timings.gpu'],
    ['string loss', { ...PEER[3], loss: 'NaN' }, 'loss must be'],
    ['unknown failure kind', { ...PEER[5], kind: 'meteor' }, 'kind must be one of'],
    ['failure detail too long', { ...PEER[5], detail: 'x'.repeat(MAX_FAILURE_DETAIL + 1) }, 'detail must be'],
    ['failure detail not text', { ...PEER[5], detail: 7 }, 'detail must be'],
    ['short sha256', { ...PEER[6], sha256: 'abc' }, 'sha256 must be a sha256'],
    ['rank outside ring', { ...assignment, rank: 3 }, 'rank must be an integer in [0, 2]'],
    ['empty ring', { ...assignment, ring: [], rank: 0 }, 'ring must be a non-empty'],
    ['duplicate ring id', { ...assignment, ring: ['a', 'b', 'a'] }, 'ring has a peer twice'],
    ['ring too long', { ...assignment, ring: Array.from({ length: MAX_RING + 1 }, (_, i) => `p${i}`) }, 'ring must be an array of at most'],
    ['bad ring item', { ...assignment, ring: ['a', 7, 'c'] }, 'ring[1] must be a peer id'],
    ['negative sample id', { ...assignment, sampleIds: [1, -2, 3] }, 'sampleIds[1] must be an integer'],
    ['slice larger than batch', { ...assignment, sampleIds: [1, 2, 3, 4, 5, 6, 7, 8, 9] }, 'more than globalBatch 8'],
    ['too many sample ids', { ...assignment, globalBatch: MAX_BATCH, sampleIds: new Array(MAX_BATCH + 1).fill(0) }, 'sampleIds must be an array of at most'],
    ['topology not the ring', { ...twoLevel, ring: ['p-0', 'p-2', 'p-1'] }, 'topology .groups, one after the other, must be the ring'],
    [
      'topology of one group', { ...twoLevel, topology: { groups: [['p-0', 'p-1', 'p-2']], shards: 3, columns: [] } },
      'topology .groups must be an array of 2..3',
    ],
    [
      'topology column of another shard', { ...twoLevel, topology: { groups: [['p-0'], ['p-1', 'p-2']], shards: 1, columns: [['p-0', 'p-2']] } },
      'column 0 is not',
    ],
    [
      'topology with wrong shards', { ...twoLevel, topology: { groups: [['p-0'], ['p-1', 'p-2']], shards: 2, columns: [['p-0', 'p-1']] } },
      'shards 2, the smallest group has 1',
    ],
    [
      'topology extra field', { ...twoLevel, topology: { groups: [['p-0'], ['p-1', 'p-2']], shards: 1, columns: [['p-0', 'p-1']], x: 1 } },
      'topology has unknown field(s) x',
    ],
    [
      'topology bad id', { ...twoLevel, topology: { groups: [['p-0'], ['p-1', '../x']], shards: 1, columns: [['p-0', 'p-1']] } },
      'topology .groups must hold non-empty arrays of peer ids',
    ],
    ['prepare: duplicate ring id', { type: 'prepare', id: 1, ring: ['a', 'b', 'a'] }, 'ring has a peer twice'],
    [
      'prepare: topology not the ring', { type: 'prepare', id: 1, ring: ['p-0', 'p-2', 'p-1'], topology: twoLevel.topology },
      'topology .groups, one after the other, must be the ring',
    ],
    ['prepared: fractional id', { type: 'prepared', peerId: 'p', id: 1.5 }, 'id must be'],
    ['load-state: bad hint', { type: 'load-state', source: 'checkpoint', step: 4, next: { step: 4, epoch: 0, sampleIds: [-1] } }, 'next.sampleIds[0] must be'],
    ['bad heartbeat period', { ...COORD[0], heartbeatMs: 1 }, 'heartbeatMs must be'],
    ['unknown error kind', { type: 'error', kind: 'oops', message: 'x' }, 'kind must be one of'],
  ];
  it.each(cases)('%s', (_name, input, expected) => {
    const peer = decodePeerMessage(input);
    const coord = decodeCoordinatorMessage(input);
    expect(peer.ok || coord.ok, 'neither side may accept it').toBe(false);
    const text = [peer, coord].map((d) => (d.ok ? '' : describe(d.error))).join(' | ');
    expect(text).toContain(expected);
  });

  it("a failure's detail keeps the message's end (the cause, under one prefix per hop of a passed-on abort) and fits the decoder", () => {
    expect(failureDetail('generation 1 step 0: expected chunk 3, got chunk 2')).toBe('generation 1 step 0: expected chunk 3, got chunk 2');
    const cause = 'generation 1 step 0: frame 17 of bucket 3 is 65540 bytes, expected 65536';
    const passedOn = `${'ring aborted (peer p-1, reported by p-2): p-2 aborted the ring: '.repeat(6)}${cause}`;
    const d = failureDetail(passedOn);
    expect(d.length).toBe(MAX_FAILURE_DETAIL);
    expect(d.startsWith('…')).toBe(true);
    expect(d.endsWith(cause)).toBe(true);
    const decoded = decodePeerMessage({ type: 'collective-failure', peerId: 'p-1', generation: 1, step: 0, failedPeerId: 'p-2', kind: 'bad-frame', detail: d });
    expect(decoded.ok && decoded.value.type === 'collective-failure' && decoded.value.detail).toBe(d);
  });

  it('lists every problem, not only the first', () => {
    const text = problemsOf(decodePeerMessage({ type: 'heartbeat', peerId: '', generation: -1, step: 'x' }));
    for (const f of ['peerId', 'generation', 'step']) expect(text).toContain(f);
  });

  it('parseJsonText refuses oversized and unparsable text', () => {
    expect(parseJsonText('{"type":"leave","peerId":"a"}')).toEqual({ ok: true, value: { type: 'leave', peerId: 'a' } });
    const big = parseJsonText(' '.repeat(MAX_MESSAGE_BYTES + 1));
    expect(!big.ok && big.error.kind).toBe('too-large');
    const bad = parseJsonText('{"type": ');
    expect(!bad.ok && bad.error.kind).toBe('malformed');
  });
});

// ---- fuzz ----

function randomValue(rng: Rng, depth = 0): unknown {
  switch (rng.int(depth > 1 ? 9 : 11)) {
    case 0: return null;
    case 1: return rng.int(2) === 0;
    case 2: return rng.int(2 ** 33) - 2 ** 32;
    case 3: return (rng.next() - 0.5) * 10 ** rng.int(40);
    case 4: return [Number.NaN, Infinity, -Infinity, -0, 2 ** 53, 0.5][rng.int(6)];
    case 5: return 'x'.repeat(rng.int(3) === 0 ? 70 + rng.int(2000) : rng.int(10));
    case 6: return ['__proto__', 'constructor', '../..', '', 'p-1', 'a'.repeat(64), '\u0000', 'deadbeef'][rng.int(8)];
    case 7: return undefined;
    case 8: return rng.int(100);
    case 9: return Array.from({ length: rng.int(4) }, () => randomValue(rng, depth + 1));
    default: return { [['type', 'peerId', 'x', 'computeMs'][rng.int(4)]!]: randomValue(rng, depth + 1) };
  }
}

/** One random edit of a message: drop, replace or add a field, or edit a nested array/object. */
function mutate(rng: Rng, msg: Record<string, unknown>): Record<string, unknown> {
  const m: Record<string, unknown> = structuredClone(msg);
  const keys = Object.keys(m);
  const key = keys[rng.int(keys.length)]!;
  const op = rng.int(6);
  if (op === 0) delete m[key];
  else if (op === 1) m[key] = randomValue(rng);
  else if (op === 2) m[['extra', 'type', '__proto__', 'toString'][rng.int(4)]!] = randomValue(rng);
  else if (op === 3 && Array.isArray(m[key])) (m[key] as unknown[]).splice(rng.int((m[key] as unknown[]).length + 1), rng.int(2), randomValue(rng));
  else if (op === 4 && typeof m[key] === 'object' && m[key] !== null) m[key] = mutate(rng, m[key] as Record<string, unknown>);
  else m[key] = typeof m[key] === 'number' ? (m[key] as number) + [1, -1, 0.5, 2 ** 32][rng.int(4)]! : randomValue(rng);
  return m;
}

/** What a decoded value must satisfy beyond its type (checks the decoder's promises). */
function checkInvariants(m: PeerMessage | CoordinatorMessage): void {
  const u32 = (v: number): boolean => Number.isInteger(v) && v >= 0 && v < 2 ** 32;
  if ('generation' in m) expect(u32(m.generation)).toBe(true);
  if ('step' in m) expect(u32(m.step)).toBe(true);
  if (m.type === 'step-assignment') {
    expect(m.rank).toBeLessThan(m.ring.length);
    expect(new Set(m.ring).size).toBe(m.ring.length);
    expect(m.sampleIds.length).toBeLessThanOrEqual(m.globalBatch);
  }
  if (m.type === 'step-result') expect(m.loss === null || Number.isFinite(m.loss)).toBe(true);
  if (m.type === 'eval-result') expect(m.counts.top1 <= m.counts.top5 && m.counts.top5 <= m.counts.samples).toBe(true);
  if (m.type === 'load-state' && m.source === 'seed') expect(m.step).toBe(0);
  // A value that decoded once decodes again to itself (JSON round trip: what the wire does).
  const again = JSON.parse(JSON.stringify(m)) as unknown;
  const d = COORD_TYPES.has(m.type) ? decodeCoordinatorMessage(again) : decodePeerMessage(again);
  expect(d).toEqual({ ok: true, value: m });
}

suite('protocol: seeded fuzz', () => {
  it('never throws, always explains a refusal, and accepted values keep every invariant', () => {
    const rng = makeRng(20240605);
    const all = [...PEER, ...COORD] as unknown as Record<string, unknown>[];
    const counts = { accepted: 0, refused: 0, random: 0 };
    const start = performance.now();
    for (let i = 0; i < 4000; i++) {
      let input: unknown;
      if (i % 8 === 7) {
        input = randomValue(rng);
        counts.random++;
      } else {
        input = all[rng.int(all.length)]!;
        for (let k = 1 + rng.int(3); k > 0; k--) input = mutate(rng, input as Record<string, unknown>);
      }
      for (const d of [decodePeerMessage(input), decodeCoordinatorMessage(input)] as Decoded<PeerMessage | CoordinatorMessage>[]) {
        if (d.ok) {
          counts.accepted++;
          checkInvariants(d.value);
        } else {
          counts.refused++;
          expect(d.error.problems.length).toBeGreaterThan(0);
          expect(d.error.problems.every((p) => typeof p === 'string' && p.length > 0 && p.length < 2000)).toBe(true);
        }
      }
    }
    // Both outcomes must occur often: a decoder that accepts or refuses everything fails here.
    expect(counts.accepted).toBeGreaterThan(200);
    expect(counts.refused).toBeGreaterThan(4000);
    expect(performance.now() - start).toBeLessThan(5000);
  });
});
