// What fits the device: how many images one forward + backward may take at once on an engine,
// so a peer computes a slice of any size as a sequence of micro-batches (their gradients summed
// on the engine). The footprint per image is MEASURED on the engine, not estimated: a probe
// model of the same spec runs forward + loss + backward at two batch sizes, and the difference
// of the engine's peak memory (src/backend/engine.ts memory()) per image is the cost of one more
// image (activations, their gradients, scratch, the batch itself). It is kept per model, input,
// backend and device for the life of the process (a rejoin does not probe again). The larger
// pass is also timed: the peer's own prediction of its first step's work, which the coordinator
// allows it before any step has measured it (coordinator/silence.ts: an engine whose compute
// blocks the event loop, wasm or a software GPU, sends no heartbeat while it computes).
//
// The budget: what the engine can hold (wasm: its memory's maximum, 4 GiB; WebGPU: the device
// does not say, so DEFAULT_GPU_BUDGET or the volunteer's --memory) less what it holds now (the
// model, the optimiser's backups) and a reserve; every single tensor within the device's
// largest buffer. With ghost batch norm (Model.bnGroup) a micro-batch is whole BN groups.
import type { Engine, EngineMemory, TensorLike } from '../backend/engine.ts';
import { VtError } from '../errors.ts';
import type { ModelSpec } from './graph.ts';
import type { Layout, LayoutOptions } from './layout.ts';
import { Model } from './model.ts';

/**
 * Images the probe runs at, then twice that. One and two measure the same bytes per image as two and
 * four on ResNet-50 at 64x64 (both engines, to the byte) in 60% of the time: 25 s instead of 41 s
 * before a WebGPU volunteer on llvmpipe joins.
 */
export const PROBE_IMAGES = 1;
/** What a WebGPU device is assumed to give one tab when nobody says more (browsers hide the GPU's memory). */
export const DEFAULT_GPU_BUDGET = 2 * 2 ** 30;
/** Kept free of the budget: allocator rounding and fragmentation, the host's own needs. */
export const RESERVE_SHARE = 0.1;
/** Every measured byte per image is taken as this many (allocator size classes, a realloc while the old block is live). */
export const FOOTPRINT_MARGIN = 1.15;

export interface Footprint {
  /** Engine bytes one more image of a batch costs (measured). */
  perImageBytes: number;
  /** The largest single tensor per image (from the layout): bounds a micro-batch by the device's largest buffer. */
  largestPerImageBytes: number;
  /** Wall time of the larger probe pass (forward, loss, backward, read back) per image, in ms: fixed costs included, so an upper bound. */
  msPerImage: number;
}

export interface FitLimits {
  /** The engine's budget in bytes (absent: the engine's limit, or DEFAULT_GPU_BUDGET where it has none). */
  memoryBytes?: number;
  /** The most images at once whatever the memory (the volunteer's --micro-batch). */
  maxImages?: number;
}

/** A device's micro-batch for a model: at most `images` at once, a multiple of `group`. */
export interface MicroFit {
  images: number;
  /** Images per BN group (1: none): micro-batches are whole groups. */
  group: number;
  footprint: Footprint;
  /** Bytes free for a batch when it was sized. */
  freeBytes: number;
  /** What bounds `images`: 'memory', 'buffer' (the largest tensor) or 'limit' (maxImages). */
  bound: 'memory' | 'buffer' | 'limit';
}

const measured = new Map<string, Footprint>();

/** The footprint of `spec` on `engine`: measured once per model, input, backend and device in this process. */
export async function footprintOf<T extends TensorLike>(engine: Engine<T>, spec: ModelSpec, layout?: LayoutOptions): Promise<Footprint> {
  const key = JSON.stringify([spec.name, spec.input, spec.classes, engine.info.backend, engine.info.description, layout ?? null]);
  const known = measured.get(key);
  if (known) return known;
  const f = await measureFootprint(engine, spec, layout);
  measured.set(key, f);
  return f;
}

/** Bytes per image the layout itself implies: every node's activation and its gradient (float32); a measured footprint is never less. */
export function layoutFloorBytes(layout: Pick<Layout, 'shapes'>): number {
  return layout.shapes.reduce((n, s) => n + 2 * 4 * s.reduce((a, b) => a * b, 1), 0);
}

