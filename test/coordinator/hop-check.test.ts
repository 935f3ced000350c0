// The hop checks (coordinator/hop-check.ts, hop-evidence.ts, AuditBook over a flat ring) on the
// records of real ring all-reduces over memory links: an honest ring passes on the exact and the
// rounding wire; a member that sends its gradient sign-flipped and reports the honest one is
// evicted at once when its records tell the truth, and named after it met HOP_COLLUDERS + 1
// different successors when they are disguised (its successors' records show what it sent);
// members framed by two colluders are never named.
import { describe, expect, it } from 'vitest';
import { AuditBook } from '../../coordinator/audits.ts';
import { hopCheck, type HopSketches } from '../../coordinator/hop-check.ts';
import { HOP_COLLUDERS, HopEvidence, namingPartners } from '../../coordinator/hop-evidence.ts';
import type { HopRecord } from '../../src/comm/hop-record.ts';
import type { WireFormat } from '../../src/protocol/frames.ts';
import type { SketchReport, StepResult } from '../../src/protocol/messages.ts';
import { makeRng } from '../../src/rng.ts';
import { disguiseHops } from '../../src/trust/adversary.ts';
import { sketchHops } from '../../src/trust/hop-sketch.ts';
import { sketch, sketchSeed, type GradientSketch } from '../../src/trust/sketch.ts';
import { reduceWithHops } from '../comm/hop-helpers.ts';

const CHECKSUM = '0123456789abcdef';
const SEED = sketchSeed(CHECKSUM);
const report = (g: GradientSketch): SketchReport => ({ sums: [...g.sums], squares: [...g.squares] });

/** Members' gradients (a shared mean plus noise 3x it), and what a ring of them reports when `liars` send theirs sign-flipped. */
async function ringStep(ids: readonly string[], liars: ReadonlySet<string>, o: { disguise?: boolean; wire?: WireFormat; seed?: number } = {}) {
  const rng = makeRng(o.seed ?? 7);
  const length = 3001;
  const mean = Float32Array.from({ length }, () => rng.normal());
  const kept = ids.map(() => mean.map((m) => m + 3 * rng.normal()));
  const put = kept.map((g, i) => (liars.has(ids[i]!) ? g.map((x) => -x) : g));
  const { outs, hops } = await reduceWithHops(put, o.wire ?? 'f32', 2);
  if (o.disguise ?? true) ids.forEach((id, i) => { if (liars.has(id)) disguiseHops(hops[i]!, kept[i]!, o.wire ?? 'f32'); });
  return { kept, outs, hops };
}

const sketched = (h: HopRecord): HopSketches => sketchHops(h, SEED);

function results(ids: readonly string[], s: Awaited<ReturnType<typeof ringStep>>): StepResult[] {
  const total = report(sketch(s.outs[0]!, SEED));
  return ids.map((peerId, i) => {
    const h = sketched(s.hops[i]!);
    return {
      type: 'step-result', peerId, generation: 1, step: 0, loss: 1, checksum: CHECKSUM, images: 32,
      timings: { computeMs: 1, commMs: 1, waitMs: 0 }, sketch: report(sketch(s.kept[i]!, SEED)), total,
      hops: { received: report(h.received), forwarded: report(h.forwarded), owned: report(h.owned), gathered: report(h.gathered) },
    };
  });
}

describe('hop checks of one step', () => {
  for (const wire of ['f32', 'bf16'] as const) {
    it(`an honest ring of 3 and of 6 on the ${wire} wire: every record adds up and every link agrees (10 steps each)`, async () => {
      for (const n of [3, 6]) {
        const ids = Array.from({ length: n }, (_, i) => `p${i}`);
        for (let t = 0; t < 10; t++) {
          const s = await ringStep(ids, new Set(), { wire, seed: 100 * n + t });
          const v = hopCheck(s.kept.map((g) => sketch(g, SEED)), s.hops.map(sketched), wire);
          expect(v, `ring of ${n}, step ${t}`).toEqual({ local: [], relays: [], links: [] });
        }
      }
    });
  }

  it('a liar whose records tell what it sent fails its own check, nobody else does; disguised, only its link to its successor disagrees', async () => {
    const ids = ['a', 'b', 'c', 'd', 'e'];
    for (const wire of ['f32', 'bf16'] as const) {
      const plain = await ringStep(ids, new Set(['c']), { disguise: false, wire });
      const v = hopCheck(plain.kept.map((g) => sketch(g, SEED)), plain.hops.map(sketched), wire);
      expect(v.local.map((l) => l.rank)).toEqual([2]);
      expect(v.local[0]!.z).toBeGreaterThan(1e3);
      expect(v.links).toEqual([]);
      const disguised = await ringStep(ids, new Set(['c']), { wire });
      const w = hopCheck(disguised.kept.map((g) => sketch(g, SEED)), disguised.hops.map(sketched), wire);
      expect(w.local).toEqual([]);
      expect(w.links).toEqual([2]);
    }
  });
});

