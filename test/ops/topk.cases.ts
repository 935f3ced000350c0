import type { Engine, TensorLike } from '../../src/backend/engine.ts';
import * as ref from '../../src/ref/topk.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';
import type { OpCase, OpSuite } from './suite.ts';

interface Case {
  name: string;
  n: number;
  k: number;
  topk: number;
  /** Logits drawn from a few integers, so ties are everywhere. */
  ties?: boolean;
  edit?: (logits: Float32Array, labels: Int32Array) => void;
}

async function check<T extends TensorLike>(e: Engine<T>, c: Case): Promise<void> {
  const { n, k } = c;
  const rng = makeRng(n * 31 + k + c.topk);
  const logits = c.ties ? Float32Array.from({ length: n * k }, () => rng.int(3)) : uniformF32(rng, n * k);
  const labels = Int32Array.from({ length: n }, (_, i) => (i === 0 ? 0 : i === 1 ? k - 1 : rng.int(k)));
  c.edit?.(logits, labels);
  const tl = e.upload(logits, [n, k]), tlab = e.upload(labels), counts = e.empty([2], 'u32');
  const expected = ref.topkCount(Float64Array.from(logits), labels, [n, k], c.topk);
  e.topkCount(tl, tlab, counts, { k: c.topk });
  const got = Array.from(await e.read(counts));
  // Accumulating a second batch (the same one) doubles the counts.
  e.topkCount(tl, tlab, counts, { k: c.topk, accumulate: true });
  const twice = Array.from(await e.read(counts));
  e.release(tl, tlab, counts);
  if (`${got}` !== `${expected}` || `${twice}` !== `${expected.map((v) => 2 * v)}`) {
    throw new Error(`counts [top1, top${c.topk}] = [${got}], then accumulated [${twice}]; expected [${expected}]`);
  }
}

const cases: Case[] = [
  { name: 'N=1, K=1 (always a hit)', n: 1, k: 1, topk: 5 },
  { name: 'k > K [4, 3]', n: 4, k: 3, topk: 5 },
  { name: 'odd [7, 13], top-5', n: 7, k: 13, topk: 5 },
  { name: 'ties everywhere [40, 10], top-3', n: 40, k: 10, topk: 3 },
  { name: 'ties everywhere [33, 7], top-5', n: 33, k: 7, topk: 5 },
  { name: 'ImageNet head [16, 1000], top-5', n: 16, k: 1000, topk: 5 },
  {
    name: 'exact boundaries [3, 1000]: label max, label 5th, label 6th',
    n: 3,
    k: 1000,
    topk: 5,
    edit(l, lab) {
      lab[2] = 500;
      l[0 * 1000 + lab[0]!] = 10; // top-1
      for (let j = 0; j < 4; j++) l[1 * 1000 + j] = 10; // four strictly larger: 5th, a top-5 hit
      l[1 * 1000 + lab[1]!] = 9;
      for (let j = 0; j < 5; j++) l[2 * 1000 + j] = 10; // five strictly larger: 6th, a miss
      l[2 * 1000 + 500] = 9;
    },
  },
  {
    name: 'labels -1 and K and a NaN label logit never count',
    n: 5,
    k: 10,
    topk: 5,
    edit(l, lab) {
      lab[1] = -1;
      lab[2] = 10;
      l[3 * 10 + lab[3]!] = NaN;
    },
  },
];

export const suite: OpSuite = { op: 'topk', cases: cases.map((c): OpCase => ({ name: c.name, run: (e) => check(e, c) })) };
