// Backward in stages, each bucket of the gradient read back as soon as it is final, so the
// bucketed all-reduce (src/comm/buckets.ts) sums the layers nearest the output while the
// earlier layers still compute. Stage k runs backward down to bucket k's node
// (src/nn/buckets.ts), then:
//   - WebGPU: flush() submits the stage and bucket k's range is read back asynchronously
//     (mapAsync resolves once the stage ran), while stage k+1 is already being recorded;
//   - wasm (ops run at once, on this thread): the range is copied out, then this thread
//     yields one macrotask, so the ring's frames (link callbacks) are handled between stages;
//     within a stage it also yields between nodes every YIELD_MS, so a ring hop (a frame in,
//     the next one out) waits for one node's backward rather than a whole stage's.
// The ops and their order are those of recordGradients (step.ts): the gradient is bitwise the
// same as the single-pass one, however the stages are cut.
import type { TensorLike } from '../backend/engine.ts';
import { check } from '../errors.ts';
import type { GradBucket } from '../nn/buckets.ts';
import type { Model } from '../nn/model.ts';

export interface StagedResult {
  /** The summed loss of the slice (0 for an empty slice). */
  lossSum: number;
  /** From the start to the last bucket on the host, less the time this thread spent on other work between stages (wasm). */
  computeMs: number;
  /** performance.now() when the last bucket reached the host. */
  endAt: number;
}

export interface StagedGradients {
  /** The host copy of this slice's flat gradient SUM, filled bucket by bucket. */
  readonly grads: Float32Array;
  /** Resolves once bucket k's range of `grads` holds its final value; rejects if the compute failed. */
  ready(bucket: number): Promise<void>;
  /** Resolves when every bucket is on the host. */
  readonly done: Promise<StagedResult>;
}

export interface StageOptions {
  /** The step's seed (dropout masks), as for recordGradients. */
  stepSeed: number;
  labelSmoothing?: number;
  /** The bucket plan (bucketPlan(model.layout, bytes)): stage k ends when bucket k is final. */
  buckets: readonly GradBucket[];
  /**
   * Add to the gradient the model holds (earlier micro-batches of the slice) instead of zeroing
   * it first. With no batch: nothing is computed, the buckets of the gradient held are read back.
   */
  accumulate?: boolean;
  /**
   * The host array to fill (GradArrays.take: old values allowed, every element is overwritten; the buckets must
   * cover the gradient without gaps). Absent: a new array.
   */
  into?: Float32Array;
}

/** On engines that compute on this thread (wasm): the longest stretch of backward between two yields. */
export const YIELD_MS = 2;

/** Resolves after one macrotask: other tasks (network callbacks) run first. */
export function nextMacrotask(): Promise<void> {
  const g = globalThis as { setImmediate?: (cb: () => void) => unknown };
  const immediate = g.setImmediate;
  if (typeof immediate === 'function') return new Promise((res) => { immediate(res); });
  // Browsers: a message task is not clamped the way nested setTimeout(0) is (4 ms).
  return new Promise((res) => {
    const ch = new MessageChannel();
    ch.port1.onmessage = () => {
      ch.port1.close();
      res();
    };
    ch.port2.postMessage(null);
  });
}

interface Deferred { promise: Promise<void>; resolve: () => void; reject: (e: unknown) => void }

function deferred(): Deferred {
  let resolve!: () => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<void>((res, rej) => { resolve = res; reject = rej; });
  // Consumers may subscribe late (or never, once the all-reduce failed): not an unhandled rejection.
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}

/**
 * Starts forward + loss + staged backward of the batch `x` (uploaded with uploadBatch; null:
 * an empty slice, whose gradient is zero). Zeroes the model's gradient first (unless
 * `accumulate`: then the sum includes what earlier micro-batches left there, and with no batch it
 * is what they left there). Returns at once;
 * the compute proceeds stage by stage, yielding to the event loop between stages.
 */
export function stageGradients<T extends TensorLike>(model: Model<T>, x: T | null, o: StageOptions): StagedGradients {
  const n = model.layout.paramFloats;
  if (o.into) checkInto(o.into, n, o.buckets);
  const grads = o.into ?? new Float32Array(n);
  const stages = o.buckets.map(() => deferred());
  const done = runStages(model, x, o, grads, stages);
  done.catch((e: unknown) => { for (const s of stages) s.reject(e); });
  return {
    grads,
    ready: (k) => {
      const s = stages[k];
      if (!s) return Promise.reject(new RangeError(`bucket ${k} is not in the plan of ${stages.length} buckets`));
      return s.promise;
    },
    done,
  };
}