describe('hop evidence', () => {
  it('names a member once it disagreed with HOP_COLLUDERS + 1 others (every other in a ring of 3; nobody in a ring of 2)', () => {
    expect([2, 3, 4, 5, 16].map(namingPartners)).toEqual([null, 2, 3, 3, HOP_COLLUDERS + 1]);
    const e = new HopEvidence();
    const ring = ['l', 'a', 'b', 'c', 'd'];
    e.add('l', 'a');
    e.add('l', 'a');
    e.add('b', 'l');
    expect(e.named(ring)).toEqual([]);
    e.add('l', 'c');
    expect(e.named(ring)).toEqual(['l']);
    // Partners no longer in the ring count no more; forgotten ones not at all.
    expect(e.named(['l', 'b', 'c', 'd'])).toEqual([]);
    // Forgotten: its disagreements with a and b again make two partners, not three.
    e.forget(['l']);
    e.add('l', 'a');
    e.add('b', 'l');
    expect(e.named(ring)).toEqual([]);
  });

  it('an honest member framed by two colluders, each on every link they share, is never named; the colluders are once they frame a third', () => {
    const e = new HopEvidence();
    const ring = ['h', 'x', 'y', 'p', 'q', 'r'];
    for (let t = 0; t < 20; t++) {
      e.add('x', 'h');
      e.add('h', 'y');
      e.add('h', 'x');
    }
    expect(e.named(ring)).toEqual([]);
    e.add('x', 'p');
    e.add('q', 'x');
    expect(e.named(ring)).toEqual(['x']);
  });

  it('the next order parts every recorded pair the same way round where a ring can (1000 orders of rings of 3 to 9)', () => {
    const rng = makeRng(3);
    const draw = (n: number) => rng.int(n);
    for (let t = 0; t < 1000; t++) {
      const n = 3 + (t % 7);
      const ring = Array.from({ length: n }, (_, i) => `p${i}`);
      const e = new HopEvidence();
      // One liar that met min(2, n - 2) successors: a ring has an order where its successor is a new one.
      for (let k = 1; k <= Math.min(2, n - 2); k++) e.add('p0', `p${k}`);
      const o = e.order(ring, draw);
      expect([...o].sort()).toEqual([...ring].sort());
      const next = o[(o.indexOf('p0') + 1) % n]!;
      expect(e.partners('p0').has(next), `ring of ${n}: ${o.join(' ')}`).toBe(false);
    }
  });
});

describe('a flat ring step under the audit book', () => {
  it('a disguised liar in rings of 3 to 8 is named within HOP_COLLUDERS + 1 attempts and evicted alone; the step is never let through', async () => {
    for (let n = 3; n <= 8; n++) {
      const rng = makeRng(n);
      const book = new AuditBook(0, 'f32', (k) => rng.int(k), false);
      let ring = Array.from({ length: n }, (_, i) => `p${i}`);
      let attempts = 0;
      for (;;) {
        attempts++;
        const v = book.verdict(0, results(ring, await ringStep(ring, new Set(['p1']), { seed: attempts })), true);
        expect(v.kind, `ring of ${n}, attempt ${attempts}: ${JSON.stringify(v)}`).not.toBe('ok');
        if (v.kind === 'evict') {
          expect(v.ids).toEqual(['p1']);
          expect(v.reason).toMatch(/its records of what it sent and received disagree with those of \d different neighbours/);
          break;
        }
        expect(v.kind).toBe('again');
        if (v.kind !== 'again') break;
        expect(v.order).toBeDefined();
        ring = v.order!;
      }
      expect(attempts, `ring of ${n}`).toBe(namingPartners(n));
    }
  });

  it('a liar whose records tell what it sent is evicted in its first attempt; an honest flat ring commits', async () => {
    const ring = ['a', 'b', 'c', 'd'];
    const book = new AuditBook(0, 'f32', undefined, false);
    expect(book.verdict(0, results(ring, await ringStep(ring, new Set())), true)).toMatchObject({ kind: 'ok' });
    const v = book.verdict(1, results(ring, await ringStep(ring, new Set(['b']), { disguise: false })).map((r) => ({ ...r, step: 1 })), true);
    expect(v).toMatchObject({ kind: 'evict', ids: ['b'] });
    expect((v as { reason: string }).reason).toMatch(/not what it received plus the contribution it reports/);
  });

  it('a liar in a two-level generation (hops not checked): its sum does not add up, the step runs again flat, and the hops name it', async () => {
    const ring = ['a', 'b', 'c', 'd', 'e', 'f'];
    const rng = makeRng(9);
    const book = new AuditBook(0, 'f32', (k) => rng.int(k), false);
    const twoLevel = results(ring, await ringStep(ring, new Set(['c']))).map(({ hops: _, ...r }) => r);
    const v = book.verdict(0, twoLevel, false);
    expect(v).toMatchObject({ kind: 'again', order: ring });
    expect((v as { reason: string }).reason).toMatch(/do not add up .*runs again in one flat ring/);
    let order = ring;
    for (let attempt = 1; attempt <= 3; attempt++) {
      const w = book.verdict(0, results(order, await ringStep(order, new Set(['c']), { seed: attempt })), true);
      if (attempt < 3) {
        expect(w.kind).toBe('again');
        order = (w as { order: string[] }).order;
      } else expect(w).toMatchObject({ kind: 'evict', ids: ['c'] });
    }
  });

  it('a member of a flat ring that reports no hops is evicted as an outdated volunteer', async () => {
    const ring = ['a', 'b', 'c'];
    const rs = results(ring, await ringStep(ring, new Set()));
    delete rs[1]!.hops;
    expect(new AuditBook(0, 'f32').verdict(0, rs, true)).toMatchObject({ kind: 'evict', ids: ['b'] });
    // A two-level generation's steps are not hop-checked.
    expect(new AuditBook(0, 'f32', undefined, false).verdict(0, rs, false)).toMatchObject({ kind: 'ok' });
  });
});
