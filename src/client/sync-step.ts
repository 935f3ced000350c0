// The sync step's gradient and its all-reduce, overlapped (issue 13): backward runs in stages
// (src/train/overlap.ts) and each bucket of the gradient (src/nn/buckets.ts) is summed over the
// ring (src/comm/buckets.ts) as soon as it is on the host, while the earlier layers still
// compute. The optimiser then runs once, on the whole summed gradient, as before.
//
// What the peers of a ring must agree on:
//   - the bucket plan: a pure function of the model's layout and the job's `bucketBytes` and `lastBucketBytes`
//     (`overlap: false`: one bucket, i.e. the whole backward, then one all-reduce);
//   - the ring step numbering: EVERY collective of a generation carries bucketStep(step, k),
//     a round's whole-buffer sum as bucket 0 of its first step (roundRingStep), so ring steps
//     keep increasing whether a sync step or a round comes next. The frames' u32 step then
//     bounds a job's steps: lastRingStep.
//
// The slice re-run (volunteer.ts): bucket k's range (this peer's gradient plus the kept sum it
// reuses) is copied after backward produced it and BEFORE its collective sums it in place; the
// copy is handed over (`keep`) once every bucket is on the host, whether the ring formed, failed
// or summed.
import type { Tamper } from '../trust/adversary.ts';
import type { TensorLike } from '../backend/engine.ts';
import type { HopRecord } from '../comm/hop-record.ts';
import { allReduceBuckets, bucketStep, MAX_BUCKETS } from '../comm/buckets.ts';
import { WIRE_FORMATS, type WireFormat } from '../protocol/frames.ts';
import { bucketPlan, DEFAULT_BUCKET_BYTES, DEFAULT_LAST_BUCKET_BYTES, type GradBucket } from '../nn/buckets.ts';
import type { Layout } from '../nn/layout.ts';
import type { Model } from '../nn/model.ts';
import type { GradArrays } from '../train/grad-arrays.ts';
import { overlapTimings, stageGradients, type StagedResult } from '../train/overlap.ts';
import type { StepAssignment } from '../protocol/messages.ts';
import { StateError } from './state.ts';
import type { StepRings } from './step-rings.ts';

/** How far over a peer's own gradient scale a received gradient may go (see rmsBound). */
export const GRADIENT_BOUND = 1000;

/** A sync slice's gradient sum as computed before its all-reduce, and the key it may be reused by. */
export interface KeptSum { step: number; generation: number; ids: number[]; grads: Float32Array; lossSum: number }

/**
 * The kept sum `a` lets this peer add: only when the assignment names it (`reuse`) and it is of
 * the same step and generation and over exactly the first `reuse.count` ids of the slice.
 */
export function usableKept<K extends { step: number; generation: number; ids: readonly number[] }>(
  kept: K | null, a: Pick<StepAssignment, 'step' | 'sampleIds' | 'reuse'>,
): K | null {
  const r = a.reuse;
  if (!kept || !r || kept.step !== a.step || kept.generation !== r.generation || kept.ids.length !== r.count || r.count > a.sampleIds.length) return null;
  for (let i = 0; i < r.count; i++) if (kept.ids[i] !== a.sampleIds[i]) return null;
  return kept;
}

/** The job's settings that cut the buckets (absent: 25 MiB buckets, the last one at most 1 MiB, overlap on). */
export interface BucketSettings { bucketBytes?: number; lastBucketBytes?: number; overlap?: boolean }

/** The job's bucket plan; a StateError that says what to change when it has too many buckets. */
export function syncBuckets(layout: Layout, job: BucketSettings): GradBucket[] {
  // No overlap: one bucket over everything, final once backward is done.
  const bytes = job.overlap === false ? Number.MAX_SAFE_INTEGER : job.bucketBytes ?? DEFAULT_BUCKET_BYTES;
  const plan = bucketPlan(layout, bytes, job.overlap === false ? 0 : job.lastBucketBytes ?? DEFAULT_LAST_BUCKET_BYTES);
  if (plan.length > MAX_BUCKETS) {
    throw new StateError(`the job's bucketBytes ${bytes} cuts this model's gradient into ${plan.length} buckets, `
      + `at most ${MAX_BUCKETS} fit a step: raise bucketBytes in the job file`);
  }
  return plan;
}

