// The threaded wasm engine's pool: threads-1 workers (src/wasm/thread-worker.mjs; Node
// worker_threads or Web Workers) that instantiate the threaded kernels on the engine's SHARED
// memory. An op is split into parts (src/wasm/ops-linalg.ts): each part is a list of kernel
// calls recorded as f64 commands of CMD_WORDS words, [kernel index, argc, args padded with
// zeros to CMD_ARGS] (index -1: a barrier of all parts). The fixed width lets both sides call a
// kernel with CMD_ARGS plain arguments (a wasm export ignores those past its own; before, a call with
// its arguments spread from an array cost about 1 us, a seventh of a small group's work on the
// worker). Part 0 runs here, part t on worker t-1: its commands are copied into the shared
// memory and announced in the worker's mailbox (Atomics.store + notify); the calling thread
// then waits (Atomics.wait) until every worker reports the job done. Nothing is posted per job.
import { VtError } from '../errors.ts';
import type { Heap } from './heap.ts';
import { isNode, type Kernels, KERNEL_NAMES } from './kernels.ts';

// Mailbox words (thread-worker.mjs has the same).
const SEQ = 0, DONE = 1, CMD = 2, LEN = 3, ERR = 4, PARTS = 5;
const COUNT = 0, GEN = 1;
const SPIN = 4000;
/** Arguments a command has room for: the most any kernel takes (wgInput's and wg4Input's 16). */
export const CMD_ARGS = 16;
/** Words of one command: the kernel index, the argument count, CMD_ARGS arguments. */
export const CMD_WORDS = 2 + CMD_ARGS;
/** How long the calling thread waits for a worker's part before it declares the worker dead. */
const STALL_MS = 300_000;
const LINE = 64;
const READY_MS = 60_000;

/** Why this thread cannot run a threaded engine, or null when it can. */
export function threadsUnavailable(): string | null {
  if (typeof SharedArrayBuffer === 'undefined') {
    return 'threads need SharedArrayBuffer, which this page does not have: it must be cross-origin isolated '
      + '(served with Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp)';
  }
  try {
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 1, 0);
  } catch {
    return 'threads need Atomics.wait, which this thread (a page\'s main thread) does not allow: create the engine in a Web Worker';
  }
  return null;
}

type KernelFn = (...a: number[]) => unknown;

/** One part's commands, recorded into a typed array that is kept and reused from op to op. */
export class CommandList {
  private words = new Float64Array(CMD_WORDS * 64);
  private length = 0;

  /** Empties the list for the next op. */
  reset(): void {
    this.length = 0;
  }

  /** Appends a call of kernel `index` (its index in KERNEL_NAMES) with `args`. */
  add(index: number, args: readonly number[]): void {
    if (args.length > CMD_ARGS) throw new Error(`CommandList: ${KERNEL_NAMES[index]} takes ${args.length} arguments, a command has room for ${CMD_ARGS}`);
    this.room(CMD_WORDS);
    const w = this.words, p = this.length;
    w[p] = index;
    w[p + 1] = args.length;
    for (let a = 0; a < CMD_ARGS; a++) w[p + 2 + a] = a < args.length ? args[a]! : 0;
    this.length = p + CMD_WORDS;
  }

  /** Appends a barrier of all the op's parts. */
  barrier(): void {
    this.add(-1, []);
  }

  /** Appends another list's commands (whole commands: `words` is a multiple of CMD_WORDS long). */
  append(words: Float64Array): void {
    this.room(words.length);
    this.words.set(words, this.length);
    this.length += words.length;
  }

  /** Grows the buffer (doubling, the commands kept) until `more` words fit after the recorded ones. */
  private room(more: number): void {
    let size = this.words.length;
    while (this.length + more > size) size *= 2;
    if (size === this.words.length) return;
    const grown = new Float64Array(size);
    grown.set(this.words.subarray(0, this.length));
    this.words = grown;
  }

  /** The commands recorded since the last reset (a view, valid until the next add). */
  get commands(): Float64Array {
    return this.words.subarray(0, this.length);
  }
}

/** Calls command `p`'s kernel with its arguments as plain ones (the padding zeros are ignored). */
function call(fn: KernelFn, c: Float64Array, p: number): unknown {
  const a = p + 2;
  return fn(c[a]!, c[a + 1]!, c[a + 2]!, c[a + 3]!, c[a + 4]!, c[a + 5]!, c[a + 6]!, c[a + 7]!,
    c[a + 8]!, c[a + 9]!, c[a + 10]!, c[a + 11]!, c[a + 12]!, c[a + 13]!, c[a + 14]!, c[a + 15]!);
}

