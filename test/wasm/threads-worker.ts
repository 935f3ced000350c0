// Dedicated Worker of test/wasm/threads.html: the default WasmEngine (threads where the page is
// cross-origin isolated, as the volunteer's worker creates it) against a 1-thread engine on a
// GEMM and the three conv2d ops, compared bit for bit; nested Web Workers run the threads.
import { conv2dShape, type Conv2dParams } from '../../src/shapes/conv2d.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';
import { WasmEngine } from '../../src/wasm/engine.ts';
import type { WorkerReport } from './threads-protocol.ts';

const prod = (s: readonly number[]): number => s.reduce((a, b) => a * b, 1);

type Case = {
  name: string; inputs: number[][]; out: number[];
  run: (e: WasmEngine, ins: ReturnType<WasmEngine['upload']>[], out: ReturnType<WasmEngine['upload']>) => void;
};

function cases(): Case[] {
  const x = [3, 8, 21, 19], w = [12, 8, 3, 3], p: Conv2dParams = { stride: 2, pad: 1 };
  const y = conv2dShape(x, w, p);
  return [
    { name: 'gemm 67x45x131', inputs: [[67, 131], [131, 45]], out: [67, 45], run: (e, [a, b], c) => e.gemm(a!, b!, c) },
    { name: 'conv2d forward', inputs: [x, w], out: y, run: (e, [tx, tw], ty) => e.conv2dForward(tx!, tw!, ty, p) },
    { name: 'conv2d backward input', inputs: [y, w], out: x, run: (e, [dy, tw], dx) => e.conv2dBackwardInput(dy!, tw!, dx, p) },
    { name: 'conv2d backward filter', inputs: [x, y], out: w, run: (e, [tx, dy], dw) => e.conv2dBackwardFilter(tx!, dy!, dw, p, { accumulate: true }) },
  ];
}

async function outputs(e: WasmEngine, c: Case): Promise<Uint32Array> {
  const rng = makeRng(5);
  const ins = c.inputs.map((s) => e.upload(uniformF32(rng, prod(s)), s));
  const out = e.upload(uniformF32(rng, prod(c.out)), c.out);
  c.run(e, ins, out);
  const r = await e.readF32(out);
  e.release(...ins, out);
  return new Uint32Array(r.buffer, r.byteOffset, r.length);
}

async function main(): Promise<WorkerReport> {
  const one = await WasmEngine.create({ threads: 1 });
  const many = await WasmEngine.create();
  try {
    const report: WorkerReport = {
      crossOriginIsolated: self.crossOriginIsolated, hardwareConcurrency: navigator.hardwareConcurrency,
      description: many.info.description, threads: many.threads, cases: [],
    };
    for (const c of cases()) {
      const [a, b] = [await outputs(one, c), await outputs(many, c)];
      report.cases.push({ name: c.name, elements: a.length, equal: a.length === b.length && a.every((v, i) => v === b[i]) });
    }
    return report;
  } finally {
    one.destroy();
    many.destroy();
  }
}

main().then(
  (r) => self.postMessage({ report: r }),
  (e: unknown) => self.postMessage({ error: e instanceof Error ? (e.stack ?? e.message) : String(e) }),
);
