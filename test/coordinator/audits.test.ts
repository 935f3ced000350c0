// Who audits whom (coordinator/audits.ts AuditBook.plan): every drawn member gets an auditor, never
// itself, each auditor recomputes at most one slice, and the auditor of a member is a random other;
// a member whose contribution strays from the others' is audited in the next step and watched; a
// newcomer's first verified step is audited for certain (probation).
import { describe, expect, it } from 'vitest';
import { AuditBook, disputePanel, WATCH_STEPS } from '../../coordinator/audits.ts';
import { suspects } from '../../coordinator/trust-check.ts';
import type { SketchReport, StepResult } from '../../src/protocol/messages.ts';
import { makeRng, type Rng } from '../../src/rng.ts';
import { addSketches, sketch, sketchSeed, type GradientSketch } from '../../src/trust/sketch.ts';

const slices = (n: number) => Array.from({ length: n }, (_, i) => [2 * i, 2 * i + 1]);

describe('audit plan', () => {
  it('at fraction 1 every member is audited by another, each auditor once (500 plans of 3 to 6 members)', () => {
    const book = new AuditBook(1, 'f32');
    for (let t = 0; t < 500; t++) {
      const n = 3 + (t % 4);
      const ring = Array.from({ length: n }, (_, i) => `p${i}`);
      const plan = book.plan(t, ring, slices(n), 0);
      const audited = plan.map((p, auditor) => {
        expect(p.audit, `plan ${t}: member ${auditor} audits nobody`).toBeDefined();
        expect(p.audit!.peer).not.toBe(ring[auditor]);
        expect(p.audit!.sampleIds).toEqual(slices(n)[ring.indexOf(p.audit!.peer)]);
        return p.audit!.peer;
      });
      expect(new Set(audited).size).toBe(n);
    }
  });

  it('a member\'s auditor is any other member, about equally often', () => {
    const book = new AuditBook(1, 'f32');
    const ring = ['a', 'b', 'c', 'd'];
    const whoAuditsA = new Map<string, number>();
    for (let t = 0; t < 3000; t++) {
      const auditor = book.plan(t, ring, slices(4), 0).findIndex((p) => p.audit?.peer === 'a');
      whoAuditsA.set(ring[auditor]!, (whoAuditsA.get(ring[auditor]!) ?? 0) + 1);
    }
    expect([...whoAuditsA.keys()].sort()).toEqual(['b', 'c', 'd']);
    for (const count of whoAuditsA.values()) expect(Math.abs(count - 1000)).toBeLessThan(150);
  });

  it('at a fraction below 1 about that share is audited, and nobody in a ring of 2', () => {
    const book = new AuditBook(0.25, 'f32', undefined, { suspects: true, newcomers: false });
    const ring = Array.from({ length: 8 }, (_, i) => `p${i}`);
    let audits = 0;
    for (let t = 0; t < 400; t++) audits += book.plan(t, ring, slices(8), 0).filter((p) => p.audit).length;
    expect(audits / (400 * 8)).toBeGreaterThan(0.2);
    expect(audits / (400 * 8)).toBeLessThan(0.3);
    expect(book.plan(0, ['a', 'b'], slices(2), 0).filter((p) => p.audit)).toEqual([]);
  });
});

