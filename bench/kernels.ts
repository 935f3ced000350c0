// `npm run bench -- kernels`: our GEMM and conv2d kernels against TF.js's WebGPU backend on the
// SAME device in the same run. Medians after warm-up; every result is checked against the
// other implementation before it is timed. Writes bench/results/kernels.json and kernels.svg;
// the last line is {"bench":"kernels","ours_gflops":..,"peer_gflops":..,"ratio":..}
// (geometric means over the shapes). `--quick` runs a reduced set (smaller batches); `--gpu` the
// set for a real GPU (GEMM 4096^3, batch 32 convolutions: hours on llvmpipe); `--list` prints
// the chosen set's shapes as JSON and exits (the PyTorch anchor of scripts/device/gpu.sh times
// the same shapes from it); `--only=REGEX` keeps the cases whose name matches. kernels.json is
// written again after every case (`complete: false` until the last), so a run cut off by a time
// limit keeps the figures it has.
import { getDevice } from '../src/gpu/device.ts';
import type { Gpu } from '../src/gpu/runtime.ts';
import type { Tensor } from '../src/gpu/tensor.ts';
import { gemm } from '../src/ops/gemm.ts';
import { gemm as refGemm } from '../src/ref/gemm.ts';
import { autotuneGemm } from '../src/ops/gemm-tune.ts';
import { conv2dBackwardFilter, conv2dBackwardInput, conv2dForward, conv2dShape } from '../src/ops/conv2d.ts';
import { makeRng, uniformF32 } from '../src/rng.ts';
import { barChartSvg, writeFileEnsuringDir } from './plot.ts';
import { tf, tfjsOnDevice } from './tfjs-webgpu.ts';
import { geomean, timeGpu } from './timing.ts';

interface CaseResult {
  name: string; gflop: number; oursMs: number; peerMs: number | null; oursGflops: number; peerGflops: number | null; maxRelDiff: number; peerNote?: string;
}

/** What a case computes, for anchors outside this process (bench/gpu/torch_anchor.py). */
export type CaseDef =
  | { kind: 'gemm'; M: number; N: number; K: number; transB: boolean }
  | { kind: 'conv'; pass: ConvPass; n: number; cin: number; h: number; cout: number; k: number; stride: number; pad: number };

interface BenchCase {
  name: string;
  gflop: number;
  def: CaseDef;
  /** Sets up both sides; returns the recorders and a check that compares the outputs. */
  setup(gpu: Gpu): Promise<{ ours(): void; peer(): void; compare(): Promise<number>; dispose(): void; peerNote?: string }>;
}

const NCHW_TO_NHWC = [0, 2, 3, 1];
const NHWC_TO_NCHW = [0, 3, 1, 2];
const OIHW_TO_HWIO = [2, 3, 1, 0];

/** max |a-b| / max |b|: a scale-aware difference for whole outputs. */
function relDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let d = 0, m = 1e-30;
  for (let i = 0; i < a.length; i++) {
    d = Math.max(d, Math.abs(a[i]! - b[i]!));
    m = Math.max(m, Math.abs(b[i]!));
  }
  // An all-zero reference means the peer computed nothing: never call that a match.
  return a.length === b.length && m > 1e-30 ? d / m : Infinity;
}

function gemmCase(name: string, M: number, N: number, K: number, transB = false): BenchCase {
  return {
    name, gflop: (2 * M * N * K) / 1e9, def: { kind: 'gemm', M, N, K, transB },
    async setup(gpu) {
      const rng = makeRng(M + N + K);
      const a = uniformF32(rng, M * K), b = uniformF32(rng, K * N);
      const bShape = transB ? [N, K] : [K, N];
      const ta = gpu.upload(a, [M, K]), tb = gpu.upload(b, bShape), tc = gpu.empty([M, N]);
      // TF.js binds whole buffers: past the device's binding limit it cannot run this shape
      // (AlexNet fc6's 151 MB weight on llvmpipe's 128 MiB limit). Then ours is checked
      // against a float64 CPU product and only ours is timed.
      if (K * N * 4 > gpu.limits.maxStorageBufferBindingSize) {
        return {
          peerNote: `TF.js cannot bind a ${(K * N * 4 / 2 ** 20).toFixed(0)} MiB weight (device limit ${gpu.limits.maxStorageBufferBindingSize / 2 ** 20} MiB)`,
          ours: () => gemm(gpu, ta, tb, tc, { transB }),
          peer: () => undefined,
          async compare() {
            gemm(gpu, ta, tb, tc, { transB });
            return relDiff(await gpu.readF32(tc), refGemm(a, b, null, { M, N, K, transB }));
          },
          dispose: () => gpu.release(ta, tb, tc),
        };
      }
      const xa = tf.tensor2d(a, [M, K]), xb = tf.tensor2d(b, bShape as [number, number]);
      let out: ReturnType<typeof tf.matMul> | null = null;
      return {
        ours: () => gemm(gpu, ta, tb, tc, { transB }),
        peer: () => { out?.dispose(); out = tf.matMul(xa, xb, false, transB); },
        async compare() {
          gemm(gpu, ta, tb, tc, { transB });
          out?.dispose();
          out = tf.matMul(xa, xb, false, transB);
          return relDiff(await gpu.readF32(tc), await out.data());
        },
        dispose: () => { gpu.release(ta, tb, tc); tf.dispose([xa, xb]); out?.dispose(); },
      };
    },
  };
}

