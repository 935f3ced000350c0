// The host optimiser's loops in wasm (wasm/optim.ts): the ONE agreed step of src/optim/host.ts,
// its float64 arithmetic in the same order, so the same bits as the JavaScript loops
// (test/optim/host-wasm.test.ts), about 3x faster (ResNet-50's 25.5M parameters: 146 ms a step,
// the gradient's copy in included, against 419 ms in JavaScript; 9 steps alternating in one
// process). The weights, momentum and gradient live in this instance's own memory (one private
// memory, sized once: it never grows, so the views stay valid); the caller copies the step's
// gradient into `G`.
import { loadKernels, type Kernels } from '../wasm/kernels.ts';
import { OptimError } from './errors.ts';
import { hostOptimizerStep, type StepLoops } from './host.ts';
import type { OptimizerConfig, ParamSegment } from './types.ts';

const PAGE = 65536;
/** Room for the module's static data below its heap (it needs well under a page). */
const STATIC_PAGES = 4;
/** wasm32's 4 GiB. */
const MAX_PAGES = 65536;

export class WasmHostOptimizer {
  /** The weights, momentum and the step's gradient sum: views of this instance's memory. */
  readonly w: Float32Array;
  readonly v: Float32Array;
  readonly G: Float32Array;

  private constructor(private readonly k: Kernels, private readonly pw: number, private readonly pv: number, private readonly pg: number, n: number,
    memory: WebAssembly.Memory) {
    this.w = new Float32Array(memory.buffer, pw, n);
    this.v = new Float32Array(memory.buffer, pv, n);
    this.G = new Float32Array(memory.buffer, pg, n);
  }

  /** For n parameters (zeros). Fails where this runtime has no wasm SIMD or cannot give the memory. */
  static async create(n: number): Promise<WasmHostOptimizer> {
    if (!Number.isInteger(n) || n < 0) throw new OptimError('bad-input', `the optimiser needs a whole number of parameters, got ${n}`);
    const pages = STATIC_PAGES + Math.ceil((3 * n * 4) / PAGE);
    if (pages > MAX_PAGES) throw new OptimError('bad-input', `${n} parameters (three arrays of them) do not fit wasm's 4 GiB`);
    const memory = new WebAssembly.Memory({ initial: pages, maximum: pages });
    const k = await loadKernels(memory, 'single');
    const base = Math.ceil(k.heapBase() / 16) * 16;
    if (base + 3 * n * 4 > pages * PAGE) throw new Error(`the optimiser's memory: static data up to ${base} leaves too little for ${n} parameters`);
    return new WasmHostOptimizer(k, base, base + 4 * n, base + 8 * n, n, memory);
  }

  /** hostOptimizerStep on w and v here, with the gradient sum in G (copied there by the caller). */
  step(cfg: OptimizerConfig, segments: readonly ParamSegment[], t: number, gradScale: number): void {
    hostOptimizerStep(cfg, segments, { w: this.w, v: this.v, G: this.G, t, gradScale }, this.loops());
  }

  /** The sums of squares of w[off, off + len) and of G[off, off + len) times scale: host.ts sumSquares2's bits. */
  norms(off: number, len: number, scale: number): { ww: number; gg: number } {
    this.k.optimNorms(this.pw + off * 4, this.pg + off * 4, len, scale);
    return { ww: this.k.optimSumW(), gg: this.k.optimSumG() };
  }

  /** The loops of hostOptimizerStep on w, v and G here. */
  private loops(): StepLoops {
    const { k, pw, pv, pg } = this;
    return {
      norms: (off, len, scale) => this.norms(off, len, scale),
      update: (off, len, gradScale, beta, rate, m, nesterov) => {
        k.optimUpdate(pw + off * 4, pv + off * 4, pg + off * 4, len, gradScale, beta, rate, m, nesterov ? 1 : 0);
      },
    };
  }
}