/** One barrier of `parts` threads on the control words at index `ctl` (thread-worker.mjs has the same). */
function barrier(i32: Int32Array, ctl: number, parts: number): void {
  const g = Atomics.load(i32, ctl + GEN);
  if (Atomics.add(i32, ctl + COUNT, 1) === parts - 1) {
    Atomics.store(i32, ctl + COUNT, 0);
    Atomics.add(i32, ctl + GEN, 1);
    Atomics.notify(i32, ctl + GEN);
    return;
  }
  for (let s = 0; s < SPIN; s++) if (Atomics.load(i32, ctl + GEN) !== g) return;
  while (Atomics.load(i32, ctl + GEN) === g) Atomics.wait(i32, ctl + GEN, g);
}

interface Thread {
  post(m: unknown): void;
  terminate(): void;
}

type Listener = (m: { type?: unknown; message?: unknown }) => void;

async function spawn(onMessage: Listener): Promise<Thread> {
  if (isNode()) {
    const name = 'node:worker_threads';
    const wt = (await import(/* @vite-ignore */ name)) as typeof import('node:worker_threads');
    const file = './thread-worker.mjs';
    // execArgv []: the worker is plain JavaScript; no TypeScript loader needed in it.
    const w = new wt.Worker(new URL(file, import.meta.url), { execArgv: [] });
    w.on('message', (m: { type?: unknown; message?: unknown }) => onMessage(m));
    w.on('error', (e: Error) => onMessage({ type: 'error', message: e.message }));
    return { post: (m) => w.postMessage(m), terminate: () => void w.terminate() };
  }
  const w = new Worker(new URL('./thread-worker.mjs', import.meta.url), { type: 'module' });
  w.addEventListener('message', (e: MessageEvent<{ type?: unknown; message?: unknown }>) => onMessage(e.data));
  w.addEventListener('error', (e: ErrorEvent) => onMessage({ type: 'error', message: e.message || 'the thread script failed to load' }));
  return { post: (m) => w.postMessage(m), terminate: () => w.terminate() };
}

export class ThreadPool {
  private seq = 0;
  private lastError = '';
  private readonly cmd: { ptr: number; bytes: number }[] = [];
  private closed = false;
  /** This thread's kernels by KERNEL_NAMES index, as commands name them. */
  private readonly fns: KernelFn[];

  private constructor(
    private readonly heap: Heap,
    k: Kernels,
    private readonly threads: Thread[],
    private readonly boxes: number[],
    private readonly ctl: number,
  ) {
    this.fns = KERNEL_NAMES.map((n) => k[n] as KernelFn);
  }

  /** Starts `extra` workers on the heap's shared memory; `k` is this thread's instance of `module`. */
  static async start(extra: number, module: WebAssembly.Module, heap: Heap, k: Kernels): Promise<ThreadPool> {
    const ctl = heap.alloc(LINE, 'thread barrier');
    const boxes: number[] = [];
    for (let i = 0; i < extra; i++) boxes.push(heap.alloc(LINE, `thread ${i + 1} mailbox`));
    heap.u8.fill(0, ctl, ctl + LINE);
    for (const b of boxes) heap.u8.fill(0, b, b + LINE);
    const threads: Thread[] = [];
    let pool: ThreadPool | null = null;
    try {
      const ready = boxes.map(async (box, i) => {
        let settle: { ok: () => void; fail: (e: Error) => void } | null = null;
        const done = new Promise<void>((ok, fail) => { settle = { ok, fail }; });
        const t = await spawn((m) => {
          const s = settle;
          if (m.type === 'ready' && s) { settle = null; s.ok(); return; }
          if (m.type !== 'error') return;
          const msg = `wasm thread ${i + 1}: ${String(m.message)}`;
          if (s) { settle = null; s.fail(new VtError('bad-shape', msg)); } else if (pool) pool.lastError = msg;
        });
        threads.push(t);
        t.post({ module, memory: heap.memory, names: KERNEL_NAMES, mailbox: box, ctl });
        let timer: ReturnType<typeof setTimeout> | undefined;
        const late = new Promise<never>((_, fail) => {
          timer = setTimeout(() => fail(new VtError('bad-shape', `wasm thread ${i + 1} did not start within ${READY_MS / 1000} s`)), READY_MS);
        });
        try {
          await Promise.race([done, late]);
        } finally {
          clearTimeout(timer);
        }
      });
      await Promise.all(ready);
    } catch (e) {
      for (const t of threads) t.terminate();
      throw e;
    }
    pool = new ThreadPool(heap, k, threads, boxes, ctl);
    return pool;
  }