describe('members that compute in micro-batches', () => {
  const ring = ['a', 'b', 'c', 'd'];
  // What each said at its join it computes at once (c said nothing), and slices of 6 images each.
  const members = [{ microBatch: 2 }, { microBatch: 8 }, {}, { microBatch: 1 }];
  const six = ring.map((_, i) => Array.from({ length: 6 }, (_, j) => 10 * i + j));

  it('are recomputed in their own micro-batches, by an auditor that holds one of them; one whose slice fits audits it as one batch', () => {
    // d is audited by b (or by c) in only about 1.5-2% of steps (they mostly audit each other): over 300 steps with random draws
    // one of them never did in 1.5% of runs (a clean-clone run failed so). A seeded draw and 2,000 steps: under 1e-13 by chance.
    const rng = makeRng(47);
    const book = new AuditBook(1, 'f32', (n) => rng.int(n), false);
    const seen = new Map<string, Set<string>>();
    for (let t = 0; t < 2000; t++) {
      book.plan(t, ring, six, 0, members).forEach((p, auditor) => {
        if (!p.audit) return;
        const target = ring.indexOf(p.audit.peer);
        // a cuts its 6 into micro-batches of 2 (the task says so); b and c compute theirs at once (no cut named); d cuts into 1s.
        expect(p.audit.microBatch, `${p.audit.peer}'s task`).toBe([2, undefined, undefined, 1][target]);
        const holds = members[auditor]!.microBatch ?? Infinity;
        expect(holds, `${ring[auditor]} audits ${p.audit.peer}`).toBeGreaterThanOrEqual(p.audit.microBatch ?? 6);
        seen.set(p.audit.peer, (seen.get(p.audit.peer) ?? new Set()).add(ring[auditor]!));
      });
    }
    // Whoever can hold the cut audits it: a (2) by b, c, d is too small; b and c (6 at once) only by each other; d (1) by anyone.
    expect([...seen.get('a')!].sort()).toEqual(['b', 'c']);
    expect([...seen.get('b')!].sort()).toEqual(['c']);
    expect([...seen.get('c')!].sort()).toEqual(['b']);
    expect([...seen.get('d')!].sort()).toEqual(['a', 'b', 'c']);
  });

  it('a member whose slice reuses a kept sum is not audited in that step', () => {
    const book = new AuditBook(1, 'f32', undefined, false);
    let others = 0;
    for (let t = 0; t < 50; t++) {
      const plan = book.plan(t, ring, six, 0, [{}, { reusing: true }, {}, {}]);
      expect(plan.some((p) => p.audit?.peer === 'b')).toBe(false);
      others += plan.filter((p) => p.audit).length;
    }
    // The others as before (the draw aims a little under F = 1).
    expect(others).toBeGreaterThan(0.8 * 50 * 3);
  });
});

const CHECKSUM = '0123456789abcdef';
const report = (g: GradientSketch): SketchReport => ({ sums: [...g.sums], squares: [...g.squares] });
/** Members' slice gradients: `sizes[i]` per-image gradients summed around a shared mean, per-image noise 3x the mean (a small CNN's share). */
function sliceSums(rng: Rng, sizes: readonly number[], tamper: (i: number, g: Float32Array) => void = () => undefined): Float32Array[] {
  const mean = Float32Array.from({ length: 4000 }, () => rng.normal());
  return sizes.map((k, i) => {
    const g = mean.map((m) => k * m + Math.sqrt(k) * 3 * rng.normal());
    tamper(i, g);
    return g;
  });
}
const slices32 = (rng: Rng, n: number, tamper?: (i: number, g: Float32Array) => void): Float32Array[] => sliceSums(rng, Array<number>(n).fill(32), tamper);
/** A verified step's results: each member's sketch of what it sent, the ring's sum, no audits. */
function results(ring: readonly string[], step: number, grads: readonly Float32Array[]): StepResult[] {
  const seed = sketchSeed(CHECKSUM);
  const parts = grads.map((g) => sketch(g, seed));
  const total = report(addSketches(parts));
  return ring.map((peerId, i) => ({
    type: 'step-result', peerId, generation: 1, step, loss: 1, checksum: CHECKSUM, images: 32,
    timings: { computeMs: 1, commMs: 1, waitMs: 0, dataMs: 0, exposedCommMs: 0, overheadMs: 0 }, sketch: report(parts[i]!), total,
  }));
}