type ConvPass = 'fwd' | 'bwd-input' | 'bwd-filter';

function convCase(label: string, pass: ConvPass, n: number, cin: number, h: number, cout: number, k: number, s: number, p: number): BenchCase {
  const params = { stride: s, pad: p };
  const oshape = conv2dShape([n, cin, h, h], [cout, cin, k, k], params);
  const oh = oshape[2]!, ow = oshape[3]!;
  return {
    name: `${label} ${pass}`,
    gflop: (2 * n * cout * oh * ow * cin * k * k) / 1e9,
    def: { kind: 'conv', pass, n, cin, h, cout, k, stride: s, pad: p },
    async setup(gpu) {
      const rng = makeRng(cin * 1000 + cout + h);
      const x = uniformF32(rng, n * cin * h * h), w = uniformF32(rng, cout * cin * k * k, -0.1, 0.1), dy = uniformF32(rng, n * cout * oh * ow);
      const tx = gpu.upload(x, [n, cin, h, h]), tw = gpu.upload(w, [cout, cin, k, k]), tdy = gpu.upload(dy, [n, cout, oh, ow]);
      const out: Tensor = pass === 'fwd' ? gpu.empty([n, cout, oh, ow]) : pass === 'bwd-input' ? gpu.empty([n, cin, h, h]) : gpu.empty([cout, cin, k, k]);
      const X = tf.transpose(tf.tensor4d(x, [n, cin, h, h]), NCHW_TO_NHWC) as tf.Tensor4D;
      const W = tf.transpose(tf.tensor4d(w, [cout, cin, k, k]), OIHW_TO_HWIO) as tf.Tensor4D;
      const DY = tf.transpose(tf.tensor4d(dy, [n, cout, oh, ow]), NCHW_TO_NHWC) as tf.Tensor4D;
      const pad: [[number, number], [number, number], [number, number], [number, number]] = [[0, 0], [p, p], [p, p], [0, 0]];
      let res: tf.Tensor | null = null;
      const ours = () => {
        if (pass === 'fwd') conv2dForward(gpu, tx, tw, out, params);
        else if (pass === 'bwd-input') conv2dBackwardInput(gpu, tdy, tw, out, params);
        else conv2dBackwardFilter(gpu, tx, tdy, out, params);
      };
      const peer = () => {
        res?.dispose();
        if (pass === 'fwd') res = tf.conv2d(X, W, s, pad);
        else if (pass === 'bwd-input') res = tf.conv2dTranspose(DY, W, [n, h, h, cin], s, pad);
        else res = tf.engine().runKernel('Conv2DBackpropFilter', { x: X, dy: DY }, {
          strides: [s, s], pad, dataFormat: 'NHWC', filterShape: [k, k, cin, cout],
        }) as tf.Tensor;
      };
      return {
        ours, peer,
        async compare() {
          ours();
          peer();
          const back = pass === 'bwd-filter' ? tf.transpose(res!, [3, 2, 0, 1]) : tf.transpose(res!, NHWC_TO_NCHW);
          const d = relDiff(await gpu.readF32(out), await back.data());
          back.dispose();
          return d;
        },
        dispose: () => { gpu.release(tx, tw, tdy, out); tf.dispose([X, W, DY]); res?.dispose(); },
      };
    },
  };
}

type SetName = 'quick' | 'default' | 'gpu';

function cases(set: SetName): BenchCase[] {
  const nb = set === 'quick' ? 1 : set === 'gpu' ? 32 : 4;
  const list: BenchCase[] = [
    gemmCase('gemm 512', 512, 512, 512),
    gemmCase('gemm 1024', 1024, 1024, 1024),
    ...(set === 'gpu' ? [gemmCase('gemm 4096', 4096, 4096, 4096)] : []),
    gemmCase(`alexnet fc6 (b${set === 'quick' ? 8 : set === 'gpu' ? 256 : 32})`, set === 'quick' ? 8 : set === 'gpu' ? 256 : 32, 4096, 9216, true),
    gemmCase(`resnet 3x3 as gemm (b${nb})`, nb * 56 * 56, 64, 576),
  ];
  const convs: [string, number, number, number, number, number, number][] = [
    ['resnet 3x3 64->64 56x56', 64, 56, 64, 3, 1, 1],
    ['resnet 1x1 s2 64->128', 64, 56, 128, 1, 2, 0],
    ['alexnet conv2 5x5 96->256 27x27', 96, 27, 256, 5, 1, 2],
    ['alexnet conv1 11x11 s4', 3, 224, 96, 11, 4, 2],
  ];
  for (const [label, cin, h, cout, k, s, p] of convs) {
    for (const pass of ['fwd', 'bwd-input', 'bwd-filter'] as ConvPass[]) {
      if (label.includes('conv1') && pass === 'bwd-input') continue; // the first layer needs no dx
      list.push(convCase(`${label} b${nb}`, pass, nb, cin, h, cout, k, s, p));
    }
  }
  return list;
}