/**
 * The job's wire format for every all-reduce (absent: 'f32', a coordinator from before the
 * setting). GET /api/job is not decoded like a message, so an unknown value is refused here:
 * a peer sending another format than its ring would only fail every collective.
 */
export function jobWire(job: { wire?: unknown }): WireFormat {
  if (job.wire === undefined) return 'f32';
  const wire = WIRE_FORMATS.find((w) => w === job.wire);
  if (wire === undefined) {
    throw new StateError(`the job's all-reduce wire format is ${JSON.stringify(job.wire).slice(0, 40)}; `
      + `this volunteer knows ${WIRE_FORMATS.join(', ')}: update it to the coordinator's version`);
  }
  return wire;
}

/**
 * The last training step whose collectives' ring steps fit a frame's u32 step: 2^24 - 1 on a
 * flat ring; 2^23 - 1 on two levels, whose group ring carries two ring steps per collective.
 */
export function lastRingStep(twoLevel: boolean): number {
  return twoLevel ? 2 ** 23 - 1 : 2 ** 24 - 1;
}

/** Throws a StateError when the assignment's step is past lastRingStep of its ring. */
export function checkRingStep(a: Pick<StepAssignment, 'step' | 'topology'>): void {
  const last = lastRingStep(a.topology !== undefined);
  if (!Number.isInteger(a.step) || a.step < 0 || a.step > last) {
    throw new StateError(`step ${a.step + 1} is past the last step (${last + 1}) whose bucketed all-reduce `
      + `a ${a.topology ? 'two-level' : 'flat'} ring can number: give the job at most ${last + 1} steps`);
  }
}

/** A round's whole-buffer sum: numbered as bucket 0 of its first step (see the header). */
export function roundRingStep(step: number): number {
  return bucketStep(step, 0);
}

/** RMS of a sum over `images` images, per image; null when there is none (no images, zero or not finite). */
export function perImageRms(sum: Float32Array, images: number): number | null {
  if (images === 0) return null;
  let sq = 0;
  for (let i = 0; i < sum.length; i++) sq += sum[i]! * sum[i]!;
  const perImage = Math.sqrt(sq / Math.max(1, sum.length)) / images;
  return Number.isFinite(perImage) && perImage > 0 ? perImage : null;
}

/** A running per-image RMS (0.9 old + 0.1 new) with this step's own sum over `images` images folded in. */
export function runningRms(prev: number | null, own: Float32Array, images: number): number | null {
  const perImage = perImageRms(own, images);
  if (perImage === null) return prev;
  return prev === null ? perImage : 0.9 * prev + 0.1 * perImage;
}

/**
 * The largest RMS a received gradient segment may have: GRADIENT_BOUND times the global batch
 * times this peer's running per-image RMS of that bucket (none before it has one). Generous
 * (honest sums of a batch stay far below it, even where the gradient concentrates); it stops
 * huge values, which a broken or hostile peer would otherwise spread into every peer's weights.
 */
export function rmsBound(rms: number | null, globalBatch: number): number {
  return rms === null ? Number.POSITIVE_INFINITY : GRADIENT_BOUND * globalBatch * rms;
}

function addInto(sum: Float32Array, x: Float32Array): void {
  if (sum.length !== x.length) throw new StateError(`a kept gradient sum has ${x.length} floats, the model has ${sum.length}`);
  for (let i = 0; i < sum.length; i++) sum[i] = sum[i]! + x[i]!;
}

/** Bytes this peer sends in one bucketed all-reduce on `ring`. */
export function bucketSentBytes(ring: Pick<StepRings, 'sentBytes'>, buckets: readonly GradBucket[]): number {
  return buckets.reduce((n, b) => n + ring.sentBytes(b.end - b.start), 0);
}