describe('the audit budget', () => {
  it('directed audits spend the job\'s fraction: 300 steps of 16, a newcomer every 25 steps and strange members: 5% of the images recomputed', () => {
    const rng = makeRng(11);
    const f = 0.05;
    const book = new AuditBook(f, 'f32', (n) => rng.int(n));
    let ring = Array.from({ length: 16 }, (_, i) => `p${i}`);
    let fresh = 16;
    for (let step = 0; step < 300; step++) {
      if (step > 0 && step % 25 === 0) ring = [...ring.slice(1), `p${fresh++}`]; // churn: one leaves, a newcomer joins (on probation)
      // Slices of 16 to 48 images; every 25th step a member's contribution is 3x its size's (a suspect, then watched).
      const sizes = ring.map((_, i) => 16 + ((i * 7 + step) % 33));
      const plan = book.plan(step, ring, sizes.map((k, i) => Array.from({ length: k }, (_, j) => 1000 * i + j)), 0);
      const grads = sliceSums(rng, sizes, (i, g) => { if (step % 25 === 12 && i === step % 16) g.forEach((x, j) => { g[j] = 3 * x; }); });
      const rs = results(ring, step, grads).map((r, i) => {
        const task = plan[i]!.audit;
        const images = { images: sizes[i]! };
        if (!task) return { ...r, ...images };
        return { ...r, ...images, audit: { peer: task.peer, ...report(sketch(grads[ring.indexOf(task.peer)]!, task.seed ?? sketchSeed(CHECKSUM))) } };
      });
      expect(book.verdict(step, rs).kind, `step ${step}`).toBe('ok');
    }
    const t = book.tally;
    console.log(`audit budget: ${t.audits} audits (${t.directed} directed), ${(t.auditedImages / t.computedImages).toFixed(4)} of the images`);
    expect(t.directed).toBeGreaterThan(20);
    expect(t.auditedImages / t.computedImages).toBeGreaterThan(0.045);
    expect(t.auditedImages / t.computedImages).toBeLessThanOrEqual(0.0505);
  });
});