/** Geometric means over the shapes both sides ran. */
function summarise(results: CaseResult[]): Record<string, string | number | null> {
  const both = results.filter((r) => r.peerGflops !== null);
  return {
    bench: 'kernels',
    ours_gflops: +geomean(both.map((r) => r.oursGflops)).toFixed(3),
    peer_gflops: +geomean(both.map((r) => r.peerGflops!)).toFixed(3),
    ratio: +geomean(both.map((r) => r.oursGflops / r.peerGflops!)).toFixed(3),
    shapes: both.length,
    ours_only: results.length - both.length,
    ...gemm4096(results),
  };
}

/** The headline GEMM of a `--gpu` run (its share of the GPU's peak is for the report to say). */
function gemm4096(results: CaseResult[]): Record<string, number | null> {
  const r = results.find((x) => x.name === 'gemm 4096');
  if (!r) return {};
  return { gemm_4096_gflops: +r.oursGflops.toFixed(1), gemm_4096_vs_tfjs: r.peerGflops === null ? null : +(r.oursGflops / r.peerGflops).toFixed(3) };
}

/** The cases of `set` whose name matches `--only=REGEX` (all without it); none matching is an error that names them. */
export function chosenCases(set: SetName, args: readonly string[]): BenchCase[] {
  const all = cases(set);
  const only = args.find((a) => a.startsWith('--only='))?.slice('--only='.length);
  if (only === undefined) return all;
  let re: RegExp;
  try {
    re = new RegExp(only);
  } catch (e) {
    throw new Error(`--only must be a regular expression over case names; "${only}": ${(e as Error).message}`);
  }
  const kept = all.filter((c) => re.test(c.name));
  if (!kept.length) throw new Error(`--only=${only} matches no case of the ${set} set; its cases: ${all.map((c) => c.name).join('; ')}`);
  return kept;
}

export async function main(args: string[]): Promise<void> {
  const set: SetName = args.includes('--gpu') ? 'gpu' : args.includes('--quick') ? 'quick' : 'default';
  const chosen = chosenCases(set, args);
  if (args.includes('--list')) {
    console.log(JSON.stringify(chosen.map((c) => ({ name: c.name, gflop: c.gflop, ...c.def }))));
    return;
  }
  const gpu = await getDevice();
  const tune = await autotuneGemm(gpu);
  const tfjs = await tfjsOnDevice(gpu);
  console.error(`device: ${gpu.info.description}; gemm variant ${tune.config.entry} ${JSON.stringify(tune.config.constants)}`);
  const results: CaseResult[] = [];
  const peer = 'tfjs-backend-webgpu (same device)';
  const write = (complete: boolean) => {
    const summary = summarise(results);
    writeFileEnsuringDir('bench/results/kernels.json', JSON.stringify({ device: gpu.info, gemm: tune, peer, set, complete, results, summary }, null, 2));
    return summary;
  };
  for (const c of chosen) {
    const s = await c.setup(gpu);
    const diff = await s.compare();
    if (!(diff < 1e-3)) throw new Error(`${c.name}: ours and TF.js disagree (max relative difference ${diff}); not timing a wrong result`);
    const oursMs = await timeGpu(s.ours, () => gpu.sync());
    const peerMs = s.peerNote ? null : await timeGpu(s.peer, () => tfjs.sync());
    s.dispose();
    const r: CaseResult = {
      name: c.name, gflop: c.gflop, oursMs, peerMs, oursGflops: c.gflop / (oursMs / 1e3),
      peerGflops: peerMs === null ? null : c.gflop / (peerMs / 1e3), maxRelDiff: diff, ...(s.peerNote ? { peerNote: s.peerNote } : {}),
    };
    results.push(r);
    const peerText = r.peerGflops === null
      ? `tfjs     n/a (${s.peerNote})`
      : `tfjs ${r.peerGflops.toFixed(2).padStart(7)}  x${(r.oursGflops / r.peerGflops).toFixed(2)}`;
    console.error(`${c.name.padEnd(44)} ours ${r.oursGflops.toFixed(2).padStart(7)} GFLOP/s  ${peerText}  (diff ${diff.toExponential(1)})`);
    write(false);
  }
  const summary = write(true);
  writeFileEnsuringDir('bench/results/kernels.svg', barChartSvg({
    title: `Kernels on ${gpu.info.description.slice(0, 60)}: ours vs TF.js WebGPU`,
    yLabel: 'GFLOP/s (median)',
    categories: results.map((r) => r.name),
    series: [{ name: 'ours', values: results.map((r) => r.oursGflops) }, { name: 'TF.js WebGPU', values: results.map((r) => r.peerGflops ?? NaN) }],
  }));
  console.log(JSON.stringify(summary));
}
