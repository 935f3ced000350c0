import { WasmEngine } from './src/wasm/engine.ts';
import { parseStepModels } from './bench/step-models.ts';
import { wasmStepper } from './bench/wasm-step.ts';
import { median } from './bench/timing.ts';
const [list, thr, rounds] = [process.argv[2]!, Number(process.argv[3]), Number(process.argv[4])];
const g = globalThis as any;
for (const m of parseStepModels(list)) {
  const n = m.batch * m.spec.input.reduce((a: number, b: number) => a * b, 1);
  const x = Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37));
  const labels = Int32Array.from({ length: m.batch }, (_, i) => i % 10);
  const ea = await WasmEngine.create({ threads: thr }), eb = await WasmEngine.create({ threads: thr });
  const sa = await wasmStepper(ea, m.spec, x, labels, m.batch), sb = await wasmStepper(eb, m.spec, x, labels, m.batch);
  const ta: number[] = [], tb: number[] = [];
  for (let r = 0; r < rounds + 2; r++) {
    g.F4FG = true; const a = await sa.step();
    g.F4FG = false; const b = await sb.step();
    if (r < 3) console.log('loss', a.loss, b.loss);
    if (r >= 2) { ta.push(a.ms); tb.push(b.ms); }
  }
  console.log(m.name, m.side, m.batch, thr, 'new', median(ta).toFixed(1), 'old', median(tb).toFixed(1), 'speedup', (median(tb) / median(ta)).toFixed(3));
  sa.destroy(); sb.destroy(); ea.destroy(); eb.destroy();
}