/** A reused array is wholly overwritten only when it is the gradient's length and the buckets cover it end to end. */
function checkInto(into: Float32Array, n: number, buckets: readonly GradBucket[]): void {
  check(into.length === n, 'stageGradients', () => `the array to fill has ${into.length} floats, the gradient ${n}`);
  let at = 0;
  for (const b of [...buckets].sort((a, c) => a.start - c.start)) {
    check(b.start === at && b.end >= b.start, 'stageGradients', () => `bucket ${b.index} spans [${b.start}, ${b.end}), expected one from ${at}`);
    at = b.end;
  }
  check(at === n, 'stageGradients', () => `the buckets end at ${at} of the gradient's ${n} floats: a reused array would keep old values past it`);
}

async function runStages<T extends TensorLike>(model: Model<T>, x: T | null, o: StageOptions, grads: Float32Array, stages: Deferred[]): Promise<StagedResult> {
  const e = model.engine;
  const onThread = e.info.backend === 'wasm';
  const t0 = performance.now();
  let away = 0;
  let endAt = t0;
  if (!o.accumulate) model.zeroGrads();
  if (!x && o.accumulate) {
    // The gradient of earlier micro-batches, as it is: each bucket read back in the plan's order.
    e.flush();
    await Promise.all(o.buckets.map(({ start, end }, k) => e.readF32Into(e.view(model.grads, start, [end - start]), grads, start).then(() => {
      stages[k]!.resolve();
    })));
    endAt = performance.now();
    return { lossSum: 0, computeMs: endAt - t0, endAt };
  }
  if (!x) {
    if (o.into) grads.fill(0); // a new array is zeros already
    for (const s of stages) s.resolve();
    return { lossSum: 0, computeMs: 0, endAt };
  }
  model.forward(x, { train: true, seed: o.stepSeed });
  const total = model.loss(1, o.labelSmoothing ?? 0);
  const pass = model.beginBackward();
  const reads: Promise<void>[] = [];
  let left = performance.now();
  const pause = async (): Promise<void> => {
    const at = performance.now();
    await nextMacrotask();
    left = performance.now();
    if (onThread) away += left - at;
  };
  for (let k = 0; k < o.buckets.length; k++) {
    const { start, end, node } = o.buckets[k]!;
    if (onThread) {
      // Compute blocks this thread: let frames in every YIELD_MS within a stage too, so a ring
      // hop waits for one node's backward, not for a whole bucket's.
      while (pass.next >= node) {
        pass.runTo(pass.next);
        e.flush(); // a threaded wasm engine queues ops: run the node's now, so the clock below sees them
        if (performance.now() - left >= YIELD_MS && pass.next >= node) await pause();
      }
    } else {
      pass.runTo(node);
    }
    e.flush();
    const stage = stages[k]!;
    const read = e.readF32Into(e.view(model.grads, start, [end - start]), grads, start).then(() => {
      endAt = performance.now();
      stage.resolve();
    });
    read.catch((err: unknown) => stage.reject(err));
    reads.push(read);
    await pause();
  }
  pass.runTo(1); // nodes below the lowest bucket's (no parameters): the pass ends as backward() does
  const lossSum = (await e.readF32(total))[0]!;
  await Promise.all(reads);
  return { lossSum, computeMs: Math.max(0, endAt - t0 - away), endAt };
}

/** Where one overlapped step's time went (ms). */
export interface OverlapTimings {
  /** Forward + backward + readback (stageGradients' computeMs). */
  computeMs: number;
  /** From the last bucket on the host to the end of the all-reduce: the communication not hidden. */
  exposedCommMs: number;
  /** The rest of the step: work between stages on this thread (frames, host work), yields. */
  overheadMs: number;
  stepMs: number;
}

/** The split of a step that started at `t0` and whose all-reduce ended at `commEnd`. */
export function overlapTimings(t0: number, staged: StagedResult, commEnd: number): OverlapTimings {
  const stepMs = Math.max(0, commEnd - t0);
  const exposedCommMs = Math.max(0, commEnd - staged.endAt);
  const computeMs = Math.min(staged.computeMs, stepMs - exposedCommMs);
  return { computeMs, exposedCommMs, overheadMs: Math.max(0, stepMs - computeMs - exposedCommMs), stepMs };
}