/** Runs forward + loss + backward of a probe model at PROBE_IMAGES and twice that; the peak's growth per image. */
export async function measureFootprint<T extends TensorLike>(engine: Engine<T>, spec: ModelSpec, layout?: LayoutOptions): Promise<Footprint> {
  const probe = new Model(engine, spec, { seed: 1, ...(layout ? { layout } : {}) });
  try {
    const peakAt = async (n: number): Promise<{ peak: number; ms: number }> => {
      engine.resetPeak();
      const t0 = performance.now();
      const x = engine.zeros([n, ...spec.input], 'f32', 'probe.x');
      try {
        engine.write(probe.labelsTensor(n), new Int32Array(n));
        probe.forward(x, { train: true, seed: 1 });
        const total = probe.loss(1);
        probe.backward();
        engine.flush();
        await engine.readF32(total);
        return { peak: engine.memory().peakBytes, ms: performance.now() - t0 };
      } finally {
        engine.release(x);
        probe.releaseActivations();
      }
    };
    const small = await peakAt(PROBE_IMAGES);
    const large = await peakAt(2 * PROBE_IMAGES);
    const largest = Math.max(...probe.layout.shapes.map((s) => s.reduce((a, b) => a * b, 1))) * 4;
    // Never less than the activations and gradients the layout itself implies per image.
    return {
      perImageBytes: Math.max(layoutFloorBytes(probe.layout), (large.peak - small.peak) / PROBE_IMAGES), largestPerImageBytes: largest,
      msPerImage: large.ms / (2 * PROBE_IMAGES),
    };
  } finally {
    probe.destroy();
  }
}

/** The micro-batch that fits `memory` now (pure: the footprint and the engine's figures in, a size out). */
export function fitMicroBatch(f: Footprint, memory: EngineMemory, group: number, limits: FitLimits = {}): MicroFit {
  const budget = limits.memoryBytes ?? memory.limitBytes ?? DEFAULT_GPU_BUDGET;
  const freeBytes = Math.max(0, budget * (1 - RESERVE_SHARE) - memory.usedBytes);
  const byMemory = Math.floor(freeBytes / (f.perImageBytes * FOOTPRINT_MARGIN));
  const byBuffer = Math.floor(memory.maxTensorBytes / f.largestPerImageBytes);
  const byLimit = limits.maxImages ?? Number.POSITIVE_INFINITY;
  const most = Math.min(byMemory, byBuffer, byLimit);
  const bound = most === byLimit ? 'limit' : most === byBuffer ? 'buffer' : 'memory';
  const images = Math.floor(most / group) * group;
  if (images < Math.max(1, group)) {
    const mib = (b: number) => `${Math.round(b / 2 ** 20)} MiB`;
    const what = group > 1 ? `one BN group of ${group} images` : 'one image';
    const need = Math.max(1, group) * f.perImageBytes * FOOTPRINT_MARGIN;
    const why = bound === 'limit' ? `the micro-batch limit is ${byLimit} images: raise it to at least ${group}`
      : bound === 'buffer'
        ? `a single tensor of it needs ${mib(Math.max(1, group) * f.largestPerImageBytes)}, more than this device's largest buffer`
          + ` (${mib(memory.maxTensorBytes)})`
        : `it needs about ${mib(need)} and ${mib(freeBytes)} are free of the ${mib(budget)} budget (${mib(memory.usedBytes)} hold the model)`;
    const more = `${group > 1 ? ', or a job with a smaller bnGroup' : ''}${limits.memoryBytes !== undefined ? ', or give it a larger --memory-mb' : ''}`;
    throw new VtError('too-large', `${what} does not fit this device: ${why}. Use a device with more memory${more}.`);
  }
  return { images, group, footprint: f, freeBytes, bound };
}

/**
 * Cuts `ids` (whole groups of `fit.group`) into micro-batches of at most `fit.images`, as even as
 * whole groups allow (so at most two sizes, and the activations are reallocated at most twice a step).
 */
export function microBatches(ids: readonly number[], fit: Pick<MicroFit, 'images' | 'group'>): number[][] {
  const g = Math.max(1, fit.group);
  if (ids.length % g !== 0) {
    const what = `a slice of ${ids.length} images is not whole BN groups of ${g}`;
    throw new VtError('bad-shape', `${what}: the coordinator cuts slices in whole groups (update the coordinator)`);
  }
  if (ids.length === 0) return [];
  const groups = ids.length / g;
  const parts = Math.ceil(ids.length / fit.images);
  const out: number[][] = [];
  for (let k = 0, at = 0; k < parts; k++) {
    const n = (Math.floor((groups * (k + 1)) / parts) - Math.floor((groups * k) / parts)) * g;
    out.push(ids.slice(at, at + n));
    at += n;
  }
  return out;
}
