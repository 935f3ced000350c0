// Child process of test/wasm/threads.test.ts: a 2-thread engine runs a GEMM and is destroyed;
// the process must then exit by itself (no worker left running). Prints 'ok <description>'.
import { WasmEngine } from '../../src/wasm/engine.ts';

const e = await WasmEngine.create({ threads: 2 });
const n = 96;
const a = e.upload(new Float32Array(n * n).fill(1), [n, n]);
const c = e.empty([n, n]);
e.gemm(a, a, c);
const r = await e.readF32(c);
if (r[0] !== n) throw new Error(`gemm gave ${r[0]}, expected ${n}`);
e.destroy();
console.log(`ok ${e.info.description}`);