describe('directed audits', () => {
  const ring = Array.from({ length: 8 }, (_, i) => `p${i}`);
  const flip = (bad: number) => (i: number, g: Float32Array) => { if (i === bad) for (let j = 0; j < g.length; j++) g[j] = -g[j]!; };

  it('honest members are not suspects (200 steps of 8 and of 3); a sign flip, 50x, zeros and half a slice are', () => {
    const rng = makeRng(5);
    for (let t = 0; t < 200; t++) {
      for (const n of [8, 3]) {
        const seed = sketchSeed(CHECKSUM);
        expect(suspects(slices32(rng, n).map((g) => ({ sketch: sketch(g, seed), images: 32 })))).toEqual([]);
      }
    }
    const seed = sketchSeed(CHECKSUM);
    const attacks: Record<string, (g: Float32Array) => void> = {
      'sign flip': (g) => g.forEach((x, j) => { g[j] = -x; }),
      '50x': (g) => g.forEach((x, j) => { g[j] = 50 * x; }),
      zeros: (g) => g.fill(0),
      'half a slice': (g) => g.forEach((x, j) => { g[j] = x / 2; }),
    };
    for (const [kind, attack] of Object.entries(attacks)) {
      const grads = slices32(rng, 8, (i, g) => { if (i === 6) attack(g); });
      expect(suspects(grads.map((g) => ({ sketch: sketch(g, seed), images: 32 }))), kind).toEqual([6]);
    }
  });

  it('a member is judged against its own slice size: no honest suspect in 200 steps of slices of 2 to 64 images; blatant attacks at 5 and 48 are', () => {
    // An honest slice of 2 has a norm per image 3.5x that of one of 64 and a cosine with the rest of 0.4 against 0.9 (noise 3x the mean).
    const sizes = [2, 3, 5, 8, 16, 32, 48, 64];
    const rng = makeRng(6);
    const seed = sketchSeed(CHECKSUM);
    const parts = (grads: readonly Float32Array[]) => grads.map((g, i) => ({ sketch: sketch(g, seed), images: sizes[i]! }));
    for (let t = 0; t < 200; t++) expect(suspects(parts(sliceSums(rng, sizes))), `step ${t}`).toEqual([]);
    const attacks: Record<string, (g: Float32Array) => void> = {
      'sign flip': (g) => g.forEach((x, j) => { g[j] = -x; }),
      '50x': (g) => g.forEach((x, j) => { g[j] = 50 * x; }),
      zeros: (g) => g.fill(0),
      'noise of its norm': (g) => {
        const rms = Math.sqrt(g.reduce((a, x) => a + x * x, 0) / g.length);
        g.forEach((_, j) => { g[j] = rms * rng.normal(); });
      },
    };
    // Noise of a small slice's norm hides in the honest spread of a small slice's direction (its expected cosine 0.6 at 5 images).
    for (const [bad, kinds] of [[2, ['sign flip', '50x', 'zeros']], [6, Object.keys(attacks)]] as const) {
      for (const kind of kinds) {
        expect(suspects(parts(sliceSums(rng, sizes, (i, g) => { if (i === bad) attacks[kind]!(g); }))), `${kind} at ${sizes[bad]} images`).toEqual([bad]);
      }
    }
  });

  it('an empty slice that sends nothing is no suspect, one that sends something is; so is a sketch with a NaN; two members judge nobody', () => {
    const rng = makeRng(7);
    const seed = sketchSeed(CHECKSUM);
    const grads = sliceSums(rng, [8, 8, 8, 8]);
    const part = (g: Float32Array, images: number) => ({ sketch: sketch(g, seed), images });
    const honest = grads.map((g) => part(g, 8));
    expect(suspects([...honest, part(new Float32Array(4000), 0)])).toEqual([]);
    expect(suspects([...honest, part(grads[0]!.map((x) => x / 8), 0)])).toEqual([4]);
    const nan = grads[1]!.slice();
    nan[7] = NaN;
    expect(suspects([honest[0]!, part(nan, 8), honest[2]!, honest[3]!])).toEqual([1]);
    expect(suspects([honest[0]!, part(grads[1]!.map((x) => 50 * x), 8)])).toEqual([]);
  });

  it('a suspect is audited in the next step at fraction ~0, then in about half of the WATCH_STEPS after, then no more', () => {
    let watched = 0;
    const trials = 120;
    for (let t = 0; t < trials; t++) {
      const book = new AuditBook(1e-9, 'f32', undefined, { suspects: true, newcomers: false });
      const rng = makeRng(100 + t);
      expect(book.plan(0, ring, slices(8), 0).some((p) => p.audit)).toBe(false);
      expect(book.verdict(0, results(ring, 0, slices32(rng, 8, flip(5))))).toEqual({ kind: 'ok', audited: [] });
      const next = book.plan(1, ring, slices(8), 0);
      expect(next.filter((p) => p.audit).map((p) => p.audit!.peer)).toEqual(['p5']);
      // An honest step in between (the cheater behaves): it stays watched for WATCH_STEPS more, audited with chance 1/2.
      for (let s = 2; s <= 1 + WATCH_STEPS; s++) {
        expect(book.verdict(s - 1, results(ring, s - 1, slices32(rng, 8))).kind).toBe('ok');
        const audits = book.plan(s, ring, slices(8), 0).filter((p) => p.audit).map((p) => p.audit!.peer);
        expect(audits.every((id) => id === 'p5')).toBe(true);
        watched += audits.length;
      }
      expect(book.plan(2 + WATCH_STEPS, ring, slices(8), 0).some((p) => p.audit)).toBe(false);
    }
    expect(watched / (trials * WATCH_STEPS)).toBeGreaterThan(0.4);
    expect(watched / (trials * WATCH_STEPS)).toBeLessThan(0.6);
  });

  it('a chance far below one in a million is not rounded up to it: a draw at 1e-7 of its range audits nobody at F = 1e-9', () => {
    // The draw as a uniform u scaled to the range asked for: u = 1e-7 is over the chance, whatever the resolution.
    const at = (u: number) => new AuditBook(1e-9, 'f32', (n) => Math.floor(u * n), false).plan(0, ring, slices(8), 0).filter((p) => p.audit).length;
    expect(at(1e-7)).toBe(0);
    expect(at(0)).toBe(ring.length);
  });

  it('a directed audit counts in the tally; with directed audits off a suspect is not audited; a member that left is forgotten', () => {
    const rng = makeRng(9);
    const book = new AuditBook(1e-9, 'f32', undefined, { suspects: true, newcomers: false });
    book.plan(0, ring, slices(8), 0);
    book.verdict(0, results(ring, 0, slices32(rng, 8, flip(2))));
    const plan = book.plan(1, ring, slices(8), 0);
    const auditor = plan.findIndex((p) => p.audit?.peer === 'p2');
    const rs = results(ring, 1, slices32(rng, 8));
    rs[auditor] = { ...rs[auditor]!, audit: { peer: 'p2', ...rs[2]!.sketch! } };
    expect(book.verdict(1, rs)).toEqual({ kind: 'ok', audited: ['p2'] });
    expect(book.tally.directed).toBe(1);
    expect(book.tally.audits).toBe(1);
    book.forget(['p2']);
    for (let s = 2; s < 8; s++) expect(book.plan(s, ring, slices(8), 0).some((p) => p.audit)).toBe(false);

    const off = new AuditBook(1e-9, 'f32', undefined, false);
    expect(off.plan(0, ring, slices(8), 0).some((p) => p.audit), 'no probation either').toBe(false);
    off.verdict(0, results(ring, 0, slices32(rng, 8, flip(2))));
    expect(off.plan(1, ring, slices(8), 0).some((p) => p.audit)).toBe(false);
  });

  it('a newcomer is audited in its first verified step for certain, again until a step with its audit commits, then left to the draw', () => {
    const rng = makeRng(31);
    const book = new AuditBook(1e-9, 'f32');
    const audited = (plan: ReturnType<AuditBook['plan']>) => plan.filter((p) => p.audit).map((p) => p.audit!.peer).sort();
    // The first ring: every member is new, each audited by another.
    const first = book.plan(0, ring, slices(8), 0);
    expect(audited(first)).toEqual([...ring].sort());
    // That attempt did not commit (a member failed): the re-run audits them all again.
    expect(audited(book.plan(0, ring, slices(8), 0))).toEqual([...ring].sort());
    const rs = results(ring, 0, slices32(rng, 8));
    const plan = book.plan(0, ring, slices(8), 0);
    plan.forEach((p, auditor) => {
      const target = ring.indexOf(p.audit!.peer);
      rs[auditor] = { ...rs[auditor]!, audit: { peer: p.audit!.peer, ...rs[target]!.sketch! } };
    });
    const v = book.verdict(0, rs);
    expect(v.kind === 'ok' ? [...v.audited].sort() : v).toEqual([...ring].sort());
    expect(book.tally.directed).toBe(8);
    expect(book.plan(1, ring, slices(8), 0).some((p) => p.audit), 'every member has passed its probation').toBe(false);
    // A joiner: its first step audited (by a member of the ring), nobody else; a ring of 2 audits nobody, so probation waits.
    const joined = [...ring, 'p8'];
    expect(audited(book.plan(2, joined, slices(9), 0))).toEqual(['p8']);
    const pair = new AuditBook(1e-9, 'f32');
    expect(pair.plan(0, ['a', 'b'], slices(2), 0).some((p) => p.audit)).toBe(false);
    expect(audited(pair.plan(1, ['a', 'b', 'c'], slices(3), 0))).toEqual(['a', 'b', 'c']);
  });
});

