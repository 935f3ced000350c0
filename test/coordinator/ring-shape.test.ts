// A generation's ring and two-level plan travel as an edit of the last ring a session was sent
// (src/client/ring-shape.ts): the edits, what the peer rebuilds, what it refuses, and the bytes
// a step costs at 1,024 peers with the shape in full and as edits.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ShapeReceiver, ShapeSender, applyRuns, ringRuns } from '../../src/client/ring-shape.ts';
import type { PrepareRing, StepAssignment } from '../../src/protocol/messages.ts';
import { planGeneration } from '../../coordinator/two-level.ts';
import { makeRng } from '../../src/rng.ts';

/** The assignments of one step of `ring` (as coordinator/driver-steps.ts builds them: one ring array, one plan object). */
function stepOf(ring: string[], generation: number, step: number, topology: StepAssignment['topology'] | null, perPeer = 32): StepAssignment[] {
  return ring.map((_, rank) => ({
    type: 'step-assignment', job: 7, generation, step, ring, rank, globalBatch: perPeer * ring.length,
    sampleIds: Array.from({ length: perPeer }, (_, i) => rank * perPeer + i), epoch: 0, seed: 1,
    ...(topology ? { topology } : {}),
  }));
}

/** Sends `m` through a sender and a receiver as the session socket does (JSON text between). */
function wire<M extends StepAssignment | PrepareRing>(sender: ShapeSender, receiver: ShapeReceiver, m: M): { text: string; got: M } {
  const text = JSON.stringify(sender.compact(m));
  const d = receiver.decode(JSON.parse(text) as unknown);
  if (!d.ok) throw new Error(JSON.stringify(d.error));
  return { text, got: d.value as M };
}

const ids = (n: number) => Array.from({ length: n }, () => randomUUID());

describe('ring edits', () => {
  it('rebuild every ring from every other, in few pieces for a few leaves and joins', () => {
    const rng = makeRng(5);
    const pool = ids(60);
    const pick = (n: number) => [...pool].sort(() => rng.next() - 0.5).slice(0, n);
    const cases: [string[], string[]][] = [
      [[], pool.slice(0, 5)], [pool.slice(0, 5), pool.slice(0, 5)], [pool.slice(0, 5), []], [pool.slice(0, 9), pool.slice(0, 9).reverse()],
      [pool.slice(0, 9), pool.slice(9, 20)],
    ];
    for (let k = 0; k < 40; k++) cases.push([pick(1 + Math.floor(rng.next() * 59)), pick(1 + Math.floor(rng.next() * 59))]);
    for (const [prev, next] of cases) {
      const runs = ringRuns(prev, next);
      const back = applyRuns(prev, JSON.parse(JSON.stringify(runs)) as unknown);
      if (next.length === 0) expect(back.ok).toBe(false); // a ring is never empty
      else expect(back).toEqual({ ok: true, ring: next });
    }
    const ring = pool.slice(0, 50);
    const churned = [...ring.slice(0, 10), ...ring.slice(12, 30), pool[55]!, ...ring.slice(30), pool[56]!];
    expect(ringRuns(ring, ring)).toEqual([[0, 50]]);
    expect(ringRuns(ring, churned)).toEqual([[0, 10], [12, 18], pool[55], [30, 20], pool[56]]);
  });

  it('refuse pieces that do not build a ring from the previous one', () => {
    const prev = ids(4);
    for (const [runs, why] of [
      [[], /1\.\.1024 pieces/], ['x', /1\.\.1024 pieces/], [[[2, 3]], /copies 2\.\.4 of a previous ring of 4/], [[[-1, 2]], /copies/],
      [[[0, 0]], /copies/], [[[0.5, 1]], /peer id or \[start, length\]/], [[['a', 'b']], /peer id or/], [[''], /not a peer id/],
      [['x'.repeat(65)], /not a peer id/], [[{}], /peer id or/], [Array(1025).fill('a'), /1\.\.1024 pieces/],
    ] as [unknown, RegExp][]) {
      const r = applyRuns(prev, runs);
      expect(r.ok, JSON.stringify(runs).slice(0, 80)).toBe(false);
      if (!r.ok) expect(r.problem).toMatch(why);
    }
    const long = applyRuns(Array.from({ length: 1024 }, (_, i) => `p${i}`), [[0, 1024], 'extra']);
    expect(long.ok).toBe(false);
    if (!long.ok) expect(long.problem).toMatch(/more than 1024 ids/);
  });
});

