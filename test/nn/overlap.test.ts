// Staged backward (src/train/overlap.ts) against the single-pass one (recordGradients), on
// every engine: the same gradient bits and loss, bucket by bucket as soon as each is ready;
// and the bucket plan (src/nn/buckets.ts) tiles the buffer at tensor boundaries, tail first.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AnyEngine, Engine, TensorLike } from '../../src/backend/engine.ts';
import { bucketPlan, type GradBucket } from '../../src/nn/buckets.ts';
import type { ModelSpec } from '../../src/nn/graph.ts';
import { layoutOf } from '../../src/nn/layout.ts';
import { Model } from '../../src/nn/model.ts';
import { alexnet, resnet20, resnet50, smallCnn } from '../../src/nn/models.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';
import { stageGradients } from '../../src/train/overlap.ts';
import { recordGradients } from '../../src/train/step.ts';
import { bitwiseEqual } from '../comm/helpers.ts';
import { createEngine } from '../ops/engines.ts';
import { parseBackends } from '../ops/suite.ts';
import { tinyNet } from './tiny-net.ts';

function checkPlan(spec: ModelSpec, bytes: number, lastBytes = 0): GradBucket[] {
  const layout = layoutOf(spec);
  const plan = bucketPlan(layout, bytes, lastBytes);
  // Tail first, contiguous, covering [0, paramFloats).
  expect(plan[0]!.end).toBe(layout.paramFloats);
  expect(plan[plan.length - 1]!.start).toBe(0);
  plan.forEach((b, k) => {
    expect(b.index).toBe(k);
    if (k > 0) expect(b.end).toBe(plan[k - 1]!.start);
    // Whole tensors only; over the size only when one tensor is larger on its own.
    for (const p of b.params) expect(p.offset >= b.start && p.offset + p.length <= b.end).toBe(true);
    if ((b.end - b.start) * 4 > bytes) expect(b.params.length).toBe(1);
    expect(b.node).toBe(Math.min(...b.params.map((p) => p.node)));
    // Ready no earlier than the previous bucket.
    if (k > 0) expect(b.node).toBeLessThanOrEqual(plan[k - 1]!.node);
  });
  expect(plan.flatMap((b) => b.params).length).toBe(layout.params.length);
  return plan;
}

describe('bucketPlan', () => {
  it('cuts ResNet-50 into ~4 MiB buckets at tensor boundaries, tail first', () => {
    const plan = checkPlan(resnet50(), 4 << 20);
    expect(plan.length).toBeGreaterThan(15);
    expect(plan.length).toBeLessThan(40);
  });
  it('gives a tensor larger than the size a bucket of its own (AlexNet fc6)', () => {
    const plan = checkPlan(alexnet(), 4 << 20);
    expect(plan.some((b) => b.params.length === 1 && (b.end - b.start) * 4 > 4 << 20)).toBe(true);
  });
  it('cuts the bucket all-reduced last at lastBytes: ResNet-50 in 25 MiB buckets ends with its first ~1 MiB', () => {
    const spec = resnet50();
    const plain = checkPlan(spec, 25 << 20);
    const cut = checkPlan(spec, 25 << 20, 1 << 20);
    expect(cut.length).toBe(plain.length + 1);
    // The same buckets up to the last, which is split at a tensor boundary under 1 MiB.
    for (let k = 0; k < plain.length - 1; k++) expect([cut[k]!.start, cut[k]!.end, cut[k]!.node]).toEqual([plain[k]!.start, plain[k]!.end, plain[k]!.node]);
    const [rest, front] = [cut[cut.length - 2]!, cut[cut.length - 1]!];
    expect(rest.end).toBe(plain[plain.length - 1]!.end);
    expect(front.end * 4).toBeLessThanOrEqual(1 << 20);
    expect(front.end).toBe(rest.start);
    // The next tensor would not have fitted: the cut is as late as it can be.
    expect((rest.params[0]!.offset + rest.params[0]!.length) * 4).toBeGreaterThan(1 << 20);
    expect(front.node).toBe(1);
    // A cap at or above the bucket size, or under the first tensor: the plain plan.
    const same = (a: GradBucket[], b: GradBucket[]) => expect(a.map((x) => [x.start, x.end])).toEqual(b.map((x) => [x.start, x.end]));
    same(checkPlan(spec, 25 << 20, 25 << 20), plain);
    same(checkPlan(spec, 25 << 20, 4), plain);
    expect(() => bucketPlan(layoutOf(spec), 25 << 20, -1)).toThrow(/last bucket size must be an integer >= 0/);
  });
  it('handles tiny sizes (one tensor per bucket) and one bucket for everything', () => {
    const spec = resnet20();
    const layout = layoutOf(spec);
    expect(checkPlan(spec, 4).length).toBe(layout.params.length);
    expect(checkPlan(spec, 1 << 30).length).toBe(1);
  });
});