describe('audits before the sum check', () => {
  it('a consistent cheater that also trips the sum check (50x) is convicted by two audits, not a halted job', () => {
    const ring = ['p0', 'p1', 'p2', 'p3'];
    const rng = makeRng(21);
    // The draw fixed at 0: every member drawn (at random, the draw aims a little under F = 1, and p2 went unaudited in 5% of runs).
    const book = new AuditBook(1, 'f32', () => 0, false);
    const seed = sketchSeed(CHECKSUM);
    /** An attempt: p2 sends and reports 50x its gradient; the ring's sum is off by p2's rounding (forced here); each auditor's recomputation is honest. */
    const attempt = (members: readonly string[], plan: ReturnType<AuditBook['plan']>): StepResult[] => {
      const honest = slices32(rng, members.length);
      const sent = honest.map((g, i) => (members[i] === 'p2' ? g.map((x) => 50 * x) : g));
      const rs = results(members, 0, sent);
      const total = rs[0]!.total!;
      const off = members.includes('p2') ? { ...total, sums: total.sums.map((v, b) => (b === 3 ? v + 1e3 : v)) } : total;
      return rs.map((r, i) => {
        const task = plan[i]!.audit;
        const target = task ? members.indexOf(task.peer) : -1;
        return { ...r, total: off, ...(task ? { audit: { peer: task.peer, ...report(sketch(honest[target]!, task.seed ?? seed)) } } : {}) };
      });
    };
    const first = book.verdict(0, attempt(ring, book.plan(0, ring, slices(4), 0)));
    expect(first.kind, JSON.stringify(first)).toBe('again');
    expect((first as { reason: string }).reason).toMatch(/recomputation of p2's slice disagrees/);
    const second = book.verdict(0, attempt(ring, book.plan(0, ring, slices(4), 0)));
    expect(second).toMatchObject({ kind: 'evict', ids: ['p2'] });
    const rest = ['p0', 'p1', 'p3'];
    book.forget(['p2']);
    expect(book.verdict(0, attempt(rest, book.plan(0, rest, slices(3), 0))).kind).toBe('ok');
  });
});

describe('audits of members that compute in micro-batches', () => {
  it('judge a cheater that cuts its slice (it said so at its join); a result cut otherwise than planned is not judged', () => {
    const ring = ['p0', 'p1', 'p2', 'p3'];
    const rng = makeRng(23);
    const seed = sketchSeed(CHECKSUM);
    // p2 said at its join it computes 2 images at once, and its slices hold 32: it cuts them, and sends its gradient sign-flipped.
    const members = [{}, {}, { microBatch: 2 }, {}];
    const attempt = (book: AuditBook, cut: number | undefined): { verdict: ReturnType<AuditBook['verdict']>; task: number | undefined } => {
      const plan = book.plan(0, ring, slices(4).map(() => Array.from({ length: 32 }, (_, j) => j)), 0, members);
      const honest = slices32(rng, 4);
      const rs = results(ring, 0, honest.map((g, i) => (i === 2 ? g.map((x) => -x) : g))).map((r, i) => {
        const task = plan[i]!.audit;
        const audit = task ? { audit: { peer: task.peer, ...report(sketch(honest[ring.indexOf(task.peer)]!, task.seed ?? seed)) } } : {};
        return { ...r, ...(i === 2 && cut !== undefined ? { microBatch: cut } : {}), ...audit };
      });
      return { verdict: book.verdict(0, rs), task: plan.find((p) => p.audit?.peer === 'p2')?.audit?.microBatch };
    };
    const judged = attempt(new AuditBook(1, 'f32', () => 0, false), 2);
    expect(judged.task).toBe(2);
    expect(judged.verdict.kind, JSON.stringify(judged.verdict)).toBe('again');
    expect((judged.verdict as { reason: string }).reason).toMatch(/recomputation of p2's slice disagrees/);
    // Cut into 4s where the audit recomputed 2s: the two differ for a reason other than cheating (the driver evicts such a result).
    const other = attempt(new AuditBook(1, 'f32', () => 0, false), 4);
    expect(other.verdict.kind, JSON.stringify(other.verdict)).toBe('ok');
  });
});

describe('disputes are settled by a majority of auditors', () => {
  it('hears 5 auditors where the ring has them, else an odd number of the others (2 in a ring of 3)', () => {
    expect([3, 4, 5, 6, 7, 8, 16].map(disputePanel)).toEqual([2, 3, 3, 5, 5, 5, 5]);
  });

  /**
   * Attempts of one step over `ring` until a verdict other than "again": every member's slice gradient fixed (the
   * step's weights do not change between attempts); `cheat` members send and report it sign-flipped; `colluders`
   * vouch for each other's reports, and with `accuse` flip their recomputations of everyone else's slices.
   */
  function settle(ring: readonly string[], cheat: ReadonlySet<string>, colluders: ReadonlySet<string>, seedRng: number, accuse = false) {
    const rng = makeRng(seedRng);
    // Seeded draws: with crypto's, the vouching test's 40 settlements heard the colluder 12 times or fewer (or let the
    // cheater escape 15 times or more) in about 1 run of 200 (400 runs simulated; a clean-clone suite failed so).
    const book = new AuditBook(1, 'f32', (n) => rng.int(n), false);
    const seed = sketchSeed(CHECKSUM);
    const honest = slices32(rng, ring.length);
    const sent = honest.map((g, i) => (cheat.has(ring[i]!) ? g.map((x) => -x) : g));
    for (let attempt = 0; attempt < 6; attempt++) {
      const plan = book.plan(0, ring, slices(ring.length), 0);
      const rs = results(ring, 0, sent).map((r, i) => {
        const task = plan[i]!.audit;
        if (!task) return r;
        const t = ring.indexOf(task.peer);
        const lies = accuse && colluders.has(ring[i]!) && !colluders.has(task.peer);
        const vouches = colluders.has(ring[i]!) && colluders.has(task.peer);
        const g = vouches ? sent[t]! : lies ? honest[t]!.map((x) => -x) : honest[t]!;
        return { ...r, audit: { peer: task.peer, ...report(sketch(g, task.seed ?? seed)) } };
      });
      const v = book.verdict(0, rs);
      if (v.kind !== 'again') return v;
    }
    throw new Error('no verdict in 6 attempts');
  }

  it('a cheater and a colluder that vouches for it: the cheater is convicted, and the colluder whenever it was heard; never an honest member', () => {
    const ring = Array.from({ length: 8 }, (_, i) => `p${i}`);
    let vouchersCaught = 0;
    let escaped = 0;
    for (let t = 0; t < 40; t++) {
      const v = settle(ring, new Set(['p2']), new Set(['p2', 'p5']), 300 + t);
      // Its one auditor was its colluder (1 in 7): the step passes, the cheat with it (the limit of one audit per slice).
      if (v.kind === 'ok') {
        escaped++;
        continue;
      }
      expect(v.kind).toBe('evict');
      const ids = (v as { ids: string[] }).ids;
      expect(ids[0]).toBe('p2');
      expect(ids.every((id) => id === 'p2' || id === 'p5'), ids.join()).toBe(true);
      if (ids.includes('p5')) vouchersCaught++;
    }
    expect(escaped).toBeLessThan(15);
    // p5 is heard when drawn among the 4 more auditors (4 of the 6 others).
    expect(vouchersCaught).toBeGreaterThan(12);
  });

  it('two colluders that accuse an honest member are convicted themselves (a ring of 8); in a ring of 4 one colluder cannot frame either', () => {
    const ring = Array.from({ length: 8 }, (_, i) => `p${i}`);
    for (let t = 0; t < 40; t++) {
      const v = settle(ring, new Set(), new Set(['p5', 'p6']), 500 + t, true);
      if (v.kind === 'ok') continue; // no colluder drawn as anyone's auditor: nothing happened
      expect(v.kind).toBe('evict');
      const ids = (v as { ids: string[] }).ids;
      expect(ids.length).toBeGreaterThan(0);
      expect(ids.every((id) => id === 'p5' || id === 'p6'), ids.join()).toBe(true);
    }
    const four = ['a', 'b', 'c', 'd'];
    for (let t = 0; t < 20; t++) {
      const v = settle(four, new Set(), new Set(['d']), 700 + t, true);
      if (v.kind === 'evict') expect((v as { ids: string[] }).ids).toEqual(['d']);
    }
  });
});