describe('shapes over a session', () => {
  it('carry assignments and prepares across generations; a steady ring is one piece', () => {
    const ring0 = ids(20);
    const g4 = planGeneration(ring0, () => undefined, 16);
    expect(g4.topology).not.toBeNull();
    const [sender, receiver] = [new ShapeSender(), new ShapeReceiver()];
    for (let step = 0; step < 3; step++) {
      const a = stepOf(step === 2 ? [...g4.ring] : g4.ring, 4, step, g4.topology)[5]!; // the driver copies the ring each step
      const { text, got } = wire(sender, receiver, a);
      expect(text.includes('"ring"') || text.includes('"topology"')).toBe(false);
      expect(text.includes(g4.ring[5]!)).toBe(step === 0);
      if (step > 0) expect(JSON.parse(text)).toMatchObject({ shape: { runs: [[0, 20]], sizes: g4.topology!.groups.map((g) => g.length) } });
      expect(got).toEqual(a);
    }
    // Announced: a joiner in, one member out (the plan adapted), then a step of the old ring, then the new one.
    const g5 = planGeneration([...ring0.slice(1), randomUUID()], () => undefined, 16, g4.topology);
    const prepare: PrepareRing = { type: 'prepare', id: 3, ring: g5.ring, ...(g5.topology ? { topology: g5.topology } : {}) };
    const p = wire(sender, receiver, prepare);
    expect(p.got).toEqual(prepare);
    expect(JSON.parse(p.text).shape.runs.length).toBeLessThan(6);
    const old = stepOf(g4.ring, 4, 3, g4.topology)[0]!;
    expect(wire(sender, receiver, old).got).toEqual(old);
    const next = stepOf(g5.ring, 5, 4, g5.topology)[0]!;
    expect(wire(sender, receiver, next).got).toEqual(next);
    // Down to a flat ring.
    const flat = stepOf(g5.ring.slice(0, 8), 6, 5, null)[2]!;
    const f = wire(sender, receiver, flat);
    expect(f.got).toEqual(flat);
    expect(JSON.parse(f.text).shape.sizes).toBeUndefined();
  });

  it('refuses a shape it cannot build, moves on with one it could, and passes other messages unchanged', () => {
    const ring = ids(3);
    const receiver = new ShapeReceiver();
    const bare = (shape: unknown, extra: Record<string, unknown> = {}) => {
      const { ring: _r, ...rest } = stepOf(ring, 2, 0, null)[1]!;
      return { ...rest, shape, ...extra };
    };
    const refused = (m: unknown, why: RegExp) => {
      const d = receiver.decode(m);
      expect(d.ok).toBe(false);
      if (!d.ok) expect(d.error.problems[0]).toMatch(why);
    };
    refused(bare({ runs: [[0, 3]] }), /copies 0\.\.2 of a previous ring of 0/);
    refused(bare({ runs: ring }, { ring }), /shape together with ring or topology/);
    refused(bare([ring]), /shape must be an object/);
    refused(bare({ runs: ring, order: 1 }), /unknown fields/);
    refused(bare({ runs: ring, sizes: [1, 1] }), /add up to 2, not the ring's 3/);
    refused(bare({ runs: ring, sizes: [3] }), /2 or more group sizes/);
    // Built, but the message is refused (rank out of range): the ring is still the session's last.
    refused(bare({ runs: ring }, { rank: 7 }), /rank/);
    const d = receiver.decode(bare({ runs: [[0, 3]] }));
    expect(d.ok && d.value.type === 'step-assignment' && d.value.ring).toEqual(ring);
    expect(receiver.decode({ type: 'done', step: 3, reason: 'the job is over' })).toEqual({
      ok: true, value: { type: 'done', step: 3, reason: 'the job is over' },
    });
    expect(receiver.decode([1, 2]).ok).toBe(false);
  });

  it('makes a step O(N) bytes: at 1,024 peers ~120 MB in full, well under 1 MB as edits, also for a churned generation', () => {
    const n = 1024;
    const g1 = planGeneration(ids(n), () => undefined, 16);
    const full = stepOf(g1.ring, 11, 0, g1.topology).reduce((s, a) => s + JSON.stringify(a).length, 0);
    const senders = g1.ring.map(() => new ShapeSender());
    const sent = (ring: string[], generation: number, topology: StepAssignment['topology'] | null) =>
      stepOf(ring, generation, 1, topology).reduce((s, a, i) => s + JSON.stringify(senders[i]!.compact(a)).length, 0);
    const first = sent(g1.ring, 11, g1.topology);
    const steady = sent([...g1.ring], 11, g1.topology);
    // Five leave, five join: the plan adapted in place (coordinator/stable-plan.ts).
    const g2 = planGeneration([...g1.ring.slice(5), ...ids(5)], () => undefined, 16, g1.topology);
    const churned = sent(g2.ring, 12, g2.topology);
    process.stderr.write(`assignment bytes per step at ${n} peers: ${(full / 1e6).toFixed(1)} MB with the shape in full; ` +
      `as edits ${(first / 1e6).toFixed(1)} MB for a session's first, ${(steady / 1e6).toFixed(2)} MB for a steady ring, ` +
      `${(churned / 1e6).toFixed(2)} MB for a generation with 5 leaves and 5 joins\n`);
    expect(full).toBeGreaterThan(100e6);
    expect(first).toBeLessThan(full / 2.5); // ids once, not three times (ring, groups, columns)
    expect(steady).toBeLessThan(1e6);
    expect(churned).toBeLessThan(1e6);
  });
});

describe('encoding a step once for its ring (ShapeSender.encode)', () => {
  it('gives every member the same message as compact, whatever changes between steps, members and sessions', () => {
    const ring = ids(12);
    const joined = [...ring.slice(2), ...ids(3)];
    const two = planGeneration(ring, () => undefined, 4);
    if (!two.topology) throw new Error('12 peers from 4 up should make a two-level generation');
    const steal = { chunk: 4 };
    // Steps of one ring, a step with a tail and audits, a two-level step, and a new ring some sessions have not seen.
    const steps: StepAssignment[][] = [
      stepOf(ring, 1, 0, null), stepOf(ring, 1, 1, null).map((a, r) => ({ ...a, deadMs: 9000, steal, ...(r === 0 ? { uploadCheckpoint: true } : {}) })),
      stepOf(ring, 1, 2, null).map((a, r) => ({
        ...a, next: { step: 3, epoch: 0, sampleIds: [r, r + 1] }, verify: r % 3 ? {} : { audit: { peer: ring[(r + 1) % 12]!, sampleIds: [1, 2], epoch: 0 } },
      })),
      stepOf(two.ring, 2, 3, two.topology), stepOf(ring, 2, 3, null).map((a) => ({ ...a, steal: { chunk: 5 } })), stepOf(joined, 3, 4, null),
    ];
    const senders = new Map<string, readonly [ShapeSender, ShapeSender]>([...ring, ...joined].map((id) => [id, [new ShapeSender(), new ShapeSender()]]));
    for (const step of steps) {
      for (const a of step) {
        const [plain, encoded] = senders.get(a.ring[a.rank]!)!;
        expect(JSON.parse(encoded.encode(a))).toEqual(JSON.parse(JSON.stringify(plain.compact(a))));
      }
    }
  });

  it('encodes other messages as JSON.stringify does, and a prepare through compact', () => {
    const sender = new ShapeSender();
    const prepare: PrepareRing = { type: 'prepare', id: 4, ring: ids(3) };
    expect(JSON.parse(sender.encode(prepare))).toEqual(JSON.parse(JSON.stringify(new ShapeSender().compact(prepare))));
  });
});