export interface SyncSlice<T extends TensorLike = TensorLike> {
  model: Model<T>;
  /** The batch of the ids computed now (uploadBatch); null: none (an empty slice, or all of it reused). */
  x: T | null;
  /** Dropout masks: the job's seed * 1_000_003 + step, as recordGradients. */
  stepSeed: number;
  labelSmoothing: number;
  buckets: readonly GradBucket[];
  /** The kept sum of an aborted attempt this slice adds (usableKept), or null. */
  reused: { grads: Float32Array; lossSum: number } | null;
  /**
   * Micro-batches of this slice already computed: their gradient sum is on the engine (x is then
   * the last micro-batch, added to it) and `lossSum` is theirs. Absent: x is the whole slice.
   */
  earlier?: { lossSum: number };
  /** An adversarial peer (tests and the trust bench only: src/trust/adversary.ts): what it does to each bucket it sends. */
  tamper?: Tamper;
  /**
   * Where the gradient read back and the kept sum take their host arrays (absent: new ones). The caller gives them
   * back: the kept sum once nothing reads it, the summed gradient of a 'summed' outcome once it is applied and
   * reported; the gradient of any other outcome is left to the collector (a failed collective may still write it).
   */
  arrays?: GradArrays;
}

export interface SyncHooks {
  /** The training step (bucket k runs as ring step bucketStep(step, k)). */
  step: number;
  /** Images of the slice (reused included) and of the step: the gradient bound. */
  images: number;
  globalBatch: number;
  /** This peer's running per-image gradient RMS per bucket (rmsBound): read and updated. */
  gradRms: (number | null)[];
  /** Once every bucket is on the host: the slice's sum (own + reused) before any all-reduce. */
  keep(sum: { grads: Float32Array; lossSum: number }): void;
  /** Called as the first bucket's collective starts (ring of 2 or more). */
  onStart?(ring: StepRings): void;
  /**
   * Error feedback of a lossy wire (the int8 wire, src/protocol/codec.ts): `carry` (what this peer's sends
   * dropped in its last committed step) is added into each bucket just before its collective,
   * after the kept sum was copied (a re-run adds it again, to the kept sum); what this attempt's
   * sends drop is added into `fresh` (zeros), for the caller to carry once the step commits.
   */
  feedback?: { carry: Float32Array | null; fresh: Float32Array };
  /**
   * A verifying job's hop records (src/comm/hop-record.ts), as long as the gradient: what each bucket's collective
   * received and sent, kept where the rings keep them (StepRings.hopsKept).
   */
  hops?: HopRecord;
  /** Idles after the compute (the volunteer's throttle) given its compute time; runs beside the all-reduce. */
  throttle(computeMs: number): Promise<void>;
}

/** Where a sync step's time went (ms), from the start of its compute. */
export interface SyncTimings {
  /** Forward + backward + readback, plus the throttle's idling. */
  computeMs: number;
  /** From the first frame to the end of the all-reduce (0 without one). */
  commMs: number;
  /** Inside the all-reduce before the first frame came (a neighbour still computing). */
  waitMs: number;
  /** The all-reduce after the last bucket was on the host: the communication not hidden. */
  exposedCommMs: number;
  /** The rest: host work between stages, yields. */
  overheadMs: number;
}

export type SyncOutcome =
  /** The ring never formed (superseded, or its failure was reported): the kept sum is all that is left. */
  | { kind: 'no-ring' }
  /** The all-reduce failed (a RingError, for the caller to report); the kept sum is whole. */
  | { kind: 'failed'; error: unknown }
  | { kind: 'summed'; ring: StepRings; grads: Float32Array; lossSum: number; sentBytes: number; timings: SyncTimings };

/**
 * One sync step's gradient, summed over the ring as backward runs: starts the staged backward
 * of `s.x`, then, once `rings` formed, sums bucket k over it as soon as bucket k is on the host.
 * A compute failure rejects; a ring failure is an outcome. Resolves only once every bucket is on
 * the host and `keep` has been called (so the kept sum is whole before the caller reports).
 */