/** `reuse`: the staged pass fills an array of old values (NaN, as a reused GradArrays one may hold) instead of a new one. */
async function compare<T extends TensorLike>(e: Engine<T>, spec: ModelSpec, batch: number, bucketBytes: number, reuse = false): Promise<void> {
  const [c, h, w] = spec.input;
  const rng = makeRng(batch + 5);
  const x = uniformF32(rng, batch * c * h * w);
  const labels = Int32Array.from({ length: batch }, (_, i) => (i * 3 + 1) % spec.classes);
  const run = async (staged: boolean): Promise<{ grads: Float32Array; loss: number; order: number[]; state: Float32Array }> => {
    const model = new Model(e, spec, { seed: 5 });
    const tx = e.upload(x, [batch, c, h, w]);
    e.write(model.labelsTensor(batch), labels);
    try {
      if (!staged) {
        const total = recordGradients(model, tx, 99, 0.1);
        e.flush();
        return { grads: await e.readF32(model.grads), loss: (await e.readF32(total))[0]!, order: [], state: await e.readF32(model.state) };
      }
      const buckets = bucketPlan(model.layout, bucketBytes);
      expect(buckets.length).toBeGreaterThan(2);
      const into = reuse ? new Float32Array(model.layout.paramFloats).fill(Number.NaN) : undefined;
      const s = stageGradients(model, tx, { stepSeed: 99, labelSmoothing: 0.1, buckets, ...(into ? { into } : {}) });
      if (into) expect(s.grads).toBe(into);
      const order: number[] = [];
      const snapshots = await Promise.all(buckets.map(async (b, k) => {
        await s.ready(k);
        order.push(k);
        return s.grads.slice(b.start, b.end); // what an all-reduce would send at that moment
      }));
      const r = await s.done;
      // Each bucket held its final bits when it was announced ready.
      buckets.forEach((b, k) => expect(bitwiseEqual(snapshots[k]!, s.grads.subarray(b.start, b.end))).toBe(true));
      return { grads: s.grads, loss: r.lossSum, order, state: await e.readF32(model.state) };
    } finally {
      e.release(tx);
      model.destroy();
    }
  };
  const whole = await run(false);
  const staged = await run(true);
  expect(staged.order).toEqual([...staged.order].sort((a, b) => a - b));
  expect(staged.loss).toBe(whole.loss);
  expect(bitwiseEqual(staged.state, whole.state)).toBe(true);
  const same = bitwiseEqual(staged.grads, whole.grads);
  if (!same) {
    const i = staged.grads.findIndex((v, j) => !Object.is(v, whole.grads[j]));
    throw new Error(`${spec.name} on ${e.info.backend}: staged gradient differs from the single pass at element ${i}: ${staged.grads[i]} vs ${whole.grads[i]}`);
  }
  expect(whole.grads.some((v) => v !== 0)).toBe(true);
}

for (const backend of parseBackends(process.env.VT_OP_BACKENDS)) {
  describe(`staged backward = single pass, bitwise (${backend})`, () => {
    let engine: AnyEngine | undefined;
    beforeAll(async () => { engine = await createEngine(backend); });
    afterAll(() => engine?.destroy());
    const on = (): AnyEngine => {
      if (!engine) throw new Error(`no ${backend} engine`);
      return engine;
    };
    it('tiny net with every layer kind (dropout, BN, residual), one tensor per bucket', () => compare(on(), tinyNet(), 3, 4));
    it('small CNN on 3x16x16, batch 4, 16 KiB buckets', () => compare(on(), smallCnn([3, 16, 16], 10), 4, 16 << 10));
    it('ResNet-20 on 3x16x16, batch 2, 64 KiB buckets', () => compare(on(), resnet20([3, 16, 16], 10), 2, 64 << 10));
    it('into a reused array of old values: every element overwritten, the same bits', () => compare(on(), resnet20([3, 16, 16], 10), 2, 64 << 10, true));
    it('into a reused array: an empty slice gives zeros; an array or plan that would leave old values is refused', async () => {
      const model = new Model(on(), tinyNet(), { seed: 5 });
      try {
        const n = model.layout.paramFloats;
        const buckets = bucketPlan(model.layout, 4);
        const into = new Float32Array(n).fill(7);
        const s = stageGradients(model, null, { stepSeed: 1, buckets, into });
        await s.done;
        expect(into.every((v) => v === 0)).toBe(true);
        const wrong = new Float32Array(n + 1);
        expect(() => stageGradients(model, null, { stepSeed: 1, buckets, into: wrong })).toThrow(/the array to fill has \d+ floats, the gradient/);
        const gap = buckets.slice(1);
        expect(() => stageGradients(model, null, { stepSeed: 1, buckets: gap, into })).toThrow(/expected one from|a reused array would keep old values/);
      } finally {
        model.destroy();
      }
    });
  });
}