  /** Threads in the pool, this one included. */
  get size(): number {
    return this.threads.length + 1;
  }

  /** Runs parts[0] here and parts[t] on worker t-1 (at most size parts); returns when all are done. */
  run(parts: readonly Float64Array[]): void {
    if (this.closed) throw new VtError('bad-shape', 'the wasm threads were stopped (engine destroyed)');
    const P = parts.length;
    if (P > this.size) throw new Error(`ThreadPool.run: ${P} parts for ${this.size} threads`);
    // Command buffers first (allocation may grow the memory), then the views.
    for (let t = 1; t < P; t++) this.reserve(t - 1, parts[t]!.length * 8);
    const buf = this.heap.memory.buffer;
    const i32 = new Int32Array(buf);
    this.seq = this.seq >= 0x3fffffff ? 1 : this.seq + 1;
    for (let t = 1; t < P; t++) {
      const c = this.cmd[t - 1]!, box = this.boxes[t - 1]! >> 2, list = parts[t]!;
      new Float64Array(buf, c.ptr, list.length).set(list);
      i32[box + CMD] = c.ptr;
      i32[box + LEN] = list.length;
      i32[box + PARTS] = P;
      i32[box + ERR] = 0;
      Atomics.store(i32, box + SEQ, this.seq);
      Atomics.notify(i32, box + SEQ);
    }
    let failure: unknown = null;
    try {
      this.interpret(parts[0]!, P);
    } catch (e) {
      failure = e;
    }
    const errs: number[] = [];
    for (let t = 1; t < P; t++) {
      const box = this.boxes[t - 1]! >> 2;
      let d = Atomics.load(i32, box + DONE);
      for (let s = 0; s < SPIN && d !== this.seq; s++) d = Atomics.load(i32, box + DONE);
      const since = performance.now();
      while (d !== this.seq) {
        Atomics.wait(i32, box + DONE, d, 1000);
        d = Atomics.load(i32, box + DONE);
        // A worker that died (not a kernel error: those are reported) never answers, and this
        // thread's event loop is blocked here, so it cannot hear the exit: give up after a bound.
        if (d !== this.seq && performance.now() - since > STALL_MS) {
          this.destroy();
          throw new VtError('bad-shape', `wasm thread ${t} did not finish its part in ${STALL_MS / 1000} s (it crashed or hangs); `
            + 'the engine is closed, create a new one');
        }
      }
      if (Atomics.load(i32, box + ERR) !== 0) errs.push(t);
    }
    if (failure) throw failure;
    if (errs.length) throw new VtError('bad-shape', `wasm thread(s) ${errs.join(', ')} failed in a kernel${this.lastError ? ` (${this.lastError})` : ''}`);
  }

  /** Tells every worker to quit and terminates it; the pool refuses work afterwards. */
  destroy(): void {
    if (this.closed) return;
    this.closed = true;
    const i32 = new Int32Array(this.heap.memory.buffer);
    for (const b of this.boxes) {
      Atomics.store(i32, (b >> 2) + SEQ, -1);
      Atomics.notify(i32, (b >> 2) + SEQ);
    }
    for (const t of this.threads) t.terminate();
  }

  private reserve(i: number, bytes: number): void {
    const c = this.cmd[i];
    if (c && c.bytes >= bytes) return;
    if (c) this.heap.release(c.ptr);
    const size = Math.max(bytes, 4096, c ? c.bytes * 2 : 0);
    this.cmd[i] = { ptr: this.heap.alloc(size, `thread ${i + 1} commands`), bytes: size };
  }

  /** This thread's part: the same protocol as thread-worker.mjs (barriers kept after a failure). */
  private interpret(list: Float64Array, parts: number): void {
    const fns = this.fns;
    const ctl = this.ctl >> 2;
    let failure: unknown = null;
    for (let p = 0; p < list.length; p += CMD_WORDS) {
      const f = list[p]!;
      if (f < 0) barrier(new Int32Array(this.heap.memory.buffer), ctl, parts);
      else if (!failure) {
        try {
          call(fns[f]!, list, p);
        } catch (e) {
          failure = e;
        }
      }
    }
    if (failure) throw failure;
  }
}