export async function syncGradients<T extends TensorLike>(s: SyncSlice<T>, rings: Promise<StepRings | null>, h: SyncHooks): Promise<SyncOutcome> {
  if (s.reused && s.reused.grads.length !== s.model.layout.paramFloats) {
    throw new StateError(`a kept gradient sum has ${s.reused.grads.length} floats, the model has ${s.model.layout.paramFloats}`);
  }
  const t0 = performance.now();
  const staged = stageGradients(s.model, s.x, {
    stepSeed: s.stepSeed, labelSmoothing: s.labelSmoothing, buckets: s.buckets, accumulate: s.earlier !== undefined,
    ...(s.arrays ? { into: s.arrays.take() } : {}),
  });
  const priorLoss = (s.reused?.lossSum ?? 0) + (s.earlier?.lossSum ?? 0);
  // Every bucket's range is copied in below: old values in a reused array are all overwritten.
  const kept = s.arrays ? s.arrays.take() : new Float32Array(staged.grads.length);
  // Bucket k once backward produced it: add the reused sum, copy it before its collective.
  const prepared = s.buckets.map((b, k) => staged.ready(k).then(() => {
    const own = staged.grads.subarray(b.start, b.end);
    // A consistent cheater tampers with what it computes now (a kept sum it adds was tampered with when it was computed).
    if (s.tamper?.consistent) s.tamper.apply(own, b.start);
    if (s.reused) addInto(own, s.reused.grads.subarray(b.start, b.end));
    kept.set(own, b.start);
    if (s.tamper && !s.tamper.consistent) s.tamper.apply(own, b.start);
  }));
  const whole = Promise.all([staged.done, ...prepared]).then(([r]): StagedResult => {
    h.keep({ grads: kept, lossSum: r.lossSum + priorLoss });
    return r;
  });
  const idled = whole.then(async (r) => {
    const at = performance.now();
    await h.throttle(r.computeMs);
    return performance.now() - at;
  });
  // Awaited below; these only keep a compute failure from counting as unhandled meanwhile.
  for (const p of [...prepared, whole, idled]) p.catch(() => undefined);

  const ring = await rings;
  if (!ring) {
    await idled;
    return { kind: 'no-ring' };
  }
  const at: { started: number | null; firstFrame: number | null } = { started: null, firstFrame: null };
  if (ring.size > 1) {
    try {
      await allReduceBuckets(staged.grads, s.buckets, (k) => prepared[k]!, {
        step: h.step,
        collective: (part, ringStep, onFirstFrame) => {
          const k = ringStep - bucketStep(h.step, 0);
          if (k === 0) {
            at.started = performance.now();
            h.onStart?.(ring);
          }
          // The bound from this peer's own part of the bucket (and reused sum), before the sum.
          h.gradRms[k] = runningRms(h.gradRms[k] ?? null, part, h.images);
          const fb = h.feedback;
          const b = s.buckets[k]!;
          if (fb?.carry) addInto(part, fb.carry.subarray(b.start, b.end));
          const feedback = fb ? { feedback: fb.fresh.subarray(b.start, b.end) } : {};
          const hops = h.hops && ring.hopsKept ? { hops: h.hops.view(b.start, b.end) } : {};
          return ring.allReduce(part, { step: ringStep, maxRms: rmsBound(h.gradRms[k] ?? null, h.globalBatch), onFirstFrame, ...feedback, ...hops });
        },
        onFirstFrame: () => { at.firstFrame = performance.now(); },
      });
    } catch (e) {
      // The kept sum must be whole before the failure is reported (the re-run adds it).
      await idled;
      return { kind: 'failed', error: e };
    }
  }
  const reducedAt = ring.size > 1 ? performance.now() : null;
  const r = await whole;
  // Alone, nothing goes on a wire: what the last step dropped is added straight in.
  if (ring.size <= 1 && h.feedback?.carry) addInto(staged.grads, h.feedback.carry);
  const commEnd = reducedAt ?? performance.now();
  const idleMs = await idled;
  const ov = overlapTimings(t0, r, commEnd);
  const first = at.firstFrame ?? at.started ?? commEnd;
  const timings: SyncTimings = {
    computeMs: ov.computeMs + idleMs,
    commMs: Math.max(0, commEnd - first),
    waitMs: Math.max(0, first - (at.started ?? first)),
    exposedCommMs: ov.exposedCommMs,
    overheadMs: ov.overheadMs,
  };
  return { kind: 'summed', ring, grads: staged.grads, lossSum: r.lossSum + priorLoss, sentBytes: bucketSentBytes(ring, s.buckets), timings };
}
