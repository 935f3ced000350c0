import type { Engine, TensorLike } from '../../src/backend/engine.ts';
import * as ref from '../../src/ref/softmax_xent.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';
import { assertClose, FWD, GRAD } from '../helpers/compare.ts';
import type { OpCase, OpSuite } from './suite.ts';

interface Case {
  name: string;
  n: number;
  k: number;
  gradScale: number;
  /** Label smoothing (default 0). */
  smoothing?: number;
  /** Changes the random logits/labels (stability and edge cases). */
  edit?: (logits: Float32Array, labels: Int32Array) => void;
}

async function check<T extends TensorLike>(e: Engine<T>, c: Case): Promise<void> {
  const { n, k } = c;
  const rng = makeRng(n * 1009 + k);
  const logits = uniformF32(rng, n * k, -3, 3);
  // Labels at both ends of [0, K) first, then random.
  const labels = Int32Array.from({ length: n }, (_, i) => (i === 0 ? 0 : i === 1 ? k - 1 : rng.int(k)));
  c.edit?.(logits, labels);
  const tl = e.upload(logits, [n, k]), tlab = e.upload(labels, [n]);
  const td = e.empty([n, k]), tloss = e.empty([n]), ttot = e.empty([1]);
  const eps = c.smoothing ?? 0;
  e.softmaxXent(tl, tlab, td, tloss, ttot, { gradScale: c.gradScale, smoothing: eps });
  const l64 = Float64Array.from(logits);
  const losses = ref.softmaxXentForward(l64, labels, [n, k], eps);
  assertClose(await e.readF32(tloss), losses, FWD, 'losses');
  // The total is a sum of n losses: its rounding grows with n, so the atol does too.
  assertClose(await e.readF32(ttot), [losses.reduce((a, v) => a + v, 0)], { rtol: FWD.rtol, atol: FWD.atol * n }, 'total');
  assertClose(await e.readF32(td), ref.softmaxXentBackward(l64, labels, [n, k], c.gradScale, eps), GRAD, 'dlogits');
  e.release(tl, tlab, td, tloss, ttot);
}

const cases: Case[] = [
  { name: 'N=1, K=1 (loss 0, gradient 0)', n: 1, k: 1, gradScale: 1 },
  { name: 'N=1, K=10', n: 1, k: 10, gradScale: 1 },
  { name: 'odd [7, 13], mean (1/N)', n: 7, k: 13, gradScale: 1 / 7 },
  { name: 'CIFAR head [32, 10], sum', n: 32, k: 10, gradScale: 1 },
  { name: 'ImageNet head [5, 1000], mean', n: 5, k: 1000, gradScale: 1 / 5 },
  { name: 'K=257 (one more than the workgroup)', n: 3, k: 257, gradScale: 0.5 },
  {
    name: 'logits of 1e4 magnitude [4, 1000]',
    n: 4,
    k: 1000,
    gradScale: 1,
    edit(l, lab) {
      l[0 * 1000 + lab[0]!] = 1e4; // the label dominates: loss ~ 0
      l[1 * 1000 + lab[1]!] = -1e4; // the label is hopeless: loss ~ 1e4
      for (let j = 0; j < 1000; j++) l[2 * 1000 + j]! += 1e4; // a large common offset
      l[3 * 1000 + 17] = 1e4; // one other class dominates
      l[3 * 1000 + 18] = -1e4;
    },
  },
  {
    name: 'labels out of range (-1, K) give NaN loss and total, zero gradient rows',
    n: 4,
    k: 10,
    gradScale: 1,
    edit(_, lab) {
      lab[1] = -1;
      lab[2] = 10;
    },
  },
  { name: 'label smoothing 0.1, CIFAR head [32, 10], sum', n: 32, k: 10, gradScale: 1, smoothing: 0.1 },
  { name: 'label smoothing 0.3, odd [5, 257], mean', n: 5, k: 257, gradScale: 1 / 5, smoothing: 0.3 },
  {
    name: 'label smoothing 0.1 with logits of 1e4 magnitude [3, 1000]',
    n: 3,
    k: 1000,
    gradScale: 1,
    smoothing: 0.1,
    edit(l, lab) {
      l[0 * 1000 + lab[0]!] = 1e4;
      for (let j = 0; j < 1000; j++) l[1 * 1000 + j]! += 1e4;
      l[2 * 1000 + 5] = -1e4;
    },
  },
];

export const suite: OpSuite = {
  op: 'softmax_xent',
  cases: [
    ...cases.map((c): OpCase => ({ name: c.name, run: (e) => check(e, c) })),
    {
      name: 'smoothing 0 is plain cross-entropy bit for bit; a smoothing outside [0, 1) is refused',
      async run<T extends TensorLike>(e: Engine<T>) {
        const rng = makeRng(9);
        const tl = e.upload(uniformF32(rng, 60, -4, 4), [6, 10]), tlab = e.upload(Int32Array.from({ length: 6 }, () => rng.int(10)));
        const td = e.empty([6, 10]), tloss = e.empty([6]), ttot = e.empty([1]);
        const runWith = async (p: { gradScale: number; smoothing?: number }): Promise<number[]> => {
          e.softmaxXent(tl, tlab, td, tloss, ttot, p);
          return [...(await e.readF32(tloss)), ...(await e.readF32(td))];
        };
        const plain = await runWith({ gradScale: 0.25 });
        const zero = await runWith({ gradScale: 0.25, smoothing: 0 });
        const i = plain.findIndex((v, j) => !Object.is(v, zero[j]));
        if (i >= 0) throw new Error(`smoothing 0 differs at [${i}]: ${plain[i]} vs ${zero[i]}`);
        for (const bad of [-0.1, 1, Number.NaN]) {
          let threw = false;
          try {
            e.softmaxXent(tl, tlab, td, tloss, ttot, { gradScale: 1, smoothing: bad });
          } catch (err) { threw = /label smoothing must be in \[0, 1\)/.test(String(err)); }
          if (!threw) throw new Error(`smoothing ${bad} was not refused with a clear message`);
        }
        e.release(tl, tlab, td, tloss, ttot);
      },
    },
    {
      name: 'bitwise the same on every run [16, 1000]',
      async run<T extends TensorLike>(e: Engine<T>) {
        const rng = makeRng(5);
        const tl = e.upload(uniformF32(rng, 16000, -5, 5), [16, 1000]), tlab = e.upload(Int32Array.from({ length: 16 }, () => rng.int(1000)));
        const td = e.empty([16, 1000]), tloss = e.empty([16]), ttot = e.empty([1]);
        const runOnce = async (): Promise<number[]> => {
          e.softmaxXent(tl, tlab, td, tloss, ttot, { gradScale: 1 / 16 });
          return [...(await e.readF32(ttot)), ...(await e.readF32(td))];
        };
        const a = await runOnce(), b = await runOnce();
        const i = a.findIndex((v, j) => !Object.is(v, b[j]));
        if (i >= 0) throw new Error(`run 2 differs at [${i}]: ${a[i]} then ${b[i]}`);
        e.release(tl, tlab, td, tloss, ttot);
      },
    },
  ],
};
